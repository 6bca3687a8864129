package extauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"golang.org/x/oauth2"

	"github.com/extauth/extauth/providers"
)

// ErrNoRefresh is wrapped by the error of TokenSource for a provider that
// cannot renew tokens, and by a token source's error when the sign-in got
// no refresh token.
var ErrNoRefresh = providers.ErrNoRefresh

// TokenSource returns a source of the tokens of a sign-in, id.Tokens,
// renewed at the provider's token endpoint when they expire, through the
// same bounded client as the sign-ins, for as long as ctx lives (as with
// x/oauth2's Config.TokenSource). The provider is id.Provider at
// id.Tenant: a host that kept only the tokens passes an Identity with
// those fields, UID, and Tokens with its Issuer and Tenant. Tokens are
// sent only to the provider that issued them, for the tenant they were
// issued at: tokens whose Issuer or Tenant say otherwise are refused
// before any request, with invalid_state. Tokens stored before v0.3.0,
// which say neither, are adopted where the provider has one issuer, and
// refused elsewhere (see AdoptTokens). Keep what
// Token returns: a provider may rotate the refresh token. For OpenID
// Connect a renewed ID token is verified as at sign-in but for the nonce,
// and must name id.UID (and the sub of id.Tokens.IDToken, which must
// agree); it is the token's Extra("id_token").
//
// Renewal fails with an *Error. OAuth 1.0a tokens (microblog) do not
// expire and socialnet's (Facebook) have no refresh token: for those, as
// for a provider that is not mounted, TokenSource returns an error
// (wrapping ErrNoRefresh, or ErrNotConfigured). A sign-in without a refresh
// token (no offline access asked) gives a source that serves the access
// token until it expires, then fails wrapping ErrNoRefresh.
func (a *Auth) TokenSource(ctx context.Context, id *Identity) (oauth2.TokenSource, error) {
	s, err := a.tokenStrategy(ctx, id)
	if err != nil {
		return nil, err
	}
	r, ok := s.(providers.Refresher)
	if !ok {
		why := "the provider issues no refresh tokens"
		if _, oauth1 := s.(*providers.Microblog); oauth1 {
			why = "OAuth 1.0a tokens do not expire"
		}
		return nil, fmt.Errorf("extauth: %s cannot renew tokens (%s): %w", id.Provider, why, ErrNoRefresh)
	}
	t, err := a.tokensFor(id, s, "the tokens cannot be renewed here: sign in again")
	if err != nil {
		return nil, err
	}
	ts, err := r.TokenSource(ctx, t, id.UID)
	if err != nil {
		return nil, asError(err, id.Provider, CodeMisconfigured)
	}
	return tokenSource{ts, id.Provider}, nil
}

// AdoptTokens is the one-call migration of tokens stored before v0.3.0,
// which say neither who issued them nor at which tenant: it returns
// id.Tokens with the Issuer of id.Provider at id.Tenant and that Tenant,
// as a sign-in there records them now. Store what it returns in place of
// what was stored; TokenSource and RevokeTokens take them from then on.
//
// TokenSource and RevokeTokens adopt such tokens themselves, with a log
// line (once), where the provider has one issuer only: no tenants, or
// tenants of the secrets file that all keep the application's settings of
// that provider. Elsewhere (a TenantSource, or a tenant with settings of
// its own for the provider) they refuse them, since the tokens cannot say
// which issuer they are for: adopt them here, with the tenant and provider
// each was issued at, as the application recorded them beside the tokens.
//
// The host's word for the tenant and provider is checked where the tokens
// can contradict it: tokens whose ID token (Tokens.IDToken) names another
// issuer are refused with invalid_state, so that a refresh token never
// goes to an issuer, perhaps another tenant's, that did not issue it.
//
// Tokens that say where they were issued are returned as they are, as are
// those of providers that record no issuer (microblog, socialnet, goth
// providers). The error is that of a provider not configured at the
// tenant (ErrNotConfigured), or of a tenant that does not exist.
func (a *Auth) AdoptTokens(ctx context.Context, id *Identity) (Tokens, error) {
	s, err := a.tokenStrategy(ctx, id)
	if err != nil {
		return Tokens{}, err
	}
	t := id.Tokens
	if is, ok := s.(issuer); ok && storedBeforeIssuers(t) {
		if err := idTokenFrom(t, is.Issuer(), id); err != nil {
			return Tokens{}, err
		}
		t.Issuer, t.Tenant = is.Issuer(), id.Tenant
	}
	return t, nil
}

