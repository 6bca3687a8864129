package samlsp

import (
	"context"
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crewjam/saml"

	"github.com/extauth/extauth/extauthtest/samlidp"
	"github.com/extauth/extauth/providers"
)

const testSLO = "https://app.example.test/users/auth/saml/logout"

func TestSPMetadata(t *testing.T) {
	for _, signed := range []bool{false, true} {
		mods := []fixtureOption{noWait, withIdP(func(p *samlidp.IdP) {
			// The IdP is down: our metadata does not depend on it.
			p.Set(func(k *samlidp.Knobs) { k.MetadataStatus = http.StatusServiceUnavailable })
		})}
		if signed {
			mods = append(mods, withKeyPair)
		}
		f := newFixture(t, mods...)
		rec := httptest.NewRecorder()
		f.sp.MetadataHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/users/auth/saml/metadata", nil))
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/samlmetadata+xml" {
			t.Fatalf("status %d, type %q", rec.Code, rec.Header().Get("Content-Type"))
		}
		var ed saml.EntityDescriptor
		if err := xml.Unmarshal(rec.Body.Bytes(), &ed); err != nil {
			t.Fatal(err)
		}
		if ed.EntityID != testEntityID || len(ed.SPSSODescriptors) != 1 {
			t.Fatalf("metadata: %s", rec.Body)
		}
		d := ed.SPSSODescriptors[0]
		if len(d.AssertionConsumerServices) != 1 || d.AssertionConsumerServices[0].Location != testACS ||
			d.AssertionConsumerServices[0].Binding != saml.HTTPPostBinding {
			t.Errorf("ACS = %+v", d.AssertionConsumerServices)
		}
		if len(d.SingleLogoutServices) == 0 || d.SingleLogoutServices[0].Location != testSLO {
			t.Errorf("SLO = %+v", d.SingleLogoutServices)
		}
		if d.WantAssertionsSigned == nil || !*d.WantAssertionsSigned {
			t.Error("WantAssertionsSigned must be true")
		}
		if d.AuthnRequestsSigned == nil || *d.AuthnRequestsSigned != signed {
			t.Errorf("AuthnRequestsSigned = %v, want %v", d.AuthnRequestsSigned, signed)
		}
		uses := map[string]bool{}
		for _, kd := range d.KeyDescriptors {
			uses[kd.Use] = len(kd.KeyInfo.X509Data.X509Certificates) == 1
			if kd.Use != "encryption" {
				continue
			}
			// What we decrypt, authenticated encryption first, and never
			// rsa-1_5 unless allowed.
			var algs []string
			for _, m := range kd.EncryptionMethods {
				algs = append(algs, m.Algorithm)
			}
			if len(algs) < 9 || algs[0] != "http://www.w3.org/2009/xmlenc11#aes256-gcm" ||
				!slices.Contains(algs, "http://www.w3.org/2001/04/xmlenc#tripledes-cbc") ||
				!slices.Contains(algs, "http://www.w3.org/2009/xmlenc11#rsa-oaep") ||
				slices.Contains(algs, "http://www.w3.org/2001/04/xmlenc#rsa-1_5") {
				t.Errorf("encryption methods %v", algs)
			}
		}
		if signed != (uses["signing"] && uses["encryption"]) || (!signed && len(d.KeyDescriptors) != 0) {
			t.Errorf("key descriptors = %v (key pair %v)", uses, signed)
		}
		if strings.Contains(rec.Body.String(), "PRIVATE") {
			t.Fatal("metadata contains the private key")
		}
	}
}

// serve runs the logout handler on a request for u.
func serve(sp *SP, method, u string, hdr http.Header) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, u, nil)
	for k, v := range hdr {
		r.Header[k] = v
	}
	rec := httptest.NewRecorder()
	sp.LogoutHandler().ServeHTTP(rec, r)
	return rec
}

// follow sends u to the fake IdP and returns where it redirects.
func follow(t *testing.T, u string) string {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("IdP answered %d", resp.StatusCode)
	}
	return resp.Header.Get("Location")
}

