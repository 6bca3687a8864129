package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/extauth/extauth"
)

// options are what newApp needs beside the providers' configuration.
type options struct {
	// baseURL is where the application is served.
	baseURL string
	// dbPath is the SQLite database file.
	dbPath string
	// cookieKey seals extauth's transaction cookies: 32 bytes, the same
	// on every instance.
	cookieKey []byte
	logger    *slog.Logger
	// httpClient is the base of extauth's outbound client (nil: the
	// default).
	httpClient *http.Client
	// developer mounts the developer provider (development only; see
	// dev.go).
	developer bool
	// router is the router the pages and extauth's routes are served on:
	// "chi" (default), "servemux" or "gorilla" (routers.go).
	router string
}

// app is the host application: its own users and sessions, its pages,
// and extauth's routes for signing in.
type app struct {
	auth    *extauth.Auth
	store   *store
	log     *slog.Logger
	secure  bool
	handler http.Handler
}

// newApp opens the database and builds the application on its router.
func newApp(ctx context.Context, cfg *extauth.Config, o options) (*app, error) {
	st, err := openStore(ctx, o.dbPath)
	if err != nil {
		return nil, err
	}
	a := &app{store: st, log: o.logger, secure: strings.HasPrefix(o.baseURL, "https://")}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	eo := extauth.Options{
		BaseURL:    o.baseURL,
		CookieKey:  o.cookieKey,
		Logger:     a.log,
		HTTPClient: o.httpClient,
		// One hook for every provider: the account is (provider, uid).
		OnSuccess: a.signedIn,
		OnFailure: a.signInFailed,
		Logout: extauth.LogoutOptions{
			OnProviderLogout: a.providerSignedOut,
			Done:             a.signedOut,
		},
	}
	if o.developer {
		if err := addDeveloper(&eo); err != nil {
			st.Close()
			return nil, err
		}
	}
	if a.auth, err = extauth.New(cfg, eo); err != nil {
		st.Close()
		return nil, err
	}
	var h http.Handler
	switch o.router {
	case "", "chi":
		h = a.chiRouter()
	case "servemux":
		h = a.serveMux()
	case "gorilla":
		h = a.gorillaRouter()
	default:
		a.Close()
		return nil, fmt.Errorf("unknown router %q: chi, servemux or gorilla", o.router)
	}
	// Go's protection against cross-origin POSTs covers every page; the
	// routes identity providers POST to from their own site (the SAML
	// callback and logout) go through to extauth's own checks.
	cop := http.NewCrossOriginProtection()
	a.auth.AllowCrossSiteCallbacks(cop)
	a.handler = securityHeaders(cop.Handler(h))
	return a, nil
}

// chiRouter serves the pages and extauth's routes on chi.
func (a *app) chiRouter() http.Handler {
	r := chi.NewRouter()
	r.Get("/", a.home)
	r.Get("/account", a.account)
	r.Post("/signout", a.signOut)
	r.Method(http.MethodGet, "/healthz", a.auth.ReadyHandler())
	// extauth's routes, at its default prefix /users/auth/.
	r.Mount("/users/auth", a.auth)
	return r
}

func (a *app) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.handler.ServeHTTP(w, r) }

// Auth is the application's extauth, for its tests' extauthtest.Mock.
func (a *app) Auth() *extauth.Auth { return a.auth }

// Close stops extauth's background work and closes the database.
func (a *app) Close() error { return errors.Join(a.auth.Close(), a.store.Close()) }

func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "strict-origin-when-cross-origin")
		if !strings.HasPrefix(r.URL.Path, "/users/auth/") {
			// extauth sets its own on its pages.
			h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'")
		}
		next.ServeHTTP(w, r)
	})
}

// The application's session cookie. On HTTPS the __Host- prefix keeps it
// to this host, over HTTPS, on every path.
func (a *app) sessionCookie() string {
	if a.secure {
		return "__Host-hostapp_session"
	}
	return "hostapp_session"
}

func (a *app) setSessionCookie(w http.ResponseWriter, token string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: a.sessionCookie(), Value: token, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: a.secure, SameSite: http.SameSiteLaxMode})
}

