package samlsp

import (
	"bytes"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/beevik/etree"
	"github.com/crewjam/saml"
	"github.com/crewjam/saml/xmlenc"

	"github.com/extauth/extauth/extauthtest/samlidp"
	"github.com/extauth/extauth/providers"
)

// TestEncryptedIDTable: a Subject's EncryptedID, encrypted by the fake
// IdP's own encryptor every way it can, in a plain or an encrypted
// assertion, signs Ada in with her NameID and its Format.
func TestEncryptedIDTable(t *testing.T) {
	f := newFixture(t, withKeyPair)
	_, spCert := testKey(t, 1)
	for _, c := range []string{samlidp.TripleDESCBC, samlidp.AES128CBC, samlidp.AES256CBC, samlidp.AES128GCM, samlidp.AES256GCM} {
		for _, kp := range []samlidp.KeyPlacement{samlidp.KeyInline, samlidp.KeyRetrievalMethod, samlidp.KeyCarriedName, samlidp.KeySibling} {
			for _, encryptedAssertion := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/encrypted assertion=%v", c[strings.LastIndex(c, "#")+1:], kp, encryptedAssertion), func(t *testing.T) {
					tx, _ := f.begin(f.sp)
					s := f.idp.DefaultSpec(testEntityID, testACS, tx.RequestID)
					s.EncryptNameIDTo, s.Encryption = spCert, samlidp.Encryption{Cipher: c, Key: kp}
					if encryptedAssertion {
						s.EncryptTo = spCert
					}
					xml, err := f.idp.Forge(s)
					if err != nil {
						t.Fatal(err)
					}
					if !encryptedAssertion && (!bytes.Contains(xml, []byte("EncryptedID")) || bytes.Contains(xml, []byte(">ada@example.org</saml:NameID>"))) {
						t.Fatalf("the forger did not encrypt the NameID:\n%s", xml)
					}
					id, err := post(f.sp, tx, responseForm(xml, tx.Binding))
					if err != nil {
						t.Fatalf("refused: %v", err)
					}
					if id.UID != "ada@example.org" || id.SAML.NameID != "ada@example.org" || id.SAML.NameIDFormat != NameIDEmail {
						t.Fatalf("identity %+v %+v", id, id.SAML)
					}
				})
			}
		}
	}
}

// TestEncryptedIDRefusals: an EncryptedID the SP cannot or must not read
// is refused, with a reason.
func TestEncryptedIDRefusals(t *testing.T) {
	_, spCert := testKey(t, 1)
	_, otherCert := testKey(t, 2)
	cases := []struct {
		name string
		mods []fixtureOption
		to   func(*samlidp.Spec)
		want string
	}{
		{"no SP key", nil, func(s *samlidp.Spec) { s.EncryptNameIDTo = spCert }, "no SP private key"},
		{"another SP's key", []fixtureOption{withKeyPair}, func(s *samlidp.Spec) { s.EncryptNameIDTo = otherCert }, "EncryptedID could not be decrypted"},
		{"CBC refused", []fixtureOption{withKeyPair, withConfig(func(c *Config) { c.RefuseCBCEncryption = true })},
			func(s *samlidp.Spec) { s.EncryptNameIDTo = spCert }, "refuse_cbc_encryption"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.mods...)
			tx, _ := f.begin(f.sp)
			s := f.idp.DefaultSpec(testEntityID, testACS, tx.RequestID)
			tc.to(&s)
			xml, err := f.idp.Forge(s)
			if err != nil {
				t.Fatal(err)
			}
			_, err = post(f.sp, tx, responseForm(xml, tx.Binding))
			if code(err) != providers.CodeInvalidResponse || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want invalid_response with %q", err, tc.want)
			}
		})
	}
}