func TestSPInitiatedLogout(t *testing.T) {
	for _, signed := range []bool{false, true} {
		t.Run(map[bool]string{false: "unsigned", true: "signed"}[signed], func(t *testing.T) {
			mods := []fixtureOption{withKeyPair}
			if signed {
				mods = append(mods, withConfig(func(c *Config) { c.LogoutRequestsSigned = true }))
			}
			f := newFixture(t, mods...)
			sess := LogoutSession{NameID: "ada@example.org", NameIDFormat: NameIDEmail, SessionIndex: "idx-7"}
			u, err := f.sp.LogoutURL(context.Background(), sess)
			if err != nil {
				t.Fatal(err)
			}
			back := follow(t, u)
			rec := f.idp.LastLogout()
			if rec == nil || rec.Signed != signed || rec.Request.NameID.Value != sess.NameID ||
				rec.Request.SessionIndex == nil || rec.Request.SessionIndex.Value != "idx-7" {
				t.Fatalf("IdP saw %+v", rec)
			}
			if !strings.HasPrefix(back, testSLO+"?SAMLResponse=") {
				t.Fatalf("IdP sent the browser to %s", back)
			}
			res := serve(f.sp, http.MethodGet, back, nil)
			if res.Code != http.StatusSeeOther || res.Header().Get("Location") != "/" {
				t.Fatalf("logout response: %d %s", res.Code, res.Body)
			}
			if res := serve(f.sp, http.MethodGet, back, nil); res.Code != http.StatusBadRequest {
				t.Fatalf("replayed logout response: %d", res.Code)
			}
		})
	}
}

// The LogoutRequest and LogoutResponse we send are issued at the SP's
// clock (Env.Now), not at crewjam's package-level one.
func TestLogoutMessagesIssuedAtTheSPsClock(t *testing.T) {
	skew := 40 * time.Second
	f := newFixture(t, withKeyPair, func(f *fixture) { f.now = func() time.Time { return time.Now().Add(-skew) } },
		withOptions(func(o *Options) { o.Logout.OnIdPLogout = func(context.Context, LogoutSession) error { return nil } }))
	issued := func(x []byte) time.Duration {
		var m struct {
			IssueInstant time.Time `xml:",attr"`
		}
		if err := xml.Unmarshal(x, &m); err != nil {
			t.Fatal(err)
		}
		return time.Since(m.IssueInstant)
	}
	u, err := f.sp.LogoutURL(context.Background(), LogoutSession{NameID: "ada@example.org"})
	if err != nil {
		t.Fatal(err)
	}
	pu, _ := url.Parse(u)
	_, _, x := decodeRedirectLogout(t, pu)
	if age := issued(x); age < skew || age > skew+time.Minute {
		t.Errorf("LogoutRequest issued %v ago, want the SP's clock, %v behind: %s", age, skew, x)
	}
	lr := &saml.LogoutRequest{ID: "id-idp-logout", Version: "2.0", IssueInstant: time.Now(), Destination: testSLO,
		Issuer: &saml.Issuer{Value: f.idp.EntityID()}, NameID: &saml.NameID{Value: "ada@example.org"}}
	m, err := f.idp.RedirectMessage(testSLO, "SAMLRequest", lr.Element(), "")
	if err != nil {
		t.Fatal(err)
	}
	res := serve(f.sp, http.MethodGet, m, nil)
	loc, _ := url.Parse(res.Header().Get("Location"))
	raw, _ := base64.StdEncoding.DecodeString(loc.Query().Get("SAMLResponse"))
	x, err = inflate(raw)
	if err != nil {
		t.Fatalf("answer %d to %s: %v", res.Code, loc, err)
	}
	if age := issued(x); age < skew || age > skew+time.Minute {
		t.Errorf("LogoutResponse issued %v ago, want the SP's clock, %v behind: %s", age, skew, x)
	}
}

