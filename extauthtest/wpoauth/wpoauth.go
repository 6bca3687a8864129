// Package wpoauth is a fake WordPress "WP OAuth Server" (extauth's
// blog_oauth2): authorization code grant with PKCE, single-use codes, client
// and redirect_uri checks, and the /oauth/me profile, for the tests and the
// development of applications that sign in with extauth, and for extauth's
// own. extauthtest.StartProviders starts one registered for an
// application's callback URL.
package wpoauth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/extauth/extauth/extauthtest/internal/endpoint"
	"github.com/extauth/extauth/extauthtest/internal/expiring"
	"github.com/extauth/extauth/internal/devpage"
)

// User is the profile /oauth/me returns.
type User struct {
	ID          int    `json:"ID"`
	Login       string `json:"user_login"`
	Email       string `json:"user_email"`
	DisplayName string `json:"display_name"`
	Avatar      string `json:"avatar,omitempty"`
}

// Server is the fake. Its exported fields are knobs; set them before use or
// under Lock when the server is running.
type Server struct {
	ClientID     string
	ClientSecret string
	// RedirectURI is the only redirect_uri accepted.
	RedirectURI string
	User        User
	// AutoApprove skips the consent page.
	AutoApprove bool
	// Deny answers every authorization as a user who clicks Deny does.
	Deny bool
	// Prefix is the path the server is mounted under (e.g. "/dev/blog").
	Prefix string

	// TokenStatus, when set, is the status of every token response.
	TokenStatus int
	// Hang makes the token endpoint wait until the request is abandoned.
	Hang bool
	// HugeToken makes the token endpoint send a body of this many bytes.
	HugeToken int
	// MeBody, when set, replaces the profile JSON.
	MeBody string

	mu     sync.Mutex
	now    func() time.Time
	codes  *expiring.Map[grant]
	tokens *expiring.Map[struct{}]
	// refresh holds the live refresh tokens. As WP OAuth Server does by
	// default, a refresh answers no new refresh token and the old one
	// stays valid.
	refresh *expiring.Map[struct{}]
	// TokenCalls counts token endpoint requests.
	TokenCalls int
}

type grant struct {
	redirectURI string
	challenge   string
}

// The lifetimes of codes and tokens: the access token's and the refresh
// token's are WP OAuth Server's defaults.
const (
	codeLifetime    = time.Minute
	tokenLifetime   = time.Hour
	refreshLifetime = 14 * 24 * time.Hour
)

// DemoUser is the account a new fake signs in.
var DemoUser = User{ID: 42, Login: "ada", Email: "ada@blog.example", DisplayName: "Ada Lovelace"}

// New returns a fake for one registered client.
func New(clientID, clientSecret, redirectURI string) *Server {
	s := &Server{
		ClientID:     clientID,
		ClientSecret: clientSecret,
		RedirectURI:  redirectURI,
		User:         DemoUser,
		now:          time.Now,
	}
	clock := func() time.Time { return s.now() }
	s.codes = expiring.New[grant](0, clock)
	s.tokens = expiring.New[struct{}](0, clock)
	s.refresh = expiring.New[struct{}](0, clock)
	return s
}

// Lock serialises knob changes with requests in flight.
func (s *Server) Lock() { s.mu.Lock() }

// Unlock releases Lock.
func (s *Server) Unlock() { s.mu.Unlock() }

// ServeHTTP routes /oauth/authorize, /oauth/token and /oauth/me under Prefix.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch strings.TrimPrefix(r.URL.Path, s.Prefix) {
	case "/oauth/authorize":
		s.authorize(w, r)
	case "/oauth/token":
		s.token(w, r)
	case "/oauth/me":
		s.me(w, r)
	default:
		http.NotFound(w, r)
	}
}

var consent = devpage.Provider("consent", "WordPress", `{{define "title"}}Authorize{{end}}
{{define "main"}}<div class="card">
<h1>Authorize the application?</h1>
<p>The application <strong>{{.Client}}</strong> asks to sign you in as <strong>{{.User}}</strong> with this blog's WP OAuth Server.</p>
<form method="post" class="actions">
<button name="decision" value="approve" id="approve" class="primary">Approve</button>
<button name="decision" value="deny" id="deny">Deny</button></form>
</div>{{end}}`)

