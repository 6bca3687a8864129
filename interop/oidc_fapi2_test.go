//go:build interop

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
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/internal/harness"
)

// proofRecorder notes, for each request to the provider, its path,
// whether it carried a DPoP proof and what the provider answered.
type proofRecorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen []string // "<method> <path> <dpop|-> <status>"
}

func (p *proofRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := p.next.RoundTrip(r)
	status := "error"
	if err == nil {
		status = fmt.Sprint(resp.StatusCode)
	}
	proof := "-"
	if r.Header.Get("DPoP") != "" {
		proof = "dpop"
	}
	if !strings.Contains(r.URL.Path, "/.well-known/") && !strings.HasSuffix(r.URL.Path, "/jwks") {
		p.mu.Lock()
		p.seen = append(p.seen, r.Method+" "+r.URL.Path+" "+proof+" "+status)
		p.mu.Unlock()
	}
	return resp, err
}

func (p *proofRecorder) calls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen...)
}

// fapi2App is an application signed in against oidc-provider in its FAPI
// 2.0 profile (FAPI2=1 in server.js), from a secrets file whose
// oidc_additional_settings are extra.
type fapi2App struct {
	URL, Issuer string
	Auth        *extauth.Auth
	Logs        *lockedBuffer
	Recorder    *proofRecorder
	KeyPEM      string

	// Callback is the query of the last callback the provider sent the
	// browser to.
	Callback url.Values
	// browser, when set, is the browser's transport.
	browser http.RoundTripper

	mu  sync.Mutex
	got []*extauth.Identity
}

func (a *fapi2App) identities() []*extauth.Identity {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*extauth.Identity(nil), a.got...)
}

func startFAPI2(t *testing.T, client map[string]any, extra string) *fapi2App {
	t.Helper()
	return startFAPI2With(t, client, extra, fapi2Env{})
}

// fapi2Env is what an mTLS variant changes: server.js settings, the
// application's HTTP client (which must trust the provider's
// certificate), and the browser's transport.
type fapi2Env struct {
	env        []string
	httpClient *http.Client
	browser    http.RoundTripper
}

func startFAPI2With(t *testing.T, client map[string]any, extra string, e fapi2Env) *fapi2App {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	a := &fapi2App{Logs: &lockedBuffer{}, Recorder: &proofRecorder{next: http.DefaultTransport},
		KeyPEM: string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))}
	srv := harness.Serve(t, func(base string) http.Handler {
		c := map[string]any{
			"client_id":                         "extauth-fapi2",
			"redirect_uris":                     []string{base + "/users/auth/oidc/callback"},
			"token_endpoint_auth_method":        "private_key_jwt",
			"jwks_uri":                          base + "/users/auth/oidc/jwks",
			"dpop_bound_access_tokens":          true,
			"id_token_signed_response_alg":      "ES256",
			"authorization_signed_response_alg": "ES256",
		}
		for k, v := range client {
			c[k] = v
		}
		a.Issuer = startOIDCProvider(t, []map[string]any{c}, "", append([]string{"FAPI2=1"}, e.env...)...)
		src := fmt.Sprintf(`
oidc_client_id: extauth-fapi2
oidc_issuer: %s
oidc_additional_settings:
  private_key: |
    %s
  # oidc-provider issues a refresh token for offline_access, which it
  # grants only with prompt=consent.
  scope: openid email profile offline_access
  prompt: consent
%s`, a.Issuer, strings.ReplaceAll(strings.TrimSpace(a.KeyPEM), "\n", "\n    "), extra)
		cfg, err := extauth.ParseConfig([]byte(src))
		if err != nil {
			t.Fatal(err)
		}
		hc := e.httpClient
		if hc == nil {
			hc = &http.Client{Transport: a.Recorder}
		}
		a.browser = e.browser
		a.Auth, err = extauth.New(cfg, extauth.Options{
			BaseURL:    base,
			CookieKey:  bytes.Repeat([]byte{7}, 32),
			Logger:     slog.New(slog.NewTextHandler(a.Logs, nil)),
			HTTPClient: hc,
			OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
				a.mu.Lock()
				a.got = append(a.got, id)
				a.mu.Unlock()
				fmt.Fprintf(w, "signed in as %s", id.UID)
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Auth.Close() })
		mux := http.NewServeMux()
		a.Auth.Mount(mux)
		return mux
	})
	a.URL = srv.URL
	return a
}

