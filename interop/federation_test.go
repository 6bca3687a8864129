//go:build interop

package interop

import (
	"bytes"
	"context"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/samlidp"
	"github.com/extauth/extauth/internal/harness"
)

// signatureTemplate is the ds:Signature xmlsec1 fills in: enveloped,
// exclusive C14N, RSA-SHA256, first child of the EntitiesDescriptor, as
// federations sign their aggregates (pyFF, xmlsectool).
const signatureTemplate = `<ds:Signature xmlns:ds="http://www.w3.org/2000/09/xmldsig#"><ds:SignedInfo>` +
	`<ds:CanonicalizationMethod Algorithm="http://www.w3.org/2001/10/xml-exc-c14n#"/>` +
	`<ds:SignatureMethod Algorithm="http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"/>` +
	`<ds:Reference URI="#_aggregate-1"><ds:Transforms><ds:Transform Algorithm="http://www.w3.org/2000/09/xmldsig#enveloped-signature"/>` +
	`<ds:Transform Algorithm="http://www.w3.org/2001/10/xml-exc-c14n#"/></ds:Transforms>` +
	`<ds:DigestMethod Algorithm="http://www.w3.org/2001/04/xmlenc#sha256"/><ds:DigestValue/></ds:Reference></ds:SignedInfo>` +
	`<ds:SignatureValue/></ds:Signature>`

// xmlsec1Aggregate lists entities in an md:EntitiesDescriptor valid until
// validUntil and has xmlsec1 sign it with signer's key.
func xmlsec1Aggregate(t *testing.T, signer pair, validUntil time.Time, entities ...[]byte) []byte {
	t.Helper()
	unsigned, err := samlidp.Aggregate(entities, samlidp.AggregateOptions{ValidUntil: validUntil, CacheDuration: time.Hour, Name: "urn:example:interop-federation"})
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(unsigned, []byte("<md:EntitiesDescriptor"))
	at += bytes.IndexByte(unsigned[at:], '>') + 1
	return xmlsec1Sign(t, signer, "EntitiesDescriptor", append(append(append([]byte{}, unsigned[:at]...), signatureTemplate...), unsigned[at:]...))
}

// xmlsec1Sign has xmlsec1 fill in the signature template of tmpl, whose
// signed element is the metadata element named element, by its ID.
func xmlsec1Sign(t *testing.T, signer pair, element string, tmpl []byte) []byte {
	t.Helper()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "template.xml"), filepath.Join(dir, "signed.xml")
	if err := os.WriteFile(in, tmpl, 0o644); err != nil {
		t.Fatal(err)
	}
	if msg, err := exec.Command("xmlsec1", "--sign", "--privkey-pem", signer.keyPath+","+signer.certPath,
		"--id-attr:ID", "urn:oasis:names:tc:SAML:2.0:metadata:"+element, "--output", out, in).CombinedOutput(); err != nil {
		t.Fatalf("xmlsec1 --sign: %v\n%s\n%s", err, msg, tmpl)
	}
	signed, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return signed
}

// aggregateServer serves whatever aggregate it holds.
type aggregateServer struct {
	doc atomic.Pointer[[]byte]
	URL string
}

func serveAggregate(t *testing.T, doc []byte) *aggregateServer {
	s := &aggregateServer{}
	s.doc.Store(&doc)
	srv := harness.Serve(t, func(string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/samlmetadata+xml")
			w.Write(*s.doc.Load())
		})
	})
	s.URL = srv.URL + "/federation.xml"
	return s
}

// fedApp is an application that signs in through a federation.
type fedApp struct {
	URL  string
	Auth *extauth.Auth
	mu   sync.Mutex
	got  []*extauth.Identity
	fail []*extauth.Error
}

func startFedApp(t *testing.T, aggregateURL string, fedCert, spKeys pair) *fedApp {
	return startFedAppWith(t, extauth.SAMLFederation{MetadataURL: aggregateURL, SigningCertificate: fedCert.certPEM}, spKeys)
}

