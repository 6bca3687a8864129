package providers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/extauth/extauth/internal/oidfed"
	"github.com/extauth/extauth/internal/telemetry"
)

// OIDCFederation makes the oidc strategy a relying party of an OpenID
// Federation 1.0 federation (oidc_additional_settings.federation): it
// publishes its entity configuration, resolves the provider's trust chain
// to one of TrustAnchors instead of reading its discovery document, and
// registers automatically (the provider resolves ours) or explicitly.
// The client ID is the entity identifier; the client authenticates with
// private_key_jwt and signs its authorization requests with
// OIDCConfig.PrivateKey, whose public halves are in the entity
// configuration's openid_relying_party metadata.
type OIDCFederation struct {
	// EntityID is our entity identifier (entity_id): the oidc routes'
	// base, BaseURL + /users/auth/oidc, under which the entity
	// configuration is served at /.well-known/openid-federation. Empty
	// takes it; anything else is refused, since nothing would serve it.
	EntityID string
	// Key is the federation key (federation_key), PEM, that signs the
	// entity configuration; separate from the client's key. NextKey
	// (federation_key_new) is published beside it before it signs, and
	// OldKey (federation_key_old) after it stopped signing, as the
	// client's keys rotate.
	Key     string `redact:"secret"`
	NextKey string `redact:"secret"`
	OldKey  string `redact:"secret"`
	// AuthorityHints are our immediate superiors (authority_hints).
	AuthorityHints []string
	// TrustAnchors are the anchors we trust (trust_anchors), each pinned
	// by its entity identifier and its federation JWKS.
	TrustAnchors []OIDCTrustAnchor
	// TrustMarks are the trust marks the federation issued us
	// (trust_marks), published in our entity configuration.
	TrustMarks []OIDCTrustMark
	// RequiredTrustMarks are the trust mark types the provider must hold
	// (required_trust_marks), each verified; TrustMarkStatus
	// (trust_mark_status) also asks each issuer that publishes a status
	// endpoint whether the mark is active.
	RequiredTrustMarks []string
	TrustMarkStatus    bool
	// Registration is OIDCRegistrationAutomatic (the default) or
	// OIDCRegistrationExplicit (registration).
	Registration string
	// OrganizationName, Contacts, HomepageURI, LogoURI and PolicyURI are
	// our display metadata (organization_name, contacts, homepage_uri,
	// logo_uri, policy_uri).
	OrganizationName string
	Contacts         []string
	HomepageURI      string
	LogoURI          string
	PolicyURI        string
	// ConfigurationLifetime is how long our entity configuration is valid
	// (configuration_lifetime); a day when zero.
	ConfigurationLifetime time.Duration
	// Providers are the OpenID providers (entity identifiers) users may
	// choose (providers) when OIDCConfig.Issuer is empty: the sign-in
	// starts at the one the op field names, and a start that names none
	// gets the discovery page (NewOIDCFederationChooser). ListProviders
	// (list_providers) adds those each trust anchor's list endpoint
	// lists, with the first of RequiredTrustMarks when there is one.
	Providers     []string
	ListProviders bool
}

// OIDCTrustAnchor is a trust anchor pinned by its entity identifier and
// the JSON of its federation key set ({"keys": [...]}).
type OIDCTrustAnchor struct {
	EntityID string
	JWKS     string
}

// OIDCTrustMark is a trust mark the federation issued us: its type
// (trust_mark_type, which SPID and CIE call id) and the signed JWT.
type OIDCTrustMark struct {
	Type      string
	TrustMark string
}

// The values of OIDCFederation.Registration.
const (
	OIDCRegistrationAutomatic = "automatic"
	OIDCRegistrationExplicit  = "explicit"
)

// PurposeFederation is the Route.Purpose of the route that serves the
// entity configuration, /users/auth/oidc/.well-known/openid-federation.
const PurposeFederation = ".well-known/openid-federation"

// The entries of oidc_additional_settings.federation.
const (
	settingFederation       = OIDCSettingsKey + ".federation"
	settingFedEntityID      = settingFederation + ".entity_id"
	settingFedKey           = settingFederation + ".federation_key"
	settingFedKeyNew        = settingFederation + ".federation_key_new"
	settingFedKeyOld        = settingFederation + ".federation_key_old"
	settingFedHints         = settingFederation + ".authority_hints"
	settingFedAnchors       = settingFederation + ".trust_anchors"
	settingFedTrustMarks    = settingFederation + ".trust_marks"
	settingFedRegistration  = settingFederation + ".registration"
	settingFedRequiredMarks = settingFederation + ".required_trust_marks"
	settingFedProviders     = settingFederation + ".providers"
	settingFedList          = settingFederation + ".list_providers"
)

