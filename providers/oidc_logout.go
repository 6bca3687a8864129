package providers

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// backchannelLogoutEvent is the member of a logout token's events claim
// that makes it one (Back-Channel Logout 1.0, 2.4).
const backchannelLogoutEvent = "http://schemas.openid.net/event/backchannel-logout"

// maxSIDLength bounds a front-channel sid: it is an opaque handle, and the
// host looks it up.
const maxSIDLength = 255

var (
	_ SessionEnder   = (*OIDC)(nil)
	_ LogoutReceiver = (*OIDC)(nil)
)

// EndSessionURL returns the provider's end_session_endpoint with
// id_token_hint (when s has an ID token), client_id,
// post_logout_redirect_uri and state (RP-Initiated Logout 1.0, 2). An ID
// token issued by another provider is refused rather than handed to this
// one. Without an end_session_endpoint the error wraps
// ErrNoProviderLogout, but for Auth0 (OIDCPresetAuth0), whose /v2/logout
// serves.
func (s *OIDC) EndSessionURL(ctx context.Context, ls LogoutSession, state, postLogoutRedirectURI string) (string, error) {
	d, err := s.provider(ctx)
	if err != nil {
		return "", err
	}
	if d.endSession == "" && s.opts.Preset == OIDCPresetAuth0 && state != "" && postLogoutRedirectURI != "" {
		return s.auth0Logout(state, postLogoutRedirectURI)
	}
	if d.endSession == "" {
		return "", NewError(CodeMisconfigured, "the provider has no logout endpoint",
			fmt.Errorf("%w: discovery names no end_session_endpoint", ErrNoProviderLogout))
	}
	if state == "" || postLogoutRedirectURI == "" {
		return "", NewError(CodeMisconfigured, "the logout request is incomplete", errors.New("logout without state or post_logout_redirect_uri"))
	}
	u, err := url.Parse(d.endSession)
	if err != nil {
		return "", NewError(CodeMisconfigured, "the provider's logout endpoint is not a URL", err)
	}
	q := u.Query()
	if ls.IDToken != "" {
		// The hint is the signed ID token, which a provider that encrypts
		// them expects decrypted (RP-Initiated Logout 1.0, 2).
		hint := s.signedIDToken(ls.IDToken)
		// The hint is our own sign-in's token; this only stops it being
		// sent to another provider.
		if iss := unverifiedClaim(hint, "iss"); !d.issuerMatches(iss) {
			return "", NewError(CodeMisconfigured, "the ID token to log out with is not this provider's",
				fmt.Errorf("id_token_hint issued by %.200q, not %q", iss, d.issuer))
		}
		q.Set("id_token_hint", hint)
	}
	q.Set("client_id", s.clientID)
	q.Set("post_logout_redirect_uri", postLogoutRedirectURI)
	q.Set("state", state)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// unverifiedClaim reads a string claim of a JWT without verifying it: for
// tokens of our own sign-ins, kept by the host, to check which provider and
// user they are about.
func unverifiedClaim(jwt, name string) string {
	v, _ := unverifiedClaims(jwt)[name].(string)
	return v
}

// unverifiedClaims decodes the claims of a compact JWS without verifying
// it, numbers as json.Number; nil when it does not decode.
func unverifiedClaims(jwt string) map[string]any {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return nil
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil
	}
	c, err := decodeObject(payload)
	if err != nil {
		return nil
	}
	return c
}

func logoutTokenError(format string, args ...any) *Error {
	return NewError(CodeInvalidResponse, "the logout token is not valid", fmt.Errorf("logout token: "+format, args...))
}

