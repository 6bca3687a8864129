package extauth_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/extauth/extauth"
	"gopkg.in/yaml.v3"
)

// fullConfig returns the configuration of testdata/config/full.yml, which
// has every provider and a valid SAML key pair.
func fullConfig(t *testing.T) *extauth.Config {
	t.Helper()
	cfg, err := extauth.LoadConfig("testdata/config/full.yml", vars())
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestZeroConfigIsValid(t *testing.T) {
	var cfg extauth.Config
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if p := cfg.Providers(); len(p) != 0 {
		t.Errorf("Providers() = %v", p)
	}
	var nilCfg *extauth.Config
	if err := nilCfg.Validate(); err == nil {
		t.Error("nil config validated")
	}
}

func TestHalfFilledProviders(t *testing.T) {
	s := extauth.NewSecret("s")
	tests := []struct {
		name string
		cfg  extauth.Config
		want []string
	}{
		{"microblog key only", extauth.Config{Microblog: extauth.OAuthProvider{Key: "k"}}, []string{"microblog_secret"}},
		{"microblog site only", extauth.Config{Microblog: extauth.OAuthProvider{Site: "https://m.test"}}, []string{"microblog_key", "microblog_secret"}},
		{"socialnet secret only", extauth.Config{Socialnet: extauth.OAuthProvider{Secret: s}}, []string{"socialnet_key"}},
		{"search_oauth2 key only", extauth.Config{SearchOAuth2: extauth.OAuthProvider{Key: "k"}}, []string{"search_oauth2_secret"}},
		{"blog_oauth2 without site", extauth.Config{BlogOAuth2: extauth.OAuthProvider{Key: "k", Secret: s}}, []string{"blog_oauth2_site"}},
		{"saml sso only", extauth.Config{SAML: extauth.SAMLConfig{IdPSSOServiceURL: "https://idp.test/sso"}}, []string{"saml_sp_entity_id", "saml_idp_metadata_url"}},
		{"saml additional only", extauth.Config{SAML: extauth.SAMLConfig{Additional: extauth.SAMLAdditionalSettings{Security: extauth.SAMLSecurity{LogoutRequestsSigned: true}}}}, []string{"saml_sp_entity_id", "saml_idp_metadata_url"}},
		{"oidc issuer only", extauth.Config{OIDC: extauth.OIDCConfig{Issuer: "https://id.test"}}, []string{"oidc_client_id", "oidc_client_secret"}},
		{"two providers", extauth.Config{Microblog: extauth.OAuthProvider{Key: "k"}, OIDC: extauth.OIDCConfig{ClientID: "c"}}, []string{"microblog_secret", "oidc_client_secret", "oidc_issuer"}},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		if keys := problemKeys(t, err); !slices.Equal(keys, tt.want) {
			t.Errorf("%s: keys %v, want %v", tt.name, keys, tt.want)
		}
		if !errors.Is(err, extauth.ErrMissingSetting) {
			t.Errorf("%s: %v is not ErrMissingSetting", tt.name, err)
		}
		if len(tt.cfg.Providers()) != 0 {
			t.Errorf("%s: half-filled provider listed: %v", tt.name, tt.cfg.Providers())
		}
	}
	cfg := extauth.Config{BlogOAuth2: extauth.OAuthProvider{Key: "k", Secret: s}}
	if got := cfg.Validate().Error(); got != "blog_oauth2: blog_oauth2_site is missing" {
		t.Errorf("message %q", got)
	}
}

func TestURLChecks(t *testing.T) {
	type set func(*extauth.Config, string)
	site := func(c *extauth.Config, v string) { c.BlogOAuth2.Site = v }
	issuer := func(c *extauth.Config, v string) { c.OIDC.Issuer = v }
	entity := func(c *extauth.Config, v string) { c.SAML.SPEntityID = v }
	sso := func(c *extauth.Config, v string) { c.SAML.IdPSSOServiceURL = v }
	relay := func(c *extauth.Config, v string) { c.SAML.Additional.RelayState = v }
	authn := func(c *extauth.Config, v string) { c.SAML.Additional.AuthnContext = v }
	tests := []struct {
		key  string
		set  set
		good []string
		bad  []string
	}{
		{"blog_oauth2_site", site,
			[]string{"https://blog.example.com", "http://localhost:8080/wp", "HTTPS://BLOG.EXAMPLE.COM"},
			[]string{"blog.example.com", "/relative", "ftp://blog.example.com", "https://", "https:///path", "https://:443", "javascript:alert(1)", "https://u:p@blog.example.com", " https://blog.example.com", "https://bl og.example.com"}},
		{"oidc_issuer", issuer,
			[]string{"https://id.example.org", "https://id.example.org/realms/x"},
			[]string{"https://id.example.org?x=1", "https://id.example.org/?", "https://id.example.org#f", "https://id.example.org/#", "id.example.org"}},
		{"saml_sp_entity_id", entity,
			[]string{"https://app.example.org/saml", "urn:example:sp", "URN:oid:1.2.3", "urn:x-y:z"},
			[]string{"app", "urn:", "urn:x:", "urn:-x:y", "urn:a:b c", "ftp://app", "https://app.example.org/" + strings.Repeat("a", 1024)}},
		{"saml_idp_sso_service_url", sso,
			[]string{"https://idp.example.org/sso"},
			[]string{"idp.example.org/sso"}},
		{"saml_additional_settings.RelayState", relay,
			[]string{"/", "/dashboard?tab=1", "https://app.example.org/welcome"},
			[]string{"dashboard", "//evil.example", "/\\evil.example", "javascript:alert(1)", "ftp://x"}},
		{"saml_additional_settings.authn_context", authn,
			[]string{"urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport", "https://refeds.org/profile/mfa"},
			[]string{"PasswordProtectedTransport", "/relative"}},
	}
	for _, tt := range tests {
		for _, v := range tt.good {
			cfg := fullConfig(t)
			tt.set(cfg, v)
			if err := cfg.Validate(); err != nil {
				t.Errorf("%s %q: %v", tt.key, v, err)
			}
		}
		for _, v := range tt.bad {
			cfg := fullConfig(t)
			tt.set(cfg, v)
			err := cfg.Validate()
			if keys := problemKeys(t, err); !slices.Equal(keys, []string{tt.key}) || !errors.Is(err, extauth.ErrInvalidSetting) {
				t.Errorf("%s %q: keys %v, err %v", tt.key, v, keys, err)
				continue
			}
			if strings.TrimSpace(v) != "" && strings.Contains(err.Error(), strings.TrimSpace(v)) {
				t.Errorf("%s: error shows the value: %v", tt.key, err)
			}
		}
	}
}

func TestCustomEntries(t *testing.T) {
	tests := []struct {
		param extauth.Param
		key   string
	}{
		{extauth.Param{Name: "", Value: "x"}, "saml_additional_settings"},
		{extauth.Param{Name: "SAMLRequest", Value: "x"}, "saml_additional_settings.SAMLRequest"},
		{extauth.Param{Name: "signature", Value: "x"}, "saml_additional_settings.signature"},
		{extauth.Param{Name: "key", Value: "-----BEGIN PRIVATE KEY-----\nabc\n-----END PRIVATE KEY-----\n"}, "saml_additional_settings.key"},
	}
	for _, tt := range tests {
		cfg := fullConfig(t)
		cfg.SAML.Additional.Custom = append(cfg.SAML.Additional.Custom, tt.param)
		if keys := problemKeys(t, cfg.Validate()); !slices.Equal(keys, []string{tt.key}) {
			t.Errorf("%+v: keys %v, want %s", tt.param, keys, tt.key)
		}
	}
}

// pemOf re-encodes der under the given PEM type.
func pemOf(typ string, der []byte) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
}

