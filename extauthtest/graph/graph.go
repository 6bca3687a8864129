// Package graph is a fake Facebook-style OAuth 2 provider and Graph API
// (extauth's socialnet), for the tests and the development of applications
// that sign in with extauth, and for extauth's own: the login dialog, the
// code exchange and /me, checked the way the real service checks them.
// extauthtest.StartProviders starts one registered for an application's
// callback URL.
//
// The dialog accepts only the registered app and redirect URIs. The code
// exchange checks the client secret, that redirect_uri is identical to the
// dialog's, an S256 PKCE verifier when a challenge was sent, and that the
// code is fresh and unused (a second use also revokes the token the first
// one bought, as RFC 6749 section 4.1.2 recommends). /me requires
// appsecret_proof, the hex HMAC-SHA256 of the access token keyed with the
// app secret, and answers only the fields asked for.
//
// Knobs make it misbehave for the bad-case tests: a person who cancels the
// dialog, server errors, a hang that ends with the request's context, huge
// or malformed bodies, and a replacement profile body.
package graph

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/extauth/extauth/extauthtest/internal/endpoint"
	"github.com/extauth/extauth/extauthtest/internal/expiring"
	"github.com/extauth/extauth/internal/devpage"
)

// User is an account of the fake provider.
type User struct {
	ID        string
	Name      string
	FirstName string
	LastName  string
	Email     string // returned only when the email permission was granted
	Picture   string
}

// DemoUser is the account a fake without Users signs in.
var DemoUser = User{
	ID:        "10158123456789012",
	Name:      "Demo Person",
	FirstName: "Demo",
	LastName:  "Person",
	Email:     "demo.person@socialnet.example",
	Picture:   "https://scontent.socialnet.example/v/demo.jpg",
}

// Options configure a Server.
type Options struct {
	// AppID and AppSecret are the registered app's credentials.
	AppID     string
	AppSecret string
	// RedirectURIs are the app's "Valid OAuth Redirect URIs"; the dialog
	// refuses any other. Empty allows any http(s) URL.
	RedirectURIs []string
	// Users are the accounts offered on the dialog; DemoUser when empty.
	Users []User
	// AutoApprove signs the first user in without showing the dialog.
	AutoApprove bool
	// Prefix is the path the server is mounted under on a larger mux, for
	// the links of its pages.
	Prefix string
	// Version, when set, is the only Graph API version served ("v21.0");
	// otherwise any vN.N is.
	Version string
	// Now is the fake's clock; time.Now when nil.
	Now func() time.Time
}

// Endpoint names a server endpoint for Fault and Calls.
type Endpoint string

// The endpoints.
const (
	Dialog      Endpoint = "dialog"
	AccessToken Endpoint = "access_token"
	Me          Endpoint = "me"
)

// Fault is a way for an endpoint to misbehave.
type Fault = endpoint.Fault

// The faults.
const (
	// FaultNone: behave.
	FaultNone = endpoint.None
	// FaultServerError answers 500 with a Graph error body.
	FaultServerError = endpoint.ServerError
	// FaultHang answers nothing until the client gives up or the server
	// is closed.
	FaultHang = endpoint.Hang
	// FaultHugeBody answers 200 with a body of HugeBodySize bytes.
	FaultHugeBody = endpoint.HugeBody
	// FaultMalformed answers 200 with a body that is not JSON.
	FaultMalformed = endpoint.Malformed
	// FaultDeny, on Dialog, sends the browser back as a person who
	// cancels the dialog does: with error=access_denied.
	FaultDeny = endpoint.Deny
)

// HugeBodySize is the size of a FaultHugeBody answer.
const HugeBodySize = endpoint.HugeBodySize

// CodeLifetime is how long an authorization code may be exchanged.
const CodeLifetime = 10 * time.Minute

const (
	// codeMemory is how long a code is remembered: past CodeLifetime, its
	// exchange is told it expired, and a second one that it was used.
	codeMemory = time.Hour
	// tokenLifetime is a long-lived user token's, as expires_in says.
	tokenLifetime = 5183944 * time.Second
	// dialogLifetime is how long the dialog waits for a decision.
	dialogLifetime = time.Hour
)

type dialogRequest struct {
	redirectURI string
	state       string
	scopes      []string
	challenge   string
}

type grant struct {
	dialogRequest
	user    User
	created time.Time
	used    bool
	token   string // the access token the code bought, revoked on reuse
}

// Server is the fake provider; it is an http.Handler.
type Server struct {
	o      Options
	mux    *http.ServeMux
	faults endpoint.Faults[Endpoint]

	mu            sync.Mutex
	pending       *expiring.Map[dialogRequest]
	codes         *expiring.Map[*grant]
	tokens        *expiring.Map[*grant]
	tokensInQuery int
	profileBody   []byte
	tokenBody     []byte
}

