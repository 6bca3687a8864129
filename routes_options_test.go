package extauth_test

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/oidcop"
	"github.com/extauth/extauth/internal/harness"
	"github.com/extauth/extauth/providers"
)

// Levels of the tests' host and the acr values the fake OP knows them by.
const (
	acrSubstantial = "urn:extauthtest:loa:substantial"
	acrHigh        = "urn:extauthtest:loa:high"
)

// withOptions allows the per-request options allowed, with the host's
// levels, on the oidc provider through Options.OIDC.
func withOptions(allowed ...string) func(*extauth.Options) {
	return func(o *extauth.Options) {
		o.OIDC.RequestOptions = allowed
		o.OIDC.AssuranceLevels = map[string][]string{"substantial": {acrSubstantial, acrHigh}, "high": {acrHigh}}
	}
}

// startWith posts a start with form from a page of the app, not following
// redirects, and returns the answer.
func startWith(t *testing.T, a *oidcApp, b *harness.Browser, form url.Values) *harness.Response {
	t.Helper()
	return b.PostForm(a.URL+"/users/auth/oidc", form)
}

// Allowed options reach the provider, with their values; options the
// configuration does not allow, and fields that are no options at all,
// do not; each ignored option is logged once, however many starts give it.
func TestSignInOptionsReachTheProvider(t *testing.T) {
	a := newOIDCApp(t, oidcSetup{opts: withOptions("login_hint", "prompt", "max_age", "acr_values", "ui_locales")})
	form := url.Values{
		"login_hint": {"alice@example.org"}, "prompt": {"login consent"}, "max_age": {"300"},
		"acr_values": {acrHigh}, "ui_locales": {"fr-CA en"}, "domain_hint": {"example.org"},
		"claims": {`{"id_token":{"email":null}}`}, "request_uri": {"urn:evil"}, "return_to": {"/after"},
	}
	for range 3 {
		resp := startWith(t, a, harness.NewBrowser(t), form)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Body, "signed in as") {
			t.Fatalf("sign-in: %d %s", resp.StatusCode, resp.Body)
		}
	}
	got := a.OP.LastRequestParams()
	for k, v := range map[string]string{"login_hint": "alice@example.org", "prompt": "login consent", "max_age": "300",
		"acr_values": acrHigh, "ui_locales": "fr-CA en"} {
		if got.Get(k) != v {
			t.Errorf("the provider got %s=%q, want %q", k, got.Get(k), v)
		}
	}
	for _, k := range []string{"domain_hint", "claims", "request_uri", "return_to"} {
		if _, ok := got[k]; ok {
			t.Errorf("the provider got %s, which is not allowed", k)
		}
	}
	if n := strings.Count(a.Logs.String(), "sign-in option the provider's configuration does not allow was ignored"); n != 1 ||
		!strings.Contains(a.Logs.String(), "option=domain_hint") {
		t.Errorf("the ignored option is logged %d times, want once:\n%s", n, a.Logs)
	}
	if strings.Contains(a.Logs.String(), "example.org\"") || strings.Contains(a.Logs.String(), "alice@example.org") {
		t.Errorf("an option's value is in the log:\n%s", a.Logs)
	}
	id := a.identities()[2]
	if id.ACR != acrHigh || id.AuthTime.IsZero() || a.clock.Now().Sub(id.AuthTime) > time.Minute {
		t.Errorf("identity ACR %q AuthTime %v, want the acr asked and a fresh auth_time", id.ACR, id.AuthTime)
	}
}

// The same options travel inside the signed request object and the pushed
// request of a high-assurance provider, never beside them.
func TestSignInOptionsInsidePushedRequestObject(t *testing.T) {
	s := highAssurance(nil)
	s.opts = withOptions("login_hint", "acr_values")
	a := newOIDCApp(t, s)
	b := harness.NewBrowser(t).NoFollow()
	resp := startWith(t, a, b, url.Values{"login_hint": {"bob@example.org"}, "acr_values": {acrSubstantial}})
	front, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || err != nil {
		t.Fatalf("start: %d %s", resp.StatusCode, resp.Body)
	}
	if q := front.Query(); len(q) != 2 || q.Get("client_id") == "" || q.Get("request_uri") == "" {
		t.Errorf("the authorization URL carries more than client_id and request_uri: %v", q)
	}
	resp = b.Get(front.String())
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("OP: %d %s", resp.StatusCode, resp.Body)
	}
	if got := a.OP.LastRequestParams(); got.Get("login_hint") != "bob@example.org" || got.Get("acr_values") != acrSubstantial {
		t.Errorf("the signed, pushed request holds %v", got)
	}
}

