package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"html/template"
	"net/http"
	"sync"
	"time"

	"github.com/extauth/extauth"
)

// sessions is the demo's own sign-in session: an in-memory map from a random
// cookie to the identity. A real application would use its session store.
type sessions struct {
	secure bool
	mu     sync.Mutex
	byID   map[string]*extauth.Identity
	// leaving holds, for a session signed out here whose provider still
	// has to end its own, what the provider's logout route asks for: only
	// for the one redirect between the sign-out form and that route.
	leaving map[string]pendingLogout
}

type pendingLogout struct {
	provider extauth.Provider
	session  extauth.LogoutSession
	until    time.Time
}

const (
	sessionCookie = "demo_session"
	// logoutWindow is how long the browser has to follow the redirect from
	// the sign-out form to the provider's logout route.
	logoutWindow = time.Minute
)

func newSessions(secure bool) *sessions {
	return &sessions{secure: secure, byID: map[string]*extauth.Identity{}, leaving: map[string]pendingLogout{}}
}

func (s *sessions) signIn(w http.ResponseWriter, id *extauth.Identity) {
	b := make([]byte, 32)
	rand.Read(b)
	sid := base64.RawURLEncoding.EncodeToString(b)
	s.mu.Lock()
	s.byID[sid] = id
	s.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: sid, Path: "/", HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode})
}

func (s *sessions) current(r *http.Request) (string, *extauth.Identity) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return "", nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return c.Value, s.byID[c.Value]
}

func (s *sessions) signOut(w http.ResponseWriter, r *http.Request) {
	if sid, _ := s.current(r); sid != "" {
		s.mu.Lock()
		delete(s.byID, sid)
		s.mu.Unlock()
	}
	s.clearCookie(w)
}

func (s *sessions) clearCookie(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Path: "/", MaxAge: -1, HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode})
}

// signOutForProvider ends the local session at once and keeps what ending
// the provider's session needs (Identity.LogoutSession: the ID token, or the
// SAML NameID and SessionIndex) for the provider's logout route. The cookie
// stays until the provider has answered, to find them again; it no longer
// names a signed-in user. It reports false when there is no session.
func (s *sessions) signOutForProvider(r *http.Request) (extauth.Provider, bool) {
	sid, id := s.current(r)
	if id == nil {
		return "", false
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, sid)
	for k, p := range s.leaving {
		if now.After(p.until) {
			delete(s.leaving, k)
		}
	}
	p := extauth.Provider(id.Provider)
	s.leaving[sid] = pendingLogout{provider: p, session: id.LogoutSession(), until: now.Add(logoutWindow)}
	return p, true
}

// logoutSession is Options.Logout.Session: the provider session that
// signOutForProvider put aside for this browser, once.
func (s *sessions) logoutSession(r *http.Request, provider extauth.Provider) (extauth.LogoutSession, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return extauth.LogoutSession{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.leaving[c.Value]
	delete(s.leaving, c.Value)
	if !ok || p.provider != provider || time.Now().After(p.until) {
		return extauth.LogoutSession{}, false
	}
	return p.session, true
}

// endProviderSessions is Options.Logout.OnProviderLogout: a provider says
// its session ended (a SAML LogoutRequest, an OpenID Connect back- or
// front-channel logout), so the demo sessions it names end too: the one of
// that provider session, or all of that user's.
func (s *sessions) endProviderSessions(_ context.Context, e extauth.LogoutEvent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for sid, id := range s.byID {
		if id.Provider != string(e.Provider) || id.Tenant != e.Tenant {
			continue
		}
		subject := id.UID
		if id.SAML != nil {
			subject = id.SAML.NameID
		}
		if (e.Session == "" || e.Session == id.SessionID) && (e.Subject == "" || e.Subject == subject) {
			delete(s.byID, sid)
		}
	}
	return nil
}

var logoutFailed = template.Must(template.New("logout").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Single logout failed</title></head>
<body><h1>Single logout failed</h1><p id="slo-failed">{{.Message}}</p><p><code>{{.Code}}</code></p>
<p>This demo no longer knows you; the identity provider may still do.</p><p><a href="/">Home</a></p></body></html>
`))

// logoutDone is Options.Logout.Done. After the provider confirmed the
// logout (or when it could not be asked) the stale cookie goes too. A failed
// confirmation leaves the cookie alone: anyone can send a browser to a
// logout route with a bad one, and that must not sign the user out.
func (s *sessions) logoutDone(w http.ResponseWriter, r *http.Request, err *extauth.Error) {
	if err == nil {
		s.clearCookie(w)
		http.Redirect(w, r, extauth.ReturnTo(r), http.StatusSeeOther)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(err.Code.HTTPStatus())
	logoutFailed.Execute(w, err)
}

type pages struct {
	auth     *extauth.Auth
	sessions *sessions
	// logoutRoutes are the logout routes of the providers that have one.
	logoutRoutes map[extauth.Provider]string
}

var home = template.Must(template.New("home").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>extauth demo</title>
<style>body{font-family:sans-serif;max-width:42em;margin:2em auto}button{margin:.2em;padding:.4em .8em}pre{background:#f4f4f4;padding:1em;overflow:auto}</style>
</head><body><h1>extauth demo</h1>
{{if .Identity}}
<p id="signed-in">Signed in with <b id="provider">{{.Identity.Provider}}</b> as <b id="uid">{{.Identity.UID}}</b>{{with .Identity.Name}} ({{.}}){{end}}.</p>
<pre id="identity">{{.JSON}}</pre>
<form method="post" action="/logout"><button id="logout">Sign out</button></form>
{{else}}
<p id="signed-out">Not signed in.</p>
{{end}}
<h2>Sign in with</h2>
{{range .Providers}}<form method="post" action="/users/auth/{{.}}" style="display:inline"><button id="signin-{{.}}">Sign in with {{.}}</button></form>
{{end}}
<p><a href="/me.json">/me.json</a></p>
</body></html>
`))

func (p *pages) home(w http.ResponseWriter, r *http.Request) {
	_, id := p.sessions.current(r)
	data := struct {
		Identity  *extauth.Identity
		JSON      string
		Providers []extauth.Provider
	}{Identity: id, Providers: p.auth.Providers()}
	if id != nil {
		b, _ := json.MarshalIndent(id, "", "  ")
		data.JSON = string(b)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	home.Execute(w, data)
}

func (p *pages) me(w http.ResponseWriter, r *http.Request) {
	_, id := p.sessions.current(r)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if id == nil {
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"error":"not signed in"}` + "\n"))
		return
	}
	json.NewEncoder(w).Encode(id)
}

func (p *pages) logout(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		http.Error(w, "cross-site sign-out refused", http.StatusForbidden)
		return
	}
	// A SAML or OpenID Connect sign-in ends at the provider as well,
	// through its logout route, which comes back home once the provider
	// has confirmed (or at once, when it cannot end its session).
	if _, id := p.sessions.current(r); id != nil {
		if route, ok := p.logoutRoutes[extauth.Provider(id.Provider)]; ok {
			p.sessions.signOutForProvider(r)
			http.Redirect(w, r, route, http.StatusSeeOther)
			return
		}
	}
	p.sessions.signOut(w, r)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// logoutRoutes maps each provider that has a logout route to its path.
func logoutRoutes(a *extauth.Auth) map[extauth.Provider]string {
	out := map[extauth.Provider]string{}
	for _, rt := range a.Routes() {
		if rt.Purpose == "logout" {
			out[rt.Provider] = rt.Path
		}
	}
	return out
}
