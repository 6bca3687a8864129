// Package oauth1 is a fake Twitter-style OAuth 1.0a provider (extauth's
// microblog), for the tests and the development of applications that sign
// in with extauth, and for extauth's own: request_token, authenticate,
// access_token and 1.1/account/verify_credentials.json, checked the way the
// real service checks them. extauthtest.StartProviders starts one
// registered for an application's callback URL.
//
// Every request's HMAC-SHA1 signature is recomputed with its own encoder
// (not extauth's internal/oauth1, so that a mistake there cannot hide
// itself), the timestamp must lie within a window of the fake's clock, a
// nonce is accepted once, the callback must be registered, request tokens
// and verifiers are single use, and the access token alone (without its
// secret) opens nothing.
//
// Knobs make it misbehave for the bad-case tests: a user who refuses,
// server errors, a hang that ends with the request's context, huge or
// malformed bodies, a missing oauth_callback_confirmed, and a replacement
// profile body.
package oauth1

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/extauth/extauth/extauthtest/internal/endpoint"
	"github.com/extauth/extauth/extauthtest/internal/expiring"
	"github.com/extauth/extauth/internal/devpage"
)

// User is an account of the fake provider.
type User struct {
	ID          string // id_str; also sent as the numeric id when it parses
	ScreenName  string
	Name        string
	Email       string // sent only when include_email=true
	Image       string
	Description string
	Location    string
}

// DemoUser is the account a fake without Users signs in.
var DemoUser = User{
	ID:          "1234567890123456789",
	ScreenName:  "demo_user",
	Name:        "Demo User",
	Email:       "demo@microblog.example",
	Image:       "https://pbs.microblog.example/profile_images/demo_normal.png",
	Description: "A fake account of the development provider.",
	Location:    "Loopback",
}

// Options configure a Server.
type Options struct {
	// ConsumerKey and ConsumerSecret are the registered application's
	// credentials.
	ConsumerKey    string
	ConsumerSecret string
	// CallbackURLs are the registered callback URLs. A request token asked
	// for with any other oauth_callback is refused, as Twitter does. Empty
	// allows any http(s) URL.
	CallbackURLs []string
	// Users are the accounts offered on the consent page; DemoUser when empty.
	Users []User
	// AutoApprove signs the first user in without showing a page.
	AutoApprove bool
	// Prefix is the path the server is mounted under on a larger mux
	// ("/fake/microblog"), used for the links of its pages. Signatures are
	// checked against the URL the client requested, whatever the prefix.
	Prefix string
	// Now is the fake's clock; time.Now when nil.
	Now func() time.Time
	// Window is how far a request's oauth_timestamp may lie from Now;
	// five minutes when zero.
	Window time.Duration
}

// Endpoint names a server endpoint for Fault and Calls.
type Endpoint string

// The endpoints.
const (
	RequestToken      Endpoint = "request_token"
	Authenticate      Endpoint = "authenticate"
	AccessToken       Endpoint = "access_token"
	VerifyCredentials Endpoint = "verify_credentials"
)

// Fault is a way for an endpoint to misbehave.
type Fault = endpoint.Fault

// The faults.
const (
	// FaultNone: behave.
	FaultNone = endpoint.None
	// FaultServerError answers 500.
	FaultServerError = endpoint.ServerError
	// FaultHang answers nothing until the client gives up or the server
	// is closed.
	FaultHang = endpoint.Hang
	// FaultHugeBody answers 200 with a body of HugeBodySize bytes.
	FaultHugeBody = endpoint.HugeBody
	// FaultMalformed answers 200 with a body that is not what the endpoint
	// should send.
	FaultMalformed = endpoint.Malformed
	// FaultDeny, on Authenticate, sends the browser back as a user who
	// clicks Cancel does: with denied=<token>.
	FaultDeny = endpoint.Deny
)

// HugeBodySize is the size of a FaultHugeBody answer: past any sane bound.
const HugeBodySize = endpoint.HugeBodySize

type requestToken struct {
	secret   string
	callback string
	user     *User  // set once the user approved
	verifier string // set once the user approved
}

const (
	// requestTokenLifetime is how long a request token waits for the
	// user's decision and its exchange.
	requestTokenLifetime = 15 * time.Minute
	// accessTokenMemory is how long the fake remembers an access token
	// (the real service's never expire).
	accessTokenMemory = 24 * time.Hour
)

