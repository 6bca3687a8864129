//go:build e2e

package main

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// TestE2EScreenshots walks the demo's own site as a person would on a
// laptop, and keeps a screenshot of each kind of page: the home page, the
// providers' consent and login pages, the signed-in page, the note after a
// local sign-out, and the failure page.
func TestE2EScreenshots(t *testing.T) {
	d := startDemoServer(t)
	tb := startBrowser(t).open(t, d)
	tb.do("sizing the page as a laptop's", laptop)

	tb.home()
	tb.text("#signed-out")
	tb.screenshot("01-home")

	tb.startSignIn("blog_oauth2")
	tb.text("#approve")
	tb.screenshot("02-consent-wordpress")
	tb.do("refusing at WordPress", click("#deny"))
	tb.waitForPath("/users/auth/blog_oauth2/callback")
	if code := tb.text("#failure-code"); code != "access_denied" {
		t.Errorf("the failure page shows %q", code)
	}
	if words := tb.text("#explanation"); !strings.Contains(words, "refused at the provider") {
		t.Errorf("the failure page explains %q", words)
	}
	tb.screenshot("03-failure-access-denied")

	tb.startSignIn("microblog")
	tb.screenshot("04-consent-microblog")

	tb.startSignIn("oidc")
	tb.screenshot("05-consent-openid-connect")

	tb.startSignIn("saml")
	tb.screenshot("06-login-saml-idp")
	tb.do("approving at the IdP", click(`button[name=decision][value=approve]`))
	tb.do("waiting for the signed-in page", chromedp.WaitVisible(chromedp.ID("uid")))
	if mail := tb.text(`#saml-attributes tr:has(td.oid) td strong`); mail == "" {
		t.Error("the signed-in page lists no SAML attribute by its friendly name")
	}
	tb.screenshot("07-signed-in-saml")
	tb.do("unfolding the raw identity", chromedp.Click(chromedp.CSS("summary"), chromedp.NodeVisible), chromedp.WaitVisible(chromedp.ID("identity")))
	tb.screenshot("08-signed-in-saml-raw-json")

	tb.do("signing out", click("#logout"), chromedp.WaitVisible(chromedp.ID("notice-provider")))
	tb.startSignIn("search_oauth2")
	tb.do("approving at the Google stand-in", click(`button[name=decision][value=approve]`), chromedp.WaitVisible(chromedp.ID("uid")))
	tb.screenshot("09-signed-in-google")
	tb.do("signing out", click("#logout"), chromedp.WaitVisible(chromedp.ID("notice-local")))
	if note := tb.text("#notice-local"); !strings.Contains(note, "You are still signed in there") {
		t.Errorf("the note after a local sign-out says %q", note)
	}
	tb.screenshot("10-signed-out-locally")
}

