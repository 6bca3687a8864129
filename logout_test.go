package extauth_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crewjam/saml"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/oidcop"
	"github.com/extauth/extauth/internal/harness"
)

// logouts records what a host's logout hooks saw, and keeps the logout
// session of the last sign-in as a host keeps it with its own session.
type logouts struct {
	mu      sync.Mutex
	events  []extauth.LogoutEvent
	done    []*extauth.Error
	session *extauth.LogoutSession
	fail    error
	asked   int // calls of Session: sign-outs that ran the host's hook
}

func (l *logouts) options(o *extauth.Options) {
	o.Logout = extauth.LogoutOptions{
		ReturnTo: "/signed-out",
		Session: func(r *http.Request, p extauth.Provider) (extauth.LogoutSession, bool) {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.asked++
			if l.session == nil {
				return extauth.LogoutSession{}, false
			}
			return *l.session, true
		},
		OnProviderLogout: func(_ context.Context, e extauth.LogoutEvent) error {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.events = append(l.events, e)
			return l.fail
		},
		Done: func(w http.ResponseWriter, r *http.Request, err *extauth.Error) {
			l.mu.Lock()
			l.done = append(l.done, err)
			l.mu.Unlock()
			if err != nil {
				http.Error(w, "sign-out: "+string(err.Code), err.Code.HTTPStatus())
				return
			}
			http.Redirect(w, r, extauth.ReturnTo(r), http.StatusSeeOther)
		},
	}
}

func (l *logouts) seen() ([]extauth.LogoutEvent, []*extauth.Error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]extauth.LogoutEvent(nil), l.events...), append([]*extauth.Error(nil), l.done...)
}

// logoutApp is an oidc app whose host keeps the logout session of each
// sign-in and lands signed-out browsers on /signed-out.
func logoutApp(t *testing.T, s oidcSetup) (*oidcApp, *logouts) {
	t.Helper()
	l := &logouts{}
	edit := s.opts
	s.opts = func(o *extauth.Options) {
		l.options(o)
		if edit != nil {
			edit(o)
		}
	}
	hostMux := s.mux
	s.mux = func(mux *http.ServeMux, a *extauth.Auth) {
		mux.HandleFunc("/signed-out", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("signed out")) })
		if hostMux != nil {
			hostMux(mux, a)
		}
	}
	return newOIDCApp(t, s), l
}

// signInKeeping signs in through the routes and keeps the identity's logout
// session.
func (a *oidcApp) signInKeeping(b *harness.Browser, l *logouts) *extauth.Identity {
	a.t.Helper()
	if resp := b.Get(a.URL + "/users/auth/oidc"); resp.StatusCode != http.StatusOK {
		a.t.Fatalf("sign-in: %d %s", resp.StatusCode, resp.Body)
	}
	ids := a.identities()
	id := ids[len(ids)-1]
	s := id.LogoutSession()
	l.mu.Lock()
	l.session = &s
	l.mu.Unlock()
	return id
}

