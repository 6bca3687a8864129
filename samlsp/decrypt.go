package samlsp

import (
	"bytes"
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/des"
	"crypto/rand"
	"crypto/rsa"
	_ "crypto/sha1" // OAEP digests named by EncryptedKey
	_ "crypto/sha256"
	_ "crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/beevik/etree"
)

// Algorithms of XML Encryption 1.0 and 1.1 that the decrypter accepts.
const (
	encTripleDESCBC = "http://www.w3.org/2001/04/xmlenc#tripledes-cbc"
	encAES128CBC    = "http://www.w3.org/2001/04/xmlenc#aes128-cbc"
	encAES192CBC    = "http://www.w3.org/2001/04/xmlenc#aes192-cbc"
	encAES256CBC    = "http://www.w3.org/2001/04/xmlenc#aes256-cbc"
	encAES128GCM    = "http://www.w3.org/2009/xmlenc11#aes128-gcm"
	encAES192GCM    = "http://www.w3.org/2009/xmlenc11#aes192-gcm"
	encAES256GCM    = "http://www.w3.org/2009/xmlenc11#aes256-gcm"

	// ktRSAOAEPMGF1P is RSA-OAEP with MGF1-SHA-1 and the OAEP
	// digest its DigestMethod names (SHA-1 when absent).
	ktRSAOAEPMGF1P = "http://www.w3.org/2001/04/xmlenc#rsa-oaep-mgf1p"
	// ktRSAOAEP is XML Encryption 1.1's RSA-OAEP, whose MGF
	// element names the mask function (MGF1-SHA-1 when absent).
	ktRSAOAEP = "http://www.w3.org/2009/xmlenc11#rsa-oaep"
	// ktRSA15 is RSAES-PKCS1-v1_5, open to Bleichenbacher's
	// attack: refused unless Options.AllowRSA15KeyTransport.
	ktRSA15 = "http://www.w3.org/2001/04/xmlenc#rsa-1_5"
)

// blockCiphers are the data encryption algorithms, by URI.
var blockCiphers = map[string]struct {
	keyLen int
	gcm    bool
	des    bool
}{
	encTripleDESCBC: {24, false, true},
	encAES128CBC:    {16, false, false},
	encAES192CBC:    {24, false, false},
	encAES256CBC:    {32, false, false},
	encAES128GCM:    {16, true, false},
	encAES192GCM:    {24, true, false},
	encAES256GCM:    {32, true, false},
}

// oaepDigests are the DigestMethod and MGF algorithms of RSA-OAEP. SHA-1
// here is a mask and label hash, not a signature or content digest: OAEP's
// security does not rest on its collision resistance, so it is not subject
// to the SHA-1 policy.
var oaepDigests = map[string]crypto.Hash{
	digestSHA1: crypto.SHA1,
	"http://www.w3.org/2001/04/xmldsig-more#sha224": crypto.SHA224,
	digestSHA256:              crypto.SHA256,
	digestSHA384:              crypto.SHA384,
	digestSHA512:              crypto.SHA512,
	nsXMLEnc11 + "mgf1sha1":   crypto.SHA1,
	nsXMLEnc11 + "mgf1sha224": crypto.SHA224,
	nsXMLEnc11 + "mgf1sha256": crypto.SHA256,
	nsXMLEnc11 + "mgf1sha384": crypto.SHA384,
	nsXMLEnc11 + "mgf1sha512": crypto.SHA512,
}

// maxEncryptedKeys bounds the RSA decryptions one response can cost.
const maxEncryptedKeys = 4

// Bounds of what decryption yields. A real assertion is a few kilobytes: a
// signature, a subject, conditions and an attribute statement; a directory
// that sends every group membership (hundreds of values of a few dozen
// bytes) stays well below 64 KiB. The bound is what a chosen ciphertext can
// make the SP decrypt and parse per callback, so it is twice that, and the
// ciphertext accepted is bounded by it before any RSA operation.
// A NameID is one element with a short value and a few qualifiers.
const (
	DefaultMaxDecryptedBytes = 128 << 10
	maxDecryptedNameIDBytes  = 4 << 10
)

// decrypter opens EncryptedAssertion and EncryptedID elements with the SP
// private keys.
type decrypter struct {
	// keys are the SP private keys to try, the current one first (and,
	// while a key rotation is under way, the next one).
	keys    []*rsa.PrivateKey
	allow15 bool
	// refuseCBC refuses the CBC block ciphers (saml_additional_settings.
	// security.refuse_cbc_encryption).
	refuseCBC bool
	// used is the key of the last element opened.
	used *rsa.PrivateKey
}