// signIn signs alice in through oidc-provider's login and consent pages.
func (a *fapi2App) signIn(t *testing.T) *extauth.Identity {
	t.Helper()
	b := harness.NewBrowser(t)
	if a.browser != nil {
		b.Client.Transport = a.browser
	}
	login := b.PostForm(a.URL+"/users/auth/oidc", nil)
	if !strings.HasPrefix(login.URL.String(), a.Issuer+"/interaction/") || !strings.Contains(login.Body, `name="login"`) {
		t.Fatalf("no login page: %s %d %s\nlogs:\n%s\ncalls: %v", login.URL, login.StatusCode, login.Body, a.Logs.String(), a.Recorder.calls())
	}
	// The browser carried client_id and request_uri alone.
	for _, h := range b.Hops {
		if u, err := url.Parse(h); err == nil && strings.HasPrefix(h, a.Issuer+"/auth") {
			if q := u.Query(); len(q) != 2 || !strings.HasPrefix(q.Get("request_uri"), "urn:ietf:params:oauth:request_uri:") || q.Get("client_id") == "" {
				t.Errorf("authorization request %v", q)
			}
		}
	}
	consent := submit(t, b, login, url.Values{"login": {"alice"}, "password": {"any"}})
	if resp := submit(t, b, consent, nil); resp.Body != "signed in as alice" {
		t.Fatalf("sign-in: %s %d %s\nlogs:\n%s\ncalls: %v", resp.URL, resp.StatusCode, resp.Body, a.Logs.String(), a.Recorder.calls())
	}
	for _, h := range b.Hops {
		if u, err := url.Parse(h); err == nil && strings.HasPrefix(h, a.URL+"/users/auth/oidc/callback") {
			a.Callback = u.Query()
		}
	}
	ids := a.identities()
	return ids[len(ids)-1]
}

// useTokens renews id's tokens, calls the provider's UserInfo with them
// through Auth.Client, and revokes them, checking each step.
func (a *fapi2App) useTokens(t *testing.T, id *extauth.Identity) {
	t.Helper()
	ctx := context.Background()
	kept := *id
	kept.Tokens.Expiry = time.Now().Add(-time.Minute)
	ts, err := a.Auth.TokenSource(ctx, &kept)
	if err != nil {
		t.Fatal(err)
	}
	hc, err := a.Auth.Client(ctx, &kept, ts)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(a.Issuer + "/me")
	if err != nil {
		t.Fatalf("UserInfo through Auth.Client: %v\nlogs:\n%s", err, a.Logs.String())
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var info map[string]any
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &info) != nil || info["sub"] != "alice" || info["email"] != "alice@example.org" {
		t.Fatalf("UserInfo: %d %s %v", resp.StatusCode, body, resp.Header)
	}
	tok, err := ts.Token()
	if err != nil || tok.AccessToken == id.Tokens.AccessToken {
		t.Fatalf("the tokens were not renewed: %v", err)
	}
	renewed := kept
	renewed.Tokens.AccessToken, renewed.Tokens.RefreshToken = tok.AccessToken, tok.RefreshToken
	if err := a.Auth.RevokeTokens(ctx, &renewed); err != nil {
		t.Fatalf("revoke: %v\nlogs:\n%s", err, a.Logs.String())
	}
	// The provider no longer takes the access token.
	resp, err = hc.Get(a.Issuer + "/me")
	if err == nil {
		resp.Body.Close()
	}
	if err == nil && resp.StatusCode == http.StatusOK {
		t.Error("a revoked access token still reads UserInfo")
	}
}

// TestOIDCProviderFAPI2DPoP signs in against oidc-provider in its FAPI
// 2.0 profile with DPoP: pushed requests required, private_key_jwt with
// the issuer as audience, PKCE, nonces demanded on every DPoP request.
// The secrets file names the key, profile: fapi2 and dpop: true. The
// tokens come back DPoP-bound; then they are renewed, used at UserInfo
// through Auth.Client, and revoked, every request with a proof.
func TestOIDCProviderFAPI2DPoP(t *testing.T) {
	a := startFAPI2(t, nil, "  profile: fapi2\n  dpop: true\n")
	id := a.signIn(t)
	if id.Tokens.TokenType != "DPoP" || id.Tokens.DPoPKey == "" || id.Tokens.RefreshToken == "" || id.Email != "alice@example.org" {
		t.Fatalf("identity %+v", id)
	}
	if !a.Callback.Has("code") || !a.Callback.Has("iss") || a.Callback.Has("response") {
		t.Errorf("callback %v", a.Callback)
	}
	a.useTokens(t, id)
	calls := a.Recorder.calls()
	for _, c := range calls {
		if !strings.Contains(c, " dpop ") {
			t.Errorf("a request without a proof: %s", c)
		}
	}
	t.Logf("requests to the provider:\n%s", strings.Join(calls, "\n"))
	for _, secret := range []string{id.Tokens.AccessToken, id.Tokens.DPoPKey, strings.Split(a.KeyPEM, "\n")[2]} {
		if strings.Contains(a.Logs.String(), secret) {
			t.Errorf("a secret reached the log")
		}
	}
}