func TestKeyPairChecks(t *testing.T) {
	const (
		certKey = "saml_additional_settings.certificate"
		privKey = "saml_additional_settings.private_key"
	)
	full := fullConfig(t)
	cert, key, err := full.SAML.Additional.KeyPair()
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, err := x509.MarshalPKCS8PrivateKey(ecKey)
	if err != nil {
		t.Fatal(err)
	}
	ecSEC1, err := x509.MarshalECPrivateKey(ecKey)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := full.SAML.Additional.Certificate
	keyPEM := full.SAML.Additional.PrivateKey.Value()
	encrypted := strings.Replace(pemOf("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key)),
		"-----\n", "-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00000000000000000000000000000000\n\n", 1)

	tests := []struct {
		name       string
		cert, key  string
		wantKeys   []string
		wantReason string
	}{
		{"PKCS #8 pair", certPEM, keyPEM, nil, ""},
		{"PKCS #1 key", certPEM, pemOf("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key)), nil, ""},
		{"neither", "", "", nil, ""},
		{"only certificate", certPEM, "", []string{privKey}, "is missing"},
		{"only key", "", keyPEM, []string{certKey}, "is missing"},
		{"certificate not PEM", "MIIB", keyPEM, []string{certKey}, "PEM block of type CERTIFICATE"},
		{"certificate PEM of a key", keyPEM, keyPEM, []string{certKey}, "PEM block of type CERTIFICATE"},
		{"certificate bytes bad", pemOf("CERTIFICATE", []byte("junk")), keyPEM, []string{certKey}, "does not parse"},
		{"key not PEM", certPEM, "not a key", []string{privKey}, "must be a PEM block"},
		{"key PEM of a certificate", certPEM, certPEM, []string{privKey}, "holds a certificate"},
		{"PKCS #1 bytes bad", certPEM, pemOf("RSA PRIVATE KEY", []byte("junk")), []string{privKey}, "PKCS #1"},
		{"PKCS #8 bytes bad", certPEM, pemOf("PRIVATE KEY", []byte("junk")), []string{privKey}, "PKCS #8"},
		{"PKCS #8 EC key", certPEM, pemOf("PRIVATE KEY", ecDER), []string{privKey}, "must be an RSA key"},
		{"SEC 1 EC key", certPEM, pemOf("EC PRIVATE KEY", ecSEC1), []string{privKey}, "must be an RSA key"},
		{"encrypted PKCS #8", certPEM, pemOf("ENCRYPTED PRIVATE KEY", []byte("x")), []string{privKey}, "encrypted"},
		{"encrypted PKCS #1", certPEM, encrypted, []string{privKey}, "encrypted"},
		{"unknown PEM type", certPEM, pemOf("OPENSSH PRIVATE KEY", []byte("x")), []string{privKey}, "must be a PEM block"},
	}
	for _, tt := range tests {
		a := extauth.SAMLAdditionalSettings{Certificate: tt.cert, PrivateKey: extauth.NewSecret(tt.key)}
		cfg := fullConfig(t)
		cfg.SAML.Additional = a
		err := cfg.Validate()
		if tt.wantKeys == nil {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			c, k, err := a.KeyPair()
			if err != nil || (tt.cert != "" && (c == nil || !k.PublicKey.Equal(cert.PublicKey))) {
				t.Errorf("%s: KeyPair() = %v, %v, %v", tt.name, c != nil, k != nil, err)
			}
			continue
		}
		if keys := problemKeys(t, err); !slices.Equal(keys, tt.wantKeys) || !strings.Contains(err.Error(), tt.wantReason) {
			t.Errorf("%s: keys %v, err %v; want %v %q", tt.name, keys, err, tt.wantKeys, tt.wantReason)
		}
		if c, k, err := a.KeyPair(); err == nil || c != nil || k != nil {
			t.Errorf("%s: KeyPair() did not fail", tt.name)
		}
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	cfg := fullConfig(t)
	cfg.Microblog.Site = "nope"
	cfg.Socialnet.Secret = extauth.Secret{}
	cfg.SAML.Additional.PrivateKey = extauth.NewSecret("junk")
	cfg.OIDC.Issuer = "https://id.example.org?q"
	err := cfg.Validate()
	want := []string{"microblog_site", "socialnet_secret", "oidc_issuer", "saml_additional_settings.private_key"}
	keys := problemKeys(t, err)
	slices.Sort(keys)
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Errorf("keys %v, want %v", keys, want)
	}
	for _, class := range []error{extauth.ErrMissingSetting, extauth.ErrInvalidSetting, extauth.ErrInvalidKeyPair} {
		if !errors.Is(err, class) {
			t.Errorf("errors.Is(err, %v) = false", class)
		}
	}
	if errors.Is(err, extauth.ErrTemplate) {
		t.Error("errors.Is(err, ErrTemplate) = true")
	}
	if !strings.HasPrefix(err.Error(), "4 problems: ") {
		t.Errorf("message %q", err)
	}
}

func TestProvidersOrder(t *testing.T) {
	s := extauth.NewSecret("s")
	cfg := extauth.Config{
		OIDC:       extauth.OIDCConfig{ClientID: "c", ClientSecret: s, Issuer: "https://id.test"},
		Microblog:  extauth.OAuthProvider{Key: "k", Secret: s},
		BlogOAuth2: extauth.OAuthProvider{Key: "k", Secret: s},
		SAML:       extauth.SAMLConfig{SPEntityID: "urn:x:y", IdPMetadataURL: "https://idp.test/md"},
	}
	// blog_oauth2 without its site cannot work, so it is not listed.
	want := []extauth.Provider{extauth.Microblog, extauth.SAML, extauth.OIDC}
	if got := cfg.Providers(); !slices.Equal(got, want) {
		t.Errorf("Providers() = %v, want %v", got, want)
	}
}

// brokenFiles are the files under testdata/config/broken, each with the
// settings its error must name and the class of error.
var brokenFiles = []struct {
	file string
	env  string
	keys []string
	err  error
}{
	{"half_filled.yml", "", []string{"blog_oauth2_site"}, extauth.ErrMissingSetting},
	{"half_filled_oidc.yml", "", []string{"oidc_client_id", "oidc_issuer"}, extauth.ErrMissingSetting},
	{"half_filled_saml.yml", "", []string{"saml_sp_entity_id", "saml_idp_metadata_url"}, extauth.ErrMissingSetting},
	{"bad_url.yml", "", []string{"blog_oauth2_site"}, extauth.ErrInvalidSetting},
	{"url_credentials.yml", "", []string{"microblog_site"}, extauth.ErrInvalidSetting},
	{"bad_issuer.yml", "", []string{"oidc_issuer"}, extauth.ErrInvalidSetting},
	{"bad_entity_id.yml", "", []string{"saml_sp_entity_id"}, extauth.ErrInvalidSetting},
	{"bad_metadata_url.yml", "", []string{"saml_idp_metadata_url"}, extauth.ErrInvalidSetting},
	{"http_metadata_url.yml", "", []string{"saml_idp_metadata_url"}, extauth.ErrInvalidSetting},
	{"bad_relay_state.yml", "", []string{"saml_additional_settings.RelayState"}, extauth.ErrInvalidSetting},
	{"bad_authn_context.yml", "", []string{"saml_additional_settings.authn_context"}, extauth.ErrInvalidSetting},
	{"bad_pem.yml", "", []string{"saml_additional_settings.certificate"}, extauth.ErrInvalidKeyPair},
	{"bad_key_pem.yml", "", []string{"saml_additional_settings.private_key"}, extauth.ErrInvalidKeyPair},
	{"key_mismatch.yml", "", []string{"saml_additional_settings.private_key"}, extauth.ErrInvalidKeyPair},
	{"rsa_1024.yml", "", []string{"saml_additional_settings.certificate", "saml_additional_settings.private_key"}, extauth.ErrInvalidKeyPair},
	{"ec_key.yml", "", []string{"saml_additional_settings.certificate", "saml_additional_settings.private_key"}, extauth.ErrInvalidKeyPair},
	{"only_cert.yml", "", []string{"saml_additional_settings.private_key"}, extauth.ErrMissingSetting},
	{"only_key.yml", "", []string{"saml_additional_settings.certificate"}, extauth.ErrMissingSetting},
	{"unknown_env.yml", "staging", nil, extauth.ErrUnknownEnvironment},
	{"bad_erb.yml", "", []string{"microblog_secret"}, extauth.ErrTemplate},
	{"fetch_unset.yml", "", []string{"oidc_client_secret"}, extauth.ErrTemplate},
	{"bad_dollar.yml", "", []string{"socialnet_secret"}, extauth.ErrTemplate},
	{"nested_custom.yml", "", []string{"saml_additional_settings.organization"}, extauth.ErrInvalidSetting},
	{"pem_in_custom.yml", "", []string{"saml_additional_settings.privte_key", "saml_additional_settings.private_key"}, extauth.ErrInvalidSetting},
	{"reserved_custom.yml", "", []string{"saml_additional_settings.SAMLRequest"}, extauth.ErrInvalidSetting},
	{"bad_bool.yml", "", []string{"saml_additional_settings.security.logout_requests_signed"}, extauth.ErrInvalidSetting},
	{"wrong_type.yml", "", []string{"microblog_key"}, extauth.ErrInvalidSetting},
	{"duplicate_key.yml", "", []string{"microblog_secret"}, extauth.ErrInvalidSetting},
	{"additional_not_mapping.yml", "", []string{"saml_additional_settings"}, extauth.ErrInvalidSetting},
	{"merge_loop.yml", "", []string{"saml_additional_settings"}, extauth.ErrInvalidSetting},
}

func TestBrokenFiles(t *testing.T) {
	listed, err := filepath.Glob("testdata/config/broken/*.yml")
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != len(brokenFiles) {
		t.Errorf("%d files in testdata/config/broken, %d in the table", len(listed), len(brokenFiles))
	}
	for _, tt := range brokenFiles {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join("testdata/config/broken", tt.file)
			cfg, err := extauth.LoadConfig(path, extauth.Env(tt.env), vars())
			if err == nil {
				t.Fatalf("loaded: %+v", cfg)
			}
			if cfg != nil {
				t.Error("a Config returned with the error")
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("err = %v, want %v", err, tt.err)
			}
			if tt.keys == nil {
				if !strings.Contains(err.Error(), `"`+tt.env+`"`) {
					t.Errorf("error %q does not name environment %s", err, tt.env)
				}
			} else if keys := problemKeys(t, err); !slices.Equal(keys, tt.keys) {
				t.Errorf("keys %v, want %v", keys, tt.keys)
			}
			for _, v := range fileValues(t, path) {
				if strings.Contains(err.Error(), v) {
					t.Errorf("error shows value %q: %v", v, err)
				}
			}
		})
	}
}

// fileValues returns the distinctive values of a YAML file (mapping values
// and list items, and every line of multi-line ones), for checking that an
// error never repeats one.
func fileValues(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var out []string
	add := func(v string) {
		for _, line := range strings.Split(v, "\n") {
			// Short values ("true", "/x") could occur in any message.
			if len(line) >= 8 {
				out = append(out, line)
			}
		}
	}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c)
			}
		case yaml.MappingNode:
			for i := 1; i < len(n.Content); i += 2 {
				walk(n.Content[i])
			}
		case yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c)
			}
		case yaml.ScalarNode:
			add(n.Value)
		}
	}
	walk(&doc)
	if len(out) == 0 {
		t.Fatalf("%s has no values to look for", path)
	}
	return out
}

