package enterprise

import (
	"crypto"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/extauth/extauth/extauthtest/oidcop"
)

// ConsumersTenant is the tenant of personal Microsoft accounts.
const ConsumersTenant = "9188040d-6c67-4c5b-b112-36a304b66dad"

// GroupsLimit is the most groups Entra ID puts in a JWT's groups claim;
// a user in more gets an overage claim instead.
const GroupsLimit = 200

// EntraTenant is a directory of the fake Entra ID.
type EntraTenant struct {
	// ID is the tenant ID, a GUID in lowercase; ConsumersTenant holds
	// personal Microsoft accounts.
	ID string
	// Domain is a verified domain of the tenant
	// (contoso.onmicrosoft.com); its users may name it as the authority.
	Domain string
	// Region is the discovery document's tenant_region_scope; WW when
	// empty.
	Region string
	Users  []EntraUser
}

// EntraUser is an account of a tenant. The fake's sign-in page offers it
// as "<tenant ID>/<sub>", the value a test posts as its user.
type EntraUser struct {
	// ObjectID is the user's oid, a GUID.
	ObjectID string
	// Sub is the ID tokens' sub, which Entra ID makes per user and
	// application; derived from the tenant, the oid and the client ID
	// when empty. Set it to play two tenants issuing the same one.
	Sub               string
	Name              string
	GivenName         string
	FamilyName        string
	PreferredUsername string
	// Email is the email claim, which Entra ID lets the tenant edit;
	// EmailDomainVerified sends xms_edov true beside it.
	Email               string
	EmailDomainVerified bool
	// Groups are the groups the user is a direct member of, by object ID;
	// NestedGroups those it is a member of through them. The groups claim
	// holds both, as Entra ID's does, up to GroupsLimit.
	Groups       []string
	NestedGroups []string
	// Roles are the app roles assigned to the user for the application
	// (the roles claim).
	Roles []string
	// WIDs are the user's directory roles, by role template ID (the wids
	// claim, and directoryRole entries of memberOf).
	WIDs []string
}

