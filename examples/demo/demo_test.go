package main

import (
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/extauth/extauth/internal/harness"
)

// startDemo runs the demo on its development providers.
func startDemo(t *testing.T) string {
	t.Helper()
	srv := harness.Serve(t, func(base string) http.Handler {
		h, closeFn, err := newServer(base, serverOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(closeFn)
		return h
	})
	return srv.URL
}

func TestDemoBlogSignInAndOut(t *testing.T) {
	base := startDemo(t)
	b := harness.NewBrowser(t)
	home := b.Get(base + "/")
	if !strings.Contains(home.Body, `action="/users/auth/blog_oauth2"`) || !strings.Contains(home.Body, "Not signed in") {
		t.Fatalf("home page: %s", home.Body)
	}
	if r := b.Get(base + "/me.json"); r.StatusCode != http.StatusNotFound {
		t.Fatalf("/me.json signed out: %d", r.StatusCode)
	}
	consent := b.PostForm(base+"/users/auth/blog_oauth2", nil)
	if !strings.Contains(consent.Body, `id="approve"`) {
		t.Fatalf("no consent page: %s", consent.Body)
	}
	page := b.PostForm(consent.URL.String(), url.Values{"decision": {"approve"}})
	if page.URL.Path != "/" || !strings.Contains(page.Body, `<b id="uid">42</b>`) {
		t.Fatalf("after sign-in: %s %s", page.URL, page.Body)
	}
	me := b.Get(base + "/me.json")
	var id struct {
		Provider, UID, Email string
	}
	if err := json.Unmarshal([]byte(me.Body), &id); err != nil || id.Provider != "blog_oauth2" || id.UID != "42" {
		t.Fatalf("/me.json: %d %s", me.StatusCode, me.Body)
	}
	if strings.Contains(me.Body, `"token":"`) && !strings.Contains(me.Body, `"token":"[REDACTED]"`) {
		t.Errorf("/me.json shows a token: %s", me.Body)
	}
	b.PostForm(base+"/logout", nil)
	if r := b.Get(base + "/me.json"); r.StatusCode != http.StatusNotFound {
		t.Fatalf("/me.json after sign-out: %d", r.StatusCode)
	}
}

func TestDemoDeniedConsent(t *testing.T) {
	base := startDemo(t)
	b := harness.NewBrowser(t)
	consent := b.PostForm(base+"/users/auth/blog_oauth2", nil)
	resp := b.PostForm(consent.URL.String(), url.Values{"decision": {"deny"}})
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(resp.Body, "access_denied") {
		t.Fatalf("denied: %d %s", resp.StatusCode, resp.Body)
	}
}

func TestDemoFlags(t *testing.T) {
	if err := run([]string{"-config", "does-not-exist.yml", "-addr", "127.0.0.1:0"}); err == nil {
		t.Fatal("missing config file accepted")
	}
	if err := run([]string{"-bogus"}); err == nil {
		t.Fatal("unknown flag accepted")
	}
}

// The social development providers sign in through their consent pages.
func TestDemoSocialSignIn(t *testing.T) {
	for _, tc := range []struct {
		provider, uid string
		approve       func(consent *harness.Response) (string, url.Values)
	}{
		{"microblog", "1234567890123456789", func(c *harness.Response) (string, url.Values) {
			return c.URL.Scheme + "://" + c.URL.Host + "/dev/microblog/oauth/authenticate",
				url.Values{"oauth_token": {c.URL.Query().Get("oauth_token")}, "user": {"1234567890123456789"}, "action": {"approve"}}
		}},
		{"socialnet", "10158123456789012", func(c *harness.Response) (string, url.Values) {
			_, rest, _ := strings.Cut(c.Body, `name="request" value="`)
			id, _, _ := strings.Cut(rest, `"`)
			return c.URL.Scheme + "://" + c.URL.Host + "/dev/socialnet/v21.0/dialog/oauth",
				url.Values{"request": {id}, "user": {"10158123456789012"}, "action": {"approve"}}
		}},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			base := startDemo(t)
			b := harness.NewBrowser(t)
			if home := b.Get(base + "/"); !strings.Contains(home.Body, `action="/users/auth/`+tc.provider+`"`) {
				t.Fatalf("home page lacks %s: %s", tc.provider, home.Body)
			}
			consent := b.PostForm(base+"/users/auth/"+tc.provider, nil)
			if consent.StatusCode != http.StatusOK || !strings.Contains(consent.Body, `value="approve"`) {
				t.Fatalf("consent page: %d %s", consent.StatusCode, consent.Body)
			}
			action, form := tc.approve(consent)
			page := b.PostForm(action, form)
			if page.URL.Path != "/" || !strings.Contains(page.Body, `<b id="uid">`+tc.uid+`</b>`) {
				t.Fatalf("after sign-in: %s %d %s", page.URL, page.StatusCode, page.Body)
			}
		})
	}
}

