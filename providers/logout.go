package providers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"golang.org/x/oauth2"

	"github.com/extauth/extauth/internal/redact"
)

// What a strategy implements for what comes after the sign-in: ending the
// provider's session, hearing that the provider ended one, and renewing
// tokens. The routes in package extauth own the URLs, the cookies and the
// host's hooks; a strategy only speaks its protocol.

// ErrNoProviderLogout is wrapped by the error of a strategy whose provider
// cannot end its session at our request (no end_session_endpoint, no
// single logout service): the host's sign-out is then local only.
var ErrNoProviderLogout = errors.New("the provider offers no logout endpoint")

// ErrNoRefresh is wrapped by the error of a TokenSource that cannot renew
// tokens: the provider issues no refresh tokens, or the sign-in got none.
var ErrNoRefresh = errors.New("no refresh token")

// LogoutSession names the provider's session of a signed-in user, as the
// sign-in's Identity gave it.
type LogoutSession struct {
	// IDToken is the OpenID Connect ID token of the sign-in, sent as
	// id_token_hint.
	IDToken string `redact:"secret"`
	// NameID, NameIDFormat and SessionIndex name a SAML session;
	// NameQualifier, SPNameQualifier and SPProvidedID are the NameID's
	// other attributes as the IdP sent them, "" when it sent none.
	NameID          string
	NameIDFormat    string
	NameQualifier   string
	SPNameQualifier string
	SPProvidedID    string
	NameIDEncrypted bool
	SessionIndex    string
	// IdP is the SAML IdP of the session, in a federation.
	IdP string
}

// Format prints the session with its ID token redacted.
func (s LogoutSession) Format(f fmt.State, verb rune) { redact.Format(f, verb, s) }

// LogValue makes slog print the session with its ID token redacted.
func (s LogoutSession) LogValue() slog.Value { return redact.LogValue(s) }

// MarshalJSON writes the session with its ID token redacted.
func (s LogoutSession) MarshalJSON() ([]byte, error) { return redact.MarshalJSON(s) }

// MarshalYAML writes the session with its ID token redacted.
func (s LogoutSession) MarshalYAML() (any, error) { return redact.MarshalYAML(s) }

// LogoutEvent is a provider's verified word that a user's sessions ended:
// those of Subject, or the one session Session names, or both.
type LogoutEvent struct {
	// Subject is the user at the provider: the OpenID Connect sub or the
	// SAML NameID. Empty when the provider named only the session.
	Subject string
	// Session is the provider's session: the OpenID Connect sid or the
	// SAML SessionIndex. Empty when the provider named only the user:
	// then every session of Subject ends.
	Session string
	// NameIDFormat is the SAML NameID's format.
	NameIDFormat string
	// Issuer is the OpenID Connect issuer that sent the logout: a
	// provider whose issuer varies (Entra ID's multi-tenant authorities)
	// names the user by the pair (Issuer, Subject).
	Issuer string
}

// SessionEnder is implemented by strategies whose provider ends its own
// session of a user when the browser is sent to it (OpenID Connect
// RP-Initiated Logout 1.0).
type SessionEnder interface {
	// EndSessionURL returns the provider's URL that ends s and sends the
	// browser back to postLogoutRedirectURI with state. Without such an
	// endpoint the error wraps ErrNoProviderLogout.
	EndSessionURL(ctx context.Context, s LogoutSession, state, postLogoutRedirectURI string) (string, error)
}

// LogoutReceiver is implemented by strategies whose provider tells the
// application that sessions ended (OpenID Connect Back-Channel and
// Front-Channel Logout 1.0). Each method verifies what the provider sent
// and returns the sessions to end; an *Error says why it was refused.
type LogoutReceiver interface {
	// BackchannelLogout verifies a logout token the provider posted,
	// single use through the Store.
	BackchannelLogout(ctx context.Context, logoutToken string) (LogoutEvent, error)
	// FrontchannelLogout checks the iss and sid of a front-channel logout
	// request.
	FrontchannelLogout(ctx context.Context, iss, sid string) (LogoutEvent, error)
}

// Refresher is implemented by strategies whose provider renews access
// tokens with a refresh token.
type Refresher interface {
	// TokenSource returns a source of tokens that starts with t and renews
	// them at the provider's token endpoint when they expire, through the
	// strategy's bounded client, for as long as ctx lives. Without a
	// refresh token in t, renewing fails with an error wrapping
	// ErrNoRefresh.
	//
	// t.Issuer must be the strategy's own: tokens of another provider are
	// refused before any request. subject is the user the tokens belong
	// to (Identity.UID): a renewed ID token must name it.
	TokenSource(ctx context.Context, t Tokens, subject string) (oauth2.TokenSource, error)
}

// ErrNoRevocation is wrapped by the error of revoking a token at a
// provider that names no revocation endpoint.
var ErrNoRevocation = errors.New("the provider offers no revocation endpoint")

// Revoker is implemented by strategies whose provider revokes tokens
// (RFC 7009).
type Revoker interface {
	// RevokeTokens revokes t's refresh token, then its access token,
	// authenticating the client as at the token endpoint. t.Issuer must be
	// the strategy's own: tokens of another provider are refused before
	// any request. Without a revocation endpoint the error wraps
	// ErrNoRevocation.
	RevokeTokens(ctx context.Context, t Tokens) error
}
