package extauth_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/enterprise"
	"github.com/extauth/extauth/internal/harness"
)

// Two tenants of the fake Entra ID, and a personal account.
const (
	tenantA   = "aaaaaaaa-1111-4111-8111-aaaaaaaaaaaa"
	tenantB   = "bbbbbbbb-2222-4222-8222-bbbbbbbbbbbb"
	entraApp  = "11111111-2222-3333-4444-555555555555"
	entraPass = "entra~secret.value-1"
)

// The users: Ada of tenant A, Bob of tenant B, Carol of tenant A in too
// many groups for a token, and Dan's personal account.
var (
	ada = enterprise.EntraUser{ObjectID: "0a0a0a0a-0000-4000-8000-00000000000a", Sub: "adaSub", Name: "Ada Lovelace",
		GivenName: "Ada", FamilyName: "Lovelace", PreferredUsername: "ada@contoso.example", Email: "ada@contoso.example",
		Groups: []string{"group-eng"}, NestedGroups: []string{"group-all"}, Roles: []string{"Approver"},
		WIDs: []string{"62e90394-69f5-4237-9190-012177145e10"}}
	bob = enterprise.EntraUser{ObjectID: "0b0b0b0b-0000-4000-8000-00000000000b", Sub: "bobSub", Name: "Bob Mallory",
		PreferredUsername: "bob@fabrikam.example", Email: "ada@contoso.example"}
	carol = enterprise.EntraUser{ObjectID: "0c0c0c0c-0000-4000-8000-00000000000c", Sub: "carolSub", Name: "Carol Many",
		PreferredUsername: "carol@contoso.example", Email: "carol@contoso.example", EmailDomainVerified: true,
		Groups: manyGroups("direct", 1200), NestedGroups: manyGroups("nested", 30)}
	dan = enterprise.EntraUser{ObjectID: "00000000-0000-0000-1234-56789abcdef0", Sub: "danSub", Name: "Dan Personal",
		PreferredUsername: "dan@outlook.example", Email: "dan@outlook.example"}
)

func manyGroups(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%04d", prefix, i)
	}
	return out
}

func entraTenants() []enterprise.EntraTenant {
	return []enterprise.EntraTenant{
		{ID: tenantA, Domain: "contoso.example", Users: []enterprise.EntraUser{ada, carol}},
		{ID: tenantB, Domain: "fabrikam.example", Users: []enterprise.EntraUser{bob}},
		{ID: enterprise.ConsumersTenant, Users: []enterprise.EntraUser{dan}},
	}
}

