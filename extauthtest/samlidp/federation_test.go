package samlidp_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"github.com/extauth/extauth/extauthtest/samlidp"
	"github.com/extauth/extauth/internal/testkeys"
	"github.com/extauth/extauth/samlsp"
)

// mdPrefixed is an IdP's metadata with the md: prefix, as federations'
// registries write it, beside the kit's own (the default namespace).
const mdPrefixed = `<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" xmlns:ds="http://www.w3.org/2000/09/xmldsig#" entityID="%s">
  <md:IDPSSODescriptor protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">
    <md:KeyDescriptor><ds:KeyInfo><ds:X509Data><ds:X509Certificate>%s</ds:X509Certificate></ds:X509Data></ds:KeyInfo></md:KeyDescriptor>
    <md:SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect" Location="%[1]s/sso"/>
  </md:IDPSSODescriptor>
</md:EntityDescriptor>`

// The kit signs aggregates of a federation's size: goxmldsig, which it
// signed with before, stopped at a thousand elements (between 30 and 50
// entities). What it signs verifies as the SAML strategy verifies a
// federation's aggregate.
func TestAggregateOfFederationSize(t *testing.T) {
	key, cert := testkeys.LendPair(t, "Test Federation", time.Now().Add(-time.Hour))
	idpKey, idpCert := testkeys.LendPair(t, "Fake SAML IdP", time.Now())
	idp, err := samlidp.New(samlidp.Options{BaseURL: "https://idp0.example.org/idp", Key: idpKey, Certificate: idpCert})
	if err != nil {
		t.Fatal(err)
	}
	md, err := samlidp.Decorate(idp.Metadata(), samlidp.Entity{DisplayNames: map[string]string{"en": "Org & Partners", "de": "Örg"},
		Categories: []string{"http://refeds.org/category/research-and-scholarship"}, RegistrationAuthority: "https://fed.example.org"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	entities := make([][]byte, n)
	for i := range entities {
		id := fmt.Sprintf("https://idp%d.example.org/idp", i)
		if i%2 == 0 {
			entities[i] = bytes.ReplaceAll(md, []byte(idp.EntityID()), []byte(id))
		} else {
			entities[i] = fmt.Appendf(nil, mdPrefixed, id, base64.StdEncoding.EncodeToString(idp.Certificate().Raw))
		}
	}
	for _, s := range []samlidp.SignOptions{{}, {SignatureMethod: "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256", Prefix: "dsig"}} {
		agg, err := samlidp.Aggregate(entities, samlidp.AggregateOptions{Signer: &samlidp.MetadataSigner{Key: key, Cert: cert, Sign: s},
			ValidUntil: time.Now().Add(96 * time.Hour), CacheDuration: time.Hour, Name: "urn:example:federation & co"})
		if err != nil {
			t.Fatal(err)
		}
		fm, err := samlsp.ParseFederationMetadata(agg, samlsp.FederationRules{Certificate: cert, Now: time.Now()})
		if err != nil {
			t.Fatalf("the kit's aggregate of %d entities does not verify: %v", n, err)
		}
		if fm.Entities != n || fm.IdPs != n || fm.Unusable != 0 {
			t.Fatalf("%+v", fm)
		}
		// Altered, it does not.
		if _, err := samlsp.ParseFederationMetadata(bytes.Replace(agg, []byte("idp7.example"), []byte("idp8.example"), 1),
			samlsp.FederationRules{Certificate: cert, Now: time.Now()}); err == nil {
			t.Fatal("an altered aggregate verifies")
		}
	}
}
