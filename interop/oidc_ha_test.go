//go:build interop

package interop

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
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

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/internal/harness"
)

// clientAuthRecorder notes how the client authenticated on each POST to
// the provider: oidc-provider would accept a secret from nobody here, but
// only our side can show that nothing but an assertion was sent.
type clientAuthRecorder struct {
	mu   sync.Mutex
	seen []string // "<path> <how>"
}

func (c *clientAuthRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && r.Body != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(body))
		form, _ := url.ParseQuery(string(body))
		_, _, basic := r.BasicAuth()
		how := "none"
		switch {
		case basic || form.Has("client_secret"):
			how = "secret"
		case form.Get("client_assertion_type") == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" && form.Get("client_assertion") != "":
			how = "assertion"
		}
		if form.Has("request") {
			how += "+request_object"
		}
		c.mu.Lock()
		c.seen = append(c.seen, r.URL.Path+" "+how)
		c.mu.Unlock()
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (c *clientAuthRecorder) calls() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.seen...)
}

// TestOIDCProviderHighAssurance signs in against oidc-provider configured
// as a high-assurance provider (HIGH_ASSURANCE=1 in server.js): it takes
// private_key_jwt only, reading our keys from the JWKS route it was
// registered with; requires pushed authorization requests and signed
// request objects; and encrypts ID tokens (RSA-OAEP-256 + A256GCM) and
// logout tokens. The application's secrets file has only a client ID, the
// issuer and oidc_additional_settings. Then the tokens are renewed and
// revoked with a fresh client assertion each, and signing out reaches the
// back-channel logout route with an encrypted logout token.
func TestOIDCProviderHighAssurance(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	var (
		mu      sync.Mutex
		got     []*extauth.Identity
		events  []extauth.LogoutEvent
		session extauth.LogoutSession
		issuer  string
		auth    *extauth.Auth
		logs    lockedBuffer
	)
	recorder := &clientAuthRecorder{}
	srv := harness.Serve(t, func(base string) http.Handler {
		issuer = startOIDCProvider(t, []map[string]any{{
			"client_id":                             "extauth-ha",
			"redirect_uris":                         []string{base + "/users/auth/oidc/callback"},
			"token_endpoint_auth_method":            "private_key_jwt",
			"jwks_uri":                              base + "/users/auth/oidc/jwks",
			"require_pushed_authorization_requests": true,
			"require_signed_request_object":         true,
			"id_token_encrypted_response_alg":       "RSA-OAEP-256",
			"id_token_encrypted_response_enc":       "A256GCM",
			"post_logout_redirect_uris":             []string{base + "/users/auth/oidc/post_logout"},
			"backchannel_logout_uri":                base + "/users/auth/oidc/backchannel_logout",
			"backchannel_logout_session_required":   true,
		}}, "", "HIGH_ASSURANCE=1")
		src := fmt.Sprintf(`
oidc_client_id: extauth-ha
oidc_issuer: %s
oidc_additional_settings:
  client_auth_method: private_key_jwt
  private_key: |
    %s
  pushed_authorization_requests: true
  request_object: true
  id_token_encrypted_response_alg: RSA-OAEP-256
  id_token_encrypted_response_enc: A256GCM
  # A per-request option travels inside the pushed request object.
  request_options: [login_hint]
  # oidc-provider issues a refresh token for offline_access, which it
  # grants only with prompt=consent.
  scope: openid email profile offline_access
  prompt: consent
  max_age: 600
`, issuer, strings.ReplaceAll(strings.TrimSpace(keyPEM), "\n", "\n    "))
		cfg, err := extauth.ParseConfig([]byte(src))
		if err != nil {
			t.Fatal(err)
		}
		auth, err = extauth.New(cfg, extauth.Options{
			BaseURL:    base,
			CookieKey:  bytes.Repeat([]byte{5}, 32),
			Logger:     slog.New(slog.NewTextHandler(&logs, nil)),
			HTTPClient: &http.Client{Transport: recorder},
			OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
				mu.Lock()
				got = append(got, id)
				session = id.LogoutSession()
				mu.Unlock()
				fmt.Fprintf(w, "signed in as %s", id.UID)
			},
			Logout: extauth.LogoutOptions{
				ReturnTo: "/signed-out",
				Session: func(*http.Request, extauth.Provider) (extauth.LogoutSession, bool) {
					mu.Lock()
					defer mu.Unlock()
					return session, session.IDToken != ""
				},
				OnProviderLogout: func(_ context.Context, e extauth.LogoutEvent) error {
					mu.Lock()
					events = append(events, e)
					mu.Unlock()
					return nil
				},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { auth.Close() })
		mux := http.NewServeMux()
		auth.Mount(mux)
		mux.HandleFunc("/signed-out", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "signed out") })
		return mux
	})

	b := harness.NewBrowser(t)
	login := b.PostForm(srv.URL+"/users/auth/oidc", url.Values{"login_hint": {"alice"}})
	if !strings.HasPrefix(login.URL.String(), issuer+"/interaction/") || !strings.Contains(login.Body, `name="login"`) ||
		!strings.Contains(login.Body, `value="alice"`) {
		t.Fatalf("no login page: %s %d %s\nlogs:\n%s", login.URL, login.StatusCode, login.Body, logs.String())
	}
	// The browser carried the request_uri alone.
	for _, h := range b.Hops {
		if u, err := url.Parse(h); err == nil && strings.HasPrefix(h, issuer+"/auth") {
			if q := u.Query(); len(q) != 2 || !strings.HasPrefix(q.Get("request_uri"), "urn:ietf:params:oauth:request_uri:") {
				t.Errorf("authorization request %v", q)
			}
		}
	}
	consent := submit(t, b, login, url.Values{"login": {"alice"}, "password": {"any"}})
	if resp := submit(t, b, consent, nil); resp.Body != "signed in as alice" {
		t.Fatalf("sign-in: %s %d %s\nlogs:\n%s", resp.URL, resp.StatusCode, resp.Body, logs.String())
	}
	mu.Lock()
	id := got[0]
	mu.Unlock()
	if id.Email != "alice@example.org" || id.Raw["auth_time"] == nil || strings.Count(id.Tokens.IDToken, ".") != 2 ||
		id.Tokens.RefreshToken == "" || id.SessionID == "" {
		t.Errorf("identity %+v raw %v", id, id.Raw)
	}

	ctx := context.Background()
	stale := *id
	stale.Tokens.Expiry = time.Now().Add(-time.Minute)
	ts, err := auth.TokenSource(ctx, &stale)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := ts.Token()
	if err != nil {
		t.Fatalf("refresh: %v\nlogs:\n%s", err, logs.String())
	}
	renewed := *id
	renewed.Tokens.AccessToken, renewed.Tokens.RefreshToken, renewed.Tokens.Expiry = tok.AccessToken, tok.RefreshToken, time.Now().Add(-time.Minute)
	if err := auth.RevokeTokens(ctx, &renewed); err != nil {
		t.Fatalf("revoke: %v\nlogs:\n%s", err, logs.String())
	}
	ts, err = auth.TokenSource(ctx, &renewed)
	if err != nil {
		t.Fatal(err)
	}
	var e *extauth.Error
	if _, err := ts.Token(); !errors.As(err, &e) {
		t.Errorf("a revoked refresh token renewed: %v", err)
	}

	page := b.PostForm(srv.URL+"/users/auth/oidc/logout", nil)
	if !strings.HasPrefix(page.URL.String(), issuer+"/session/end") {
		t.Fatalf("logout went to %s (%d): %s\nlogs:\n%s", page.URL, page.StatusCode, page.Body, logs.String())
	}
	if resp := submit(t, b, page, url.Values{"logout": {"yes"}}); resp.Body != "signed out" {
		t.Fatalf("logout ended at %s (%d): %s\nlogs:\n%s", resp.URL, resp.StatusCode, resp.Body, logs.String())
	}
	mu.Lock()
	want := extauth.LogoutEvent{Provider: extauth.OIDC, Subject: "alice", Session: id.SessionID, Issuer: id.Tokens.Issuer, Channel: extauth.LogoutBackChannel}
	if len(events) != 1 || events[0] != want {
		t.Errorf("back-channel logouts %+v, want [%+v]\nlogs:\n%s", events, want, logs.String())
	}
	mu.Unlock()

	// Every call that authenticated the client did so with an assertion,
	// and the request went pushed, as a request object.
	wantCalls := []string{"/request assertion+request_object", "/token assertion", "/token assertion",
		"/token/revocation assertion", "/token/revocation assertion", "/token assertion"}
	if calls := recorder.calls(); strings.Join(calls, "\n") != strings.Join(wantCalls, "\n") {
		t.Errorf("calls to the provider:\n%s\nwant\n%s", strings.Join(calls, "\n"), strings.Join(wantCalls, "\n"))
	}
	for _, secret := range []string{id.Tokens.AccessToken, tok.AccessToken, strings.Split(keyPEM, "\n")[2]} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("a secret reached the log")
		}
	}
}
