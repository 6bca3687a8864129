// Package oidfed is extauth's OpenID Federation 1.0 machinery: entity
// statements and their verification, metadata policy, trust chain
// resolution with constraints and trust marks, and the signing of our own
// entity configuration. Every JWS is go-jose's; this package only decides
// what a statement must say.
//
// It is internal: the oidc strategy (providers) and the test kit use it,
// hosts configure it through oidc_additional_settings.federation.
package oidfed

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/extauth/extauth/internal/outbound"
)

// Entity type identifiers (OpenID Federation 1.0, 5.1).
const (
	TypeFederationEntity = "federation_entity"
	TypeOpenIDProvider   = "openid_provider"
	TypeRelyingParty     = "openid_relying_party"
)

// WellKnownPath is where an entity serves its entity configuration, under
// its entity identifier (9).
const WellKnownPath = "/.well-known/openid-federation"

// Media types and JWS typ values (14).
const (
	ContentTypeEntityStatement = "application/entity-statement+jwt"
	TypEntityStatement         = "entity-statement+jwt"
	TypTrustMark               = "trust-mark+jwt"
	TypExplicitRegistration    = "explicit-registration-response+jwt"
)

// SigningAlgs are the JWS algorithms a federation statement or trust mark
// may be signed with: the asymmetric ones; none and HMAC never (a
// statement is verified with public keys only).
var SigningAlgs = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

// TrustMarkRef is one entry of an entity configuration's trust_marks.
// trust_mark_type is the final specification's name; id is what drafts
// before it (and Italy's SPID/CIE federation) call it: either is read.
type TrustMarkRef struct {
	Type      string `json:"trust_mark_type,omitempty"`
	ID        string `json:"id,omitempty"`
	TrustMark string `json:"trust_mark"`
}

// TypeID returns the trust mark type the entry names.
func (r TrustMarkRef) TypeID() string {
	if r.Type != "" {
		return r.Type
	}
	return r.ID
}

// Constraints are a subordinate statement's constraints (6.2).
type Constraints struct {
	MaxPathLength      *int               `json:"max_path_length,omitempty"`
	NamingConstraints  *NamingConstraints `json:"naming_constraints,omitempty"`
	AllowedEntityTypes []string           `json:"allowed_entity_types,omitempty"`
}

// NamingConstraints restrict the hosts of subordinates' entity
// identifiers, as RFC 5280 4.2.1.10 restricts DNS names.
type NamingConstraints struct {
	Permitted []string `json:"permitted,omitempty"`
	Excluded  []string `json:"excluded,omitempty"`
}

// TrustMarkOwner is an entry of a trust anchor's trust_mark_owners: the
// entity that owns a trust mark type and delegates its issuance.
type TrustMarkOwner struct {
	Subject string             `json:"sub"`
	JWKS    jose.JSONWebKeySet `json:"jwks"`
}

// Statement is an entity statement's claims (3.1): an entity
// configuration when Issuer equals Subject, else a subordinate statement.
type Statement struct {
	Issuer             string                    `json:"iss"`
	Subject            string                    `json:"sub"`
	IssuedAt           int64                     `json:"iat"`
	Expires            int64                     `json:"exp"`
	JWKS               *jose.JSONWebKeySet       `json:"jwks,omitempty"`
	AuthorityHints     []string                  `json:"authority_hints,omitempty"`
	Metadata           map[string]map[string]any `json:"metadata,omitempty"`
	MetadataPolicy     Policy                    `json:"metadata_policy,omitempty"`
	MetadataPolicyCrit []string                  `json:"metadata_policy_crit,omitempty"`
	Constraints        *Constraints              `json:"constraints,omitempty"`
	Crit               []string                  `json:"crit,omitempty"`
	TrustMarks         []TrustMarkRef            `json:"trust_marks,omitempty"`
	TrustMarkIssuers   map[string][]string       `json:"trust_mark_issuers,omitempty"`
	TrustMarkOwners    map[string]TrustMarkOwner `json:"trust_mark_owners,omitempty"`
	SourceEndpoint     string                    `json:"source_endpoint,omitempty"`
	// Audience and TrustAnchor are an explicit registration response's.
	Audience    string `json:"aud,omitempty"`
	TrustAnchor string `json:"trust_anchor,omitempty"`

	// Raw is the compact JWS the statement was read from.
	Raw string `json:"-"`
	// keyID is the kid of its signature header.
	keyID string
	jws   *jose.JSONWebSignature
}

// IsConfiguration reports whether s is an entity configuration (iss = sub).
func (s *Statement) IsConfiguration() bool { return s.Issuer == s.Subject }