// TestOIDCProviderFAPI2MessageSigning signs in with profile:
// fapi2-message-signing against oidc-provider requiring signed request
// objects of the client: the pushed request is a request object (PS256,
// with nbf and exp), and the provider answers with a JWT-secured
// authorization response (JARM), which extauth verifies before it sends
// the code anywhere. Then the tokens are used as in the DPoP variant.
func TestOIDCProviderFAPI2MessageSigning(t *testing.T) {
	a := startFAPI2(t, map[string]any{"require_signed_request_object": true}, "  profile: fapi2-message-signing\n  dpop: true\n")
	id := a.signIn(t)
	if id.Tokens.TokenType != "DPoP" || id.Tokens.DPoPKey == "" || id.Email != "alice@example.org" {
		t.Fatalf("identity %+v", id)
	}
	if len(a.Callback) != 1 || strings.Count(a.Callback.Get("response"), ".") != 2 {
		t.Errorf("the callback was not a JWT-secured response: %v", a.Callback)
	}
	a.useTokens(t, id)
	t.Logf("requests to the provider:\n%s", strings.Join(a.Recorder.calls(), "\n"))
}

// testPKI is a CA made for one test, a server certificate for 127.0.0.1,
// a client certificate it issued and a self-signed one.
type testPKI struct {
	pool                   *x509.CertPool
	ca, server, client, ss *harness.Cert
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{pool: x509.NewCertPool(), ca: harness.NewCert(t, "extauth interop CA", nil, harness.CA)}
	p.pool.AddCert(p.ca.Cert)
	p.server = harness.NewCert(t, "127.0.0.1", p.ca, harness.TLSServer)
	p.client = harness.NewCert(t, "extauth-client", p.ca, harness.TLSClient)
	p.ss = harness.NewCert(t, "extauth-self-signed", nil, harness.TLSClient)
	return p
}

// yamlBlock indents a PEM block under an entry of oidc_additional_settings.
func yamlBlock(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n    ") + "\n"
}

// TestOIDCProviderFAPI2MTLS signs in against oidc-provider in its FAPI 2.0
// profile over https on loopback, with a CA made for the test: the client
// authenticates by its TLS certificate (tls_client_auth, chained to the CA
// with the registered subject; self_signed_tls_client_auth, the
// certificate published at the JWKS route), and the access token is bound
// to it. Auth.Client, which presents the certificate, reads UserInfo; the
// token alone, over a connection without it, does not.
func TestOIDCProviderFAPI2MTLS(t *testing.T) {
	pki := newTestPKI(t)
	trusting := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.pool}}
	for _, tc := range []struct {
		name   string
		client map[string]any
		extra  string
	}{
		{"tls_client_auth", map[string]any{"token_endpoint_auth_method": "tls_client_auth", "tls_client_auth_subject_dn": pki.client.Cert.Subject.String()},
			"  client_auth_method: tls_client_auth\n  tls_client_certificate: |\n" + yamlBlock(pki.client.CertPEM) + "  tls_client_key: |\n" + yamlBlock(pki.client.KeyPEM)},
		{"self_signed_tls_client_auth", map[string]any{"token_endpoint_auth_method": "self_signed_tls_client_auth"},
			"  client_auth_method: self_signed_tls_client_auth\n  tls_client_certificate: |\n" + yamlBlock(pki.ss.CertPEM) + "  tls_client_key: |\n" + yamlBlock(pki.ss.KeyPEM)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := map[string]any{"dpop_bound_access_tokens": false, "tls_client_certificate_bound_access_tokens": true}
			for k, v := range tc.client {
				client[k] = v
			}
			a := startFAPI2With(t, client, "  profile: fapi2\n"+tc.extra, fapi2Env{
				env: []string{"MTLS=1", "TLS_CERT=" + pki.server.CertPEM, "TLS_KEY=" + pki.server.KeyPEM, "TLS_CA=" + pki.ca.CertPEM},
				// The transport must be an *http.Transport, to which
				// extauth adds the client certificate.
				httpClient: &http.Client{Transport: trusting.Clone()},
				browser:    trusting.Clone(),
			})
			if !strings.HasPrefix(a.Issuer, "https://") {
				t.Fatalf("issuer %s", a.Issuer)
			}
			id := a.signIn(t)
			if id.Tokens.TokenType != "Bearer" || id.Tokens.DPoPKey != "" || id.Email != "alice@example.org" {
				t.Fatalf("identity %+v", id)
			}
			// The token alone does not read UserInfo: it is bound to the
			// certificate.
			req, _ := http.NewRequest(http.MethodGet, a.Issuer+"/me", nil)
			req.Header.Set("Authorization", "Bearer "+id.Tokens.AccessToken)
			resp, err := (&http.Client{Transport: trusting.Clone()}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("the bound token without its certificate: %d", resp.StatusCode)
			}
			a.useTokens(t, id)
		})
	}
}
