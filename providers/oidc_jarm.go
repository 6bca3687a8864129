package providers

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// JWT-secured authorization responses (JARM, OpenID Foundation 2022):
// with response_mode jwt the provider returns the browser with one
// parameter, response, a JWT it signed that holds the authorization
// response's parameters (code, state, or error) beside iss, aud and exp.
// It is verified before anything of it is used: a response that is not a
// JWT, is unsigned, expired, for another client or from another issuer
// is refused, so an attacker can neither inject a code nor mix up
// providers. FAPI 2.0 Message Signing requires it.

// ResponseModeJWT is OIDCOptions.ResponseMode for JARM: query.jwt, the
// default of the code flow.
const ResponseModeJWT = "jwt"

// responseModes are the values response_mode may take: JARM's for the
// code flow. form_post.jwt is left out: its cross-site POST carries no
// SameSite=Lax cookie.
var responseModes = []string{ResponseModeJWT, "query.jwt"}

// jarmParam is the parameter that carries the response (JARM 4.3).
const jarmParam = "response"

// maxJARM bounds the response JWT read at the callback.
const maxJARM = 16 << 10

func (s *OIDC) jarm() bool { return s.opts.ResponseMode != "" }

// jarmState reads the state of a response JWT without verifying it, for
// Binding, which only finds the sign-in's cookie with it: Complete
// verifies the JWT before it uses anything in it, the state included.
func jarmState(raw string) string {
	if len(raw) > maxJARM {
		return ""
	}
	_, rest, ok := strings.Cut(raw, ".")
	part, signature, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 || strings.Contains(signature, ".") {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(part)
	if err != nil {
		return ""
	}
	var c struct {
		State string `json:"state"`
	}
	if json.Unmarshal(payload, &c) != nil {
		return ""
	}
	return c.State
}

func jarmError(format string, args ...any) *Error {
	return NewError(CodeInvalidResponse, "the provider's authorization response (JARM) is not valid",
		fmt.Errorf("authorization response: "+format, args...))
}

// jarmResponse verifies the JWT-secured authorization response of r
// (JARM 4.4): signed with an accepted algorithm by a key of the provider,
// iss the issuer, aud this client, exp in the future, and its state the
// sign-in's; and returns its parameters.
func (s *OIDC) jarmResponse(ctx context.Context, d *discovered, r *http.Request, state string) (url.Values, error) {
	raw := r.Form[jarmParam]
	switch {
	case len(raw) == 0:
		return nil, jarmError("no %s parameter, although response_mode %s was asked for", jarmParam, s.opts.ResponseMode)
	case len(raw) != 1 || len(raw[0]) > maxJARM:
		return nil, jarmError("the %s parameter is repeated or too large", jarmParam)
	case isJWE(raw[0]):
		return nil, jarmError("the response is encrypted; extauth takes signed responses only")
	}
	for k := range r.Form {
		if k != jarmParam {
			// JARM 4.3: the response travels alone; anything beside it
			// was not signed.
			return nil, jarmError("parameter %.64q beside the response JWT", k)
		}
	}
	if err := d.keys.ensure(ctx); err != nil {
		return nil, AsError(err, s.name, CodeProviderUnavailable)
	}
	jws, err := jose.ParseSignedCompact(raw[0], d.jarmAlgs)
	if err != nil {
		return nil, jarmError("%w", err)
	}
	payload, err := d.keys.verify(ctx, jws)
	if err != nil {
		return nil, jarmError("%w", err)
	}
	m, err := decodeObject(payload)
	if err != nil {
		return nil, jarmError("claims: %w", err)
	}
	iss, _ := m["iss"].(string)
	exp, expErr := numericDate(m["exp"])
	now := s.now()
	switch {
	case iss == "":
		return nil, jarmError("no issuer (iss)")
	case iss != d.issuer:
		return nil, jarmError("issued by %.200q, not %q", iss, d.issuer)
	case !audienceIs(m["aud"], s.clientID):
		return nil, jarmError("audience %.200v is not this client", m["aud"])
	case m["exp"] == nil || expErr != nil:
		return nil, jarmError("no expiry (exp)")
	case !now.Before(exp.Add(s.opts.ClockSkew)):
		return nil, jarmError("expired at %s", exp.UTC().Format(time.RFC3339))
	}
	got, _ := m["state"].(string)
	if subtle.ConstantTimeCompare([]byte(got), []byte(state)) != 1 {
		return nil, jarmError("its state is not the sign-in's")
	}
	params := url.Values{}
	for k, v := range m {
		switch k {
		case "aud", "exp", "iat", "nbf", "jti":
			continue
		}
		if sv, ok := v.(string); ok {
			params.Set(k, sv)
		}
	}
	return params, nil
}

// audienceIs reports whether aud (a string or an array, as decoded) names
// client and no one else.
func audienceIs(aud any, client string) bool {
	switch a := aud.(type) {
	case string:
		return a == client
	case []any:
		return len(a) == 1 && a[0] == client
	}
	return false
}
