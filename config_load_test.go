package extauth_test

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/internal/loadtest"
)

// vars is a hermetic stand-in for the process environment.
func vars(kv ...string) extauth.ConfigOption {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return extauth.LookupEnv(func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	})
}

func mustParse(t *testing.T, src string, opts ...extauth.ConfigOption) *extauth.Config {
	t.Helper()
	cfg, err := extauth.ParseConfig([]byte(src), append([]extauth.ConfigOption{vars()}, opts...)...)
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	return cfg
}

// problemKeys returns the keys named by the *ValidationError in err.
func problemKeys(t *testing.T, err error) []string {
	t.Helper()
	var ve *extauth.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v is not a *ValidationError", err)
	}
	var keys []string
	for _, p := range ve.Problems {
		keys = append(keys, p.Key)
	}
	return keys
}

func TestLoadLegacyFile(t *testing.T) {
	cfg, err := extauth.LoadConfig("testdata/config/legacy.yml", vars())
	if err != nil {
		t.Fatal(err)
	}
	want := []extauth.Provider{extauth.Microblog, extauth.Socialnet, extauth.SearchOAuth2, extauth.BlogOAuth2}
	if got := cfg.Providers(); !slices.Equal(got, want) {
		t.Errorf("Providers() = %v, want %v", got, want)
	}
	if cfg.SAML.Configured() || cfg.OIDC.Configured() {
		t.Error("saml or oidc configured by a four-provider file")
	}
	if cfg.Socialnet.Key != "1234567890" {
		t.Errorf("numeric socialnet_key read as %q", cfg.Socialnet.Key)
	}
	if cfg.Microblog.Secret.Value() != "legacy-microblog-secret" || cfg.BlogOAuth2.Site != "https://blog.example.com" {
		t.Errorf("values not read: %q %q", cfg.Microblog.Secret.Value(), cfg.BlogOAuth2.Site)
	}
	if len(cfg.Warnings) != 0 {
		t.Errorf("warnings for a clean file: %q", cfg.Warnings)
	}
}

func TestLoadFullFile(t *testing.T) {
	cfg, err := extauth.LoadConfig("testdata/config/full.yml", vars())
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Providers(); !slices.Equal(got, extauth.BuiltinProviders()) {
		t.Errorf("Providers() = %v, want all six", got)
	}
	if len(cfg.Warnings) != 0 {
		t.Errorf("warnings for a clean file: %q", cfg.Warnings)
	}
	a := cfg.SAML.Additional
	if a.RelayState != "/dashboard" || !strings.HasPrefix(a.AuthnContext, "urn:oasis:") || !a.Security.LogoutRequestsSigned {
		t.Errorf("additional settings not read: %+v", a)
	}
	wantCustom := []extauth.Param{{Name: "organization", Value: "example-org"}, {Name: "tenant", Value: "42"}, {Name: "locale", Value: "en"}}
	if !slices.Equal(a.Custom, wantCustom) {
		t.Errorf("Custom = %v, want %v (file order)", a.Custom, wantCustom)
	}
	if !strings.HasPrefix(a.Certificate, "-----BEGIN CERTIFICATE-----\n") || !strings.HasSuffix(a.Certificate, "-----END CERTIFICATE-----\n") {
		t.Errorf("certificate lost its PEM lines: %q", a.Certificate)
	}
	if strings.Count(a.PrivateKey.Value(), "\n") < 20 {
		t.Error("private key lost its newlines")
	}
	cert, key, err := a.KeyPair()
	if err != nil {
		t.Fatalf("KeyPair: %v", err)
	}
	if cert.Subject.CommonName != "extauth-test" || key.N.BitLen() != 2048 {
		t.Errorf("key pair: CN %q, %d bits", cert.Subject.CommonName, key.N.BitLen())
	}
	if days := cert.NotAfter.Sub(cert.NotBefore) / (24 * time.Hour); days != 3650 {
		t.Errorf("certificate valid %d days, want 3650", days)
	}
	if cfg.OIDC.Issuer != "https://id.example.org" || cfg.OIDC.ClientSecret.Value() != "full-oidc-secret" {
		t.Errorf("oidc not read: %+v", cfg.OIDC)
	}
	if cfg.Microblog.Site != "https://api.microblog.test" {
		t.Errorf("extension microblog_site not read: %q", cfg.Microblog.Site)
	}
}

func TestLoadRailsFile(t *testing.T) {
	const path = "testdata/config/rails.yml"
	t.Run("development", func(t *testing.T) {
		cfg, err := extauth.LoadConfig(path, vars("MICROBLOG_KEY", "mk", "MICROBLOG_SECRET", "ms"))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := cfg.Providers(), []extauth.Provider{extauth.Microblog, extauth.OIDC}; !slices.Equal(got, want) {
			t.Errorf("Providers() = %v, want %v", got, want)
		}
		if cfg.Microblog.Key != "mk" || cfg.Microblog.Secret.Value() != "ms" {
			t.Errorf("merged ERB look-ups: %q %q", cfg.Microblog.Key, cfg.Microblog.Secret.Value())
		}
		if cfg.OIDC.ClientSecret.Value() != "dev-oidc-secret" {
			t.Errorf("ENV.fetch default not used: %q", cfg.OIDC.ClientSecret.Value())
		}
		want := []string{
			"search_oauth2_key: environment variable SEARCH_OAUTH2_KEY is not set",
			"search_oauth2_secret: environment variable SEARCH_OAUTH2_SECRET is not set",
		}
		if !slices.Equal(cfg.Warnings, want) {
			t.Errorf("Warnings = %q, want %q", cfg.Warnings, want)
		}
	})
	t.Run("production from EXTAUTH_ENV", func(t *testing.T) {
		cfg, err := extauth.LoadConfig(path, vars(
			"EXTAUTH_ENV", "production",
			"BLOG_OAUTH2_KEY", "bk", "BLOG_OAUTH2_SECRET", "bs", "BLOG_HOST", "blog.example.com",
			"SEARCH_OAUTH2_KEY", "gk", "SEARCH_OAUTH2_SECRET", "gs",
			"OIDC_CLIENT_SECRET", "os",
		))
		if err != nil {
			t.Fatal(err)
		}
		want := []extauth.Provider{extauth.SearchOAuth2, extauth.BlogOAuth2, extauth.SAML, extauth.OIDC}
		if got := cfg.Providers(); !slices.Equal(got, want) {
			t.Errorf("Providers() = %v, want %v", got, want)
		}
		if cfg.BlogOAuth2.Site != "https://blog.example.com" || cfg.SearchOAuth2.Key != "gk" {
			t.Errorf("${VAR} look-ups: %q %q", cfg.BlogOAuth2.Site, cfg.SearchOAuth2.Key)
		}
		if cfg.OIDC.ClientID != "prod-client" {
			t.Errorf(`ENV["X"] || "default": %q`, cfg.OIDC.ClientID)
		}
		if cfg.SAML.Additional.RelayState != "https://app.example.org/welcome" {
			t.Errorf("section's own saml_additional_settings not used: %+v", cfg.SAML.Additional)
		}
	})
	t.Run("Env option wins over EXTAUTH_ENV", func(t *testing.T) {
		cfg, err := extauth.LoadConfig(path, extauth.Env("test"), vars("EXTAUTH_ENV", "production"))
		if err != nil {
			t.Fatal(err)
		}
		if len(cfg.Providers()) != 0 {
			t.Errorf("test section configured %v", cfg.Providers())
		}
	})
	t.Run("production without its variables", func(t *testing.T) {
		_, err := extauth.LoadConfig(path, extauth.Env("production"), vars())
		keys := problemKeys(t, err)
		for _, k := range []string{"blog_oauth2_key", "oidc_client_secret", "blog_oauth2_secret"} {
			if !slices.Contains(keys, k) {
				t.Errorf("problem for %s missing from %v", k, keys)
			}
		}
		if !errors.Is(err, extauth.ErrTemplate) || !errors.Is(err, extauth.ErrMissingSetting) {
			t.Errorf("error classes not found in %v", err)
		}
		if !strings.Contains(err.Error(), "testdata/config/rails.yml") {
			t.Errorf("LoadConfig error does not name the file: %v", err)
		}
	})
	t.Run("unknown environment", func(t *testing.T) {
		_, err := extauth.LoadConfig(path, extauth.Env("staging"), vars())
		if !errors.Is(err, extauth.ErrUnknownEnvironment) {
			t.Fatalf("err = %v, want ErrUnknownEnvironment", err)
		}
		for _, s := range []string{`"staging" (chosen with the Env option)`, "environments are development, test, production (anchors of shared values, not environments: default)"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("error %q does not contain %q", err, s)
			}
		}
	})
}

