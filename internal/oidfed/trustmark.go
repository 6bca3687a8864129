package oidfed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/extauth/extauth/internal/outbound"
)

// The typ values of a trust mark's delegation and of a status answer.
const (
	TypTrustMarkDelegation = "trust-mark-delegation+jwt"
	TypTrustMarkStatus     = "trust-mark-status-response+jwt"
)

// TrustMark is a verified trust mark (7).
type TrustMark struct {
	Type     string
	Issuer   string
	Subject  string
	IssuedAt time.Time
	// Expires is zero for a mark that does not expire.
	Expires time.Time
	LogoURI string
	Ref     string
	Raw     string
}

type trustMarkClaims struct {
	Issuer     string `json:"iss"`
	Subject    string `json:"sub"`
	Type       string `json:"trust_mark_type"`
	ID         string `json:"id"`
	IssuedAt   int64  `json:"iat"`
	Expires    int64  `json:"exp"`
	LogoURI    string `json:"logo_uri"`
	Ref        string `json:"ref"`
	Delegation string `json:"delegation"`
	// Status is a status answer's (8.4.2).
	Status string `json:"status"`
}

func (c *trustMarkClaims) typeID() string {
	if c.Type != "" {
		return c.Type
	}
	return c.ID
}

// signed is a JWS of a given typ read before its key is known.
type signed struct {
	jws    *jose.JSONWebSignature
	keyID  string
	claims trustMarkClaims
}

func parseSigned(raw, typ, what string) (*signed, error) {
	if len(raw) > maxStatementBytes {
		return nil, &Error{Statement: what, Rule: "is too large"}
	}
	jws, err := jose.ParseSigned(strings.TrimSpace(raw), SigningAlgs)
	if err != nil {
		return nil, &Error{Statement: what, Rule: "is not a JWS signed with an asymmetric algorithm", Err: err}
	}
	if len(jws.Signatures) != 1 {
		return nil, &Error{Statement: what, Rule: "must carry exactly one signature"}
	}
	h := jws.Signatures[0].Protected
	if got, _ := h.ExtraHeaders[jose.HeaderType].(string); got != typ {
		return nil, &Error{Statement: what, Rule: "must have typ " + typ, Err: fmt.Errorf("typ is %.60q", got)}
	}
	if h.KeyID == "" {
		return nil, &Error{Statement: what, Rule: "must name its signing key (kid)"}
	}
	s := &signed{jws: jws, keyID: h.KeyID}
	if err := json.Unmarshal(jws.UnsafePayloadWithoutVerification(), &s.claims); err != nil {
		return nil, &Error{Statement: what, Rule: "has malformed claims", Err: err}
	}
	return s, nil
}

func (s *signed) verify(keys *jose.JSONWebKeySet, what string) error {
	for _, k := range keys.Key(s.keyID) {
		if _, err := s.jws.Verify(k); err == nil {
			return nil
		}
	}
	return &Error{Statement: what, Rule: "is not signed by its issuer's keys", Err: fmt.Errorf("kid %.80q", s.keyID)}
}

func (r *Resolver) checkTimes(c *trustMarkClaims, what string) error {
	now, skew := r.now(), r.skew()
	if c.IssuedAt == 0 || time.Unix(c.IssuedAt, 0).After(now.Add(skew)) {
		return &Error{Statement: what, Rule: "must have an iat in the past", Err: ErrExpired}
	}
	if c.Expires != 0 && !time.Unix(c.Expires, 0).After(now.Add(-skew)) {
		return &Error{Statement: what, Rule: "has expired (exp)", Err: fmt.Errorf("%w: exp %s", ErrExpired, time.Unix(c.Expires, 0).UTC().Format(time.RFC3339))}
	}
	return nil
}

