//go:build e2e

package main

// Every page extauth serves itself, clicked through in headless Chromium:
// the discovery page, the step-up page, the interstitial, the page that
// posts a sign-in to a provider, the sign-out confirmation and the
// failure pages. Each is held to what a finished page is (checkPage): no
// Content-Security-Policy violation, no accessibility violation by axe, a
// focus ring a keyboard user sees, a phone's width without a sideways
// scroll; and each leaves its screenshots among CI's artifacts.

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest"
	"github.com/extauth/extauth/samlsp"
)

// axeScript is axe-core's source, which .ci/run installs with npm under
// a11y/ (npm ci --prefix examples/demo/a11y).
var axeScript = sync.OnceValues(func() (string, error) {
	path := os.Getenv("E2E_AXE")
	if path == "" {
		path = filepath.Join("a11y", "node_modules", "axe-core", "axe.min.js")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("axe-core: %w (install it: npm ci --prefix examples/demo/a11y, or set E2E_AXE)", err)
	}
	return string(b), nil
})

// cspWatch records the page's Content-Security-Policy violations, from
// before its first script runs.
const cspWatch = `window.__csp = []; document.addEventListener("securitypolicyviolation",
  e => window.__csp.push(e.violatedDirective + " " + (e.blockedURI || "inline")));`

// watchCSP makes every document the tab loads record its CSP violations.
func (tb *tab) watchCSP() {
	tb.t.Helper()
	tb.do("watching for CSP violations", chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: cspWatch})
		return err
	}))
}

// language makes the tab's requests prefer lang (Accept-Language).
func (tb *tab) language(lang string) {
	tb.t.Helper()
	tb.do("preferring "+lang, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Accept-Language": lang}})
		return err
	}))
}

