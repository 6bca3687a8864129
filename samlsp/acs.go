package samlsp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/beevik/etree"
	"github.com/crewjam/saml"
	"github.com/crewjam/saml/xmlenc"
	xrv "github.com/mattermost/xml-roundtrip-validator"

	"github.com/extauth/extauth/providers"
)

const (
	bearerMethod  = "urn:oasis:names:tc:SAML:2.0:cm:bearer"
	statusSuccess = "urn:oasis:names:tc:SAML:2.0:status:Success"
)

// Assertion is what a verified response says, as Complete hands it to the
// identity mapping. Every field comes from the signed tree.
type Assertion struct {
	ID           string
	Issuer       string
	NameID       string
	NameIDFormat string
	SessionIndex string
	AuthnContext string
	// Attributes maps each attribute Name to its values, in document order.
	Attributes map[string][]string
	// FriendlyNames maps FriendlyName to Name, for look-ups by either.
	FriendlyNames map[string]string
	// NotOnOrAfter is the latest time any part of the assertion is valid:
	// how long its ID must stay in the replay store.
	NotOnOrAfter time.Time
	// InResponseTo is the request the assertion answers ("" if unsolicited).
	InResponseTo string
}

// Complete verifies the IdP's POSTed SAMLResponse against tx and returns the
// identity it asserts. Every failure, a panic included, is an *Error.
func (sp *SP) Complete(ctx context.Context, r *http.Request, tx *providers.Transaction) (id *providers.Identity, err error) {
	defer func() {
		if p := recover(); p != nil {
			id = nil
			err = invalid("the SAML response could not be processed", fmt.Errorf("recovered from panic: %v", p))
		}
	}()
	md := sp.md.current()
	if md == nil {
		sp.md.kick()
		return nil, unavailable(sp.md.err())
	}
	requestID := ""
	if tx != nil {
		requestID = tx.RequestID
	}
	if requestID == "" && !sp.opts.AllowIDPInitiated {
		return nil, invalid("unsolicited SAML responses are not accepted", errors.New("no AuthnRequest ID in the transaction"))
	}
	raw, perr := sp.readResponse(r)
	if perr != nil {
		return nil, perr
	}
	a, perr := sp.validate(raw, requestID, md)
	if perr != nil {
		return nil, perr
	}
	if perr := sp.consume(ctx, a, requestID); perr != nil {
		return nil, perr
	}
	return sp.identity(a), nil
}

// readResponse takes the SAMLResponse form value and base64-decodes it,
// bounding its length before decoding.
func (sp *SP) readResponse(r *http.Request) ([]byte, *providers.Error) {
	if r.Method != http.MethodPost {
		return nil, invalid("the SAML response must be POSTed", fmt.Errorf("method %s", r.Method))
	}
	if err := sp.parseForm(r); err != nil {
		return nil, invalid("the SAML response is too large or malformed", err)
	}
	if r.Form.Get("SAMLart") != "" {
		return nil, invalid("the SAML artifact binding is not supported", nil)
	}
	vals := r.PostForm["SAMLResponse"]
	if len(vals) != 1 || vals[0] == "" {
		return nil, invalid("the callback carries no SAML response", nil)
	}
	enc := vals[0]
	if int64(len(enc)) > sp.maxEncodedResponse() {
		return nil, invalid("the SAML response is too large", fmt.Errorf("%d encoded bytes", len(enc)))
	}
	enc = strings.Map(func(r rune) rune {
		switch r {
		case ' ', '\t', '\r', '\n':
			return -1
		}
		return r
	}, enc)
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return nil, invalid("the SAML response is not base64", err)
	}
	if int64(len(raw)) > sp.opts.MaxResponseBytes {
		return nil, invalid("the SAML response is too large", fmt.Errorf("%d bytes", len(raw)))
	}
	return raw, nil
}

