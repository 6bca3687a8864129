package extauth_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"html"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/oidcop"
	"github.com/extauth/extauth/extauthtest/samlidp"
	"github.com/extauth/extauth/internal/harness"
)

// tenantApp is one application serving tenants on subdomains of localhost,
// against one SAML IdP and one OpenID provider that every tenant shares.
type tenantApp struct {
	t *testing.T
	// port is the port of the app's URLs; listen is where this instance
	// listens: another instance of the same app shares port, not listen.
	port   string
	listen string
	Auth   *extauth.Auth
	IdP    *samlidp.IdP
	OP     *oidcop.OP
	Logs   *syncBuffer
	clock  *clock
	store  extauth.Store
	// cfg is the configuration the application starts with, which the
	// edit of newTenantInstance may replace.
	cfg  *extauth.Config
	mu   sync.Mutex
	seen []string // "tenant provider uid" per sign-in, from the hook
}

type syncBuffer = harness.SyncBuffer

// url is the URL of path at tenant ("" for the application's own site).
func (ta *tenantApp) url(tenant, path string) string {
	host := "localhost"
	if tenant != "" {
		host = tenant + ".localhost"
	}
	return "http://" + host + ":" + ta.port + path
}

// tenantConfig is a tenant with SAML and OIDC at the shared IdP and OP.
func tenantConfig(ta *tenantApp, tenant string) *extauth.Config {
	return &extauth.Config{
		SAML: extauth.SAMLConfig{SPEntityID: "https://" + tenant + ".example.test/saml", IdPMetadataURL: ta.IdP.MetadataURL()},
		OIDC: extauth.OIDCConfig{ClientID: oidcClientID, ClientSecret: extauth.NewSecret(oidcSecret), Issuer: ta.OP.Issuer()},
	}
}

// newTenantApp starts the application with the tenants the Config that cfg
// returns holds; edit changes the options.
func newTenantApp(t *testing.T, tenants []string, edit func(*tenantApp, *extauth.Options)) *tenantApp {
	t.Helper()
	return newTenantInstance(t, tenants, nil, edit)
}

