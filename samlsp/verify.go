package samlsp

import (
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"github.com/beevik/etree"
	dsig "github.com/russellhaering/goxmldsig"
)

// verifier checks enveloped XML signatures against the IdP's signing
// certificates from its metadata. It is also crewjam's SignatureVerifier, so
// crewjam's checks and ours trust exactly the same keys.
//
// goxmldsig, given several trusted certificates and no KeyInfo, gives up
// ("Missing x509 Element"); given KeyInfo, it looks the certificate up among
// the trusted ones. We drop KeyInfo and try each trusted certificate in turn:
// rotation works whatever the IdP puts in KeyInfo, and a certificate inside
// the message is never what decides.
type verifier struct {
	certs []*x509.Certificate
	now   func() time.Time
}

// VerifySignature implements saml.SignatureVerifier.
func (v *verifier) VerifySignature(_ *dsig.ValidationContext, el *etree.Element) error {
	_, err := v.verify(el)
	return err
}

// verify checks the signature that is a direct child of el and references
// el, and returns the element as the signature covers it (canonicalized,
// without the signature): callers read only from that tree.
func (v *verifier) verify(el *etree.Element) (*etree.Element, error) {
	det, err := detach(el)
	if err != nil {
		return nil, fmt.Errorf("signature on %s: %w", el.Tag, err)
	}
	removeKeyInfo(det)
	if len(v.certs) == 0 {
		return nil, errors.New("no IdP signing certificate")
	}
	var errs []error
	for _, cert := range v.certs {
		vc := dsig.NewDefaultValidationContext(&dsig.MemoryX509CertificateStore{Roots: []*x509.Certificate{cert}})
		vc.IdAttribute = "ID"
		vc.Clock = dsig.NewFakeClockAt(v.now())
		out, err := vc.Validate(det)
		if err == nil {
			return out, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("signature on %s does not verify with any IdP signing certificate: %w", el.Tag, errors.Join(errs...))
}
