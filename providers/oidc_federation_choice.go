package providers

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"

	"github.com/extauth/extauth/internal/oidfed"
)

// OIDCFederationChooser signs users in at the OpenID providers of a
// federation, which they choose: the oidc strategy of a federation
// (OIDCConfig.Federation) whose OIDCConfig.Issuer is empty. The providers
// are those OIDCFederation.Providers lists and, with ListProviders, those
// the trust anchors list. A sign-in starts at the provider the start
// request's op (or idp) field names; one that names none is answered by
// the discovery page, the SAML federations' page. Each provider is signed
// in at as the oidc strategy signs in at one (NewOIDC): its trust chain
// resolved, one federation entity, key set and resolver shared by all.
// Logout, refresh, revocation and API clients go to the provider whose
// issuer the tokens name.
type OIDCFederationChooser struct {
	cfg  OIDCConfig
	env  Env
	fed  *federation
	tmpl *OIDC // the strategy's settings, no provider: routes, options

	mu       sync.Mutex
	children map[string]*OIDC
	listed   []string
	listedAt time.Time
}

var (
	_ Strategy       = (*OIDCFederationChooser)(nil)
	_ IdPChooser     = (*OIDCFederationChooser)(nil)
	_ IdPNamer       = (*OIDCFederationChooser)(nil)
	_ OptionTaker    = (*OIDCFederationChooser)(nil)
	_ Refresher      = (*OIDCFederationChooser)(nil)
	_ Revoker        = (*OIDCFederationChooser)(nil)
	_ SessionEnder   = (*OIDCFederationChooser)(nil)
	_ LogoutReceiver = (*OIDCFederationChooser)(nil)
	_ APIClienter    = (*OIDCFederationChooser)(nil)
)

// listLifetime is how long the anchors' lists of providers are kept.
const listLifetime = time.Hour

// maxListed bounds the providers the anchors' lists may add.
const maxListed = 1000

// NewOIDCFederationChooser returns the strategy. It makes no request.
func NewOIDCFederationChooser(c OIDCConfig, env Env) (*OIDCFederationChooser, error) {
	if c.Federation == nil || c.Issuer != "" {
		return nil, errors.New("a chooser of providers needs a federation and no oidc_issuer")
	}
	f := *c.Federation
	f.Providers = slices.Clone(f.Providers)
	c.Federation = &f
	if len(f.Providers) == 0 && !f.ListProviders {
		return nil, fmt.Errorf("%s or %s is needed without oidc_issuer: the providers users may choose", settingFedProviders, settingFedList)
	}
	for _, p := range f.Providers {
		if err := oidfed.CheckEntityID(p); err != nil {
			return nil, fmt.Errorf("%s: %w", settingFedProviders, err)
		}
	}
	// The template is built on the first provider's identifier (or the
	// anchor's), never asked: it carries the settings and the routes.
	tc := c
	tc.Issuer = cmp.Or(firstOr(f.Providers), firstAnchor(f))
	tmpl, err := newOIDC("oidc", tc, env)
	if err != nil {
		return nil, err
	}
	c.ClientID, c.Options = tmpl.clientID, tmpl.opts
	c.Federation.EntityID = tmpl.fed.entity.ID
	return &OIDCFederationChooser{cfg: c, env: env, fed: tmpl.fed, tmpl: tmpl, children: map[string]*OIDC{}}, nil
}

func firstOr(l []string) string {
	if len(l) > 0 {
		return l[0]
	}
	return ""
}

func firstAnchor(f OIDCFederation) string {
	if len(f.TrustAnchors) > 0 {
		return f.TrustAnchors[0].EntityID
	}
	return ""
}

// Name returns "oidc".
func (s *OIDCFederationChooser) Name() string { return s.tmpl.name }

// DisplayName returns the federation's name for the pages.
func (s *OIDCFederationChooser) DisplayName() string { return "OpenID Federation" }

// ChoosesIdP reports true: users choose their provider.
func (s *OIDCFederationChooser) ChoosesIdP() bool { return true }

