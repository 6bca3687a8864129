package extauth_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/providers"
	"github.com/extauth/extauth/samlsp"
	"github.com/go-chi/chi/v5"
	"github.com/gorilla/mux"
	"github.com/markbates/goth/providers/github"
	"github.com/markbates/goth/providers/gitlab"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"golang.org/x/oauth2"
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
	// logout https://app.example.org/users/auth/blog_oauth2/logout
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

// ExampleOptions_saml configures the SAML strategy for an older IdP that
// still signs with RSA-SHA1 and verifies only signatures inside the XML.
func ExampleOptions_saml() {
	cfg, err := extauth.LoadConfig("config/secrets.yml")
	if err != nil {
		log.Fatal(err)
	}
	cookieKey := []byte("0123456789abcdef0123456789abcdef")
	onSuccess := func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {}

	auth, err := extauth.New(cfg, extauth.Options{
		BaseURL:   "https://app.example.org",
		CookieKey: cookieKey,
		OnSuccess: onSuccess,
		SAML: samlsp.Options{
			// The IdP signs with RSA-SHA1 and cannot move to RSA-SHA256 yet.
			AllowSHA1: true,
			// The IdP verifies only XML signatures: send AuthnRequests by POST.
			AuthnRequestBinding: samlsp.BindingPOST,
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer auth.Close()
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
	// logout https://app.example.org/users/auth/gitlab/logout
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

// A Consul Democracy-style file: the section comes from RAILS_ENV, the
// providers have Consul's names, ERB sits inside quotes, and tenants
// override the environment's settings.
func ExampleParseConfig_tenants() {
	secrets := []byte(`
default: &default
  secret_key_base: "<%= ENV["SECRET_KEY_BASE"] %>"
production:
  <<: *default
  twitter_key: app-twitter
  twitter_secret: "<%= ENV["TWITTER_SECRET"] %>"
  oidc_client_id: app
  oidc_client_secret: "<%= ENV["OIDC_SECRET"] %>"
  oidc_issuer: https://id.example.org
  tenants:
    city_a:
      oidc_client_id: city-a
      oidc_client_secret: "<%= ENV["CITY_A_OIDC_SECRET"] %>"
    city_b:
      twitter_key: ""
      twitter_secret: ""
`)
	env := map[string]string{"RAILS_ENV": "production", "TWITTER_SECRET": "t", "OIDC_SECRET": "o", "CITY_A_OIDC_SECRET": "a"}
	lookup := func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	}
	cfg, err := extauth.ParseConfig(secrets, extauth.LookupEnv(lookup))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Environment, "from", cfg.EnvironmentSource, cfg.Providers())
	for _, name := range cfg.TenantNames() {
		t := cfg.Tenants[name]
		fmt.Println(name, t.Providers(), t.OIDC.ClientID)
	}
	for i, w := range cfg.Warnings {
		fmt.Println(cfg.WarningLevel(i), w)
	}
	// Output:
	// production from RAILS_ENV [microblog oidc]
	// city_a [microblog oidc] city-a
	// city_b [oidc] app
	// INFO twitter_key, twitter_secret read as microblog_key, microblog_secret (microblog is extauth's name for twitter)
}

// Problems name the tenant they are in, and never a value.
func ExampleProblem_tenant() {
	_, err := extauth.ParseConfig([]byte(`
oidc_client_id: app
oidc_client_secret: s3cret
oidc_issuer: https://id.example.org
tenants:
  city_a:
    oidc_issuer: id.city-a.example.org
`), extauth.LookupEnv(nil))
	var ve *extauth.ValidationError
	if errors.As(err, &ve) {
		for _, p := range ve.Problems {
			fmt.Printf("%s | tenant %s, key %s\n", p, p.Tenant, p.Key)
		}
	}
	// Output:
	// tenants.city_a: oidc: oidc_issuer must be an absolute http or https URL | tenant city_a, key oidc_issuer
}

// appSessions stands for a host's session store: its own session ID (in
// its cookie) to the Identity of the sign-in.
type appSessions struct {
	mu   sync.Mutex
	byID map[string]*extauth.Identity
}

// One set of hooks signs users out through every protocol: the logout
// routes ask Session which provider session to end, a provider's own
// logout (SAML LogoutRequest, OpenID Connect back- or front-channel) calls
// OnProviderLogout, and Done answers the browser when a sign-out ends.
func ExampleLogoutOptions() {
	sessions := &appSessions{byID: map[string]*extauth.Identity{}}
	logout := extauth.LogoutOptions{
		// The browser was sent to /users/auth/<p>/logout by your sign-out
		// button: end your session, and say which provider session to end.
		Session: func(r *http.Request, p extauth.Provider) (extauth.LogoutSession, bool) {
			c, err := r.Cookie("app_session")
			if err != nil {
				return extauth.LogoutSession{}, false
			}
			sessions.mu.Lock()
			defer sessions.mu.Unlock()
			id, ok := sessions.byID[c.Value]
			delete(sessions.byID, c.Value)
			if !ok || id.Provider != string(p) {
				return extauth.LogoutSession{}, false
			}
			return id.LogoutSession(), true
		},
		// The provider says its session ended: end yours, the one of that
		// provider session (e.Session), or all of that user's.
		OnProviderLogout: func(ctx context.Context, e extauth.LogoutEvent) error {
			sessions.mu.Lock()
			defer sessions.mu.Unlock()
			for key, id := range sessions.byID {
				subject := id.UID
				if id.SAML != nil {
					subject = id.SAML.NameID
				}
				if id.Tenant == e.Tenant && id.Provider == string(e.Provider) &&
					(e.Session == "" || e.Session == id.SessionID) && (e.Subject == "" || e.Subject == subject) {
					delete(sessions.byID, key)
				}
			}
			return nil
		},
		// The sign-out is over. err is not nil when the provider's answer
		// could not be verified: then leave the cookie alone, since anyone
		// can send a browser there with a bad one.
		Done: func(w http.ResponseWriter, r *http.Request, err *extauth.Error) {
			if err != nil {
				http.Error(w, "Sign-out could not be confirmed.", err.Code.HTTPStatus())
				return
			}
			http.SetCookie(w, &http.Cookie{Name: "app_session", Path: "/", MaxAge: -1})
			http.Redirect(w, r, extauth.ReturnTo(r), http.StatusSeeOther)
		},
		ReturnTo: "/signed-out",
	}
	cfg, err := extauth.LoadConfig("config/secrets.yml")
	if err != nil {
		log.Fatal(err)
	}
	a, err := extauth.New(cfg, extauth.Options{
		BaseURL:   "https://app.example.org",
		CookieKey: cookieKey(),
		OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
			sessionID := sessions.start(id) // keeps id: its SessionID, its LogoutSession
			http.SetCookie(w, &http.Cookie{Name: "app_session", Value: sessionID, Path: "/", HttpOnly: true, Secure: true})
			http.Redirect(w, r, extauth.ReturnTo(r), http.StatusSeeOther)
		},
		Logout: logout,
	})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	a.Mount(mux)
}

func (s *appSessions) start(id *extauth.Identity) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := fmt.Sprintf("s%d", len(s.byID)+1) // use a random ID in your application
	s.byID[key] = id
	return key
}