// newTenantInstance starts an instance of the application; with of, another
// instance of of's: same URLs, IdP and OP, its own listener.
func newTenantInstance(t *testing.T, tenants []string, of *tenantApp, edit func(*tenantApp, *extauth.Options)) *tenantApp {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ta := &tenantApp{t: t, port: port, listen: port, Logs: &syncBuffer{}, clock: &clock{t: time.Now()}, store: extauth.NewMemoryStore(extauth.MemoryStoreOptions{})}
	if of != nil {
		ta.port, ta.IdP, ta.OP = of.port, of.IdP, of.OP
	} else {
		ta.setUpProviders(tenants)
	}
	cfg := &extauth.Config{Tenants: map[string]*extauth.Config{}}
	for _, tn := range tenants {
		cfg.Tenants[tn] = tenantConfig(ta, tn)
	}
	o := extauth.Options{
		BaseURL:   ta.url("", ""),
		CookieKey: testKey,
		Store:     ta.store,
		Logger:    slog.New(slog.NewTextHandler(ta.Logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Now:       ta.clock.Now,
		TenantOf:  extauth.SubdomainTenants("localhost"),
		OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
			ta.mu.Lock()
			ta.seen = append(ta.seen, extauth.Tenant(r)+" "+id.Tenant+" "+id.Provider+" "+id.UID)
			ta.mu.Unlock()
			fmt.Fprintf(w, "signed in at %s", id.Tenant)
		},
	}
	ta.cfg = cfg
	if edit != nil {
		edit(ta, &o)
	}
	a, err := extauth.New(ta.cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	ta.Auth = a
	mux := http.NewServeMux()
	a.Mount(mux)
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return ta
}

// setUpProviders starts the IdP and the OP the tenants share.
func (ta *tenantApp) setUpProviders(tenants []string) {
	ta.IdP = newSAMLIdP(ta.t)
	opSrv, opPtr := opServer(ta.t)
	var redirects []string
	for _, tn := range append([]string{""}, append(tenants, "x", "y", "z")...) {
		redirects = append(redirects, ta.url(tn, "/users/auth/oidc/callback"))
	}
	op, err := oidcop.New(oidcop.Config{Issuer: opSrv.URL + "/op", ClientID: oidcClientID, ClientSecret: oidcSecret,
		RedirectURIs: redirects, AutoApprove: true, Keys: opKeys()["RS256"][:1]})
	if err != nil {
		ta.t.Fatal(err)
	}
	opPtr.Store(op)
	ta.OP = op
}

// browser is a browser that reaches every *.localhost host at this instance.
func (ta *tenantApp) browser() *harness.Browser {
	b := harness.NewBrowser(ta.t)
	b.Client.Transport = &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, _, _ := net.SplitHostPort(addr); strings.HasSuffix(host, "localhost") {
			addr = "127.0.0.1:" + ta.listen
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	return b
}

// registerSAML gives the IdP the SP metadata tenant serves, and waits for
// the tenant's SP to have the IdP's.
func (ta *tenantApp) registerSAML(b *harness.Browser, tenant string) {
	ta.t.Helper()
	md := b.Get(ta.url(tenant, "/users/auth/saml/metadata"))
	if md.StatusCode != http.StatusOK {
		ta.t.Fatalf("%s SP metadata: %d %s", tenant, md.StatusCode, md.Body)
	}
	if err := ta.IdP.RegisterSP([]byte(md.Body)); err != nil {
		ta.t.Fatal(err)
	}
	ta.waitSAML(b, tenant)
}

// waitSAML waits until tenant's SP has the IdP's metadata.
func (ta *tenantApp) waitSAML(b *harness.Browser, tenant string) {
	ta.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if r := b.PostForm(ta.url(tenant, "/users/auth/saml.json"), nil); r.StatusCode == http.StatusOK || time.Now().After(deadline) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// samlStart starts a SAML sign-in at tenant and returns the IdP's answer:
// the form it would have the browser post to the tenant's ACS.
func (ta *tenantApp) samlStart(b *harness.Browser, tenant string) url.Values {
	ta.t.Helper()
	resp := b.Do(mustReq(ta.t, http.MethodPost, ta.url(tenant, "/users/auth/saml.json")))
	var out struct {
		RedirectTo string `json:"redirect_to"`
	}
	if err := json.Unmarshal([]byte(resp.Body), &out); err != nil || resp.StatusCode != http.StatusOK {
		ta.t.Fatalf("%s SAML authorize: %d %s", tenant, resp.StatusCode, resp.Body)
	}
	return idpForm(ta.t, b, out.RedirectTo)
}

func mustReq(t *testing.T, method, u string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func (ta *tenantApp) signIns() []string {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	return slices.Clone(ta.seen)
}

// Each tenant signs in with its own SAML SP and OIDC client, at its own
// URLs, and the hook, the identity and the log lines name it.
func TestTenantsSignInApart(t *testing.T) {
	ta := newTenantApp(t, []string{"a", "b"}, nil)
	b := ta.browser()
	for _, tn := range []string{"a", "b"} {
		ta.registerSAML(b, tn)
		form := ta.samlStart(b, tn)
		if resp := b.PostForm(ta.url(tn, "/users/auth/saml/callback"), form); resp.StatusCode != http.StatusOK {
			t.Fatalf("%s SAML callback: %d %s", tn, resp.StatusCode, resp.Body)
		}
		if resp := b.PostForm(ta.url(tn, "/users/auth/oidc"), nil); resp.StatusCode != http.StatusOK || !strings.Contains(resp.Body, "signed in at "+tn) {
			t.Fatalf("%s OIDC: %d %s", tn, resp.StatusCode, resp.Body)
		}
	}
	got := ta.signIns()
	var sub string
	if len(got) == 4 {
		sub = strings.TrimPrefix(got[1], "a a oidc ")
	}
	want := []string{"a a saml ada@example.org", "a a oidc " + sub, "b b saml ada@example.org", "b b oidc " + sub}
	if !slices.Equal(got, want) {
		t.Errorf("hook saw %q, want %q", got, want)
	}
	// Each tenant's SP metadata names its own ACS.
	md := b.Get(ta.url("b", "/users/auth/saml/metadata")).Body
	if !strings.Contains(md, ta.url("b", "/users/auth/saml/callback")) || strings.Contains(md, ta.url("a", "")) {
		t.Errorf("b's SP metadata:\n%s", md)
	}
	if !strings.Contains(ta.Logs.String(), "tenant=b") {
		t.Errorf("no log line names tenant b:\n%s", ta.Logs)
	}
	// An unknown tenant and an unknown host are not found.
	for _, host := range []string{"nope.localhost", "other.test", "a.b.localhost"} {
		req := mustReq(t, http.MethodPost, ta.url("", "/users/auth/oidc"))
		req.Host = host
		if resp := b.Do(req); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d", host, resp.StatusCode)
		}
	}
}

// A sign-in started at tenant a cannot be finished at tenant b, with the
// same OpenID provider and client behind both.
func TestTenantTransactionBound(t *testing.T) {
	t.Run("subdomains", func(t *testing.T) {
		ta := newTenantApp(t, []string{"a", "b"}, nil)
		b := ta.browser().NoFollow()
		start := b.PostForm(ta.url("a", "/users/auth/oidc"), nil)
		approve := b.Get(start.Header.Get("Location"))
		cb, err := url.Parse(approve.Header.Get("Location"))
		if err != nil || cb.Query().Get("code") == "" {
			t.Fatalf("OP answered %d %v", approve.StatusCode, approve.Header)
		}
		atB := ta.url("b", cb.Path+".json?"+cb.RawQuery)
		wantCode(t, b.Get(atB), http.StatusBadRequest, "invalid_state")
		if len(ta.signIns()) != 0 {
			t.Fatal("signed in at b")
		}
	})
	// Tenants told apart by a header on one host share its cookies: the
	// transaction still names its tenant.
	t.Run("one host", func(t *testing.T) {
		ta := newTenantApp(t, []string{"a", "b"}, func(ta *tenantApp, o *extauth.Options) {
			o.TenantOf = func(r *http.Request) (string, error) { return r.Header.Get("X-Tenant"), nil }
			o.TenantBaseURL = func(string) (string, error) { return ta.url("", ""), nil }
		})
		b := ta.browser().NoFollow()
		b.Header.Set("X-Tenant", "a")
		start := b.PostForm(ta.url("", "/users/auth/oidc"), nil)
		cb, _ := url.Parse(b.Get(start.Header.Get("Location")).Header.Get("Location"))
		b.Header.Set("X-Tenant", "b")
		wantCode(t, b.Get(ta.url("", cb.Path+".json?"+cb.RawQuery)), http.StatusBadRequest, "invalid_state")
		b.Header.Set("X-Tenant", "a")
		if resp := b.Get(ta.url("", cb.Path+"?"+cb.RawQuery)); resp.StatusCode != http.StatusOK {
			t.Fatalf("the sign-in could not finish at a after the attempt at b: %d %s", resp.StatusCode, resp.Body)
		}
	})
}

// A SAML response the IdP addressed to tenant a is refused at tenant b,
// even posted with b's own RelayState and transaction cookie.
func TestTenantSAMLResponseForAnotherTenant(t *testing.T) {
	ta := newTenantApp(t, []string{"a", "b"}, nil)
	b := ta.browser()
	ta.registerSAML(b, "a")
	ta.registerSAML(b, "b")
	forA := ta.samlStart(b, "a")
	forB := ta.samlStart(b, "b")
	forA.Set("RelayState", forB.Get("RelayState"))
	wantCode(t, b.PostForm(ta.url("b", "/users/auth/saml/callback"), forA), http.StatusBadRequest, "invalid_response")
	if len(ta.signIns()) != 0 {
		t.Fatal("signed in at b with a's response")
	}
}

// Replay keys are per tenant: the same assertion ID at two tenants is not a
// replay, while a replay within a tenant is refused, also by a second
// instance sharing the store (and accepted by one that does not: the
// control).
func TestTenantReplayKeys(t *testing.T) {
	ta := newTenantApp(t, []string{"a", "b"}, nil)
	b := ta.browser()
	forged := map[string]url.Values{}
	for _, tn := range []string{"a", "b"} {
		ta.registerSAML(b, tn)
		form := ta.samlStart(b, tn)
		requestID := inResponseTo(t, form.Get("SAMLResponse"))
		spec := ta.IdP.DefaultSpec("https://"+tn+".example.test/saml", ta.url(tn, "/users/auth/saml/callback"), requestID)
		spec.Assertion.ID = "id-shared-by-both-tenants"
		xml, err := ta.IdP.Forge(spec)
		if err != nil {
			t.Fatal(err)
		}
		form.Set("SAMLResponse", base64.StdEncoding.EncodeToString(xml))
		forged[tn] = form
	}
	// The browser's cookies as they were before either callback, for the
	// replays: the same POST, cookie and all, a second time.
	cookies := b.Jar.Cookies(mustURL(ta.url("a", "/users/auth/saml/callback")))
	for _, tn := range []string{"a", "b"} {
		if resp := b.PostForm(ta.url(tn, "/users/auth/saml/callback"), forged[tn]); resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: an assertion ID another tenant used was refused: %d %s", tn, resp.StatusCode, resp.Body)
		}
	}
	replay := func(inst *tenantApp) *harness.Response {
		inst.waitSAML(inst.browser(), "a")
		b2 := inst.browser()
		b2.Jar.SetCookies(mustURL(ta.url("a", "/users/auth/saml/callback")), cookies)
		return b2.PostForm(ta.url("a", "/users/auth/saml/callback"), forged["a"])
	}
	shared := newTenantInstance(t, []string{"a", "b"}, ta, func(_ *tenantApp, o *extauth.Options) { o.Store = ta.store })
	if resp := replay(shared); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a's response replayed to an instance sharing the store: %d %s", resp.StatusCode, resp.Body)
	}
	separate := newTenantInstance(t, []string{"a", "b"}, ta, nil)
	if resp := replay(separate); resp.StatusCode != http.StatusOK {
		t.Fatalf("control: an instance with its own store refused the replay (%d %s), so the test proves nothing", resp.StatusCode, resp.Body)
	}
}

// inResponseTo digs the request ID out of a SAMLResponse form value.
func inResponseTo(t *testing.T, samlResponse string) string {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(samlResponse)
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	i := strings.Index(s, `InResponseTo="`)
	if i < 0 {
		t.Fatalf("no InResponseTo in %s", s)
	}
	s = s[i+len(`InResponseTo="`):]
	return html.UnescapeString(s[:strings.IndexByte(s, '"')])
}

// One tenant's broken configuration, failing lookup or dead provider fails
// that tenant's sign-ins only, and its secrets reach no other tenant's
// answers or the logs.
func TestTenantFailuresStayInTheirTenant(t *testing.T) {
	var lookups atomic.Int64
	ta := newTenantApp(t, []string{"a"}, func(ta *tenantApp, o *extauth.Options) {
		o.Tenants = extauth.TenantSourceFunc(func(ctx context.Context, tenant string) (*extauth.Config, error) {
			lookups.Add(1)
			switch tenant {
			case "broken":
				return &extauth.Config{OIDC: extauth.OIDCConfig{ClientID: "c", ClientSecret: extauth.NewSecret("LEAK-broken-secret"), Issuer: "not a url"}}, nil
			case "dbdown":
				return nil, errors.New("connection refused")
			case "deadop":
				return &extauth.Config{OIDC: extauth.OIDCConfig{ClientID: "c", ClientSecret: extauth.NewSecret("LEAK-deadop-secret"), Issuer: "http://127.0.0.1:1/op"}}, nil
			}
			return nil, extauth.ErrUnknownTenant
		})
	})
	b := ta.browser().NoFollow()
	for tn, code := range map[string]string{"broken": "misconfigured", "dbdown": "provider_unavailable", "deadop": "provider_unavailable"} {
		resp := b.PostForm(ta.url(tn, "/users/auth/oidc.json"), nil)
		if !strings.Contains(resp.Body, code) {
			t.Errorf("%s: %d %s, want %s", tn, resp.StatusCode, resp.Body, code)
		}
		if strings.Contains(resp.Body, "LEAK") {
			t.Errorf("%s's answer shows a secret: %s", tn, resp.Body)
		}
	}
	before := lookups.Load()
	b.PostForm(ta.url("dbdown", "/users/auth/oidc.json"), nil)
	b.PostForm(ta.url("unknown", "/users/auth/oidc.json"), nil)
	b.PostForm(ta.url("unknown", "/users/auth/oidc.json"), nil)
	if got := lookups.Load() - before; got != 1 {
		t.Errorf("%d lookups for a failing and an unknown tenant asked three times; failures are remembered for a while", got)
	}
	if resp := ta.browser().PostForm(ta.url("a", "/users/auth/oidc"), nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("tenant a while others fail: %d %s", resp.StatusCode, resp.Body)
	}
	logs := ta.Logs.String()
	if strings.Contains(logs, "LEAK") {
		t.Errorf("a tenant's secret reached the logs:\n%s", logs)
	}
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "tenant=a ") && (strings.Contains(line, "broken") || strings.Contains(line, "dbdown") || strings.Contains(line, "deadop")) {
			t.Errorf("a line of tenant a speaks of another: %s", line)
		}
		if strings.Contains(line, "sign-in failed") && !strings.Contains(line, "tenant=") {
			t.Errorf("a failure logged without its tenant: %s", line)
		}
	}
}