// TestE2ETenants: one browser signs in at both development tenants, each
// at its own identity provider on its own host. A session at a.localhost
// is no session at b.localhost, and a sign-in started at a cannot be
// completed at b, though the same callback then completes it at a.
func TestE2ETenants(t *testing.T) {
	d := startDemoServer(t)
	u, _ := url.Parse(d.base)
	siteA, siteB := "http://a.localhost:"+u.Port(), "http://b.localhost:"+u.Port()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tenant := range []string{"a", "b"} {
		if err := d.srv.auth.TenantReady(ctx, tenant); err != nil {
			t.Fatalf("tenant %s: %v", tenant, err)
		}
	}
	tb := startBrowser(t).open(t, d)
	tb.do("sizing the page as a laptop's", laptop)

	tb.homeAt(siteA)
	if badge := tb.text("#tenant-badge"); badge != "tenant a" {
		t.Errorf("a's home page calls itself %q", badge)
	}
	if href := get(tb, "reading the link to b", chromedp.Evaluate[string](`document.querySelector("#site-b").href`)); href != siteB+"/" {
		t.Errorf("a's home page links to b at %q", href)
	}
	tb.screenshot("20-tenant-a-home")

	tb.startSignInAt(siteA, "saml")
	if loc := tb.location(); !strings.HasPrefix(loc, siteA+"/dev/saml/") {
		t.Fatalf("a's SAML sign-in led to %s, not a's own IdP", loc)
	}
	tb.screenshot("21-tenant-a-idp")
	tb.do("approving at a's IdP", click(`button[name=decision][value=approve]`), chromedp.WaitVisible(chromedp.ID("uid")))
	if uid, tenant := tb.text("#uid"), tb.text("#tenant"); uid != "grace@alpha.example" || tenant != "a" {
		t.Fatalf("signed in at a as %q at tenant %q", uid, tenant)
	}
	tb.screenshot("22-tenant-a-signed-in")

	// The same browser at b: a's session is not one here.
	tb.homeAt(siteB)
	tb.text("#signed-out")
	if me := tb.fetch("/me.json"); me.Status != http.StatusNotFound {
		t.Fatalf("a's session at b: %d %s", me.Status, me.Body)
	}
	tb.screenshot("23-tenant-b-home")
	tb.startSignInAt(siteB, "oidc")
	if loc := tb.location(); !strings.HasPrefix(loc, siteB+"/dev/oidc/") {
		t.Fatalf("b's OpenID sign-in led to %s, not b's own OP", loc)
	}
	tb.screenshot("24-tenant-b-consent")
	tb.do("approving at b's OP", click(`button[name=decision][value=approve]`), chromedp.WaitVisible(chromedp.ID("uid")))
	if uid := tb.text("#uid"); uid != "beta-2001" {
		t.Fatalf("signed in at b as %q", uid)
	}
	tb.screenshot("25-tenant-b-signed-in")
	tb.homeAt(siteA)
	if uid := tb.text("#uid"); uid != "grace@alpha.example" {
		t.Fatalf("signing in at b changed a's session: %q", uid)
	}

	// Signing out at a is single logout at a's IdP; b's session stays.
	n := tb.navigated()
	tb.do("signing out at a", click("#logout"), chromedp.WaitVisible(chromedp.ID("notice-provider")))
	if got, want := tb.navigations(n), []string{"POST " + siteA + "/logout", "GET " + siteA + "/dev/saml/slo",
		"GET " + siteA + "/users/auth/saml/logout", "GET " + siteA + "/"}; !slices.Equal(got, want) {
		t.Errorf("signing out at a went through %q, want %q", got, want)
	}
	tb.homeAt(siteB)
	if uid := tb.text("#uid"); uid != "beta-2001" {
		t.Fatalf("signing out at a changed b's session: %q", uid)
	}

	// A sign-in started at a, taken to b: the browser's request to a's
	// callback is held back, and its URL, code and state included, sent
	// to b instead.
	callback := tb.holdCallback(siteA+"/users/auth/oidc/callback", func() {
		tb.startSignInAt(siteA, "oidc")
		tb.do("approving at a's OP", chromedp.Click(chromedp.CSS(`button[name=decision][value=approve]`), chromedp.NodeVisible))
	})
	tb.do("taking a's callback to b", chromedp.Navigate(strings.Replace(callback, siteA, siteB, 1)), chromedp.WaitVisible(chromedp.ID("failure-code")))
	if st, code := tb.status(), tb.text("#failure-code"); st != http.StatusBadRequest || code != "invalid_state" {
		t.Errorf("a's callback at b answered %d %q, want 400 invalid_state", st, code)
	}
	tb.screenshot("26-tenant-b-refuses-a-sign-in-of-a")
	if me := tb.fetch("/me.json"); !strings.Contains(me.Body, `"uid":"beta-2001"`) {
		t.Errorf("b's session after a's callback: %d %s", me.Status, me.Body)
	}
	tb.do("taking the callback to a", chromedp.Navigate(callback), chromedp.WaitVisible(chromedp.ID("uid")))
	if uid := tb.text("#uid"); uid != "alpha-1001" {
		t.Errorf("the callback at a signed in %q", uid)
	}
}

// holdCallback holds back the browser's request to callback (a sign-in's
// callback URL, without query) while start runs, fails it as a blocked
// request, and returns its URL, query included. Nothing of it reaches the
// demo.
func (tb *tab) holdCallback(callback string, start func()) string {
	tb.t.Helper()
	tb.do("holding back "+callback, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: callback + "*"}}})
		return err
	}))
	start()
	select {
	case p := <-tb.paused:
		tb.do("failing the held request, and holding no more", chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			if _, err := cdp.Call(ctx, t, fetch.FailRequest, fetch.FailRequestParams{RequestID: p.RequestID, ErrorReason: network.ErrorReasonBlockedByClient}); err != nil {
				return err
			}
			_, err := cdp.Call(ctx, t, fetch.Disable, cdp.Empty{})
			return err
		}))
		if !strings.HasPrefix(p.Request.URL, callback+"?") {
			tb.t.Fatalf("held back %s, not %s", withoutQuery(p.Request.URL), callback)
		}
		return p.Request.URL
	case <-time.After(stepTimeout):
		tb.t.Fatalf("the browser never went to %s", callback)
		return ""
	}
}