type axeViolation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// checkPage holds the page the tab shows, one of extauth's own, to what a
// finished page is, and keeps its screenshots at a laptop's and a phone's
// width as name.png and name-phone.png.
func (tb *tab) checkPage(name string) {
	tb.t.Helper()
	tb.do("sizing the page as a laptop's", laptop)
	if v := get(tb, "reading CSP violations", chromedp.Evaluate[[]string](`window.__csp || ["the CSP watch did not run"]`)); len(v) > 0 {
		tb.t.Errorf("%s: Content-Security-Policy violations: %q", name, v)
	}
	for _, v := range tb.axe() {
		tb.t.Errorf("%s: accessibility: %s (%s): %s at %q", name, v.ID, v.Impact, v.Help, v.Nodes)
	}
	// A keyboard user's first Tab lands on a control with a ring around it.
	tb.do("pressing Tab", chromedp.KeyEvent("\t"))
	focus := get(tb, "reading the focus", chromedp.Evaluate[[]string](`(() => { const e = document.activeElement, s = getComputedStyle(e);
	  return [e.tagName, s.outlineStyle, s.outlineWidth]; })()`))
	if len(focus) != 3 || focus[0] == "BODY" || focus[1] == "none" || focus[2] == "0px" {
		tb.t.Errorf("%s: the first Tab focuses %q without a visible ring", name, focus)
	}
	tb.screenshot(name)
	tb.do("sizing the page as a phone's", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	if wide := get(tb, "measuring the page", chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`)); wide {
		tb.t.Errorf("%s: the page is wider than a phone's screen", name)
	}
	tb.screenshot(name + "-phone")
	tb.do("sizing the page as a laptop's", laptop)
}

// axe runs axe-core on the page the tab shows: the violations of WCAG 2.2
// A and AA and of axe's best practices.
func (tb *tab) axe() []axeViolation {
	tb.t.Helper()
	src, err := axeScript()
	if err != nil {
		tb.t.Fatal(err)
	}
	// DevTools evaluation is not the page's script: the page's CSP, which
	// allows no script of this kind, does not stop it.
	tb.do("loading axe", chromedp.Evaluate[chromedp.Void](src))
	return get(tb, "running axe", chromedp.Evaluate[[]axeViolation](`axe.run(document, {runOnly: {type: "tag",
	  values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"]}}).then(r => r.violations.map(v =>
	  ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map(n => n.target.join(" "))})))`, chromedp.EvalAwaitPromise))
}

// The accessibility check finds what it is there to find: on a page with
// an unlabelled field, grey text on white and no language, axe reports
// each, so that the pages' clean reports mean something.
func TestE2EAccessibilityCheckFindsFaults(t *testing.T) {
	d := bareHost(t, map[string]http.HandlerFunc{"GET /e2e/faulty": func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`<!doctype html><html><title>faulty</title><main><h1>Faulty</h1><p style="color:#bbb">faint</p><input name="q"></main></html>`))
	}})
	tb := startBrowser(t).open(t, d)
	tb.do("loading a faulty page", chromedp.Navigate(d.base+"/e2e/faulty"))
	found := map[string]bool{}
	for _, v := range tb.axe() {
		found[v.ID] = true
	}
	for _, id := range []string{"label", "color-contrast", "html-has-lang"} {
		if !found[id] {
			t.Errorf("axe did not report %s: %v", id, found)
		}
	}
}

// title is the tab's document title.
func (tb *tab) title() string {
	tb.t.Helper()
	return get(tb, "reading the title", chromedp.Title())
}

// TestE2EDiscoveryAndFederationStepUp: at the federation tenant, the user
// finds an IdP on the discovery page by a search, signs in there, and
// opens the admin area from another site's link: the step-up page waits
// for a click (the navigation came from elsewhere), then asks the same
// IdP for a sign-in at the level high, and the admin area opens. In
// German, the discovery page speaks German.
func TestE2EDiscoveryAndFederationStepUp(t *testing.T) {
	d := startDemoServer(t)
	u, _ := url.Parse(d.base)
	fed := "http://" + federationTenant + ".localhost:" + u.Port()
	tb := startBrowser(t).open(t, d)
	tb.watchCSP()

	tb.startSignInAt(fed, "saml")
	if title := tb.title(); title != "Sign in with your organisation" {
		t.Fatalf("the sign-in button led to %q", title)
	}
	tb.checkPage("40-discovery")
	tb.do("searching for Bellevue", chromedp.SendKeys(chromedp.ID("q"), "bellevue", chromedp.NodeVisible), click(`form[role=search] button`))
	if status := tb.text("#status"); status != "1 organisation." {
		t.Errorf("the search says %q", status)
	}
	tb.checkPage("41-discovery-search")
	tb.do("choosing Bellevue", click(`button[name=idp][value$="/dev/idp/bellevue/metadata"]`))
	if who := tb.text("main strong"); who != "Marie Curie" {
		t.Errorf("Bellevue's login page signs in %q", who)
	}
	tb.do("approving at Bellevue", click(`button[name=decision][value=approve]`), chromedp.WaitVisible(chromedp.ID("uid")))
	if uid, idp := tb.text("#uid"), tb.text("#idp"); uid != "marie@bellevue.example" || !strings.HasSuffix(idp, "/dev/idp/bellevue/metadata") {
		t.Fatalf("signed in as %q by %q", uid, idp)
	}

	// A link to the admin area on another site (tenant a's home page).
	tb.homeAt(strings.Replace(fed, federationTenant+".localhost", "a.localhost", 1))
	tb.do("following another site's link to the admin area",
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.href = %q`, fed+"/admin")), chromedp.WaitVisible(chromedp.CSS("body.step_up")))
	if lead := tb.text("p.lead"); !strings.Contains(lead, "“high”") || !strings.Contains(lead, "5 minutes") {
		t.Errorf("the step-up page says %q", lead)
	}
	if note := tb.text("p.note"); !strings.Contains(note, "Université de Bellevue") && !strings.Contains(note, "University of Bellevue") {
		t.Errorf("the step-up page does not name the session's IdP: %q", note)
	}
	tb.checkPage("42-step-up")
	tb.do("continuing the step-up", click("button.primary"))
	if who := tb.text("main strong"); who != "Marie Curie" {
		t.Errorf("the step-up went to an IdP that signs in %q", who)
	}
	tb.do("approving at Bellevue again", click(`button[name=decision][value=approve]`), chromedp.WaitVisible(chromedp.ID("admin-acr")))
	if acr, idp := tb.text("#admin-acr"), tb.text("#admin-idp"); acr != classHigh || !strings.HasSuffix(idp, "/dev/idp/bellevue/metadata") {
		t.Errorf("the admin area shows level %q from %q", acr, idp)
	}

	de := startBrowser(t).open(t, d)
	de.watchCSP()
	de.language("de-DE,de;q=0.9")
	de.startSignInAt(fed, "saml")
	if title := de.title(); title != "Mit Ihrer Organisation anmelden" {
		t.Errorf("a German browser gets %q", title)
	}
	if names := de.text("form ul"); !strings.Contains(names, "Universität Lichtenberg") {
		t.Errorf("a German browser's list: %q", names)
	}
	de.checkPage("43-discovery-de")
}