// Tenants from the host's database: built on first use, then served from
// memory; Invalidate makes the next request read the new configuration;
// at most MaxTenants are kept, the least recently used dropped first.
func TestTenantSourceAndCache(t *testing.T) {
	var mu sync.Mutex
	lookups := map[string]int{}
	clientOf := map[string]string{}
	ta := newTenantApp(t, nil, func(ta *tenantApp, o *extauth.Options) {
		o.MaxTenants = 2
		o.Tenants = extauth.TenantSourceFunc(func(ctx context.Context, tenant string) (*extauth.Config, error) {
			mu.Lock()
			defer mu.Unlock()
			lookups[tenant]++
			c := tenantConfig(ta, tenant)
			c.SAML = extauth.SAMLConfig{}
			if id := clientOf[tenant]; id != "" {
				c.OIDC.ClientID = id
			}
			return c, nil
		})
	})
	count := func(tn string) int { mu.Lock(); defer mu.Unlock(); return lookups[tn] }
	b := ta.browser().NoFollow()
	startClient := func(tn string) string {
		t.Helper()
		resp := b.PostForm(ta.url(tn, "/users/auth/oidc"), nil)
		u, err := url.Parse(resp.Header.Get("Location"))
		if err != nil || resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("%s: %d %s", tn, resp.StatusCode, resp.Body)
		}
		return u.Query().Get("client_id")
	}
	for range 3 {
		startClient("x")
	}
	if count("x") != 1 {
		t.Errorf("x looked up %d times for three sign-ins", count("x"))
	}
	mu.Lock()
	clientOf["x"] = "new-client"
	mu.Unlock()
	if got := startClient("x"); got != oidcClientID {
		t.Errorf("x changed without Invalidate: %s", got)
	}
	ta.Auth.Invalidate("x")
	if got := startClient("x"); got != "new-client" {
		t.Errorf("after Invalidate x still uses client %s", got)
	}
	startClient("y")
	startClient("z") // three tenants, two kept: x, the least recently used, goes
	startClient("x")
	if count("x") != 3 || count("y") != 1 || count("z") != 1 {
		t.Errorf("lookups x=%d y=%d z=%d, want 3 1 1", count("x"), count("y"), count("z"))
	}
}

