//go:build e2e

package main

// The browser side of the e2e suite: the demo on a real loopback listener, a
// headless Chromium driven over the DevTools protocol, one isolated tab per
// test, and the artifacts a failing test leaves behind.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/png"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/extauth/extauth/internal/harness"
)

// stepTimeout bounds one browser step (a page load, a click and the pages it
// leads to): every hop is on loopback, so anything slower is a hang.
const stepTimeout = time.Minute

// syncBuffer collects output written from other goroutines (the browser's
// stderr, the demo's log) for the artifacts of a failed test.
type syncBuffer = harness.SyncBuffer

// demo is the demo application on development providers, served on a real
// 127.0.0.1 port so that the browser reaches it as a person's browser would.
type demo struct {
	base string
	log  *syncBuffer
	srv  *server
}

func startDemoServer(t *testing.T) *demo {
	t.Helper()
	return startDemoServerWith(t, demoSetup{})
}

// demoSetup is how a test serves the demo beyond the default.
type demoSetup struct {
	// host, when set, is the host name of the demo's base URL instead of
	// 127.0.0.1: a name the browser maps to 127.0.0.1 (plainHost), which
	// makes the demo a plain-http site that gets no fetch metadata.
	host string
	// extra are pages of the test's own, served on the demo's origin
	// beside the demo's.
	extra map[string]http.HandlerFunc
}

func startDemoServerWith(t *testing.T, setup demoSetup) *demo {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &demo{base: "http://" + ln.Addr().String(), log: &syncBuffer{}}
	o := serverOptions{logger: slog.New(slog.NewTextHandler(d.log, nil))}
	if setup.host != "" {
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		d.base = "http://" + net.JoinHostPort(setup.host, port)
		// The demo's own calls to its development providers go to its
		// base URL's host, at the listener's address.
		dialer := &net.Dialer{Timeout: 10 * time.Second}
		o.httpClient = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if h, _, err := net.SplitHostPort(addr); err == nil && h == setup.host {
				addr = ln.Addr().String()
			}
			return dialer.DialContext(ctx, network, addr)
		}}}
	}
	demoSrv, err := newServer(d.base, o)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	d.srv = demoSrv
	var handler http.Handler = demoSrv
	if len(setup.extra) > 0 {
		mux := http.NewServeMux()
		for path, h := range setup.extra {
			mux.HandleFunc(path, h)
		}
		mux.Handle("/", demoSrv)
		handler = mux
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
		demoSrv.Close()
	})
	return d
}

// browser is one headless Chromium with a fresh profile.
type browser struct {
	ctx    context.Context // has run once, so the process is up
	output *syncBuffer
}

// chromiumPath is $E2E_CHROMIUM, else chromium (Debian's package) or
// chromium-browser on $PATH. A missing browser fails the suite: the e2e tag
// says the machine has one (.ci/run installs it).
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("E2E_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium on $PATH: install it (apt-get install chromium) or set E2E_CHROMIUM")
	return ""
}

// startBrowser starts Chromium with the suite's flags plus extra ones (the
// HTTPS test adds --ignore-certificate-errors for its own certificate).
func startBrowser(t *testing.T, extra ...chromedp.ExecAllocatorOption) *browser {
	t.Helper()
	exe := chromiumPath(t)
	b := &browser{output: &syncBuffer{}}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		// The machine's network is closed: no QUIC probes, no component,
		// safe-browsing or sync downloads that would hang or add noise.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		// Containers often have a 64 MB /dev/shm, which Chromium outgrows.
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
		chromedp.WindowSize(1024, 768),
		chromedp.CombinedOutput(b.output),
	}
	opts = append(opts, extra...)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	// The first run starts the process; it must not carry a timeout, or the
	// timeout would end the browser.
	if err := chromedp.Do(bctx); err != nil {
		bcancel()
		acancel()
		t.Fatalf("starting %s: %v\n%s", exe, err, b.output)
	}
	t.Cleanup(func() {
		bcancel()
		acancel() // waits for the process, so the profile can be removed
	})
	b.ctx = bctx
	return b
}