func TestLoadConfigMissingFile(t *testing.T) {
	_, err := extauth.LoadConfig("testdata/config/no-such-file.yml")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want fs.ErrNotExist", err)
	}
}

func TestDefaultEnvironmentIsDevelopment(t *testing.T) {
	src := "development:\n  oidc_client_id: dev\nproduction:\n  oidc_client_id: prod\n"
	// A partly filled oidc names the section that was read.
	_, err := extauth.ParseConfig([]byte(src), vars())
	if keys := problemKeys(t, err); !slices.Equal(keys, []string{"oidc_client_secret", "oidc_issuer"}) {
		t.Errorf("keys = %v", keys)
	}
	_, err = extauth.ParseConfig([]byte(src), vars("EXTAUTH_ENV", ""))
	if err == nil {
		t.Error("empty EXTAUTH_ENV did not fall back to development")
	}
}

func TestFlatOrSectioned(t *testing.T) {
	t.Run("one of our keys makes a file flat", func(t *testing.T) {
		cfg := mustParse(t, "secret_key_base: x\nmicroblog_site: https://m.test\nmicroblog_key: k\nmicroblog_secret: s\nproduction:\n  microblog_key: other\n",
			extauth.Env("production"))
		if cfg.Microblog.Key != "k" {
			t.Errorf("flat file read as sectioned: %q", cfg.Microblog.Key)
		}
	})
	t.Run("only unrelated keys", func(t *testing.T) {
		_, err := extauth.ParseConfig([]byte("secret_key_base: x\nsmtp_password: y\n"), vars())
		if !errors.Is(err, extauth.ErrUnknownEnvironment) || !strings.Contains(err.Error(), "neither settings") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("null section", func(t *testing.T) {
		cfg := mustParse(t, "development:\nproduction:\n  oidc_client_id: x\n")
		if len(cfg.Providers()) != 0 || len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0], "environment development has no extauth settings") {
			t.Errorf("providers %v warnings %q", cfg.Providers(), cfg.Warnings)
		}
	})
	t.Run("section that is not a mapping is not a section", func(t *testing.T) {
		_, err := extauth.ParseConfig([]byte("development: 3\nproduction: {}\n"), vars())
		if !errors.Is(err, extauth.ErrUnknownEnvironment) || !strings.HasSuffix(err.Error(), "environments are production") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("environment given twice", func(t *testing.T) {
		_, err := extauth.ParseConfig([]byte("development: {}\ndevelopment: {}\n"), vars())
		if err == nil || !strings.Contains(err.Error(), "environment development is given more than once") {
			t.Errorf("err = %v", err)
		}
	})
}

func TestEmptyFiles(t *testing.T) {
	for _, src := range []string{"", "---\n", "# nothing\n", "{}", "~"} {
		cfg, err := extauth.ParseConfig([]byte(src), vars())
		if src == "{}" {
			// An empty mapping has no settings, so it is taken as sectioned.
			if !errors.Is(err, extauth.ErrUnknownEnvironment) {
				t.Errorf("%q: err = %v", src, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", src, err)
			continue
		}
		if len(cfg.Providers()) != 0 || len(cfg.Warnings) != 1 {
			t.Errorf("%q: providers %v, warnings %q", src, cfg.Providers(), cfg.Warnings)
		}
	}
}

func TestTopLevelMustBeMapping(t *testing.T) {
	for _, src := range []string{"- a\n- b\n", "just text\n"} {
		if _, err := extauth.ParseConfig([]byte(src), vars()); err == nil || !strings.Contains(err.Error(), "top level") {
			t.Errorf("%q: err = %v", src, err)
		}
	}
}

func TestScalarValues(t *testing.T) {
	cfg := mustParse(t, `
microblog_key: 12345
microblog_secret: 1.5e3
socialnet_key: true
socialnet_secret: 0x1F
search_oauth2_key: null
search_oauth2_secret: ~
blog_oauth2_key: ""
blog_oauth2_secret:
oidc_client_id: "null"
oidc_client_secret: 2026-01-02
oidc_issuer: 'https://id.example.org'
`)
	got := []string{
		cfg.Microblog.Key, cfg.Microblog.Secret.Value(), cfg.Socialnet.Key, cfg.Socialnet.Secret.Value(),
		cfg.SearchOAuth2.Key, cfg.SearchOAuth2.Secret.Value(), cfg.BlogOAuth2.Key, cfg.BlogOAuth2.Secret.Value(),
		cfg.OIDC.ClientID, cfg.OIDC.ClientSecret.Value(),
	}
	want := []string{"12345", "1.5e3", "true", "0x1F", "", "", "", "", "null", "2026-01-02"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}

	for _, src := range []string{
		"microblog_key: !!binary aGVsbG8=\n",
		"microblog_key: !custom x\n",
		"microblog_key: {a: b}\n",
		"microblog_key:\n  - a\n",
	} {
		_, err := extauth.ParseConfig([]byte(src), vars())
		if keys := problemKeys(t, err); !slices.Equal(keys, []string{"microblog_key"}) || !errors.Is(err, extauth.ErrInvalidSetting) {
			t.Errorf("%q: keys %v, err %v", src, keys, err)
		}
	}
}

// valueContexts writes a microblog_key of "k" followed by v in each YAML
// context a value can take. ERB runs before YAML, so v is written raw, as
// Rails reads it; the k prefix keeps the key set when v comes out empty.
var valueContexts = map[string]func(v string) string{
	"plain":         func(v string) string { return "microblog_key: k" + v + "\nmicroblog_secret: s\n" },
	"single-quoted": func(v string) string { return "microblog_key: 'k" + v + "'\nmicroblog_secret: s\n" },
	"double-quoted": func(v string) string { return "microblog_key: \"k" + v + "\"\nmicroblog_secret: s\n" },
	"flow mapping":  func(v string) string { return "{microblog_key: \"k" + v + "\", microblog_secret: s}\n" },
	"block scalar":  func(v string) string { return "microblog_secret: s\nmicroblog_key: |-\n  k" + v + "\n" },
}

func TestVariableSubstitution(t *testing.T) {
	env := vars("A", "alpha", "EMPTY", "", "TRICKY", "x\nmicroblog_secret: injected", "NESTED", "${A}", "NUM", "007",
		"QUOTES", `a"b'c\d`, "YAML", "a: b\n- c # d", "ERB", `<%= ENV["A"] %>`)
	tests := []struct{ in, want string }{
		{`${A}`, "alpha"},
		{`pre-${A}-post`, "pre-alpha-post"},
		{`${A}${A}`, "alphaalpha"},
		{`<%= ENV["A"] %>`, "alpha"},
		{`<%= ENV['A'] %>`, "alpha"},
		{`<%=ENV["A"]%>`, "alpha"},
		{`<%= ENV["A"] -%>`, "alpha"},
		{`<%= ENV["A"] %><%= ENV["A"] %>`, "alphaalpha"},
		{`<%= ENV["UNSET"] %>`, ""},
		{`<%= ENV["UNSET"] || "dflt" %>`, "dflt"},
		{`<%= ENV["EMPTY"] || "dflt" %>`, ""},
		{`<%= ENV.fetch("A", "dflt") %>`, "alpha"},
		{`<%= ENV.fetch("UNSET", "dflt") %>`, "dflt"},
		{`<%= ENV.fetch('UNSET', 'dflt') %>`, "dflt"},
		{`<%= ENV.fetch("UNSET", nil) %>`, ""},
		{`<%= ENV.fetch("UNSET") { "dflt" } %>`, "dflt"},
		{`<%= ENV.fetch("A") %>`, "alpha"},
		{`<%# a comment %>`, ""},
		{`${NESTED}`, "${A}"},
		{`<%= ENV["NESTED"] %>`, "${A}"},
		{`<%= ENV["ERB"] %>`, `<%= ENV["A"] %>`},
		{`${NUM}`, "007"},
		{`$${A}`, "${A}"},
		{`<%%= literal %>`, "<%= literal %>"},
		{`cost $5 <3`, "cost $5 <3"},
		{`${TRICKY}`, "x\nmicroblog_secret: injected"},
		{`<%= ENV["TRICKY"] %>`, "x\nmicroblog_secret: injected"},
		// A value is taken verbatim, whatever the quoting around the tag:
		// YAML never reads it, so it needs no escaping and can add nothing.
		{`<%= ENV["QUOTES"] %>`, `a"b'c\d`},
		{`<%= ENV["YAML"] %>`, "a: b\n- c # d"},
	}
	for name, ctx := range valueContexts {
		for _, tt := range tests {
			cfg, err := extauth.ParseConfig([]byte(ctx(tt.in)), env)
			if err != nil {
				t.Errorf("%s %s: %v", name, tt.in, err)
				continue
			}
			if cfg.Microblog.Key != "k"+tt.want {
				t.Errorf("%s %s = %q, want %q", name, tt.in, cfg.Microblog.Key[1:], tt.want)
			}
			if cfg.Microblog.Secret.Value() != "s" {
				t.Errorf("%s %s: a variable changed the structure of the file", name, tt.in)
			}
		}
	}

	bad := []string{
		`<% if true %>x<% end %>`,
		`<%- if true -%>x<% end %>`,
		`<%= ENV["A"]`,
		`<%= 1 + 1 %>`,
		`<%= ENV["A"].upcase %>`,
		`<%= Rails.application.credentials.key %>`,
		`<%= ENV["A\n"] %>`,
		`<%= ENV["#{x}"] %>`,
		`<%= ENV.fetch("A") { |k| k } %>`,
		`<%= ENV.fetch("A", "b", "c") %>`,
		`<%= ENV["1A"] %>`,
		`<%== ENV["A"] %>`,
		`${A`,
		`${}`,
		`${A-B}`,
		`${A:-x}`,
	}
	for name, ctx := range valueContexts {
		for _, in := range bad {
			src := ctx(in)
			_, err := extauth.ParseConfig([]byte(src), env)
			if !errors.Is(err, extauth.ErrTemplate) {
				t.Errorf("%s %s: err %v", name, in, err)
				continue
			}
			line := "line 1"
			if name == "block scalar" {
				line = "line 3"
			}
			if strings.Contains(in, "<%") && !strings.Contains(err.Error(), line) {
				t.Errorf("%s %s: error does not name %s: %v", name, in, line, err)
			}
			// The error is about microblog_key when the YAML still parses
			// with the tag; a tag that breaks the YAML fails the file.
			var ve *extauth.ValidationError
			if errors.As(err, &ve) {
				if keys := problemKeys(t, err); !slices.Equal(keys, []string{"microblog_key"}) {
					t.Errorf("%s %s: keys %v, err %v", name, in, keys, err)
				}
			} else if !strings.Contains(err.Error(), "parse YAML") {
				t.Errorf("%s %s: err %v", name, in, err)
			}
		}
	}
}

// ERB runs before YAML, as in Rails: a tag may stand anywhere, and only the
// ones extauth reads, or that could change what the file says, matter.
func TestERBAnywhere(t *testing.T) {
	env := vars("ID", "client-7", "SECRET", `s3"cr\et`, "ISSUER", "https://id.example.org", "TENANT", "city_a", "ENVNAME", "production")
	t.Run("Consul-style quoted tags, flow mappings and keys", func(t *testing.T) {
		src := `
<%= ENV["ENVNAME"] %>:
  oidc_client_id: "<%= ENV["ID"] %>"
  oidc_client_secret: '<%= ENV['SECRET'] %>'
  oidc_issuer: <%= ENV.fetch("ISSUER") %>
  saml_sp_entity_id: urn:example:sp
  saml_idp_metadata_url: "<%= ENV["ISSUER"] %>/saml/metadata"
  saml_additional_settings: {organization: "<%= ENV["ID"] %>", <%= ENV["TENANT"] %>: x}
  tenants:
    <%= ENV["TENANT"] %>: {oidc_client_id: "<%= ENV["ID"] %>-a"}
`
		cfg := mustParse(t, src, env, extauth.Env("production"))
		if cfg.OIDC.ClientID != "client-7" || cfg.OIDC.ClientSecret.Value() != `s3"cr\et` || cfg.OIDC.Issuer != "https://id.example.org" {
			t.Errorf("oidc = %q %q %q", cfg.OIDC.ClientID, cfg.OIDC.ClientSecret.Value(), cfg.OIDC.Issuer)
		}
		want := []extauth.Param{{Name: "organization", Value: "client-7"}, {Name: "city_a", Value: "x"}}
		if !slices.Equal(cfg.SAML.Additional.Custom, want) {
			t.Errorf("Custom = %v, want %v", cfg.SAML.Additional.Custom, want)
		}
		if a := cfg.Tenants["city_a"]; a == nil || a.OIDC.ClientID != "client-7-a" {
			t.Errorf("tenant from a key look-up: %+v", cfg.Tenants)
		}
	})
	t.Run("tags where extauth reads nothing", func(t *testing.T) {
		src := "secret_key_base: <%= Rails.application.credentials.secret_key_base %>\n" +
			"smtp_port: <%= ENV.fetch(\"SMTP_PORT\", 587).to_i %>\n" +
			"server_name: \"<%= ENV[\"UNSET_SERVER\"] %>\"\n" +
			"# <%= ENV.fetch(\"UNSET_IN_COMMENT\") %>\n" +
			"oidc_client_id: \"<%= ENV[\"ID\"] %>\"\noidc_client_secret: x\noidc_issuer: https://id.example.org\n"
		cfg := mustParse(t, src, env)
		want := []string{
			"line 1: ERB extauth cannot evaluate is ignored (it is in no setting extauth reads)",
			"line 2: ERB extauth cannot evaluate is ignored (it is in no setting extauth reads)",
		}
		if !slices.Equal(cfg.Warnings, want) {
			t.Errorf("Warnings = %q, want %q", cfg.Warnings, want)
		}
	})
	t.Run("code is an error wherever it is", func(t *testing.T) {
		for src, line := range map[string]string{
			"oidc_client_id: x\n# <% if ENV[\"SAML\"] %>\nsmtp: y\n":                        "line 2: ERB code is not supported",
			"oidc_client_id: x\nsmtp_password: \"<% x = 1 %>\"\n":                           "line 2: ERB code is not supported",
			"oidc_client_id: x\nother: [<%= ENV[\"A\"]\n":                                   "line 2 has ERB that extauth does not support",
			"production:\n<% if ENV[\"X\"] %>\n  oidc_client_id: x\n<% end %>\n":            "line 2 has ERB that extauth does not support",
			"development:\n  <%- [1].each do |i| -%>\n  oidc_client_id: x\n  <%- end -%>\n": "line 2 has ERB that extauth does not support",
		} {
			_, err := extauth.ParseConfig([]byte(src), env)
			if !errors.Is(err, extauth.ErrTemplate) || !strings.Contains(err.Error(), line) {
				t.Errorf("%q: err = %v, want ErrTemplate naming %q", src, err, line)
			}
		}
	})
	t.Run("a fetch without default in a key", func(t *testing.T) {
		_, err := extauth.ParseConfig([]byte("<%= ENV.fetch(\"NOPE\") %>: {oidc_client_id: x}\noidc_client_secret: s\n"), env)
		if !errors.Is(err, extauth.ErrTemplate) || !strings.Contains(err.Error(), "line 1: a key needs environment variable NOPE") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("text that spells a token is text", func(t *testing.T) {
		// A double-quoted escape can spell what a tag is replaced by; it
		// must stay text, whatever index it names.
		for _, v := range []string{`\x45RBTAG0.0.`, `\x45RBTAG0.99.`, `\x45RBTAG0.0`, `\x45RBTAG0.12345678901234567890.`} {
			src := "microblog_key: \"" + v + "<%= ENV[\"ID\"] %>\"\nmicroblog_secret: s\n"
			cfg, err := extauth.ParseConfig([]byte(src), env)
			if err != nil {
				t.Errorf("%s: %v", v, err)
				continue
			}
			if !strings.HasSuffix(cfg.Microblog.Key, "client-7") {
				t.Errorf("%s: key %q", v, cfg.Microblog.Key)
			}
		}
	})
}

func TestUnsetVariableWarnsAndExplainsMissing(t *testing.T) {
	// Every oidc value unset: oidc is simply not configured, with warnings.
	cfg := mustParse(t, "oidc_client_id: ${OIDC_ID}\noidc_client_secret: <%= ENV[\"OIDC_SECRET\"] %>\n")
	want := []string{
		"oidc_client_id: environment variable OIDC_ID is not set",
		"oidc_client_secret: environment variable OIDC_SECRET is not set",
	}
	if !slices.Equal(cfg.Warnings, want) {
		t.Errorf("Warnings = %q, want %q", cfg.Warnings, want)
	}

	_, err := extauth.ParseConfig([]byte("oidc_issuer: https://id.example.org\noidc_client_id: x\noidc_client_secret: ${OIDC_SECRET}\n"), vars())
	want2 := "oidc: oidc_client_secret is missing (environment variable OIDC_SECRET is not set)"
	if err == nil || !strings.HasSuffix(err.Error(), want2) {
		t.Errorf("err = %v, want it to end in %q", err, want2)
	}
}

func TestMerges(t *testing.T) {
	t.Run("precedence and lists of anchors", func(t *testing.T) {
		cfg := mustParse(t, `
a: &a
  microblog_key: from-a
  microblog_secret: from-a
  socialnet_key: from-a
b: &b
  microblog_key: from-b
  socialnet_secret: from-b
production:
  <<: [*a, *b]
  microblog_key: own
`, extauth.Env("production"))
		got := []string{cfg.Microblog.Key, cfg.Microblog.Secret.Value(), cfg.Socialnet.Key, cfg.Socialnet.Secret.Value()}
		if want := []string{"own", "from-a", "from-a", "from-b"}; !slices.Equal(got, want) {
			t.Errorf("got %q, want %q", got, want)
		}
	})
	t.Run("an explicit key written after the merge still wins", func(t *testing.T) {
		cfg := mustParse(t, "d: &d\n  oidc_client_id: merged\nproduction:\n  oidc_client_id: own\n  <<: *d\n  oidc_client_secret: s\n  oidc_issuer: https://id.example.org\n", extauth.Env("production"))
		if cfg.OIDC.ClientID != "own" {
			t.Errorf("oidc_client_id = %q", cfg.OIDC.ClientID)
		}
	})
	t.Run("merged saml_additional_settings keep their order", func(t *testing.T) {
		cfg := mustParse(t, `
saml_sp_entity_id: urn:example:sp
saml_idp_metadata_url: https://idp.example.org/md
saml_additional_settings:
  first: 1
  <<: {second: 2, third: 3, first: merged}
  fourth: 4
`)
		var names []string
		for _, p := range cfg.SAML.Additional.Custom {
			names = append(names, p.Name+"="+p.Value)
		}
		if want := []string{"first=1", "second=2", "third=3", "fourth=4"}; !slices.Equal(names, want) {
			t.Errorf("Custom = %v, want %v", names, want)
		}
	})
	t.Run("a quoted << is an ordinary key", func(t *testing.T) {
		_, err := extauth.ParseConfig([]byte("d: &d\n  oidc_client_id: merged\ndevelopment:\n  '<<': *d\n"), vars())
		if err != nil {
			t.Fatal(err)
		}
	})
	t.Run("merge of a scalar", func(t *testing.T) {
		_, err := extauth.ParseConfig([]byte("development:\n  <<: 3\n"), vars())
		if err == nil || !strings.Contains(err.Error(), "<< must merge a mapping") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("shared section", func(t *testing.T) {
		src := "shared:\n  oidc_issuer: https://id.example.org\n  oidc_client_id: shared\nproduction:\n  oidc_client_id: own\n  oidc_client_secret: s\n"
		cfg := mustParse(t, src, extauth.Env("production"))
		if cfg.OIDC.ClientID != "own" || cfg.OIDC.Issuer != "https://id.example.org" || !cfg.OIDC.Configured() {
			t.Errorf("shared not merged under production: %+v", cfg.OIDC)
		}
		if _, err := extauth.ParseConfig([]byte(src), vars(), extauth.Env("staging")); !errors.Is(err, extauth.ErrUnknownEnvironment) {
			t.Errorf("shared stood in for a missing environment: %v", err)
		}
	})
}

func TestAliasExpansionIsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("l0: &l0 {k0: v}\n")
	refs := func(i int) string {
		return strings.TrimSuffix(strings.Repeat("*l"+string(rune('0'+i))+", ", 10), ", ")
	}
	for i := 1; i < 9; i++ {
		b.WriteString("l" + string(rune('0'+i)) + ": &l" + string(rune('0'+i)) + "\n  <<: [" + refs(i-1) + "]\n")
	}
	b.WriteString("development:\n  <<: [" + refs(8) + "]\n")
	// The parse's CPU time, which load does not stretch: unbounded, the
	// expansion (10^9 nodes) would take hours.
	var err error
	cpu := loadtest.ThreadCPUOf(func() { _, err = extauth.ParseConfig([]byte(b.String()), vars()) })
	if err == nil || !strings.Contains(err.Error(), "too many aliases") {
		t.Errorf("err = %v", err)
	}
	if cpu > 5*time.Second {
		t.Errorf("took %v of CPU time", cpu)
	}
}

func TestAdditionalSettings(t *testing.T) {
	const head = "saml_sp_entity_id: urn:example:sp\nsaml_idp_metadata_url: https://idp.example.org/md\n"
	for _, v := range []string{"", "~", "{}", "''"} {
		cfg := mustParse(t, head+"saml_additional_settings: "+v+"\n")
		if !reflectZero(cfg.SAML.Additional) {
			t.Errorf("%q: %+v", v, cfg.SAML.Additional)
		}
	}
	for v, want := range map[string]bool{"true": true, "false": false, `"true"`: true, "'FALSE'": false, "~": false, `"${SIGNED}"`: true} {
		cfg := mustParse(t, head+"saml_additional_settings:\n  security:\n    logout_requests_signed: "+v+"\n", vars("SIGNED", "true"))
		if cfg.SAML.Additional.Security.LogoutRequestsSigned != want {
			t.Errorf("logout_requests_signed: %s read as %v", v, !want)
		}
	}
	cfg := mustParse(t, head+"saml_additional_settings:\n  security:\n    logout_request_signed: true\n    want_assertions_signed: true\n  relay_state: /x\n")
	want := []string{
		"saml_additional_settings.security.logout_request_signed is not supported and is ignored; did you mean logout_requests_signed?",
		"saml_additional_settings.security.want_assertions_signed is not supported and is ignored",
		"saml_additional_settings.relay_state is sent to the IdP as a custom entry; did you mean saml_additional_settings.RelayState?",
	}
	if !slices.Equal(cfg.Warnings, want) {
		t.Errorf("Warnings =\n%q\nwant\n%q", cfg.Warnings, want)
	}
	if cfg.SAML.Additional.Security.LogoutRequestsSigned {
		t.Error("a misspelt security key took effect")
	}

	for src, key := range map[string]string{
		"saml_additional_settings: [a]\n":                         "saml_additional_settings",
		"saml_additional_settings:\n  security: true\n":           "saml_additional_settings.security",
		"saml_additional_settings:\n  security: [true]\n":         "saml_additional_settings.security",
		"saml_additional_settings:\n  a: 1\n  a: 2\n":             "saml_additional_settings.a",
		"saml_additional_settings:\n  authn_context: [urn:a:b]\n": "saml_additional_settings.authn_context",
	} {
		_, err := extauth.ParseConfig([]byte(head+src), vars())
		if keys := problemKeys(t, err); !slices.Equal(keys, []string{key}) {
			t.Errorf("%q: keys %v, want %s", src, keys, key)
		}
	}
}

func reflectZero(s extauth.SAMLAdditionalSettings) bool {
	return s.RelayState == "" && s.AuthnContext == "" && s.Certificate == "" && s.PrivateKey.IsZero() &&
		!s.Security.LogoutRequestsSigned && s.Custom == nil
}

func TestNearMissWarnings(t *testing.T) {
	tests := []struct{ key, want string }{
		// A near-miss of a provider's real name is offered that name,
		// which extauth reads as an alias.
		{"twiter_key", "twitter_key"},
		{"twitter_secert", "twitter_secret"},
		{"facebok_key", "facebook_key"},
		{"google_oauth_secret", "google_oauth2_secret"},
		{"wordpress_oauth_site", "wordpress_oauth2_site"},
		{"Twitter_Key", "twitter_key"},
		{"microblog_secert", "microblog_secret"},
		{"Microblog_Key", "microblog_key"},
		{"microblog-key", "microblog_key"},
		{"oidc_client_secrets", "oidc_client_secret"},
		{"oidc_isuer", "oidc_issuer"},
		{"saml_idp_metadata_uri", "saml_idp_metadata_url"},
		{"saml_sp_entityid", "saml_sp_entity_id"},
		{"saml_additional_setting", "saml_additional_settings"},
		{"saml_idp_cert_fingerprint", ""},
	}
	for _, tt := range tests {
		cfg := mustParse(t, "microblog_site: https://m.test\n"+tt.key+": value-must-not-show\n"+
			"microblog_key: k\nmicroblog_secret: s\n")
		if len(cfg.Warnings) != 1 {
			t.Errorf("%s: warnings %q", tt.key, cfg.Warnings)
			continue
		}
		w := cfg.Warnings[0]
		if !strings.HasPrefix(w, tt.key+" is not an extauth setting and is ignored") ||
			(tt.want != "" && !strings.HasSuffix(w, "did you mean "+tt.want+"?")) ||
			(tt.want == "" && strings.Contains(w, "did you mean")) {
			t.Errorf("%s: warning %q, want a hint at %q", tt.key, w, tt.want)
		}
		if strings.Contains(w, "value-must-not-show") {
			t.Errorf("%s: warning shows the value", tt.key)
		}
	}

	quiet := []string{
		"secret_key_base", "smtp_password", "smtp_user_name", "database_url", "devise_secret_key",
		"aws_access_key_id", "aws_secret_access_key", "github_key", "gitlab_secret", "redis_url",
		"sentry_dsn", "api_key", "microblog", "oidc", "site",
	}
	var b strings.Builder
	for _, k := range quiet {
		b.WriteString(k + ": x\n")
	}
	b.WriteString("microblog_key: k\nmicroblog_secret: s\n")
	if cfg := mustParse(t, b.String()); len(cfg.Warnings) != 0 {
		t.Errorf("false positives: %q", cfg.Warnings)
	}

	_, err := extauth.ParseConfig([]byte("microblog_key: k\nmicroblog_secert: s\n"), vars())
	if want := "microblog: microblog_secret is missing (the file has microblog_secert)"; err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("err = %v, want it to end in %q", err, want)
	}
}

func TestPlainHTTPWarning(t *testing.T) {
	cfg := mustParse(t, `
oidc_client_id: c
oidc_client_secret: s
oidc_issuer: http://id.example.org
microblog_key: k
microblog_secret: s
microblog_site: http://127.0.0.1:8080
blog_oauth2_key: k
blog_oauth2_secret: s
blog_oauth2_site: http://blog.localhost
`)
	want := []string{"oidc_issuer uses plain http outside localhost; use https"}
	if !slices.Equal(cfg.Warnings, want) {
		t.Errorf("Warnings = %q, want %q", cfg.Warnings, want)
	}
}

func TestYAMLSyntaxError(t *testing.T) {
	_, err := extauth.ParseConfig([]byte("microblog_secret: \"unterminated-secret-value\nmicroblog_key: [\n"), vars())
	if err == nil || !strings.Contains(err.Error(), "parse YAML") {
		t.Fatalf("err = %v", err)
	}
	if strings.Contains(err.Error(), "unterminated-secret-value") {
		t.Errorf("YAML error shows a value: %v", err)
	}
}

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
		"production:\n  oidc_client_id: \"<%= ENV[\"ID\"] %>\"\n  <%= ENV['K'] %>: {a: \"<%= ENV.fetch(\"X\", \"d\") %>\"}\n",
		"production:\n  tenants:\n    a: {twitter_key: k, twitter_secret: s, <<: {oidc_issuer: ''}}\n    b:\n  microblog_key: k\n",
		"<% if x %>\nproduction: {}\n<% end %>\n",
		"microblog_key: '<%= ENV[\"A\"]'\nmicroblog_secret: <%# c %>s\n",
		"microblog_key: \"\\x45RBTAG0.0.<%= ENV[\"A\"] %>\"\n",
	} {
		f.Add([]byte(seed))
	}
	files, _ := filepath.Glob("testdata/config/*.yml")
	more, _ := filepath.Glob("testdata/config/consul/*")
	for _, name := range append(files, more...) {
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
			if strings.Contains(err.Error(), "ERBTAG") && !strings.Contains(string(data), "RBTAG") {
				t.Fatalf("error shows a tag's stand-in: %v", err)
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
		// What stands for an ERB tag while YAML parses never comes out.
		if all := fmt.Sprintf("%+v", cfg) + strings.Join(cfg.Warnings, "\n"); strings.Contains(all, "ERBTAG") && !strings.Contains(string(data), "RBTAG") {
			t.Fatalf("a tag's stand-in came out: %s", all)
		}
		cfg.Providers()
		for name, tc := range cfg.Tenants {
			if !extauth.ValidTenantName(name) || tc.Tenant != name || tc.Tenants != nil {
				t.Fatalf("tenant %q: %+v", name, tc)
			}
			tc.Providers()
		}
	})
}

// The file Consul Democracy operators start from loads in every environment,
// as published: no provider is configured (every value is empty), the
// providers' real names are understood, and nothing is taken for a typo.
func TestConsulExampleFiles(t *testing.T) {
	for _, tc := range []struct {
		file string
		envs []string
	}{
		{"testdata/config/consul/secrets.yml.example", []string{"development", "test", "staging", "preproduction", "production"}},
		{"testdata/config/consul/secrets_multitenancy.yml.example", []string{"development", "test", "staging", "preproduction", "production"}},
	} {
		for _, env := range tc.envs {
			cfg, err := extauth.LoadConfig(tc.file, vars("RAILS_ENV", env))
			if err != nil {
				t.Errorf("%s %s: %v", tc.file, env, err)
				continue
			}
			if cfg.Environment != env || cfg.EnvironmentSource != "RAILS_ENV" {
				t.Errorf("%s: environment %q from %q", env, cfg.Environment, cfg.EnvironmentSource)
			}
			if len(cfg.Providers()) != 0 || len(cfg.Tenants) != 0 {
				t.Errorf("%s %s: providers %v, tenants %v", tc.file, env, cfg.Providers(), cfg.TenantNames())
			}
			for i, w := range cfg.Warnings {
				switch {
				case strings.Contains(w, "did you mean"):
					t.Errorf("%s %s: a Consul key taken for a typo: %q", tc.file, env, w)
				case strings.Contains(w, " read as "):
					if cfg.WarningLevel(i) != slog.LevelInfo {
						t.Errorf("%s %s: alias note %q at %v", tc.file, env, w, cfg.WarningLevel(i))
					}
				case cfg.WarningLevel(i) != slog.LevelWarn:
					t.Errorf("%s %s: warning %q at %v", tc.file, env, w, cfg.WarningLevel(i))
				}
			}
		}
		_, err := extauth.LoadConfig(tc.file, extauth.Env("prod"), vars())
		if !errors.Is(err, extauth.ErrUnknownEnvironment) {
			t.Fatalf("%s: err = %v", tc.file, err)
		}
		msg := err.Error()
		if !strings.Contains(msg, "environments are development, test, staging, preproduction, production") {
			t.Errorf("%s: %v", tc.file, err)
		}
		// The anchors of shared values are named as such, never offered as
		// environments.
		for _, anchor := range []string{"default", "maps", "apis", "http_basic_auth"} {
			head, tail, _ := strings.Cut(msg, "(anchors of shared values")
			if strings.Contains(head, anchor+",") || strings.Contains(head, " "+anchor+" ") {
				t.Errorf("%s: %s offered as an environment: %v", tc.file, anchor, err)
			}
			if anchor != "default" && !strings.Contains(tail, anchor) {
				t.Errorf("%s: %s not named as an anchor: %v", tc.file, anchor, err)
			}
		}
	}

	cfg, err := extauth.LoadConfig("testdata/config/consul/secrets_multitenancy.yml.example", vars("RAILS_ENV", "production"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"twitter_key, twitter_secret read as microblog_key, microblog_secret (microblog is extauth's name for twitter)",
		"facebook_key, facebook_secret read as socialnet_key, socialnet_secret (socialnet is extauth's name for facebook)",
		"google_oauth2_key, google_oauth2_secret read as search_oauth2_key, search_oauth2_secret (search_oauth2 is extauth's name for google_oauth2)",
		"wordpress_oauth2_key, wordpress_oauth2_secret, wordpress_oauth2_site read as blog_oauth2_key, blog_oauth2_secret, blog_oauth2_site (blog_oauth2 is extauth's name for wordpress_oauth2)",
	}
	if !slices.Equal(cfg.Warnings, want) {
		t.Errorf("Warnings =\n%q\nwant\n%q", cfg.Warnings, want)
	}
}

// Consul's file filled in as its documentation says: all six providers
// under Consul's names, secrets from the environment in quoted ERB, and
// tenants that override them.
func TestConsulFilledFile(t *testing.T) {
	const path = "testdata/config/consul/secrets.yml"
	env := vars("RAILS_ENV", "production",
		"TWITTER_SECRET", "tw-secret", "FACEBOOK_SECRET", "fb-secret", "GOOGLE_SECRET", "g-secret",
		"WORDPRESS_SECRET", "wp-secret", "OIDC_SECRET", "oidc-secret",
		"SATURN_TWITTER_SECRET", "saturn-tw-secret", "SATURN_FACEBOOK_SECRET", "saturn-fb-secret",
		"CITY_A_OIDC_SECRET", "city-a-oidc-secret")
	cfg, err := extauth.LoadConfig(path, env)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Providers(); !slices.Equal(got, extauth.BuiltinProviders()) {
		t.Errorf("Providers() = %v, want all six", got)
	}
	if cfg.Microblog.Key != "consul-twitter-key" || cfg.Microblog.Secret.Value() != "tw-secret" ||
		cfg.Socialnet.Key != "123456789012345" || cfg.SearchOAuth2.Secret.Value() != "g-secret" ||
		cfg.BlogOAuth2.Site != "https://blog.consul.example.org" || cfg.BlogOAuth2.Secret.Value() != "wp-secret" ||
		cfg.SAML.IdPSSOServiceURL != "https://idp.example.org/api/saml/sso" || cfg.OIDC.ClientSecret.Value() != "oidc-secret" {
		t.Errorf("values not read: %+v", cfg)
	}
	if cfg.Environment != "production" || cfg.EnvironmentSource != "RAILS_ENV" {
		t.Errorf("environment %q from %q", cfg.Environment, cfg.EnvironmentSource)
	}
	if got := cfg.TenantNames(); !slices.Equal(got, []string{"city_a", "saturn"}) {
		t.Fatalf("tenants %v", got)
	}

	saturn := cfg.Tenants["saturn"]
	if got := saturn.Providers(); !slices.Equal(got, extauth.BuiltinProviders()) {
		t.Errorf("saturn: Providers() = %v", got)
	}
	if saturn.Tenant != "saturn" || saturn.Microblog.Key != "saturn-twitter-key" || saturn.Microblog.Secret.Value() != "saturn-tw-secret" ||
		saturn.Socialnet.Key != "987654321" || saturn.OIDC.ClientID != "consul-oidc-client" {
		t.Errorf("saturn: %+v", saturn)
	}

	cityA := cfg.Tenants["city_a"]
	want := []extauth.Provider{extauth.Microblog, extauth.Socialnet, extauth.SearchOAuth2, extauth.SAML, extauth.OIDC}
	if got := cityA.Providers(); !slices.Equal(got, want) {
		t.Errorf("city_a: Providers() = %v, want %v (blog_oauth2 switched off)", got, want)
	}
	if cityA.SAML.SPEntityID != "https://city_a.consul.example.org/saml/metadata" || cityA.SAML.IdPSSOServiceURL != "" ||
		cityA.OIDC.ClientID != "city-a-client" || cityA.OIDC.ClientSecret.Value() != "city-a-oidc-secret" ||
		cityA.OIDC.Issuer != "https://id.example.org" || !reflect.ValueOf(cityA.BlogOAuth2).IsZero() {
		t.Errorf("city_a: %+v", cityA)
	}
	for name, tc := range cfg.Tenants {
		if tc.Environment != "production" || tc.Tenants != nil || len(tc.Warnings) != 0 {
			t.Errorf("%s: environment %q, tenants %v, warnings %q", name, tc.Environment, tc.Tenants, tc.Warnings)
		}
	}
	// The environment is not touched by its tenants.
	if cfg.Microblog.Key != "consul-twitter-key" || cfg.SAML.IdPSSOServiceURL == "" || !cfg.BlogOAuth2.Configured() {
		t.Error("a tenant changed the environment's settings")
	}
}

func TestEnvironmentSelection(t *testing.T) {
	src := "development: {oidc_client_id: d}\nproduction: {oidc_client_id: p}\nstaging: {oidc_client_id: s}\ntest: {oidc_client_id: t}\n"
	tests := []struct {
		name       string
		opts       []extauth.ConfigOption
		env, since string
	}{
		{"nothing set", []extauth.ConfigOption{vars()}, "development", "default"},
		{"APP_ENV", []extauth.ConfigOption{vars("APP_ENV", "test")}, "test", "APP_ENV"},
		{"RAILS_ENV over APP_ENV", []extauth.ConfigOption{vars("APP_ENV", "test", "RAILS_ENV", "staging")}, "staging", "RAILS_ENV"},
		{"EXTAUTH_ENV over RAILS_ENV", []extauth.ConfigOption{vars("EXTAUTH_ENV", "production", "RAILS_ENV", "staging")}, "production", "EXTAUTH_ENV"},
		{"empty variables are unset", []extauth.ConfigOption{vars("EXTAUTH_ENV", "", "RAILS_ENV", "", "APP_ENV", "test")}, "test", "APP_ENV"},
		{"Env option over all", []extauth.ConfigOption{vars("EXTAUTH_ENV", "production", "RAILS_ENV", "staging"), extauth.Env("test")}, "test", "Env option"},
	}
	for _, tt := range tests {
		cfg, problems, err := inspect(t, src, tt.opts...)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if cfg.Environment != tt.env || cfg.EnvironmentSource != tt.since || cfg.OIDC.ClientID != tt.env[:1] {
			t.Errorf("%s: %q from %q (client %q), want %q from %q", tt.name, cfg.Environment, cfg.EnvironmentSource, cfg.OIDC.ClientID, tt.env, tt.since)
		}
		if len(problems) == 0 {
			t.Errorf("%s: a half-filled oidc passed", tt.name)
		}
	}
	// The error for a missing environment says where its name came from.
	for opt, want := range map[string]string{
		"RAILS_ENV":   `"prod" (from RAILS_ENV); the file's environments are development, production, staging, test`,
		"EXTAUTH_ENV": `"prod" (from EXTAUTH_ENV)`,
	} {
		_, err := extauth.ParseConfig([]byte(src), vars(opt, "prod"))
		if !errors.Is(err, extauth.ErrUnknownEnvironment) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", opt, err, want)
		}
	}
	_, err := extauth.ParseConfig([]byte(src), vars("RAILS_ENV", "productoin"))
	if err == nil || !strings.HasSuffix(err.Error(), "did you mean production?") {
		t.Errorf("near miss: %v", err)
	}
	// A flat file has no sections: the environment is not used, and says so.
	cfg := mustParse(t, "oidc_client_id: c\noidc_client_secret: s\noidc_issuer: https://id.example.org\n", vars("RAILS_ENV", "production"))
	if cfg.Environment != "" || cfg.EnvironmentSource != "" {
		t.Errorf("flat file: %q from %q", cfg.Environment, cfg.EnvironmentSource)
	}
}

// inspect is InspectConfig on bytes.
func inspect(t *testing.T, src string, opts ...extauth.ConfigOption) (*extauth.Config, []extauth.Problem, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secrets.yml")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return extauth.InspectConfig(path, opts...)
}

func TestAnchorSections(t *testing.T) {
	tests := []struct {
		name, src string
		envs      string
		anchors   string
	}{
		{"anchored and merged, with settings", "default: &d\n  oidc_issuer: https://x\nproduction:\n  <<: *d\n", "production", "default"},
		{"anchored, never merged, no settings", "apis: &apis\n  sms_password: x\nproduction:\n  oidc_issuer: https://x\n", "production", "apis"},
		{"anchored, never merged, with settings", "production: &p\n  oidc_issuer: https://x\n", "production", ""},
		{"not anchored, no settings", "production:\n  smtp: x\n", "production", ""},
		{"an environment that is an alias", "base: &b\n  oidc_issuer: https://x\nproduction: *b\n", "production", "base"},
		{"shared", "shared:\n  oidc_issuer: https://x\nproduction: {}\n", "production", ""},
	}
	for _, tt := range tests {
		_, err := extauth.ParseConfig([]byte(tt.src), extauth.Env("nope"), vars())
		msg := fmt.Sprint(err)
		if !errors.Is(err, extauth.ErrUnknownEnvironment) || !strings.Contains(msg, "environments are "+tt.envs) {
			t.Errorf("%s: %v", tt.name, err)
		}
		if has := strings.Contains(msg, "anchors of shared values, not environments: "+tt.anchors+")"); has != (tt.anchors != "") {
			t.Errorf("%s: anchors: %v", tt.name, err)
		}
	}
	// An anchor is still read when asked for by name.
	cfg := mustParse(t, "default: &d\n  oidc_client_id: c\n  oidc_client_secret: s\n  oidc_issuer: https://id.example.org\nproduction:\n  <<: *d\n", extauth.Env("default"))
	if !cfg.OIDC.Configured() {
		t.Error("the default section could not be read by name")
	}
}

func TestAliases(t *testing.T) {
	t.Run("every alias", func(t *testing.T) {
		cfg := mustParse(t, `
twitter_key: tk
twitter_secret: ts
twitter_site: https://api.twitter.test
facebook_key: fk
facebook_secret: fs
facebook_site: https://graph.facebook.test
google_oauth2_key: gk
google_oauth2_secret: gs
google_oauth2_site: https://accounts.google.test
wordpress_oauth2_key: wk
wordpress_oauth2_secret: ws
wordpress_oauth2_site: https://blog.test
`)
		got := []string{cfg.Microblog.Key, cfg.Microblog.Secret.Value(), cfg.Microblog.Site, cfg.Socialnet.Key, cfg.Socialnet.Secret.Value(), cfg.Socialnet.Site,
			cfg.SearchOAuth2.Key, cfg.SearchOAuth2.Secret.Value(), cfg.SearchOAuth2.Site, cfg.BlogOAuth2.Key, cfg.BlogOAuth2.Secret.Value(), cfg.BlogOAuth2.Site}
		want := []string{"tk", "ts", "https://api.twitter.test", "fk", "fs", "https://graph.facebook.test",
			"gk", "gs", "https://accounts.google.test", "wk", "ws", "https://blog.test"}
		if !slices.Equal(got, want) {
			t.Errorf("got %q\nwant %q", got, want)
		}
		if len(cfg.Warnings) != 4 {
			t.Fatalf("one note per provider, got %q", cfg.Warnings)
		}
		for i, w := range cfg.Warnings {
			if cfg.WarningLevel(i) != slog.LevelInfo || strings.Contains(w, "tk") {
				t.Errorf("note %q at %v", w, cfg.WarningLevel(i))
			}
		}
		if want := "twitter_key, twitter_secret, twitter_site read as microblog_key, microblog_secret, microblog_site (microblog is extauth's name for twitter)"; cfg.Warnings[0] != want {
			t.Errorf("note %q, want %q", cfg.Warnings[0], want)
		}
	})
	t.Run("both names", func(t *testing.T) {
		for _, tt := range []struct {
			src, want string
		}{
			{"microblog_key: same\ntwitter_key: same\n", "same"},
			{"twitter_key: ''\nmicroblog_key: set\n", "set"},
			{"microblog_key: ~\ntwitter_key: set\n", "set"},
			// A merged alias and a setting written in the section are one
			// key: the section's own wins, as it would over the same key.
			{"d: &d {twitter_key: merged}\nproduction:\n  <<: *d\n  microblog_key: own\n", "own"},
			{"d: &d {microblog_key: merged}\nproduction:\n  <<: *d\n  twitter_key: own\n", "own"},
			{"shared: {twitter_key: shared}\nproduction: {microblog_key: own}\n", "own"},
		} {
			src := tt.src
			if strings.Contains(src, "production") {
				src += "  microblog_secret: s\n"
				if strings.HasPrefix(src, "shared") {
					src = strings.Replace(src, "{microblog_key: own}", "{microblog_key: own, microblog_secret: s}", 1)
					src = strings.TrimSuffix(src, "  microblog_secret: s\n")
				}
			} else {
				src += "microblog_secret: s\n"
			}
			cfg, err := extauth.ParseConfig([]byte(src), extauth.Env("production"), vars())
			if err != nil {
				t.Errorf("%q: %v", src, err)
				continue
			}
			if cfg.Microblog.Key != tt.want {
				t.Errorf("%q: key %q, want %q", src, cfg.Microblog.Key, tt.want)
			}
		}
		_, err := extauth.ParseConfig([]byte("microblog_key: value-one\nmicroblog_secret: s\ntwitter_key: value-two\n"), vars())
		want := "microblog: microblog_key and twitter_key are both given, with different values; keep one"
		if err == nil || !strings.HasSuffix(err.Error(), want) || !errors.Is(err, extauth.ErrInvalidSetting) {
			t.Errorf("err = %v, want %q", err, want)
		}
		if strings.Contains(err.Error(), "value-") {
			t.Errorf("error shows a value: %v", err)
		}
		_, err = extauth.ParseConfig([]byte("twitter_key: a\ntwitter_key: b\nmicroblog_secret: s\n"), vars())
		if keys := problemKeys(t, err); !slices.Equal(keys, []string{"microblog_key"}) || !strings.Contains(err.Error(), "given more than once") {
			t.Errorf("twice under one name: %v", err)
		}
	})
	t.Run("problems name the key the file uses", func(t *testing.T) {
		for src, want := range map[string]string{
			"twitter_key: k\n": "microblog: microblog_secret is missing (twitter_secret in this file)",
			"wordpress_oauth2_key: k\nwordpress_oauth2_secret: s\nwordpress_oauth2_site: blog\n": "blog_oauth2: blog_oauth2_site must be an absolute http or https URL (wordpress_oauth2_site in this file)",
			"facebook_secret: <% x %>\nfacebook_key: k\n":                                        "socialnet: socialnet_secret has ERB code, on line 1; only <%= ENV[\"NAME\"] %> look-ups are supported (facebook_secret in this file)",
			"microblog_key: k\n": "microblog: microblog_secret is missing",
		} {
			_, err := extauth.ParseConfig([]byte(src), vars())
			if err == nil || !strings.HasSuffix(err.Error(), want) {
				t.Errorf("%q: err = %v, want %q", src, err, want)
			}
		}
	})
}

// saml_additional_settings.federation replaces saml_idp_metadata_url, and
// its problems name its keys.
func TestLoadSAMLFederation(t *testing.T) {
	cert := strings.TrimSpace(federationCertPEM(t))
	block := "      " + strings.ReplaceAll(cert, "\n", "\n      ") + "\n"
	cfg := mustParse(t, `saml_sp_entity_id: https://app.example.org/saml
saml_additional_settings:
  federation:
    metadata_url: https://mds.example.org/aggregate.xml
    signing_certificate: |
`+block+`    backing_file: /var/lib/app/federation.xml
    max_validity: P14D
    entity_ids:
      - https://idp.example.ac.uk/idp
      - https://idp.example.edu/idp
    registration_authorities: http://ukfederation.org.uk
    entity_categories: [http://refeds.org/category/research-and-scholarship]
`)
	f := cfg.SAML.Additional.Federation
	if !cfg.SAML.Configured() || !slices.Contains(cfg.Providers(), extauth.SAML) {
		t.Fatal("SAML with a federation is not configured")
	}
	if f.MetadataURL != "https://mds.example.org/aggregate.xml" || !strings.HasPrefix(f.SigningCertificate, "-----BEGIN CERTIFICATE-----") ||
		f.BackingFile != "/var/lib/app/federation.xml" || f.MaxValidity != 14*24*time.Hour || len(f.EntityIDs) != 2 ||
		!slices.Equal(f.RegistrationAuthorities, []string{"http://ukfederation.org.uk"}) || len(f.EntityCategories) != 1 {
		t.Fatalf("federation %+v", f)
	}

	for _, tc := range []struct{ file, key string }{
		{"saml_sp_entity_id: https://app.example.org/saml\nsaml_additional_settings:\n  federation:\n    metadata_url: https://mds.example.org/a.xml\n",
			"saml_additional_settings.federation.signing_certificate"},
		{"saml_sp_entity_id: https://app.example.org/saml\nsaml_additional_settings:\n  federation:\n    signing_certificate: |\n" + block,
			"saml_additional_settings.federation.metadata_url"},
		{"saml_sp_entity_id: https://app.example.org/saml\nsaml_additional_settings:\n  federation:\n    metadata_url: http://mds.example.org/a.xml\n    signing_certificate: |\n" + block,
			"saml_additional_settings.federation.metadata_url"},
		{"saml_sp_entity_id: https://app.example.org/saml\nsaml_idp_metadata_url: https://idp.example.org/md\nsaml_additional_settings:\n  federation:\n    metadata_url: https://mds.example.org/a.xml\n    signing_certificate: |\n" + block,
			"saml_idp_metadata_url"},
		{"saml_sp_entity_id: https://app.example.org/saml\nsaml_additional_settings:\n  federation:\n    metadata_url: https://mds.example.org/a.xml\n    backing_file: relative.xml\n    signing_certificate: |\n" + block,
			"saml_additional_settings.federation.backing_file"},
	} {
		_, err := extauth.ParseConfig([]byte(tc.file), vars())
		if err == nil || !slices.Contains(problemKeys(t, err), tc.key) {
			t.Errorf("%s: %v, want a problem with %s", tc.file, err, tc.key)
		}
		if err != nil && strings.Contains(err.Error(), "MII") {
			t.Errorf("a problem quotes the certificate: %v", err)
		}
	}
}
