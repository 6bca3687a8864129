package extauth_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/gorilla/mux"
	"github.com/markbates/goth/providers/github"
	"github.com/markbates/goth/providers/gitlab"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/providers"
)

func ExampleParseConfig() {
	secrets := []byte(`
default: &default
  oidc_issuer: https://id.example.org
production:
  <<: *default
  oidc_client_id: app
  oidc_client_secret: <%= ENV["OIDC_CLIENT_SECRET"] %>
`)
	// A stand-in for os.LookupEnv, the default.
	lookup := func(name string) (string, bool) {
		if name == "OIDC_CLIENT_SECRET" {
			return "s3cret", true
		}
		return "", false
	}
	cfg, err := extauth.ParseConfig(secrets, extauth.Env("production"), extauth.LookupEnv(lookup))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Providers(), cfg.OIDC.ClientID, cfg.OIDC.ClientSecret)

	_, err = extauth.ParseConfig(secrets, extauth.Env("production"), extauth.LookupEnv(nil))
	fmt.Println(err)
	// Output:
	// [oidc] app [REDACTED]
	// extauth: config: oidc: oidc_client_secret is missing (environment variable OIDC_CLIENT_SECRET is not set)
}

// A host loads its secrets, builds an Auth with a hook, and mounts the
// routes on its mux. Routes tells which callback URL to register.
func ExampleNew() {
	cfg, err := extauth.ParseConfig([]byte(`
blog_oauth2_key: my-client-id
blog_oauth2_secret: my-client-secret
blog_oauth2_site: https://blog.example.org
`))
	if err != nil {
		panic(err)
	}
	key := make([]byte, 32) // in production: the same secret key on every instance
	rand.Read(key)
	a, err := extauth.New(cfg, extauth.Options{
		BaseURL:   "https://app.example.org",
		CookieKey: key,
		OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
			// Start the application's own session for (id.Provider, id.UID) here.
			http.Redirect(w, r, extauth.ReturnTo(r), http.StatusSeeOther)
		},
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	a.Mount(mux)
	for _, r := range a.Routes() {
		fmt.Println(r.Purpose, r.URL)
	}
	// Output:
	// authorize https://app.example.org/users/auth/blog_oauth2
	// callback https://app.example.org/users/auth/blog_oauth2/callback
}

// The README's quick start: a host loads its secrets file, builds an Auth
// with its hook, and mounts the routes. It is compiled, not run: it reads
// config/secrets.yml.
func ExampleNew_quickStart() {
	key := make([]byte, 32) // in production: 32 random bytes from your secret store
	mux := http.NewServeMux()
	startSession := func(w http.ResponseWriter, id *extauth.Identity) { /* the host's own session */ }

	cfg, err := extauth.LoadConfig("config/secrets.yml", extauth.Env("production"))
	if err != nil {
		log.Fatal(err) // names every bad or missing key, never a value
	}
	a, err := extauth.New(cfg, extauth.Options{
		BaseURL:   "https://app.example.org", // callback URLs derive from it
		CookieKey: key,                       // 32 random bytes, the same on every instance
		OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
			// id.Provider + id.UID identify the account; trust id.Email only if id.EmailVerified.
			startSession(w, id)
			http.Redirect(w, r, extauth.ReturnTo(r), http.StatusSeeOther)
		},
		// Callbacks: map[extauth.Provider]extauth.CallbackFunc{extauth.SAML: ...} for per-provider hooks,
		// OnFailure: func(w, r, err *extauth.Error) {...} to render failures yourself.
	})
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	a.Mount(mux)
}

// OnFailure receives every failed sign-in as an *Error; errors.Is matches it
// by Code (and by Provider when the target names one).
func ExampleError() {
	onFailure := func(w http.ResponseWriter, r *http.Request, err *extauth.Error) {
		if errors.Is(err, &extauth.Error{Code: extauth.CodeTimeout}) {
			http.Error(w, "The provider is slow to answer; please try again.", err.Code.HTTPStatus())
			return
		}
		http.Error(w, err.Message, err.Code.HTTPStatus()) // Message is safe to show; err.Err is for logs
	}

	for _, err := range []*extauth.Error{
		{Code: extauth.CodeTimeout, Provider: "oidc", Message: "the provider did not answer in time"},
		{Code: extauth.CodeAccessDenied, Provider: "oidc", Message: "sign-in was refused"},
	} {
		rec := httptest.NewRecorder()
		onFailure(rec, httptest.NewRequest(http.MethodGet, "/users/auth/oidc/callback", nil), err)
		fmt.Print(rec.Code, " ", rec.Body.String())
	}
	// Output:
	// 504 The provider is slow to answer; please try again.
	// 403 sign-in was refused
}