// federation is the oidc strategy's federation state.
type federation struct {
	entity   *oidfed.Entity
	resolver *oidfed.Resolver
	explicit bool
}

// checkFederation returns the problems of c's federation settings that
// show without asking anyone.
func checkFederation(c OIDCConfig) []*OIDCSettingError {
	f := c.Federation
	if f == nil {
		return nil
	}
	var ps []*OIDCSettingError
	bad := func(setting, format string, args ...any) {
		ps = append(ps, &OIDCSettingError{Setting: setting, Reason: fmt.Sprintf(format, args...)})
	}
	if f.EntityID != "" {
		if err := oidfed.CheckEntityID(f.EntityID); err != nil {
			bad(settingFedEntityID, "%s", err.Error())
		}
	}
	if f.Key == "" {
		bad(settingFedKey, "is missing (the federation needs a key to sign our entity configuration)")
	}
	for _, k := range []struct{ setting, text string }{{settingFedKey, f.Key}, {settingFedKeyNew, f.NextKey}, {settingFedKeyOld, f.OldKey}} {
		if k.text == "" {
			continue
		}
		if _, err := ParseOIDCPrivateKey(k.text); err != nil {
			bad(k.setting, "%s", err.Error())
		} else if k.text == c.PrivateKey {
			bad(k.setting, "holds the client's private_key: the federation key must be another (OpenID Federation 1.0, 3.1)")
		}
	}
	if len(f.AuthorityHints) == 0 {
		bad(settingFedHints, "is missing (our immediate superiors in the federation)")
	}
	for i, h := range f.AuthorityHints {
		if err := oidfed.CheckEntityID(h); err != nil {
			bad(fmt.Sprintf("%s[%d]", settingFedHints, i), "%s", err.Error())
		}
	}
	if len(f.TrustAnchors) == 0 {
		bad(settingFedAnchors, "is missing (the trust anchors, each with its entity identifier and JWKS)")
	}
	for _, a := range f.TrustAnchors {
		setting := settingFedAnchors + "." + a.EntityID
		if err := oidfed.CheckEntityID(a.EntityID); err != nil {
			bad(setting, "%s", err.Error())
		}
		if _, err := parseAnchorJWKS(a.JWKS); err != nil {
			bad(setting, "%s", err.Error())
		}
	}
	for i, tm := range f.TrustMarks {
		if tm.Type == "" || tm.TrustMark == "" {
			bad(fmt.Sprintf("%s[%d]", settingFedTrustMarks, i), "needs trust_mark_type (or id) and trust_mark")
		}
	}
	for i, p := range f.Providers {
		if err := oidfed.CheckEntityID(p); err != nil {
			bad(fmt.Sprintf("%s[%d]", settingFedProviders, i), "%s", err.Error())
		}
	}
	switch f.Registration {
	case "", OIDCRegistrationAutomatic, OIDCRegistrationExplicit:
	default:
		bad(settingFedRegistration, "must be %s or %s", OIDCRegistrationAutomatic, OIDCRegistrationExplicit)
	}
	o := c.Options
	if o.AuthMethod != "" && o.AuthMethod != AuthMethodPrivateKeyJWT {
		bad(settingAuthMethod, "must be %s in a federation (there is no secret to register)", AuthMethodPrivateKeyJWT)
	}
	if c.ClientID != "" && f.EntityID != "" && c.ClientID != f.EntityID {
		bad("oidc_client_id", "must be the entity identifier in a federation, or be left out")
	}
	return ps
}

// parseAnchorJWKS parses a pinned key set: at least one public key, each
// with a kid.
func parseAnchorJWKS(text string) (*jose.JSONWebKeySet, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal([]byte(text), &set); err != nil {
		return nil, errors.New("jwks must be a JSON Web Key Set ({\"keys\": [...]})")
	}
	if len(set.Keys) == 0 {
		return nil, errors.New("jwks has no key")
	}
	for _, k := range set.Keys {
		if k.KeyID == "" || !k.IsPublic() {
			return nil, errors.New("jwks must hold public keys, each with a kid")
		}
	}
	return &set, nil
}

