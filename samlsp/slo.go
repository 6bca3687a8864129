package samlsp

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/beevik/etree"
	"github.com/crewjam/saml"

	"github.com/extauth/extauth/providers"
)

// LogoutSession names the IdP session to end: what Identity.SAML kept.
// The NameID is whole: its value and its Format, NameQualifier,
// SPNameQualifier and SPProvidedID as the IdP sent them, "" when it sent
// none. LogoutURL sends it back exactly so (SAML Core 3.7.1), each
// attribute present where it is not empty: an IdP that matches NameIDs
// exactly finds no session for one with a qualifier added or dropped.
type LogoutSession struct {
	NameID          string
	NameIDFormat    string
	NameQualifier   string
	SPNameQualifier string
	SPProvidedID    string
	// NameIDEncrypted is true when the IdP sent the NameID as an
	// EncryptedID: LogoutURL then encrypts it to the IdP (see
	// Config.NameIDEncrypted).
	NameIDEncrypted bool
	SessionIndex    string
	// IdP is the entity ID of the IdP the session is at (Identity.SAML's
	// IdP): in a federation, the logout goes to that IdP.
	IdP string
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
	// Start, when set, answers a request to the logout URL that carries
	// no SAML message: a sign-out the host's page starts. The root
	// package sets it, to apply its start rules and hooks; without it the
	// SP starts the logout itself, for a same-origin request only.
	Start func(w http.ResponseWriter, r *http.Request)
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
	md, perr := sp.idpFor(ctx, s.IdP)
	if perr != nil {
		return "", perr
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
	if s.SessionIndex != "" {
		req.SessionIndex = &saml.SessionIndex{Value: s.SessionIndex}
	}
	// crewjam's NameID has the IdP's and our entity IDs as qualifiers,
	// whatever the IdP sent: the assertion's goes in its place, each
	// qualifier present when the IdP sent it (Element leaves out the empty
	// ones).
	req.NameID = &saml.NameID{NameQualifier: s.NameQualifier, SPNameQualifier: s.SPNameQualifier,
		Format: s.NameIDFormat, SPProvidedID: s.SPProvidedID, Value: s.NameID}
	now := sp.env.Now().UTC()
	req.IssueInstant = now
	exp := now.Add(logoutLifetime)
	req.NotOnOrAfter = &exp
	if _, err := sp.env.Store.Consume(ctx, storeKey("saml:slo:issued:", req.ID), exp); err != nil {
		return "", &providers.Error{Code: providers.CodeProviderUnavailable, Provider: Name, Message: "the replay store is unavailable", Err: err}
	}
	el := req.Element()
	if err := sp.encryptLogoutNameID(el, md, s); err != nil {
		return "", err
	}
	return sp.redirectURL(md.sloRedirect, "SAMLRequest", el, "", sp.cfg.LogoutRequestsSigned)
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
		if sp.opts.Logout.Start != nil {
			sp.opts.Logout.Start(w, r)
			return
		}
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
	// Logging someone out from another site is a nuisance attack: only a
	// request the browser marks as this site's (or as typed) may start it.
	// A request without fetch metadata says nothing of who sent it, so it
	// is refused too (the root package's route asks for a click instead).
	site, origin := r.Header.Get("Sec-Fetch-Site"), r.Header.Get("Origin")
	if !(site == "same-origin" || site == "none" || (site == "" && origin != "" && origin == sp.origin)) ||
		(origin != "" && origin != sp.origin) {
		http.Error(w, "sign-out must start from this site", http.StatusForbidden)
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
	if errors.Is(err, providers.ErrNoProviderLogout) {
		// The host ended its own session before sending the browser here;
		// with no single logout at the IdP, that is all there is to do.
		sp.log.Info("saml: the IdP publishes no HTTP-Redirect single logout endpoint: signed out of this application only, the IdP keeps its session")
		sp.logoutDone(w, r, nil)
		return
	}
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
	// md is the IdP metadata the message was verified with.
	md *idpMetadata
}

// bindingParams are the parameter names of the HTTP-Redirect binding
// (SAML Bindings 3.4.4.1).
var bindingParams = []string{"SAMLRequest", "SAMLResponse", "RelayState", "SigAlg", "Signature", "SAMLEncoding"}

// redirectMessage is an HTTP-Redirect binding message as the raw query
// carries it.
type redirectMessage struct {
	// param is SAMLRequest or SAMLResponse; message, relayState, sigAlg
	// and signature are the decoded values.
	param, message, relayState, sigAlg, signature string
	// signed is what the signature covers, exactly as the octets arrived:
	// param=...[&RelayState=...]&SigAlg=... (Bindings 3.4.4.1).
	signed string
}

// parseRedirectQuery reads the binding's parameters from the raw query
// once. The message, RelayState, SigAlg and Signature are decoded from the
// very octets the signature is checked over, so that what is verified is
// what is processed. A query that names one of them twice, or in
// percent-encoded form (SAML%52equest, which another parser would decode
// into a second SAMLRequest), or carries both SAMLRequest and SAMLResponse,
// is refused. It returns nil when the query carries no message.
func parseRedirectQuery(rawQuery string) (*redirectMessage, error) {
	raw := map[string]string{}
	for _, kv := range strings.Split(rawQuery, "&") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			return nil, errors.New("a query parameter name is malformed")
		}
		for _, p := range bindingParams {
			// Whatever another reader could take for p (another case,
			// spaces from '+', escapes) must be p exactly.
			if !strings.EqualFold(strings.TrimSpace(name), p) {
				continue
			}
			if k != p {
				return nil, fmt.Errorf("the query names %s in an altered form", p)
			}
			if _, dup := raw[p]; dup {
				return nil, fmt.Errorf("the query names %s twice", p)
			}
			raw[p] = v
		}
	}
	m := &redirectMessage{}
	_, req := raw["SAMLRequest"]
	_, resp := raw["SAMLResponse"]
	switch {
	case req && resp:
		return nil, errors.New("the query carries both SAMLRequest and SAMLResponse")
	case req:
		m.param = "SAMLRequest"
	case resp:
		m.param = "SAMLResponse"
	default:
		return nil, nil
	}
	if enc, ok := raw["SAMLEncoding"]; ok && enc != url.QueryEscape(deflateEncoding) {
		return nil, errors.New("only the DEFLATE encoding is supported")
	}
	m.signed = m.param + "=" + raw[m.param]
	if rs, ok := raw["RelayState"]; ok {
		m.signed += "&RelayState=" + rs
	}
	m.signed += "&SigAlg=" + raw["SigAlg"]
	for _, f := range []struct {
		dst *string
		key string
	}{{&m.message, m.param}, {&m.relayState, "RelayState"}, {&m.sigAlg, "SigAlg"}, {&m.signature, "Signature"}} {
		v, err := url.QueryUnescape(raw[f.key])
		if err != nil {
			return nil, fmt.Errorf("the query parameter %s is malformed", f.key)
		}
		*f.dst = v
	}
	return m, nil
}

