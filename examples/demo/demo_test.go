package main

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crewjam/saml"

	"github.com/extauth/extauth/extauthtest/samlidp"
	"github.com/extauth/extauth/internal/harness"
)

// startDemo runs the demo on its development providers.
func startDemo(t *testing.T) string {
	t.Helper()
	base, _ := startDemoWith(t, serverOptions{})
	return base
}

// startDemoWith runs the demo with o and returns its base URL and itself.
func startDemoWith(t *testing.T, o serverOptions) (string, *server) {
	t.Helper()
	var demo *server
	srv := harness.Serve(t, func(base string) http.Handler {
		d, err := newServer(base, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(d.Close)
		demo = d
		return d
	})
	return srv.URL, demo
}

func TestDemoBlogSignInAndOut(t *testing.T) {
	base := startDemo(t)
	b := harness.NewBrowser(t)
	home := b.Get(base + "/")
	if !strings.Contains(home.Body, `action="/users/auth/blog_oauth2"`) || !strings.Contains(home.Body, "Not signed in") {
		t.Fatalf("home page: %s", home.Body)
	}
	if r := b.Get(base + "/me.json"); r.StatusCode != http.StatusNotFound {
		t.Fatalf("/me.json signed out: %d", r.StatusCode)
	}
	consent := b.PostForm(base+"/users/auth/blog_oauth2", nil)
	if !strings.Contains(consent.Body, `id="approve"`) {
		t.Fatalf("no consent page: %s", consent.Body)
	}
	page := b.PostForm(consent.URL.String(), url.Values{"decision": {"approve"}})
	if page.URL.Path != "/" || !strings.Contains(page.Body, `<code id="uid">42</code>`) {
		t.Fatalf("after sign-in: %s %s", page.URL, page.Body)
	}
	me := b.Get(base + "/me.json")
	var id struct {
		Provider, UID, Email string
	}
	if err := json.Unmarshal([]byte(me.Body), &id); err != nil || id.Provider != "blog_oauth2" || id.UID != "42" {
		t.Fatalf("/me.json: %d %s", me.StatusCode, me.Body)
	}
	if strings.Contains(me.Body, `"token":"`) && !strings.Contains(me.Body, `"token":"[REDACTED]"`) {
		t.Errorf("/me.json shows a token: %s", me.Body)
	}
	from := len(b.Hops)
	b.PostForm(base+"/logout", nil)
	if got := hopPaths(t, b.Hops[from:]); !slices.Equal(got, []string{"/logout", "/"}) {
		t.Errorf("sign-out of an OAuth session went through %q", got)
	}
	if r := b.Get(base + "/me.json"); r.StatusCode != http.StatusNotFound {
		t.Fatalf("/me.json after sign-out: %d", r.StatusCode)
	}
}

func TestDemoDeniedConsent(t *testing.T) {
	base := startDemo(t)
	b := harness.NewBrowser(t)
	consent := b.PostForm(base+"/users/auth/blog_oauth2", nil)
	resp := b.PostForm(consent.URL.String(), url.Values{"decision": {"deny"}})
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(resp.Body, "access_denied") {
		t.Fatalf("denied: %d %s", resp.StatusCode, resp.Body)
	}
}

func TestDemoFlags(t *testing.T) {
	if err := run([]string{"-config", "does-not-exist.yml", "-addr", "127.0.0.1:0"}, io.Discard); err == nil {
		t.Fatal("missing config file accepted")
	}
	if err := run([]string{"-bogus"}, io.Discard); err == nil || errors.Is(err, flag.ErrHelp) {
		t.Fatalf("unknown flag: %v", err)
	}
	var usage strings.Builder
	if err := run([]string{"-h"}, &usage); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v, want flag.ErrHelp (exit 0)", err)
	}
	if !strings.Contains(usage.String(), "EXTAUTH_COOKIE_KEY") || !strings.Contains(usage.String(), "-config") {
		t.Errorf("usage does not say what -config needs:\n%s", usage.String())
	}
}