// validate runs every check on a decoded response: crewjam's
// ParseXMLResponse, then ours on the tree the signatures cover. requestID is
// the ID of our AuthnRequest, or "" for an unsolicited response. md is nil to
// use the current IdP metadata. It does not touch the replay store.
func (sp *SP) validate(raw []byte, requestID string, md *idpMetadata) (a *Assertion, err *providers.Error) {
	defer func() {
		if p := recover(); p != nil {
			a = nil
			err = invalid("the SAML response could not be processed", fmt.Errorf("recovered from panic: %v", p))
		}
	}()
	if md == nil {
		if md = sp.md.current(); md == nil {
			return nil, unavailable(sp.md.err())
		}
	}
	now := sp.env.Now()
	root, perr := sp.preflight(raw)
	if perr != nil {
		if perr.Code == providers.CodeAccessDenied && root.SelectAttrValue("InResponseTo", "") != requestID {
			return nil, invalid("the SAML response does not answer our request", errors.New("refusal with a foreign InResponseTo"))
		}
		return nil, perr
	}

	// crewjam's validation first, on a ServiceProvider value of our own whose
	// signature verifier is ours. It must accept the response too.
	csp := sp.crewjamSP(md)
	crew, e := csp.ParseXMLResponse(raw, []string{requestID}, *sp.acs)
	if e != nil {
		var bad saml.ErrBadStatus
		var ire *saml.InvalidResponseError
		if errors.As(e, &ire) && ire.PrivateErr != nil {
			e = ire.PrivateErr
		}
		if errors.As(e, &bad) {
			return nil, &providers.Error{Code: providers.CodeAccessDenied, Provider: Name,
				Message: "the identity provider did not authenticate the user", Err: fmt.Errorf("status %s", bad.Status)}
		}
		return nil, invalid("the SAML response was rejected", e)
	}

	a, e = sp.verifyTree(root, requestID, md, now)
	if e != nil {
		var pe *providers.Error
		if errors.As(e, &pe) {
			return nil, pe
		}
		return nil, invalid("the SAML response was rejected", e)
	}
	// crewjam and we parsed the same bytes; if we read a different assertion
	// out of them, one of us was fooled by the structure.
	if crew.ID != a.ID || crew.Subject == nil || crew.Subject.NameID == nil ||
		strings.TrimSpace(crew.Subject.NameID.Value) != a.NameID {
		return nil, invalid("the SAML response is ambiguous", errors.New("crewjam and the verified tree disagree on the assertion"))
	}
	return a, nil
}

// failedStatus returns the top-level status code of a Response when it is
// not Success, and "" otherwise.
func failedStatus(resp *etree.Element) string {
	status, _ := onlyChild(resp, nsProtocol, "Status")
	if status == nil {
		return ""
	}
	code, _ := onlyChild(status, nsProtocol, "StatusCode")
	if code == nil {
		return ""
	}
	v := code.SelectAttrValue("Value", "")
	if v == statusSuccess {
		return ""
	}
	if sub, _ := onlyChild(code, nsProtocol, "StatusCode"); sub != nil {
		v += " / " + sub.SelectAttrValue("Value", "")
	}
	return v
}

// hasAssertion reports whether any assertion, plain or encrypted, stands
// anywhere in the tree.
func hasAssertion(root *etree.Element) bool {
	found := false
	var walk func(*etree.Element)
	walk = func(el *etree.Element) {
		if found {
			return
		}
		if is(el, nsAssertion, "Assertion") || is(el, nsAssertion, "EncryptedAssertion") {
			found = true
			return
		}
		for _, c := range el.ChildElements() {
			walk(c)
		}
	}
	walk(root)
	return found
}

// preflight checks what must hold before anything else reads the bytes:
// acceptable XML, a Response root, the one-assertion shape, and a key for an
// encrypted assertion.
func (sp *SP) preflight(raw []byte) (*etree.Element, *providers.Error) {
	if e := checkXML(raw); e != nil {
		return nil, invalid("the SAML response is not acceptable XML", e)
	}
	doc := etree.NewDocument()
	if e := doc.ReadFromBytes(raw); e != nil {
		return nil, invalid("the SAML response is not acceptable XML", e)
	}
	root := doc.Root()
	if !is(root, nsProtocol, "Response") {
		return nil, invalid("the message is not a SAML Response", nil)
	}
	// An IdP that did not authenticate the user (the user cancelled, or
	// was refused) answers a non-Success status and no assertion. It grants
	// nothing, so it needs no signature to be reported as a refusal.
	if st := failedStatus(root); st != "" && !hasAssertion(root) {
		return root, &providers.Error{Code: providers.CodeAccessDenied, Provider: Name,
			Message: "the identity provider did not authenticate the user", Err: fmt.Errorf("status %.200q", st)}
	}
	assertionEl, e := sp.checkShape(root)
	if e != nil {
		return nil, invalid("the SAML response has an unexpected structure", e)
	}
	if is(assertionEl, nsAssertion, "EncryptedAssertion") && sp.key == nil {
		return nil, invalid("the IdP sent an encrypted assertion but no SP private key is configured to decrypt it", nil)
	}
	return root, nil
}

