package samlsp

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crewjam/saml"

	"github.com/extauth/extauth/extauthtest/samlidp"
	"github.com/extauth/extauth/internal/loadtest"
	"github.com/extauth/extauth/providers"
)

func TestSignInWithSignedAssertion(t *testing.T) {
	f := newFixture(t)
	tx, redirect := f.begin(f.sp)
	form := f.idpForm(redirect)
	if form.Get("RelayState") != tx.Binding {
		t.Fatalf("IdP returned RelayState %q, want the handle %q", form.Get("RelayState"), tx.Binding)
	}
	id, err := post(f.sp, tx, form)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if id.Provider != "saml" || id.UID != "ada@example.org" || id.Email != "ada@example.org" {
		t.Errorf("identity = %+v", id)
	}
	if id.FirstName != "Ada" || id.LastName != "Lovelace" || id.Name != "Ada Lovelace" || id.NickName != "ada" {
		t.Errorf("names = %q %q %q %q", id.FirstName, id.LastName, id.Name, id.NickName)
	}
	if id.EmailVerified {
		t.Error("SAML cannot vouch for the email; EmailVerified must be false")
	}
	if id.SAML == nil || id.SAML.NameID != "ada@example.org" || id.SAML.SessionIndex == "" ||
		len(id.SAML.Attributes["urn:oid:0.9.2342.19200300.100.1.3"]) != 1 {
		t.Errorf("SAML info = %+v", id.SAML)
	}
	if id.Raw["session_index"] != id.SAML.SessionIndex || id.Raw["attributes"] == nil {
		t.Errorf("raw = %v", id.Raw)
	}

	// The same POST again is a replay.
	if _, err := post(f.sp, tx, form); code(err) != providers.CodeReplayed {
		t.Fatalf("replayed response: err = %v, want replayed", err)
	}
}

func TestSignInWithEncryptedAssertion(t *testing.T) {
	f := newFixture(t, withKeyPair)
	tx, redirect := f.begin(f.sp)
	form := f.idpForm(redirect)
	raw, _ := base64.StdEncoding.DecodeString(form.Get("SAMLResponse"))
	if !strings.Contains(string(raw), "EncryptedAssertion") || strings.Contains(string(raw), "ada@example.org") {
		t.Fatal("the IdP did not encrypt the assertion")
	}
	id, err := post(f.sp, tx, form)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if id.UID != "ada@example.org" || id.Email != "ada@example.org" {
		t.Errorf("identity = %+v", id)
	}
}

// TestTamperedResponses runs every SAML tamper row of SECURITY.md against
// the strategy. The same table runs through the real callback route in the
// extauth package.
func TestTamperedResponses(t *testing.T) {
	f := newFixture(t)
	ak, ac := testKey(t, 2)
	for _, tc := range f.idp.Tampers(samlidp.Target{EntityID: testEntityID, ACS: testACS, AttackerKey: ak, AttackerCert: ac}) {
		t.Run(tc.Name, func(t *testing.T) {
			tx, _ := f.begin(f.sp)
			xml, err := tc.Build(tx.RequestID)
			if err != nil {
				t.Fatal(err)
			}
			id, err := post(f.sp, tx, responseForm(xml, tx.Binding))
			if tc.Want == "" {
				if err != nil {
					t.Fatalf("rejected a valid response: %v", err)
				}
				if id.UID != tc.WantUID {
					t.Fatalf("uid = %q, want %q", id.UID, tc.WantUID)
				}
				return
			}
			t.Logf("rejected: %v", err)
			if code(err) != tc.Want {
				t.Fatalf("err = %v, want %s", err, tc.Want)
			}
			if id != nil {
				t.Fatal("identity returned with an error")
			}
		})
	}
}