// handlerServer serves a handler set once the server's URL is known.
func handlerServer(t *testing.T) (*httptest.Server, func(http.Handler)) {
	var h atomic.Pointer[http.Handler]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := h.Load(); p != nil {
			(*p).ServeHTTP(w, r)
			return
		}
		http.Error(w, "starting", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	return srv, func(handler http.Handler) { h.Store(&handler) }
}

// presetApp is an application whose oidc provider is a preset's, against
// its fake.
type presetApp struct {
	t     *testing.T
	URL   string
	Auth  *extauth.Auth
	Logs  *lockedLog
	clock *clock
	signIns
	sessions *hostSessions
}

type presetSetup struct {
	// config is the application's oidc registration; opts edits its
	// options; mux adds the host's routes.
	config func(base string) extauth.OIDCConfig
	opts   func(*extauth.Options)
	mux    func(*http.ServeMux, *extauth.Auth)
}

func newPresetApp(t *testing.T, s presetSetup) *presetApp {
	t.Helper()
	a := &presetApp{t: t, Logs: &lockedLog{}, clock: &clock{t: time.Now()}, sessions: &hostSessions{byID: map[string]*extauth.Identity{}}}
	srv := harness.Serve(t, func(base string) http.Handler {
		cfg := &extauth.Config{OIDC: s.config(base)}
		o := extauth.Options{
			BaseURL:   base,
			CookieKey: testKey,
			Logger:    slog.New(slog.NewTextHandler(a.Logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			Now:       a.clock.Now,
			OnSuccess: a.onSuccess,
		}
		if s.opts != nil {
			s.opts(&o)
		}
		auth, err := extauth.New(cfg, o)
		if err != nil {
			t.Fatal(err)
		}
		a.Auth = auth
		t.Cleanup(func() { auth.Close() })
		mux := http.NewServeMux()
		auth.Mount(mux)
		mux.HandleFunc("/{$}", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "home") })
		if s.mux != nil {
			s.mux(mux, auth)
		}
		return mux
	})
	a.URL = srv.URL
	return a
}

// entraFixture is a fake Entra ID with its Graph, each on its own server.
type entraFixture struct {
	*enterprise.Entra
	LoginURL, GraphURL string
}

// newEntra starts a fake Entra ID registered for an application served
// at base; edit changes its configuration.
func startEntra(t *testing.T, base string, edit func(*enterprise.EntraConfig)) *entraFixture {
	t.Helper()
	login, setLogin := handlerServer(t)
	graph, setGraph := handlerServer(t)
	cfg := enterprise.EntraConfig{
		LoginURL: login.URL, GraphURL: graph.URL, ClientID: entraApp, ClientSecret: entraPass,
		RedirectURIs:           []string{base + "/users/auth/oidc/callback"},
		PostLogoutRedirectURIs: []string{base + "/users/auth/oidc/post_logout"},
		Tenants:                entraTenants(), GroupsClaim: true, AutoApprove: true, Keys: opKeys()["RS256"][:1],
	}
	if edit != nil {
		edit(&cfg)
	}
	e, err := enterprise.NewEntra(cfg)
	if err != nil {
		t.Fatal(err)
	}
	setLogin(e.Login())
	setGraph(e.Graph())
	t.Cleanup(e.Graph().Close)
	return &entraFixture{Entra: e, LoginURL: login.URL, GraphURL: graph.URL}
}

// entraApp is an application signing in with Entra ID at authority, the
// first user of the authority signed in at once unless edit says
// otherwise.
type entraSetup struct {
	authority string
	// additional edits oidc_additional_settings, entra the fake's
	// configuration, opts the application's options.
	additional func(*extauth.OIDCAdditionalSettings)
	entra      func(*enterprise.EntraConfig)
	opts       func(*extauth.Options)
	mux        func(*http.ServeMux, *extauth.Auth)
}

func newEntraApp(t *testing.T, s entraSetup) (*presetApp, *entraFixture) {
	t.Helper()
	var fx *entraFixture
	a := newPresetApp(t, presetSetup{
		config: func(base string) extauth.OIDCConfig {
			fx = startEntra(t, base, s.entra)
			c := extauth.OIDCConfig{ClientID: entraApp, ClientSecret: extauth.NewSecret(entraPass), Issuer: fx.Issuer(s.authority),
				Additional: extauth.OIDCAdditionalSettings{Preset: "entra", GraphURL: fx.GraphURL}}
			if s.additional != nil {
				s.additional(&c.Additional)
			}
			return c
		},
		opts: s.opts,
		mux:  s.mux,
	})
	return a, fx
}

// signInAs starts a sign-in and has the fake's sign-in page sign user in
// (the value its page offers: Entra ID's "<tenant ID>/<sub>", others' sub).
func (a *presetApp) signInAs(b *harness.Browser, user string) *harness.Response {
	a.t.Helper()
	page := b.Get(a.URL + "/users/auth/oidc")
	if page.StatusCode != http.StatusOK || !strings.Contains(page.Body, "Approve") {
		a.t.Fatalf("sign-in page: %d %s", page.StatusCode, page.Body)
	}
	return submitForm(a.t, b, page, url.Values{"user": {user}, "decision": {"approve"}})
}

func (a *presetApp) only() *extauth.Identity {
	a.t.Helper()
	got := a.identities()
	if len(got) != 1 {
		a.t.Fatalf("hook called %d times; log:\n%s", len(got), a.Logs)
	}
	return got[0]
}

// A user of an allowed tenant signs in through organizations: the tenant
// and its issuer are the identity's, the token's groups, roles and
// directory roles its Directory, and its email, which Entra ID lets the
// tenant edit, is not verified.
func TestEntraMultiTenantSignIn(t *testing.T) {
	a, _ := newEntraApp(t, entraSetup{authority: "organizations",
		additional: func(s *extauth.OIDCAdditionalSettings) { s.Tenants = []string{tenantA} }})
	resp := harness.NewBrowser(t).Get(a.URL + "/users/auth/oidc")
	if resp.Body != "signed in as adaSub" {
		t.Fatalf("got %d %s\n%s", resp.StatusCode, resp.Body, a.Logs)
	}
	id := a.only()
	d := id.Directory
	if d == nil || d.TenantID != tenantA || d.GroupsSource != extauth.GroupsFromToken ||
		!slices.Equal(d.Groups, []string{"group-eng", "group-all"}) || !slices.Equal(d.Roles, []string{"Approver"}) ||
		!slices.Equal(d.WIDs, ada.WIDs) {
		t.Errorf("directory %+v", d)
	}
	if want := strings.TrimSuffix(id.Raw["iss"].(string), ""); id.Tokens.Issuer != want || !strings.HasSuffix(want, "/"+tenantA+"/v2.0") {
		t.Errorf("Tokens.Issuer %q, the token's iss %q", id.Tokens.Issuer, want)
	}
	if id.Email != ada.Email || id.EmailVerified || id.NickName != ada.PreferredUsername {
		t.Errorf("email %q verified=%v nickname %q", id.Email, id.EmailVerified, id.NickName)
	}
	if in, err := d.InGroup("group-all"); !in || err != nil {
		t.Errorf("InGroup: %v %v", in, err)
	}
	if !d.HasRole("Approver") || d.HasRole("Admin") {
		t.Errorf("HasRole")
	}
}

// A tenant not on the list, a tid that is not its issuer's, and another
// tenant's issuer are refused, the hook never running.
func TestEntraTenantsRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper func(claims map[string]any)
		status int
		code   string
		why    string
	}{
		{"tenant not allowed", nil, http.StatusForbidden, "access_denied", "is not one of oidc_additional_settings.tenants"},
		// Tenant B's token claiming tenant A's tid: every tenant's tokens
		// are signed with the same keys.
		{"tid not the issuer's", func(c map[string]any) { c["tid"] = tenantA }, http.StatusBadRequest, "invalid_response", "is not the issuer of the token's tenant"},
		// Tenant B's token naming tenant A's issuer.
		{"another tenant's issuer", func(c map[string]any) {
			c["iss"] = strings.Replace(c["iss"].(string), tenantB, tenantA, 1)
		}, http.StatusBadRequest, "invalid_response", "is not the issuer of the token's tenant"},
		{"no tid", func(c map[string]any) { delete(c, "tid") }, http.StatusBadRequest, "invalid_response", "no tenant ID"},
		{"a tid that is no tenant ID", func(c map[string]any) {
			c["tid"] = "x/../" + tenantA
			c["iss"] = strings.Replace(c["iss"].(string), tenantB, "x/../"+tenantA, 1)
		}, http.StatusBadRequest, "invalid_response", "no tenant ID"},
		{"a v1 token at the v2.0 endpoint", func(c map[string]any) { c["ver"] = "1.0" }, http.StatusBadRequest, "invalid_response", "version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, fx := newEntraApp(t, entraSetup{authority: "organizations",
				additional: func(s *extauth.OIDCAdditionalSettings) { s.Tenants = []string{tenantA} },
				entra:      func(c *enterprise.EntraConfig) { c.AutoApprove = false }})
			fx.SetTamper(tc.tamper)
			resp := a.signInAs(harness.NewBrowser(t), tenantB+"/"+bob.Sub)
			wantCode(t, resp, tc.status, tc.code)
			if n := len(a.identities()); n != 0 {
				t.Fatalf("hook called %d times", n)
			}
			if !strings.Contains(a.Logs.String(), tc.why) {
				t.Errorf("the log does not say %q:\n%s", tc.why, a.Logs)
			}
		})
	}
}