// TestOIDCRPInitiatedLogout signs in, then out through the logout route:
// the OP's end_session_endpoint gets id_token_hint, client_id, the
// registered post_logout_redirect_uri and a state; the OP ends its session,
// tells us over the back channel, and returns the browser with the state,
// which lands on LogoutOptions.ReturnTo.
func TestOIDCRPInitiatedLogout(t *testing.T) {
	a, l := logoutApp(t, oidcSetup{})
	b := harness.NewBrowser(t)
	id := a.signInKeeping(b, l)
	if id.SessionID == "" || id.Raw["sid"] != id.SessionID {
		t.Fatalf("the identity has no sid: %q %v", id.SessionID, id.Raw["sid"])
	}
	if got := a.OP.Sessions(id.UID); len(got) != 1 || got[0] != id.SessionID {
		t.Fatalf("OP sessions %v, identity sid %q", got, id.SessionID)
	}
	hops := len(b.Hops)
	resp := b.PostForm(a.URL+"/users/auth/oidc/logout", nil)
	if resp.StatusCode != http.StatusOK || resp.URL.Path != "/signed-out" {
		t.Fatalf("sign-out ended at %s with %d %s\n%s", resp.URL, resp.StatusCode, resp.Body, a.Logs)
	}
	var endSession, postLogout *url.URL
	for _, h := range b.Hops[hops:] {
		u, _ := url.Parse(h)
		switch {
		case strings.HasSuffix(u.Path, "/op/end_session"):
			endSession = u
		case u.Path == "/users/auth/oidc/post_logout":
			postLogout = u
		}
	}
	if endSession == nil || postLogout == nil {
		t.Fatalf("hops %v", b.Hops[hops:])
	}
	q := endSession.Query()
	if q.Get("id_token_hint") != id.Tokens.IDToken || q.Get("client_id") != oidcClientID ||
		q.Get("post_logout_redirect_uri") != a.URL+"/users/auth/oidc/post_logout" || len(q.Get("state")) < 40 {
		t.Errorf("end_session query %v", q)
	}
	if postLogout.Query().Get("state") != q.Get("state") {
		t.Errorf("the OP returned state %q, we sent %q", postLogout.Query().Get("state"), q.Get("state"))
	}
	if got := a.OP.Sessions(id.UID); len(got) != 0 {
		t.Errorf("the OP still holds sessions %v", got)
	}
	events, done := l.seen()
	if len(events) != 1 || events[0] != (extauth.LogoutEvent{Provider: extauth.OIDC, Subject: id.UID, Session: id.SessionID, Issuer: id.Tokens.Issuer, Channel: extauth.LogoutBackChannel}) {
		t.Errorf("back-channel events %+v", events)
	}
	if len(done) != 1 || done[0] != nil {
		t.Errorf("Done saw %v", done)
	}
	for _, c := range b.Jar.Cookies(mustURL(a.URL)) {
		if strings.Contains(c.Name, "logout") {
			t.Errorf("sign-out cookie %s left behind", c.Name)
		}
	}
	if strings.Contains(a.Logs.String(), id.Tokens.IDToken) {
		t.Errorf("the ID token reached the log")
	}
}

// startLogout runs the logout route with a browser that stops at the
// redirect to the OP and returns the state it carries.
func startLogout(t *testing.T, a *oidcApp, b *harness.Browser) string {
	t.Helper()
	resp := b.PostForm(a.URL+"/users/auth/oidc/logout", nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout route: %d %s", resp.StatusCode, resp.Body)
	}
	u, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || !strings.HasSuffix(u.Path, "/end_session") {
		t.Fatalf("logout went to %q", resp.Header.Get("Location"))
	}
	return u.Query().Get("state")
}