// TestDecryptNameIDChecksTheElement: an EncryptedID must hold a NameID and
// nothing else.
func TestDecryptNameIDChecksTheElement(t *testing.T) {
	key, cert := testKey(t, 1)
	d := &decrypter{keys: []*rsa.PrivateKey{key}}
	for _, tc := range []struct {
		plain string
		want  string
	}{
		{`<saml:NameID Format="f">ada</saml:NameID>`, ""},
		{`<saml:Issuer>ada</saml:Issuer>`, "not a NameID"},
		{`<saml:NameID><saml:NameID>ada</saml:NameID></saml:NameID>`, "child elements"},
	} {
		doc := etree.NewDocument()
		if err := doc.ReadFromString(`<saml:Subject xmlns:saml="` + nsAssertion + `">` + tc.plain + `</saml:Subject>`); err != nil {
			t.Fatal(err)
		}
		enc, err := encryptNameID(doc.Root().ChildElements()[0], &idpEncryption{cert: cert, cipher: encAES128GCM})
		if err != nil {
			t.Fatal(err)
		}
		el, err := d.decryptNameID(enc, true)
		switch {
		case tc.want == "" && (err != nil || text(el) != "ada" || attr(el, "Format") != "f"):
			t.Errorf("%s: %v", tc.plain, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: err = %v, want %q", tc.plain, err, tc.want)
		}
	}
}

// TestDecryptionWithSeveralKeys: during a key rotation the decrypter holds
// two SP keys, the current one first, and opens what was encrypted to
// either, whatever the key transport: the key its EncryptedKey names by
// certificate, or each in turn when it names none (with rsa-1_5, whose
// wrong key gives a random content key, not an error).
func TestDecryptionWithSeveralKeys(t *testing.T) {
	k1, c1 := testKey(t, 1)
	k2, c2 := testKey(t, 2)
	f := newFixture(t)
	for _, tc := range []struct {
		name      string
		to        *x509.Certificate
		e         samlidp.Encryption
		noKeyInfo bool
	}{
		{"current key, OAEP, CBC", c1, samlidp.Encryption{Cipher: samlidp.AES256CBC}, false},
		{"next key, OAEP, CBC", c2, samlidp.Encryption{Cipher: samlidp.AES256CBC}, false},
		{"next key, OAEP, CBC, unnamed", c2, samlidp.Encryption{Cipher: samlidp.AES256CBC}, true},
		{"next key, OAEP, GCM", c2, samlidp.Encryption{Cipher: samlidp.AES128GCM}, false},
		{"next key, rsa-1_5, GCM, unnamed", c2, samlidp.Encryption{Cipher: samlidp.AES128GCM, KeyTransport: samlidp.RSA15}, true},
		{"next key, rsa-1_5, CBC, unnamed", c2, samlidp.Encryption{Cipher: samlidp.AES128CBC, KeyTransport: samlidp.RSA15}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := f.idp.DefaultSpec(testEntityID, testACS, "id-x")
			s.EncryptTo, s.Encryption = tc.to, tc.e
			xml, err := f.idp.Forge(s)
			if err != nil {
				t.Fatal(err)
			}
			root, err := parseXML(xml)
			if err != nil {
				t.Fatal(err)
			}
			enc, _ := onlyChild(root, nsAssertion, "EncryptedAssertion")
			if tc.noKeyInfo {
				walk(enc, func(el *etree.Element) bool {
					if is(el, nsXMLEnc, "EncryptedKey") {
						if ki, _ := onlyChild(el, nsDSig, "KeyInfo"); ki != nil {
							el.RemoveChild(ki)
						}
					}
					return true
				})
			}
			for _, authenticated := range []bool{false, true} {
				d := &decrypter{keys: []*rsa.PrivateKey{k1, k2}, allow15: true}
				a, err := d.decryptAssertion(enc.Copy(), DefaultMaxDecryptedBytes, authenticated)
				if err != nil || !is(a, nsAssertion, "Assertion") {
					t.Fatalf("authenticated=%v: %v", authenticated, err)
				}
			}
		})
	}
}

// TestMaxDecryptedBytes: the ciphertext is bounded by what the plaintext
// may be, checked before any RSA operation.
func TestMaxDecryptedBytes(t *testing.T) {
	_, spCert := testKey(t, 1)
	for _, tc := range []struct {
		max  int64
		want bool
	}{{0, true}, {4 << 10, false}} {
		t.Run(fmt.Sprintf("MaxDecryptedBytes=%d", tc.max), func(t *testing.T) {
			f := newFixture(t, withKeyPair, withOptions(func(o *Options) { o.MaxDecryptedBytes = tc.max }))
			for _, c := range []string{samlidp.AES128CBC, samlidp.AES128GCM} {
				tx, _ := f.begin(f.sp)
				s := f.idp.DefaultSpec(testEntityID, testACS, tx.RequestID)
				s.EncryptTo, s.Encryption = spCert, samlidp.Encryption{Cipher: c}
				st := &s.Assertion.AttributeStatements[0]
				st.Attributes = append(st.Attributes, saml.Attribute{Name: "filler", Values: []saml.AttributeValue{{Type: "xs:string", Value: strings.Repeat("x", 5000)}}})
				xml, err := f.idp.Forge(s)
				if err != nil {
					t.Fatal(err)
				}
				_, err = post(f.sp, tx, responseForm(xml, tx.Binding))
				if tc.want != (err == nil) || (err != nil && !errors.Is(err, errTooLarge)) {
					t.Fatalf("%s: err = %v", c, err)
				}
			}
		})
	}
}