var versionRE = regexp.MustCompile(`^v[0-9]+\.[0-9]+$`)

// New returns a fake provider.
func New(o Options) *Server {
	if len(o.Users) == 0 {
		o.Users = []User{DemoUser}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	o.Prefix = strings.TrimSuffix(o.Prefix, "/")
	s := &Server{
		o:       o,
		mux:     http.NewServeMux(),
		pending: expiring.New[dialogRequest](0, o.Now),
		codes:   expiring.New[*grant](0, o.Now),
		tokens:  expiring.New[*grant](0, o.Now),
	}
	s.faults.ServerError = func(w http.ResponseWriter) {
		graphError(w, http.StatusInternalServerError, "OAuthException", 2, 0, "An unexpected error has occurred. Please retry your request later.")
	}
	s.faults.Huge = endpoint.Huge{ContentType: "application/json; charset=UTF-8", Prefix: `{"padding":"`, Fill: 'a', Suffix: `"}`}
	s.faults.Malformed = endpoint.Body{ContentType: "application/json; charset=UTF-8", Text: `<html><body>Sorry, something went wrong.</body></html>`}
	s.mux.HandleFunc("GET /{version}/dialog/oauth", s.dialog)
	s.mux.HandleFunc("POST /{version}/dialog/oauth", s.dialogDecision)
	s.mux.HandleFunc("/{version}/oauth/access_token", s.accessToken)
	s.mux.HandleFunc("GET /{version}/me", s.me)
	return s
}

// ServeHTTP serves the provider's endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close ends every hanging request. The server stays usable.
func (s *Server) Close() { s.faults.Close() }

// SetFault makes endpoint misbehave; FaultNone restores it.
func (s *Server) SetFault(e Endpoint, f Fault) { s.faults.Set(e, f) }

// SetProfileBody replaces the JSON body of /me (after the request passed
// every check); nil restores the real profile.
func (s *Server) SetProfileBody(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.profileBody = b
}

// SetTokenBody replaces the JSON body of a successful code exchange (the
// code is still spent); nil restores the real answer.
func (s *Server) SetTokenBody(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokenBody = b
}

// Calls reports how many requests reached endpoint, failed ones included.
func (s *Server) Calls(e Endpoint) int { return s.faults.Calls(e) }

// TokensInQuery reports how many Graph requests carried an access token in
// their URL, which the real API allows and careful clients never do.
func (s *Server) TokensInQuery() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokensInQuery
}

// enter counts the call and plays the endpoint's fault, then checks the
// API version; it reports whether the handler should go on.
func (s *Server) enter(w http.ResponseWriter, r *http.Request, e Endpoint) bool {
	if !s.faults.Enter(w, r, e) {
		return false
	}
	if !versionRE.MatchString(r.PathValue("version")) || (s.o.Version != "" && r.PathValue("version") != s.o.Version) {
		graphError(w, http.StatusBadRequest, "GraphMethodException", 100, 0, "Unknown path components")
		return false
	}
	return true
}

