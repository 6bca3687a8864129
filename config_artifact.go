package extauth

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/extauth/extauth/samlsp"
)

// SAMLArtifact is saml_additional_settings.artifact: the back-channel of
// the HTTP-Artifact binding, which response_binding: artifact asks the IdP
// to answer by (see docs/saml.md, "Artifact binding").
type SAMLArtifact struct {
	// TLSCertificate and TLSPrivateKey (tls_certificate, tls_private_key)
	// are the TLS client certificate presented to the IdP's
	// ArtifactResolutionService and its key, when it is not the SP key
	// pair (certificate, private_key), which is presented otherwise.
	TLSCertificate string
	TLSPrivateKey  Secret
	// TLSCertificateNew and TLSPrivateKeyNew (…_new) are the next TLS
	// pair of a rotation: published in the SP metadata, not presented yet.
	TLSCertificateNew string
	TLSPrivateKeyNew  Secret
	// IdPTLSCertificate (idp_tls_certificate) is one or more PEM
	// certificates the IdP's TLS server certificate must be, or be issued
	// by, instead of one the system's roots trust.
	IdPTLSCertificate string
	// WantResponseSigned (want_response_signed) refuses an
	// ArtifactResponse the IdP did not sign.
	WantResponseSigned bool
}

func (a SAMLArtifact) isZero() bool {
	return a.TLSCertificate == "" && a.TLSPrivateKey.IsZero() && a.TLSCertificateNew == "" && a.TLSPrivateKeyNew.IsZero() &&
		a.IdPTLSCertificate == "" && !a.WantResponseSigned
}

// Strategy returns the settings as the SAML strategy takes them
// (samlsp.Config.Artifact), for a tool that checks them as it does
// (samlsp.CheckArtifactTLS).
func (a SAMLArtifact) Strategy() samlsp.ArtifactConfig {
	return samlsp.ArtifactConfig{
		TLSCertificatePEM:    a.TLSCertificate,
		TLSPrivateKeyPEM:     a.TLSPrivateKey.Value(),
		TLSCertificateNewPEM: a.TLSCertificateNew,
		TLSPrivateKeyNewPEM:  a.TLSPrivateKeyNew.Value(),
		IdPTLSCertificatePEM: a.IdPTLSCertificate,
		WantResponseSigned:   a.WantResponseSigned,
	}
}

// artifactEntries are the entries of saml_additional_settings.artifact.
var artifactEntries = []string{"tls_certificate", "tls_private_key", "tls_certificate_new", "tls_private_key_new",
	"idp_tls_certificate", "want_response_signed"}

// artifact reads saml_additional_settings.artifact.
func (l *loader) artifact(n *yaml.Node) SAMLArtifact {
	const key = keyAdditional + ".artifact"
	var a SAMLArtifact
	for _, e := range l.mapping(SAML, key, n) {
		k := key + "." + e.key
		switch e.key {
		case "tls_certificate", "tls_certificate_new", "idp_tls_certificate":
			dst := map[string]*string{"tls_certificate": &a.TLSCertificate, "tls_certificate_new": &a.TLSCertificateNew,
				"idp_tls_certificate": &a.IdPTLSCertificate}[e.key]
			*dst, _ = l.scalar(SAML, k, e.val)
			l.notePEM(k, e.val, *dst)
		case "tls_private_key", "tls_private_key_new":
			v, _ := l.scalar(SAML, k, e.val)
			*map[string]*Secret{"tls_private_key": &a.TLSPrivateKey, "tls_private_key_new": &a.TLSPrivateKeyNew}[e.key] = NewSecret(v)
			l.notePEM(k, e.val, v)
		case "want_response_signed":
			a.WantResponseSigned = l.boolean(SAML, k, e.val)
		default:
			l.unsupported(k, e.key, artifactEntries)
		}
	}
	return a
}

// artifactProblems checks response_binding and the artifact settings.
func (s SAMLAdditionalSettings) artifactProblems() []Problem {
	const pre = keyAdditional + "."
	var ps []Problem
	bad := func(key, reason string, err error) {
		ps = append(ps, Problem{Provider: SAML, Key: pre + key, Reason: reason, Err: err})
	}
	a := s.Artifact
	switch s.ResponseBinding {
	case "", samlsp.ResponsePOST:
		if !a.isZero() {
			bad("artifact", "applies to response_binding: artifact only", ErrInvalidSetting)
		}
		return ps
	case samlsp.ResponseArtifact:
	default:
		bad("response_binding", "must be post or artifact", ErrInvalidSetting)
		return ps
	}
	if !s.HasKeyPair() && a.TLSCertificate == "" {
		bad("response_binding", "artifact needs a key pair to authenticate the ArtifactResolve with: the SP key pair (certificate and private_key), "+
			"or artifact.tls_certificate and artifact.tls_private_key", ErrMissingSetting)
	}
	tlsPair := func(cert string, key Secret, certName, keyName string) {
		switch {
		case cert == "" && key.IsZero():
		case cert == "" || key.IsZero():
			bad("artifact."+certName, "and artifact."+keyName+" must be set together", ErrInvalidKeyPair)
		default:
			if _, err := tls.X509KeyPair([]byte(cert), []byte(key.Value())); err != nil {
				bad("artifact."+keyName, "is not a PEM private key that matches artifact."+certName, ErrInvalidKeyPair)
			}
		}
	}
	tlsPair(a.TLSCertificate, a.TLSPrivateKey, "tls_certificate", "tls_private_key")
	tlsPair(a.TLSCertificateNew, a.TLSPrivateKeyNew, "tls_certificate_new", "tls_private_key_new")
	if a.TLSCertificateNew != "" && a.TLSCertificate == "" {
		bad("artifact.tls_certificate_new", "is the next TLS pair of a rotation, but there is no current one (artifact.tls_certificate)", ErrMissingSetting)
	}
	if a.IdPTLSCertificate != "" && !certificatesOnly(a.IdPTLSCertificate) {
		bad("artifact.idp_tls_certificate", "must hold one or more PEM certificates and nothing else", ErrInvalidSetting)
	}
	return ps
}

// certificatesOnly reports whether s is one or more PEM certificates that
// parse, and nothing else.
func certificatesOnly(s string) bool {
	rest, n := []byte(s), 0
	for {
		b, r := pem.Decode(rest)
		if b == nil {
			break
		}
		if _, err := x509.ParseCertificate(b.Bytes); b.Type != "CERTIFICATE" || err != nil {
			return false
		}
		rest, n = r, n+1
	}
	return n > 0 && strings.TrimSpace(string(rest)) == ""
}