// Each tenant's cookies carry its name and stay on its host.
func TestTenantCookies(t *testing.T) {
	ta := newTenantApp(t, []string{"a"}, nil)
	b := ta.browser().NoFollow()
	resp := b.PostForm(ta.url("a", "/users/auth/oidc"), nil)
	c := resp.Header.Get("Set-Cookie")
	if !strings.HasPrefix(c, "extauth_a.oidc_") || strings.Contains(strings.ToLower(c), "domain=") {
		t.Errorf("tenant a's transaction cookie: %s", c)
	}
	if got := b.Jar.Cookies(mustURL(ta.url("b", "/"))); len(got) != 0 {
		t.Errorf("b's host gets a's cookies: %v", got)
	}
}

func TestSubdomainTenants(t *testing.T) {
	of := extauth.SubdomainTenants("Example.org")
	for host, want := range map[string]string{"example.org": "", "EXAMPLE.org:8443": "", "city-a.example.org": "city-a",
		"city-a.example.org.": "city-a", "b.example.org:443": "b"} {
		got, err := of(&http.Request{Host: host})
		if err != nil || got != want {
			t.Errorf("%s: %q %v, want %q", host, got, err, want)
		}
	}
	for _, host := range []string{"evil.org", "a.b.example.org", "aexample.org", "a_b.example.org", "Ä.example.org", ".example.org"} {
		if got, err := of(&http.Request{Host: host}); !errors.Is(err, extauth.ErrUnknownTenant) {
			t.Errorf("%s: %q %v, want ErrUnknownTenant", host, got, err)
		}
	}
}