// checkShape enforces the only structure a Response may have: exactly one
// Assertion or EncryptedAssertion in the whole document, a direct child of
// the Response, and signatures only directly under the Response or the
// assertion. Every XML signature wrapping variant moves or copies an
// assertion or a signature somewhere else.
func (sp *SP) checkShape(root *etree.Element) (*etree.Element, error) {
	var assertions, sigs []*etree.Element
	walk(root, func(el *etree.Element) {
		switch {
		case is(el, nsAssertion, "Assertion"), is(el, nsAssertion, "EncryptedAssertion"):
			assertions = append(assertions, el)
		case is(el, nsDSig, "Signature"):
			sigs = append(sigs, el)
		}
	})
	if len(assertions) != 1 {
		return nil, fmt.Errorf("%d assertions; exactly one is accepted", len(assertions))
	}
	a := assertions[0]
	if a.Parent() != root {
		return nil, errors.New("the assertion is not a child of the Response")
	}
	seen := map[*etree.Element]bool{}
	for _, s := range sigs {
		p := s.Parent()
		if p != root && p != a {
			return nil, errors.New("a signature outside the Response and the assertion")
		}
		if seen[p] {
			return nil, errors.New("two signatures on one element")
		}
		seen[p] = true
	}
	return a, nil
}

// verifyTree verifies the signatures itself and reads every value it checks
// from the verified output only.
func (sp *SP) verifyTree(root *etree.Element, requestID string, md *idpMetadata, now time.Time) (*Assertion, error) {
	ver := &verifier{certs: md.certs, now: sp.env.Now}
	resp := root
	responseSigned := false
	if sig, err := onlyChild(root, nsDSig, "Signature"); err != nil {
		return nil, err
	} else if sig != nil {
		v, err := ver.verify(root)
		if err != nil {
			return nil, err
		}
		resp, responseSigned = v, true
	}

	// The Response: Destination, Issuer, Status, InResponseTo, Version.
	if resp.SelectAttrValue("Version", "") != "2.0" {
		return nil, errors.New("response Version is not 2.0")
	}
	if dst := resp.SelectAttrValue("Destination", ""); dst != sp.acs.String() {
		return nil, fmt.Errorf("response Destination %q is not our ACS", dst)
	}
	iss, err := onlyChild(resp, nsAssertion, "Issuer")
	if err != nil {
		return nil, err
	}
	if iss != nil && text(iss) != md.entity.EntityID {
		return nil, errors.New("response Issuer is not the IdP")
	}
	status, _ := onlyChild(resp, nsProtocol, "Status")
	var code *etree.Element
	if status != nil {
		code, _ = onlyChild(status, nsProtocol, "StatusCode")
	}
	if code == nil || code.SelectAttrValue("Value", "") != statusSuccess {
		return nil, errors.New("response Status is not Success")
	}
	if got := resp.SelectAttrValue("InResponseTo", ""); got != requestID {
		return nil, fmt.Errorf("response InResponseTo does not match our request")
	}

	// The assertion, from the verified Response tree when it is signed.
	var aEl *etree.Element
	for _, c := range resp.ChildElements() {
		if is(c, nsAssertion, "Assertion") || is(c, nsAssertion, "EncryptedAssertion") {
			if aEl != nil {
				return nil, errors.New("two assertions in the verified response")
			}
			aEl = c
		}
	}
	if aEl == nil {
		return nil, errors.New("no assertion in the verified response")
	}
	if aEl.Tag == "EncryptedAssertion" {
		if aEl, err = sp.decrypt(aEl); err != nil {
			return nil, err
		}
	}
	if sig, err := onlyChild(aEl, nsDSig, "Signature"); err != nil {
		return nil, err
	} else if sig != nil {
		if aEl, err = ver.verify(aEl); err != nil {
			return nil, err
		}
	} else if !responseSigned {
		return nil, errors.New("neither the response nor the assertion is signed")
	}
	return sp.checkAssertion(aEl, requestID, md, now)
}

