//go:build interop

package interop

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/internal/harness"
	"github.com/extauth/extauth/internal/testkeys"
	"github.com/extauth/extauth/providers"
)

// opClient is a client registration handed to oidc-provider.
type opClient struct {
	ClientID                string   `json:"client_id"`
	ClientSecret            string   `json:"client_secret"`
	RedirectURIs            []string `json:"redirect_uris"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	// The logout registration extauth routes prints.
	PostLogoutRedirectURIs           []string `json:"post_logout_redirect_uris,omitempty"`
	BackchannelLogoutURI             string   `json:"backchannel_logout_uri,omitempty"`
	BackchannelLogoutSessionRequired bool     `json:"backchannel_logout_session_required,omitempty"`
}

// startOIDCProvider runs interop/oidcprovider/server.js (panva's certified
// oidc-provider) on 127.0.0.1 and returns its issuer. clients are the
// client registrations ([]opClient, or any JSON of client metadata);
// authMethods, when set, limits the token endpoint authentication methods
// it supports; env adds settings of server.js (HIGH_ASSURANCE=1). The
// process ends with the test.
func startOIDCProvider(t *testing.T, clients any, authMethods string, env ...string) string {
	t.Helper()
	cj, err := json.Marshal(clients)
	if err != nil {
		t.Fatal(err)
	}
	env = append(env, "CLIENTS="+string(cj), "AUTH_METHODS="+authMethods, "SIGNING_KEYS="+opSigningKeys(t))
	return startNode(t, "oidcprovider", "oidc-provider", env,
		func(line string) (string, bool) {
			var m struct{ Issuer string }
			return m.Issuer, json.Unmarshal([]byte(line), &m) == nil && m.Issuer != ""
		}, "server.js")
}

// opSigningKeys are oidc-provider's signing keys, an RS256 and an ES256
// key with kids of their own, as the JSON array of private JWKs that
// server.js reads from SIGNING_KEYS: made here, since node 20 hangs now
// and then exporting a key it generated (server.js says how).
func opSigningKeys(t *testing.T) string {
	t.Helper()
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var keys []jose.JSONWebKey
	for _, k := range []struct {
		key any
		alg string
	}{{testkeys.RSA(0), "RS256"}, {ec, "ES256"}} {
		keys = append(keys, jose.JSONWebKey{Key: k.key, KeyID: rand.Text()[:16], Use: "sig", Algorithm: k.alg})
	}
	out, err := json.Marshal(keys)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// tokenAuthRecorder notes how each token request authenticated the client:
// oidc-provider accepts either method from a client registered for one,
// so only our side can show which was sent.
type tokenAuthRecorder struct {
	mu      sync.Mutex
	methods []string
}

func (t *tokenAuthRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/token") && r.Body != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(body))
		form, _ := url.ParseQuery(string(body))
		_, _, basic := r.BasicAuth()
		method := "none"
		switch {
		case basic && !form.Has("client_secret"):
			method = providers.AuthMethodBasic
		case !basic && form.Has("client_secret"):
			method = providers.AuthMethodPost
		}
		t.mu.Lock()
		t.methods = append(t.methods, method)
		t.mu.Unlock()
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (t *tokenAuthRecorder) sent() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.methods...)
}

var (
	opForm   = regexp.MustCompile(`<form[^>]*action="([^"]+)"`)
	opHidden = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)"`)
)