// TestE2EStepUpWithRequireAssurance: the demo's admin area needs the level
// high, which a plain sign-in has not. The step-up page that
// RequireAssurance answers with submits itself (the user came from the
// demo's own home page), the provider asks again, and the admin area opens:
// OpenID Connect, then SAML.
func TestE2EStepUpWithRequireAssurance(t *testing.T) {
	d := startDemoServer(t)
	b := startBrowser(t)
	for _, tc := range []struct {
		provider, acr string
	}{{"oidc", acrHigh}, {"saml", classHigh}} {
		t.Run(tc.provider, func(t *testing.T) {
			tb := b.open(t, d)
			tb.watchCSP()
			tb.startSignIn(tc.provider)
			tb.do("approving", click(`button[name=decision][value=approve]`), chromedp.WaitVisible(chromedp.ID("uid")))
			n := tb.navigated()
			tb.do("opening the admin area", click("#admin"))
			tb.do("approving again", click(`button[name=decision][value=approve]`), chromedp.WaitVisible(chromedp.ID("admin-acr")))
			if acr := tb.text("#admin-acr"); acr != tc.acr {
				t.Errorf("the admin area shows level %q", acr)
			}
			navs := tb.navigations(n)
			if len(navs) < 3 || navs[0] != "GET /admin" || navs[1] != "POST /users/auth/"+tc.provider {
				t.Errorf("the step-up went %q", navs)
			}
		})
	}
}

// plainHost is a name Chromium maps to 127.0.0.1 (--host-resolver-rules)
// and does not take for a trustworthy origin, as it does 127.0.0.1 and
// localhost: the demo served there is a plain-http site, which gets no
// fetch metadata, as a deployment without TLS would.
const plainHost = "demo.test"

// TestE2EInterstitial: on a plain-http site a link to a sign-in says
// nothing of where it comes from, so extauth asks for a click; the page's
// POST carries the site's Origin (its referrer policy is same-origin,
// where no-referrer made Chromium send "Origin: null", which the start
// refused) and the sign-in goes on. A sign-out by link is confirmed the
// same way.
func TestE2EInterstitial(t *testing.T) {
	d := startDemoServerWith(t, demoSetup{host: plainHost})
	tb := startBrowser(t, chromedp.Flag("host-resolver-rules", "MAP "+plainHost+" 127.0.0.1")).open(t, d)
	tb.watchCSP()
	tb.do("following a link to the sign-in", chromedp.Navigate(d.base+"/users/auth/socialnet?return_to=/"), chromedp.WaitVisible(chromedp.CSS("body.confirm")))
	if title := tb.title(); title != "Sign in with Facebook-style social network" {
		t.Errorf("the interstitial's title is %q", title)
	}
	tb.checkPage("44-interstitial")
	tb.do("continuing", click("button.primary"))
	tb.do("approving at the social network", click(`form:has(input[name=user][value="10158123456789012"]) button[value=approve]`),
		chromedp.WaitVisible(chromedp.ID("uid")))

	tb.do("following a link to the sign-out", chromedp.Navigate(d.base+"/users/auth/socialnet/logout"), chromedp.WaitVisible(chromedp.CSS("body.logout_confirm")))
	tb.checkPage("45-sign-out-confirm")
	// The demo ends its own sessions at its Sign out button; extauth's
	// sign-out route, confirmed, runs (the provider has no session to
	// end) and comes home.
	tb.do("signing out", click("button.primary"), chromedp.WaitReady(chromedp.CSS("body")))
	if loc := tb.location(); loc != d.base+"/" || !strings.Contains(d.log.String(), "signed out locally only") {
		t.Errorf("the confirmed sign-out ended at %s:\n%s", loc, d.log)
	}
}

