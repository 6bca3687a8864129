package samlsp

import (
	"bytes"
	"crypto"
	_ "crypto/sha1" // the hashes of digestAlgorithms
	_ "crypto/sha256"
	_ "crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/beevik/etree"
	dsig "github.com/russellhaering/goxmldsig"
)

// Digest algorithms of XML-DSig.
const (
	digestSHA1   = "http://www.w3.org/2000/09/xmldsig#sha1"
	digestSHA256 = "http://www.w3.org/2001/04/xmlenc#sha256"
	digestSHA384 = "http://www.w3.org/2001/04/xmldsig-more#sha384"
	digestSHA512 = "http://www.w3.org/2001/04/xmlenc#sha512"
)

// algPolicy is the one signature and digest policy of every signature we
// accept: on responses and assertions, on logout messages (enveloped or in
// the query of the redirect binding), and on signed IdP metadata. SHA-256
// and stronger always; SHA-1 only when the host opted in.
type algPolicy struct{ allowSHA1 bool }

// signatureAlgorithms maps the XML-DSig signature methods goxmldsig
// verifies to their x509 algorithm, and tells the SHA-1 ones apart.
var signatureAlgorithms = map[string]struct {
	alg  x509.SignatureAlgorithm
	sha1 bool
}{
	dsig.RSASHA256SignatureMethod:   {x509.SHA256WithRSA, false},
	dsig.RSASHA384SignatureMethod:   {x509.SHA384WithRSA, false},
	dsig.RSASHA512SignatureMethod:   {x509.SHA512WithRSA, false},
	dsig.ECDSASHA256SignatureMethod: {x509.ECDSAWithSHA256, false},
	dsig.ECDSASHA384SignatureMethod: {x509.ECDSAWithSHA384, false},
	dsig.ECDSASHA512SignatureMethod: {x509.ECDSAWithSHA512, false},
	dsig.RSASHA1SignatureMethod:     {x509.SHA1WithRSA, true},
	dsig.ECDSASHA1SignatureMethod:   {x509.ECDSAWithSHA1, true},
}

// digestAlgorithms maps the XML-DSig digest methods we accept to their
// hash.
var digestAlgorithms = map[string]crypto.Hash{
	digestSHA256: crypto.SHA256,
	digestSHA384: crypto.SHA384,
	digestSHA512: crypto.SHA512,
	digestSHA1:   crypto.SHA1,
}

// errSHA1 explains a refusal that the host or the operator can lift: the
// host with extauth.Options.SAML.AllowSHA1, the operator with
// saml_additional_settings.security.allow_sha1 (short, for extauth check
// prints it after a long chain of causes).
var errSHA1 = errors.New("SHA-1 is refused unless Options.SAML.AllowSHA1 or security.allow_sha1")

// signatureMethod returns the x509 algorithm of an accepted signature
// method.
func (p algPolicy) signatureMethod(uri string) (x509.SignatureAlgorithm, error) {
	a, ok := signatureAlgorithms[uri]
	switch {
	case !ok:
		return 0, fmt.Errorf("signature method %.100q is not supported", uri)
	case a.sha1 && !p.allowSHA1:
		return 0, fmt.Errorf("signature method %s: %w", uri, errSHA1)
	}
	return a.alg, nil
}

// digestMethod returns the hash of an accepted digest method.
func (p algPolicy) digestMethod(uri string) (crypto.Hash, error) {
	h, ok := digestAlgorithms[uri]
	switch {
	case !ok:
		return 0, fmt.Errorf("digest method %.100q is not supported", uri)
	case h == crypto.SHA1 && !p.allowSHA1:
		return 0, fmt.Errorf("digest method %s: %w", uri, errSHA1)
	}
	return h, nil
}

// Transforms a SAML signature may list (SAML Core 5.4.3-4): the enveloped
// signature transform and canonicalization.
var allowedTransforms = map[string]bool{
	string(dsig.EnvelopedSignatureAltorithmId):                  true,
	string(dsig.CanonicalXML10ExclusiveAlgorithmId):             true,
	string(dsig.CanonicalXML10ExclusiveWithCommentsAlgorithmId): true,
	string(dsig.CanonicalXML10RecAlgorithmId):                   true,
	string(dsig.CanonicalXML11AlgorithmId):                      true,
}

// verifier checks enveloped XML signatures against the IdP's signing
// certificates from its metadata, under one algorithm policy.
type verifier struct {
	certs  []*x509.Certificate
	now    func() time.Time
	policy algPolicy
	// wholeDocument also accepts a Reference with URI="" (the whole
	// document), as signed metadata may have: only for a document's root.
	wholeDocument bool
	// keysOnly uses the certificates as carriers of keys, whatever their
	// validity dates say (the Metadata Interoperability Profile): for
	// the IdP's keys from its verified metadata, unless
	// Config.EnforceIdPCertificateDates. A pinned certificate is held to
	// its dates.
	keysOnly bool
}

