package extauth_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/extauth/extauth"
)

func pkcs8PEM(t *testing.T, k crypto.Signer) string {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// oidcFile is a secrets file with the oidc client registered by key, and
// extra entries (indented as oidc_additional_settings' own) below it.
func oidcFile(key, extra string) string {
	return `
oidc_client_id: app
oidc_issuer: https://id.example.org
oidc_additional_settings:
  client_auth_method: private_key_jwt
  private_key: |
` + indent(key) + extra
}

func TestOIDCAdditionalSettingsLoad(t *testing.T) {
	key := clientKeys()["RSA"][0].pem
	cfg, err := extauth.ParseConfig([]byte(oidcFile(key, `  private_key_new: |
`+indent(clientKeys()["RSA"][1].pem)+`  pushed_authorization_requests: true
  request_object: "true"
  client_assertion_audience: issuer
  id_token_encrypted_response_alg: RSA-OAEP-256
  id_token_encrypted_response_enc: A256GCM
  userinfo_encrypted_response_alg: RSA-OAEP
  scope: openid profile
  prompt: login consent
  acr_values: urn:example:loa:high
  max_age: 3600
  login_hint: alice@example.org
  ui_locales: fr
`)))
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.OIDC.Additional
	if !cfg.OIDC.Configured() || len(cfg.Providers()) != 1 || cfg.Providers()[0] != extauth.OIDC || !cfg.OIDC.ClientSecret.IsZero() {
		t.Fatalf("oidc not configured by key alone: %v", cfg.Providers())
	}
	if a.ClientAuthMethod != "private_key_jwt" || a.PrivateKey.Value() != key || a.PrivateKeyNew.IsZero() ||
		!a.PushedAuthorizationRequests || !a.RequestObject || a.ClientAssertionAudience != "issuer" ||
		a.IDTokenEncryptedResponseAlg != "RSA-OAEP-256" || a.IDTokenEncryptedResponseEnc != "A256GCM" ||
		a.UserInfoEncryptedResponseAlg != "RSA-OAEP" || a.Scope != "openid profile" || a.Prompt != "login consent" ||
		a.ACRValues != "urn:example:loa:high" || a.MaxAge != "3600" {
		t.Errorf("settings %+v", a)
	}
	want := []extauth.Param{{Name: "login_hint", Value: "alice@example.org"}, {Name: "ui_locales", Value: "fr"}}
	if len(a.Custom) != 2 || a.Custom[0] != want[0] || a.Custom[1] != want[1] {
		t.Errorf("custom entries %v", a.Custom)
	}
	if len(cfg.Warnings) != 0 {
		t.Errorf("warnings %q", cfg.Warnings)
	}
	// New builds the strategy from it, with no request.
	auth, err := extauth.New(cfg, extauth.Options{BaseURL: "https://app.example.org", CookieKey: testKey,
		OnSuccess: func(http.ResponseWriter, *http.Request, *extauth.Identity) {}})
	if err != nil {
		t.Fatal(err)
	}
	auth.Close()

	// An empty mapping, as older files may carry, changes nothing.
	cfg, err = extauth.ParseConfig([]byte("oidc_client_id: a\noidc_client_secret: s\noidc_issuer: https://id.example.org\noidc_additional_settings: {}\n"))
	if err != nil || !cfg.OIDC.Configured() || len(cfg.OIDC.Additional.Custom) != 0 || cfg.OIDC.Additional.ClientAuthMethod != "" {
		t.Fatalf("%v %+v", err, cfg)
	}
}

// TestOIDCAdditionalSettingsProblems: each bad entry is named, with its
// class, and never its value.
func TestOIDCAdditionalSettingsProblems(t *testing.T) {
	rsaKey := clientKeys()["RSA"][0].pem
	ecKey := clientKeys()["EC"][0].pem
	weak, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, src string
		key       string // the problem's key
		reason    string
		class     error
	}{
		{"a 1024-bit RSA key", oidcFile(pkcs8PEM(t, weak), ""),
			"oidc_additional_settings.private_key", "is a 1024-bit RSA key; at least 2048 bits are required", extauth.ErrInvalidSetting},
		{"an EC key on P-384", oidcFile(pkcs8PEM(t, p384), ""),
			"oidc_additional_settings.private_key", "is an EC key on P-384; only P-256 is accepted", extauth.ErrInvalidSetting},
		{"a certificate for a key", oidcFile(fullConfigCert(t), ""),
			"oidc_additional_settings.private_key", "holds a certificate, not a private key", extauth.ErrInvalidSetting},
		{"a weak private_key_new", oidcFile(rsaKey, "  private_key_new: |\n"+indent(pkcs8PEM(t, weak))),
			"oidc_additional_settings.private_key_new", "is a 1024-bit RSA key", extauth.ErrInvalidSetting},
		{"a weak private_key_old", oidcFile(rsaKey, "  private_key_old: |\n"+indent(pkcs8PEM(t, weak))),
			"oidc_additional_settings.private_key_old", "is a 1024-bit RSA key", extauth.ErrInvalidSetting},
		{"private_key_old without private_key", "oidc_client_id: a\noidc_client_secret: s\noidc_issuer: https://id.example.org\noidc_additional_settings:\n  private_key_old: |\n" + indent(ecKey),
			"oidc_additional_settings.private_key", "is missing (the rotation's private_key_old needs it)", extauth.ErrMissingSetting},
		{"private_key_old is private_key_new", oidcFile(rsaKey, "  private_key_new: |\n"+indent(ecKey)+"  private_key_old: |\n"+indent(ecKey)),
			"oidc_additional_settings.private_key_old", "holds the key of private_key_new: a key cannot be retiring and next at once", extauth.ErrInvalidSetting},
		{"an EC private_key_old with RSA encryption", oidcFile(rsaKey, "  id_token_encrypted_response_alg: RSA-OAEP-256\n  private_key_old: |\n"+indent(ecKey)),
			"oidc_additional_settings.id_token_encrypted_response_alg", "does not suit the EC private_key_old: use ECDH-ES", extauth.ErrInvalidSetting},
		{"a PEM body that is not base64", oidcFile("-----BEGIN PRIVATE KEY-----\nMIIE*notbase64*\n-----END PRIVATE KEY-----\n", ""),
			"oidc_additional_settings.private_key", "is a PRIVATE KEY PEM block whose body is not base64: its 1st line after -----BEGIN PRIVATE KEY----- holds a character base64 does not use (line 6)", extauth.ErrInvalidSetting},
		{"an unknown method", strings.Replace(oidcFile(rsaKey, ""), "private_key_jwt", "magic", 1),
			"oidc_additional_settings.client_auth_method", "must be one of client_secret_basic, client_secret_post, client_secret_jwt, private_key_jwt, tls_client_auth, self_signed_tls_client_auth", extauth.ErrInvalidSetting},
		{"tls_client_auth without a certificate", strings.Replace(oidcFile(rsaKey, ""), "private_key_jwt", "tls_client_auth", 1),
			"oidc_additional_settings.tls_client_certificate", "is missing (client_auth_method tls_client_auth needs it)", extauth.ErrMissingSetting},
		{"private_key_jwt without a key", "oidc_client_id: a\noidc_issuer: https://id.example.org\noidc_additional_settings:\n  client_auth_method: private_key_jwt\n",
			"oidc_additional_settings.private_key", "is missing (client_auth_method private_key_jwt needs it)", extauth.ErrMissingSetting},
		{"client_secret_basic without a secret", "oidc_client_id: a\noidc_issuer: https://id.example.org\noidc_additional_settings:\n  prompt: login\n",
			"oidc_client_secret", "is missing", extauth.ErrMissingSetting},
		{"a short secret for client_secret_jwt", "oidc_client_id: a\noidc_client_secret: short\noidc_issuer: https://id.example.org\noidc_additional_settings:\n  client_auth_method: client_secret_jwt\n",
			"oidc_client_secret", "is too short for client_secret_jwt: HS256 needs a secret of at least 32 bytes", extauth.ErrInvalidSetting},
		{"RSA1_5", oidcFile(rsaKey, "  id_token_encrypted_response_alg: RSA1_5\n"),
			"oidc_additional_settings.id_token_encrypted_response_alg", "RSA1_5 is refused", extauth.ErrInvalidSetting},
		{"an RSA algorithm for an EC key", oidcFile(ecKey, "  id_token_encrypted_response_alg: RSA-OAEP-256\n"),
			"oidc_additional_settings.id_token_encrypted_response_alg", "does not suit the EC private_key: use ECDH-ES", extauth.ErrInvalidSetting},
		{"an unknown content encryption", oidcFile(rsaKey, "  userinfo_encrypted_response_alg: RSA-OAEP\n  userinfo_encrypted_response_enc: A128CTR\n"),
			"oidc_additional_settings.userinfo_encrypted_response_enc", "must be one of A128GCM", extauth.ErrInvalidSetting},
		{"an enc without its alg", oidcFile(rsaKey, "  id_token_encrypted_response_enc: A256GCM\n"),
			"oidc_additional_settings.id_token_encrypted_response_enc", "needs id_token_encrypted_response_alg", extauth.ErrInvalidSetting},
		{"an assertion algorithm that does not suit the key", oidcFile(ecKey, "  token_endpoint_auth_signing_alg: PS256\n"),
			"oidc_additional_settings.token_endpoint_auth_signing_alg", "must be one of ES256 for the EC private_key", extauth.ErrInvalidSetting},
		{"a request object without a key", "oidc_client_id: a\noidc_client_secret: s\noidc_issuer: https://id.example.org\noidc_additional_settings:\n  request_object: true\n",
			"oidc_additional_settings.private_key", "is missing (request_object needs it)", extauth.ErrMissingSetting},
		{"max_age not a number", oidcFile(rsaKey, "  max_age: an hour\n"),
			"oidc_additional_settings.max_age", "must be a number of seconds from 0 to 31622400", extauth.ErrInvalidSetting},
		{"a negative max_age", oidcFile(rsaKey, "  max_age: -5\n"),
			"oidc_additional_settings.max_age", "must be a number of seconds from 0 to 31622400 (a year), in digits alone", extauth.ErrInvalidSetting},
		{"a repeated prompt, refused as the per-request option is", oidcFile(rsaKey, "  prompt: login login\n"),
			"oidc_additional_settings.prompt", "repeats a value", extauth.ErrInvalidSetting},
		{"prompt none with another", oidcFile(rsaKey, "  prompt: none login\n"),
			"oidc_additional_settings.prompt", "cannot combine none with other values", extauth.ErrInvalidSetting},
		{"an algorithm in lower case", oidcFile(ecKey, "  token_endpoint_auth_signing_alg: es256\n"),
			"oidc_additional_settings.token_endpoint_auth_signing_alg", "must be one of ES256 for the EC private_key (did you mean ES256? algorithm names are case-sensitive)", extauth.ErrInvalidSetting},
		{"a DPoP algorithm in lower case", oidcFile(ecKey, "  dpop: true\n  dpop_signing_alg: eddsa\n"),
			"oidc_additional_settings.dpop_signing_alg", "must be one of ES256, PS256, EdDSA (did you mean EdDSA? algorithm names are case-sensitive)", extauth.ErrInvalidSetting},
		{"an assertion algorithm the profile forbids", oidcFile(rsaKey, "  profile: fapi2\n  dpop: true\n  token_endpoint_auth_signing_alg: RS256\n"),
			"oidc_additional_settings.token_endpoint_auth_signing_alg", "must be one of PS256 for the RSA private_key under profile fapi2", extauth.ErrInvalidSetting},
		{"pushed requests off under profile fapi2", oidcFile(rsaKey, "  profile: fapi2\n  dpop: true\n  pushed_authorization_requests: false\n"),
			"oidc_additional_settings.pushed_authorization_requests", "cannot be false under profile fapi2: FAPI 2.0 sends every authorization request by PAR", extauth.ErrInvalidSetting},
		{"pushed requests off under Message Signing", oidcFile(rsaKey, "  pushed_authorization_requests: False\n  profile: fapi2-message-signing\n  dpop: true\n"),
			"oidc_additional_settings.pushed_authorization_requests", "cannot be false under profile fapi2-message-signing", extauth.ErrInvalidSetting},
		{"request objects off under Message Signing", oidcFile(rsaKey, "  profile: fapi2-message-signing\n  dpop: true\n  request_object: false\n"),
			"oidc_additional_settings.request_object", "cannot be false under profile fapi2-message-signing: Message Signing signs every authorization request", extauth.ErrInvalidSetting},
		{"a misspelt profile, with no secret", "oidc_client_id: a\noidc_issuer: https://id.example.org\noidc_additional_settings:\n  profil: fapi2\n  dpop: true\n  private_key: |\n" + indent(rsaKey),
			"oidc_additional_settings.profil", "is not a setting: did you mean profile? As written it is sent to the provider as an authorization request parameter, and the client, without profile, needs oidc_client_secret, which is missing", extauth.ErrInvalidSetting},
		{"a misspelt client_auth_method, with no secret", "oidc_client_id: a\noidc_issuer: https://id.example.org\noidc_additional_settings:\n  client_auth_methd: private_key_jwt\n  private_key: |\n" + indent(rsaKey),
			"oidc_additional_settings.client_auth_methd", "is not a setting: did you mean client_auth_method?", extauth.ErrInvalidSetting},
		{"an unknown prompt", oidcFile(rsaKey, "  prompt: always\n"),
			"oidc_additional_settings.prompt", "must be none, login, consent or select_account", extauth.ErrInvalidSetting},
		{"a boolean that is not", oidcFile(rsaKey, "  pushed_authorization_requests: sometimes\n"),
			"oidc_additional_settings.pushed_authorization_requests", "must be true or false", extauth.ErrInvalidSetting},
		{"a protocol parameter as an entry", oidcFile(rsaKey, "  state: fixed\n"),
			"oidc_additional_settings.state", "is a parameter extauth sets itself", extauth.ErrInvalidSetting},
		{"a misspelt private_key", oidcFile(rsaKey, "  privte_key: |\n"+indent(ecKey)),
			"oidc_additional_settings.privte_key", "holds a PEM block", extauth.ErrInvalidSetting},
		{"not a mapping", "oidc_client_id: a\noidc_client_secret: s\noidc_issuer: https://id.example.org\noidc_additional_settings: [private_key_jwt]\n",
			"oidc_additional_settings", "must be a mapping", extauth.ErrInvalidSetting},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := extauth.ParseConfig([]byte(tc.src))
			var ve *extauth.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("err = %v", err)
			}
			found := false
			for _, p := range ve.Problems {
				if p.Key == tc.key && strings.Contains(p.Reason, tc.reason) && errors.Is(p, tc.class) && p.Provider == extauth.OIDC {
					found = true
				}
			}
			if !found {
				t.Errorf("no problem %s %q in %v", tc.key, tc.reason, err)
			}
			secrets := append(pemLines(rsaKey), pemLines(ecKey)...)
			secrets = append(secrets, pemLines(pkcs8PEM(t, weak))...)
			assertNoSecrets(t, "error", err, append(secrets, "fixed", "an hour", "sometimes"))
		})
	}
}

