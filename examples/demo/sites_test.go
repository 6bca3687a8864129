package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/extauth/extauth/extauthtest"
	"github.com/extauth/extauth/internal/harness"
)

// tenantDemo is the demo with its two development tenants, whose hosts
// a.localhost and b.localhost a Browser reaches at 127.0.0.1.
type tenantDemo struct {
	base, a, b string
	demo       *server
}

func startTenantDemo(t *testing.T) *tenantDemo {
	t.Helper()
	base, demo := startDemoWith(t, serverOptions{})
	u, _ := url.Parse(base)
	td := &tenantDemo{base: base, a: "http://a.localhost:" + u.Port(), b: "http://b.localhost:" + u.Port(), demo: demo}
	// The tenants' SAML SPs read their IdPs' metadata on first use.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tenant := range []string{"a", "b"} {
		if err := demo.auth.TenantReady(ctx, tenant); err != nil {
			t.Fatalf("tenant %s: %v", tenant, err)
		}
	}
	return td
}

// Each tenant's home page says which tenant it is, offers the tenant's own
// providers, and links to the other sites.
func TestDemoTenantHomePages(t *testing.T) {
	td := startTenantDemo(t)
	b := extauthtest.NewBrowser(t)
	for _, tc := range []struct{ url, tenant, org, other string }{
		{td.a, "a", "Alpha University", td.b},
		{td.b, "b", "Beta Institute", td.a},
	} {
		home := b.Get(tc.url + "/")
		for _, want := range []string{
			`<span class="pill" id="tenant-badge">tenant ` + tc.tenant + `</span>`,
			`This is tenant <strong>` + tc.tenant + `</strong>, served at <strong>` + strings.TrimPrefix(tc.url, "http://") + `</strong>`,
			`<h1>Sign in to ` + tc.org + `</h1>`,
			`<span>SAML (` + tc.org + `&#39;s IdP)</span>`,
			`<span>` + tc.org + ` account</span>`,
			`href="` + tc.other + `/"`,
			`href="` + td.base + `/"`,
		} {
			if !strings.Contains(home.Body, want) {
				t.Errorf("tenant %s's home page lacks %s", tc.tenant, want)
			}
		}
		if strings.Contains(home.Body, "signin-microblog") {
			t.Errorf("tenant %s offers the demo's own providers", tc.tenant)
		}
	}
	main := b.Get(td.base + "/")
	if strings.Contains(main.Body, `id="tenant-badge"`) || !strings.Contains(main.Body, `href="`+td.a+`/"`) || !strings.Contains(main.Body, `href="`+td.b+`/"`) {
		t.Errorf("the demo's own home page: %s", main.Body)
	}
	if page := b.Get(strings.Replace(td.a, "a.localhost", "c.localhost", 1) + "/"); page.StatusCode != http.StatusNotFound || !strings.Contains(page.Body, "No such site") {
		t.Errorf("an unknown tenant's host: %d %s", page.StatusCode, page.Body)
	}
}