// A value outside an option's syntax or bounds refuses the start before
// the provider hears of it; so do a level the provider does not have and
// an option given twice.
func TestSignInOptionsValidated(t *testing.T) {
	a := newOIDCApp(t, oidcSetup{opts: withOptions("login_hint", "prompt", "max_age", "acr_values", "ui_locales", "level")})
	for _, form := range []url.Values{
		{"prompt": {"sometimes"}},
		{"prompt": {"none login"}},
		{"prompt": {"login login"}},
		{"prompt": {"login", "none"}},
		{"max_age": {"-1"}},
		{"max_age": {"1e3"}},
		{"max_age": {"+60"}},
		{"max_age": {"99999999999"}},
		{"login_hint": {strings.Repeat("a", 257)}},
		{"login_hint": {"alice\r\nX-Injected: 1"}},
		{"login_hint": {" alice"}},
		{"acr_values": {`urn:"quoted"`}},
		{"acr_values": {"a  b"}},
		{"ui_locales": {"fr_FR"}},
		{"level": {"supreme"}},
		{"level": {"high"}, "acr_values": {acrHigh}},
	} {
		t.Run(form.Encode(), func(t *testing.T) {
			before := a.OP.Hits(oidcop.Authorize)
			b := harness.NewBrowser(t).NoFollow()
			resp := startWith(t, a, b, form)
			wantCode(t, resp, http.StatusBadRequest, "invalid_response")
			if strings.Contains(resp.Header.Get("Set-Cookie"), "extauth_oidc") {
				t.Error("a refused start set a transaction cookie")
			}
			if a.OP.Hits(oidcop.Authorize) != before {
				t.Error("the provider was asked")
			}
			for _, v := range form {
				if len(v[0]) > 3 && strings.Contains(resp.Body, v[0]) {
					t.Errorf("the answer echoes the value: %s", resp.Body)
				}
			}
			// The message the user is shown names the option
			// (docs/after-sign-in.md): level where it is one of two.
			name := "level"
			if len(form) == 1 {
				name = slices.Collect(maps.Keys(form))[0]
			}
			if want := "the sign-in option " + name + " is not valid"; !strings.Contains(resp.Body, want) {
				t.Errorf("the answer does not say %q: %s", want, resp.Body)
			}
		})
	}
}

// A per-request acr_values or max_age is checked at the callback: a
// provider that ignores it (asserts another acr, or an old auth_time) is
// refused with insufficient_user_authentication, and the hook never runs.
func TestSignInOptionsCheckedAtCallback(t *testing.T) {
	for _, tc := range []struct {
		name   string
		form   url.Values
		answer oidcop.Authentication
		why    string
	}{
		{"acr_values ignored", url.Values{"acr_values": {acrHigh}}, oidcop.Authentication{ACR: "urn:extauthtest:loa:low"},
			"is not one of the requested acr_values"},
		{"level ignored", url.Values{"level": {"high"}}, oidcop.Authentication{ACR: acrSubstantial},
			"is not one of the requested acr_values"},
		{"max_age ignored", url.Values{"max_age": {"300"}}, oidcop.Authentication{AuthTime: time.Now().Add(-2 * time.Hour)},
			"more than max_age"},
		{"max_age=0 ignored", url.Values{"max_age": {"0"}}, oidcop.Authentication{AuthTime: time.Now().Add(-2 * time.Minute)},
			"more than max_age"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newOIDCApp(t, oidcSetup{opts: withOptions("max_age", "acr_values", "level")})
			// The control: the provider honours the request.
			if resp := startWith(t, a, harness.NewBrowser(t), tc.form); resp.StatusCode != http.StatusOK {
				t.Fatalf("a provider that honours the options: %d %s", resp.StatusCode, resp.Body)
			}
			a.OP.AnswerAt(tc.answer)
			resp := startWith(t, a, harness.NewBrowser(t), tc.form)
			wantCode(t, resp, http.StatusForbidden, "insufficient_user_authentication")
			if n := len(a.identities()); n != 1 {
				t.Fatalf("hook called %d times, want once (the control)", n)
			}
			if !strings.Contains(a.Logs.String(), tc.why) {
				t.Errorf("the log does not say %q:\n%s", tc.why, a.Logs)
			}
			// Without the option, the same answer passes: what is
			// checked is what this sign-in asked.
			if resp := startWith(t, a, harness.NewBrowser(t), nil); resp.StatusCode != http.StatusOK {
				t.Errorf("a sign-in that asked nothing: %d %s", resp.StatusCode, resp.Body)
			}
		})
	}
}

