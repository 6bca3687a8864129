package samlsp

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/beevik/etree"
	"github.com/crewjam/saml"

	"github.com/extauth/extauth/extauthtest/samlidp"
	"github.com/extauth/extauth/internal/store"
	"github.com/extauth/extauth/providers"
)

// TestSPMetadataValidity: no validUntil and no cacheDuration unless the
// configuration asks; when it does, both on the EntityDescriptor, validUntil
// counted from the time the document is built.
func TestSPMetadataValidity(t *testing.T) {
	now := time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)
	cert, key := pemPair(t, 1)
	for _, c := range []struct {
		name     string
		cfg      Config
		validTil string
		cache    string
	}{
		{name: "default", cfg: Config{}},
		{name: "default with a key pair", cfg: Config{CertificatePEM: cert, PrivateKeyPEM: key}},
		{name: "validity", cfg: Config{MetadataValidFor: 30 * 24 * time.Hour}, validTil: "2031-04-03T05:06:07Z"},
		{name: "cacheDuration", cfg: Config{MetadataCacheDuration: 90 * time.Minute}, cache: "PT1H30M"},
		{name: "both", cfg: Config{MetadataValidFor: 7 * 24 * time.Hour, MetadataCacheDuration: 6 * time.Hour},
			validTil: "2031-03-11T05:06:07Z", cache: "PT6H"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sp := offlineSP(t, c.cfg, Options{}, now)
			md, err := sp.Metadata()
			if err != nil {
				t.Fatal(err)
			}
			doc := etree.NewDocument()
			if err := doc.ReadFromBytes(md); err != nil {
				t.Fatal(err)
			}
			root := doc.Root()
			if got := root.SelectAttrValue("validUntil", ""); got != c.validTil {
				t.Errorf("validUntil %q, want %q", got, c.validTil)
			}
			if got := root.SelectAttrValue("cacheDuration", ""); got != c.cache {
				t.Errorf("cacheDuration %q, want %q", got, c.cache)
			}
			// Nowhere else: a role with a validity of its own would expire
			// on its own.
			if n := bytes.Count(md, []byte("validUntil=")); n != len(c.validTil)/len("2031-04-03T05:06:07Z") {
				t.Errorf("%d validUntil attributes:\n%s", n, md)
			}
			if n := bytes.Count(md, []byte("cacheDuration=")); n > 1 {
				t.Errorf("%d cacheDuration attributes", n)
			}
		})
	}
}