// tenantBench is an application of n tenants on <tenant>.app.example, each
// with OpenID Connect against one OP, all in-process: no socket, so that
// what is measured is extauth.
type tenantBench struct {
	auth *extauth.Auth
	op   *oidcop.OP
	mux  *http.ServeMux
	// single is the same application without tenants, for comparison.
	single    *extauth.Auth
	singleMux *http.ServeMux
}

func tenantName(i int) string { return fmt.Sprintf("t%05d", i) }

func newTenantBench(tb testing.TB, n int) *tenantBench {
	tb.Helper()
	redirects := []string{"https://app.example/users/auth/oidc/callback"}
	for i := range n {
		redirects = append(redirects, "https://"+tenantName(i)+".app.example/users/auth/oidc/callback")
	}
	op, err := oidcop.New(oidcop.Config{Issuer: "https://op.example/op", ClientID: oidcClientID, ClientSecret: oidcSecret,
		RedirectURIs: redirects, AutoApprove: true, Alg: "ES256", Keys: opKeys()["ES256"][:1]})
	if err != nil {
		tb.Fatal(err)
	}
	oidcCfg := extauth.OIDCConfig{ClientID: oidcClientID, ClientSecret: extauth.NewSecret(oidcSecret), Issuer: op.Issuer()}
	cfg := &extauth.Config{OIDC: oidcCfg, Tenants: map[string]*extauth.Config{}}
	for i := range n {
		cfg.Tenants[tenantName(i)] = &extauth.Config{OIDC: oidcCfg}
	}
	o := extauth.Options{
		BaseURL:    "https://app.example",
		CookieKey:  testKey,
		HTTPClient: &http.Client{Transport: handlerTransport{op}},
		Logger:     slog.New(slog.DiscardHandler),
		TenantOf:   extauth.SubdomainTenants("app.example"),
		MaxTenants: n,
		OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
			w.WriteHeader(http.StatusNoContent)
		},
	}
	tbn := &tenantBench{op: op, mux: http.NewServeMux(), singleMux: http.NewServeMux()}
	if tbn.auth, err = extauth.New(cfg, o); err != nil {
		tb.Fatal(err)
	}
	o.TenantOf = nil
	if tbn.single, err = extauth.New(&extauth.Config{OIDC: oidcCfg}, o); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { tbn.auth.Close(); tbn.single.Close() })
	tbn.auth.Mount(tbn.mux)
	tbn.single.Mount(tbn.singleMux)
	return tbn
}

