package extauth_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"gopkg.in/yaml.v3"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/providers"
	"github.com/extauth/extauth/samlsp"
	"github.com/markbates/goth/providers/github"
)

// renderings returns v as every channel a host might print it through.
func renderings(t *testing.T, v any) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%t"} {
		out[verb] = fmt.Sprintf(verb, v)
	}
	var js, text bytes.Buffer
	slog.New(slog.NewJSONHandler(&js, nil)).Info("msg", "v", v)
	slog.New(slog.NewTextHandler(&text, nil)).Info("msg", "v", v)
	out["slog JSON"] = js.String()
	out["slog text"] = text.String()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	out["json.Marshal"] = string(b)
	func() {
		// yaml.v3 panics on the func fields of Options; YAML matters for
		// Config, which has none.
		defer func() { recover() }()
		if b, err := yaml.Marshal(v); err == nil {
			out["yaml.Marshal"] = string(b)
		}
	}()
	if e, ok := v.(error); ok {
		out["Error()"] = e.Error()
	}
	return out
}

// containers holds v in what a host might print: a pointer, a map and a
// slice of pointers and of values, a struct field. fmt prints a pointer it
// meets inside a container with a verb it cannot take (%s, %q, %d, %t) by
// reflection, calling no Format method of what it finds behind it: only a
// Format of the pointed-to type itself keeps its fields unprinted.
func containers(v any) map[string]any {
	rv := reflect.ValueOf(v)
	t := rv.Type()
	p := reflect.New(t)
	p.Elem().Set(rv)
	pt := p.Type()
	m := reflect.MakeMap(reflect.MapOf(reflect.TypeFor[string](), pt))
	m.SetMapIndex(reflect.ValueOf("k"), p)
	mv := reflect.MakeMap(reflect.MapOf(reflect.TypeFor[string](), t))
	mv.SetMapIndex(reflect.ValueOf("k"), rv)
	sl := reflect.Append(reflect.MakeSlice(reflect.SliceOf(pt), 0, 1), p)
	sv := reflect.Append(reflect.MakeSlice(reflect.SliceOf(t), 0, 1), rv)
	st := reflect.New(reflect.StructOf([]reflect.StructField{{Name: "V", Type: pt}})).Elem()
	st.Field(0).Set(p)
	pp := reflect.New(pt)
	pp.Elem().Set(p)
	return map[string]any{
		"a pointer":             p.Interface(),
		"a map of pointers":     m.Interface(),
		"a map":                 mv.Interface(),
		"a slice of pointers":   sl.Interface(),
		"a slice":               sv.Interface(),
		"a struct field":        st.Interface(),
		"a pointer to pointer":  pp.Interface(),
		"a slice of interfaces": []any{p.Interface()},
	}
}

// assertNoSecrets fails when any rendering of v shows one of secrets, as is
// or hex- or base64-encoded (%x, json.Marshal of a []byte).
func assertNoSecrets(t *testing.T, what string, v any, secrets []string) {
	t.Helper()
	for how, s := range renderings(t, v) {
		for _, secret := range secrets {
			for _, enc := range encodings(secret) {
				if strings.Contains(s, enc) {
					t.Errorf("%s printed with %s shows secret %q as %q:\n%s", what, how, secret, enc, s)
				}
			}
		}
	}
}

func encodings(secret string) []string {
	out := []string{secret}
	if len(secret) < 8 {
		return out // too short for its encodings not to occur by chance
	}
	// Any 6-byte-aligned window of the secret encodes to the same base64
	// whatever precedes it in the encoded stream.
	b := []byte(secret)[:len(secret)/6*6]
	// fmt prints a []byte in decimal with %v.
	dec := strings.Trim(fmt.Sprint([]byte(secret)), "[]")
	return append(out, dec, hex.EncodeToString([]byte(secret)), strings.ToUpper(hex.EncodeToString([]byte(secret))),
		base64.StdEncoding.EncodeToString(b), base64.RawURLEncoding.EncodeToString(b))
}

// pemLines returns the base64 lines of a PEM block: what a leak would show.
func pemLines(s string) []string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if line != "" && !strings.HasPrefix(line, "-----") {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n    ") + "\n"
}

