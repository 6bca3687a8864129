package extauth_test

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/extauth/extauth"
)

// tenantBase is an environment with every provider, for tenants to change.
const tenantBase = `
production:
  microblog_key: mk
  microblog_secret: ms
  microblog_site: https://api.microblog.test
  blog_oauth2_key: bk
  blog_oauth2_secret: bs
  blog_oauth2_site: https://blog.example.org
  saml_sp_entity_id: https://app.example.org/saml
  saml_idp_metadata_url: https://idp.example.org/md
  saml_idp_sso_service_url: https://idp.example.org/sso
  saml_additional_settings:
    organization: base-org
    RelayState: /base
  oidc_client_id: base-client
  oidc_client_secret: base-secret
  oidc_issuer: https://id.example.org
`

func parseTenants(t *testing.T, tenants string, opts ...extauth.ConfigOption) *extauth.Config {
	t.Helper()
	return mustParse(t, tenantBase+"  tenants:\n"+tenants, append([]extauth.ConfigOption{extauth.Env("production")}, opts...)...)
}

func TestTenantOverrides(t *testing.T) {
	cfg := parseTenants(t, `
    same:
    city_a:
      saml_sp_entity_id: https://city-a.example.org/saml
      saml_idp_metadata_url: https://idp.city-a.example.org/md
      saml_idp_sso_service_url: ""
      oidc_client_id: city-a-client
    city-b:
      saml_additional_settings:
        authn_context: urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport
      google_oauth2_key: gk
      google_oauth2_secret: gs
`)
	if got := cfg.TenantNames(); !slices.Equal(got, []string{"city-b", "city_a", "same"}) {
		t.Fatalf("tenants %v", got)
	}

	same := cfg.Tenants["same"]
	if same.Tenant != "same" || !reflect.DeepEqual(same.OIDC, cfg.OIDC) || !reflect.DeepEqual(same.Microblog, cfg.Microblog) ||
		!slices.Equal(same.Providers(), cfg.Providers()) || same.SAML.Additional.RelayState != "/base" {
		t.Errorf("a tenant without entries is not the environment: %+v", same)
	}

	a := cfg.Tenants["city_a"]
	if a.SAML.SPEntityID != "https://city-a.example.org/saml" || a.SAML.IdPMetadataURL != "https://idp.city-a.example.org/md" {
		t.Errorf("city_a: SAML not overridden: %+v", a.SAML)
	}
	if a.SAML.IdPSSOServiceURL != "" {
		t.Errorf("city_a: an empty value did not clear the SSO URL: %q", a.SAML.IdPSSOServiceURL)
	}
	if a.OIDC.ClientID != "city-a-client" || a.OIDC.ClientSecret.Value() != "base-secret" || a.OIDC.Issuer != "https://id.example.org" {
		t.Errorf("city_a: one key overrides one key: %+v", a.OIDC)
	}
	if len(a.SAML.Additional.Custom) != 1 || a.SAML.Additional.RelayState != "/base" {
		t.Errorf("city_a: inherited saml_additional_settings: %+v", a.SAML.Additional)
	}

	b := cfg.Tenants["city-b"]
	// As in Consul (Hash#merge), a tenant's saml_additional_settings
	// replaces the environment's whole.
	if b.SAML.Additional.RelayState != "" || len(b.SAML.Additional.Custom) != 0 || !strings.HasPrefix(b.SAML.Additional.AuthnContext, "urn:") {
		t.Errorf("city-b: saml_additional_settings merged instead of replaced: %+v", b.SAML.Additional)
	}
	want := []extauth.Provider{extauth.Microblog, extauth.SearchOAuth2, extauth.BlogOAuth2, extauth.SAML, extauth.OIDC}
	if got := b.Providers(); !slices.Equal(got, want) {
		t.Errorf("city-b: a tenant adds a provider: %v, want %v", got, want)
	}
	if slices.Contains(cfg.Providers(), extauth.SearchOAuth2) {
		t.Error("a tenant's provider reached the environment")
	}
}