// TestE2EStartRulesInChromium plays the cases of docs/security.md's start
// rules that a browser can, at an application with no other defence in
// front of extauth's (the demo's http.CrossOriginProtection would refuse
// the cross-site ones first): a form on a page of the application's own
// origin under the referrer policy no-referrer starts (Origin null,
// Sec-Fetch-Site same-origin); the same form in a sandboxed frame, and a
// POST that another origin redirects to the start with 307, are refused
// (Origin null with Sec-Fetch-Site cross-site, and same-site).
func TestE2EStartRulesInChromium(t *testing.T) {
	form := func(action string) string {
		return `<form method="post" action="` + action + `"><input type="hidden" name="return_to" value="/"><button id="go">Sign in</button></form>`
	}
	otherLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := bareHost(t, map[string]http.HandlerFunc{
		"GET /e2e/no-referrer": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Referrer-Policy", "no-referrer")
			w.Write([]byte(`<!doctype html><title>no-referrer</title>` + form("/users/auth/oidc")))
		},
		"GET /e2e/sandboxed": func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`<!doctype html><title>sandboxed</title><iframe id="frame" sandbox="allow-forms allow-scripts" src="/e2e/framed"></iframe>`))
		},
		// A page of the application's own, which the sandbox gives an
		// opaque origin.
		"GET /e2e/framed": func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`<!doctype html><title>framed</title>` + form("/users/auth/oidc") + `<script>document.forms[0].submit()</script>`))
		},
	})
	other := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			http.Redirect(w, r, d.base+"/users/auth/oidc", http.StatusTemporaryRedirect)
			return
		}
		w.Write([]byte(`<!doctype html><title>another origin</title>` + form("/bounce")))
	})}
	go other.Serve(otherLn)
	t.Cleanup(func() { other.Close() })
	tb := startBrowser(t).open(t, d)

	tb.do("signing in from a no-referrer page of the application", chromedp.Navigate(d.base+"/e2e/no-referrer"), click("#go"),
		chromedp.WaitVisible(chromedp.CSS(`button[name=decision][value=approve]`)))
	if refused := strings.Count(d.log.String(), "csrf_detected"); refused != 0 {
		t.Errorf("the no-referrer page's start was refused:\n%s", d.log)
	}

	tb.do("a sandboxed frame's form", chromedp.Navigate(d.base+"/e2e/sandboxed"))
	waitFor(t, "the sandboxed frame's start to be refused", func() bool {
		return strings.Contains(d.log.String(), "authorize request refused: Origin null")
	})
	tb.do("another origin's form, redirected with 307", chromedp.Navigate("http://"+otherLn.Addr().String()+"/"), click("#go"))
	if status := tb.status(); status != http.StatusForbidden {
		t.Errorf("the 307 from another origin answered %d", status)
	}
	if n := strings.Count(d.log.String(), "authorize request refused: Origin null"); n != 2 {
		t.Errorf("%d starts refused for Origin null, want the sandboxed frame's and the redirected one:\n%s", n, d.log)
	}
}

