//go:build e2e

package main

// The e2e suite: a real Chromium clicks through the demo's sign-ins on its
// development providers. Run it with
//
//	go test -tags e2e ./examples/demo
//
// It needs Debian's chromium (or $E2E_CHROMIUM); on failure it saves a
// screenshot, the page's HTML and a log to $E2E_ARTIFACTS.

import (
	"bytes"
	"encoding/json"
	"image"
	"image/png"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// maxTransaction is the longest a transaction cookie may live (SECURITY: at
// most 10 minutes), plus slack for the clocks of the browser and the test.
const maxTransaction = 10*time.Minute + 5*time.Second

func TestE2EProvidersOffered(t *testing.T) {
	d := startDemoServer(t)
	tb := startBrowser(t).open(t, d)
	tb.home()
	got := tb.signInButtons()
	var want []string
	for _, p := range e2eProviders() {
		want = append(want, p.name)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("the home page offers %q, the e2e table covers %q: add or remove rows in e2e_providers_test.go", got, want)
	}
}

func TestE2ESignIn(t *testing.T) {
	d := startDemoServer(t)
	b := startBrowser(t)
	for _, p := range e2eProviders() {
		t.Run(p.name, func(t *testing.T) {
			tb := b.open(t, d)
			tb.home()
			tb.text("#signed-out")
			if me := tb.fetch("/me.json"); me.Status != http.StatusNotFound {
				t.Fatalf("/me.json before sign-in: %d %s", me.Status, me.Body)
			}

			tb.startSignIn(p.name)
			tb.do("getting through "+p.name+"'s pages", p.approve...)
			tb.do("waiting for the signed-in home page", chromedp.WaitVisible(chromedp.ID("uid")))
			// A fragment is the provider's to add (socialnet, like Facebook,
			// appends #_=_, which the demo's pages then take out of the
			// address bar: TestE2ESocialnetLeavesNoFragment).
			if loc, _, _ := strings.Cut(tb.location(), "#"); loc != d.base+"/" {
				t.Errorf("signed in at %s, want the home page %s/", loc, d.base)
			}
			if uid := tb.text("#uid"); uid != p.uid {
				t.Errorf("home page shows UID %q, want %q", uid, p.uid)
			}
			if prov := tb.text("#provider"); prov != p.name {
				t.Errorf("home page shows provider %q, want %q", prov, p.name)
			}

			me := tb.fetch("/me.json")
			var id struct {
				Provider string `json:"provider"`
				UID      string `json:"uid"`
			}
			if me.Status != http.StatusOK {
				t.Fatalf("/me.json signed in: %d %s", me.Status, me.Body)
			}
			if err := json.Unmarshal([]byte(me.Body), &id); err != nil {
				t.Fatalf("/me.json: %v: %s", err, me.Body)
			}
			if id.Provider != p.name || id.UID != p.uid {
				t.Errorf("/me.json says %s/%s, want %s/%s", id.Provider, id.UID, p.name, p.uid)
			}

			n := tb.navigated()
			out := append(append(steps{click("#logout")}, p.signOutAt...), chromedp.WaitVisible(chromedp.ID("signed-out")))
			tb.do("signing out", out...)
			want, note := p.signOut, "#notice-provider"
			if want == nil {
				want, note = localSignOut, "#notice-local"
			}
			if got := tb.navigations(n); !slices.Equal(got, want) {
				t.Errorf("sign-out went through %q, want %q", got, want)
			}
			if text := tb.text(note); text == "" {
				t.Errorf("no sign-out note %s", note)
			}
			if me := tb.fetch("/me.json"); me.Status != http.StatusNotFound {
				t.Fatalf("/me.json after sign-out: %d %s", me.Status, me.Body)
			}
		})
	}
	// Prometheus scrapes the demo: each sign-in the browser made is in
	// extauth's metrics, started and completed.
	metrics := scrapeMetrics(t, d.base)
	for _, p := range e2eProviders() {
		for _, series := range []string{
			`extauth_signin_started_total{provider="` + p.name + `",tenant=""}`,
			`extauth_signin_completed_total{outcome="success",provider="` + p.name + `",tenant=""}`,
			`extauth_callback_duration_seconds_count{outcome="success",provider="` + p.name + `",tenant=""}`,
		} {
			if n := metrics[series]; n < 1 {
				t.Errorf("/metrics: %s is %v after a sign-in", series, n)
			}
		}
	}
}

// scrapeMetrics GETs base/metrics as Prometheus does and returns each
// series, without the OpenTelemetry scope's labels, with its value.
func scrapeMetrics(t *testing.T, base string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d %v", resp.StatusCode, err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(promSeries(string(body)), "\n") {
		i := strings.LastIndexByte(line, ' ')
		if strings.HasPrefix(line, "#") || i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			out[strings.Replace(line[:i], ",}", "}", 1)] = v
		}
	}
	return out
}

// TestE2EBackchannelLogout: signed in to the demo with oidc, the user
// signs out of every application on the OP's own page; the OP tells the
// demo over the back channel, and the demo's page shows the user signed out
// when next loaded.
func TestE2EBackchannelLogout(t *testing.T) {
	d := startDemoServer(t)
	tb := startBrowser(t).open(t, d)
	tb.startSignIn("oidc")
	tb.do("approving at the OP", click(`button[name=decision][value=approve]`))
	tb.do("waiting for the signed-in home page", chromedp.WaitVisible(chromedp.ID("uid")))

	tb.do("opening the OP's account page", chromedp.Navigate(d.base+"/dev/oidc/account"), chromedp.WaitVisible(chromedp.ID("op-signed-in")))
	tb.do("signing out of every application at the OP", click("#op-logout-everywhere"), chromedp.WaitVisible(chromedp.ID("op-signed-out")))

	tb.home()
	tb.text("#signed-out")
	if me := tb.fetch("/me.json"); me.Status != http.StatusNotFound {
		t.Fatalf("/me.json after the OP's back-channel logout: %d %s", me.Status, me.Body)
	}
	if log := d.log.String(); !strings.Contains(log, "signed out on the provider's word") || !strings.Contains(log, "channel=backchannel") {
		t.Errorf("the demo's log does not show the back-channel logout:\n%s", log)
	}
}

