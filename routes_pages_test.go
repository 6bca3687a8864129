package extauth_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest"
	"github.com/extauth/extauth/extauthtest/oidcop"
	"github.com/extauth/extauth/extauthtest/samlidp"
	"github.com/extauth/extauth/internal/harness"
)

// classHigh is the SAML class that the federation tests' level high
// stands for; the fake IdP asserts the first class it is asked for.
const classHigh = "https://refeds.org/profile/mfa"

// A step-up that RequireAssurance starts completes in a browser: the page
// it answers a navigation with submits itself with the site's Origin (its
// referrer policy is same-origin), the provider is asked for the level,
// and the browser comes back to the page it asked for. Under the page
// policy no-referrer that extauth had, the browser's POST said
// "Origin: null" and the start refused it.
func TestStepUpInABrowser(t *testing.T) {
	a, _ := stepUpApp(t, "level", "max_age")
	b := extauthtest.NewBrowser(t)
	b.Post(a.URL+"/users/auth/oidc", url.Values{"return_to": {"/"}})
	p := b.Get(a.URL + "/pay?amount=10")
	if p.StatusCode != http.StatusOK || p.URL.RequestURI() != "/pay?amount=10" || p.Body != "paid as "+oidcop.DemoUsers()[0].Sub+" at "+acrHigh {
		t.Fatalf("step-up in a browser ended at %s: %d\n%s", p.URL, p.StatusCode, p.Body)
	}
	if got := a.OP.LastRequestParams(); got.Get("acr_values") != acrHigh || got.Get("max_age") != "300" {
		t.Errorf("the provider was asked %v", got)
	}
}

// A step-up inside a SAML federation starts at the IdP that asserted the
// session's account, not at the discovery page, with the level, and comes
// back at that level. The account is that IdP's: a step-up started at
// another IdP of the federation is refused, even though the federation's
// IdPs all assert the same NameID here.
func TestSAMLFederationStepUpIsTheSameIdPsAccount(t *testing.T) {
	f := newFederation(t)
	sessions := &hostSessions{byID: map[string]*extauth.Identity{}}
	need := extauth.Assurance{Level: "high", MaxAge: 5 * time.Minute}
	a := f.startMounted(func(c *extauth.Config, o *extauth.Options) {
		c.SAML.Additional.RequestOptions = []string{"ForceAuthn", "max_age", "level"}
		c.SAML.Additional.AssuranceLevels = map[string][]string{"high": {classHigh}}
		o.OnSuccess = sessions.hook
	}, func(mux *http.ServeMux, auth *extauth.Auth) {
		mux.Handle("/admin", auth.RequireAssurance(need, sessions.current)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := sessions.current(r)
			fmt.Fprintf(w, "admin %s at %s via %s", id.UID, id.ACR, id.SAML.IdP)
		})))
		mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("home")) })
	})
	b := extauthtest.NewBrowser(t)
	// Bee College, chosen on the discovery page.
	disc := b.Get(a.URL + "/users/auth/saml")
	if p := b.Submit(disc, "Bee College", nil); p.Body != "home" {
		t.Fatalf("sign-in through the discovery page ended at %s: %d %s", p.URL, p.StatusCode, p.Body)
	}
	if f.B.LastAuthnRequest() == nil || f.A.LastAuthnRequest() != nil {
		t.Fatalf("Bee College was not asked, or the other IdP was")
	}
	step := b.Get(a.URL + "/admin")
	want := "admin " + samlidp.DemoUser.NameID + " at " + classHigh + " via " + f.B.EntityID()
	if step.Body != want || step.URL.Path != "/admin" {
		t.Fatalf("step-up ended at %s: %d %s, want %q", step.URL, step.StatusCode, step.Body, want)
	}
	if last := f.B.LastAuthnRequest(); last == nil || !slices.Contains(last.RequestedAuthnContext, classHigh) || f.A.LastAuthnRequest() != nil {
		t.Errorf("Bee College was asked %+v; the other IdP %+v", last, f.A.LastAuthnRequest())
	}

	// The step-up form names the session's IdP and a sealed account; the
	// same form pointed at the other IdP starts nothing.
	mallory := harness.NewBrowser(t).NoFollow()
	mallory.Jar.SetCookies(mustURL(a.URL), b.Jar.Cookies(mustURL(a.URL)))
	sessions.mu.Lock()
	for _, id := range sessions.byID {
		id.AuthTime = time.Now().Add(-time.Hour)
	}
	sessions.mu.Unlock()
	mallory.Header.Set("Accept", "application/json")
	resp := mallory.Get(a.URL + "/admin")
	var body struct {
		Form url.Values `json:"form"`
	}
	if err := json.Unmarshal([]byte(resp.Body), &body); err != nil || body.Form.Get("idp") != f.B.EntityID() || body.Form.Get("extauth_account") == "" {
		t.Fatalf("step-up answer: %d %s", resp.StatusCode, resp.Body)
	}
	form := body.Form
	form.Set("idp", f.A.EntityID())
	mallory.Header.Set("Origin", a.URL)
	wantCode(t, mallory.PostForm(a.URL+"/users/auth/saml", form), http.StatusForbidden, "access_denied")
	if f.A.LastAuthnRequest() != nil {
		t.Errorf("the other IdP was asked")
	}
}

