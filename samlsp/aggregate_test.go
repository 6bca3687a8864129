package samlsp

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"weak"

	"github.com/beevik/etree"
	dsig "github.com/russellhaering/goxmldsig"

	"github.com/extauth/extauth/extauthtest/samlidp"
	"github.com/extauth/extauth/internal/testkeys"
	"github.com/extauth/extauth/providers"
)

// fedKeys is the federation's signing key pair of the aggregate tests.
type fedKeys struct {
	key  *rsa.PrivateKey
	cert *x509.Certificate
}

func newFedKeys(t testing.TB) fedKeys {
	t.Helper()
	k, c := testkeys.LendPair(t, "Test Federation Signer", time.Now().Add(-time.Hour))
	return fedKeys{k, c}
}

func (k fedKeys) signer() *samlidp.MetadataSigner {
	return &samlidp.MetadataSigner{Key: k.key, Cert: k.cert}
}

// spEntity is a service provider's entry, which an aggregate lists beside
// the IdPs and the index leaves out.
const spEntity = `<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" entityID="https://sp.example.org/sp">
<md:SPSSODescriptor protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">
<md:AssertionConsumerService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST" Location="https://sp.example.org/acs" index="0"/>
</md:SPSSODescriptor></md:EntityDescriptor>`

// testIdPEntity is a fake IdP's metadata as a federation publishes it.
func testIdPEntity(t testing.TB, base string, e samlidp.Entity) (*samlidp.IdP, []byte) {
	t.Helper()
	key, cert := testkeys.LendPair(t, "Fake SAML IdP", time.Now())
	idp, err := samlidp.New(samlidp.Options{BaseURL: base, AutoApprove: true, Key: key, Certificate: cert})
	if err != nil {
		t.Fatal(err)
	}
	md, err := samlidp.Decorate(idp.Metadata(), e)
	if err != nil {
		t.Fatal(err)
	}
	return idp, md
}

func testAggregate(t testing.TB, k fedKeys, validUntil time.Time, entities ...[]byte) []byte {
	t.Helper()
	agg, err := samlidp.Aggregate(entities, samlidp.AggregateOptions{Signer: k.signer(), ValidUntil: validUntil, Name: "urn:test:federation"})
	if err != nil {
		t.Fatal(err)
	}
	return agg
}

func rulesFor(k fedKeys) aggregateRules {
	return aggregateRules{cert: k.cert, now: time.Now(), maxValidity: DefaultMaxValidity}
}

