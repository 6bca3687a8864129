package samlsp

import (
	"bytes"
	"crypto"
	_ "crypto/sha1" // the hashes of digestAlgorithms
	_ "crypto/sha256"
	_ "crypto/sha512"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/beevik/etree"
	dsig "github.com/russellhaering/goxmldsig"
	"github.com/russellhaering/goxmldsig/etreeutils"
	"github.com/russellhaering/goxmldsig/types"
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
// verify changes el (it declares the namespaces el inherits on el itself,
// removes KeyInfo from its signature, and, once SignedInfo verifies,
// removes the signature and canonicalizes el in place): read the tree it
// returns, never el, and verify an enclosing element's signature first.
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
	if out, err, ok := v.verifyExclusive(el, sig, certs); ok {
		if err != nil {
			return nil, fmt.Errorf("signature on %s does not verify with any IdP signing certificate: %w", el.Tag, err)
		}
		return out, nil
	}
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

// verifyExclusive verifies sig, el's own signature (see signatureOf), as
// goxmldsig's ValidationContext.Validate does, when its SignedInfo and its
// Reference are canonicalized with Exclusive XML Canonicalization, as
// SAML's profile says they should be (ok false otherwise: verify then asks
// goxmldsig). It follows Validate step by step, with goxmldsig's own
// canonicalizer, namespace handling and types, and its results: SignedInfo
// detached with the namespaces in scope and canonicalized, its signature
// checked with each certificate in turn, the Reference read from the
// canonical bytes that verified, the element without the signature
// canonicalized as its transforms say and digested, and the tree parsed
// from those canonical bytes returned. What it leaves out is Validate's
// search for the signature (a traversal of the whole element that also
// unmarshals the signature through encoding/xml), which signatureOf has
// done, and its two copies of the element: about a fifth of the ACS
// (BENCHMARKS.md).
//
// It changes el more than verify says: once the signature over SignedInfo
// verifies, el loses its signature and is canonicalized in place.
func (v *verifier) verifyExclusive(el, sig *etree.Element, certs []*x509.Certificate) (*etree.Element, error, bool) {
	si, _ := onlyChild(sig, nsDSig, "SignedInfo")
	sv, _ := onlyChild(sig, nsDSig, "SignatureValue")
	cm, _ := onlyChild(si, nsDSig, "CanonicalizationMethod")
	sm, _ := onlyChild(si, nsDSig, "SignatureMethod")
	if si == nil || sv == nil || cm == nil || sm == nil {
		return nil, nil, false
	}
	comments := false
	switch dsig.AlgorithmID(attr(cm, "Algorithm")) {
	case dsig.CanonicalXML10ExclusiveAlgorithmId:
	case dsig.CanonicalXML10ExclusiveWithCommentsAlgorithmId:
		comments = true
	default:
		return nil, nil, false
	}
	alg, err := v.policy.signatureMethod(attr(sm, "Algorithm"))
	if err != nil {
		return nil, err, true
	}
	value, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(text(sv)), ""))
	if err != nil {
		return nil, errors.New("could not decode signature"), true
	}
	ctx, err := etreeutils.NSBuildParentContext(si)
	if err != nil {
		return nil, err, true
	}
	detached, err := etreeutils.NSDetatch(ctx, si)
	if err != nil {
		return nil, err, true
	}
	// goxmldsig canonicalizes SignedInfo without the prefix list.
	siC14N := dsig.MakeC14N10ExclusiveCanonicalizerWithPrefixList("")
	if comments {
		siC14N = dsig.MakeC14N10ExclusiveWithCommentsCanonicalizerWithPrefixList("")
	}
	canonicalSI, err := siC14N.Canonicalize(detached)
	if err != nil {
		return nil, err, true
	}
	now := v.now()
	var errs []error
	verified := false
	for _, cert := range certs {
		if !v.keysOnly && (now.Before(cert.NotBefore) || now.After(cert.NotAfter)) {
			errs = append(errs, errors.New("Cert is not valid at this time"))
			continue
		}
		if err := cert.CheckSignature(alg, canonicalSI, value); err != nil {
			errs = append(errs, err)
			continue
		}
		verified = true
		break
	}
	if !verified {
		return nil, errors.Join(errs...), true
	}

	// From here on, only the SignedInfo that verified.
	var signed types.SignedInfo
	if err := xml.Unmarshal(canonicalSI, &signed); err != nil {
		return nil, err, true
	}
	id := attr(el, "ID")
	var ref *types.Reference
	for i := range signed.References {
		if u := signed.References[i].URI; u == "" || u[1:] == id {
			ref = &signed.References[i]
			break
		}
	}
	if ref == nil {
		return nil, errors.New("missing reference"), true
	}
	enveloped := false
	var c14n dsig.Canonicalizer
	for _, t := range ref.Transforms.Transforms {
		prefixList := ""
		if t.InclusiveNamespaces != nil {
			prefixList = t.InclusiveNamespaces.PrefixList
		}
		switch dsig.AlgorithmID(t.Algorithm) {
		case dsig.EnvelopedSignatureAltorithmId:
			enveloped = true
		case dsig.CanonicalXML10ExclusiveAlgorithmId:
			c14n = dsig.MakeC14N10ExclusiveCanonicalizerWithPrefixList(prefixList)
		case dsig.CanonicalXML10ExclusiveWithCommentsAlgorithmId:
			c14n = dsig.MakeC14N10ExclusiveWithCommentsCanonicalizerWithPrefixList(prefixList)
		default:
			// Another canonicalization of the reference: goxmldsig's.
			return nil, nil, false
		}
	}
	if c14n == nil {
		return nil, nil, false
	}
	hash, err := v.policy.digestMethod(ref.DigestAlgo.Algorithm)
	if err != nil {
		return nil, err, true
	}
	want, err := base64.StdEncoding.DecodeString(ref.DigestValue)
	if err != nil {
		return nil, err, true
	}
	// The transforms are applied to el itself, not to a copy as
	// goxmldsig does: el is read no more once it verifies (its callers
	// read the tree returned), and refused if it does not.
	if enveloped {
		el.RemoveChildAt(sig.Index())
	}
	referenced, err := c14n.Canonicalize(el)
	if err != nil {
		return nil, err, true
	}
	h := hash.New()
	h.Write(referenced)
	if got := h.Sum(nil); len(got) < 20 || subtle.ConstantTimeCompare(got, want) != 1 {
		return nil, errors.New("Signature could not be verified"), true
	}
	doc := etree.NewDocument()
	if err := doc.ReadFromBytes(referenced); err != nil {
		return nil, err, true
	}
	return doc.Root(), nil, true
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
