package samlsp

import (
	"context"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/beevik/etree"

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
	// NameQualifier, SPNameQualifier and SPProvidedID are the NameID's
	// attributes as sent, "" when absent.
	NameQualifier   string
	SPNameQualifier string
	SPProvidedID    string
	// NameIDEncrypted is true when the Subject had an EncryptedID.
	NameIDEncrypted bool
	SessionIndex    string
	AuthnContext    string
	// AuthnInstant is when the IdP authenticated the user.
	AuthnInstant time.Time
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
	requestID, idp := "", ""
	if tx != nil {
		requestID, idp = tx.RequestID, tx.IdP
	}
	var md *idpMetadata
	var perr *providers.Error
	if sp.fed == nil {
		// A tenant built again after its eviction has no metadata until
		// its first fetch: a sign-in it had in flight waits for that fetch
		// rather than failing.
		if md, perr = sp.metadata(ctx); perr != nil {
			return nil, perr
		}
	}
	if requestID == "" && !sp.opts.AllowIDPInitiated {
		return nil, invalid("unsolicited SAML responses are not accepted", errors.New("no AuthnRequest ID in the transaction"))
	}
	if err := sp.parseForm(r); err != nil {
		return nil, invalid("the SAML response is too large or malformed", err)
	}
	if art, ok, err := artifactParam(r); err != nil {
		return nil, invalid("the SAML artifact is malformed", err)
	} else if ok {
		if len(r.Form["SAMLResponse"]) > 0 {
			return nil, invalid("the callback carries both an artifact and a response", nil)
		}
		if md != nil {
			// The one IdP: the artifact must be its own.
			idp = md.entity.EntityID
		}
		a, perr := sp.completeArtifact(ctx, art, requestID, idp)
		if perr != nil {
			return nil, perr
		}
		return sp.finish(ctx, a, tx, requestID)
	}
	raw, perr := sp.readResponse(r)
	if perr != nil {
		return nil, perr
	}
	if md == nil {
		// In a federation, the IdP is the one the sign-in was started at:
		// its keys alone verify the answer, its entity ID alone is the
		// Issuer accepted. An unsolicited response is checked against the
		// entry of the IdP it names: every signature must then verify with
		// that IdP's keys, every Issuer name that IdP.
		if requestID == "" {
			if idp, perr = issuerOf(raw); perr != nil {
				return nil, perr
			}
		}
		if md, perr = sp.idpFor(ctx, idp); perr != nil {
			return nil, perr
		}
	}
	a, perr := sp.validate(raw, requestID, md)
	if perr != nil {
		return nil, perr
	}
	return sp.finish(ctx, a, tx, requestID)
}