// startFedAppWith starts an application that signs in through the
// federation f with the SP key pair spKeys.
func startFedAppWith(t *testing.T, f extauth.SAMLFederation, spKeys pair) *fedApp {
	t.Helper()
	a := &fedApp{}
	srv := harness.Serve(t, func(base string) http.Handler {
		auth, err := extauth.New(&extauth.Config{SAML: extauth.SAMLConfig{SPEntityID: base + "/saml", Additional: extauth.SAMLAdditionalSettings{
			Certificate: spKeys.certPEM, PrivateKey: extauth.NewSecret(spKeys.keyPEM), Federation: f}}},
			extauth.Options{BaseURL: base, CookieKey: bytes.Repeat([]byte{9}, 32), Logger: slog.New(slog.DiscardHandler),
				OnFailure: func(w http.ResponseWriter, _ *http.Request, err *extauth.Error) {
					a.mu.Lock()
					a.fail = append(a.fail, err)
					a.mu.Unlock()
					t.Logf("sign-in failed: %v", err)
					http.Error(w, string(err.Code), err.Code.HTTPStatus())
				},
				OnSuccess: func(w http.ResponseWriter, _ *http.Request, id *extauth.Identity) {
					a.mu.Lock()
					a.got = append(a.got, id)
					a.mu.Unlock()
					io.WriteString(w, "signed in")
				}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { auth.Close() })
		a.Auth = auth
		mux := http.NewServeMux()
		auth.Mount(mux)
		return mux
	})
	a.URL = srv.URL
	return a
}

func (a *fedApp) last() *extauth.Identity {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.got) == 0 {
		return nil
	}
	return a.got[len(a.got)-1]
}

func (a *fedApp) ready(t *testing.T, within time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	return a.Auth.Ready(ctx)
}

// TestFederationSignIn signs in through two independent IdPs,
// SimpleSAMLphp and samlify, listed in one aggregate that xmlsec1 signed
// and our streaming verifier checks, each chosen on the discovery page;
// then the refusals: an answer from samlify to a sign-in started at
// SimpleSAMLphp, an aggregate altered after signing, an expired one.
func TestFederationSignIn(t *testing.T) {
	fedKeys, spKeys := newPair(t, "federation"), newPair(t, "sp")
	sspKeys, samlifyKeys := newPair(t, "ssp"), newPair(t, "samlify")
	ssp := startSimpleSAMLphp(t, sspKeys)
	samlifyURL := startSamlify(t, samlifyKeys)
	get := func(u string) []byte {
		r := harness.NewBrowser(t).Get(u)
		if r.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", u, r.StatusCode, r.Body)
		}
		return []byte(r.Body)
	}
	sspEntity, err := samlidp.Decorate(get(ssp.MetadataURL()), samlidp.Entity{DisplayNames: map[string]string{"en": "SimpleSAMLphp University"}})
	if err != nil {
		t.Fatal(err)
	}
	samlifyEntity, err := samlidp.Decorate(get(samlifyURL+"/metadata"), samlidp.Entity{DisplayNames: map[string]string{"en": "Samlify College"}})
	if err != nil {
		t.Fatal(err)
	}
	week := time.Now().Add(7 * 24 * time.Hour)
	agg := serveAggregate(t, xmlsec1Aggregate(t, fedKeys, week, sspEntity, samlifyEntity))
	a := startFedApp(t, agg.URL, fedKeys, spKeys)
	if err := a.ready(t, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	ssp.trustSP(t, a.URL+"/users/auth/saml/metadata", &spKeys, nil)
	md := harness.NewBrowser(t).Get(a.URL + "/users/auth/saml/metadata")
	if resp, err := http.Post(samlifyURL+"/register?encrypt=0", "application/xml", strings.NewReader(md.Body)); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("samlify register: %v %v", resp, err)
	}

	// The discovery page lists both.
	b := harness.NewBrowser(t)
	page := b.Get(a.URL + "/users/auth/saml")
	for _, want := range []string{"SimpleSAMLphp University", "Samlify College", ssp.MetadataURL(), samlifyURL + "/metadata"} {
		if !strings.Contains(page.Body, want) {
			t.Fatalf("the discovery page lacks %s:\n%s", want, page.Body)
		}
	}

	// SimpleSAMLphp, chosen on the page: its login form, then our callback.
	login := b.PostForm(a.URL+"/users/auth/saml", url.Values{"idp": {ssp.MetadataURL()}})
	if !isLoginForm(login) {
		t.Fatalf("expected SimpleSAMLphp's login form, got %s (%d):\n%s", login.URL, login.StatusCode, login.Body)
	}
	action, form := htmlForm(t, login)
	form.Set("username", sspUser)
	form.Set("password", sspPassword)
	posted := b.PostForm(action, form)
	action, form = htmlForm(t, posted)
	if cb := b.PostForm(action, form); cb.StatusCode != http.StatusOK {
		t.Fatalf("callback from SimpleSAMLphp: %d %s\n%s", cb.StatusCode, cb.Body, ssp.log())
	}
	checkGrace(t, a.last())
	if got := a.last().SAML.IdP; got != ssp.MetadataURL() {
		t.Fatalf("asserted by %q, want SimpleSAMLphp", got)
	}

	// samlify, chosen on the page.
	nb := harness.NewBrowser(t).NoFollow()
	start := nb.PostForm(a.URL+"/users/auth/saml", url.Values{"idp": {samlifyURL + "/metadata"}})
	if start.StatusCode != http.StatusSeeOther || !strings.HasPrefix(start.Header.Get("Location"), samlifyURL+"/sso") {
		t.Fatalf("start at samlify: %d %s", start.StatusCode, start.Header.Get("Location"))
	}
	sform := samlifyForm(t, nb, start.Header.Get("Location"))
	if cb := nb.PostForm(a.URL+"/users/auth/saml/callback", sform); cb.StatusCode != http.StatusOK {
		t.Fatalf("callback from samlify: %d %s", cb.StatusCode, cb.Body)
	}
	if got := a.last(); got.SAML.IdP != samlifyURL+"/metadata" || got.Email != "grace@example.org" {
		t.Fatalf("identity %+v %+v", got, got.SAML)
	}

	// samlify answers a request we sent for SimpleSAMLphp: the request is
	// ours and signed, the response is samlify's and signed, samlify is in
	// the federation. The sign-in was started at SimpleSAMLphp, so it is
	// refused.
	xb := harness.NewBrowser(t).NoFollow()
	start = xb.PostForm(a.URL+"/users/auth/saml", url.Values{"idp": {ssp.MetadataURL()}})
	toSSP, err := url.Parse(start.Header.Get("Location"))
	if err != nil || start.StatusCode != http.StatusSeeOther {
		t.Fatalf("start at SimpleSAMLphp: %d %v", start.StatusCode, err)
	}
	toSamlify := samlifyURL + "/sso?" + toSSP.RawQuery
	xform := samlifyForm(t, xb, toSamlify)
	before := len(a.got)
	cb := xb.PostForm(a.URL+"/users/auth/saml/callback", xform)
	if cb.StatusCode == http.StatusOK || len(a.got) != before {
		t.Fatalf("samlify's answer to a sign-in started at SimpleSAMLphp was accepted: %d %s", cb.StatusCode, cb.Body)
	}
	if f := a.fail[len(a.fail)-1]; f.Code != extauth.CodeInvalidResponse {
		t.Fatalf("refusal %v", f)
	}

	// An aggregate altered after xmlsec1 signed it is never used.
	good := *agg.doc.Load()
	altered := bytes.Replace(good, []byte("Samlify College"), []byte("Samlify Kollege"), 1)
	bad := serveAggregate(t, altered)
	if err := startFedApp(t, bad.URL, fedKeys, spKeys).ready(t, time.Second); err == nil || !strings.Contains(err.Error(), "altered after signing") {
		t.Fatalf("an altered aggregate: %v", err)
	}
	// Nor is one signed by another key.
	other := serveAggregate(t, xmlsec1Aggregate(t, newPair(t, "other"), week, sspEntity))
	if err := startFedApp(t, other.URL, fedKeys, spKeys).ready(t, time.Second); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Fatalf("an aggregate signed by another key: %v", err)
	}
	// Nor one whose validUntil has passed.
	expired := serveAggregate(t, xmlsec1Aggregate(t, fedKeys, time.Now().Add(-time.Minute), sspEntity))
	if err := startFedApp(t, expired.URL, fedKeys, spKeys).ready(t, time.Second); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("an expired aggregate: %v", err)
	}
}