func cookieKey() []byte { return make([]byte, 32) }

// A host that ends its session in its own handler sends the browser to the
// provider itself. For OpenID Connect, LogoutURL also sets the cookie that
// binds the returning state to this browser.
func ExampleAuth_LogoutURL() {
	var a *extauth.Auth // from extauth.New, with Options.Logout.Done and ReturnTo
	var current func(*http.Request) *extauth.Identity
	var endSession func(http.ResponseWriter, *http.Request)

	mux := http.NewServeMux()
	mux.HandleFunc("POST /logout", func(w http.ResponseWriter, r *http.Request) {
		id := current(r)
		endSession(w, r) // your own session ends first, whatever the provider does
		if id == nil {
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
		u, err := a.LogoutURL(w, r, extauth.Provider(id.Provider), id.LogoutSession())
		if err != nil {
			// The provider's discovery or metadata cannot be read, say:
			// you are signed out here, not there.
			log.Printf("provider logout: %v", err)
			u = "/"
		}
		http.Redirect(w, r, u, http.StatusSeeOther)
	})
}

// A host that calls an API with the user's tokens renews them through
// extauth: the same HTTP client, time-outs and ID token checks as the
// sign-in.
func ExampleAuth_TokenSource() {
	var a *extauth.Auth
	var id *extauth.Identity // kept from the sign-in (Tenant, Provider, UID and Tokens suffice)
	ctx := context.Background()

	ts, err := a.TokenSource(ctx, id)
	if errors.Is(err, extauth.ErrNoRefresh) {
		log.Printf("%s tokens cannot be renewed: keep using them, or sign in again", id.Provider)
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	resp, err := oauth2.NewClient(ctx, ts).Get("https://api.example.org/v1/me")
	if err != nil {
		var e *extauth.Error
		if errors.As(err, &e) && e.Code == extauth.CodeInvalidResponse {
			log.Printf("the provider refused to renew the tokens: sign in again")
		}
		return
	}
	defer resp.Body.Close()
	// Keep what the source holds now: the provider may have rotated the
	// refresh token, and for OpenID Connect a new, verified ID token is in
	// tok.Extra("id_token").
	tok, err := ts.Token()
	if err == nil {
		id.Tokens.AccessToken, id.Tokens.RefreshToken, id.Tokens.Expiry = tok.AccessToken, tok.RefreshToken, tok.Expiry
	}
}

func ExampleAuth_Client() {
	var a *extauth.Auth
	var id *extauth.Identity // kept from a DPoP sign-in
	ctx := context.Background()

	ts, err := a.TokenSource(ctx, id) // id: Tenant, Provider, UID, Tokens (with DPoPKey)
	if err != nil {
		log.Fatal(err)
	}
	hc, err := a.Client(ctx, id, ts)
	if err != nil {
		log.Fatal(err)
	}
	resp, err := hc.Get("https://api.provider.example/v1/me")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	// Keep the renewed tokens: the provider may have rotated the refresh
	// token. The DPoP key does not change.
	if tok, err := ts.Token(); err == nil {
		id.Tokens.AccessToken, id.Tokens.RefreshToken, id.Tokens.Expiry = tok.AccessToken, tok.RefreshToken, tok.Expiry
	}
}

func ExampleIdentity_LogoutSession() {
	id := &extauth.Identity{
		Provider:  "saml",
		UID:       "ada@example.org",
		SessionID: "_idx-42",
		SAML:      &extauth.SAMLInfo{NameID: "ada@example.org", SessionIndex: "_idx-42"},
	}
	s := id.LogoutSession()
	fmt.Println(s.NameID, s.SessionIndex)
	fmt.Printf("%+v\n", extauth.LogoutSession{IDToken: "eyJhbGciOi..."})
	// Output:
	// ada@example.org _idx-42
	// {IDToken:[REDACTED] NameID: NameIDFormat: NameQualifier: SPNameQualifier: SPProvidedID: NameIDEncrypted:false SessionIndex: IdP:}
}

// One instance keeps its single-use values in memory, at most MaxEntries at
// once; past the bound a new sign-in is refused (provider_unavailable)
// until values expire, and no value is forgotten early.
func ExampleNewMemoryStore() {
	store := extauth.NewMemoryStore(extauth.MemoryStoreOptions{MaxEntries: 2})
	// extauth.New(cfg, extauth.Options{Store: store, ...}) would use it.
	ctx := context.Background()
	until := time.Now().Add(10 * time.Minute)
	for _, key := range []string{"tx:a", "tx:b", "tx:a", "tx:c"} {
		fresh, err := store.Consume(ctx, key, until)
		fmt.Println(key, fresh, err)
	}
	// Output:
	// tx:a true <nil>
	// tx:b true <nil>
	// tx:a false <nil>
	// tx:c false memory store is full: 2 single-use values held, none expired yet (MaxEntries 2)
}

// A high-assurance provider takes a client assertion signed with the
// application's key instead of a secret, pushed and signed authorization
// requests, and encrypts its ID tokens: the file says so in
// oidc_additional_settings, and the key comes from the environment.
func ExampleParseConfig_highAssurance() {
	secrets := []byte(`
oidc_client_id: app
oidc_issuer: https://eid.example.gov
oidc_additional_settings:
  client_auth_method: private_key_jwt
  private_key: <%= ENV["OIDC_PRIVATE_KEY"] %>
  pushed_authorization_requests: true
  request_object: true
  id_token_encrypted_response_alg: RSA-OAEP-256
  id_token_encrypted_response_enc: A256GCM
  acr_values: urn:eid:loa:high
`)
	key, err := exampleKey() // in production: extauth keygen -oidc
	if err != nil {
		log.Fatal(err)
	}
	lookup := func(name string) (string, bool) { return key, name == "OIDC_PRIVATE_KEY" }
	cfg, err := extauth.ParseConfig(secrets, extauth.LookupEnv(lookup))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Providers(), cfg.OIDC.ClientSecret.IsZero(), cfg.OIDC.Additional.PrivateKey)

	// The key must suit the encryption: an EC one does not suit RSA-OAEP-256.
	lookup = func(name string) (string, bool) { return exampleECKey, name == "OIDC_PRIVATE_KEY" }
	_, err = extauth.ParseConfig(secrets, extauth.LookupEnv(lookup))
	fmt.Println(err)
	// Output:
	// [oidc] true [REDACTED]
	// extauth: config: oidc: oidc_additional_settings.id_token_encrypted_response_alg does not suit the EC private_key: use ECDH-ES, ECDH-ES+A128KW, ECDH-ES+A192KW, ECDH-ES+A256KW
}

// exampleKey makes an RSA client key, PEM, as extauth keygen -oidc does.
func exampleKey() (string, error) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", err
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return "", err
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), nil
}

