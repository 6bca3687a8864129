package oidcop

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// What the provider does for FAPI 2.0: with Config.Profile it enforces
// the Security Profile's rules on the client (pushed requests, PKCE,
// private_key_jwt with the issuer as the assertions' only audience,
// sender-constrained tokens, PS256, ES256 or EdDSA only), and with
// FAPI2MessageSigning signed request objects (nbf, and exp at most an
// hour later) and JWT-secured authorization responses (JARM), which it
// sends to any client that asks with response_mode jwt.

// Profile is a security profile the provider enforces.
type Profile string

// The profiles.
const (
	// FAPI2 is the FAPI 2.0 Security Profile.
	FAPI2 Profile = "fapi2"
	// FAPI2MessageSigning adds FAPI 2.0 Message Signing.
	FAPI2MessageSigning Profile = "fapi2-message-signing"
)

// FAPIAlgs are the signing algorithms FAPI 2.0 allows.
var FAPIAlgs = []string{"PS256", "ES256", "EdDSA"}

// Faults of JWT-secured authorization responses (JARM): each makes the
// response JWT one a client must refuse.
const (
	// JARMUnsigned sends the response unsigned, with alg none.
	JARMUnsigned Fault = "jarm_unsigned"
	// JARMBadSignature corrupts its signature.
	JARMBadSignature Fault = "jarm_bad_signature"
	// JARMExpired sends a response that expired an hour ago.
	JARMExpired Fault = "jarm_expired"
	// JARMOtherClient addresses it to another client (aud).
	JARMOtherClient Fault = "jarm_other_client"
	// JARMNoIss leaves iss out.
	JARMNoIss Fault = "jarm_no_iss"
	// JARMWrongIss names another issuer.
	JARMWrongIss Fault = "jarm_wrong_iss"
)

// jarmTTL is how long a response JWT is valid: the browser carries it
// straight back.
const jarmTTL = 5 * time.Minute

// checkProfile refuses a configuration the profile cannot have, and
// fills what it implies.
func (cfg *Config) checkProfile() error {
	switch cfg.Profile {
	case "":
		return nil
	case FAPI2, FAPI2MessageSigning:
	default:
		return fmt.Errorf("oidcop: profile %q", cfg.Profile)
	}
	switch cfg.AuthMethod {
	case "private_key_jwt", "tls_client_auth", "self_signed_tls_client_auth":
	default:
		return fmt.Errorf("oidcop: profile %s authenticates clients with private_key_jwt or mTLS, not %s", cfg.Profile, cfg.AuthMethod)
	}
	if cfg.Alg == "" {
		cfg.Alg = "PS256"
	}
	if !slices.Contains(FAPIAlgs, cfg.Alg) {
		return fmt.Errorf("oidcop: profile %s signs with PS256, ES256 or EdDSA, not %s", cfg.Profile, cfg.Alg)
	}
	cfg.RequirePAR = true
	// Sender-constrained tokens: DPoP unless mTLS binds them.
	cfg.DPoP = cfg.DPoP || !cfg.MTLS
	if cfg.Profile == FAPI2MessageSigning {
		cfg.RequireRequestObject = true
	}
	return nil
}

// clientAlgNames are the algorithms the provider takes client JWTs
// (assertions, request objects) signed with, as discovery lists them.
func (op *OP) clientAlgNames() []string {
	if op.cfg.Profile != "" {
		return FAPIAlgs
	}
	return []string{"RS256", "PS256", "ES256"}
}

// clientAlgs are clientAlgNames, for go-jose.
func (op *OP) clientAlgs() []jose.SignatureAlgorithm { return signatureAlgs(op.clientAlgNames()) }

// signatureAlgs converts algorithm names for go-jose's parsers.
func signatureAlgs(names []string) []jose.SignatureAlgorithm {
	out := make([]jose.SignatureAlgorithm, len(names))
	for i, a := range names {
		out[i] = jose.SignatureAlgorithm(a)
	}
	return out
}

// jarm signs the authorization response q as a JWT (JARM 4.1): its
// parameters as claims beside iss, aud and exp, with the active key,
// broken as the active faults say.
func (op *OP) jarm(q url.Values) (string, error) {
	now := op.now()
	claims := map[string]any{"iss": op.cfg.Issuer, "aud": op.cfg.ClientID, "iat": now.Unix(), "exp": now.Add(jarmTTL).Unix()}
	for k := range q {
		claims[k] = q.Get(k)
	}
	op.mu.Lock()
	faults := maps.Clone(op.faults)
	op.mu.Unlock()
	switch {
	case faults[JARMExpired]:
		claims["iat"], claims["exp"] = now.Add(-2*time.Hour).Unix(), now.Add(-time.Hour).Unix()
	case faults[JARMOtherClient]:
		claims["aud"] = "someone-else"
	case faults[JARMNoIss]:
		delete(claims, "iss")
	case faults[JARMWrongIss]:
		claims["iss"] = "https://evil.example"
	}
	if faults[JARMUnsigned] {
		h, _ := json.Marshal(map[string]any{"alg": "none", "typ": "JWT"})
		c, _ := json.Marshal(claims)
		return base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c) + ".", nil
	}
	jwt, err := op.SignJWT(nil, claims)
	if err != nil {
		return "", err
	}
	if faults[JARMBadSignature] {
		i := strings.LastIndexByte(jwt, '.')
		sig, _ := base64.RawURLEncoding.DecodeString(jwt[i+1:])
		sig[len(sig)/2] ^= 0x5a
		jwt = jwt[:i+1] + base64.RawURLEncoding.EncodeToString(sig)
	}
	return jwt, nil
}