// TestOIDCPostLogoutStateChecked: the return from the OP is accepted with
// this browser's state, once; any other is invalid_state and reaches Done
// as such.
func TestOIDCPostLogoutStateChecked(t *testing.T) {
	for _, tc := range []struct {
		name string
		// back returns the post_logout request's browser and state.
		back func(t *testing.T, a *oidcApp, b *harness.Browser, state string) (*harness.Browser, string)
		ok   bool
	}{
		{"the browser's own state", func(_ *testing.T, _ *oidcApp, b *harness.Browser, s string) (*harness.Browser, string) { return b, s }, true},
		{"no state", func(_ *testing.T, _ *oidcApp, b *harness.Browser, _ string) (*harness.Browser, string) { return b, "" }, false},
		{"another state", func(_ *testing.T, _ *oidcApp, b *harness.Browser, s string) (*harness.Browser, string) {
			// Another last character than the state's own, whatever it is.
			last := "A"
			if strings.HasSuffix(s, last) {
				last = "B"
			}
			return b, s[:len(s)-1] + last
		}, false},
		{"another browser", func(t *testing.T, _ *oidcApp, _ *harness.Browser, s string) (*harness.Browser, string) {
			return harness.NewBrowser(t).NoFollow(), s
		}, false},
		{"a state of another browser's sign-out", func(t *testing.T, a *oidcApp, b *harness.Browser, _ string) (*harness.Browser, string) {
			return b, startLogout(t, a, harness.NewBrowser(t).NoFollow())
		}, false},
		{"replayed", func(t *testing.T, a *oidcApp, b *harness.Browser, s string) (*harness.Browser, string) {
			jar := b.Jar.Cookies(mustURL(a.URL))
			if resp := b.Get(a.URL + "/users/auth/oidc/post_logout?state=" + url.QueryEscape(s)); resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("first return: %d %s", resp.StatusCode, resp.Body)
			}
			b.Jar.SetCookies(mustURL(a.URL), jar) // the browser kept a copy of the cookie
			return b, s
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, l := logoutApp(t, oidcSetup{})
			l.session = &extauth.LogoutSession{}
			b := harness.NewBrowser(t).NoFollow()
			state := startLogout(t, a, b)
			rb, st := tc.back(t, a, b, state)
			_, before := l.seen()
			resp := rb.Get(a.URL + "/users/auth/oidc/post_logout?state=" + url.QueryEscape(st))
			_, done := l.seen()
			done = done[len(before):]
			if tc.ok {
				if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/signed-out" || len(done) != 1 || done[0] != nil {
					t.Fatalf("%d %s %v", resp.StatusCode, resp.Header.Get("Location"), done)
				}
				return
			}
			if resp.StatusCode != http.StatusBadRequest || len(done) != 1 || done[0] == nil || done[0].Code != extauth.CodeInvalidState {
				t.Fatalf("%d %s, Done saw %v", resp.StatusCode, resp.Body, done)
			}
		})
	}
}

// TestOIDCLogoutWithoutEndSession: a provider without end_session_endpoint
// (Google) signs out locally, says so in the log, and shows no error page.
func TestOIDCLogoutWithoutEndSession(t *testing.T) {
	a, l := logoutApp(t, oidcSetup{op: func(c *oidcop.Config) { c.NoEndSession = true }})
	b := harness.NewBrowser(t)
	a.signInKeeping(b, l)
	resp := b.PostForm(a.URL+"/users/auth/oidc/logout", url.Values{"return_to": {"/bye?x=1"}})
	if resp.StatusCode != http.StatusNotFound || resp.URL.RequestURI() != "/bye?x=1" {
		t.Fatalf("local sign-out ended at %s with %d", resp.URL, resp.StatusCode)
	}
	if n := a.OP.Hits(oidcop.EndSession); n != 0 {
		t.Errorf("end_session called %d times", n)
	}
	if _, done := l.seen(); len(done) != 1 || done[0] != nil {
		t.Errorf("Done saw %v", done)
	}
	if !strings.Contains(a.Logs.String(), "offers no logout endpoint; signed out locally only") {
		t.Errorf("no log line says the sign-out was local:\n%s", a.Logs)
	}
}

// TestOIDCLogoutURLForHosts: a host that ends its session itself and
// redirects with Auth.LogoutURL gets the same round trip, the state bound
// to the browser by the cookie LogoutURL sets.
func TestOIDCLogoutURLForHosts(t *testing.T) {
	var l *logouts
	a, l := logoutApp(t, oidcSetup{mux: func(mux *http.ServeMux, auth *extauth.Auth) {
		mux.HandleFunc("POST /logout", func(w http.ResponseWriter, r *http.Request) {
			l.mu.Lock()
			s := *l.session
			l.session = nil // the host's own session ends first
			l.mu.Unlock()
			u, err := auth.LogoutURL(w, r, extauth.OIDC, s)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			http.Redirect(w, r, u, http.StatusSeeOther)
		})
	}})
	b := harness.NewBrowser(t)
	a.signInKeeping(b, l)
	resp := b.PostForm(a.URL+"/logout", nil)
	if resp.StatusCode != http.StatusOK || resp.URL.Path != "/signed-out" {
		t.Fatalf("ended at %s with %d %s", resp.URL, resp.StatusCode, resp.Body)
	}
	if events, _ := l.seen(); len(events) != 1 {
		t.Errorf("back-channel events %v", events)
	}
	if _, err := a.Auth.LogoutURL(httptest.NewRecorder(), newRequest(http.MethodPost, a.URL+"/logout", nil), extauth.SAML, extauth.LogoutSession{}); !errors.Is(err, extauth.ErrNotConfigured) {
		t.Errorf("LogoutURL for an unmounted provider: %v", err)
	}
}

