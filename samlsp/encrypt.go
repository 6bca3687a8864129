package samlsp

import (
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/beevik/etree"
	"github.com/crewjam/saml"
	"github.com/crewjam/saml/xmlenc"

	"github.com/extauth/extauth/providers"
)

// Encryption of what we send to the IdP: the NameID of our LogoutRequests,
// by crewjam's xmlenc (whose AES-GCM works since v0.6; v0.5.1 sealed zeros
// under a nil nonce), with our choice of cipher, checked against our own
// decrypter and xmlsec1.

// The block ciphers we encrypt with, in order of preference: AES-GCM, then,
// for an IdP that lists nothing else, AES-CBC (its padding oracle is the
// IdP's to guard against). AES-128-GCM when the IdP lists none: every XML
// Encryption 1.1 implementation reads it, and it is Shibboleth's first
// choice too.
var sendCiphers = []string{encAES128GCM, encAES256GCM, encAES192GCM, encAES256CBC, encAES128CBC, encAES192CBC}

// sendBlockCiphers are sendCiphers as xmlenc has them.
var sendBlockCiphers = map[string]xmlenc.BlockCipher{
	encAES128GCM: xmlenc.AES128GCM, encAES256GCM: xmlenc.AES256GCM, encAES192GCM: xmlenc.AES192GCM,
	encAES256CBC: xmlenc.AES256CBC, encAES128CBC: xmlenc.AES128CBC, encAES192CBC: xmlenc.AES192CBC,
}

// idpEncryption is what the IdP's metadata says about encrypting to it.
type idpEncryption struct {
	cert   *x509.Certificate
	cipher string
}

// errNoIdPEncryptionKey is the cause when the IdP's metadata publishes no
// certificate to encrypt to.
var errNoIdPEncryptionKey = errors.New("the IdP metadata publishes no encryption certificate (KeyDescriptor use=\"encryption\" or without use)")

// idpEncryptionOf returns the IdP's encryption certificate (the first of a
// KeyDescriptor use="encryption", else of one without use, which serves
// both) and the block cipher to use with it: the first of sendCiphers that
// the KeyDescriptor's EncryptionMethods list, or AES-128-GCM when they list
// no block cipher. The key is always wrapped with RSA-OAEP (rsa-oaep-mgf1p,
// SHA-1 digest and mask, the form every implementation reads); an IdP that
// lists key transports without it is refused.
func idpEncryptionOf(ed *saml.EntityDescriptor) (*idpEncryption, error) {
	if ed == nil {
		return nil, errNoIdPEncryptionKey
	}
	for _, use := range []string{"encryption", ""} {
		for _, d := range ed.IDPSSODescriptors {
			for _, kd := range d.KeyDescriptors {
				if kd.Use != use || len(kd.KeyInfo.X509Data.X509Certificates) == 0 {
					continue
				}
				cert, err := parseBase64Cert(kd.KeyInfo.X509Data.X509Certificates[0].Data)
				if err != nil {
					return nil, fmt.Errorf("the IdP encryption certificate does not parse: %w", err)
				}
				if _, ok := cert.PublicKey.(*rsa.PublicKey); !ok {
					return nil, errors.New("the IdP encryption certificate is not RSA")
				}
				listed := map[string]bool{}
				var blocks, transports int
				for _, m := range kd.EncryptionMethods {
					listed[m.Algorithm] = true
					if _, ok := blockCiphers[m.Algorithm]; ok {
						blocks++
					}
					switch m.Algorithm {
					case ktRSAOAEPMGF1P, ktRSAOAEP, ktRSA15:
						transports++
					}
				}
				if transports > 0 && !listed[ktRSAOAEPMGF1P] {
					return nil, errors.New("the IdP encryption KeyDescriptor does not list rsa-oaep-mgf1p key transport")
				}
				e := &idpEncryption{cert: cert, cipher: encAES128GCM}
				if blocks > 0 {
					e.cipher = ""
					for _, c := range sendCiphers {
						if listed[c] {
							e.cipher = c
							break
						}
					}
					if e.cipher == "" {
						return nil, errors.New("the IdP encryption KeyDescriptor lists no block cipher extauth encrypts with (AES-GCM, AES-CBC)")
					}
				}
				return e, nil
			}
		}
	}
	return nil, errNoIdPEncryptionKey
}

// encryptLogoutNameID replaces the NameID of req, a LogoutRequest we send
// for s, with its EncryptedID for the IdP of md, when the operator asks for
// it (security.name_id_encrypted) or the IdP sent this NameID encrypted. An
// IdP that sent it encrypted but publishes no key to encrypt to gets it back
// in clear, as it can read it: the user's own browser carries it.
func (sp *SP) encryptLogoutNameID(req *etree.Element, md *idpMetadata, s LogoutSession) error {
	if !sp.cfg.NameIDEncrypted && !s.NameIDEncrypted {
		return nil
	}
	e, err := idpEncryptionOf(md.entity)
	switch {
	case err != nil && sp.cfg.NameIDEncrypted:
		return &providers.Error{Code: providers.CodeMisconfigured, Provider: Name,
			Message: "saml_additional_settings.security.name_id_encrypted is set, but the NameID cannot be encrypted to the IdP", Err: err}
	case err != nil:
		sp.log.Warn("saml: the IdP sent the NameID encrypted, but the LogoutRequest carries it in clear: it cannot be encrypted to the IdP", "err", err)
		return nil
	}
	for _, c := range req.ChildElements() {
		if is(c, nsAssertion, "NameID") {
			enc, err := encryptNameID(c, e)
			if err != nil {
				return &providers.Error{Code: providers.CodeMisconfigured, Provider: Name, Message: "cannot encrypt the NameID to the IdP", Err: err}
			}
			at := c.Index()
			req.RemoveChild(c)
			req.InsertChildAt(at, enc)
			return nil
		}
	}
	return &providers.Error{Code: providers.CodeMisconfigured, Provider: Name, Message: "cannot build the LogoutRequest", Err: errors.New("no NameID to encrypt")}
}

// encryptNameID returns n, a saml:NameID, as the saml:EncryptedID that
// replaces it (SAML Core 2.2.4): an EncryptedData of type Element whose
// KeyInfo carries the content key, wrapped to e.cert with RSA-OAEP, and the
// certificate it is wrapped to. The plaintext declares the namespace it
// uses, so that it means the same wherever it is decrypted.
func encryptNameID(n *etree.Element, e *idpEncryption) (*etree.Element, error) {
	c := n.Copy()
	c.Space, c.Attr = "saml", append([]etree.Attr{{Space: "xmlns", Key: "saml", Value: nsAssertion}}, withoutXMLNS(c.Attr)...)
	doc := etree.NewDocument()
	doc.SetRoot(c)
	plain, err := doc.WriteToBytes()
	if err != nil {
		return nil, err
	}
	enc := xmlenc.OAEP()
	enc.DigestMethod, enc.BlockCipher = xmlenc.SHA1, sendBlockCiphers[e.cipher]
	data, err := enc.Encrypt(e.cert, plain, nil)
	if err != nil {
		return nil, err
	}
	data.CreateAttr("Type", nsXMLEnc+"Element")
	out := etree.NewElement("saml:EncryptedID")
	out.CreateAttr("xmlns:saml", nsAssertion)
	out.AddChild(data)
	return out, nil
}

func withoutXMLNS(attrs []etree.Attr) []etree.Attr {
	var out []etree.Attr
	for _, a := range attrs {
		if a.Space != "xmlns" && !(a.Space == "" && a.Key == "xmlns") {
			out = append(out, a)
		}
	}
	return out
}