// ExpiresAt returns exp as a time.
func (s *Statement) ExpiresAt() time.Time { return time.Unix(s.Expires, 0) }

// Describe names the statement in errors: "the entity configuration of X"
// or "the subordinate statement of X about Y".
func (s *Statement) Describe() string {
	if s.IsConfiguration() {
		return "the entity configuration of " + s.Subject
	}
	return "the subordinate statement of " + s.Issuer + " about " + s.Subject
}

// FetchEndpoint returns the federation_fetch_endpoint of an entity
// configuration's federation_entity metadata, "" when there is none.
func (s *Statement) FetchEndpoint() string { return s.federationString("federation_fetch_endpoint") }

// ListEndpoint returns the federation_list_endpoint, "" when there is none.
func (s *Statement) ListEndpoint() string { return s.federationString("federation_list_endpoint") }

// RegistrationEndpoint returns the openid_provider metadata's
// federation_registration_endpoint, "" when there is none.
func (s *Statement) RegistrationEndpoint() string {
	v, _ := s.Metadata[TypeOpenIDProvider]["federation_registration_endpoint"].(string)
	return v
}

func (s *Statement) federationString(name string) string {
	v, _ := s.Metadata[TypeFederationEntity][name].(string)
	return v
}

// understoodCrit are the claims outside the specification this package
// understands, for crit (13.4): none.
var understoodCrit = []string{}

// Error is a statement or chain that fails a rule of the specification:
// Statement names the statement, Rule says which check it failed.
type Error struct {
	Statement string
	Rule      string
	Err       error
}