type accessToken struct {
	secret string
	user   User
}

// Server is the fake provider; it is an http.Handler.
type Server struct {
	o      Options
	mux    *http.ServeMux
	faults endpoint.Faults[Endpoint]

	mu            sync.Mutex
	requestTokens *expiring.Map[*requestToken]
	accessTokens  *expiring.Map[*accessToken]
	// nonces are the nonces spent, each until its timestamp is out of
	// the window.
	nonces        *expiring.Map[struct{}]
	omitConfirmed bool
	profileBody   []byte
}

// New returns a fake provider.
func New(o Options) *Server {
	if len(o.Users) == 0 {
		o.Users = []User{DemoUser}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Window <= 0 {
		o.Window = 5 * time.Minute
	}
	o.Prefix = strings.TrimSuffix(o.Prefix, "/")
	s := &Server{
		o:             o,
		mux:           http.NewServeMux(),
		requestTokens: expiring.New[*requestToken](0, o.Now),
		accessTokens:  expiring.New[*accessToken](0, o.Now),
		nonces:        expiring.New[struct{}](0, o.Now),
	}
	s.faults.Huge = endpoint.Huge{ContentType: "text/html; charset=utf-8", Prefix: "oauth_token=", Fill: 'a'}
	s.faults.Malformed = endpoint.Body{ContentType: "application/json", Text: `{"oauth_token": [unterminated`}
	s.mux.HandleFunc("POST /oauth/request_token", s.requestToken)
	s.mux.HandleFunc("GET /oauth/authenticate", s.authenticatePage)
	s.mux.HandleFunc("GET /oauth/authorize", s.authenticatePage)
	s.mux.HandleFunc("POST /oauth/authenticate", s.authenticateDecision)
	s.mux.HandleFunc("POST /oauth/access_token", s.accessToken)
	s.mux.HandleFunc("GET /1.1/account/verify_credentials.json", s.verifyCredentials)
	return s
}

// ServeHTTP serves the provider's endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close ends every hanging request. The server stays usable.
func (s *Server) Close() { s.faults.Close() }

// SetFault makes endpoint misbehave; FaultNone restores it.
func (s *Server) SetFault(e Endpoint, f Fault) { s.faults.Set(e, f) }

// OmitCallbackConfirmed makes request_token answer without
// oauth_callback_confirmed=true, as a provider ignoring the callback would.
func (s *Server) OmitCallbackConfirmed(omit bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.omitConfirmed = omit
}

// SetProfileBody replaces the JSON body of verify_credentials (after the
// request passed every check); nil restores the real profile.
func (s *Server) SetProfileBody(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.profileBody = b
}

// Calls reports how many requests reached endpoint, failed ones included.
func (s *Server) Calls(e Endpoint) int { return s.faults.Calls(e) }

// twitterError writes the JSON error shape of the real API.
func twitterError(w http.ResponseWriter, status, code int, message string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{
		"errors": []map[string]any{{"code": code, "message": message}},
	})
}

func (s *Server) requestToken(w http.ResponseWriter, r *http.Request) {
	if !s.faults.Enter(w, r, RequestToken) {
		return
	}
	p, ok := s.verify(w, r, func(token string) (string, bool) { return "", token == "" })
	if !ok {
		return
	}
	cb := p["oauth_callback"]
	u, err := url.Parse(cb)
	if cb == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		twitterError(w, http.StatusBadRequest, 214, "Bad Authentication data: oauth_callback is required and must be an absolute URL.")
		return
	}
	if len(s.o.CallbackURLs) > 0 && !slices.Contains(s.o.CallbackURLs, cb) {
		twitterError(w, http.StatusForbidden, 415, "Callback URL not approved for this client application.")
		return
	}
	token, secret := s.issueRequestToken(cb)
	s.mu.Lock()
	omit := s.omitConfirmed
	s.mu.Unlock()
	v := url.Values{"oauth_token": {token}, "oauth_token_secret": {secret}}
	if !omit {
		v.Set("oauth_callback_confirmed", "true")
	}
	// The real service answers text/html whatever the body is.
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	io.WriteString(w, v.Encode())
}

// issueRequestToken issues a request token and its secret for a sign-in
// that comes back to callback.
func (s *Server) issueRequestToken(callback string) (token, secret string) {
	token, secret = endpoint.Random(20), endpoint.Random(20)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requestTokens.Put(token, &requestToken{secret: secret, callback: callback}, s.o.Now().Add(requestTokenLifetime))
	return token, secret
}

