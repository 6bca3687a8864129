package main

import (
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/extauth/extauth/providers"

	"github.com/extauth/extauth"
)

// TestKeygenOIDC: keygen -oidc prints a client key that, pasted under
// oidc_additional_settings, loads and signs in as private_key_jwt needs,
// and names the kid the JWKS route publishes it under.
func TestKeygenOIDC(t *testing.T) {
	for _, tc := range []struct {
		args []string
		kind string
	}{
		{[]string{"-oidc"}, "RSA 2048 bits"},
		{[]string{"-oidc", "-bits", "3072"}, "RSA 3072 bits"},
		{[]string{"-oidc", "-ec"}, "EC P-256"},
	} {
		r := runAt(t, testNow, append([]string{"keygen"}, tc.args...)...)
		if r.code != exitOK || r.stderr != "" || !strings.Contains(r.stdout, "# OpenID Connect client key: "+tc.kind+".") {
			t.Fatalf("%q: exit %d, stderr %q\n%s", tc.args, r.code, r.stderr, r.stdout)
		}
		head := "oidc_client_id: app\noidc_issuer: https://id.example.org\noidc_additional_settings:\n  client_auth_method: private_key_jwt\n"
		cfg, err := extauth.ParseConfig([]byte(head+indent(r.stdout, "  ")), extauth.LookupEnv(nil))
		if err != nil {
			t.Fatalf("%q: the snippet does not load: %v\n%s", tc.args, err, r.stdout)
		}
		s, err := providers.NewOIDC(providers.OIDCConfig{ClientID: "app", Issuer: "https://id.example.org",
			PrivateKey: cfg.OIDC.Additional.PrivateKey.Value(), Options: providers.OIDCOptions{AuthMethod: providers.AuthMethodPrivateKeyJWT}},
			providers.Env{CallbackURL: "https://app.example/cb", HTTPClient: http.DefaultClient})
		if err != nil {
			t.Fatal(err)
		}
		_, rest, _ := strings.Cut(r.stdout, "under kid ")
		kid, _, _ := strings.Cut(rest, " ")
		if kid == "" || !strings.Contains(string(s.JWKS()), `"kid":"`+kid+`"`) {
			t.Errorf("%q: kid %q is not in the JWKS %s", tc.args, kid, s.JWKS())
		}
	}

	dir := t.TempDir()
	r := runAt(t, testNow, "keygen", "-oidc", "-ec", "-out", dir)
	if r.code != exitOK || !strings.Contains(r.stdout, "wrote "+filepath.Join(dir, "oidc.key")) {
		t.Fatalf("exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	info, err := os.Stat(filepath.Join(dir, "oidc.key"))
	if err != nil || info.Mode().Perm() != fs.FileMode(0o600) {
		t.Fatalf("oidc.key: %v %v", info, err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "oidc.key"))
	if _, err := providers.ParseOIDCPrivateKey(string(data)); err != nil || strings.Contains(r.stdout, "PRIVATE KEY") {
		t.Errorf("written key: %v; stdout %q", err, r.stdout)
	}
	if r := runAt(t, testNow, "keygen", "-oidc", "-out", dir); r.code != exitFail || !strings.Contains(r.stderr, "exists; not replacing it without -force") {
		t.Errorf("overwrote without -force: %d %q", r.code, r.stderr)
	}
	if r := runAt(t, testNow, "keygen", "-oidc", "-out", dir, "-force"); r.code != exitOK {
		t.Errorf("-force: %d %q", r.code, r.stderr)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-ec"}, "-ec applies to -oidc"},
		{[]string{"-oidc", "-name", "app"}, "-name and -days are for the SAML certificate"},
		{[]string{"-oidc", "-ec", "-bits", "3072"}, "-bits is for RSA keys"},
		{[]string{"-oidc", "-bits", "1024"}, "-bits 1024 is too short"},
		{[]string{"-oidc", "-force"}, "-force only applies with -out"},
	} {
		r := runAt(t, testNow, append([]string{"keygen"}, c.args...)...)
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, "extauth keygen: "+c.want) {
			t.Errorf("%q: exit %d, stderr %q", c.args, r.code, r.stderr)
		}
	}
}

// TestKeygenOIDCNext: keygen -oidc -next prints the next key of a rotation
// as private_key_new, which loads beside private_key and is published for
// signing under the kid it names; -out writes oidc-new.key beside oidc.key.
func TestKeygenOIDCNext(t *testing.T) {
	cur := runAt(t, testNow, "keygen", "-oidc")
	r := runAt(t, testNow, "keygen", "-oidc", "-next", "-ec")
	if r.code != exitOK || r.stderr != "" || !strings.Contains(r.stdout, "\nprivate_key_new: |\n") || strings.Contains(r.stdout, "\nprivate_key: |") ||
		!strings.Contains(r.stdout, "# OpenID Connect client key: EC P-256, the next key of a rotation.") {
		t.Fatalf("exit %d, stderr %q\n%s", r.code, r.stderr, r.stdout)
	}
	head := "oidc_client_id: app\noidc_issuer: https://id.example.org\noidc_additional_settings:\n  client_auth_method: private_key_jwt\n"
	cfg, err := extauth.ParseConfig([]byte(head+indent(cur.stdout, "  ")+indent(r.stdout, "  ")), extauth.LookupEnv(nil))
	if err != nil {
		t.Fatalf("the snippet does not load beside private_key: %v", err)
	}
	if cfg.OIDC.Additional.PrivateKeyNew.IsZero() {
		t.Fatal("private_key_new is not set")
	}
	keys, _, err := cfg.OIDC.ClientKeys()
	if err != nil || len(keys) != 2 {
		t.Fatalf("keys %v, %v", keys, err)
	}
	_, rest, _ := strings.Cut(r.stdout, "under kid\n# ")
	kid, _, _ := strings.Cut(rest, " ")
	if next := keys[1]; next.Setting != "oidc_additional_settings.private_key_new" || next.KID != kid || next.Signs || !slices.Equal(next.Published, []string{"sig"}) {
		t.Errorf("the next key %+v, kid in the snippet %q", next, kid)
	}

	dir := t.TempDir()
	r = runAt(t, testNow, "keygen", "-oidc", "-next", "-out", dir)
	if r.code != exitOK || !strings.Contains(r.stdout, "wrote "+filepath.Join(dir, "oidc-new.key")) ||
		!strings.Contains(r.stdout, "as private_key_new: |.") {
		t.Fatalf("exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "oidc.key")); err == nil {
		t.Error("-next wrote oidc.key")
	}
}

// TestCheckOIDCKeyRotation: check shows the client's keys as it shows
// SAML's: each with its kid, whether it signs, that it decrypts, what the
// JWKS route publishes of it, the rotation's step and what to do next; a
// next or retiring key that is the current one is a warning, and so is an
// oidc_client_secret that private_key_jwt leaves unused.
func TestCheckOIDCKeyRotation(t *testing.T) {
	pemOf := func(args ...string) string {
		r := runAt(t, testNow, append([]string{"keygen", "-oidc"}, args...)...)
		// The block under the entry, indented for a key of
		// oidc_additional_settings.
		_, keyPEM, _ := strings.Cut(r.stdout, ": |\n")
		return indent(keyPEM, "  ")
	}
	a, b := pemOf(), pemOf("-ec")
	kid := func(keyPEM string) string {
		cfg, err := extauth.ParseConfig([]byte("oidc_client_id: app\noidc_issuer: https://id.example.org\noidc_additional_settings:\n  client_auth_method: private_key_jwt\n  private_key: |\n"+keyPEM), extauth.LookupEnv(nil))
		if err != nil {
			t.Fatal(err)
		}
		keys, _, _ := cfg.OIDC.ClientKeys()
		return keys[0].KID
	}
	file := func(secret string, entries ...string) string {
		var sb strings.Builder
		sb.WriteString("oidc_client_id: app\noidc_issuer: https://id.example.org\n" + secret + "oidc_additional_settings:\n  client_auth_method: private_key_jwt\n")
		for i := 0; i < len(entries); i += 2 {
			sb.WriteString("  " + entries[i] + ": |\n" + entries[i+1])
		}
		return writeRaw(t, "oidc.yml", sb.String())
	}
	const procedure = `docs/oidc.md, "Keys, the JWKS route and rotation"`
	for _, tc := range []struct {
		name string
		path string
		want []string
		not  []string
	}{
		{"no rotation", file("", "private_key", a), []string{
			"Client key signs client assertions and request objects, decrypts ID tokens and UserInfo\n",
			"private_key RSA 2048, kid " + kid(a) + "\n signs, decrypts; published for signing, and for encryption as kid " + kid(a) + "-enc\n",
			"0 errors, 0 warnings.",
		}, []string{"Next step"}},
		{"step 1", file("", "private_key", a, "private_key_new", b), []string{
			"Client key rotation under way: private_key_new is added, to be promoted (step 1 of " + procedure + ")\n",
			"private_key RSA 2048, kid " + kid(a) + "\n signs, decrypts; published for signing, and for encryption as kid " + kid(a) + "-enc\n",
			"private_key_new EC P-256, kid " + kid(b) + "\n decrypts, signs nothing; published for signing only\n",
			"Next step deploy, and wait until the provider has read the JWKS again",
			"then promote: private_key becomes private_key_old, private_key_new becomes private_key\n",
		}, nil},
		{"step 3", file("", "private_key", b, "private_key_old", a), []string{
			"Client key rotation under way: private_key_new was promoted to private_key, private_key_old retires (step 3 of " + procedure + ")\n",
			"private_key EC P-256, kid " + kid(b) + "\n signs, decrypts; published for signing, and for encryption as kid " + kid(b) + "-enc\n",
			"private_key_old RSA 2048, kid " + kid(a) + "\n decrypts, never signs again; published for signing only\n",
			"Next step once the provider has read the JWKS again (private_key_old is no longer published for encryption) and encrypts to private_key, remove private_key_old\n",
		}, nil},
		{"private_key_new is private_key", file("", "private_key", a, "private_key_new", a), []string{
			"- oidc: oidc_additional_settings.private_key_new holds the key of private_key: there is nothing to rotate; remove private_key_new\n",
		}, []string{"private_key_new EC", "Next step"}},
		{"private_key_old is private_key", file("", "private_key", a, "private_key_old", a), []string{
			"- oidc: oidc_additional_settings.private_key_old holds the key of private_key: nothing retires",
		}, []string{"Next step"}},
		{"encryption registered for ID tokens and UserInfo", writeRaw(t, "oidc-enc.yml", "oidc_client_id: app\noidc_issuer: https://id.example.org\n"+
			"oidc_additional_settings:\n  client_auth_method: private_key_jwt\n  id_token_encrypted_response_alg: RSA-OAEP-256\n"+
			"  userinfo_encrypted_response_alg: RSA-OAEP\n  private_key: |\n"+a), []string{
			"private_key RSA 2048, kid " + kid(a) + "\n signs, decrypts; published for signing, and for encryption as kid " + kid(a) +
				"-enc (alg RSA-OAEP-256), kid " + kid(a) + "-enc-RSA-OAEP (alg RSA-OAEP)\n",
		}, nil},
		{"a leftover secret", file("oidc_client_secret: LEAK-leftover\n", "private_key", a), []string{
			"- oidc: oidc_client_secret is set but unused: client_auth_method private_key_jwt authenticates with private_key; remove the secret\n",
		}, []string{"LEAK"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantRows(t, runAt(t, testNow, "check", "-offline", "-config", tc.path), tc.want, tc.not)
		})
	}
}