// go run ./examples/demo -h exits 0 with the usage.
func TestDemoHelpExitsZero(t *testing.T) {
	if os.Getenv("EXTAUTH_DEMO_MAIN") == "1" {
		os.Args = []string{"demo", "-h"}
		main()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestDemoHelpExitsZero$")
	cmd.Env = append(os.Environ(), "EXTAUTH_DEMO_MAIN=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Usage: go run ./examples/demo") {
		t.Fatalf("demo -h: %v\n%s", err, out)
	}
}

// The social development providers sign in through their consent pages.
func TestDemoSocialSignIn(t *testing.T) {
	for _, tc := range []struct {
		provider, uid string
		approve       func(consent *harness.Response) (string, url.Values)
	}{
		{"microblog", "1234567890123456789", func(c *harness.Response) (string, url.Values) {
			return c.URL.Scheme + "://" + c.URL.Host + "/dev/microblog/oauth/authenticate",
				url.Values{"oauth_token": {c.URL.Query().Get("oauth_token")}, "user": {"1234567890123456789"}, "action": {"approve"}}
		}},
		{"socialnet", "10158123456789012", func(c *harness.Response) (string, url.Values) {
			_, rest, _ := strings.Cut(c.Body, `name="request" value="`)
			id, _, _ := strings.Cut(rest, `"`)
			return c.URL.Scheme + "://" + c.URL.Host + "/dev/socialnet/v21.0/dialog/oauth",
				url.Values{"request": {id}, "user": {"10158123456789012"}, "action": {"approve"}}
		}},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			base := startDemo(t)
			b := harness.NewBrowser(t)
			if home := b.Get(base + "/"); !strings.Contains(home.Body, `action="/users/auth/`+tc.provider+`"`) {
				t.Fatalf("home page lacks %s: %s", tc.provider, home.Body)
			}
			consent := b.PostForm(base+"/users/auth/"+tc.provider, nil)
			if consent.StatusCode != http.StatusOK || !strings.Contains(consent.Body, `value="approve"`) {
				t.Fatalf("consent page: %d %s", consent.StatusCode, consent.Body)
			}
			action, form := tc.approve(consent)
			page := b.PostForm(action, form)
			if page.URL.Path != "/" || !strings.Contains(page.Body, `<code id="uid">`+tc.uid+`</code>`) {
				t.Fatalf("after sign-in: %s %d %s", page.URL, page.StatusCode, page.Body)
			}
		})
	}
}

var samlField = regexp.MustCompile(`name="(SAMLRequest|SAMLResponse|RelayState)" value="([^"]*)"`)

func formOf(body string) url.Values {
	v := url.Values{}
	for _, m := range samlField.FindAllStringSubmatch(body, -1) {
		v.Set(m[1], html.UnescapeString(m[2]))
	}
	return v
}

func TestDemoSAMLSignIn(t *testing.T) {
	base := startDemo(t)
	b := harness.NewBrowser(t)
	if home := b.Get(base + "/"); !strings.Contains(home.Body, `action="/users/auth/saml"`) {
		t.Fatalf("home page lists no SAML: %s", home.Body)
	}
	samlSignIn(t, b, base)
}

// samlSignIn signs b in through the development IdP's login page.
func samlSignIn(t *testing.T, b *harness.Browser, base string) {
	t.Helper()
	samlSignInFrom(t, b, base, "")
}

