package main

import (
	"encoding/base64"
	"encoding/xml"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/crewjam/saml"
	"gopkg.in/yaml.v3"

	"github.com/extauth/extauth"
)

// samlRotationFile is a secrets file with the SP key pair cur, the next
// pair next (nil: none) and extra lines under saml_additional_settings.
func samlRotationFile(t *testing.T, cur, next *keyPair, extra string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("saml_sp_entity_id: urn:example:app\nsaml_idp_metadata_url: https://idp.example.org/metadata\nsaml_additional_settings:\n")
	b.WriteString(extra)
	b.WriteString("  certificate: |\n" + indent(string(cur.certPEM), "    ") + "  private_key: |\n" + indent(string(cur.keyPEM), "    "))
	if next != nil {
		b.WriteString("  certificate_new: |\n" + indent(string(next.certPEM), "    ") + "  private_key_new: |\n" + indent(string(next.keyPEM), "    "))
	}
	return writeRaw(t, "rotation.yml", b.String())
}

// keygen -next makes the pair that goes beside the current one: YAML
// entries certificate_new and private_key_new, or sp-new.key and
// sp-new.crt beside sp.key and sp.crt, which it leaves alone.
func TestKeygenNext(t *testing.T) {
	r := runAt(t, testNow, "keygen", "-name", "My App 2031", "-next")
	if r.code != exitOK || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	var entries map[string]string
	if err := yaml.Unmarshal([]byte(r.stdout), &entries); err != nil || len(entries) != 2 {
		t.Fatalf("snippet %v, %v:\n%s", entries, err, r.stdout)
	}
	cert := checkGenerated(t, entries["certificate_new"], entries["private_key_new"], "My App 2031", 2048, 3650, testNow)
	if !strings.Contains(r.stdout, "# The next pair of a key rotation") || !strings.Contains(r.stdout, "# private_key_new is a secret") {
		t.Errorf("snippet:\n%s", r.stdout)
	}
	// Pasted beside the current pair, it loads as the next pair.
	cur := spPair()
	head := "saml_sp_entity_id: urn:example:app\nsaml_idp_metadata_url: https://idp.example/md\nsaml_additional_settings:\n" +
		"  certificate: |\n" + indent(string(cur.certPEM), "    ") + "  private_key: |\n" + indent(string(cur.keyPEM), "    ")
	cfg, err := extauth.ParseConfig([]byte(head+indent(r.stdout, "  ")), extauth.LookupEnv(nil))
	if err != nil {
		t.Fatalf("the snippet does not load beside the current pair: %v", err)
	}
	if got, key, err := cfg.SAML.Additional.NextKeyPair(); err != nil || !got.Equal(cert) || key == nil {
		t.Fatalf("NextKeyPair = %v, %v", got, err)
	}
	if got, _, _ := cfg.SAML.Additional.KeyPair(); !got.Equal(cur.cert) {
		t.Error("the current pair changed")
	}

	dir := t.TempDir()
	if r := runAt(t, testNow, "keygen", "-name", "app", "-out", dir); r.code != exitOK {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	curKey, curCert := readFile(t, filepath.Join(dir, "sp.key")), readFile(t, filepath.Join(dir, "sp.crt"))
	r = runAt(t, testNow, "keygen", "-name", "app 2", "-next", "-out", dir)
	keyPath, certPath := filepath.Join(dir, "sp-new.key"), filepath.Join(dir, "sp-new.crt")
	if r.code != exitOK || !strings.Contains(r.stdout, "wrote "+keyPath+" (private key, mode 0600") ||
		!strings.Contains(r.stdout, "as certificate_new: | and private_key_new: |.") {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	wantModes(t, map[string]os.FileMode{keyPath: 0o600, certPath: 0o644})
	checkGenerated(t, readFile(t, certPath), readFile(t, keyPath), "app 2", 2048, 3650, testNow)
	if readFile(t, filepath.Join(dir, "sp.key")) != curKey || readFile(t, filepath.Join(dir, "sp.crt")) != curCert {
		t.Error("keygen -next changed the current pair")
	}
	if r := runAt(t, testNow, "keygen", "-name", "app 3", "-next", "-out", dir); r.code != exitFail || !strings.Contains(r.stderr, keyPath+" exists") {
		t.Errorf("a second -next: exit %d, stderr %q", r.code, r.stderr)
	}
}

// check shows both certificates of a rotation and what each does, and
// warns about the one that expires.
func TestCheckKeyRotation(t *testing.T) {
	path := samlRotationFile(t, spPairSoon(), spPair(), "")
	r := runAt(t, testNow, "check", "-offline", "-config", path)
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr %q\n%s", r.code, r.stderr, r.stdout)
	}
	for _, want := range []string{
		"SP key pair         rotation under way: requests are signed with certificate (RSA-SHA256), assertions encrypted to either certificate are decrypted, the metadata publishes both\n",
		"SP certificate      CN=expiring-app, expires on 2030-06-21 (in 20 days); signs requests, decrypts assertions\n",
		"SP certificate_new  CN=extauth-cli-test, expires on 2039-12-30 (in 3498 days); decrypts assertions, signs nothing until it becomes certificate\n",
		"  - saml: the SP certificate (saml_additional_settings.certificate) expires in 20 days, on 2030-06-21; finish the rotation to certificate_new once the IdP uses it\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("report lacks %q:\n%s", want, r.stdout)
		}
	}
	assertNoSecret(t, "check", r.stdout)

	// The next pair must not be the one that expires first.
	path = samlRotationFile(t, spPair(), spPairSoon(), "")
	r = runAt(t, testNow, "check", "-offline", "-config", path)
	if !strings.Contains(r.stdout, "  - saml: the next SP certificate (saml_additional_settings.certificate_new) expires in 20 days, on 2030-06-21\n") {
		t.Errorf("no warning about the next certificate:\n%s", r.stdout)
	}

	// A next key that does not match its certificate is an error, named.
	bad := *spPair()
	bad.keyPEM = spPairSoon().keyPEM
	path = samlRotationFile(t, spPairSoon(), &bad, "")
	r = runAt(t, testNow, "check", "-offline", "-config", path)
	if r.code != exitFail || !strings.Contains(r.stdout, "saml_additional_settings.private_key_new does not match the public key of certificate_new") {
		t.Errorf("exit %d:\n%s", r.code, r.stdout)
	}
	assertNoSecret(t, "check", r.stdout)
}

