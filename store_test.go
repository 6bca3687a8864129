package extauth_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/internal/harness"
)

// A callback whose answer fails verification holds nothing in the store:
// ten times the memory store's bound of junk callbacks, each to a sign-in
// of the attacker's own, and a real sign-in still succeeds. A verified
// answer is still accepted once only.
func TestJunkCallbacksCannotFillTheStore(t *testing.T) {
	const bound = 4
	t.Run("blog_oauth2", func(t *testing.T) {
		a := newApp(t, func(o *extauth.Options) {
			o.Store = extauth.NewMemoryStore(extauth.MemoryStoreOptions{MaxEntries: bound, Now: o.Now})
		})
		cbURL := a.URL + "/users/auth/blog_oauth2/callback.json"
		for i := range 10 * bound {
			b := harness.NewBrowser(t).NoFollow()
			state := a.start(b, nil).Query().Get("state")
			wantCode(t, b.Get(cbURL+"?code=junk&state="+url.QueryEscape(state)), http.StatusBadRequest, "invalid_response")
			if t.Failed() {
				t.Fatalf("junk callback %d", i)
			}
		}
		b := harness.NewBrowser(t).NoFollow()
		cb := a.approve(b, a.start(b, nil))
		cookies := b.Jar.Cookies(mustURL(a.URL))
		if resp := b.Get(cb); resp.StatusCode != http.StatusOK {
			t.Fatalf("sign-in after the junk: %d %s", resp.StatusCode, resp.Body)
		}
		replay := harness.NewBrowser(t).NoFollow()
		replay.Jar.SetCookies(mustURL(a.URL), cookies)
		wantCode(t, replay.Get(cb), http.StatusBadRequest, "invalid_state")
	})
	t.Run("saml", func(t *testing.T) {
		idp := newSAMLIdP(t)
		var st extauth.Store
		a := newSAMLApp(t, idp, func(_ *extauth.Config, o *extauth.Options) {
			st = extauth.NewMemoryStore(extauth.MemoryStoreOptions{MaxEntries: 3 * bound})
			o.Store = st
		})
		junk := base64.StdEncoding.EncodeToString([]byte(`<samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" ID="_x" Version="2.0"/>`))
		for range 10 * bound {
			b := harness.NewBrowser(t)
			_, _, relay := a.authorize(b, nil)
			if resp := a.callback(b, url.Values{"SAMLResponse": {junk}, "RelayState": {relay}}); resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("junk SAML response: %d %s", resp.StatusCode, resp.Body)
			}
		}
		b := harness.NewBrowser(t)
		redirect, _, _ := a.authorize(b, nil)
		form := idpForm(t, b, redirect)
		if resp := a.callback(b, form); resp.StatusCode != http.StatusOK {
			t.Fatalf("sign-in after the junk: %d %s", resp.StatusCode, resp.Body)
		}
		fresh, err := st.Consume(context.Background(), "probe", time.Now().Add(time.Minute))
		if err != nil || !fresh {
			t.Errorf("the store has no room after one sign-in: %v", err)
		}
	})
}

// Two callbacks with one cookie and one code, at once: exactly one signs
// in, and the provider's token endpoint is asked once.
func TestConcurrentCallbacksOneCookie(t *testing.T) {
	a := newApp(t, nil)
	b := harness.NewBrowser(t).NoFollow()
	cb := a.approve(b, a.start(b, nil))
	cookies := b.Jar.Cookies(mustURL(a.URL))
	tokenCalls := a.Fake.TokenCalls
	var wg sync.WaitGroup
	statuses := make([]int, 8)
	for i := range statuses {
		wg.Go(func() {
			c := harness.NewBrowser(t).NoFollow()
			c.Jar.SetCookies(mustURL(a.URL), cookies)
			statuses[i] = c.Get(cb).StatusCode
		})
	}
	wg.Wait()
	ok := 0
	for _, s := range statuses {
		if s == http.StatusOK {
			ok++
		}
	}
	if ok != 1 {
		t.Errorf("%d of %d concurrent callbacks signed in: %v", ok, len(statuses), statuses)
	}
	if calls := a.Fake.TokenCalls - tokenCalls; calls != 1 {
		t.Errorf("token endpoint asked %d times", calls)
	}
}