// TestOIDCProblemsSaidOnce: a misspelt client_auth_method is answered
// with the method it was meant to be, not with the oidc_client_secret the
// method it is not would need; a missing private_key is one problem that
// names everything that needs it.
func TestOIDCProblemsSaidOnce(t *testing.T) {
	head := "oidc_client_id: a\noidc_issuer: https://id.example.org\noidc_additional_settings:\n"
	for _, tc := range []struct {
		name, src string
		want      []string // every problem, as Error prints it
	}{
		{"private_key_jwk", head + "  client_auth_method: private_key_jwk\n  private_key: |\n" + indent(clientKeys()["RSA"][0].pem),
			[]string{"oidc: oidc_additional_settings.client_auth_method is not a method extauth knows (did you mean private_key_jwt?)"}},
		{"Private_Key_JWT", head + "  client_auth_method: Private_Key_JWT\n  private_key: |\n" + indent(clientKeys()["RSA"][0].pem),
			[]string{"oidc: oidc_additional_settings.client_auth_method is not a method extauth knows (did you mean private_key_jwt?)"}},
		{"client_secret_psot without a secret", head + "  client_auth_method: client_secret_psot\n",
			[]string{"oidc: oidc_client_secret is missing",
				"oidc: oidc_additional_settings.client_auth_method is not a method extauth knows (did you mean client_secret_post?)"}},
		{"private_key missing for four", head + "  client_auth_method: private_key_jwt\n  request_object: true\n" +
			"  id_token_encrypted_response_alg: RSA-OAEP\n  userinfo_encrypted_response_alg: RSA-OAEP\n",
			[]string{"oidc: oidc_additional_settings.private_key is missing (client_auth_method private_key_jwt, request_object, " +
				"id_token_encrypted_response_alg and userinfo_encrypted_response_alg need it)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := extauth.ParseConfig([]byte(tc.src))
			var ve *extauth.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("err = %v", err)
			}
			var got []string
			for _, p := range ve.Problems {
				got = append(got, p.Error())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("problems\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestOIDCMisspeltProfileFirst: a client with no secret whose profile (or
// client_auth_method) entry is misspelt is told of the misspelling, with
// the suggestion, and not that oidc_client_secret is missing: the secret
// is not what the operator meant to give.
func TestOIDCMisspeltProfileFirst(t *testing.T) {
	src := "oidc_client_id: a\noidc_issuer: https://id.example.org\noidc_additional_settings:\n  profil: fapi2\n  dpop: true\n  private_key: |\n" +
		indent(clientKeys()["EC"][0].pem)
	_, err := extauth.ParseConfig([]byte(src))
	var ve *extauth.ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Key != "oidc_additional_settings.profil" ||
		!strings.HasPrefix(ve.Problems[0].Reason, "is not a setting: did you mean profile?") {
		t.Errorf("problems: %v", err)
	}
	// With a secret, the entry is a parameter like any other: a warning.
	cfg, err := extauth.ParseConfig([]byte("oidc_client_secret: s\n" + src))
	if err != nil {
		t.Fatal(err)
	}
	if _, w, _ := cfg.OIDC.ClientKeys(); !slices.Contains(w,
		"oidc_additional_settings.profil is not a setting: it is sent to the provider as the authorization request parameter profil; did you mean oidc_additional_settings.profile?") {
		t.Errorf("warnings %q", w)
	}
}

// TestOIDCStartupWarningsOnce: what the oidc strategy accepts but warns
// of, an oidc_client_secret that the profile's private_key_jwt leaves
// unused and entries that are no setting but sent to the provider as
// authorization parameters, is logged once, by New, with the provider
// named once: not also among Config.Warnings, which a host logs beside it
// (docs/configuration.md). ClientKeys lists the same warnings for extauth
// check, for the environment and each tenant, naming entries, never
// values; a parameter of OpenID Connect's own (ui_locales) is no warning.
func TestOIDCStartupWarningsOnce(t *testing.T) {
	key := clientKeys()["EC"][0].pem
	src := "oidc_client_id: app\noidc_issuer: https://id.example.org\noidc_client_secret: LEAK-leftover\noidc_additional_settings:\n" +
		"  profile: fapi2\n  dpop: true\n  promt: LEAK-login\n  login_hnt: LEAK-alice\n  ui_locales: de\n  x_partner: LEAK-7\n  private_key: |\n" + indent(key) +
		"tenants:\n  city-a:\n    oidc_client_id: a2\n  city-b:\n    oidc_client_secret: LEAK-tenant-leftover\n"
	cfg, err := extauth.ParseConfig([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"oidc_client_secret is set but unused: profile fapi2 (client_auth_method private_key_jwt) authenticates with private_key; remove the secret",
		"oidc_additional_settings.login_hnt is not a setting: it is sent to the provider as the authorization request parameter login_hnt; did you mean the parameter login_hint?",
		"oidc_additional_settings.promt is not a setting: it is sent to the provider as the authorization request parameter promt; did you mean oidc_additional_settings.prompt?",
		"oidc_additional_settings.x_partner is not a setting: it is sent to the provider as the authorization request parameter x_partner",
	}
	for name, c := range map[string]*extauth.Config{"the environment": cfg, "city-a": cfg.Tenants["city-a"], "city-b": cfg.Tenants["city-b"]} {
		if len(c.Warnings) != 0 {
			t.Errorf("%s: Config.Warnings %q, want none: the strategy warns", name, c.Warnings)
		}
		_, warnings, err := c.OIDC.ClientKeys()
		if err != nil || !slices.Equal(warnings, want) {
			t.Errorf("%s: ClientKeys warnings %v\n%s\nwant\n%s", name, err, strings.Join(warnings, "\n"), strings.Join(want, "\n"))
		}
	}

	var logs strings.Builder
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	cfg.LogWarnings(t.Context(), logger)
	auth, err := extauth.New(cfg, extauth.Options{BaseURL: "https://app.example.org", CookieKey: testKey, Logger: logger,
		TenantOf:  extauth.SubdomainTenants("app.example.org"),
		OnSuccess: func(http.ResponseWriter, *http.Request, *extauth.Identity) {}})
	if err != nil {
		t.Fatal(err)
	}
	auth.Close()
	for _, w := range want {
		if n := strings.Count(logs.String(), w); n != 1 {
			t.Errorf("logged %d times, want once: %s", n, w)
		}
	}
	if strings.Contains(logs.String(), "provider=oidc provider=oidc") || strings.Contains(logs.String(), "LEAK") {
		t.Errorf("the provider named twice, or a value logged:\n%s", logs.String())
	}

	// With client_auth_method written, the warning names it.
	cfg, err = extauth.ParseConfig([]byte("oidc_client_secret: s\n" + oidcFile(key, "")))
	if err != nil {
		t.Fatal(err)
	}
	if _, warnings, _ := cfg.OIDC.ClientKeys(); !slices.Equal(warnings, []string{
		"oidc_client_secret is set but unused: client_auth_method private_key_jwt authenticates with private_key; remove the secret"}) {
		t.Errorf("warnings %q", warnings)
	}
	clean, err := extauth.ParseConfig([]byte(oidcFile(key, "  ui_locales: fr\n  claims_locales: fr\n")))
	if err != nil {
		t.Fatal(err)
	}
	if _, warnings, err := clean.OIDC.ClientKeys(); err != nil || len(warnings) != 0 || len(clean.Warnings) != 0 {
		t.Errorf("without a secret or unknown parameter: %v %q %q", err, warnings, clean.Warnings)
	}
}

func fullConfigCert(t *testing.T) string {
	t.Helper()
	return fullConfig(t).SAML.Additional.Certificate
}

// TestOIDCAdditionalSettingsTenants: a tenant may register its own client
// by key, replacing the environment's mapping whole, and a typo in an
// entry is a warning of the tenant's strategy.
func TestOIDCAdditionalSettingsTenants(t *testing.T) {
	src := `
production:
  oidc_client_id: app
  oidc_client_secret: s
  oidc_issuer: https://id.example.org
  oidc_additional_settings:
    prompt: login
  tenants:
    city_a:
      oidc_issuer: https://id.city-a.example.org
      oidc_additional_settings:
        client_auth_method: private_key_jwt
        private_key: |
` + indent(indent(indent(clientKeys()["EC"][0].pem))) + `        acr_valeus: urn:example:loa:high
    city_b: {}
`
	cfg, err := extauth.ParseConfig([]byte(src), extauth.Env("production"))
	if err != nil {
		t.Fatal(err)
	}
	a, b := cfg.Tenants["city_a"], cfg.Tenants["city_b"]
	if cfg.OIDC.Additional.Prompt != "login" || b.OIDC.Additional.Prompt != "login" {
		t.Errorf("environment's mapping not inherited: %+v", b.OIDC.Additional)
	}
	if a.OIDC.Additional.Prompt != "" || a.OIDC.Additional.ClientAuthMethod != "private_key_jwt" || !a.OIDC.Configured() {
		t.Errorf("tenant's mapping does not replace the environment's: %+v", a.OIDC.Additional)
	}
	if _, w, _ := a.OIDC.ClientKeys(); !slices.Contains(w, "oidc_additional_settings.acr_valeus is not a setting: it is sent to the provider as the authorization request parameter acr_valeus; did you mean oidc_additional_settings.acr_values?") {
		t.Errorf("city_a's warnings %q", w)
	}
	assertNoSecrets(t, "Config", cfg, pemLines(clientKeys()["EC"][0].pem))
}

// TestOIDCWorkedExampleLoads keeps docs/oidc.md's worked example true: its
// secrets file, with the key in the environment, loads and builds.
func TestOIDCWorkedExampleLoads(t *testing.T) {
	doc, err := os.ReadFile("docs/oidc.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "### A worked example")
	_, rest, ok2 := strings.Cut(rest, "```yaml\n")
	block, _, ok3 := strings.Cut(rest, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("no YAML in the worked example")
	}
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		lines = append(lines, strings.TrimPrefix(l, "   "))
	}
	key := clientKeys()["RSA"][0].pem
	cfg, err := extauth.ParseConfig([]byte(strings.Join(lines, "\n")), extauth.Env("production"),
		extauth.LookupEnv(func(k string) (string, bool) { return key, k == "OIDC_PRIVATE_KEY" }))
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.OIDC.Additional
	if !cfg.OIDC.Configured() || a.PrivateKey.Value() != key || !a.PushedAuthorizationRequests || !a.RequestObject ||
		a.IDTokenEncryptedResponseAlg != "RSA-OAEP-256" || a.MaxAge != "3600" || len(a.Custom) != 1 {
		t.Errorf("the example reads as %+v", a)
	}
	auth, err := extauth.New(cfg, extauth.Options{BaseURL: "https://app.example.org", CookieKey: testKey,
		OnSuccess: func(http.ResponseWriter, *http.Request, *extauth.Identity) {}})
	if err != nil {
		t.Fatal(err)
	}
	auth.Close()
}
