package extauth_test

import (
	"context"
	"crypto"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/oidcop"
	"github.com/extauth/extauth/providers"
)

// dpopSetup is a provider that requires DPoP with nonces of a client that
// authenticates with private_key_jwt and pushes its requests, and an
// application configured for it (dpop: true, offline access so that
// there is a refresh token); edit adjusts both.
func dpopSetup(edit func(*oidcop.Config, *extauth.OIDCAdditionalSettings)) oidcSetup {
	return highAssurance(func(c *oidcop.Config, s *extauth.OIDCAdditionalSettings) {
		c.DPoP, c.DPoPNonce = true, true
		c.RequireRequestObject = false
		c.IDTokenEncryption = oidcop.Encryption{}
		s.RequestObject = false
		s.IDTokenEncryptedResponseAlg, s.IDTokenEncryptedResponseEnc = "", ""
		s.DPoP = true
		s.Scope = "openid email profile offline_access"
		if edit != nil {
			edit(c, s)
		}
	})
}

// dpopJWK reads the key a sign-in's tokens are bound to.
func dpopJWK(t *testing.T, tokens extauth.Tokens) (*jose.JSONWebKey, string) {
	t.Helper()
	var k jose.JSONWebKey
	if err := k.UnmarshalJSON([]byte(tokens.DPoPKey)); err != nil || k.IsPublic() {
		t.Fatalf("Tokens.DPoPKey is not a private JWK: %v", err)
	}
	pub := k.Public()
	sum, err := pub.Thumbprint(crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	return &k, base64.RawURLEncoding.EncodeToString(sum)
}

// checkProofs holds the proofs the OP accepted to RFC 9449 4.2: each
// signed by the key of jkt, with a jti never used twice, the endpoint's
// method and URL as htm and htu, and the OP's nonce; at UserInfo, the
// access token's hash too.
func checkProofs(t *testing.T, op *oidcop.OP, jkt string, want ...oidcop.Endpoint) {
	t.Helper()
	var got []oidcop.Endpoint
	jtis := map[any]bool{}
	for _, p := range op.DPoPProofs() {
		got = append(got, p.Endpoint)
		c := p.Claims
		if p.JKT != jkt || c["htm"] != "POST" && p.Endpoint != oidcop.UserInfo || jtis[c["jti"]] || c["jti"] == "" ||
			c["nonce"] == nil || p.Header["alg"] != "ES256" {
			t.Errorf("%s proof %v %v (jkt %s, want %s)", p.Endpoint, p.Header, c, p.JKT, jkt)
		}
		if _, hasATH := c["ath"]; hasATH != (p.Endpoint == oidcop.UserInfo) {
			t.Errorf("%s proof: ath %v", p.Endpoint, c["ath"])
		}
		if htu, _ := c["htu"].(string); !strings.HasPrefix(htu, op.Issuer()+"/") || strings.ContainsAny(htu, "?#") {
			t.Errorf("%s proof: htu %v", p.Endpoint, c["htu"])
		}
		jtis[c["jti"]] = true
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("proofs at %v, want %v", got, want)
	}
}

// TestOIDCDPoPSecretsFile is issue 31's DPoP end to end: a secrets file
// with dpop: true signs in against a provider that requires DPoP with
// nonces; the pushed request and the code exchange carry proofs of one
// key made for the sign-in, the first request learns the nonce (one
// retry) and the next ones carry it from the start; the tokens come back
// bound (token_type DPoP) with the key beside them. Months later, on
// another instance, the tokens are renewed, used at UserInfo through
// Auth.Client (whose nonce the provider has changed meanwhile) and
// revoked, each with a proof of the same key.
func TestOIDCDPoPSecretsFile(t *testing.T) {
	key := clientKeys()["RSA"][0]
	file := func(issuer string) *extauth.Config {
		src := fmt.Sprintf(`
oidc_client_id: %s
oidc_issuer: %s
oidc_additional_settings:
  client_auth_method: private_key_jwt
  private_key: |
%s  dpop: true
  scope: openid email profile offline_access
`, oidcClientID, issuer, indent(indent(key.pem)))
		cfg, err := extauth.ParseConfig([]byte(src))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	s := dpopSetup(nil)
	s.config = func(cfg *extauth.Config) { *cfg = *file(cfg.OIDC.Issuer) }
	a := newOIDCApp(t, s)
	if resp := a.signIn(t); resp.StatusCode != http.StatusOK {
		t.Fatalf("got %d %q\n%s", resp.StatusCode, resp.Body, a.Logs)
	}
	id := a.identities()[0]
	if id.Tokens.TokenType != "DPoP" || id.Tokens.RefreshToken == "" {
		t.Fatalf("tokens %+v", id.Tokens)
	}
	_, jkt := dpopJWK(t, id.Tokens)
	checkProofs(t, a.OP, jkt, oidcop.PAR, oidcop.Token)
	// The PAR endpoint answered use_dpop_nonce once; the token endpoint,
	// same origin, got the nonce from the start.
	if a.OP.Hits(oidcop.PAR) != 2 || a.OP.Hits(oidcop.Token) != 1 {
		t.Errorf("PAR asked %d times, token %d", a.OP.Hits(oidcop.PAR), a.OP.Hits(oidcop.Token))
	}
	// The code was bound to the key at PAR.
	if got := a.OP.LastRequestParams().Get("dpop_jkt"); got != jkt {
		t.Errorf("pushed request bound to %q, want %q", got, jkt)
	}
	// A second sign-in has a key of its own.
	if resp := a.signIn(t); resp.StatusCode != http.StatusOK {
		t.Fatalf("second sign-in: %d %q\n%s", resp.StatusCode, resp.Body, a.Logs)
	}
	if _, jkt2 := dpopJWK(t, a.identities()[1].Tokens); jkt2 == jkt {
		t.Error("two sign-ins share a DPoP key")
	}
	if a.OP.Hits(oidcop.PAR) != 3 {
		t.Errorf("the cached nonce was not used: PAR asked %d times", a.OP.Hits(oidcop.PAR))
	}

	// Another instance, months later: the identity as a host keeps it.
	// The tokens survive a round trip through the host's storage (their
	// fields, as after-sign-in.md says).
	other, err := extauth.New(file(a.OP.Issuer()), extauth.Options{BaseURL: a.URL, CookieKey: testKey,
		Logger:    slog.New(slog.NewTextHandler(a.Logs, nil)),
		OnSuccess: func(http.ResponseWriter, *http.Request, *extauth.Identity) {}})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	kept := extauth.Identity{Provider: id.Provider, UID: id.UID, Tokens: extauth.Tokens{
		AccessToken: id.Tokens.AccessToken, RefreshToken: id.Tokens.RefreshToken, TokenType: id.Tokens.TokenType,
		Expiry: time.Now().Add(-time.Minute), IDToken: id.Tokens.IDToken, Issuer: id.Tokens.Issuer, DPoPKey: id.Tokens.DPoPKey,
	}}
	ctx := context.Background()
	ts, err := other.TokenSource(ctx, &kept)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := ts.Token()
	if err != nil || tok.AccessToken == id.Tokens.AccessToken || tok.TokenType != "DPoP" {
		t.Fatalf("renewed token %v %v\n%s", tok, err, a.Logs)
	}
	// The resource server moves to a new nonce: the client's first call
	// is answered with a use_dpop_nonce challenge, and it tries again.
	a.OP.RotateDPoPNonce()
	hc, err := other.Client(ctx, &kept, ts)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(a.OP.Issuer() + "/userinfo")
	if err != nil {
		t.Fatalf("UserInfo through the client: %v\n%s", err, a.Logs)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var info map[string]any
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &info) != nil || info["sub"] != id.UID {
		t.Fatalf("UserInfo: %d %s", resp.StatusCode, body)
	}
	renewed := kept
	renewed.Tokens.AccessToken, renewed.Tokens.RefreshToken = tok.AccessToken, tok.RefreshToken
	if err := other.RevokeTokens(ctx, &renewed); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	var firstJKT []oidcop.Proof
	for _, p := range a.OP.DPoPProofs() {
		if p.JKT == jkt {
			firstJKT = append(firstJKT, p)
		}
	}
	var at []oidcop.Endpoint
	for _, p := range firstJKT {
		at = append(at, p.Endpoint)
	}
	want := []oidcop.Endpoint{oidcop.PAR, oidcop.Token, oidcop.Token, oidcop.UserInfo, oidcop.Revocation, oidcop.Revocation}
	if fmt.Sprint(at) != fmt.Sprint(want) {
		t.Errorf("proofs of the sign-in's key at %v, want %v", at, want)
	}
	for _, p := range firstJKT {
		if p.Endpoint == oidcop.UserInfo && p.Claims["htm"] != "GET" {
			t.Errorf("UserInfo proof %v", p.Claims)
		}
	}
	if a.OP.Hits(oidcop.UserInfo) != 2 {
		t.Errorf("UserInfo asked %d times, want 2: a use_dpop_nonce challenge and one retry", a.OP.Hits(oidcop.UserInfo))
	}
	for _, secret := range []string{id.Tokens.DPoPKey, id.Tokens.AccessToken, tok.AccessToken} {
		if strings.Contains(a.Logs.String(), secret) {
			t.Error("a token or the DPoP key reached the log")
		}
	}
}

// TestOIDCDPoPVariants signs in with each proof algorithm, and with a
// request that is not pushed, whose code is bound by dpop_jkt instead.
func TestOIDCDPoPVariants(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*oidcop.Config, *extauth.OIDCAdditionalSettings)
		alg  string
		par  bool
	}{
		{"ES256, pushed", nil, "ES256", true},
		{"PS256, pushed", func(_ *oidcop.Config, s *extauth.OIDCAdditionalSettings) { s.DPoPSigningAlg = "PS256" }, "PS256", true},
		{"EdDSA, not pushed", func(c *oidcop.Config, s *extauth.OIDCAdditionalSettings) {
			c.RequirePAR = false
			s.DPoPSigningAlg = "EdDSA"
		}, "EdDSA", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newOIDCApp(t, dpopSetup(tc.edit))
			if resp := a.signIn(t); resp.StatusCode != http.StatusOK {
				t.Fatalf("got %d %q\n%s", resp.StatusCode, resp.Body, a.Logs)
			}
			id := a.identities()[0]
			k, jkt := dpopJWK(t, id.Tokens)
			if k.Algorithm != tc.alg {
				t.Errorf("key for %s, want %s", k.Algorithm, tc.alg)
			}
			for _, p := range a.OP.DPoPProofs() {
				if p.Header["alg"] != tc.alg || p.JKT != jkt {
					t.Errorf("%s proof %v", p.Endpoint, p.Header)
				}
			}
			front := a.OP.LastAuthorizeQuery()
			if tc.par == front.Has("dpop_jkt") || !tc.par && front.Get("dpop_jkt") != jkt {
				t.Errorf("authorization URL %v (jkt %s)", front, jkt)
			}
			if a.OP.LastRequestParams().Get("dpop_jkt") != jkt {
				t.Errorf("the code is not bound to the key: %v", a.OP.LastRequestParams())
			}
		})
	}
}