func (e *Error) Error() string {
	msg := e.Statement + ": " + e.Rule
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// ErrExpired is wrapped by the error of a statement or trust mark past its
// exp, or issued in the future.
var ErrExpired = errors.New("outside its validity")

// maxStatementBytes bounds one statement, before parsing: a federation
// statement with its metadata and a few keys is a few kilobytes.
const maxStatementBytes = 256 << 10

// Parse reads a compact JWS entity statement: its typ must be
// entity-statement+jwt, its alg one of SigningAlgs, and it must carry a
// kid. The signature is not verified (Verify does): the keys that verify
// it come from another statement, found by the claims read here.
func Parse(raw string) (*Statement, error) {
	return parseTyped(raw, TypEntityStatement)
}

func parseTyped(raw, typ string) (*Statement, error) {
	what := "a statement"
	if len(raw) > maxStatementBytes {
		return nil, &Error{Statement: what, Rule: "is too large", Err: fmt.Errorf("%d bytes, at most %d", len(raw), maxStatementBytes)}
	}
	raw = strings.TrimSpace(raw)
	jws, err := jose.ParseSigned(raw, SigningAlgs)
	if err != nil {
		return nil, &Error{Statement: what, Rule: "is not a JWS signed with an asymmetric algorithm", Err: err}
	}
	if len(jws.Signatures) != 1 {
		return nil, &Error{Statement: what, Rule: "must carry exactly one signature"}
	}
	h := jws.Signatures[0].Protected
	var s Statement
	if err := json.Unmarshal(jws.UnsafePayloadWithoutVerification(), &s); err != nil {
		return nil, &Error{Statement: what, Rule: "has malformed claims", Err: err}
	}
	s.Raw, s.jws, s.keyID = raw, jws, h.KeyID
	if s.Issuer == "" || s.Subject == "" {
		return nil, &Error{Statement: what, Rule: "must have iss and sub"}
	}
	if got, _ := h.ExtraHeaders[jose.HeaderType].(string); got != typ {
		return nil, &Error{Statement: s.Describe(), Rule: fmt.Sprintf("must have typ %s", typ), Err: fmt.Errorf("typ is %.60q", got)}
	}
	if s.keyID == "" {
		return nil, &Error{Statement: s.Describe(), Rule: "must name its signing key (kid)"}
	}
	return &s, nil
}

// Check applies the rules of 3.2 that need no key: the required claims,
// iat in the past and exp in the future (with skew), the claims allowed in
// each kind of statement, crit understood, entity identifiers as URLs.
func (s *Statement) Check(now time.Time, skew time.Duration) error {
	bad := func(rule string, err error) error { return &Error{Statement: s.Describe(), Rule: rule, Err: err} }
	if s.IssuedAt == 0 || s.Expires == 0 {
		return bad("must have iat and exp", nil)
	}
	if time.Unix(s.IssuedAt, 0).After(now.Add(skew)) {
		return bad("is issued in the future (iat)", ErrExpired)
	}
	if !time.Unix(s.Expires, 0).After(now.Add(-skew)) {
		return bad("has expired (exp)", fmt.Errorf("%w: exp %s", ErrExpired, time.Unix(s.Expires, 0).UTC().Format(time.RFC3339)))
	}
	for _, id := range []string{s.Issuer, s.Subject} {
		if err := CheckEntityID(id); err != nil {
			return bad("names an invalid entity identifier", err)
		}
	}
	if s.JWKS == nil || len(s.JWKS.Keys) == 0 {
		return bad("must have jwks", nil)
	}
	seen := map[string]bool{}
	for _, k := range s.JWKS.Keys {
		if k.KeyID == "" || seen[k.KeyID] {
			return bad("must give every key of jwks a kid of its own", nil)
		}
		seen[k.KeyID] = true
		if !k.IsPublic() {
			return bad("must publish public keys only (jwks)", nil)
		}
	}
	for _, c := range s.Crit {
		if !slices.Contains(understoodCrit, c) {
			return bad("names a critical claim extauth does not understand (crit)", fmt.Errorf("%.60q", c))
		}
	}
	if s.IsConfiguration() {
		if s.MetadataPolicy != nil || s.MetadataPolicyCrit != nil || s.SourceEndpoint != "" {
			return bad("is an entity configuration: metadata_policy, metadata_policy_crit and source_endpoint belong in subordinate statements", nil)
		}
		// SPID and CIE anchors state their max_path_length in their own
		// configuration (spid-cie-oidc reads it there): ignored, since
		// constraints bind only in the statements about subordinates.
		s.Constraints = nil
		for _, h := range s.AuthorityHints {
			if err := CheckEntityID(h); err != nil {
				return bad("names an invalid authority hint", err)
			}
		}
		if s.AuthorityHints != nil && len(s.AuthorityHints) == 0 {
			return bad("must not have an empty authority_hints", nil)
		}
		for _, tm := range s.TrustMarks {
			if tm.TypeID() == "" || tm.TrustMark == "" {
				return bad("has a trust_marks entry without trust_mark_type or trust_mark", nil)
			}
		}
	} else {
		if s.AuthorityHints != nil || s.TrustMarkIssuers != nil || s.TrustMarkOwners != nil {
			return bad("is a subordinate statement: authority_hints, trust_mark_issuers and trust_mark_owners belong in entity configurations", nil)
		}
		// Italy's SPID and CIE anchors put their subordinates' trust marks
		// in the statements about them, as drafts before the final
		// specification allowed; they are ignored, never trusted: a
		// subject's marks are read from its own configuration.
		s.TrustMarks = nil
	}
	for typ, md := range s.Metadata {
		for name, v := range md {
			if v == nil {
				return bad("has a null metadata value", fmt.Errorf("%s.%s", typ, name))
			}
		}
	}
	if err := s.MetadataPolicy.validate(s.MetadataPolicyCrit); err != nil {
		return bad("has an invalid metadata_policy", err)
	}
	return nil
}

// Verify checks the statement's signature with the key of keys whose kid
// is the header's, exactly (3.2: a kid is required and must match).
func (s *Statement) Verify(keys *jose.JSONWebKeySet) error {
	if keys == nil {
		return &Error{Statement: s.Describe(), Rule: "cannot be verified: no keys"}
	}
	matches := keys.Key(s.keyID)
	if len(matches) == 0 {
		return &Error{Statement: s.Describe(), Rule: "is signed by a key its issuer's keys do not hold", Err: fmt.Errorf("kid %.80q", s.keyID)}
	}
	for _, k := range matches {
		if _, err := s.jws.Verify(k); err == nil {
			return nil
		}
	}
	return &Error{Statement: s.Describe(), Rule: "has a signature that does not verify", Err: fmt.Errorf("kid %.80q", s.keyID)}
}

// CheckEntityID checks an entity identifier: an https URL with a host, no
// query or fragment (1.2). Plain http is allowed on a loopback host, for
// tests and development.
func CheckEntityID(id string) error {
	u, err := url.Parse(id)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("%.200q is not an https URL without query or fragment", id)
	}
	if u.Scheme == "https" || u.Scheme == "http" && outbound.IsLoopback(u.Hostname()) {
		return nil
	}
	return fmt.Errorf("%.200q must be https", id)
}

// ConfigurationURL returns where the entity id serves its entity
// configuration (9): the well-known path under the identifier's path.
func ConfigurationURL(id string) string {
	return strings.TrimSuffix(id, "/") + WellKnownPath
}