// One browser signs in at both tenants, each at its own identity provider
// on its own host; neither session is a session at the other host, and
// signing out of one leaves the other.
func TestDemoTenantsSignInApart(t *testing.T) {
	td := startTenantDemo(t)
	b := extauthtest.NewBrowser(t)

	login := b.Post(td.a+"/users/auth/saml", nil)
	if login.URL.Host != strings.TrimPrefix(td.a, "http://") || !strings.HasPrefix(login.URL.Path, "/dev/saml/") {
		t.Fatalf("tenant a's SAML sign-in led to %s", login.URL)
	}
	page := b.Click(login, "Approve")
	if page.URL.String() != td.a+"/" || !strings.Contains(page.Body, `<code id="uid">grace@alpha.example</code>`) ||
		!strings.Contains(page.Body, `<span id="tenant">a</span>`) {
		t.Fatalf("after signing in at a: %s %d %s", page.URL, page.StatusCode, page.Body)
	}
	if me := b.Get(td.b + "/me.json"); me.StatusCode != http.StatusNotFound {
		t.Fatalf("a's session is a session at b: %d %s", me.StatusCode, me.Body)
	}
	if home := b.Get(td.b + "/"); !strings.Contains(home.Body, `id="signed-out"`) {
		t.Fatalf("b's home page after signing in at a: %s", home.Body)
	}
	if me := b.Get(td.base + "/me.json"); me.StatusCode != http.StatusNotFound {
		t.Fatalf("a's session is a session at the demo's own site: %d", me.StatusCode)
	}

	consent := b.Post(td.b+"/users/auth/oidc", nil)
	if consent.URL.Host != strings.TrimPrefix(td.b, "http://") || !strings.Contains(consent.Body, "Alan Turing") {
		t.Fatalf("tenant b's OpenID sign-in led to %s: %s", consent.URL, consent.Body)
	}
	page = b.Click(consent, "Approve")
	if page.URL.String() != td.b+"/" || !strings.Contains(page.Body, `<code id="uid">beta-2001</code>`) {
		t.Fatalf("after signing in at b: %s %d %s", page.URL, page.StatusCode, page.Body)
	}
	if me := b.Get(td.a + "/me.json"); !strings.Contains(me.Body, `"uid":"grace@alpha.example"`) || !strings.Contains(me.Body, `"tenant":"a"`) {
		t.Fatalf("a's session after signing in at b: %s", me.Body)
	}

	// Signing out at a is single logout at a's IdP, and b's session stays.
	page = b.Click(b.Get(td.a+"/"), "logout")
	if page.URL.String() != td.a+"/" || !strings.Contains(page.Body, `id="notice-provider"`) {
		t.Fatalf("after signing out at a: %s %s", page.URL, page.Body)
	}
	if idp := td.demo.dev.fakes["a"].SAML.LastLogout(); idp == nil || idp.Request.NameID.Value != "grace@alpha.example" {
		t.Errorf("tenant a's IdP saw no logout of grace: %+v", idp)
	}
	if idp := td.demo.dev.fakes[""].SAML.LastLogout(); idp != nil {
		t.Errorf("the demo's own IdP saw a logout: %+v", idp)
	}
	if me := b.Get(td.a + "/me.json"); me.StatusCode != http.StatusNotFound {
		t.Errorf("still signed in at a: %s", me.Body)
	}
	if me := b.Get(td.b + "/me.json"); me.StatusCode != http.StatusOK {
		t.Errorf("signing out at a signed b out: %d", me.StatusCode)
	}
}

// A sign-in started at tenant a cannot be completed at tenant b, though
// both have an OpenID provider and the callback is the same path: b has no
// sign-in of this browser under way. The same callback at a completes it.
func TestDemoTenantSignInCannotFinishElsewhere(t *testing.T) {
	td := startTenantDemo(t)
	b := extauthtest.NewBrowser(t)
	consent := b.Post(td.a+"/users/auth/oidc", nil)
	callback := approveWithoutFollowing(t, b, consent)
	if !strings.HasPrefix(callback, td.a+"/users/auth/oidc/callback?") {
		t.Fatalf("the OP sent the browser to %s", callback)
	}
	atB := b.Get(strings.Replace(callback, td.a, td.b, 1))
	if atB.StatusCode != http.StatusBadRequest || !strings.Contains(atB.Body, `<code id="failure-code">invalid_state</code>`) {
		t.Fatalf("a's callback at b: %d %s", atB.StatusCode, atB.Body)
	}
	if me := b.Get(td.b + "/me.json"); me.StatusCode != http.StatusNotFound {
		t.Fatalf("a's callback signed someone in at b: %s", me.Body)
	}
	atA := b.Get(callback)
	if atA.URL.String() != td.a+"/" || !strings.Contains(atA.Body, `<code id="uid">alpha-1001</code>`) {
		t.Fatalf("the callback at a: %s %d %s", atA.URL, atA.StatusCode, atA.Body)
	}
}

