package extauth_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/oidcop"
	"github.com/extauth/extauth/internal/harness"
)

// fapi2Setup is a provider that enforces a FAPI 2.0 profile (with DPoP
// nonces) and an application whose secrets file has only the client ID,
// the issuer, an EC key, dpop: true and profile; entries adds to its
// oidc_additional_settings, edit adjusts the provider.
func fapi2Setup(profile oidcop.Profile, entries string, edit func(*oidcop.Config)) oidcSetup {
	key := clientKeys()["EC"][0]
	return oidcSetup{
		op: func(c *oidcop.Config) {
			c.Profile, c.Alg, c.Keys = profile, "ES256", opKeys()["ES256"][:1]
			c.AuthMethod, c.ClientSecret = "private_key_jwt", ""
			c.ClientJWKSURI = strings.TrimSuffix(c.RedirectURIs[0], "/callback") + "/jwks"
			c.DPoPNonce = true
			if edit != nil {
				edit(c)
			}
		},
		config: func(cfg *extauth.Config) {
			src := fmt.Sprintf(`
oidc_client_id: %s
oidc_issuer: %s
oidc_additional_settings:
  profile: %s
  dpop: true
  private_key: |
%s%s`, oidcClientID, cfg.OIDC.Issuer, profile, indent(indent(key.pem)), entries)
			parsed, err := extauth.ParseConfig([]byte(src))
			if err != nil {
				panic(err)
			}
			*cfg = *parsed
		},
	}
}

// jwtClaims decodes the claims of a compact JWS without verifying it.
func jwtClaims(t *testing.T, raw string) map[string]any {
	t.Helper()
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWS: %q", raw)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestOIDCFAPI2SecretsFile is issue 31's "done when": a secrets file with
// profile: fapi2, dpop: true, a client ID, an issuer and a private key
// signs in against a provider that enforces the FAPI 2.0 Security
// Profile: the request is pushed (the browser carries client_id and
// request_uri alone) with PKCE S256 and a nonce of at most 64
// characters, the client authenticates with assertions whose aud is the
// issuer alone, ES256 signs everything, the ID token is PS256- or
// ES256-signed, and the tokens come back DPoP-bound.
func TestOIDCFAPI2SecretsFile(t *testing.T) {
	a := newOIDCApp(t, fapi2Setup(oidcop.FAPI2, "", nil))
	resp := a.signIn(t)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("got %d %q\n%s", resp.StatusCode, resp.Body, a.Logs)
	}
	id := a.identities()[0]
	if id.Tokens.TokenType != "DPoP" || id.Tokens.DPoPKey == "" {
		t.Errorf("tokens %+v", id.Tokens)
	}
	front := a.OP.LastAuthorizeQuery()
	if len(front) != 2 || !strings.HasPrefix(front.Get("request_uri"), "urn:ietf:params:oauth:request_uri:") {
		t.Errorf("authorization URL parameters %v", front)
	}
	p := a.OP.LastRequestParams()
	if p.Get("code_challenge_method") != "S256" || p.Get("nonce") == "" || len(p.Get("nonce")) > 64 || p.Has("response_mode") {
		t.Errorf("pushed parameters %v", p)
	}
	// The provider took a first assertion at PAR, then asked for its DPoP
	// nonce: the request sent again carried a fresh assertion (a jti is
	// used once).
	checkAssertions(t, a.OP, a.OP.Issuer(), clientKeys()["EC"][0].kid(), oidcop.PAR, oidcop.PAR, oidcop.Token)
	for _, as := range a.OP.Assertions() {
		if as.Header["alg"] != "ES256" {
			t.Errorf("assertion signed with %v", as.Header["alg"])
		}
	}
	if _, jkt := dpopJWK(t, id.Tokens); a.OP.LastRequestParams().Get("dpop_jkt") != jkt {
		t.Errorf("the code is not bound to the sign-in's DPoP key")
	}
}

