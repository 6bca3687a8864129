package samlsp

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/beevik/etree"
	"github.com/crewjam/saml"
	xrv "github.com/mattermost/xml-roundtrip-validator"
	dsig "github.com/russellhaering/goxmldsig"

	"github.com/extauth/extauth/providers"
)

// LogoutSession names the IdP session to end: what Identity.SAML kept.
type LogoutSession struct {
	NameID       string
	NameIDFormat string
	SessionIndex string
}

// LogoutHooks connect single logout to the host's sessions.
type LogoutHooks struct {
	// Session returns the SAML session of the signed-in user of r, for a
	// logout the browser starts at the logout URL. Without it, or when it
	// reports none, the logout URL only redirects to "/".
	Session func(r *http.Request) (LogoutSession, bool)
	// OnIdPLogout ends the host's local sessions for s when the IdP sends a
	// verified LogoutRequest. An error is reported to the IdP as a failed
	// logout.
	OnIdPLogout func(ctx context.Context, s LogoutSession) error
	// Done answers the browser after the IdP confirmed an SP-initiated
	// logout (err nil) or after a LogoutResponse failed validation. Without
	// it the browser is sent to "/" on success and gets a 400 on failure.
	Done func(w http.ResponseWriter, r *http.Request, err *providers.Error)
}

// Limits of the HTTP-Redirect binding's inputs: a logout message is a few
// hundred bytes, and DEFLATE can expand 1000:1, so the bound applies to the
// inflated output, read through a limit, never to the input alone.
const (
	maxRedirectParam = 16 << 10
	maxInflated      = 64 << 10
	logoutLifetime   = 10 * time.Minute
)

// LogoutURL starts an SP-initiated single logout: it returns the URL of the
// IdP's SLO service carrying a LogoutRequest for s (signed with RSA-SHA256
// when security.logout_requests_signed is set). The request ID is recorded
// in the store so that only the IdP's answer to it is accepted.
func (sp *SP) LogoutURL(ctx context.Context, s LogoutSession) (string, error) {
	md := sp.md.current()
	if md == nil {
		sp.md.kick()
		return "", unavailable(sp.md.err())
	}
	if md.sloRedirect == "" {
		return "", &providers.Error{Code: providers.CodeMisconfigured, Provider: Name, Message: "the IdP metadata has no HTTP-Redirect single logout endpoint",
			Err: providers.ErrNoProviderLogout}
	}
	if s.NameID == "" {
		return "", &providers.Error{Code: providers.CodeMisconfigured, Provider: Name, Message: "no NameID to log out"}
	}
	csp := sp.crewjamSP(md)
	// The redirect binding forbids an enveloped signature (Bindings
	// 3.4.4.1); the query signature replaces it.
	csp.SignatureMethod = ""
	req, err := csp.MakeLogoutRequest(md.sloRedirect, s.NameID)
	if err != nil {
		return "", &providers.Error{Code: providers.CodeMisconfigured, Provider: Name, Message: "cannot build the LogoutRequest", Err: err}
	}
	req.NameID.Format = s.NameIDFormat
	if s.SessionIndex != "" {
		req.SessionIndex = &saml.SessionIndex{Value: s.SessionIndex}
	}
	exp := sp.env.Now().Add(logoutLifetime)
	na := exp.UTC()
	req.NotOnOrAfter = &na
	if _, err := sp.env.Store.Consume(ctx, "saml:slo:issued:"+digest(req.ID), exp); err != nil {
		return "", &providers.Error{Code: providers.CodeProviderUnavailable, Provider: Name, Message: "the replay store is unavailable", Err: err}
	}
	csp.SignatureMethod = dsig.RSASHA256SignatureMethod
	return sp.redirectURL(csp, md.sloRedirect, "SAMLRequest", req.Element(), "", sp.cfg.LogoutRequestsSigned)
}

// LogoutHandler serves the single logout URL (/users/auth/saml/logout), GET
// and POST: a LogoutResponse from the IdP finishes an SP-initiated logout; a
// LogoutRequest from the IdP ends the host's session through OnIdPLogout and
// is answered with a LogoutResponse; a request with neither starts an
// SP-initiated logout for the session Hooks.Session reports.
func (sp *SP) LogoutHandler() http.Handler {
	return http.HandlerFunc(sp.serveLogout)
}

func (sp *SP) serveLogout(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if r.Body != nil {
		r.Body = http.MaxBytesReader(w, r.Body, 2*maxRedirectParam)
	}
	msg, err := sp.readLogoutMessage(r)
	if err != nil {
		sp.logoutDone(w, r, err)
		return
	}
	if msg == nil {
		sp.startLogout(w, r)
		return
	}
	if msg.isRequest {
		sp.answerLogoutRequest(w, r, msg)
		return
	}
	sp.logoutDone(w, r, sp.checkLogoutResponse(r.Context(), msg))
}

