package extauth_test

import (
	"errors"
	"fmt"

	"github.com/extauth/extauth"
)

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
