package extauth_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/wpoauth"
	"github.com/extauth/extauth/internal/harness"
	"github.com/extauth/extauth/providers"
	"github.com/go-chi/chi/v5"
	"github.com/gorilla/mux"
)

const (
	blogKey    = "blog-client-id"
	blogSecret = "blog-secret-5f1e9c"
)

var testKey = bytes.Repeat([]byte{7}, 32)

// The time-outs of the tests of a provider that hangs. Options.Timeout is
// hangTimeout where a hang is played, and slowTimeout where none is, so
// that a slow answer on a loaded machine is never taken for a hang; a hang
// must end well before what it would wait for if the time-out under test
// were ignored (the fakes hang until the client leaves, or 30 s): within
// hangBound, which load does not stretch a return to.
const (
	hangTimeout = 300 * time.Millisecond
	slowTimeout = time.Minute
	hangBound   = 20 * time.Second
)

// app is one running application with blog_oauth2 against a fake WP OAuth
// Server, recording what its hooks saw.
type app struct {
	t     *testing.T
	URL   string
	Auth  *extauth.Auth
	Fake  *wpoauth.Server
	Logs  *bytes.Buffer
	clock *clock
	signIns
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newApp(t *testing.T, edit func(*extauth.Options)) *app {
	t.Helper()
	return newAppOn(t, edit, nil)
}

// newAppOn is newApp with the routes mounted by route instead of on a
// ServeMux at the default prefix.
func newAppOn(t *testing.T, edit func(*extauth.Options), route func(*extauth.Auth) http.Handler) *app {
	t.Helper()
	a := &app{t: t, Logs: &bytes.Buffer{}, clock: &clock{t: time.Now()}}
	fake := wpoauth.New(blogKey, blogSecret, "")
	fake.AutoApprove = true
	fakeSrv := httptest.NewServer(fake)
	t.Cleanup(fakeSrv.Close)
	a.Fake = fake
	srv := harness.Serve(t, func(base string) http.Handler {
		fake.RedirectURI = base + "/users/auth/blog_oauth2/callback"
		cfg := &extauth.Config{BlogOAuth2: extauth.OAuthProvider{Key: blogKey, Secret: extauth.NewSecret(blogSecret), Site: fakeSrv.URL}}
		o := extauth.Options{
			BaseURL:   base,
			CookieKey: testKey,
			Logger:    debugLogger(a.Logs),
			Now:       a.clock.Now,
			OnSuccess: a.onSuccess,
		}
		if edit != nil {
			edit(&o)
		}
		auth, err := extauth.New(cfg, o)
		if err != nil {
			t.Fatal(err)
		}
		a.Auth = auth
		if route != nil {
			return route(auth)
		}
		mux := http.NewServeMux()
		auth.Mount(mux)
		return mux
	})
	a.URL = srv.URL
	return a
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// debugLogger writes every record, as text, to buf; requests log from
// several goroutines, hence the lock.
func debugLogger(buf *bytes.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(&syncWriter{w: buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// signIns records what an application's success hook saw.
type signIns struct {
	mu  sync.Mutex
	Got []*extauth.Identity
	Ret []string // extauth.ReturnTo seen by the hook
}

// onSuccess is the success hook.
func (s *signIns) onSuccess(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
	s.mu.Lock()
	s.Got = append(s.Got, id)
	s.Ret = append(s.Ret, extauth.ReturnTo(r))
	s.mu.Unlock()
	fmt.Fprintf(w, "signed in as %s", id.UID)
}

func (s *signIns) identities() []*extauth.Identity {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*extauth.Identity(nil), s.Got...)
}

// start runs authorize without following, and returns the provider URL.
func (a *app) start(b *harness.Browser, form url.Values) *url.URL {
	a.t.Helper()
	resp := b.PostForm(a.URL+"/users/auth/blog_oauth2", form)
	if resp.StatusCode != http.StatusSeeOther {
		a.t.Fatalf("authorize: %d %s", resp.StatusCode, resp.Body)
	}
	u, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		a.t.Fatal(err)
	}
	return u
}

// approve has the fake provider approve and returns the callback URL it
// sends the browser to.
func (a *app) approve(b *harness.Browser, authURL *url.URL) string {
	a.t.Helper()
	resp := b.Get(authURL.String())
	if resp.StatusCode != http.StatusFound {
		a.t.Fatalf("provider authorize: %d %s", resp.StatusCode, resp.Body)
	}
	return resp.Header.Get("Location")
}

func wantCode(t *testing.T, resp *harness.Response, status int, code string) {
	t.Helper()
	if resp.StatusCode != status || !strings.Contains(resp.Body, code) {
		t.Fatalf("got %d %q, want %d with %s", resp.StatusCode, resp.Body, status, code)
	}
}

// newRequest is httptest.NewRequest as a current browser sends it from a
// page of the app: with Sec-Fetch-Site: same-origin.
func newRequest(method, target string, body io.Reader) *http.Request {
	r := httptest.NewRequest(method, target, body)
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	return r
}

// renamed is a strategy that reads an OAuth 2 state but must never complete:
// it stands in for a second provider in the mix-up tests.
type renamed struct{ name string }

func (s renamed) Name() string { return s.name }
func (s renamed) Begin(context.Context, *providers.Transaction) (string, error) {
	return "https://provider.example/authorize", nil
}
func (s renamed) Binding(r *http.Request) string { return r.FormValue("state") }
func (s renamed) Complete(context.Context, *http.Request, *providers.Transaction) (*providers.Identity, error) {
	return nil, errors.New("must not be called")
}

// allSix mounts six strategies under the built-in names, so the route table
// can be checked whatever providers this build has.
func allSix(t *testing.T, strict bool) *extauth.Auth {
	t.Helper()
	var extra []extauth.Strategy
	for _, p := range extauth.BuiltinProviders() {
		extra = append(extra, renamed{name: string(p)})
	}
	a, err := extauth.New(nil, extauth.Options{BaseURL: "https://app.example", CookieKey: testKey, Extra: extra, StrictPOST: strict,
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnSuccess: func(http.ResponseWriter, *http.Request, *extauth.Identity) {}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestRouteTable(t *testing.T) {
	a := allSix(t, false)
	routes := a.Routes()
	// The specification's twelve, and a sign-out route for each provider.
	if len(routes) != 18 {
		t.Fatalf("%d routes, want 18", len(routes))
	}
	seen := map[string]bool{}
	for _, r := range routes {
		if r.Purpose == "logout" {
			seen[r.Path] = true
			continue
		}
		seen[r.Path] = true
		if r.URL != "https://app.example"+r.Path {
			t.Errorf("%s: URL %s", r.Path, r.URL)
		}
		for _, suffix := range []string{"", ".json"} {
			for _, m := range []string{http.MethodGet, http.MethodPost} {
				rec := httptest.NewRecorder()
				req := newRequest(m, "https://app.example"+r.Path+suffix, nil)
				a.ServeHTTP(rec, req)
				want := map[string]int{"authorize": http.StatusFound, "callback": http.StatusBadRequest}[r.Purpose]
				if r.Purpose == "authorize" && m == http.MethodPost {
					want = http.StatusSeeOther
				}
				if r.Purpose == "authorize" && suffix == ".json" {
					want = http.StatusOK
				}
				if rec.Code != want {
					t.Errorf("%s %s%s = %d, want %d", m, r.Path, suffix, rec.Code, want)
				}
				if suffix == ".json" && !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
					t.Errorf("%s %s%s answered %s", m, r.Path, suffix, rec.Header().Get("Content-Type"))
				}
			}
		}
	}
	for _, p := range extauth.BuiltinProviders() {
		for _, path := range []string{"/users/auth/" + string(p), "/users/auth/" + string(p) + "/callback", "/users/auth/" + string(p) + "/logout"} {
			if !seen[path] {
				t.Errorf("route %s missing", path)
			}
		}
	}

	notFound := []string{"/users/auth/", "/users/auth/unknown", "/users/auth/unknown/callback",
		"/users/auth/saml/callback/extra", "/users/auth/oidc/other", "/users/auth/oidc.xml",
		"/users/auth/oidc/callback.exe", "/users/auth/OIDC", "/users/auth/oidc/", "/users/auth/oidc.json/callback",
		"/users/auth/../auth/oidc", "/users/auth/oidc.", "/users/auth/oidc/callback/"}
	for _, path := range notFound {
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut} {
			rec := httptest.NewRecorder()
			req := newRequest(m, "https://app.example/", nil)
			req.URL.Path = path
			a.ServeHTTP(rec, req)
			if rec.Code != http.StatusNotFound {
				t.Errorf("%s %s = %d, want 404", m, path, rec.Code)
			}
		}
	}
	for _, m := range []string{http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodHead, http.MethodOptions} {
		for _, path := range []string{"/users/auth/oidc", "/users/auth/oidc/callback.json"} {
			rec := httptest.NewRecorder()
			a.ServeHTTP(rec, newRequest(m, "https://app.example"+path, nil))
			if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, POST" {
				t.Errorf("%s %s = %d Allow %q, want 405 with Allow: GET, POST", m, path, rec.Code, rec.Header().Get("Allow"))
			}
		}
	}
}

func TestStrictPOST(t *testing.T) {
	a := allSix(t, true)
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, newRequest(http.MethodGet, "https://app.example/users/auth/oidc", nil))
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "POST" {
		t.Errorf("GET authorize under StrictPOST = %d Allow %q", rec.Code, rec.Header().Get("Allow"))
	}
	rec = httptest.NewRecorder()
	a.ServeHTTP(rec, newRequest(http.MethodPost, "https://app.example/users/auth/oidc", nil))
	if rec.Code != http.StatusSeeOther {
		t.Errorf("POST authorize under StrictPOST = %d", rec.Code)
	}
	rec = httptest.NewRecorder()
	a.ServeHTTP(rec, newRequest(http.MethodGet, "https://app.example/users/auth/oidc/callback", nil))
	if rec.Code == http.StatusMethodNotAllowed {
		t.Error("StrictPOST must not refuse GET callbacks")
	}
}

func TestMountOnServeMux(t *testing.T) {
	a := allSix(t, false)
	mux := http.NewServeMux()
	mux.HandleFunc("/users/auth/saml/metadata-of-host", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(299) })
	a.Mount(mux)
	for path, want := range map[string]int{
		"/users/auth/oidc":                    http.StatusFound,
		"/users/auth/nope":                    http.StatusNotFound,
		"/users/auth/saml/metadata-of-host":   299,
		"/users/auth/socialnet/callback.json": http.StatusBadRequest,
	} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, newRequest(http.MethodGet, "https://app.example"+path, nil))
		if rec.Code != want {
			t.Errorf("GET %s = %d, want %d", path, rec.Code, want)
		}
	}
}