// extauth metadata prints what the route serves: no validUntil unless
// metadata_valid_for asks for one, and both certificates during a
// rotation, the current one first.
func TestMetadataValidityAndRotation(t *testing.T) {
	cur, next := spPair(), spPairSoon()
	r := runCLI(t, "metadata", "-config", samlRotationFile(t, cur, nil, ""), "-base-url", "https://app.example.org")
	if r.code != exitOK || strings.Contains(r.stdout, "validUntil") || strings.Contains(r.stdout, "cacheDuration") {
		t.Fatalf("exit %d, stderr %q:\n%s", r.code, r.stderr, r.stdout)
	}

	r = runCLI(t, "metadata", "-config", samlRotationFile(t, cur, next, "  metadata_valid_for: P7D\n  metadata_cache_duration: PT12H\n"),
		"-base-url", "https://app.example.org")
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	assertNoSecret(t, "metadata", r.stdout)
	var ed saml.EntityDescriptor
	if err := xml.Unmarshal([]byte(r.stdout), &ed); err != nil {
		t.Fatal(err)
	}
	if d := time.Until(ed.ValidUntil); d < 7*24*time.Hour-time.Minute || d > 7*24*time.Hour {
		t.Errorf("validUntil %s is not 7 days ahead", ed.ValidUntil)
	}
	if n := len(regexp.MustCompile(`validUntil=`).FindAllString(r.stdout, -1)); n != 1 || !strings.Contains(r.stdout, `cacheDuration="PT12H"`) {
		t.Errorf("%d validUntil, cacheDuration:\n%s", n, r.stdout)
	}
	var got []string
	for _, kd := range ed.SPSSODescriptors[0].KeyDescriptors {
		got = append(got, kd.Use+" "+kd.KeyInfo.X509Data.X509Certificates[0].Data)
	}
	c, n := base64.StdEncoding.EncodeToString(cur.cert.Raw), base64.StdEncoding.EncodeToString(next.cert.Raw)
	want := []string{"encryption " + c, "signing " + c, "encryption " + n, "signing " + n}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("key descriptors:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