// Any of goth's providers mounts beside the built-in ones through
// Options.Extra, at /users/auth/<its name>.
func ExampleOptions_goth() {
	cfg := &extauth.Config{} // the built-in providers the secrets file configures, none here
	key := make([]byte, 32)

	gl := gitlab.New(os.Getenv("GITLAB_KEY"), os.Getenv("GITLAB_SECRET"),
		"https://app.example.org/users/auth/gitlab/callback", "read_user")

	a, err := extauth.New(cfg, extauth.Options{
		BaseURL:   "https://app.example.org",
		CookieKey: key,
		Extra:     []extauth.Strategy{providers.Goth(gl)},
		Callbacks: map[extauth.Provider]extauth.CallbackFunc{
			"gitlab": func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) { /* … */ },
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()
	for _, r := range a.Routes() {
		fmt.Println(r.Purpose, r.URL)
	}
	// Output:
	// authorize https://app.example.org/users/auth/gitlab
	// callback https://app.example.org/users/auth/gitlab/callback
}

// signInAs is a provider for a host's own tests: it signs in whoever starts a
// sign-in as id, at once, so that the host's hooks run through the real
// routes, cookie and checks without a real provider.
type signInAs struct {
	id       providers.Identity
	callback string
}

func (s *signInAs) Name() string { return "test" }

// SetEnv receives the callback URL extauth.New derives from BaseURL.
func (s *signInAs) SetEnv(env providers.Env) { s.callback = env.CallbackURL }

// Begin sends the browser straight back to the callback with the state, as
// a provider does once the user has approved.
func (s *signInAs) Begin(_ context.Context, tx *providers.Transaction) (string, error) {
	return s.callback + "?state=" + url.QueryEscape(tx.State), nil
}

func (s *signInAs) Binding(r *http.Request) string { return r.FormValue("state") }

func (s *signInAs) Complete(context.Context, *http.Request, *providers.Transaction) (*providers.Identity, error) {
	id := s.id
	return &id, nil
}

// A host tests its own hook through the real routes with a provider of its
// own in Options.Extra (docs/testing-your-app.md).
func Example_testYourHook() {
	var signedIn []string
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	a, err := extauth.New(&extauth.Config{}, extauth.Options{
		BaseURL:   srv.URL,
		CookieKey: make([]byte, 32), // a test key
		Extra:     []extauth.Strategy{&signInAs{id: providers.Identity{UID: "ada", Email: "ada@example.org"}}},
		OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
			signedIn = append(signedIn, id.Provider+" "+id.UID) // your hook goes here
			http.Redirect(w, r, extauth.ReturnTo(r), http.StatusSeeOther)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	a.Mount(mux)
	mux.HandleFunc("/settings", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "settings") })

	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	// A browser marks a form post from a page of the site with its Origin.
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/users/auth/test", strings.NewReader("return_to=/settings"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", srv.URL)
	resp, err := browser.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println(signedIn, resp.Request.URL.Path)
	// Output: [test ada] /settings
}

// ExampleAuth_Mount serves the routes on a net/http ServeMux at the default
// /users/auth/.
func ExampleAuth_Mount() {
	a, err := extauth.New(&extauth.Config{}, extauth.Options{BaseURL: "https://app.example.org", CookieKey: make([]byte, 32)})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	a.Mount(mux)
	log.Fatal(http.ListenAndServe(":8080", mux))
}

// The routes under chi's Mount: PathPrefix says where they are, so that
// callback URLs carry it too.
func Example_chi() {
	a, err := extauth.New(&extauth.Config{}, extauth.Options{BaseURL: "https://app.example.org", CookieKey: make([]byte, 32),
		PathPrefix: "/auth/", Extra: []extauth.Strategy{providers.Goth(github.New("id", "secret", ""))},
		OnSuccess: func(http.ResponseWriter, *http.Request, *extauth.Identity) {}})
	if err != nil {
		log.Fatal(err)
	}
	r := chi.NewRouter()
	r.Mount("/auth", a)
	cb, _ := extauth.CallbackURL("https://app.example.org", "github")
	fmt.Println(a.Routes()[1].URL, "not", cb)
	// Output: https://app.example.org/auth/github/callback not https://app.example.org/users/auth/github/callback
}

// The routes under gorilla/mux.
func Example_gorillaMux() {
	a, err := extauth.New(&extauth.Config{}, extauth.Options{BaseURL: "https://app.example.org", CookieKey: make([]byte, 32),
		PathPrefix: "/auth/"})
	if err != nil {
		log.Fatal(err)
	}
	r := mux.NewRouter()
	r.PathPrefix("/auth/").Handler(a)
	log.Fatal(http.ListenAndServe(":8080", r))
}

// The routes under http.StripPrefix: PathPrefix is still where the browser
// sees them.
func Example_stripPrefix() {
	a, err := extauth.New(&extauth.Config{}, extauth.Options{BaseURL: "https://app.example.org", CookieKey: make([]byte, 32),
		PathPrefix: "/auth/"})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/auth/", http.StripPrefix("/auth", a))
	log.Fatal(http.ListenAndServe(":8080", mux))
}

// ExampleAuth_AllowCrossSiteCallbacks keeps Go's cross-origin protection
// around the whole application and lets the IdP's cross-site POSTs through
// to extauth's own checks.
func ExampleAuth_AllowCrossSiteCallbacks() {
	a, err := extauth.New(&extauth.Config{}, extauth.Options{BaseURL: "https://app.example.org", CookieKey: make([]byte, 32)})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	a.Mount(mux)
	cop := http.NewCrossOriginProtection()
	a.AllowCrossSiteCallbacks(cop)
	log.Fatal(http.ListenAndServe(":8080", cop.Handler(mux)))
}

// ExampleOptions_Slugs keeps the callback URL an operator registered with
// Twitter for OmniAuth's twitter strategy.
func ExampleOptions_Slugs() {
	routes, err := extauth.Options{BaseURL: "https://app.example.org",
		Slugs: map[extauth.Provider]string{extauth.Microblog: "twitter"}}.Routes(extauth.Microblog)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(routes[1].URL)
	// Output: https://app.example.org/users/auth/twitter/callback
}

// Tenants on subdomains, from the secrets file's tenants: section and from
// the host's own database.
func Example_tenants() {
	cfg, err := extauth.LoadConfig("config/secrets.yml") // with a tenants: section
	if err != nil {
		log.Fatal(err)
	}
	a, err := extauth.New(cfg, extauth.Options{
		BaseURL:   "https://example.org", // tenants at https://<tenant>.example.org
		CookieKey: key,
		TenantOf:  extauth.SubdomainTenants("example.org"),
		Tenants: extauth.TenantSourceFunc(func(ctx context.Context, tenant string) (*extauth.Config, error) {
			return db.TenantConfig(ctx, tenant) // an error wrapping extauth.ErrUnknownTenant answers 404
		}),
		OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
			// The account is (id.Tenant, id.Provider, id.UID).
			startSession(w, id)
			http.Redirect(w, r, extauth.ReturnTo(r), http.StatusSeeOther)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
}

// ExampleAuth_Invalidate rereads a tenant's configuration after the host's
// admin page changed it.
func ExampleAuth_Invalidate() {
	a, err := extauth.New(&extauth.Config{}, extauth.Options{BaseURL: "https://example.org", CookieKey: key,
		TenantOf: extauth.SubdomainTenants("example.org"), Tenants: db})
	if err != nil {
		log.Fatal(err)
	}
	saveIdPMetadataURL := func(w http.ResponseWriter, r *http.Request) {
		tenant := r.PathValue("tenant")
		if err := db.SetSAMLMetadataURL(r.Context(), tenant, r.FormValue("url")); err != nil {
			http.Error(w, "cannot save", http.StatusInternalServerError)
			return
		}
		a.Invalidate(tenant) // its next sign-in reads the new configuration
	}
	http.HandleFunc("POST /admin/{tenant}/saml", saveIdPMetadataURL)
}

// tenantDB stands in for a host's own database of tenants.
type tenantDB struct{ tenants map[string]*extauth.Config }

func (d *tenantDB) TenantConfig(_ context.Context, tenant string) (*extauth.Config, error) {
	if c, ok := d.tenants[tenant]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("tenant %q: %w", tenant, extauth.ErrUnknownTenant)
}

func (d *tenantDB) LookupTenant(ctx context.Context, tenant string) (*extauth.Config, error) {
	return d.TenantConfig(ctx, tenant)
}

func (d *tenantDB) SetSAMLMetadataURL(_ context.Context, tenant, u string) error {
	c, ok := d.tenants[tenant]
	if !ok {
		return extauth.ErrUnknownTenant
	}
	c.SAML.IdPMetadataURL = u
	return nil
}

var (
	db  = &tenantDB{tenants: map[string]*extauth.Config{}}
	key = make([]byte, 32)
)

func startSession(http.ResponseWriter, *extauth.Identity) {}
