package bench

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"encoding/xml"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crewjam/saml"
	dsig "github.com/russellhaering/goxmldsig"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/samlidp"
	"github.com/extauth/extauth/internal/harness"
)

// samlSide is one SAML deployment measured against crewjam with equal keys:
// an extauth application with the saml provider, served in process, and a
// crewjam ServiceProvider for the same entity, ACS and IdP.
type samlSide struct {
	tb      testing.TB
	app     *extauth.Auth
	base    string
	idp     *samlidp.IdP
	crewjam *saml.ServiceProvider
	spCert  *x509.Certificate
	// encryptTo is the certificate the IdP encrypts to: spCert unless a
	// key rotation test chooses the next one.
	encryptTo *x509.Certificate
	acs       *acsCase
	acsAt     time.Time
}

const benchEntityID = "https://app.example.test/saml"

// newSAMLSide starts a fake IdP over HTTP (the app reads its metadata as in
// production) and an application that trusts it. With a key pair, both
// sides sign their AuthnRequests and decrypt with the same SP key.
func newSAMLSide(tb testing.TB, withKeyPair bool) *samlSide {
	tb.Helper()
	return newSAMLSideWith(tb, withKeyPair, false)
}

// newSAMLSideWith is newSAMLSide, with bench key 2 as the next key pair of
// a rotation (certificate_new) when withNextKey is set.
func newSAMLSideWith(tb testing.TB, withKeyPair, withNextKey bool) *samlSide {
	tb.Helper()
	s := &samlSide{tb: tb, base: "https://app.example.test"}
	idpKey, idpCert := benchKeys(tb, 0)
	harness.Serve(tb, func(base string) http.Handler {
		idp, err := samlidp.New(samlidp.Options{BaseURL: base + "/idp", AutoApprove: true, Key: idpKey, Certificate: idpCert})
		if err != nil {
			tb.Fatal(err)
		}
		s.idp = idp
		return idp
	})
	cfg := &extauth.Config{SAML: extauth.SAMLConfig{SPEntityID: benchEntityID, IdPMetadataURL: s.idp.MetadataURL()}}
	spKey, spCert := benchKeys(tb, 1)
	if withKeyPair {
		der, err := x509.MarshalPKCS8PrivateKey(spKey)
		if err != nil {
			tb.Fatal(err)
		}
		cfg.SAML.Additional.Certificate = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: spCert.Raw}))
		cfg.SAML.Additional.PrivateKey = extauth.NewSecret(string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})))
		s.spCert, s.encryptTo = spCert, spCert
	}
	if withNextKey {
		nextKey, nextCert := benchKeys(tb, 2)
		der, err := x509.MarshalPKCS8PrivateKey(nextKey)
		if err != nil {
			tb.Fatal(err)
		}
		cfg.SAML.Additional.CertificateNew = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: nextCert.Raw}))
		cfg.SAML.Additional.PrivateKeyNew = extauth.NewSecret(string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})))
		s.encryptTo = nextCert
	}
	app, err := extauth.New(cfg, extauth.Options{
		BaseURL:   s.base,
		CookieKey: []byte("0123456789abcdef0123456789abcdef"),
		Store:     alwaysFresh{},
		Logger:    slog.New(slog.DiscardHandler),
		OnSuccess: func(w http.ResponseWriter, _ *http.Request, id *extauth.Identity) {
			io.WriteString(w, id.UID)
		},
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { app.Close() })
	s.app = app
	deadline := time.Now().Add(time.Minute)
	for {
		rec := s.authorize()
		if rec.Code == http.StatusSeeOther {
			break
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the SAML provider never became ready: %d %s", rec.Code, rec.Body)
		}
		time.Sleep(10 * time.Millisecond)
	}

	var idpMD saml.EntityDescriptor
	if err := xml.Unmarshal(s.idp.Metadata(), &idpMD); err != nil {
		tb.Fatal(err)
	}
	acs, _ := url.Parse(s.base + "/users/auth/saml/callback")
	s.crewjam = &saml.ServiceProvider{EntityID: benchEntityID, AcsURL: *acs, IDPMetadata: &idpMD}
	if withKeyPair {
		s.crewjam.Key, s.crewjam.Certificate = spKey, spCert
		s.crewjam.SignatureMethod = dsig.RSASHA256SignatureMethod
	}
	return s
}

// authorize runs the authorize route once, as a same-origin form POST.
func (s *samlSide) authorize() *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, s.base+"/users/auth/saml", nil)
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	r.Header.Set("Origin", s.base)
	rec := httptest.NewRecorder()
	s.app.ServeHTTP(rec, r)
	return rec
}

// acsCase is one response, genuine for one transaction, and what it takes
// to post it to either side.
type acsCase struct {
	body   string
	cookie string
	reqID  string
}

// newACSCase starts a sign-in through the authorize route and has the IdP
// forge the answer: signed response and assertion, the assertion encrypted
// to the SP certificate when the side has one.
func (s *samlSide) newACSCase() acsCase {
	s.tb.Helper()
	rec := s.authorize()
	if rec.Code != http.StatusSeeOther {
		s.tb.Fatalf("authorize: %d %s", rec.Code, rec.Body)
	}
	loc, err := url.Parse(rec.Header().Get("Location"))
	if err != nil {
		s.tb.Fatal(err)
	}
	var cookies []string
	for _, c := range rec.Result().Cookies() {
		cookies = append(cookies, c.Name+"="+c.Value)
	}
	req, err := decodeAuthnRequest(loc.Query().Get("SAMLRequest"))
	if err != nil {
		s.tb.Fatal(err)
	}
	spec := s.idp.DefaultSpec(benchEntityID, s.base+"/users/auth/saml/callback", req.ID)
	spec.SignResponse, spec.SignAssertion = true, true
	spec.EncryptTo = s.encryptTo
	x, err := s.idp.Forge(spec)
	if err != nil {
		s.tb.Fatal(err)
	}
	form := url.Values{"SAMLResponse": {base64.StdEncoding.EncodeToString(x)}, "RelayState": {loc.Query().Get("RelayState")}}
	return acsCase{body: form.Encode(), cookie: strings.Join(cookies, "; "), reqID: req.ID}
}

