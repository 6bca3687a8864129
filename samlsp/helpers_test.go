package samlsp

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"html"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/extauth/extauth/extauthtest/samlidp"
	"github.com/extauth/extauth/internal/harness"
	"github.com/extauth/extauth/internal/outbound"
	"github.com/extauth/extauth/internal/store"
	"github.com/extauth/extauth/internal/testkeys"
	"github.com/extauth/extauth/providers"
)

const (
	testEntityID = "https://app.example.test/saml/sp"
	testACS      = "https://app.example.test/users/auth/saml/callback"
)

// Keys are slow to generate; tests share a few of internal/testkeys', with
// certificates made once per test binary.
var (
	keysOnce sync.Once
	keyPairs [3]struct {
		key  *rsa.PrivateKey
		cert *x509.Certificate
	}
)

func testKey(t testing.TB, i int) (*rsa.PrivateKey, *x509.Certificate) {
	t.Helper()
	keysOnce.Do(func() {
		for j := range keyPairs {
			k, c, err := testkeys.Pair(j, "extauth test", time.Now())
			if err != nil {
				panic(err)
			}
			keyPairs[j].key, keyPairs[j].cert = k, c
		}
	})
	return keyPairs[i].key, keyPairs[i].cert
}

func pemPair(t testing.TB, i int) (certPEM, keyPEM string) {
	key, cert := testKey(t, i)
	c := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	k := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	return string(c), string(k)
}

type fixture struct {
	t      testing.TB
	noWait bool
	idpMod []func(*samlidp.IdP)
	idp    *samlidp.IdP
	idpURL string
	sp     *SP
	store  *store.Memory
	cfg    Config
	opts   Options
	now    func() time.Time // the SP's clock; time.Now when nil
}

type fixtureOption func(*fixture)

func withKeyPair(f *fixture) {
	f.cfg.CertificatePEM, f.cfg.PrivateKeyPEM = pemPair(f.t, 1)
}

// withIdP adjusts the IdP before the SP starts.
func withIdP(mod func(*samlidp.IdP)) fixtureOption {
	return func(f *fixture) { f.idpMod = append(f.idpMod, mod) }
}

// noWait starts the SP without waiting for its metadata.
func noWait(f *fixture) { f.noWait = true }

func withOptions(mod func(*Options)) fixtureOption { return func(f *fixture) { mod(&f.opts) } }
func withConfig(mod func(*Config)) fixtureOption   { return func(f *fixture) { mod(&f.cfg) } }

// newFixture starts a fake IdP (AutoApprove, signing with test key 0) and an
// SP that trusts it, and waits for the SP to load the IdP's metadata.
func newFixture(t testing.TB, mods ...fixtureOption) *fixture {
	t.Helper()
	f := &fixture{t: t, store: store.NewMemory(nil, 0)}
	key, cert := testKey(t, 0)
	srv := harness.Serve(t, func(base string) http.Handler {
		idp, err := samlidp.New(samlidp.Options{BaseURL: base + "/idp", AutoApprove: true, Key: key, Certificate: cert})
		if err != nil {
			t.Fatal(err)
		}
		f.idp = idp
		return idp
	})
	f.idpURL = srv.URL
	f.cfg = Config{SPEntityID: testEntityID, IdPMetadataURL: f.idp.MetadataURL()}
	f.opts = Options{MetadataRetry: 50 * time.Millisecond}
	for _, m := range mods {
		m(f)
	}
	for _, m := range f.idpMod {
		m(f.idp)
	}
	f.sp = f.newSP(f.store)
	if !f.noWait {
		f.waitReady(f.sp)
	}
	return f
}

func (f *fixture) env(st providers.Store) providers.Env {
	now := f.now
	if now == nil {
		now = time.Now
	}
	return providers.Env{
		CallbackURL: testACS,
		HTTPClient:  outbound.NewClient(nil, 2*time.Second, 0),
		Store:       st,
		Now:         now,
	}
}

