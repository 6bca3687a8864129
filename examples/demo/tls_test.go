package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/extauth/extauth/internal/harness"
)

// serveTLSDemo serves the demo on its development providers as run does
// with the TLS flags f, and returns its base URL and a browser that trusts
// roots.
func serveTLSDemo(t *testing.T, f tlsFlags, roots *x509.CertPool) (string, *harness.Browser, *demoTLS) {
	t.Helper()
	secure, err := f.load(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := secure.listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := secure.scheme() + "://" + ln.Addr().String()
	demo, err := newServer(base, serverOptions{httpClient: secure.httpClient()})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: demo, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close(); demo.Close() })
	b := harness.NewBrowser(t)
	b.Client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}
	return base, b, secure
}

// TestDemoTLSSelfSigned: with -tls the demo serves HTTPS with a
// certificate it makes for the loopback names, says so with its
// fingerprint, and signs in through its development OpenID provider and
// SAML IdP, which it reaches over the same HTTPS; a client that does not
// trust the certificate is refused.
func TestDemoTLSSelfSigned(t *testing.T) {
	leafOf := func(s *demoTLS) *x509.Certificate {
		c, err := x509.ParseCertificate(s.config.Certificates[0].Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	probe, err := tlsFlags{selfSigned: true}.load(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	leaf := leafOf(probe)
	if leaf.VerifyHostname("127.0.0.1") != nil || leaf.VerifyHostname("localhost") != nil || leaf.VerifyHostname("::1") != nil ||
		leaf.VerifyHostname("example.org") == nil || time.Until(leaf.NotAfter) > selfSignedValidity {
		t.Errorf("certificate for %v %v until %s", leaf.IPAddresses, leaf.DNSNames, leaf.NotAfter)
	}

	roots := x509.NewCertPool()
	base, b, secure := serveTLSDemo(t, tlsFlags{selfSigned: true}, roots)
	// The browser trusts the certificate the demo made, as a user who
	// accepts the warning does.
	roots.AddCert(leafOf(secure))
	if !strings.HasPrefix(base, "https://127.0.0.1:") || !strings.Contains(secure.note, "self-signed") ||
		!strings.Contains(secure.note, "SHA-256 ") || strings.Count(secure.note, ":") < 31 {
		t.Errorf("base %s, start line %q", base, secure.note)
	}
	if _, err := http.Get(base + "/"); err == nil || !errors.As(err, new(x509.UnknownAuthorityError)) {
		t.Errorf("a client that does not trust the certificate: %v", err)
	}
	oidcSignIn(t, b, base)
	b.PostForm(base+"/logout", nil)
	samlSignIn(t, b, base)
}

// TestDemoTLSCertificatePair: -tls-cert and -tls-key serve an operator's
// certificate, which extauth's own client trusts for the development
// providers the demo serves.
func TestDemoTLSCertificatePair(t *testing.T) {
	ca := harness.NewCert(t, "demo test CA", nil, harness.CA)
	server := harness.NewCert(t, "127.0.0.1", ca, harness.TLSServer)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	// The chain follows the certificate, as servers send it.
	if err := os.WriteFile(certFile, []byte(server.CertPEM+ca.CertPEM), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, []byte(server.KeyPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	base, b, secure := serveTLSDemo(t, tlsFlags{certFile: certFile, keyFile: keyFile}, roots)
	if !strings.Contains(secure.note, "the certificate of "+certFile) {
		t.Errorf("start line %q", secure.note)
	}
	oidcSignIn(t, b, base)
}

// TestDemoTLSFlags: each wrong combination or file is refused before the
// demo listens, naming the flag, and never quoting a key.
func TestDemoTLSFlags(t *testing.T) {
	dir := t.TempDir()
	a := harness.NewCert(t, "127.0.0.1", nil, harness.TLSServer)
	other := harness.NewCert(t, "127.0.0.1", nil, harness.TLSServer)
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cert, key, otherKey := write("cert.pem", a.CertPEM), write("key.pem", a.KeyPEM), write("other.pem", other.KeyPEM)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-tls", "-tls-cert", cert, "-tls-key", key}, "-tls makes a self-signed certificate"},
		{[]string{"-tls-cert", cert}, "-tls-cert needs -tls-key"},
		{[]string{"-tls-key", key}, "-tls-key needs -tls-cert"},
		{[]string{"-tls-cert", filepath.Join(dir, "missing.pem"), "-tls-key", key}, "missing.pem"},
		{[]string{"-tls-cert", cert, "-tls-key", otherKey}, "private key does not match public key"},
	} {
		err := run(append(tc.args, "-addr", "127.0.0.1:0"), io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "PRIVATE KEY") {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}