// crewjamAccepts are the forged responses of the tamper table that
// crewjam/saml v0.6.3's ParseXMLResponse accepts and we refuse: timings
// within its fixed 180 s of skew, an unsigned Response without
// Destination, a DOCTYPE. (v0.5.1 also accepted two assertions, no or a
// non-bearer SubjectConfirmation, no AudienceRestriction or one without
// us, no AuthnStatement, an assertion issued in the future and XSW3.)
var crewjamAccepts = []string{
	"Conditions expired",
	"Conditions not yet valid",
	"DOCTYPE with an entity",
	"Destination removed",
	"NotOnOrAfter past the skew (within crewjam's 180 s)",
}

// TestAtLeastAsStrictAsCrewjam runs the tamper table through crewjam's
// ParseXMLResponse, which the callback no longer calls, beside our one
// pass: whatever crewjam refuses, we refuse too, so dropping it lost no
// check. What crewjam accepts and we refuse is crewjamAccepts, which
// docs/saml.md#what-the-callback-checks describes: the test fails when a
// crewjam upgrade changes it.
func TestAtLeastAsStrictAsCrewjam(t *testing.T) {
	f := newFixture(t)
	ak, ac := testKey(t, 2)
	md := f.sp.md.current()
	acs, _ := url.Parse(testACS)
	crew := &saml.ServiceProvider{EntityID: testEntityID, AcsURL: *acs, IDPMetadata: md.entity}
	refusedByCrewjam := 0
	var acceptedByCrewjam []string
	for _, tc := range f.idp.Tampers(samlidp.Target{EntityID: testEntityID, ACS: testACS, AttackerKey: ak, AttackerCert: ac}) {
		t.Run(tc.Name, func(t *testing.T) {
			xml, err := tc.Build("id-request")
			if err != nil {
				t.Fatal(err)
			}
			_, theirs := func() (a *saml.Assertion, err error) {
				defer func() {
					if p := recover(); p != nil {
						err = fmt.Errorf("panic: %v", p)
					}
				}()
				return crew.ParseXMLResponse(xml, []string{"id-request"}, *acs)
			}()
			a, ours := f.sp.check(xml, "id-request", md, time.Now())
			if theirs != nil {
				refusedByCrewjam++
				if ours == nil {
					t.Fatalf("crewjam refuses it (%v), we accept it (NameID %q)", theirs, a.NameID)
				}
			} else if tc.Want != "" {
				acceptedByCrewjam = append(acceptedByCrewjam, tc.Name)
			}
			if (ours == nil) != (tc.Want == "") {
				t.Fatalf("ours: %v, want %q", ours, tc.Want)
			}
		})
	}
	if refusedByCrewjam < 10 {
		t.Fatalf("crewjam refused only %d cases: the comparison is not exercising it", refusedByCrewjam)
	}
	slices.Sort(acceptedByCrewjam)
	if !slices.Equal(acceptedByCrewjam, crewjamAccepts) {
		t.Errorf("crewjam accepts %q of the forged responses, not %q: its checks changed; update crewjamAccepts and docs/saml.md",
			acceptedByCrewjam, crewjamAccepts)
	}
}

func TestEncryptedAssertionWithoutKey(t *testing.T) {
	f := newFixture(t)
	_, cert := testKey(t, 1)
	tx, _ := f.begin(f.sp)
	s := f.idp.DefaultSpec(testEntityID, testACS, tx.RequestID)
	s.EncryptTo = cert
	xml, err := f.idp.Forge(s)
	if err != nil {
		t.Fatal(err)
	}
	_, err = post(f.sp, tx, responseForm(xml, tx.Binding))
	if code(err) != providers.CodeInvalidResponse || !strings.Contains(err.Error(), "no SP private key") {
		t.Fatalf("err = %v, want a clear invalid_response about the missing key", err)
	}
}

