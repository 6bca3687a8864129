package providers

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"math"
	"slices"
	"strconv"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// tokenClaims are the claims of a JWT the provider signed, verified and
// decoded once: raw is the whole payload, the fields the ones the checks and
// the identity read from it.
//
// We verify ID tokens ourselves rather than through go-oidc's
// IDTokenVerifier because its API makes every token be parsed twice (by
// go-oidc and again by the key set) and its claims decoded three times (its
// own struct, ours, the raw map): a third of the verification's time. The
// checks are go-oidc's (signature with the allow-list, iss, aud, exp, nbf)
// plus those it leaves to us; the JWS parsing and signature are go-jose's,
// as in go-oidc.
type tokenClaims struct {
	raw map[string]any
	// alg and typ are the protected header's algorithm and type.
	alg, typ string

	issuer    string
	audience  []string
	subject   string
	azp       string
	nonce     string
	atHash    string
	sid       string
	expiry    time.Time
	issuedAt  time.Time
	notBefore time.Time
}

// jwtRules say what verifyJWT takes of one kind of the provider's JWTs:
// the ID tokens (and UserInfo answers) sign with the key set's
// algorithms and carry every claim it checks; logout tokens and JARM
// responses leave some out, or ask more.
type jwtRules struct {
	// algs are the algorithms the token may be signed with.
	algs []jose.SignatureAlgorithm
	// expOptional lets a token without exp through for the caller to
	// judge (logout tokens of an earlier draft of Back-Channel Logout);
	// one with exp is checked as ever.
	expOptional bool
	// iatOptional lets a token without iat through (JARM 4.1 asks only
	// iss, aud and exp); one with iat is checked as ever.
	iatOptional bool
	// soleAudience wants aud to be this client and no one else (JARM
	// 4.4), where others take trusted audiences beside it.
	soleAudience bool
}

// idTokenRules are the rules of ID tokens and of the tokens that follow
// them (renewed ID tokens).
func idTokenRules(d *discovered) jwtRules { return jwtRules{algs: d.keys.algs} }