// tenants: any admits every tenant; common with consumers admits
// personal accounts, whose tenant is the personal-account tenant; the
// organizations authority never offers them.
func TestEntraTenantsAnyAndPersonalAccounts(t *testing.T) {
	for _, tc := range []struct {
		name, authority string
		tenants         []string
		sub, tenant     string
	}{
		{"any tenant", "organizations", []string{"any"}, bob.Sub, tenantB},
		{"a personal account through common", "common", []string{tenantA, "consumers"}, dan.Sub, extauth.EntraConsumersTenant},
		{"a personal account through consumers", "consumers", nil, dan.Sub, extauth.EntraConsumersTenant},
		{"a tenant's own authority", tenantA, nil, ada.Sub, tenantA},
		{"a tenant's domain as its authority", "contoso.example", nil, ada.Sub, tenantA},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, _ := newEntraApp(t, entraSetup{authority: tc.authority,
				additional: func(s *extauth.OIDCAdditionalSettings) { s.Tenants = tc.tenants },
				entra:      func(c *enterprise.EntraConfig) { c.AutoApprove = false }})
			resp := a.signInAs(harness.NewBrowser(t), tc.tenant+"/"+tc.sub)
			if resp.Body != "signed in as "+tc.sub {
				t.Fatalf("got %d %s\n%s", resp.StatusCode, resp.Body, a.Logs)
			}
			id := a.only()
			if id.Directory.TenantID != tc.tenant || !strings.Contains(id.Tokens.Issuer, "/"+tc.tenant+"/v2.0") {
				t.Errorf("tenant %q, issuer %q", id.Directory.TenantID, id.Tokens.Issuer)
			}
		})
	}
	// A personal account is refused through organizations however its
	// token got there.
	a, fx := newEntraApp(t, entraSetup{authority: "organizations",
		additional: func(s *extauth.OIDCAdditionalSettings) { s.Tenants = []string{"any"} }})
	fx.SetTamper(func(c map[string]any) {
		c["tid"] = extauth.EntraConsumersTenant
		c["iss"] = strings.Replace(c["iss"].(string), tenantA, extauth.EntraConsumersTenant, 1)
	})
	wantCode(t, harness.NewBrowser(t).Get(a.URL+"/users/auth/oidc"), http.StatusForbidden, "access_denied")
	if !strings.Contains(a.Logs.String(), "personal Microsoft account") {
		t.Errorf("log:\n%s", a.Logs)
	}
}