// samlifyForm has samlify answer the AuthnRequest at u and returns the
// form it posts back.
func samlifyForm(t *testing.T, b *harness.Browser, u string) url.Values {
	t.Helper()
	page := b.Get(u)
	form := url.Values{}
	for _, m := range formField.FindAllStringSubmatch(page.Body, -1) {
		form.Set(m[1], html.UnescapeString(m[2]))
	}
	if page.StatusCode != http.StatusOK || form.Get("SAMLResponse") == "" {
		t.Fatalf("samlify: %d %s", page.StatusCode, page.Body)
	}
	return form
}

// xmlsec1Entity has xmlsec1 sign one entity's metadata as an MDQ server
// serves it: an ID and a validUntil on the EntityDescriptor, the signature
// its first child.
func xmlsec1Entity(t *testing.T, signer pair, validUntil time.Time, entity []byte) []byte {
	t.Helper()
	root, err := samlidp.Parse(entity)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"ID", "validUntil", "cacheDuration"} {
		root.RemoveAttr(a)
	}
	root.CreateAttr("ID", "_entity-1")
	root.CreateAttr("validUntil", validUntil.UTC().Format(time.RFC3339))
	for _, c := range root.ChildElements() {
		if c.Tag == "Signature" {
			root.RemoveChild(c)
		}
	}
	tmpl, err := samlidp.Parse([]byte(strings.Replace(signatureTemplate, "#_aggregate-1", "#_entity-1", 1)))
	if err != nil {
		t.Fatal(err)
	}
	root.InsertChildAt(0, tmpl)
	doc, err := samlidp.Serialize(root)
	if err != nil {
		t.Fatal(err)
	}
	return xmlsec1Sign(t, signer, "EntityDescriptor", doc)
}