// signIn runs one whole sign-in at host: authorize, the OP, the callback.
func (tbn *tenantBench) signIn(mux *http.ServeMux, host string) error {
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, newRequest(http.MethodGet, "https://"+host+"/users/auth/oidc", nil))
	if rec.Code != http.StatusFound {
		return fmt.Errorf("authorize at %s: %d %s", host, rec.Code, rec.Body)
	}
	cookies := rec.Result().Cookies()
	opRec := httptest.NewRecorder()
	tbn.op.ServeHTTP(opRec, httptest.NewRequest(http.MethodGet, rec.Header().Get("Location"), nil))
	req := httptest.NewRequest(http.MethodGet, opRec.Header().Get("Location"), nil)
	for _, c := range cookies {
		req.AddCookie(c)
	}
	rec = httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	if rec.Code != http.StatusNoContent {
		return fmt.Errorf("callback at %s: %d %s", host, rec.Code, rec.Body)
	}
	return nil
}

// BenchmarkTenantStartup builds an Auth for 10 000 configured tenants:
// nothing is built for them, and no request made, before their first use.
func BenchmarkTenantStartup(b *testing.B) {
	tbn := newTenantBench(b, 10000)
	cfg := &extauth.Config{Tenants: map[string]*extauth.Config{}}
	for i := range 10000 {
		cfg.Tenants[tenantName(i)] = &extauth.Config{OIDC: extauth.OIDCConfig{ClientID: "c", ClientSecret: extauth.NewSecret("s"), Issuer: tbn.op.Issuer()}}
	}
	o := extauth.Options{BaseURL: "https://app.example", CookieKey: testKey, TenantOf: extauth.SubdomainTenants("app.example"),
		Logger: slog.New(slog.DiscardHandler), HTTPClient: &http.Client{Transport: handlerTransport{tbn.op}},
		OnSuccess: func(http.ResponseWriter, *http.Request, *extauth.Identity) {}}
	before := tbn.op.Hits(oidcop.Discovery)
	b.ReportAllocs()
	for b.Loop() {
		a, err := extauth.New(cfg, o)
		if err != nil {
			b.Fatal(err)
		}
		a.Close()
	}
	if hits := tbn.op.Hits(oidcop.Discovery) - before; hits != 0 {
		b.Fatalf("%d discovery requests at start-up", hits)
	}
}