// decrypter returns the decrypter of the SP's keys: the current one first,
// then the next and the retiring ones of a rotation (sp.decKeys).
func (sp *SP) decrypter() *decrypter {
	return &decrypter{keys: sp.decKeys, allow15: sp.opts.AllowRSA15KeyTransport, refuseCBC: sp.cfg.RefuseCBCEncryption}
}

// errCBC is the one answer to every CBC plaintext that is not a well-formed
// element of the expected kind, whatever went wrong: the padding, the XML,
// or the structure. CBC has no integrity of its own, so when no verified
// signature covers the ciphertext, anyone may send chosen ciphertexts and
// learn from any difference in the answer (Jager and Somorovsky, "How to
// Break XML Encryption", CCS 2011).
var errCBC = errors.New("the CBC plaintext is not a well-formed element of the expected kind, or its padding is wrong")

// ErrCBCRefused is the cause of the refusal of a CBC-encrypted element when
// saml_additional_settings.security.refuse_cbc_encryption is set.
var ErrCBCRefused = errors.New("the IdP encrypted with a CBC block cipher, which saml_additional_settings.security.refuse_cbc_encryption refuses; " +
	"have the IdP encrypt with AES-GCM")

// decryptAssertion opens enc, a saml:EncryptedAssertion, and returns the
// assertion element (see open). authenticated tells whether a signature we
// verified covers enc.
func (d *decrypter) decryptAssertion(enc *etree.Element, maxPlain int, authenticated bool) (*etree.Element, error) {
	return d.open(enc, maxPlain, authenticated, checkDecrypted)
}

// decryptNameID opens enc, a saml:EncryptedID, which must hold a
// saml:NameID (SAML Core 2.2.4).
func (d *decrypter) decryptNameID(enc *etree.Element, authenticated bool) (*etree.Element, error) {
	return d.open(enc, maxDecryptedNameIDBytes, authenticated, func(el *etree.Element) error {
		if !is(el, nsAssertion, "NameID") {
			return errors.New("the decrypted identifier is not a NameID")
		}
		if len(el.ChildElements()) != 0 {
			return errors.New("the decrypted NameID has child elements")
		}
		return nil
	})
}

// open opens enc, an element of the EncryptedElementType (SAML Core 2.2.4:
// one EncryptedData and any EncryptedKeys), and returns the element it
// holds, parsed by parseXML in the namespace context of enc (XML Encryption
// 4.5: the plaintext replaces EncryptedData where it stands) and accepted by
// check. The key is found as IdPs put it: an EncryptedKey inside
// EncryptedData's KeyInfo, or a sibling EncryptedKey that KeyInfo names by
// RetrievalMethod or by KeyName (its CarriedKeyName), or the only sibling.
// The ciphertext is bounded by maxPlain before any RSA operation.
//
// A CBC plaintext is not authenticated: unless a verified signature covers
// enc (authenticated), every way in which it can fail, padding, parse or
// check, does the same work and gives the same error, errCBC. See
// openCBC.
func (d *decrypter) open(enc *etree.Element, maxPlain int, authenticated bool, check func(*etree.Element) error) (*etree.Element, error) {
	var data *etree.Element
	var siblingKeys []*etree.Element
	for _, c := range enc.ChildElements() {
		switch {
		case is(c, nsXMLEnc, "EncryptedData") && data == nil:
			data = c
		case is(c, nsXMLEnc, "EncryptedKey"):
			siblingKeys = append(siblingKeys, c)
		default:
			return nil, fmt.Errorf("unexpected %s in %s", c.Tag, enc.Tag)
		}
	}
	if data == nil {
		return nil, fmt.Errorf("%s without EncryptedData", enc.Tag)
	}
	if t := attr(data, "Type"); t != "" && t != nsXMLEnc+"Element" {
		return nil, fmt.Errorf("EncryptedData of type %.100q, not an element", t)
	}
	alg, err := algorithmOf(data)
	if err != nil {
		return nil, err
	}
	bc, ok := blockCiphers[alg]
	if !ok {
		return nil, fmt.Errorf("block cipher %.100q is not supported", alg)
	}
	if !bc.gcm && d.refuseCBC {
		return nil, ErrCBCRefused
	}
	ct, err := cipherValue(data)
	if err != nil {
		return nil, err
	}
	if max := maxCiphertext(bc.gcm, bc.des, maxPlain); len(ct) > max {
		return nil, fmt.Errorf("%w: a ciphertext of %d bytes; at most %d are accepted (%d bytes of plaintext)", errTooLarge, len(ct), max, maxPlain)
	}
	keys, err := keyCandidates(data, siblingKeys)
	if err != nil {
		return nil, err
	}
	var errs []error
	failedCBC := false
	for _, ek := range keys {
		for _, key := range d.keysFor(ek) {
			cek, err := d.unwrap(ek, key, bc.keyLen)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if !bc.gcm {
				el, err := openCBC(alg, cek, ct, enc, check)
				if err == nil {
					d.used = key
					return el, nil
				}
				if !authenticated {
					failedCBC = true
					continue
				}
				errs = append(errs, err)
				continue
			}
			plain, err := decryptGCM(cek, ct)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			// GCM authenticated the plaintext: whatever is wrong with it
			// now was sent so by whoever holds the content key.
			el, err := parseInContext(plain, enc)
			if err != nil {
				return nil, err
			}
			if err := check(el); err != nil {
				return nil, err
			}
			d.used = key
			return el, nil
		}
	}
	if failedCBC {
		return nil, errCBC
	}
	return nil, fmt.Errorf("cannot decrypt the %s: %w", enc.Tag, errors.Join(errs...))
}