// The v1 endpoint is told from v2.0: its issuer is its security token
// service's, its tokens of version 1.0 with upn for a name.
func TestEntraV1Endpoint(t *testing.T) {
	// The v1 authority is the issuer setting without /v2.0.
	var fx *entraFixture
	a2 := newPresetApp(t, presetSetup{config: func(base string) extauth.OIDCConfig {
		fx = startEntra(t, base, nil)
		return extauth.OIDCConfig{ClientID: entraApp, ClientSecret: extauth.NewSecret(entraPass), Issuer: fx.LoginURL + "/" + tenantA,
			Additional: extauth.OIDCAdditionalSettings{Preset: "entra", GraphURL: fx.GraphURL}}
	}})
	resp := harness.NewBrowser(t).Get(a2.URL + "/users/auth/oidc")
	if resp.Body != "signed in as "+ada.Sub {
		t.Fatalf("got %d %s\n%s", resp.StatusCode, resp.Body, a2.Logs)
	}
	id := a2.only()
	if id.Tokens.Issuer != "https://sts.windows.net/"+tenantA+"/" || id.Raw["ver"] != "1.0" || id.NickName != ada.PreferredUsername {
		t.Errorf("issuer %q, ver %v, nickname %q", id.Tokens.Issuer, id.Raw["ver"], id.NickName)
	}
	// A v2.0 token where v1 is configured is refused, by its version too.
	fx.SetTamper(func(c map[string]any) { c["ver"] = "2.0" })
	wantCode(t, harness.NewBrowser(t).Get(a2.URL+"/users/auth/oidc"), http.StatusBadRequest, "invalid_response")
}

