package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"strings"
	"sync"

	"github.com/extauth/extauth"
)

// sessions is the demo's own sign-in session: an in-memory map from a random
// cookie to the identity. A real application would use its session store.
//
// A session belongs to the site it was made on: its cookie has no Domain,
// so the browser keeps it to that host, and the identity's Tenant must
// also be the site's when it comes back, so that a cookie carried to
// another tenant's host by any other means names no one there.
type sessions struct {
	secure bool
	mu     sync.Mutex
	byID   map[string]*extauth.Identity
}

const (
	sessionCookie = "demo_session"
	// noticeCookie carries a note for the next page: how a sign-out went.
	noticeCookie = "demo_notice"
)

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
	http.SetCookie(w, s.cookie(sessionCookie, sid, 0))
}

// current returns the session of r at tenant's site.
func (s *sessions) current(r *http.Request, tenant string) (string, *extauth.Identity) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return "", nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.byID[c.Value]
	if id == nil || id.Tenant != tenant {
		return "", nil
	}
	return c.Value, id
}

// signOut ends the session of r at tenant's site and returns its identity,
// nil when there was none.
func (s *sessions) signOut(w http.ResponseWriter, r *http.Request, tenant string) *extauth.Identity {
	sid, id := s.current(r, tenant)
	if id != nil {
		s.mu.Lock()
		delete(s.byID, sid)
		s.mu.Unlock()
	}
	http.SetCookie(w, s.cookie(sessionCookie, "", -1))
	return id
}

func (s *sessions) cookie(name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: maxAge, HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode}
}

// endProviderSessions is Options.Logout.OnProviderLogout: a provider says
// its session ended (a SAML LogoutRequest, an OpenID Connect back- or
// front-channel logout), so the demo sessions it names end too: the one of
// that provider session, or all of that user's, at that tenant.
func (s *sessions) endProviderSessions(_ context.Context, e extauth.LogoutEvent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for sid, id := range s.byID {
		if id.Provider != string(e.Provider) || id.Tenant != e.Tenant {
			continue
		}
		// A user is a user of one IdP (a federation's) or issuer (an
		// OpenID provider whose issuer varies): a logout names which.
		if e.IdP != "" && (id.SAML == nil || id.SAML.IdP != e.IdP) || e.Issuer != "" && id.Tokens.Issuer != e.Issuer {
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

// A notice is the note the next page shows after a sign-out: its kind and
// the provider it is about travel in a short-lived cookie, and the page
// writes the words.
type notice struct {
	kind     string // one of the notice kinds below
	provider extauth.Provider
}

// The notice kinds.
const (
	// noticeLocal: the provider has no way to end its own session (an
	// OAuth provider, Google, a SAML IdP without single logout), so only
	// the demo's ended.
	noticeLocal = "local"
	// noticeProvider: the provider was asked to end its session too.
	noticeProvider = "provider"
	// noticeUnreachable: the provider should have been asked, but the
	// request could not be made (its metadata is unavailable).
	noticeUnreachable = "unreachable"
)

func (s *sessions) setNotice(w http.ResponseWriter, n notice) {
	http.SetCookie(w, s.cookie(noticeCookie, n.kind+"."+string(n.provider), 60))
}

// takeNotice returns the notice r carries, once: it clears the cookie.
func (s *sessions) takeNotice(w http.ResponseWriter, r *http.Request) (notice, bool) {
	c, err := r.Cookie(noticeCookie)
	if err != nil {
		return notice{}, false
	}
	http.SetCookie(w, s.cookie(noticeCookie, "", -1))
	kind, p, _ := strings.Cut(c.Value, ".")
	switch kind {
	case noticeLocal, noticeProvider, noticeUnreachable:
		return notice{kind: kind, provider: extauth.Provider(p)}, true
	}
	return notice{}, false
}