// errTooLarge is the cause of the refusal of a ciphertext over the bound.
var errTooLarge = errors.New("the encrypted element is too large")

// maxCiphertext is the longest ciphertext of a plaintext of at most
// maxPlain bytes: the IV or nonce, and the padding to a whole block (CBC)
// or the tag (GCM).
func maxCiphertext(gcm, des bool, maxPlain int) int {
	if gcm {
		return 12 + maxPlain + 16
	}
	bs := aes.BlockSize
	if des {
		bs = 8
	}
	return bs + (maxPlain/bs+1)*bs
}

// keysFor returns the SP keys to try on ek: the one its KeyInfo names by
// certificate or public key, when it names one of ours, else all of them.
// A wrong key costs an RSA operation and, with rsa-1_5, whose failures give
// a random content key, a decryption.
func (d *decrypter) keysFor(ek *etree.Element) []*rsa.PrivateKey {
	if len(d.keys) < 2 {
		return d.keys
	}
	ki, _ := onlyChild(ek, nsDSig, "KeyInfo")
	if ki == nil {
		return d.keys
	}
	xd, _ := onlyChild(ki, nsDSig, "X509Data")
	if xd == nil {
		return d.keys
	}
	xc, _ := onlyChild(xd, nsDSig, "X509Certificate")
	if xc == nil {
		return d.keys
	}
	cert, err := parseBase64Cert(text(xc))
	if err != nil {
		return d.keys
	}
	for _, k := range d.keys {
		if k.PublicKey.Equal(cert.PublicKey) {
			return []*rsa.PrivateKey{k}
		}
	}
	return d.keys
}

// algorithmOf returns the Algorithm of el's one EncryptionMethod.
func algorithmOf(el *etree.Element) (string, error) {
	em, err := oneChild(el, nsXMLEnc, "EncryptionMethod")
	if err != nil {
		return "", err
	}
	return attr(em, "Algorithm"), nil
}

// cipherValue returns the decoded CipherData/CipherValue of el; a
// CipherReference, which would make us fetch the ciphertext, is refused.
func cipherValue(el *etree.Element) ([]byte, error) {
	cd, err := oneChild(el, nsXMLEnc, "CipherData")
	if err != nil {
		return nil, err
	}
	cv, err := oneChild(cd, nsXMLEnc, "CipherValue")
	if err != nil {
		return nil, fmt.Errorf("%s: %w (CipherReference is not supported)", el.Tag, err)
	}
	b, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(text(cv)), ""))
	if err != nil {
		return nil, fmt.Errorf("%s CipherValue is not base64", el.Tag)
	}
	return b, nil
}