const deflateEncoding = "urn:oasis:names:tc:SAML:2.0:bindings:URL-Encoding:DEFLATE"

// readLogoutMessage decodes and authenticates the SAML message of r, if any.
// The signature is the redirect binding's query signature or, for POST, an
// enveloped XML signature; an unsigned message is refused, since anyone
// could otherwise log a user out or fake the IdP's confirmation.
func (sp *SP) readLogoutMessage(r *http.Request) (*logoutMessage, *providers.Error) {
	if msg, ok, perr := sp.readLogoutArtifact(r); ok {
		return msg, perr
	}
	var param, value, relay string
	var query *redirectMessage
	redirect := r.Method == http.MethodGet
	if redirect {
		var err error
		if query, err = parseRedirectQuery(r.URL.RawQuery); err != nil {
			return nil, invalid("the logout message query is malformed", err)
		}
		if query != nil {
			param, value, relay = query.param, query.message, query.relayState
		}
	} else {
		if err := r.ParseForm(); err != nil {
			return nil, invalid("the logout message is too large or malformed", err)
		}
		for _, p := range []string{"SAMLRequest", "SAMLResponse", "RelayState"} {
			if len(r.PostForm[p]) > 1 {
				return nil, invalid("the logout message is malformed", fmt.Errorf("%s given twice", p))
			}
		}
		for _, p := range []string{"SAMLRequest", "SAMLResponse"} {
			if v := r.PostForm.Get(p); v != "" {
				if param != "" {
					return nil, invalid("the logout message is malformed", errors.New("both SAMLRequest and SAMLResponse"))
				}
				param, value = p, v
			}
		}
		relay = r.PostForm.Get("RelayState")
	}
	if param == "" {
		return nil, nil
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
	root, err := parseXML(raw)
	if err != nil {
		return nil, invalid("the logout message is not acceptable XML", err)
	}
	want := "LogoutResponse"
	if param == "SAMLRequest" {
		want = "LogoutRequest"
	}
	if !is(root, nsProtocol, want) {
		return nil, invalid("unexpected logout message", fmt.Errorf("%s is not a %s", root.Tag, want))
	}
	if err := checkLogoutShape(root); err != nil {
		return nil, invalid("the logout message has an unexpected structure", err)
	}
	// In a federation, the message is checked against the IdP it names,
	// with that IdP's keys alone.
	var issuer string
	if iss, _ := onlyChild(root, nsAssertion, "Issuer"); iss != nil {
		issuer = text(iss)
	}
	md, perr := sp.idpFor(r.Context(), issuer)
	if perr != nil {
		return nil, perr
	}
	ver := sp.verifier(md)
	if redirect {
		// The binding carries the signature in the query and forbids one
		// inside the message (Bindings 3.4.4.1).
		if query.signature == "" {
			return nil, invalid("the logout message is not signed", nil)
		}
		sig, err := base64.StdEncoding.DecodeString(query.signature)
		if err != nil {
			return nil, invalid("the logout message signature is invalid", err)
		}
		if err := ver.verifyQuery(query.signed, query.sigAlg, sig); err != nil {
			return nil, invalid("the logout message signature is invalid", err)
		}
	} else {
		v, err := ver.verify(root)
		if errors.Is(err, errNotSigned) {
			return nil, invalid("the logout message is not signed", nil)
		}
		if err != nil {
			return nil, invalid("the logout message signature is invalid", err)
		}
		root = v
	}
	return &logoutMessage{isRequest: param == "SAMLRequest", root: root, relayState: relay, md: md}, nil
}

// checkLogoutShape allows a signature only as the message's direct child
// and no ID on two elements: what verify covers is what is read.
func checkLogoutShape(root *etree.Element) error {
	ids := map[string]bool{}
	var err error
	walk(root, func(el *etree.Element) bool {
		if is(el, nsDSig, "Signature") && el.Parent() != root {
			err = errors.New("a signature inside the message")
		}
		if reusedID(ids, el) {
			err = errors.New("two elements with one ID")
		}
		return err == nil
	})
	return err
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

// checkCommon checks what LogoutRequest and LogoutResponse share.
func (sp *SP) checkCommon(root *etree.Element, md *idpMetadata) error {
	if attr(root, "Version") != "2.0" || attr(root, "ID") == "" {
		return errors.New("version is not 2.0")
	}
	iss, _ := onlyChild(root, nsAssertion, "Issuer")
	if iss == nil || text(iss) != md.entity.EntityID {
		return errors.New("issuer is not the IdP")
	}
	// Every logout message we accept is signed, and a signed message must
	// name where it is going (Bindings 3.4.5.2, 3.5.5.2): without this, a
	// message the IdP signed for another SP could be replayed here.
	if d := attr(root, "Destination"); d != sp.slo.String() {
		return fmt.Errorf("destination %.200q is not our SLO URL", d)
	}
	t, ok, err := timeAttr(root, "IssueInstant")
	if err != nil || !ok {
		return errors.New("IssueInstant is missing or malformed")
	}
	now := sp.env.Now()
	if t.After(now.Add(sp.opts.ClockSkew)) || t.Before(now.Add(-logoutLifetime)) {
		return errors.New("IssueInstant is out of range")
	}
	return nil
}

func (sp *SP) checkLogoutResponse(ctx context.Context, msg *logoutMessage) *providers.Error {
	if err := sp.checkCommon(msg.root, msg.md); err != nil {
		return invalid("the logout response was rejected", err)
	}
	irt := attr(msg.root, "InResponseTo")
	if irt == "" {
		return invalid("the logout response answers no request", nil)
	}
	// The issued marker was recorded by LogoutURL; finding it fresh here
	// means we never sent that request. The answered marker makes the
	// response single-use.
	exp := sp.env.Now().Add(logoutLifetime)
	issued, err := sp.env.Store.Consume(ctx, storeKey("saml:slo:issued:", irt), exp)
	if err != nil {
		return &providers.Error{Code: providers.CodeProviderUnavailable, Provider: Name, Message: "the replay store is unavailable", Err: err}
	}
	if issued {
		return invalid("the logout response answers a request we did not send", nil)
	}
	fresh, err := sp.env.Store.Consume(ctx, storeKey("saml:slo:answered:", irt), exp)
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
	if code == nil || attr(code, "Value") != statusSuccess {
		return &providers.Error{Code: providers.CodeAccessDenied, Provider: Name, Message: "the identity provider did not complete the logout"}
	}
	return nil
}

// answerLogoutRequest handles an IdP-initiated LogoutRequest.
func (sp *SP) answerLogoutRequest(w http.ResponseWriter, r *http.Request, msg *logoutMessage) {
	md := msg.md
	var sess LogoutSession
	id := attr(msg.root, "ID")
	perr := func() *providers.Error {
		if err := sp.checkCommon(msg.root, md); err != nil {
			return invalid("the logout request was rejected", err)
		}
		// The message's signature is verified: an EncryptedID in it is
		// the IdP's, and is decrypted as in an assertion.
		nameID, encrypted, err := sp.nameIDOf(msg.root)
		if err != nil || text(nameID) == "" {
			return invalid("the logout request names no subject", err)
		}
		sess = LogoutSession{NameID: text(nameID), NameIDFormat: attr(nameID, "Format"), NameQualifier: attr(nameID, "NameQualifier"),
			SPNameQualifier: attr(nameID, "SPNameQualifier"), SPProvidedID: attr(nameID, "SPProvidedID"), NameIDEncrypted: encrypted,
			IdP: md.entity.EntityID}
		// Several SessionIndex elements name several sessions of one
		// subject; the hook ends the subject's sessions, so the first will do.
		if si := children(msg.root, nsProtocol, "SessionIndex"); len(si) > 0 {
			sess.SessionIndex = text(si[0])
		}
		if na, ok, err := timeAttr(msg.root, "NotOnOrAfter"); err != nil {
			return invalid("the logout request is malformed", err)
		} else if ok && !sp.env.Now().Before(na.Add(sp.opts.ClockSkew)) {
			return invalid("the logout request has expired", nil)
		}
		fresh, err := sp.env.Store.Consume(r.Context(), storeKey("saml:slo:request:", md.entity.EntityID, id), sp.env.Now().Add(logoutLifetime))
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
	} else if err := sp.opts.Logout.OnIdPLogout(r.Context(), sess); err != nil {
		sp.log.Warn("saml: host failed to end the session for an IdP logout", "err", err)
		status = "urn:oasis:names:tc:SAML:2.0:status:Responder"
	}
	if md.sloRedirect == "" {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	csp := sp.crewjamSP(md)
	csp.SignatureMethod = ""
	resp, err := csp.MakeLogoutResponse(md.sloRedirect, id)
	if err != nil {
		http.Error(w, "cannot answer the logout request", http.StatusInternalServerError)
		return
	}
	resp.IssueInstant = sp.env.Now().UTC()
	resp.Status.StatusCode.Value = status
	u, err := sp.redirectURL(md.sloRedirect, "SAMLResponse", resp.Element(), msg.relayState, sp.key != nil)
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

// Metadata returns our SP metadata document. It carries no validUntil
// unless Config.MetadataValidFor asks for one, and no cacheDuration unless
// Config.MetadataCacheDuration does. It publishes the current certificate
// for encryption and for signing, and during a key rotation the next one
// and the retiring one for signing only (see keyDescriptors).
func (sp *SP) Metadata() ([]byte, error) {
	csp := sp.crewjamSP(nil)
	// The HTTP-POST binding, and HTTP-Artifact only when artifacts are
	// resolved (crewjam advertises both by default).
	csp.AssertionConsumerServiceBindings = []string{saml.HTTPPostBinding}
	if sp.art != nil {
		csp.AssertionConsumerServiceBindings = append(csp.AssertionConsumerServiceBindings, BindingArtifact)
		csp.LogoutBindings = append(csp.LogoutBindings, BindingArtifact)
	}
	// Without it crewjam gives the entity and the role a validity of two
	// days.
	csp.MetadataOmitValidUntil = true
	ed := csp.Metadata()
	ed.ValidUntil, ed.CacheDuration = time.Time{}, sp.cfg.MetadataCacheDuration
	if v := sp.cfg.MetadataValidFor; v > 0 {
		ed.ValidUntil = sp.env.Now().Add(v).UTC().Truncate(time.Second)
	}
	for i := range ed.SPSSODescriptors {
		d := &ed.SPSSODescriptors[i]
		// The HTTP-POST ACS as earlier releases published it, which IdPs
		// keep: index 0, the default; the artifact one after it, at the
		// same URL.
		for j := range d.AssertionConsumerServices {
			def := j == 0
			d.AssertionConsumerServices[j].Index, d.AssertionConsumerServices[j].IsDefault = j, &def
		}
		for j := range d.SingleLogoutServices {
			d.SingleLogoutServices[j].ResponseLocation = ""
		}
		d.KeyDescriptors = sp.keyDescriptors()
	}
	out, err := xml.MarshalIndent(ed, "", "  ")
	if err != nil {
		return nil, err
	}
	var discoveryResponse string
	if sp.cfg.Federation.DiscoveryURL != "" {
		discoveryResponse = strings.TrimSuffix(sp.acs.String(), "/callback")
	}
	// The SP's information (mdui, entity attributes, requested attributes)
	// and its discovery response are elements crewjam's types lack or
	// write otherwise: added to the tree.
	doc := etree.NewDocument()
	if err := doc.ReadFromBytes(out); err != nil {
		return nil, err
	}
	addSPInfo(doc.Root(), &sp.cfg.Info, discoveryResponse)
	if out, err = doc.WriteToBytes(); err != nil {
		return nil, err
	}
	return append([]byte(xml.Header), out...), nil
}

// keyDescriptors publishes the current SP certificate for encryption (with
// the algorithms we decrypt) and for signing, then the next and the
// retiring ones of a key rotation for signing only.
//
// One encryption certificate, the current one, whatever the rotation's
// step: an IdP that reads this metadata encrypts to a key that every
// instance of a rolling deployment holds. Were the next certificate
// published for encryption before its promotion, an IdP that reads the
// metadata from an instance already given it could encrypt to it while
// others still run without it; were the retiring one still published for
// encryption after the promotion, an IdP that re-reads the metadata could
// go on encrypting to it, and it could never be removed. The IdP moves
// from the old certificate to the new one on its first read after the
// promotion, whenever that is: until then the retiring key decrypts.
//
// Signing is the other way round: an IdP that verifies our requests must
// know a key before any instance signs with it (the next one, published
// before its promotion) and while any may still have signed with it (the
// retiring one, signed with before the promotion).
func (sp *SP) keyDescriptors() []saml.KeyDescriptor {
	ki := func(c *x509.Certificate) saml.KeyInfo {
		return saml.KeyInfo{X509Data: saml.X509Data{X509Certificates: []saml.X509Certificate{
			{Data: base64.StdEncoding.EncodeToString(c.Raw)},
		}}}
	}
	var out []saml.KeyDescriptor
	if sp.cert != nil {
		out = append(out, saml.KeyDescriptor{Use: "encryption", KeyInfo: ki(sp.cert), EncryptionMethods: sp.encryptionMethods()},
			saml.KeyDescriptor{Use: "signing", KeyInfo: ki(sp.cert)})
	}
	for _, c := range sp.signingOnlyCerts() {
		out = append(out, saml.KeyDescriptor{Use: "signing", KeyInfo: ki(c)})
	}
	return out
}

// signingOnlyCerts are the certificates the SP metadata publishes for
// signing only: the next and retiring SP certificates of a rotation, and
// the TLS client certificates of the artifact back-channel, current and
// next, where IdPs that authenticate the back-channel by the SP's metadata
// look for them.
func (sp *SP) signingOnlyCerts() []*x509.Certificate {
	var out []*x509.Certificate
	for _, c := range []*x509.Certificate{sp.certNew, sp.certOld} {
		if c != nil {
			out = append(out, c)
		}
	}
	if sp.art != nil {
		for _, c := range []*x509.Certificate{sp.art.tlsCert, sp.art.tlsNext} {
			if c != nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// encryptionMethods are the algorithms we decrypt, as the SP metadata
// advertises them (SAML Metadata 2.4.1.1), authenticated encryption first.
func (sp *SP) encryptionMethods() []saml.EncryptionMethod {
	algs := []string{encAES256GCM, encAES128GCM, encAES192GCM}
	if !sp.cfg.RefuseCBCEncryption {
		algs = append(algs, encAES256CBC, encAES192CBC, encAES128CBC, encTripleDESCBC)
	}
	algs = append(algs, ktRSAOAEP, ktRSAOAEPMGF1P)
	if sp.opts.AllowRSA15KeyTransport {
		algs = append(algs, ktRSA15)
	}
	out := make([]saml.EncryptionMethod, len(algs))
	for i, a := range algs {
		out[i].Algorithm = a
	}
	return out
}

// ExtraRoutes gives the routes the SP's handlers beyond authorize and
// callback, mounted at /users/auth/saml/metadata and /users/auth/saml/logout.
func (sp *SP) ExtraRoutes() map[string]http.Handler {
	return map[string]http.Handler{"metadata": sp.MetadataHandler(), "logout": sp.LogoutHandler()}
}