// evilServer counts the requests a server that must never be asked gets.
func evilServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, `{"value":[]}`)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// A user in more groups than a token holds (an overage) gets them from
// Microsoft Graph, page after page, when the access token's scopes allow
// it; otherwise, or when Graph refuses, hangs, or points elsewhere, the
// overage is reported, never an empty list, and the sign-in goes on.
func TestEntraGroupsOverage(t *testing.T) {
	const readScope = "openid profile email https://graph.microsoft.com/GroupMember.Read.All"
	evil, evilHits := evilServer(t)
	for _, tc := range []struct {
		name     string
		scope    string
		overage  string
		entra    func(*enterprise.EntraConfig)
		graph    func(*enterprise.Graph)
		source   string
		groups   int
		calls    int
		problem  string
		noGroups bool
	}{
		{name: "resolved at Graph, in two pages", scope: readScope, source: extauth.GroupsFromGraph, groups: 1200, calls: 2},
		{name: "transitive memberships", scope: "openid profile email GroupMember.Read.All", overage: "graph_transitive",
			source: extauth.GroupsFromGraph, groups: 1230, calls: 2},
		{name: "the token's overage source on another host is not asked", scope: readScope, source: extauth.GroupsFromGraph, groups: 1200, calls: 2,
			entra: func(c *enterprise.EntraConfig) {
				c.OverageEndpoint = func(tid, oid string) string { return evil.URL + "/" + tid + "/users/" + oid + "/getMemberObjects" }
			}},
		{name: "no scope allows Graph", scope: "openid profile email", source: extauth.GroupsUnresolved, calls: 0,
			problem: "allow no reading of group memberships: ask for one of GroupMember.Read.All"},
		{name: "groups_overage report", scope: readScope, overage: "report", source: extauth.GroupsUnresolved, calls: 0,
			problem: "groups_overage is report"},
		{name: "consent missing", scope: readScope, graph: func(g *enterprise.Graph) { g.SetConsentMissing(true) },
			source: extauth.GroupsUnresolved, calls: 1, problem: "HTTP 403 Authorization_RequestDenied"},
		{name: "Graph unavailable", scope: readScope, graph: func(g *enterprise.Graph) { g.SetFault(enterprise.MemberOf, enterprise.FaultServerError) },
			source: extauth.GroupsUnresolved, calls: 1, problem: "HTTP 503"},
		{name: "Graph malformed", scope: readScope, graph: func(g *enterprise.Graph) { g.SetFault(enterprise.MemberOf, enterprise.FaultMalformed) },
			source: extauth.GroupsUnresolved, calls: 1, problem: "not a list of memberships"},
		{name: "Graph hangs", scope: readScope, graph: func(g *enterprise.Graph) { g.SetFault(enterprise.MemberOf, enterprise.FaultHang) },
			source: extauth.GroupsUnresolved, calls: 1, problem: "did not answer within"},
		{name: "the next page is elsewhere", scope: readScope, graph: func(g *enterprise.Graph) { g.SetForeignNextLink(evil.URL) },
			source: extauth.GroupsUnresolved, calls: 1, problem: "is not on"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evilHits.Store(0)
			a, fx := newEntraApp(t, entraSetup{authority: "organizations",
				additional: func(s *extauth.OIDCAdditionalSettings) {
					s.Tenants, s.Scope, s.GroupsOverage = []string{tenantA}, tc.scope, tc.overage
				},
				entra: func(c *enterprise.EntraConfig) {
					c.AutoApprove = false
					if tc.entra != nil {
						tc.entra(c)
					}
				},
				opts: func(o *extauth.Options) { o.OIDC.GraphTimeout = hangTimeout }})
			if tc.graph != nil {
				tc.graph(fx.Graph())
			}
			start := time.Now()
			resp := a.signInAs(harness.NewBrowser(t), tenantA+"/"+carol.Sub)
			if resp.Body != "signed in as "+carol.Sub {
				t.Fatalf("got %d %s\n%s", resp.StatusCode, resp.Body, a.Logs)
			}
			if d := time.Since(start); d > hangBound {
				t.Errorf("took %s", d)
			}
			d := a.only().Directory
			if d.GroupsSource != tc.source || len(d.Groups) != tc.groups || !strings.Contains(d.GroupsProblem, tc.problem) {
				t.Errorf("source %q, %d groups, problem %q", d.GroupsSource, len(d.Groups), d.GroupsProblem)
			}
			if n := fx.Graph().Calls(enterprise.MemberOf); n != tc.calls {
				t.Errorf("Graph asked %d times, want %d", n, tc.calls)
			}
			if n := evilHits.Load(); n != 0 {
				t.Errorf("a server that is not Graph was asked %d times", n)
			}
			in, err := d.InGroup("direct-1100")
			if tc.source == extauth.GroupsUnresolved {
				if !errors.Is(err, extauth.ErrGroupsUnresolved) || in {
					t.Errorf("InGroup of an unresolved overage: %v %v", in, err)
				}
				if !strings.Contains(a.Logs.String(), "groups overage") {
					t.Errorf("the overage is not logged:\n%s", a.Logs)
				}
			} else if !in || err != nil {
				t.Errorf("InGroup: %v %v", in, err)
			}
			if strings.Contains(a.Logs.String(), "Bearer") {
				t.Errorf("the log holds a token:\n%s", a.Logs)
			}
		})
	}
}