// TestOIDCLogoutRouteRefusals: the logout route starts only from this
// site, and with GET or POST; without a provider session it signs out
// locally.
func TestOIDCLogoutRouteRefusals(t *testing.T) {
	a, l := logoutApp(t, oidcSetup{})
	b := harness.NewBrowser(t).NoFollow()
	b.Header.Set("Sec-Fetch-Site", "cross-site")
	if resp := b.PostForm(a.URL+"/users/auth/oidc/logout", nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site sign-out: %d", resp.StatusCode)
	}
	b.Header.Set("Sec-Fetch-Site", "same-origin")
	req, _ := http.NewRequest(http.MethodPut, a.URL+"/users/auth/oidc/logout", nil)
	if resp := b.Do(req); resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, POST" {
		t.Errorf("PUT: %d %v", resp.StatusCode, resp.Header)
	}
	resp := b.PostForm(a.URL+"/users/auth/oidc/logout", nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/signed-out" {
		t.Errorf("no session: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if events, _ := l.seen(); a.OP.Hits(oidcop.EndSession) != 0 || len(events) != 0 {
		t.Errorf("end_session %d times, events %v", a.OP.Hits(oidcop.EndSession), events)
	}
}

// backchannel posts a logout token and returns the answer.
func backchannel(t *testing.T, a *oidcApp, token string) (int, http.Header, string) {
	t.Helper()
	resp, err := http.PostForm(a.URL+"/users/auth/oidc/backchannel_logout", url.Values{"logout_token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(body)
}

// TestOIDCBackchannelLogout: a logout token the OP sends ends the sessions
// it names through OnProviderLogout, answered 200 without caching.
func TestOIDCBackchannelLogout(t *testing.T) {
	a, l := logoutApp(t, oidcSetup{})
	id := a.signInKeeping(harness.NewBrowser(t), l)
	for _, tc := range []struct{ sub, sid string }{{id.UID, id.SessionID}, {id.UID, ""}, {"", id.SessionID}} {
		tok, err := a.OP.LogoutToken(tc.sub, tc.sid)
		if err != nil {
			t.Fatal(err)
		}
		status, h, body := backchannel(t, a, tok)
		if status != http.StatusOK || h.Get("Cache-Control") != "no-store" {
			t.Fatalf("sub %q sid %q: %d %v %s\n%s", tc.sub, tc.sid, status, h, body, a.Logs)
		}
	}
	events, _ := l.seen()
	want := []extauth.LogoutEvent{
		{Provider: extauth.OIDC, Subject: id.UID, Session: id.SessionID, Issuer: id.Tokens.Issuer, Channel: extauth.LogoutBackChannel},
		{Provider: extauth.OIDC, Subject: id.UID, Issuer: id.Tokens.Issuer, Channel: extauth.LogoutBackChannel},
		{Provider: extauth.OIDC, Session: id.SessionID, Issuer: id.Tokens.Issuer, Channel: extauth.LogoutBackChannel},
	}
	if len(events) != len(want) {
		t.Fatalf("events %+v", events)
	}
	for i := range want {
		if events[i] != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, events[i], want[i])
		}
	}
}

