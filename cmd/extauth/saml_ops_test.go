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
	return samlPairsFile(t, cur, next, nil, extra)
}

// samlPairsFile is samlRotationFile with the retiring pair old too.
func samlPairsFile(t *testing.T, cur, next, old *keyPair, extra string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("saml_sp_entity_id: urn:example:app\nsaml_idp_metadata_url: https://idp.example.org/metadata\nsaml_additional_settings:\n")
	b.WriteString(extra)
	b.WriteString("  certificate: |\n" + indent(string(cur.certPEM), "    ") + "  private_key: |\n" + indent(string(cur.keyPEM), "    "))
	if next != nil {
		b.WriteString("  certificate_new: |\n" + indent(string(next.certPEM), "    ") + "  private_key_new: |\n" + indent(string(next.keyPEM), "    "))
	}
	if old != nil {
		b.WriteString("  certificate_old: |\n" + indent(string(old.certPEM), "    ") + "  private_key_old: |\n" + indent(string(old.keyPEM), "    "))
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

// rows returns a report with each run of spaces made one, so that a row
// reads the same whatever the width of its table.
func rows(report string) string {
	return regexp.MustCompile(` {2,}`).ReplaceAllString(report, " ")
}

// wantRows checks that the report of a successful check has each of want
// and none of not, read by rows, and no secret.
func wantRows(t *testing.T, r result, want, not []string) {
	t.Helper()
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr %q\n%s", r.code, r.stderr, r.stdout)
	}
	got := rows(r.stdout)
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("report lacks %q:\n%s", w, r.stdout)
		}
	}
	for _, n := range not {
		if strings.Contains(got, n) {
			t.Errorf("report has %q:\n%s", n, r.stdout)
		}
	}
	assertNoSecret(t, "check", r.stdout)
}

// check shows every SP certificate of a rotation with its fingerprint and
// what it does now (signs, decrypts, is published for what), says which
// step the rotation is at and what to do next, and warns about the
// certificate that expires, but the retiring one's, which no longer
// matters.
func TestCheckKeyRotation(t *testing.T) {
	cur, next := spPairSoon(), spPair()
	const procedure = `docs/saml.md, "Rotating the SP key pair"`
	for _, tc := range []struct {
		name           string
		cur, next, old *keyPair
		want, not      []string
	}{
		{name: "step 1: certificate_new added", cur: cur, next: next, want: []string{
			"SP key pair rotation under way: certificate_new is added, to be promoted (step 1 of " + procedure + ")\n",
			"SP certificate CN=expiring-app, expires on 2030-06-21 (in 20 days)\n SHA-256 " + fingerprint(cur.cert) +
				"\n signs requests, decrypts assertions; published for encryption and signing\n",
			"SP certificate_new CN=extauth-cli-test, expires on 2039-12-30 (in 3498 days)\n SHA-256 " + fingerprint(next.cert) +
				"\n decrypts assertions, signs nothing; published for signing only\n",
			"Next step give the IdP the SP metadata and wait until it has read it (an IdP that verifies our signatures must know certificate_new before it signs); " +
				"then promote: certificate and private_key become certificate_old and private_key_old, certificate_new and private_key_new become certificate and private_key\n",
			"- saml: the SP certificate (saml_additional_settings.certificate) expires in 20 days, on 2030-06-21; promote certificate_new once the IdP has read the metadata with it\n",
		}},
		{name: "step 3: promoted", cur: next, old: cur, want: []string{
			"SP key pair rotation under way: certificate_new was promoted to certificate, certificate_old retires (step 3 of " + procedure + ")\n",
			"SP certificate CN=extauth-cli-test, expires on 2039-12-30 (in 3498 days)\n SHA-256 " + fingerprint(next.cert) +
				"\n signs requests, decrypts assertions; published for encryption and signing\n",
			"SP certificate_old CN=expiring-app, expires on 2030-06-21 (in 20 days)\n SHA-256 " + fingerprint(cur.cert) +
				"\n decrypts assertions, never signs again; published for signing only\n",
			"Next step give the IdP the SP metadata (certificate_old is no longer published for encryption); once it encrypts to certificate " +
				"(the application logs hourly while it still encrypts to certificate_old), remove certificate_old and private_key_old\n",
			"0 errors, 0 warnings.",
		}},
		{name: "certificate_new is the current pair", cur: next, next: next, want: []string{
			"SP key pair requests are signed (RSA-SHA256), encrypted assertions are decrypted\n",
			"- saml: saml_additional_settings.certificate_new holds the current key pair: there is nothing to rotate; remove certificate_new and private_key_new\n",
		}, not: []string{"SP certificate_new", "Next step"}},
		{name: "certificate_old is the current pair", cur: next, old: next, want: []string{
			"SP key pair requests are signed (RSA-SHA256), encrypted assertions are decrypted\n",
			"- saml: saml_additional_settings.certificate_old holds the current key pair: nothing retires; to promote certificate_new, " +
				"it becomes certificate and private_key, otherwise remove certificate_old and private_key_old\n",
		}, not: []string{"SP certificate_old", "Next step"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantRows(t, runAt(t, testNow, "check", "-offline", "-config", samlPairsFile(t, tc.cur, tc.next, tc.old, "")), tc.want, tc.not)
		})
	}

	// The next pair must not be the one that expires first.
	path := samlRotationFile(t, spPair(), spPairSoon(), "")
	r := runAt(t, testNow, "check", "-offline", "-config", path)
	if !strings.Contains(r.stdout, "  - saml: the next SP certificate (saml_additional_settings.certificate_new) expires in 20 days, on 2030-06-21\n") {
		t.Errorf("no warning about the next certificate:\n%s", r.stdout)
	}

	// A next or retiring key that does not match its certificate is an
	// error, named.
	bad := *spPair()
	bad.keyPEM = spPairSoon().keyPEM
	for _, path := range []string{samlPairsFile(t, spPairSoon(), &bad, nil, ""), samlPairsFile(t, spPairSoon(), nil, &bad, "")} {
		r = runAt(t, testNow, "check", "-offline", "-config", path)
		if r.code != exitFail || !regexp.MustCompile(`saml_additional_settings.private_key_(new|old) does not match the public key of certificate_(new|old)`).MatchString(r.stdout) {
			t.Errorf("exit %d:\n%s", r.code, r.stdout)
		}
		assertNoSecret(t, "check", r.stdout)
	}
}