func TestEncryptedAssertionToAnotherKey(t *testing.T) {
	f := newFixture(t, withKeyPair)
	_, other := testKey(t, 2)
	tx, _ := f.begin(f.sp)
	s := f.idp.DefaultSpec(testEntityID, testACS, tx.RequestID)
	s.EncryptTo = other
	xml, err := f.idp.Forge(s)
	if err != nil {
		t.Fatal(err)
	}
	if _, err = post(f.sp, tx, responseForm(xml, tx.Binding)); code(err) != providers.CodeInvalidResponse {
		t.Fatalf("err = %v, want invalid_response", err)
	}
}

// Two instances behind a load balancer share the store: a response accepted
// by one is a replay on the other.
func TestReplayAcrossInstances(t *testing.T) {
	f := newFixture(t)
	other := f.newSP(f.store)
	f.waitReady(other)
	tx, redirect := f.begin(f.sp)
	form := f.idpForm(redirect)
	if _, err := post(f.sp, tx, form); err != nil {
		t.Fatalf("first instance: %v", err)
	}
	if _, err := post(other, tx, form); code(err) != providers.CodeReplayed {
		t.Fatalf("second instance: err = %v, want replayed", err)
	}
}

// A fresh assertion for an already answered request is refused too: the
// request ID is single-use, not only the assertion ID.
func TestRequestIDConsumedOnce(t *testing.T) {
	f := newFixture(t)
	tx, _ := f.begin(f.sp)
	for i, want := range []providers.Code{"", providers.CodeReplayed} {
		xml, err := f.idp.Forge(f.idp.DefaultSpec(testEntityID, testACS, tx.RequestID))
		if err != nil {
			t.Fatal(err)
		}
		_, err = post(f.sp, tx, responseForm(xml, tx.Binding))
		if code(err) != want {
			t.Fatalf("response %d: err = %v, want %q", i, err, want)
		}
	}
}