// TestOIDCBackchannelLogoutRefusals plays the logout tokens Back-Channel
// Logout 1.0, 2.6 says to refuse, and requests that are not logout tokens:
// each answered 400 with Cache-Control: no-store, the hook never called.
func TestOIDCBackchannelLogoutRefusals(t *testing.T) {
	a, l := logoutApp(t, oidcSetup{})
	id := a.signInKeeping(harness.NewBrowser(t), l)
	token := func(faults ...oidcop.LogoutFault) func(t *testing.T) string {
		return func(t *testing.T) string {
			tok, err := a.OP.LogoutToken(id.UID, id.SessionID, faults...)
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}
	}
	for _, tc := range []struct {
		name  string
		token func(t *testing.T) string
		why   string // in the log
	}{
		{"unsigned", token(oidcop.LogoutUnsigned), `algorithm \"none\"`},
		{"wrong key", token(oidcop.LogoutWrongKey), "signature"},
		{"wrong aud", token(oidcop.LogoutWrongAudience), "audience"},
		{"with nonce", token(oidcop.LogoutWithNonce), "nonce"},
		{"missing events", token(oidcop.LogoutNoEvents), "no events"},
		{"another event", token(oidcop.LogoutWrongEvent), "no http://schemas.openid.net/event/backchannel-logout"},
		{"replayed jti", func(t *testing.T) string {
			tok := token()(t)
			if status, _, body := backchannel(t, a, tok); status != http.StatusOK {
				t.Fatalf("first use: %d %s", status, body)
			}
			return tok
		}, "replayed"},
		{"neither sub nor sid", token(oidcop.LogoutNoSubNoSid), "neither a subject"},
		{"iat outside the window", token(oidcop.LogoutOldIAT), "issued too long ago"},
		{"no jti", token(oidcop.LogoutNoJTI), "no jti"},
		{"typed as another JWT", token(oidcop.LogoutIDTokenType), "typ"},
		{"an ID token", func(*testing.T) string { return id.Tokens.IDToken }, "no events"},
		{"not a JWT", func(*testing.T) string { return "not-a-token" }, "parsing"},
		{"empty", func(*testing.T) string { return "" }, "missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := tc.token(t)
			before, _ := l.seen()
			logged := len(a.Logs.String())
			status, h, body := backchannel(t, a, tok)
			after, _ := l.seen()
			if status != http.StatusBadRequest || h.Get("Cache-Control") != "no-store" || len(after) != len(before) {
				t.Fatalf("%d %v %s; events %d -> %d", status, h, body, len(before), len(after))
			}
			var e struct{ Error string }
			if json.Unmarshal([]byte(body), &e) != nil || e.Error != "invalid_request" {
				t.Errorf("body %s", body)
			}
			if log := a.Logs.String()[logged:]; !strings.Contains(log, tc.why) {
				t.Errorf("the log does not say %q:\n%s", tc.why, log)
			}
		})
	}
	t.Run("GET", func(t *testing.T) {
		resp, err := http.Get(a.URL + "/users/auth/oidc/backchannel_logout")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
			t.Errorf("%d %v", resp.StatusCode, resp.Header)
		}
	})
	t.Run("two tokens", func(t *testing.T) {
		tok := token()(t)
		resp, err := http.PostForm(a.URL+"/users/auth/oidc/backchannel_logout", url.Values{"logout_token": {tok, tok}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%d", resp.StatusCode)
		}
	})
	t.Run("hook fails", func(t *testing.T) {
		l.mu.Lock()
		l.fail = errors.New("session store down")
		l.mu.Unlock()
		defer func() { l.mu.Lock(); l.fail = nil; l.mu.Unlock() }()
		if status, _, _ := backchannel(t, a, token()(t)); status != http.StatusBadRequest {
			t.Errorf("%d", status)
		}
	})
}

