package main

import (
	"bytes"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/extauth/extauth"
)

// checkGenerated checks a generated pair with crypto/x509 against the
// specification's guidance, and returns the certificate.
func checkGenerated(t *testing.T, certPEM, keyPEM string, name string, bits, days int, now time.Time) *x509.Certificate {
	t.Helper()
	block, rest := pem.Decode([]byte(certPEM))
	if block == nil || block.Type != "CERTIFICATE" || len(bytes.TrimSpace(rest)) != 0 {
		t.Fatalf("certificate is not one PEM CERTIFICATE block:\n%s", certPEM)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	block, rest = pem.Decode([]byte(keyPEM))
	if block == nil || block.Type != "PRIVATE KEY" || len(bytes.TrimSpace(rest)) != 0 {
		t.Fatalf("private key is not one PEM PRIVATE KEY block")
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	key, ok := parsed.(*rsa.PrivateKey)
	if !ok {
		t.Fatalf("private key is a %T", parsed)
	}
	if err := key.Validate(); err != nil {
		t.Error(err)
	}
	if got := key.N.BitLen(); got != bits {
		t.Errorf("key has %d bits, want %d", got, bits)
	}
	pub, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok || !pub.Equal(&key.PublicKey) {
		t.Error("the certificate's public key is not the private key's")
	}
	if cert.Subject.String() != "CN="+name || cert.Issuer.String() != "CN="+name {
		t.Errorf("subject %s, issuer %s; want CN=%s for both", cert.Subject, cert.Issuer, name)
	}
	if cert.Subject.CommonName != name {
		t.Errorf("CN %q, want %q", cert.Subject.CommonName, name)
	}
	if !cert.NotBefore.Equal(now.Truncate(time.Second)) {
		t.Errorf("NotBefore %s, want %s", cert.NotBefore, now)
	}
	if got := cert.NotAfter.Sub(cert.NotBefore); got != time.Duration(days)*24*time.Hour {
		t.Errorf("valid %s, want %d days", got, days)
	}
	if cert.SignatureAlgorithm != x509.SHA256WithRSA {
		t.Errorf("signed with %s", cert.SignatureAlgorithm)
	}
	// Self-signed: the certificate's own key verifies its signature. (It is
	// not a CA, so CheckSignatureFrom would refuse it as a parent.)
	if err := cert.CheckSignature(cert.SignatureAlgorithm, cert.RawTBSCertificate, cert.Signature); err != nil {
		t.Errorf("self-signature: %v", err)
	}
	if cert.KeyUsage != x509.KeyUsageDigitalSignature|x509.KeyUsageKeyEncipherment {
		t.Errorf("key usage %b", cert.KeyUsage)
	}
	if !cert.BasicConstraintsValid || cert.IsCA {
		t.Errorf("basic constraints valid %v, CA %v; want an end-entity certificate", cert.BasicConstraintsValid, cert.IsCA)
	}
	if cert.SerialNumber.Sign() <= 0 || cert.SerialNumber.BitLen() > 128 {
		t.Errorf("serial %s is not a positive 128-bit number", cert.SerialNumber)
	}
	return cert
}

func TestKeygenYAML(t *testing.T) {
	r := runAt(t, testNow, "keygen", "-name", "My App")
	if r.code != exitOK || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	// The snippet is YAML by itself: two block scalars.
	var entries map[string]string
	if err := yaml.Unmarshal([]byte(r.stdout), &entries); err != nil {
		t.Fatalf("snippet is not YAML: %v\n%s", err, r.stdout)
	}
	if len(entries) != 2 {
		t.Errorf("snippet has entries %v", entries)
	}
	cert := checkGenerated(t, entries["certificate"], entries["private_key"], "My App", 2048, 3650, testNow)
	for _, want := range []string{
		"# SAML service-provider key pair for CN=My App: RSA 2048 bits, self-signed,\n",
		"# valid 3650 days, until 2040-05-29T12:00:00Z.\n",
		"# SHA-256 fingerprint: " + fingerprint(cert) + "\n",
		"\ncertificate: |\n  -----BEGIN CERTIFICATE-----\n",
		"\nprivate_key: |\n  -----BEGIN PRIVATE KEY-----\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("snippet lacks %q:\n%s", want, r.stdout)
		}
	}

	// Pasted under saml_additional_settings, at the indentation of a flat
	// file or of a Rails environment section, it loads and validates.
	for _, file := range []struct{ name, head, indent string }{
		{"flat", "saml_sp_entity_id: urn:example:app\nsaml_idp_metadata_url: https://idp.example/md\nsaml_additional_settings:\n", "  "},
		{"rails", "production:\n  saml_sp_entity_id: urn:example:app\n  saml_idp_metadata_url: https://idp.example/md\n  saml_additional_settings:\n    RelayState: /home\n", "    "},
	} {
		cfg, err := extauth.ParseConfig([]byte(file.head+indent(r.stdout, file.indent)), extauth.Env("production"), extauth.LookupEnv(nil))
		if err != nil {
			t.Fatalf("%s: the snippet does not load: %v", file.name, err)
		}
		got, key, err := cfg.SAML.Additional.KeyPair()
		if err != nil || got == nil || key == nil {
			t.Fatalf("%s: KeyPair = %v, %v", file.name, got, err)
		}
		if !got.Equal(cert) {
			t.Errorf("%s: KeyPair returned another certificate", file.name)
		}
		if !cfg.SAML.Additional.HasKeyPair() || cfg.Providers()[0] != extauth.SAML {
			t.Errorf("%s: SAML with key pair not configured", file.name)
		}
	}
}

func TestKeygenBitsAndDays(t *testing.T) {
	r := runAt(t, testNow, "keygen", "-name", "big", "-bits", "3072", "-days", "30")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var entries map[string]string
	if err := yaml.Unmarshal([]byte(r.stdout), &entries); err != nil {
		t.Fatal(err)
	}
	checkGenerated(t, entries["certificate"], entries["private_key"], "big", 3072, 30, testNow)
}

func TestKeygenSerialsDiffer(t *testing.T) {
	a := spPair().cert.SerialNumber
	b := spPairSoon().cert.SerialNumber
	if a.Cmp(b) == 0 {
		t.Errorf("two key pairs share serial %s", a)
	}
}

func TestKeygenRefuses(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "-name is required"},
		{[]string{"-name", "  "}, "-name is required"},
		{[]string{"-name", "a\nb"}, "-name must be printable text"},
		{[]string{"-name", strings.Repeat("n", 65)}, "-name is longer than 64 characters"},
		{[]string{"-name", "app", "-bits", "1024"}, "-bits 1024 is too short: at least 2048 bits are required"},
		{[]string{"-name", "app", "-bits", "2047"}, "-bits 2047 is too short"},
		{[]string{"-name", "app", "-bits", "0"}, "-bits 0 is too short"},
		{[]string{"-name", "app", "-bits", "16384"}, "-bits 16384 is more than 8192"},
		{[]string{"-name", "app", "-days", "0"}, "-days must be a positive number of days"},
		{[]string{"-name", "app", "-days", "-5"}, "-days must be a positive number of days"},
		{[]string{"-name", "app", "-days", "40000"}, "-days 40000 is more than 36500"},
		{[]string{"-name", "app", "-force"}, "-force only applies with -out"},
		{[]string{"-name", "app", "-bits", "many"}, `invalid value "many" for flag -bits`},
		{[]string{"-name", "app", "extra"}, `unexpected argument "extra"`},
		{[]string{"-nmae", "app"}, "flag provided but not defined: -nmae"},
	} {
		r := runAt(t, testNow, append([]string{"keygen"}, c.args...)...)
		if r.code != exitUsage || r.stdout != "" {
			t.Errorf("%q: exit %d, stdout %q", c.args, r.code, r.stdout)
		}
		if !strings.HasPrefix(r.stderr, "extauth keygen: "+c.want) || !strings.Contains(r.stderr, "\nUsage: extauth keygen ") {
			t.Errorf("%q: stderr %q, want it to start with %q and show the usage", c.args, r.stderr, c.want)
		}
	}
}