// tab is one page in its own browser context: its own cookie jar, so the
// tests cannot see each other's sessions.
type tab struct {
	t    *testing.T
	ctx  context.Context
	demo *demo

	mu sync.Mutex
	// docs lists the document responses in order, "status method URL" with
	// the query left out: callback queries carry codes and states.
	docs       []string
	lastStatus int64
	// navs lists the document requests in order, redirects included, as
	// "METHOD URL" without the query.
	navs []string
	// paused receives the requests the Fetch domain holds back, when a
	// test enables it (holdRequest).
	paused chan *fetch.EventRequestPaused
}

func (b *browser) open(t *testing.T, d *demo) *tab {
	t.Helper()
	tb := &tab{t: t, demo: d, paused: make(chan *fetch.EventRequestPaused, 8)}
	ctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithNewBrowserContext(), chromedp.WithListener(tb.record))
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		t.Fatalf("opening a tab: %v\n%s", err, b.output)
	}
	t.Cleanup(func() {
		if t.Failed() {
			stem, err := tb.saveArtifacts(b)
			if err != nil {
				t.Logf("artifacts: %v", err)
			}
			if stem != "" {
				t.Logf("artifacts: %s.{png,html,log}", stem)
			}
		}
		cancel()
	})
	tb.ctx = ctx
	return tb
}

// record runs on the browser's reader goroutine; it must only note things.
func (tb *tab) record(ev any) {
	if req, ok := ev.(*network.EventRequestWillBeSent); ok && req.Type == network.ResourceTypeDocument && req.Request != nil {
		tb.mu.Lock()
		tb.navs = append(tb.navs, req.Request.Method+" "+withoutQuery(req.Request.URL))
		tb.mu.Unlock()
		return
	}
	if p, ok := ev.(*fetch.EventRequestPaused); ok {
		select {
		case tb.paused <- p:
		default:
		}
		return
	}
	resp, ok := ev.(*network.EventResponseReceived)
	if !ok || resp.Type != network.ResourceTypeDocument || resp.Response == nil {
		return
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.docs = append(tb.docs, fmt.Sprintf("%d %s", resp.Response.Status, withoutQuery(resp.Response.URL)))
	tb.lastStatus = resp.Response.Status
}

// withoutQuery drops the query and fragment, which carry codes, states and
// SAML messages.
func withoutQuery(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable URL)"
	}
	p.RawQuery, p.Fragment = "", ""
	return p.String()
}

// navigations returns the document requests from the n-th on, with the
// demo's origin left out of its own URLs.
func (tb *tab) navigations(n int) []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	var out []string
	for _, nav := range tb.navs[min(n, len(tb.navs)):] {
		method, u, _ := strings.Cut(nav, " ")
		out = append(out, method+" "+strings.TrimPrefix(u, tb.demo.base))
	}
	return out
}

// navigated is how many document requests the tab has made so far.
func (tb *tab) navigated() int {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return len(tb.navs)
}

// status is the HTTP status of the document the tab shows now.
func (tb *tab) status() int64 {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.lastStatus
}

// do runs the steps with the step time-out, failing the test on error.
func (tb *tab) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		tb.t.Fatalf("%s: %v", what, err)
	}
}

// get runs one action that returns a value, with the step time-out.
func get[T any](tb *tab, what string, a chromedp.Action[T]) T {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		tb.t.Fatalf("%s: %v", what, err)
	}
	return v
}

// click presses the first visible element matching the CSS selector and
// waits until the page it leads to (after any redirects) has loaded. Rows of
// the provider table use it to get through a provider's pages.
func click(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible))
		if err != nil {
			return fmt.Errorf("click %s: %w", sel, err)
		}
		return nil
	})
}

// home loads the demo's home page.
func (tb *tab) home() {
	tb.t.Helper()
	tb.homeAt(tb.demo.base)
}

