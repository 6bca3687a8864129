package main

import (
	"bytes"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"encoding/xml"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crewjam/saml"

	"github.com/extauth/extauth/extauthtest/samlidp"
	"github.com/extauth/extauth/internal/testkeys"
)

// federationAt is a federation's signing key pair, valid at testNow, and an
// IdP whose metadata is valid until validUntil.
func federationAt(t *testing.T, validUntil time.Time) (*rsa.PrivateKey, *x509.Certificate, *samlidp.IdP) {
	t.Helper()
	key, cert := testkeys.LendPair(t, "Test Federation", testNow.Add(-24*time.Hour))
	idpKey, idpCert := testkeys.LendPair(t, "Fake SAML IdP", time.Now())
	idp, err := samlidp.New(samlidp.Options{BaseURL: "https://idp-a.example.org/idp", Key: idpKey, Certificate: idpCert})
	if err != nil {
		t.Fatal(err)
	}
	idp.Set(func(k *samlidp.Knobs) { k.ValidUntil = validUntil })
	return key, cert, idp
}

// check verifies a federation's aggregate with the pinned certificate and
// reports its entities, IdPs and validUntil; a signature that does not
// verify breaks SAML.
func TestCheckFederation(t *testing.T) {
	key, cert, idp := federationAt(t, testNow.Add(30*24*time.Hour))
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
	key, cert, idp := federationAt(t, testNow.Add(3*24*time.Hour))
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
	other, _ := testkeys.LendPair(t, "Another", testNow.Add(-24*time.Hour))
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

// A federation signing certificate that expires within 30 days is warned
// about, whether the federation is an aggregate or an MDQ server: both are
// verified with it.
func TestCheckFederationCertificateExpiring(t *testing.T) {
	// LendPair's certificate is valid for ten years from its now.
	key, cert := testkeys.LendPair(t, "Expiring Federation", testNow.AddDate(-10, 0, 20))
	_, _, idp := federationAt(t, testNow.Add(3*24*time.Hour))
	signer := &samlidp.MetadataSigner{Key: key, Cert: cert}
	answer, err := samlidp.SignMetadata(idp.Metadata(), signer)
	if err != nil {
		t.Fatal(err)
	}
	aggregate, err := samlidp.Aggregate([][]byte{idp.Metadata()}, samlidp.AggregateOptions{Signer: signer, ValidUntil: testNow.Add(3 * 24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/mdq/") {
			w.Write(answer)
			return
		}
		w.Write(aggregate)
	}))
	defer srv.Close()
	pinned := indent(string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})), "      ")
	const want = "- saml: the federation's signing certificate CN=Expiring Federation expires in 20 days, on 2030-06-21; " +
		"pin the next one the federation publishes (saml_additional_settings.federation.signing_certificate)\n"
	for name, source := range map[string]string{
		"aggregate": "    metadata_url: " + srv.URL + "/aggregate.xml\n",
		"MDQ":       "    mdq_url: " + srv.URL + "/mdq/\n    entity_ids: [" + idp.EntityID() + "]\n",
	} {
		path := writeRaw(t, "federation.yml", "saml_sp_entity_id: https://app.example.org/saml\nsaml_additional_settings:\n  federation:\n"+
			source+"    signing_certificate: |\n"+pinned)
		out := runAt(t, testNow, "check", "-config", path)
		if out.code != exitOK || !strings.Contains(out.stdout, want) {
			t.Errorf("%s: exit %d, want the warning %q:\n%s%s", name, out.code, want, out.stdout, out.stderr)
		}
	}
}

