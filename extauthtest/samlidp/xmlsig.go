package samlidp

import (
	"crypto"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/beevik/etree"
	dsig "github.com/russellhaering/goxmldsig"
	"github.com/russellhaering/goxmldsig/etreeutils"
)

// Algorithm identifiers the forger can sign with, SHA-1 included: the SP
// must refuse those unless told otherwise.
const (
	RSASHA1      = dsig.RSASHA1SignatureMethod
	RSASHA256    = dsig.RSASHA256SignatureMethod
	DigestSHA1   = "http://www.w3.org/2000/09/xmldsig#sha1"
	DigestSHA256 = "http://www.w3.org/2001/04/xmlenc#sha256"
)

var digestHashes = map[string]crypto.Hash{DigestSHA1: crypto.SHA1, DigestSHA256: crypto.SHA256}

// SignOptions shape an enveloped signature.
type SignOptions struct {
	// SignatureMethod and DigestMethod default to RSA-SHA256 and SHA-256.
	SignatureMethod, DigestMethod string
	// Prefix is the signature's namespace prefix ("ds" when Default is
	// false and Prefix is empty; the default namespace when Default).
	Prefix  string
	Default bool
}

// signEnveloped returns an enveloped signature of el made with key, for
// el where it stands in its document: el is signed as a detached copy that
// declares every namespace it inherits, which is what a verifier
// canonicalizes. The caller inserts the signature into el.
func signEnveloped(el *etree.Element, key *rsa.PrivateKey, cert *x509.Certificate, o SignOptions) (*etree.Element, error) {
	if o.SignatureMethod == "" {
		o.SignatureMethod = RSASHA256
	}
	if o.DigestMethod == "" {
		o.DigestMethod = DigestSHA256
	}
	prefix := o.Prefix
	if prefix == "" && !o.Default {
		prefix = "ds"
	}
	detached := func() (*etree.Element, error) {
		ctx, err := etreeutils.NSBuildParentContext(el)
		if err != nil {
			return nil, err
		}
		ctx, err = ctx.SubContext(el)
		if err != nil {
			return nil, err
		}
		return etreeutils.NSDetatch(ctx, el)
	}
	det, err := detached()
	if err != nil {
		return nil, err
	}
	ks := dsig.TLSCertKeyStore(tls.Certificate{Certificate: [][]byte{cert.Raw}, PrivateKey: key, Leaf: cert})
	ctx := dsig.NewDefaultSigningContext(ks)
	ctx.Prefix = prefix
	ctx.Canonicalizer = dsig.MakeC14N10ExclusiveCanonicalizerWithPrefixList("")
	if err := ctx.SetSignatureMethod(o.SignatureMethod); err != nil {
		return nil, err
	}
	sig, err := ctx.ConstructSignature(det, true)
	if err != nil {
		return nil, err
	}
	if digestHashes[o.DigestMethod] == ctx.Hash {
		return sig, nil
	}
	// goxmldsig digests with the signature's hash; an IdP may not. Redo
	// the reference digest with the other hash, then the signature over
	// SignedInfo.
	h, ok := digestHashes[o.DigestMethod]
	if !ok {
		return nil, fmt.Errorf("samlidp: unknown digest %s", o.DigestMethod)
	}
	if det, err = detached(); err != nil {
		return nil, err
	}
	canon, err := dsig.MakeC14N10ExclusiveCanonicalizerWithPrefixList("").Canonicalize(det)
	if err != nil {
		return nil, err
	}
	d := h.New()
	d.Write(canon)
	si := sig.FindElement("./SignedInfo")
	dm := sig.FindElement("./SignedInfo/Reference/DigestMethod")
	dv := sig.FindElement("./SignedInfo/Reference/DigestValue")
	sv := sig.FindElement("./SignatureValue")
	if si == nil || dm == nil || dv == nil || sv == nil {
		return nil, errors.New("samlidp: unexpected signature shape")
	}
	dm.RemoveAttr("Algorithm")
	dm.CreateAttr("Algorithm", o.DigestMethod)
	dv.SetText(base64.StdEncoding.EncodeToString(d.Sum(nil)))
	siCopy := si.Copy()
	if prefix == "" {
		siCopy.CreateAttr("xmlns", dsig.Namespace)
	} else {
		siCopy.CreateAttr("xmlns:"+prefix, dsig.Namespace)
	}
	canon, err = dsig.MakeC14N10ExclusiveCanonicalizerWithPrefixList("").Canonicalize(siCopy)
	if err != nil {
		return nil, err
	}
	sh := ctx.Hash.New()
	sh.Write(canon)
	value, err := rsa.SignPKCS1v15(nil, key, ctx.Hash, sh.Sum(nil))
	if err != nil {
		return nil, err
	}
	sv.SetText(base64.StdEncoding.EncodeToString(value))
	return sig, nil
}

// insertAfterIssuer puts sig where SAML's schemas want it: right after the
// element's Issuer, or first.
func insertAfterIssuer(el, sig *etree.Element) {
	at := 0
	for _, c := range el.ChildElements() {
		if c.Tag == "Issuer" {
			at = c.Index() + 1
			break
		}
	}
	el.InsertChildAt(at, sig)
}

// SignMessage signs a protocol message (a LogoutRequest or LogoutResponse
// for the HTTP-POST binding) in place with the IdP key.
func (p *IdP) SignMessage(el *etree.Element, o SignOptions) error {
	sig, err := signEnveloped(el, p.key, p.cert, o)
	if err != nil {
		return err
	}
	insertAfterIssuer(el, sig)
	return nil
}
