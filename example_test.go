package extauth_test

import (
	"fmt"

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
