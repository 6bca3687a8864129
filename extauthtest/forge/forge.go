// Package forge is a fake GitHub-style OAuth 2 provider (a code forge's
// "OAuth app"): authorize, access_token and a user API, enough to sign in
// through goth's github provider pointed at it with its custom-URL
// constructor. It tests extauth's goth adapter against a provider extauth
// did not write, and an application's goth providers likewise.
//
// Like the real service, the token endpoint answers errors with HTTP 200
// and an error parameter (incorrect_client_credentials,
// bad_verification_code, redirect_uri_mismatch), takes the client secret in
// the body or in Basic authentication, and answers form-encoded unless
// asked for JSON.
package forge

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/extauth/extauth/extauthtest/internal/endpoint"
	"github.com/extauth/extauth/extauthtest/internal/expiring"
	"github.com/extauth/extauth/internal/devpage"
)

// User is an account of the fake forge.
type User struct {
	ID       int64
	Login    string
	Name     string
	Email    string
	Avatar   string
	Bio      string
	Location string
}

// DemoUser is the account a fake without Users signs in.
var DemoUser = User{ID: 583231, Login: "octo-demo", Name: "Octo Demo", Email: "octo@forge.example",
	Avatar: "https://avatars.forge.example/u/583231", Bio: "Fake account.", Location: "Loopback"}

// Options configure a Server.
type Options struct {
	ClientID     string
	ClientSecret string
	// CallbackURL is the app's registered callback; the authorize request
	// and the exchange must name exactly it. Empty allows any.
	CallbackURL string
	Users       []User
	AutoApprove bool
	// Prefix is the path the server is mounted under, for its pages' links.
	Prefix string
}

// Endpoint names an endpoint for SetFault and Calls.
type Endpoint string

// The endpoints.
const (
	Authorize   Endpoint = "authorize"
	AccessToken Endpoint = "access_token"
	UserAPI     Endpoint = "user"
)

// Fault is a way for an endpoint to misbehave.
type Fault = endpoint.Fault

// The faults.
const (
	FaultNone        = endpoint.None        // behave
	FaultServerError = endpoint.ServerError // answer 500
	FaultHang        = endpoint.Hang        // answer nothing until the client gives up or Close
	FaultHugeBody    = endpoint.HugeBody    // answer HugeBodySize bytes
)

// HugeBodySize is the size of a FaultHugeBody answer.
const HugeBodySize = endpoint.HugeBodySize

type grant struct {
	user        User
	redirectURI string
}

// Server is the fake forge; it is an http.Handler.
type Server struct {
	o      Options
	mux    *http.ServeMux
	faults endpoint.Faults[Endpoint]

	mu          sync.Mutex
	now         func() time.Time
	codes       *expiring.Map[grant]
	tokens      *expiring.Map[User]
	profileBody []byte
}

const (
	// codeLifetime is how long a code may be exchanged, as at GitHub.
	codeLifetime = 10 * time.Minute
	// tokenMemory is how long the fake remembers a token (a real forge's
	// never expire).
	tokenMemory = 24 * time.Hour
)

// New returns a fake forge.
func New(o Options) *Server {
	if len(o.Users) == 0 {
		o.Users = []User{DemoUser}
	}
	o.Prefix = strings.TrimSuffix(o.Prefix, "/")
	s := &Server{o: o, mux: http.NewServeMux(), now: time.Now}
	clock := func() time.Time { return s.now() }
	s.codes = expiring.New[grant](0, clock)
	s.tokens = expiring.New[User](0, clock)
	s.faults.Huge = endpoint.Huge{ContentType: "application/json", Fill: ' '}
	s.mux.HandleFunc("GET /login/oauth/authorize", s.authorize)
	s.mux.HandleFunc("POST /login/oauth/authorize", s.authorize)
	s.mux.HandleFunc("POST /login/oauth/access_token", s.accessToken)
	s.mux.HandleFunc("GET /api/v3/user", s.user)
	return s
}

// ServeHTTP serves the forge's endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close ends every hanging request. The server stays usable.
func (s *Server) Close() { s.faults.Close() }

// URLs returns the authorize, token and profile URLs of a forge served at
// base, in the order goth's github.NewCustomisedURL takes them.
func URLs(base string) (authURL, tokenURL, profileURL, emailURL string) {
	return base + "/login/oauth/authorize", base + "/login/oauth/access_token", base + "/api/v3/user", base + "/api/v3/user/emails"
}

// SetFault makes endpoint misbehave; FaultNone restores it.
func (s *Server) SetFault(e Endpoint, f Fault) { s.faults.Set(e, f) }

// SetProfileBody replaces the body of the user API; nil restores it.
func (s *Server) SetProfileBody(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.profileBody = b
}

// Calls reports how many requests reached endpoint.
func (s *Server) Calls(e Endpoint) int { return s.faults.Calls(e) }

var page = devpage.Provider("authorize", "Forge", `{{define "title"}}Authorize application{{end}}
{{define "main"}}<div class="card">
<h1>Authorize the application?</h1>
<p class="muted">It will read your profile and your email addresses.</p>
<div class="choices">
{{range .Users}}<form method="post" action="{{$.Action}}">{{range $k, $v := $.Query}}<input type="hidden" name="{{$k}}" value="{{index $v 0}}">{{end}}
<input type="hidden" name="user" value="{{.ID}}"><button name="action" value="approve" class="primary">Authorize as {{.Login}}</button></form>
{{end}}</div>
<form method="post" action="{{.Action}}" class="actions">{{range $k, $v := .Query}}<input type="hidden" name="{{$k}}" value="{{index $v 0}}">{{end}}
<button name="action" value="deny">Cancel</button></form>
</div>{{end}}`)