// newSP builds another SP with the fixture's settings, registered with the
// IdP, closed at the end of the test.
func (f *fixture) newSP(st providers.Store) *SP {
	f.t.Helper()
	sp, err := New(f.cfg, f.env(st), f.opts)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { sp.Close() })
	md, err := sp.Metadata()
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.idp.RegisterSP(md); err != nil {
		f.t.Fatal(err)
	}
	return sp
}

func (f *fixture) waitReady(sp *SP) {
	f.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !sp.Ready() {
		if time.Now().After(deadline) {
			f.t.Fatalf("metadata never loaded: %v", sp.md.err())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func newTx() *providers.Transaction {
	return &providers.Transaction{ID: "tx-1", Provider: Name, State: "state", Expires: time.Now().Add(10 * time.Minute)}
}

// begin starts a sign-in and returns the transaction and the redirect URL.
func (f *fixture) begin(sp *SP) (*providers.Transaction, string) {
	f.t.Helper()
	tx := newTx()
	u, err := sp.Begin(context.Background(), tx)
	if err != nil {
		f.t.Fatalf("Begin: %v", err)
	}
	return tx, u
}

var formField = regexp.MustCompile(`name="(SAMLResponse|RelayState)" value="([^"]*)"`)

// idpForm follows the redirect to the IdP and returns the fields of the
// auto-submitting form it answers with.
func (f *fixture) idpForm(redirect string) url.Values {
	f.t.Helper()
	resp, err := http.Get(redirect)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		f.t.Fatalf("IdP answered %d: %s", resp.StatusCode, body)
	}
	form := url.Values{}
	for _, m := range formField.FindAllStringSubmatch(string(body), -1) {
		form.Set(m[1], html.UnescapeString(m[2]))
	}
	if form.Get("SAMLResponse") == "" {
		f.t.Fatalf("no SAMLResponse in the IdP's page: %s", body)
	}
	return form
}

// post plays the routes' part of the callback: it POSTs form to the ACS,
// checks the binding as the routes do, and calls Complete.
func post(sp *SP, tx *providers.Transaction, form url.Values) (*providers.Identity, error) {
	r := httptest.NewRequest(http.MethodPost, testACS, strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if tx != nil && tx.Binding != "" {
		if got := sp.Binding(r); got != tx.Binding {
			return nil, &providers.Error{Code: providers.CodeInvalidState, Provider: Name, Message: "binding mismatch"}
		}
	}
	return sp.Complete(context.Background(), r, tx)
}

func responseForm(xml []byte, relay string) url.Values {
	return url.Values{"SAMLResponse": {base64.StdEncoding.EncodeToString(xml)}, "RelayState": {relay}}
}

func code(err error) providers.Code {
	var pe *providers.Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// smallPair is a 1024-bit pair, which the SP must refuse.
func smallPair(t testing.TB) [2]string {
	t.Helper()
	smallOnce.Do(func() {
		key, err := rsa.GenerateKey(rand.Reader, 1024)
		if err != nil {
			panic(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "small"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			panic(err)
		}
		smallPEM[0] = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
		smallPEM[1] = string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	})
	return smallPEM
}

var (
	smallOnce sync.Once
	smallPEM  [2]string
)

func refusingClient() *http.Client { return &http.Client{Transport: refuse{}} }

// offlineSP is an SP whose clock stands at now and that never reaches its
// IdP: for tests that hand it metadata themselves. cfg's entity ID and
// metadata URL default to the test ones ("-" for none, with a federation).
func offlineSP(t testing.TB, cfg Config, opts Options, now time.Time) *SP {
	t.Helper()
	if cfg.SPEntityID == "" {
		cfg.SPEntityID = testEntityID
	}
	switch cfg.IdPMetadataURL {
	case "":
		cfg.IdPMetadataURL = "https://idp.example.test/metadata"
	case "-":
		cfg.IdPMetadataURL = ""
	}
	if opts.MetadataRetry == 0 {
		opts.MetadataRetry = time.Hour
	}
	sp, err := New(cfg, providers.Env{CallbackURL: testACS, HTTPClient: refusingClient(), Store: store.NewMemory(nil, 0),
		Now: func() time.Time { return now }}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	return sp
}
