package extauth_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/internal/harness"
)

// unsolicitedForm has the IdP start an IdP-initiated sign-in for our SP,
// with relayState, and returns the form its page would POST to our ACS.
func unsolicitedForm(t *testing.T, a *samlApp, relayState string) url.Values {
	t.Helper()
	u := strings.TrimSuffix(a.IdP.SSOURL(), "/sso") + "/unsolicited?" +
		url.Values{"sp": {samlEntityID}, "RelayState": {relayState}}.Encode()
	form := idpForm(t, harness.NewBrowser(t), u)
	if form.Get("RelayState") != relayState {
		t.Fatalf("the IdP posts RelayState %q, want %q", form.Get("RelayState"), relayState)
	}
	return form
}

func allowIDPInitiated(_ *extauth.Config, o *extauth.Options) { o.SAML.AllowIDPInitiated = true }

func TestSAMLUnsolicitedRefusedByDefault(t *testing.T) {
	a := newSAMLApp(t, newSAMLIdP(t), nil)
	for _, relay := range []string{"", "/projects/7", "https://evil.example/"} {
		resp := a.callback(harness.NewBrowser(t), unsolicitedForm(t, a, relay))
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.Body, "invalid_state") {
			t.Errorf("RelayState %q: %d %s", relay, resp.StatusCode, resp.Body)
		}
	}
	if n := len(a.identities()); n != 0 {
		t.Fatalf("%d unsolicited sign-ins accepted while AllowIDPInitiated is off", n)
	}
}

func TestSAMLUnsolicitedWhenEnabled(t *testing.T) {
	a := newSAMLApp(t, newSAMLIdP(t), allowIDPInitiated)

	t.Run("accepted, ending at /", func(t *testing.T) {
		// The posted RelayState is never a destination, whatever it says.
		for _, relay := range []string{"", "/projects/7", "https://evil.example/", "//evil.example/"} {
			before := len(a.identities())
			resp := a.callback(harness.NewBrowser(t), unsolicitedForm(t, a, relay))
			if resp.StatusCode != http.StatusOK || resp.Body != "signed in as ada@example.org" {
				t.Fatalf("RelayState %q: %d %s", relay, resp.StatusCode, resp.Body)
			}
			if got := a.identities(); len(got) != before+1 || got[before].Provider != "saml" {
				t.Fatalf("RelayState %q: identities %v", relay, got)
			}
			a.mu.Lock()
			ret := a.Ret[len(a.Ret)-1]
			a.mu.Unlock()
			if ret != "/" {
				t.Errorf("RelayState %q: ReturnTo %q, want /", relay, ret)
			}
		}
	})

	t.Run("the same assertion twice", func(t *testing.T) {
		form := unsolicitedForm(t, a, "")
		if resp := a.callback(harness.NewBrowser(t), form); resp.StatusCode != http.StatusOK {
			t.Fatalf("first: %d %s", resp.StatusCode, resp.Body)
		}
		before := len(a.identities())
		resp := a.callback(harness.NewBrowser(t), form)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.Body, "replayed") {
			t.Fatalf("replay: %d %s", resp.StatusCode, resp.Body)
		}
		if len(a.identities()) != before {
			t.Fatal("the replay signed someone in")
		}
	})

	t.Run("solicited sign-ins keep their return_to", func(t *testing.T) {
		b := harness.NewBrowser(t)
		redirect, _, _ := a.authorize(b, url.Values{"return_to": {"/projects/7"}})
		resp := a.callback(b, idpForm(t, b, redirect))
		a.mu.Lock()
		ret := a.Ret[len(a.Ret)-1]
		a.mu.Unlock()
		if resp.StatusCode != http.StatusOK || ret != "/projects/7" {
			t.Fatalf("%d %s, ReturnTo %q", resp.StatusCode, resp.Body, ret)
		}
	})

	t.Run("a solicited response without its cookie", func(t *testing.T) {
		// The answer to our request reaches a browser that did not start
		// it: as unsolicited it names a request, so it is refused.
		redirect, _, _ := a.authorize(harness.NewBrowser(t), nil)
		b := harness.NewBrowser(t)
		resp := a.callback(b, idpForm(t, b, redirect))
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.Body, "invalid_response") {
			t.Fatalf("%d %s", resp.StatusCode, resp.Body)
		}
	})

	t.Run("a spent transaction cookie is not an unsolicited callback", func(t *testing.T) {
		// A cookie that is present but no longer good is a solicited
		// sign-in gone wrong: invalid_state, never a second chance as an
		// unsolicited one.
		b := harness.NewBrowser(t)
		redirect, _, _ := a.authorize(b, nil)
		form := idpForm(t, b, redirect)
		acs := a.URL + "/users/auth/saml/callback"
		u, _ := url.Parse(acs)
		cookies := b.Jar.Cookies(u)
		if len(cookies) != 1 {
			t.Fatalf("%d transaction cookies", len(cookies))
		}
		if resp := a.callback(b, form); resp.StatusCode != http.StatusOK {
			t.Fatalf("first: %d %s", resp.StatusCode, resp.Body)
		}
		fresh := unsolicitedForm(t, a, form.Get("RelayState"))
		req, err := http.NewRequest(http.MethodPost, acs, strings.NewReader(fresh.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(cookies[0])
		resp := harness.NewBrowser(t).Do(req)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.Body, "invalid_state") {
			t.Fatalf("%d %s", resp.StatusCode, resp.Body)
		}
	})
}