func TestLogoutResponseChecks(t *testing.T) {
	f := newFixture(t)
	u, err := f.sp.LogoutURL(context.Background(), LogoutSession{NameID: "ada@example.org"})
	if err != nil {
		t.Fatal(err)
	}
	pu, _ := url.Parse(u)
	_, _, x := decodeRedirectLogout(t, pu)
	var lr saml.LogoutRequest
	if err := xml.Unmarshal(x, &lr); err != nil {
		t.Fatal(err)
	}
	mk := func(mod func(*saml.LogoutResponse)) *saml.LogoutResponse {
		r := &saml.LogoutResponse{ID: "id-lr", InResponseTo: lr.ID, Version: "2.0", IssueInstant: time.Now(),
			Destination: testSLO, Issuer: &saml.Issuer{Value: f.idp.EntityID()},
			Status: saml.Status{StatusCode: saml.StatusCode{Value: saml.StatusSuccess}}}
		mod(r)
		return r
	}
	for name, r := range map[string]*saml.LogoutResponse{
		"unknown request":   mk(func(r *saml.LogoutResponse) { r.InResponseTo = "id-never-sent" }),
		"wrong issuer":      mk(func(r *saml.LogoutResponse) { r.Issuer.Value = "https://evil.example" }),
		"wrong destination": mk(func(r *saml.LogoutResponse) { r.Destination = "https://evil.example/slo" }),
		"stale":             mk(func(r *saml.LogoutResponse) { r.IssueInstant = time.Now().Add(-time.Hour) }),
	} {
		m, err := f.idp.RedirectMessage(testSLO, "SAMLResponse", r.Element(), "")
		if err != nil {
			t.Fatal(err)
		}
		if res := serve(f.sp, http.MethodGet, m, nil); res.Code != http.StatusBadRequest {
			t.Errorf("%s: %d", name, res.Code)
		}
	}
	// Unsigned, and signed by nobody we trust.
	m, _ := f.idp.RedirectMessage(testSLO, "SAMLResponse", mk(func(*saml.LogoutResponse) {}).Element(), "")
	unsigned := m[:strings.Index(m, "&SigAlg=")]
	if res := serve(f.sp, http.MethodGet, unsigned, nil); res.Code != http.StatusBadRequest {
		t.Errorf("unsigned: %d", res.Code)
	}
	forged := strings.Replace(m, "&Signature=", "&Signature=AAAA", 1)
	if res := serve(f.sp, http.MethodGet, forged, nil); res.Code != http.StatusBadRequest {
		t.Errorf("bad signature: %d", res.Code)
	}
	// The genuine one still works after all that.
	if res := serve(f.sp, http.MethodGet, m, nil); res.Code != http.StatusSeeOther {
		t.Errorf("genuine: %d %s", res.Code, res.Body)
	}
}

func decodeRedirectLogout(t *testing.T, pu *url.URL) (string, string, []byte) {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(pu.Query().Get("SAMLRequest"))
	if err != nil {
		t.Fatal(err)
	}
	x, err := inflate(raw)
	if err != nil {
		t.Fatal(err)
	}
	return pu.Query().Get("SigAlg"), pu.Query().Get("Signature"), x
}

func TestIdPInitiatedLogout(t *testing.T) {
	var ended []LogoutSession
	f := newFixture(t, withKeyPair, withOptions(func(o *Options) {
		o.Logout.OnIdPLogout = func(_ context.Context, s LogoutSession) error {
			ended = append(ended, s)
			return nil
		}
	}))
	lr := &saml.LogoutRequest{ID: "id-idp-logout", Version: "2.0", IssueInstant: time.Now(), Destination: testSLO,
		Issuer: &saml.Issuer{Value: f.idp.EntityID()},
		NameID: &saml.NameID{Value: "ada@example.org", Format: NameIDEmail}, SessionIndex: &saml.SessionIndex{Value: "idx-1"}}
	m, err := f.idp.RedirectMessage(testSLO, "SAMLRequest", lr.Element(), "rs-1")
	if err != nil {
		t.Fatal(err)
	}
	unsigned := m[:strings.Index(m, "&SigAlg=")]
	if res := serve(f.sp, http.MethodGet, unsigned, nil); res.Code != http.StatusBadRequest || len(ended) != 0 {
		t.Fatalf("unsigned logout request: %d, hook calls %d", res.Code, len(ended))
	}
	res := serve(f.sp, http.MethodGet, m, nil)
	if res.Code != http.StatusSeeOther || len(ended) != 1 || ended[0].NameID != "ada@example.org" || ended[0].SessionIndex != "idx-1" {
		t.Fatalf("logout request: %d, ended %+v", res.Code, ended)
	}
	loc, _ := url.Parse(res.Header().Get("Location"))
	if !strings.HasPrefix(loc.String(), f.idp.SLOURL()) || loc.Query().Get("RelayState") != "rs-1" {
		t.Fatalf("answer sent to %s", loc)
	}
	_, cert := testKey(t, 1)
	if err := samlidp.VerifyRedirectSignature(loc.RawQuery, "SAMLResponse", cert); err != nil {
		t.Fatalf("our LogoutResponse signature: %v", err)
	}
	raw, _ := base64.StdEncoding.DecodeString(loc.Query().Get("SAMLResponse"))
	x, _ := inflate(raw)
	var resp saml.LogoutResponse
	if err := xml.Unmarshal(x, &resp); err != nil || resp.InResponseTo != "id-idp-logout" || resp.Status.StatusCode.Value != saml.StatusSuccess {
		t.Fatalf("LogoutResponse %s (%v)", x, err)
	}
	if res := serve(f.sp, http.MethodGet, m, nil); res.Code != http.StatusBadRequest || len(ended) != 1 {
		t.Fatalf("replayed logout request: %d", res.Code)
	}
}