// idTokenFrom refuses to adopt tokens as iss's when their ID token says
// another issuer issued them: a host that names the wrong tenant or
// provider for tokens stored before v0.3.0 would send a refresh token to
// an issuer that did not issue it. The claim is read without checking the
// signature, and only ever to refuse: tokens without an ID token, or whose
// ID token does not parse, are the host's word.
func idTokenFrom(t Tokens, iss string, id *Identity) error {
	if t.IDToken == "" {
		return nil
	}
	tok, err := jwt.ParseSigned(t.IDToken, idTokenAlgs)
	if err != nil {
		return nil
	}
	var claims struct {
		Issuer string `json:"iss"`
	}
	if tok.UnsafeClaimsWithoutVerification(&claims) != nil || claims.Issuer == "" || claims.Issuer == iss {
		return nil
	}
	return &Error{Code: CodeInvalidState, Provider: id.Provider, Message: "the tokens cannot be renewed here: sign in again",
		Err: fmt.Errorf("the tokens' ID token was issued by %.200q, not by %s's issuer at tenant %q: they belong to another tenant or provider", claims.Issuer, id.Provider, id.Tenant)}
}

// idTokenAlgs are the algorithms under which idTokenFrom reads an ID
// token's issuer: any a provider signs with.
var idTokenAlgs = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA, jose.HS256, jose.HS384, jose.HS512}

// issuer is implemented by the strategies whose sign-ins record
// Tokens.Issuer: OpenID Connect (oidc, search_oauth2) and blog_oauth2.
type issuer interface{ Issuer() string }

// storedBeforeIssuers reports whether t was stored before v0.3.0, whose
// tokens carried neither Issuer nor Tenant.
func storedBeforeIssuers(t Tokens) bool { return t.Issuer == "" && t.Tenant == "" }

// tokensFor returns the tokens of id that may go to s, the strategy of
// id.Provider at id.Tenant, or refuses them with message: tokens issued
// at another tenant, and tokens stored before v0.3.0 where the provider
// may have another issuer (AdoptTokens). The strategies refuse tokens of
// another issuer.
func (a *Auth) tokensFor(id *Identity, s providers.Strategy, message string) (providers.Tokens, error) {
	t := id.Tokens
	if is, ok := s.(issuer); ok && storedBeforeIssuers(t) {
		once, adoptable := a.adoptable[id.Provider]
		if !adoptable {
			return providers.Tokens{}, &Error{Code: CodeInvalidState, Provider: id.Provider, Message: message,
				Err: fmt.Errorf("the tokens were stored before v0.3.0 and say neither their issuer nor their tenant, "+
					"and %s may have other issuers at other tenants: adopt them with Auth.AdoptTokens (docs/upgrading.md)", id.Provider)}
		}
		if err := idTokenFrom(t, is.Issuer(), id); err != nil {
			return providers.Tokens{}, err
		}
		t.Issuer, t.Tenant = is.Issuer(), id.Tenant
		once.Do(func() {
			a.log.Warn("extauth: tokens stored before v0.3.0, without Tokens.Issuer, adopted: "+
				"store what Auth.AdoptTokens returns for them (docs/upgrading.md)", "provider", id.Provider, "issuer", t.Issuer)
		})
	}
	if t.Tenant != id.Tenant {
		return providers.Tokens{}, &Error{Code: CodeInvalidState, Provider: id.Provider, Message: message,
			Err: fmt.Errorf("the tokens were issued at tenant %q, not %q", t.Tenant, id.Tenant)}
	}
	return providers.Tokens(t), nil
}

// adoptableProviders lists the providers whose tokens stored before
// v0.3.0 TokenSource and RevokeTokens adopt: those with one issuer across
// the application, whose every tenant of the secrets file either has no
// such provider or keeps the application's settings of it. With a
// TenantSource, none: its tenants cannot be known in advance. Each has the
// Once of its log line.
func adoptableProviders(cfg *Config, source TenantSource, slug func(string) string) map[string]*sync.Once {
	if source != nil {
		return nil
	}
	out := map[string]*sync.Once{}
	for _, p := range BuiltinProviders() {
		if !cfg.configured(p) {
			continue
		}
		one := true
		for _, t := range cfg.Tenants {
			if t != nil && t.configured(p) && !t.sameProvider(cfg, p) {
				one = false
			}
		}
		if one {
			out[slug(string(p))] = &sync.Once{}
		}
	}
	return out
}