// TestOIDCDPoPRefusals plays each way a DPoP sign-in must fail: a
// provider that issues Bearer tokens after a proof, one that never
// honours its own nonce (the client tries again once, not forever), and
// proofs the provider refuses (none sent, an iat outside its window). The
// hook never runs.
func TestOIDCDPoPRefusals(t *testing.T) {
	basic := func(c *oidcop.Config, s *extauth.OIDCAdditionalSettings) {
		c.AuthMethod, c.ClientSecret = "client_secret_basic", oidcSecret
		s.ClientAuthMethod = "client_secret_basic"
	}
	for _, tc := range []struct {
		name  string
		edit  func(*oidcop.Config, *extauth.OIDCAdditionalSettings)
		fault oidcop.Fault
		why   string // in the log
		// par is how often the PAR endpoint is asked.
		par int64
	}{
		{"token_type Bearer after a DPoP proof", nil, oidcop.DPoPBearer, "after a DPoP proof, want DPoP", 2},
		{"a nonce the provider never honours", nil, oidcop.DPoPNonceLoop, "use_dpop_nonce", 2},
		{"no proof where the provider requires DPoP", func(c *oidcop.Config, s *extauth.OIDCAdditionalSettings) {
			s.DPoP = false
		}, "", "invalid_dpop_proof", 1},
		{"a stale proof (iat five minutes behind the provider's clock)", func(c *oidcop.Config, s *extauth.OIDCAdditionalSettings) {
			basic(c, s)
			c.DPoPNonce = false
			c.Now = func() time.Time { return time.Now().Add(5 * time.Minute) }
		}, "", "invalid_dpop_proof", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newOIDCApp(t, dpopSetup(tc.edit))
			a.OP.SetFaults(tc.fault)
			resp := a.signIn(t)
			wantCode(t, resp, http.StatusBadRequest, "invalid_response")
			if n := len(a.identities()); n != 0 {
				t.Fatalf("hook called %d times", n)
			}
			if !strings.Contains(a.Logs.String(), tc.why) {
				t.Errorf("the log does not say why (%q):\n%s", tc.why, a.Logs)
			}
			if n := a.OP.Hits(oidcop.PAR); n != tc.par {
				t.Errorf("PAR asked %d times, want %d", n, tc.par)
			}
		})
	}
}