// BeginAt starts the sign-in at the provider tx names, always with a
// redirect: Begin with no form.
func (s *OIDCFederationChooser) BeginAt(ctx context.Context, tx *Transaction) (string, url.Values, error) {
	target, err := s.Begin(ctx, tx)
	return target, nil, err
}

// ExtraRoutes serves the JWKS route and our entity configuration, as the
// oidc strategy does.
func (s *OIDCFederationChooser) ExtraRoutes() map[string]http.Handler { return s.tmpl.routes }

// RequestOptions, AssuranceLevel and ClockSkew are the strategy's
// settings, the same at every provider.
func (s *OIDCFederationChooser) RequestOptions() []string { return s.tmpl.RequestOptions() }

// AssuranceLevel returns the acr values that meet the host's level.
func (s *OIDCFederationChooser) AssuranceLevel(level string) ([]string, bool) {
	return s.tmpl.AssuranceLevel(level)
}

// ClockSkew is the leeway allowed on the providers' times.
func (s *OIDCFederationChooser) ClockSkew() time.Duration { return s.tmpl.ClockSkew() }

// Close stops every provider's background refresh.
func (s *OIDCFederationChooser) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.children {
		c.Close()
	}
	return s.tmpl.Close()
}

// errUnknownOP is wrapped by the error of a provider users may not choose.
var errUnknownOP = errors.New("not one of the providers users may choose")

// provider returns the strategy of the provider op, one users may choose.
func (s *OIDCFederationChooser) provider(ctx context.Context, op string) (*OIDC, error) {
	s.mu.Lock()
	c := s.children[op]
	s.mu.Unlock()
	if c != nil {
		return c, nil
	}
	if !s.allows(ctx, op) {
		return nil, NewError(CodeInvalidResponse, "the provider is not one this application accepts", fmt.Errorf("%.200q: %w", op, errUnknownOP))
	}
	cfg := s.cfg
	cfg.Issuer = op
	c, err := newFederated(cfg, s.env, s.fed)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev := s.children[op]; prev != nil {
		c.Close()
		return prev, nil
	}
	s.children[op] = c
	return c, nil
}

// newFederated is newOIDC sharing fed, the chooser's federation.
func newFederated(c OIDCConfig, env Env, fed *federation) (*OIDC, error) {
	f := *c.Federation
	c.Federation = nil
	s, err := newOIDC("oidc", c, env)
	if err != nil {
		return nil, err
	}
	c.Federation = &f
	s.fed = fed
	return s, nil
}

// allows reports whether op is one users may choose.
func (s *OIDCFederationChooser) allows(ctx context.Context, op string) bool {
	return slices.Contains(s.choices(ctx), op)
}

// choices are the providers users may choose: those configured, then
// those the anchors list (kept listLifetime).
func (s *OIDCFederationChooser) choices(ctx context.Context) []string {
	out := slices.Clone(s.cfg.Federation.Providers)
	if !s.cfg.Federation.ListProviders {
		return out
	}
	s.mu.Lock()
	listed, at := s.listed, s.listedAt
	s.mu.Unlock()
	if at.IsZero() || s.tmpl.now().Sub(at) > listLifetime {
		listed = s.list(ctx)
		s.mu.Lock()
		s.listed, s.listedAt = listed, s.tmpl.now()
		s.mu.Unlock()
	}
	for _, op := range listed {
		if !slices.Contains(out, op) {
			out = append(out, op)
		}
	}
	return out
}