func TestSPMetadataValidityBounds(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{MetadataValidFor: 59 * time.Minute}, "saml_additional_settings.metadata_valid_for: must be between 1 hour and 3650 days"},
		{Config{MetadataValidFor: -time.Hour}, "saml_additional_settings.metadata_valid_for: must be between"},
		{Config{MetadataValidFor: 3651 * 24 * time.Hour}, "saml_additional_settings.metadata_valid_for: must be between"},
		{Config{MetadataCacheDuration: time.Second}, "saml_additional_settings.metadata_cache_duration: must be between 1 minute and 3650 days"},
		{Config{MetadataValidFor: time.Hour, MetadataCacheDuration: 2 * time.Hour}, "metadata_cache_duration: must not exceed metadata_valid_for"},
	} {
		c.cfg.SPEntityID, c.cfg.IdPMetadataURL = testEntityID, "https://idp.example.test/metadata"
		_, err := New(c.cfg, providers.Env{CallbackURL: testACS, HTTPClient: refusingClient(), Store: store.NewMemory(nil, 0)}, Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
}

// withNextKeyPair configures test key 2 as the next pair.
func withNextKeyPair(f *fixture) {
	f.cfg.CertificateNewPEM, f.cfg.PrivateKeyNewPEM = pemPair(f.t, 2)
}

// TestNextKeyPairDecrypts: while certificate_new is set, an assertion
// encrypted to either key is accepted, whatever the cipher and however
// the key is wrapped (rsa-1_5 included, whose wrong key yields a random
// content key rather than an error); one for any other key is refused.
func TestNextKeyPairDecrypts(t *testing.T) {
	f := newFixture(t, withKeyPair, withNextKeyPair, withOptions(func(o *Options) { o.AllowRSA15KeyTransport = true }))
	_, cur := testKey(t, 1)
	_, next := testKey(t, 2)
	_, foreign := testKey(t, 0)
	for _, c := range []struct {
		name string
		e    samlidp.Encryption
		runs int
	}{
		{"aes128-cbc, rsa-oaep-mgf1p", samlidp.Encryption{}, 1},
		{"aes256-gcm, xmlenc11 rsa-oaep", samlidp.Encryption{Cipher: samlidp.AES256GCM, KeyTransport: samlidp.RSAOAEP11}, 1},
		{"tripledes-cbc, retrieval method", samlidp.Encryption{Cipher: samlidp.TripleDESCBC, Key: samlidp.KeyRetrievalMethod}, 1},
		// With rsa-1_5 the current key unwraps the new key's content key
		// into random bytes, whose CBC padding checks out one time in 16.
		{"aes128-cbc, rsa-1_5", samlidp.Encryption{KeyTransport: samlidp.RSA15}, 64},
	} {
		for _, to := range []struct {
			name string
			cert any
			ok   bool
		}{{"current", cur, true}, {"next", next, true}, {"foreign", foreign, false}} {
			t.Run(c.name+"/"+to.name, func(t *testing.T) {
				for range c.runs {
					tx, _ := f.begin(f.sp)
					s := f.idp.DefaultSpec(testEntityID, testACS, tx.RequestID)
					switch to.name {
					case "current":
						s.EncryptTo = cur
					case "next":
						s.EncryptTo = next
					default:
						s.EncryptTo = foreign
					}
					s.Encryption = c.e
					x, err := f.idp.Forge(s)
					if err != nil {
						t.Fatal(err)
					}
					id, err := post(f.sp, tx, responseForm(x, tx.Binding))
					if to.ok && (err != nil || id.UID != "ada@example.org") {
						t.Fatalf("refused: %v", err)
					}
					if !to.ok && (code(err) != providers.CodeInvalidResponse || !strings.Contains(err.Error(), "could not be decrypted")) {
						t.Fatalf("err = %v, want a refusal", err)
					}
				}
			})
		}
	}
	// Requests are signed with the current key only.
	_, u := f.begin(f.sp)
	pu, _ := url.Parse(u)
	if err := samlidp.VerifyRedirectSignature(pu.RawQuery, "SAMLRequest", cur); err != nil {
		t.Fatalf("the AuthnRequest is not signed with the current key: %v", err)
	}
	if err := samlidp.VerifyRedirectSignature(pu.RawQuery, "SAMLRequest", next); err == nil {
		t.Fatal("the AuthnRequest verifies with the next key")
	}
}

// TestNextKeyPairChecked: the next pair gets the current pair's checks,
// errors naming its settings, and needs a current pair; the current pair
// given again as the next is harmless and said so.
func TestNextKeyPairChecked(t *testing.T) {
	cur, curKey := pemPair(t, 1)
	next, nextKey := pemPair(t, 2)
	small := smallPair(t)
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"mismatched", Config{CertificatePEM: cur, PrivateKeyPEM: curKey, CertificateNewPEM: next, PrivateKeyNewPEM: curKey},
			"saml_additional_settings.private_key_new: does not match certificate_new"},
		{"half", Config{CertificatePEM: cur, PrivateKeyPEM: curKey, CertificateNewPEM: next},
			"saml_additional_settings: certificate_new and private_key_new must be set together"},
		{"not a certificate", Config{CertificatePEM: cur, PrivateKeyPEM: curKey, CertificateNewPEM: nextKey, PrivateKeyNewPEM: nextKey},
			"saml_additional_settings.certificate_new: not a PEM certificate"},
		{"1024 bits", Config{CertificatePEM: cur, PrivateKeyPEM: curKey, CertificateNewPEM: small[0], PrivateKeyNewPEM: small[1]},
			"saml_additional_settings.private_key_new: RSA key must have at least 2048 bits"},
		{"no current pair", Config{CertificateNewPEM: next, PrivateKeyNewPEM: nextKey},
			"saml_additional_settings.certificate_new: the next key pair needs the current one"},
	} {
		c.cfg.SPEntityID, c.cfg.IdPMetadataURL = testEntityID, "https://idp.example.test/metadata"
		_, err := New(c.cfg, providers.Env{CallbackURL: testACS, HTTPClient: refusingClient(), Store: store.NewMemory(nil, 0)}, Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "PRIVATE KEY") {
			t.Errorf("%s: the error quotes a key", c.name)
		}
	}

	logs := &records{}
	sp, err := New(Config{SPEntityID: testEntityID, IdPMetadataURL: "https://idp.example.test/metadata", CertificatePEM: cur, PrivateKeyPEM: curKey,
		CertificateNewPEM: cur, PrivateKeyNewPEM: curKey},
		providers.Env{CallbackURL: testACS, HTTPClient: refusingClient(), Store: store.NewMemory(nil, 0), Logger: slog.New(logs)},
		Options{MetadataRetry: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	md, _ := sp.Metadata()
	if n := bytes.Count(md, []byte("</X509Certificate>")); n != 2 {
		t.Errorf("the current certificate given twice is published %d times:\n%s", n, md)
	}
	if n := logs.count(slog.LevelWarn, "saml: saml_additional_settings.certificate_new holds the current key pair"); n != 1 {
		t.Errorf("%d warnings about the next pair being the current one, want 1", n)
	}
}

// TestLogoutRequestEchoesNameID: the LogoutRequest's NameID is the one
// Identity.SAML kept, attribute for attribute: none added, none dropped.
func TestLogoutRequestEchoesNameID(t *testing.T) {
	f := newFixture(t)
	for _, s := range []LogoutSession{
		{NameID: "ada@example.org", NameIDFormat: NameIDEmail},
		{NameID: "ada@example.org"},
		{NameID: "a3f1c9", NameIDFormat: NameIDPersistent, NameQualifier: "https://idp.example/", SPNameQualifier: testEntityID},
		{NameID: "a3f1c9", NameIDFormat: NameIDPersistent, SPNameQualifier: testEntityID, SPProvidedID: "ada <&> \"1\""},
		{NameID: "  spaced  ", NameQualifier: "q"},
	} {
		u, err := f.sp.LogoutURL(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		pu, _ := url.Parse(u)
		_, _, x := decodeRedirectLogout(t, pu)
		root, err := parseXML(x)
		if err != nil {
			t.Fatal(err)
		}
		n, err := oneChild(root, nsAssertion, "NameID")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, a := range n.Attr {
			if a.Space != "xmlns" && a.Key != "xmlns" {
				got = append(got, a.Key+"="+a.Value)
			}
		}
		var want []string
		for _, a := range [][2]string{{"NameQualifier", s.NameQualifier}, {"SPNameQualifier", s.SPNameQualifier},
			{"Format", s.NameIDFormat}, {"SPProvidedID", s.SPProvidedID}} {
			if a[1] != "" {
				want = append(want, a[0]+"="+a[1])
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) || n.Text() != s.NameID {
			t.Errorf("NameID %q %v, want %q %v\n%s", n.Text(), got, s.NameID, want, x)
		}
		// The NameID stands where the schema wants it: after the Issuer.
		if kids := root.ChildElements(); len(kids) < 2 || kids[1] != n {
			t.Errorf("NameID is not the Issuer's next sibling:\n%s", x)
		}
	}
}

// TestIdPLogoutRequestQualifiers: an IdP's LogoutRequest names the user
// with a qualified NameID; the hook sees all of it.
func TestIdPLogoutRequestQualifiers(t *testing.T) {
	var ended []LogoutSession
	f := newFixture(t, withKeyPair, withOptions(func(o *Options) {
		o.Logout.OnIdPLogout = func(_ context.Context, s LogoutSession) error {
			ended = append(ended, s)
			return nil
		}
	}))
	lr := &saml.LogoutRequest{ID: "id-idp-q", Version: "2.0", IssueInstant: time.Now(), Destination: testSLO,
		Issuer: &saml.Issuer{Value: f.idp.EntityID()},
		NameID: &saml.NameID{Value: "a3f1c9", Format: NameIDPersistent, NameQualifier: f.idp.EntityID(), SPNameQualifier: testEntityID,
			SPProvidedID: "ada"}}
	m, err := f.idp.RedirectMessage(testSLO, "SAMLRequest", lr.Element(), "")
	if err != nil {
		t.Fatal(err)
	}
	if rec := serve(f.sp, http.MethodGet, m, nil); rec.Code != http.StatusSeeOther {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	want := LogoutSession{NameID: "a3f1c9", NameIDFormat: NameIDPersistent, NameQualifier: f.idp.EntityID(), SPNameQualifier: testEntityID, SPProvidedID: "ada",
		IdP: f.idp.EntityID()}
	if len(ended) != 1 || ended[0] != want {
		t.Fatalf("OnIdPLogout saw %+v, want %+v", ended, want)
	}
}

// datedCert makes a quick (ECDSA) self-signed certificate valid from
// notBefore to notAfter, for an IdP's metadata.
func datedCert(t *testing.T, cn string, notBefore, notAfter time.Time) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn}, NotBefore: notBefore, NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// records is a slog handler that keeps every record.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec.Clone())
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

// count returns how many records at level start with msg.
func (r *records) count(level slog.Level, msg string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rec := range r.recs {
		if rec.Level == level && strings.HasPrefix(rec.Message, msg) {
			n++
		}
	}
	return n
}

// TestCertificateExpiryWatch: at start-up and after every metadata refresh
// the SP looks at its certificates and the IdP's; what expires within 30
// days is a warning, what has expired an error, each logged when it enters
// that state and then at most daily however often the metadata is
// refreshed. CertificateExpiries shows the same certificates. An IdP's
// certificate past its dates is an error and makes the SP unready only
// with EnforceIdPCertificateDates: by default its key goes on verifying,
// and the log says so in warnings.
func TestCertificateExpiryWatch(t *testing.T) {
	t.Run("enforced", func(t *testing.T) { certificateExpiryWatch(t, true) })
	t.Run("default", func(t *testing.T) { certificateExpiryWatch(t, false) })
}

func certificateExpiryWatch(t *testing.T, enforce bool) {
	start := time.Now()
	var clock atomic.Int64
	clock.Store(start.UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	spCert, spKey := pemPair(t, 1)
	_, idpCert := testKey(t, 0)
	expired := datedCert(t, "idp-old", start.AddDate(-1, 0, 0), start.Add(-time.Hour))
	soon := datedCert(t, "idp-next", start.Add(-time.Hour), start.Add(10*24*time.Hour))
	f := newFixture(t, noWait, withIdP(func(p *samlidp.IdP) {
		p.Set(func(k *samlidp.Knobs) { k.ExtraCerts = []*x509.Certificate{expired, soon} })
	}))
	logs := &records{}
	sp, err := New(Config{SPEntityID: testEntityID, IdPMetadataURL: f.idp.MetadataURL(), CertificatePEM: spCert, PrivateKeyPEM: spKey,
		EnforceIdPCertificateDates: enforce},
		providers.Env{CallbackURL: testACS, HTTPClient: f.env(nil).HTTPClient, Store: store.NewMemory(nil, 0), Now: now, Logger: slog.New(logs)},
		Options{MetadataRefresh: 20 * time.Millisecond, MetadataRetry: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	refreshes := func(n int64) {
		t.Helper()
		want := sp.md.fetches.Load() + n
		deadline := time.Now().Add(time.Minute)
		for sp.md.fetches.Load() < want {
			if time.Now().After(deadline) {
				t.Fatalf("fewer than %d metadata refreshes", n)
			}
			time.Sleep(5 * time.Millisecond)
		}
		// The check follows the fetch.
		time.Sleep(30 * time.Millisecond)
	}
	refreshes(5)
	const (
		idpExpiredRefused = "saml: an IdP signing certificate has expired; responses signed with it are refused"
		idpExpiredUsed    = "saml: an IdP signing certificate has expired; extauth goes on verifying with its key"
		idpExpiring       = "saml: an IdP signing certificate expires soon"
		spExpiring        = "saml: the SP certificate expires soon"
	)
	// expired counts the lines about an expired IdP certificate, of the
	// kind the mode logs.
	expiredLines := func() int {
		if enforce {
			return logs.count(slog.LevelError, idpExpiredRefused)
		}
		if n := logs.count(slog.LevelError, "saml: an IdP signing certificate"); n != 0 {
			t.Errorf("%d errors about IdP certificates whose dates do not decide", n)
		}
		return logs.count(slog.LevelWarn, idpExpiredUsed)
	}
	if n := expiredLines(); n != 1 {
		t.Errorf("%d lines about the expired IdP certificate after 5 refreshes, want 1", n)
	}
	if n := logs.count(slog.LevelWarn, idpExpiring); n != 1 {
		t.Errorf("%d warnings about the expiring IdP certificate, want 1", n)
	}
	if n := logs.count(slog.LevelWarn, spExpiring); n != 0 {
		t.Errorf("a warning about an SP certificate valid for years")
	}
	if err := sp.ReadyError(); err != nil {
		t.Errorf("ReadyError with a valid IdP certificate: %v", err)
	}

	// A day later, the same again, once.
	clock.Add(int64(25 * time.Hour))
	refreshes(5)
	if a, b := expiredLines(), logs.count(slog.LevelWarn, idpExpiring); a != 2 || b != 2 {
		t.Errorf("a day later: %d lines about the expired one, %d warnings; want 2 and 2", a, b)
	}

	// Ten years on, everything has expired: the SP certificate is an error
	// that says signing goes on; with the dates enforced, the SP is not
	// ready.
	clock.Add(int64(11 * 365 * 24 * time.Hour))
	refreshes(3)
	if n := logs.count(slog.LevelError, "saml: the SP certificate has expired; extauth goes on signing"); n != 1 {
		t.Errorf("%d errors about the expired SP certificate, want 1", n)
	}
	if enforce {
		if n := logs.count(slog.LevelError, "saml: an IdP signing certificate has expired, and no other is valid"); n != 3 {
			t.Errorf("%d errors about IdP certificates with none valid, want 3 (one each)", n)
		}
		if err := sp.ReadyError(); err == nil || !strings.Contains(err.Error(), "every IdP signing certificate has expired") {
			t.Errorf("ReadyError = %v", err)
		}
	} else {
		if n := expiredLines(); n != 5 {
			t.Errorf("%d warnings about expired IdP certificates, want 5 (2 before, one each now)", n)
		}
		if err := sp.ReadyError(); err != nil {
			t.Errorf("ReadyError with every IdP certificate past its dates, not enforced: %v", err)
		}
	}

	got := sp.CertificateExpiries()
	want := []string{"sp sign+decrypt CN=extauth test", "idp verify CN=extauth test", "idp verify CN=idp-old", "idp verify CN=idp-next"}
	var have []string
	for _, c := range got {
		have = append(have, c.Kind+" "+c.Use+" "+c.Subject)
	}
	if fmt.Sprint(have) != fmt.Sprint(want) || !got[0].NotAfter.Equal(must(ParseCertificatePEM(spCert)).NotAfter) ||
		!got[1].NotAfter.Equal(idpCert.NotAfter) || !got[2].NotAfter.Equal(expired.NotAfter) || len(got[3].SHA256) != 64 {
		t.Errorf("CertificateExpiries = %+v, want %v", got, want)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestCertificateExpiriesDuringRotation lists both SP certificates, with
// what each does, before any IdP metadata.
func TestCertificateExpiriesDuringRotation(t *testing.T) {
	cur, curKey := pemPair(t, 1)
	next, nextKey := pemPair(t, 2)
	sp := offlineSP(t, Config{CertificatePEM: cur, PrivateKeyPEM: curKey, CertificateNewPEM: next, PrivateKeyNewPEM: nextKey}, Options{}, time.Now())
	got := sp.CertificateExpiries()
	if len(got) != 2 || got[0].Kind != CertSP || got[0].Use != CertUseSignDecrypt || got[1].Kind != CertSP || got[1].Use != CertUseDecrypt ||
		got[0].SHA256 == got[1].SHA256 {
		t.Fatalf("CertificateExpiries = %+v", got)
	}
	if err := sp.ReadyError(); err == nil || !strings.Contains(err.Error(), "no copy of the identity provider's metadata") {
		t.Fatalf("ReadyError before any metadata: %v", err)
	}
}
