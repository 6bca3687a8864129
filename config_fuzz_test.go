package extauth_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/extauth/extauth"
)

func FuzzParseConfig(f *testing.F) {
	for _, seed := range []string{
		"",
		"microblog_key: k\nmicroblog_secret: s\n",
		"default: &d\n  oidc_issuer: https://id.example.org\nproduction:\n  <<: *d\n  oidc_client_id: c\n  oidc_client_secret: ${S}\n",
		"saml_sp_entity_id: urn:x:y\nsaml_idp_metadata_url: https://i.test/m\nsaml_additional_settings:\n  a: 1\n  <<: {b: 2}\n  security: {logout_requests_signed: 'true'}\n",
		"blog_oauth2_secret: <%= ENV.fetch(\"X\") { \"d\" } %>\nblog_oauth2_key: <%= ENV['Y'] || 'z' %>\n",
		"a: &a {<<: *a}\nproduction: *a\n",
		"shared: {oidc_client_id: c}\nproduction: {oidc_client_secret: s, oidc_issuer: 'http://[::1]'}\n",
		"twiter_key: x\nmicroblog_secert: y\n",
	} {
		f.Add([]byte(seed))
	}
	files, _ := filepath.Glob("testdata/config/*.yml")
	for _, name := range files {
		if data, err := os.ReadFile(name); err == nil {
			f.Add(data)
		}
	}
	const marker = "ZQXJ-env-value"
	lookup := extauth.LookupEnv(func(name string) (string, bool) {
		return marker + "-" + name, name != "UNSET"
	})
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := extauth.ParseConfig(data, extauth.Env("production"), lookup)
		if err != nil {
			if cfg != nil {
				t.Fatal("a Config returned with an error")
			}
			// Variables are values: no error may show one.
			if strings.Contains(err.Error(), marker) && !strings.Contains(string(data), marker) {
				t.Fatalf("error shows a variable's value: %v", err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("ParseConfig accepted a config that does not validate: %v", err)
		}
		for _, w := range cfg.Warnings {
			if strings.Contains(w, marker) && !strings.Contains(string(data), marker) {
				t.Fatalf("warning shows a variable's value: %q", w)
			}
		}
		cfg.Providers()
	})
}
