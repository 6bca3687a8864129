package extauth_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"sync"

	"golang.org/x/oauth2"

	"github.com/extauth/extauth"
)

// appSessions stands for a host's session store: its own session ID (in
// its cookie) to the Identity of the sign-in.
type appSessions struct {
	mu   sync.Mutex
	byID map[string]*extauth.Identity
}

// One set of hooks signs users out through every protocol: the logout
// routes ask Session which provider session to end, a provider's own
// logout (SAML LogoutRequest, OpenID Connect back- or front-channel) calls
// OnProviderLogout, and Done answers the browser when a sign-out ends.
func ExampleLogoutOptions() {
	sessions := &appSessions{byID: map[string]*extauth.Identity{}}
	logout := extauth.LogoutOptions{
		// The browser was sent to /users/auth/<p>/logout by your sign-out
		// button: end your session, and say which provider session to end.
		Session: func(r *http.Request, p extauth.Provider) (extauth.LogoutSession, bool) {
			c, err := r.Cookie("app_session")
			if err != nil {
				return extauth.LogoutSession{}, false
			}
			sessions.mu.Lock()
			defer sessions.mu.Unlock()
			id, ok := sessions.byID[c.Value]
			delete(sessions.byID, c.Value)
			if !ok || id.Provider != string(p) {
				return extauth.LogoutSession{}, false
			}
			return id.LogoutSession(), true
		},
		// The provider says its session ended: end yours, the one of that
		// provider session (e.Session), or all of that user's.
		OnProviderLogout: func(ctx context.Context, e extauth.LogoutEvent) error {
			sessions.mu.Lock()
			defer sessions.mu.Unlock()
			for key, id := range sessions.byID {
				subject := id.UID
				if id.SAML != nil {
					subject = id.SAML.NameID
				}
				if id.Tenant == e.Tenant && id.Provider == string(e.Provider) &&
					(e.Session == "" || e.Session == id.SessionID) && (e.Subject == "" || e.Subject == subject) {
					delete(sessions.byID, key)
				}
			}
			return nil
		},
		// The sign-out is over. err is not nil when the provider's answer
		// could not be verified: then leave the cookie alone, since anyone
		// can send a browser there with a bad one.
		Done: func(w http.ResponseWriter, r *http.Request, err *extauth.Error) {
			if err != nil {
				http.Error(w, "Sign-out could not be confirmed.", err.Code.HTTPStatus())
				return
			}
			http.SetCookie(w, &http.Cookie{Name: "app_session", Path: "/", MaxAge: -1})
			http.Redirect(w, r, extauth.ReturnTo(r), http.StatusSeeOther)
		},
		ReturnTo: "/signed-out",
	}
	cfg, err := extauth.LoadConfig("config/secrets.yml")
	if err != nil {
		log.Fatal(err)
	}
	a, err := extauth.New(cfg, extauth.Options{
		BaseURL:   "https://app.example.org",
		CookieKey: cookieKey(),
		OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
			sessionID := sessions.start(id) // keeps id: its SessionID, its LogoutSession
			http.SetCookie(w, &http.Cookie{Name: "app_session", Value: sessionID, Path: "/", HttpOnly: true, Secure: true})
			http.Redirect(w, r, extauth.ReturnTo(r), http.StatusSeeOther)
		},
		Logout: logout,
	})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	a.Mount(mux)
}

func (s *appSessions) start(id *extauth.Identity) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := fmt.Sprintf("s%d", len(s.byID)+1) // use a random ID in your application
	s.byID[key] = id
	return key
}

func cookieKey() []byte { return make([]byte, 32) }

// A host that ends its session in its own handler sends the browser to the
// provider itself. For OpenID Connect, LogoutURL also sets the cookie that
// binds the returning state to this browser.
func ExampleAuth_LogoutURL() {
	var a *extauth.Auth // from extauth.New, with Options.Logout.Done and ReturnTo
	var current func(*http.Request) *extauth.Identity
	var endSession func(http.ResponseWriter, *http.Request)

	mux := http.NewServeMux()
	mux.HandleFunc("POST /logout", func(w http.ResponseWriter, r *http.Request) {
		id := current(r)
		endSession(w, r) // your own session ends first, whatever the provider does
		if id == nil {
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
		u, err := a.LogoutURL(w, r, extauth.Provider(id.Provider), id.LogoutSession())
		if err != nil {
			// The provider's discovery or metadata cannot be read, say:
			// you are signed out here, not there.
			log.Printf("provider logout: %v", err)
			u = "/"
		}
		http.Redirect(w, r, u, http.StatusSeeOther)
	})
}

// A host that calls an API with the user's tokens renews them through
// extauth: the same HTTP client, time-outs and ID token checks as the
// sign-in.
func ExampleAuth_TokenSource() {
	var a *extauth.Auth
	var id *extauth.Identity // kept from the sign-in (Tenant, Provider and Tokens suffice)
	ctx := context.Background()

	ts, err := a.TokenSource(ctx, id)
	if errors.Is(err, extauth.ErrNoRefresh) {
		log.Printf("%s tokens cannot be renewed: keep using them, or sign in again", id.Provider)
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	resp, err := oauth2.NewClient(ctx, ts).Get("https://api.example.org/v1/me")
	if err != nil {
		var e *extauth.Error
		if errors.As(err, &e) && e.Code == extauth.CodeInvalidResponse {
			log.Printf("the provider refused to renew the tokens: sign in again")
		}
		return
	}
	defer resp.Body.Close()
	// Keep what the source holds now: the provider may have rotated the
	// refresh token, and for OpenID Connect a new, verified ID token is in
	// tok.Extra("id_token").
	tok, err := ts.Token()
	if err == nil {
		id.Tokens.AccessToken, id.Tokens.RefreshToken, id.Tokens.Expiry = tok.AccessToken, tok.RefreshToken, tok.Expiry
	}
}

func ExampleIdentity_LogoutSession() {
	id := &extauth.Identity{
		Provider:  "saml",
		UID:       "ada@example.org",
		SessionID: "_idx-42",
		SAML:      &extauth.SAMLInfo{NameID: "ada@example.org", SessionIndex: "_idx-42"},
	}
	s := id.LogoutSession()
	fmt.Println(s.NameID, s.SessionIndex)
	fmt.Printf("%+v\n", extauth.LogoutSession{IDToken: "eyJhbGciOi..."})
	// Output:
	// ada@example.org _idx-42
	// {IDToken:[REDACTED] NameID: NameIDFormat: SessionIndex:}
}