// TestFederationMDQSignIn signs in through SimpleSAMLphp and samlify whose
// metadata an MDQ responder serves one entity at a time, each answer signed
// by xmlsec1; an entity the responder does not know is refused.
func TestFederationMDQSignIn(t *testing.T) {
	fedKeys, spKeys := newPair(t, "federation"), newPair(t, "sp")
	ssp := startSimpleSAMLphp(t, newPair(t, "ssp"))
	samlifyURL := startSamlify(t, newPair(t, "samlify"))
	week := time.Now().Add(7 * 24 * time.Hour)
	answers := map[string][]byte{}
	for id, u := range map[string]string{ssp.MetadataURL(): ssp.MetadataURL(), samlifyURL + "/metadata": samlifyURL + "/metadata"} {
		r := harness.NewBrowser(t).Get(u)
		if r.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", u, r.StatusCode)
		}
		answers["/entities/"+id] = xmlsec1Entity(t, fedKeys, week, []byte(r.Body))
	}
	var asked sync.Map
	mdq := harness.Serve(t, func(string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n, _ := asked.LoadOrStore(r.URL.Path, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
			doc, ok := answers[r.URL.Path]
			if !ok {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/samlmetadata+xml")
			w.Write(doc)
		})
	})
	const gone = "https://gone.example.org/idp"
	a := startFedAppWith(t, extauth.SAMLFederation{MDQURL: mdq.URL + "/", SigningCertificate: fedKeys.certPEM,
		EntityIDs: []string{ssp.MetadataURL(), samlifyURL + "/metadata", gone}}, spKeys)
	ssp.trustSP(t, a.URL+"/users/auth/saml/metadata", &spKeys, nil)
	md := harness.NewBrowser(t).Get(a.URL + "/users/auth/saml/metadata")
	if resp, err := http.Post(samlifyURL+"/register?encrypt=0", "application/xml", strings.NewReader(md.Body)); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("samlify register: %v %v", resp, err)
	}

	b := harness.NewBrowser(t)
	login := b.PostForm(a.URL+"/users/auth/saml", url.Values{"idp": {ssp.MetadataURL()}})
	if !isLoginForm(login) {
		t.Fatalf("expected SimpleSAMLphp's login form, got %s (%d):\n%s", login.URL, login.StatusCode, login.Body)
	}
	action, form := htmlForm(t, login)
	form.Set("username", sspUser)
	form.Set("password", sspPassword)
	action, form = htmlForm(t, b.PostForm(action, form))
	if cb := b.PostForm(action, form); cb.StatusCode != http.StatusOK {
		t.Fatalf("callback from SimpleSAMLphp: %d %s", cb.StatusCode, cb.Body)
	}
	checkGrace(t, a.last())

	nb := harness.NewBrowser(t).NoFollow()
	start := nb.PostForm(a.URL+"/users/auth/saml", url.Values{"idp": {samlifyURL + "/metadata"}})
	if start.StatusCode != http.StatusSeeOther {
		t.Fatalf("start at samlify: %d %s", start.StatusCode, start.Body)
	}
	if cb := nb.PostForm(a.URL+"/users/auth/saml/callback", samlifyForm(t, nb, start.Header.Get("Location"))); cb.StatusCode != http.StatusOK {
		t.Fatalf("callback from samlify: %d %s", cb.StatusCode, cb.Body)
	}
	if got := a.last(); got.SAML.IdP != samlifyURL+"/metadata" {
		t.Fatalf("asserted by %q", got.SAML.IdP)
	}

	// The responder does not know this one: refused, and asked once.
	for range 2 {
		if r := nb.PostForm(a.URL+"/users/auth/saml", url.Values{"idp": {gone}}); r.StatusCode == http.StatusSeeOther {
			t.Fatalf("an entity missing from MDQ started a sign-in: %s", r.Header.Get("Location"))
		}
	}
	if n, ok := asked.Load("/entities/" + gone); !ok || n.(*atomic.Int64).Load() != 1 {
		t.Fatalf("the missing entity was asked for %v times, want once", n)
	}
}