func TestSecretsNeverPrinted(t *testing.T) {
	full := fullConfig(t)
	certPEM := full.SAML.Additional.Certificate
	keyPEM := full.SAML.Additional.PrivateKey.Value()
	oidcKeyPEM := full.OIDC.Additional.PrivateKey.Value()
	secrets := append(append([]string{"LEAK-"}, pemLines(keyPEM)...), pemLines(oidcKeyPEM)...)
	env := vars("SOCIALNET_SECRET", "LEAK-env-socialnet", "SITE_PASSWORD", "LEAK-env-password")

	t.Run("loaded config and its warnings", func(t *testing.T) {
		src := `
microblog_key: mk
microblog_secret: LEAK-microblog-secret
microblog_secert: LEAK-typo-value
twiter_key: LEAK-former-name-value
microblog_site: ${UNSET_SITE}
socialnet_key: sk
socialnet_secret: ${SOCIALNET_SECRET}
search_oauth2_key: gk
search_oauth2_secret: <%= ENV.fetch("UNSET_SECRET", "LEAK-erb-default") %>
blog_oauth2_key: bk
blog_oauth2_secret: <%= ENV["UNSET_BLOG_SECRET"] || "LEAK-erb-or" %>
blog_oauth2_site: http://blog.example.com
saml_sp_entity_id: urn:example:sp
saml_idp_metadata_url: https://idp.example.org/md
saml_additional_settings:
  relay_state: /welcome
  certificate: |
` + indent(certPEM) + `  private_key: |
` + indent(keyPEM) + `  security:
    want_assertions_signed: LEAK-security-value
oidc_client_id: oc
oidc_client_secret: LEAK-oidc-secret
oidc_issuer: https://id.example.org
oidc_scope: LEAK-prefixed-value
oidc_additional_settings:
  client_auth_method: private_key_jwt
  private_key: |
` + indent(oidcKeyPEM) + `  privat_key_new: a-custom-parameter
smtp_password: LEAK-unrelated-value
secret_key_base: LEAK-unrelated-value
`
		cfg, err := extauth.ParseConfig([]byte(src), env)
		if err != nil {
			t.Fatal(err)
		}
		// The values were read: the test would prove nothing otherwise.
		if cfg.Socialnet.Secret.Value() != "LEAK-env-socialnet" || cfg.SearchOAuth2.Secret.Value() != "LEAK-erb-default" ||
			cfg.BlogOAuth2.Secret.Value() != "LEAK-erb-or" || !cfg.SAML.Additional.HasKeyPair() ||
			cfg.OIDC.Additional.PrivateKey.Value() != oidcKeyPEM || len(cfg.Providers()) != 6 {
			t.Fatalf("file not read as intended: %v", cfg.Providers())
		}
		for _, kind := range []string{"did you mean microblog_secret", "did you mean twitter_key", "UNSET_SITE is not set",
			"plain http", "relay_state is sent to the IdP", "want_assertions_signed is not supported", "oidc_scope is not an extauth setting"} {
			if !strings.Contains(strings.Join(cfg.Warnings, "\n"), kind) {
				t.Errorf("no warning %q in %q", kind, cfg.Warnings)
			}
		}
		// What the oidc strategy warns of at start-up, extauth check lists.
		_, startup, err := cfg.OIDC.ClientKeys()
		if err != nil || !strings.Contains(strings.Join(startup, "\n"), "privat_key_new is not a setting: it is sent to the provider") ||
			!strings.Contains(strings.Join(startup, "\n"), "oidc_client_secret is set but unused") {
			t.Errorf("the strategy's warnings: %v %q", err, startup)
		}
		assertNoSecrets(t, "the strategy's warnings", strings.Join(startup, "\n"), secrets)
		assertNoSecrets(t, "Config", cfg, secrets)
		assertNoSecrets(t, "*Config", *cfg, secrets)
		assertNoSecrets(t, "Warnings", strings.Join(cfg.Warnings, "\n"), secrets)
	})

	t.Run("every kind of error at once", func(t *testing.T) {
		mismatched := fileValues(t, "testdata/config/broken/key_mismatch.yml")
		var otherKey string
		for _, v := range mismatched {
			if strings.Contains(v, "BEGIN PRIVATE KEY") {
				otherKey = v
			}
		}
		if otherKey == "" {
			t.Fatal("no key in key_mismatch.yml")
		}
		secrets := append(slices.Clone(secrets), pemLines(otherKey)...)
		src := `
microblog_key: mk
microblog_secret: <% LEAK-erb-code %>
socialnet_secret: LEAK-half-filled
search_oauth2_key: gk
search_oauth2_secret: <%= ENV.fetch("UNSET_FETCH") %>
blog_oauth2_key: bk
blog_oauth2_secret: LEAK-blog-secret
blog_oauth2_secret: LEAK-duplicate-secret
blog_oauth2_site: https://operator:${SITE_PASSWORD}@blog.example.com
oidc_client_id: [LEAK-list-value]
oidc_client_secret: LEAK-oidc-secret-${bad ref}
oidc_issuer: LEAK-not-a-url
saml_sp_entity_id: LEAK entity
saml_idp_metadata_url: https://idp.example.org/md
saml_additional_settings:
  RelayState: javascript:LEAK-relay
  authn_context: LEAK context
  organization: {LEAK-nested-key: LEAK-nested-value}
  SAMLRequest: LEAK-reserved
  privte_key: |
` + indent(keyPEM) + `  certificate: |
` + indent(certPEM) + `  private_key: |
` + indent(otherKey) + `  security:
    logout_requests_signed: LEAK-bool
`
		_, err := extauth.ParseConfig([]byte(src), env)
		if err == nil {
			t.Fatal("loaded")
		}
		keys := problemKeys(t, err)
		if len(keys) < 14 {
			t.Errorf("only %d problems: %v", len(keys), err)
		}
		assertNoSecrets(t, "error", err, secrets)
	})

	t.Run("tenants", func(t *testing.T) {
		env := vars("CITY_A_SECRET", "LEAK-env-tenant-secret")
		src := `
production:
  oidc_client_id: oc
  oidc_client_secret: LEAK-environment-oidc
  oidc_issuer: https://id.example.org
  tenants:
    city_a:
      oidc_client_secret: "<%= ENV["CITY_A_SECRET"] %>"
      twitter_key: tk
      twitter_secret: LEAK-tenant-twitter
      facebook_secret: LEAK-tenant-half-filled
      oidc_clent_secret: LEAK-tenant-typo
      saml_sp_entity_id: urn:example:sp
      saml_idp_metadata_url: https://idp.example.org/md
      saml_additional_settings:
        certificate: |
` + indent(indent(indent(certPEM))) + `        private_key: |
` + indent(indent(indent(keyPEM))) + `    city_b:
      google_oauth2_key: gk
      google_oauth2_secret: LEAK-tenant-google
`
		cfg, problems, err := inspect(t, src, env, extauth.Env("production"))
		if err != nil {
			t.Fatal(err)
		}
		a, b := cfg.Tenants["city_a"], cfg.Tenants["city_b"]
		// The values were read: the test would prove nothing otherwise.
		if a == nil || b == nil || a.OIDC.ClientSecret.Value() != "LEAK-env-tenant-secret" || a.Microblog.Secret.Value() != "LEAK-tenant-twitter" ||
			!a.SAML.Additional.HasKeyPair() || b.SearchOAuth2.Secret.Value() != "LEAK-tenant-google" || len(problems) != 1 ||
			!strings.Contains(strings.Join(cfg.Warnings, "\n"), "oidc_clent_secret") {
			t.Fatalf("file not read as intended: %+v %v %q", cfg.TenantNames(), problems, cfg.Warnings)
		}
		assertNoSecrets(t, "Config with tenants", cfg, secrets)
		assertNoSecrets(t, "tenant Config", *a, secrets)
		assertNoSecrets(t, "Tenants", cfg.Tenants, secrets)
		assertNoSecrets(t, "Warnings", strings.Join(cfg.Warnings, "\n"), secrets)
		assertNoSecrets(t, "tenant problem", problems[0], secrets)
		_, err = extauth.ParseConfig([]byte(src), env, extauth.Env("production"))
		assertNoSecrets(t, "error", err, secrets)
		if !strings.Contains(err.Error(), "tenants.city_a: socialnet: socialnet_key is missing") {
			t.Errorf("err = %v", err)
		}
	})

	t.Run("broken files", func(t *testing.T) {
		for _, tt := range brokenFiles {
			path := filepath.Join("testdata/config/broken", tt.file)
			_, err := extauth.LoadConfig(path, extauth.Env(tt.env), env)
			if err == nil {
				t.Fatalf("%s loaded", tt.file)
			}
			assertNoSecrets(t, tt.file, err, fileValues(t, path))
		}
	})

	t.Run("YAML syntax error", func(t *testing.T) {
		_, err := extauth.ParseConfig([]byte("oidc_client_secret: 'LEAK-unterminated\noidc_client_id: {"), env)
		if err == nil {
			t.Fatal("parsed")
		}
		assertNoSecrets(t, "error", err, secrets)
	})

	t.Run("KeyPair error", func(t *testing.T) {
		a := full.SAML.Additional
		a.PrivateKey = extauth.NewSecret(strings.Replace(keyPEM, "\n", "\nLEAK\n", 3))
		_, _, err := a.KeyPair()
		if err == nil {
			t.Fatal("KeyPair accepted a mangled key")
		}
		assertNoSecrets(t, "error", err, secrets)
	})
}

