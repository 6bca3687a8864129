package extauth_test

import (
	"crypto/rand"
	"fmt"
	"net/http"

	"github.com/extauth/extauth"
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