// extauth metadata prints what a federation asks of our SP metadata, from
// sp_metadata: mdui:UIInfo, the organisation, the contacts (the REFEDS
// security contact among them), entity categories and Sirtfi, and the
// attributes asked for; the document stays valid for crewjam's types.
func TestMetadataForAFederation(t *testing.T) {
	path := writeRaw(t, "sp.yml", `saml_sp_entity_id: https://app.example.org/saml
saml_idp_metadata_url: https://idp.example.org/metadata
saml_additional_settings:
  sp_metadata:
    display_name:
      en: Research Platform
      de: Forschungsplattform
    description: A platform for research & teaching
    logo: {url: "https://app.example.org/logo.png", width: 80, height: 60}
    information_url: https://app.example.org/about
    privacy_statement_url: https://app.example.org/privacy
    organization: {name: Example University, display_name: Example University, url: "https://www.example.org/"}
    contacts:
      - {type: technical, name: Ops, email: ops@example.org}
      - {type: security, name: CSIRT, email: "mailto:csirt@example.org"}
    entity_categories: [http://refeds.org/category/research-and-scholarship]
    assurance_certifications: [https://refeds.org/sirtfi]
    requested_attributes:
      - {name: "urn:oid:1.3.6.1.4.1.5923.1.1.1.6", friendly_name: eduPersonPrincipalName, required: true}
      - {name: "urn:oid:0.9.2342.19200300.100.1.3", friendly_name: mail}
`)
	out := runAt(t, testNow, "metadata", "-config", path, "-base-url", "https://app.example.org")
	if out.code != exitOK {
		t.Fatalf("exit %d: %s", out.code, out.stderr)
	}
	md := out.stdout
	for _, want := range []string{
		`<mdui:DisplayName xml:lang="de">Forschungsplattform</mdui:DisplayName>`,
		`<mdui:Description xml:lang="en">A platform for research &amp; teaching</mdui:Description>`,
		`<mdui:Logo height="60" width="80">https://app.example.org/logo.png</mdui:Logo>`,
		`<mdui:PrivacyStatementURL xml:lang="en">https://app.example.org/privacy</mdui:PrivacyStatementURL>`,
		`<saml:AttributeValue>http://refeds.org/category/research-and-scholarship</saml:AttributeValue>`,
		`Name="urn:oasis:names:tc:SAML:attribute:assurance-certification"`, `<saml:AttributeValue>https://refeds.org/sirtfi</saml:AttributeValue>`,
		`contactType="other" xmlns:remd="http://refeds.org/metadata" remd:contactType="http://refeds.org/metadata/contactType/security"`,
		`<EmailAddress>mailto:csirt@example.org</EmailAddress>`, `<EmailAddress>mailto:ops@example.org</EmailAddress>`,
		`<RequestedAttribute Name="urn:oid:1.3.6.1.4.1.5923.1.1.1.6" NameFormat="urn:oasis:names:tc:SAML:2.0:attrname-format:uri" FriendlyName="eduPersonPrincipalName" isRequired="true"/>`,
		`<OrganizationURL xml:lang="en">https://www.example.org/</OrganizationURL>`,
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the metadata lacks %s:\n%s", want, md)
		}
	}
	var ed saml.EntityDescriptor
	if err := xml.Unmarshal([]byte(md), &ed); err != nil || ed.Organization == nil || len(ed.SPSSODescriptors) != 1 ||
		len(ed.SPSSODescriptors[0].AttributeConsumingServices) != 1 || len(ed.SPSSODescriptors[0].AttributeConsumingServices[0].RequestedAttributes) != 2 {
		t.Fatalf("crewjam reads %+v, %v", ed, err)
	}
	// Schema order: Extensions first, Organization and ContactPerson after
	// the role; AttributeConsumingService after the ACS.
	if !(strings.Index(md, "<Extensions>") < strings.Index(md, "<SPSSODescriptor") &&
		strings.Index(md, "</SPSSODescriptor>") < strings.Index(md, "<Organization>") &&
		strings.Index(md, "<Organization>") < strings.Index(md, "<ContactPerson") &&
		strings.Index(md, "<AssertionConsumerService") < strings.Index(md, "<AttributeConsumingService")) {
		t.Errorf("elements out of schema order:\n%s", md)
	}

	bad := writeRaw(t, "bad.yml", "saml_sp_entity_id: https://app.example.org/saml\nsaml_idp_metadata_url: https://idp.example.org/metadata\n"+
		"saml_additional_settings:\n  sp_metadata:\n    information_url: http://app.example.org/about\n    contacts:\n      - {type: boss, email: nobody}\n")
	out = runAt(t, testNow, "check", "-config", bad, "-offline")
	for _, want := range []string{"sp_metadata.information_url must be an absolute https URL", "sp_metadata.contacts[0].type must be one of",
		"sp_metadata.contacts[0].email must be an e-mail address"} {
		if out.code != exitFail || !strings.Contains(out.stdout, want) {
			t.Errorf("check: exit %d, want %q:\n%s", out.code, want, out.stdout)
		}
	}
}