// list asks each anchor's federation_list_endpoint for its OpenID
// providers (8.2), those with the first required trust mark when there
// is one. An anchor that cannot answer lists nothing.
func (s *OIDCFederationChooser) list(ctx context.Context) []string {
	var out []string
	for _, a := range s.fed.resolver.Anchors {
		c, err := s.fed.resolver.Resolve(ctx, a.EntityID, "")
		if err != nil {
			s.tmpl.log.Warn("extauth: the trust anchor cannot list its providers", "anchor", a.EntityID, "err", err)
			continue
		}
		endpoint := c.Statements[0].ListEndpoint()
		if endpoint == "" {
			continue
		}
		u, err := url.Parse(endpoint)
		if err != nil {
			continue
		}
		q := u.Query()
		q.Set("entity_type", oidfed.TypeOpenIDProvider)
		if marks := s.cfg.Federation.RequiredTrustMarks; len(marks) > 0 {
			q.Set("trust_marked", "true")
			q.Set("trust_mark_type", marks[0])
		}
		u.RawQuery = q.Encode()
		body, err := oidfed.Get(ctx, s.tmpl.client, u.String(), "application/json")
		if err != nil {
			s.tmpl.log.Warn("extauth: the trust anchor's list of providers cannot be read", "anchor", a.EntityID, "err", err)
			continue
		}
		var ids []string
		if err := json.Unmarshal([]byte(body), &ids); err != nil {
			s.tmpl.log.Warn("extauth: the trust anchor's list of providers is malformed", "anchor", a.EntityID)
			continue
		}
		for _, id := range ids {
			if len(out) < maxListed && oidfed.CheckEntityID(id) == nil && !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
	}
	return out
}

// Discover answers a start that names no provider with the discovery
// page: the providers users may choose whose trust chains verify, by
// their organization_name, a search by name, the last choice first.
func (s *OIDCFederationChooser) Discover(w http.ResponseWriter, r *http.Request, d Discovery) error {
	q := strings.TrimSpace(r.Form.Get("q"))
	if len([]rune(q)) > 100 {
		q = string([]rune(q)[:100])
	}
	list := DiscoveryList{Query: q}
	for i, op := range s.choices(r.Context()) {
		// Each provider's chain is resolved for the page (then held): a
		// page offers at most maxDescribed, so that no request resolves
		// a thousand chains.
		if i == maxDescribed {
			list.More = true
			break
		}
		choice, ok := s.describe(r.Context(), op)
		if !ok {
			continue
		}
		list.Listed++
		if d.LastChoice == op {
			c := choice
			list.Last = &c
		}
		if q != "" && !strings.Contains(strings.ToLower(choice.Name), strings.ToLower(q)) && !strings.Contains(op, q) {
			continue
		}
		if len(list.Choices) == maxChoices {
			list.More = true
			continue
		}
		list.Choices = append(list.Choices, choice)
	}
	if q == "" && list.Listed > maxChoices {
		list.Choices, list.More = nil, false
	}
	slices.SortStableFunc(list.Choices, func(a, b DiscoveryChoice) int { return cmp.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name)) })
	return d.Render(list)
}

// maxChoices is how many providers a page lists, maxDescribed how many
// it considers.
const (
	maxChoices   = 50
	maxDescribed = 200
)

// describe resolves op's chain and names it from its resolved metadata;
// ok is false for a provider whose chain does not verify.
func (s *OIDCFederationChooser) describe(ctx context.Context, op string) (DiscoveryChoice, bool) {
	c, err := s.fed.resolver.Resolve(ctx, op, oidfed.TypeOpenIDProvider)
	if err != nil {
		s.tmpl.log.Debug("extauth: a provider of the federation is left out of the discovery page", "op", op, "err", err)
		return DiscoveryChoice{}, false
	}
	choice := DiscoveryChoice{EntityID: op, Name: opName(c, op)}
	for _, typ := range []string{oidfed.TypeFederationEntity, oidfed.TypeOpenIDProvider} {
		if logo, _ := c.Metadata[typ]["logo_uri"].(string); strings.HasPrefix(logo, "https://") && len(logo) < 2048 {
			choice.Logo = logo
			break
		}
	}
	return choice, true
}

// opName is the provider's organization_name, else its host.
func opName(c *oidfed.Chain, op string) string {
	for _, typ := range []string{oidfed.TypeFederationEntity, oidfed.TypeOpenIDProvider} {
		if n, _ := c.Metadata[typ]["organization_name"].(string); n != "" {
			return n
		}
	}
	if u, err := url.Parse(op); err == nil {
		return u.Host
	}
	return op
}