var samlField = regexp.MustCompile(`name="(SAMLRequest|SAMLResponse|RelayState)" value="([^"]*)"`)

func formOf(body string) url.Values {
	v := url.Values{}
	for _, m := range samlField.FindAllStringSubmatch(body, -1) {
		v.Set(m[1], html.UnescapeString(m[2]))
	}
	return v
}

func TestDemoSAMLSignIn(t *testing.T) {
	base := startDemo(t)
	b := harness.NewBrowser(t)
	if home := b.Get(base + "/"); !strings.Contains(home.Body, `action="/users/auth/saml"`) {
		t.Fatalf("home page lists no SAML: %s", home.Body)
	}
	// The SP fetches the IdP metadata in the background; the first
	// attempts may answer 503 until it has.
	var login *harness.Response
	deadline := time.Now().Add(10 * time.Second)
	for {
		login = b.PostForm(base+"/users/auth/saml", nil)
		if login.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(login.Body, "Fake SAML identity provider") || !strings.Contains(login.Body, `value="approve"`) {
		t.Fatalf("no IdP login page: %d %s", login.StatusCode, login.Body)
	}
	form := formOf(login.Body)
	form.Set("decision", "approve")
	post := b.PostForm(base+"/dev/saml/sso", form)
	page := b.PostForm(base+"/users/auth/saml/callback", formOf(post.Body))
	if page.URL.Path != "/" || !strings.Contains(page.Body, `<b id="uid">ada@example.org</b>`) {
		t.Fatalf("after SAML sign-in: %s %s", page.URL, page.Body)
	}
}

// The OpenID Connect development providers sign in through their consent
// pages, as any user of the picker.
func TestDemoOIDCSignIn(t *testing.T) {
	for _, provider := range []string{"oidc", "search_oauth2"} {
		t.Run(provider, func(t *testing.T) {
			base := startDemo(t)
			b := harness.NewBrowser(t)
			if home := b.Get(base + "/"); !strings.Contains(home.Body, `action="/users/auth/`+provider+`"`) {
				t.Fatalf("home page lacks %s: %s", provider, home.Body)
			}
			consent := b.PostForm(base+"/users/auth/"+provider, nil)
			if consent.StatusCode != http.StatusOK || !strings.Contains(consent.Body, `value="approve"`) {
				t.Fatalf("consent page: %d %s", consent.StatusCode, consent.Body)
			}
			_, rest, _ := strings.Cut(consent.Body, `action="`)
			action, _, _ := strings.Cut(rest, `"`)
			_, rest, _ = strings.Cut(consent.Body, `name="interaction" value="`)
			interaction, _, _ := strings.Cut(rest, `"`)
			bob := "248289761002"
			page := b.PostForm(base+action, url.Values{"interaction": {interaction}, "user": {bob}, "decision": {"approve"}})
			if page.URL.Path != "/" || !strings.Contains(page.Body, `<b id="uid">`+bob+`</b>`) {
				t.Fatalf("after sign-in: %s %d %s", page.URL, page.StatusCode, page.Body)
			}
		})
	}
}