// signedIn is extauth's OnSuccess: record the user, start the
// application's own session, go where the sign-in was asked to go.
func (a *app) signedIn(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
	now := time.Now()
	if err := a.store.signIn(r.Context(), id, now); err != nil {
		a.serverError(w, "recording the user", err)
		return
	}
	token, err := a.store.newSession(r.Context(), id, now)
	if err != nil {
		a.serverError(w, "starting a session", err)
		return
	}
	a.setSessionCookie(w, token, int(sessionTTL.Seconds()))
	a.log.Info("signed in", "provider", id.Provider)
	http.Redirect(w, r, extauth.ReturnTo(r), http.StatusSeeOther)
}

// signInFailed is extauth's OnFailure: the failure page, in words a user
// understands, with the code for support.
func (a *app) signInFailed(w http.ResponseWriter, r *http.Request, err *extauth.Error) {
	a.render(w, err.Code.HTTPStatus(), failurePage, failureData{
		Provider: providerName(extauth.Provider(err.Provider)),
		Reason:   failureReason(err.Code),
		Code:     string(err.Code),
	})
}

// current returns the signed-in user of r, or nil.
func (a *app) current(r *http.Request) (*session, *user) {
	c, err := r.Cookie(a.sessionCookie())
	if err != nil {
		return nil, nil
	}
	ss, err := a.store.session(r.Context(), c.Value, time.Now())
	if err != nil {
		if !errors.Is(err, sql.ErrNoRows) {
			a.log.Error("reading the session", "err", err)
		}
		return nil, nil
	}
	u, err := a.store.user(r.Context(), ss.Provider, ss.UID)
	if err != nil {
		a.log.Error("reading the user", "err", err)
		return nil, nil
	}
	return ss, u
}

func (a *app) home(w http.ResponseWriter, r *http.Request) {
	_, u := a.current(r)
	var buttons []button
	for _, p := range a.auth.Providers() {
		buttons = append(buttons, button{Provider: string(p), Label: "Sign in with " + providerName(p)})
	}
	a.render(w, http.StatusOK, homePage, homeData{User: u, Via: via(u), Buttons: buttons, SignedOut: r.URL.Query().Has("signed_out")})
}

func (a *app) account(w http.ResponseWriter, r *http.Request) {
	_, u := a.current(r)
	if u == nil {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	a.render(w, http.StatusOK, accountPage, homeData{User: u, Via: via(u)})
}

// signOut ends the application's session, then the provider's where the
// provider can end its own (SAML single logout, OpenID Connect
// RP-initiated logout): extauth's LogoutURL sends the browser there, and
// signedOut answers when it comes back. Elsewhere the sign-out is local.
func (a *app) signOut(w http.ResponseWriter, r *http.Request) {
	c, err := r.Cookie(a.sessionCookie())
	if err != nil {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	a.setSessionCookie(w, "", -1)
	ss, err := a.store.endSession(r.Context(), c.Value, time.Now())
	if err != nil {
		http.Redirect(w, r, "/?signed_out", http.StatusSeeOther)
		return
	}
	u, err := a.auth.LogoutURL(w, r, extauth.Provider(ss.Provider), ss.Logout)
	if err != nil {
		// A provider no longer configured, or one that cannot be
		// reached: this site has signed out in any case.
		a.log.Warn("signing out at the provider", "provider", ss.Provider, "err", err)
		u = "/"
	}
	if u == "/" {
		u = "/?signed_out"
	}
	http.Redirect(w, r, u, http.StatusSeeOther)
}

// signedOut is extauth's Logout.Done: the provider has answered the
// sign-out (or there was nothing to ask it).
func (a *app) signedOut(w http.ResponseWriter, r *http.Request, err *extauth.Error) {
	if err != nil {
		a.render(w, err.Code.HTTPStatus(), signedOutPage, failureData{Code: string(err.Code)})
		return
	}
	http.Redirect(w, r, "/?signed_out", http.StatusSeeOther)
}

// providerSignedOut is extauth's Logout.OnProviderLogout: the provider
// says its session ended (a SAML IdP's LogoutRequest, an OpenID Connect
// back- or front-channel logout), so the sessions it names end here too.
func (a *app) providerSignedOut(ctx context.Context, e extauth.LogoutEvent) error {
	n, err := a.store.endProviderSessions(ctx, e)
	if err == nil {
		a.log.Info("provider signed out", "provider", e.Provider, "channel", e.Channel, "sessions", n)
	}
	return err
}

func (a *app) serverError(w http.ResponseWriter, what string, err error) {
	a.log.Error(what, "err", err)
	http.Error(w, "Something went wrong on our side. Please try again.", http.StatusInternalServerError)
}