// Every exported value that holds a secret, wherever it is held, redacts it
// in every fmt verb, slog handler and json.Marshal, also hex- and
// base64-encoded; so do the errors of failed calls.
func TestSecretsNeverPrintedAnywhere(t *testing.T) {
	cookieKey := []byte("LEAK-cookie-key-0123456789abcdef")
	oldKey := []byte("LEAK-old-cookie-key-0123456789ab")
	full := fullConfig(t)
	keyPEM := full.SAML.Additional.PrivateKey.Value()
	oidcKeys := []string{full.OIDC.Additional.PrivateKey.Value(), full.OIDC.Additional.PrivateKeyNew.Value(), clientKeys()["EC"][1].pem}
	secrets := append([]string{"LEAK-", string(cookieKey), string(oldKey), "full-microblog-secret", "full-socialnet-secret",
		"full-search-secret", "full-blog-secret", "full-oidc-secret"}, pemLines(keyPEM)...)
	for _, k := range oidcKeys {
		if len(pemLines(k)) < 3 {
			t.Fatal("full.yml has no oidc private keys")
		}
		secrets = append(secrets, pemLines(k)...)
	}

	opts := extauth.Options{BaseURL: "https://app.example.org", CookieKey: cookieKey, OldCookieKeys: [][]byte{oldKey},
		Logger:    slog.New(slog.DiscardHandler),
		OnSuccess: func(http.ResponseWriter, *http.Request, *extauth.Identity) {}}
	a, err := extauth.New(full, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })

	env := providers.Env{CallbackURL: "https://app.example.org/users/auth/x/callback", HTTPClient: http.DefaultClient,
		Logger: slog.New(slog.DiscardHandler), Store: extauth.NewMemoryStore(extauth.MemoryStoreOptions{}), Now: time.Now}
	mbCfg := providers.MicroblogConfig{Key: "mk", Secret: "LEAK-microblog-cfg"}
	snCfg := providers.SocialnetConfig{Key: "sk", Secret: "LEAK-socialnet-cfg"}
	blogCfg := providers.BlogOAuth2Config{ClientID: "bk", ClientSecret: "LEAK-blog-cfg", Site: "https://blog.example.com"}
	searchCfg := providers.SearchOAuth2Config{ClientID: "gk", ClientSecret: "LEAK-search-cfg"}
	oidcCfg := providers.OIDCConfig{ClientID: "oc", ClientSecret: "LEAK-oidc-cfg", Issuer: "https://id.example.org",
		PrivateKey: oidcKeys[0], NextPrivateKey: oidcKeys[1], OldPrivateKey: oidcKeys[2]}
	must := func(s any, err error) any {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	oidcStrategy := must(providers.NewOIDC(oidcCfg, env)).(*providers.OIDC)
	// A DPoP key as a sign-in hands it over: a private JWK.
	dpopKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	dpopJWK, err := (&jose.JSONWebKey{Key: dpopKey, Algorithm: "ES256"}).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var dpopD struct{ D string }
	if err := json.Unmarshal(dpopJWK, &dpopD); err != nil || dpopD.D == "" {
		t.Fatalf("no d in %v", err)
	}
	secrets = append(secrets, string(dpopJWK), dpopD.D)
	tokens := extauth.Tokens{AccessToken: "LEAK-access", RefreshToken: "LEAK-refresh", Secret: "LEAK-token-secret", IDToken: "LEAK-id-token",
		DPoPKey: string(dpopJWK)}
	values := map[string]any{
		"Options":                 opts,
		"*Options":                &opts,
		"*Auth":                   a,
		"MicroblogConfig":         mbCfg,
		"SocialnetConfig":         snCfg,
		"BlogOAuth2Config":        blogCfg,
		"SearchOAuth2Config":      searchCfg,
		"OIDCConfig":              oidcCfg,
		"*OIDCConfig":             &oidcCfg,
		"*Microblog":              must(providers.NewMicroblog(mbCfg, env)),
		"*Socialnet":              must(providers.NewSocialnet(snCfg, env)),
		"*BlogOAuth2":             must(providers.NewBlogOAuth2(blogCfg, env)),
		"*SearchOAuth2":           must(providers.NewSearchOAuth2(searchCfg, env)),
		"*OIDC":                   oidcStrategy,
		"OIDC JWKS":               string(oidcStrategy.JWKS()),
		"OIDCAdditional":          full.OIDC.Additional,
		"OIDCConfig TLS keys":     providers.OIDCConfig{TLSCertificate: "cert", TLSKey: "LEAK-tls-key", NextTLSKey: "LEAK-tls-key-new"},
		"OIDCAdditional TLS keys": extauth.OIDCAdditionalSettings{TLSClientKey: extauth.NewSecret("LEAK-tls"), TLSClientKeyNew: extauth.NewSecret("LEAK-tls-new")},
		"Transaction": providers.Transaction{ID: "id", State: "LEAK-state", Verifier: "LEAK-verifier", Nonce: "LEAK-nonce", Binding: "LEAK-binding", TokenSecret: "LEAK-oauth1-secret",
			Extra: map[string]string{"dpop": string(dpopJWK)}},
		"Identity":                 extauth.Identity{UID: "u", Tokens: tokens},
		"*Identity":                &extauth.Identity{UID: "u", Tokens: tokens},
		"SignInOptions":            extauth.SignInOptions{LoginHint: "u", Account: &extauth.Identity{UID: "u", Tokens: tokens}},
		"providers.Identity":       providers.Identity{UID: "u", Tokens: providers.Tokens(tokens)},
		"Tokens":                   tokens,
		"LogoutSession":            extauth.LogoutSession{IDToken: "LEAK-id-token", NameID: "n"},
		"Identity.LogoutSession()": (&extauth.Identity{UID: "u", Tokens: tokens}).LogoutSession(),
		"providers.LogoutSession":  providers.LogoutSession{IDToken: "LEAK-id-token"},
		"samlsp.Config":            samlsp.Config{SPEntityID: "sp", PrivateKeyPEM: keyPEM},
		"samlsp.Config next key":   samlsp.Config{SPEntityID: "sp", PrivateKeyNewPEM: keyPEM},
		"SAMLAdditional next key":  extauth.SAMLAdditionalSettings{PrivateKeyNew: extauth.NewSecret(keyPEM)},
		"samlsp.Config old key":    samlsp.Config{SPEntityID: "sp", PrivateKeyOldPEM: keyPEM},
		"SAMLAdditional old key":   extauth.SAMLAdditionalSettings{PrivateKeyOld: extauth.NewSecret(keyPEM)},
		"OIDCAdditional old key":   extauth.OIDCAdditionalSettings{PrivateKeyOld: extauth.NewSecret(oidcKeys[2])},
		"Config.SAML":              full.SAML,
		"Config":                   *full,
		"Config.OIDC":              full.OIDC,
		"Config.Microblog":         full.Microblog,
		"Secret":                   extauth.NewSecret("LEAK-secret"),
		"SAMLAdditional":           full.SAML.Additional,
		"GothStrategy":             providers.Goth(github.New("gh-key", "LEAK-goth-secret", "https://app.example.org/cb")),
		"Identity.GothUser()":      (&extauth.Identity{UID: "u", Tokens: tokens}).GothUser().AccessToken == "LEAK-access",
	}
	for name, v := range values {
		assertNoSecrets(t, name, v, secrets)
		for how, c := range containers(v) {
			assertNoSecrets(t, name+" in "+how, c, secrets)
		}
	}

	// Errors of failed calls.
	short := opts
	short.CookieKey = cookieKey[:31]
	if _, err := extauth.New(full, short); err == nil {
		t.Error("New accepted a 31-byte CookieKey")
	} else {
		assertNoSecrets(t, "New error", err, secrets)
	}
	mangled := oidcCfg
	mangled.PrivateKey = strings.Replace(oidcKeys[0], "\n", "\nLEAK\n", 2)
	if _, err := providers.NewOIDC(mangled, env); err == nil {
		t.Error("NewOIDC accepted a mangled key")
	} else {
		assertNoSecrets(t, "NewOIDC error", err, secrets)
	}
	// A DPoP key that does not parse is refused without being quoted.
	broken := extauth.Identity{Provider: "oidc", UID: "u", Tokens: extauth.Tokens{AccessToken: "LEAK-access", TokenType: "DPoP",
		Issuer: full.OIDC.Issuer, DPoPKey: strings.Replace(string(dpopJWK), `"d":"`, `"d":"LEAK`, 1)}}
	if _, err := a.TokenSource(context.Background(), &broken); err == nil {
		t.Error("TokenSource took a mangled DPoP key")
	} else {
		assertNoSecrets(t, "TokenSource error", err, secrets)
	}
	if _, err := a.Client(context.Background(), &broken, nil); err == nil {
		t.Error("Client took a mangled DPoP key")
	} else {
		assertNoSecrets(t, "Client error", err, secrets)
	}
	bad := *full
	bad.OIDC.Issuer = "http://not-https.example.org"
	if _, err := extauth.New(&bad, opts); err == nil {
		t.Error("New accepted an http issuer")
	} else {
		assertNoSecrets(t, "New error", err, secrets)
	}
}