// checkTrustMarks verifies the subject's trust marks against the chain's
// anchor and requires those of RequiredTrustMarks.
func (r *Resolver) checkTrustMarks(ctx context.Context, chain *Chain) error {
	leaf, anchor := chain.Statements[0], chain.Statements[len(chain.Statements)-1]
	for _, ref := range leaf.TrustMarks {
		tm, err := r.verifyTrustMark(ctx, ref, leaf.Subject, anchor)
		if err != nil {
			chain.Rejected = append(chain.Rejected, err)
			continue
		}
		chain.TrustMarks = append(chain.TrustMarks, *tm)
	}
	for _, want := range r.RequiredTrustMarks {
		if slices.ContainsFunc(chain.TrustMarks, func(tm TrustMark) bool { return tm.Type == want }) {
			continue
		}
		why := []error{fmt.Errorf("%s holds none that verifies", leaf.Subject)}
		return &Error{Statement: leaf.Describe(), Rule: "lacks the required trust mark " + want, Err: errors.Join(append(why, chain.Rejected...)...)}
	}
	return nil
}

// verifyTrustMark checks one trust mark of subject (7.3): its typ,
// claims and times, an issuer the anchor authorizes for its type, the
// signature by the issuer's keys (the anchor's, or those of the issuer's
// own chain to the same anchor), the owner's delegation where the anchor
// names an owner, and, with CheckTrustMarkStatus, that the issuer still
// says it is active.
func (r *Resolver) verifyTrustMark(ctx context.Context, ref TrustMarkRef, subject string, anchor *Statement) (*TrustMark, error) {
	what := fmt.Sprintf("the trust mark %.200s of %s", ref.TypeID(), subject)
	s, err := parseSigned(ref.TrustMark, TypTrustMark, what)
	if err != nil {
		return nil, err
	}
	c := &s.claims
	switch {
	case c.Subject != subject:
		return nil, &Error{Statement: what, Rule: "is about another entity (sub)", Err: fmt.Errorf("sub %.200q", c.Subject)}
	case c.typeID() != ref.TypeID():
		return nil, &Error{Statement: what, Rule: "has a trust_mark_type other than its entry's", Err: fmt.Errorf("%.200q", c.typeID())}
	case c.Issuer == "":
		return nil, &Error{Statement: what, Rule: "must have iss"}
	}
	if err := r.checkTimes(c, what); err != nil {
		return nil, err
	}
	issuers, listed := anchor.TrustMarkIssuers[c.typeID()]
	switch {
	case c.Issuer == anchor.Subject:
	case !listed:
		return nil, &Error{Statement: what, Rule: "is of a type the trust anchor " + anchor.Subject + " does not list in trust_mark_issuers"}
	case len(issuers) > 0 && !slices.Contains(issuers, c.Issuer):
		return nil, &Error{Statement: what, Rule: "is issued by an entity the trust anchor does not authorize for its type", Err: fmt.Errorf("iss %.200q", c.Issuer)}
	}
	keys := anchor.JWKS
	var issuerEC *Statement
	if c.Issuer == anchor.Subject {
		issuerEC = anchor
	} else {
		ic, err := r.resolve(ctx, c.Issuer, false)
		if err != nil {
			return nil, &Error{Statement: what, Rule: "has an issuer without a valid trust chain", Err: err}
		}
		if ic.Anchor != anchor.Subject {
			return nil, &Error{Statement: what, Rule: "has an issuer trusted through another anchor", Err: fmt.Errorf("%s", ic.Anchor)}
		}
		issuerEC = ic.Statements[0]
		keys = issuerEC.JWKS
	}
	if err := s.verify(keys, what); err != nil {
		return nil, err
	}
	if owner, ok := anchor.TrustMarkOwners[c.typeID()]; ok {
		if err := r.checkDelegation(c, owner, what); err != nil {
			return nil, err
		}
	}
	if r.CheckTrustMarkStatus {
		if err := r.checkStatus(ctx, ref.TrustMark, issuerEC, keys, what); err != nil {
			return nil, err
		}
	}
	tm := &TrustMark{Type: c.typeID(), Issuer: c.Issuer, Subject: c.Subject, IssuedAt: time.Unix(c.IssuedAt, 0),
		LogoURI: c.LogoURI, Ref: c.Ref, Raw: ref.TrustMark}
	if c.Expires != 0 {
		tm.Expires = time.Unix(c.Expires, 0)
	}
	return tm, nil
}

