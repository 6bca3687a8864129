package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"flag"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crewjam/saml"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ from the current output")

// testNow is the clock of every test that judges certificate expiry, so
// that golden output never depends on the day the tests run.
var testNow = time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)

// The test configurations' secrets: distinctive, so that a test can prove
// none of them is ever printed.
var testSecrets = []string{
	"SECRET-microblog-4f1c",
	"SECRET-socialnet-9a2e",
	"SECRET-search-77d0",
	"SECRET-blog-b3c5",
	"SECRET-oidc-c8e1",
}

type result struct {
	stdout, stderr string
	code           int
}

// runAt runs the command in-process with the clock at now and no
// environment variables, so that neither RAILS_ENV nor anything else of the
// machine running the tests changes what a file says.
func runAt(t *testing.T, now time.Time, args ...string) result {
	t.Helper()
	return runEnv(t, now, nil, args...)
}

// runEnv is runAt with the environment variables env.
func runEnv(t *testing.T, now time.Time, env map[string]string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	c := newCLI(&stdout, &stderr, func() time.Time { return now })
	c.lookup = func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	}
	code := c.run(context.Background(), args)
	return result{stdout.String(), stderr.String(), code}
}

// runCLI runs the command as main does, on the real clock.
func runCLI(t *testing.T, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return result{stdout.String(), stderr.String(), code}
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	// The tests' certificates are made for each run: their fingerprints
	// differ, what surrounds them does not. TestCheckKeyRotation checks
	// that they are the certificates'.
	got = fingerprints.ReplaceAllString(got, "SHA-256 {{SHA256}}")
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test -update rewrites it):\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
}

// replacer turns the parts of an output that change from run to run (server
// addresses, temporary directories) into the placeholders the goldens hold.
type replacer map[string]string

func (r replacer) apply(s string) string {
	for from, to := range r {
		s = strings.ReplaceAll(s, from, to)
	}
	return s
}

// fingerprints matches a SHA-256 fingerprint as check prints it.
var fingerprints = regexp.MustCompile(`SHA-256 (?:[0-9A-F]{2}:){31}[0-9A-F]{2}`)

var placeholderLine = regexp.MustCompile(`(?m)^( *)\{\{(\w+)\}\}$`)