func TestScanAggregate(t *testing.T) {
	k := newFedKeys(t)
	a, ea := testIdPEntity(t, "https://idp-a.example.org/idp", samlidp.Entity{
		DisplayNames:          map[string]string{"en": "University of Aa", "de": "Universität Aa"},
		Logos:                 []samlidp.Logo{{URL: "https://idp-a.example.org/logo.png", Width: 80, Height: 60}},
		RegistrationAuthority: "https://fed.example.org",
		Categories:            []string{"http://refeds.org/category/research-and-scholarship"},
	})
	_, eb := testIdPEntity(t, "https://idp-b.example.org/idp", samlidp.Entity{
		DisplayNames: map[string]string{"en": "Hidden College"},
		Categories:   []string{CategoryHideFromDiscovery},
	})
	doc := testAggregate(t, k, time.Now().Add(7*24*time.Hour), ea, []byte(spEntity), eb)
	agg, err := scanAggregate(doc, rulesFor(k))
	if err != nil {
		t.Fatal(err)
	}
	if agg.entities != 3 || len(agg.idps) != 2 {
		t.Fatalf("entities %d, IdPs %d; want 3 and 2", agg.entities, len(agg.idps))
	}
	e := agg.byID[a.EntityID()]
	if e == nil {
		t.Fatalf("IdP A is not indexed: %v", agg.byID)
	}
	if e.registrationAuthority != "https://fed.example.org" || len(e.categories) != 1 || len(e.names) != 2 || len(e.logos) != 1 {
		t.Errorf("index of A: %+v", e)
	}
	if u, ok := logoURL(agg.buf[e.logos[0].start:e.logos[0].end]); !ok || u != "https://idp-a.example.org/logo.png" {
		t.Errorf("logo %q %v", u, ok)
	}
	if !bytes.HasPrefix(agg.buf[e.start:e.end], []byte("<EntityDescriptor")) || !bytes.HasSuffix(agg.buf[e.start:e.end], []byte("</EntityDescriptor>")) {
		t.Errorf("entity range %q...", agg.buf[e.start:e.start+40])
	}
	// The entry alone parses as the IdP's own metadata.
	pm, err := ParseIdPMetadata(standalone(agg.buf[e.start:e.end], e.qname, e.ns), MetadataRules{Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if pm.Entity.EntityID != a.EntityID() || len(pm.SigningCerts) != 1 || !pm.SigningCerts[0].Equal(a.Certificate()) {
		t.Errorf("parsed entry: %s, %d certificates", pm.Entity.EntityID, len(pm.SigningCerts))
	}
}

func TestScanAggregateRefusals(t *testing.T) {
	k := newFedKeys(t)
	other := newFedKeys(t)
	_, ea := testIdPEntity(t, "https://idp-a.example.org/idp", samlidp.Entity{DisplayNames: map[string]string{"en": "University of Aa"}})
	week := time.Now().Add(7 * 24 * time.Hour)
	good := testAggregate(t, k, week, ea, []byte(spEntity))
	if _, err := scanAggregate(good, rulesFor(k)); err != nil {
		t.Fatal(err)
	}
	evil := []byte(strings.ReplaceAll(string(ea), "idp-a.example.org", "evil.example.org"))
	sigEnd := bytes.Index(good, []byte("</ds:Signature>")) + len("</ds:Signature>")
	rootEnd := bytes.LastIndex(good, []byte("</md:EntitiesDescriptor>"))
	entitySigned := func() []byte {
		e, err := samlidp.SignMetadata(ea, k.signer())
		if err != nil {
			t.Fatal(err)
		}
		return testAggregate(t, k, week, e)
	}

	for _, tc := range []struct {
		name string
		doc  []byte
		with aggregateRules
		want string
	}{
		{"altered", bytes.Replace(good, []byte("University of Aa"), []byte("University of Ab"), 1), rulesFor(k), "digest does not match"},
		{"entity added inside", append(append(append([]byte{}, good[:rootEnd]...), evil...), good[rootEnd:]...), rulesFor(k), "digest does not match"},
		{"other key", good, rulesFor(other), "does not verify with the federation signing certificate"},
		{"unsigned", testAggregateUnsigned(t, week, ea), rulesFor(k), "not signed"},
		{"wrapped in an unsigned EntitiesDescriptor", []byte(`<md:EntitiesDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" validUntil="` +
			week.UTC().Format(time.RFC3339) + `">` + string(evil) + string(stripDecl(good)) + `</md:EntitiesDescriptor>`), rulesFor(k), "not signed"},
		{"entity after the document element", append(append([]byte{}, good...), evil...), rulesFor(k), "more than one document element"},
		{"signature not first", append(append(append(append([]byte{}, good[:bytes.Index(good, []byte("<ds:Signature"))]...), good[sigEnd:rootEnd]...),
			good[bytes.Index(good, []byte("<ds:Signature")):sigEnd]...), good[rootEnd:]...), rulesFor(k), "first child must be its ds:Signature"},
		{"a second signature", entitySigned(), rulesFor(k), "a signature other than the aggregate's"},
		{"doctype", append([]byte(`<!DOCTYPE lol [<!ENTITY lol "lol">]>`), good...), rulesFor(k), "directives"},
		{"entity reference", bytes.Replace(good, []byte("University of Aa"), []byte("&lol;"), 1), rulesFor(k), "malformed XML"},
		{"too deep", testAggregate(t, k, week, bytes.Replace(ea, []byte("</EntityDescriptor>"),
			[]byte(strings.Repeat("<Extensions>", 60)+strings.Repeat("</Extensions>", 60)+"</EntityDescriptor>"), 1)), rulesFor(k), "nested too deeply"},
		{"expired", testAggregate(t, k, time.Now().Add(-time.Minute), ea), rulesFor(k), "expired"},
		{"no validUntil", testAggregate(t, k, time.Time{}, ea), rulesFor(k), "no validUntil"},
		{"valid for years", testAggregate(t, k, time.Now().Add(3*365*24*time.Hour), ea), rulesFor(k), "max_validity"},
		{"listed twice", testAggregate(t, k, week, ea, ea), rulesFor(k), "twice"},
		{"html", []byte("<!DOCTYPE html><html><body>login</body></html>"), rulesFor(k), "HTML"},
		{"other encoding", append([]byte(`<?xml version="1.0" encoding="ISO-8859-1"?>`), stripDecl(good)...), rulesFor(k), "encoding"},
		{"processing instruction", bytes.Replace(good, []byte("<md:EntityDescriptor"), []byte("<?evil x?><md:EntityDescriptor"), 1), rulesFor(k), "processing instructions"},
		{"SHA-1", sha1Aggregate(t, k, week, ea), rulesFor(k), "SHA-1"},
		{"expired certificate", good, aggregateRules{cert: k.cert, now: time.Now().Add(11 * 365 * 24 * time.Hour), maxValidity: DefaultMaxValidity}, "not valid now"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			agg, err := scanAggregate(tc.doc, tc.with)
			if err == nil {
				t.Fatalf("accepted, with %d IdPs", len(agg.idps))
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to say %q", err, tc.want)
			}
		})
	}
}

func testAggregateUnsigned(t *testing.T, validUntil time.Time, entities ...[]byte) []byte {
	agg, err := samlidp.Aggregate(entities, samlidp.AggregateOptions{ValidUntil: validUntil})
	if err != nil {
		t.Fatal(err)
	}
	return agg
}

func sha1Aggregate(t *testing.T, k fedKeys, validUntil time.Time, entities ...[]byte) []byte {
	s := k.signer()
	s.Sign = samlidp.SignOptions{SignatureMethod: samlidp.RSASHA1, DigestMethod: samlidp.DigestSHA1}
	agg, err := samlidp.Aggregate(entities, samlidp.AggregateOptions{Signer: s, ValidUntil: validUntil})
	if err != nil {
		t.Fatal(err)
	}
	return agg
}

func stripDecl(doc []byte) []byte {
	if bytes.HasPrefix(doc, []byte("<?xml")) {
		return doc[bytes.Index(doc, []byte("?>"))+2:]
	}
	return doc
}

// An IdP whose own validUntil has passed is left out; the others stay.
func TestScanAggregateExpiredEntity(t *testing.T) {
	k := newFedKeys(t)
	_, ea := testIdPEntity(t, "https://idp-a.example.org/idp", samlidp.Entity{})
	old, eb := testIdPEntity(t, "https://idp-b.example.org/idp", samlidp.Entity{})
	eb = bytes.Replace(eb, []byte(`validUntil="`), []byte(`validUntil="2001-01-01T00:00:00Z" x="`), 1)
	agg, err := scanAggregate(testAggregate(t, k, time.Now().Add(time.Hour), ea, eb), rulesFor(k))
	if err != nil {
		t.Fatal(err)
	}
	if len(agg.idps) != 1 || agg.byID[old.EntityID()] != nil || agg.expired != 1 {
		t.Fatalf("IdPs %d, expired %d", len(agg.idps), agg.expired)
	}
}

// The whole document may be referenced (URI=""), as some signers do.
func TestScanAggregateWholeDocumentReference(t *testing.T) {
	k := newFedKeys(t)
	_, ea := testIdPEntity(t, "https://idp-a.example.org/idp", samlidp.Entity{})
	doc := testAggregate(t, k, time.Now().Add(time.Hour), ea)
	doc = resign(t, k, doc, func(ref *etree.Element) {
		ref.RemoveAttr("URI")
		ref.CreateAttr("URI", "")
	})
	if _, err := scanAggregate(doc, rulesFor(k)); err != nil {
		t.Fatal(err)
	}
	other := resign(t, k, doc, func(ref *etree.Element) {
		ref.RemoveAttr("URI")
		ref.CreateAttr("URI", "#elsewhere")
	})
	if _, err := scanAggregate(other, rulesFor(k)); err == nil || !strings.Contains(err.Error(), "does not reference the document element") {
		t.Fatalf("a reference to another element: %v", err)
	}
}

// resign changes the Reference of an aggregate's signature with edit and
// signs its SignedInfo again, as a signer that wrote it so would have.
func resign(t *testing.T, k fedKeys, doc []byte, edit func(ref *etree.Element)) []byte {
	t.Helper()
	root, err := samlidp.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	si := root.FindElement("./Signature/SignedInfo")
	edit(si.FindElement("./Reference"))
	c := si.Copy()
	c.CreateAttr("xmlns:ds", nsDSig)
	canon, err := dsig.MakeC14N10ExclusiveCanonicalizerWithPrefixList("").Canonicalize(c)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(canon)
	v, err := rsa.SignPKCS1v15(nil, k.key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	root.FindElement("./Signature/SignatureValue").SetText(base64.StdEncoding.EncodeToString(v))
	out, err := samlidp.Serialize(root)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The discovery list leaves out IdPs that ask to be hidden and those the
// host's restrictions exclude, offers a hidden one only as the browser's
// own last choice, and keeps only safe logos. (The routes' page escapes
// what the metadata says: TestSAMLFederationDiscoveryPage.)
func TestDiscoverHidesAndFilters(t *testing.T) {
	k := newFedKeys(t)
	a, ea := testIdPEntity(t, "https://idp-a.example.org/idp", samlidp.Entity{
		DisplayNames:          map[string]string{"en": `<script>alert("a")</script> University`},
		Logos:                 []samlidp.Logo{{URL: `https://a.example.org/logo.png" onerror="alert(1)`}},
		RegistrationAuthority: "https://fed.example.org",
	})
	h, eh := testIdPEntity(t, "https://idp-h.example.org/idp", samlidp.Entity{
		DisplayNames: map[string]string{"en": "Hidden College"}, RegistrationAuthority: "https://fed.example.org",
		Categories: []string{CategoryHideFromDiscovery},
	})
	o, eo := testIdPEntity(t, "https://idp-o.example.org/idp", samlidp.Entity{
		DisplayNames: map[string]string{"en": "Other Federation College"}, RegistrationAuthority: "https://other.example.org",
		Logos: []samlidp.Logo{{URL: "data:text/html;base64,PHNjcmlwdD4="}, {URL: "http://o.example.org/logo.png"}},
	})
	agg, err := scanAggregate(testAggregate(t, k, time.Now().Add(time.Hour), ea, eh, eo), rulesFor(k))
	if err != nil {
		t.Fatal(err)
	}
	list := func(cfg FederationConfig, last string) providers.DiscoveryList {
		cfg.MetadataURL, cfg.SigningCertificatePEM = "http://127.0.0.1:1/agg", pemCert(k.cert)
		sp := offlineSP(t, Config{IdPMetadataURL: "-", Federation: cfg}, Options{}, time.Now())
		sp.fed.src.keep(agg, time.Now(), time.Time{}, false)
		r := httptest.NewRequest(http.MethodGet, "/users/auth/saml", nil)
		r.ParseForm()
		var got providers.DiscoveryList
		d := providers.Discovery{Action: "/users/auth/saml", LastChoice: last,
			Render: func(l providers.DiscoveryList) error { got = l; return nil }}
		if err := sp.Discover(httptest.NewRecorder(), r, d); err != nil {
			t.Fatal(err)
		}
		return got
	}
	ids := func(l providers.DiscoveryList) []string {
		var out []string
		for _, c := range l.Choices {
			out = append(out, c.EntityID)
		}
		return out
	}
	all := list(FederationConfig{}, "")
	if got := ids(all); !slices.Equal(got, []string{a.EntityID(), o.EntityID()}) || all.Listed != 2 || all.Last != nil {
		t.Errorf("list without restrictions: %v (listed %d, last %v)", got, all.Listed, all.Last)
	}
	for _, c := range all.Choices {
		if c.Logo != "" {
			t.Errorf("%s: an unsafe logo is offered: %q", c.EntityID, c.Logo)
		}
		if c.EntityID == a.EntityID() && c.Name != `<script>alert("a")</script> University` {
			t.Errorf("the name is not the metadata's, as it says it: %q", c.Name)
		}
	}
	if l := list(FederationConfig{}, h.EntityID()); l.Last == nil || l.Last.Name != "Hidden College" || slices.Contains(ids(l), h.EntityID()) {
		t.Errorf("the hidden IdP the browser chose last is not offered as the last choice only: %+v", l)
	}
	if l := list(FederationConfig{RegistrationAuthorities: []string{"https://fed.example.org"}}, ""); !slices.Equal(ids(l), []string{a.EntityID()}) {
		t.Errorf("registration_authorities: %v", ids(l))
	}
}

// The IdPs an SP keeps parsed do not keep a refreshed-away aggregate, and
// its buffer, alive.
func TestRefreshReleasesTheOldAggregate(t *testing.T) {
	k := newFedKeys(t)
	idp, ea := testIdPEntity(t, "https://idp-a.example.org/idp", samlidp.Entity{})
	doc := testAggregate(t, k, time.Now().Add(time.Hour), ea)
	sp := offlineSP(t, Config{IdPMetadataURL: "-", Federation: FederationConfig{MetadataURL: "http://127.0.0.1:1/agg",
		SigningCertificatePEM: pemCert(k.cert)}}, Options{}, time.Now())
	old, err := scanAggregate(doc, rulesFor(k))
	if err != nil {
		t.Fatal(err)
	}
	sp.fed.src.keep(old, time.Now(), time.Time{}, false)
	if _, perr := sp.idpFor(context.Background(), idp.EntityID()); perr != nil {
		t.Fatal(perr)
	}
	gone := weak.Make(old)
	old = nil
	next, err := scanAggregate(doc, rulesFor(k))
	if err != nil {
		t.Fatal(err)
	}
	sp.fed.src.keep(next, time.Now(), time.Time{}, false)
	runtime.GC()
	runtime.GC()
	if gone.Value() != nil {
		t.Fatal("the old aggregate is still alive after a refresh")
	}
	// The cached entry is parsed again from the new one.
	if _, perr := sp.idpFor(context.Background(), idp.EntityID()); perr != nil {
		t.Fatal(perr)
	}
}