// decrypt opens an EncryptedAssertion with the SP key and checks the
// plaintext like any other input.
func (sp *SP) decrypt(enc *etree.Element) (*etree.Element, error) {
	data, err := onlyChild(enc, nsXMLEnc, "EncryptedData")
	if err != nil || data == nil {
		return nil, errors.New("EncryptedAssertion without one EncryptedData")
	}
	var key any = sp.key
	// The wrapped key is either inside EncryptedData's KeyInfo, which
	// xmlenc.Decrypt handles, or beside EncryptedData.
	if ek, _ := onlyChild(enc, nsXMLEnc, "EncryptedKey"); ek != nil {
		if key, err = xmlenc.Decrypt(sp.key, ek); err != nil {
			return nil, fmt.Errorf("cannot decrypt the assertion key: %w", err)
		}
	}
	plain, err := xmlenc.Decrypt(key, data)
	if err != nil {
		return nil, fmt.Errorf("cannot decrypt the assertion: %w", err)
	}
	if int64(len(plain)) > sp.opts.MaxResponseBytes {
		return nil, errors.New("decrypted assertion too large")
	}
	if err := checkXML(plain); err != nil {
		return nil, fmt.Errorf("decrypted assertion: %w", err)
	}
	if err := xrv.Validate(bytes.NewReader(plain)); err != nil {
		return nil, fmt.Errorf("decrypted assertion: %w", err)
	}
	doc := etree.NewDocument()
	if err := doc.ReadFromBytes(plain); err != nil {
		return nil, fmt.Errorf("decrypted assertion: %w", err)
	}
	a := doc.Root()
	if !is(a, nsAssertion, "Assertion") {
		return nil, errors.New("the decrypted element is not an Assertion")
	}
	n := 0
	walk(a, func(el *etree.Element) {
		if is(el, nsAssertion, "Assertion") || is(el, nsAssertion, "EncryptedAssertion") {
			n++
		}
	})
	if n != 1 {
		return nil, errors.New("the decrypted assertion contains another assertion")
	}
	sigs, misplaced := 0, false
	walk(a, func(el *etree.Element) {
		if is(el, nsDSig, "Signature") {
			sigs++
			misplaced = misplaced || el.Parent() != a
		}
	})
	if sigs > 1 || misplaced {
		return nil, errors.New("unexpected signature inside the decrypted assertion")
	}
	return a, nil
}

