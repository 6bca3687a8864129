//go:build interop && linux

package interop

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/internal/harness"
)

// The realm's OpenID Connect clients, one per case.
const (
	kcBasicClientID = "extauth-basic"
	// kcBasicSecret holds characters that client_secret_basic must
	// form-urlencode first (RFC 6749 2.3.1).
	kcBasicSecret   = "s3c:r+et %x/~"
	kcFAPIClient    = "extauth-fapi2"
	kcEncryptedID   = "extauth-encrypted"
	kcFAPIRole      = "fapi2"
	kcFAPI2Profile  = "fapi-2-dpop-security-profile"
	kcUserInfoPath  = "/protocol/openid-connect/userinfo"
	kcEndSessionSub = "/protocol/openid-connect/logout"
)

// kcFAPIPolicy applies Keycloak's FAPI 2.0 Security Profile with DPoP to
// every client that has the client role kcFAPIRole: Keycloak's own
// executors then enforce, at each request, confidential clients with
// private_key_jwt (or mTLS), https URIs, PS256 or ES256, consent, PKCE,
// pushed requests carrying every parameter, client assertions for the
// issuer, and DPoP-bound tokens.
func kcFAPIPolicy() map[string]any {
	return map[string]any{
		"name": "extauth FAPI 2.0", "enabled": true,
		"conditions": []map[string]any{{"condition": "client-roles", "configuration": map[string]any{"roles": []string{kcFAPIRole}}}},
		"profiles":   []string{kcFAPI2Profile},
	}
}

// kcBasicClient is a confidential client with a secret, as most
// applications start: PKCE, RP-initiated logout back to our route, and
// back-channel logout to our route.
func kcBasicClient(base string) map[string]any {
	return map[string]any{
		"clientId": kcBasicClientID, "enabled": true, "protocol": "openid-connect",
		"publicClient": false, "clientAuthenticatorType": "client-secret", "secret": kcBasicSecret,
		"standardFlowEnabled": true, "directAccessGrantsEnabled": false,
		"redirectUris": []string{base + "/users/auth/oidc/callback"},
		"attributes": map[string]string{
			"pkce.code.challenge.method":          "S256",
			"post.logout.redirect.uris":           base + "/users/auth/oidc/post_logout",
			"backchannel.logout.url":              base + "/users/auth/oidc/backchannel_logout",
			"backchannel.logout.session.required": "true",
		},
	}
}

// kcFAPI2Client is a client under the FAPI 2.0 policy (its client role):
// private_key_jwt with the keys of our JWKS route (https), consent, and
// DPoP-bound tokens, as the policy's executors require.
func kcFAPI2Client(base string) map[string]any {
	return map[string]any{
		"clientId": kcFAPIClient, "enabled": true, "protocol": "openid-connect",
		"publicClient": false, "clientAuthenticatorType": "client-jwt",
		"standardFlowEnabled": true, "implicitFlowEnabled": false, "directAccessGrantsEnabled": false,
		"consentRequired": true, "fullScopeAllowed": false,
		"redirectUris": []string{base + "/users/auth/oidc/callback"},
		"attributes": map[string]string{
			"use.jwks.url":                          "true",
			"jwks.url":                              base + "/users/auth/oidc/jwks",
			"token.endpoint.auth.signing.alg":       "PS256",
			"id.token.signed.response.alg":          "PS256",
			"pkce.code.challenge.method":            "S256",
			"require.pushed.authorization.requests": "true",
			"dpop.bound.access.tokens":              "true",
		},
	}
}

// kcEncryptedClient authenticates with private_key_jwt and has its ID
// tokens encrypted (RSA-OAEP-256, A256GCM) and UserInfo (RSA-OAEP,
// A128GCM), to the keys Keycloak reads from our JWKS route: it picks
// each by its alg. Requests are pushed and signed.
func kcEncryptedClient(base string) map[string]any {
	return map[string]any{
		"clientId": kcEncryptedID, "enabled": true, "protocol": "openid-connect",
		"publicClient": false, "clientAuthenticatorType": "client-jwt",
		"standardFlowEnabled": true, "directAccessGrantsEnabled": false,
		"redirectUris": []string{base + "/users/auth/oidc/callback"},
		"attributes": map[string]string{
			"use.jwks.url":                          "true",
			"jwks.url":                              base + "/users/auth/oidc/jwks",
			"pkce.code.challenge.method":            "S256",
			"require.pushed.authorization.requests": "true",
			"request.object.required":               "request or request_uri",
			"id.token.encrypted.response.alg":       "RSA-OAEP-256",
			"id.token.encrypted.response.enc":       "A256GCM",
			"user.info.response.signature.alg":      "RS256",
			"user.info.encrypted.response.alg":      "RSA-OAEP",
			"user.info.encrypted.response.enc":      "A128GCM",
		},
	}
}

