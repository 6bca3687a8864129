package extauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/extauth/extauth/providers"
)

// OIDCFederationSettings is oidc_additional_settings.federation: the oidc
// provider as a relying party of an OpenID Federation 1.0 federation (see
// providers.OIDCFederation and docs/oidc.md, "OpenID Federation").
// oidc_issuer is then the provider's entity identifier, and neither
// oidc_client_id nor oidc_client_secret is needed: the client ID is our
// entity identifier, and the client authenticates with private_key.
type OIDCFederationSettings struct {
	// EntityID (entity_id) is our entity identifier; the oidc routes'
	// base (BaseURL + /users/auth/oidc) when empty, and nothing else.
	EntityID string
	// FederationKey (federation_key) signs our entity configuration;
	// FederationKeyNew and FederationKeyOld (…_new, …_old) rotate it.
	FederationKey    Secret
	FederationKeyNew Secret
	FederationKeyOld Secret
	// AuthorityHints (authority_hints) are our immediate superiors.
	AuthorityHints []string
	// TrustAnchors (trust_anchors) maps each trusted anchor's entity
	// identifier to its JWKS, as JSON text or a YAML mapping.
	TrustAnchors []providers.OIDCTrustAnchor
	// TrustMarks (trust_marks) are the marks the federation issued us:
	// a list of trust_mark_type (or id) and trust_mark.
	TrustMarks []providers.OIDCTrustMark
	// RequiredTrustMarks (required_trust_marks) are the trust mark types
	// the provider must hold; TrustMarkStatus (trust_mark_status) asks
	// their issuers whether they are active.
	RequiredTrustMarks []string
	TrustMarkStatus    bool
	// Registration (registration) is automatic (the default) or explicit.
	Registration string
	// OrganizationName, Contacts, HomepageURI, LogoURI and PolicyURI
	// (organization_name, contacts, homepage_uri, logo_uri, policy_uri)
	// are our display metadata.
	OrganizationName string
	Contacts         []string
	HomepageURI      string
	LogoURI          string
	PolicyURI        string
	// ConfigurationLifetime (configuration_lifetime) is how long our
	// entity configuration is valid; a day when zero.
	ConfigurationLifetime time.Duration
	// Providers (providers) are the OpenID providers users may choose
	// when oidc_issuer is left out, by the op field of the sign-in start or
	// on the discovery page; ListProviders (list_providers) adds those the
	// trust anchors list.
	Providers     []string
	ListProviders bool
}

// choosesProvider reports whether users choose among the federation's
// providers: a federation without oidc_issuer, with providers to choose.
func (c OIDCConfig) choosesProvider() bool {
	f := c.Additional.Federation
	return f != nil && c.Issuer == "" && (len(f.Providers) > 0 || f.ListProviders)
}

const keyOIDCFederation = keyOIDCAdditional + ".federation"

// oidcFederation reads oidc_additional_settings.federation.
func (l *loader) oidcFederation(n *yaml.Node) *OIDCFederationSettings {
	f := &OIDCFederationSettings{}
	strs := map[string]*string{"entity_id": &f.EntityID, "registration": &f.Registration, "organization_name": &f.OrganizationName,
		"homepage_uri": &f.HomepageURI, "logo_uri": &f.LogoURI, "policy_uri": &f.PolicyURI}
	keys := map[string]*Secret{"federation_key": &f.FederationKey, "federation_key_new": &f.FederationKeyNew, "federation_key_old": &f.FederationKeyOld}
	known := []string{"authority_hints", "trust_anchors", "trust_marks", "required_trust_marks", "trust_mark_status", "contacts",
		"configuration_lifetime", "providers", "list_providers"}
	for k := range strs {
		known = append(known, k)
	}
	for k := range keys {
		known = append(known, k)
	}
	for _, e := range l.mapping(OIDC, keyOIDCFederation, n) {
		key := keyOIDCFederation + "." + e.key
		if dst, ok := strs[e.key]; ok {
			*dst, _ = l.scalar(OIDC, key, e.val)
			continue
		}
		if dst, ok := keys[e.key]; ok {
			v, _ := l.scalar(OIDC, key, e.val)
			*dst = NewSecret(v)
			l.notePEM(key, e.val, v)
			continue
		}
		switch e.key {
		case "authority_hints":
			f.AuthorityHints = l.words(OIDC, key, e.val)
		case "required_trust_marks":
			f.RequiredTrustMarks = l.words(OIDC, key, e.val)
		case "contacts":
			f.Contacts = l.list(OIDC, key, e.val)
		case "trust_mark_status":
			f.TrustMarkStatus = l.boolean(OIDC, key, e.val)
		case "providers":
			f.Providers = l.words(OIDC, key, e.val)
		case "list_providers":
			f.ListProviders = l.boolean(OIDC, key, e.val)
		case "configuration_lifetime":
			f.ConfigurationLifetime = l.duration(key, e.val, "must be between 1 minute and 3650 days")
		case "trust_anchors":
			for _, a := range l.mapping(OIDC, key, e.val) {
				f.TrustAnchors = append(f.TrustAnchors, providers.OIDCTrustAnchor{EntityID: a.key, JWKS: l.jsonText(key+"."+a.key, a.val)})
			}
		case "trust_marks":
			f.TrustMarks = l.trustMarks(key, e.val)
		default:
			reason := "is not a federation setting extauth knows"
			if near := suggest(e.key, known, nil); near != "" {
				reason += fmt.Sprintf(" (did you mean %s?)", near)
			}
			l.problem(OIDC, key, reason, ErrInvalidSetting)
		}
	}
	return f
}