func TestTenantSwitchesProviderOff(t *testing.T) {
	cfg := parseTenants(t, `
    no_microblog:
      microblog_key: ""
      microblog_secret: ""
    no_blog:
      wordpress_oauth2_key: ~
      wordpress_oauth2_secret: ""
      wordpress_oauth2_site: ""
    no_saml:
      saml_sp_entity_id: ""
      saml_idp_metadata_url: ""
    no_oidc:
      oidc_client_id: ""
      oidc_client_secret: ""
      oidc_issuer: ""
    by_variable:
      oidc_client_id: ${UNSET_ID}
      oidc_client_secret: <%= ENV["UNSET_SECRET"] %>
      oidc_issuer: ""
`)
	all := cfg.Providers()
	for name, off := range map[string]extauth.Provider{
		"no_microblog": extauth.Microblog, "no_blog": extauth.BlogOAuth2, "no_saml": extauth.SAML,
		"no_oidc": extauth.OIDC, "by_variable": extauth.OIDC,
	} {
		tc := cfg.Tenants[name]
		want := slices.DeleteFunc(slices.Clone(all), func(p extauth.Provider) bool { return p == off })
		if got := tc.Providers(); !slices.Equal(got, want) {
			t.Errorf("%s: Providers() = %v, want %v", name, got, want)
		}
	}
	// What the tenant did not clear goes with the provider.
	if mb := cfg.Tenants["no_microblog"].Microblog; !reflect.ValueOf(mb).IsZero() {
		t.Errorf("no_microblog keeps %+v", mb)
	}
	if s := cfg.Tenants["no_saml"].SAML; s.IdPSSOServiceURL != "" || len(s.Additional.Custom) != 0 {
		t.Errorf("no_saml keeps %+v", s)
	}
	if w := cfg.Tenants["by_variable"].Warnings; len(w) != 2 || !strings.HasPrefix(w[0], "tenants.by_variable: oidc_client_id: environment variable UNSET_ID is not set") {
		t.Errorf("by_variable warnings %q", w)
	}

	// Clearing only some required settings is a half-filled provider.
	_, err := extauth.ParseConfig([]byte(tenantBase+"  tenants:\n    city_a:\n      oidc_client_secret: ''\n      twitter_key: ''\n"), extauth.Env("production"), vars())
	want := []string{
		"tenants.city_a: microblog: microblog_key is missing (twitter_key in this file)",
		"tenants.city_a: oidc: oidc_client_secret is missing",
	}
	if got := problemStrings(t, err); !slices.Equal(got, want) {
		t.Errorf("problems %q, want %q", got, want)
	}
}

func problemStrings(t *testing.T, err error) []string {
	t.Helper()
	var ve *extauth.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v is not a *ValidationError", err)
	}
	var out []string
	for _, p := range ve.Problems {
		out = append(out, p.Error())
	}
	return out
}