// A per-request acr_values can narrow the configured ones, never widen
// them; of two max_age the smaller wins.
func TestSignInOptionsNarrowTheConfiguration(t *testing.T) {
	a := newOIDCApp(t, oidcSetup{
		config: func(c *extauth.Config) {
			c.OIDC.Additional.ACRValues = acrSubstantial + " " + acrHigh
			c.OIDC.Additional.MaxAge = "3600"
		},
		opts: withOptions("max_age", "acr_values", "level"),
	})
	b := harness.NewBrowser(t).NoFollow()
	wantCode(t, startWith(t, a, b, url.Values{"acr_values": {"urn:extauthtest:loa:low"}}), http.StatusBadRequest, "invalid_response")
	for _, tc := range []struct {
		form        url.Values
		acr, maxAge string
	}{
		{url.Values{"acr_values": {acrHigh}, "max_age": {"86400"}}, acrHigh, "3600"},
		{url.Values{"level": {"high"}, "max_age": {"60"}}, acrHigh, "60"},
		{nil, acrSubstantial + " " + acrHigh, "3600"},
	} {
		if resp := startWith(t, a, harness.NewBrowser(t), tc.form); resp.StatusCode != http.StatusOK {
			t.Fatalf("%v: %d %s", tc.form, resp.StatusCode, resp.Body)
		}
		if got := a.OP.LastRequestParams(); got.Get("acr_values") != tc.acr || got.Get("max_age") != tc.maxAge {
			t.Errorf("%v: the provider got acr_values %q max_age %q, want %q %q", tc.form, got.Get("acr_values"), got.Get("max_age"), tc.acr, tc.maxAge)
		}
	}
}

// The start rules hold for a start with options: another site cannot
// start a sign-in with prompt=none (to learn whether the visitor has a
// session at the provider) or with a login_hint of its choosing, and the
// click-to-continue page of a start that says nothing of where it comes
// from starts without the options it was given.
func TestSignInOptionsKeepTheStartRules(t *testing.T) {
	a := newOIDCApp(t, oidcSetup{opts: withOptions("login_hint", "prompt")})
	injected := url.Values{"prompt": {"none"}, "login_hint": {"victim@example.org"}}
	for _, h := range []startHeaders{
		{site: "cross-site", origin: "https://evil.example"},
		{site: "same-site", origin: "https://sibling.example.org"},
		{origin: "https://evil.example"},
		{site: "cross-site", referer: "https://evil.example/page"},
	} {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			b := harness.NewBrowser(t).NoFollow()
			b.Header = http.Header{}
			var req *http.Request
			if method == http.MethodGet {
				req, _ = http.NewRequest(method, a.URL+"/users/auth/oidc?"+injected.Encode(), nil)
			} else {
				req, _ = http.NewRequest(method, a.URL+"/users/auth/oidc", strings.NewReader(injected.Encode()))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
			h.set(req)
			wantCode(t, b.Do(req), http.StatusForbidden, "csrf_detected")
		}
	}
	if n := a.OP.Hits(oidcop.Authorize); n != 0 {
		t.Fatalf("the provider was asked %d times by refused starts", n)
	}

	b := harness.NewBrowser(t)
	b.Header = http.Header{}
	page := b.Get(a.URL + "/users/auth/oidc?" + injected.Encode())
	if page.StatusCode != http.StatusOK || !strings.Contains(page.Body, "extauth_confirm") ||
		strings.Contains(page.Body, "prompt") || strings.Contains(page.Body, "victim") {
		t.Fatalf("the click-to-continue page carries the options:\n%s", page.Body)
	}
	b.Header = http.Header{"Origin": {a.URL}}
	if resp := submitForm(t, b, page, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("confirmed start: %d %s", resp.StatusCode, resp.Body)
	}
	if got := a.OP.LastRequestParams(); got.Get("prompt") != "" || got.Get("login_hint") != "" {
		t.Errorf("the confirmed start sent %v", got)
	}
}