func TestUnsolicitedResponses(t *testing.T) {
	unsolicited := func(f *fixture) url.Values {
		resp, err := http.Get(f.idp.SSOURL()[:len(f.idp.SSOURL())-len("/sso")] + "/unsolicited?sp=" + url.QueryEscape(testEntityID) + "&RelayState=https://evil.example/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		form := url.Values{}
		for _, m := range formField.FindAllStringSubmatch(string(body), -1) {
			form.Set(m[1], html.UnescapeString(m[2]))
		}
		if form.Get("SAMLResponse") == "" {
			t.Fatalf("IdP page: %s", body)
		}
		return form
	}
	t.Run("refused by default", func(t *testing.T) {
		f := newFixture(t)
		_, err := post(f.sp, nil, unsolicited(f))
		if code(err) != providers.CodeInvalidResponse || !strings.Contains(err.Error(), "unsolicited") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("accepted when enabled, once", func(t *testing.T) {
		f := newFixture(t, withOptions(func(o *Options) { o.AllowIDPInitiated = true }))
		form := unsolicited(f)
		id, err := post(f.sp, &providers.Transaction{}, form)
		if err != nil || id.UID != "ada@example.org" {
			t.Fatalf("id = %+v, err = %v", id, err)
		}
		if _, err := post(f.sp, &providers.Transaction{}, form); code(err) != providers.CodeReplayed {
			t.Fatalf("replay: err = %v", err)
		}
	})
	t.Run("a solicited transaction refuses an unsolicited response", func(t *testing.T) {
		f := newFixture(t, withOptions(func(o *Options) { o.AllowIDPInitiated = true }))
		tx, _ := f.begin(f.sp)
		form := unsolicited(f)
		form.Set("RelayState", tx.Binding)
		if _, err := post(f.sp, tx, form); code(err) != providers.CodeInvalidResponse {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestKeyRotation(t *testing.T) {
	f := newFixture(t)
	newKey, newCert := testKey(t, 2)
	// The IdP publishes its next certificate beside the current one, then
	// starts signing with it; both keep working.
	f.idp.Set(func(k *samlidp.Knobs) { k.ExtraCerts = []*x509.Certificate{newCert} })
	sp := f.newSP(f.store)
	f.waitReady(sp)
	if n := len(sp.md.current().certs); n != 2 {
		t.Fatalf("%d signing certificates, want 2", n)
	}
	for i, k := range []struct {
		key  *rsa.PrivateKey
		cert *x509.Certificate
	}{{nil, nil}, {newKey, newCert}} {
		tx, _ := f.begin(sp)
		s := f.idp.DefaultSpec(testEntityID, testACS, tx.RequestID)
		s.Key, s.Cert = k.key, k.cert
		xml, err := f.idp.Forge(s)
		if err != nil {
			t.Fatal(err)
		}
		// Without KeyInfo too: the key must come from the metadata.
		xml = regexp.MustCompile(`(?s)<ds:KeyInfo>.*?</ds:KeyInfo>`).ReplaceAll(xml, nil)
		if _, err := post(sp, tx, responseForm(xml, tx.Binding)); err != nil {
			t.Fatalf("key %d: %v", i, err)
		}
	}
}

func TestOversizedAndMalformedBodies(t *testing.T) {
	f := newFixture(t)
	tx, _ := f.begin(f.sp)
	// 1 MiB of DEFLATE that would inflate to 1 GiB: the callback never
	// inflates (HTTP-POST is not deflated), and the size bound refuses it
	// before base64 decoding.
	bomb := deflateZeros(t, 1<<10) // 1 MiB that inflates to 1 GiB
	r := httptest.NewRequest(http.MethodPost, testACS, strings.NewReader(url.Values{
		"SAMLResponse": {base64.StdEncoding.EncodeToString(bomb)}, "RelayState": {tx.Binding}}.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	// CPU time, which load does not stretch: inflating the bomb would take
	// seconds of it.
	var err error
	if cpu := loadtest.ThreadCPUOf(func() { _, err = f.sp.Complete(context.Background(), r, tx) }); cpu > 2*time.Second {
		t.Fatalf("bomb took %s of CPU time", cpu)
	}
	if code(err) != providers.CodeInvalidResponse {
		t.Fatalf("bomb: err = %v", err)
	}
	// A value under the body bound but over the decoded-size bound is
	// refused from its length alone, before any decoding.
	long := strings.Repeat("A", int(f.sp.maxEncodedResponse())+4)
	if _, err := post(f.sp, tx, url.Values{"SAMLResponse": {long}, "RelayState": {tx.Binding}}); code(err) != providers.CodeInvalidResponse ||
		!strings.Contains(err.Error(), "too large") {
		t.Fatalf("long value: err = %v", err)
	}
	for name, v := range map[string]string{
		"not base64":       "%%%",
		"not XML":          base64.StdEncoding.EncodeToString([]byte("hello")),
		"not a Response":   base64.StdEncoding.EncodeToString([]byte(`<samlp:AuthnRequest xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol"/>`)),
		"empty":            "",
		"two roots":        base64.StdEncoding.EncodeToString([]byte(`<a/><b/>`)),
		"billion laughs":   base64.StdEncoding.EncodeToString([]byte(`<!DOCTYPE l [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;&a;">]><l>&b;</l>`)),
		"deeply nested":    base64.StdEncoding.EncodeToString([]byte(strings.Repeat("<a>", 200) + strings.Repeat("</a>", 200))),
		"processing instr": base64.StdEncoding.EncodeToString([]byte(`<?xml version="1.0"?><?xml-stylesheet href="x"?><a/>`)),
	} {
		if _, err := post(f.sp, tx, url.Values{"SAMLResponse": {v}, "RelayState": {tx.Binding}}); code(err) != providers.CodeInvalidResponse {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	// GET and the artifact binding are refused.
	r = httptest.NewRequest(http.MethodGet, testACS+"?SAMLResponse=x", nil)
	if _, err := f.sp.Complete(context.Background(), r, tx); code(err) != providers.CodeInvalidResponse {
		t.Errorf("GET: err = %v", err)
	}
	if _, err := post(f.sp, tx, url.Values{"SAMLart": {"AAQAA"}, "RelayState": {tx.Binding}}); code(err) != providers.CodeInvalidResponse {
		t.Errorf("artifact: err = %v", err)
	}
}

// deflateZeros returns about 1 KiB of DEFLATE data per MiB of zeros it
// inflates to (mib MiB in all). Compressing a GiB takes most of a minute, so it repeats
// the compressor's steady-state output for one flushed MiB of zeros, which is
// the same bytes every time, and ends with an empty final block.
func deflateZeros(t testing.TB, mib int) []byte {
	var buf bytes.Buffer
	w, err := flate.NewWriter(&buf, flate.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	zero := make([]byte, 1<<20)
	var chunks [][]byte
	for range 3 {
		start := buf.Len()
		w.Write(zero)
		w.Flush()
		chunks = append(chunks, bytes.Clone(buf.Bytes()[start:]))
	}
	if !bytes.Equal(chunks[1], chunks[2]) {
		t.Fatal("DEFLATE output is not periodic; cannot build the bomb")
	}
	var out bytes.Buffer
	out.Write(chunks[0])
	for range mib - 1 {
		out.Write(chunks[1])
	}
	out.Write([]byte{0x03, 0x00})
	return out.Bytes()
}

// TestSHA1Policy: responses and assertions signed with RSA-SHA1, or with a
// SHA-1 digest, are refused unless the host opts in with AllowSHA1.
func TestSHA1Policy(t *testing.T) {
	rows := map[string]samlidp.SignOptions{
		"RSA-SHA1, SHA-1 digest":   {SignatureMethod: samlidp.RSASHA1, DigestMethod: samlidp.DigestSHA1},
		"RSA-SHA256, SHA-1 digest": {SignatureMethod: samlidp.RSASHA256, DigestMethod: samlidp.DigestSHA1},
		"RSA-SHA1, SHA-256 digest": {SignatureMethod: samlidp.RSASHA1, DigestMethod: samlidp.DigestSHA256},
	}
	for _, allow := range []bool{false, true} {
		f := newFixture(t, withOptions(func(o *Options) { o.AllowSHA1 = allow }))
		for name, so := range rows {
			for _, onResponse := range []bool{false, true} {
				t.Run(fmt.Sprintf("AllowSHA1=%v/%s/response signed=%v", allow, name, onResponse), func(t *testing.T) {
					tx, _ := f.begin(f.sp)
					s := f.idp.DefaultSpec(testEntityID, testACS, tx.RequestID)
					s.Sign = so
					s.SignResponse, s.SignAssertion = onResponse, !onResponse
					xml, err := f.idp.Forge(s)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Contains(xml, []byte("sha1")) {
						t.Fatal("the forger did not use SHA-1")
					}
					id, err := post(f.sp, tx, responseForm(xml, tx.Binding))
					if allow {
						if err != nil || id.UID != "ada@example.org" {
							t.Fatalf("refused with the opt-in: %v", err)
						}
						return
					}
					if code(err) != providers.CodeInvalidResponse || !strings.Contains(err.Error(), "AllowSHA1") {
						t.Fatalf("err = %v, want a refusal that names AllowSHA1", err)
					}
				})
			}
		}
	}
}

// TestSHA1OptInWarns: the opt-in is logged at start-up, once.
func TestSHA1OptInWarns(t *testing.T) {
	var logs bytes.Buffer
	l := slog.New(slog.NewTextHandler(&logs, nil))
	sp, err := New(Config{SPEntityID: testEntityID, IdPMetadataURL: "https://idp.example.test/md"},
		providers.Env{CallbackURL: testACS, HTTPClient: refusingClient(), Store: alwaysFresh{}, Logger: l},
		Options{AllowSHA1: true, AllowRSA15KeyTransport: true, MetadataRetry: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "AllowSHA1") ||
		!strings.Contains(logs.String(), "AllowRSA15KeyTransport") {
		t.Fatalf("no start-up warnings: %s", logs.String())
	}
}
