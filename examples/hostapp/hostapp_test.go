package main

// These tests are how a host tests its sign-in with package extauthtest,
// both ways:
//
//   - mock mode: extauthtest.Mock(auth).SignIn(provider) makes the next
//     sign-in with that provider yield a user, with no provider at all,
//     through the application's real routes, hooks, session and pages;
//   - real protocols: extauthtest.NewProviders starts fake providers that
//     speak OAuth, OpenID Connect and SAML, registered for the
//     application's own callback URLs, and the application signs in
//     against them as it would against the real ones.

import (
	"context"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest"
)

// serveApp serves the application on 127.0.0.1 with a fresh database and
// the configuration cfg makes for its base URL.
func serveApp(t *testing.T, cfg func(base string) *extauth.Config, o options) (*app, string) {
	t.Helper()
	var a *app
	srv := extauthtest.Serve(t, func(base string) http.Handler {
		o.baseURL, o.cookieKey = base, make([]byte, 32)
		o.dbPath = filepath.Join(t.TempDir(), "app.db")
		var err error
		if a, err = newApp(context.Background(), cfg(base), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		return a
	})
	return a, srv.URL
}

// noProviders is a test environment that configures no provider at all:
// mock mode needs none.
func noProviders(string) *extauth.Config { return &extauth.Config{} }

// The three lines: queue a sign-in, press the application's button, land
// on the account page as the provider's default user.
func TestMockSAMLSignIn(t *testing.T) {
	a, base := serveApp(t, noProviders, options{})

	extauthtest.Mock(a.Auth()).SignIn(extauth.SAML)
	page := extauthtest.NewBrowser(t).Post(base+"/users/auth/saml", url.Values{"return_to": {"/account"}})

	if page.URL.Path != "/account" || !strings.Contains(page.Body, `<dd id="name">Ada Lovelace</dd>`) {
		t.Fatalf("ended at %s (%d): %s", page.URL, page.StatusCode, page.Body)
	}
}

// Users are keyed by (provider, uid): the same person signing in twice is
// one user, and the same email at two providers is two users, since only
// the provider's uid is stable.
func TestMockUsersKeyedByProviderAndUID(t *testing.T) {
	a, base := serveApp(t, noProviders, options{})
	m := extauthtest.Mock(a.Auth())
	for _, p := range extauth.BuiltinProviders() {
		for range 2 {
			m.SignIn(p)
			extauthtest.NewBrowser(t).Post(base+"/users/auth/"+string(p), nil)
		}
	}
	same := extauthtest.DefaultIdentity(extauth.OIDC)
	same.UID = "someone-else"
	m.SignIn(extauth.SearchOAuth2, same) // alice@example.org, like oidc's
	extauthtest.NewBrowser(t).Post(base+"/users/auth/search_oauth2", nil)

	var users, twice int
	a.store.db.QueryRow(`SELECT count(*), count(*) FILTER (WHERE sign_ins = 2) FROM users`).Scan(&users, &twice)
	if users != 7 || twice != 6 {
		t.Fatalf("%d users, %d signed in twice; want 7 and 6", users, twice)
	}
}

// What the provider says about the email shows: verified or not.
func TestMockUnverifiedEmail(t *testing.T) {
	a, base := serveApp(t, noProviders, options{})
	id := extauthtest.DefaultIdentity(extauth.OIDC)
	id.Email, id.EmailVerified = "bob@example.org", false
	extauthtest.Mock(a.Auth()).SignIn(extauth.OIDC, id)
	page := extauthtest.NewBrowser(t).Post(base+"/users/auth/oidc", url.Values{"return_to": {"/account"}})
	if !strings.Contains(page.Body, "bob@example.org (not verified)") {
		t.Fatalf("account page: %s", page.Body)
	}
}

// Each failure code reaches the failure page, in words and with the code.
func TestMockFailurePage(t *testing.T) {
	a, base := serveApp(t, noProviders, options{})
	for code, words := range map[extauth.Code]string{
		extauth.CodeAccessDenied:        "cancelled",
		extauth.CodeTimeout:             "did not answer",
		extauth.CodeInvalidResponse:     "could not verify",
		extauth.CodeProviderUnavailable: "did not answer",
		extauth.CodeMisconfigured:       "not set up correctly",
	} {
		extauthtest.Mock(a.Auth()).Fail(extauth.Socialnet, code)
		page := extauthtest.NewBrowser(t).Post(base+"/users/auth/socialnet", nil)
		if page.StatusCode != code.HTTPStatus() || !strings.Contains(page.Body, words) ||
			!strings.Contains(page.Body, `<code id="failure-code">`+string(code)+`</code>`) {
			t.Errorf("%s: %d %s", code, page.StatusCode, page.Body)
		}
	}
}

// Signing out of a session whose provider cannot end its own is local.
func TestMockSignOut(t *testing.T) {
	a, base := serveApp(t, noProviders, options{})
	extauthtest.Mock(a.Auth()).SignIn(extauth.Microblog)
	b := extauthtest.NewBrowser(t)
	account := b.Post(base+"/users/auth/microblog", url.Values{"return_to": {"/account"}})
	home := b.Click(account, "Sign out")
	if home.URL.String() != base+"/?signed_out" || !strings.Contains(home.Body, "You are signed out") {
		t.Fatalf("after sign-out: %s %s", home.URL, home.Body)
	}
	if page := b.Get(base + "/account"); page.URL.Path != "/" {
		t.Fatalf("the session survived: %s", page.URL)
	}
}

// The application signs in and out alike on each router it can be served
// on.
func TestRouters(t *testing.T) {
	for _, router := range []string{"chi", "servemux", "gorilla"} {
		a, base := serveApp(t, noProviders, options{router: router})
		extauthtest.Mock(a.Auth()).SignIn(extauth.OIDC)
		b := extauthtest.NewBrowser(t)
		home := b.Get(base + "/")
		if len(a.Auth().Providers()) != 0 || !strings.Contains(home.Body, "No sign-in provider is configured") {
			t.Fatalf("%s: home page %s", router, home.Body)
		}
		account := b.Post(base+"/users/auth/oidc", url.Values{"return_to": {"/account"}})
		signedOut := b.Click(account, "Sign out")
		if !strings.Contains(account.Body, "Alice Example") || signedOut.URL.String() != base+"/?signed_out" {
			t.Errorf("%s: signed in at %s, out at %s", router, account.URL, signedOut.URL)
		}
		if page := b.Get(base + "/healthz"); page.StatusCode != http.StatusOK || page.Body != "ready\n" {
			t.Errorf("%s: /healthz %d %q", router, page.StatusCode, page.Body)
		}
		if page := b.PostFrom("https://evil.example/", base+"/signout", nil); page.StatusCode != http.StatusForbidden {
			t.Errorf("%s: cross-site sign-out: %d", router, page.StatusCode)
		}
	}
}

// serveAppWithFakes serves the application configured for fake providers
// of the real protocols, and waits until it has their metadata and
// discovery documents.
func serveAppWithFakes(t *testing.T, o extauthtest.ProvidersOptions) (*app, string, *extauthtest.Providers) {
	t.Helper()
	var fakes *extauthtest.Providers
	a, base := serveApp(t, func(base string) *extauth.Config {
		fakes = extauthtest.NewProviders(t, base, o)
		return fakes.Config()
	}, options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.Auth().Ready(ctx); err != nil {
		t.Fatal(err)
	}
	return a, base, fakes
}

// A SAML sign-in through the IdP's signed, encrypted assertion, and
// single logout through the IdP.
func TestSAMLSignInAndSingleLogout(t *testing.T) {
	_, base, fakes := serveAppWithFakes(t, extauthtest.ProvidersOptions{Only: []extauth.Provider{extauth.SAML}, SAMLKeyPair: true})
	b := extauthtest.NewBrowser(t)

	account := b.Click(b.Get(base+"/"), "Sign in with your organization (SSO)")
	if account.URL.Path != "/account" || !strings.Contains(account.Body, `<dd id="uid">ada@example.org</dd>`) {
		t.Fatalf("sign-in ended at %s: %s", account.URL, account.Body)
	}

	home := b.Click(account, "Sign out")
	if home.URL.String() != base+"/?signed_out" {
		t.Fatalf("sign-out ended at %s: %s", home.URL, home.Body)
	}
	lo := fakes.SAML.LastLogout()
	if lo == nil || !lo.Signed || lo.Request.NameID == nil || lo.Request.NameID.Value != "ada@example.org" {
		t.Fatalf("the IdP saw no logout of ada: %+v", lo)
	}
	if !strings.Contains(b.History[len(b.History)-3], fakes.URL(extauth.SAML)+"/slo") {
		t.Errorf("sign-out did not go through the IdP: %q", b.History)
	}
	if page := b.Get(base + "/account"); page.URL.Path != "/" {
		t.Fatal("the session survived the sign-out")
	}
}

// An OpenID Connect sign-in; the provider's back-channel logout ends the
// application's session.
func TestOIDCSignInAndBackchannelLogout(t *testing.T) {
	_, base, fakes := serveAppWithFakes(t, extauthtest.ProvidersOptions{Only: []extauth.Provider{extauth.OIDC}})
	b := extauthtest.NewBrowser(t)
	account := b.Click(b.Get(base+"/"), "Sign in with your OpenID provider")
	if !strings.Contains(account.Body, `<dd id="name">Alice Example</dd>`) ||
		!strings.Contains(account.Body, "alice@example.org (verified by the provider)") {
		t.Fatalf("sign-in ended at %s: %s", account.URL, account.Body)
	}

	const sub = "248289761001"
	sids := fakes.OIDC.Sessions(sub)
	if len(sids) != 1 {
		t.Fatalf("the provider has sessions %v", sids)
	}
	token, err := fakes.OIDC.LogoutToken(sub, sids[0])
	if err != nil {
		t.Fatal(err)
	}
	if status, body, err := fakes.OIDC.SendBackchannelLogout(context.Background(), token); err != nil || status != http.StatusOK {
		t.Fatalf("back-channel logout: %d %s %v", status, body, err)
	}
	if page := b.Get(base + "/account"); page.URL.Path != "/" {
		t.Fatal("the session survived the provider's logout")
	}
}

// The failure page, fed by a provider that misbehaves for real.
func TestFailurePageFromRealProviders(t *testing.T) {
	_, base, fakes := serveAppWithFakes(t, extauthtest.ProvidersOptions{Only: []extauth.Provider{extauth.SAML, extauth.OIDC}})
	for _, c := range []struct {
		provider extauth.Provider
		fault    extauthtest.Fault
		code     extauth.Code
	}{
		{extauth.SAML, extauthtest.Deny, extauth.CodeAccessDenied},
		{extauth.SAML, extauthtest.BadSignature, extauth.CodeInvalidResponse},
		{extauth.OIDC, extauthtest.Expired, extauth.CodeInvalidResponse},
	} {
		if err := fakes.SetFault(c.provider, c.fault); err != nil {
			t.Fatal(err)
		}
		page := extauthtest.NewBrowser(t).Post(base+"/users/auth/"+string(c.provider), nil)
		if page.StatusCode != c.code.HTTPStatus() || !strings.Contains(page.Body, `<code id="failure-code">`+string(c.code)+`</code>`) {
			t.Errorf("%s %s: %d %s", c.provider, c.fault, page.StatusCode, page.Body)
		}
	}
}

// go run ./examples/hostapp, without a secrets file, signs in offline with
// each of the six providers (through their consent pages) and with the
// developer form.
func TestDevelopmentMode(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-db", filepath.Join(t.TempDir(), "dev.db")}, &strings.Builder{},
			func(base string) { started <- base })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	var base string
	select {
	case base = <-started:
	case err := <-done:
		t.Fatal(err)
	}
	consent := map[extauth.Provider]string{
		extauth.Microblog:    "Sign in as @demo_user (Demo User)",
		extauth.Socialnet:    "Continue as Demo Person",
		extauth.SearchOAuth2: "Approve",
		extauth.BlogOAuth2:   "Approve",
		extauth.SAML:         "Approve",
		extauth.OIDC:         "Approve",
	}
	for _, p := range extauth.BuiltinProviders() {
		b := extauthtest.NewBrowser(t)
		page := b.Click(b.Click(b.Get(base+"/"), "Sign in with "+providerName(p)), consent[p])
		if page.URL.Path != "/account" || !strings.Contains(page.Body, `<dd id="via">`+providerName(p)) {
			t.Errorf("%s: ended at %s (%d): %s", p, page.URL, page.StatusCode, page.Body)
		}
	}
	b := extauthtest.NewBrowser(t)
	form := b.Click(b.Get(base+"/"), "Sign in with "+providerName(developerProvider))
	page := b.Submit(form, "Sign in", url.Values{"name": {"Grace Hopper"}, "email": {"grace@example.org"}})
	if !strings.Contains(page.Body, `<dd id="name">Grace Hopper</dd>`) {
		t.Errorf("developer sign-in: %s %s", page.URL, page.Body)
	}
}
