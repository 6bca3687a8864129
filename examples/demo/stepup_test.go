package main

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/extauth/extauth/internal/harness"
)

// stepUpForm is the home page's step-up form: its action and fields.
var (
	stepUpFormRe = regexp.MustCompile(`(?s)<form method="post" action="([^"]+)" class="actions">(.*?)<button id="step-up"`)
	hiddenRe     = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)
)

func stepUpForm(t *testing.T, home string) (string, url.Values) {
	t.Helper()
	m := stepUpFormRe.FindStringSubmatch(home)
	if m == nil {
		t.Fatalf("no step-up button on the home page:\n%s", home)
	}
	fields := url.Values{}
	for _, h := range hiddenRe.FindAllStringSubmatch(m[2], -1) {
		fields.Set(h[1], html.UnescapeString(h[2]))
	}
	return html.UnescapeString(m[1]), fields
}

// The step-up button asks the provider for a fresh sign-in at level high
// of the same account; the home page then shows the level and the new
// time. Another account at the provider is refused.
func TestDemoStepUp(t *testing.T) {
	base := startDemo(t)
	b := harness.NewBrowser(t)
	oidcSignIn(t, b, base)
	home := b.Get(base + "/")
	// The provider said neither how nor when: nothing asked it to.
	if !strings.Contains(home.Body, `id="no-acr"`) || strings.Contains(home.Body, `id="auth-time"`) {
		t.Fatalf("home page before the step-up:\n%s", home.Body)
	}
	action, fields := stepUpForm(t, home.Body)
	if action != "/users/auth/oidc" || fields.Get("level") != "high" || fields.Get("max_age") != "0" || fields.Get("extauth_account") == "" {
		t.Fatalf("step-up form %s %v", action, fields)
	}
	consent := b.PostForm(base+action, fields)
	approve := func(user string) *harness.Response {
		return b.PostForm(base+formAction(t, consent.Body), url.Values{
			"interaction": {hiddenValue(consent.Body, "interaction")}, "user": {user}, "decision": {"approve"}})
	}
	page := approve("248289761001")
	if page.URL.Path != "/" || !strings.Contains(page.Body, `<code id="acr">urn:extauthtest:loa:high</code>`) || !strings.Contains(page.Body, `id="auth-time"`) {
		t.Fatalf("after the step-up: %s %d\n%s", page.URL, page.StatusCode, page.Body)
	}

	// Stepping up as someone else is refused, and the session stays.
	_, fields = stepUpForm(t, page.Body)
	consent = b.PostForm(base+action, fields)
	page = approve("248289761002")
	if page.StatusCode != http.StatusForbidden || !strings.Contains(page.Body, "access_denied") {
		t.Fatalf("stepping up as another account: %d\n%s", page.StatusCode, page.Body)
	}
	if home := b.Get(base + "/"); !strings.Contains(home.Body, `<code id="uid">248289761001</code>`) {
		t.Errorf("the session changed:\n%s", home.Body)
	}

	// SAML: ForceAuthn and the level's class.
	b = harness.NewBrowser(t)
	samlSignIn(t, b, base)
	action, fields = stepUpForm(t, b.Get(base+"/").Body)
	login := b.PostForm(base+action, fields)
	form := formOf(login.Body)
	form.Set("decision", "approve")
	post := b.PostForm(base+"/dev/saml/sso", form)
	page = b.PostForm(base+"/users/auth/saml/callback", formOf(post.Body))
	if page.URL.Path != "/" || !strings.Contains(page.Body, `<code id="acr">https://refeds.org/profile/mfa</code>`) {
		t.Fatalf("after the SAML step-up: %s %d\n%s", page.URL, page.StatusCode, page.Body)
	}
}
