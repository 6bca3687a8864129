package extauth_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/samlidp"
	"github.com/extauth/extauth/internal/harness"
)

const (
	classPassword = "urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport"
	classMFA      = "https://refeds.org/profile/mfa"
)

// samlWithOptions allows the SAML per-request options allowed, with the
// host's level high, in the secrets file.
func samlWithOptions(allowed ...string) func(*extauth.Config, *extauth.Options) {
	return func(c *extauth.Config, _ *extauth.Options) {
		c.SAML.Additional.RequestOptions = allowed
		c.SAML.Additional.AssuranceLevels = map[string][]string{"high": {classMFA}}
	}
}

// samlSignIn starts a sign-in with form, has the IdP answer and posts its
// answer to the callback.
func (a *samlApp) signInWith(b *harness.Browser, form url.Values) *harness.Response {
	a.t.Helper()
	redirect, _, _ := a.authorize(b, form)
	return a.callback(b, idpForm(a.t, b, redirect))
}

// The SAML options reach the IdP in the AuthnRequest: ForceAuthn,
// IsPassive and the classes of RequestedAuthnContext; those the
// configuration does not allow do not.
func TestSAMLSignInOptionsReachTheIdP(t *testing.T) {
	idp := newSAMLIdP(t)
	a := newSAMLApp(t, idp, samlWithOptions("ForceAuthn", "authn_context", "level", "IsPassive"))
	for _, tc := range []struct {
		form    url.Values
		force   bool
		passive bool
		classes []string
	}{
		{url.Values{"ForceAuthn": {"true"}, "authn_context": {classMFA + " " + classPassword}}, true, false, []string{classMFA, classPassword}},
		{url.Values{"level": {"high"}, "IsPassive": {"true"}}, false, true, []string{classMFA}},
		{url.Values{"max_age": {"60"}, "prompt": {"login"}}, false, false, nil},
		{nil, false, false, nil},
	} {
		b := harness.NewBrowser(t)
		if resp := a.signInWith(b, tc.form); resp.StatusCode != http.StatusOK {
			t.Fatalf("%v: %d %s", tc.form, resp.StatusCode, resp.Body)
		}
		rec := idp.LastAuthnRequest()
		if rec.ForceAuthn != tc.force || rec.IsPassive != tc.passive || !slices.Equal(rec.RequestedAuthnContext, tc.classes) {
			t.Errorf("%v: the IdP got ForceAuthn %v IsPassive %v classes %q", tc.form, rec.ForceAuthn, rec.IsPassive, rec.RequestedAuthnContext)
		}
		id := a.identities()[len(a.identities())-1]
		want := classPassword
		if len(tc.classes) > 0 {
			want = tc.classes[0]
		}
		if id.ACR != want || id.AuthTime.IsZero() || time.Since(id.AuthTime) > time.Minute {
			t.Errorf("%v: identity ACR %q AuthTime %v", tc.form, id.ACR, id.AuthTime)
		}
	}
	b := harness.NewBrowser(t).NoFollow()
	for _, form := range []url.Values{
		{"ForceAuthn": {"yes"}},
		{"authn_context": {"not a uri"}},
		{"ForceAuthn": {"true"}, "IsPassive": {"true"}},
		{"level": {"supreme"}},
	} {
		wantCode(t, b.PostForm(a.URL+"/users/auth/saml", form), http.StatusBadRequest, "invalid_response")
	}
}

// What a SAML sign-in asked is checked in the assertion: an IdP that
// keeps an old authentication despite ForceAuthn or max_age, or asserts
// another class than was asked (per request or in the configuration), is
// refused with insufficient_user_authentication.
func TestSAMLSignInOptionsCheckedAtCallback(t *testing.T) {
	for _, tc := range []struct {
		name   string
		config string // saml_additional_settings.authn_context
		form   url.Values
		knobs  samlidp.Knobs
	}{
		{"ForceAuthn with an old AuthnInstant", "", url.Values{"ForceAuthn": {"true"}},
			samlidp.Knobs{AuthnInstant: time.Now().Add(-10 * time.Minute)}},
		{"max_age with an old AuthnInstant", "", url.Values{"max_age": {"3600"}},
			samlidp.Knobs{AuthnInstant: time.Now().Add(-2 * time.Hour)}},
		{"an AuthnInstant in the future", "", url.Values{"ForceAuthn": {"true"}},
			samlidp.Knobs{AuthnInstant: time.Now().Add(time.Hour)}},
		{"another class than asked", "", url.Values{"authn_context": {classMFA}},
			samlidp.Knobs{AuthnContextClassRef: classPassword}},
		{"another class than the level's", "", url.Values{"level": {"high"}},
			samlidp.Knobs{AuthnContextClassRef: classPassword}},
		{"another class than configured", classMFA + " " + classPassword, nil,
			samlidp.Knobs{AuthnContextClassRef: "urn:oasis:names:tc:SAML:2.0:ac:classes:unspecified"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			idp := newSAMLIdP(t)
			a := newSAMLApp(t, idp, func(c *extauth.Config, o *extauth.Options) {
				samlWithOptions("ForceAuthn", "max_age", "authn_context", "level")(c, o)
				c.SAML.Additional.AuthnContext = tc.config
			})
			if resp := a.signInWith(harness.NewBrowser(t), tc.form); resp.StatusCode != http.StatusOK {
				t.Fatalf("an IdP that honours the request: %d %s", resp.StatusCode, resp.Body)
			}
			idp.Set(func(k *samlidp.Knobs) { *k = tc.knobs })
			resp := a.signInWith(harness.NewBrowser(t), tc.form)
			wantCode(t, resp, http.StatusForbidden, "insufficient_user_authentication")
			if n := len(a.identities()); n != 1 {
				t.Errorf("hook called %d times, want once (the control)", n)
			}
		})
	}
}

// The classes of saml_additional_settings.authn_context bound the
// per-request ones: a request may narrow them, never widen them.
func TestSAMLSignInOptionsNarrowTheConfiguration(t *testing.T) {
	idp := newSAMLIdP(t)
	a := newSAMLApp(t, idp, func(c *extauth.Config, o *extauth.Options) {
		samlWithOptions("authn_context")(c, o)
		c.SAML.Additional.AuthnContext = classPassword + " " + classMFA
	})
	b := harness.NewBrowser(t).NoFollow()
	wantCode(t, b.PostForm(a.URL+"/users/auth/saml", url.Values{"authn_context": {"urn:oasis:names:tc:SAML:2.0:ac:classes:Kerberos"}}),
		http.StatusBadRequest, "invalid_response")
	if resp := a.signInWith(harness.NewBrowser(t), url.Values{"authn_context": {classMFA}}); resp.StatusCode != http.StatusOK {
		t.Fatalf("narrowed: %d %s", resp.StatusCode, resp.Body)
	}
	if got := idp.LastAuthnRequest().RequestedAuthnContext; !slices.Equal(got, []string{classMFA}) {
		t.Errorf("the IdP was asked %q", got)
	}
	if resp := a.signInWith(harness.NewBrowser(t), nil); resp.StatusCode != http.StatusOK ||
		!strings.Contains(string(idp.LastAuthnRequest().Raw), classPassword+"</saml:AuthnContextClassRef><saml:AuthnContextClassRef>"+classMFA) {
		t.Errorf("the configured classes: %d %s", resp.StatusCode, idp.LastAuthnRequest().Raw)
	}
}