// EntraConfig sets the fake Entra ID up.
type EntraConfig struct {
	// LoginURL and GraphURL are where the fake's login service (for
	// https://login.microsoftonline.com) and Microsoft Graph (for
	// https://graph.microsoft.com) are served: their discovery documents
	// and pages name them.
	LoginURL string
	GraphURL string
	// ClientID and ClientSecret are the app registration's application
	// (client) ID and a client secret.
	ClientID     string
	ClientSecret string
	// RedirectURIs and PostLogoutRedirectURIs are the app registration's
	// Web redirect URIs and front-channel logout return URLs.
	RedirectURIs           []string
	PostLogoutRedirectURIs []string
	// Tenants are the directories; users sign in from their own.
	Tenants []EntraTenant
	// GroupsClaim makes the app registration emit the groups claim
	// (groupMembershipClaims: SecurityGroup): the groups, or an overage.
	GroupsClaim bool
	// OverageEndpoint is the _claim_sources endpoint of an overage claim
	// for a user; Azure AD Graph's getMemberObjects, as Entra ID sends,
	// when nil.
	OverageEndpoint func(tenantID, objectID string) string
	// AutoApprove signs the first user of the authority in without the
	// sign-in page.
	AutoApprove bool
	// Keys sign the tokens; one is made when empty.
	Keys []crypto.Signer
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Entra is a fake Microsoft Entra ID: its login service, with the
// authorities common, organizations, consumers, each tenant's ID and
// domain, v2.0 and v1 endpoints, discovery documents as Entra ID's, ID
// tokens shaped as its own (tid, oid, ver, groups or an overage, roles,
// wids, the tenant's issuer), and Microsoft Graph (Graph), which answers
// the memberships an overage needs and UserInfo. Login and Graph are
// http.Handlers to serve at LoginURL and GraphURL.
type Entra struct {
	cfg EntraConfig
	// users are the accounts by their oidcop.User.ID: "<tenant ID>/<sub>",
	// since two tenants may issue one sub.
	users map[string]entraAccount
	// ops are the authorities' providers, by path prefix
	// ("organizations", "organizations/v1").
	ops   map[string]*oidcop.OP
	graph *Graph

	mu sync.Mutex
	// tamper changes each ID token's claims last (SetTamper).
	tamper func(claims map[string]any)
}

// entraAccount is a user with its tenant.
type entraAccount struct {
	tenant string
	user   EntraUser
}

// NewEntra returns the fake.
func NewEntra(cfg EntraConfig) (*Entra, error) {
	login, err := url.Parse(cfg.LoginURL)
	if err != nil || login.Host == "" || login.Path != "" {
		return nil, fmt.Errorf("enterprise: LoginURL %q is not a base URL", cfg.LoginURL)
	}
	graph, err := url.Parse(cfg.GraphURL)
	if err != nil || graph.Host == "" || graph.Path != "" {
		return nil, fmt.Errorf("enterprise: GraphURL %q is not a base URL", cfg.GraphURL)
	}
	if len(cfg.Keys) == 0 {
		k, err := oidcop.GenerateKey("RS256")
		if err != nil {
			return nil, err
		}
		cfg.Keys = []crypto.Signer{k}
	}
	// The tenants are the fake's own copy, each user with its sub.
	tenants := make([]EntraTenant, len(cfg.Tenants))
	for i, t := range cfg.Tenants {
		t.Users = slices.Clone(t.Users)
		if t.Region == "" {
			t.Region = "WW"
		}
		for j := range t.Users {
			if t.Users[j].Sub == "" {
				t.Users[j].Sub = pairwiseSub(t.ID, t.Users[j].ObjectID, cfg.ClientID)
			}
		}
		tenants[i] = t
	}
	cfg.Tenants = tenants
	e := &Entra{cfg: cfg, users: map[string]entraAccount{}, ops: map[string]*oidcop.OP{}}
	type authority struct{ name, tenant, region string }
	authorities := []authority{{"common", "", ""}, {"organizations", "", ""}}
	for _, t := range tenants {
		for _, u := range t.Users {
			e.users[t.ID+"/"+u.Sub] = entraAccount{tenant: t.ID, user: u}
		}
		name := t.ID
		if t.ID == ConsumersTenant {
			name = "consumers"
		}
		authorities = append(authorities, authority{name, t.ID, t.Region})
		if t.Domain != "" {
			authorities = append(authorities, authority{t.Domain, t.ID, t.Region})
		}
	}
	for _, a := range authorities {
		for _, v1 := range []bool{false, true} {
			op, err := e.authority(a.name, a.tenant, a.region, v1, graph.Host)
			if err != nil {
				return nil, err
			}
			key := a.name
			if v1 {
				key += "/v1"
			}
			e.ops[key] = op
		}
	}
	e.graph = newGraph(e)
	return e, nil
}

// pairwiseSub is a sub as Entra ID's look: 43 base64url characters, the
// same for a user and an application, another for another application.
func pairwiseSub(tenant, oid, clientID string) string {
	sum := sha256.Sum256([]byte(tenant + "\x00" + oid + "\x00" + clientID))
	return base64.RawURLEncoding.EncodeToString(sum[:])[:43]
}

// authority builds the provider of one authority: its users, its
// document, its paths and its tokens' shape.
func (e *Entra) authority(name, tenant, region string, v1 bool, graphHost string) (*oidcop.OP, error) {
	login := strings.TrimSuffix(e.cfg.LoginURL, "/")
	var users []oidcop.User
	for _, t := range e.cfg.Tenants {
		switch {
		case tenant != "" && t.ID != tenant:
			continue
		case name == "organizations" && t.ID == ConsumersTenant:
			continue
		}
		for _, u := range t.Users {
			users = append(users, oidcop.User{ID: t.ID + "/" + u.Sub, Sub: u.Sub, Email: u.Email, Name: u.Name, GivenName: u.GivenName,
				FamilyName: u.FamilyName, PreferredUsername: u.PreferredUsername})
		}
	}
	if len(users) == 0 {
		// An authority without users still serves its documents.
		users = []oidcop.User{{Sub: "no-user-" + name}}
	}
	prefix, issuer := "/"+name+"/oauth2/v2.0", login+"/"+name+"/v2.0"
	routes := map[oidcop.Endpoint]string{
		oidcop.Authorize:  prefix + "/authorize",
		oidcop.Token:      prefix + "/token",
		oidcop.EndSession: prefix + "/logout",
		oidcop.JWKS:       "/" + name + "/discovery/v2.0/keys",
	}
	if v1 {
		prefix, issuer = "/"+name+"/oauth2", login+"/"+name
		routes = map[oidcop.Endpoint]string{
			oidcop.Authorize:  prefix + "/authorize",
			oidcop.Token:      prefix + "/token",
			oidcop.EndSession: prefix + "/logout",
			oidcop.JWKS:       "/" + name + "/discovery/keys",
			oidcop.UserInfo:   "/" + name + "/openid/userinfo",
		}
	}
	return oidcop.New(oidcop.Config{
		Issuer:                 issuer,
		ClientID:               e.cfg.ClientID,
		ClientSecret:           e.cfg.ClientSecret,
		RedirectURIs:           e.cfg.RedirectURIs,
		PostLogoutRedirectURIs: e.cfg.PostLogoutRedirectURIs,
		AutoApprove:            e.cfg.AutoApprove,
		Keys:                   e.cfg.Keys,
		Now:                    e.cfg.Now,
		Users:                  users,
		ClientName:             "the application",
		NoIssParameter:         true,
		DiscoveryCacheControl:  "max-age=86400, private",
		Routes:                 routes,
		Document:               entraDocument(v1, name, tenant, region, login, strings.TrimSuffix(e.cfg.GraphURL, "/"), graphHost),
		IssuerFor: func(u oidcop.User) string {
			tid := e.users[u.ID].tenant
			if v1 {
				return "https://sts.windows.net/" + tid + "/"
			}
			return login + "/" + tid + "/v2.0"
		},
		Claims: func(u oidcop.User, scope string, claims map[string]any) { e.claims(u, scope, claims, v1) },
	})
}

// claims shapes an ID token as Entra ID's: its tenant and object IDs, its
// version, no email_verified (Entra ID sends none), xms_edov when the
// email's domain is verified, the groups (or an overage), roles and wids.
func (e *Entra) claims(u oidcop.User, scope string, claims map[string]any, v1 bool) {
	acct := e.users[u.ID]
	eu := acct.user
	claims["tid"] = acct.tenant
	claims["oid"] = eu.ObjectID
	claims["nbf"] = claims["iat"]
	delete(claims, "email_verified")
	if v1 {
		claims["ver"] = "1.0"
		claims["upn"] = eu.PreferredUsername
		claims["unique_name"] = eu.PreferredUsername
		delete(claims, "preferred_username")
	} else {
		claims["ver"] = "2.0"
	}
	if eu.EmailDomainVerified && claims["email"] != nil {
		claims["xms_edov"] = true
	}
	if len(eu.Roles) > 0 {
		claims["roles"] = slices.Clone(eu.Roles)
	}
	if len(eu.WIDs) > 0 {
		claims["wids"] = slices.Clone(eu.WIDs)
	}
	defer e.tampered(claims)
	if !e.cfg.GroupsClaim || acct.tenant == ConsumersTenant {
		return
	}
	groups := append(slices.Clone(eu.Groups), eu.NestedGroups...)
	if len(groups) <= GroupsLimit {
		claims["groups"] = groups
		return
	}
	endpoint := "https://graph.windows.net/" + acct.tenant + "/users/" + eu.ObjectID + "/getMemberObjects"
	if e.cfg.OverageEndpoint != nil {
		endpoint = e.cfg.OverageEndpoint(acct.tenant, eu.ObjectID)
	}
	claims["_claim_names"] = map[string]any{"groups": "src1"}
	claims["_claim_sources"] = map[string]any{"src1": map[string]any{"endpoint": endpoint}}
}

// SetTamper has f change the claims of every ID token, after the fake
// shaped them and before they are signed, as a forger with Entra ID's
// keys would: another tid than the issuer's, another tenant's issuer. Nil
// restores honest tokens.
func (e *Entra) SetTamper(f func(claims map[string]any)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tamper = f
}

func (e *Entra) tampered(claims map[string]any) {
	e.mu.Lock()
	f := e.tamper
	e.mu.Unlock()
	if f != nil {
		f(claims)
	}
}

// Login is the login service's handler, for LoginURL.
func (e *Entra) Login() http.Handler { return http.HandlerFunc(e.serveLogin) }

// Graph is Microsoft Graph's, for GraphURL.
func (e *Entra) Graph() *Graph { return e.graph }

func (e *Entra) serveLogin(w http.ResponseWriter, r *http.Request) {
	name, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	key := name
	if !strings.HasPrefix(rest, "v2.0/") && !strings.HasPrefix(rest, "oauth2/v2.0/") && !strings.HasPrefix(rest, "discovery/v2.0/") {
		key += "/v1"
	}
	op, ok := e.ops[key]
	if !ok {
		http.Error(w, `{"error":"invalid_tenant","error_description":"AADSTS90002: Tenant '`+name+`' not found."}`, http.StatusBadRequest)
		return
	}
	op.ServeHTTP(w, r)
}

// Authority returns the provider of an authority (common, organizations,
// consumers, a tenant ID or domain; with "/v1" its v1 endpoint's), for its
// counters, faults and knobs; nil for one the fake does not have.
func (e *Entra) Authority(name string) *oidcop.OP { return e.ops[name] }

// Issuer returns the issuer setting of an authority's v2.0 endpoint:
// LoginURL/<authority>/v2.0.
func (e *Entra) Issuer(authority string) string {
	return strings.TrimSuffix(e.cfg.LoginURL, "/") + "/" + authority + "/v2.0"
}

// introspect finds whose an access token any authority issued is.
func (e *Entra) introspect(token string) (entraAccount, string, bool) {
	for _, op := range e.ops {
		if u, scope, ok := op.Introspect(token); ok {
			return e.users[u.ID], scope, true
		}
	}
	return entraAccount{}, "", false
}
