package extauth_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/wpoauth"
	"github.com/extauth/extauth/internal/harness"
)

func TestBlogOAuth2SignIn(t *testing.T) {
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		t.Run(method, func(t *testing.T) {
			a := newApp(t, nil)
			b := harness.NewBrowser(t)
			var resp *harness.Response
			if method == http.MethodGet {
				resp = b.Get(a.URL + "/users/auth/blog_oauth2?return_to=/dashboard%3Ftab%3D1")
			} else {
				resp = b.PostForm(a.URL+"/users/auth/blog_oauth2", url.Values{"return_to": {"/dashboard?tab=1"}})
			}
			if resp.StatusCode != http.StatusOK || resp.Body != "signed in as 42" {
				t.Fatalf("got %d %q", resp.StatusCode, resp.Body)
			}
			if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
				t.Errorf("callback Cache-Control = %q", cc)
			}
			if rp := resp.Header.Get("Referrer-Policy"); rp != "no-referrer" {
				t.Errorf("callback Referrer-Policy = %q", rp)
			}
			got := a.identities()
			if len(got) != 1 {
				t.Fatalf("hook called %d times", len(got))
			}
			id := got[0]
			if id.Provider != "blog_oauth2" || id.UID != "42" || id.Email != "ada@blog.example" ||
				id.Name != "Ada Lovelace" || id.NickName != "ada" || id.EmailVerified {
				t.Errorf("identity = %+v", id)
			}
			if id.Tokens.AccessToken == "" || id.Tokens.RefreshToken == "" || id.Tokens.Expiry.IsZero() {
				t.Errorf("tokens missing: %+v", id.Tokens)
			}
			if a.Ret[0] != "/dashboard?tab=1" {
				t.Errorf("ReturnTo = %q", a.Ret[0])
			}
			if len(b.Jar.Cookies(mustURL(a.URL))) != 0 {
				t.Errorf("transaction cookie left behind: %v", b.Jar.Cookies(mustURL(a.URL)))
			}
		})
	}
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

func TestBlogOAuth2AuthorizeURL(t *testing.T) {
	a := newApp(t, nil)
	b := harness.NewBrowser(t).NoFollow()
	req, _ := http.NewRequest(http.MethodGet, a.URL+"/users/auth/blog_oauth2?state=attacker&redirect_uri=https://evil.example/cb", nil)
	req.Host = "evil.example"
	resp := b.Do(req)
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("authorize: %d", resp.StatusCode)
	}
	u := mustURL(resp.Header.Get("Location"))
	q := u.Query()
	if want := a.URL + "/users/auth/blog_oauth2/callback"; q.Get("redirect_uri") != want {
		t.Errorf("redirect_uri = %q, want %q (Host header or query must not change it)", q.Get("redirect_uri"), want)
	}
	if st := q.Get("state"); st == "attacker" || len(st) < 43 {
		t.Errorf("state = %q: must be ours, >= 256 bits", st)
	}
	if q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) != 43 {
		t.Errorf("PKCE missing: %v", q)
	}
	if u.Path != "/oauth/authorize" || q.Get("client_id") != blogKey || q.Get("response_type") != "code" {
		t.Errorf("authorize URL = %s", u)
	}
	if strings.Contains(u.String(), blogSecret) {
		t.Error("client secret in the authorize URL")
	}
}

func TestBlogOAuth2PKCEVerifierFromCookieOnly(t *testing.T) {
	a := newApp(t, nil)
	b := harness.NewBrowser(t).NoFollow()
	authURL := a.start(b, nil)
	sum := sha256.Sum256([]byte("attacker-verifier-attacker-verifier-attacker"))
	if authURL.Query().Get("code_challenge") == base64.RawURLEncoding.EncodeToString(sum[:]) {
		t.Fatal("challenge equals the attacker's")
	}
	cb := a.approve(b, authURL) + "&code_verifier=attacker-verifier-attacker-verifier-attacker"
	resp := b.Get(cb)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a code_verifier in the callback query must be ignored, got %d %s", resp.StatusCode, resp.Body)
	}
}

