package oidcop

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
)

// What the provider does for mutual TLS (RFC 8705), served over TLS with
// client certificates requested (tls.RequestClientCert): it authenticates
// a client by its certificate (tls_client_auth: chained to ClientCAs,
// with the registered subject; self_signed_tls_client_auth: one of the
// certificates of the client's JWKS), and with Config.MTLS binds access
// tokens to the certificate the token request presented (cnf x5t#S256),
// takes them at UserInfo only over a connection that presents it, and
// serves mtls_endpoint_aliases under /mtls/.

// MTLS counts the requests to the mTLS endpoint aliases (Hits).
const MTLS Endpoint = "mtls"

// mtlsPrefix is where the aliases are served, under the issuer's path.
const mtlsPrefix = "/mtls"

// peerCertificate is the certificate r's TLS connection presented, nil
// when there is none.
func peerCertificate(r *http.Request) *x509.Certificate {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return nil
	}
	return r.TLS.PeerCertificates[0]
}

// thumbprint is a certificate's x5t#S256 (RFC 8705 3.1).
func thumbprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// tlsAuthenticated checks a client that authenticates by its TLS
// certificate (RFC 8705 2): a certificate presented, the client named in
// the form, nothing else authenticating it, and the certificate the one
// the client registered.
func (op *OP) tlsAuthenticated(r *http.Request) error {
	f := r.PostForm
	if _, _, basic := r.BasicAuth(); basic || f.Has("client_secret") || f.Has("client_assertion") {
		return errors.New("more than one authentication method")
	}
	if f.Get("client_id") != op.cfg.ClientID {
		return errors.New("the form names another client")
	}
	cert := peerCertificate(r)
	if cert == nil {
		return errors.New("no client certificate")
	}
	switch op.cfg.AuthMethod {
	case "tls_client_auth":
		if op.cfg.ClientCAs == nil {
			return errors.New("no CA to check the certificate against")
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: op.cfg.ClientCAs, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			return err
		}
		if cert.Subject.String() != op.cfg.TLSClientSubjectDN {
			return errors.New("the certificate's subject is not the one registered")
		}
		return nil
	case "self_signed_tls_client_auth":
		set, err := op.clientKeys()
		if err != nil {
			return err
		}
		for _, k := range set.Keys {
			for _, c := range k.Certificates {
				if bytes.Equal(c.Raw, cert.Raw) {
					return nil
				}
			}
		}
		return errors.New("the certificate is not in the client's JWKS")
	}
	return errors.New("not a TLS method")
}

// certificateBound is the thumbprint r's certificate binds the tokens it
// obtains to, "" when the provider does not bind them (or r presents
// none).
func (op *OP) certificateBound(r *http.Request) string {
	if c := peerCertificate(r); op.cfg.MTLS && c != nil {
		return thumbprint(c)
	}
	return ""
}

// presentsBound reports whether r's connection presents the certificate a
// token is bound to (RFC 8705 3).
func presentsBound(r *http.Request, x5t string) bool {
	c := peerCertificate(r)
	return c != nil && subtle.ConstantTimeCompare([]byte(thumbprint(c)), []byte(x5t)) == 1
}

// mtlsAliases are the aliases discovery lists with Config.MTLS.
func (op *OP) mtlsAliases() map[string]string {
	base := strings.TrimSuffix(op.cfg.Issuer, "/") + mtlsPrefix
	tokenPath, _ := op.paths()
	return map[string]string{
		"token_endpoint":                        base + tokenPath,
		"pushed_authorization_request_endpoint": base + "/par",
		"userinfo_endpoint":                     base + "/userinfo",
		"revocation_endpoint":                   base + "/revoke",
	}
}