// The pages extauth serves are finished pages: each has its language, a
// title, the provider's name (never its slug), a way back, a viewport for
// phones, and a Content-Security-Policy that allows its one stylesheet by
// its hash and no script but the auto-submit.
func TestPagesAreFinished(t *testing.T) {
	f := newFederation(t)
	a := f.start(func(c *extauth.Config, o *extauth.Options) {
		o.Pages.ProviderNames = map[extauth.Provider]string{extauth.SAML: "Research Federation"}
	})
	get := func(path string, h http.Header) *harness.Response {
		b := harness.NewBrowser(t).NoFollow()
		b.Header = h
		return b.Get(a.URL + path)
	}
	styleRe := regexp.MustCompile(`(?s)<style>(.*?)</style>`)
	for name, tc := range map[string]struct {
		resp            *harness.Response
		title, referrer string
	}{
		"interstitial": {get("/users/auth/saml?idp="+url.QueryEscape(f.A.EntityID()), http.Header{}), "Sign in with Research Federation", "same-origin"},
		"discovery":    {get("/users/auth/saml", http.Header{"Sec-Fetch-Site": {"same-origin"}}), "Sign in with your organisation", "same-origin"},
		"failure":      {get("/users/auth/saml/callback", http.Header{}), "Sign-in failed", "no-referrer"},
	} {
		t.Run(name, func(t *testing.T) {
			p := tc.resp
			for _, want := range []string{`<html lang="en">`, "<title>" + tc.title + "</title>", `<meta name="viewport"`,
				`<meta name="referrer" content="` + tc.referrer + `">`, `<p class="back"><a href="/">`} {
				if !strings.Contains(p.Body, want) {
					t.Errorf("the page lacks %s:\n%s", want, p.Body)
				}
			}
			if strings.Contains(p.Body, ">saml<") || strings.Contains(p.Body, " saml ") {
				t.Errorf("the page names the provider by its slug:\n%s", p.Body)
			}
			if p.Header.Get("Referrer-Policy") != tc.referrer || p.Header.Get("X-Frame-Options") != "DENY" {
				t.Errorf("headers %v", p.Header)
			}
			csp := p.Header.Get("Content-Security-Policy")
			for _, m := range styleRe.FindAllStringSubmatch(p.Body, -1) {
				sum := sha256.Sum256([]byte(m[1]))
				if !strings.Contains(csp, "'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'") {
					t.Errorf("the CSP %q does not allow the page's stylesheet", csp)
				}
			}
			if strings.Contains(csp, "script-src") || strings.Contains(p.Body, "<script") {
				t.Errorf("a page that waits for a click runs a script: %s", csp)
			}
		})
	}
}