// waitFor polls cond until it holds, for at most a step's time.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(stepTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// bareHost is an application built as the docs build one, with nothing of
// the demo's: extauth's own failure page (no OnFailure), its own sign-out
// failure page (no Logout.Done), SAML by the POST binding, no
// http.CrossOriginProtection; extra are pages of the test's own.
func bareHost(t *testing.T, extra map[string]http.HandlerFunc) *demo {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &demo{base: "http://" + ln.Addr().String(), log: &syncBuffer{}}
	mux := http.NewServeMux()
	fakes, err := extauthtest.MountProviders(mux, d.base, "/dev/", extauthtest.ProvidersOptions{
		Only: []extauth.Provider{extauth.OIDC, extauth.SAML}, Interactive: true, AppName: "bare host"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fakes.Close)
	o := extauth.Options{BaseURL: d.base, CookieKey: make([]byte, 32), Logger: slog.New(slog.NewTextHandler(d.log, nil)),
		OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
			http.Redirect(w, r, extauth.ReturnTo(r), http.StatusSeeOther)
		},
		Logout: extauth.LogoutOptions{Session: func(*http.Request, extauth.Provider) (extauth.LogoutSession, bool) {
			return extauth.LogoutSession{}, false
		}},
	}
	o.SAML.AuthnRequestBinding = samlsp.BindingPOST
	a, err := extauth.New(fakes.Config(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	a.Mount(mux)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(`<!doctype html><html lang="en"><title>Bare host</title><main><h1 id="home">Bare host</h1>
<form method="post" action="/users/auth/oidc"><button id="signin-oidc">Sign in with OpenID Connect</button></form>
<form method="post" action="/users/auth/saml"><button id="signin-saml">Sign in with SAML</button></form></main>`))
	})
	for path, h := range extra {
		mux.HandleFunc(path, h)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestE2EPagesOfABareHost: an application that leaves its pages to
// extauth. A refused consent ends on extauth's failure page, whose "Try
// again" starts the sign-in again; a sign-out that cannot be confirmed
// ends on the sign-out failure page; with script off, the page that posts
// the AuthnRequest to the IdP shows its button, which works.
func TestE2EPagesOfABareHost(t *testing.T) {
	d := bareHost(t, nil)
	b := startBrowser(t)
	tb := b.open(t, d)
	tb.watchCSP()
	tb.home()
	tb.do("signing in", click("#signin-oidc"))
	tb.do("denying at the OP", click(`button[name=decision][value=deny]`), chromedp.WaitVisible(chromedp.CSS("body.failure")))
	if title, code := tb.title(), tb.text("code"); title != "Sign-in failed" || code != "access_denied" {
		t.Errorf("the failure page: %q %q", title, code)
	}
	tb.checkPage("46-failure")
	tb.do("trying again", click("a.primary"), chromedp.WaitVisible(chromedp.CSS(`button[name=decision][value=approve]`)))

	tb.do("a sign-out return nobody started", chromedp.Navigate(d.base+"/users/auth/oidc/post_logout?state=forged"), chromedp.WaitVisible(chromedp.CSS("body.logout_failure")))
	tb.checkPage("47-sign-out-failed")

	ns := b.open(t, d)
	ns.watchCSP()
	ns.do("turning script off", chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
		return err
	}))
	ns.home()
	ns.do("signing in with SAML", click("#signin-saml"), chromedp.WaitVisible(chromedp.CSS("body.redirect button.primary")))
	// The page has loaded without running its script; axe, which
	// checkPage runs, needs script again.
	ns.do("turning script on again", chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: false})
		return err
	}))
	if title := ns.title(); !strings.HasPrefix(title, "Signing in with ") {
		t.Errorf("the page that posts to the IdP is titled %q", title)
	}
	ns.checkPage("48-post-to-idp-without-script")
	ns.do("continuing to the IdP", click("button.primary"), chromedp.WaitVisible(chromedp.CSS(`button[name=decision][value=approve]`)))
}