// graphError writes the Graph API's error shape.
func graphError(w http.ResponseWriter, status int, typ string, code, subcode int, message string) {
	e := map[string]any{"message": message, "type": typ, "code": code, "fbtrace_id": "AfakeTrace"}
	if subcode != 0 {
		e["error_subcode"] = subcode
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.Header().Set("WWW-Authenticate", `OAuth "Facebook Platform" "invalid_request" "`+message+`"`)
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": e})
}

var page = devpage.Provider("dialog", "Social network", `{{define "title"}}Log in{{end}}
{{define "main"}}<div class="card">
<h1>Continue to the application?</h1>
<p class="muted">It will receive your name and profile picture{{if .Email}} and your email address{{end}}.</p>
<div class="choices">
{{range .Users}}<form method="post" action="{{$.Action}}">
<input type="hidden" name="request" value="{{$.Request}}">
<input type="hidden" name="user" value="{{.ID}}">
<button name="action" value="approve" class="primary">Continue as {{.Name}}</button>
</form>
{{end}}</div>
<form method="post" action="{{.Action}}" class="actions">
<input type="hidden" name="request" value="{{.Request}}">
<button name="action" value="deny">Cancel</button>
</form>
</div>{{end}}`)

func (s *Server) dialog(w http.ResponseWriter, r *http.Request) {
	if !s.enter(w, r, Dialog) {
		return
	}
	q := r.URL.Query()
	// Errors before the redirect URI is known good are shown, never
	// redirected: redirecting them would make the dialog an open redirector.
	if q.Get("client_id") != s.o.AppID {
		http.Error(w, "Invalid App ID: the provided app ID does not look like a valid app ID.", http.StatusBadRequest)
		return
	}
	ru := q.Get("redirect_uri")
	u, err := url.Parse(ru)
	if ru == "" || err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" ||
		(len(s.o.RedirectURIs) > 0 && !slices.Contains(s.o.RedirectURIs, ru)) {
		http.Error(w, "URL blocked: this redirect failed because the redirect URI is not whitelisted in the app's Client OAuth Settings.", http.StatusBadRequest)
		return
	}
	if rt := q.Get("response_type"); rt != "" && rt != "code" {
		http.Error(w, "Unsupported response_type.", http.StatusBadRequest)
		return
	}
	dr := dialogRequest{redirectURI: ru, state: q.Get("state"), scopes: strings.FieldsFunc(q.Get("scope"), func(r rune) bool { return r == ',' || r == ' ' })}
	if ch := q.Get("code_challenge"); ch != "" {
		if q.Get("code_challenge_method") != "S256" {
			http.Error(w, "Only the S256 code challenge method is accepted.", http.StatusBadRequest)
			return
		}
		dr.challenge = ch
	}
	if s.faults.Get(Dialog) == FaultDeny {
		s.decide(w, r, dr, nil)
		return
	}
	if s.o.AutoApprove {
		s.decide(w, r, dr, &s.o.Users[0])
		return
	}
	id := endpoint.Random(24)
	s.mu.Lock()
	s.pending.Put(id, dr, s.o.Now().Add(dialogLifetime))
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	page.Execute(w, map[string]any{
		"Users":   s.o.Users,
		"Request": id,
		"Email":   slices.Contains(dr.scopes, "email"),
		"Action":  s.o.Prefix + "/" + r.PathValue("version") + "/dialog/oauth",
	})
}

func (s *Server) dialogDecision(w http.ResponseWriter, r *http.Request) {
	if !s.enter(w, r, Dialog) {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	id := r.PostFormValue("request")
	s.mu.Lock()
	dr, ok := s.pending.Take(id)
	s.mu.Unlock()
	if !ok {
		http.Error(w, "This dialog has expired.", http.StatusBadRequest)
		return
	}
	if r.PostFormValue("action") != "approve" {
		s.decide(w, r, dr, nil)
		return
	}
	for i := range s.o.Users {
		if s.o.Users[i].ID == r.PostFormValue("user") {
			s.decide(w, r, dr, &s.o.Users[i])
			return
		}
	}
	http.Error(w, "unknown user", http.StatusBadRequest)
}

// decide redirects to the app with a code, or with the error the real
// dialog sends when the person cancels.
func (s *Server) decide(w http.ResponseWriter, r *http.Request, dr dialogRequest, u *User) {
	q := url.Values{}
	if u == nil {
		q.Set("error", "access_denied")
		q.Set("error_code", "200")
		q.Set("error_description", "Permissions error")
		q.Set("error_reason", "user_denied")
	} else {
		q.Set("code", s.issueCode(dr, *u))
	}
	if dr.state != "" {
		q.Set("state", dr.state)
	}
	// The real dialog appends this fragment; browsers keep it to themselves.
	http.Redirect(w, r, endpoint.AppendQuery(dr.redirectURI, q)+"#_=_", http.StatusFound)
}

func (s *Server) accessToken(w http.ResponseWriter, r *http.Request) {
	if !s.enter(w, r, AccessToken) {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		graphError(w, http.StatusBadRequest, "OAuthException", 100, 0, "Malformed request body")
		return
	}
	if r.Form.Get("client_id") != s.o.AppID {
		graphError(w, http.StatusBadRequest, "OAuthException", 101, 0, "Error validating application. Invalid application ID.")
		return
	}
	if sec := r.Form.Get("client_secret"); sec == "" || !hmac.Equal([]byte(sec), []byte(s.o.AppSecret)) {
		graphError(w, http.StatusBadRequest, "OAuthException", 1, 0, "Error validating client secret.")
		return
	}
	token, fail := s.redeemCode(r.Form.Get("code"), r.Form.Get("redirect_uri"), r.Form.Get("code_verifier"))
	if fail != nil {
		graphError(w, http.StatusBadRequest, "OAuthException", 100, fail.subcode, fail.message)
		return
	}
	s.mu.Lock()
	body := s.tokenBody
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.Header().Set("Cache-Control", "no-store")
	if body != nil {
		w.Write(body)
		return
	}
	json.NewEncoder(w).Encode(map[string]any{"access_token": token, "token_type": "bearer", "expires_in": int(tokenLifetime.Seconds())})
}

// issueCode issues a code for u's approval of dr.
func (s *Server) issueCode(dr dialogRequest, u User) string {
	code := endpoint.Random(24)
	now := s.o.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.codes.Put(code, &grant{dialogRequest: dr, user: u, created: now}, now.Add(codeMemory))
	return code
}

// codeError is why a code exchange fails: the Graph error's subcode and
// message (its code is always 100).
type codeError struct {
	subcode int
	message string
}

// redeemCode spends code for an access token, which it returns, checking
// the redirect URI and the PKCE verifier of the exchange.
func (s *Server) redeemCode(code, redirectURI, verifier string) (string, *codeError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.codes.Get(code)
	switch {
	case !ok:
		return "", &codeError{0, "Invalid verification code format."}
	case g.used:
		// Reuse means the code leaked: revoke what it bought.
		s.tokens.Delete(g.token)
		return "", &codeError{36009, "This authorization code has been used."}
	case s.o.Now().Sub(g.created) > CodeLifetime:
		return "", &codeError{36007, "This authorization code has expired."}
	case redirectURI != g.redirectURI:
		return "", &codeError{0, "Error validating verification code. Please make sure your redirect_uri is identical to the one you used in the OAuth dialog request"}
	case g.challenge != "" && !pkceMatches(verifier, g.challenge):
		return "", &codeError{0, "Invalid code verifier."}
	}
	g.used = true
	g.token = "EAA" + endpoint.Random(24)
	s.tokens.Put(g.token, g, s.o.Now().Add(tokenLifetime))
	return g.token, nil
}

func pkceMatches(verifier, challenge string) bool {
	sum := sha256.Sum256([]byte(verifier))
	return verifier != "" && hmac.Equal([]byte(base64.RawURLEncoding.EncodeToString(sum[:])), []byte(challenge))
}

func (s *Server) me(w http.ResponseWriter, r *http.Request) {
	if !s.enter(w, r, Me) {
		return
	}
	q := r.URL.Query()
	token := ""
	if h := r.Header.Get("Authorization"); len(h) > 7 && strings.EqualFold(h[:7], "Bearer ") {
		token = h[7:]
	} else if h := r.Header.Get("Authorization"); len(h) > 6 && strings.EqualFold(h[:6], "OAuth ") {
		token = h[6:]
	}
	if t := q.Get("access_token"); t != "" {
		s.mu.Lock()
		s.tokensInQuery++
		s.mu.Unlock()
		if token == "" {
			token = t
		}
	}
	if token == "" {
		graphError(w, http.StatusBadRequest, "OAuthException", 2500, 0, "An active access token must be used to query information about the current user.")
		return
	}
	s.mu.Lock()
	g, ok := s.tokens.Get(token)
	override := s.profileBody
	s.mu.Unlock()
	if !ok {
		graphError(w, http.StatusBadRequest, "OAuthException", 190, 0, "Invalid OAuth access token - Cannot parse access token")
		return
	}
	proof := q.Get("appsecret_proof")
	if proof == "" {
		graphError(w, http.StatusBadRequest, "GraphMethodException", 100, 0, "API calls from the server require an appsecret_proof argument")
		return
	}
	mac := hmac.New(sha256.New, []byte(s.o.AppSecret))
	mac.Write([]byte(token))
	if got, err := hex.DecodeString(proof); err != nil || !hmac.Equal(got, mac.Sum(nil)) {
		graphError(w, http.StatusBadRequest, "GraphMethodException", 100, 0, "Invalid appsecret_proof provided in the API argument")
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	if override != nil {
		w.Write(override)
		return
	}
	fields := strings.Split(q.Get("fields"), ",")
	if q.Get("fields") == "" {
		fields = []string{"id", "name"}
	}
	u := g.user
	out := map[string]any{}
	for _, f := range fields {
		switch strings.TrimSpace(f) {
		case "id":
			out["id"] = u.ID
		case "name":
			out["name"] = u.Name
		case "first_name":
			out["first_name"] = u.FirstName
		case "last_name":
			out["last_name"] = u.LastName
		case "email":
			if u.Email != "" && slices.Contains(g.scopes, "email") {
				out["email"] = u.Email
			}
		case "picture":
			out["picture"] = map[string]any{"data": map[string]any{
				"height": 50, "width": 50, "is_silhouette": u.Picture == "", "url": u.Picture,
			}}
		default:
			graphError(w, http.StatusBadRequest, "OAuthException", 100, 0, "(#100) Tried accessing nonexisting field")
			return
		}
	}
	json.NewEncoder(w).Encode(out)
}