// TestOIDCBackchannelLogoutWithoutHook: an application that set no
// OnProviderLogout refuses, so the provider knows its logout did not
// happen.
func TestOIDCBackchannelLogoutWithoutHook(t *testing.T) {
	a := newOIDCApp(t, oidcSetup{})
	tok, err := a.OP.LogoutToken("248289761001", "")
	if err != nil {
		t.Fatal(err)
	}
	if status, _, _ := backchannel(t, a, tok); status != http.StatusBadRequest || !strings.Contains(a.Logs.String(), "OnProviderLogout is not set") {
		t.Errorf("%d\n%s", status, a.Logs)
	}
}

// TestOIDCFrontchannelLogout: the URL the OP has the browser load, with
// iss and sid, ends that session; another issuer or no sid is refused.
func TestOIDCFrontchannelLogout(t *testing.T) {
	a, l := logoutApp(t, oidcSetup{})
	id := a.signInKeeping(harness.NewBrowser(t), l)
	get := func(u string) *harness.Response {
		b := harness.NewBrowser(t)
		b.Header.Set("Sec-Fetch-Site", "cross-site")
		return b.Get(u)
	}
	resp := get(a.OP.FrontchannelLogoutURL(id.SessionID))
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Cache-Control"), "no-store") {
		t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, resp.Body)
	}
	if events, _ := l.seen(); len(events) != 1 || events[0] != (extauth.LogoutEvent{Provider: extauth.OIDC, Session: id.SessionID, Issuer: id.Tokens.Issuer, Channel: extauth.LogoutFrontChannel}) {
		t.Errorf("events %+v", events)
	}
	base := a.URL + "/users/auth/oidc/frontchannel_logout?"
	for name, q := range map[string]url.Values{
		"another issuer": {"iss": {"https://evil.example"}, "sid": {id.SessionID}},
		"no sid":         {"iss": {a.OP.Issuer()}},
		"no iss":         {"sid": {id.SessionID}},
	} {
		if resp := get(base + q.Encode()); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d", name, resp.StatusCode)
		}
	}
	if events, _ := l.seen(); len(events) != 1 {
		t.Errorf("refused requests reached the hook: %+v", events)
	}
}

// TestSAMLLogoutThroughLogoutOptions: the one set of hooks in
// Options.Logout serves SAML single logout too, both ways.
func TestSAMLLogoutThroughLogoutOptions(t *testing.T) {
	idp := newSAMLIdP(t)
	l := &logouts{session: &extauth.LogoutSession{NameID: "ada@example.org", SessionIndex: "idx-1"}}
	a := newSAMLApp(t, idp, func(_ *extauth.Config, o *extauth.Options) { l.options(o) })
	resp := harness.NewBrowser(t).NoFollow().Get(a.URL + "/users/auth/saml/logout")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), idp.SLOURL()) {
		t.Fatalf("SP-initiated logout: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	b := harness.NewBrowser(t)
	u, err := a.Auth.LogoutURL(httptest.NewRecorder(), newRequest(http.MethodPost, a.URL+"/logout", nil), extauth.SAML, *l.session)
	if err != nil || !strings.HasPrefix(u, idp.SLOURL()) {
		t.Fatalf("LogoutURL: %q %v", u, err)
	}
	if resp := b.Get(u); resp.URL.Path != "/signed-out" {
		t.Errorf("the IdP's answer landed on %s (%d)", resp.URL, resp.StatusCode)
	}
	if _, done := l.seen(); len(done) != 1 || done[0] != nil {
		t.Errorf("Done saw %v", done)
	}
	slo := a.URL + "/users/auth/saml/logout"
	lr := &saml.LogoutRequest{ID: "id-idp-2", Version: "2.0", IssueInstant: time.Now(), Destination: slo,
		Issuer: &saml.Issuer{Value: idp.EntityID()}, NameID: &saml.NameID{Value: "ada@example.org", Format: "urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress"},
		SessionIndex: &saml.SessionIndex{Value: "idx-1"}}
	m, err := idp.RedirectMessage(slo, "SAMLRequest", lr.Element(), "")
	if err != nil {
		t.Fatal(err)
	}
	if resp := harness.NewBrowser(t).NoFollow().Get(m); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("IdP-initiated logout: %d %s", resp.StatusCode, resp.Body)
	}
	want := extauth.LogoutEvent{Provider: extauth.SAML, Subject: "ada@example.org", Session: "idx-1",
		NameIDFormat: "urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress", IdP: idp.EntityID(), Channel: extauth.LogoutSAMLRequest}
	if events, _ := l.seen(); len(events) != 1 || events[0] != want {
		t.Errorf("events %+v", events)
	}
}