// federationDefaults fills what a federation implies in c: the client ID
// is the entity identifier, the client authenticates with
// private_key_jwt and signs its authorization requests. base is the oidc
// routes' base URL.
func federationDefaults(c *OIDCConfig, o *OIDCOptions, base string) error {
	f := c.Federation
	if f.EntityID == "" {
		f.EntityID = base
	} else if strings.TrimSuffix(f.EntityID, "/") != base {
		return fmt.Errorf("%s %q: extauth serves the entity configuration under the oidc routes, so the entity identifier must be %s (or left out)", settingFedEntityID, f.EntityID, base)
	}
	if c.ClientID == "" {
		c.ClientID = f.EntityID
	}
	o.AuthMethod = AuthMethodPrivateKeyJWT
	o.RequestObject = true
	return nil
}

// newFederation builds our entity and the resolver of the provider's
// chains. s is the strategy as newOIDC built it.
func newFederation(s *OIDC, f *OIDCFederation) (*federation, error) {
	var keys []oidfed.Key
	for _, text := range []string{f.Key, f.NextKey, f.OldKey} {
		if text == "" {
			continue
		}
		priv, err := ParseOIDCPrivateKey(text)
		if err != nil {
			return nil, err
		}
		k, err := oidfed.NewKey(priv)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	var anchors []oidfed.Anchor
	for _, a := range f.TrustAnchors {
		set, err := parseAnchorJWKS(a.JWKS)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", settingFedAnchors, a.EntityID, err)
		}
		anchors = append(anchors, oidfed.Anchor{EntityID: a.EntityID, JWKS: *set})
	}
	var marks []oidfed.TrustMarkRef
	for _, tm := range f.TrustMarks {
		// Both names: the final specification's and the drafts' that
		// SPID and CIE federations still read.
		marks = append(marks, oidfed.TrustMarkRef{Type: tm.Type, ID: tm.Type, TrustMark: tm.TrustMark})
	}
	registration := f.Registration
	if registration == "" {
		registration = OIDCRegistrationAutomatic
	}
	var jwks map[string]any
	if err := json.Unmarshal(s.jwks, &jwks); err != nil {
		return nil, err
	}
	rp := map[string]any{
		"client_registration_types":  []string{registration},
		"redirect_uris":              []string{s.callbackURL},
		"response_types":             []string{"code"},
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"token_endpoint_auth_method": AuthMethodPrivateKeyJWT,
		"application_type":           "web",
		"jwks":                       jwks,
	}
	display := map[string]any{}
	for name, v := range map[string]string{"organization_name": f.OrganizationName, "homepage_uri": f.HomepageURI, "logo_uri": f.LogoURI, "policy_uri": f.PolicyURI} {
		if v != "" {
			display[name] = v
		}
	}
	if len(f.Contacts) > 0 {
		display["contacts"] = f.Contacts
	}
	for name, v := range display {
		rp[name] = v
	}
	if f.OrganizationName != "" {
		rp["client_name"] = f.OrganizationName
	}
	o := s.opts
	for name, v := range map[string]string{
		"request_object_signing_alg":      o.RequestObjectSigningAlg,
		"token_endpoint_auth_signing_alg": o.AssertionSigningAlg,
		"id_token_encrypted_response_alg": o.IDTokenEncryption.Alg,
		"userinfo_encrypted_response_alg": o.UserInfoEncryption.Alg,
	} {
		if v != "" {
			rp[name] = v
		}
	}
	if o.IDTokenEncryption.enabled() {
		rp["id_token_encrypted_response_enc"] = o.IDTokenEncryption.Enc
	}
	if o.UserInfoEncryption.enabled() {
		rp["userinfo_encrypted_response_enc"] = o.UserInfoEncryption.Enc
	}
	entity := &oidfed.Entity{
		ID: f.EntityID, Keys: keys, AuthorityHints: f.AuthorityHints, TrustMarks: marks,
		Metadata: map[string]map[string]any{oidfed.TypeRelyingParty: rp, oidfed.TypeFederationEntity: display},
		Lifetime: f.ConfigurationLifetime, Now: s.now,
	}
	if _, err := entity.Configuration(); err != nil {
		return nil, fmt.Errorf("%s: %w", settingFedKey, err)
	}
	return &federation{
		entity:   entity,
		explicit: registration == OIDCRegistrationExplicit,
		resolver: &oidfed.Resolver{
			Client: s.client, Anchors: anchors, RequiredTrustMarks: f.RequiredTrustMarks,
			CheckTrustMarkStatus: f.TrustMarkStatus, Skew: s.opts.ClockSkew, Now: s.now,
		},
	}, nil
}

