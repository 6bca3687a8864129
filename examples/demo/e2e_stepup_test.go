//go:build e2e

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestE2EStepUp: signed in with oidc, the user presses Step up; the OP's
// consent page comes again (max_age=0: a fresh authentication) and the
// home page then shows the level the provider asserted and a new
// authentication time.
func TestE2EStepUp(t *testing.T) {
	d := startDemoServer(t)
	tb := startBrowser(t).open(t, d)
	tb.startSignIn("oidc")
	tb.do("approving at the OP", click(`button[name=decision][value=approve]`))
	tb.do("waiting for the signed-in home page", chromedp.WaitVisible(chromedp.ID("no-acr")))

	before := time.Now().UTC().Add(-time.Second)
	tb.do("pressing Step up", click("#step-up"))
	tb.do("approving at the OP again", click(`button[name=decision][value=approve]`))
	tb.do("waiting for the stepped-up home page", chromedp.WaitVisible(chromedp.ID("acr")))
	if acr := tb.text("#acr"); acr != acrHigh {
		t.Errorf("the home page shows acr %q, want %q", acr, acrHigh)
	}
	at, err := time.Parse(time.RFC3339, strings.TrimSpace(tb.text("#auth-time")))
	if err != nil || at.Before(before.Truncate(time.Second)) {
		t.Errorf("the home page shows auth_time %v (%v), want from %v", at, err, before)
	}
	if uid := tb.text("#uid"); uid != "248289761001" {
		t.Errorf("after the step-up the session is %q's", uid)
	}
}