// Options reach no provider that takes none: an OAuth provider is sent
// neither an option nor anything of it, and its Identity's AuthTime is the
// sign-in's.
func TestSignInOptionsIgnoredByOAuthProviders(t *testing.T) {
	a := newApp(t, nil)
	b := harness.NewBrowser(t).NoFollow()
	u := a.start(b, url.Values{"login_hint": {"alice@example.org"}, "prompt": {"none"}})
	for _, k := range []string{"login_hint", "prompt"} {
		if _, ok := u.Query()[k]; ok {
			t.Errorf("the provider was sent %s: %s", k, u)
		}
	}
	if !strings.Contains(a.Logs.String(), "option=login_hint") || !strings.Contains(a.Logs.String(), "option=prompt") {
		t.Errorf("the ignored options are not logged:\n%s", a.Logs.String())
	}
	resp := b.Get(a.approve(b, u))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("callback: %d %s", resp.StatusCode, resp.Body)
	}
	id := a.identities()[0]
	if id.ACR != "" || !id.AuthTime.Equal(a.clock.Now()) {
		t.Errorf("OAuth identity ACR %q AuthTime %v, want none and the sign-in's time", id.ACR, id.AuthTime)
	}
}

// StartForm builds the start of a sign-in with options from code, and
// refuses options the provider does not allow, or values that would be
// refused.
func TestStartForm(t *testing.T) {
	a := newOIDCApp(t, oidcSetup{opts: withOptions("login_hint", "max_age", "level")})
	r := newRequest(http.MethodGet, a.URL+"/account", nil)
	action, fields, err := a.Auth.StartForm(r, extauth.OIDC, extauth.SignInOptions{
		ReturnTo: "/account", LoginHint: "alice@example.org", Level: "high", MaxAge: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	want := url.Values{"return_to": {"/account"}, "login_hint": {"alice@example.org"}, "level": {"high"}, "max_age": {"300"}}
	if action != "/users/auth/oidc" || fields.Encode() != want.Encode() {
		t.Errorf("StartForm = %s %v, want /users/auth/oidc %v", action, fields, want)
	}
	resp := harness.NewBrowser(t).PostForm(a.URL+action, fields)
	if resp.StatusCode != http.StatusOK || a.OP.LastRequestParams().Get("acr_values") != acrHigh {
		t.Fatalf("the form's sign-in: %d %s, acr_values %q", resp.StatusCode, resp.Body, a.OP.LastRequestParams().Get("acr_values"))
	}
	for _, o := range []extauth.SignInOptions{
		{Prompt: "login"},
		{LoginHint: "alice\n"},
		{Level: "supreme"},
		{ACRValues: []string{acrHigh}},
	} {
		if _, _, err := a.Auth.StartForm(r, extauth.OIDC, o); err == nil {
			t.Errorf("StartForm(%+v) = nil error", o)
		}
	}
	if _, _, err := a.Auth.StartForm(r, extauth.SAML, extauth.SignInOptions{}); err == nil {
		t.Error("StartForm of a provider that is not configured: nil error")
	}
}

// Every option at its bound still fits the transaction cookie: the bounds
// of each are what keeps a start from failing for size.
func TestSignInOptionsAtTheirBoundsFitTheCookie(t *testing.T) {
	a := newOIDCApp(t, oidcSetup{opts: withOptions("login_hint", "prompt", "max_age", "acr_values", "ui_locales", "domain_hint")})
	long := func(n int) string { return strings.Repeat("x", n) }
	form := url.Values{
		"login_hint": {long(256)}, "acr_values": {strings.TrimSpace(strings.Repeat(long(31)+" ", 8))},
		"ui_locales": {"en" + strings.Repeat("-xxxxxxxx", 28)}, "domain_hint": {long(63) + "." + long(63) + "." + long(63) + "." + long(61)},
		"prompt": {"login consent select_account"}, "max_age": {"31622400"},
	}
	for k, v := range form {
		if err := providers.CheckRequestOption(k, v[0]); err != nil {
			t.Fatalf("%s is not at its bound but beyond: %v", k, err)
		}
	}
	resp := startWith(t, a, harness.NewBrowser(t).NoFollow(), form)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("start: %d %s", resp.StatusCode, resp.Body)
	}
	for _, c := range resp.Cookies() {
		if n := len(c.Name) + len(c.Value); strings.Contains(c.Name, "extauth_oidc") && n > 4000 {
			t.Errorf("transaction cookie of %d bytes", n)
		}
	}
}
