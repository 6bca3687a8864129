package extauthtest_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest"
)

// The developer provider asks for a name and an email and signs in as
// that, through the routes and the transaction cookie.
func TestDeveloperSignIn(t *testing.T) {
	a := newApp(t, nil, func(o *extauth.Options) {
		if err := extauthtest.AddDeveloper(o, extauthtest.DeveloperOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	b := extauthtest.NewBrowser(t)
	form := b.Post(a.URL+"/users/auth/developer", url.Values{"return_to": {"/after"}})
	if form.StatusCode != http.StatusOK || !strings.Contains(form.Body, "For development only") || form.Header.Get("X-Frame-Options") != "DENY" {
		t.Fatalf("form: %d %s", form.StatusCode, form.Body)
	}
	page := b.Submit(form, "Sign in", url.Values{"name": {" Grace Hopper "}, "email": {"Grace@Example.ORG"}})
	ids := a.identities()
	if page.URL.Path != "/after" || len(ids) != 1 {
		t.Fatalf("ended at %s (%d) %v", page.URL, page.StatusCode, a.lastFailure())
	}
	if id := ids[0]; id.Provider != "developer" || id.UID != "grace@example.org" || id.Email != "grace@example.org" ||
		id.Name != "Grace Hopper" || id.EmailVerified || id.Raw["email"] != "grace@example.org" {
		t.Fatalf("identity %+v", id)
	}
	// The form is bound to its transaction: posted again, it is refused.
	again := b.Submit(form, "Sign in", url.Values{"name": {"Mallory"}, "email": {"mallory@example.org"}})
	if e := a.lastFailure(); again.StatusCode != http.StatusBadRequest || e == nil || e.Code != extauth.CodeInvalidState || len(a.identities()) != 1 {
		t.Fatalf("replayed form: %d %v", again.StatusCode, e)
	}
}

// Without a name or a valid address the sign-in fails.
func TestDeveloperValidatesTheForm(t *testing.T) {
	a := newApp(t, nil, func(o *extauth.Options) {
		if err := extauthtest.AddDeveloper(o, extauthtest.DeveloperOptions{Name: "dev"}); err != nil {
			t.Fatal(err)
		}
	})
	for _, fields := range []url.Values{
		{"name": {"Ada"}, "email": {"not an address"}},
		{"name": {"Ada"}, "email": {"Ada <ada@example.org>"}},
		{"name": {"  "}, "email": {"ada@example.org"}},
	} {
		b := extauthtest.NewBrowser(t)
		page := b.Submit(b.Post(a.URL+"/users/auth/dev", nil), "Sign in", fields)
		if e := a.lastFailure(); page.StatusCode != http.StatusBadRequest || e == nil || e.Code != extauth.CodeInvalidResponse {
			t.Errorf("%v: %d %v", fields, page.StatusCode, e)
		}
	}
	if len(a.identities()) != 0 {
		t.Fatal("signed in")
	}
}

// The developer provider cannot be switched on for an application that
// others reach: AddDeveloper refuses a BaseURL that is not loopback, and a
// provider added at a loopback BaseURL that then changes refuses to sign
// anyone in.
func TestDeveloperIsLoopbackOnly(t *testing.T) {
	for _, base := range []string{"https://app.example.org", "http://10.0.0.5:3000", "http://localhost.example.org", "http://[::ffff:10.0.0.1]/"} {
		o := extauth.Options{BaseURL: base}
		if err := extauthtest.AddDeveloper(&o, extauthtest.DeveloperOptions{}); err == nil || len(o.Extra) != 0 {
			t.Errorf("%s: added (%v)", base, err)
		}
	}
	for _, base := range []string{"http://127.0.0.1:3000", "http://localhost:3000", "http://[::1]:3000", "http://app.localhost:3000", "http://127.1.2.3"} {
		o := extauth.Options{BaseURL: base}
		if err := extauthtest.AddDeveloper(&o, extauthtest.DeveloperOptions{}); err != nil || len(o.Extra) != 1 {
			t.Errorf("%s: %v", base, err)
		}
	}
	o := extauth.Options{BaseURL: "https://devbox.internal"}
	if err := extauthtest.AddDeveloper(&o, extauthtest.DeveloperOptions{AllowNonLoopback: true}); err != nil || len(o.Extra) != 1 {
		t.Errorf("AllowNonLoopback: %v", err)
	}

	a := newApp(t, nil, func(o *extauth.Options) {
		if err := extauthtest.AddDeveloper(o, extauthtest.DeveloperOptions{}); err != nil {
			t.Fatal(err)
		}
		// The host then serves it elsewhere: the callback is no longer
		// on loopback, though the test still reaches it there.
		o.BaseURL = strings.Replace(o.BaseURL, "127.0.0.1", "app.example.org", 1)
	})
	// Typed into the address bar: an Origin of 127.0.0.1 would be refused
	// as a foreign one before the provider is asked.
	page := extauthtest.NewBrowser(t).Get(a.URL + "/users/auth/developer")
	if e := a.lastFailure(); e == nil || e.Code != extauth.CodeMisconfigured || strings.Contains(page.Body, "<form") {
		t.Fatalf("developer at a public BaseURL: %d %v %s", page.StatusCode, e, page.Body)
	}
	if form := extauthtest.NewBrowser(t).Get(a.URL + "/users/auth/developer/form?state=x"); form.StatusCode != http.StatusNotFound {
		t.Fatalf("its form: %d", form.StatusCode)
	}
}

// With options allowed, the developer form fills in the login_hint and
// offers the levels asked for; the level chosen is the identity's ACR, and
// a weaker one is refused as a provider's would be.
func TestDeveloperAnswersAtAChosenLevel(t *testing.T) {
	a := newApp(t, nil, func(o *extauth.Options) {
		err := extauthtest.AddDeveloper(o, extauthtest.DeveloperOptions{
			RequestOptions:  []string{"login_hint", "level", "max_age"},
			AssuranceLevels: map[string][]string{"high": {"urn:dev:mfa", "urn:dev:hwk"}},
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	start := url.Values{"login_hint": {"ada@example.org"}, "level": {"high"}, "max_age": {"0"}}
	b := extauthtest.NewBrowser(t)
	form := b.Post(a.URL+"/users/auth/developer", start)
	if !strings.Contains(form.Body, `value="ada@example.org"`) || !strings.Contains(form.Body, "<option>urn:dev:mfa</option>") {
		t.Fatalf("form: %d %s", form.StatusCode, form.Body)
	}
	b.Submit(form, "Sign in", url.Values{"name": {"Ada"}, "email": {"ada@example.org"}, "acr": {"urn:dev:hwk"}})
	ids := a.identities()
	if len(ids) != 1 || ids[0].ACR != "urn:dev:hwk" || ids[0].AuthTime.IsZero() {
		t.Fatalf("identities %+v, failure %v", ids, a.lastFailure())
	}
	form = b.Post(a.URL+"/users/auth/developer", start)
	b.Submit(form, "Sign in", url.Values{"name": {"Ada"}, "email": {"ada@example.org"}, "acr": {""}})
	if e := a.lastFailure(); e == nil || e.Code != extauth.CodeInsufficientAuthentication || len(a.identities()) != 1 {
		t.Fatalf("a weaker level: %v", e)
	}
	var o extauth.Options
	o.BaseURL = "http://127.0.0.1"
	if err := extauthtest.AddDeveloper(&o, extauthtest.DeveloperOptions{RequestOptions: []string{"ForceAuthn"}}); err == nil {
		t.Error("AddDeveloper took an option the developer provider does not")
	}
}