func (c acsCase) request(target string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, target, strings.NewReader(c.body))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if c.cookie != "" {
		r.Header.Set("Cookie", c.cookie)
	}
	return r
}

// current returns a response both sides read: a response is valid for
// about two minutes, so one is forged for every half minute of the run,
// outside the timed loops, and the sides of a round read the same bytes.
func (s *samlSide) current() acsCase {
	if s.acs == nil || time.Since(s.acsAt) > 30*time.Second {
		c := s.newACSCase()
		s.acs, s.acsAt = &c, time.Now()
	}
	return *s.acs
}

// ours posts the round's response to the callback route.
func (s *samlSide) ours() side {
	return side{"extauth", func(b *testing.B) {
		c := s.current()
		b.ReportAllocs()
		for b.Loop() {
			rec := httptest.NewRecorder()
			s.app.ServeHTTP(rec, c.request(s.base+"/users/auth/saml/callback"))
			if rec.Code != http.StatusOK {
				b.Fatalf("callback: %d %s", rec.Code, rec.Body)
			}
		}
	}}
}

// theirs hands the same bytes to crewjam's ParseResponse.
func (s *samlSide) theirs() side {
	return side{"crewjam", func(b *testing.B) {
		c := s.current()
		b.ReportAllocs()
		for b.Loop() {
			r := c.request(s.base + "/users/auth/saml/callback")
			if err := r.ParseForm(); err != nil {
				b.Fatal(err)
			}
			if _, err := s.crewjam.ParseResponse(r, []string{c.reqID}); err != nil {
				b.Fatal(err)
			}
		}
	}}
}

// BenchmarkSAML compares each SAML phase of extauth, through its routes,
// with crewjam/saml doing the same work with the same keys: building the
// redirect AuthnRequest (MakeRedirectAuthenticationRequest), unsigned and
// signed, and reading the IdP's answer (ParseResponse) on the same bytes,
// signed response and assertion, and encrypted. Run it with -rounds N and
// internal/benchratio; BENCHMARKS.md has the figures.
func BenchmarkSAML(b *testing.B) {
	plain := newSAMLSide(b, false)
	keyed := newSAMLSide(b, true)

	authorize := func(s *samlSide) side {
		return side{"extauth", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if rec := s.authorize(); rec.Code != http.StatusSeeOther {
					b.Fatalf("authorize: %d %s", rec.Code, rec.Body)
				}
			}
		}}
	}
	crewjamAuthorize := func(s *samlSide) side {
		return side{"crewjam", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.crewjam.MakeRedirectAuthenticationRequest("relay-state-handle-22ch"); err != nil {
					b.Fatal(err)
				}
			}
		}}
	}
	b.Run("authorize_unsigned", func(b *testing.B) { alternate(b, authorize(plain), crewjamAuthorize(plain)) })
	b.Run("authorize_signed", func(b *testing.B) { alternate(b, authorize(keyed), crewjamAuthorize(keyed)) })
	b.Run("acs_signed_response_and_assertion", func(b *testing.B) { alternate(b, plain.ours(), plain.theirs()) })
	b.Run("acs_encrypted_assertion", func(b *testing.B) { alternate(b, keyed.ours(), keyed.theirs()) })
}

func decodeAuthnRequest(v string) (*saml.AuthnRequest, error) {
	raw, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return nil, err
	}
	x, err := inflate(raw)
	if err != nil {
		return nil, err
	}
	var req saml.AuthnRequest
	return &req, xml.Unmarshal(x, &req)
}

func inflate(data []byte) ([]byte, error) {
	return io.ReadAll(io.LimitReader(flate.NewReader(bytes.NewReader(data)), 1<<20))
}

// alwaysFresh is a store that never remembers, so that one response can be
// replayed b.N times through the full callback path, store calls included.
type alwaysFresh struct{}

func (alwaysFresh) Consume(context.Context, string, time.Time) (bool, error) { return true, nil }

var (
	keysOnce sync.Once
	keys     [3]struct {
		key  *rsa.PrivateKey
		cert *x509.Certificate
	}
)

// benchKeys are made once per binary: key generation would dominate set-up.
func benchKeys(tb testing.TB, i int) (*rsa.PrivateKey, *x509.Certificate) {
	tb.Helper()
	keysOnce.Do(func() {
		for j := range keys {
			k, c, err := samlidp.NewKeyPair("extauth bench", time.Now())
			if err != nil {
				panic(err)
			}
			keys[j].key, keys[j].cert = k, c
		}
	})
	return keys[i].key, keys[i].cert
}

// BenchmarkSAMLKeyRotation measures what an SP key rotation costs a
// callback through the routes: with certificate_new set and the IdP
// encrypting to the new key, the current key is tried first, one failed
// RSA-OAEP decryption. The anchor is the same callback before the
// rotation, the IdP encrypting to the only key. Run it with -rounds N and
// internal/benchratio.
func BenchmarkSAMLKeyRotation(b *testing.B) {
	before := newSAMLSide(b, true)
	during := newSAMLSideWith(b, true, true)
	ours := during.ours()
	anchor := before.ours()
	anchor.name = "before_rotation"
	alternate(b, ours, anchor)
}