// BenchmarkTenantMemory reports the heap one built tenant with one OpenID
// Connect provider holds, discovery and keys included.
func BenchmarkTenantMemory(b *testing.B) {
	const n = 1000
	for b.Loop() {
		b.StopTimer()
		tbn := newTenantBench(b, n)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b.StartTimer()
		for i := range n {
			if err := tbn.signIn(tbn.mux, tenantName(i)+".app.example"); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/tenant")
		runtime.KeepAlive(tbn)
		b.StartTimer()
	}
}

// BenchmarkTenantFirstSignIn compares the first sign-in of a cold tenant
// (built, then discovery and keys fetched) with a warm one's.
func BenchmarkTenantFirstSignIn(b *testing.B) {
	tbn := newTenantBench(b, 1)
	host := tenantName(0) + ".app.example"
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			tbn.auth.Invalidate(tenantName(0))
			if err := tbn.signIn(tbn.mux, host); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("warm", func(b *testing.B) {
		for b.Loop() {
			if err := tbn.signIn(tbn.mux, host); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkTenantThroughput runs whole sign-ins from 64 concurrent clients,
// spread over 1000 warm tenants, beside the same on an Auth without tenants.
// Run it with -rounds N to alternate the two (BENCHMARKS.md); with
// -mutexprofile it shows no lock shared on the hot path.
func BenchmarkTenantThroughput(b *testing.B) {
	const n = 1000
	tbn := newTenantBench(b, n)
	for i := range n {
		if err := tbn.signIn(tbn.mux, tenantName(i)+".app.example"); err != nil {
			b.Fatal(err)
		}
	}
	if err := tbn.signIn(tbn.singleMux, "app.example"); err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, mux *http.ServeMux, host func(i int) string) {
		b.ReportAllocs()
		b.SetParallelism(64 / runtime.GOMAXPROCS(0))
		var next atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := tbn.signIn(mux, host(int(next.Add(1)))); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	for range *rounds {
		b.Run("extauth_tenants-1000", func(b *testing.B) {
			run(b, tbn.mux, func(i int) string { return tenantName(i%n) + ".app.example" })
		})
		b.Run("single", func(b *testing.B) { run(b, tbn.singleMux, func(int) string { return "app.example" }) })
	}
}

// rounds is how many times BenchmarkTenantThroughput runs its two sides,
// alternating: go test -count would repeat each side in a row.
var rounds = flag.Int("rounds", 1, "rounds of the side-by-side benchmarks")

// Behind http.CrossOriginProtection, a tenant's IdP posts to its SAML
// callback cross-site, though the application's own site has no SAML.
func TestTenantsBehindCrossOriginProtection(t *testing.T) {
	ta := newTenantApp(t, []string{"a"}, nil)
	cop := http.NewCrossOriginProtection()
	ta.Auth.AllowCrossSiteCallbacks(cop)
	mux := http.NewServeMux()
	ta.Auth.Mount(mux)
	mux.HandleFunc("POST /other", func(http.ResponseWriter, *http.Request) {})
	h := cop.Handler(mux)
	for path, refused := range map[string]bool{"/users/auth/saml/callback": false, "/users/auth/saml/logout": false, "/other": true} {
		req := httptest.NewRequest(http.MethodPost, ta.url("a", path), strings.NewReader("SAMLResponse=x"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		req.Header.Set("Origin", "https://idp.example.org")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		// Let through, extauth answers (a 400 or 503 of its own); refused,
		// CrossOriginProtection's 403.
		if (rec.Code == http.StatusForbidden) != refused {
			t.Errorf("cross-site POST %s: %d %s, refused by CrossOriginProtection: want %v", path, rec.Code, rec.Body, refused)
		}
	}
}

// A file whose tenant is misconfigured does not load; read with
// InspectConfig, it starts, and only that tenant's sign-ins fail.
func TestBrokenFileTenantStaysInItsTenant(t *testing.T) {
	ta := newTenantApp(t, nil, nil)
	path := filepath.Join(t.TempDir(), "secrets.yml")
	src := fmt.Sprintf(`production:
  tenants:
    good:
      oidc_client_id: %s
      oidc_client_secret: %q
      oidc_issuer: %s
    broken:
      oidc_client_id: c
      oidc_client_secret: LEAK-broken
      oidc_issuer: not-a-url
`, oidcClientID, oidcSecret, ta.OP.Issuer())
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := extauth.LoadConfig(path, extauth.Env("production")); err == nil || !strings.Contains(err.Error(), "tenants.broken") {
		t.Fatalf("LoadConfig: %v, want a problem naming tenants.broken", err)
	}
	cfg, problems, err := extauth.InspectConfig(path, extauth.Env("production"))
	if err != nil || len(problems) == 0 {
		t.Fatalf("InspectConfig: %v, %v", problems, err)
	}
	a, err := extauth.New(cfg, extauth.Options{BaseURL: ta.url("", ""), CookieKey: testKey, TenantOf: extauth.SubdomainTenants("localhost"),
		Logger: slog.New(slog.DiscardHandler), OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	for tn, want := range map[string]int{"good": http.StatusOK, "broken": http.StatusInternalServerError} {
		rec := httptest.NewRecorder()
		a.ServeHTTP(rec, newRequest(http.MethodPost, ta.url(tn, "/users/auth/oidc.json"), nil))
		if rec.Code != want || strings.Contains(rec.Body.String(), "LEAK") {
			t.Errorf("%s: %d %s, want %d", tn, rec.Code, rec.Body, want)
		}
	}
}

// A flood of requests for made-up subdomains (404s, no sign-in needed)
// evicts no built tenant: the built ones fetch no metadata again and a
// SAML sign-in in flight completes.
func TestUnknownTenantFloodKeepsBuiltTenants(t *testing.T) {
	const maxTenants = 4
	ta := newTenantApp(t, []string{"a", "b"}, func(ta *tenantApp, o *extauth.Options) { o.MaxTenants = maxTenants })
	b := ta.browser()
	ta.registerSAML(b, "a")
	ta.registerSAML(b, "b")
	inFlight := ta.samlStart(b, "a")
	hits := ta.IdP.MetadataHits()
	junk := ta.browser().NoFollow()
	for i := range 10 * maxTenants {
		resp := junk.Get(ta.url(fmt.Sprintf("junk%d", i), "/users/auth/saml"))
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("junk%d: %d %s", i, resp.StatusCode, resp.Body)
		}
	}
	if resp := b.PostForm(ta.url("a", "/users/auth/saml/callback"), inFlight); resp.StatusCode != http.StatusOK {
		t.Fatalf("the sign-in in flight at a after the flood: %d %s", resp.StatusCode, resp.Body)
	}
	form := ta.samlStart(b, "b")
	if resp := b.PostForm(ta.url("b", "/users/auth/saml/callback"), form); resp.StatusCode != http.StatusOK {
		t.Fatalf("a sign-in at b after the flood: %d %s", resp.StatusCode, resp.Body)
	}
	if got := ta.IdP.MetadataHits() - hits; got != 0 {
		t.Errorf("the flood made the built tenants fetch the IdP metadata %d times again", got)
	}
}

// A tenant evicted from the cache while one of its sign-ins is in flight
// (the user at the IdP) still finishes that sign-in.
func TestEvictedTenantFinishesSignIn(t *testing.T) {
	ta := newTenantApp(t, []string{"a", "b"}, func(ta *tenantApp, o *extauth.Options) { o.MaxTenants = 1 })
	b := ta.browser()
	ta.registerSAML(b, "a")
	inFlight := ta.samlStart(b, "a")
	ta.registerSAML(b, "b") // builds b, which evicts a
	if resp := b.PostForm(ta.url("a", "/users/auth/saml/callback"), inFlight); resp.StatusCode != http.StatusOK {
		t.Fatalf("the sign-in in flight at the evicted tenant: %d %s", resp.StatusCode, resp.Body)
	}
}
