package samlidp_test

import (
	"fmt"
	"time"

	"github.com/crewjam/saml"

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