// TestIdPMetadataCertificateSetting: saml_additional_settings.
// idp_metadata_certificate is read as a PEM block scalar and must hold one
// certificate; what is wrong with it is said without quoting it.
func TestIdPMetadataCertificateSetting(t *testing.T) {
	certPEM := fullConfig(t).SAML.Additional.Certificate
	indented := "    " + strings.ReplaceAll(strings.TrimSpace(certPEM), "\n", "\n    ")
	src := "saml_sp_entity_id: urn:example:sp\nsaml_idp_metadata_url: https://idp.example.org/md\n" +
		"saml_additional_settings:\n  idp_metadata_certificate: |\n" + indented + "\n"
	cfg := mustParse(t, src)
	if got := cfg.SAML.Additional.IdPMetadataCertificate; strings.TrimSpace(got) != strings.TrimSpace(certPEM) {
		t.Fatalf("read %q", got)
	}
	if len(cfg.SAML.Additional.Custom) != 0 {
		t.Fatalf("sent to the IdP as a custom entry: %v", cfg.SAML.Additional.Custom)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	const key = "saml_additional_settings.idp_metadata_certificate"
	for name, v := range map[string]string{
		"not PEM":          "MIIBsecretish",
		"a key":            fullConfig(t).SAML.Additional.PrivateKey.Value(),
		"bad bytes":        pemOf("CERTIFICATE", []byte("junk-bytes")),
		"two certificates": certPEM + certPEM,
	} {
		c := fullConfig(t)
		c.SAML.Additional.IdPMetadataCertificate = v
		err := c.Validate()
		if keys := problemKeys(t, err); !slices.Equal(keys, []string{key}) {
			t.Errorf("%s: problems %v", name, keys)
		}
		for _, line := range strings.Split(v, "\n") {
			if len(line) > 8 && strings.Contains(err.Error(), line) {
				t.Errorf("%s: the error quotes the value: %v", name, err)
			}
		}
	}
}