// keyCandidates returns the EncryptedKeys that may hold the content key of
// data, most specific first.
func keyCandidates(data *etree.Element, siblings []*etree.Element) ([]*etree.Element, error) {
	var out []*etree.Element
	if ki, err := onlyChild(data, nsDSig, "KeyInfo"); err != nil {
		return nil, err
	} else if ki != nil {
		for _, c := range ki.ChildElements() {
			switch {
			case is(c, nsXMLEnc, "EncryptedKey"):
				out = append(out, c)
			case is(c, nsDSig, "RetrievalMethod"):
				if t := attr(c, "Type"); t != "" && t != nsXMLEnc+"EncryptedKey" {
					return nil, fmt.Errorf("RetrievalMethod of type %.100q is not supported", t)
				}
				id, ok := strings.CutPrefix(attr(c, "URI"), "#")
				if !ok || id == "" {
					return nil, errors.New("RetrievalMethod must name a sibling EncryptedKey (#id)")
				}
				n := len(out)
				for _, s := range siblings {
					if attr(s, "Id") == id {
						out = append(out, s)
					}
				}
				if len(out) != n+1 {
					return nil, fmt.Errorf("RetrievalMethod names %d EncryptedKeys", len(out)-n)
				}
			case is(c, nsDSig, "KeyName"):
				name := text(c)
				for _, s := range siblings {
					if ckn, _ := onlyChild(s, nsXMLEnc, "CarriedKeyName"); ckn != nil && text(ckn) == name {
						out = append(out, s)
					}
				}
			}
		}
	}
	if len(out) == 0 {
		out = siblings
	}
	switch {
	case len(out) == 0:
		return nil, errors.New("no EncryptedKey for the assertion")
	case len(out) > maxEncryptedKeys:
		return nil, fmt.Errorf("%d EncryptedKeys; at most %d are tried", len(out), maxEncryptedKeys)
	}
	return out, nil
}

// unwrap decrypts the content key that ek transports to key.
func (d *decrypter) unwrap(ek *etree.Element, key *rsa.PrivateKey, keyLen int) ([]byte, error) {
	em, err := oneChild(ek, nsXMLEnc, "EncryptionMethod")
	if err != nil {
		return nil, err
	}
	wrapped, err := cipherValue(ek)
	if err != nil {
		return nil, err
	}
	switch alg := attr(em, "Algorithm"); alg {
	case ktRSAOAEPMGF1P, ktRSAOAEP:
		opts := &rsa.OAEPOptions{Hash: crypto.SHA1, MGFHash: crypto.SHA1}
		if dm, err := onlyChild(em, nsDSig, "DigestMethod"); err != nil {
			return nil, err
		} else if dm != nil {
			h, ok := oaepDigests[attr(dm, "Algorithm")]
			if !ok || strings.Contains(attr(dm, "Algorithm"), "mgf1") {
				return nil, fmt.Errorf("OAEP digest %.100q is not supported", attr(dm, "Algorithm"))
			}
			opts.Hash = h
		}
		if mgf, err := onlyChild(em, nsXMLEnc11, "MGF"); err != nil {
			return nil, err
		} else if mgf != nil {
			h, ok := oaepDigests[attr(mgf, "Algorithm")]
			if !ok || alg != ktRSAOAEP || !strings.Contains(attr(mgf, "Algorithm"), "mgf1") {
				return nil, fmt.Errorf("OAEP mask function %.100q is not supported here", attr(mgf, "Algorithm"))
			}
			opts.MGFHash = h
		}
		if p, err := onlyChild(em, nsXMLEnc, "OAEPparams"); err != nil {
			return nil, err
		} else if p != nil {
			if opts.Label, err = base64.StdEncoding.DecodeString(text(p)); err != nil {
				return nil, errors.New("OAEPparams is not base64")
			}
		}
		cek, err := key.Decrypt(nil, wrapped, opts)
		if err != nil {
			return nil, fmt.Errorf("cannot unwrap the content key: %w", err)
		}
		if len(cek) != keyLen {
			return nil, fmt.Errorf("the content key has %d bytes, the cipher takes %d", len(cek), keyLen)
		}
		return cek, nil
	case ktRSA15:
		if !d.allow15 {
			return nil, errors.New("rsa-1_5 key transport is refused: it is open to Bleichenbacher's padding oracle attack; " +
				"have the IdP use RSA-OAEP, or set extauth.Options.SAML.AllowRSA15KeyTransport")
		}
		// A wrong padding yields a random key rather than an error, so that
		// no timing or message tells the two apart (RFC 3218 section 2.3.2).
		cek := make([]byte, keyLen)
		if _, err := rand.Read(cek); err != nil {
			return nil, err
		}
		if err := rsa.DecryptPKCS1v15SessionKey(nil, key, wrapped, cek); err != nil {
			return nil, fmt.Errorf("cannot unwrap the content key: %w", err)
		}
		return cek, nil
	default:
		return nil, fmt.Errorf("key transport %.100q is not supported", alg)
	}
}

func newBlock(alg string, key []byte) (cipher.Block, error) {
	if blockCiphers[alg].des {
		return des.NewTripleDESCipher(key)
	}
	return aes.NewCipher(key)
}

