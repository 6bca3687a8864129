package main

import (
	"bytes"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/extauth/extauth/extauthtest/samlidp"
)

// check verifies a federation's aggregate with the pinned certificate and
// reports its entities, IdPs and validUntil; a signature that does not
// verify breaks SAML.
func TestCheckFederation(t *testing.T) {
	key, cert, err := samlidp.NewKeyPair("Test Federation", testNow.Add(-24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	idp, err := samlidp.New(samlidp.Options{BaseURL: "https://idp-a.example.org/idp"})
	if err != nil {
		t.Fatal(err)
	}
	idp.Set(func(k *samlidp.Knobs) { k.ValidUntil = testNow.Add(30 * 24 * time.Hour) })
	entity, err := samlidp.Decorate(idp.Metadata(), samlidp.Entity{DisplayNames: map[string]string{"en": "University of Aa"}})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := samlidp.Aggregate([][]byte{entity}, samlidp.AggregateOptions{Signer: &samlidp.MetadataSigner{Key: key, Cert: cert},
		ValidUntil: testNow.Add(7 * 24 * time.Hour), CacheDuration: 6 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var serve atomic.Pointer[[]byte]
	serve.Store(&doc)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(*serve.Load()) }))
	defer srv.Close()
	path := writeRaw(t, "federation.yml", "saml_sp_entity_id: https://app.example.org/saml\nsaml_additional_settings:\n  federation:\n"+
		"    metadata_url: "+srv.URL+"/aggregate.xml\n    signing_certificate: |\n"+
		indent(string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})), "      ")+
		"    entity_ids:\n      - "+idp.EntityID()+"\n      - https://gone.example.org/idp\n")
	out := runAt(t, testNow, "check", "-config", path)
	if out.code != exitOK {
		t.Fatalf("exit %d:\n%s%s", out.code, out.stdout, out.stderr)
	}
	for _, want := range []string{"verified with federation.signing_certificate", "entities", "IdPs users may choose",
		"valid until", "2030-06-08T12:00:00Z", "6h0m0s", "https://gone.example.org/idp, which the aggregate does not list"} {
		if !strings.Contains(out.stdout, want) {
			t.Errorf("the report lacks %q:\n%s", want, out.stdout)
		}
	}

	altered := bytes.Replace(doc, []byte("University of Aa"), []byte("University of Ab"), 1)
	serve.Store(&altered)
	out = runAt(t, testNow, "check", "-config", path)
	if out.code != exitFail || !strings.Contains(brokenReasons(out.stdout), "altered after signing") {
		t.Fatalf("an altered aggregate: exit %d:\n%s%s", out.code, out.stdout, out.stderr)
	}
	assertNoSecret(t, "check", out.stdout+out.stderr)
}

// With an MDQ server, check asks it for the IdPs of entity_ids and verifies
// each answer; none verified breaks SAML.
func TestCheckFederationMDQ(t *testing.T) {
	key, cert, err := samlidp.NewKeyPair("Test Federation", testNow.Add(-24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	idp, err := samlidp.New(samlidp.Options{BaseURL: "https://idp-a.example.org/idp"})
	if err != nil {
		t.Fatal(err)
	}
	idp.Set(func(k *samlidp.Knobs) { k.ValidUntil = testNow.Add(3 * 24 * time.Hour) })
	signer := &samlidp.MetadataSigner{Key: key, Cert: cert}
	signed, err := samlidp.SignMetadata(idp.Metadata(), signer)
	if err != nil {
		t.Fatal(err)
	}
	var serve atomic.Pointer[[]byte]
	serve.Store(&signed)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.URL.EscapedPath(), "idp-a.example.org") {
			http.NotFound(w, r)
			return
		}
		w.Write(*serve.Load())
	}))
	defer srv.Close()
	path := writeRaw(t, "mdq.yml", "saml_sp_entity_id: https://app.example.org/saml\nsaml_additional_settings:\n  federation:\n"+
		"    mdq_url: "+srv.URL+"/mdq/\n    signing_certificate: |\n"+
		indent(string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})), "      ")+
		"    entity_ids:\n      - "+idp.EntityID()+"\n      - https://gone.example.org/idp\n")
	out := runAt(t, testNow, "check", "-config", path)
	if out.code != exitOK || !strings.Contains(out.stdout, "MDQ server") || !strings.Contains(out.stdout, idp.EntityID()+", valid until") ||
		!strings.Contains(out.stdout, "no usable answer for https://gone.example.org/idp") {
		t.Fatalf("exit %d:\n%s%s", out.code, out.stdout, out.stderr)
	}
	other, _, err := samlidp.NewKeyPair("Another", testNow.Add(-24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	forged, err := samlidp.SignMetadata(idp.Metadata(), &samlidp.MetadataSigner{Key: other, Cert: cert})
	if err != nil {
		t.Fatal(err)
	}
	serve.Store(&forged)
	out = runAt(t, testNow, "check", "-config", path)
	if out.code != exitFail || !strings.Contains(brokenReasons(out.stdout), "no IdP of entity_ids has a verified answer") {
		t.Fatalf("a forged answer: exit %d:\n%s%s", out.code, out.stdout, out.stderr)
	}
}
