package main

import (
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
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
		{[]string{"-oidc", "-next"}, "-next makes the next SAML pair"},
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