// signatureOf checks the shape and the algorithms of el's own signature
// and returns it: exactly one ds:Signature child of el, made of SignedInfo,
// SignatureValue and at most one KeyInfo (nothing else: no ds:Object to hide
// a copy in), whose SignedInfo has one Reference, to el by its ID (SAML Core
// 5.4.2), with allowed transforms and digest, and an allowed signature
// method. It returns errNotSigned when el has no signature child.
//
// goxmldsig would verify whichever signature anywhere below el references
// el; with this check the one it finds is the one we checked.
func (v *verifier) signatureOf(el *etree.Element) (*etree.Element, error) {
	sig, err := onlyChild(el, nsDSig, "Signature")
	if err != nil {
		return nil, err
	}
	if sig == nil {
		return nil, errNotSigned
	}
	id := attr(el, "ID")
	if id == "" && !v.wholeDocument {
		return nil, fmt.Errorf("the signed %s has no ID", el.Tag)
	}
	var signedInfo, value, keyInfo int
	var si *etree.Element
	for _, c := range sig.ChildElements() {
		switch {
		case is(c, nsDSig, "SignedInfo"):
			signedInfo++
			si = c
		case is(c, nsDSig, "SignatureValue"):
			value++
		case is(c, nsDSig, "KeyInfo"):
			keyInfo++
		default:
			return nil, fmt.Errorf("unexpected %s in the signature", c.Tag)
		}
	}
	if signedInfo != 1 || value != 1 || keyInfo > 1 {
		return nil, errors.New("the signature is not one SignedInfo, one SignatureValue and at most one KeyInfo")
	}
	if _, err := oneChild(si, nsDSig, "CanonicalizationMethod"); err != nil {
		return nil, err
	}
	sm, err := oneChild(si, nsDSig, "SignatureMethod")
	if err != nil {
		return nil, err
	}
	if _, err := v.policy.signatureMethod(attr(sm, "Algorithm")); err != nil {
		return nil, err
	}
	refs := children(si, nsDSig, "Reference")
	if len(refs) != 1 || len(si.ChildElements()) != 3 {
		return nil, errors.New("the signature must have exactly one Reference")
	}
	if uri := attr(refs[0], "URI"); !(id != "" && uri == "#"+id) && !(v.wholeDocument && uri == "" && el.Parent() == nil) {
		return nil, fmt.Errorf("the signature does not reference its %s", el.Tag)
	}
	if ts, err := onlyChild(refs[0], nsDSig, "Transforms"); err != nil {
		return nil, err
	} else if ts != nil {
		for _, t := range ts.ChildElements() {
			if !is(t, nsDSig, "Transform") || !allowedTransforms[attr(t, "Algorithm")] {
				return nil, fmt.Errorf("transform %.100q is not allowed", attr(t, "Algorithm"))
			}
		}
	}
	dm, err := oneChild(refs[0], nsDSig, "DigestMethod")
	if err != nil {
		return nil, err
	}
	if _, err := v.policy.digestMethod(attr(dm, "Algorithm")); err != nil {
		return nil, err
	}
	return sig, nil
}

// verify checks the signature that is a direct child of el and references
// el (see signatureOf), and returns the element as the signature covers it:
// goxmldsig's tree of the canonical bytes it digested, without the
// signature. Callers read only from that tree.
//
// The key comes from the IdP metadata, never from the message. goxmldsig
// trusts a certificate in KeyInfo only when it equals one of ours, and,
// without KeyInfo, uses the one trusted certificate. So when KeyInfo carries
// one of ours, that one is tried alone; otherwise KeyInfo is dropped and
// each of ours is tried in turn, which keeps rotation working whatever the
// IdP puts in KeyInfo.
//
// verify changes el (it declares the namespaces el inherits on el itself and
// removes KeyInfo from its signature): neither changes what is signed, but
// an enclosing element's signature must be verified first.
func (v *verifier) verify(el *etree.Element) (*etree.Element, error) {
	sig, err := v.signatureOf(el)
	if err != nil {
		return nil, fmt.Errorf("signature on %s: %w", el.Tag, err)
	}
	if len(v.certs) == 0 {
		return nil, errors.New("no IdP signing certificate")
	}
	certs := v.certs
	if ki, _ := onlyChild(sig, nsDSig, "KeyInfo"); ki != nil {
		if c := v.keyInfoCert(ki); c != nil {
			certs = []*x509.Certificate{c}
		}
		sig.RemoveChild(ki)
	}
	declareInScope(el)
	var errs []error
	for _, cert := range certs {
		vc := dsig.NewDefaultValidationContext(&dsig.MemoryX509CertificateStore{Roots: []*x509.Certificate{cert}})
		vc.IdAttribute = "ID"
		vc.Clock = dsig.NewFakeClockAt(v.now())
		if v.keysOnly {
			// goxmldsig reads the clock for nothing but the
			// certificate's dates: at its NotBefore, they pass.
			vc.Clock = dsig.NewFakeClockAt(cert.NotBefore)
		}
		out, err := vc.Validate(el)
		if err == nil {
			return out, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("signature on %s does not verify with any IdP signing certificate: %w", el.Tag, errors.Join(errs...))
}

// keyInfoCert returns the trusted certificate that KeyInfo names, if any.
func (v *verifier) keyInfoCert(ki *etree.Element) *x509.Certificate {
	xd, _ := onlyChild(ki, nsDSig, "X509Data")
	if xd == nil {
		return nil
	}
	xc, _ := onlyChild(xd, nsDSig, "X509Certificate")
	if xc == nil {
		return nil
	}
	der, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(text(xc)), ""))
	if err != nil {
		return nil
	}
	for _, c := range v.certs {
		if bytes.Equal(c.Raw, der) {
			return c
		}
	}
	return nil
}

// verifyQuery checks an HTTP-Redirect binding signature over signed, the
// query octets as received, under the same policy.
func (v *verifier) verifyQuery(signed, sigAlg string, signature []byte) error {
	alg, err := v.policy.signatureMethod(sigAlg)
	if err != nil {
		return err
	}
	now := v.now()
	for _, c := range v.certs {
		// As for XML signatures: a certificate outside its validity
		// verifies nothing, unless it only carries a key.
		if !v.keysOnly && (now.Before(c.NotBefore) || now.After(c.NotAfter)) {
			continue
		}
		if c.CheckSignature(alg, []byte(signed), signature) == nil {
			return nil
		}
	}
	return errors.New("no IdP signing certificate verifies the query signature")
}
