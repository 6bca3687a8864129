package oidcop

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/extauth/extauth/internal/oidfed"
)

// Federation makes the provider an OpenID Federation 1.0 OP (Config.
// Federation): it serves its entity configuration under its issuer, its
// openid_provider metadata being its discovery document with its keys by
// value, and registers clients automatically: it resolves the trust chain
// of the client ID (the client's entity identifier) to TrustAnchors and
// takes the client's redirect URIs and keys from its resolved
// openid_relying_party metadata. The client must then authenticate with
// private_key_jwt and sign its authorization requests.
type Federation struct {
	// Key signs the entity configuration; an EC P-256 key is generated
	// when nil.
	Key crypto.Signer
	// AuthorityHints are the provider's superiors.
	AuthorityHints []string
	// TrustAnchors are the anchors its clients' chains must reach.
	TrustAnchors []TrustAnchor
	// TrustMarks are published in its entity configuration.
	TrustMarks []TrustMark
	// OrganizationName is its display name (federation_entity and
	// openid_provider metadata).
	OrganizationName string
}

// TrustAnchor is a trust anchor pinned by its entity identifier and keys.
type TrustAnchor struct {
	EntityID string
	JWKS     jose.JSONWebKeySet
}

// TrustMark is a trust mark of the provider's: its type and JWT.
type TrustMark struct {
	Type, TrustMark string
}

// EntityConfiguration counts the requests for the entity configuration (Hits).
const EntityConfiguration Endpoint = "entity_configuration"

type opFederation struct {
	op       *OP
	key      oidfed.Key
	cfg      *Federation
	resolver *oidfed.Resolver
}

func newOPFederation(op *OP, f *Federation) (*opFederation, error) {
	signer := f.Key
	if signer == nil {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		signer = k
	}
	key, err := oidfed.NewKey(signer)
	if err != nil {
		return nil, fmt.Errorf("oidcop: federation key: %w", err)
	}
	if len(f.TrustAnchors) == 0 {
		return nil, errors.New("oidcop: a federation needs trust anchors")
	}
	var anchors []oidfed.Anchor
	for _, a := range f.TrustAnchors {
		anchors = append(anchors, oidfed.Anchor{EntityID: a.EntityID, JWKS: a.JWKS})
	}
	return &opFederation{op: op, key: key, cfg: f,
		resolver: &oidfed.Resolver{Client: op.cfg.HTTPClient, Anchors: anchors, Now: op.now}}, nil
}

// FederationJWKS returns the provider's federation keys, for the
// statement its superior makes about it; empty without a federation.
func (op *OP) FederationJWKS() jose.JSONWebKeySet {
	if op.fed == nil {
		return jose.JSONWebKeySet{}
	}
	return *oidfed.JWKS(op.fed.key)
}

func (f *opFederation) serve(w http.ResponseWriter, r *http.Request) {
	op := f.op
	md := op.discoveryDocument()
	op.mu.Lock()
	keys := make([]jose.JSONWebKey, 0, len(op.keys))
	for _, k := range op.keys {
		keys = append(keys, jose.JSONWebKey{Key: k.priv.Public(), KeyID: k.kid, Algorithm: k.alg, Use: "sig"})
	}
	op.mu.Unlock()
	md["jwks"] = jose.JSONWebKeySet{Keys: keys}
	md["client_registration_types_supported"] = []string{"automatic"}
	fe := map[string]any{}
	if f.cfg.OrganizationName != "" {
		md["organization_name"] = f.cfg.OrganizationName
		fe["organization_name"] = f.cfg.OrganizationName
	}
	var marks []oidfed.TrustMarkRef
	for _, tm := range f.cfg.TrustMarks {
		marks = append(marks, oidfed.TrustMarkRef{Type: tm.Type, ID: tm.Type, TrustMark: tm.TrustMark})
	}
	// Signed anew for each request: the keys it publishes rotate.
	e := &oidfed.Entity{ID: op.cfg.Issuer, Keys: []oidfed.Key{f.key}, AuthorityHints: f.cfg.AuthorityHints, TrustMarks: marks,
		Metadata: map[string]map[string]any{oidfed.TypeOpenIDProvider: md, oidfed.TypeFederationEntity: fe}, Now: op.now, Lifetime: time.Hour}
	e.ServeConfiguration(w, r)
}

func (op *OP) serveFederation(w http.ResponseWriter, r *http.Request) { op.fed.serve(w, r) }

// client resolves the client's trust chain and returns its resolved
// openid_relying_party metadata (automatic registration, 12.1).
func (f *opFederation) client(ctx context.Context, id string) (map[string]any, error) {
	c, err := f.resolver.Resolve(ctx, id, oidfed.TypeRelyingParty)
	if err != nil {
		return nil, err
	}
	return c.Metadata[oidfed.TypeRelyingParty], nil
}

// clientKeys returns the keys of the client's resolved metadata.
func (f *opFederation) clientKeys(id string) (*jose.JSONWebKeySet, error) {
	md, err := f.client(context.Background(), id)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(md["jwks"])
	if err != nil {
		return nil, err
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(raw, &set); err != nil {
		return nil, fmt.Errorf("the client's resolved jwks: %w", err)
	}
	return &set, nil
}

func stringList(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
