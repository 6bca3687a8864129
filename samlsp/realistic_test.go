package samlsp

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/extauth/extauth/extauthtest/samlidp"
	"github.com/extauth/extauth/providers"
)

// The entities of testdata/federation-realistic.xml.
const (
	realUniA     = "https://idp.uni-a.example.fi/idp/shibboleth"
	realHidden   = "https://login.hidden.example.org/saml"
	realOddID    = "https://sts.école.example.de/adfs/services/trust?tenant=Fakultät Süd&x=1"
	realSAML1    = "https://old.example.edu/shibboleth"
	realArtifact = "https://artifact.example.net/idp"
	realNoKey    = "https://nokey.example.net/idp"
	realExpired  = "https://idp.expired-cert.example.ac.uk/idp/shibboleth"
	realRoleGone = "https://idp.role-expired.example.org/idp"
	realSP       = "https://sp.example.org/shibboleth"
)

// realisticAggregate is testdata/federation-realistic.xml signed by k, its
// IdPs' keys those of a fresh and of an expired certificate.
func realisticAggregate(t *testing.T, k fedKeys, now time.Time) []byte {
	t.Helper()
	raw, err := os.ReadFile("testdata/federation-realistic.xml")
	if err != nil {
		t.Fatal(err)
	}
	_, cert := testKey(t, 0)
	expired := datedCert(t, "expired self-signed", now.AddDate(-6, 0, 0), now.AddDate(-1, 0, 0))
	doc := strings.NewReplacer("{{CERT}}", base64.StdEncoding.EncodeToString(cert.Raw),
		"{{EXPIRED_CERT}}", base64.StdEncoding.EncodeToString(expired.Raw),
		"{{VALID_UNTIL}}", now.Add(96*time.Hour).UTC().Format(time.RFC3339),
		"{{ROLE_EXPIRED}}", now.Add(-time.Hour).UTC().Format(time.RFC3339)).Replace(string(raw))
	signed, err := samlidp.SignMetadata([]byte(doc), k.signer())
	if err != nil {
		t.Fatal(err)
	}
	return signed
}

// realisticSP is a federation SP holding the realistic aggregate, with the
// restrictions of cfg.
func realisticSP(t *testing.T, cfg FederationConfig) *SP {
	t.Helper()
	k := newFedKeys(t)
	now := time.Now()
	agg, err := scanAggregate(realisticAggregate(t, k, now), rulesFor(k))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MetadataURL, cfg.SigningCertificatePEM = "http://127.0.0.1:1/agg", pemCert(k.cert)
	sp := offlineSP(t, Config{IdPMetadataURL: "-", Federation: cfg}, Options{}, now)
	sp.fed.src.keep(agg, now, time.Time{}, false)
	return sp
}

// discover is the discovery page's list, by entity ID and name, for a
// browser preferring the languages of lang, searching for q.
func discover(t *testing.T, sp *SP, lang, q string) map[string]string {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "/users/auth/saml?q="+url.QueryEscape(q), nil)
	r.Header.Set("Accept-Language", lang)
	r.ParseForm()
	var got providers.DiscoveryList
	d := providers.Discovery{Action: "/users/auth/saml", Render: func(l providers.DiscoveryList) error { got = l; return nil }}
	if err := sp.Discover(httptest.NewRecorder(), r, d); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, e := range got.Choices {
		names[e.EntityID] = e.Name
	}
	return names
}

