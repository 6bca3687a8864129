package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"html/template"
	"net/http"
	"sync"

	"github.com/extauth/extauth"
)

// sessions is the demo's own sign-in session: an in-memory map from a random
// cookie to the identity. A real application would use its session store.
type sessions struct {
	secure bool
	mu     sync.Mutex
	byID   map[string]*extauth.Identity
}

const sessionCookie = "demo_session"

func newSessions(secure bool) *sessions {
	return &sessions{secure: secure, byID: map[string]*extauth.Identity{}}
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
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Path: "/", MaxAge: -1, HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode})
}

type pages struct {
	auth     *extauth.Auth
	sessions *sessions
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
	p.sessions.signOut(w, r)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}