// homeAt loads the home page of the site at base: the demo's, or a
// tenant's.
func (tb *tab) homeAt(base string) {
	tb.t.Helper()
	tb.do("loading the home page at "+base, chromedp.Navigate(base+"/"), chromedp.WaitReady(chromedp.CSS("body")))
}

// startSignIn presses the home page's button for the provider and waits for
// the provider's first page. A provider that is not ready yet (the SAML SP
// reads the IdP's metadata in the background after start-up) answers 503
// provider_unavailable; like a person, the test goes back and presses again,
// for a few seconds at most.
func (tb *tab) startSignIn(provider string) {
	tb.t.Helper()
	tb.startSignInAt(tb.demo.base, provider)
}

// startSignInAt is startSignIn at the site at base.
func (tb *tab) startSignInAt(base, provider string) {
	tb.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		tb.homeAt(base)
		tb.do("starting sign-in with "+provider, click("#signin-"+provider))
		if tb.status() != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// signInButtons lists the providers the home page offers, from the ids of
// its sign-in buttons.
func (tb *tab) signInButtons() []string {
	tb.t.Helper()
	return get(tb, "reading the sign-in buttons", chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll('button[id^="signin-"]'), b => b.id.slice("signin-".length))`))
}

// fetched is an answer to a fetch made by the page, with its cookies.
type fetched struct {
	Status int    `json:"status"`
	Body   string `json:"body"`
}

// fetch requests path from the demo's page, so the browser sends the cookies
// it holds for the demo, as a script on the page would.
func (tb *tab) fetch(path string) fetched {
	tb.t.Helper()
	js := fmt.Sprintf(`fetch(%q, {credentials: "same-origin"}).then(async r => ({status: r.status, body: await r.text()}))`, path)
	return get(tb, "fetching "+path, chromedp.Evaluate[fetched](js, chromedp.EvalAwaitPromise))
}

// text is the rendered text of the first element matching the CSS selector,
// once it is visible.
func (tb *tab) text(sel string) string {
	tb.t.Helper()
	return get(tb, "reading "+sel, chromedp.Text(chromedp.CSS(sel), chromedp.NodeVisible))
}

// waitForPath waits until the tab has loaded a page of the demo under path,
// through any pages that move on by themselves (the SAML POST binding's
// self-submitting form). It returns the page's URL.
func (tb *tab) waitForPath(path string) string {
	tb.t.Helper()
	want := tb.demo.base + path
	deadline := time.Now().Add(stepTimeout)
	var loc string
	for {
		ctx, cancel := context.WithTimeout(tb.ctx, time.Second)
		// Read both at once: between navigations the old document answers.
		state, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[location.href, document.readyState]`))
		cancel()
		if err == nil && len(state) == 2 {
			loc = state[0]
			if strings.HasPrefix(loc, want) && state[1] == "complete" {
				return loc
			}
		}
		if time.Now().After(deadline) {
			tb.t.Fatalf("waiting for %s: the tab shows %s", want, loc)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// location is the URL the tab shows.
func (tb *tab) location() string {
	tb.t.Helper()
	return get(tb, "reading the location", chromedp.Location())
}

// cookies are the browser's cookies that would go with a request to any of
// the demo paths, attributes included, read over the DevTools protocol.
func (tb *tab) cookies(paths ...string) []*network.Cookie {
	tb.t.Helper()
	urls := make([]string, len(paths))
	for i, p := range paths {
		urls[i] = tb.demo.base + p
	}
	return get(tb, "reading cookies", chromedp.Action[[]*network.Cookie](
		func(ctx context.Context, t *chromedp.Target) ([]*network.Cookie, error) {
			res, err := cdp.Call(ctx, t, network.GetCookies, network.GetCookiesParams{URLs: urls})
			if err != nil {
				return nil, err
			}
			return res.Cookies, nil
		}))
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// laptop is the viewport of the screenshots: a laptop's screen.
var laptop = chromedp.EmulateViewport(1280, 800)

var (
	shotsOnce sync.Once
	shotsDir  string
	shotsErr  error
)

// screenshotDir is $E2E_ARTIFACTS/screenshots, made once per run; without
// $E2E_ARTIFACTS, a new directory that outlives the run.
func screenshotDir() (string, error) {
	shotsOnce.Do(func() {
		var dir string
		if dir, shotsErr = artifactDir(); shotsErr == nil {
			shotsDir = filepath.Join(dir, "screenshots")
			shotsErr = os.MkdirAll(shotsDir, 0o755)
		}
	})
	return shotsDir, shotsErr
}

// pageBackground is the background the shared stylesheet gives every page,
// the demo's and the providers': a page that shows it has its styles.
const pageBackground = "rgb(245, 247, 250)"

// screenshot saves the whole page as name.png under screenshotDir, for a
// person to look at (CI keeps them as artifacts), after checking that the
// page is styled and rendered.
func (tb *tab) screenshot(name string) {
	tb.t.Helper()
	if bg := get(tb, "reading the page's background", chromedp.Evaluate[string](`getComputedStyle(document.body).backgroundColor`)); bg != pageBackground {
		tb.t.Errorf("%s: the page's background is %s, not the stylesheet's %s", name, bg, pageBackground)
	}
	raw := get(tb, "taking a screenshot", chromedp.FullScreenshot(100))
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		tb.t.Fatalf("%s: the screenshot is no PNG: %v", name, err)
	}
	if n := colours(img); n < 3 {
		tb.t.Errorf("%s: the screenshot has %d colours: the page did not render", name, n)
	}
	dir, err := screenshotDir()
	if err != nil {
		tb.t.Fatal(err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		tb.t.Fatal(err)
	}
	tb.t.Logf("screenshot: %s", path)
}

// artifactDir is $E2E_ARTIFACTS, else a new directory that outlives the test
// (t.TempDir would be removed with the evidence).
func artifactDir() (string, error) {
	if d := os.Getenv("E2E_ARTIFACTS"); d != "" {
		return d, os.MkdirAll(d, 0o755)
	}
	return os.MkdirTemp("", "extauth-e2e-artifacts-")
}

// saveArtifacts keeps what a person needs to see why a test failed: a
// screenshot, the page's HTML, the document responses, and the browser's
// and the demo's output. It returns the files' common path without suffix.
func (tb *tab) saveArtifacts(b *browser) (string, error) {
	dir, err := artifactDir()
	if err != nil {
		return "", err
	}
	stem := filepath.Join(dir, unsafeName.ReplaceAllString(tb.t.Name(), "_"))
	// A test with several tabs leaves each tab's.
	for i := 2; ; i++ {
		if _, err := os.Stat(stem + ".log"); err != nil {
			break
		}
		stem = filepath.Join(dir, unsafeName.ReplaceAllString(tb.t.Name(), "_")+"-"+strconv.Itoa(i))
	}
	// The test's own step context may have died with the failure; the tab
	// lives until the cleanup cancels it.
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	var errs []error
	if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err != nil {
		errs = append(errs, fmt.Errorf("screenshot: %w", err))
	} else if err := os.WriteFile(stem+".png", png, 0o644); err != nil {
		errs = append(errs, err)
	}
	if html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html"))); err != nil {
		errs = append(errs, fmt.Errorf("page HTML: %w", err))
	} else if err := os.WriteFile(stem+".html", []byte(html), 0o644); err != nil {
		errs = append(errs, err)
	}
	tb.mu.Lock()
	docs := strings.Join(tb.docs, "\n")
	navs := strings.Join(tb.navs, "\n")
	tb.mu.Unlock()
	logText := "document requests:\n" + navs + "\n\ndocument responses:\n" + docs + "\n\ndemo log:\n" + tb.demo.log.String() + "\nchromium output:\n" + b.output.String()
	if err := os.WriteFile(stem+".log", []byte(logText), 0o644); err != nil {
		errs = append(errs, err)
	}
	return stem, errors.Join(errs...)
}