func (sp *SP) startLogout(w http.ResponseWriter, r *http.Request) {
	// Logging someone out from another site is a nuisance attack; only
	// same-origin or direct navigation may start it.
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		http.Error(w, "cross-site logout refused", http.StatusForbidden)
		return
	}
	if sp.opts.Logout.Session == nil {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	s, ok := sp.opts.Logout.Session(r)
	if !ok {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	u, err := sp.LogoutURL(r.Context(), s)
	if err != nil {
		pe := providers.AsError(err, Name, providers.CodeMisconfigured)
		http.Error(w, pe.Message, pe.Code.HTTPStatus())
		return
	}
	http.Redirect(w, r, u, http.StatusSeeOther)
}

func (sp *SP) logoutDone(w http.ResponseWriter, r *http.Request, err *providers.Error) {
	if err != nil {
		sp.log.Warn("saml: single logout message rejected", "code", err.Code, "err", err.Err)
	}
	if sp.opts.Logout.Done != nil {
		sp.opts.Logout.Done(w, r, err)
		return
	}
	if err != nil {
		http.Error(w, err.Message, err.Code.HTTPStatus())
		return
	}
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// logoutMessage is a verified LogoutRequest or LogoutResponse.
type logoutMessage struct {
	isRequest  bool
	root       *etree.Element
	relayState string
}

// readLogoutMessage decodes and authenticates the SAML message of r, if any.
// The signature is the redirect binding's query signature or, for POST,
// an enveloped XML signature; an unsigned message is refused, since anyone
// could otherwise log a user out or fake the IdP's confirmation.
func (sp *SP) readLogoutMessage(r *http.Request) (*logoutMessage, *providers.Error) {
	md := sp.md.current()
	var param, value, relay string
	redirect := r.Method == http.MethodGet
	if redirect {
		q := r.URL.Query()
		for _, p := range []string{"SAMLRequest", "SAMLResponse"} {
			if v := q.Get(p); v != "" {
				param, value = p, v
			}
		}
		relay = q.Get("RelayState")
	} else {
		if err := r.ParseForm(); err != nil {
			return nil, invalid("the logout message is too large or malformed", err)
		}
		for _, p := range []string{"SAMLRequest", "SAMLResponse"} {
			if v := r.PostForm.Get(p); v != "" {
				param, value = p, v
			}
		}
		relay = r.PostForm.Get("RelayState")
	}
	if param == "" {
		return nil, nil
	}
	if md == nil {
		sp.md.kick()
		return nil, unavailable(sp.md.err())
	}
	if len(value) > maxRedirectParam {
		return nil, invalid("the logout message is too large", nil)
	}
	raw, err := base64.StdEncoding.DecodeString(value)
	if err != nil {
		return nil, invalid("the logout message is not base64", err)
	}
	if redirect {
		if raw, err = inflate(raw); err != nil {
			return nil, invalid("the logout message cannot be inflated", err)
		}
	}
	if err := checkXML(raw); err != nil {
		return nil, invalid("the logout message is not acceptable XML", err)
	}
	if err := xrv.Validate(bytes.NewReader(raw)); err != nil {
		return nil, invalid("the logout message is not acceptable XML", err)
	}
	doc := etree.NewDocument()
	if err := doc.ReadFromBytes(raw); err != nil {
		return nil, invalid("the logout message is not acceptable XML", err)
	}
	root := doc.Root()
	want := "LogoutResponse"
	if param == "SAMLRequest" {
		want = "LogoutRequest"
	}
	if !is(root, nsProtocol, want) {
		return nil, invalid("unexpected logout message", fmt.Errorf("%s is not a %s", root.Tag, want))
	}
	ver := &verifier{certs: md.certs, now: sp.env.Now}
	switch {
	case redirect && r.URL.Query().Get("Signature") != "":
		if err := verifyQuerySignature(r.URL.RawQuery, param, md); err != nil {
			return nil, invalid("the logout message signature is invalid", err)
		}
	case len(children(root, nsDSig, "Signature")) == 1:
		v, err := ver.verify(root)
		if err != nil {
			return nil, invalid("the logout message signature is invalid", err)
		}
		root = v
	default:
		return nil, invalid("the logout message is not signed", nil)
	}
	return &logoutMessage{isRequest: param == "SAMLRequest", root: root, relayState: relay}, nil
}

// inflate undoes the redirect binding's DEFLATE with a bound on the output.
func inflate(data []byte) ([]byte, error) {
	fr := flate.NewReader(bytes.NewReader(data))
	defer fr.Close()
	out, err := io.ReadAll(io.LimitReader(fr, maxInflated+1))
	if err != nil {
		return nil, err
	}
	if len(out) > maxInflated {
		return nil, fmt.Errorf("inflates past %d bytes", maxInflated)
	}
	return out, nil
}

// verifyQuerySignature checks the redirect binding signature over the
// parameters exactly as they appear, still URL-encoded, in the raw query.
func verifyQuerySignature(rawQuery, param string, md *idpMetadata) error {
	raw := map[string]string{}
	for _, kv := range strings.Split(rawQuery, "&") {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := raw[k]; dup {
			return fmt.Errorf("parameter %s repeated", k)
		}
		raw[k] = v
	}
	signed := param + "=" + raw[param]
	if rs, ok := raw["RelayState"]; ok {
		signed += "&RelayState=" + rs
	}
	signed += "&SigAlg=" + raw["SigAlg"]
	alg, err := url.QueryUnescape(raw["SigAlg"])
	if err != nil {
		return err
	}
	sigB64, err := url.QueryUnescape(raw["Signature"])
	if err != nil {
		return err
	}
	sig, err := base64.StdEncoding.DecodeString(sigB64)
	if err != nil {
		return err
	}
	var h hash.Hash
	var ch crypto.Hash
	switch alg {
	case dsig.RSASHA256SignatureMethod:
		h, ch = sha256.New(), crypto.SHA256
	case dsig.RSASHA512SignatureMethod:
		h, ch = sha512.New(), crypto.SHA512
	default:
		return fmt.Errorf("signature algorithm %q not accepted", alg)
	}
	h.Write([]byte(signed))
	sum := h.Sum(nil)
	for _, c := range md.certs {
		if pub, ok := c.PublicKey.(*rsa.PublicKey); ok && rsa.VerifyPKCS1v15(pub, ch, sum, sig) == nil {
			return nil
		}
	}
	return errors.New("no IdP signing certificate verifies the query signature")
}

// checkCommon checks what LogoutRequest and LogoutResponse share.
func (sp *SP) checkCommon(root *etree.Element, md *idpMetadata) error {
	if root.SelectAttrValue("Version", "") != "2.0" {
		return errors.New("version is not 2.0")
	}
	iss, _ := onlyChild(root, nsAssertion, "Issuer")
	if iss == nil || text(iss) != md.entity.EntityID {
		return errors.New("issuer is not the IdP")
	}
	if d := root.SelectAttrValue("Destination", ""); d != "" && d != sp.slo.String() {
		return errors.New("destination is not our SLO URL")
	}
	var ii saml.RelaxedTime
	if err := ii.UnmarshalText([]byte(root.SelectAttrValue("IssueInstant", ""))); err != nil {
		return errors.New("IssueInstant is malformed")
	}
	now := sp.env.Now()
	if t := time.Time(ii); t.IsZero() || t.After(now.Add(sp.opts.ClockSkew)) || t.Before(now.Add(-logoutLifetime)) {
		return errors.New("IssueInstant is out of range")
	}
	return nil
}

func (sp *SP) checkLogoutResponse(ctx context.Context, msg *logoutMessage) *providers.Error {
	md := sp.md.current()
	if err := sp.checkCommon(msg.root, md); err != nil {
		return invalid("the logout response was rejected", err)
	}
	irt := msg.root.SelectAttrValue("InResponseTo", "")
	if irt == "" {
		return invalid("the logout response answers no request", nil)
	}
	// The issued marker was recorded by LogoutURL; finding it fresh here
	// means we never sent that request. The answered marker makes the
	// response single-use.
	exp := sp.env.Now().Add(logoutLifetime)
	issued, err := sp.env.Store.Consume(ctx, "saml:slo:issued:"+digest(irt), exp)
	if err != nil {
		return &providers.Error{Code: providers.CodeProviderUnavailable, Provider: Name, Message: "the replay store is unavailable", Err: err}
	}
	if issued {
		return invalid("the logout response answers a request we did not send", nil)
	}
	fresh, err := sp.env.Store.Consume(ctx, "saml:slo:answered:"+digest(irt), exp)
	if err != nil {
		return &providers.Error{Code: providers.CodeProviderUnavailable, Provider: Name, Message: "the replay store is unavailable", Err: err}
	}
	if !fresh {
		return &providers.Error{Code: providers.CodeReplayed, Provider: Name, Message: "this logout response was already used"}
	}
	status, _ := onlyChild(msg.root, nsProtocol, "Status")
	var code *etree.Element
	if status != nil {
		code, _ = onlyChild(status, nsProtocol, "StatusCode")
	}
	if code == nil || code.SelectAttrValue("Value", "") != statusSuccess {
		return &providers.Error{Code: providers.CodeAccessDenied, Provider: Name, Message: "the identity provider did not complete the logout"}
	}
	return nil
}

// answerLogoutRequest handles an IdP-initiated LogoutRequest.
func (sp *SP) answerLogoutRequest(w http.ResponseWriter, r *http.Request, msg *logoutMessage) {
	md := sp.md.current()
	var req saml.LogoutRequest
	perr := func() *providers.Error {
		if err := sp.checkCommon(msg.root, md); err != nil {
			return invalid("the logout request was rejected", err)
		}
		if err := unmarshalElement(msg.root, &req); err != nil {
			return invalid("the logout request is malformed", err)
		}
		if req.ID == "" || req.NameID == nil || strings.TrimSpace(req.NameID.Value) == "" {
			return invalid("the logout request names no subject", nil)
		}
		if req.NotOnOrAfter != nil && !sp.env.Now().Before(req.NotOnOrAfter.Add(sp.opts.ClockSkew)) {
			return invalid("the logout request has expired", nil)
		}
		fresh, err := sp.env.Store.Consume(r.Context(), "saml:slo:request:"+digest(md.entity.EntityID, req.ID), sp.env.Now().Add(logoutLifetime))
		if err != nil {
			return &providers.Error{Code: providers.CodeProviderUnavailable, Provider: Name, Message: "the replay store is unavailable", Err: err}
		}
		if !fresh {
			return &providers.Error{Code: providers.CodeReplayed, Provider: Name, Message: "this logout request was already used"}
		}
		return nil
	}()
	if perr != nil {
		sp.logoutDone(w, r, perr)
		return
	}
	status := statusSuccess
	if sp.opts.Logout.OnIdPLogout == nil {
		status = "urn:oasis:names:tc:SAML:2.0:status:Responder"
	} else {
		s := LogoutSession{NameID: strings.TrimSpace(req.NameID.Value), NameIDFormat: req.NameID.Format}
		if req.SessionIndex != nil {
			s.SessionIndex = strings.TrimSpace(req.SessionIndex.Value)
		}
		if err := sp.opts.Logout.OnIdPLogout(r.Context(), s); err != nil {
			sp.log.Warn("saml: host failed to end the session for an IdP logout", "err", err)
			status = "urn:oasis:names:tc:SAML:2.0:status:Responder"
		}
	}
	if md.sloRedirect == "" {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	csp := sp.crewjamSP(md)
	csp.SignatureMethod = ""
	resp, err := csp.MakeLogoutResponse(md.sloRedirect, req.ID)
	if err != nil {
		http.Error(w, "cannot answer the logout request", http.StatusInternalServerError)
		return
	}
	resp.Status.StatusCode.Value = status
	csp.SignatureMethod = dsig.RSASHA256SignatureMethod
	u, err := sp.redirectURL(csp, md.sloRedirect, "SAMLResponse", resp.Element(), msg.relayState, sp.key != nil)
	if err != nil {
		http.Error(w, "cannot answer the logout request", http.StatusInternalServerError)
		return
	}
	http.Redirect(w, r, u, http.StatusSeeOther)
}

// MetadataHandler serves our SP metadata: entity ID, the ACS (HTTP-POST
// only), the SLO endpoints, the signing and encryption certificate when the
// key pair is configured, AuthnRequestsSigned and WantAssertionsSigned. It
// does not need the IdP, so it answers even while the IdP is down.
func (sp *SP) MetadataHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		buf, err := sp.Metadata()
		if err != nil {
			http.Error(w, "cannot build the metadata", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/samlmetadata+xml")
		w.Header().Set("Cache-Control", "public, max-age=3600")
		w.Write(buf)
	})
}

// Metadata returns our SP metadata document.
func (sp *SP) Metadata() ([]byte, error) {
	ed := sp.crewjamSP(nil).Metadata()
	for i := range ed.SPSSODescriptors {
		d := &ed.SPSSODescriptors[i]
		// We accept the HTTP-POST binding only: crewjam also advertises
		// HTTP-Artifact, which would make us call out to the IdP.
		var acs []saml.IndexedEndpoint
		for _, e := range d.AssertionConsumerServices {
			if e.Binding == saml.HTTPPostBinding {
				e.Index = 0
				yes := true
				e.IsDefault = &yes
				acs = append(acs, e)
			}
		}
		d.AssertionConsumerServices = acs
		for j := range d.SingleLogoutServices {
			d.SingleLogoutServices[j].ResponseLocation = ""
		}
	}
	out, err := xml.MarshalIndent(ed, "", "  ")
	if err != nil {
		return nil, err
	}
	return append([]byte(xml.Header), out...), nil
}

// ExtraRoutes gives the routes the SP's handlers beyond authorize and
// callback, mounted at /users/auth/saml/metadata and /users/auth/saml/logout.
func (sp *SP) ExtraRoutes() map[string]http.Handler {
	return map[string]http.Handler{"metadata": sp.MetadataHandler(), "logout": sp.LogoutHandler()}
}
