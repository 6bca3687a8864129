package providers

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"golang.org/x/oauth2"

	"github.com/extauth/extauth/internal/telemetry"
)

// oauthToken is t as x/oauth2 holds it.
func oauthToken(t Tokens) *oauth2.Token {
	return &oauth2.Token{AccessToken: t.AccessToken, TokenType: t.TokenType, RefreshToken: t.RefreshToken, Expiry: t.Expiry}
}

// issuedBy refuses tokens that another issuer issued, or that do not say
// which, before they are sent anywhere: a refresh token goes to its own
// provider's token endpoint only.
func issuedBy(t Tokens, issuer string) error {
	switch t.Issuer {
	case issuer:
		return nil
	case "":
		return NewError(CodeInvalidState, "the tokens cannot be renewed: sign in again",
			errors.New("refresh: the tokens do not say which provider issued them (Tokens.Issuer): keep it with them"))
	}
	return NewError(CodeInvalidState, "the tokens cannot be renewed here: sign in again",
		fmt.Errorf("refresh: the tokens were issued by %.200q, not by this provider (%s)", t.Issuer, issuer))
}

// refresher renews tokens at a token endpoint through the bounded client
// conf returns with the endpoint; check, when set, vets each renewed token
// (an OpenID Connect ID token in it). oauth2.ReuseTokenSource serialises
// its calls.
type refresher struct {
	ctx          context.Context
	conf         func(context.Context) (*oauth2.Config, *http.Client, error)
	refreshToken string
	check        func(context.Context, *oauth2.Token) error
}

// Token renews the tokens with the refresh token, which a provider may
// rotate: the new one is used next time.
func (r *refresher) Token() (*oauth2.Token, error) {
	if r.refreshToken == "" {
		return nil, NewError(CodeInvalidState, "the tokens cannot be renewed: sign in again",
			fmt.Errorf("access token expired and %w", ErrNoRefresh))
	}
	conf, client, err := r.conf(r.ctx)
	if err != nil {
		return nil, err
	}
	ctx := context.WithValue(telemetry.WithEndpoint(r.ctx, telemetry.EndpointToken), oauth2.HTTPClient, client)
	tok, err := conf.TokenSource(ctx, &oauth2.Token{RefreshToken: r.refreshToken}).Token()
	if err != nil {
		return nil, tokenError(err, "token request (refresh)", "the provider refused the refresh token: sign in again",
			conf.ClientSecret, r.refreshToken)
	}
	if tok.AccessToken == "" {
		return nil, NewError(CodeInvalidResponse, "the provider sent no access token", fmt.Errorf("refresh: token response without access_token"))
	}
	if r.check != nil {
		if err := r.check(r.ctx, tok); err != nil {
			return nil, err
		}
	}
	r.refreshToken = tok.RefreshToken
	return tok, nil
}

// TokenSource returns a source of tokens that starts with t and renews
// them at WP OAuth Server's /oauth/token (which issues refresh tokens with
// the authorization code) through the bounded client, for as long as ctx
// lives.
func (b *BlogOAuth2) TokenSource(ctx context.Context, t Tokens, _ string) (oauth2.TokenSource, error) {
	if err := issuedBy(t, b.conf.Endpoint.TokenURL); err != nil {
		return nil, err
	}
	conf := b.conf
	r := &refresher{ctx: ctx, refreshToken: t.RefreshToken,
		conf: func(context.Context) (*oauth2.Config, *http.Client, error) { return &conf, b.client, nil }}
	return oauth2.ReuseTokenSource(oauthToken(t), r), nil
}

var _ Refresher = (*BlogOAuth2)(nil)
