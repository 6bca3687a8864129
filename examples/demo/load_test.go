package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/extauth/extauth/extauthtest"
	"github.com/extauth/extauth/internal/loadtest"
)

// Sign-ins by the thousand through the demo's routes, against its
// development providers, eight waiting on a consent or login page at any
// time: none fails, and the last ones cost what the first did (CPU time of
// the whole process, medians of slices). The million sign-ins run through
// each fake's own issue and redeem paths, where what a sign-in leaves
// behind is kept: TestMillionSignIns in extauthtest/oidcop, samlidp,
// oauth1, graph, wpoauth and forge.
func TestDemoManySignIns(t *testing.T) {
	base, demo := startDemoWith(t, serverOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := demo.auth.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	providers := []struct{ slug, button string }{
		{"microblog", "Sign in as @demo_user (Demo User)"},
		{"socialnet", "Continue as Demo Person"},
		{"search_oauth2", "Approve"},
		{"blog_oauth2", "Approve"},
		{"saml", "Approve"},
		{"oidc", "Approve"},
	}
	const (
		window   = 8
		sliceLen = 2 * 6 // sign-ins per measured slice
		compared = 15
	)
	signIns := manySignIns
	browsers := make([]*extauthtest.Browser, window)
	pages := make([]*extauthtest.Page, window)
	for i := range browsers {
		browsers[i] = extauthtest.NewBrowser(t)
	}
	finish := func(i int) {
		p := providers[i%len(providers)]
		page := browsers[i%window].Click(pages[i%window], p.button)
		if page.URL.Path != "/" || !strings.Contains(page.Body, fmt.Sprintf(`<code id="provider">%s</code>`, p.slug)) {
			t.Fatalf("sign-in %d with %s ended at %s (%d): %s", i, p.slug, page.URL, page.StatusCode, page.Body)
		}
	}
	var costs []time.Duration
	start := loadtest.ProcessCPU()
	for i := range signIns {
		if i >= window {
			finish(i - window)
		}
		p := providers[i%len(providers)]
		pages[i%window] = browsers[i%window].Post(base+"/users/auth/"+p.slug, url.Values{})
		if (i+1)%sliceLen == 0 {
			now := loadtest.ProcessCPU()
			costs = append(costs, now-start)
			start = now
		}
	}
	for i := signIns - window; i < signIns; i++ {
		finish(i)
	}
	loadtest.Growth(t, costs, compared, fmt.Sprintf("%d sign-ins through the routes in slices of %d", signIns, sliceLen))
}