func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	q := r.Form
	s.mu.Lock()
	defer s.mu.Unlock()
	if q.Get("client_id") != s.ClientID {
		http.Error(w, "unknown client_id", http.StatusBadRequest)
		return
	}
	// Never redirect to an unregistered URI: the error goes on the page.
	if q.Get("redirect_uri") != s.RedirectURI {
		http.Error(w, "redirect_uri mismatch", http.StatusBadRequest)
		return
	}
	back, _ := url.Parse(s.RedirectURI)
	v := url.Values{}
	if st := q.Get("state"); st != "" {
		v.Set("state", st)
	}
	if q.Get("response_type") != "code" {
		v.Set("error", "unsupported_response_type")
		back.RawQuery = v.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
		return
	}
	if q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) != 43 {
		v.Set("error", "invalid_request")
		back.RawQuery = v.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
		return
	}
	decision := r.PostForm.Get("decision")
	if s.Deny {
		decision = "deny"
	}
	if !s.AutoApprove && decision == "" {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		consent.Execute(w, map[string]any{"Client": s.ClientID, "User": s.User.Login})
		return
	}
	if decision == "deny" {
		v.Set("error", "access_denied")
		back.RawQuery = v.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
		return
	}
	v.Set("code", s.issueCode(grant{redirectURI: q.Get("redirect_uri"), challenge: q.Get("code_challenge")}))
	back.RawQuery = v.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.TokenCalls++
	hang, status, huge := s.Hang, s.TokenStatus, s.HugeToken
	s.mu.Unlock()
	if hang {
		// The time-out is a backstop, should the client never leave.
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		defer cancel()
		endpoint.Hold(r, ctx.Done())
		return
	}
	if r.Method != http.MethodPost {
		oauthError(w, http.StatusMethodNotAllowed, "invalid_request")
		return
	}
	if status != 0 {
		oauthError(w, status, "server_error")
		return
	}
	if huge > 0 {
		endpoint.Huge{ContentType: "application/json", Prefix: `{"access_token":"`, Fill: 'a', Suffix: `"}`}.Write(w, huge)
		return
	}
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request")
		return
	}
	f := r.PostForm
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = f.Get("client_id"), f.Get("client_secret")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if id != s.ClientID || subtle.ConstantTimeCompare([]byte(secret), []byte(s.ClientSecret)) != 1 {
		oauthError(w, http.StatusUnauthorized, "invalid_client")
		return
	}
	switch f.Get("grant_type") {
	case "authorization_code":
	case "refresh_token":
		if _, ok := s.refresh.Get(f.Get("refresh_token")); !ok {
			oauthError(w, http.StatusBadRequest, "invalid_grant")
			return
		}
		tok := endpoint.Random(24)
		s.tokens.Put(tok, struct{}{}, s.now().Add(tokenLifetime))
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": int(tokenLifetime.Seconds()), "scope": "basic"})
		return
	default:
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type")
		return
	}
	tok, refresh, ok := s.redeemCode(f.Get("code"), f.Get("redirect_uri"), f.Get("code_verifier"))
	if !ok {
		oauthError(w, http.StatusBadRequest, "invalid_grant")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(map[string]any{
		"access_token":  tok,
		"token_type":    "Bearer",
		"expires_in":    int(tokenLifetime.Seconds()),
		"refresh_token": refresh,
		"scope":         "basic",
	})
}

// issueCode issues a code for g; the caller holds s.mu.
func (s *Server) issueCode(g grant) string {
	code := endpoint.Random(24)
	s.codes.Put(code, g, s.now().Add(codeLifetime))
	return code
}

// redeemCode spends code, once even when the exchange fails, for an
// access and a refresh token; the caller holds s.mu.
func (s *Server) redeemCode(code, redirectURI, verifier string) (access, refresh string, ok bool) {
	g, found := s.codes.Take(code)
	sum := sha256.Sum256([]byte(verifier))
	if !found || redirectURI != g.redirectURI || base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge {
		return "", "", false
	}
	access, refresh = endpoint.Random(24), endpoint.Random(24)
	s.tokens.Put(access, struct{}{}, s.now().Add(tokenLifetime))
	s.refresh.Put(refresh, struct{}{}, s.now().Add(refreshLifetime))
	return access, refresh, true
}

func (s *Server) me(w http.ResponseWriter, r *http.Request) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	defer s.mu.Unlock()
	_, live := s.tokens.Get(tok)
	if !ok || !live {
		oauthError(w, http.StatusUnauthorized, "invalid_token")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if s.MeBody != "" {
		w.Write([]byte(s.MeBody))
		return
	}
	json.NewEncoder(w).Encode(s.User)
}

func oauthError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": code})
}