func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	if !s.faults.Enter(w, r, Authorize) {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	q := url.Values{}
	for _, k := range []string{"client_id", "redirect_uri", "state", "scope"} {
		q.Set(k, r.Form.Get(k))
	}
	if q.Get("client_id") != s.o.ClientID {
		http.Error(w, "The client_id is not registered.", http.StatusNotFound)
		return
	}
	ru := q.Get("redirect_uri")
	if ru == "" || (s.o.CallbackURL != "" && ru != s.o.CallbackURL) {
		http.Error(w, "The redirect_uri MUST match the registered callback URL for this application.", http.StatusBadRequest)
		return
	}
	var u *User
	switch {
	case r.Method == http.MethodGet && s.o.AutoApprove:
		u = &s.o.Users[0]
	case r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		page.Execute(w, map[string]any{"Users": s.o.Users, "Query": q, "Action": s.o.Prefix + "/login/oauth/authorize"})
		return
	case r.Form.Get("action") == "approve":
		for i := range s.o.Users {
			if strconv.FormatInt(s.o.Users[i].ID, 10) == r.Form.Get("user") {
				u = &s.o.Users[i]
			}
		}
		if u == nil {
			http.Error(w, "unknown user", http.StatusBadRequest)
			return
		}
	}
	back := url.Values{"state": {q.Get("state")}}
	if u == nil {
		back.Set("error", "access_denied")
		back.Set("error_description", "The user has denied your application access.")
	} else {
		back.Set("code", s.issueCode(grant{user: *u, redirectURI: ru}))
	}
	sep := "?"
	if strings.Contains(ru, "?") {
		sep = "&"
	}
	http.Redirect(w, r, ru+sep+back.Encode(), http.StatusFound)
}

func (s *Server) accessToken(w http.ResponseWriter, r *http.Request) {
	if !s.faults.Enter(w, r, AccessToken) {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	id, secret, basic := r.BasicAuth()
	if !basic {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	reply := func(v map[string]string) {
		if strings.Contains(r.Header.Get("Accept"), "application/json") {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			json.NewEncoder(w).Encode(v)
			return
		}
		f := url.Values{}
		for k, x := range v {
			f.Set(k, x)
		}
		w.Header().Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
		io.WriteString(w, f.Encode())
	}
	if id != s.o.ClientID || secret != s.o.ClientSecret {
		if basic {
			// x/oauth2 tries Basic first and the body on a 401; answer so.
			w.WriteHeader(http.StatusUnauthorized)
		}
		reply(map[string]string{"error": "incorrect_client_credentials", "error_description": "The client_id and/or client_secret passed are incorrect."})
		return
	}
	token, err := s.redeemCode(r.PostForm.Get("code"), r.PostForm.Get("redirect_uri"))
	switch {
	case errors.Is(err, errRedirectMismatch):
		reply(map[string]string{"error": "redirect_uri_mismatch", "error_description": "The redirect_uri MUST match the registered callback URL for this application."})
		return
	case err != nil:
		reply(map[string]string{"error": "bad_verification_code", "error_description": "The code passed is incorrect or expired."})
		return
	}
	reply(map[string]string{"access_token": token, "token_type": "bearer", "scope": r.PostForm.Get("scope")})
}

// issueCode issues a code for g.
func (s *Server) issueCode(g grant) string {
	code := endpoint.Random(20)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.codes.Put(code, g, s.now().Add(codeLifetime))
	return code
}

var (
	errRedirectMismatch = errors.New("forge: the redirect_uri is not the code's")
	errBadCode          = errors.New("forge: the code is unknown, spent or expired")
)

// redeemCode spends code for an access token, which it returns. A
// redirect_uri other than the code's (none is fine) leaves the code
// unspent, as at GitHub.
func (s *Server) redeemCode(code, redirectURI string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.codes.Get(code)
	if ok && redirectURI != "" && redirectURI != g.redirectURI {
		return "", errRedirectMismatch
	}
	s.codes.Delete(code)
	if !ok {
		return "", errBadCode
	}
	token := "gho_" + endpoint.Random(20)
	s.tokens.Put(token, g.user, s.now().Add(tokenMemory))
	return token, nil
}

func (s *Server) user(w http.ResponseWriter, r *http.Request) {
	if !s.faults.Enter(w, r, UserAPI) {
		return
	}
	h := r.Header.Get("Authorization")
	token, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		token, ok = strings.CutPrefix(h, "token ")
	}
	s.mu.Lock()
	u, known := s.tokens.Get(token)
	override := s.profileBody
	s.mu.Unlock()
	if !ok || !known {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"message":"Bad credentials"}`)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	if override != nil {
		w.Write(override)
		return
	}
	json.NewEncoder(w).Encode(map[string]any{
		"id": u.ID, "login": u.Login, "name": u.Name, "email": u.Email,
		"avatar_url": u.Avatar, "bio": u.Bio, "location": u.Location,
	})
}