// A step-up of an account of tenant A cannot be completed by tenant B's
// user of the same sub and oid: a tenant controls what its tokens say,
// and the account is bound to the issuer of its tenant.
func TestEntraStepUpBindsTheTenant(t *testing.T) {
	twin := bob
	twin.Sub, twin.ObjectID = ada.Sub, ada.ObjectID
	a, _ := newEntraApp(t, entraSetup{authority: "organizations",
		additional: func(s *extauth.OIDCAdditionalSettings) { s.Tenants = []string{"any"} },
		entra: func(c *enterprise.EntraConfig) {
			c.AutoApprove = false
			c.Tenants = []enterprise.EntraTenant{{ID: tenantA, Users: []enterprise.EntraUser{ada}}, {ID: tenantB, Users: []enterprise.EntraUser{twin}}}
		}})
	b := harness.NewBrowser(t)
	if resp := a.signInAs(b, tenantA+"/"+ada.Sub); resp.Body != "signed in as "+ada.Sub {
		t.Fatalf("sign-in: %d %s", resp.StatusCode, resp.Body)
	}
	adaID := a.only()
	if adaID.Directory.TenantID != tenantA {
		t.Fatalf("signed in from %s", adaID.Directory.TenantID)
	}
	// stepUp starts a step-up of Ada's account and has the provider's
	// page sign user in.
	stepUp := func(user string) *harness.Response {
		t.Helper()
		action, fields, err := a.Auth.StartForm(httptest.NewRequest(http.MethodGet, a.URL+"/", nil), extauth.OIDC, extauth.SignInOptions{Account: adaID})
		if err != nil {
			t.Fatal(err)
		}
		page := b.PostForm(a.URL+action, fields)
		return submitForm(t, b, page, url.Values{"user": {user}, "decision": {"approve"}})
	}
	// Ada herself steps up.
	if resp := stepUp(tenantA + "/" + ada.Sub); resp.Body != "signed in as "+ada.Sub {
		t.Fatalf("step-up of the same account: %d %s\n%s", resp.StatusCode, resp.Body, a.Logs)
	}
	// Tenant B's twin, same sub and oid: refused.
	wantCode(t, stepUp(tenantB+"/"+ada.Sub), http.StatusForbidden, "access_denied")
	if n := len(a.identities()); n != 2 {
		t.Errorf("hook called %d times", n)
	}
	if !strings.Contains(a.Logs.String(), "from another IdP or issuer") {
		t.Errorf("log:\n%s", a.Logs)
	}
}