func TestKeygenOut(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	r := runAt(t, testNow, "keygen", "-name", "app", "-out", dir)
	if r.code != exitOK || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	keyPath, certPath := filepath.Join(dir, "sp.key"), filepath.Join(dir, "sp.crt")
	if !strings.Contains(r.stdout, "wrote "+keyPath+" (private key, mode 0600") || !strings.Contains(r.stdout, "wrote "+certPath+" (certificate: CN=app") {
		t.Errorf("stdout:\n%s", r.stdout)
	}
	if strings.Contains(r.stdout, "PRIVATE KEY") {
		t.Error("with -out the key is printed too")
	}
	wantModes(t, map[string]fs.FileMode{keyPath: 0o600, certPath: 0o644})
	if info, err := os.Stat(dir); err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("created directory: %v, %v", info.Mode(), err)
	}
	keyPEM, certPEM := readFile(t, keyPath), readFile(t, certPath)
	checkGenerated(t, certPEM, keyPEM, "app", 2048, 3650, testNow)

	// A second run refuses to replace either file and leaves both alone.
	r = runAt(t, testNow, "keygen", "-name", "other", "-out", dir)
	if r.code != exitFail || r.stderr != "extauth keygen: "+keyPath+" exists; not replacing it without -force\n" {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	if readFile(t, keyPath) != keyPEM || readFile(t, certPath) != certPEM {
		t.Error("files changed without -force")
	}

	// -force replaces them, and a loosened key file comes back at 0600.
	if err := os.Chmod(keyPath, 0o644); err != nil {
		t.Fatal(err)
	}
	r = runAt(t, testNow, "keygen", "-name", "other", "-out", dir, "-force")
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	wantModes(t, map[string]fs.FileMode{keyPath: 0o600, certPath: 0o644})
	checkGenerated(t, readFile(t, certPath), readFile(t, keyPath), "other", 2048, 3650, testNow)
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("directory holds %d entries, want the two files only", len(entries))
	}
}

