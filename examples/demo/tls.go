package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"strings"
	"time"
)

// HTTPS for the demo: providers whose security profile refuses http
// redirect URIs (Keycloak's FAPI 2.0 client policies, most FAPI providers)
// need the application served over TLS, even on a developer's machine.
// -tls-cert and -tls-key serve a certificate pair of the operator's; -tls
// makes a self-signed certificate for the loopback names at start.

// tlsFlags are the demo's TLS flags.
type tlsFlags struct {
	selfSigned        bool
	certFile, keyFile string
}

// selfSignedValidity is how long the certificate -tls makes is valid: a
// new one is made at each start.
const selfSignedValidity = 30 * 24 * time.Hour

// demoTLS is how the demo serves HTTPS.
type demoTLS struct {
	config *tls.Config
	// client is extauth's outbound client: it trusts the system's roots
	// and the demo's own certificates, so that extauth reaches the
	// development providers the demo serves on itself.
	client *http.Client
	// note is what the start line adds: the certificate and its SHA-256
	// fingerprint, which a browser's warning shows too.
	note string
}

// load returns how to serve HTTPS, or nil for plain HTTP. now dates a
// self-signed certificate.
func (f tlsFlags) load(now time.Time) (*demoTLS, error) {
	var cert tls.Certificate
	var what string
	switch {
	case f.selfSigned && (f.certFile != "" || f.keyFile != ""):
		return nil, errors.New("-tls makes a self-signed certificate: give it, or -tls-cert and -tls-key, not both")
	case f.selfSigned:
		var err error
		if cert, err = selfSigned(now); err != nil {
			return nil, fmt.Errorf("-tls: %w", err)
		}
		what = "a self-signed certificate for 127.0.0.1, ::1 and localhost, made at start (browsers warn about it)"
	case f.certFile != "" && f.keyFile == "":
		return nil, errors.New("-tls-cert needs -tls-key, the certificate's private key")
	case f.keyFile != "" && f.certFile == "":
		return nil, errors.New("-tls-key needs -tls-cert, the certificate it is the key of")
	case f.certFile != "":
		var err error
		if cert, err = tls.LoadX509KeyPair(f.certFile, f.keyFile); err != nil {
			// crypto/tls names the file at fault and never quotes the key.
			return nil, fmt.Errorf("-tls-cert %s, -tls-key %s: %w", f.certFile, f.keyFile, err)
		}
		what = "the certificate of " + f.certFile
	default:
		return nil, nil
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	var leaf *x509.Certificate
	for i, der := range cert.Certificate {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if i == 0 {
			leaf = c
		}
		roots.AddCert(c)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	sum := sha256.Sum256(leaf.Raw)
	return &demoTLS{
		config: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		client: &http.Client{Transport: transport},
		note:   fmt.Sprintf("  TLS: %s, SHA-256 %s, valid until %s", what, fingerprint(sum[:]), leaf.NotAfter.UTC().Format(time.DateOnly)),
	}, nil
}

// listen listens on addr, with TLS when t is set.
func (t *demoTLS) listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil || t == nil {
		return ln, err
	}
	return tls.NewListener(ln, t.config), nil
}

// scheme is the base URL's scheme.
func (t *demoTLS) scheme() string {
	if t == nil {
		return "http"
	}
	return "https"
}

// httpClient is extauth's outbound client: nil (extauth's default) over
// plain HTTP.
func (t *demoTLS) httpClient() *http.Client {
	if t == nil {
		return nil
	}
	return t.client
}

// selfSigned makes an EC P-256 certificate for 127.0.0.1, ::1 and
// localhost, valid from an hour before now (clocks differ) for
// selfSignedValidity.
func selfSigned(now time.Time) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "extauth demo", Organization: []string{"extauth demo (self-signed)"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(selfSignedValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// fingerprint writes a digest as browsers show it: colon-separated hex
// pairs.
func fingerprint(sum []byte) string {
	parts := make([]string, len(sum))
	for i, b := range sum {
		parts[i] = fmt.Sprintf("%02X", b)
	}
	return strings.Join(parts, ":")
}
