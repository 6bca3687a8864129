package samlidp

import (
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/des"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/beevik/etree"
)

// XML Encryption algorithms the forger encrypts with. This is an
// encryptor of its own, written from the specifications, so that the SP's
// decryption is tested against code that shares nothing with it.
const (
	TripleDESCBC = "http://www.w3.org/2001/04/xmlenc#tripledes-cbc"
	AES128CBC    = "http://www.w3.org/2001/04/xmlenc#aes128-cbc"
	AES192CBC    = "http://www.w3.org/2001/04/xmlenc#aes192-cbc"
	AES256CBC    = "http://www.w3.org/2001/04/xmlenc#aes256-cbc"
	AES128GCM    = "http://www.w3.org/2009/xmlenc11#aes128-gcm"
	AES256GCM    = "http://www.w3.org/2009/xmlenc11#aes256-gcm"

	RSAOAEPMGF1P = "http://www.w3.org/2001/04/xmlenc#rsa-oaep-mgf1p"
	RSAOAEP11    = "http://www.w3.org/2009/xmlenc11#rsa-oaep"
	RSA15        = "http://www.w3.org/2001/04/xmlenc#rsa-1_5"

	MGF1SHA1   = "http://www.w3.org/2009/xmlenc11#mgf1sha1"
	MGF1SHA256 = "http://www.w3.org/2009/xmlenc11#mgf1sha256"

	nsXenc   = "http://www.w3.org/2001/04/xmlenc#"
	nsXenc11 = "http://www.w3.org/2009/xmlenc11#"
	nsDS     = "http://www.w3.org/2000/09/xmldsig#"
	nsSAML   = "urn:oasis:names:tc:SAML:2.0:assertion"
)

var ciphers = map[string]struct {
	keyLen int
	gcm    bool
	des    bool
}{
	TripleDESCBC: {24, false, true},
	AES128CBC:    {16, false, false},
	AES192CBC:    {24, false, false},
	AES256CBC:    {32, false, false},
	AES128GCM:    {16, true, false},
	AES256GCM:    {32, true, false},
}

var hashes = map[string]crypto.Hash{
	DigestSHA1: crypto.SHA1, DigestSHA256: crypto.SHA256,
	MGF1SHA1: crypto.SHA1, MGF1SHA256: crypto.SHA256,
}

// KeyPlacement is where the wrapped content key goes.
type KeyPlacement int

// The placements IdPs use.
const (
	// KeyInline puts the EncryptedKey inside EncryptedData's KeyInfo
	// (Shibboleth, crewjam).
	KeyInline KeyPlacement = iota
	// KeyRetrievalMethod puts it beside EncryptedData, which names it by a
	// ds:RetrievalMethod to its Id (AD FS, some Java stacks).
	KeyRetrievalMethod
	// KeyCarriedName puts it beside EncryptedData, which names it by a
	// ds:KeyName equal to its CarriedKeyName.
	KeyCarriedName
	// KeySibling puts it beside EncryptedData, which has no KeyInfo.
	KeySibling
)

// String names the placement, for test names.
func (k KeyPlacement) String() string {
	return [...]string{"inline", "retrieval-method", "carried-key-name", "sibling"}[k]
}

// Encryption says how EncryptTo encrypts an assertion. The zero value is
// what SimpleSAMLphp sends, and crewjam's IdP before v0.6: AES-128-CBC,
// RSA-OAEP-MGF1P with SHA-1, the key inside KeyInfo.
type Encryption struct {
	Cipher       string
	KeyTransport string
	// OAEPDigest is the key transport's ds:DigestMethod; empty leaves it
	// out (SHA-1 by default).
	OAEPDigest string
	// MGF is the xenc11:MGF of xmlenc11#rsa-oaep; empty leaves it out
	// (MGF1 with SHA-1).
	MGF string
	Key KeyPlacement
	// RelyOnContext serializes the assertion without the namespace
	// declarations the Response already makes, so that the plaintext only
	// means something where EncryptedData stands (XML Encryption 4.5).
	RelyOnContext bool
}

// encryptAssertion returns the EncryptedAssertion of a, which stands in
// its response, for cert.
func encryptAssertion(a *etree.Element, cert *x509.Certificate, e Encryption) (*etree.Element, error) {
	return encryptElement(a, "saml:EncryptedAssertion", "", cert, e)
}

// encryptNameID returns the EncryptedID (SAML Core 2.2.4) of n, a NameID
// that stands in its assertion or request, for cert.
func encryptNameID(n *etree.Element, cert *x509.Certificate, e Encryption) (*etree.Element, error) {
	return encryptElement(n, "saml:EncryptedID", "nameid-", cert, e)
}

