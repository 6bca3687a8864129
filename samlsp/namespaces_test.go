package samlsp

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"testing"

	"github.com/crewjam/saml"

	"github.com/extauth/extauth/extauthtest/samlidp"
)

// TestNamespaceScoping signs Ada in with responses that name their
// namespaces every legal way: every prefix rebound at every depth (inside
// signatures and EncryptedData too), only default namespaces redeclared
// wherever they change, and both at once with decoy bindings. Each is
// signed on the response, on the assertion, on both, and encrypted.
func TestNamespaceScoping(t *testing.T) {
	f := newFixture(t, withKeyPair)
	_, spCert := testKey(t, 1)
	md := f.sp.md.current()
	acs, _ := url.Parse(testACS)
	crew := &saml.ServiceProvider{EntityID: testEntityID, AcsURL: *acs, IDPMetadata: md.entity, Key: f.sp.key, Certificate: f.sp.cert}
	shapes := []struct {
		name string
		mod  func(*samlidp.Spec)
	}{
		{"signed response", func(s *samlidp.Spec) { s.SignResponse, s.SignAssertion = true, false }},
		{"signed assertion", func(s *samlidp.Spec) {}},
		{"both signed", func(s *samlidp.Spec) { s.SignResponse = true }},
		{"encrypted, assertion signed", func(s *samlidp.Spec) { s.EncryptTo = spCert }},
		{"encrypted, both signed", func(s *samlidp.Spec) { s.EncryptTo, s.SignResponse = spCert, true }},
		{"encrypted, key beside the data", func(s *samlidp.Spec) {
			s.EncryptTo, s.Encryption = spCert, samlidp.Encryption{Key: samlidp.KeyRetrievalMethod, Cipher: samlidp.AES256GCM}
		}},
		{"encrypted, plaintext relying on the response's declarations", func(s *samlidp.Spec) {
			s.EncryptTo, s.Encryption = spCert, samlidp.Encryption{RelyOnContext: true}
		}},
	}
	for _, style := range []samlidp.NamespaceStyle{samlidp.NSUsual, samlidp.NSRebound, samlidp.NSDefault, samlidp.NSMixed} {
		for _, shape := range shapes {
			t.Run(fmt.Sprintf("%s/%s", style, shape.name), func(t *testing.T) {
				tx, _ := f.begin(f.sp)
				s := f.idp.DefaultSpec(testEntityID, testACS, tx.RequestID)
				s.Namespaces = style
				shape.mod(&s)
				xml, err := f.idp.Forge(s)
				if err != nil {
					t.Fatal(err)
				}
				checkStyle(t, style, xml)
				id, err := post(f.sp, tx, responseForm(xml, tx.Binding))
				if err != nil {
					t.Fatalf("refused: %v\n%s", err, xml)
				}
				if id.UID != "ada@example.org" || id.Email != "ada@example.org" {
					t.Fatalf("identity %+v", id)
				}
				// crewjam reads them too, since v0.6 (v0.5.1's elementToBytes
				// let the last binding of a prefix win, and it could not read
				// the rebound encrypted rows), except a plaintext whose
				// prefixes only the Response declares: crewjam parses the
				// plaintext on its own, out of their scope.
				_, err = crew.ParseXMLResponse(xml, []string{tx.RequestID}, *acs)
				outOfScope := style == samlidp.NSUsual && s.Encryption.RelyOnContext
				var ire *saml.InvalidResponseError
				if errors.As(err, &ire) {
					err = ire.PrivateErr
				}
				if outOfScope != (err != nil) {
					t.Errorf("crewjam: %v; want it to refuse only a plaintext relying on the Response's declarations", err)
				}
			})
		}
	}
}

// checkStyle makes sure the forger did style the response: a table of
// responses that all look alike would prove nothing.
func checkStyle(t *testing.T, style samlidp.NamespaceStyle, xml []byte) {
	t.Helper()
	switch style {
	case samlidp.NSRebound:
		// ns0 and ns1 each bound to two namespaces or more somewhere.
		for _, p := range []string{"ns0", "ns1"} {
			uris := map[string]bool{}
			for _, m := range regexp.MustCompile(`xmlns:`+p+`="([^"]*)"`).FindAllSubmatch(xml, -1) {
				uris[string(m[1])] = true
			}
			if len(uris) < 2 {
				t.Fatalf("%s bound to %d namespaces:\n%s", p, len(uris), xml)
			}
		}
	case samlidp.NSDefault:
		if bytes.Contains(xml, []byte("<saml")) || bytes.Contains(xml, []byte("<ds:")) ||
			bytes.Count(xml, []byte(`xmlns="`)) < 3 {
			t.Fatalf("not default namespaces only:\n%s", xml)
		}
	case samlidp.NSMixed:
		if !bytes.Contains(xml, []byte("urn:decoy:")) || !bytes.Contains(xml, []byte("<ns0:")) {
			t.Fatalf("no decoys or no ns0:\n%s", xml)
		}
	}
}