// BackchannelLogout verifies a logout token exactly as Back-Channel Logout
// 1.0, 2.6 says: signed like an ID token by a key of the provider's with an
// algorithm of the allow-list (never none), iss, aud, exp and iat checked as
// for ID tokens, iat no older than LogoutTokenMaxAge, a sub or a sid or
// both, an events claim with the back-channel logout member, no nonce, a
// typ (when present) of logout+jwt, and a jti used once through the Store.
// A token encrypted as ID tokens are registered to be is decrypted first.
// A token without exp, as providers that implement an earlier draft send,
// is accepted on its iat and jti alone, with a warning in the log.
func (s *OIDC) BackchannelLogout(ctx context.Context, logoutToken string) (LogoutEvent, error) {
	d, err := s.provider(ctx)
	if err != nil {
		return LogoutEvent{}, err
	}
	if s.store == nil {
		return LogoutEvent{}, NewError(CodeMisconfigured, "logout tokens cannot be checked for replay", errors.New("the strategy has no Store"))
	}
	if logoutToken == "" {
		return LogoutEvent{}, logoutTokenError("missing")
	}
	if err := d.keys.ensure(ctx); err != nil {
		return LogoutEvent{}, AsError(err, s.name, CodeProviderUnavailable)
	}
	// A provider that encrypts ID tokens may encrypt logout tokens the
	// same way (Back-Channel Logout 1.0, 2.4); either form is accepted.
	signed := logoutToken
	if isJWE(logoutToken) {
		if signed, err = s.openIDToken(logoutToken); err != nil {
			return LogoutEvent{}, logoutTokenError("%w", err)
		}
	}
	t, err := s.verifyJWT(ctx, d, signed, jwtRules{algs: d.keys.algs, expOptional: true})
	if err != nil {
		return LogoutEvent{}, logoutTokenError("%w", err)
	}
	// Explicit typing (2.4) keeps other JWTs of the provider's from being
	// taken for logout tokens; providers that predate it send JWT or none.
	if typ := strings.TrimPrefix(strings.ToLower(t.typ), "application/"); typ != "" && typ != "logout+jwt" && typ != "jwt" {
		return LogoutEvent{}, logoutTokenError("typ %.32q is not logout+jwt", t.typ)
	}
	now, skew := s.now(), s.opts.ClockSkew
	if t.issuedAt.Before(now.Add(-s.opts.LogoutTokenMaxAge - skew)) {
		return LogoutEvent{}, logoutTokenError("issued too long ago (iat %s)", t.issuedAt.UTC().Format(time.RFC3339))
	}
	events, ok := t.raw["events"].(map[string]any)
	if !ok {
		return LogoutEvent{}, logoutTokenError("no events claim")
	}
	if _, ok := events[backchannelLogoutEvent].(map[string]any); !ok {
		return LogoutEvent{}, logoutTokenError("events has no %s object", backchannelLogoutEvent)
	}
	if _, ok := t.raw["nonce"]; ok {
		return LogoutEvent{}, logoutTokenError("carries a nonce, as an ID token does")
	}
	if t.subject == "" && t.sid == "" {
		return LogoutEvent{}, logoutTokenError("names neither a subject (sub) nor a session (sid)")
	}
	jti, _ := t.raw["jti"].(string)
	if jti == "" {
		return LogoutEvent{}, logoutTokenError("no jti")
	}
	if t.expiry.IsZero() {
		// Drafts of Back-Channel Logout before 1.0 had no exp. Such a
		// token is held to the same window by its iat, checked above, and
		// its jti is kept for that window below.
		s.log.Warn("extauth: accepted a logout token without exp, as an earlier draft of Back-Channel Logout sent them",
			"provider", s.name, "issuer", d.issuer)
	}
	// The jti is kept while the token could be accepted, and no longer:
	// until its iat leaves the window or it expires, whichever is first,
	// plus the skew either check allows. An exp years ahead must not pin
	// an entry in the store that sign-ins share.
	until := t.issuedAt.Add(s.opts.LogoutTokenMaxAge)
	if !t.expiry.IsZero() && t.expiry.Before(until) {
		until = t.expiry
	}
	sum := sha256.Sum256([]byte(d.issuer + "\x00" + jti))
	fresh, err := s.store.Consume(ctx, "oidc:logout_token:"+hex.EncodeToString(sum[:]), until.Add(skew))
	if err != nil {
		return LogoutEvent{}, NewError(CodeProviderUnavailable, "the single-use store is unavailable", fmt.Errorf("logout token: store: %w", err))
	}
	if !fresh {
		return LogoutEvent{}, NewError(CodeReplayed, "this logout token was already used", errors.New("logout token: jti replayed"))
	}
	return LogoutEvent{Subject: t.subject, Session: t.sid, Issuer: t.issuer}, nil
}

// FrontchannelLogout checks a front-channel logout request (Front-Channel
// Logout 1.0, 2 and 3): iss must be the provider's issuer and sid present,
// as registering frontchannel_logout_session_required makes the provider
// send them.
func (s *OIDC) FrontchannelLogout(_ context.Context, iss, sid string) (LogoutEvent, error) {
	if d := s.disc.Load(); iss != s.issuer && (d == nil || !d.issuerMatches(iss)) {
		return LogoutEvent{}, NewError(CodeInvalidResponse, "the logout request names another provider",
			fmt.Errorf("front-channel logout: iss %.200q, expected %q", iss, s.issuer))
	}
	if sid == "" || len(sid) > maxSIDLength {
		return LogoutEvent{}, NewError(CodeInvalidResponse, "the logout request names no session",
			errors.New("front-channel logout: sid missing or too long"))
	}
	return LogoutEvent{Session: sid, Issuer: iss}, nil
}