// checkAssertion applies Profiles 4.1.4.2-3 and Core 2.5 to the verified
// assertion element: issuer, subject, bearer confirmation, conditions,
// audience, authentication statement.
func (sp *SP) checkAssertion(el *etree.Element, requestID string, md *idpMetadata, now time.Time) (*Assertion, error) {
	skew := sp.opts.ClockSkew
	var as saml.Assertion
	if err := unmarshalElement(el, &as); err != nil {
		return nil, fmt.Errorf("assertion: %w", err)
	}
	if as.ID == "" || as.Version != "2.0" {
		return nil, errors.New("assertion ID or Version missing")
	}
	if as.Issuer.Value != md.entity.EntityID {
		return nil, errors.New("assertion Issuer is not the IdP")
	}
	if as.IssueInstant.IsZero() || as.IssueInstant.After(now.Add(skew)) {
		return nil, errors.New("assertion IssueInstant is missing or in the future")
	}

	// Subject: a NameID and at least one bearer confirmation, every one of
	// which must be for our ACS, this request, and still valid.
	if as.Subject == nil || as.Subject.NameID == nil {
		return nil, errors.New("assertion has no Subject NameID")
	}
	subj, _ := onlyChild(el, nsAssertion, "Subject")
	nameIDEl, err := onlyChild(subj, nsAssertion, "NameID")
	if err != nil || nameIDEl == nil {
		return nil, errors.New("assertion Subject must have one NameID")
	}
	nameID := text(nameIDEl)
	if nameID == "" {
		return nil, errors.New("assertion NameID is empty")
	}
	var latest time.Time
	bearers := 0
	for _, sc := range as.Subject.SubjectConfirmations {
		if sc.Method != bearerMethod {
			continue
		}
		bearers++
		d := sc.SubjectConfirmationData
		if d == nil {
			return nil, errors.New("bearer SubjectConfirmation without SubjectConfirmationData")
		}
		if d.Recipient != sp.acs.String() {
			return nil, errors.New("bearer SubjectConfirmationData Recipient is not our ACS")
		}
		if d.NotOnOrAfter.IsZero() {
			return nil, errors.New("bearer SubjectConfirmationData has no NotOnOrAfter")
		}
		if !now.Before(d.NotOnOrAfter.Add(skew)) {
			return nil, errors.New("bearer SubjectConfirmationData has expired")
		}
		if !d.NotBefore.IsZero() && now.Add(skew).Before(d.NotBefore) {
			return nil, errors.New("bearer SubjectConfirmationData is not yet valid")
		}
		if d.InResponseTo != requestID {
			return nil, errors.New("bearer SubjectConfirmationData InResponseTo does not match our request")
		}
		if d.NotOnOrAfter.After(latest) {
			latest = d.NotOnOrAfter
		}
	}
	if bearers == 0 {
		return nil, errors.New("assertion has no bearer SubjectConfirmation")
	}

	// Conditions with an AudienceRestriction naming us. Every restriction
	// must be satisfied (Core 2.5.1.4); within one, any Audience will do.
	cond, err := onlyChild(el, nsAssertion, "Conditions")
	if err != nil || cond == nil || as.Conditions == nil {
		return nil, errors.New("assertion must have one Conditions element")
	}
	if nb := as.Conditions.NotBefore; !nb.IsZero() && now.Add(skew).Before(nb) {
		return nil, errors.New("assertion Conditions are not yet valid")
	}
	if na := as.Conditions.NotOnOrAfter; !na.IsZero() {
		if !now.Before(na.Add(skew)) {
			return nil, errors.New("assertion Conditions have expired")
		}
		if na.After(latest) {
			latest = na
		}
	}
	restrictions := children(cond, nsAssertion, "AudienceRestriction")
	if len(restrictions) == 0 {
		return nil, errors.New("assertion has no AudienceRestriction")
	}
	for _, ar := range restrictions {
		ok := false
		for _, aud := range children(ar, nsAssertion, "Audience") {
			if text(aud) == sp.cfg.SPEntityID {
				ok = true
			}
		}
		if !ok {
			return nil, errors.New("assertion AudienceRestriction does not name us")
		}
	}
	if len(children(cond, nsAssertion, "OneTimeUse")) > 1 {
		return nil, errors.New("assertion has several OneTimeUse")
	}

	if len(as.AuthnStatements) == 0 {
		return nil, errors.New("assertion has no AuthnStatement")
	}
	st := as.AuthnStatements[0]
	if st.SessionNotOnOrAfter != nil && !now.Before(st.SessionNotOnOrAfter.Add(skew)) {
		return nil, errors.New("assertion AuthnStatement session has expired")
	}

	out := &Assertion{
		ID:            as.ID,
		Issuer:        as.Issuer.Value,
		NameID:        nameID,
		NameIDFormat:  nameIDEl.SelectAttrValue("Format", ""),
		SessionIndex:  st.SessionIndex,
		Attributes:    map[string][]string{},
		FriendlyNames: map[string]string{},
		NotOnOrAfter:  latest,
		InResponseTo:  requestID,
	}
	if st.AuthnContext.AuthnContextClassRef != nil {
		out.AuthnContext = st.AuthnContext.AuthnContextClassRef.Value
	}
	for _, stmt := range children(el, nsAssertion, "AttributeStatement") {
		for _, attr := range children(stmt, nsAssertion, "Attribute") {
			name := attr.SelectAttrValue("Name", "")
			if name == "" {
				continue
			}
			if fn := attr.SelectAttrValue("FriendlyName", ""); fn != "" {
				out.FriendlyNames[fn] = name
			}
			vals := out.Attributes[name]
			for _, v := range children(attr, nsAssertion, "AttributeValue") {
				vals = append(vals, text(v))
			}
			out.Attributes[name] = vals
		}
	}
	return out, nil
}

// consume makes the assertion and the request single-use across every
// instance sharing the store, until the assertion could no longer be
// accepted anyway.
func (sp *SP) consume(ctx context.Context, a *Assertion, requestID string) *providers.Error {
	until := a.NotOnOrAfter.Add(sp.opts.ClockSkew)
	if min := sp.env.Now().Add(sp.opts.ClockSkew); until.Before(min) {
		until = min
	}
	keys := []string{"saml:assertion:" + digest(a.Issuer, a.ID)}
	if requestID != "" {
		keys = append(keys, "saml:request:"+digest(requestID))
	}
	for _, k := range keys {
		fresh, err := sp.env.Store.Consume(ctx, k, until)
		if err != nil {
			return &providers.Error{Code: providers.CodeProviderUnavailable, Provider: Name, Message: "the replay store is unavailable", Err: err}
		}
		if !fresh {
			return &providers.Error{Code: providers.CodeReplayed, Provider: Name, Message: "this SAML response was already used"}
		}
	}
	return nil
}

// digest keeps store keys short and free of whatever characters an IdP
// puts in its IDs.
func digest(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:20])
}