func TestNewRejects(t *testing.T) {
	hook := func(http.ResponseWriter, *http.Request, *extauth.Identity) {}
	blog := &extauth.Config{BlogOAuth2: extauth.OAuthProvider{Key: "k", Secret: extauth.NewSecret("s"), Site: "https://blog.example"}}
	cases := map[string]struct {
		cfg *extauth.Config
		o   extauth.Options
	}{
		"no base URL":       {blog, extauth.Options{CookieKey: testKey, OnSuccess: hook}},
		"relative base URL": {blog, extauth.Options{BaseURL: "/app", CookieKey: testKey, OnSuccess: hook}},
		"base URL query":    {blog, extauth.Options{BaseURL: "https://a.example/?x=1", CookieKey: testKey, OnSuccess: hook}},
		"short key":         {blog, extauth.Options{BaseURL: "https://a.example", CookieKey: testKey[:16], OnSuccess: hook}},
		"no hook":           {blog, extauth.Options{BaseURL: "https://a.example", CookieKey: testKey}},
		"duplicate name":    {blog, extauth.Options{BaseURL: "https://a.example", CookieKey: testKey, OnSuccess: hook, Extra: []extauth.Strategy{renamed{"blog_oauth2"}}}},
		"bad name":          {nil, extauth.Options{BaseURL: "https://a.example", CookieKey: testKey, OnSuccess: hook, Extra: []extauth.Strategy{renamed{"Bad/Name"}}}},
		"bad site": {&extauth.Config{BlogOAuth2: extauth.OAuthProvider{Key: "k", Secret: extauth.NewSecret("s"), Site: "ftp://x"}},
			extauth.Options{BaseURL: "https://a.example", CookieKey: testKey, OnSuccess: hook}},
	}
	for name, c := range cases {
		if _, err := extauth.New(c.cfg, c.o); err == nil {
			t.Errorf("%s: New accepted it", name)
		} else if strings.Contains(err.Error(), "\x07") {
			t.Errorf("%s: error shows the key", name)
		}
	}
}