// TestNamespaceTraps: a prefix or default namespace bound elsewhere makes
// an element something else, and the SP must see that, even where the
// spelling is right.
func TestNamespaceTraps(t *testing.T) {
	f := newFixture(t)
	for name, tc := range map[string]struct {
		style samlidp.NamespaceStyle
		mod   func(*samlidp.Spec)
		edit  func([]byte) []byte
	}{
		// The assertion, spelled saml:Assertion, in a namespace that is
		// not SAML's: there is no assertion.
		"saml prefix rebound on the assertion": {samlidp.NSUsual, func(*samlidp.Spec) {},
			func(x []byte) []byte {
				return bytes.Replace(x, []byte(`<saml:Assertion xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion"`),
					[]byte(`<saml:Assertion xmlns:saml="urn:example:not-saml"`), 1)
			}},
		// Status, spelled right, put in the assertion namespace by a default
		// namespace declaration: the (unsigned) response has no Status.
		"default namespace moves Status": {samlidp.NSDefault, func(*samlidp.Spec) {},
			func(x []byte) []byte {
				return bytes.Replace(x, []byte(`<Status>`), []byte(`<Status xmlns="urn:oasis:names:tc:SAML:2.0:assertion">`), 1)
			}},
		"undeclared prefix": {samlidp.NSUsual, func(*samlidp.Spec) {},
			func(x []byte) []byte {
				return bytes.Replace(bytes.Replace(x, []byte("<saml:Issuer"), []byte("<nope:Issuer"), 1),
					[]byte("</saml:Issuer>"), []byte("</nope:Issuer>"), 1)
			}},
		"prefix undeclared with an empty binding": {samlidp.NSUsual, func(*samlidp.Spec) {},
			func(x []byte) []byte {
				return bytes.Replace(x, []byte(`<saml:Issuer`), []byte(`<saml:Issuer xmlns:saml=""`), 1)
			}},
		"one attribute under two prefixes of one namespace": {samlidp.NSUsual, func(*samlidp.Spec) {},
			func(x []byte) []byte {
				return bytes.Replace(x, []byte(`<samlp:Response `), []byte(`<samlp:Response xmlns:a="urn:x" xmlns:b="urn:x" a:z="1" b:z="2" `), 1)
			}},
		// Go's decoder takes ":Assertion" for a local name with a colon;
		// other parsers see the prefix "" or refuse it.
		"a name with an empty prefix": {samlidp.NSUsual, func(*samlidp.Spec) {},
			func(x []byte) []byte {
				return bytes.Replace(x, []byte("</samlp:Response>"), []byte("<:Assertion/></samlp:Response>"), 1)
			}},
		// Found by FuzzResponse: Go's decoder reads it, its encoder (and
		// every other parser) refuses it.
		"a name starting with a digit": {samlidp.NSUsual, func(*samlidp.Spec) {},
			func(x []byte) []byte {
				return bytes.Replace(x, []byte("</samlp:Response>"), []byte("<samlp:0Assertion/></samlp:Response>"), 1)
			}},
		"an attribute with an empty prefix": {samlidp.NSUsual, func(*samlidp.Spec) {},
			func(x []byte) []byte {
				return bytes.Replace(x, []byte(`<samlp:Response `), []byte(`<samlp:Response :Destination="x" `), 1)
			}},
	} {
		t.Run(name, func(t *testing.T) {
			tx, _ := f.begin(f.sp)
			s := f.idp.DefaultSpec(testEntityID, testACS, tx.RequestID)
			s.Namespaces = tc.style
			tc.mod(&s)
			xml, err := f.idp.Forge(s)
			if err != nil {
				t.Fatal(err)
			}
			bad := tc.edit(xml)
			if bytes.Equal(bad, xml) {
				t.Fatalf("the edit did not apply:\n%s", xml)
			}
			_, err = post(f.sp, tx, responseForm(bad, tx.Binding))
			t.Logf("refused: %v", err)
			if err == nil {
				t.Fatal("accepted")
			}
		})
	}
}