func TestIdentityLogoutSession(t *testing.T) {
	id := &extauth.Identity{Tokens: extauth.Tokens{IDToken: "id.token.x"},
		SAML: &extauth.SAMLInfo{NameID: "n", NameIDFormat: "f", SessionIndex: "i"}}
	if got := id.LogoutSession(); got != (extauth.LogoutSession{IDToken: "id.token.x", NameID: "n", NameIDFormat: "f", SessionIndex: "i"}) {
		t.Errorf("%+v", got)
	}
	if got := (&extauth.Identity{}).LogoutSession(); got != (extauth.LogoutSession{}) {
		t.Errorf("%+v", got)
	}
}

// TestTenantBackchannelLogout: a tenant's provider logs its users out
// through that tenant's route, and the host learns which tenant.
func TestTenantBackchannelLogout(t *testing.T) {
	var mu sync.Mutex
	var events []extauth.LogoutEvent
	ta := newTenantApp(t, []string{"acme", "beta"}, func(_ *tenantApp, o *extauth.Options) {
		o.Logout.OnProviderLogout = func(_ context.Context, e extauth.LogoutEvent) error {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
			return nil
		}
	})
	b := ta.browser()
	if resp := b.Get(ta.url("acme", "/users/auth/oidc")); resp.Body != "signed in at acme" {
		t.Fatalf("sign-in: %d %s", resp.StatusCode, resp.Body)
	}
	sub := oidcop.DemoUsers()[0].Sub
	sids := ta.OP.Sessions(sub)
	if len(sids) != 1 {
		t.Fatalf("OP sessions %v", sids)
	}
	tok, err := ta.OP.LogoutToken(sub, sids[0])
	if err != nil {
		t.Fatal(err)
	}
	resp := b.PostForm(ta.url("acme", "/users/auth/oidc/backchannel_logout"), url.Values{"logout_token": {tok}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s\n%s", resp.StatusCode, resp.Body, ta.Logs)
	}
	mu.Lock()
	defer mu.Unlock()
	want := extauth.LogoutEvent{Tenant: "acme", Provider: extauth.OIDC, Subject: sub, Session: sids[0], Issuer: ta.OP.Issuer(), Channel: extauth.LogoutBackChannel}
	if len(events) != 1 || events[0] != want {
		t.Errorf("events %+v, want %+v", events, want)
	}
	if _, err := ta.Auth.TokenSource(context.Background(), &extauth.Identity{Tenant: "nobody", Provider: "oidc"}); !errors.Is(err, extauth.ErrUnknownTenant) {
		t.Errorf("TokenSource at an unknown tenant: %v", err)
	}
}

func (l *logouts) sessionAsked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.asked
}