// Tokens of a tenant renew at the multi-tenant authority as their tenant's:
// the renewed ID token must be of the same tenant, and a tenant the client
// no longer admits has its tokens refused before any request.
func TestEntraRefreshKeepsTheTenant(t *testing.T) {
	a, fx := newEntraApp(t, entraSetup{authority: "organizations",
		additional: func(s *extauth.OIDCAdditionalSettings) {
			s.Tenants, s.Scope = []string{tenantA}, "openid profile email offline_access"
		}})
	if resp := harness.NewBrowser(t).Get(a.URL + "/users/auth/oidc"); resp.StatusCode != http.StatusOK {
		t.Fatalf("sign-in: %d %s", resp.StatusCode, resp.Body)
	}
	id := a.only()
	if id.Tokens.RefreshToken == "" || id.Tokens.Issuer != fx.Issuer(tenantA) {
		t.Fatalf("tokens %v", id.Tokens)
	}
	ctx := context.Background()
	ts, err := a.Auth.TokenSource(ctx, expired(id))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := ts.Token()
	if err != nil || tok.AccessToken == id.Tokens.AccessToken {
		t.Fatalf("refresh: %v\n%s", err, a.Logs)
	}
	// A renewal whose ID token is tenant B's, for the same user.
	fx.SetTamper(func(c map[string]any) {
		c["tid"] = tenantB
		c["iss"] = strings.Replace(c["iss"].(string), tenantA, tenantB, 1)
	})
	renewed := *id
	renewed.Tokens.RefreshToken = tok.RefreshToken
	ts, err = a.Auth.TokenSource(ctx, expired(&renewed))
	if err != nil {
		t.Fatal(err)
	}
	var e *extauth.Error
	if _, err := ts.Token(); !errors.As(err, &e) || e.Code != extauth.CodeInvalidResponse {
		t.Errorf("a renewal from another tenant: %v", err)
	}
	// Tokens that name a tenant the client does not admit go nowhere.
	hits := fx.Authority("organizations").Hits("token")
	foreign := *id
	foreign.Tokens.Issuer = fx.Issuer(tenantB)
	if _, err := a.Auth.TokenSource(ctx, expired(&foreign)); !errors.As(err, &e) || e.Code != extauth.CodeInvalidState {
		t.Errorf("tokens of a tenant not admitted: %v", err)
	}
	if n := fx.Authority("organizations").Hits("token"); n != hits {
		t.Errorf("the token endpoint was asked %d times", n-hits)
	}
}

// Signing out sends the tenant's ID token to the authority's logout
// endpoint, which returns the browser with the state.
func TestEntraLogout(t *testing.T) {
	l := &logouts{}
	a, _ := newEntraApp(t, entraSetup{authority: "organizations",
		additional: func(s *extauth.OIDCAdditionalSettings) { s.Tenants = []string{tenantA} },
		opts:       l.options,
		mux: func(mux *http.ServeMux, _ *extauth.Auth) {
			mux.HandleFunc("/signed-out", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "signed out") })
		}})
	b := harness.NewBrowser(t)
	presetLogout(t, a, b, l, "/organizations/oauth2/v2.0/logout")
}