// TestOIDCFAPI2MessageSigning: profile fapi2-message-signing adds a
// signed request object (with nbf, and exp at most an hour later) and a
// JWT-secured authorization response, which the provider sends and
// extauth verifies before the code is used.
func TestOIDCFAPI2MessageSigning(t *testing.T) {
	a := newOIDCApp(t, fapi2Setup(oidcop.FAPI2MessageSigning, "", nil))
	b := harness.NewBrowser(t).NoFollow()
	callback := a.callbackURL(b, "oidc")
	u, err := url.Parse(callback)
	if err != nil {
		t.Fatal(err)
	}
	if q := u.Query(); len(q) != 1 || q.Get("response") == "" {
		t.Fatalf("the provider answered %v, want one response JWT", q)
	}
	c := jwtClaims(t, u.Query().Get("response"))
	if c["iss"] != a.OP.Issuer() || c["aud"] != oidcClientID || c["code"] == nil || c["state"] == nil {
		t.Errorf("response claims %v", c)
	}
	resp := b.Get(callback)
	if resp.StatusCode != http.StatusOK || resp.Body != "signed in as "+oidcop.DemoUsers()[0].Sub {
		t.Fatalf("got %d %q\n%s", resp.StatusCode, resp.Body, a.Logs)
	}
	if p := a.OP.LastRequestParams(); p.Get("response_mode") != "jwt" {
		t.Errorf("pushed parameters %v", p)
	}
}

// TestOIDCJARMRefusals plays each JWT-secured authorization response a
// client must refuse (JARM 4.4): unsigned, a bad signature, expired,
// for another client, without iss or from another issuer; and a
// response that is not a JWT at all, or carries a parameter beside it.
// The response goes through the verification every JWT of the provider's
// does (verifyJWT), so what it checks of an ID token it checks here too:
// a response issued in the future or not yet valid (nbf), dates or an
// issuer that are not what RFC 7519 says, an audience beside this client.
// The token endpoint is never asked and the hook never runs.
func TestOIDCJARMRefusals(t *testing.T) {
	// resign edits the claims of the provider's response JWT and signs
	// them again with the provider's key.
	resign := func(edit func(c map[string]any)) func(*testing.T, *oidcop.OP, url.Values) url.Values {
		return func(t *testing.T, op *oidcop.OP, q url.Values) url.Values {
			c := jwtClaims(t, q.Get("response"))
			edit(c)
			jwt, err := op.SignJWT(nil, c)
			if err != nil {
				t.Fatal(err)
			}
			q.Set("response", jwt)
			return q
		}
	}
	later := time.Now().Add(time.Hour).Unix()
	for _, tc := range []struct {
		name  string
		fault oidcop.Fault
		// edit rewrites the callback URL the provider sent.
		edit   func(t *testing.T, op *oidcop.OP, q url.Values) url.Values
		status int
		code   string
		why    string
	}{
		{"unsigned (alg none)", oidcop.JARMUnsigned, nil, http.StatusBadRequest, "invalid_response", "unexpected signature algorithm"},
		{"a bad signature", oidcop.JARMBadSignature, nil, http.StatusBadRequest, "invalid_response", "signature"},
		{"expired", oidcop.JARMExpired, nil, http.StatusBadRequest, "invalid_response", "expired at"},
		{"for another client", oidcop.JARMOtherClient, nil, http.StatusBadRequest, "invalid_response", "is not this client"},
		{"without iss", oidcop.JARMNoIss, nil, http.StatusBadRequest, "invalid_response", "no issuer (iss)"},
		{"from another issuer", oidcop.JARMWrongIss, nil, http.StatusBadRequest, "invalid_response", "issued by"},
		{"issued in the future", "", resign(func(c map[string]any) { c["iat"] = later }),
			http.StatusBadRequest, "invalid_response", "issued in the future"},
		{"not valid yet (nbf)", "", resign(func(c map[string]any) { c["nbf"] = later }),
			http.StatusBadRequest, "invalid_response", "not valid before"},
		{"an issuer that is not a string", "", resign(func(c map[string]any) { c["iss"] = []string{c["iss"].(string)} }),
			http.StatusBadRequest, "invalid_response", "claim iss is not a string"},
		{"an expiry that is not a date", "", resign(func(c map[string]any) { c["exp"] = fmt.Sprint(later) }),
			http.StatusBadRequest, "invalid_response", "claim exp: not a number"},
		{"another audience beside this client", "", resign(func(c map[string]any) {
			c["aud"], c["azp"] = []string{c["aud"].(string), "someone-else"}, c["aud"]
		}), http.StatusBadRequest, "invalid_response", "is not this client alone"},
		{"a plain response instead of the JWT", "", func(t *testing.T, _ *oidcop.OP, q url.Values) url.Values {
			c := jwtClaims(t, q.Get("response"))
			return url.Values{"code": {c["code"].(string)}, "state": {c["state"].(string)}, "iss": {c["iss"].(string)}}
		}, http.StatusBadRequest, "invalid_state", "no state"},
		{"a code beside the JWT", "", func(t *testing.T, _ *oidcop.OP, q url.Values) url.Values {
			q.Set("code", "injected")
			return q
		}, http.StatusBadRequest, "invalid_response", "beside the response JWT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newOIDCApp(t, fapi2Setup(oidcop.FAPI2MessageSigning, "", nil))
			a.OP.SetFaults(tc.fault)
			b := harness.NewBrowser(t).NoFollow()
			u, err := url.Parse(a.callbackURL(b, "oidc"))
			if err != nil {
				t.Fatal(err)
			}
			if tc.edit != nil {
				u.RawQuery = tc.edit(t, a.OP, u.Query()).Encode()
			}
			resp := b.Get(u.String())
			wantCode(t, resp, tc.status, tc.code)
			if len(a.identities()) != 0 || a.OP.Hits(oidcop.Token) != 0 {
				t.Fatalf("hook called %d times, token endpoint %d", len(a.identities()), a.OP.Hits(oidcop.Token))
			}
			if !strings.Contains(a.Logs.String(), tc.why) {
				t.Errorf("the log does not say why (%q):\n%s", tc.why, a.Logs)
			}
		})
	}
}