// encryptElement returns el encrypted for cert as e says, in an element of
// the EncryptedElementType named wrapper. idPrefix keeps the Ids of its
// EncryptedData and EncryptedKey apart from those of another encrypted
// element of the same message.
func encryptElement(a *etree.Element, wrapper, idPrefix string, cert *x509.Certificate, e Encryption) (*etree.Element, error) {
	if e.Cipher == "" {
		e.Cipher = AES128CBC
	}
	if e.KeyTransport == "" {
		e.KeyTransport = RSAOAEPMGF1P
	}
	c, ok := ciphers[e.Cipher]
	if !ok {
		return nil, fmt.Errorf("samlidp: unknown cipher %s", e.Cipher)
	}
	plain, err := plaintext(a, e.RelyOnContext)
	if err != nil {
		return nil, err
	}
	cek := make([]byte, c.keyLen)
	rand.Read(cek)
	ct, err := encryptContent(e.Cipher, cek, plain)
	if err != nil {
		return nil, err
	}
	pub, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok {
		return nil, errors.New("samlidp: not an RSA certificate")
	}
	var wrapped []byte
	switch e.KeyTransport {
	case RSAOAEPMGF1P, RSAOAEP11:
		opts := &rsa.OAEPOptions{Hash: crypto.SHA1, MGFHash: crypto.SHA1}
		if e.OAEPDigest != "" {
			opts.Hash = hashes[e.OAEPDigest]
		}
		if e.MGF != "" {
			opts.MGFHash = hashes[e.MGF]
		}
		wrapped, err = rsa.EncryptOAEPWithOptions(rand.Reader, pub, cek, opts)
	case RSA15:
		wrapped, err = rsa.EncryptPKCS1v15(rand.Reader, pub, cek)
	default:
		err = fmt.Errorf("samlidp: unknown key transport %s", e.KeyTransport)
	}
	if err != nil {
		return nil, err
	}

	enc := etree.NewElement(wrapper)
	enc.CreateAttr("xmlns:saml", nsSAML)
	enc.CreateAttr("xmlns:xenc", nsXenc)
	enc.CreateAttr("xmlns:ds", nsDS)
	data := enc.CreateElement("xenc:EncryptedData")
	data.CreateAttr("Id", "_"+idPrefix+"data-1")
	data.CreateAttr("Type", nsXenc+"Element")
	data.CreateElement("xenc:EncryptionMethod").CreateAttr("Algorithm", e.Cipher)

	ek := etree.NewElement("xenc:EncryptedKey")
	ek.CreateAttr("Id", "_"+idPrefix+"key-1")
	em := ek.CreateElement("xenc:EncryptionMethod")
	em.CreateAttr("Algorithm", e.KeyTransport)
	if e.OAEPDigest != "" {
		em.CreateElement("ds:DigestMethod").CreateAttr("Algorithm", e.OAEPDigest)
	}
	if e.MGF != "" {
		mgf := em.CreateElement("xenc11:MGF")
		mgf.CreateAttr("xmlns:xenc11", nsXenc11)
		mgf.CreateAttr("Algorithm", e.MGF)
	}
	eki := ek.CreateElement("ds:KeyInfo")
	eki.CreateElement("ds:X509Data").CreateElement("ds:X509Certificate").SetText(base64.StdEncoding.EncodeToString(cert.Raw))
	ek.CreateElement("xenc:CipherData").CreateElement("xenc:CipherValue").SetText(base64.StdEncoding.EncodeToString(wrapped))

	switch e.Key {
	case KeyInline:
		data.CreateElement("ds:KeyInfo").AddChild(ek)
	case KeyRetrievalMethod:
		rm := data.CreateElement("ds:KeyInfo").CreateElement("ds:RetrievalMethod")
		rm.CreateAttr("Type", nsXenc+"EncryptedKey")
		rm.CreateAttr("URI", "#_"+idPrefix+"key-1")
	case KeyCarriedName:
		data.CreateElement("ds:KeyInfo").CreateElement("ds:KeyName").SetText("sp-" + idPrefix + "key-1")
	case KeySibling:
	}
	data.CreateElement("xenc:CipherData").CreateElement("xenc:CipherValue").SetText(base64.StdEncoding.EncodeToString(ct))
	if e.Key != KeyInline {
		ek.CreateElement("xenc:ReferenceList").CreateElement("xenc:DataReference").CreateAttr("URI", "#_"+idPrefix+"data-1")
		if e.Key == KeyCarriedName {
			ek.CreateElement("xenc:CarriedKeyName").SetText("sp-" + idPrefix + "key-1")
		}
		enc.AddChild(ek)
	}
	return enc, nil
}

// plaintext serializes a as IdPs do: with every namespace it uses
// declared on it, or, with relyOnContext, only those its response does not
// already declare.
func plaintext(a *etree.Element, relyOnContext bool) ([]byte, error) {
	c := a.Copy()
	inScope := scopeAt(a)
	if relyOnContext {
		outer := map[string]string{}
		if p := a.Parent(); p != nil {
			outer = scopeAt(p)
		}
		kept := c.Attr[:0]
		for _, at := range c.Attr {
			if (at.Space == "xmlns" && outer[at.Key] == at.Value) || (at.Space == "" && at.Key == "xmlns" && outer[""] == at.Value) {
				continue
			}
			kept = append(kept, at)
		}
		c.Attr = kept
	} else {
		for p, uri := range inScope {
			if c.SelectAttr(xmlnsName(p)) == nil {
				c.CreateAttr(xmlnsName(p), uri)
			}
		}
	}
	doc := etree.NewDocument()
	doc.SetRoot(c)
	return doc.WriteToBytes()
}

func xmlnsName(prefix string) string {
	if prefix == "" {
		return "xmlns"
	}
	return "xmlns:" + prefix
}

// encryptContent encrypts plain with alg: IV or nonce first, XML
// Encryption padding (arbitrary bytes, then their count) for CBC.
func encryptContent(alg string, key, plain []byte) ([]byte, error) {
	c := ciphers[alg]
	var block cipher.Block
	var err error
	if c.des {
		block, err = des.NewTripleDESCipher(key)
	} else {
		block, err = aes.NewCipher(key)
	}
	if err != nil {
		return nil, err
	}
	if c.gcm {
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		nonce := make([]byte, aead.NonceSize())
		rand.Read(nonce)
		return aead.Seal(nonce, nonce, plain, nil), nil
	}
	bs := block.BlockSize()
	n := bs - len(plain)%bs
	pad := make([]byte, n)
	rand.Read(pad)
	pad[n-1] = byte(n)
	padded := append(append([]byte(nil), plain...), pad...)
	out := make([]byte, bs+len(padded))
	rand.Read(out[:bs])
	cipher.NewCBCEncrypter(block, out[:bs]).CryptBlocks(out[bs:], padded)
	return out, nil
}