// decryptGCM decrypts and authenticates ct, the nonce followed by the
// ciphertext and the tag, with AES-GCM.
func decryptGCM(key, ct []byte) ([]byte, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	if len(ct) < aead.NonceSize()+aead.Overhead() {
		return nil, errors.New("the ciphertext is too short")
	}
	plain, err := aead.Open(nil, ct[:aead.NonceSize()], ct[aead.NonceSize():], nil)
	if err != nil {
		return nil, errors.New("the ciphertext does not authenticate")
	}
	return plain, nil
}

// openCBC decrypts ct, the IV followed by the ciphertext, with the CBC
// cipher alg, then parses the plaintext in the namespace context of enc and
// checks it. It does the same work whatever the padding says: the padding
// byte is checked in constant time, and the plaintext is parsed and checked
// in every case, without its padding when the padding is good and whole
// when it is not (a difference of at most one block), so that a bad padding
// costs what a good padding with bad content costs. What is left is the
// parser's own time, which depends on where the plaintext stops being
// well-formed; docs/security.md says what that tells an attacker. The
// error says what went wrong; callers that must not tell replace it.
func openCBC(alg string, key, ct []byte, enc *etree.Element, check func(*etree.Element) error) (*etree.Element, error) {
	block, err := newBlock(alg, key)
	if err != nil {
		return nil, err
	}
	bs := block.BlockSize()
	if len(ct) < 2*bs || len(ct)%bs != 0 {
		return nil, errors.New("the ciphertext is not whole blocks")
	}
	plain := make([]byte, len(ct)-bs)
	cipher.NewCBCDecrypter(block, ct[:bs]).CryptBlocks(plain, ct[bs:])
	// XML Encryption 5.2: the last byte is the number of padding bytes,
	// whose other values are arbitrary.
	n := int(plain[len(plain)-1])
	good := subtle.ConstantTimeLessOrEq(1, n) & subtle.ConstantTimeLessOrEq(n, bs)
	plain = plain[:len(plain)-subtle.ConstantTimeSelect(good, n, 0)]
	el, err := parseInContext(plain, enc)
	if err == nil {
		err = check(el)
	}
	if good != 1 {
		return nil, errors.New("bad padding")
	}
	if err != nil {
		return nil, err
	}
	return el, nil
}

// parseInContext parses plain, the serialization of one element, with
// parseXML, under the namespace declarations in scope at ctx. It returns
// the element; its parent is a wrapper that carries those declarations, so
// that prefixes the plaintext does not declare itself resolve as in the
// document it came from, and only so.
func parseInContext(plain []byte, ctx *etree.Element) (*etree.Element, error) {
	plain = bytes.TrimPrefix(plain, []byte("\xef\xbb\xbf"))
	if bytes.HasPrefix(plain, []byte("<?xml")) {
		end := bytes.Index(plain, []byte("?>"))
		if end < 0 {
			return nil, errors.New("decrypted: malformed XML declaration")
		}
		plain = plain[end+2:]
	}
	var b bytes.Buffer
	b.Grow(len(plain) + 512)
	b.WriteString("<w")
	seen := map[string]bool{}
	for e := ctx; e != nil; e = e.Parent() {
		for _, a := range e.Attr {
			if (a.Space == "xmlns" || (a.Space == "" && a.Key == "xmlns")) && !seen[a.Space+":"+a.Key] {
				seen[a.Space+":"+a.Key] = true
				b.WriteByte(' ')
				b.WriteString(qname(a.Space, a.Key))
				b.WriteString(`="`)
				escapeAttr(&b, a.Value)
				b.WriteByte('"')
			}
		}
	}
	b.WriteByte('>')
	b.Write(plain)
	b.WriteString("</w>")
	w, err := parseXML(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("decrypted: %w", err)
	}
	var el *etree.Element
	for _, t := range w.Child {
		switch t := t.(type) {
		case *etree.Element:
			if el != nil {
				return nil, errors.New("decrypted: more than one element")
			}
			el = t
		case *etree.CharData:
			if strings.TrimSpace(t.Data) != "" {
				return nil, errors.New("decrypted: text beside the element")
			}
		}
	}
	if el == nil {
		return nil, errors.New("decrypted: no element")
	}
	return el, nil
}

func escapeAttr(b *bytes.Buffer, s string) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '"':
			b.WriteString("&quot;")
		default:
			b.WriteByte(c)
		}
	}
}