// TestOIDCFAPI2ProviderRefusals: under profile fapi2 the client holds the
// provider to the profile too: an authorization response without iss
// (RFC 9207) is refused although discovery does not advertise the
// parameter, and a provider that signs ID tokens only with an algorithm
// FAPI 2.0 forbids (RS256) is refused before anything is sent.
func TestOIDCFAPI2ProviderRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edit   func(*oidcop.Config)
		status int
		code   string
		why    string
	}{
		{"no iss in the authorization response", func(c *oidcop.Config) { c.NoIssParameter = true },
			http.StatusBadRequest, "invalid_response", "iss parameter missing"},
		{"ID tokens signed with RS256", func(c *oidcop.Config) { c.Alg, c.Keys = "RS256", opKeys()["RS256"][:1] },
			http.StatusInternalServerError, "misconfigured", "no algorithm extauth accepts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newOIDCApp(t, fapi2Setup(oidcop.FAPI2, "", func(c *oidcop.Config) {
				// A provider that does not enforce the profile itself.
				c.Profile, c.DPoP, c.RequirePAR = "", true, true
				tc.edit(c)
			}))
			resp := a.signIn(t)
			if resp.StatusCode != tc.status || !strings.Contains(resp.Body, tc.code) {
				t.Fatalf("got %d %q, want %d %s\n%s", resp.StatusCode, resp.Body, tc.status, tc.code, a.Logs)
			}
			if len(a.identities()) != 0 || a.OP.Hits(oidcop.Token) != 0 {
				t.Fatalf("hook called %d times, token endpoint %d", len(a.identities()), a.OP.Hits(oidcop.Token))
			}
			if !strings.Contains(a.Logs.String(), tc.why) {
				t.Errorf("the log does not say why (%q):\n%s", tc.why, a.Logs)
			}
		})
	}
}