// lookupRequest returns the live request token, or nil.
func (s *Server) lookupRequest(token string) *requestToken {
	s.mu.Lock()
	defer s.mu.Unlock()
	rt, _ := s.requestTokens.Get(token)
	return rt
}

var page = devpage.Provider("consent", "Microblog", `{{define "title"}}Authorize application{{end}}
{{define "main"}}<div class="card">
<h1>Authorize this application to use your account?</h1>
<p class="muted">It will see your profile and email address, and sign you in. Pick an account:</p>
<div class="choices">
{{range .Users}}<form method="post" action="{{$.Action}}">
<input type="hidden" name="oauth_token" value="{{$.Token}}">
<input type="hidden" name="user" value="{{.ID}}">
<button name="action" value="approve" class="primary">Sign in as @{{.ScreenName}} ({{.Name}})</button>
</form>
{{end}}</div>
<form method="post" action="{{.Action}}" class="actions">
<input type="hidden" name="oauth_token" value="{{.Token}}">
<button name="action" value="deny">Cancel</button>
</form>
</div>{{end}}`)

func (s *Server) authenticatePage(w http.ResponseWriter, r *http.Request) {
	if !s.faults.Enter(w, r, Authenticate) {
		return
	}
	token := r.URL.Query().Get("oauth_token")
	if s.lookupRequest(token) == nil {
		http.Error(w, "This page is no longer valid: the request token is unknown, used or expired.", http.StatusBadRequest)
		return
	}
	if s.faults.Get(Authenticate) == FaultDeny {
		s.decide(w, r, token, nil)
		return
	}
	if s.o.AutoApprove {
		s.decide(w, r, token, &s.o.Users[0])
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	page.Execute(w, map[string]any{"Users": s.o.Users, "Token": token, "Action": s.o.Prefix + "/oauth/authenticate"})
}

func (s *Server) authenticateDecision(w http.ResponseWriter, r *http.Request) {
	if !s.faults.Enter(w, r, Authenticate) {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	token := r.PostFormValue("oauth_token")
	if s.lookupRequest(token) == nil {
		http.Error(w, "This page is no longer valid: the request token is unknown, used or expired.", http.StatusBadRequest)
		return
	}
	if r.PostFormValue("action") != "approve" {
		s.decide(w, r, token, nil)
		return
	}
	for i := range s.o.Users {
		if s.o.Users[i].ID == r.PostFormValue("user") {
			s.decide(w, r, token, &s.o.Users[i])
			return
		}
	}
	http.Error(w, "unknown user", http.StatusBadRequest)
}

// decide sends the browser back to the callback: with a verifier when the
// user approved, with denied=<token> (and the token forgotten) when not.
func (s *Server) decide(w http.ResponseWriter, r *http.Request, token string, u *User) {
	callback, verifier := s.approve(token, u)
	if callback == "" {
		http.Error(w, "This page is no longer valid: the request token is unknown, used or expired.", http.StatusBadRequest)
		return
	}
	q := url.Values{}
	if u == nil {
		q.Set("denied", token)
	} else {
		q.Set("oauth_token", token)
		q.Set("oauth_verifier", verifier)
	}
	http.Redirect(w, r, endpoint.AppendQuery(callback, q), http.StatusFound)
}

// approve records u's decision on a live request token, and returns its
// callback and the verifier of the approval; nil u forgets the token.
func (s *Server) approve(token string, u *User) (callback, verifier string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rt, ok := s.requestTokens.Get(token)
	if !ok {
		return "", ""
	}
	if u == nil {
		s.requestTokens.Delete(token)
		return rt.callback, ""
	}
	rt.user = u
	rt.verifier = endpoint.Random(20)
	return rt.callback, rt.verifier
}

func (s *Server) accessToken(w http.ResponseWriter, r *http.Request) {
	if !s.faults.Enter(w, r, AccessToken) {
		return
	}
	var rt *requestToken
	p, ok := s.verify(w, r, func(token string) (string, bool) {
		rt = s.lookupRequest(token)
		if rt == nil {
			return "", false
		}
		return rt.secret, true
	})
	if !ok {
		return
	}
	at, secret, refusal := s.exchange(p["oauth_token"], rt, p["oauth_verifier"])
	if refusal != "" {
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, refusal)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	io.WriteString(w, url.Values{
		"oauth_token":        {at},
		"oauth_token_secret": {secret},
		"user_id":            {rt.user.ID},
		"screen_name":        {rt.user.ScreenName},
	}.Encode())
}

// exchange trades request token rt, which token names, and the verifier
// of its approval, for an access token and its secret; or returns why
// not, as the service words it.
func (s *Server) exchange(token string, rt *requestToken, verifier string) (at, secret, refusal string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Check again under the lock: two exchanges of one request token may
	// race, and only one may win.
	if held, _ := s.requestTokens.Get(token); held != rt || rt.user == nil {
		return "", "", "Invalid request token."
	}
	if verifier == "" || !hmac.Equal([]byte(verifier), []byte(rt.verifier)) {
		return "", "", "Error processing your OAuth request: Invalid oauth_verifier parameter"
	}
	s.requestTokens.Delete(token)
	at, secret = endpoint.Random(20), endpoint.Random(20)
	s.accessTokens.Put(at, &accessToken{secret: secret, user: *rt.user}, s.o.Now().Add(accessTokenMemory))
	return at, secret, ""
}

func (s *Server) verifyCredentials(w http.ResponseWriter, r *http.Request) {
	if !s.faults.Enter(w, r, VerifyCredentials) {
		return
	}
	var at *accessToken
	_, ok := s.verify(w, r, func(token string) (string, bool) {
		s.mu.Lock()
		defer s.mu.Unlock()
		at, _ = s.accessTokens.Get(token)
		if at == nil {
			return "", false
		}
		return at.secret, true
	})
	if !ok {
		return
	}
	s.mu.Lock()
	override := s.profileBody
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	if override != nil {
		w.Write(override)
		return
	}
	u := at.user
	prof := map[string]any{
		"id_str":                  u.ID,
		"screen_name":             u.ScreenName,
		"name":                    u.Name,
		"location":                u.Location,
		"description":             u.Description,
		"profile_image_url_https": u.Image,
		"verified":                false,
		"protected":               false,
	}
	if n, err := strconv.ParseInt(u.ID, 10, 64); err == nil {
		prof["id"] = n
	}
	if r.URL.Query().Get("include_email") == "true" {
		if u.Email != "" {
			prof["email"] = u.Email
		} else {
			prof["email"] = nil
		}
	}
	if r.URL.Query().Get("skip_status") != "true" {
		prof["status"] = map[string]any{"text": "hello from the fake"}
	}
	json.NewEncoder(w).Encode(prof)
}

// verify checks the request's OAuth signature and freshness. secretFor
// returns the secret of the oauth_token the request names ("" for none)
// and whether that token is acceptable here. It answers the failure itself
// and returns the protocol parameters on success.
func (s *Server) verify(w http.ResponseWriter, r *http.Request, secretFor func(token string) (string, bool)) (map[string]string, bool) {
	p, err := parseAuthorization(r.Header.Get("Authorization"))
	if err != nil {
		twitterError(w, http.StatusBadRequest, 215, "Bad Authentication data.")
		return nil, false
	}
	for _, k := range []string{"oauth_consumer_key", "oauth_nonce", "oauth_signature", "oauth_signature_method", "oauth_timestamp"} {
		if p[k] == "" {
			twitterError(w, http.StatusBadRequest, 215, "Bad Authentication data.")
			return nil, false
		}
	}
	if p["oauth_signature_method"] != "HMAC-SHA1" || (p["oauth_version"] != "" && p["oauth_version"] != "1.0") {
		twitterError(w, http.StatusBadRequest, 215, "Bad Authentication data.")
		return nil, false
	}
	if p["oauth_consumer_key"] != s.o.ConsumerKey {
		twitterError(w, http.StatusUnauthorized, 32, "Could not authenticate you.")
		return nil, false
	}
	ts, err := strconv.ParseInt(p["oauth_timestamp"], 10, 64)
	now := s.o.Now()
	if err != nil || now.Sub(time.Unix(ts, 0)).Abs() > s.o.Window {
		twitterError(w, http.StatusUnauthorized, 135, "Timestamp out of bounds.")
		return nil, false
	}
	tokenSecret, ok := secretFor(p["oauth_token"])
	if !ok {
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, "Invalid or expired token.")
		return nil, false
	}
	params, err := signedParameters(r, p)
	if err != nil {
		twitterError(w, http.StatusBadRequest, 215, "Bad Authentication data.")
		return nil, false
	}
	base := baseString(r, params)
	mac := hmac.New(sha1.New, []byte(esc(s.o.ConsumerSecret)+"&"+esc(tokenSecret)))
	mac.Write([]byte(base))
	got, err := base64.StdEncoding.DecodeString(p["oauth_signature"])
	if err != nil || !hmac.Equal(got, mac.Sum(nil)) {
		twitterError(w, http.StatusUnauthorized, 32, "Could not authenticate you.")
		return nil, false
	}
	// Only a correctly signed request spends its nonce, so garbage cannot
	// burn a client's future nonces.
	key := p["oauth_consumer_key"] + "\x00" + p["oauth_token"] + "\x00" + p["oauth_timestamp"] + "\x00" + p["oauth_nonce"]
	if !s.spendNonce(key, time.Unix(ts, 0)) {
		twitterError(w, http.StatusUnauthorized, 32, "Could not authenticate you.")
		return nil, false
	}
	return p, true
}

// spendNonce records the nonce key of a request signed at ts, and reports
// whether it was new. A nonce is kept until ts is out of the window.
func (s *Server) spendNonce(key string, ts time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, seen := s.nonces.Get(key); seen {
		return false
	}
	s.nonces.Put(key, struct{}{}, ts.Add(2*s.o.Window))
	return true
}

// parseAuthorization reads `OAuth k="v", ...` (RFC 5849 section 3.5.1).
func parseAuthorization(h string) (map[string]string, error) {
	scheme, rest, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "OAuth") {
		return nil, fmt.Errorf("not an OAuth Authorization header")
	}
	out := map[string]string{}
	for _, part := range strings.Split(rest, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok || len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
			return nil, fmt.Errorf("malformed parameter")
		}
		dk, err := url.PathUnescape(k)
		if err != nil {
			return nil, err
		}
		dv, err := url.PathUnescape(v[1 : len(v)-1])
		if err != nil {
			return nil, err
		}
		if _, dup := out[dk]; dup {
			return nil, fmt.Errorf("repeated parameter")
		}
		out[dk] = dv
	}
	return out, nil
}

