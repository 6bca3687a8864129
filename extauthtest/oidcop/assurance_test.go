package oidcop_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/extauth/extauth/extauthtest/oidcop"
)

func ecKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// signed signs claims with key under kid, as a client does.
func signed(t *testing.T, key *ecdsa.PrivateKey, kid string, claims map[string]any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: kid}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(claims)
	jws, err := s.Sign(b)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// post posts form to the OP's endpoint path and returns the status and
// error field.
func post(t *testing.T, op *oidcop.OP, path string, form url.Values) (int, map[string]any) {
	t.Helper()
	resp, err := http.PostForm(op.Issuer()+path, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// TestClientAssertionChecks: the fake checks a private_key_jwt assertion
// as RFC 7523 3 says, so that extauth's tests against it mean something.
// An accepted assertion gets as far as the grant (invalid_grant for a
// made-up code); each broken one is refused as invalid_client.
func TestClientAssertionChecks(t *testing.T) {
	key, other := ecKey(t), ecKey(t)
	op, _ := start(t, func(c *oidcop.Config) {
		c.AuthMethod, c.ClientSecret = "private_key_jwt", ""
		c.ClientJWKS = &jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "k1", Use: "sig"}}}
	})
	tokenURL := op.Issuer() + "/token"
	now := time.Now()
	claims := func(edit func(map[string]any)) map[string]any {
		c := map[string]any{"iss": clientID, "sub": clientID, "aud": tokenURL, "iat": now.Unix(),
			"exp": now.Add(time.Minute).Unix(), "jti": strings.Repeat("j", 8) + now.Format("150405.000000000")}
		if edit != nil {
			edit(c)
		}
		return c
	}
	form := func(assertion string) url.Values {
		return url.Values{"grant_type": {"authorization_code"}, "code": {"made-up"}, "redirect_uri": {redirect},
			"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"}, "client_assertion": {assertion}}
	}
	good := signed(t, key, "k1", claims(nil))
	if status, out := post(t, op, "/token", form(good)); status != http.StatusBadRequest || out["error"] != "invalid_grant" {
		t.Fatalf("good assertion: %d %v", status, out)
	}
	for _, tc := range []struct {
		name      string
		assertion string
		extra     url.Values
	}{
		{"replayed", good, nil},
		{"another key", signed(t, other, "k1", claims(func(c map[string]any) { c["jti"] = "a" })), nil},
		{"unknown kid", signed(t, key, "k2", claims(func(c map[string]any) { c["jti"] = "b" })), nil},
		{"iss another client", signed(t, key, "k1", claims(func(c map[string]any) { c["iss"], c["jti"] = "other", "c" })), nil},
		{"sub another client", signed(t, key, "k1", claims(func(c map[string]any) { c["sub"], c["jti"] = "other", "d" })), nil},
		{"aud another server", signed(t, key, "k1", claims(func(c map[string]any) { c["aud"], c["jti"] = "https://evil.example/token", "e" })), nil},
		{"expired", signed(t, key, "k1", claims(func(c map[string]any) {
			c["iat"], c["exp"], c["jti"] = now.Add(-2*time.Minute).Unix(), now.Add(-time.Minute).Unix(), "f"
		})), nil},
		{"valid for an hour", signed(t, key, "k1", claims(func(c map[string]any) { c["exp"], c["jti"] = now.Add(time.Hour).Unix(), "g" })), nil},
		{"no jti", signed(t, key, "k1", claims(func(c map[string]any) { delete(c, "jti") })), nil},
		{"and a secret", signed(t, key, "k1", claims(func(c map[string]any) { c["jti"] = "h" })), url.Values{"client_secret": {"x"}}},
		{"unsigned", strings.SplitAfter(good, ".")[0] + strings.SplitAfter(good, ".")[1], nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := form(tc.assertion)
			for k, v := range tc.extra {
				f[k] = v
			}
			if status, out := post(t, op, "/token", f); status != http.StatusUnauthorized || out["error"] != "invalid_client" {
				t.Errorf("%d %v", status, out)
			}
		})
	}
}