// A sign-out has a sign-in's start rules, for every provider: what the
// table refuses never runs the host's Session hook nor moves the browser
// to the provider; a start without Origin or fetch metadata gets the
// click-to-continue page, whose confirmed POST signs out. blog_oauth2 has
// no logout at the provider (a local sign-out), oidc and saml do.
func TestLogoutStartRules(t *testing.T) {
	const trusted = "https://www.example.org"
	trust := func(o *extauth.Options) { o.TrustedOrigins = []string{trusted} }
	type app struct {
		url, provider string
		l             *logouts
	}
	apps := []func(t *testing.T) app{
		func(t *testing.T) app {
			l := &logouts{}
			a := newApp(t, func(o *extauth.Options) { l.options(o); trust(o) })
			return app{a.URL, "blog_oauth2", l}
		},
		func(t *testing.T) app {
			a, l := logoutApp(t, oidcSetup{opts: trust})
			b := harness.NewBrowser(t)
			a.signInKeeping(b, l)
			return app{a.URL, "oidc", l}
		},
		func(t *testing.T) app {
			l := &logouts{session: &extauth.LogoutSession{NameID: "ada@example.org", SessionIndex: "idx-1"}}
			a := newSAMLApp(t, newSAMLIdP(t), func(_ *extauth.Config, o *extauth.Options) { l.options(o); trust(o) })
			return app{a.URL, "saml", l}
		},
	}
	for _, newApp := range apps {
		a := newApp(t)
		t.Run(a.provider, func(t *testing.T) {
			logoutURL := a.url + "/users/auth/" + a.provider + "/logout"
			for _, tt := range startRuleCases(a.url, trusted) {
				t.Run(fmt.Sprintf("%s %+v", tt.method, tt.h), func(t *testing.T) {
					b := harness.NewBrowser(t).NoFollow()
					b.Header = http.Header{}
					req, _ := http.NewRequest(tt.method, logoutURL, nil)
					tt.h.set(req)
					asked := a.l.sessionAsked()
					resp := b.Do(req)
					ran := a.l.sessionAsked() - asked
					switch tt.want {
					case start:
						if resp.StatusCode != http.StatusSeeOther || ran != 1 {
							t.Fatalf("not signed out: %d %s, Session ran %d times", resp.StatusCode, resp.Body, ran)
						}
					case refuse:
						if resp.StatusCode != http.StatusForbidden || !strings.Contains(resp.Body, "csrf_detected") || ran != 0 {
							t.Fatalf("not refused: %d %s, Session ran %d times", resp.StatusCode, resp.Body, ran)
						}
					case confirm:
						if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Body, `<button type="submit"`) ||
							strings.Contains(resp.Body, "<script") || resp.Header.Get("X-Frame-Options") != "DENY" || ran != 0 {
							t.Fatalf("no click-to-continue page: %d %v, Session ran %d times\n%s", resp.StatusCode, resp.Header, ran, resp.Body)
						}
					}
				})
			}
			t.Run("confirming", func(t *testing.T) {
				b := harness.NewBrowser(t).NoFollow()
				b.Header = http.Header{}
				page := b.PostForm(logoutURL, url.Values{"return_to": {"/next"}})
				action := regexp.MustCompile(`<form method="post" action="([^"]+)">`).FindStringSubmatch(page.Body)
				tok := regexp.MustCompile(`name="extauth_confirm" value="([^"]+)"`).FindStringSubmatch(page.Body)
				if action == nil || tok == nil || action[1] != "/users/auth/"+a.provider+"/logout" {
					t.Fatalf("interstitial:\n%s", page.Body)
				}
				asked := a.l.sessionAsked()
				if again := b.PostForm(a.url+action[1], url.Values{"extauth_confirm": {tok[1] + "x"}}); again.StatusCode != http.StatusOK || a.l.sessionAsked() != asked {
					t.Errorf("a wrong token signed out: %d", again.StatusCode)
				}
				page = b.PostForm(logoutURL, url.Values{"return_to": {"/next"}})
				tok = regexp.MustCompile(`name="extauth_confirm" value="([^"]+)"`).FindStringSubmatch(page.Body)
				resp := b.PostForm(a.url+action[1], url.Values{"extauth_confirm": {tok[1]}, "return_to": {"/next"}})
				if resp.StatusCode != http.StatusSeeOther || a.l.sessionAsked() != asked+1 {
					t.Fatalf("confirmed sign-out: %d %s", resp.StatusCode, resp.Body)
				}
			})
		})
	}
}
