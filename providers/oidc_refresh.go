package providers

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"

	"golang.org/x/oauth2"
)

var _ Refresher = (*OIDC)(nil)

// TokenSource returns a source of tokens that starts with t and renews
// them at the provider's token endpoint (from discovery) through the
// bounded client, for as long as ctx lives. An ID token in a renewal is
// verified as at sign-in, but for the nonce, and must name the subject of
// t's ID token (OIDC Core 12.2); the renewed oauth2.Token carries it as
// Extra("id_token"). A provider that rotates refresh tokens is followed.
// Tokens bound to a DPoP key (t.DPoPKey) are renewed with proofs of that
// key, and the renewed ones must come back bound to it (token_type DPoP).
func (s *OIDC) TokenSource(ctx context.Context, t Tokens, subject string) (oauth2.TokenSource, error) {
	if err := issuedBy(t, s.issuer); err != nil {
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
			_, err = s.verifyID(ctx, d, raw, tok.AccessToken, func(c *tokenClaims) error {
				if subtle.ConstantTimeCompare([]byte(c.subject), []byte(sub)) != 1 {
					return fmt.Errorf("the renewed ID token names subject %.200q, the sign-in's %q", c.subject, sub)
				}
				return nil
			})
			return err
		},
	}
	return oauth2.ReuseTokenSource(oauthToken(t), r), nil
}