// TestPushedRequestsAndRequestObjects: with PAR and request objects
// required, the authorization endpoint takes only a request_uri, once,
// for a pushed request whose request object the client signed.
func TestPushedRequestsAndRequestObjects(t *testing.T) {
	key := ecKey(t)
	op, _ := start(t, func(c *oidcop.Config) {
		c.AuthMethod, c.ClientSecret = "private_key_jwt", ""
		c.ClientJWKS = &jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "k1", Use: "sig"}}}
		c.RequirePAR, c.RequireRequestObject = true, true
	})
	now := time.Now()
	n := 0
	auth := func() url.Values {
		n++
		a := signed(t, key, "k1", map[string]any{"iss": clientID, "sub": clientID, "aud": op.Issuer(),
			"iat": now.Unix(), "exp": now.Add(time.Minute).Unix(), "jti": "par-" + string(rune('a'+n))})
		return url.Values{"client_id": {clientID}, "client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:jwt-bearer"}, "client_assertion": {a}}
	}
	object := func(aud string) string {
		c := map[string]any{"iss": clientID, "aud": aud, "exp": now.Add(time.Minute).Unix()}
		for k, v := range authorizeQuery() {
			c[k] = v[0]
		}
		return signed(t, key, "k1", c)
	}
	push := func(form url.Values) (int, map[string]any) {
		for k, v := range auth() {
			form[k] = v
		}
		return post(t, op, "/par", form)
	}
	if status, _ := push(authorizeQuery()); status != http.StatusBadRequest {
		t.Errorf("pushed without a request object: %d", status)
	}
	if status, _ := push(url.Values{"request": {object("https://evil.example")}}); status != http.StatusBadRequest {
		t.Errorf("request object for another server: %d", status)
	}
	if status, _ := post(t, op, "/par", url.Values{"client_id": {clientID}, "request": {object(op.Issuer())}}); status != http.StatusUnauthorized {
		t.Errorf("pushed without client authentication: %d", status)
	}
	status, out := push(url.Values{"request": {object(op.Issuer())}})
	uri, _ := out["request_uri"].(string)
	if status != http.StatusCreated || !strings.HasPrefix(uri, "urn:ietf:params:oauth:request_uri:") {
		t.Fatalf("push: %d %v", status, out)
	}
	// Not pushed: refused, though signed.
	resp, err := noFollow.Get(op.Issuer() + "/authorize?" + url.Values{"client_id": {clientID}, "request": {object(op.Issuer())}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a request by value where PAR is required: %d", resp.StatusCode)
	}
	q := url.Values{"client_id": {clientID}, "request_uri": {uri}}
	if got := code(t, op, q); got.Get("code") == "" || got.Get("state") != "st" {
		t.Errorf("callback %v", got)
	}
	resp, err = noFollow.Get(op.Issuer() + "/authorize?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("request_uri used twice: %d", resp.StatusCode)
	}
}

// TestEncryptionKeyByAlg: with EncryptionKeyByAlg the provider picks the
// client's encryption key as Keycloak does, by its alg: a key published
// without alg counts as a signing key of its type and is never picked
// (the token endpoint says why, with Keycloak's words), one with the
// registered algorithm is, and its kid names it in the JWE.
func TestEncryptionKeyByAlg(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		keys    []jose.JSONWebKey
		wantKid string // "" when no key may be picked
	}{
		{"an encryption key without alg", []jose.JSONWebKey{
			{Key: key.Public(), KeyID: "sig", Use: "sig"}, {Key: key.Public(), KeyID: "enc", Use: "enc"}}, ""},
		{"an encryption key for another algorithm", []jose.JSONWebKey{
			{Key: key.Public(), KeyID: "enc", Use: "enc", Algorithm: "RSA-OAEP"}}, ""},
		{"a key without use, as Keycloak ignores", []jose.JSONWebKey{
			{Key: key.Public(), KeyID: "any", Algorithm: "RSA-OAEP-256"}}, ""},
		{"one entry per algorithm", []jose.JSONWebKey{
			{Key: key.Public(), KeyID: "sig", Use: "sig"},
			{Key: key.Public(), KeyID: "enc", Use: "enc", Algorithm: "RSA-OAEP"},
			{Key: key.Public(), KeyID: "enc-RSA-OAEP-256", Use: "enc", Algorithm: "RSA-OAEP-256"}}, "enc-RSA-OAEP-256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op, _ := start(t, func(c *oidcop.Config) {
				c.ClientJWKS = &jose.JSONWebKeySet{Keys: tc.keys}
				c.EncryptionKeyByAlg = true
				c.IDTokenEncryption = oidcop.Encryption{Alg: "RSA-OAEP-256", Enc: "A256GCM"}
			})
			status, out := tokenRequest(t, op, grantForm(code(t, op, authorizeQuery()).Get("code")), true)
			if tc.wantKid == "" {
				desc, _ := out["error_description"].(string)
				if status != http.StatusInternalServerError || out["error"] != "server_error" ||
					!strings.Contains(desc, "PublicKey wasn't found in the storage. Requested kid: 'null'") {
					t.Errorf("token endpoint: %d %v", status, out)
				}
				return
			}
			raw, _ := out["id_token"].(string)
			if status != http.StatusOK || strings.Count(raw, ".") != 4 {
				t.Fatalf("token endpoint: %d %v", status, out)
			}
			jwe, err := jose.ParseEncryptedCompact(raw, []jose.KeyAlgorithm{jose.RSA_OAEP_256}, []jose.ContentEncryption{jose.A256GCM})
			if err != nil {
				t.Fatal(err)
			}
			if jwe.Header.KeyID != tc.wantKid {
				t.Errorf("encrypted to kid %q, want %q", jwe.Header.KeyID, tc.wantKid)
			}
			if _, err := jwe.Decrypt(key); err != nil {
				t.Error(err)
			}
		})
	}
}