// TestEncryptNameIDForTheIdP: what we encrypt for the IdP (with crewjam's
// xmlenc) reads back with crewjam's xmlenc and with our own decrypter,
// code that shares nothing with crewjam's, for every cipher we choose.
func TestEncryptNameIDForTheIdP(t *testing.T) {
	key, cert := testKey(t, 1)
	for _, c := range sendCiphers {
		t.Run(c[strings.LastIndex(c, "#")+1:], func(t *testing.T) {
			req := (&saml.LogoutRequest{ID: "id-1", Version: "2.0", NameID: &saml.NameID{Value: "ada@example.org", Format: NameIDEmail,
				NameQualifier: "https://idp.example", SPNameQualifier: "https://sp.example"}}).Element()
			doc := etree.NewDocument()
			doc.SetRoot(req)
			b, _ := doc.WriteToBytes()
			root, err := parseXML(b)
			if err != nil {
				t.Fatal(err)
			}
			n, _ := onlyChild(root, nsAssertion, "NameID")
			enc, err := encryptNameID(n, &idpEncryption{cert: cert, cipher: c})
			if err != nil {
				t.Fatal(err)
			}
			// Serialized and read back as the IdP receives it.
			doc = etree.NewDocument()
			doc.SetRoot(enc)
			wire, _ := doc.WriteToString()
			if strings.Contains(wire, "ada@example.org") || !strings.Contains(wire, c) {
				t.Fatalf("not encrypted as asked: %s", wire)
			}
			plain, err := xmlenc.Decrypt(key, enc.FindElement("./EncryptedData"))
			if err != nil {
				t.Fatalf("crewjam's xmlenc: %v\n%s", err, wire)
			}
			for _, want := range []string{"ada@example.org", `Format="` + NameIDEmail + `"`, `NameQualifier="https://idp.example"`, `xmlns:saml="` + nsAssertion + `"`} {
				if !bytes.Contains(plain, []byte(want)) {
					t.Fatalf("crewjam read %s, without %s", plain, want)
				}
			}
			parsed, err := parseXML([]byte(wire))
			if err != nil {
				t.Fatal(err)
			}
			el, err := (&decrypter{keys: []*rsa.PrivateKey{key}}).decryptNameID(parsed, true)
			if err != nil || text(el) != "ada@example.org" || attr(el, "SPNameQualifier") != "https://sp.example" {
				t.Fatalf("our decrypter: %v", err)
			}
		})
	}
}

// TestIdPEncryptionChoice: the certificate and cipher the IdP's metadata
// gives for what we encrypt to it.
func TestIdPEncryptionChoice(t *testing.T) {
	_, signCert := testKey(t, 0)
	_, encCert := testKey(t, 1)
	b64 := func(raw []byte) string { return base64.StdEncoding.EncodeToString(raw) }
	desc := func(kds ...saml.KeyDescriptor) *saml.EntityDescriptor {
		return &saml.EntityDescriptor{IDPSSODescriptors: []saml.IDPSSODescriptor{{SSODescriptor: saml.SSODescriptor{
			RoleDescriptor: saml.RoleDescriptor{KeyDescriptors: kds}}}}}
	}
	key := func(use string, raw []byte, methods ...string) saml.KeyDescriptor {
		k := saml.KeyDescriptor{Use: use, KeyInfo: saml.KeyInfo{X509Data: saml.X509Data{X509Certificates: []saml.X509Certificate{{Data: b64(raw)}}}}}
		for _, m := range methods {
			k.EncryptionMethods = append(k.EncryptionMethods, saml.EncryptionMethod{Algorithm: m})
		}
		return k
	}
	for _, tc := range []struct {
		name       string
		ed         *saml.EntityDescriptor
		cert       []byte
		cipher     string
		wantErrSub string
	}{
		{"encryption key, no methods", desc(key("signing", signCert.Raw), key("encryption", encCert.Raw)), encCert.Raw, encAES128GCM, ""},
		{"one key for both uses", desc(key("", encCert.Raw)), encCert.Raw, encAES128GCM, ""},
		{"encryption key preferred to both", desc(key("", signCert.Raw), key("encryption", encCert.Raw)), encCert.Raw, encAES128GCM, ""},
		{"GCM preferred", desc(key("encryption", encCert.Raw, encAES256CBC, encAES256GCM, ktRSAOAEPMGF1P)), encCert.Raw, encAES256GCM, ""},
		{"CBC only", desc(key("encryption", encCert.Raw, encAES128CBC)), encCert.Raw, encAES128CBC, ""},
		{"3DES only", desc(key("encryption", encCert.Raw, encTripleDESCBC)), nil, "", "no block cipher"},
		{"rsa-1_5 only", desc(key("encryption", encCert.Raw, ktRSA15)), nil, "", "rsa-oaep-mgf1p"},
		{"signing key only", desc(key("signing", signCert.Raw)), nil, "", "no encryption certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := idpEncryptionOf(tc.ed)
			if tc.wantErrSub != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrSub) {
					t.Fatalf("err = %v, want %q", err, tc.wantErrSub)
				}
				return
			}
			if err != nil || !bytes.Equal(e.cert.Raw, tc.cert) || e.cipher != tc.cipher {
				t.Fatalf("got %+v, %v", e, err)
			}
		})
	}
}
