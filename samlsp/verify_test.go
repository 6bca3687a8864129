package samlsp

import (
	"bytes"
	"crypto/x509"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/beevik/etree"
	dsig "github.com/russellhaering/goxmldsig"

	"github.com/extauth/extauth/extauthtest/samlidp"
)

// verifyExclusive is goxmldsig's Validate without its search for the
// signature: on every response here, signed in each namespace style, with
// a signature in the default namespace, tampered with in each part, with
// the wrong key and with a certificate out of its dates, it accepts what
// Validate accepts, returns the same tree, and refuses what it refuses.
func TestVerifyExclusiveAgreesWithGoxmldsig(t *testing.T) {
	f := newFixture(t)
	idpCerts := f.sp.md.current().certs
	_, otherCert := testKey(t, 2)
	type response struct {
		name string
		xml  []byte
	}
	var responses []response
	for _, style := range []samlidp.NamespaceStyle{samlidp.NSUsual, samlidp.NSRebound, samlidp.NSDefault, samlidp.NSMixed} {
		for _, def := range []bool{false, true} {
			s := f.idp.DefaultSpec(testEntityID, testACS, "id-request")
			s.SignResponse, s.Namespaces, s.Sign.Default = true, style, def
			x, err := f.idp.Forge(s)
			if err != nil {
				t.Fatal(err)
			}
			responses = append(responses, response{fmt.Sprintf("style %d default %v", style, def), x})
		}
	}
	good := responses[0].xml
	tamper := func(name, old, new string) {
		if !bytes.Contains(good, []byte(old)) {
			t.Fatalf("%s: the response has no %q", name, old)
		}
		responses = append(responses, response{name, bytes.Replace(good, []byte(old), []byte(new), 1)})
	}
	tamper("a signed attribute changed", `Destination="`, `Destination="x`)
	tamper("the digest changed", `DigestValue>`, `DigestValue>AAAA`)
	tamper("the signature changed", `SignatureValue>`, `SignatureValue>AAAA`)
	tamper("the algorithm changed", `xml-exc-c14n#"`, `xml-exc-c14n#WithComments"`)

	now := time.Now()
	verifiers := []struct {
		name string
		v    *verifier
	}{
		{"the IdP's certificate", &verifier{certs: idpCerts, now: func() time.Time { return now }}},
		{"another certificate", &verifier{certs: []*x509.Certificate{otherCert}, now: func() time.Time { return now }}},
		{"out of its dates", &verifier{certs: idpCerts, now: func() time.Time { return now.AddDate(30, 0, 0) }}},
		{"out of its dates, keys only", &verifier{certs: idpCerts, now: func() time.Time { return now.AddDate(30, 0, 0) }, keysOnly: true}},
		{"a rotation, the IdP's second", &verifier{certs: append([]*x509.Certificate{otherCert}, idpCerts...), now: func() time.Time { return now }}},
	}
	accepted, refused := 0, 0
	for _, r := range responses {
		for _, vv := range verifiers {
			// Each path gets the response as verify prepares it, and for
			// the assertion, the tree its Response's signature returned.
			prepare := func() (*etree.Element, *etree.Element) {
				el, err := parseXML(r.xml)
				if err != nil {
					t.Fatal(err)
				}
				sig, err := vv.v.signatureOf(el)
				if err != nil {
					t.Fatalf("%s: %v", r.name, err)
				}
				if ki, _ := onlyChild(sig, nsDSig, "KeyInfo"); ki != nil {
					sig.RemoveChild(ki)
				}
				declareInScope(el)
				return el, sig
			}
			el, sig := prepare()
			fast, fastErr, ok := vv.v.verifyExclusive(el, sig, vv.v.certs)
			if !ok {
				t.Fatalf("%s, %s: verifyExclusive left an exclusive-c14n signature to goxmldsig", r.name, vv.name)
			}
			el, _ = prepare()
			var slow *etree.Element
			var slowErr error
			for _, cert := range vv.v.certs {
				vc := dsig.NewDefaultValidationContext(&dsig.MemoryX509CertificateStore{Roots: []*x509.Certificate{cert}})
				vc.IdAttribute = "ID"
				vc.Clock = dsig.NewFakeClockAt(vv.v.now())
				if vv.v.keysOnly {
					vc.Clock = dsig.NewFakeClockAt(cert.NotBefore)
				}
				if slow, slowErr = vc.Validate(el); slowErr == nil {
					break
				}
			}
			if (fastErr == nil) != (slowErr == nil) {
				t.Errorf("%s, %s: verifyExclusive says %v, goxmldsig %v", r.name, vv.name, fastErr, slowErr)
				continue
			}
			if fastErr != nil {
				refused++
				continue
			}
			accepted++
			if a, b := serialize(t, fast), serialize(t, slow); a != b {
				t.Errorf("%s, %s: the verified trees differ:\n%s\n%s", r.name, vv.name, a, b)
				continue
			}
			// The assertion, in the tree each path returned.
			var trees [2]string
			for i, tree := range []*etree.Element{fast, slow} {
				a, err := oneChild(tree, nsAssertion, "Assertion")
				if err != nil {
					t.Fatalf("%s: %v", r.name, err)
				}
				sig, err := vv.v.signatureOf(a)
				if err != nil {
					t.Fatalf("%s: assertion: %v", r.name, err)
				}
				if ki, _ := onlyChild(sig, nsDSig, "KeyInfo"); ki != nil {
					sig.RemoveChild(ki)
				}
				declareInScope(a)
				var out *etree.Element
				if i == 0 {
					var ok bool
					out, err, ok = vv.v.verifyExclusive(a, sig, vv.v.certs)
					if !ok {
						t.Fatalf("%s: the assertion's signature left to goxmldsig", r.name)
					}
				} else {
					vc := dsig.NewDefaultValidationContext(&dsig.MemoryX509CertificateStore{Roots: vv.v.certs[len(vv.v.certs)-1:]})
					vc.IdAttribute = "ID"
					vc.Clock = dsig.NewFakeClockAt(vv.v.now())
					if vv.v.keysOnly {
						vc.Clock = dsig.NewFakeClockAt(vv.v.certs[0].NotBefore)
					}
					out, err = vc.Validate(a)
				}
				if err != nil {
					t.Fatalf("%s, %s: the assertion (path %d): %v", r.name, vv.name, i, err)
				}
				trees[i] = serialize(t, out)
			}
			if trees[0] != trees[1] {
				t.Errorf("%s, %s: the verified assertions differ:\n%s\n%s", r.name, vv.name, trees[0], trees[1])
			}
		}
	}
	if accepted == 0 || refused == 0 {
		t.Fatalf("accepted %d, refused %d: the cases do not tell the paths apart", accepted, refused)
	}
}