// submit posts the page's one form with its hidden fields and fields.
func submit(t *testing.T, b *harness.Browser, page *harness.Response, fields url.Values) *harness.Response {
	t.Helper()
	m := opForm.FindStringSubmatch(page.Body)
	if m == nil {
		t.Fatalf("no form at %s (%d): %s", page.URL, page.StatusCode, page.Body)
	}
	action, err := page.URL.Parse(html.UnescapeString(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	form := url.Values{}
	for _, h := range opHidden.FindAllStringSubmatch(page.Body, -1) {
		form.Set(h[1], html.UnescapeString(h[2]))
	}
	for k, v := range fields {
		form[k] = v
	}
	return b.PostForm(action.String(), form)
}

// TestOIDCProviderInterop signs in through our routes against oidc-provider
// with a cookie jar: its login and consent pages, the token exchange with
// each client authentication method, and the verified identity (its ID
// token carries only sub, so UserInfo is read and its sub checked).
func TestOIDCProviderInterop(t *testing.T) {
	// Characters that client_secret_basic must form-urlencode first (client
	// secrets are VSCHAR, printable ASCII: RFC 6749 Appendix A.2).
	const secret = "s3c:r+et %x/~"
	for _, tc := range []struct {
		name string
		// registered is the client's method at the provider, supported
		// the provider's list ("" for its default list), ours our option.
		registered, supported, ours string
		// wrongSecret configures us with another secret than registered.
		wrongSecret bool
		wantCode    string
	}{
		// oidc-provider decodes the basic credentials as RFC 6749 2.3.1
		// says ("+" is a space): this secret passes only form-urlencoded.
		{name: "client_secret_basic", registered: "client_secret_basic"},
		{name: "client_secret_post, the only method the provider supports", registered: "client_secret_post", supported: "client_secret_post"},
		{name: "client_secret_post by option", registered: "client_secret_post", ours: providers.AuthMethodPost},
		{name: "wrong secret", registered: "client_secret_basic", wrongSecret: true, wantCode: "invalid_credentials"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var got []*extauth.Identity
			var issuer string
			var logs lockedBuffer
			recorder := &tokenAuthRecorder{}
			srv := harness.Serve(t, func(base string) http.Handler {
				issuer = startOIDCProvider(t, []opClient{{
					ClientID: "extauth-interop", ClientSecret: secret,
					RedirectURIs:            []string{base + "/users/auth/oidc/callback"},
					TokenEndpointAuthMethod: tc.registered,
				}}, tc.supported)
				ours := secret
				if tc.wrongSecret {
					ours = "not-" + secret
				}
				cfg := &extauth.Config{OIDC: extauth.OIDCConfig{
					ClientID: "extauth-interop", ClientSecret: extauth.NewSecret(ours), Issuer: issuer,
				}}
				a, err := extauth.New(cfg, extauth.Options{
					BaseURL:    base,
					CookieKey:  bytes.Repeat([]byte{9}, 32),
					Logger:     slog.New(slog.NewTextHandler(&logs, nil)),
					HTTPClient: &http.Client{Transport: recorder},
					OIDC:       providers.OIDCOptions{AuthMethod: tc.ours},
					OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
						mu.Lock()
						got = append(got, id)
						mu.Unlock()
						fmt.Fprintf(w, "signed in as %s", id.UID)
					},
				})
				if err != nil {
					t.Fatal(err)
				}
				mux := http.NewServeMux()
				a.Mount(mux)
				return mux
			})
			b := harness.NewBrowser(t)
			login := b.PostForm(srv.URL+"/users/auth/oidc", nil)
			if !strings.HasPrefix(login.URL.String(), issuer+"/interaction/") || !strings.Contains(login.Body, `name="login"`) {
				t.Fatalf("no login page: %s %d %s", login.URL, login.StatusCode, login.Body[strings.Index(login.Body, "<body"):])
			}
			consent := submit(t, b, login, url.Values{"login": {"alice"}, "password": {"any"}})
			if !strings.Contains(consent.Body, `value="consent"`) {
				t.Fatalf("no consent page: %s %d %s", consent.URL, consent.StatusCode, consent.Body)
			}
			resp := submit(t, b, consent, nil)
			if tc.wantCode != "" {
				if !strings.Contains(resp.Body, tc.wantCode) || len(got) != 0 {
					t.Fatalf("want %s: %d %s", tc.wantCode, resp.StatusCode, resp.Body)
				}
				return
			}
			if resp.StatusCode != http.StatusOK || resp.Body != "signed in as alice" {
				t.Fatalf("callback: %s %d %s\nlogs:\n%s", resp.URL, resp.StatusCode, resp.Body, logs.String())
			}
			if sent := recorder.sent(); len(sent) != 1 || sent[0] != tc.registered {
				t.Errorf("token requests authenticated with %v, want [%s]", sent, tc.registered)
			}
			// The provider answered with RFC 9207's iss, which we checked.
			var cb string
			for _, h := range b.Hops {
				if strings.Contains(h, "/users/auth/oidc/callback?") {
					cb = h
				}
			}
			if q, err := url.Parse(cb); err != nil || q.Query().Get("iss") != issuer {
				t.Errorf("callback %q without the iss parameter", cb)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(got) != 1 {
				t.Fatalf("hook called %d times", len(got))
			}
			id := got[0]
			if id.Provider != "oidc" || id.UID != "alice" || id.Email != "alice@example.org" || !id.EmailVerified ||
				id.Name != "Alice Example" || id.FirstName != "Alice" || id.LastName != "Example" ||
				id.NickName != "alice" || id.Image != "https://example.org/alice.png" {
				t.Errorf("identity = %+v", id)
			}
			if id.Tokens.AccessToken == "" || id.Tokens.IDToken == "" || id.Raw["iss"] != issuer || id.Raw["aud"] != "extauth-interop" {
				t.Errorf("tokens or raw claims: %v", id.Raw)
			}
			if strings.Contains(logs.String(), id.Tokens.AccessToken) || strings.Contains(logs.String(), secret) {
				t.Errorf("a secret reached the log:\n%s", logs.String())
			}
		})
	}
}

// TestOIDCProviderLogoutAndRefresh registers the client with oidc-provider
// as extauth routes prints it (post_logout_redirect_uri, back-channel
// logout with sessions), signs in with offline access, renews the tokens,
// then signs out through the logout route: the provider's logout page
// ends its session, posts a logout token that reaches OnProviderLogout
// with the sign-in's sid, and returns the browser with the state, which
// lands on the host's page.
func TestOIDCProviderLogoutAndRefresh(t *testing.T) {
	const secret = "logout-interop-secret"
	var (
		mu      sync.Mutex
		got     []*extauth.Identity
		events  []extauth.LogoutEvent
		done    []*extauth.Error
		session extauth.LogoutSession
		issuer  string
		auth    *extauth.Auth
		logs    lockedBuffer
	)
	srv := harness.Serve(t, func(base string) http.Handler {
		issuer = startOIDCProvider(t, []opClient{{
			ClientID: "extauth-logout", ClientSecret: secret,
			RedirectURIs:                     []string{base + "/users/auth/oidc/callback"},
			TokenEndpointAuthMethod:          providers.AuthMethodBasic,
			PostLogoutRedirectURIs:           []string{base + "/users/auth/oidc/post_logout"},
			BackchannelLogoutURI:             base + "/users/auth/oidc/backchannel_logout",
			BackchannelLogoutSessionRequired: true,
		}}, "")
		cfg := &extauth.Config{OIDC: extauth.OIDCConfig{ClientID: "extauth-logout", ClientSecret: extauth.NewSecret(secret), Issuer: issuer}}
		var err error
		auth, err = extauth.New(cfg, extauth.Options{
			BaseURL:   base,
			CookieKey: bytes.Repeat([]byte{7}, 32),
			Logger:    slog.New(slog.NewTextHandler(&logs, nil)),
			// oidc-provider issues a refresh token for offline_access,
			// which it grants only with prompt=consent.
			OIDC: providers.OIDCOptions{Scopes: []string{"openid", "email", "profile", "offline_access"}, Prompt: "consent"},
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
				Done: func(w http.ResponseWriter, r *http.Request, err *extauth.Error) {
					mu.Lock()
					done = append(done, err)
					mu.Unlock()
					http.Redirect(w, r, extauth.ReturnTo(r), http.StatusSeeOther)
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
	login := b.PostForm(srv.URL+"/users/auth/oidc", nil)
	consent := submit(t, b, login, url.Values{"login": {"alice"}, "password": {"any"}})
	if resp := submit(t, b, consent, nil); resp.Body != "signed in as alice" {
		t.Fatalf("sign-in: %s %d %s\nlogs:\n%s", resp.URL, resp.StatusCode, resp.Body, logs.String())
	}
	mu.Lock()
	id := got[0]
	mu.Unlock()
	if id.SessionID == "" || id.Tokens.RefreshToken == "" {
		t.Fatalf("sid %q, refresh token present %v", id.SessionID, id.Tokens.RefreshToken != "")
	}

	// A refresh yields a new access token, and a new ID token verified as
	// the sign-in's was.
	stale := *id
	stale.Tokens.Expiry = time.Now().Add(-time.Minute)
	ts, err := auth.TokenSource(context.Background(), &stale)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := ts.Token()
	if err != nil {
		t.Fatalf("refresh: %v\nlogs:\n%s", err, logs.String())
	}
	if tok.AccessToken == "" || tok.AccessToken == id.Tokens.AccessToken || !tok.Valid() {
		t.Errorf("the refresh gave no new access token")
	}

	// RP-initiated logout, confirmed on the provider's page.
	page := b.PostForm(srv.URL+"/users/auth/oidc/logout", nil)
	if !strings.HasPrefix(page.URL.String(), issuer+"/session/end") {
		t.Fatalf("logout went to %s (%d): %s", page.URL, page.StatusCode, page.Body)
	}
	hops := len(b.Hops)
	resp := submit(t, b, page, url.Values{"logout": {"yes"}})
	if resp.StatusCode != http.StatusOK || resp.Body != "signed out" {
		t.Fatalf("logout ended at %s (%d): %s\nlogs:\n%s", resp.URL, resp.StatusCode, resp.Body, logs.String())
	}
	var back *url.URL
	for _, h := range b.Hops[hops:] {
		if u, err := url.Parse(h); err == nil && u.Path == "/users/auth/oidc/post_logout" {
			back = u
		}
	}
	if back == nil || back.Query().Get("state") == "" {
		t.Errorf("the provider returned without our state: %v", b.Hops[hops:])
	}
	mu.Lock()
	defer mu.Unlock()
	want := extauth.LogoutEvent{Provider: extauth.OIDC, Subject: "alice", Session: id.SessionID, Issuer: id.Tokens.Issuer, Channel: extauth.LogoutBackChannel}
	if len(events) != 1 || events[0] != want {
		t.Errorf("back-channel logouts %+v, want [%+v]\nlogs:\n%s", events, want, logs.String())
	}
	if len(done) != 1 || done[0] != nil {
		t.Errorf("Done saw %v", done)
	}
	if strings.Contains(logs.String(), id.Tokens.IDToken) || strings.Contains(logs.String(), tok.AccessToken) {
		t.Errorf("a token reached the log")
	}
}
