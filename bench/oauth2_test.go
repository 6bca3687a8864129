package bench

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/gorilla/sessions"
	"github.com/markbates/goth"
	"github.com/markbates/goth/gothic"
	"github.com/markbates/goth/providers/gitea"
	"golang.org/x/oauth2"

	"github.com/extauth/extauth"
)

var cookieKey = bytes.Repeat([]byte{7}, 32)

// inProcess serves outbound requests with a handler: no socket, so that
// the benchmarks measure the libraries, not the loopback.
type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}

// provider is the same small OAuth 2 provider for every side: a token
// endpoint that accepts any code and a profile endpoint, in WP OAuth
// Server's shape (blog_oauth2, the hand-written handler) and Gitea's
// (gothic), so that every side's provider costs the same.
var provider = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/oauth/token", "/login/oauth/access_token":
		io.WriteString(w, `{"access_token":"at-123","token_type":"Bearer","expires_in":3600}`)
	case "/oauth/me":
		io.WriteString(w, `{"ID":"42","user_login":"ada","user_email":"ada@example.org","display_name":"Ada Lovelace"}`)
	case "/api/v1/user":
		io.WriteString(w, `{"id":42,"login":"ada","email":"ada@example.org","full_name":"Ada Lovelace"}`)
	default:
		http.NotFound(w, r)
	}
})

const (
	site     = "https://provider.example"
	appBase  = "https://app.example"
	callback = appBase + "/users/auth/blog_oauth2/callback"
)

var client = &http.Client{Transport: inProcess{provider}}

// newExtauth mounts blog_oauth2 against the in-process provider; edits
// change the options (BenchmarkTelemetry installs OpenTelemetry SDKs).
func newExtauth(b *testing.B, edits ...func(*extauth.Options)) *extauth.Auth {
	o := extauth.Options{BaseURL: appBase, CookieKey: cookieKey, HTTPClient: client, Logger: slog.New(slog.DiscardHandler),
		OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
			http.Redirect(w, r, extauth.ReturnTo(r), http.StatusSeeOther)
		}}
	for _, edit := range edits {
		edit(&o)
	}
	a, err := extauth.New(&extauth.Config{BlogOAuth2: extauth.OAuthProvider{Key: "k", Secret: extauth.NewSecret("s"), Site: site}}, o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close() })
	return a
}

func start(target string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, target, nil)
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	return r
}

// handWritten is what a careful developer writes with x/oauth2 alone: state
// and PKCE verifier from crypto/rand, sealed with AES-GCM into an HttpOnly
// cookie, checked in constant time on the way back, the code exchanged with
// the verifier, the profile read.
type handWritten struct {
	conf *oauth2.Config
	aead cipher.AEAD
}

func newHandWritten() *handWritten {
	block, _ := aes.NewCipher(cookieKey)
	aead, _ := cipher.NewGCM(block)
	return &handWritten{aead: aead, conf: &oauth2.Config{ClientID: "k", ClientSecret: "s", RedirectURL: callback,
		Endpoint: oauth2.Endpoint{AuthURL: site + "/oauth/authorize", TokenURL: site + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams},
		Scopes:   []string{"basic"}}}
}

func (h *handWritten) authorize(w http.ResponseWriter, r *http.Request) {
	st := make([]byte, 32)
	rand.Read(st)
	state := base64.RawURLEncoding.EncodeToString(st)
	verifier := oauth2.GenerateVerifier()
	nonce := make([]byte, h.aead.NonceSize())
	rand.Read(nonce)
	sealed := h.aead.Seal(nonce, nonce, []byte(state+"."+verifier), nil)
	http.SetCookie(w, &http.Cookie{Name: "__Host-oauth", Value: base64.RawURLEncoding.EncodeToString(sealed), Path: "/",
		MaxAge: 600, HttpOnly: true, Secure: true, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, h.conf.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier)), http.StatusSeeOther)
}

func (h *handWritten) callback(w http.ResponseWriter, r *http.Request) {
	c, err := r.Cookie("__Host-oauth")
	if err != nil {
		http.Error(w, "no cookie", http.StatusBadRequest)
		return
	}
	raw, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil || len(raw) < h.aead.NonceSize() {
		http.Error(w, "bad cookie", http.StatusBadRequest)
		return
	}
	pt, err := h.aead.Open(nil, raw[:h.aead.NonceSize()], raw[h.aead.NonceSize():], nil)
	if err != nil {
		http.Error(w, "bad cookie", http.StatusBadRequest)
		return
	}
	state, verifier, _ := strings.Cut(string(pt), ".")
	if subtle.ConstantTimeCompare([]byte(state), []byte(r.FormValue("state"))) != 1 {
		http.Error(w, "bad state", http.StatusBadRequest)
		return
	}
	ctx := context.WithValue(r.Context(), oauth2.HTTPClient, client)
	tok, err := h.conf.Exchange(ctx, r.FormValue("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, site+"/oauth/me", nil)
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	resp, err := client.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	var me map[string]any
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&me); err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: "__Host-oauth", Path: "/", MaxAge: -1, Secure: true})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// newGothic mounts goth's Gitea provider against the same provider, with
// gothic's cookie store.
func newGothic(b *testing.B) goth.Provider {
	p := gitea.NewCustomisedURL("k", "s", callback, site+"/login/oauth/authorize", site+"/login/oauth/access_token", site+"/api/v1/user")
	p.HTTPClient = client
	goth.UseProviders(p)
	store := sessions.NewCookieStore(cookieKey)
	store.Options.HttpOnly, store.Options.Secure = true, true
	gothic.Store = store
	return p
}