func TestKeygenOutRefusesPartialPair(t *testing.T) {
	dir := t.TempDir()
	certPath := filepath.Join(dir, "sp.crt")
	if err := os.WriteFile(certPath, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runAt(t, testNow, "keygen", "-name", "app", "-out", dir)
	if r.code != exitFail || !strings.Contains(r.stderr, certPath+" exists") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := os.Lstat(filepath.Join(dir, "sp.key")); err == nil {
		t.Error("sp.key written although sp.crt could not be")
	}
}

// A symbolic link where the key goes is refused without -force and
// replaced, never followed, with it.
func TestKeygenOutSymlink(t *testing.T) {
	dir, elsewhere := t.TempDir(), t.TempDir()
	target := filepath.Join(elsewhere, "target")
	if err := os.WriteFile(target, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "sp.key")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if r := runAt(t, testNow, "keygen", "-name", "app", "-out", dir); r.code != exitFail {
		t.Errorf("exit %d with a symlink in place", r.code)
	}
	if r := runAt(t, testNow, "keygen", "-name", "app", "-out", dir, "-force"); r.code != exitOK {
		t.Fatalf("exit %d, %s", r.code, r.stderr)
	}
	if readFile(t, target) != "keep" {
		t.Error("the link's target was written")
	}
	if info, err := os.Lstat(link); err != nil || info.Mode()&fs.ModeSymlink != 0 || info.Mode().Perm() != 0o600 {
		t.Errorf("sp.key: %v, %v", info.Mode(), err)
	}
}

func wantModes(t *testing.T, modes map[string]fs.FileMode) {
	t.Helper()
	for path, want := range modes {
		info, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Mode(); got != want {
			t.Errorf("%s: mode %v, want %v", path, got, want)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
