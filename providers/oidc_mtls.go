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
	"net"
	"net/url"
	"strings"

	jose "github.com/go-jose/go-jose/v4"
	"golang.org/x/net/publicsuffix"
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
//
// An alias is the endpoint it stands for reached with mutual TLS (RFC
// 8705 5): another host or port of the same deployment. It gets the
// connections that present the client's certificate, and the codes,
// refresh tokens and access tokens sent there, so it must be on the site
// of the issuer or of the endpoint it stands for (aliasSite); one on
// another site is refused, not used: a discovery document cannot send the
// certificate-authenticated requests anywhere it does not already send
// that endpoint's.
func (s *OIDC) useMTLSAliases(d *discovered, doc *OIDCDiscovery) error {
	a := doc.MTLSEndpointAliases
	if len(s.tls) == 0 || a == nil {
		return nil
	}
	for _, e := range []struct {
		// top is the endpoint of that name at the document's top level.
		name, url, top string
		dst            *string
	}{
		{"token_endpoint", a.TokenEndpoint, doc.TokenEndpoint, &d.oauth.Endpoint.TokenURL},
		{"pushed_authorization_request_endpoint", a.PAREndpoint, doc.PAREndpoint, &d.parURL},
		{"userinfo_endpoint", a.UserInfoEndpoint, doc.UserInfoEndpoint, &d.userInfoURL},
		{"revocation_endpoint", a.RevocationEndpoint, doc.RevocationEndpoint, &d.revocationURL},
	} {
		if e.url == "" {
			continue
		}
		err := CheckOIDCEndpoint(e.url, s.issuer)
		if err == nil && !aliasSite(e.url, s.issuer, e.top) {
			err = fmt.Errorf("is on another site than the issuer and the %s it stands for: an alias gets the connections "+
				"that present the client's TLS certificate, and the tokens, so it must be on one of theirs", e.name)
		}
		if err != nil {
			return NewError(CodeMisconfigured, "the provider's discovery document has an unusable endpoint",
				fmt.Errorf("discovery: mtls_endpoint_aliases.%s %.200q: %w", e.name, e.url, err))
		}
		*e.dst = e.url
	}
	return nil
}

// aliasSite reports whether the alias URL is on the site of the issuer or
// of the endpoint it stands for ("" when discovery names none).
func aliasSite(alias, issuer, endpoint string) bool {
	host := func(raw string) string {
		u, err := url.Parse(raw)
		if err != nil {
			return ""
		}
		return u.Hostname()
	}
	h := host(alias)
	return sameSite(h, host(issuer)) || endpoint != "" && sameSite(h, host(endpoint))
}

// sameSite reports whether hosts a and b are of one site: the same host,
// or hosts of one registrable domain by the public suffix list
// (mtls.auth.example.com and auth.example.com; oauth2.mtls.example.co.uk
// and oauth2.example.co.uk, not example.co.uk and other.co.uk). An IP
// address, or a name without a registrable domain (localhost), is a site
// of its own.
func sameSite(a, b string) bool {
	a, b = strings.TrimSuffix(strings.ToLower(a), "."), strings.TrimSuffix(strings.ToLower(b), ".")
	if a == "" || b == "" {
		return false
	}
	if a == b {
		return true
	}
	if net.ParseIP(a) != nil || net.ParseIP(b) != nil {
		return false
	}
	ra, errA := publicsuffix.EffectiveTLDPlusOne(a)
	rb, errB := publicsuffix.EffectiveTLDPlusOne(b)
	return errA == nil && errB == nil && ra == rb
}

// mtlsAliases are the endpoints a provider serves with mutual TLS (RFC
// 8705 5), which a client that presents a certificate uses instead.
type mtlsAliases struct {
	TokenEndpoint      string `json:"token_endpoint"`
	PAREndpoint        string `json:"pushed_authorization_request_endpoint"`
	UserInfoEndpoint   string `json:"userinfo_endpoint"`
	RevocationEndpoint string `json:"revocation_endpoint"`
}