// verifyJWT verifies a compact JWS signed by the provider (one signature,
// an algorithm of r.algs, the key its header names) and the claims every
// token of the provider's carries, as OIDC Core 3.1.3.7 steps 2 to 9 say
// for ID tokens, Back-Channel Logout 2.6 step 4 repeats for logout tokens
// and JARM 4.4 for authorization responses: iss is the issuer, every aud
// is trusted and one is us, azp is us when present and required with
// several audiences, exp is in the future, iat present and not in the
// future, nbf (when present) past; each with the clock skew, and each
// claim it reads of the type RFC 7519 gives it. r says what a kind of
// token may leave out. The callers check the rest.
func (s *OIDC) verifyJWT(ctx context.Context, d *discovered, raw string, r jwtRules) (*tokenClaims, error) {
	jws, err := jose.ParseSignedCompact(raw, r.algs)
	if err != nil {
		return nil, fmt.Errorf("parsing the token: %w", err)
	}
	payload, err := d.keys.verify(ctx, jws)
	if err != nil {
		return nil, err
	}
	m, err := decodeObject(payload)
	if err != nil {
		return nil, fmt.Errorf("claims: %w", err)
	}
	hdr := jws.Signatures[0].Protected
	c := &tokenClaims{raw: m, alg: hdr.Algorithm}
	if typ, ok := hdr.ExtraHeaders[jose.HeaderType].(string); ok {
		c.typ = typ
	}
	var errs []error
	str := func(name string, dst *string) {
		switch v := m[name].(type) {
		case nil:
		case string:
			*dst = v
		default:
			errs = append(errs, fmt.Errorf("claim %s is not a string", name))
		}
	}
	date := func(name string, dst *time.Time) {
		if v, ok := m[name]; ok {
			t, err := numericDate(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("claim %s: %w", name, err))
			}
			*dst = t
		}
	}
	str("iss", &c.issuer)
	str("sub", &c.subject)
	str("azp", &c.azp)
	str("nonce", &c.nonce)
	str("at_hash", &c.atHash)
	str("sid", &c.sid)
	date("exp", &c.expiry)
	date("iat", &c.issuedAt)
	date("nbf", &c.notBefore)
	switch v := m["aud"].(type) {
	case string:
		c.audience = []string{v}
	case []any:
		for _, a := range v {
			as, ok := a.(string)
			if !ok {
				errs = append(errs, errors.New("claim aud holds a value that is not a string"))
				break
			}
			c.audience = append(c.audience, as)
		}
	case nil:
	default:
		errs = append(errs, errors.New("claim aud is neither a string nor an array"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	if err := d.verifyIssuer(c); err != nil {
		return nil, err
	}
	if len(c.audience) == 0 {
		return nil, errors.New("no audience (aud)")
	}
	if r.soleAudience && (len(c.audience) != 1 || c.audience[0] != s.clientID) {
		return nil, fmt.Errorf("audience %.200q is not this client alone", c.audience)
	}
	ours := false
	for _, aud := range c.audience {
		if !s.audiences[aud] {
			return nil, fmt.Errorf("audience %.200q is not trusted", aud)
		}
		ours = ours || aud == s.clientID
	}
	if !ours {
		return nil, fmt.Errorf("audience %.200q does not name this client", c.audience)
	}
	if len(c.audience) > 1 && c.azp == "" {
		return nil, errors.New("several audiences but no authorized party (azp)")
	}
	if c.azp != "" && c.azp != s.clientID {
		return nil, fmt.Errorf("authorized party (azp) %.200q is not this client", c.azp)
	}
	now, skew := s.now(), s.opts.ClockSkew
	if c.expiry.IsZero() && !r.expOptional {
		return nil, errors.New("no expiry (exp)")
	}
	if !c.expiry.IsZero() && !now.Before(c.expiry.Add(skew)) {
		return nil, fmt.Errorf("expired at %s", c.expiry.UTC().Format(time.RFC3339))
	}
	if c.issuedAt.IsZero() && !r.iatOptional {
		return nil, errors.New("no issue time (iat)")
	}
	if c.issuedAt.After(now.Add(skew)) {
		return nil, fmt.Errorf("issued in the future (iat %s)", c.issuedAt.UTC().Format(time.RFC3339))
	}
	if !c.notBefore.IsZero() && c.notBefore.After(now.Add(skew)) {
		return nil, fmt.Errorf("not valid before %s (nbf)", c.notBefore.UTC().Format(time.RFC3339))
	}
	return c, nil
}

// numericDate reads an RFC 7519 NumericDate: seconds since the epoch, an
// integer or not.
func numericDate(v any) (time.Time, error) {
	n, ok := v.(json.Number)
	if !ok {
		return time.Time{}, errors.New("not a number")
	}
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return time.Unix(i, 0), nil
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > 1<<53 {
		return time.Time{}, errors.New("not a usable date")
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), nil
}

// checkAtHash verifies at_hash (OIDC Core 3.1.3.8): the left half of the
// access token's hash with the ID token's algorithm, base64url.
func checkAtHash(alg, atHash, accessToken string) error {
	var h hash.Hash
	switch alg {
	case "RS256", "PS256", "ES256":
		h = sha256.New()
	case "RS384", "PS384", "ES384":
		h = sha512.New384()
	case "RS512", "PS512", "ES512", "EdDSA":
		h = sha512.New()
	default:
		return fmt.Errorf("no hash for algorithm %.16q", alg)
	}
	h.Write([]byte(accessToken))
	sum := h.Sum(nil)
	want := base64.RawURLEncoding.EncodeToString(sum[:len(sum)/2])
	if subtle.ConstantTimeCompare([]byte(want), []byte(atHash)) != 1 {
		return errors.New("the access token does not match at_hash")
	}
	return nil
}

// checkAuthentication checks what the authorization request asked of the
// user's authentication (OIDC Core 3.1.3.7 steps 12 and 13), want (the
// configuration's, narrowed by the sign-in's options): with
// acr_values, the acr claim must be one of them; with max_age, the
// auth_time claim must be present and no older than max_age (with the
// clock skew). acr values are opaque, so any other value, or none, is
// taken for a weaker one. An auth_time, asked for or not, must not lie
// after now or after the token's iat (each with the clock skew): a date
// to come would pass any max_age, here and wherever the host reads it.
func (s *OIDC) checkAuthentication(claims map[string]any, want Asked) error {
	if v, ok := claims["auth_time"]; ok {
		at, err := numericDate(v)
		if err != nil {
			return idError("claim auth_time: %w", err)
		}
		latest := s.now()
		if iat, err := numericDate(claims["iat"]); err == nil && iat.Before(latest) {
			latest = iat
		}
		if at.After(latest.Add(s.opts.ClockSkew)) {
			return NewError(CodeInsufficientAuthentication, "the provider dated your authentication in the future",
				fmt.Errorf("id token: auth_time %s is after the token was issued and after now", at.UTC().Format(time.RFC3339)))
		}
	}
	if len(want.Values) > 0 {
		acr, _ := claims["acr"].(string)
		if acr == "" {
			return NewError(CodeInsufficientAuthentication, "the provider did not say how strongly you were authenticated",
				fmt.Errorf("id token: no acr claim, acr_values %q were requested", want.Values))
		}
		if !slices.Contains(want.Values, acr) {
			return NewError(CodeInsufficientAuthentication, "the provider authenticated you less strongly than required",
				fmt.Errorf("id token: acr %.200q is not one of the requested acr_values %q", acr, want.Values))
		}
	}
	if want.MaxAge >= 0 {
		v, ok := claims["auth_time"]
		if !ok {
			return idError("no auth_time, although max_age was requested (OIDC Core 3.1.2.1)")
		}
		at, err := numericDate(v)
		if err != nil {
			return idError("claim auth_time: %w", err)
		}
		if s.now().Sub(at) > want.MaxAge+s.opts.ClockSkew {
			return NewError(CodeInsufficientAuthentication, "the provider's authentication of you is older than allowed",
				fmt.Errorf("id token: auth_time %s is more than max_age %s ago", at.UTC().Format(time.RFC3339), want.MaxAge))
		}
	}
	return nil
}