// signedParameters collects what the signature covers: the query as the
// client sent it, a form body, and the protocol parameters less
// oauth_signature and realm.
func signedParameters(r *http.Request, oauth map[string]string) (url.Values, error) {
	params := url.Values{}
	reqURL, err := url.ParseRequestURI(r.RequestURI)
	if err != nil {
		return nil, err
	}
	q, err := url.ParseQuery(reqURL.RawQuery)
	if err != nil {
		return nil, err
	}
	for k, vs := range q {
		params[k] = append(params[k], vs...)
	}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		if err != nil {
			return nil, err
		}
		f, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, err
		}
		for k, vs := range f {
			params[k] = append(params[k], vs...)
		}
	}
	for k, v := range oauth {
		if k != "oauth_signature" && k != "realm" {
			params.Add(k, v)
		}
	}
	return params, nil
}

// baseString is RFC 5849 section 3.4.1, written apart from extauth's
// signer on purpose. The URI is the one the client addressed: r.RequestURI
// is untouched by http.StripPrefix, so the fake verifies correctly when
// mounted under a prefix.
func baseString(r *http.Request, params url.Values) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	host := strings.ToLower(r.Host)
	host = strings.TrimSuffix(host, map[string]string{"http": ":80", "https": ":443"}[scheme])
	path := r.RequestURI
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	var pairs [][2]string
	for k, vs := range params {
		for _, v := range vs {
			pairs = append(pairs, [2]string{esc(k), esc(v)})
		}
	}
	sort.Slice(pairs, func(i, j int) bool {
		if pairs[i][0] != pairs[j][0] {
			return pairs[i][0] < pairs[j][0]
		}
		return pairs[i][1] < pairs[j][1]
	})
	joined := make([]string, len(pairs))
	for i, p := range pairs {
		joined[i] = p[0] + "=" + p[1]
	}
	return strings.ToUpper(r.Method) + "&" + esc(scheme+"://"+host+path) + "&" + esc(strings.Join(joined, "&"))
}

// esc is RFC 3986 percent-encoding by way of the standard library: Go's
// query escaping leaves exactly the unreserved characters alone except
// that it writes a space as "+".
func esc(s string) string { return strings.ReplaceAll(url.QueryEscape(s), "+", "%20") }