// An inclusive canonicalization goes to goxmldsig.
func TestVerifyExclusiveLeavesInclusiveToGoxmldsig(t *testing.T) {
	f := newFixture(t)
	s := f.idp.DefaultSpec(testEntityID, testACS, "id-request")
	s.SignResponse = true
	x, err := f.idp.Forge(s)
	if err != nil {
		t.Fatal(err)
	}
	x = bytes.ReplaceAll(x, []byte(`http://www.w3.org/2001/10/xml-exc-c14n#"`), []byte(`http://www.w3.org/TR/2001/REC-xml-c14n-20010315"`))
	el, err := parseXML(x)
	if err != nil {
		t.Fatal(err)
	}
	v := &verifier{certs: f.sp.md.current().certs, now: time.Now}
	sig, err := v.signatureOf(el)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := v.verifyExclusive(el, sig, v.certs); ok {
		t.Fatal("verifyExclusive took an inclusive canonicalization")
	}
	// And verify refuses it through goxmldsig: the signature was made
	// over the exclusive form.
	if _, err := v.verify(el); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Fatalf("verify: %v", err)
	}
}

func serialize(t *testing.T, el *etree.Element) string {
	t.Helper()
	doc := etree.NewDocument()
	doc.SetRoot(el.Copy())
	s, err := doc.WriteToString()
	if err != nil {
		t.Fatal(err)
	}
	return s
}