// checkDelegation verifies the delegation a trust mark of an owned type
// must carry (7.2.1): signed by the owner, naming the issuer and the type.
func (r *Resolver) checkDelegation(c *trustMarkClaims, owner TrustMarkOwner, what string) error {
	if c.Delegation == "" {
		return &Error{Statement: what, Rule: "lacks the delegation of its type's owner " + owner.Subject}
	}
	dwhat := "the delegation of " + what
	d, err := parseSigned(c.Delegation, TypTrustMarkDelegation, dwhat)
	if err != nil {
		return err
	}
	if d.claims.Issuer != owner.Subject || d.claims.Subject != c.Issuer || d.claims.typeID() != c.typeID() {
		return &Error{Statement: dwhat, Rule: "must be issued by the owner to the trust mark's issuer for its type"}
	}
	if err := r.checkTimes(&d.claims, dwhat); err != nil {
		return err
	}
	return d.verify(&owner.JWKS, dwhat)
}

// checkStatus asks the issuer's federation_trust_mark_status_endpoint,
// where it publishes one, whether the mark is active (8.4): a signed
// answer (final specification) or the JSON of earlier drafts.
func (r *Resolver) checkStatus(ctx context.Context, raw string, issuer *Statement, keys *jose.JSONWebKeySet, what string) error {
	endpoint := issuer.federationString("federation_trust_mark_status_endpoint")
	if endpoint == "" {
		return nil
	}
	if err := checkEndpoint(endpoint, issuer.Subject); err != nil {
		return &Error{Statement: issuer.Describe(), Rule: "has an unusable federation_trust_mark_status_endpoint", Err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(url.Values{"trust_mark": {raw}}.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := r.Client.Do(req)
	if err != nil {
		return &Error{Statement: what, Rule: "has a status that could not be fetched", Err: outbound.Scrub(err)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxStatementBytes+1))
	if err != nil || len(body) > maxStatementBytes {
		return &Error{Statement: what, Rule: "has a status that could not be read", Err: outbound.Scrub(err)}
	}
	if resp.StatusCode != http.StatusOK {
		return &Error{Statement: what, Rule: "is not active at its issuer", Err: fmt.Errorf("status endpoint: HTTP %d", resp.StatusCode)}
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if strings.HasSuffix(mt, "+jwt") || strings.HasSuffix(mt, "/jwt") {
		s, err := parseSigned(string(body), TypTrustMarkStatus, "the status of "+what)
		if err != nil {
			return err
		}
		if err := s.verify(keys, "the status of "+what); err != nil {
			return err
		}
		if s.claims.Status != "active" {
			return &Error{Statement: what, Rule: "is not active at its issuer", Err: fmt.Errorf("status %.40q", s.claims.Status)}
		}
		return nil
	}
	var old struct {
		Active *bool `json:"active"`
	}
	if err := json.Unmarshal(body, &old); err != nil || old.Active == nil {
		return &Error{Statement: what, Rule: "has a malformed status answer"}
	}
	if !*old.Active {
		return &Error{Statement: what, Rule: "is not active at its issuer"}
	}
	return nil
}

// VerifySigned verifies a JWS of type typ (a signed key set,
// jwk-set+jwt) with keys, an exp it has not passed, and returns its
// payload.
func VerifySigned(raw, typ string, keys *jose.JSONWebKeySet) ([]byte, error) {
	s, err := parseSigned(raw, typ, "a "+typ)
	if err != nil {
		return nil, err
	}
	if err := s.verify(keys, "a "+typ); err != nil {
		return nil, err
	}
	if s.claims.Expires != 0 && !time.Unix(s.claims.Expires, 0).After(time.Now().Add(-DefaultSkew)) {
		return nil, &Error{Statement: "a " + typ, Rule: "has expired (exp)", Err: ErrExpired}
	}
	return s.jws.UnsafePayloadWithoutVerification(), nil
}
