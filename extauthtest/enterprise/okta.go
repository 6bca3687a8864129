package enterprise

import (
	"crypto"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/extauth/extauth/extauthtest/internal/endpoint"
	"github.com/extauth/extauth/extauthtest/oidcop"
)

// OktaUser is an account of the fake Okta org.
type OktaUser struct {
	// ID is the user's ID (00u…), the sub of its tokens.
	ID                string
	Name              string
	GivenName         string
	FamilyName        string
	PreferredUsername string
	Email             string
	// EmailVerified sends email_verified true beside the email.
	EmailVerified bool
	// Groups are the user's groups, by name, sent as the groups claim
	// when the sign-in asks for the groups scope (a custom authorization
	// server's groups claim) or the app's groups claim filter is set
	// (GroupsClaimFilter).
	Groups []string
}

// OktaConfig sets the fake Okta org up.
type OktaConfig struct {
	// URL is where the org is served: its domain, for
	// https://<org>.okta.com.
	URL string
	// ClientID and ClientSecret are the app integration's.
	ClientID     string
	ClientSecret string
	// RedirectURIs and PostLogoutRedirectURIs are the app integration's
	// sign-in and sign-out redirect URIs.
	RedirectURIs           []string
	PostLogoutRedirectURIs []string
	// AuthorizationServers are the custom authorization servers' IDs,
	// each served at /oauth2/<id>; default "default".
	AuthorizationServers []string
	// GroupsClaimFilter sends every sign-in's groups claim, as the org
	// authorization server does for an app with a groups claim filter.
	GroupsClaimFilter bool
	Users             []OktaUser
	AutoApprove       bool
	// Keys sign the tokens; each authorization server gets one of its
	// own, made when Keys has too few.
	Keys []crypto.Signer
	Now  func() time.Time
}

// Okta is a fake Okta org: its org authorization server (issuer
// https://<org>, endpoints under /oauth2/v1) and custom authorization
// servers (issuer https://<org>/oauth2/<id>, endpoints under
// /oauth2/<id>/v1), each with its own keys, discovery documents as
// Okta's, ID tokens shaped as its own (ver, idp, amr, jti, groups), and a
// logout endpoint that requires id_token_hint as Okta's does. It is an
// http.Handler, for URL.
type Okta struct {
	cfg     OktaConfig
	org     *oidcop.OP
	servers map[string]*oidcop.OP
	users   map[string]OktaUser
	idp     string
}

// NewOkta returns the fake.
func NewOkta(cfg OktaConfig) (*Okta, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Host == "" || strings.Trim(u.Path, "/") != "" {
		return nil, fmt.Errorf("enterprise: URL %q is not a base URL", cfg.URL)
	}
	if len(cfg.AuthorizationServers) == 0 {
		cfg.AuthorizationServers = []string{"default"}
	}
	if len(cfg.Users) == 0 {
		cfg.Users = []OktaUser{{ID: "00u1a2b3c4d5e6f7g8h9", Name: "Alice Example", GivenName: "Alice", FamilyName: "Example",
			PreferredUsername: "alice@example.org", Email: "alice@example.org", EmailVerified: true, Groups: []string{"Everyone", "Engineering"}}}
	}
	o := &Okta{cfg: cfg, servers: map[string]*oidcop.OP{}, users: map[string]OktaUser{}, idp: "00o" + endpoint.Random(12)}
	var users []oidcop.User
	for _, u := range cfg.Users {
		o.users[u.ID] = u
		users = append(users, oidcop.User{Sub: u.ID, Email: u.Email, EmailVerified: u.EmailVerified, Name: u.Name,
			GivenName: u.GivenName, FamilyName: u.FamilyName, PreferredUsername: u.PreferredUsername})
	}
	base := strings.TrimSuffix(cfg.URL, "/")
	key := func(i int) ([]crypto.Signer, error) {
		if i < len(cfg.Keys) {
			return cfg.Keys[i : i+1], nil
		}
		k, err := oidcop.GenerateKey("RS256")
		return []crypto.Signer{k}, err
	}
	for i, id := range append([]string{""}, cfg.AuthorizationServers...) {
		keys, err := key(i)
		if err != nil {
			return nil, err
		}
		issuer, v1 := base, "/oauth2/v1"
		if id != "" {
			issuer, v1 = base+"/oauth2/"+id, "/oauth2/"+id+"/v1"
		}
		org := id == ""
		op, err := oidcop.New(oidcop.Config{
			Issuer: issuer, ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret,
			RedirectURIs: cfg.RedirectURIs, PostLogoutRedirectURIs: cfg.PostLogoutRedirectURIs,
			AutoApprove: cfg.AutoApprove, Keys: keys, Now: cfg.Now, Users: users, NoIssParameter: true,
			DiscoveryCacheControl: "max-age=86400, must-revalidate",
			Routes: map[oidcop.Endpoint]string{
				oidcop.Authorize: v1 + "/authorize", oidcop.Token: v1 + "/token", oidcop.UserInfo: v1 + "/userinfo",
				oidcop.JWKS: v1 + "/keys", oidcop.EndSession: v1 + "/logout", oidcop.Revocation: v1 + "/revoke",
			},
			Document: oktaDocument(id, base),
			Claims:   func(u oidcop.User, scope string, claims map[string]any) { o.claims(u, scope, claims, org) },
		})
		if err != nil {
			return nil, err
		}
		if org {
			o.org = op
		} else {
			o.servers[id] = op
		}
	}
	return o, nil
}

// claims shapes an ID token as Okta's: ver 1, the identity provider,
// amr, a jti, and the groups when asked for.
func (o *Okta) claims(u oidcop.User, scope string, claims map[string]any, org bool) {
	claims["ver"] = 1
	claims["idp"] = o.idp
	claims["amr"] = []string{"pwd"}
	claims["jti"] = "ID." + endpoint.Random(32)
	if auth, ok := claims["auth_time"]; !ok || auth == nil {
		claims["auth_time"] = claims["iat"]
	}
	ou := o.users[u.Sub]
	if len(ou.Groups) > 0 && (slices.Contains(strings.Fields(scope), "groups") || org && o.cfg.GroupsClaimFilter) {
		claims["groups"] = slices.Clone(ou.Groups)
	}
}

// ServeHTTP serves the org: the custom authorization servers under
// /oauth2/<id>, the org's everywhere else.
func (o *Okta) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := o.org
	if rest, ok := strings.CutPrefix(r.URL.Path, "/oauth2/"); ok {
		if id, _, _ := strings.Cut(rest, "/"); o.servers[id] != nil {
			op = o.servers[id]
		}
	}
	if strings.HasSuffix(r.URL.Path, "/v1/logout") && r.URL.Query().Get("id_token_hint") == "" {
		// Okta's logout takes id_token_hint, and answers without it with
		// its error page.
		http.Error(w, "The 'id_token_hint' parameter is required.", http.StatusBadRequest)
		return
	}
	op.ServeHTTP(w, r)
}

// Org is the org authorization server.
func (o *Okta) Org() *oidcop.OP { return o.org }

// Server is the custom authorization server id, nil when there is none.
func (o *Okta) Server(id string) *oidcop.OP { return o.servers[id] }
