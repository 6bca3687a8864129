package oidfed

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Key is a federation signing key: the private half signs, the public
// half is published in jwks under KeyID.
type Key struct {
	Signer crypto.Signer
	KeyID  string
	Alg    jose.SignatureAlgorithm
}

// NewKey wraps signer with its RFC 7638 thumbprint as kid and the
// algorithm its type signs with: RS256 for RSA (what SPID and CIE
// federations use), ES256, ES384 or ES512 by curve, EdDSA.
func NewKey(signer crypto.Signer) (Key, error) {
	var alg jose.SignatureAlgorithm
	switch k := signer.Public().(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() < 2048 {
			return Key{}, errors.New("an RSA federation key must have 2048 bits or more")
		}
		alg = jose.RS256
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			alg = jose.ES256
		case elliptic.P384():
			alg = jose.ES384
		case elliptic.P521():
			alg = jose.ES512
		default:
			return Key{}, errors.New("an EC federation key must be on P-256, P-384 or P-521")
		}
	case ed25519.PublicKey:
		alg = jose.EdDSA
	default:
		return Key{}, fmt.Errorf("a federation key must be RSA, EC or Ed25519, not %T", k)
	}
	jwk := jose.JSONWebKey{Key: signer.Public()}
	tp, err := jwk.Thumbprint(crypto.SHA256)
	if err != nil {
		return Key{}, err
	}
	return Key{Signer: signer, KeyID: base64.RawURLEncoding.EncodeToString(tp), Alg: alg}, nil
}

// Public returns the key's public JWK, with use sig.
func (k Key) Public() jose.JSONWebKey {
	return jose.JSONWebKey{Key: k.Signer.Public(), KeyID: k.KeyID, Algorithm: string(k.Alg), Use: "sig"}
}

// JWKS returns the public key set of keys.
func JWKS(keys ...Key) *jose.JSONWebKeySet {
	set := &jose.JSONWebKeySet{}
	for _, k := range keys {
		set.Keys = append(set.Keys, k.Public())
	}
	return set
}

// Sign signs claims as a compact JWS of type typ with k.
func Sign(k Key, typ string, claims any) (string, error) {
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: k.Alg, Key: jose.JSONWebKey{Key: k.Signer, KeyID: k.KeyID}},
		(&jose.SignerOptions{}).WithType(jose.ContentType(typ)))
	if err != nil {
		return "", err
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}

// Entity is a federation entity that publishes its entity configuration:
// ours as a relying party, or an authority of the test kit.
type Entity struct {
	ID string
	// Keys are its federation keys: the first signs, all are published
	// (a key rotated in, or one rotated out whose statements may still be
	// held).
	Keys           []Key
	AuthorityHints []string
	TrustMarks     []TrustMarkRef
	Metadata       map[string]map[string]any
	// TrustMarkIssuers and TrustMarkOwners are a trust anchor's.
	TrustMarkIssuers map[string][]string
	TrustMarkOwners  map[string]TrustMarkOwner
	// Lifetime is how long a configuration it signs is valid; a day when
	// zero.
	Lifetime time.Duration
	Now      func() time.Time

	mu     sync.Mutex
	signed string
	at     time.Time
}

// DefaultLifetime is the validity of an entity configuration Entity
// signs when Lifetime is zero.
const DefaultLifetime = 24 * time.Hour

func (e *Entity) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

func (e *Entity) lifetime() time.Duration {
	if e.Lifetime > 0 {
		return e.Lifetime
	}
	return DefaultLifetime
}

// Configuration returns the entity's signed entity configuration. A
// signed one is reused for a tenth of its lifetime (it is the same
// document, and signing with RSA costs a millisecond), so what a cache
// holds is never older than that.
func (e *Entity) Configuration() (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	if e.signed != "" && now.Sub(e.at) < e.lifetime()/10 && !now.Before(e.at) {
		return e.signed, nil
	}
	if len(e.Keys) == 0 {
		return "", errors.New("the entity has no federation key")
	}
	st := Statement{
		Issuer: e.ID, Subject: e.ID, IssuedAt: now.Unix(), Expires: now.Add(e.lifetime()).Unix(),
		JWKS: JWKS(e.Keys...), AuthorityHints: e.AuthorityHints, Metadata: e.Metadata,
		TrustMarks: e.TrustMarks, TrustMarkIssuers: e.TrustMarkIssuers, TrustMarkOwners: e.TrustMarkOwners,
	}
	raw, err := Sign(e.Keys[0], TypEntityStatement, st)
	if err != nil {
		return "", err
	}
	e.signed, e.at = raw, now
	return raw, nil
}

// ServeConfiguration serves the entity configuration at the well-known
// path (9.2): the entity-statement+jwt media type, and a Cache-Control
// max-age of the time it is reused, so that no cache serves it stale.
func (e *Entity) ServeConfiguration(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	raw, err := e.Configuration()
	if err != nil {
		http.Error(w, "the entity configuration cannot be signed", http.StatusInternalServerError)
		return
	}
	writeStatement(w, raw, e.lifetime()/10)
}