func TestLogoutHandlerBounds(t *testing.T) {
	sess := LogoutSession{NameID: "ada@example.org"}
	f := newFixture(t, withOptions(func(o *Options) {
		o.Logout.Session = func(*http.Request) (LogoutSession, bool) { return sess, true }
	}))
	// A small DEFLATE input that would inflate to 8 MiB is cut at the bound.
	bomb := base64.StdEncoding.EncodeToString(deflateZeros(t, 8))
	if len(bomb) > maxRedirectParam {
		t.Fatalf("bomb of %d bytes does not test the inflate bound", len(bomb))
	}
	res := serve(f.sp, http.MethodGet, testSLO+"?SAMLRequest="+url.QueryEscape(bomb), nil)
	if res.Code != http.StatusBadRequest || !strings.Contains(res.Body.String(), "inflated") {
		t.Fatalf("bomb: %d %s", res.Code, res.Body)
	}
	big := strings.Repeat("A", maxRedirectParam+4)
	if res := serve(f.sp, http.MethodGet, testSLO+"?SAMLResponse="+big, nil); res.Code != http.StatusBadRequest {
		t.Fatalf("oversized: %d", res.Code)
	}
	// Browser-started logout: same-origin goes to the IdP; cross-site,
	// same-site, a foreign Origin and a request that says nothing of
	// where it comes from are refused.
	res = serve(f.sp, http.MethodGet, testSLO, http.Header{"Sec-Fetch-Site": {"same-origin"}})
	if res.Code != http.StatusSeeOther || !strings.HasPrefix(res.Header().Get("Location"), f.idp.SLOURL()+"?SAMLRequest=") {
		t.Fatalf("start: %d %s", res.Code, res.Header().Get("Location"))
	}
	for _, h := range []http.Header{
		{"Sec-Fetch-Site": {"cross-site"}},
		{"Sec-Fetch-Site": {"same-site"}},
		{"Sec-Fetch-Site": {"same-origin"}, "Origin": {"https://evil.example"}},
		{"Origin": {"https://evil.example"}},
		{},
	} {
		if res := serve(f.sp, http.MethodPost, testSLO, h); res.Code != http.StatusForbidden {
			t.Fatalf("start with %v: %d", h, res.Code)
		}
	}
	if res := serve(f.sp, http.MethodPut, testSLO, nil); res.Code != http.StatusMethodNotAllowed {
		t.Fatalf("PUT: %d", res.Code)
	}
}