// tokenStrategy is the strategy of id.Provider at id.Tenant, whose tokens
// TokenSource and RevokeTokens handle.
func (a *Auth) tokenStrategy(ctx context.Context, id *Identity) (providers.Strategy, error) {
	st, err := a.siteNamed(ctx, id.Tenant)
	if err != nil {
		return nil, err
	}
	s, ok := st.strategies[id.Provider]
	if !ok {
		return nil, fmt.Errorf("extauth: %s is %w", id.Provider, ErrNotConfigured)
	}
	return s, nil
}

// siteNamed is the site of tenant ("" for the application's own), built
// if it is not in the cache. A name the routes would refuse
// (ValidTenantName) is unknown here too: nothing reaches the host's
// TenantSource or the cache that a request could not.
func (a *Auth) siteNamed(ctx context.Context, tenant string) (*site, error) {
	if tenant == "" {
		return a.site, nil
	}
	if a.tenants == nil || !ValidTenantName(tenant) {
		return nil, fmt.Errorf("extauth: tenant %q: %w", tenant, ErrUnknownTenant)
	}
	st, err := a.tenants.get(ctx, tenant)
	if err != nil {
		return nil, fmt.Errorf("extauth: tenant %q: %w", tenant, err)
	}
	return st, nil
}

// tokenSource hands the host *Error, never the strategies' error type.
type tokenSource struct {
	ts       oauth2.TokenSource
	provider string
}

func (s tokenSource) Token() (*oauth2.Token, error) {
	tok, err := s.ts.Token()
	if err != nil {
		return nil, asError(err, s.provider, CodeProviderUnavailable)
	}
	return tok, nil
}

// Client returns an HTTP client that calls the APIs of the provider that
// signed id in (its resource servers, its UserInfo) with the sign-in's
// tokens, sent the way the provider bound them: for tokens bound to a
// DPoP key (dpop: true, Tokens.DPoPKey), with the DPoP scheme and a fresh
// proof per request, the resource server's nonce handled; for tokens
// bound to the application's TLS client certificate (RFC 8705), over a
// connection that presents it; others as Bearer tokens. x/oauth2's
// NewClient can do the last only.
//
// The tokens come from ts, renewed when they expire: pass the source
// TokenSource returned for id, to read the renewed tokens back from it
// (ts.Token()) and keep them; nil makes one. id is checked as
// TokenSource checks it (provider, tenant, Tokens.Issuer and
// Tokens.Tenant) before anything is sent. The client has the sign-ins'
// time-out and bound on response bodies, follows no redirect (the 3xx
// comes back), and sends tokens only over https (plain http only to a
// loopback host). A renewal that fails is an *Error inside the
// *url.Error the client returns.
//
// Client is for OpenID Connect providers (oidc, search_oauth2); for
// others the error wraps ErrNoAPIClient.
func (a *Auth) Client(ctx context.Context, id *Identity, ts oauth2.TokenSource) (*http.Client, error) {
	s, err := a.tokenStrategy(ctx, id)
	if err != nil {
		return nil, err
	}
	c, ok := s.(providers.APIClienter)
	if !ok {
		return nil, fmt.Errorf("extauth: %s: %w", id.Provider, ErrNoAPIClient)
	}
	t, err := a.tokensFor(id, s, "the tokens cannot be used here: sign in again")
	if err != nil {
		return nil, err
	}
	if ts == nil {
		if ts, err = a.TokenSource(ctx, id); err != nil {
			return nil, err
		}
	}
	hc, err := c.APIClient(t, ts)
	if err != nil {
		return nil, asError(err, id.Provider, CodeMisconfigured)
	}
	return hc, nil
}

// ErrNoAPIClient is wrapped by the error of Client for a provider whose
// tokens it cannot send: one that is not OpenID Connect.
var ErrNoAPIClient = errors.New("Client calls the APIs of OpenID Connect providers only; use x/oauth2's NewClient with TokenSource")
