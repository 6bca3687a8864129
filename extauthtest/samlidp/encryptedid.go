package samlidp

import (
	"bytes"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/beevik/etree"
	"github.com/crewjam/saml"
	"github.com/crewjam/saml/xmlenc"
)

// encryptSubjectNameID replaces the NameID of assertion a's Subject with
// its EncryptedID for cert.
func encryptSubjectNameID(a *etree.Element, cert *x509.Certificate, e Encryption) error {
	for _, c := range a.ChildElements() {
		if c.Tag == "Subject" && c.NamespaceURI() == nsSAML {
			return EncryptNameID(c, cert, e)
		}
	}
	return errors.New("samlidp: the assertion has no Subject")
}

// EncryptNameID replaces the saml:NameID child of parent (a Subject, or a
// LogoutRequest the test sends as the IdP) with its saml:EncryptedID for
// cert, encrypted as e says by the IdP's own encryptor. Sign parent, or
// the message around it, afterwards.
func EncryptNameID(parent *etree.Element, cert *x509.Certificate, e Encryption) error {
	var n *etree.Element
	for _, c := range parent.ChildElements() {
		if c.Tag == "NameID" && c.NamespaceURI() == nsSAML {
			n = c
		}
	}
	if n == nil {
		return fmt.Errorf("samlidp: %s has no NameID to encrypt", parent.Tag)
	}
	enc, err := encryptNameID(n, cert, e)
	if err != nil {
		return err
	}
	at := n.Index()
	parent.RemoveChild(n)
	parent.InsertChildAt(at, enc)
	return nil
}

// serveSSO answers an AuthnRequest as crewjam's ServeSSO does, unless the
// knobs ask for what crewjam's IdP cannot send (Knobs.Encryption,
// EncryptNameID, UnsignedResponse): then the response is built by Forge
// from the assertion crewjam made, signed with idp's key, and encrypted to
// the certificate crewjam would have used (the SP's first encryption
// certificate, or Knobs.EncryptTo).
func (p *IdP) serveSSO(idp *saml.IdentityProvider, w http.ResponseWriter, r *http.Request) {
	k := p.knobsCopy()
	if k.Encryption == nil && !k.EncryptNameID && !k.UnsignedResponse {
		idp.ServeSSO(w, r)
		return
	}
	req, err := saml.NewIdpAuthnRequest(idp, r)
	if err == nil {
		err = req.Validate()
	}
	if err != nil {
		http.Error(w, "bad AuthnRequest: "+err.Error(), http.StatusBadRequest)
		return
	}
	session := idp.SessionProvider.GetSession(w, r, req)
	if session == nil {
		return
	}
	if err := idp.AssertionMaker.MakeAssertion(req, session); err != nil {
		http.Error(w, "cannot make the assertion", http.StatusInternalServerError)
		return
	}
	cert, err := spEncryptionCert(req.SPSSODescriptor)
	if err != nil {
		http.Error(w, "SP encryption certificate: "+err.Error(), http.StatusInternalServerError)
		return
	}
	nameIDCert := cert
	if k.NoEncrypt {
		// The assertion goes in clear; the NameID may still be encrypted,
		// to the certificate the SP registered.
		p.mu.Lock()
		registered := p.sps[req.ServiceProviderMetadata.EntityID]
		p.mu.Unlock()
		if registered != nil {
			for i := range registered.SPSSODescriptors {
				if nameIDCert, err = spEncryptionCert(&registered.SPSSODescriptors[i]); err != nil || nameIDCert != nil {
					break
				}
			}
		}
	}
	spec := Spec{
		ResponseID:     fmt.Sprintf("id-%x", randomID()),
		Destination:    req.ACSEndpoint.Location,
		InResponseTo:   req.Request.ID,
		ResponseIssuer: p.EntityID(),
		Status:         saml.StatusSuccess,
		IssueInstant:   req.Now,
		Assertion:      req.Assertion,
		SignAssertion:  true,
		SignResponse:   !k.UnsignedResponse,
		Key:            idp.Key.(*rsa.PrivateKey),
		Cert:           idp.Certificate,
	}
	if k.Encryption != nil {
		spec.Encryption = *k.Encryption
	}
	if cert != nil && k.Encryption != nil {
		spec.EncryptTo = cert
	} else if cert != nil {
		// AES-128-CBC, crewjam's choice before v0.6 and still
		// SimpleSAMLphp's, for the knobs that do not choose.
		spec.EncryptTo, spec.Encryption.Cipher = cert, AES128CBC
	}
	if k.EncryptNameID {
		if nameIDCert == nil {
			http.Error(w, "EncryptNameID: the SP publishes no encryption certificate", http.StatusInternalServerError)
			return
		}
		spec.EncryptNameIDTo = nameIDCert
	}
	out, err := p.Forge(spec)
	if err != nil {
		http.Error(w, "cannot build the response", http.StatusInternalServerError)
		return
	}
	p.deliver(w, r, req, out)
}

// spEncryptionCert returns the certificate crewjam's IdP encrypts to: the
// first of an encryption KeyDescriptor, else of one for both uses; nil
// when the SP publishes none.
func spEncryptionCert(d *saml.SPSSODescriptor) (*x509.Certificate, error) {
	if d == nil {
		return nil, nil
	}
	for _, use := range []string{"encryption", ""} {
		for _, kd := range d.KeyDescriptors {
			if kd.Use != use || len(kd.KeyInfo.X509Data.X509Certificates) == 0 {
				continue
			}
			der, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(kd.KeyInfo.X509Data.X509Certificates[0].Data), ""))
			if err != nil {
				return nil, err
			}
			return x509.ParseCertificate(der)
		}
	}
	return nil, nil
}

// decryptLogoutNameID returns request, a LogoutRequest, with its
// EncryptedID replaced by the NameID it holds, decrypted with key by
// crewjam's xmlenc (code that shares nothing with the SP's), and whether
// there was one to decrypt. The NameID keeps the namespace declarations
// it was encrypted with.
func decryptLogoutNameID(request []byte, key *rsa.PrivateKey) ([]byte, bool, error) {
	if !bytes.Contains(request, []byte("EncryptedID")) {
		return request, false, nil
	}
	root, err := Parse(request)
	if err != nil {
		return nil, false, err
	}
	var enc *etree.Element
	for _, c := range root.ChildElements() {
		if c.Tag == "EncryptedID" && c.NamespaceURI() == nsSAML {
			enc = c
		}
	}
	if enc == nil {
		return request, false, nil
	}
	data := enc.FindElement("./EncryptedData")
	if data == nil {
		return nil, true, errors.New("EncryptedID without EncryptedData")
	}
	plain, err := xmlenc.Decrypt(key, data)
	if err != nil {
		return nil, true, fmt.Errorf("EncryptedID: %w", err)
	}
	n, err := Parse(plain)
	if err != nil {
		return nil, true, fmt.Errorf("EncryptedID plaintext: %w", err)
	}
	if n.Tag != "NameID" || n.NamespaceURI() != nsSAML {
		return nil, true, fmt.Errorf("EncryptedID holds a %s, not a NameID", n.Tag)
	}
	at := enc.Index()
	root.RemoveChild(enc)
	root.InsertChildAt(at, n)
	out, err := Serialize(root)
	return out, true, err
}