// TestRedirectQueryParsing: the redirect binding's parameters come from
// one reading of the raw query, and a query that could be read two ways
// is refused.
func TestRedirectQueryParsing(t *testing.T) {
	const genuine = "SAMLRequest=abc%2B&RelayState=r%20s&SigAlg=alg&Signature=c2ln"
	m, err := parseRedirectQuery(genuine + "&other=1")
	if err != nil {
		t.Fatal(err)
	}
	if m.param != "SAMLRequest" || m.message != "abc+" || m.relayState != "r s" || m.sigAlg != "alg" ||
		m.signature != "c2ln" || m.signed != "SAMLRequest=abc%2B&RelayState=r%20s&SigAlg=alg" {
		t.Fatalf("parsed %+v", m)
	}
	if m, err := parseRedirectQuery("a=1&b=2"); m != nil || err != nil {
		t.Fatalf("no message: %+v, %v", m, err)
	}
	for name, q := range map[string]string{
		"encoded SAMLRequest before":   "SAML%52equest=forged&" + genuine,
		"encoded SAMLRequest after":    genuine + "&SAML%52equest=forged",
		"encoded first letter":         "%53AMLRequest=forged&" + genuine,
		"encoded SAMLResponse":         "SAML%52esponse=forged&" + strings.Replace(genuine, "SAMLRequest", "SAMLResponse", 1),
		"encoded RelayState":           genuine + "&Relay%53tate=x",
		"encoded SigAlg":               "Sig%41lg=x&" + genuine,
		"encoded Signature":            genuine + "&%53ignature=x",
		"other case":                   "samlrequest=forged&" + genuine,
		"plus in the name":             "SAMLRequest+=forged&" + genuine,
		"duplicate SAMLRequest":        "SAMLRequest=forged&" + genuine,
		"duplicate RelayState":         genuine + "&RelayState=x",
		"duplicate Signature":          genuine + "&Signature=x",
		"SAMLRequest and SAMLResponse": genuine + "&SAMLResponse=x",
		"malformed escape in a value":  "SAMLRequest=%zz&SigAlg=a&Signature=b",
		"malformed escape in a name":   "SAML%zzRequest=x&" + genuine,
		"other encoding than DEFLATE":  genuine + "&SAMLEncoding=urn:x",
	} {
		if m, err := parseRedirectQuery(q); err == nil {
			t.Errorf("%s: accepted as %+v", name, m)
		}
	}
}

// logoutFixture is an SP with the key pair, whose OnIdPLogout and Done
// hooks record what they see.
type logoutFixture struct {
	*fixture
	ended []LogoutSession
	done  []*providers.Error
}

func newLogoutFixture(t *testing.T, mods ...fixtureOption) *logoutFixture {
	lf := &logoutFixture{}
	mods = append([]fixtureOption{withKeyPair, withOptions(func(o *Options) {
		o.Logout.OnIdPLogout = func(_ context.Context, s LogoutSession) error {
			lf.ended = append(lf.ended, s)
			return nil
		}
		o.Logout.Done = func(w http.ResponseWriter, _ *http.Request, err *providers.Error) {
			lf.done = append(lf.done, err)
			w.WriteHeader(http.StatusNoContent)
		}
	})}, mods...)
	lf.fixture = newFixture(t, mods...)
	return lf
}

func (lf *logoutFixture) logoutRequest(id, dest string) *saml.LogoutRequest {
	return &saml.LogoutRequest{ID: id, Version: "2.0", IssueInstant: time.Now(), Destination: dest,
		Issuer: &saml.Issuer{Value: lf.idp.EntityID()}, NameID: &saml.NameID{Value: "ada@example.org"}}
}

