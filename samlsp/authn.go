package samlsp

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/beevik/etree"
	"github.com/crewjam/saml"
	dsig "github.com/russellhaering/goxmldsig"

	"github.com/extauth/extauth/providers"
)

// Begin builds a signed (when the SP key pair is configured) AuthnRequest,
// records its ID and a fresh RelayState handle in tx, and returns the
// HTTP-Redirect URL of the IdP's SSO service.
//
// The post-login destination never travels to the IdP: it stays in the
// sealed transaction (tx.ReturnTo), and RelayState carries only a random
// handle that binds the IdP's answer to this browser's transaction.
func (sp *SP) Begin(ctx context.Context, tx *providers.Transaction) (string, error) {
	csp, req, handle, err := sp.newRequest(tx, saml.HTTPRedirectBinding)
	if err != nil {
		return "", err
	}
	u, err := sp.redirectURL(csp, req.Destination, "SAMLRequest", req.Element(), handle, sp.key != nil)
	if err != nil {
		return "", &providers.Error{Code: providers.CodeMisconfigured, Provider: Name, Message: "cannot encode the SAML request", Err: err}
	}
	if len(sp.cfg.Custom) > 0 {
		u += "&" + sp.customQuery().Encode()
	}
	return u, nil
}

// PostAuthnRequest is Begin for the HTTP-POST binding, for hosts whose IdP
// takes AuthnRequests only by POST: it fills tx as Begin does and returns
// the IdP's SSO location and the form to POST there (render it as an
// auto-submitting form). With the key pair the request carries an enveloped
// RSA-SHA256 XML signature. Custom entries are added to the form.
func (sp *SP) PostAuthnRequest(ctx context.Context, tx *providers.Transaction) (action string, form url.Values, err error) {
	_, req, handle, err := sp.newRequest(tx, saml.HTTPPostBinding)
	if err != nil {
		return "", nil, err
	}
	doc := etree.NewDocument()
	doc.SetRoot(req.Element())
	x, err := doc.WriteToBytes()
	if err != nil {
		return "", nil, &providers.Error{Code: providers.CodeMisconfigured, Provider: Name, Message: "cannot encode the SAML request", Err: err}
	}
	form = sp.customQuery()
	form.Set("SAMLRequest", base64.StdEncoding.EncodeToString(x))
	form.Set("RelayState", handle)
	return req.Destination, form, nil
}

func (sp *SP) customQuery() url.Values {
	v := url.Values{}
	for _, p := range sp.cfg.Custom {
		v.Add(p.Name, p.Value)
	}
	return v
}

// newRequest builds the AuthnRequest for binding and records what the
// callback needs in tx.
func (sp *SP) newRequest(tx *providers.Transaction, binding string) (*saml.ServiceProvider, *saml.AuthnRequest, string, error) {
	md := sp.md.current()
	if md == nil {
		sp.md.kick()
		return nil, nil, "", unavailable(sp.md.err())
	}
	sso := sp.cfg.IdPSSOServiceURL
	if sso == "" {
		sso = md.ssoRedirect
		if binding == saml.HTTPPostBinding {
			sso = md.ssoPost
		}
	}
	if sso == "" {
		return nil, nil, "", &providers.Error{Code: providers.CodeMisconfigured, Provider: Name,
			Message: "the IdP metadata has no single sign-on endpoint for this binding; set saml_idp_sso_service_url"}
	}
	csp := sp.crewjamSP(md)
	// crewjam signs the XML only for the POST binding; for the redirect
	// binding redirectURL signs the query.
	req, err := csp.MakeAuthenticationRequest(sso, binding, saml.HTTPPostBinding)
	if err != nil {
		return nil, nil, "", &providers.Error{Code: providers.CodeMisconfigured, Provider: Name, Message: "cannot build the SAML request", Err: err}
	}
	handle, err := randomHandle()
	if err != nil {
		return nil, nil, "", err
	}
	tx.RequestID = req.ID
	tx.Binding = handle
	// The routes default return_to to "/": an explicit path from the
	// request wins, otherwise the configured RelayState is the destination.
	switch p, ok := SafeReturnPath(tx.ReturnTo, sp.origin); {
	case ok && p != "/":
		tx.ReturnTo = p
	case sp.relayDst != "":
		tx.ReturnTo = sp.relayDst
	default:
		tx.ReturnTo = "/"
	}
	return csp, req, handle, nil
}

// Binding returns the RelayState of the IdP's POST: the handle Begin chose.
func (sp *SP) Binding(r *http.Request) string {
	if err := sp.parseForm(r); err != nil {
		return ""
	}
	return r.PostForm.Get("RelayState")
}

// parseForm parses the callback form under our own bound when the routes
// have not parsed it already.
func (sp *SP) parseForm(r *http.Request) error {
	if r.PostForm != nil {
		return nil
	}
	if r.Body != nil {
		r.Body = http.MaxBytesReader(nil, r.Body, sp.MaxCallbackBytes())
	}
	return r.ParseForm()
}

// randomHandle returns 128 random bits, base64url: 22 bytes on the wire,
// well under the 80 bytes the binding allows for RelayState.
func randomHandle() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("saml: random RelayState: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// redirectURL encodes a protocol message for the HTTP-Redirect binding
// (SAML Bindings 3.4.4): DEFLATE, base64, then, when sign is set, an
// RSA-SHA256 signature over exactly "SAMLRequest=...&RelayState=...&SigAlg=..."
// as the binding defines it, whatever query the destination already has.
// (crewjam's AuthnRequest.Redirect signs the destination's own query too, and
// its LogoutRequest.Redirect does not sign at all.)
func (sp *SP) redirectURL(csp *saml.ServiceProvider, dest, param string, el *etree.Element, relayState string, sign bool) (string, error) {
	var buf bytes.Buffer
	b64 := base64.NewEncoder(base64.StdEncoding, &buf)
	fw, err := flate.NewWriter(b64, flate.BestCompression)
	if err != nil {
		return "", err
	}
	doc := etree.NewDocument()
	doc.SetRoot(el)
	if _, err := doc.WriteTo(fw); err != nil {
		return "", err
	}
	if err := fw.Close(); err != nil {
		return "", err
	}
	if err := b64.Close(); err != nil {
		return "", err
	}
	q := param + "=" + url.QueryEscape(buf.String())
	if relayState != "" {
		q += "&RelayState=" + url.QueryEscape(relayState)
	}
	if sign {
		if csp.Key == nil {
			return "", errors.New("signing needs the SP key pair")
		}
		q += "&SigAlg=" + url.QueryEscape(dsig.RSASHA256SignatureMethod)
		sc, err := saml.GetSigningContext(csp)
		if err != nil {
			return "", err
		}
		sig, err := sc.SignString(q)
		if err != nil {
			return "", err
		}
		q += "&Signature=" + url.QueryEscape(base64.StdEncoding.EncodeToString(sig))
	}
	u, err := url.Parse(dest)
	if err != nil {
		return "", err
	}
	if u.RawQuery != "" {
		u.RawQuery += "&" + q
	} else {
		u.RawQuery = q
	}
	return u.String(), nil
}