func TestTenantProblems(t *testing.T) {
	t.Run("each names its tenant", func(t *testing.T) {
		_, err := extauth.ParseConfig([]byte(tenantBase+`
  tenants:
    city_a:
      oidc_client_id: ""
      oidc_issuer: not-a-url
    city_b:
      saml_additional_settings: [not, a, mapping]
      socialnet_key: only-a-key
    city_c:
      microblog_secret: <% if true %>x<% end %>
`), extauth.Env("production"), vars())
		want := []string{
			"tenants.city_a: oidc: oidc_client_id is missing",
			"tenants.city_a: oidc: oidc_issuer must be an absolute http or https URL",
			"tenants.city_b: saml: saml_additional_settings must be a mapping",
			"tenants.city_b: socialnet: socialnet_secret is missing",
			"tenants.city_c: microblog: microblog_secret has ERB code, on line 27; only <%= ENV[\"NAME\"] %> look-ups are supported",
		}
		if got := problemStrings(t, err); !slices.Equal(got, want) {
			t.Errorf("problems\n%q\nwant\n%q", got, want)
		}
		var ve *extauth.ValidationError
		errors.As(err, &ve)
		for _, p := range ve.Problems {
			if !strings.HasPrefix(p.Tenant, "city_") || strings.Contains(p.Reason, "city_") {
				t.Errorf("problem %+v: tenant not in its field", p)
			}
		}
	})
	t.Run("the environment's problems are its own", func(t *testing.T) {
		src := "production:\n  oidc_client_id: c\n  tenants:\n    a: {microblog_key: k, microblog_secret: s}\n    b:\n    c: {oidc_client_secret: s, oidc_issuer: https://id.example.org}\n"
		_, err := extauth.ParseConfig([]byte(src), extauth.Env("production"), vars())
		want := []string{"oidc: oidc_client_secret is missing", "oidc: oidc_issuer is missing"}
		if got := problemStrings(t, err); !slices.Equal(got, want) {
			t.Errorf("problems %q, want %q (once, for the environment; c completes it)", got, want)
		}
	})
	t.Run("a tenant that restates the environment's settings", func(t *testing.T) {
		// The secret is read twice, into two Secrets holding one value:
		// equal settings, whose problem is the environment's alone.
		src := "production:\n  blog_oauth2_key: k\n  blog_oauth2_secret: s\n  tenants:\n    a: {blog_oauth2_key: k, blog_oauth2_secret: s}\n"
		_, err := extauth.ParseConfig([]byte(src), extauth.Env("production"), vars())
		want := []string{"blog_oauth2: blog_oauth2_site is missing"}
		if got := problemStrings(t, err); !slices.Equal(got, want) {
			t.Errorf("problems %q, want %q (once, for the environment)", got, want)
		}
	})
	t.Run("names and shapes", func(t *testing.T) {
		for src, want := range map[string]string{
			"tenants: [a, b]\n":                                 "tenants must be a mapping of tenant names to their settings",
			"tenants:\n  City_A: {}\n":                          `tenants has a tenant named "City_A"; a tenant name is 1 to 63 lowercase letters`,
			"tenants:\n  -a: {}\n":                              `tenants has a tenant named "-a"`,
			"tenants:\n  a.b: {}\n":                             `tenants has a tenant named "a.b"`,
			"tenants:\n  \"a\\nb\": {}\n":                       `tenants has a tenant named "a\nb"`,
			"tenants:\n  " + strings.Repeat("a", 64) + ": {}\n": "tenants has a tenant named",
			"tenants:\n  a: {}\n  a: {}\n":                      "tenants gives tenant a more than once",
			"tenants:\n  a: 3\n":                                "tenants.a: must be a mapping of settings",
			"tenants:\n  a: {tenants: {b: {}}}\n":               "",
		} {
			cfg, err := extauth.ParseConfig([]byte("oidc_client_id: c\noidc_client_secret: s\noidc_issuer: https://id.example.org\n"+src), vars())
			switch {
			case want == "" && err != nil:
				t.Errorf("%q: %v", src, err)
			case want == "":
				if w := cfg.Warnings; len(w) != 1 || w[0] != "tenants.a: tenants cannot be nested; this tenants: is ignored" {
					t.Errorf("%q: warnings %q", src, w)
				}
			case err == nil || !strings.Contains(err.Error(), want):
				t.Errorf("%q: err = %v, want %q", src, err, want)
			}
		}
		for _, name := range []string{"a", "city_a", "city-b", "0", "x1", strings.Repeat("z", 63)} {
			if !extauth.ValidTenantName(name) {
				t.Errorf("ValidTenantName(%q) = false", name)
			}
		}
		for _, name := range []string{"", "A", "a_", "_a", "a-", "a b", "a.b", "é", "a/b", strings.Repeat("z", 64)} {
			if extauth.ValidTenantName(name) {
				t.Errorf("ValidTenantName(%q) = true", name)
			}
		}
	})
	t.Run("empty tenants", func(t *testing.T) {
		for _, v := range []string{"", " ~", " {}", " ''"} {
			cfg := mustParse(t, "oidc_client_id: c\noidc_client_secret: s\noidc_issuer: https://id.example.org\ntenants:"+v+"\n")
			if len(cfg.Tenants) != 0 {
				t.Errorf("%q: %v", v, cfg.Tenants)
			}
		}
	})
}

func TestTenantsReadAsTheEnvironment(t *testing.T) {
	cfg := parseTenants(t, `
    city_a:
      <<: {oidc_client_id: merged, oidc_issuer: https://merged.example.org}
      twitter_key: "<%= ENV["CITY_A_TWITTER"] %>"
      oidc_client_secret: ${CITY_A_OIDC}
      oidc_issuer: http://plain.example.org
      smtp_password: not-ours
      oidc_clent_id: typo
`, vars("CITY_A_TWITTER", "a-twitter", "CITY_A_OIDC", "a-oidc"))
	a := cfg.Tenants["city_a"]
	if a.Microblog.Key != "a-twitter" || a.OIDC.ClientSecret.Value() != "a-oidc" || a.OIDC.ClientID != "merged" || a.OIDC.Issuer != "http://plain.example.org" {
		t.Errorf("city_a: %+v %+v", a.Microblog, a.OIDC)
	}
	want := []string{
		"tenants.city_a: oidc_clent_id is not an extauth setting and is ignored; did you mean oidc_client_id?",
		"tenants.city_a: oidc_issuer uses plain http outside localhost; use https",
	}
	if !slices.Equal(a.Warnings, want) {
		t.Errorf("tenant warnings %q, want %q", a.Warnings, want)
	}
	// The file's warnings hold the tenant's, and the one note on aliases.
	wantAll := append(slices.Clone(want), "twitter_key read as microblog_key (microblog is extauth's name for twitter)")
	if !slices.Equal(cfg.Warnings, wantAll) {
		t.Errorf("warnings %q, want %q", cfg.Warnings, wantAll)
	}
}