// jsonText reads a setting given as JSON text or as YAML, as JSON text.
func (l *loader) jsonText(key string, n *yaml.Node) string {
	d, err := deref(n)
	if err != nil {
		l.problem(OIDC, key, "is an alias that does not resolve", ErrInvalidSetting)
		return ""
	}
	if d.Kind == yaml.ScalarNode {
		v, _ := l.scalar(OIDC, key, d)
		return v
	}
	var v any
	if err := d.Decode(&v); err != nil {
		l.problem(OIDC, key, "cannot be read: "+err.Error(), ErrInvalidSetting)
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		l.problem(OIDC, key, "cannot be written as JSON: "+err.Error(), ErrInvalidSetting)
		return ""
	}
	return string(b)
}

// trustMarks reads trust_marks: a list of mappings with trust_mark_type
// (or id, as SPID and CIE call it) and trust_mark.
func (l *loader) trustMarks(key string, n *yaml.Node) []providers.OIDCTrustMark {
	d, err := deref(n)
	if err != nil || d.Kind != yaml.SequenceNode {
		l.problem(OIDC, key, "must be a list of trust_mark_type and trust_mark", ErrInvalidSetting)
		return nil
	}
	var out []providers.OIDCTrustMark
	for i, item := range d.Content {
		ik := fmt.Sprintf("%s[%d]", key, i)
		var tm providers.OIDCTrustMark
		for _, e := range l.mapping(OIDC, ik, item) {
			switch e.key {
			case "trust_mark_type", "id":
				tm.Type, _ = l.scalar(OIDC, ik+"."+e.key, e.val)
			case "trust_mark":
				tm.TrustMark, _ = l.scalar(OIDC, ik+"."+e.key, e.val)
			default:
				l.problem(OIDC, ik+"."+e.key, "is not part of a trust mark (trust_mark_type, trust_mark)", ErrInvalidSetting)
			}
		}
		out = append(out, tm)
	}
	return out
}

// strategy returns the provider's federation configuration.
func (f *OIDCFederationSettings) strategy() *providers.OIDCFederation {
	if f == nil {
		return nil
	}
	return &providers.OIDCFederation{
		EntityID: f.EntityID, Key: f.FederationKey.Value(), NextKey: f.FederationKeyNew.Value(), OldKey: f.FederationKeyOld.Value(),
		AuthorityHints: slices.Clone(f.AuthorityHints), TrustAnchors: slices.Clone(f.TrustAnchors), TrustMarks: slices.Clone(f.TrustMarks),
		RequiredTrustMarks: slices.Clone(f.RequiredTrustMarks), TrustMarkStatus: f.TrustMarkStatus, Registration: f.Registration,
		OrganizationName: f.OrganizationName, Contacts: slices.Clone(f.Contacts), HomepageURI: f.HomepageURI, LogoURI: f.LogoURI,
		PolicyURI: f.PolicyURI, ConfigurationLifetime: f.ConfigurationLifetime,
		Providers: slices.Clone(f.Providers), ListProviders: f.ListProviders,
	}
}

// TrustChain resolves the trust chain of the provider (oidc_issuer, its
// entity identifier) as the oidc strategy of an application at baseURL
// would, with client, and returns it with our entity configuration as the
// application serves it: extauth check prints both. It needs
// oidc_additional_settings.federation.
func (c OIDCConfig) TrustChain(ctx context.Context, baseURL string, client *http.Client) (*providers.OIDCTrustChain, string, error) {
	if c.Additional.Federation == nil {
		return nil, "", errors.New("oidc_additional_settings.federation is not set")
	}
	s, err := providers.NewOIDC(c.strategyConfig(providers.OIDCOptions{}), providers.Env{
		CallbackURL: strings.TrimSuffix(baseURL, "/") + "/users/auth/oidc/callback", HTTPClient: client})
	if err != nil {
		return nil, "", err
	}
	defer s.Close()
	ec, err := s.EntityConfiguration()
	if err != nil {
		return nil, "", err
	}
	chain, err := s.TrustChain(ctx)
	return chain, ec, err
}
