package providers

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"time"

	"golang.org/x/oauth2"
)

var _ Refresher = (*OIDC)(nil)

// TokenSource returns a source of tokens that starts with t and renews
// them at the provider's token endpoint (from discovery) through the
// bounded client, for as long as ctx lives. An ID token in a renewal is
// verified as at sign-in, but for the nonce, and must name the subject of
// t's ID token and keep its authentication (OIDC Core 12.2: see
// authnClaims.renewed); the renewed oauth2.Token carries it as
// Extra("id_token"). A provider that rotates refresh tokens is followed.
// Tokens bound to a DPoP key (t.DPoPKey) are renewed with proofs of that
// key, and the renewed ones must come back bound to it (token_type DPoP).
func (s *OIDC) TokenSource(ctx context.Context, t Tokens, subject string) (oauth2.TokenSource, error) {
	var d *discovered
	if s.entra != nil && t.Issuer != s.issuer {
		// Tokens of an Entra ID tenant's issuer are told from others' by
		// the discovery document's.
		var err error
		if d, err = s.provider(ctx); err != nil {
			return nil, err
		}
	}
	if err := s.ownTokens(d, t); err != nil {
		return nil, err
	}
	// The user the renewed ID tokens must name: the identity's, which the
	// sign-in's ID token, when kept, must agree with.
	sub := subject
	if t.IDToken != "" {
		idSub := unverifiedClaim(s.signedIDToken(t.IDToken), "sub")
		switch {
		case idSub == "":
			return nil, NewError(CodeMisconfigured, "the sign-in's ID token is not readable", errors.New("refresh: the ID token in Tokens names no subject"))
		case sub == "":
			sub = idSub
		case subtle.ConstantTimeCompare([]byte(idSub), []byte(sub)) != 1:
			return nil, NewError(CodeInvalidState, "the tokens do not belong to this user: sign in again",
				fmt.Errorf("refresh: the ID token in Tokens names subject %.200q, the identity %.200q", idSub, sub))
		}
	}
	if sub == "" {
		return nil, NewError(CodeMisconfigured, "the tokens cannot be renewed without their user",
			errors.New("refresh: the identity names no user (Identity.UID) and Tokens holds no ID token"))
	}
	// How and when the user authenticated at sign-in, which no renewal
	// may contradict; each renewal accepted becomes the next one's.
	was := authnOf(unverifiedClaims(s.signedIDToken(t.IDToken)))
	// Tokens bound to a DPoP key are renewed with proofs of it, and the
	// renewed ones must be bound to it too.
	key, err := tokensDPoPKey(t)
	if err != nil {
		return nil, err
	}
	r := &refresher{ctx: withDPoP(ctx, key), refreshToken: t.RefreshToken,
		conf: func(ctx context.Context) (*oauth2.Config, *http.Client, error) {
			d, err := s.provider(ctx)
			if err != nil {
				return nil, nil, err
			}
			// The token endpoint's client adds a fresh client assertion
			// to each renewal when the client authenticates with one.
			return &d.oauth, d.tokenClient, nil
		},
		check: func(ctx context.Context, tok *oauth2.Token) error {
			if err := checkTokenType(key, tok.TokenType); err != nil {
				return err
			}
			raw, _ := tok.Extra("id_token").(string)
			if raw == "" {
				return nil
			}
			d, err := s.provider(ctx)
			if err != nil {
				return err
			}
			c, err := s.verifyID(ctx, d, raw, tok.AccessToken, func(c *tokenClaims) error {
				if subtle.ConstantTimeCompare([]byte(c.subject), []byte(sub)) != 1 {
					return fmt.Errorf("the renewed ID token names subject %.200q, the sign-in's %q", c.subject, sub)
				}
				// Entra ID's multi-tenant issuers: the tokens' tenant.
				if c.issuer != t.Issuer {
					return fmt.Errorf("the renewed ID token's issuer %.200q is not the sign-in's %q", c.issuer, t.Issuer)
				}
				return nil
			})
			if err != nil {
				return err
			}
			// An auth_time in the future is refused as at sign-in.
			if err := s.checkAuthentication(c.raw, Asked{MaxAge: -1}); err != nil {
				return err
			}
			now, err := was.renewed(c.raw)
			if err != nil {
				return idError("%w", err)
			}
			was = now
			return nil
		},
	}
	return oauth2.ReuseTokenSource(oauthToken(t), r), nil
}

// authnClaims are how and when a sign-in's user authenticated, as an ID
// token says (authentication): its acr and auth_time, "" and zero when it
// says nothing.
type authnClaims struct {
	acr      string
	authTime time.Time
}

func authnOf(claims map[string]any) authnClaims {
	acr, _, at := authentication(claims)
	return authnClaims{acr: acr, authTime: at}
}

// renewed checks the claims of a renewed ID token against a, the
// authentication of the tokens renewed, and returns what the next renewal
// must keep. A renewal authenticates no one (OIDC Core 12.2), so its acr
// must be a's, or absent: another would have a host that reads it
// believe in an authentication that never happened. Its auth_time must
// not lie before a's (the provider would contradict the authentication
// the tokens were issued for), nor in the future (checkAuthentication);
// a later one says the user authenticated again at the provider since,
// as a provider's single sign-on session may.
func (a authnClaims) renewed(claims map[string]any) (authnClaims, error) {
	r := authnOf(claims)
	if _, ok := claims["acr"]; ok && r.acr != a.acr {
		return a, fmt.Errorf("the renewed ID token says acr %.200q, the sign-in's was %.200q: a renewal authenticates no one", r.acr, a.acr)
	}
	if r.authTime.IsZero() {
		return a, nil
	}
	if r.authTime.Before(a.authTime) {
		return a, fmt.Errorf("the renewed ID token dates the authentication (auth_time) %s, before the sign-in's %s",
			r.authTime.UTC().Format(time.RFC3339), a.authTime.UTC().Format(time.RFC3339))
	}
	a.authTime = r.authTime
	return a, nil
}