// exampleECKey is an EC P-256 key of the examples only.
const exampleECKey = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgPoWW1GiwCET5v2zS
9MFB4JQKpsOaX1gSZtkO8VnaCdahRANCAAR+4nMfVI5M9V12uFEemKHdGm9eBO/s
yMmwBM6iXn04RBiUQ5f1YuQ61mt6LeC4pz7Af/CuG0h8EG2+6aN1U74/
-----END PRIVATE KEY-----
`

// When a user unlinks the provider, the host revokes the sign-in's
// tokens; under private_key_jwt the revocation carries a client assertion.
func ExampleAuth_RevokeTokens() {
	var a *extauth.Auth
	var id *extauth.Identity // kept from the sign-in (Tenant, Provider, UID and Tokens suffice)
	err := a.RevokeTokens(context.Background(), id)
	switch {
	case errors.Is(err, extauth.ErrNoRevocation):
		log.Printf("%s cannot revoke tokens: forget them", id.Provider)
	case err != nil:
		log.Printf("revocation failed: %v", err)
	}
}

// storedSignIn is a row of an application's own table of sign-ins.
type storedSignIn struct {
	Provider, Tenant, UID string
	Tokens                extauth.Tokens
}

// The one-time migration of tokens stored before v0.3.0
// (docs/upgrading.md).
func ExampleAuth_AdoptTokens() {
	var a *extauth.Auth
	var rows []*storedSignIn // every stored sign-in
	save := func(*storedSignIn) {}
	ctx := context.Background()

	// Once, for every stored sign-in: tokens stored before v0.3.0 get the
	// issuer and tenant they were issued at, and are stored back.
	for _, row := range rows {
		id := &extauth.Identity{Provider: row.Provider, Tenant: row.Tenant, UID: row.UID, Tokens: row.Tokens}
		tokens, err := a.AdoptTokens(ctx, id)
		if err != nil {
			log.Printf("%s at %q: %v", row.Provider, row.Tenant, err)
			continue
		}
		row.Tokens = tokens
		save(row)
	}
}

// Secrets are compared with Equal: == does not compile.
func ExampleSecret_Equal() {
	cfg := &extauth.Config{OIDC: extauth.OIDCConfig{ClientSecret: extauth.NewSecret("s3cr3t")}}
	previous := &extauth.Config{OIDC: extauth.OIDCConfig{ClientSecret: extauth.NewSecret("s3cr3t")}}
	if !cfg.OIDC.ClientSecret.Equal(previous.OIDC.ClientSecret) {
		log.Print("the OpenID Connect client secret changed")
	}
	fmt.Println(cfg.OIDC.ClientSecret.Equal(previous.OIDC.ClientSecret))
	// Output: true
}

// Tracing: extauth's spans go to the host's TracerProvider. A production
// SDK samples parent-based at a low ratio and exports in batches; a span's
// attributes are set when it ends, if it records. TraceStoreCalls adds a
// span per call of a shared store (Redis, PostgreSQL) within a traced
// sign-in.
func ExampleOptions_tracing() {
	spans := tracetest.NewSpanRecorder() // in production: sdktrace.WithBatcher(exporter)
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(1))), // e.g. 0.01
		sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(context.Background())
	a, err := extauth.New(&extauth.Config{BlogOAuth2: extauth.OAuthProvider{Key: "k", Secret: extauth.NewSecret("s"), Site: "https://blog.example"}},
		extauth.Options{
			BaseURL:         "https://app.example.org",
			CookieKey:       make([]byte, 32),
			TracerProvider:  tp,
			Propagator:      propagation.TraceContext{}, // writes traceparent into the requests to providers
			TraceStoreCalls: true,
			OnSuccess:       func(http.ResponseWriter, *http.Request, *extauth.Identity) {},
		})
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	r := httptest.NewRequest(http.MethodPost, "https://app.example.org/users/auth/blog_oauth2", nil)
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	a.ServeHTTP(httptest.NewRecorder(), r)
	for _, s := range spans.Ended() {
		attrs := map[attribute.Key]string{}
		for _, kv := range s.Attributes() {
			attrs[kv.Key] = kv.Value.Emit()
		}
		fmt.Println(s.Name(), attrs["provider"], attrs["outcome"])
	}
	// Output:
	// extauth.authorize blog_oauth2 success
}

// What the oidc client runs with under its profile: what profile: fapi2
// implies, beside what the file gives.
func ExampleOIDCConfig_Applied() {
	cfg, err := extauth.ParseConfig([]byte(`
oidc_client_id: app
oidc_issuer: https://id.example.org
oidc_additional_settings:
  profile: fapi2
  dpop: true
  private_key: ${OIDC_PRIVATE_KEY}
`), extauth.LookupEnv(func(name string) (string, bool) { return exampleECKey, name == "OIDC_PRIVATE_KEY" }))
	if err != nil {
		log.Fatal(err)
	}
	o := cfg.OIDC.Applied()
	fmt.Println(o.AuthMethod, o.PushedAuthorization, o.AssertionAudience, o.DPoPSigningAlg, o.SigningAlgs)
	// Output: private_key_jwt true issuer ES256 [PS256 ES256 EdDSA]
}