// forgeProof signs a DPoP proof with key k, for the tests that play a
// client that gets DPoP wrong; claims and header entries override the
// valid ones (a nil value removes one).
func forgeProof(t *testing.T, k *jose.JSONWebKey, header, claims map[string]any) string {
	t.Helper()
	c := map[string]any{"jti": fmt.Sprint(time.Now().UnixNano()), "iat": time.Now().Unix()}
	for n, v := range claims {
		if v == nil {
			delete(c, n)
		} else {
			c[n] = v
		}
	}
	opts := &jose.SignerOptions{EmbedJWK: true}
	opts.WithType("dpop+jwt")
	for n, v := range header {
		opts.WithHeader(jose.HeaderKey(n), v)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(k.Algorithm), Key: k.Key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(c)
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOIDCOPRefusesBadDPoPProofs holds the development provider's
// UserInfo endpoint, a DPoP resource server, to RFC 9449 7 and 9 as the
// security tests need it: a bound token is taken with the DPoP scheme
// and a fresh proof of its key, for this request, with the nonce and the
// token's hash, and with nothing less.
func TestOIDCOPRefusesBadDPoPProofs(t *testing.T) {
	a := newOIDCApp(t, dpopSetup(nil))
	if resp := a.signIn(t); resp.StatusCode != http.StatusOK {
		t.Fatalf("got %d %q\n%s", resp.StatusCode, resp.Body, a.Logs)
	}
	id := a.identities()[0]
	k, _ := dpopJWK(t, id.Tokens)
	other, _ := dpopJWK(t, extauth.Tokens{DPoPKey: func() string {
		a.signIn(t)
		return a.identities()[1].Tokens.DPoPKey
	}()})
	userinfo := a.OP.Issuer() + "/userinfo"
	sum := sha256.Sum256([]byte(id.Tokens.AccessToken))
	ath := base64.RawURLEncoding.EncodeToString(sum[:])
	valid := func() map[string]any {
		return map[string]any{"htm": "GET", "htu": userinfo, "nonce": a.OP.DPoPNonce(), "ath": ath}
	}
	with := func(n string, v any) map[string]any {
		c := valid()
		if v == nil {
			delete(c, n)
		} else {
			c[n] = v
		}
		return c
	}
	replayed := forgeProof(t, k, nil, valid())
	call := func(scheme, proof string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodGet, userinfo, nil)
		req.Header.Set("Authorization", scheme+" "+id.Tokens.AccessToken)
		if proof != "" {
			req.Header.Set("DPoP", proof)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(body)
	}
	if resp, body := call("DPoP", replayed); resp.StatusCode != http.StatusOK {
		t.Fatalf("a valid proof: %d %s", resp.StatusCode, body)
	}
	for _, tc := range []struct {
		name, scheme, proof, want string
	}{
		{"no proof", "DPoP", "", "invalid_token"},
		{"a bound token as Bearer", "Bearer", forgeProof(t, k, nil, valid()), "invalid_token"},
		{"a replayed proof", "DPoP", replayed, "invalid_dpop_proof"},
		{"htu of another endpoint", "DPoP", forgeProof(t, k, nil, with("htu", a.OP.Issuer()+"/token")), "invalid_dpop_proof"},
		{"htu with the query", "DPoP", forgeProof(t, k, nil, with("htu", userinfo+"?a=b")), "invalid_dpop_proof"},
		{"htm POST for a GET", "DPoP", forgeProof(t, k, nil, with("htm", "POST")), "invalid_dpop_proof"},
		{"an iat five minutes old", "DPoP", forgeProof(t, k, nil, with("iat", time.Now().Add(-5*time.Minute).Unix())), "invalid_dpop_proof"},
		{"no jti", "DPoP", forgeProof(t, k, nil, with("jti", "")), "invalid_dpop_proof"},
		{"no nonce", "DPoP", forgeProof(t, k, nil, with("nonce", nil)), "use_dpop_nonce"},
		{"an old nonce", "DPoP", forgeProof(t, k, nil, with("nonce", "stale")), "use_dpop_nonce"},
		{"no ath", "DPoP", forgeProof(t, k, nil, with("ath", nil)), "invalid_dpop_proof"},
		{"the hash of another token", "DPoP", forgeProof(t, k, nil, with("ath", base64.RawURLEncoding.EncodeToString(make([]byte, 32)))), "invalid_dpop_proof"},
		{"a proof of another key", "DPoP", forgeProof(t, other, nil, valid()), "invalid_token"},
		{"typ JWT", "DPoP", forgeProof(t, k, map[string]any{"typ": "JWT"}, valid()), "invalid_dpop_proof"},
		{"alg none", "DPoP", func() string {
			p := strings.Split(forgeProof(t, k, nil, valid()), ".")
			h, _ := json.Marshal(map[string]any{"typ": "dpop+jwt", "alg": "none", "jwk": k.Public()})
			return base64.RawURLEncoding.EncodeToString(h) + "." + p[1] + "."
		}(), "invalid_dpop_proof"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := call(tc.scheme, tc.proof)
			if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="`+tc.want+`"`) {
				t.Errorf("got %d %q %s, want 401 %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body, tc.want)
			}
			if tc.want == "use_dpop_nonce" && resp.Header.Get("DPoP-Nonce") != a.OP.DPoPNonce() {
				t.Errorf("no nonce to use: %v", resp.Header)
			}
		})
	}
}

// TestOIDCClientSendsTokensSafely: Auth.Client sends a sign-in's bearer
// tokens as Bearer (no proof), follows no redirect (the token would go
// where it points), sends nothing over plain http but to a loopback host,
// and refuses tokens of another provider.
func TestOIDCClientSendsTokensSafely(t *testing.T) {
	a := newOIDCApp(t, oidcSetup{})
	if resp := a.signIn(t); resp.StatusCode != http.StatusOK {
		t.Fatalf("got %d %q\n%s", resp.StatusCode, resp.Body, a.Logs)
	}
	id := a.identities()[0]
	var elsewhere int
	away := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere++ }))
	defer away.Close()
	var seen http.Header
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Clone()
		http.Redirect(w, r, away.URL+"/steal", http.StatusFound)
	}))
	defer api.Close()
	ctx := context.Background()
	hc, err := a.Auth.Client(ctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(api.URL + "/v1/me")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || elsewhere != 0 {
		t.Errorf("the redirect was followed: %d, %d requests elsewhere", resp.StatusCode, elsewhere)
	}
	if seen.Get("Authorization") != "Bearer "+id.Tokens.AccessToken || seen.Get("DPoP") != "" {
		t.Errorf("headers sent %v", seen)
	}
	if _, err := hc.Get("http://api.example.invalid/v1/me"); !errors.Is(err, providers.ErrInsecureAPIURL) {
		t.Errorf("plain http: %v", err)
	}
	foreign := *id
	foreign.Tokens.Issuer = "https://evil.example"
	var e *extauth.Error
	if _, err := a.Auth.Client(ctx, &foreign, nil); !errors.As(err, &e) || e.Code != extauth.CodeInvalidState {
		t.Errorf("tokens of another issuer: %v", err)
	}
	if _, err := a.Auth.Client(ctx, &extauth.Identity{Provider: "saml"}, nil); !errors.Is(err, extauth.ErrNotConfigured) {
		t.Errorf("saml: %v", err)
	}
}

// TestOIDCClientConcurrentDPoP: one Auth.Client used by several
// goroutines at once signs a proof per request, never the same twice (the
// provider refuses a replayed jti), through one nonce cache, while the
// provider moves to a new nonce.
func TestOIDCClientConcurrentDPoP(t *testing.T) {
	a := newOIDCApp(t, dpopSetup(nil))
	if resp := a.signIn(t); resp.StatusCode != http.StatusOK {
		t.Fatalf("got %d %q\n%s", resp.StatusCode, resp.Body, a.Logs)
	}
	id := a.identities()[0]
	hc, err := a.Auth.Client(context.Background(), id, nil)
	if err != nil {
		t.Fatal(err)
	}
	a.OP.RotateDPoPNonce()
	errs := make(chan error, 16)
	for range 16 {
		go func() {
			resp, err := hc.Get(a.OP.Issuer() + "/userinfo")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("UserInfo: %d %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
				}
			}
			errs <- err
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
