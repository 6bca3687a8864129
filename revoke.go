package extauth

import (
	"context"
	"fmt"

	"github.com/extauth/extauth/providers"
)

// ErrNoRevocation is wrapped by the error of RevokeTokens for a provider
// that cannot revoke tokens: one that is not OpenID Connect, or whose
// discovery names no revocation_endpoint.
var ErrNoRevocation = providers.ErrNoRevocation

// RevokeTokens revokes the tokens of a sign-in at its provider (RFC 7009):
// the refresh token, then the access token, each that id.Tokens holds.
// The application authenticates as it does at the token endpoint, with a
// fresh client assertion under private_key_jwt or client_secret_jwt. The
// provider is id.Provider at id.Tenant, as for TokenSource, and the tokens
// must say they are its own (Tokens.Issuer, which a sign-in sets): tokens
// of another provider or tenant are refused before any request, and those
// stored before v0.3.0 are taken as TokenSource takes them. A host
// calls it when a user signs out for good or unlinks the provider; a
// provider answers success for a token it does not know, so revoking twice
// is no error.
//
// For a provider that cannot revoke tokens the error wraps
// ErrNoRevocation; any other failure is an *Error.
func (a *Auth) RevokeTokens(ctx context.Context, id *Identity) error {
	s, err := a.tokenStrategy(ctx, id)
	if err != nil {
		return err
	}
	r, ok := s.(providers.Revoker)
	if !ok {
		return fmt.Errorf("extauth: %s cannot revoke tokens: %w", id.Provider, ErrNoRevocation)
	}
	t, err := a.tokensFor(id, s, "the tokens cannot be revoked here")
	if err != nil {
		return err
	}
	if err := r.RevokeTokens(ctx, t); err != nil {
		return asError(err, id.Provider, CodeProviderUnavailable)
	}
	return nil
}