// presetLogout signs in, then out through the logout route, which must
// pass the provider's endpoint at path with the sign-in's ID token and
// come back to /signed-out.
func presetLogout(t *testing.T, a *presetApp, b *harness.Browser, l *logouts, path string) *url.URL {
	t.Helper()
	if resp := b.Get(a.URL + "/users/auth/oidc"); resp.StatusCode != http.StatusOK {
		t.Fatalf("sign-in: %d %s\n%s", resp.StatusCode, resp.Body, a.Logs)
	}
	ids := a.identities()
	s := ids[len(ids)-1].LogoutSession()
	l.mu.Lock()
	l.session = &s
	l.mu.Unlock()
	hops := len(b.Hops)
	resp := b.PostForm(a.URL+"/users/auth/oidc/logout", nil)
	if resp.StatusCode != http.StatusOK || resp.URL.Path != "/signed-out" {
		t.Fatalf("sign-out ended at %s with %d %s\n%s", resp.URL, resp.StatusCode, resp.Body, a.Logs)
	}
	var at *url.URL
	for _, h := range b.Hops[hops:] {
		if u, _ := url.Parse(h); u.Path == path {
			at = u
		}
	}
	if at == nil {
		t.Fatalf("the sign-out did not pass %s: %v", path, b.Hops[hops:])
	}
	if _, done := l.seen(); len(done) != 1 || done[0] != nil {
		t.Errorf("sign-out done: %v", done)
	}
	return at
}

// Each tenant of the application has its own allow-list: the same Entra
// ID tenant's users sign in at one and not at the other.
func TestEntraTenantsPerTenantOfOurs(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	at := func(tenant, path string) string { return "http://" + tenant + ".localhost:" + port + path }
	login, setLogin := handlerServer(t)
	graph, setGraph := handlerServer(t)
	e, err := enterprise.NewEntra(enterprise.EntraConfig{LoginURL: login.URL, GraphURL: graph.URL, ClientID: entraApp, ClientSecret: entraPass,
		RedirectURIs: []string{at("alpha", "/users/auth/oidc/callback"), at("beta", "/users/auth/oidc/callback")},
		Tenants:      entraTenants(), AutoApprove: true, Keys: opKeys()["RS256"][:1]})
	if err != nil {
		t.Fatal(err)
	}
	setLogin(e.Login())
	setGraph(e.Graph())
	reg := func(tenants ...string) *extauth.Config {
		return &extauth.Config{OIDC: extauth.OIDCConfig{ClientID: entraApp, ClientSecret: extauth.NewSecret(entraPass), Issuer: e.Issuer("organizations"),
			Additional: extauth.OIDCAdditionalSettings{Preset: "entra", Tenants: tenants, GraphURL: graph.URL}}}
	}
	sig := &signIns{}
	auth, err := extauth.New(&extauth.Config{Tenants: map[string]*extauth.Config{"alpha": reg(tenantA), "beta": reg(tenantB)}},
		extauth.Options{BaseURL: "http://localhost:" + port, CookieKey: testKey, OnSuccess: sig.onSuccess,
			TenantOf: extauth.SubdomainTenants("localhost")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { auth.Close() })
	mux := http.NewServeMux()
	auth.Mount(mux)
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	browser := func() *harness.Browser {
		b := harness.NewBrowser(t)
		b.Client.Transport = &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if host, _, _ := net.SplitHostPort(addr); strings.HasSuffix(host, "localhost") {
				addr = "127.0.0.1:" + port
			}
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}
		return b
	}
	// organizations signs Ada of tenant A in: welcome at alpha only.
	if resp := browser().Get(at("alpha", "/users/auth/oidc")); resp.Body != "signed in as "+ada.Sub {
		t.Fatalf("alpha: %d %s", resp.StatusCode, resp.Body)
	}
	wantCode(t, browser().Get(at("beta", "/users/auth/oidc")), http.StatusForbidden, "access_denied")
	if got := sig.identities(); len(got) != 1 || got[0].Tenant != "alpha" || got[0].Directory.TenantID != tenantA {
		t.Errorf("sign-ins %v", got)
	}
}
