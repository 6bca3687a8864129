package enterprise

import (
	"crypto"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/extauth/extauth/extauthtest/oidcop"
)

// Auth0User is an account of the fake Auth0 tenant.
type Auth0User struct {
	// ID is the user ID (auth0|…, google-oauth2|…), the sub of its tokens.
	ID            string
	Name          string
	Nickname      string
	GivenName     string
	FamilyName    string
	Picture       string
	Email         string
	EmailVerified bool
	// Roles are sent under Auth0Config.RolesClaim, as an Action adds them.
	Roles []string
}

// Auth0Config sets the fake Auth0 tenant up.
type Auth0Config struct {
	// URL is where the tenant is served: its domain
	// (https://<tenant>.us.auth0.com) or a custom domain.
	URL string
	// TokenIssuer is the iss of the tokens when not URL + "/": the
	// tenant's other domain, as tokens obtained through it carry.
	TokenIssuer string
	// ClientID and ClientSecret are the application's.
	ClientID     string
	ClientSecret string
	// RedirectURIs are its Allowed Callback URLs, AllowedLogoutURLs its
	// Allowed Logout URLs (compared without their query, as Auth0 does).
	RedirectURIs      []string
	AllowedLogoutURLs []string
	// EndSessionDiscovery is the tenant setting "RP-Initiated Logout End
	// Session Endpoint Discovery": discovery names /oidc/logout. Without
	// it, logout is /v2/logout only.
	EndSessionDiscovery bool
	// RolesClaim is the namespaced claim an Action puts the roles in
	// (https://example.com/roles); none when empty.
	RolesClaim  string
	Users       []Auth0User
	AutoApprove bool
	Keys        []crypto.Signer
	Now         func() time.Time
}

// Auth0 is a fake Auth0 tenant: the issuer with its trailing slash, the
// discovery document as Auth0's (with or without end_session_endpoint),
// ID tokens shaped as its own (sid, updated_at, a namespaced roles
// claim), and its logout endpoints, /oidc/logout and /v2/logout. It is an
// http.Handler, for URL.
type Auth0 struct {
	cfg     Auth0Config
	op      *oidcop.OP
	users   map[string]Auth0User
	logouts atomic.Int64
}

// NewAuth0 returns the fake.
func NewAuth0(cfg Auth0Config) (*Auth0, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Host == "" || strings.Trim(u.Path, "/") != "" {
		return nil, fmt.Errorf("enterprise: URL %q is not a base URL", cfg.URL)
	}
	if len(cfg.Users) == 0 {
		cfg.Users = []Auth0User{{ID: "auth0|64b7f0a1c2d3e4f5a6b7c8d9", Name: "alice@example.org", Nickname: "alice",
			Picture: "https://s.gravatar.com/avatar/0?s=480&r=pg&d=https%3A%2F%2Fcdn.auth0.com%2Favatars%2Fal.png",
			Email:   "alice@example.org", EmailVerified: true}}
	}
	a := &Auth0{cfg: cfg, users: map[string]Auth0User{}}
	var users []oidcop.User
	for _, u := range cfg.Users {
		a.users[u.ID] = u
		users = append(users, oidcop.User{Sub: u.ID, Email: u.Email, EmailVerified: u.EmailVerified, Name: u.Name,
			GivenName: u.GivenName, FamilyName: u.FamilyName, PreferredUsername: u.Nickname, Picture: u.Picture})
	}
	base := strings.TrimSuffix(cfg.URL, "/")
	oc := oidcop.Config{
		Issuer: base + "/", ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, RedirectURIs: cfg.RedirectURIs,
		AutoApprove: cfg.AutoApprove, Keys: cfg.Keys, Now: cfg.Now, Users: users, NoIssParameter: true,
		Routes: map[oidcop.Endpoint]string{
			oidcop.Authorize: "/authorize", oidcop.Token: "/oauth/token", oidcop.UserInfo: "/userinfo",
			oidcop.JWKS: "/.well-known/jwks.json", oidcop.EndSession: "/oidc/logout", oidcop.Revocation: "/oauth/revoke",
		},
		Document: auth0Document(base, cfg.EndSessionDiscovery),
		Claims:   a.claims,
	}
	if cfg.TokenIssuer != "" {
		oc.IssuerFor = func(oidcop.User) string { return cfg.TokenIssuer }
	}
	// /oidc/logout takes the post_logout_redirect_uri of the Allowed
	// Logout URLs.
	oc.PostLogoutRedirectURIs = cfg.AllowedLogoutURLs
	if a.op, err = oidcop.New(oc); err != nil {
		return nil, err
	}
	return a, nil
}

// claims shapes an ID token as Auth0's: nickname, updated_at, and the
// roles under the Action's claim.
func (a *Auth0) claims(u oidcop.User, _ string, claims map[string]any) {
	au := a.users[u.Sub]
	if au.Nickname != "" {
		claims["nickname"] = au.Nickname
	}
	claims["updated_at"] = time.Unix(0, 0).UTC().Format("2006-01-02T15:04:05.000Z")
	if a.cfg.RolesClaim != "" {
		claims[a.cfg.RolesClaim] = append([]string{}, au.Roles...)
	}
}

// ServeHTTP serves the tenant, /v2/logout included.
func (a *Auth0) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v2/logout" {
		a.logout(w, r)
		return
	}
	a.op.ServeHTTP(w, r)
}

// logout is /v2/logout: it ends the browser's session and returns it to
// returnTo, which must be one of the Allowed Logout URLs but for its query
// (Auth0 leaves the query out of the comparison); with client_id, the
// application's list.
func (a *Auth0) logout(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if id := q.Get("client_id"); id != "" && id != a.cfg.ClientID {
		http.Error(w, "invalid_request: the client_id is not valid", http.StatusBadRequest)
		return
	}
	returnTo := q.Get("returnTo")
	if returnTo != "" {
		u, err := url.Parse(returnTo)
		if err != nil {
			http.Error(w, "invalid_request: returnTo is not a URL", http.StatusBadRequest)
			return
		}
		u.RawQuery, u.Fragment = "", ""
		if !slices.Contains(a.cfg.AllowedLogoutURLs, u.String()) {
			http.Error(w, `invalid_request: The "returnTo" querystring parameter "`+returnTo+`" is not defined as a valid URL in "Allowed Logout URLs".`, http.StatusBadRequest)
			return
		}
	}
	if _, err := a.op.EndBrowserSession(w, r); err != nil {
		http.Error(w, "logout failed", http.StatusBadGateway)
		return
	}
	a.logouts.Add(1)
	if returnTo == "" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("OK"))
		return
	}
	http.Redirect(w, r, returnTo, http.StatusFound)
}

// Logouts reports how many sign-outs /v2/logout has done.
func (a *Auth0) Logouts() int { return int(a.logouts.Load()) }

// OP is the tenant's OpenID provider, for its counters, faults and knobs.
func (a *Auth0) OP() *oidcop.OP { return a.op }