// postLogout POSTs a logout message (HTTP-POST binding).
func postLogout(sp *SP, param string, el []byte) *httptest.ResponseRecorder {
	body := url.Values{param: {base64.StdEncoding.EncodeToString(el)}}.Encode()
	r := httptest.NewRequest(http.MethodPost, testSLO, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	sp.LogoutHandler().ServeHTTP(rec, r)
	return rec
}

// TestSignedLogoutNeedsDestination: a signed logout message must name our
// SLO URL (Bindings 3.4.5.2, 3.5.5.2); one the IdP signed for another SP,
// or for nobody, is refused on both bindings.
func TestSignedLogoutNeedsDestination(t *testing.T) {
	for _, dest := range []string{"", "https://other-sp.example/saml/logout"} {
		t.Run("destination "+dest, func(t *testing.T) {
			lf := newLogoutFixture(t)
			// HTTP-Redirect.
			m, err := lf.idp.RedirectMessage(testSLO, "SAMLRequest", lf.logoutRequest("id-r1", dest).Element(), "")
			if err != nil {
				t.Fatal(err)
			}
			if res := serve(lf.sp, http.MethodGet, m, nil); len(lf.ended) != 0 || len(lf.done) != 1 || lf.done[0] == nil {
				t.Fatalf("redirect: %d, ended %v", res.Code, lf.ended)
			}
			// HTTP-POST, enveloped signature.
			el := lf.logoutRequest("id-p1", dest).Element()
			if err := lf.idp.SignMessage(el, samlidp.SignOptions{}); err != nil {
				t.Fatal(err)
			}
			x, _ := samlidp.Serialize(el)
			if res := postLogout(lf.sp, "SAMLRequest", x); len(lf.ended) != 0 || len(lf.done) != 2 || lf.done[1] == nil {
				t.Fatalf("post: %d, ended %v", res.Code, lf.ended)
			}
			// And a LogoutResponse to our own request likewise.
			u, err := lf.sp.LogoutURL(context.Background(), LogoutSession{NameID: "ada@example.org"})
			if err != nil {
				t.Fatal(err)
			}
			pu, _ := url.Parse(u)
			_, _, rx := decodeRedirectLogout(t, pu)
			var lr saml.LogoutRequest
			xml.Unmarshal(rx, &lr)
			resp := &saml.LogoutResponse{ID: "id-lr", InResponseTo: lr.ID, Version: "2.0", IssueInstant: time.Now(),
				Destination: dest, Issuer: &saml.Issuer{Value: lf.idp.EntityID()},
				Status: saml.Status{StatusCode: saml.StatusCode{Value: saml.StatusSuccess}}}
			m, _ = lf.idp.RedirectMessage(testSLO, "SAMLResponse", resp.Element(), "")
			serve(lf.sp, http.MethodGet, m, nil)
			if len(lf.done) != 3 || lf.done[2] == nil || !strings.Contains(lf.done[2].Err.Error(), "destination") {
				t.Fatalf("logout response without our Destination: %v", lf.done)
			}
		})
	}
	// The control: with our SLO URL, both bindings work.
	lf := newLogoutFixture(t)
	m, _ := lf.idp.RedirectMessage(testSLO, "SAMLRequest", lf.logoutRequest("id-ok1", testSLO).Element(), "")
	serve(lf.sp, http.MethodGet, m, nil)
	el := lf.logoutRequest("id-ok2", testSLO).Element()
	lf.idp.SignMessage(el, samlidp.SignOptions{})
	x, _ := samlidp.Serialize(el)
	postLogout(lf.sp, "SAMLRequest", x)
	if len(lf.ended) != 2 {
		t.Fatalf("genuine logout requests: ended %v, done %v", lf.ended, lf.done)
	}
}

// TestLogoutSHA1Policy: logout messages follow the sign-in policy: SHA-1
// refused unless AllowSHA1, on both bindings.
func TestLogoutSHA1Policy(t *testing.T) {
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprintf("AllowSHA1=%v", allow), func(t *testing.T) {
			lf := newLogoutFixture(t, withOptions(func(o *Options) { o.AllowSHA1 = allow }))
			m, err := lf.idp.RedirectMessageWith(testSLO, "SAMLRequest", lf.logoutRequest("id-s1", testSLO).Element(), "", samlidp.RSASHA1)
			if err != nil {
				t.Fatal(err)
			}
			serve(lf.sp, http.MethodGet, m, nil)
			for i, o := range []samlidp.SignOptions{
				{SignatureMethod: samlidp.RSASHA1, DigestMethod: samlidp.DigestSHA1},
				{SignatureMethod: samlidp.RSASHA256, DigestMethod: samlidp.DigestSHA1},
				{SignatureMethod: samlidp.RSASHA1, DigestMethod: samlidp.DigestSHA256},
			} {
				el := lf.logoutRequest(fmt.Sprintf("id-p%d", i), testSLO).Element()
				if err := lf.idp.SignMessage(el, o); err != nil {
					t.Fatal(err)
				}
				x, _ := samlidp.Serialize(el)
				postLogout(lf.sp, "SAMLRequest", x)
			}
			want := 0
			if allow {
				want = 4
			}
			if len(lf.ended) != want {
				t.Fatalf("%d of 4 SHA-1 logout requests honoured, want %d (done %v)", len(lf.ended), want, lf.done)
			}
			for _, e := range lf.done {
				if e != nil && !allow && !strings.Contains(e.Err.Error(), "SHA-1") {
					t.Errorf("refused for another reason: %v", e.Err)
				}
			}
		})
	}
}