func TestBlogOAuth2JSONFormat(t *testing.T) {
	a := newApp(t, nil)
	b := harness.NewBrowser(t).NoFollow()
	resp := b.PostForm(a.URL+"/users/auth/blog_oauth2.json", nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("got %d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Body)
	}
	var out struct {
		RedirectTo string `json:"redirect_to"`
	}
	if err := json.Unmarshal([]byte(resp.Body), &out); err != nil || !strings.Contains(out.RedirectTo, "/oauth/authorize?") {
		t.Fatalf("body %q: %v", resp.Body, err)
	}
	a.Fake.Lock()
	a.Fake.TokenStatus = http.StatusInternalServerError
	a.Fake.Unlock()
	cb := a.approve(b, mustURL(out.RedirectTo))
	resp = b.Get(cb)
	var fail struct{ Error, Provider string }
	if err := json.Unmarshal([]byte(resp.Body), &fail); err != nil || resp.StatusCode != http.StatusServiceUnavailable ||
		fail.Error != "provider_unavailable" || fail.Provider != "blog_oauth2" {
		t.Fatalf("a sign-in begun on .json fails in JSON: %d %q", resp.StatusCode, resp.Body)
	}
}

func TestBlogOAuth2AccessDenied(t *testing.T) {
	a := newApp(t, nil)
	a.Fake.AutoApprove = false
	b := harness.NewBrowser(t)
	page := b.PostForm(a.URL+"/users/auth/blog_oauth2", nil)
	if !strings.Contains(page.Body, `value="deny"`) {
		t.Fatalf("no consent page: %s", page.Body)
	}
	resp := b.PostForm(page.URL.String(), url.Values{"decision": {"deny"}})
	wantCode(t, resp, http.StatusForbidden, "access_denied")
	if a.Fake.TokenCalls != 0 || len(a.identities()) != 0 {
		t.Error("denied consent reached the token endpoint or the hook")
	}
}

func TestBlogOAuth2ProviderFailures(t *testing.T) {
	cases := []struct {
		name   string
		edit   func(*extauth.Options)
		fake   func(*wpoauth.Server)
		cb     func(string) string
		status int
		code   string
	}{
		{name: "bad code", cb: func(u string) string { return strings.Replace(u, "code=", "code=x", 1) },
			status: 400, code: "invalid_response"},
		{name: "missing code", cb: func(u string) string { return strings.Replace(u, "code=", "nocode=", 1) },
			status: 400, code: "invalid_response"},
		{name: "token 500", fake: func(s *wpoauth.Server) { s.TokenStatus = 500 }, status: 503, code: "provider_unavailable"},
		{name: "bad secret", fake: func(s *wpoauth.Server) { s.ClientSecret = "rotated" }, status: 502, code: "invalid_credentials"},
		{name: "huge token body", edit: func(o *extauth.Options) { o.MaxResponseBytes = 8 << 10 },
			fake: func(s *wpoauth.Server) { s.HugeToken = 1 << 20 }, status: 400, code: "invalid_response"},
		{name: "profile not JSON", fake: func(s *wpoauth.Server) { s.MeBody = "<html>" }, status: 400, code: "invalid_response"},
		{name: "profile without ID", fake: func(s *wpoauth.Server) { s.MeBody = `{"user_login":"x"}` }, status: 400, code: "invalid_response"},
		{name: "profile ID of wrong type", fake: func(s *wpoauth.Server) { s.MeBody = `{"ID":{"x":1}}` }, status: 400, code: "invalid_response"},
		{name: "profile is an array", fake: func(s *wpoauth.Server) { s.MeBody = `[1,2]` }, status: 400, code: "invalid_response"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := newApp(t, c.edit)
			b := harness.NewBrowser(t).NoFollow()
			cb := a.approve(b, a.start(b, nil))
			if c.fake != nil {
				a.Fake.Lock()
				c.fake(a.Fake)
				a.Fake.Unlock()
			}
			if c.cb != nil {
				cb = c.cb(cb)
			}
			wantCode(t, b.Get(cb), c.status, c.code)
			if len(a.identities()) != 0 {
				t.Error("hook called on failure")
			}
		})
	}
}

func TestBlogOAuth2ProviderHangs(t *testing.T) {
	a := newApp(t, func(o *extauth.Options) { o.Timeout = hangTimeout })
	b := harness.NewBrowser(t).NoFollow()
	cb := a.approve(b, a.start(b, nil))
	a.Fake.Lock()
	a.Fake.Hang = true
	a.Fake.Unlock()
	began := time.Now()
	resp := b.Get(cb)
	wantCode(t, resp, http.StatusGatewayTimeout, "timeout")
	if d := time.Since(began); d > hangBound {
		t.Errorf("time-out took %v", d)
	}
}