func writeStatement(w http.ResponseWriter, raw string, maxAge time.Duration) {
	w.Header().Set("Content-Type", ContentTypeEntityStatement)
	w.Header().Set("Cache-Control", "public, max-age="+strconv.Itoa(int(maxAge/time.Second)))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write([]byte(raw))
}

// Subordinate is what an authority says about one of its subordinates.
type Subordinate struct {
	JWKS           *jose.JSONWebKeySet
	Metadata       map[string]map[string]any
	MetadataPolicy Policy
	Constraints    *Constraints
	// EntityTypes are listed by the list endpoint's entity_type filter.
	EntityTypes []string
	// TrustMarkTypes are listed by its trust_marked filter.
	TrustMarkTypes []string
	// Intermediate lists it as an intermediate.
	Intermediate bool
}

// Authority serves a trust anchor or an intermediate (a federation
// entity with subordinates): its configuration at the well-known path,
// subordinate statements at /fetch, the list of subordinates at /list.
// The test kit and the tests use it; an RP never is one.
type Authority struct {
	*Entity
	mu           sync.Mutex
	subordinates map[string]Subordinate
}

// NewAuthority returns an authority for e, whose federation_entity
// metadata it completes with its fetch and list endpoints.
func NewAuthority(e *Entity) *Authority {
	md := maps.Clone(e.Metadata)
	if md == nil {
		md = map[string]map[string]any{}
	}
	fe := maps.Clone(md[TypeFederationEntity])
	if fe == nil {
		fe = map[string]any{}
	}
	fe["federation_fetch_endpoint"] = e.ID + "/fetch"
	fe["federation_list_endpoint"] = e.ID + "/list"
	md[TypeFederationEntity] = fe
	e.Metadata = md
	return &Authority{Entity: e, subordinates: map[string]Subordinate{}}
}

// Add makes id a subordinate, or replaces what the authority says of it.
func (a *Authority) Add(id string, s Subordinate) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.subordinates[id] = s
}

// Statement returns the signed subordinate statement about id.
func (a *Authority) Statement(id string) (string, bool, error) {
	a.mu.Lock()
	s, ok := a.subordinates[id]
	a.mu.Unlock()
	if !ok {
		return "", false, nil
	}
	now := a.now()
	st := Statement{Issuer: a.ID, Subject: id, IssuedAt: now.Unix(), Expires: now.Add(a.lifetime()).Unix(),
		JWKS: s.JWKS, Metadata: s.Metadata, MetadataPolicy: s.MetadataPolicy, Constraints: s.Constraints,
		SourceEndpoint: a.ID + "/fetch"}
	raw, err := Sign(a.Keys[0], TypEntityStatement, st)
	return raw, true, err
}

// List returns the subordinates' entity identifiers that pass the list
// endpoint's filters (8.2.1), sorted.
func (a *Authority) List(entityType, trustMarked string, intermediate bool) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for id, s := range a.subordinates {
		if entityType != "" && !slices.Contains(s.EntityTypes, entityType) ||
			trustMarked != "" && !slices.Contains(s.TrustMarkTypes, trustMarked) ||
			intermediate && !s.Intermediate {
			continue
		}
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// ServeHTTP serves the configuration, /fetch and /list under the
// authority's entity identifier's path, which the caller strips.
func (a *Authority) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case WellKnownPath:
		a.ServeConfiguration(w, r)
	case "/fetch":
		raw, ok, err := a.Statement(r.URL.Query().Get("sub"))
		switch {
		case err != nil:
			http.Error(w, "cannot sign", http.StatusInternalServerError)
		case !ok:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":"not_found","error_description":"no such subordinate"}`))
		default:
			writeStatement(w, raw, 0)
		}
	case "/list":
		q := r.URL.Query()
		ids := a.List(q.Get("entity_type"), q.Get("trust_marked"), q.Get("intermediate") == "true")
		if ids == nil {
			ids = []string{}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(ids)
	default:
		http.NotFound(w, r)
	}
}

// TrustMarkClaims are the claims of a trust mark the test kit issues.
type TrustMarkClaims struct {
	Issuer   string `json:"iss"`
	Subject  string `json:"sub"`
	Type     string `json:"trust_mark_type"`
	ID       string `json:"id,omitempty"`
	IssuedAt int64  `json:"iat"`
	Expires  int64  `json:"exp,omitempty"`
	LogoURI  string `json:"logo_uri,omitempty"`
	Ref      string `json:"ref,omitempty"`
}

// IssueTrustMark signs a trust mark of type typ for subject, valid for
// life (forever when zero), with e's key.
func (e *Entity) IssueTrustMark(typ, subject string, life time.Duration) (TrustMarkRef, error) {
	now := e.now()
	c := TrustMarkClaims{Issuer: e.ID, Subject: subject, Type: typ, ID: typ, IssuedAt: now.Unix()}
	if life > 0 {
		c.Expires = now.Add(life).Unix()
	}
	raw, err := Sign(e.Keys[0], TypTrustMark, c)
	if err != nil {
		return TrustMarkRef{}, err
	}
	return TrustMarkRef{Type: typ, ID: typ, TrustMark: raw}, nil
}