// In a federation, check's next steps of a rotation say what giving the
// IdP the metadata means there (the registry, the aggregate) and how long
// certificate_old stays (until the last aggregate that published it for
// encryption has expired).
func TestCheckKeyRotationInAFederation(t *testing.T) {
	cur, next := spPairSoon(), spPair()
	fed := "  federation:\n    metadata_url: https://fed.example.org/aggregate.xml\n    signing_certificate: |\n" + indent(string(spPair().certPEM), "      ")
	file := func(cur, next, old *keyPair) string {
		data, err := os.ReadFile(samlPairsFile(t, cur, next, old, fed))
		if err != nil {
			t.Fatal(err)
		}
		return writeRaw(t, "federation.yml", strings.Replace(string(data), "saml_idp_metadata_url: https://idp.example.org/metadata\n", "", 1))
	}
	wantRows(t, runAt(t, testNow, "check", "-offline", "-config", file(cur, next, nil)), []string{
		"Next step give the federation's registry the SP metadata (extauth metadata prints it), which it publishes in the aggregate (or its MDQ answers) " +
			"for every IdP; wait until it has, and until the last aggregate without certificate_new has expired (its validUntil)",
		"then promote: certificate and private_key become certificate_old and private_key_old, certificate_new and private_key_new become certificate and private_key" +
			" (docs/saml.md, \"Rotating in a federation\")\n",
	}, []string{"give the IdP the SP metadata"})
	wantRows(t, runAt(t, testNow, "check", "-offline", "-config", file(next, nil, cur)), []string{
		"Next step give the federation's registry the SP metadata (certificate_old is no longer published for encryption); keep certificate_old and " +
			"private_key_old until the registry has published it and the last aggregate that published certificate_old for encryption has expired (its validUntil, " +
			"up to max_validity after it was signed), and the application has logged for a day no assertion encrypted to certificate_old; then remove them",
	}, []string{"give the IdP the SP metadata"})
}

// extauth metadata prints what the route serves: no validUntil unless
// metadata_valid_for asks for one, and during a rotation the current
// certificate for encryption and signing, the next and the retiring ones
// for signing only.
func TestMetadataValidityAndRotation(t *testing.T) {
	cur, next := spPair(), spPairSoon()
	r := runCLI(t, "metadata", "-config", samlRotationFile(t, cur, nil, ""), "-base-url", "https://app.example.org")
	if r.code != exitOK || strings.Contains(r.stdout, "validUntil") || strings.Contains(r.stdout, "cacheDuration") {
		t.Fatalf("exit %d, stderr %q:\n%s", r.code, r.stderr, r.stdout)
	}

	old := mustPair(generateKeyPair("retiring", 2048, 3650, testNow))
	r = runCLI(t, "metadata", "-config", samlPairsFile(t, cur, next, old, "  metadata_valid_for: P7D\n  metadata_cache_duration: PT12H\n"),
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
	c, n, o := base64.StdEncoding.EncodeToString(cur.cert.Raw), base64.StdEncoding.EncodeToString(next.cert.Raw), base64.StdEncoding.EncodeToString(old.cert.Raw)
	want := []string{"encryption " + c, "signing " + c, "signing " + n, "signing " + o}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("key descriptors:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