// writeConfig renders testdata/<name> into a temporary directory: a line
// holding only {{NAME}} takes a multi-line value at its indentation (PEM
// blocks), any other {{NAME}} is replaced in place.
func writeConfig(t *testing.T, name string, vars map[string]string) string {
	t.Helper()
	tmpl, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	s := placeholderLine.ReplaceAllStringFunc(string(tmpl), func(line string) string {
		m := placeholderLine.FindStringSubmatch(line)
		v, ok := vars[m[2]]
		if !ok {
			t.Fatalf("%s: no value for {{%s}}", name, m[2])
		}
		return indent(strings.TrimSuffix(v, "\n"), m[1])
	})
	for k, v := range vars {
		s = strings.ReplaceAll(s, "{{"+k+"}}", v)
	}
	if i := strings.Index(s, "{{"); i >= 0 {
		t.Fatalf("%s: unreplaced placeholder at %q", name, s[i:min(len(s), i+20)])
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The service-provider key pairs of the test configurations, generated once
// with keygen's own code at fixed dates.
var (
	spPair = sync.OnceValue(func() *keyPair {
		return mustPair(generateKeyPair("extauth-cli-test", 2048, 3650, time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)))
	})
	// spPairSoon expires 20 days after testNow.
	spPairSoon = sync.OnceValue(func() *keyPair {
		return mustPair(generateKeyPair("expiring-app", 2048, 30, testNow.Add(-10*24*time.Hour)))
	})
)

func mustPair(kp *keyPair, err error) *keyPair {
	if err != nil {
		panic(err)
	}
	return kp
}

// idpCert makes a self-signed IdP certificate. The key type does not matter
// to what check reads, so it is a quick ECDSA one.
func idpCert(t *testing.T, cn string, notBefore, notAfter time.Time) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// idpMetadata describes a SAML IdP as metadata.
type idpMetadata struct {
	entityID   string
	sso        []saml.Endpoint
	certs      []*x509.Certificate
	encCerts   []*x509.Certificate
	wantSigned bool
	validUntil time.Time
}

func (m idpMetadata) entity() saml.EntityDescriptor {
	var kds []saml.KeyDescriptor
	for _, group := range []struct {
		use   string
		certs []*x509.Certificate
	}{{"signing", m.certs}, {"encryption", m.encCerts}} {
		for _, c := range group.certs {
			kds = append(kds, saml.KeyDescriptor{Use: group.use, KeyInfo: saml.KeyInfo{X509Data: saml.X509Data{
				X509Certificates: []saml.X509Certificate{{Data: base64.StdEncoding.EncodeToString(c.Raw)}},
			}}})
		}
	}
	d := saml.IDPSSODescriptor{
		SSODescriptor: saml.SSODescriptor{RoleDescriptor: saml.RoleDescriptor{
			ProtocolSupportEnumeration: "urn:oasis:names:tc:SAML:2.0:protocol",
			KeyDescriptors:             kds,
		}},
		SingleSignOnServices: m.sso,
	}
	if m.wantSigned {
		yes := true
		d.WantAuthnRequestsSigned = &yes
	}
	return saml.EntityDescriptor{EntityID: m.entityID, ValidUntil: m.validUntil, IDPSSODescriptors: []saml.IDPSSODescriptor{d}}
}

func (m idpMetadata) xml(t *testing.T) []byte {
	t.Helper()
	out, err := xml.MarshalIndent(m.entity(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(xml.Header), out...)
}

// docServer serves one document per path and counts the requests.
type docServer struct {
	*httptest.Server
	mu    sync.Mutex
	docs  map[string]http.HandlerFunc
	hits  atomic.Int64
	paths []string
}

func newDocServer(t *testing.T) *docServer {
	t.Helper()
	s := &docServer{docs: map[string]http.HandlerFunc{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		s.mu.Lock()
		h := s.docs[r.URL.Path]
		s.paths = append(s.paths, r.URL.RequestURI())
		s.mu.Unlock()
		if h == nil {
			http.NotFound(w, r)
			return
		}
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *docServer) handle(path string, h http.HandlerFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.docs[path] = h
}

func (s *docServer) serve(path, contentType string, body []byte) {
	s.handle(path, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.Write(body)
	})
}

func (s *docServer) serveJSON(t *testing.T, path string, v any) {
	t.Helper()
	body, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	s.serve(path, "application/json", body)
}

// discoveryDoc is a complete discovery document for issuer.
func discoveryDoc(issuer string) map[string]any {
	return map[string]any{
		"issuer":                                         issuer,
		"authorization_endpoint":                         issuer + "/authorize",
		"token_endpoint":                                 issuer + "/token",
		"userinfo_endpoint":                              issuer + "/userinfo",
		"jwks_uri":                                       issuer + "/jwks",
		"id_token_signing_alg_values_supported":          []string{"RS256", "ES256", "HS256"},
		"token_endpoint_auth_methods_supported":          []string{"client_secret_basic", "private_key_jwt"},
		"code_challenge_methods_supported":               []string{"S256"},
		"authorization_response_iss_parameter_supported": true,
	}
}

// providersFixture serves a SAML IdP's metadata and an OpenID Provider's
// discovery document, both valid at testNow.
type providersFixture struct {
	idp, op *docServer
	vars    map[string]string
	repl    replacer
}

func newProvidersFixture(t *testing.T) *providersFixture {
	t.Helper()
	f := &providersFixture{idp: newDocServer(t), op: newDocServer(t)}
	f.idp.serve("/metadata", "application/samlmetadata+xml", idpMetadata{
		entityID: "https://idp.example.org/saml",
		sso: []saml.Endpoint{
			{Binding: saml.HTTPRedirectBinding, Location: f.idp.URL + "/sso"},
			{Binding: saml.HTTPPostBinding, Location: f.idp.URL + "/sso/post"},
		},
		certs:    []*x509.Certificate{idpCert(t, "idp.example.org", time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2032, 1, 1, 0, 0, 0, 0, time.UTC))},
		encCerts: []*x509.Certificate{idpCert(t, "idp-encryption", time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2030, 6, 2, 0, 0, 0, 0, time.UTC))},
	}.xml(t))
	f.op.serveJSON(t, "/.well-known/openid-configuration", discoveryDoc(f.op.URL))
	sp := spPair()
	f.vars = map[string]string{
		"IDP":     f.idp.URL,
		"OP":      f.op.URL,
		"SP_CERT": string(sp.certPEM),
		"SP_KEY":  string(sp.keyPEM),
	}
	f.repl = replacer{f.idp.URL: "{{IDP}}", f.op.URL: "{{OP}}"}
	return f
}

// config renders a test configuration against the fixture's servers and
// returns its path and a replacer that also hides the temporary directory.
func (f *providersFixture) config(t *testing.T, name string, extra map[string]string) (string, replacer) {
	t.Helper()
	vars := map[string]string{}
	for k, v := range f.vars {
		vars[k] = v
	}
	for k, v := range extra {
		vars[k] = v
	}
	path := writeConfig(t, name, vars)
	repl := replacer{filepath.Dir(path): "$DIR"}
	for k, v := range f.repl {
		repl[k] = v
	}
	return path, repl
}

// assertNoSecret fails when any test secret, or any line of a test private
// key, appears in out.
func assertNoSecret(t *testing.T, what, out string) {
	t.Helper()
	if leaks := secretsIn(t, out); len(leaks) > 0 {
		t.Errorf("%s prints %s:\n%s", what, strings.Join(leaks, ", "), out)
	}
}

func secretsIn(t *testing.T, out string) []string {
	t.Helper()
	var leaks []string
	for _, s := range testSecrets {
		if strings.Contains(out, s) {
			leaks = append(leaks, "the secret "+s)
		}
	}
	for _, kp := range []*keyPair{spPair(), spPairSoon()} {
		// The key's PEM also holds the public modulus, which the
		// certificate, and so the SP metadata, rightly carries: only lines
		// with private material count.
		public, err := x509.MarshalPKIXPublicKey(kp.cert.PublicKey)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(kp.keyPEM), "\n") {
			chunk, err := base64.StdEncoding.DecodeString(line)
			if err != nil || len(chunk) < 12 || bytes.Contains(public, chunk) {
				continue
			}
			if strings.Contains(out, line) {
				leaks = append(leaks, "the private key of "+kp.cert.Subject.String())
				break
			}
		}
	}
	return leaks
}

func marshalXML(t *testing.T, v any) []byte {
	t.Helper()
	out, err := xml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
