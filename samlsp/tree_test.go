package samlsp

import (
	"strings"
	"testing"

	"github.com/beevik/etree"
)

// Every check of a message's shape refuses an ID given to two elements,
// also where no other check would (the signatures and the one assertion
// are in order): the ID is what a signature's reference names, and a
// second element with it is what a wrapping attack needs.
func TestShapeChecksRefuseAnIDOnTwoElements(t *testing.T) {
	const (
		p = `xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion"`
	)
	cases := []struct {
		name  string
		doc   string
		check func(*etree.Element) error
	}{
		{"response", `<samlp:Response ` + p + ` ID="r"><saml:Assertion ID="a"><saml:Subject ID="x"/></saml:Assertion><samlp:Extensions ID="x"/></samlp:Response>`,
			func(el *etree.Element) error { _, err := checkShape(el); return err }},
		{"decrypted assertion", `<saml:Assertion ` + p + ` ID="a"><saml:Subject ID="x"/><saml:Conditions ID="x"/></saml:Assertion>`,
			checkDecrypted},
		{"logout message", `<samlp:LogoutRequest ` + p + ` ID="l"><saml:NameID ID="x"/><samlp:Extensions ID="x"/></samlp:LogoutRequest>`,
			checkLogoutShape},
		{"artifact response", `<samlp:ArtifactResponse ` + p + ` ID="ar"><samlp:Response ID="r"/><samlp:Extensions ID="r"/></samlp:ArtifactResponse>`,
			checkArtifactResponseShape},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, dup := range []bool{false, true} {
				doc := c.doc
				if !dup {
					// The same message with the IDs apart passes.
					doc = strings.Replace(doc, `ID="x"/>`, `ID="y"/>`, 1)
					doc = strings.Replace(doc, `<samlp:Extensions ID="r"/>`, `<samlp:Extensions ID="s"/>`, 1)
				}
				d := etree.NewDocument()
				if err := d.ReadFromString(doc); err != nil {
					t.Fatal(err)
				}
				err := c.check(d.Root())
				switch {
				case dup && (err == nil || !strings.Contains(err.Error(), "two elements with one ID")):
					t.Errorf("an ID on two elements: %v", err)
				case !dup && err != nil:
					t.Errorf("distinct IDs refused: %v", err)
				}
			}
		})
	}
}
