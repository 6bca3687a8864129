package providers

import (
	"crypto"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"

	jose "github.com/go-jose/go-jose/v4"
)

// Mutual TLS (RFC 8705): the client presents a TLS certificate to the
// provider, which authenticates it by the certificate (tls_client_auth,
// against a CA and the registered subject; self_signed_tls_client_auth,
// against the certificates of the client's JWKS) and binds the access
// tokens to it (tls_client_certificate_bound_access_tokens). With a
// certificate configured, extauth presents it on every connection to the
// provider and to the resource servers Auth.Client calls, and uses the
// provider's mtls_endpoint_aliases for the token, pushed authorization
// request, UserInfo and revocation endpoints.

// The client authentication methods of RFC 8705 2.
const (
	// AuthMethodTLS authenticates the client by its TLS certificate,
	// issued by a CA the provider trusts, whose subject it registered.
	AuthMethodTLS = "tls_client_auth"
	// AuthMethodSelfSignedTLS authenticates the client by a certificate
	// published in its JWKS (the JWKS route serves it as x5c).
	AuthMethodSelfSignedTLS = "self_signed_tls_client_auth"
)

// tlsPair is one of the client's TLS certificates and its key.
type tlsPair struct {
	cert *tls.Certificate
	// thumbprint is the certificate's SHA-256 thumbprint (x5t#S256); kid,
	// the key ID the JWKS route publishes the certificate under, is made
	// of it.
	thumbprint []byte
	kid        string
}

// parseTLSPair reads a certificate and its private key, PEM; the key must
// be RSA of 2048 bits or more, or EC P-256 (ParseOIDCPrivateKey), and
// match the certificate. The errors are fixed text that never quotes the
// input; keyErr says which of the two is wrong.
func parseTLSPair(certPEM, keyPEM string) (p *tlsPair, certErr, keyErr error) {
	block, _ := pem.Decode([]byte(certPEM))
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("must be a PEM block of type CERTIFICATE"), nil
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, errors.New("does not parse as an X.509 certificate"), nil
	}
	key, err := ParseOIDCPrivateKey(keyPEM)
	if err != nil {
		return nil, nil, err
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(leaf.PublicKey) {
		return nil, nil, errors.New("does not match tls_client_certificate")
	}
	sum := sha256.Sum256(leaf.Raw)
	return &tlsPair{
		cert:       &tls.Certificate{Certificate: [][]byte{leaf.Raw}, PrivateKey: key, Leaf: leaf},
		thumbprint: sum[:],
		kid:        "x5t-" + base64.RawURLEncoding.EncodeToString(sum[:]),
	}, nil, nil
}

// tlsMethod reports whether method authenticates by the TLS certificate.
func tlsMethod(method string) bool {
	return method == AuthMethodTLS || method == AuthMethodSelfSignedTLS
}

// clientCertificate presents the client's current certificate to a
// server that asks for one.
func (s *OIDC) clientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return s.tls[0].cert, nil
}

// tlsJWKs are the certificates self_signed_tls_client_auth publishes in
// the client's JWKS, each as its public key with x5c (RFC 8705 2.2.2).
func (s *OIDC) tlsJWKs() []jose.JSONWebKey {
	if s.opts.AuthMethod != AuthMethodSelfSignedTLS {
		return nil
	}
	var out []jose.JSONWebKey
	for _, p := range s.tls {
		leaf := p.cert.Leaf
		out = append(out, jose.JSONWebKey{Key: leaf.PublicKey, KeyID: p.kid, Use: "sig",
			Certificates: []*x509.Certificate{leaf}, CertificateThumbprintSHA256: p.thumbprint})
	}
	return out
}

// useMTLSAliases points d at the provider's mtls_endpoint_aliases when the
// client presents a certificate: the token, pushed authorization request,
// UserInfo and revocation endpoints, each that the provider aliases.
func (s *OIDC) useMTLSAliases(d *discovered, doc *OIDCDiscovery) error {
	a := doc.MTLSEndpointAliases
	if len(s.tls) == 0 || a == nil {
		return nil
	}
	for _, e := range []struct {
		name, url string
		dst       *string
	}{
		{"token_endpoint", a.TokenEndpoint, &d.oauth.Endpoint.TokenURL},
		{"pushed_authorization_request_endpoint", a.PAREndpoint, &d.parURL},
		{"userinfo_endpoint", a.UserInfoEndpoint, &d.userInfoURL},
		{"revocation_endpoint", a.RevocationEndpoint, &d.revocationURL},
	} {
		if e.url == "" {
			continue
		}
		if err := CheckOIDCEndpoint(e.url, s.issuer); err != nil {
			return NewError(CodeMisconfigured, "the provider's discovery document has an unusable endpoint",
				fmt.Errorf("discovery: mtls_endpoint_aliases.%s %.200q: %w", e.name, e.url, err))
		}
		*e.dst = e.url
	}
	return nil
}

// mtlsAliases are the endpoints a provider serves with mutual TLS (RFC
// 8705 5), which a client that presents a certificate uses instead.
type mtlsAliases struct {
	TokenEndpoint      string `json:"token_endpoint"`
	PAREndpoint        string `json:"pushed_authorization_request_endpoint"`
	UserInfoEndpoint   string `json:"userinfo_endpoint"`
	RevocationEndpoint string `json:"revocation_endpoint"`
}