// The pages speak the browser's language (Accept-Language) among English,
// German, French and the host's, English when none matches; the host
// changes extauth's words and names its providers.
func TestPagesInTheBrowsersLanguage(t *testing.T) {
	f := newFederation(t)
	a := f.start(func(c *extauth.Config, o *extauth.Options) {
		o.Pages = extauth.Pages{
			ProviderNames: map[extauth.Provider]string{extauth.SAML: "Federación de Investigación"},
			Messages: map[string]map[string]string{
				"es": {"discovery.title": "Inicie sesión con su organización", "confirm.title": "Iniciar sesión con {provider}"},
				"de": {"discovery.title": "Anmelden mit Ihrer Hochschule"},
			},
		}
	})
	for lang, want := range map[string]string{
		"de-CH, de;q=0.9, en;q=0.5": `<html lang="de">` + "|Anmelden mit Ihrer Hochschule|Organisation suchen|Universität Aa",
		"fr-CA":                     `<html lang="fr">` + "|Se connecter avec votre organisation|Trouver votre organisation",
		"es":                        `<html lang="es">` + "|Inicie sesión con su organización|Find your organisation",
		"ja, zh;q=0.8":              `<html lang="en">` + "|Sign in with your organisation",
		"":                          `<html lang="en">` + "|Sign in with your organisation",
	} {
		b := harness.NewBrowser(t)
		b.Header.Set("Accept-Language", lang)
		p := b.Get(a.URL + "/users/auth/saml")
		for _, w := range strings.Split(want, "|") {
			if !strings.Contains(p.Body, w) {
				t.Errorf("Accept-Language %q: the page lacks %q:\n%s", lang, w, p.Body)
			}
		}
		if p.Header.Get("Content-Language") == "" || !strings.Contains(p.Header.Get("Vary"), "Accept-Language") {
			t.Errorf("Accept-Language %q: headers %v", lang, p.Header)
		}
	}
	b := harness.NewBrowser(t)
	b.Header = http.Header{"Accept-Language": {"es"}}
	if p := b.Get(a.URL + "/users/auth/saml?idp=" + url.QueryEscape(f.A.EntityID())); !strings.Contains(p.Body, "Iniciar sesión con Federación de Investigación") {
		t.Errorf("the host's translation of the interstitial, with the provider's name:\n%s", p.Body)
	}

	for _, tc := range []struct {
		messages map[string]map[string]string
		want     string
	}{
		{map[string]map[string]string{"de": {"confirm.titel": "x"}}, `"confirm.titel" is no message of extauth's pages (did you mean "confirm.title"?)`},
		{map[string]map[string]string{"not a tag!": {"confirm.title": "x"}}, `"not a tag!" is not a BCP 47 language tag`},
		{map[string]map[string]string{"it": {"confirm.title": "Accedi con {fornitore}"}}, `names {fornitore}, which this message does not fill (it fills {provider})`},
		{map[string]map[string]string{"it": {"confirm.title": " "}}, `"confirm.title" is empty`},
	} {
		_, err := extauth.New(nil, extauth.Options{BaseURL: "https://app.example.org", CookieKey: testKey, Pages: extauth.Pages{Messages: tc.messages}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Messages %v: %v, want %s", tc.messages, err, tc.want)
		}
	}
	if en := extauth.PageMessages("en"); en["confirm.title"] != "Sign in with {provider}" || len(en) != len(extauth.PageMessages("de")) {
		t.Errorf("PageMessages: en has %d, de %d", len(en), len(extauth.PageMessages("de")))
	}
	if extauth.PageMessages("xx") != nil {
		t.Error("PageMessages of a language extauth does not ship")
	}
}
