package extauth_test

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/providers"
)

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
		if want := a.Routes(); !slices.EqualFunc(got, want, routeEqual) {
			t.Errorf("%s: RoutesFor = %+v\nAuth.Routes = %+v", base, got, want)
		}
	}
}

// RoutesFor builds no strategy, so it must know which routes the built-in
// ones add (SAML's metadata and logout): hold it to what they serve.
func TestRoutesForMatchesBuiltStrategies(t *testing.T) {
	idp := httptest.NewServer(http.NotFoundHandler())
	defer idp.Close()
	cfg := &extauth.Config{
		Microblog:  extauth.OAuthProvider{Key: "k", Secret: extauth.NewSecret("s")},
		Socialnet:  extauth.OAuthProvider{Key: "k", Secret: extauth.NewSecret("s")},
		BlogOAuth2: extauth.OAuthProvider{Key: "k", Secret: extauth.NewSecret("s"), Site: "https://blog.example"},
		SAML:       extauth.SAMLConfig{SPEntityID: "urn:example:sp", IdPMetadataURL: idp.URL + "/metadata"},
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
	req, _ := http.NewRequest(http.MethodPost, "https://app.example/users/auth/blog_oauth2.json", nil)
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