// samlSignInFrom is samlSignIn with the IdP's POST to the callback sent from
// idpOrigin, as a browser marks a form posted by another site's page ("" for
// the demo's own origin, where the development IdP lives).
func samlSignInFrom(t *testing.T, b *harness.Browser, base, idpOrigin string) {
	t.Helper()
	// The SP fetches the IdP metadata in the background; the first
	// attempts may answer 503 until it has.
	var login *harness.Response
	deadline := time.Now().Add(time.Minute)
	for {
		login = b.PostForm(base+"/users/auth/saml", nil)
		if login.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(login.Body, "<span class=\"brand\">SAML identity provider</span>") || !strings.Contains(login.Body, `value="approve"`) {
		t.Fatalf("no IdP login page: %d %s", login.StatusCode, login.Body)
	}
	form := formOf(login.Body)
	form.Set("decision", "approve")
	post := b.PostForm(base+"/dev/saml/sso", form)
	req, _ := http.NewRequest(http.MethodPost, base+"/users/auth/saml/callback", strings.NewReader(formOf(post.Body).Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if idpOrigin != "" {
		saved := b.Header
		b.Header = http.Header{"Sec-Fetch-Site": {"cross-site"}, "Origin": {idpOrigin}}
		defer func() { b.Header = saved }()
	}
	page := b.Do(req)
	if page.URL.Path != "/" || !strings.Contains(page.Body, `<code id="uid">ada@example.org</code>`) {
		t.Fatalf("after SAML sign-in: %s %s", page.URL, page.Body)
	}
}

// The demo runs behind Go's http.CrossOriginProtection: an IdP on another
// site still completes a SAML sign-in (AllowCrossSiteCallbacks), and a
// cross-site POST anywhere else is refused.
func TestDemoCrossOriginProtection(t *testing.T) {
	base := startDemo(t)
	b := harness.NewBrowser(t)
	samlSignInFrom(t, b, base, "https://idp.example.org")
	b.Header = http.Header{"Sec-Fetch-Site": {"cross-site"}, "Origin": {"https://evil.example"}}
	if resp := b.PostForm(base+"/logout", nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a cross-site POST to /logout answered %d, want 403", resp.StatusCode)
	}
	if resp := b.PostForm(base+"/users/auth/saml", nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a cross-site sign-in start answered %d, want 403", resp.StatusCode)
	}
}

// hopPaths are the paths of the hops, without their queries.
func hopPaths(t *testing.T, hops []string) []string {
	t.Helper()
	out := make([]string, len(hops))
	for i, h := range hops {
		u, err := url.Parse(h)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = u.Path
	}
	return out
}

// Signing out of a SAML session goes through single logout at the
// development IdP and comes back signed out.
func TestDemoSAMLSignOut(t *testing.T) {
	base := startDemo(t)
	b := harness.NewBrowser(t)
	samlSignIn(t, b, base)

	from := len(b.Hops)
	page := b.PostForm(base+"/logout", nil)
	hops := b.Hops[from:]
	want := []string{"/logout", "/dev/saml/slo", "/users/auth/saml/logout", "/"}
	if got := hopPaths(t, hops); !slices.Equal(got, want) {
		t.Fatalf("sign-out went through %q, want %q", got, want)
	}
	if page.StatusCode != http.StatusOK || !strings.Contains(page.Body, `id="signed-out"`) || !strings.Contains(page.Body, `id="notice-provider"`) {
		t.Fatalf("after sign-out: %d %s", page.StatusCode, page.Body)
	}
	if r := b.Get(base + "/me.json"); r.StatusCode != http.StatusNotFound {
		t.Fatalf("/me.json after sign-out: %d %s", r.StatusCode, r.Body)
	}
	if c := b.Cookie(base+"/", "demo_session"); c != nil {
		t.Errorf("the session cookie outlived a confirmed logout")
	}

	// What the IdP was asked: to end ada's session, the one the sign-in
	// made, in a LogoutRequest from the demo.
	lr := logoutRequestOf(t, hops[1])
	if lr.NameID == nil || lr.NameID.Value != "ada@example.org" || lr.SessionIndex == nil || lr.SessionIndex.Value == "" {
		t.Errorf("LogoutRequest names %+v, session %+v", lr.NameID, lr.SessionIndex)
	}
	if lr.Issuer == nil || lr.Issuer.Value != base+"/users/auth/saml/metadata" {
		t.Errorf("LogoutRequest issued by %+v", lr.Issuer)
	}
	if r, _ := url.Parse(hops[2]); r.Query().Get("SAMLResponse") == "" {
		t.Errorf("the IdP came back without a LogoutResponse: %s", hops[2])
	}

	// The logout route alone, with no LogoutResponse, goes nowhere.
	from = len(b.Hops)
	again := b.Get(base + "/users/auth/saml/logout")
	if got := hopPaths(t, b.Hops[from:]); !slices.Equal(got, []string{"/users/auth/saml/logout", "/"}) || again.StatusCode != http.StatusOK {
		t.Fatalf("the logout route a second time: %d via %q", again.StatusCode, got)
	}
}

// A LogoutResponse that does not verify fails the single logout, and does
// not sign out someone who never asked to be.
func TestDemoSAMLForgedLogoutResponse(t *testing.T) {
	base := startDemo(t)
	b := harness.NewBrowser(t)
	samlSignIn(t, b, base)
	forged := b.Get(base + "/users/auth/saml/logout?SAMLResponse=" + url.QueryEscape("PExvZ291dFJlc3BvbnNlLz4="))
	if forged.StatusCode != http.StatusBadRequest || !strings.Contains(forged.Body, `id="slo-failed"`) || !strings.Contains(forged.Body, "invalid_response") {
		t.Fatalf("forged LogoutResponse: %d %s", forged.StatusCode, forged.Body)
	}
	if r := b.Get(base + "/me.json"); r.StatusCode != http.StatusOK {
		t.Fatalf("a forged LogoutResponse signed the user out: %d", r.StatusCode)
	}
}

// logoutRequestOf decodes the HTTP-Redirect binding's SAMLRequest of u.
func logoutRequestOf(t *testing.T, u string) *saml.LogoutRequest {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(pu.Query().Get("SAMLRequest"))
	if err != nil {
		t.Fatalf("SAMLRequest of %s: %v", pu.Path, err)
	}
	x, err := io.ReadAll(flate.NewReader(bytes.NewReader(raw)))
	if err != nil {
		t.Fatal(err)
	}
	var lr saml.LogoutRequest
	if err := xml.Unmarshal(x, &lr); err != nil {
		t.Fatal(err)
	}
	return &lr
}

// The OpenID Connect development providers sign in through their consent
// pages, as any user of the picker.
func TestDemoOIDCSignIn(t *testing.T) {
	for _, provider := range []string{"oidc", "search_oauth2"} {
		t.Run(provider, func(t *testing.T) {
			base := startDemo(t)
			b := harness.NewBrowser(t)
			if home := b.Get(base + "/"); !strings.Contains(home.Body, `action="/users/auth/`+provider+`"`) {
				t.Fatalf("home page lacks %s: %s", provider, home.Body)
			}
			consent := b.PostForm(base+"/users/auth/"+provider, nil)
			if consent.StatusCode != http.StatusOK || !strings.Contains(consent.Body, `value="approve"`) {
				t.Fatalf("consent page: %d %s", consent.StatusCode, consent.Body)
			}
			_, rest, _ := strings.Cut(consent.Body, `action="`)
			action, _, _ := strings.Cut(rest, `"`)
			_, rest, _ = strings.Cut(consent.Body, `name="interaction" value="`)
			interaction, _, _ := strings.Cut(rest, `"`)
			bob := "248289761002"
			page := b.PostForm(base+action, url.Values{"interaction": {interaction}, "user": {bob}, "decision": {"approve"}})
			if page.URL.Path != "/" || !strings.Contains(page.Body, `<code id="uid">`+bob+`</code>`) {
				t.Fatalf("after sign-in: %s %d %s", page.URL, page.StatusCode, page.Body)
			}
		})
	}
}

// oidcSignIn signs alice in through the development OP's consent page.
func oidcSignIn(t *testing.T, b *harness.Browser, base string) {
	t.Helper()
	consent := b.PostForm(base+"/users/auth/oidc", nil)
	page := b.PostForm(base+formAction(t, consent.Body), url.Values{
		"interaction": {hiddenValue(consent.Body, "interaction")}, "user": {"248289761001"}, "decision": {"approve"}})
	if page.URL.Path != "/" || !strings.Contains(page.Body, `<code id="uid">248289761001</code>`) {
		t.Fatalf("after sign-in: %s %d %s", page.URL, page.StatusCode, page.Body)
	}
}

func formAction(t *testing.T, body string) string {
	t.Helper()
	_, rest, ok := strings.Cut(body, `action="`)
	action, _, _ := strings.Cut(rest, `"`)
	if !ok {
		t.Fatalf("no form in %s", body)
	}
	return html.UnescapeString(action)
}

func hiddenValue(body, name string) string {
	_, rest, _ := strings.Cut(body, `name="`+name+`" value="`)
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// Signing out of an OpenID Connect session goes through the OP's
// end_session_endpoint, where the user confirms, and comes back signed
// out; search_oauth2's development OP, like Google, has no such endpoint,
// and signing out of it stays local.
func TestDemoOIDCSignOut(t *testing.T) {
	base := startDemo(t)
	b := harness.NewBrowser(t)
	oidcSignIn(t, b, base)
	from := len(b.Hops)
	confirm := b.PostForm(base+"/logout", nil)
	if got := hopPaths(t, b.Hops[from:]); !slices.Equal(got, []string{"/logout", "/dev/oidc/end_session"}) {
		t.Fatalf("sign-out went through %q", got)
	}
	if r := b.Get(base + "/me.json"); r.StatusCode != http.StatusNotFound {
		t.Fatalf("/me.json while at the OP: %d", r.StatusCode)
	}
	from = len(b.Hops)
	page := b.PostForm(base+formAction(t, confirm.Body), url.Values{
		"interaction": {hiddenValue(confirm.Body, "interaction")}, "decision": {"logout"}})
	if got := hopPaths(t, b.Hops[from:]); !slices.Equal(got, []string{"/dev/oidc/end_session/decision", "/users/auth/oidc/post_logout", "/"}) {
		t.Fatalf("after the OP's confirmation: %q", got)
	}
	if !strings.Contains(page.Body, `id="signed-out"`) || !strings.Contains(page.Body, `id="notice-provider"`) || b.Cookie(base+"/", "demo_session") != nil {
		t.Errorf("not signed out: %d %s", page.StatusCode, page.Body)
	}
	if account := b.Get(base + "/dev/oidc/account"); !strings.Contains(account.Body, `id="op-signed-out"`) {
		t.Errorf("the OP still has a session: %s", account.Body)
	}

	b = harness.NewBrowser(t)
	consent := b.PostForm(base+"/users/auth/search_oauth2", nil)
	b.PostForm(base+formAction(t, consent.Body), url.Values{
		"interaction": {hiddenValue(consent.Body, "interaction")}, "user": {"248289761001"}, "decision": {"approve"}})
	from = len(b.Hops)
	page = b.PostForm(base+"/logout", nil)
	if got := hopPaths(t, b.Hops[from:]); !slices.Equal(got, []string{"/logout", "/"}) {
		t.Errorf("search_oauth2 sign-out went through %q", got)
	}
	if !strings.Contains(page.Body, `id="notice-local"`) || !strings.Contains(page.Body, "This demo cannot end your session at Google account") {
		t.Errorf("a local sign-out does not say so: %s", page.Body)
	}
	if r := b.Get(base + "/me.json"); r.StatusCode != http.StatusNotFound {
		t.Errorf("/me.json after a local sign-out: %d", r.StatusCode)
	}
}

// With -oidc-high-assurance the development OP takes private_key_jwt only,
// requires pushed and signed requests and encrypts its ID tokens: the start
// line and the home page say so, and a person signs in and out through its
// pages as ever.
func TestDemoOIDCHighAssurance(t *testing.T) {
	if err := run([]string{"-oidc-high-assurance", "-config", "x.yml", "-addr", "127.0.0.1:0"}, io.Discard); err == nil {
		t.Error("-oidc-high-assurance with a secrets file accepted")
	}
	base, demo := startDemoWith(t, serverOptions{oidcHighAssurance: true})
	var start strings.Builder
	demo.announce(&start)
	if line, _, _ := strings.Cut(start.String(), "\n"); line != "extauth demo listening on "+base+"; "+highAssuranceMode.Note {
		t.Errorf("start line %q", line)
	}
	b := harness.NewBrowser(t)
	home := b.Get(base + "/")
	if !strings.Contains(home.Body, `id="oidc-high-assurance"`) || !strings.Contains(home.Body, html.EscapeString(highAssuranceMode.Note)) {
		t.Errorf("the home page does not say the OP runs in high-assurance mode:\n%s", home.Body)
	}
	oidcSignIn(t, b, base)
	if page := b.Get(base + "/"); !strings.Contains(page.Body, `id="oidc-high-assurance"`) {
		t.Errorf("signed in, the home page no longer says the OP runs in high-assurance mode")
	}
	op := demo.dev.fakes[""].OIDC
	if q := op.LastAuthorizeQuery(); q.Get("request_uri") == "" || q.Has("nonce") {
		t.Errorf("the authorization request was not pushed: %v", q)
	}
	if as := op.Assertions(); len(as) != 2 {
		t.Errorf("%d client assertions, want 2 (PAR, token)", len(as))
	}
	confirm := b.PostForm(base+"/logout", nil)
	page := b.PostForm(base+formAction(t, confirm.Body), url.Values{
		"interaction": {hiddenValue(confirm.Body, "interaction")}, "decision": {"logout"}})
	if !strings.Contains(page.Body, `id="signed-out"`) || b.Cookie(base+"/", "demo_session") != nil {
		t.Errorf("not signed out: %d %s", page.StatusCode, page.Body)
	}
}

// Without -oidc-high-assurance or -oidc-fapi2 neither the start line nor
// the home page speaks of a mode.
func TestDemoStartLine(t *testing.T) {
	base, demo := startDemoWith(t, serverOptions{})
	var start strings.Builder
	demo.announce(&start)
	if line, _, _ := strings.Cut(start.String(), "\n"); line != "extauth demo listening on "+base {
		t.Errorf("start line %q", line)
	}
	if !strings.Contains(start.String(), base+"/metrics") || !strings.Contains(start.String(), "tenant a (Alpha University)") {
		t.Errorf("start lines:\n%s", start.String())
	}
	if home := harness.NewBrowser(t).Get(base + "/"); strings.Contains(home.Body, "high-assurance") || strings.Contains(home.Body, "FAPI") {
		t.Errorf("the home page speaks of a mode:\n%s", home.Body)
	}
}

// With -oidc-fapi2 the development OP enforces the FAPI 2.0 Security
// Profile, requires DPoP with nonces and encrypts its ID tokens: a person
// signs in through its pages as ever, and the session's tokens are
// DPoP-bound.
func TestDemoOIDCFAPI2(t *testing.T) {
	if err := run([]string{"-oidc-fapi2", "-config", "x.yml", "-addr", "127.0.0.1:0"}, io.Discard); err == nil {
		t.Error("-oidc-fapi2 with a secrets file accepted")
	}
	base, demo := startDemoWith(t, serverOptions{oidcFAPI2: true})
	var start strings.Builder
	demo.announce(&start)
	if line, _, _ := strings.Cut(start.String(), "\n"); line != "extauth demo listening on "+base+"; "+fapi2Mode.Note {
		t.Errorf("start line %q", line)
	}
	b := harness.NewBrowser(t)
	if home := b.Get(base + "/"); !strings.Contains(home.Body, `id="oidc-fapi2"`) || !strings.Contains(home.Body, html.EscapeString(fapi2Mode.Note)) {
		t.Errorf("the home page does not say the OP runs in FAPI 2.0 mode:\n%s", home.Body)
	}
	oidcSignIn(t, b, base)
	op := demo.dev.fakes[""].OIDC
	if q := op.LastAuthorizeQuery(); q.Get("request_uri") == "" || len(q) != 2 {
		t.Errorf("the authorization request was not pushed: %v", q)
	}
	var at []string
	for _, p := range op.DPoPProofs() {
		at = append(at, string(p.Endpoint))
	}
	if strings.Join(at, " ") != "par token" {
		t.Errorf("DPoP proofs at %v, want par token", at)
	}
}

// The development OP's "sign out of every application" sends the demo a
// back-channel logout, which ends the demo session of that OP session.
func TestDemoBackchannelLogout(t *testing.T) {
	base := startDemo(t)
	b := harness.NewBrowser(t)
	oidcSignIn(t, b, base)
	other := harness.NewBrowser(t)
	oidcSignIn(t, other, base)
	account := b.Get(base + "/dev/oidc/account")
	if !strings.Contains(account.Body, `id="op-signed-in"`) {
		t.Fatalf("OP account page: %s", account.Body)
	}
	if page := b.PostForm(base+"/dev/oidc/account", nil); !strings.Contains(page.Body, `id="op-signed-out"`) {
		t.Fatalf("after signing out everywhere: %d %s", page.StatusCode, page.Body)
	}
	if r := b.Get(base + "/me.json"); r.StatusCode != http.StatusNotFound {
		t.Errorf("the back-channel logout left the demo session: %d %s", r.StatusCode, r.Body)
	}
	// The other browser's sign-in is another OP session: it stays.
	if r := other.Get(base + "/me.json"); r.StatusCode != http.StatusOK {
		t.Errorf("another session ended too: %d", r.StatusCode)
	}
}

// samlDemoWithIdP runs the demo with a SAML IdP of its own on another
// server, as a real one would be, set up by knobs.
func samlDemoWithIdP(t *testing.T, knobs func(*samlidp.Knobs)) (string, *samlidp.IdP) {
	t.Helper()
	var idp *samlidp.IdP
	srv := harness.Serve(t, func(base string) http.Handler {
		idpSrv := httptest.NewUnstartedServer(nil)
		var err error
		idp, err = samlidp.New(samlidp.Options{BaseURL: "http://" + idpSrv.Listener.Addr().String(), SPMetadataURL: base + "/users/auth/saml/metadata"})
		if err != nil {
			t.Fatal(err)
		}
		if knobs != nil {
			idp.Set(knobs)
		}
		idpSrv.Config.Handler = idp
		idpSrv.Start()
		t.Cleanup(idpSrv.Close)
		d, err := newServer(base, serverOptions{samlIdPMetadataURL: idp.MetadataURL()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(d.Close)
		return d
	})
	return srv.URL, idp
}

// samlSignInAt signs b in at the demo through idp's login page, wherever
// idp is served, and returns the session index of the sign-in.
func samlSignInAt(t *testing.T, b *harness.Browser, base string) string {
	t.Helper()
	var login *harness.Response
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if login = b.PostForm(base+"/users/auth/saml", nil); login.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
			break
		}
	}
	form := formOf(login.Body)
	form.Set("decision", "approve")
	action, err := login.URL.Parse(formAction(t, login.Body))
	if err != nil {
		t.Fatal(err)
	}
	post := b.PostForm(action.String(), form)
	page := b.PostForm(formAction(t, post.Body), formOf(post.Body))
	if page.URL.Path != "/" || !strings.Contains(page.Body, `<code id="uid">ada@example.org</code>`) {
		t.Fatalf("after SAML sign-in: %s %d %s", page.URL, page.StatusCode, page.Body)
	}
	var id struct {
		SID string `json:"sid"`
	}
	if err := json.Unmarshal([]byte(b.Get(base+"/me.json").Body), &id); err != nil || id.SID == "" {
		t.Fatalf("no session index: %v", err)
	}
	return id.SID
}

// With an IdP that publishes no HTTP-Redirect single logout endpoint,
// signing out is local: the home page says so in a note, not an error
// page, and the IdP is not asked.
func TestDemoSAMLLogoutWithoutSLOEndpoint(t *testing.T) {
	base, idp := samlDemoWithIdP(t, func(k *samlidp.Knobs) { k.NoSLO = true })
	b := harness.NewBrowser(t)
	samlSignInAt(t, b, base)
	from := len(b.Hops)
	page := b.PostForm(base+"/logout", nil)
	if got := hopPaths(t, b.Hops[from:]); !slices.Equal(got, []string{"/logout", "/"}) {
		t.Errorf("sign-out went through %q", got)
	}
	if page.StatusCode != http.StatusOK || !strings.Contains(page.Body, `id="signed-out"`) || !strings.Contains(page.Body, `id="notice-local"`) ||
		!strings.Contains(page.Body, "This demo cannot end your session at SAML (Ada&#39;s university IdP): the provider offers applications no way to sign you out. You are still signed in there") {
		t.Fatalf("after sign-out: %d %s", page.StatusCode, page.Body)
	}
	if strings.Contains(page.Body, "misconfigured") {
		t.Errorf("a local sign-out shows an error: %s", page.Body)
	}
	if r := b.Get(base + "/me.json"); r.StatusCode != http.StatusNotFound {
		t.Errorf("/me.json after sign-out: %d", r.StatusCode)
	}
	if idp.LastLogout() != nil {
		t.Error("the IdP was asked to log out")
	}
	// The note is for the page after the sign-out only.
	if again := b.Get(base + "/"); strings.Contains(again.Body, `id="notice-`) {
		t.Errorf("the note shows again")
	}
}

// The IdP's own LogoutRequest (the user signed out at the IdP, or of
// another application) ends the demo session it names, and only that one;
// an unsigned or foreign one ends nothing.
func TestDemoIdPInitiatedLogout(t *testing.T) {
	base, idp := samlDemoWithIdP(t, nil)
	first, second := harness.NewBrowser(t), harness.NewBrowser(t)
	firstIndex := samlSignInAt(t, first, base)
	samlSignInAt(t, second, base)
	slo := base + "/users/auth/saml/logout"
	logout := func(signer *samlidp.IdP, sessionIndex string) *harness.Response {
		t.Helper()
		lr := &saml.LogoutRequest{ID: "id-" + strconv.FormatInt(time.Now().UnixNano(), 36), Version: "2.0", IssueInstant: time.Now(),
			Destination: slo, Issuer: &saml.Issuer{Value: idp.EntityID()}, NameID: &saml.NameID{Value: "ada@example.org"}}
		if sessionIndex != "" {
			lr.SessionIndex = &saml.SessionIndex{Value: sessionIndex}
		}
		m, err := signer.RedirectMessage(slo, "SAMLRequest", lr.Element(), "")
		if err != nil {
			t.Fatal(err)
		}
		return harness.NewBrowser(t).NoFollow().Get(m)
	}

	impostor, err := samlidp.New(samlidp.Options{BaseURL: "http://127.0.0.1:1/impostor"})
	if err != nil {
		t.Fatal(err)
	}
	if resp := logout(impostor, ""); resp.StatusCode == http.StatusSeeOther && strings.HasPrefix(resp.Header.Get("Location"), idp.SLOURL()) {
		t.Errorf("a LogoutRequest signed by another key was answered as a success")
	}
	if first.Get(base+"/me.json").StatusCode != http.StatusOK || second.Get(base+"/me.json").StatusCode != http.StatusOK {
		t.Fatal("a LogoutRequest signed by another key ended a session")
	}

	resp := logout(idp, firstIndex)
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), idp.SLOURL()) || !strings.Contains(resp.Header.Get("Location"), "SAMLResponse=") {
		t.Fatalf("the IdP's LogoutRequest: %d to %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if r := first.Get(base + "/me.json"); r.StatusCode != http.StatusNotFound {
		t.Errorf("the session the IdP ended is still signed in: %d", r.StatusCode)
	}
	if r := second.Get(base + "/me.json"); r.StatusCode != http.StatusOK {
		t.Errorf("another session of the same user ended too: %d", r.StatusCode)
	}
	// Without a SessionIndex, the LogoutRequest ends all of the user's.
	logout(idp, "")
	if r := second.Get(base + "/me.json"); r.StatusCode != http.StatusNotFound {
		t.Errorf("a LogoutRequest for the user left a session: %d", r.StatusCode)
	}
}

// /metrics serves extauth's metrics through the OpenTelemetry Prometheus
// exporter: a sign-in shows up in them.
func TestDemoMetrics(t *testing.T) {
	base, demo := startDemoWith(t, serverOptions{})
	// The SAML metadata, whose age and certificates are reported, comes
	// in the background.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := demo.auth.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	b := harness.NewBrowser(t)
	consent := b.PostForm(base+"/users/auth/blog_oauth2", nil)
	b.PostForm(consent.URL.String(), url.Values{"decision": {"approve"}})
	resp := b.Get(base + "/metrics")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	for _, want := range []string{
		`extauth_signin_started_total{provider="blog_oauth2",tenant=""} 1`,
		`extauth_signin_completed_total{outcome="success",provider="blog_oauth2",tenant=""} 1`,
		`extauth_outbound_duration_seconds_count{endpoint="token",provider="blog_oauth2",result="ok",tenant=""} 1`,
		`extauth_store_duration_seconds_count{provider="blog_oauth2",result="new",tenant=""} 1`,
		`extauth_signin_duration_seconds_count{outcome="success",provider="blog_oauth2",tenant=""} 1`,
		`extauth_document_age_seconds{document="metadata",provider="saml",tenant=""}`,
		`extauth_certificate_expiry_seconds{provider="saml",role="idp",sha256="`,
	} {
		if !strings.Contains(promSeries(resp.Body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// promSeries is a Prometheus exposition without the labels every series
// of the OpenTelemetry exporter carries (its scope's).
func promSeries(body string) string {
	return regexp.MustCompile(`otel_scope_[a-z_]+="[^"]*",?`).ReplaceAllString(body, "")
}