// finish checks what the sign-in asked of the authentication, makes the
// assertion and the request single-use, and returns the identity: the end
// of every binding.
func (sp *SP) finish(ctx context.Context, a *Assertion, tx *providers.Transaction, requestID string) (*providers.Identity, error) {
	if err := sp.checkAuthentication(a, tx, sp.env.Now()); err != nil {
		return nil, err
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

var errBadStatus = errors.New("response Status is not Success")

// issuerOf returns the Issuer an unsolicited response says it comes from:
// the Response's, else its plain assertion's. Nothing is trusted yet: the
// IdP it names must then verify the whole response.
func issuerOf(raw []byte) (string, *providers.Error) {
	root, err := parseXML(raw)
	if err != nil {
		return "", invalid("the SAML response is not acceptable XML", err)
	}
	if iss, _ := onlyChild(root, nsAssertion, "Issuer"); iss != nil && text(iss) != "" {
		return text(iss), nil
	}
	if a, _ := onlyChild(root, nsAssertion, "Assertion"); a != nil {
		if iss, _ := onlyChild(a, nsAssertion, "Issuer"); iss != nil && text(iss) != "" {
			return text(iss), nil
		}
	}
	return "", invalid("the SAML response names no Issuer", nil)
}

// maxIssueDelay is how old a response or assertion may be when it arrives
// (IssueInstant), give or take the clock skew: an IdP posts it at once.
const maxIssueDelay = 90 * time.Second

// validate runs every check on a decoded response, with panics recovered
// into errors: check, then nothing else. requestID is the ID of our
// AuthnRequest, or "" for an unsolicited response. md is nil to use the
// current IdP metadata. It does not touch the replay store.
func (sp *SP) validate(raw []byte, requestID string, md *idpMetadata) (a *Assertion, err *providers.Error) {
	defer func() {
		if p := recover(); p != nil {
			a = nil
			err = invalid("the SAML response could not be processed", fmt.Errorf("recovered from panic: %v", p))
		}
	}()
	if md == nil {
		if sp.md == nil {
			return nil, invalid("no identity provider was chosen", errUnknownIdP)
		}
		if md = sp.md.current(); md == nil {
			return nil, unavailable(sp.md.err())
		}
	}
	return sp.check(raw, requestID, md, sp.env.Now())
}

// check is the ACS in one pass over the response: one bounded parse
// (parseXML), the structure checked on that tree, each signature verified
// once (goxmldsig, under the SHA-256 policy), the assertion decrypted once,
// and every condition of SAML Profiles 4.1.4 and Core 2 read from the
// verified tree only. It is what crewjam's ParseXMLResponse checks and what
// crewjam leaves out (one assertion even in a signed Response, signatures
// only where they belong, InResponseTo always, Destination always, our own
// skew, no DOCTYPE; crewjamAccepts in the tests), without crewjam's
// decryption of a plaintext out of the scope of the Response's namespace
// declarations and without doing anything twice.
func (sp *SP) check(raw []byte, requestID string, md *idpMetadata, now time.Time) (*Assertion, *providers.Error) {
	root, err := parseXML(raw)
	if err != nil {
		return nil, invalid("the SAML response is not acceptable XML", err)
	}
	return sp.checkTree(root, requestID, md, now, false)
}

// checkTree is check on the parsed response root. envelopeSigned is true
// when the IdP's verified signature covers the whole response from
// outside it (an ArtifactResponse's): it then counts as the Response's own
// signature, and every other check applies unchanged.
func (sp *SP) checkTree(root *etree.Element, requestID string, md *idpMetadata, now time.Time, envelopeSigned bool) (*Assertion, *providers.Error) {
	if !is(root, nsProtocol, "Response") {
		return nil, invalid("the message is not a SAML Response", nil)
	}
	// An IdP that did not authenticate the user (the user cancelled, or
	// was refused) answers a non-Success status and no assertion. It grants
	// nothing, so it needs no signature to be reported as a refusal, but
	// only as the refusal of our own request.
	if st := failedStatus(root); st != "" && !hasAssertion(root) {
		if attr(root, "InResponseTo") != requestID {
			return nil, invalid("the SAML response does not answer our request", errors.New("refusal with a foreign InResponseTo"))
		}
		return nil, &providers.Error{Code: providers.CodeAccessDenied, Provider: Name,
			Message: "the identity provider did not authenticate the user", Err: fmt.Errorf("status %.200q", st)}
	}
	aEl, err := checkShape(root)
	if err != nil {
		return nil, invalid("the SAML response has an unexpected structure", err)
	}
	encrypted := is(aEl, nsAssertion, "EncryptedAssertion")
	if encrypted && sp.key == nil {
		return nil, invalid("the IdP sent an encrypted assertion but no SP private key is configured to decrypt it", nil)
	}

	ver := sp.verifier(md)
	resp, responseSigned := root, envelopeSigned
	switch v, err := ver.verify(root); {
	case err == nil:
		resp, responseSigned = v, true
	case !errors.Is(err, errNotSigned):
		return nil, invalid("the SAML response signature is invalid", err)
	}
	if err := sp.checkResponse(resp, requestID, md, now); errors.Is(err, errBadStatus) {
		return nil, &providers.Error{Code: providers.CodeAccessDenied, Provider: Name,
			Message: "the identity provider did not authenticate the user", Err: err}
	} else if err != nil {
		return nil, invalid("the SAML response was rejected", err)
	}

	// The assertion, from the verified Response tree when it is signed.
	if aEl, err = onlyAssertion(resp); err != nil {
		return nil, invalid("the SAML response has an unexpected structure", err)
	}
	// Decryption comes after the Response's signature, when it has one, is
	// verified: then the ciphertext is the IdP's, and no one can make us
	// decrypt one of their choosing. Without it, decryption answers every
	// CBC failure alike (see decrypter.open).
	var dec *decrypter
	if encrypted {
		dec = sp.decrypter()
		if aEl, err = dec.decryptAssertion(aEl, sp.maxDecrypted(), responseSigned); err != nil {
			return nil, invalid("the encrypted assertion could not be decrypted", err)
		}
	}
	switch v, err := ver.verify(aEl); {
	case err == nil:
		aEl = v
	case !errors.Is(err, errNotSigned):
		return nil, invalid("the SAML assertion signature is invalid", err)
	case !responseSigned:
		return nil, invalid("the SAML response was rejected", errors.New("neither the response nor the assertion is signed"))
	}
	a, err := sp.checkAssertion(aEl, requestID, md, now)
	if err != nil {
		return nil, invalid("the SAML assertion was rejected", err)
	}
	if dec != nil {
		// Only now: the certificate anyone can encrypt to says nothing
		// about the IdP until the IdP's signature is verified.
		sp.noteDecryptedWith(dec.used)
	}
	return a, nil
}

// retiringLogEvery is how often the SP says that the IdP still encrypts to
// the retiring key: often enough to see when it stops, seldom enough for
// every sign-in not to log it.
const retiringLogEvery = time.Hour

// noteDecryptedWith logs, at most once per retiringLogEvery, that an
// assertion the IdP signed was encrypted to the retiring key: the IdP has
// not read the SP metadata since the promotion, so the key must stay.
func (sp *SP) noteDecryptedWith(key *rsa.PrivateKey) {
	if key == nil || key != sp.keyOld {
		return
	}
	now := sp.env.Now()
	last := sp.retiringUsed.Load()
	if last != 0 && now.Sub(time.Unix(0, last)) < retiringLogEvery || !sp.retiringUsed.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	sum := sha256.Sum256(sp.certOld.Raw)
	sp.log.Info("saml: the IdP encrypted an assertion to the retiring SP certificate (saml_additional_settings.certificate_old): "+
		"it has not read the SP metadata since the promotion; keep certificate_old and private_key_old until this stops "+
		"(logged at most hourly)", "sha256", hex.EncodeToString(sum[:]), "subject", sp.certOld.Subject.String())
}

func (sp *SP) verifier(md *idpMetadata) *verifier {
	return &verifier{certs: md.certs, now: sp.env.Now, policy: sp.policy, keysOnly: !sp.cfg.EnforceIdPCertificateDates}
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
	v := attr(code, "Value")
	if v == statusSuccess {
		return ""
	}
	if sub, _ := onlyChild(code, nsProtocol, "StatusCode"); sub != nil {
		v += " / " + attr(sub, "Value")
	}
	return v
}

// hasAssertion reports whether any assertion, plain or encrypted, stands
// anywhere in the tree.
func hasAssertion(root *etree.Element) bool {
	found := false
	walk(root, func(el *etree.Element) bool {
		if is(el, nsAssertion, "Assertion") || is(el, nsAssertion, "EncryptedAssertion") {
			found = true
		}
		return !found
	})
	return found
}

// checkShape enforces the only structure a Response may have: exactly one
// Assertion or EncryptedAssertion in the whole document, a direct child of
// the Response; signatures only directly under the Response or the
// assertion, at most one each; and no ID given to two elements. Every XML
// signature wrapping variant moves or copies an assertion, a signature or
// an ID somewhere else.
func checkShape(root *etree.Element) (*etree.Element, error) {
	var assertions []*etree.Element
	var sigs []*etree.Element
	ids := map[string]bool{}
	var dupID bool
	walk(root, func(el *etree.Element) bool {
		switch {
		case is(el, nsAssertion, "Assertion"), is(el, nsAssertion, "EncryptedAssertion"):
			assertions = append(assertions, el)
		case is(el, nsDSig, "Signature"):
			sigs = append(sigs, el)
		}
		dupID = reusedID(ids, el) || dupID
		return true
	})
	if dupID {
		return nil, errors.New("two elements with one ID")
	}
	if len(assertions) != 1 {
		return nil, fmt.Errorf("%d assertions; exactly one is accepted", len(assertions))
	}
	a := assertions[0]
	if a.Parent() != root {
		return nil, errors.New("the assertion is not a child of the Response")
	}
	for _, s := range sigs {
		if p := s.Parent(); p != root && p != a {
			return nil, errors.New("a signature outside the Response and the assertion")
		}
	}
	return a, nil
}

// checkDecrypted applies checkShape's rules inside a decrypted assertion:
// no assertion within it, a signature only as its direct child, unique IDs.
func checkDecrypted(a *etree.Element) error {
	if !is(a, nsAssertion, "Assertion") {
		return errors.New("the decrypted element is not an Assertion")
	}
	ids := map[string]bool{}
	var err error
	walk(a, func(el *etree.Element) bool {
		switch {
		case el != a && (is(el, nsAssertion, "Assertion") || is(el, nsAssertion, "EncryptedAssertion")):
			err = errors.New("the decrypted assertion contains another assertion")
		case is(el, nsDSig, "Signature") && el.Parent() != a:
			err = errors.New("a signature inside the decrypted assertion")
		}
		if reusedID(ids, el) {
			err = errors.New("two elements with one ID")
		}
		return err == nil
	})
	return err
}

// onlyAssertion returns the one assertion child of a (verified) Response.
func onlyAssertion(resp *etree.Element) (*etree.Element, error) {
	var a *etree.Element
	for _, c := range resp.ChildElements() {
		if is(c, nsAssertion, "Assertion") || is(c, nsAssertion, "EncryptedAssertion") {
			if a != nil {
				return nil, errors.New("two assertions in the verified response")
			}
			a = c
		}
	}
	if a == nil {
		return nil, errors.New("no assertion in the verified response")
	}
	return a, nil
}

// checkResponse checks the Response element (Profiles 4.1.4.2, Core 3.2.2):
// version, destination, issuer, status, the request it answers, its age.
func (sp *SP) checkResponse(resp *etree.Element, requestID string, md *idpMetadata, now time.Time) error {
	if attr(resp, "Version") != "2.0" || attr(resp, "ID") == "" {
		return errors.New("response Version or ID missing")
	}
	if dst := attr(resp, "Destination"); dst != sp.acs.String() {
		return fmt.Errorf("response Destination %.200q is not our ACS", dst)
	}
	iss, err := onlyChild(resp, nsAssertion, "Issuer")
	if err != nil {
		return err
	}
	if iss != nil && text(iss) != md.entity.EntityID {
		return errors.New("response Issuer is not the IdP")
	}
	status, err := oneChild(resp, nsProtocol, "Status")
	if err != nil {
		return err
	}
	code, err := oneChild(status, nsProtocol, "StatusCode")
	if err != nil {
		return err
	}
	if v := attr(code, "Value"); v != statusSuccess {
		return fmt.Errorf("%w: %.200q", errBadStatus, v)
	}
	if attr(resp, "InResponseTo") != requestID {
		return errors.New("response InResponseTo does not match our request")
	}
	return sp.checkIssued(resp, now)
}

// checkIssued checks IssueInstant: present, not in the future, not older
// than maxIssueDelay, all give or take the clock skew.
func (sp *SP) checkIssued(el *etree.Element, now time.Time) error {
	skew := sp.opts.ClockSkew
	ii, ok, err := timeAttr(el, "IssueInstant")
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("%s IssueInstant is missing", el.Tag)
	case ii.After(now.Add(skew)):
		return fmt.Errorf("%s IssueInstant is in the future", el.Tag)
	case ii.Add(maxIssueDelay + skew).Before(now):
		return fmt.Errorf("%s IssueInstant is too old", el.Tag)
	}
	return nil
}

// checkAssertion applies Profiles 4.1.4.2-3 and Core 2 to the verified
// assertion element: issuer, subject, subject confirmations, conditions,
// audience, authentication statement, and reads the identity out of it.
func (sp *SP) checkAssertion(el *etree.Element, requestID string, md *idpMetadata, now time.Time) (*Assertion, error) {
	skew := sp.opts.ClockSkew
	if attr(el, "Version") != "2.0" || attr(el, "ID") == "" {
		return nil, errors.New("assertion ID or Version missing")
	}
	if err := sp.checkIssued(el, now); err != nil {
		return nil, err
	}
	iss, err := oneChild(el, nsAssertion, "Issuer")
	if err != nil {
		return nil, err
	}
	if text(iss) != md.entity.EntityID {
		return nil, errors.New("assertion Issuer is not the IdP")
	}
	// valid checks a NotBefore/NotOnOrAfter pair; latest keeps the last
	// instant any part of the assertion is valid, for the replay store.
	var latest time.Time
	valid := func(c *etree.Element, requireEnd bool) error {
		nb, _, err := timeAttr(c, "NotBefore")
		if err != nil {
			return err
		}
		na, hasEnd, err := timeAttr(c, "NotOnOrAfter")
		switch {
		case err != nil:
			return err
		case !hasEnd && requireEnd:
			return fmt.Errorf("%s has no NotOnOrAfter", c.Tag)
		case hasEnd && !now.Before(na.Add(skew)):
			return fmt.Errorf("%s has expired", c.Tag)
		case !nb.IsZero() && now.Add(skew).Before(nb):
			return fmt.Errorf("%s is not yet valid", c.Tag)
		}
		if na.After(latest) {
			latest = na
		}
		return nil
	}

	// Subject: one NameID, and confirmations every one of which is for our
	// ACS and this request and still valid (crewjam checks every method);
	// at least one must be bearer.
	subj, err := oneChild(el, nsAssertion, "Subject")
	if err != nil {
		return nil, err
	}
	nameIDEl, nameIDEncrypted, err := sp.subjectNameID(subj)
	if err != nil {
		return nil, err
	}
	nameID := text(nameIDEl)
	if nameID == "" {
		return nil, errors.New("assertion NameID is empty")
	}
	bearers := 0
	for _, sc := range children(subj, nsAssertion, "SubjectConfirmation") {
		if attr(sc, "Method") == bearerMethod {
			bearers++
		}
		d, err := oneChild(sc, nsAssertion, "SubjectConfirmationData")
		if err != nil {
			return nil, err
		}
		if attr(d, "Recipient") != sp.acs.String() {
			return nil, errors.New("SubjectConfirmationData Recipient is not our ACS")
		}
		if attr(d, "InResponseTo") != requestID {
			return nil, errors.New("SubjectConfirmationData InResponseTo does not match our request")
		}
		if err := valid(d, true); err != nil {
			return nil, err
		}
	}
	if bearers == 0 {
		return nil, errors.New("assertion has no bearer SubjectConfirmation")
	}

	// Conditions with an AudienceRestriction naming us. Every restriction
	// must be satisfied (Core 2.5.1.4); within one, any Audience will do.
	cond, err := oneChild(el, nsAssertion, "Conditions")
	if err != nil {
		return nil, err
	}
	if err := valid(cond, false); err != nil {
		return nil, err
	}
	restrictions := children(cond, nsAssertion, "AudienceRestriction")
	if len(restrictions) == 0 {
		return nil, errors.New("assertion has no AudienceRestriction")
	}
	for _, ar := range restrictions {
		ok := false
		for _, aud := range children(ar, nsAssertion, "Audience") {
			ok = ok || text(aud) == sp.cfg.SPEntityID
		}
		if !ok {
			return nil, errors.New("assertion AudienceRestriction does not name us")
		}
	}
	if len(children(cond, nsAssertion, "OneTimeUse")) > 1 {
		return nil, errors.New("assertion has several OneTimeUse")
	}

	stmts := children(el, nsAssertion, "AuthnStatement")
	if len(stmts) == 0 {
		return nil, errors.New("assertion has no AuthnStatement")
	}
	st := stmts[0]
	authnInstant, ok, err := timeAttr(st, "AuthnInstant")
	if err != nil || !ok {
		return nil, errors.New("AuthnStatement AuthnInstant is missing or malformed")
	}
	if sna, ok, err := timeAttr(st, "SessionNotOnOrAfter"); err != nil {
		return nil, err
	} else if ok && !now.Before(sna.Add(skew)) {
		return nil, errors.New("assertion AuthnStatement session has expired")
	}

	out := &Assertion{
		ID:              attr(el, "ID"),
		Issuer:          text(iss),
		NameID:          nameID,
		NameIDFormat:    attr(nameIDEl, "Format"),
		NameQualifier:   attr(nameIDEl, "NameQualifier"),
		SPNameQualifier: attr(nameIDEl, "SPNameQualifier"),
		SPProvidedID:    attr(nameIDEl, "SPProvidedID"),
		NameIDEncrypted: nameIDEncrypted,
		SessionIndex:    attr(st, "SessionIndex"),
		AuthnInstant:    authnInstant,
		Attributes:      map[string][]string{},
		FriendlyNames:   map[string]string{},
		NotOnOrAfter:    latest,
		InResponseTo:    requestID,
	}
	if ac, _ := onlyChild(st, nsAssertion, "AuthnContext"); ac != nil {
		if ref, _ := onlyChild(ac, nsAssertion, "AuthnContextClassRef"); ref != nil {
			out.AuthnContext = text(ref)
		}
	}
	for _, stmt := range children(el, nsAssertion, "AttributeStatement") {
		for _, at := range children(stmt, nsAssertion, "Attribute") {
			name := attr(at, "Name")
			if name == "" {
				continue
			}
			if fn := attr(at, "FriendlyName"); fn != "" {
				out.FriendlyNames[fn] = name
			}
			vals := out.Attributes[name]
			for _, v := range children(at, nsAssertion, "AttributeValue") {
				vals = append(vals, text(v))
			}
			out.Attributes[name] = vals
		}
	}
	return out, nil
}

// subjectNameID returns the NameID of a verified Subject: its NameID, or
// the one its EncryptedID holds (SAML Core 2.4.1), decrypted with the same
// rules as an encrypted assertion, and whether it was encrypted. The
// assertion's signature, or the Response's, covers the EncryptedID, so its
// ciphertext is the IdP's.
func (sp *SP) subjectNameID(subj *etree.Element) (*etree.Element, bool, error) {
	n, encrypted, err := sp.nameIDOf(subj)
	if err != nil {
		return nil, false, fmt.Errorf("assertion Subject: %w", err)
	}
	return n, encrypted, nil
}

// nameIDOf returns the one NameID of parent, a Subject or a LogoutRequest
// whose signature was verified: its NameID child, or the one its
// EncryptedID child holds, decrypted.
func (sp *SP) nameIDOf(parent *etree.Element) (*etree.Element, bool, error) {
	plain, err := onlyChild(parent, nsAssertion, "NameID")
	if err != nil {
		return nil, false, err
	}
	enc, err := onlyChild(parent, nsAssertion, "EncryptedID")
	if err != nil {
		return nil, false, err
	}
	switch {
	case plain != nil && enc != nil:
		return nil, false, errors.New("both a NameID and an EncryptedID")
	case plain != nil:
		return plain, false, nil
	case enc == nil:
		return nil, false, errors.New("no NameID or EncryptedID")
	case len(sp.decKeys) == 0:
		return nil, false, errors.New("the IdP sent an EncryptedID but no SP private key is configured to decrypt it")
	}
	d := sp.decrypter()
	n, err := d.decryptNameID(enc, true)
	if err != nil {
		return nil, false, fmt.Errorf("the EncryptedID could not be decrypted: %w", err)
	}
	// The message around it is verified: the IdP encrypted it.
	sp.noteDecryptedWith(d.used)
	return n, true, nil
}

// maxDecrypted is the bound on a decrypted assertion.
func (sp *SP) maxDecrypted() int {
	return int(min(sp.opts.MaxDecryptedBytes, sp.opts.MaxResponseBytes))
}

// consume makes the assertion and the request single-use across every
// instance sharing the store, until the assertion could no longer be
// accepted anyway.
func (sp *SP) consume(ctx context.Context, a *Assertion, requestID string) *providers.Error {
	until := a.NotOnOrAfter.Add(sp.opts.ClockSkew)
	if min := sp.env.Now().Add(sp.opts.ClockSkew); until.Before(min) {
		until = min
	}
	keys, n := [2]string{storeKey("saml:assertion:", a.Issuer, a.ID)}, 1
	if requestID != "" {
		keys[1], n = storeKey("saml:request:", requestID), 2
	}
	for _, k := range keys[:n] {
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

// storeKey is a single-use store key: prefix and a digest of parts, which
// keeps keys short and free of whatever characters an IdP puts in its IDs
// (the hex of the first 20 bytes of the SHA-256 of each part followed by a
// zero byte), made in one allocation.
func storeKey(prefix string, parts ...string) string {
	var buf [512]byte
	b := buf[:0]
	for _, p := range parts {
		b = append(append(b, p...), 0)
	}
	sum := sha256.Sum256(b)
	var hx [40]byte
	hex.Encode(hx[:], sum[:20])
	var k strings.Builder
	k.Grow(len(prefix) + len(hx))
	k.WriteString(prefix)
	k.Write(hx[:])
	return k.String()
}