// approveWithoutFollowing approves at the development OP's consent page
// and returns where the OP redirects the browser, without going there.
func approveWithoutFollowing(t *testing.T, b *extauthtest.Browser, consent *extauthtest.Page) string {
	t.Helper()
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	client := &http.Client{
		Jar: b.Jar,
		Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			_, port, _ := net.SplitHostPort(addr)
			return dialer.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
		}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	defer client.CloseIdleConnections()
	action, err := consent.URL.Parse(formAction(t, consent.Body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.PostForm(action.String(), url.Values{"interaction": {hiddenValue(consent.Body, "interaction")},
		"user": {hiddenChecked(consent.Body)}, "decision": {"approve"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("approving: %d", resp.StatusCode)
	}
	return resp.Header.Get("Location")
}

// hiddenChecked is the value of the checked radio button of a consent page.
func hiddenChecked(body string) string {
	_, rest, _ := strings.Cut(body, `name="user" value="`)
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// A session cookie carried to another tenant's host names no one there:
// a session belongs to the tenant it was made at.
func TestDemoTenantSessionCookieStaysAtItsTenant(t *testing.T) {
	td := startTenantDemo(t)
	b := extauthtest.NewBrowser(t)
	b.Click(b.Post(td.a+"/users/auth/oidc", nil), "Approve")
	c := b.Cookie(td.a+"/", sessionCookie)
	if c == nil {
		t.Fatal("no session cookie at a")
	}
	if b.Cookie(td.b+"/", sessionCookie) != nil || b.Cookie(td.base+"/", sessionCookie) != nil {
		t.Fatal("the browser sends a's session cookie to another host")
	}
	other := harness.NewBrowser(t)
	req, _ := http.NewRequest(http.MethodGet, td.base+"/me.json", nil)
	req.Host = strings.TrimPrefix(td.b, "http://")
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: c.Value})
	if me := other.Do(req); me.StatusCode != http.StatusNotFound {
		t.Errorf("a's session cookie at b: %d %s", me.StatusCode, me.Body)
	}
	req, _ = http.NewRequest(http.MethodGet, td.base+"/me.json", nil)
	req.Host = strings.TrimPrefix(td.a, "http://")
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: c.Value})
	if me := other.Do(req); me.StatusCode != http.StatusOK {
		t.Errorf("the control, a's session cookie at a: %d %s", me.StatusCode, me.Body)
	}
}

// With a secrets file that has tenants, the demo serves each on a
// subdomain of its base URL's host, with the tenant's providers.
func TestDemoConfigTenants(t *testing.T) {
	t.Setenv("EXTAUTH_COOKIE_KEY", strings.Repeat("ab", 32))
	path := filepath.Join(t.TempDir(), "secrets.yml")
	secrets := "microblog_key: app\nmicroblog_secret: app-secret\ntenants:\n  city-b:\n    socialnet_key: city-b\n    socialnet_secret: city-b-secret\n"
	if err := os.WriteFile(path, []byte(secrets), 0o600); err != nil {
		t.Fatal(err)
	}
	demo, err := newServer("https://app.example.org", serverOptions{configPath: path})
	if err != nil {
		t.Fatal(err)
	}
	defer demo.Close()
	get := func(host string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "https://"+host+"/", nil)
		demo.ServeHTTP(rec, req)
		return rec
	}
	home := get("city-b.app.example.org").Body.String()
	for _, want := range []string{`id="tenant-badge">tenant city-b</span>`, `id="signin-microblog"`, `id="signin-socialnet"`, `href="https://app.example.org/"`} {
		if !strings.Contains(home, want) {
			t.Errorf("city-b's home page lacks %s", want)
		}
	}
	main := get("app.example.org").Body.String()
	if !strings.Contains(main, `href="https://city-b.app.example.org/"`) || strings.Contains(main, `id="signin-socialnet"`) {
		t.Errorf("the demo's own home page: %s", main)
	}
	if rec := get("city-z.app.example.org"); rec.Code != http.StatusNotFound {
		t.Errorf("an unknown tenant: %d", rec.Code)
	}
}
