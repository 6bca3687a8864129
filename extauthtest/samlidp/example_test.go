package samlidp_test

import (
	"encoding/pem"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/crewjam/saml"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/samlidp"
)

// An IdP-initiated LogoutRequest that names the user by an EncryptedID,
// encrypted to the SP's certificate with AES-128-GCM. A test then sends it
// with IdP.RedirectMessage, which signs it.
func ExampleEncryptNameID() {
	_, spCert, err := samlidp.NewKeyPair("the SP", time.Now())
	if err != nil {
		panic(err)
	}
	lr := (&saml.LogoutRequest{ID: "id-1", Version: "2.0", IssueInstant: time.Now(),
		Issuer: &saml.Issuer{Value: "https://idp.example/metadata"},
		NameID: &saml.NameID{Value: "ada@example.org"}}).Element()
	if err := samlidp.EncryptNameID(lr, spCert, samlidp.Encryption{Cipher: samlidp.AES128GCM}); err != nil {
		panic(err)
	}
	for _, c := range lr.ChildElements() {
		fmt.Println(c.Tag)
	}
	// Output:
	// Issuer
	// EncryptedID
}

// A test federation of the kit's IdPs, as real federations publish one: each
// IdP's metadata with the names a discovery page shows, in one aggregate
// signed with the federation's key, which the application pins. Served
// beside the IdPs (each fetching the application's SP metadata when it
// first signs in), it is what the application's configuration names.
func ExampleAggregate() {
	fedKey, fedCert, err := samlidp.NewKeyPair("Test Federation", time.Now())
	if err != nil {
		log.Fatal(err)
	}
	const app = "http://127.0.0.1:3000" // the application under test
	var entities [][]byte
	for _, name := range []string{"University of Aa", "Bee College", "Sea Institute"} {
		mux := http.NewServeMux()
		srv := httptest.NewServer(mux)
		defer srv.Close()
		idp, err := samlidp.New(samlidp.Options{BaseURL: srv.URL + "/idp", AutoApprove: true,
			SPMetadataURL: app + "/users/auth/saml/metadata"})
		if err != nil {
			log.Fatal(err)
		}
		mux.Handle("/idp/", idp)
		md, err := samlidp.Decorate(idp.Metadata(), samlidp.Entity{DisplayNames: map[string]string{"en": name}})
		if err != nil {
			log.Fatal(err)
		}
		entities = append(entities, md)
	}
	aggregate, err := samlidp.Aggregate(entities, samlidp.AggregateOptions{
		Signer:     &samlidp.MetadataSigner{Key: fedKey, Cert: fedCert},
		ValidUntil: time.Now().Add(7 * 24 * time.Hour),
	})
	if err != nil {
		log.Fatal(err)
	}
	fed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/samlmetadata+xml")
		w.Write(aggregate)
	}))
	defer fed.Close()
	cfg := &extauth.Config{SAML: extauth.SAMLConfig{
		SPEntityID: app + "/saml",
		Additional: extauth.SAMLAdditionalSettings{Federation: extauth.SAMLFederation{
			MetadataURL:        fed.URL,
			SigningCertificate: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: fedCert.Raw})),
		}},
	}}
	fmt.Println(len(entities), "IdPs,", cfg.SAML.Additional.Federation.MetadataURL != "")
	// Output: 3 IdPs, true
}