// RoutesFor must describe exactly what a built Auth mounts, so that the
// operator's tool and the running application never disagree. The stand-in
// strategies serve no extra routes, so only authorize and callback are
// compared here, for all six and several base URLs.
func TestRoutesForMatchesAuthRoutes(t *testing.T) {
	for _, base := range []string{"https://app.example", "https://app.example/prefix/", "http://127.0.0.1:3000"} {
		a := allSixAt(t, base)
		all, err := extauth.RoutesFor(base, extauth.BuiltinProviders()...)
		if err != nil {
			t.Fatal(err)
		}
		got := slices.DeleteFunc(all, func(r extauth.Route) bool { return r.Purpose != "authorize" && r.Purpose != "callback" })
		if len(got) != 12 {
			t.Errorf("%s: %d authorize and callback routes, want 12", base, len(got))
		}
		want := slices.DeleteFunc(a.Routes(), func(r extauth.Route) bool { return r.Purpose != "authorize" && r.Purpose != "callback" })
		if !slices.EqualFunc(got, want, routeEqual) {
			t.Errorf("%s: RoutesFor = %+v\nAuth.Routes = %+v", base, got, want)
		}
	}
}

// RoutesFor builds no strategy, so it must know which routes the built-in
// ones add (SAML's metadata and logout, OpenID Connect's logout routes):
// hold it to what they serve.
func TestRoutesForMatchesBuiltStrategies(t *testing.T) {
	idp := httptest.NewServer(http.NotFoundHandler())
	defer idp.Close()
	cfg := &extauth.Config{
		Microblog:  extauth.OAuthProvider{Key: "k", Secret: extauth.NewSecret("s")},
		Socialnet:  extauth.OAuthProvider{Key: "k", Secret: extauth.NewSecret("s")},
		BlogOAuth2: extauth.OAuthProvider{Key: "k", Secret: extauth.NewSecret("s"), Site: "https://blog.example"},
		SAML:       extauth.SAMLConfig{SPEntityID: "urn:example:sp", IdPMetadataURL: idp.URL + "/metadata"},
		// Neither makes a request before a sign-in.
		SearchOAuth2: extauth.OAuthProvider{Key: "k", Secret: extauth.NewSecret("s")},
		OIDC:         extauth.OIDCConfig{ClientID: "c", ClientSecret: extauth.NewSecret("s"), Issuer: "https://op.example"},
	}
	a, err := extauth.New(cfg, extauth.Options{BaseURL: "https://app.example/x", CookieKey: testKey,
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnSuccess: func(http.ResponseWriter, *http.Request, *extauth.Identity) {}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	got, err := extauth.RoutesFor("https://app.example/x", cfg.Providers()...)
	if err != nil {
		t.Fatal(err)
	}
	if want := a.Routes(); !slices.EqualFunc(got, want, routeEqual) {
		t.Errorf("RoutesFor = %+v\nAuth.Routes = %+v", got, want)
	}
	if !slices.ContainsFunc(got, func(r extauth.Route) bool { return r.URL == "https://app.example/x/users/auth/saml/metadata" }) {
		t.Errorf("no SAML metadata route in %+v", got)
	}
	for _, p := range []string{"oidc", "search_oauth2"} {
		for _, purpose := range []string{"logout", "post_logout", "backchannel_logout", "frontchannel_logout"} {
			u := "https://app.example/x/users/auth/" + p + "/" + purpose
			if !slices.ContainsFunc(got, func(r extauth.Route) bool { return r.URL == u && r.Purpose == purpose }) {
				t.Errorf("no route %s in %+v", u, got)
			}
		}
	}
}

func routeEqual(a, b extauth.Route) bool {
	return a.Provider == b.Provider && a.Purpose == b.Purpose && a.Path == b.Path &&
		a.URL == b.URL && slices.Equal(a.Methods, b.Methods)
}

func allSixAt(t *testing.T, base string) *extauth.Auth {
	t.Helper()
	var extra []extauth.Strategy
	for _, p := range extauth.BuiltinProviders() {
		extra = append(extra, renamed{name: string(p)})
	}
	a, err := extauth.New(nil, extauth.Options{BaseURL: base, CookieKey: testKey, Extra: extra,
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnSuccess: func(http.ResponseWriter, *http.Request, *extauth.Identity) {}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestCallbackURL(t *testing.T) {
	cases := []struct {
		base string
		p    extauth.Provider
		want string
	}{
		{"https://app.example.org", extauth.SAML, "https://app.example.org/users/auth/saml/callback"},
		{"https://app.example.org/", extauth.OIDC, "https://app.example.org/users/auth/oidc/callback"},
		{"https://app.example.org/sub", extauth.Socialnet, "https://app.example.org/sub/users/auth/socialnet/callback"},
		{"http://127.0.0.1:3000", extauth.BlogOAuth2, "http://127.0.0.1:3000/users/auth/blog_oauth2/callback"},
	}
	for _, c := range cases {
		got, err := extauth.CallbackURL(c.base, c.p)
		if err != nil || got != c.want {
			t.Errorf("CallbackURL(%q, %s) = %q, %v; want %q", c.base, c.p, got, err, c.want)
		}
	}
	for _, bad := range []struct {
		base string
		p    extauth.Provider
	}{
		{"", extauth.OIDC},
		{"app.example.org", extauth.OIDC},
		{"ftp://app.example.org", extauth.OIDC},
		{"https://app.example.org?x=1", extauth.OIDC},
		{"https://user@app.example.org", extauth.OIDC},
		{"https://app.example.org", "Bad/Name"},
		{"https://app.example.org", ""},
	} {
		if got, err := extauth.CallbackURL(bad.base, bad.p); err == nil {
			t.Errorf("CallbackURL(%q, %q) = %q, want an error", bad.base, bad.p, got)
		}
	}
}

// The strategy the routes use gets the same callback URL as CallbackURL.
func TestStrategyGetsCallbackURL(t *testing.T) {
	cfg := &extauth.Config{BlogOAuth2: extauth.OAuthProvider{Key: "k", Secret: extauth.NewSecret("s"), Site: "https://blog.example"}}
	a, err := extauth.New(cfg, extauth.Options{BaseURL: "https://app.example/x", CookieKey: testKey,
		OnSuccess: func(http.ResponseWriter, *http.Request, *extauth.Identity) {}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	req := newRequest(http.MethodPost, "https://app.example/users/auth/blog_oauth2.json", nil)
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, req)
	want, _ := extauth.CallbackURL("https://app.example/x", extauth.BlogOAuth2)
	if body := rec.Body.String(); !strings.Contains(body, "redirect_uri="+url.QueryEscape(want)) {
		t.Errorf("authorize answer %s does not carry redirect_uri %s", body, want)
	}
}

// metadataStrategy stands in for the SAML service provider.
type metadataStrategy struct {
	renamed
	doc []byte
	err error
}

func (s metadataStrategy) Metadata() ([]byte, error) { return s.doc, s.err }

func TestSAMLMetadata(t *testing.T) {
	build := func(extra ...extauth.Strategy) *extauth.Auth {
		t.Helper()
		a, err := extauth.New(nil, extauth.Options{BaseURL: "https://app.example", CookieKey: testKey, Extra: extra,
			OnSuccess: func(http.ResponseWriter, *http.Request, *extauth.Identity) {}})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}

	_, err := build().SAMLMetadata()
	if !errors.Is(err, extauth.ErrNotConfigured) || err.Error() != "extauth: saml is not configured" {
		t.Errorf("without SAML: %v", err)
	}
	_, err = build(renamed{name: "saml"}).SAMLMetadata()
	if !errors.Is(err, extauth.ErrNotConfigured) {
		t.Errorf("a saml strategy without metadata: %v", err)
	}
	doc := []byte("<EntityDescriptor/>")
	got, err := build(metadataStrategy{renamed: renamed{name: "saml"}, doc: doc}).SAMLMetadata()
	if err != nil || string(got) != string(doc) {
		t.Errorf("SAMLMetadata = %q, %v", got, err)
	}
	cause := errors.New("cannot marshal")
	_, err = build(metadataStrategy{renamed: renamed{name: "saml"}, err: cause}).SAMLMetadata()
	if !errors.Is(err, cause) || errors.Is(err, extauth.ErrNotConfigured) {
		t.Errorf("a failing strategy: %v", err)
	}
	// Another provider publishing metadata is not the SAML SP.
	_, err = build(metadataStrategy{renamed: renamed{name: "other"}, doc: doc}).SAMLMetadata()
	if !errors.Is(err, extauth.ErrNotConfigured) {
		t.Errorf("metadata of another provider: %v", err)
	}
}

var _ providers.MetadataPublisher = metadataStrategy{}

func TestInspectConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	noEnv := extauth.LookupEnv(nil)

	// A file with problems still yields its configuration, and the very
	// problems LoadConfig reports.
	broken := write("broken.yml", `
blog_oauth2_key: k
blog_oauth2_secret: inspect-secret-value
oidc_client_id: c
oidc_client_secret: s
oidc_issuer: https://id.example
`)
	cfg, problems, err := extauth.InspectConfig(broken, noEnv)
	if err != nil || cfg == nil {
		t.Fatalf("InspectConfig = %v, %v", cfg, err)
	}
	if len(problems) != 1 || problems[0].Key != "blog_oauth2_site" {
		t.Errorf("problems = %v", problems)
	}
	if got := cfg.Providers(); !slices.Equal(got, []extauth.Provider{extauth.OIDC}) {
		t.Errorf("Providers = %v", got)
	}
	_, loadErr := extauth.LoadConfig(broken, noEnv)
	var ve *extauth.ValidationError
	if !errors.As(loadErr, &ve) || !slices.EqualFunc(ve.Problems, problems, func(a, b extauth.Problem) bool { return a.Error() == b.Error() }) {
		t.Errorf("LoadConfig reports %v, InspectConfig %v", loadErr, problems)
	}

	good := write("good.yml", "oidc_client_id: c\noidc_client_secret: s\noidc_issuer: https://id.example\n")
	cfg, problems, err = extauth.InspectConfig(good, noEnv)
	if err != nil || len(problems) != 0 || cfg.OIDC.ClientID != "c" {
		t.Errorf("good file: %v, %v, %v", cfg, problems, err)
	}

	for name, path := range map[string]string{
		"missing":   filepath.Join(dir, "absent.yml"),
		"bad YAML":  write("bad.yml", "a: [b\n"),
		"wrong env": write("env.yml", "production:\n  oidc_client_id: c\n"),
	} {
		cfg, problems, err := extauth.InspectConfig(path, noEnv, extauth.Env("staging"))
		if err == nil || cfg != nil || problems != nil {
			t.Errorf("%s: %v, %v, %v", name, cfg, problems, err)
		}
	}
}

// TestAuthorizeStartRules is the table of docs/security.md: what each start
// request gets, by method, Sec-Fetch-Site, Origin and Referer.
// The answers of the start rules' table (README, docs/security.md).
const (
	start   = "start"
	refuse  = "refuse"
	confirm = "confirm"
)

type startHeaders struct{ site, origin, referer string }

func (h startHeaders) set(req *http.Request) {
	for k, v := range map[string]string{"Sec-Fetch-Site": h.site, "Origin": h.origin, "Referer": h.referer} {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
}

type startRuleCase struct {
	method string
	h      startHeaders
	want   string
}

// startRuleCases is the start rules' table for an application at base
// that trusts the origin trusted: what a sign-in or sign-out start with
// each set of headers gets.
func startRuleCases(base, trusted string) []startRuleCase {
	type hdr = startHeaders
	otherPort := strings.Replace(base, "127.0.0.1:", "127.0.0.1:1", 1)
	return []startRuleCase{
		{"POST", hdr{"same-origin", base, ""}, start},
		{"POST", hdr{"", base, ""}, start},
		{"POST", hdr{"same-origin", "", ""}, start},
		{"GET", hdr{"same-origin", "", ""}, start},
		{"GET", hdr{"none", "", ""}, start},
		{"POST", hdr{"", "", ""}, confirm},
		{"GET", hdr{"", "", ""}, confirm},
		{"GET", hdr{"", "", "https://evil.example/"}, confirm},
		{"GET", hdr{"cross-site", "", ""}, refuse},
		{"POST", hdr{"cross-site", "https://evil.example", ""}, refuse},
		{"GET", hdr{"same-site", "", ""}, refuse},
		{"GET", hdr{"same-site", "", "https://sibling.example.org/page"}, refuse},
		{"POST", hdr{"same-site", "https://sibling.example.org", ""}, refuse},
		{"POST", hdr{"same-site", trusted, ""}, start},
		{"GET", hdr{"same-site", "", trusted + "/login"}, start},
		{"POST", hdr{"cross-site", trusted, ""}, start},
		{"POST", hdr{"", "https://evil.example", ""}, refuse},
		{"POST", hdr{"", "null", ""}, refuse},
		// A page of this origin whose referrer policy is no-referrer:
		// its POSTs carry Origin null, and Sec-Fetch-Site says whose
		// they are.
		{"POST", hdr{"same-origin", "null", ""}, start},
		// A sandboxed frame (an opaque origin) or a redirect through
		// another origin: never same-origin.
		{"POST", hdr{"cross-site", "null", ""}, refuse},
		{"POST", hdr{"same-site", "null", ""}, refuse},
		{"POST", hdr{"", otherPort, ""}, refuse},
		{"GET", hdr{"same-orgin", "", ""}, refuse},
	}
}

func TestAuthorizeStartRules(t *testing.T) {
	const trusted = "https://www.example.org"
	a := newApp(t, func(o *extauth.Options) { o.TrustedOrigins = []string{trusted} })
	cases := startRuleCases(a.URL, trusted)
	for _, tt := range cases {
		t.Run(fmt.Sprintf("%s %+v", tt.method, tt.h), func(t *testing.T) {
			b := harness.NewBrowser(t).NoFollow()
			b.Header = http.Header{}
			req, _ := http.NewRequest(tt.method, a.URL+"/users/auth/blog_oauth2", nil)
			tt.h.set(req)
			resp := b.Do(req)
			switch tt.want {
			case start:
				if resp.StatusCode != http.StatusFound && resp.StatusCode != http.StatusSeeOther {
					t.Fatalf("not started: %d %s", resp.StatusCode, resp.Body)
				}
			case refuse:
				wantCode(t, resp, http.StatusForbidden, "csrf_detected")
				if resp.Header.Get("Set-Cookie") != "" {
					t.Error("a refused start set a cookie")
				}
			case confirm:
				if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Body, `<button type="submit"`) ||
					strings.Contains(resp.Body, "<script") || resp.Header.Get("X-Frame-Options") != "DENY" {
					t.Fatalf("no click-to-continue page that cannot be framed: %d %v\n%s", resp.StatusCode, resp.Header, resp.Body)
				}
				if strings.Contains(resp.Header.Get("Set-Cookie"), "extauth_blog_oauth2") {
					t.Error("a transaction began before the user confirmed")
				}
			}
		})
	}

	// The interstitial's own POST starts the sign-in: by its Origin in a
	// current browser, by the double-submitted token in one that sends no
	// Origin; a token that does not match its cookie gets the page again.
	t.Run("confirming", func(t *testing.T) {
		b := harness.NewBrowser(t).NoFollow()
		b.Header = http.Header{}
		page := b.PostForm(a.URL+"/users/auth/blog_oauth2", url.Values{"return_to": {"/next"}})
		m := regexp.MustCompile(`<form method="post" action="([^"]+)">`).FindStringSubmatch(page.Body)
		tok := regexp.MustCompile(`name="extauth_confirm" value="([^"]+)"`).FindStringSubmatch(page.Body)
		if m == nil || tok == nil || m[1] != "/users/auth/blog_oauth2" || !strings.Contains(page.Body, `name="return_to" value="/next"`) {
			t.Fatalf("interstitial:\n%s", page.Body)
		}
		if c := page.Header.Get("Set-Cookie"); !strings.Contains(c, "SameSite=Strict") || !strings.Contains(c, "HttpOnly") {
			t.Errorf("token cookie %q", c)
		}
		if again := b.PostForm(a.URL+m[1], url.Values{"extauth_confirm": {tok[1] + "x"}}); again.StatusCode != http.StatusOK {
			t.Errorf("a wrong token started a sign-in: %d", again.StatusCode)
		}
		page = b.PostForm(a.URL+"/users/auth/blog_oauth2", url.Values{"return_to": {"/next"}})
		tok = regexp.MustCompile(`name="extauth_confirm" value="([^"]+)"`).FindStringSubmatch(page.Body)
		resp := b.PostForm(a.URL+m[1], url.Values{"extauth_confirm": {tok[1]}, "return_to": {"/next"}})
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("confirmed start: %d %s", resp.StatusCode, resp.Body)
		}
		b.Client.CheckRedirect = nil
		final := b.Get(resp.Header.Get("Location"))
		if final.StatusCode != http.StatusOK || len(a.Ret) != 1 || a.Ret[0] != "/next" {
			t.Fatalf("sign-in after confirming: %d, ReturnTo %v", final.StatusCode, a.Ret)
		}
	})

	t.Run("JSON start without fetch metadata", func(t *testing.T) {
		b := harness.NewBrowser(t).NoFollow()
		b.Header = http.Header{}
		wantCode(t, b.Get(a.URL+"/users/auth/blog_oauth2.json"), http.StatusForbidden, "csrf_detected")
	})

	for _, bad := range []string{"https://www.example.org/path", "HTTPS://WWW.EXAMPLE.ORG", "www.example.org", "https://u@www.example.org"} {
		if _, err := extauth.New(nil, extauth.Options{BaseURL: "https://app.example", CookieKey: testKey, TrustedOrigins: []string{bad}}); err == nil {
			t.Errorf("TrustedOrigins %q accepted", bad)
		}
	}
}

func TestAuthorizeOpenRedirect(t *testing.T) {
	evil := []string{"//evil.example", "/\\evil.example", "/%2F%2Fevil.example", "/%2f%5cevil.example",
		"https://evil.example", "javascript:alert(1)", "http:/evil.example", "\\\\evil.example",
		"/\t/evil.example", " /foo", "evil.example", "/foo\r\nLocation: x",
		// Control characters and spaces encoded once or twice: decoded,
		// browsers drop them and read //evil.example.
		"/%09/evil.example", "/%0a/evil.example", "/%0D/evil.example", "/%09%2Fevil.example", "/%2509/evil.example",
		"/%20/evil.example", "/%5C%5Cevil.example", "//", "//?x", "//#x"}
	for _, v := range evil {
		t.Run(v, func(t *testing.T) {
			a := newApp(t, nil)
			b := harness.NewBrowser(t)
			resp := b.PostForm(a.URL+"/users/auth/blog_oauth2", url.Values{"return_to": {v}})
			if resp.StatusCode != 200 || len(a.Ret) != 1 || a.Ret[0] != "/" {
				t.Fatalf("return_to %q: %d, ReturnTo %v", v, resp.StatusCode, a.Ret)
			}
		})
	}
	for _, ok := range []string{"/", "/a/b?c=d#e", "/%E2%9C%93"} {
		if got := extauth.SafeReturnTo(ok); got != ok {
			t.Errorf("SafeReturnTo(%q) = %q", ok, got)
		}
	}
}

func TestTransactionCookie(t *testing.T) {
	for _, secure := range []bool{false, true} {
		t.Run(fmt.Sprint("https=", secure), func(t *testing.T) {
			base := "http://app.example"
			if secure {
				base = "https://app.example"
			}
			a, err := extauth.New(&extauth.Config{BlogOAuth2: extauth.OAuthProvider{Key: "k", Secret: extauth.NewSecret("s"), Site: "https://blog.example"}},
				extauth.Options{BaseURL: base, CookieKey: testKey, OnSuccess: func(http.ResponseWriter, *http.Request, *extauth.Identity) {}})
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			a.ServeHTTP(rec, newRequest(http.MethodPost, base+"/users/auth/blog_oauth2", nil))
			sc := rec.Header().Values("Set-Cookie")
			if len(sc) != 1 {
				t.Fatalf("Set-Cookie = %q", sc)
			}
			c, err := http.ParseSetCookie(sc[0])
			if err != nil {
				t.Fatal(err)
			}
			if !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/" || c.MaxAge <= 0 || c.MaxAge > 600 || c.Domain != "" {
				t.Errorf("cookie attributes: %s", sc[0])
			}
			if c.Secure != secure || strings.HasPrefix(c.Name, "__Host-") != secure {
				t.Errorf("https=%v but cookie %s", secure, sc[0])
			}
			if len(sc[0]) >= 4096 {
				t.Errorf("cookie is %d bytes", len(sc[0]))
			}
			for _, leak := range []string{"blog_oauth2\"", "verifier", rec.Header().Get("Location")} {
				if strings.Contains(c.Value, leak) {
					t.Errorf("cookie value shows %q", leak)
				}
			}
		})
	}
}

func TestCallbackExpiresCookie(t *testing.T) {
	a := newApp(t, nil)
	b := harness.NewBrowser(t).NoFollow()
	cb := a.approve(b, a.start(b, nil))
	resp := b.Get(cb)
	var expired bool
	for _, sc := range resp.Header.Values("Set-Cookie") {
		c, err := http.ParseSetCookie(sc)
		if err == nil && strings.HasPrefix(c.Name, "extauth_blog_oauth2_") && c.MaxAge < 0 {
			expired = true
		}
	}
	if !expired {
		t.Fatalf("callback did not expire the transaction cookie: %q", resp.Header.Values("Set-Cookie"))
	}
}

func TestNoSecretsInLogs(t *testing.T) {
	a := newApp(t, nil)
	b := harness.NewBrowser(t).NoFollow()
	authURL := a.start(b, nil)
	cb := mustURL(a.approve(b, authURL))
	state, code := cb.Query().Get("state"), cb.Query().Get("code")
	if resp := b.Get(cb.String()); resp.StatusCode != 200 {
		t.Fatal(resp.Body)
	}
	// A failure path too: the same callback again.
	b.Get(cb.String())
	id := a.identities()[0]
	logs := a.Logs.String()
	if !strings.Contains(logs, "invalid_state") {
		t.Fatalf("the failure was not logged: %s", logs)
	}
	for name, v := range map[string]string{"client secret": blogSecret, "state": state, "code": code,
		"access token": id.Tokens.AccessToken, "refresh token": id.Tokens.RefreshToken,
		"challenge": authURL.Query().Get("code_challenge")} {
		if strings.Contains(logs, v) {
			t.Errorf("log shows the %s", name)
		}
		for _, s := range []string{fmt.Sprintf("%v %+v %#v %s", id, id, id, id.Tokens), mustJSON(t, id)} {
			if name != "state" && name != "code" && name != "challenge" && strings.Contains(s, v) {
				t.Errorf("printed identity shows the %s: %s", name, s)
			}
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

type brokenStore struct{}

func (brokenStore) Consume(context.Context, string, time.Time) (bool, error) {
	return false, errors.New("NOAUTH Authentication required")
}

func TestStoreUnavailable(t *testing.T) {
	a := newApp(t, func(o *extauth.Options) { o.Store = brokenStore{} })
	b := harness.NewBrowser(t).NoFollow()
	cb := a.approve(b, a.start(b, nil))
	wantCode(t, b.Get(cb), http.StatusServiceUnavailable, "provider_unavailable")
	if a.Fake.TokenCalls != 0 {
		t.Error("token endpoint called although single use could not be checked")
	}
	if !strings.Contains(a.Logs.String(), "NOAUTH") {
		t.Errorf("the store's error is not in the log: %s", a.Logs.String())
	}
}

// poster starts its sign-ins with a form POSTed to the provider, as SAML's
// HTTP-POST binding does.
type poster struct{}

func (poster) Name() string         { return "poster" }
func (poster) StartsWithPost() bool { return true }
func (poster) Begin(context.Context, *providers.Transaction) (string, error) {
	return "", errors.New("Begin must not be called when StartsWithPost")
}
func (poster) BeginPost(_ context.Context, tx *providers.Transaction) (string, url.Values, error) {
	tx.Binding = "handle-" + tx.ID
	return "https://idp.example/sso?x=1&y=2", url.Values{"SAMLRequest": {`<req a="1">&amp;</req>`}, "RelayState": {tx.Binding}}, nil
}
func (poster) Binding(r *http.Request) string { return r.PostFormValue("RelayState") }
func (poster) Complete(context.Context, *http.Request, *providers.Transaction) (*providers.Identity, error) {
	return &providers.Identity{UID: "posted"}, nil
}

func TestAuthorizeByPost(t *testing.T) {
	a := newApp(t, func(o *extauth.Options) { o.Extra = []extauth.Strategy{poster{}} })
	b := harness.NewBrowser(t).NoFollow()
	b.Header.Set("Sec-Fetch-Site", "same-origin")
	page := b.PostForm(a.URL+"/users/auth/poster", nil)
	if page.StatusCode != http.StatusOK || !strings.HasPrefix(page.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("authorize answered %d %s", page.StatusCode, page.Header.Get("Content-Type"))
	}
	if !strings.Contains(page.Body, `<form method="post" action="https://idp.example/sso?x=1&amp;y=2">`) {
		t.Errorf("no form posting to the IdP in:\n%s", page.Body)
	}
	if !strings.Contains(page.Body, `name="SAMLRequest" value="&lt;req a=&#34;1&#34;&gt;&amp;amp;&lt;/req&gt;"`) {
		t.Errorf("SAMLRequest not escaped as an attribute in:\n%s", page.Body)
	}
	// The one inline script is allowed by its hash, and nothing else is.
	m := regexp.MustCompile(`<script>(.*?)</script>`).FindStringSubmatch(page.Body)
	if m == nil {
		t.Fatalf("no auto-submit script in:\n%s", page.Body)
	}
	sum := sha256.Sum256([]byte(m[1]))
	csp := page.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'") || !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("CSP %q does not pin the script", csp)
	}
	if page.Header.Get("X-Frame-Options") != "DENY" || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("the page may be framed: %v", page.Header)
	}
	relay := regexp.MustCompile(`name="RelayState" value="([^"]+)"`).FindStringSubmatch(page.Body)
	if relay == nil {
		t.Fatal("no RelayState field")
	}
	b.PostForm(a.URL+"/users/auth/poster/callback", url.Values{"RelayState": {relay[1]}})
	if ids := a.identities(); len(ids) != 1 || ids[0].UID != "posted" || ids[0].Provider != "poster" {
		t.Fatalf("hook saw %+v", ids)
	}

	js := b.PostForm(a.URL+"/users/auth/poster.json", nil)
	var got struct {
		PostTo string              `json:"post_to"`
		Form   map[string][]string `json:"form"`
	}
	if err := json.Unmarshal([]byte(js.Body), &got); err != nil || got.PostTo != "https://idp.example/sso?x=1&y=2" || len(got.Form["RelayState"]) != 1 {
		t.Errorf("JSON authorize answered %s (%v)", js.Body, err)
	}
}

// The routes work wherever a router mounts them, once PathPrefix says
// where: a full sign-in through each, with the callback URL under the mount.
func TestMountUnderOtherRouters(t *testing.T) {
	auth := func(o *extauth.Options) { o.PathPrefix = "/auth/" }
	routers := map[string]func(*extauth.Auth) http.Handler{
		"ServeMux": func(a *extauth.Auth) http.Handler {
			mux := http.NewServeMux()
			a.Mount(mux)
			return mux
		},
		"chi Mount": func(a *extauth.Auth) http.Handler {
			r := chi.NewRouter()
			r.Mount("/auth", a)
			return r
		},
		"gorilla PathPrefix": func(a *extauth.Auth) http.Handler {
			r := mux.NewRouter()
			r.PathPrefix("/auth/").Handler(a)
			return r
		},
		"StripPrefix": func(a *extauth.Auth) http.Handler {
			mux := http.NewServeMux()
			mux.Handle("/auth/", http.StripPrefix("/auth", a))
			return mux
		},
	}
	for name, route := range routers {
		t.Run(name, func(t *testing.T) {
			a := newAppOn(t, auth, route)
			a.Fake.RedirectURI = a.URL + "/auth/blog_oauth2/callback"
			b := harness.NewBrowser(t)
			resp := b.PostForm(a.URL+"/auth/blog_oauth2", url.Values{"return_to": {"/next"}})
			if resp.StatusCode != http.StatusOK || len(a.identities()) != 1 || a.Ret[0] != "/next" {
				t.Fatalf("sign-in under /auth/: %d %s, hops %v", resp.StatusCode, resp.Body, b.Hops)
			}
			if !slices.ContainsFunc(b.Hops, func(h string) bool {
				return strings.Contains(h, url.QueryEscape(a.URL+"/auth/blog_oauth2/callback"))
			}) {
				t.Errorf("the provider was not given the callback under /auth/: %v", b.Hops)
			}
		})
	}
}

// A request the routes receive outside their prefix is a mounting mistake:
// a 404 whose log line says which prefix is served.
func TestRequestOutsidePrefixIsLogged(t *testing.T) {
	a := newAppOn(t, nil, func(a *extauth.Auth) http.Handler {
		r := chi.NewRouter()
		r.Mount("/auth", a) // without PathPrefix "/auth/"
		return r
	})
	resp := harness.NewBrowser(t).PostForm(a.URL+"/auth/blog_oauth2", nil)
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("%d", resp.StatusCode)
	}
	logs := a.Logs.String()
	if !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, "prefix=/users/auth/") || !strings.Contains(logs, "path=/auth/blog_oauth2") {
		t.Errorf("no log line naming the prefix served:\n%s", logs)
	}
}

func TestPathPrefixChecked(t *testing.T) {
	for _, bad := range []string{"auth/", "/auth", "/a//b/", "/a/../b/", "/a b/", "/{x}/"} {
		if _, err := extauth.New(nil, extauth.Options{BaseURL: "https://app.example", CookieKey: testKey, PathPrefix: bad}); err == nil {
			t.Errorf("PathPrefix %q accepted", bad)
		}
	}
	routes, err := extauth.Options{BaseURL: "https://app.example/x", PathPrefix: "/auth/", Slugs: map[extauth.Provider]string{extauth.Microblog: "twitter"}}.
		Routes(extauth.Microblog, extauth.SAML)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range routes {
		got = append(got, r.URL)
	}
	want := []string{"https://app.example/x/auth/twitter", "https://app.example/x/auth/twitter/callback",
		"https://app.example/x/auth/saml", "https://app.example/x/auth/saml/callback",
		"https://app.example/x/auth/twitter/logout",
		"https://app.example/x/auth/saml/logout", "https://app.example/x/auth/saml/metadata"}
	if !slices.Equal(got, want) {
		t.Errorf("Options.Routes =\n%q\nwant\n%q", got, want)
	}
}

// Slugs keep the callback URLs an operator registered under other names:
// blog_oauth2 served as /users/auth/wordpress_oauth2, named so in the
// identity, the error and the logs, its hook found by either name.
func TestSlugs(t *testing.T) {
	var hooked []string
	a := newApp(t, func(o *extauth.Options) {
		o.Slugs = map[extauth.Provider]string{extauth.BlogOAuth2: "wordpress_oauth2"}
		o.Callbacks = map[extauth.Provider]extauth.CallbackFunc{extauth.BlogOAuth2: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
			hooked = append(hooked, id.Provider)
		}}
	})
	a.Fake.RedirectURI = a.URL + "/users/auth/wordpress_oauth2/callback"
	b := harness.NewBrowser(t)
	b.PostForm(a.URL+"/users/auth/wordpress_oauth2", nil)
	if !slices.Equal(hooked, []string{"wordpress_oauth2"}) {
		t.Fatalf("hook saw %v", hooked)
	}
	if resp := b.PostForm(a.URL+"/users/auth/blog_oauth2", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("the provider's own name still answers: %d", resp.StatusCode)
	}
	if got := a.Auth.Providers(); !slices.Equal(got, []extauth.Provider{"wordpress_oauth2"}) {
		t.Errorf("Providers() = %v", got)
	}
	wantCode(t, b.Get(a.URL+"/users/auth/wordpress_oauth2/callback.json?state=x"), http.StatusBadRequest, "invalid_state")
	if !strings.Contains(a.Logs.String(), "provider=wordpress_oauth2") {
		t.Errorf("logs do not name the slug:\n%s", a.Logs)
	}
	for _, bad := range []map[extauth.Provider]string{{extauth.Microblog: "Twitter"}, {extauth.Microblog: "x", extauth.Socialnet: "x"}} {
		if _, err := extauth.New(nil, extauth.Options{BaseURL: "https://app.example", CookieKey: testKey, Slugs: bad}); err == nil {
			t.Errorf("Slugs %v accepted", bad)
		}
	}
}

// Every finished sign-in holds an entry in the single-use store until its
// transaction would have expired. The memory store is bounded: at the
// bound a new sign-in is refused with provider_unavailable and a log line
// that says why; no entry is forgotten early (a used callback stays
// refused); once entries expire, sign-ins work again.
func TestMemoryStoreBound(t *testing.T) {
	a := newApp(t, func(o *extauth.Options) {
		o.Store = extauth.NewMemoryStore(extauth.MemoryStoreOptions{MaxEntries: 3, Now: o.Now})
	})
	u := mustURL(a.URL)
	var held []*http.Cookie
	var heldCallback string
	for i := range 3 {
		b := harness.NewBrowser(t).NoFollow()
		cb := a.approve(b, a.start(b, nil))
		if i == 0 {
			held, heldCallback = b.Jar.Cookies(u), cb
		}
		if resp := b.Get(cb); resp.StatusCode != http.StatusOK {
			t.Fatalf("sign-in %d: %d %s", i, resp.StatusCode, resp.Body)
		}
	}
	if strings.Contains(a.Logs.String(), "memory store is full") {
		t.Fatalf("full before the bound: %s", a.Logs.String())
	}

	b := harness.NewBrowser(t).NoFollow()
	wantCode(t, b.Get(a.approve(b, a.start(b, nil))), http.StatusServiceUnavailable, "provider_unavailable")
	logs := a.Logs.String()
	for _, want := range []string{"code=provider_unavailable", "memory store is full", "MaxEntries 3"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log has no %q:\n%s", want, logs)
		}
	}

	// The first sign-in's callback, replayed with its cookie, is still
	// refused as used: nothing was forgotten to make room.
	tokenCalls := a.Fake.TokenCalls
	thief := harness.NewBrowser(t).NoFollow()
	thief.Jar.SetCookies(u, held)
	wantCode(t, thief.Get(heldCallback), http.StatusBadRequest, "invalid_state")
	if a.Fake.TokenCalls != tokenCalls {
		t.Error("token endpoint called for a replayed callback")
	}

	a.clock.Add(extauth.MaxTransactionTTL + time.Millisecond) // entries are held to the millisecond after
	b = harness.NewBrowser(t).NoFollow()
	if resp := b.Get(a.approve(b, a.start(b, nil))); resp.StatusCode != http.StatusOK {
		t.Fatalf("after the entries expired: %d %s", resp.StatusCode, resp.Body)
	}
}

// The authorize route's allocations are guarded, so that they cannot creep
// back (BENCHMARKS.md has the figures).
func TestAuthorizeAllocs(t *testing.T) {
	a, err := extauth.New(&extauth.Config{BlogOAuth2: extauth.OAuthProvider{Key: "k", Secret: extauth.NewSecret("s"), Site: "https://blog.example"}},
		extauth.Options{BaseURL: "https://app.example", CookieKey: testKey, Logger: slog.New(slog.DiscardHandler),
			OnSuccess: func(http.ResponseWriter, *http.Request, *extauth.Identity) {}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	req := newRequest(http.MethodPost, "https://app.example/users/auth/blog_oauth2", nil)
	allocs := testing.AllocsPerRun(200, func() {
		rec := httptest.NewRecorder()
		r := *req
		r.Form, r.PostForm = nil, nil
		a.ServeHTTP(rec, &r)
		if rec.Code != http.StatusSeeOther {
			t.Fatal(rec.Code)
		}
	})
	// 39 today (40 under -race), the recorder and request copy included.
	if allocs > 45 {
		t.Errorf("authorize allocates %.0f times per request, more than the 45 allowed", allocs)
	}
}
