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
// (JARM 4.4) as verifyJWT verifies every JWT of the provider's: signed
// with an algorithm of authorization_signing_alg_values_supported that
// extauth accepts by a key of the provider, iss the issuer, aud this
// client alone, exp in the future, iat and nbf (when present) not; then
// its state must be the sign-in's. It returns its parameters.
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
	// The JWT verification of every other token of the provider's, with
	// JARM's algorithms and audience; iat may be absent (JARM 4.1).
	c, err := s.verifyJWT(ctx, d, raw[0], jwtRules{algs: d.jarmAlgs, iatOptional: true, soleAudience: true})
	if err != nil {
		return nil, jarmError("%w", err)
	}
	m := c.raw
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