func TestBlogOAuth2InvalidState(t *testing.T) {
	t.Run("no cookie", func(t *testing.T) {
		a := newApp(t, nil)
		b := harness.NewBrowser(t).NoFollow()
		cb := a.approve(b, a.start(b, nil))
		other := harness.NewBrowser(t).NoFollow()
		wantCode(t, other.Get(cb), 400, "invalid_state")
		if a.Fake.TokenCalls != 0 {
			t.Error("token endpoint called without a transaction")
		}
	})
	t.Run("wrong state", func(t *testing.T) {
		a := newApp(t, nil)
		b := harness.NewBrowser(t).NoFollow()
		cb := mustURL(a.approve(b, a.start(b, nil)))
		q := cb.Query()
		st := q.Get("state")
		last := "A"
		if st[len(st)-1] == 'A' {
			last = "B"
		}
		q.Set("state", st[:len(st)-1]+last)
		cb.RawQuery = q.Encode()
		wantCode(t, b.Get(cb.String()), 400, "invalid_state")
		if a.Fake.TokenCalls != 0 {
			t.Error("token endpoint called with a wrong state")
		}
	})
	t.Run("no state", func(t *testing.T) {
		a := newApp(t, nil)
		b := harness.NewBrowser(t).NoFollow()
		a.start(b, nil)
		wantCode(t, b.Get(a.URL+"/users/auth/blog_oauth2/callback?code=abc"), 400, "invalid_state")
	})
	t.Run("tampered cookie", func(t *testing.T) {
		a := newApp(t, nil)
		b := harness.NewBrowser(t).NoFollow()
		cb := a.approve(b, a.start(b, nil))
		u := mustURL(a.URL)
		cs := b.Jar.Cookies(u)
		if len(cs) != 1 {
			t.Fatalf("cookies: %v", cs)
		}
		v := []byte(cs[0].Value)
		v[10] ^= 1
		b.Jar.SetCookies(u, []*http.Cookie{{Name: cs[0].Name, Value: string(v), Path: "/"}})
		wantCode(t, b.Get(cb), 400, "invalid_state")
	})
	t.Run("expired", func(t *testing.T) {
		a := newApp(t, nil)
		b := harness.NewBrowser(t).NoFollow()
		cb := a.approve(b, a.start(b, nil))
		a.clock.Add(11 * time.Minute)
		wantCode(t, b.Get(cb), 400, "invalid_state")
	})
	t.Run("replayed", func(t *testing.T) {
		a := newApp(t, nil)
		b := harness.NewBrowser(t).NoFollow()
		cb := a.approve(b, a.start(b, nil))
		u := mustURL(a.URL)
		stolen := b.Jar.Cookies(u)
		if resp := b.Get(cb); resp.StatusCode != 200 {
			t.Fatalf("first use: %d %s", resp.StatusCode, resp.Body)
		}
		// An attacker who captured the callback URL and the cookie tries again.
		b.Jar.SetCookies(u, []*http.Cookie{{Name: stolen[0].Name, Value: stolen[0].Value, Path: "/"}})
		wantCode(t, b.Get(cb), 400, "invalid_state")
		if a.Fake.TokenCalls != 1 {
			t.Errorf("token endpoint called %d times, want 1", a.Fake.TokenCalls)
		}
	})
	t.Run("state of another provider", func(t *testing.T) {
		a := newApp(t, func(o *extauth.Options) {
			o.Extra = []extauth.Strategy{renamed{name: "other_blog"}}
		})
		b := harness.NewBrowser(t).NoFollow()
		cb := mustURL(a.approve(b, a.start(b, nil)))
		cb.Path = "/users/auth/other_blog/callback"
		wantCode(t, b.Get(cb.String()), 400, "invalid_state")
	})
}

func TestBlogOAuth2ConcurrentTransactions(t *testing.T) {
	a := newApp(t, nil)
	b := harness.NewBrowser(t).NoFollow()
	first := a.approve(b, a.start(b, url.Values{"return_to": {"/one"}}))
	second := a.approve(b, a.start(b, url.Values{"return_to": {"/two"}}))
	for _, cb := range []string{second, first} {
		if resp := b.Get(cb); resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, resp.Body)
		}
	}
	if got := strings.Join(a.Ret, ","); got != "/two,/one" {
		t.Errorf("return_to = %s", got)
	}
}

func TestBlogOAuth2OtherInstanceAndKeyRotation(t *testing.T) {
	// Instance one seals with the old key; instance two, after rotation,
	// finishes the sign-in with the old key in OldCookieKeys.
	newKey := bytes.Repeat([]byte{9}, 32)
	one := newApp(t, nil)
	b := harness.NewBrowser(t).NoFollow()
	cb := mustURL(one.approve(b, one.start(b, nil)))
	var two *extauth.Auth
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { two.ServeHTTP(w, r) }))
	defer srv.Close()
	var signedIn string
	var err error
	two, err = extauth.New(&extauth.Config{BlogOAuth2: extauth.OAuthProvider{Key: blogKey, Secret: extauth.NewSecret(blogSecret), Site: mustSite(one)}},
		extauth.Options{BaseURL: one.URL, CookieKey: newKey, OldCookieKeys: [][]byte{testKey},
			OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) { signedIn = id.UID }})
	if err != nil {
		t.Fatal(err)
	}
	// Same public origin, another instance behind the balancer: replay the
	// browser's cookies to it.
	req, _ := http.NewRequest(http.MethodGet, srv.URL+cb.RequestURI(), nil)
	for _, c := range b.Jar.Cookies(mustURL(one.URL)) {
		req.AddCookie(c)
	}
	resp := b.Do(req)
	if resp.StatusCode != 200 || signedIn != "42" {
		t.Fatalf("second instance: %d %q, uid %q", resp.StatusCode, resp.Body, signedIn)
	}
}

func mustSite(a *app) string {
	// The fake's URL is recorded in the authorize redirect.
	b := harness.NewBrowser(a.t).NoFollow()
	u := a.start(b, nil)
	return u.Scheme + "://" + u.Host
}