// BenchmarkAuthorize is the start of an OAuth 2 sign-in: extauth's shared
// authorize route for blog_oauth2, the x/oauth2 handler by hand, gothic's
// BeginAuthHandler.
func BenchmarkAuthorize(b *testing.B) {
	a := newExtauth(b)
	h := newHandWritten()
	newGothic(b)
	alternate(b, side{"extauth", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			rec := httptest.NewRecorder()
			a.ServeHTTP(rec, start(appBase+"/users/auth/blog_oauth2"))
			if rec.Code != http.StatusSeeOther {
				b.Fatal(rec.Code, rec.Body)
			}
		}
	}}, side{"x_oauth2_by_hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			rec := httptest.NewRecorder()
			h.authorize(rec, start(appBase+"/auth"))
			if rec.Code != http.StatusSeeOther {
				b.Fatal(rec.Code)
			}
		}
	}}, side{"gothic", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			rec := httptest.NewRecorder()
			gothic.BeginAuthHandler(rec, start(appBase+"/auth?provider=gitea"))
			if rec.Code != http.StatusTemporaryRedirect {
				b.Fatal(rec.Code, rec.Body)
			}
		}
	}})
}

// BenchmarkCallback is the end of an OAuth 2 sign-in, the token exchange
// and the profile read included: extauth's blog_oauth2 callback route, the
// x/oauth2 handler by hand, gothic's CompleteUserAuth.
func BenchmarkCallback(b *testing.B) {
	a := newExtauth(b)
	h := newHandWritten()
	newGothic(b)
	// Each side's callback request, with the cookie its authorize set; the
	// single-use checks are each side's own, so every round starts anew.
	extauthCallback := func() *http.Request {
		rec := httptest.NewRecorder()
		a.ServeHTTP(rec, start(appBase+"/users/auth/blog_oauth2"))
		loc, _ := url.Parse(rec.Header().Get("Location"))
		r := httptest.NewRequest(http.MethodGet, callback+"?code=c&state="+url.QueryEscape(loc.Query().Get("state")), nil)
		for _, c := range rec.Result().Cookies() {
			r.AddCookie(c)
		}
		return r
	}
	handCallback := func() *http.Request {
		rec := httptest.NewRecorder()
		h.authorize(rec, start(appBase+"/auth"))
		loc, _ := url.Parse(rec.Header().Get("Location"))
		r := httptest.NewRequest(http.MethodGet, callback+"?code=c&state="+url.QueryEscape(loc.Query().Get("state")), nil)
		for _, c := range rec.Result().Cookies() {
			r.AddCookie(c)
		}
		return r
	}
	gothCallback := func() *http.Request {
		rec := httptest.NewRecorder()
		gothic.BeginAuthHandler(rec, start(appBase+"/auth?provider=gitea"))
		loc, _ := url.Parse(rec.Header().Get("Location"))
		r := httptest.NewRequest(http.MethodGet, callback+"?provider=gitea&code=c&state="+url.QueryEscape(loc.Query().Get("state")), nil)
		for _, c := range rec.Result().Cookies() {
			r.AddCookie(c)
		}
		return r
	}
	alternate(b, side{"extauth", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			r := extauthCallback()
			b.StartTimer()
			rec := httptest.NewRecorder()
			a.ServeHTTP(rec, r)
			if rec.Code != http.StatusSeeOther {
				b.Fatal(rec.Code, rec.Body)
			}
		}
	}}, side{"x_oauth2_by_hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			r := handCallback()
			b.StartTimer()
			rec := httptest.NewRecorder()
			h.callback(rec, r)
			if rec.Code != http.StatusSeeOther {
				b.Fatal(rec.Code, rec.Body)
			}
		}
	}}, side{"gothic", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			r := gothCallback()
			b.StartTimer()
			rec := httptest.NewRecorder()
			if _, err := gothic.CompleteUserAuth(rec, r); err != nil {
				b.Fatal(err)
			}
		}
	}})
}