func TestTenantsAreIndependent(t *testing.T) {
	cfg := parseTenants(t, "    a:\n    b:\n")
	a, b := cfg.Tenants["a"], cfg.Tenants["b"]
	a.SAML.Additional.Custom = append(a.SAML.Additional.Custom, extauth.Param{Name: "x", Value: "y"})
	a.OIDC.ClientID = "changed"
	if len(b.SAML.Additional.Custom) != 1 || len(cfg.SAML.Additional.Custom) != 1 || b.OIDC.ClientID != "base-client" || cfg.OIDC.ClientID != "base-client" {
		t.Error("changing one tenant's configuration changed another's")
	}
}

func TestValidateTenantsBuiltInCode(t *testing.T) {
	s := extauth.NewSecret("s")
	base := extauth.Config{OIDC: extauth.OIDCConfig{ClientID: "c", ClientSecret: s, Issuer: "https://id.example.org"}}
	good := base
	good.Tenant = "good"
	half := base
	half.Microblog.Key = "k"
	cfg := base
	cfg.Tenants = map[string]*extauth.Config{"good": &good, "half": &half, "Bad Name": &good, "nil": nil}
	got := problemStrings(t, cfg.Validate())
	want := []string{
		`tenants has a tenant named "Bad Name"; a tenant name is 1 to 63 lowercase letters, digits, - and _, starting and ending with a letter or digit`,
		"tenants.half: microblog: microblog_secret is missing",
		"tenants.nil: has a nil configuration",
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems\n%q\nwant\n%q", got, want)
	}
	delete(cfg.Tenants, "Bad Name")
	delete(cfg.Tenants, "nil")
	half.Microblog.Secret = s
	if err := cfg.Validate(); err != nil {
		t.Errorf("valid tenants: %v", err)
	}
}

// BenchmarkLoad10000Tenants loads a file whose production environment has
// 10,000 tenants, each with its own SAML IdP, OIDC client (its secret from
// the environment) and microblog key, beside the same environment without
// tenants, and beside yaml.v3 parsing the file alone, which is the floor.
// retained-B/op is the heap the loaded configuration holds.
func BenchmarkLoad10000Tenants(b *testing.B) {
	file := func(secret string) []byte {
		var sb strings.Builder
		sb.WriteString(tenantBase + "  tenants:\n")
		for i := range 10_000 {
			fmt.Fprintf(&sb, "    tenant%d:\n      saml_idp_metadata_url: https://idp%d.example.org/md\n      oidc_client_id: client-%d\n"+
				"      oidc_client_secret: \""+secret+"\"\n      twitter_key: tk%d\n", i, i, i, i, i)
		}
		return []byte(sb.String())
	}
	withTenants := file(`<%%= ENV["T%d_SECRET"] %%>`)
	// yaml.v3 alone cannot read ERB inside quotes: the floor is the same
	// file with the secrets written out.
	plain := file("secret-of-%d")
	lookup := extauth.LookupEnv(func(string) (string, bool) { return "s", true })
	for _, bc := range []struct {
		name string
		data []byte
		n    int
	}{{"tenants=0", []byte(tenantBase), 0}, {"tenants=10000", withTenants, 10_000}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.data)))
			b.ReportAllocs()
			var cfg *extauth.Config
			for b.Loop() {
				var err error
				cfg, err = extauth.ParseConfig(bc.data, extauth.Env("production"), lookup)
				if err != nil {
					b.Fatal(err)
				}
				if len(cfg.Tenants) != bc.n {
					b.Fatalf("%d tenants", len(cfg.Tenants))
				}
			}
			b.ReportMetric(float64(retained(func() any {
				cfg, _ := extauth.ParseConfig(bc.data, extauth.Env("production"), lookup)
				return cfg
			})), "retained-B/op")
		})
	}
	b.Run("yaml.v3 alone, tenants=10000", func(b *testing.B) {
		b.SetBytes(int64(len(plain)))
		b.ReportAllocs()
		for b.Loop() {
			var doc yaml.Node
			if err := yaml.Unmarshal(plain, &doc); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// retained returns the heap that what make returns keeps alive.
func retained(make func() any) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v := make()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(v)
	if after.HeapAlloc < before.HeapAlloc {
		return 0
	}
	return after.HeapAlloc - before.HeapAlloc
}