// TestRealShapedFederation reads metadata shaped as real federations
// publish it: which entities are IdPs that a sign-in can start at, which
// the page lists and under what name, what each filter matches.
func TestRealShapedFederation(t *testing.T) {
	sp := realisticSP(t, FederationConfig{})
	agg := sp.fed.src.current().agg
	var indexed []string
	for _, e := range agg.idps {
		indexed = append(indexed, e.entityID)
	}
	// Not SAML 1 only, not the SP, not the IdP whose role expired.
	want := []string{realUniA, realHidden, realOddID, realArtifact, realNoKey, realExpired}
	if !slices.Equal(indexed, want) || agg.entities != 9 || agg.expired != 1 {
		t.Fatalf("indexed %q (%d entities, %d expired), want %q (9, 1)", indexed, agg.entities, agg.expired, want)
	}
	if e := agg.byID[realUniA]; e.sso != ssoRedirect|ssoPOST || !e.signingKey || e.registrationAuthority != "http://www.csc.example.fi/haka" ||
		!slices.Contains(e.supports, "http://refeds.org/category/research-and-scholarship") || len(e.categories) != 0 {
		t.Errorf("uni A indexed as %+v", e)
	}
	if e := agg.byID[realOddID]; e.sso != ssoRedirect || !e.signingKey {
		t.Errorf("a key without use is a signing key, Redirect only: %+v", e)
	}
	if e := agg.byID[realHidden]; e.sso != ssoPOST {
		t.Errorf("POST only: %+v", e)
	}

	// The page: usable IdPs only, hide-from-discovery left out, names in
	// the browser's language, else English (the organisation's where mdui
	// has none), else the first.
	en := discover(t, sp, "en", "")
	wantNames := map[string]string{realUniA: "University of A", realOddID: "South Faculty", realExpired: "Expired Certificate University"}
	if !mapsEqual(en, wantNames) {
		t.Errorf("English page lists %q, want %q", en, wantNames)
	}
	if fi := discover(t, sp, "fi", ""); fi[realUniA] != "Esimerkkiyliopisto A" {
		t.Errorf("Finnish page names uni A %q", fi[realUniA])
	}
	if sv := discover(t, sp, "sv, en;q=0.5", ""); sv[realUniA] != "Exempeluniversitetet A" {
		t.Errorf("Swedish page names uni A %q", sv[realUniA])
	}
	if ja := discover(t, sp, "ja", ""); ja[realUniA] != "University of A" || ja[realOddID] != "South Faculty" {
		t.Errorf("a language no name has: English first: %q", ja)
	}
	if de := discover(t, sp, "de", "sud"); !mapsEqual(de, map[string]string{realOddID: "Fakultät Süd"}) {
		t.Errorf("search for sud in German: %q", de)
	}

	// entity_categories: an IdP declares R&S as supported.
	rs := realisticSP(t, FederationConfig{EntityCategories: []string{"http://refeds.org/category/research-and-scholarship"}})
	if got := discover(t, rs, "en", ""); !mapsEqual(got, map[string]string{realUniA: "University of A", realOddID: "South Faculty"}) {
		t.Errorf("R&S IdPs listed: %q", got)
	}
	ctx := context.Background()
	if _, perr := rs.idpFor(ctx, realHidden); perr != nil {
		t.Errorf("an R&S IdP hidden from discovery cannot be started at by name: %v", perr)
	}
	if _, perr := rs.idpFor(ctx, realExpired); perr == nil || perr.Code != providers.CodeInvalidResponse {
		t.Errorf("an IdP outside entity_categories: %v", perr)
	}

	// Starting a sign-in: the binding the IdP takes, one look-up; a clear
	// 4xx where none can start.
	for _, c := range []struct {
		id, post, redirect string
	}{
		{realUniA, "", "https://idp.uni-a.example.fi/idp/profile/SAML2/Redirect/SSO?SAMLRequest="},
		{realHidden, "https://login.hidden.example.org/saml/post", ""},
		{realOddID, "", "https://sts.example.de/adfs/ls/?tenant=sued&SAMLRequest="},
		{realExpired, "", "https://idp.expired-cert.example.ac.uk/idp/profile/SAML2/Redirect/SSO?SAMLRequest="},
	} {
		tx := newTx()
		tx.IdP = c.id
		action, form, err := sp.BeginAt(ctx, tx)
		switch {
		case err != nil:
			t.Errorf("BeginAt %s: %v", c.id, err)
		case c.post != "" && (action != c.post || form.Get("SAMLRequest") == ""):
			t.Errorf("BeginAt %s: %s %v, want a form posted to %s", c.id, action, form, c.post)
		case c.redirect != "" && (form != nil || !strings.HasPrefix(action, c.redirect)):
			t.Errorf("BeginAt %s: %s %v, want a redirect to %s", c.id, action, form, c.redirect)
		}
	}
	for _, c := range []struct{ id, why string }{
		{realArtifact, "no SAML 2.0 single sign-on endpoint with the HTTP-Redirect or HTTP-POST binding"},
		{realNoKey, "no signing key"},
		{realSAML1, "not an IdP of the federation"},
		{realRoleGone, "not an IdP of the federation"},
		{realSP, "not an IdP of the federation"},
	} {
		tx := newTx()
		tx.IdP = c.id
		_, _, err := sp.BeginAt(ctx, tx)
		var pe *providers.Error
		if !errors.As(err, &pe) || pe.Code.HTTPStatus()/100 != 4 || pe.Err == nil || !strings.Contains(pe.Err.Error(), c.why) {
			t.Errorf("BeginAt %s: %v, want a 4xx saying %q", c.id, err, c.why)
		}
	}

	// What extauth check reports of it.
	k := newFedKeys(t)
	fm, err := ParseFederationMetadata(realisticAggregate(t, k, time.Now()), FederationRules{Certificate: k.cert, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if fm.IdPs != 6 || fm.ExpiredIdPs != 1 || fm.Allowed != 6 || fm.Unusable != 2 || fm.OutOfDate != 1 {
		t.Errorf("ParseFederationMetadata: %+v", fm)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// The IDPSSODescriptor's validUntil bounds an IdP once the aggregate that
// lists it is in use: when it passes, the IdP leaves the page and its
// sign-ins are refused, whatever the aggregate's own validUntil.
func TestRoleValidUntilPassesDuringUse(t *testing.T) {
	k := newFedKeys(t)
	now := time.Now()
	raw, err := os.ReadFile("testdata/federation-realistic.xml")
	if err != nil {
		t.Fatal(err)
	}
	_, cert := testKey(t, 0)
	doc := strings.NewReplacer("{{CERT}}", base64.StdEncoding.EncodeToString(cert.Raw),
		"{{EXPIRED_CERT}}", base64.StdEncoding.EncodeToString(cert.Raw),
		"{{VALID_UNTIL}}", now.Add(96*time.Hour).UTC().Format(time.RFC3339),
		"{{ROLE_EXPIRED}}", now.Add(time.Hour).UTC().Format(time.RFC3339)).Replace(string(raw))
	signed, err := samlidp.SignMetadata([]byte(doc), k.signer())
	if err != nil {
		t.Fatal(err)
	}
	agg, err := scanAggregate(signed, rulesFor(k))
	if err != nil {
		t.Fatal(err)
	}
	clock := now
	sp := offlineSP(t, Config{IdPMetadataURL: "-", Federation: FederationConfig{MetadataURL: "http://127.0.0.1:1/agg",
		SigningCertificatePEM: pemCert(k.cert)}}, Options{}, now)
	sp.env.Now = func() time.Time { return clock }
	sp.fed.src.keep(agg, now, time.Time{}, false)
	if _, perr := sp.idpFor(context.Background(), realRoleGone); perr != nil {
		t.Fatalf("before its role's validUntil: %v", perr)
	}
	if _, ok := discover(t, sp, "en", "")[realRoleGone]; !ok {
		t.Fatal("not listed before its role's validUntil")
	}
	clock = now.Add(2 * time.Hour)
	if _, perr := sp.idpFor(context.Background(), realRoleGone); perr == nil || perr.Code != providers.CodeInvalidResponse {
		t.Fatalf("after its role's validUntil: %v", perr)
	}
	if _, ok := discover(t, sp, "en", "")[realRoleGone]; ok {
		t.Fatal("listed after its role's validUntil")
	}
}
