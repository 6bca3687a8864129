package extauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"

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
// issued at: tokens whose Issuer or Tenant say otherwise (or whose Issuer
// is empty) are refused before any request, with invalid_state. Keep what
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
	if err := tokensHere(id, "the tokens cannot be renewed here: sign in again"); err != nil {
		return nil, err
	}
	ts, err := r.TokenSource(ctx, providers.Tokens(id.Tokens), id.UID)
	if err != nil {
		return nil, asError(err, id.Provider, CodeMisconfigured)
	}
	return tokenSource{ts, id.Provider}, nil
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

// tokensHere refuses tokens issued at another tenant than id's, before
// they are sent anywhere; message is what the user may be shown.
func tokensHere(id *Identity, message string) *Error {
	if id.Tokens.Tenant == id.Tenant {
		return nil
	}
	return &Error{Code: CodeInvalidState, Provider: id.Provider, Message: message,
		Err: fmt.Errorf("the tokens were issued at tenant %q, not %q", id.Tokens.Tenant, id.Tenant)}
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
	if err := tokensHere(id, "the tokens cannot be used here: sign in again"); err != nil {
		return nil, err
	}
	if ts == nil {
		if ts, err = a.TokenSource(ctx, id); err != nil {
			return nil, err
		}
	}
	hc, err := c.APIClient(providers.Tokens(id.Tokens), ts)
	if err != nil {
		return nil, asError(err, id.Provider, CodeMisconfigured)
	}
	return hc, nil
}

// ErrNoAPIClient is wrapped by the error of Client for a provider whose
// tokens it cannot send: one that is not OpenID Connect.
var ErrNoAPIClient = errors.New("Client calls the APIs of OpenID Connect providers only; use x/oauth2's NewClient with TokenSource")