// IdPName names a provider users may choose, from its held trust chain.
func (s *OIDCFederationChooser) IdPName(ctx context.Context, entityID, lang string) string {
	if !s.allows(ctx, entityID) {
		return ""
	}
	if c := s.fed.resolver.Cached(entityID); c != nil {
		return opName(c, entityID)
	}
	return ""
}

// Begin starts the sign-in at the provider tx.IdP names.
func (s *OIDCFederationChooser) Begin(ctx context.Context, tx *Transaction) (string, error) {
	c, err := s.provider(ctx, tx.IdP)
	if err != nil {
		return "", err
	}
	return c.Begin(ctx, tx)
}

// Binding returns the state parameter, as the oidc strategy does.
func (s *OIDCFederationChooser) Binding(r *http.Request) string { return s.tmpl.Binding(r) }

// Complete finishes the sign-in at the provider the sealed transaction
// names, and no other.
func (s *OIDCFederationChooser) Complete(ctx context.Context, r *http.Request, tx *Transaction) (*Identity, error) {
	c, err := s.provider(ctx, tx.IdP)
	if err != nil {
		return nil, err
	}
	return c.Complete(ctx, r, tx)
}

// issued returns the strategy of the provider that issued t.
func (s *OIDCFederationChooser) issued(ctx context.Context, issuer string) (*OIDC, error) {
	if issuer == "" {
		return nil, NewError(CodeMisconfigured, "the tokens do not say which provider issued them", errors.New("Tokens.Issuer is empty"))
	}
	return s.provider(ctx, issuer)
}

// TokenSource renews t at the provider that issued it.
func (s *OIDCFederationChooser) TokenSource(ctx context.Context, t Tokens, subject string) (oauth2.TokenSource, error) {
	c, err := s.issued(ctx, t.Issuer)
	if err != nil {
		return nil, err
	}
	return c.TokenSource(ctx, t, subject)
}

// RevokeTokens revokes t at the provider that issued it.
func (s *OIDCFederationChooser) RevokeTokens(ctx context.Context, t Tokens) error {
	c, err := s.issued(ctx, t.Issuer)
	if err != nil {
		return err
	}
	return c.RevokeTokens(ctx, t)
}

// APIClient returns the API client of the provider that issued t.
func (s *OIDCFederationChooser) APIClient(t Tokens, ts oauth2.TokenSource) (*http.Client, error) {
	c, err := s.issued(context.Background(), t.Issuer)
	if err != nil {
		return nil, err
	}
	return c.APIClient(t, ts)
}

// EndSessionURL sends the browser to the end_session_endpoint of the
// provider whose ID token ls holds.
func (s *OIDCFederationChooser) EndSessionURL(ctx context.Context, ls LogoutSession, state, postLogoutRedirectURI string) (string, error) {
	c, err := s.issued(ctx, unverifiedIssuer(ls.IDToken))
	if err != nil {
		return "", err
	}
	return c.EndSessionURL(ctx, ls, state, postLogoutRedirectURI)
}

// BackchannelLogout verifies a logout token at the provider it names as
// its issuer, one users may choose.
func (s *OIDCFederationChooser) BackchannelLogout(ctx context.Context, logoutToken string) (LogoutEvent, error) {
	c, err := s.issued(ctx, unverifiedIssuer(logoutToken))
	if err != nil {
		return LogoutEvent{}, err
	}
	return c.BackchannelLogout(ctx, logoutToken)
}

// FrontchannelLogout is the provider iss's.
func (s *OIDCFederationChooser) FrontchannelLogout(ctx context.Context, iss, sid string) (LogoutEvent, error) {
	c, err := s.issued(ctx, iss)
	if err != nil {
		return LogoutEvent{}, err
	}
	return c.FrontchannelLogout(ctx, iss, sid)
}

// unverifiedIssuer reads the iss of a compact JWS unverified, to find the
// provider that verifies it; "" when there is none.
func unverifiedIssuer(raw string) string {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return ""
	}
	var c struct {
		Iss string `json:"iss"`
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil || json.Unmarshal(b, &c) != nil {
		return ""
	}
	return c.Iss
}