// EntityConfiguration returns our signed entity configuration, for
// extauth check and hosts that serve it elsewhere too; "" without a
// federation.
func (s *OIDC) EntityConfiguration() (string, error) {
	if s.fed == nil {
		return "", nil
	}
	return s.fed.entity.Configuration()
}

// TrustChain resolves the provider's trust chain now (or returns the held
// one) and describes it, for extauth check; nil without a federation.
func (s *OIDC) TrustChain(ctx context.Context) (*OIDCTrustChain, error) {
	if s.fed == nil {
		return nil, nil
	}
	c, err := s.fed.resolver.Resolve(ctx, s.issuer, oidfed.TypeOpenIDProvider)
	if err != nil {
		return nil, err
	}
	out := &OIDCTrustChain{Anchor: c.Anchor, Expires: c.Expires, Metadata: c.Metadata[oidfed.TypeOpenIDProvider]}
	for _, st := range c.Statements {
		out.Statements = append(out.Statements, OIDCStatement{Issuer: st.Issuer, Subject: st.Subject, Expires: st.ExpiresAt()})
	}
	for _, tm := range c.TrustMarks {
		out.TrustMarks = append(out.TrustMarks, OIDCChainTrustMark{Type: tm.Type, Issuer: tm.Issuer, Expires: tm.Expires})
	}
	for _, err := range c.Rejected {
		out.Rejected = append(out.Rejected, err.Error())
	}
	own := c.Statements[0].Metadata[oidfed.TypeOpenIDProvider]
	for _, k := range slices.Sorted(mapsKeys(out.Metadata, own)) {
		a, _ := json.Marshal(own[k])
		b, _ := json.Marshal(out.Metadata[k])
		if string(a) != string(b) {
			out.Changed = append(out.Changed, OIDCMetadataChange{Parameter: k, Published: own[k], Resolved: out.Metadata[k]})
		}
	}
	return out, nil
}

func mapsKeys(a, b map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range a {
			if !yield(k) {
				return
			}
		}
		for k := range b {
			if _, ok := a[k]; !ok && !yield(k) {
				return
			}
		}
	}
}

// OIDCTrustChain describes a provider's trust chain (TrustChain).
type OIDCTrustChain struct {
	// Statements go from the provider's entity configuration to the
	// anchor's.
	Statements []OIDCStatement
	Anchor     string
	// Expires is the earliest exp of the statements.
	Expires time.Time
	// Metadata is the provider's resolved openid_provider metadata;
	// Changed lists what the federation's policies and superiors changed
	// of what it published.
	Metadata   map[string]any
	Changed    []OIDCMetadataChange
	TrustMarks []OIDCChainTrustMark
	// Rejected says why each trust mark that did not verify did not.
	Rejected []string
}

// OIDCStatement is one statement of a trust chain.
type OIDCStatement struct {
	Issuer, Subject string
	Expires         time.Time
}

// OIDCChainTrustMark is a verified trust mark of the provider; Expires
// is zero for one that does not expire.
type OIDCChainTrustMark struct {
	Type, Issuer string
	Expires      time.Time
}

// OIDCMetadataChange is a metadata parameter whose resolved value differs
// from the one the provider published (nil where absent).
type OIDCMetadataChange struct {
	Parameter           string
	Published, Resolved any
}

func (s *OIDC) serveEntityConfiguration(w http.ResponseWriter, r *http.Request) {
	s.fed.entity.ServeConfiguration(w, r)
}