func rsaKeyPEM(t *testing.T) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// kcApp is an application signed in at Keycloak from a secrets file,
// recording what its hooks see.
type kcApp struct {
	URL  string
	Auth *extauth.Auth
	Logs *lockedBuffer
	// browser, when set, is the transport of the test's browser (one
	// that trusts the application's certificate).
	browser http.RoundTripper

	mu      sync.Mutex
	got     []*extauth.Identity
	events  []extauth.LogoutEvent
	session extauth.LogoutSession
}

func (a *kcApp) identities() []*extauth.Identity {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*extauth.Identity(nil), a.got...)
}

func (a *kcApp) logouts() []extauth.LogoutEvent {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]extauth.LogoutEvent(nil), a.events...)
}

// deployKCApp serves our routes on rp from the secrets file src, with
// httpClient as extauth's outbound client (nil: the default).
func deployKCApp(t *testing.T, rp *rpServer, src string, httpClient *http.Client) *kcApp {
	t.Helper()
	a := &kcApp{URL: rp.URL, Logs: &lockedBuffer{}}
	cfg, err := extauth.ParseConfig([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	a.Auth, err = extauth.New(cfg, extauth.Options{
		BaseURL:    rp.URL,
		CookieKey:  bytes.Repeat([]byte{4}, 32),
		Logger:     slog.New(slog.NewTextHandler(a.Logs, nil)),
		HTTPClient: httpClient,
		// Keycloak's first answers, its JIT cold, can take longer than
		// the default 10 s on CI's loaded cores.
		Timeout: time.Minute,
		OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
			a.mu.Lock()
			a.got = append(a.got, id)
			a.session = id.LogoutSession()
			a.mu.Unlock()
			fmt.Fprintf(w, "signed in as %s", id.Email)
		},
		Logout: extauth.LogoutOptions{
			ReturnTo: "/signed-out",
			Session: func(*http.Request, extauth.Provider) (extauth.LogoutSession, bool) {
				a.mu.Lock()
				defer a.mu.Unlock()
				return a.session, a.session.IDToken != ""
			},
			OnProviderLogout: func(_ context.Context, e extauth.LogoutEvent) error {
				a.mu.Lock()
				a.events = append(a.events, e)
				a.mu.Unlock()
				return nil
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Auth.Close() })
	mux := http.NewServeMux()
	a.Auth.Mount(mux)
	mux.HandleFunc("/signed-out", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "signed out") })
	rp.serve(mux)
	return a
}

// browser is a new browser for the application.
func (a *kcApp) newBrowser(t *testing.T) *harness.Browser {
	b := harness.NewBrowser(t)
	if a.browser != nil {
		b.Client.Transport = a.browser
	}
	return b
}

// signIn signs alice in through Keycloak's login page (and its consent
// page, where the client needs consent) and returns her identity.
func (a *kcApp) signIn(t *testing.T, k *keycloak, b *harness.Browser) *extauth.Identity {
	t.Helper()
	page := b.PostForm(a.URL+"/users/auth/oidc", nil)
	page = kcConsent(t, b, kcLogin(t, b, page, k))
	if page.Body != "signed in as "+kcEmail {
		t.Fatalf("sign-in ended at %s (%d): %s\nour log:\n%s", page.URL, page.StatusCode, tail(page.Body, 30), a.Logs)
	}
	ids := a.identities()
	id := ids[len(ids)-1]
	if id.Provider != "oidc" || id.Email != kcEmail || !id.EmailVerified || id.FirstName != "Alice" || id.LastName != "Liddell" ||
		id.Raw["preferred_username"] != kcUser || id.Tokens.Issuer != k.Issuer() {
		t.Errorf("identity %+v", id)
	}
	return id
}

// userInfo calls Keycloak's UserInfo through Auth.Client with id's tokens
// and returns the status and body.
func (a *kcApp) userInfo(t *testing.T, k *keycloak, id *extauth.Identity) (int, []byte) {
	t.Helper()
	ctx := context.Background()
	ts, err := a.Auth.TokenSource(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	hc, err := a.Auth.Client(ctx, id, ts)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(k.Issuer() + kcUserInfoPath)
	if err != nil {
		t.Fatalf("UserInfo: %v\nour log:\n%s", err, a.Logs)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// renew renews id's tokens and returns id with the new ones.
func (a *kcApp) renew(t *testing.T, id *extauth.Identity) *extauth.Identity {
	t.Helper()
	stale := *id
	stale.Tokens.Expiry = time.Now().Add(-time.Minute)
	ts, err := a.Auth.TokenSource(context.Background(), &stale)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := ts.Token()
	if err != nil {
		t.Fatalf("refresh: %v\nour log:\n%s", err, a.Logs)
	}
	if tok.AccessToken == id.Tokens.AccessToken || tok.RefreshToken == "" {
		t.Fatalf("the tokens were not renewed")
	}
	renewed := stale
	renewed.Tokens.AccessToken, renewed.Tokens.RefreshToken, renewed.Tokens.Expiry = tok.AccessToken, tok.RefreshToken, tok.Expiry
	return &renewed
}

// checkRevoked revokes id's tokens and checks that Keycloak takes neither
// any more: the refresh token renews nothing, the access token reads no
// UserInfo.
func (a *kcApp) checkRevoked(t *testing.T, k *keycloak, id *extauth.Identity) {
	t.Helper()
	if err := a.Auth.RevokeTokens(context.Background(), id); err != nil {
		t.Fatalf("revoke: %v\nour log:\n%s", err, a.Logs)
	}
	stale := *id
	stale.Tokens.Expiry = time.Now().Add(-time.Minute)
	ts, err := a.Auth.TokenSource(context.Background(), &stale)
	if err != nil {
		t.Fatal(err)
	}
	var e *extauth.Error
	if _, err := ts.Token(); !errors.As(err, &e) {
		t.Errorf("a revoked refresh token renewed: %v", err)
	}
	if status, body := a.userInfo(t, k, id); status != http.StatusUnauthorized {
		t.Errorf("a revoked access token read UserInfo: %d %s", status, body)
	}
}

// testKeycloakCodeFlow: a confidential client with a secret sent
// form-urlencoded in HTTP Basic, PKCE; the tokens are renewed, used at
// UserInfo and revoked; RP-initiated logout ends Keycloak's session, whose
// back-channel logout token reaches our route.
func testKeycloakCodeFlow(t *testing.T, k *keycloak, rp *rpServer) {
	a := deployKCApp(t, rp, fmt.Sprintf(`
oidc_client_id: %s
oidc_client_secret: %q
oidc_issuer: %s
oidc_additional_settings:
  scope: openid email profile
`, kcBasicClientID, kcBasicSecret, k.Issuer()), nil)
	b := a.newBrowser(t)
	id := a.signIn(t, k, b)
	if id.Tokens.RefreshToken == "" || id.SessionID == "" || id.Tokens.TokenType != "Bearer" {
		t.Fatalf("identity %+v", id)
	}
	// PKCE S256 was sent (the client requires it).
	for _, h := range b.Hops {
		if u, err := url.Parse(h); err == nil && strings.HasPrefix(h, k.Issuer()+"/protocol/openid-connect/auth?") {
			if q := u.Query(); q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
				t.Errorf("authorization request without PKCE: %v", q)
			}
		}
	}
	renewed := a.renew(t, id)
	status, body := a.userInfo(t, k, renewed)
	var info map[string]any
	if status != http.StatusOK || json.Unmarshal(body, &info) != nil || info["sub"] != id.UID || info["email"] != kcEmail {
		t.Fatalf("UserInfo: %d %s", status, body)
	}
	a.checkRevoked(t, k, renewed)

	// Revoking the refresh token ended Keycloak's session: a second
	// sign-in shows its login page. Then RP-initiated logout with the ID
	// token as hint.
	second := a.signIn(t, k, b)
	b.Hops = nil
	page := b.PostForm(a.URL+"/users/auth/oidc/logout", nil)
	if page.Body != "signed out" || !hopsTo(b, k.Issuer()+kcEndSessionSub) {
		t.Fatalf("logout ended at %s (%d): %s\nhops %v\nour log:\n%s", page.URL, page.StatusCode, tail(page.Body, 20), b.Hops, a.Logs)
	}
	want := extauth.LogoutEvent{Provider: extauth.OIDC, Subject: second.UID, Session: second.SessionID, Issuer: second.Tokens.Issuer, Channel: extauth.LogoutBackChannel}
	if ev := a.logouts(); len(ev) != 1 || ev[0] != want {
		t.Errorf("back-channel logouts %+v, want [%+v]\nour log:\n%s", ev, want, a.Logs)
	}
	// Keycloak's session is over: the next sign-in shows its login page.
	if page := b.PostForm(a.URL+"/users/auth/oidc", nil); !strings.Contains(page.Body, `id="kc-form-login"`) {
		t.Errorf("after logout, a sign-in ended at %s without Keycloak's login page", page.URL)
	}
	for _, secret := range []string{kcBasicSecret, id.Tokens.AccessToken, id.Tokens.RefreshToken} {
		if strings.Contains(a.Logs.String(), secret) {
			t.Errorf("a secret reached the log")
		}
	}
}

// hopsTo reports whether b requested a URL starting with prefix.
func hopsTo(b *harness.Browser, prefix string) bool { return hop(b, prefix) != nil }

// testKeycloakFAPI2: a client under Keycloak's FAPI 2.0 DPoP policy, at an
// application served over https: the secrets file names the key,
// profile: fapi2 and dpop: true. Keycloak reads our JWKS route over https
// (it trusts the test's CA) to verify the client assertions; the request
// is pushed; consent; the tokens come back DPoP-bound and are renewed,
// used at UserInfo through Auth.Client and revoked, each with a proof.
func testKeycloakFAPI2(t *testing.T, k *keycloak, rp *rpServer, keyPEM string, pki *testPKI) {
	recorder := &proofRecorder{next: http.DefaultTransport}
	a := deployKCApp(t, rp, fmt.Sprintf(`
oidc_client_id: %s
oidc_issuer: %s
oidc_additional_settings:
  private_key: |
%s  profile: fapi2
  dpop: true
`, kcFAPIClient, k.Issuer(), yamlBlock(keyPEM)), &http.Client{Transport: recorder})
	a.browser = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.pool}}
	b := a.newBrowser(t)
	id := a.signIn(t, k, b)
	if id.Tokens.TokenType != "DPoP" || id.Tokens.DPoPKey == "" || id.Tokens.RefreshToken == "" {
		t.Fatalf("identity %+v", id)
	}
	// The browser carried client_id and request_uri alone.
	for _, h := range b.Hops {
		if u, err := url.Parse(h); err == nil && strings.HasPrefix(h, k.Issuer()+"/protocol/openid-connect/auth?") {
			if q := u.Query(); len(q) != 2 || !strings.HasPrefix(q.Get("request_uri"), "urn:ietf:params:oauth:request_uri:") {
				t.Errorf("authorization request %v", q)
			}
		}
	}
	// The access token is bound: alone, as a bearer token, it reads
	// nothing.
	req, _ := http.NewRequest(http.MethodGet, k.Issuer()+kcUserInfoPath, nil)
	req.Header.Set("Authorization", "Bearer "+id.Tokens.AccessToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the DPoP-bound access token, as a bearer token, at UserInfo: %d", resp.StatusCode)
	}
	renewed := a.renew(t, id)
	status, body := a.userInfo(t, k, renewed)
	var info map[string]any
	if status != http.StatusOK || json.Unmarshal(body, &info) != nil || info["email"] != kcEmail {
		t.Fatalf("UserInfo with a proof: %d %s\nour log:\n%s", status, body, a.Logs)
	}
	// Keycloak 26.7's DPoP executor refuses to revoke the refresh token
	// of a confidential client: it checks a binding that Keycloak gives
	// only public clients' refresh tokens (docs/oidc.md#keycloak says so,
	// and to revoke the access token alone).
	err = a.Auth.RevokeTokens(context.Background(), renewed)
	if e := (*extauth.Error)(nil); !errors.As(err, &e) || e.Code != extauth.CodeInvalidResponse ||
		!strings.Contains(e.Error(), `revocation: HTTP 400 error="invalid_token"`) {
		t.Errorf("revoking the refresh token: %v (Keycloak refused it until 26.7; if it takes it now, docs/oidc.md#keycloak must say so)", err)
	}
	accessOnly := *renewed
	accessOnly.Tokens.RefreshToken = ""
	if err := a.Auth.RevokeTokens(context.Background(), &accessOnly); err != nil {
		t.Fatalf("revoking the access token: %v\nour log:\n%s", err, a.Logs)
	}
	if status, body := a.userInfo(t, k, &accessOnly); status != http.StatusUnauthorized {
		t.Errorf("a revoked access token read UserInfo: %d %s", status, body)
	}
	calls := recorder.calls()
	for _, c := range calls {
		// Every request but those for Keycloak's keys carries a proof.
		if !strings.Contains(c, " dpop ") && !strings.HasSuffix(strings.Fields(c)[1], "/certs") {
			t.Errorf("a request without a proof: %s", c)
		}
	}
	t.Logf("requests to Keycloak:\n%s", strings.Join(calls, "\n"))
}

// testKeycloakEncryptedIDToken: Keycloak encrypts ID tokens
// (RSA-OAEP-256) and UserInfo (RSA-OAEP) to the keys it reads from our
// JWKS route, which publishes one entry per algorithm: it picks each by
// its alg. Requests are pushed and signed; the client authenticates with
// private_key_jwt.
func testKeycloakEncryptedIDToken(t *testing.T, k *keycloak, rp *rpServer, keyPEM string) {
	tokens := &idTokenRecorder{}
	a := deployKCApp(t, rp, fmt.Sprintf(`
oidc_client_id: %s
oidc_issuer: %s
oidc_additional_settings:
  client_auth_method: private_key_jwt
  private_key: |
%s  pushed_authorization_requests: true
  request_object: true
  id_token_encrypted_response_alg: RSA-OAEP-256
  id_token_encrypted_response_enc: A256GCM
  userinfo_encrypted_response_alg: RSA-OAEP
  userinfo_encrypted_response_enc: A128GCM
`, kcEncryptedID, k.Issuer(), yamlBlock(keyPEM)), &http.Client{Transport: tokens})
	b := a.newBrowser(t)
	id := a.signIn(t, k, b)
	jwe, err := jose.ParseEncryptedCompact(tokens.idToken(), []jose.KeyAlgorithm{jose.RSA_OAEP_256}, []jose.ContentEncryption{jose.A256GCM})
	if err != nil {
		t.Fatalf("the ID token is not encrypted RSA-OAEP-256, A256GCM: %v", err)
	}
	var set struct {
		Keys []struct{ Kid, Use, Alg string }
	}
	resp := b.Get(a.URL + "/users/auth/oidc/jwks")
	if err := json.Unmarshal([]byte(resp.Body), &set); err != nil {
		t.Fatal(err)
	}
	kids := map[string]string{}
	for _, key := range set.Keys {
		if key.Use == "enc" {
			kids[key.Alg] = key.Kid
		}
	}
	if jwe.Header.KeyID == "" || jwe.Header.KeyID != kids["RSA-OAEP-256"] {
		t.Errorf("the ID token is encrypted to kid %q; the JWKS publishes %v", jwe.Header.KeyID, kids)
	}
	// UserInfo comes encrypted to the entry for RSA-OAEP.
	status, body := a.userInfo(t, k, id)
	ui, err := jose.ParseEncryptedCompact(string(body), []jose.KeyAlgorithm{jose.RSA_OAEP}, []jose.ContentEncryption{jose.A128GCM})
	if status != http.StatusOK || err != nil {
		t.Fatalf("UserInfo: %d %v %.200s", status, err, body)
	}
	if ui.Header.KeyID == "" || ui.Header.KeyID != kids["RSA-OAEP"] {
		t.Errorf("UserInfo is encrypted to kid %q; the JWKS publishes %v", ui.Header.KeyID, kids)
	}
}

// idTokenRecorder keeps the id_token of the last token response, as the
// provider sent it (extauth keeps the signed token inside).
type idTokenRecorder struct {
	mu   sync.Mutex
	last string
}

func (r *idTokenRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/token") {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	var tok struct {
		IDToken string `json:"id_token"`
	}
	if json.Unmarshal(body, &tok) == nil && tok.IDToken != "" {
		r.mu.Lock()
		r.last = tok.IDToken
		r.mu.Unlock()
	}
	return resp, nil
}

func (r *idTokenRecorder) idToken() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}