func TestE2EDeniedConsent(t *testing.T) {
	d := startDemoServer(t)
	b := startBrowser(t)
	refusable := 0
	for _, p := range e2eProviders() {
		if p.deny == nil {
			continue
		}
		refusable++
		t.Run(p.name, func(t *testing.T) {
			tb := b.open(t, d)
			tb.home()
			tb.startSignIn(p.name)
			tb.do("refusing at "+p.name, p.deny...)
			tb.waitForPath("/users/auth/" + p.name + "/callback")
			if st := tb.status(); st != http.StatusForbidden {
				t.Errorf("refused consent answered %d, want 403", st)
			}
			if body := tb.text("body"); !strings.Contains(body, "access_denied") {
				t.Errorf("refused consent page does not say access_denied:\n%s", body)
			}
			if me := tb.fetch("/me.json"); me.Status != http.StatusNotFound {
				t.Errorf("/me.json after refusing: %d %s", me.Status, me.Body)
			}
		})
	}
	if refusable == 0 {
		t.Fatal("no provider in the e2e table can refuse consent")
	}
}

// isTxCookie tells the provider's transaction cookies apart from the
// demo's session and other providers' (whatever the __Host-/__Secure- prefix).
func isTxCookie(name, provider string) bool {
	name = strings.TrimPrefix(name, "__Host-")
	name = strings.TrimPrefix(name, "__Secure-")
	return strings.HasPrefix(name, "extauth_"+provider+"_")
}

func TestE2ETransactionCookie(t *testing.T) {
	d := startDemoServer(t)
	b := startBrowser(t)
	for _, p := range e2eProviders() {
		t.Run(p.name, func(t *testing.T) {
			tb := b.open(t, d)
			callback := "/users/auth/" + p.name + "/callback"
			tb.home()
			tb.startSignIn(p.name)

			var tx []*network.Cookie
			for _, c := range tb.cookies("/", callback) {
				if isTxCookie(c.Name, p.name) {
					tx = append(tx, c)
				}
			}
			if len(tx) != 1 {
				t.Fatalf("want one %s transaction cookie while on the provider's page, have %d", p.name, len(tx))
			}
			c, want := tx[0], p.txCookie
			if !c.HTTPOnly {
				t.Errorf("%s is not HttpOnly", c.Name)
			}
			if c.SameSite != want.sameSite {
				t.Errorf("%s has SameSite=%q, want %q", c.Name, c.SameSite, want.sameSite)
			}
			if c.Secure != want.secure {
				t.Errorf("%s has Secure=%v, want %v", c.Name, c.Secure, want.secure)
			}
			if c.Path != want.path {
				t.Errorf("%s has Path=%q, want %q", c.Name, c.Path, want.path)
			}
			expires := time.Unix(0, int64(c.Expires*float64(time.Second)))
			if c.Session || time.Until(expires) <= 0 || time.Until(expires) > maxTransaction {
				t.Errorf("%s expires at %v (session %v), want within 10 minutes", c.Name, expires, c.Session)
			}
			if strings.HasPrefix(tb.location(), d.base) {
				// The development provider shares the demo's origin: its
				// page's scripts must not read the transaction.
				if js := get(tb, "reading document.cookie", chromedp.Evaluate[string](`document.cookie`)); strings.Contains(js, c.Name) {
					t.Errorf("%s is readable from the page's script", c.Name)
				}
			}

			tb.do("getting through "+p.name+"'s pages", p.approve...)
			tb.do("waiting for the signed-in home page", chromedp.WaitVisible(chromedp.ID("uid")))
			for _, c := range tb.cookies("/", callback) {
				if isTxCookie(c.Name, p.name) {
					t.Errorf("%s is still in the browser after the callback", c.Name)
				}
			}
		})
	}
}

// TestE2EArtifacts checks what a failing test leaves behind: a screenshot
// that shows the page, its HTML and the hops.
func TestE2EArtifacts(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("E2E_ARTIFACTS", dir)
	d := startDemoServer(t)
	b := startBrowser(t)
	tb := b.open(t, d)
	tb.home()
	stem, err := tb.saveArtifacts(b)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(stem, dir) {
		t.Fatalf("artifacts at %s, not under $E2E_ARTIFACTS %s", stem, dir)
	}
	raw, err := os.ReadFile(stem + ".png")
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	if n := colours(img); n < 3 {
		t.Errorf("screenshot has %d colours: the page did not render", n)
	}
	html, err := os.ReadFile(stem + ".html")
	if err != nil || !bytes.Contains(html, []byte(`id="signin-`)) {
		t.Errorf("page HTML: %v\n%s", err, html)
	}
	log, err := os.ReadFile(stem + ".log")
	if err != nil || !bytes.Contains(log, []byte("200 "+d.base+"/")) {
		t.Errorf("log: %v\n%s", err, log)
	}
}

// colours counts distinct colours, up to a few: a blank page has one.
func colours(img image.Image) int {
	seen := map[[4]uint32]bool{}
	r := img.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y += 2 {
		for x := r.Min.X; x < r.Max.X; x += 2 {
			c0, c1, c2, c3 := img.At(x, y).RGBA()
			seen[[4]uint32{c0, c1, c2, c3}] = true
			if len(seen) >= 16 {
				return len(seen)
			}
		}
	}
	return len(seen)
}