// fetchFederation resolves the provider's trust chain and builds the
// discovered copy from its resolved openid_provider metadata (12.1), with
// explicit registration when configured. The copy is refreshed when the
// chain expires, or the registration.
func (s *OIDC) fetchFederation(ctx context.Context, old *discovered) (*discovered, error) {
	ctx = telemetry.WithEndpoint(ctx, telemetry.EndpointDiscovery)
	chain, err := s.fed.resolver.Resolve(ctx, s.issuer, oidfed.TypeOpenIDProvider)
	if err != nil {
		return nil, NewError(CodeProviderUnavailable, "the provider has no valid trust chain to a configured trust anchor", err)
	}
	md := chain.Metadata[oidfed.TypeOpenIDProvider]
	body, err := json.Marshal(md)
	if err != nil {
		return nil, err
	}
	var doc OIDCDiscovery
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, NewError(CodeMisconfigured, "the provider's resolved metadata is malformed", fmt.Errorf("trust chain: openid_provider metadata: %w", err))
	}
	if doc.Issuer != s.issuer {
		return nil, NewError(CodeMisconfigured, "the provider's issuer differs from the configured one",
			fmt.Errorf("trust chain: the openid_provider metadata of %s names issuer %.200q: it must be the entity identifier", s.issuer, doc.Issuer))
	}
	want := OIDCRegistrationAutomatic
	if s.fed.explicit {
		want = OIDCRegistrationExplicit
	}
	if types, ok := md["client_registration_types_supported"].([]any); ok && !slices.Contains(types, any(want)) {
		return nil, misconfigured(settingFedRegistration, "%s is not in the provider's client_registration_types_supported %v", want, types)
	}
	refreshAt := earliest(chain.Expires, s.now().Add(MaxOIDCDiscoveryRefresh))
	if s.fed.explicit {
		endpoint, _ := md["federation_registration_endpoint"].(string)
		if endpoint == "" {
			return nil, misconfigured(settingFedRegistration, "the provider has no federation_registration_endpoint")
		}
		ec, err := s.fed.entity.Configuration()
		if err != nil {
			return nil, err
		}
		reg, err := s.fed.resolver.Register(ctx, endpoint, s.issuer, s.fed.entity.ID, ec, chain.Statements[0].JWKS)
		if err != nil {
			return nil, NewError(CodeProviderUnavailable, "the provider refused our explicit registration", err)
		}
		if reg.ClientID != s.clientID {
			return nil, NewError(CodeMisconfigured, "the provider registered another client ID",
				fmt.Errorf("explicit registration: the provider issued client_id %.200q; extauth signs in with the entity identifier %s as client_id", reg.ClientID, s.clientID))
		}
		refreshAt = earliest(refreshAt, reg.Expires)
	}
	keys, err := s.federationKeys(ctx, md, chain)
	if err != nil {
		return nil, err
	}
	if keys == nil && doc.JWKSURI == "" {
		return nil, NewError(CodeMisconfigured, "the provider publishes no keys", errors.New("trust chain: the openid_provider metadata has none of jwks, signed_jwks_uri, jwks_uri"))
	}
	return s.discoveredFrom(&doc, max(refreshAt.Sub(s.now()), time.Minute), keys, old)
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// federationKeys returns the provider's ID token keys from its resolved
// metadata: jwks by value, or signed_jwks_uri's key set, signed with its
// federation keys (5.2.1); nil for jwks_uri, which the key set fetches as
// it does without a federation.
func (s *OIDC) federationKeys(ctx context.Context, md map[string]any, chain *oidfed.Chain) (*keySet, error) {
	var body []byte
	switch {
	case md["jwks"] != nil:
		body, _ = json.Marshal(md["jwks"])
	case md["signed_jwks_uri"] != nil:
		uri, _ := md["signed_jwks_uri"].(string)
		if err := CheckOIDCEndpoint(uri, s.issuer); err != nil {
			return nil, NewError(CodeMisconfigured, "the provider's metadata has an unusable endpoint", fmt.Errorf("trust chain: signed_jwks_uri %.200q: %w", uri, err))
		}
		raw, err := oidfed.Get(ctx, s.client, uri, "application/jwk-set+jwt")
		if err != nil {
			return nil, NewError(CodeProviderUnavailable, "the provider's signed key set cannot be fetched", fmt.Errorf("signed_jwks_uri: %w", err))
		}
		payload, err := oidfed.VerifySigned(raw, "jwk-set+jwt", chain.Statements[0].JWKS)
		if err != nil {
			return nil, NewError(CodeInvalidResponse, "the provider's signed key set does not verify", fmt.Errorf("signed_jwks_uri: %w", err))
		}
		body = payload
	default:
		return nil, nil
	}
	keys, err := parseKeySet(body)
	if err != nil {
		return nil, err
	}
	return newStaticKeySet(keys, OIDCAcceptedAlgs(stringList(md["id_token_signing_alg_values_supported"]), s.opts.SigningAlgs)), nil
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
