package extauth_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/markbates/goth/providers/github"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/forge"
	"github.com/extauth/extauth/extauthtest/graph"
	mbfake "github.com/extauth/extauth/extauthtest/oauth1"
	"github.com/extauth/extauth/internal/harness"
	"github.com/extauth/extauth/providers"
)

const (
	mbKey, mbSecret = "mb-consumer-key", "mb-consumer-secret-8c1d"
	snKey, snSecret = "sn-app-id", "sn-app-secret-41f0"
	ghKey, ghSecret = "gh-client-id", "gh-client-secret-9a2b"
)

// socialApp is one application with microblog, socialnet and a goth github
// provider mounted, each against its fake, recording what its hooks saw.
type socialApp struct {
	t   *testing.T
	URL string
	MB  *mbfake.Server
	SN  *graph.Server
	GH  *forge.Server
	// The fakes' base URLs.
	MBURL, SNURL, GHURL string
	Logs                *bytes.Buffer

	mu  sync.Mutex
	got []*extauth.Identity
}

type socialSetup struct {
	mbSecret, snSecret, ghSecret string
	autoApprove                  bool
	timeout                      time.Duration
}

// lateHandler serves h once it is set: the fakes must know the app's URL
// (their registered callbacks) and the app the fakes' URLs.
type lateHandler struct{ h http.Handler }

func (l *lateHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) { l.h.ServeHTTP(w, r) }

func newSocialApp(t *testing.T, edit func(*socialSetup)) *socialApp {
	t.Helper()
	set := socialSetup{mbSecret: mbSecret, snSecret: snSecret, ghSecret: ghSecret, autoApprove: true, timeout: slowTimeout}
	if edit != nil {
		edit(&set)
	}
	a := &socialApp{t: t, Logs: &bytes.Buffer{}}
	var mbH, snH, ghH lateHandler
	mbSrv, snSrv, ghSrv := httptest.NewServer(&mbH), httptest.NewServer(&snH), httptest.NewServer(&ghH)
	a.MBURL, a.SNURL, a.GHURL = mbSrv.URL, snSrv.URL, ghSrv.URL
	srv := harness.Serve(t, func(base string) http.Handler {
		a.MB = mbfake.New(mbfake.Options{ConsumerKey: mbKey, ConsumerSecret: mbSecret, AutoApprove: set.autoApprove,
			CallbackURLs: []string{base + "/users/auth/microblog/callback"}})
		a.SN = graph.New(graph.Options{AppID: snKey, AppSecret: snSecret, AutoApprove: set.autoApprove,
			RedirectURIs: []string{base + "/users/auth/socialnet/callback"}})
		a.GH = forge.New(forge.Options{ClientID: ghKey, ClientSecret: ghSecret, AutoApprove: set.autoApprove,
			CallbackURL: base + "/users/auth/github/callback"})
		mbH.h, snH.h, ghH.h = a.MB, a.SN, a.GH
		authURL, tokenURL, profileURL, emailURL := forge.URLs(a.GHURL)
		gh := github.NewCustomisedURL(ghKey, set.ghSecret, base+"/users/auth/github/callback", authURL, tokenURL, profileURL, emailURL)
		cfg := &extauth.Config{
			Microblog: extauth.OAuthProvider{Key: mbKey, Secret: extauth.NewSecret(set.mbSecret), Site: a.MBURL},
			Socialnet: extauth.OAuthProvider{Key: snKey, Secret: extauth.NewSecret(set.snSecret), Site: a.SNURL},
		}
		auth, err := extauth.New(cfg, extauth.Options{
			BaseURL:   base,
			CookieKey: testKey,
			Timeout:   set.timeout,
			Logger:    debugLogger(a.Logs),
			Extra:     []extauth.Strategy{providers.Goth(gh)},
			OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
				a.mu.Lock()
				a.got = append(a.got, id)
				a.mu.Unlock()
				fmt.Fprintf(w, "signed in with %s as %s", id.Provider, id.UID)
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { auth.Close() })
		mux := http.NewServeMux()
		auth.Mount(mux)
		return mux
	})
	// Hanging handlers end first, then the servers close.
	t.Cleanup(func() {
		a.MB.Close()
		a.SN.Close()
		a.GH.Close()
		mbSrv.Close()
		snSrv.Close()
		ghSrv.Close()
	})
	a.URL = srv.URL
	return a
}

func (a *socialApp) identities() []*extauth.Identity {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*extauth.Identity(nil), a.got...)
}

// secretsIn lists which of the given values appear in the captured logs.
func (a *socialApp) secretsInLogs(values ...string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	logs := a.Logs.String()
	for _, v := range values {
		if v != "" && strings.Contains(logs, v) {
			out = append(out, v)
		}
	}
	return out
}

// callbackURL has the browser start provider p and approve at the fake,
// stopping at the redirect back to the application.
func (a *socialApp) callbackURL(b *harness.Browser, p string) string {
	a.t.Helper()
	b.NoFollow()
	resp := b.Get(a.URL + "/users/auth/" + p)
	if resp.StatusCode != http.StatusFound {
		a.t.Fatalf("authorize %s: %d %s", p, resp.StatusCode, resp.Body)
	}
	resp = b.Get(resp.Header.Get("Location"))
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, a.URL+"/users/auth/"+p+"/callback?") {
		a.t.Fatalf("provider %s: %d, Location %q", p, resp.StatusCode, loc)
	}
	loc, _, _ = strings.Cut(loc, "#")
	return loc
}

func wantFailure(t *testing.T, resp *harness.Response, status int, code providers.Code) {
	t.Helper()
	if resp.StatusCode != status || !strings.Contains(resp.Body, string(code)) {
		t.Fatalf("got %d %q, want %d with %s", resp.StatusCode, resp.Body, status, code)
	}
}

var socialProviders = []string{"microblog", "socialnet", "github"}

func TestSocialSignIn(t *testing.T) {
	for _, p := range socialProviders {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			t.Run(p+"/"+method, func(t *testing.T) {
				a := newSocialApp(t, nil)
				b := harness.NewBrowser(t)
				var resp *harness.Response
				if method == http.MethodGet {
					resp = b.Get(a.URL + "/users/auth/" + p)
				} else {
					resp = b.PostForm(a.URL+"/users/auth/"+p, url.Values{"return_to": {"/home"}})
				}
				got := a.identities()
				if resp.StatusCode != http.StatusOK || len(got) != 1 {
					t.Fatalf("got %d %q, %d identities", resp.StatusCode, resp.Body, len(got))
				}
				id := got[0]
				if resp.Body != "signed in with "+p+" as "+id.UID {
					t.Errorf("body %q", resp.Body)
				}
				if resp.Header.Get("Cache-Control") != "no-store" || resp.Header.Get("Referrer-Policy") != "no-referrer" {
					t.Errorf("callback headers %v", resp.Header)
				}
				switch p {
				case "microblog":
					u := mbfake.DemoUser
					if id.UID != u.ID || id.NickName != u.ScreenName || id.Email != u.Email || !id.EmailVerified ||
						id.Tokens.AccessToken == "" || id.Tokens.Secret == "" {
						t.Errorf("identity %+v", id)
					}
				case "socialnet":
					u := graph.DemoUser
					if id.UID != u.ID || id.Name != u.Name || id.Email != u.Email || id.EmailVerified ||
						id.Image != u.Picture || id.Tokens.AccessToken == "" {
						t.Errorf("identity %+v", id)
					}
					if n := a.SN.TokensInQuery(); n != 0 {
						t.Errorf("%d Graph calls with the token in the URL", n)
					}
				case "github":
					u := forge.DemoUser
					if id.UID != "583231" || id.NickName != u.Login || id.Email != u.Email || id.Tokens.AccessToken == "" {
						t.Errorf("identity %+v", id)
					}
				}
				if c := b.Jar.Cookies(mustURL(a.URL)); len(c) != 0 {
					t.Errorf("transaction cookie left behind: %v", c)
				}
				// Nothing secret in the hops the browser saw or in the logs.
				for _, hop := range b.Hops {
					for _, s := range []string{id.Tokens.AccessToken, id.Tokens.Secret, mbSecret, snSecret, ghSecret} {
						if s != "" && strings.Contains(hop, s) {
							t.Errorf("secret or token in a browser URL: %s", hop)
						}
					}
				}
				if leaked := a.secretsInLogs(id.Tokens.AccessToken, id.Tokens.Secret, mbSecret, snSecret, ghSecret); len(leaked) > 0 {
					t.Errorf("logs carry %d secrets or tokens", len(leaked))
				}
			})
		}
	}
}

// The route-level binding test of OAuth 1.0a: the transaction cookie is
// found by the callback's oauth_token, so a callback naming another request
// token finds no transaction, and the provider is never asked.
func TestSocialMicroblogTokenMismatch(t *testing.T) {
	a := newSocialApp(t, nil)
	victim := harness.NewBrowser(t)
	cb := a.callbackURL(victim, "microblog")
	other := harness.NewBrowser(t)
	otherCB := a.callbackURL(other, "microblog")

	// The victim's browser, with its own transaction, receives the other
	// sign-in's callback (its verifier is genuine).
	resp := victim.Get(otherCB)
	wantFailure(t, resp, http.StatusBadRequest, providers.CodeInvalidState)
	// The oauth_token swapped for the victim's, verifier kept: the binding
	// matches, so the provider decides, and refuses the foreign verifier.
	u, _ := url.Parse(cb)
	q := u.Query()
	q.Set("oauth_verifier", mustURL(otherCB).Query().Get("oauth_verifier"))
	u.RawQuery = q.Encode()
	resp = victim.Get(u.String())
	wantFailure(t, resp, http.StatusBadRequest, providers.CodeReplayed)
	if len(a.identities()) != 0 {
		t.Fatal("a hook ran")
	}
	// A callback without oauth_token or denied carries no binding at all.
	resp = other.Get(a.URL + "/users/auth/microblog/callback?oauth_verifier=x")
	wantFailure(t, resp, http.StatusBadRequest, providers.CodeInvalidState)
	if n := a.MB.Calls(mbfake.AccessToken); n != 1 {
		t.Errorf("access_token called %d times, want 1 (the bound, refused one)", n)
	}
}

func TestSocialStateMismatch(t *testing.T) {
	for _, p := range []string{"socialnet", "github"} {
		t.Run(p, func(t *testing.T) {
			a := newSocialApp(t, nil)
			b := harness.NewBrowser(t)
			cb := a.callbackURL(b, p)
			u, _ := url.Parse(cb)
			q := u.Query()
			q.Set("state", "attacker-state")
			u.RawQuery = q.Encode()
			wantFailure(t, b.Get(u.String()), http.StatusBadRequest, providers.CodeInvalidState)
			// Without the browser's cookie the genuine callback fails too.
			wantFailure(t, harness.NewBrowser(t).Get(cb), http.StatusBadRequest, providers.CodeInvalidState)
			if a.SN.Calls(graph.AccessToken)+a.GH.Calls(forge.AccessToken) != 0 {
				t.Error("token endpoint called")
			}
		})
	}
}

// State comes from the transaction, never from the authorize request.
func TestSocialStateNotFromRequest(t *testing.T) {
	for _, p := range []string{"socialnet", "github"} {
		a := newSocialApp(t, nil)
		b := harness.NewBrowser(t).NoFollow()
		resp := b.Get(a.URL + "/users/auth/" + p + "?state=attacker")
		loc := mustURL(resp.Header.Get("Location"))
		if s := loc.Query().Get("state"); s == "" || s == "attacker" || len(s) < 43 {
			t.Errorf("%s: authorize URL state %q", p, s)
		}
	}
}

func TestSocialDenied(t *testing.T) {
	for _, p := range socialProviders {
		t.Run(p, func(t *testing.T) {
			a := newSocialApp(t, func(s *socialSetup) { s.autoApprove = false })
			b := harness.NewBrowser(t)
			page := b.Get(a.URL + "/users/auth/" + p)
			if page.StatusCode != http.StatusOK || !strings.Contains(page.Body, `value="deny"`) {
				t.Fatalf("consent page: %d %s", page.StatusCode, page.Body)
			}
			var resp *harness.Response
			switch p {
			case "microblog":
				token := page.URL.Query().Get("oauth_token")
				resp = b.PostForm(a.MBURL+"/oauth/authenticate", url.Values{"oauth_token": {token}, "action": {"deny"}})
			case "socialnet":
				id := socialBetween(page.Body, `name="request" value="`, `"`)
				resp = b.PostForm(a.SNURL+"/v21.0/dialog/oauth", url.Values{"request": {id}, "action": {"deny"}})
			case "github":
				form := page.URL.Query()
				form.Set("action", "deny")
				resp = b.PostForm(a.GHURL+"/login/oauth/authorize", form)
			}
			wantFailure(t, resp, http.StatusForbidden, providers.CodeAccessDenied)
			if len(a.identities()) != 0 {
				t.Error("hook ran")
			}
			if a.MB.Calls(mbfake.AccessToken)+a.SN.Calls(graph.AccessToken)+a.GH.Calls(forge.AccessToken) != 0 {
				t.Error("token endpoint called after a refusal")
			}
		})
	}
}

func TestSocialBadSecret(t *testing.T) {
	for _, p := range socialProviders {
		t.Run(p, func(t *testing.T) {
			a := newSocialApp(t, func(s *socialSetup) {
				s.mbSecret, s.snSecret, s.ghSecret = "wrong-1", "wrong-2", "wrong-3"
			})
			b := harness.NewBrowser(t)
			resp := b.Get(a.URL + "/users/auth/" + p)
			// microblog fails at authorize (the request token is signed with
			// the secret), the others at the callback's exchange.
			wantFailure(t, resp, http.StatusBadGateway, providers.CodeInvalidCredentials)
			if strings.Contains(resp.Body, "wrong-") {
				t.Error("secret in the failure page")
			}
			if leaked := a.secretsInLogs("wrong-1", "wrong-2", "wrong-3"); len(leaked) > 0 {
				t.Errorf("secrets in logs: %v", leaked)
			}
		})
	}
}

// A callback used once cannot be used again: the cookie is spent and the
// transaction consumed, so even a browser that kept a copy of the cookie
// gets invalid_state and the provider is not asked again.
func TestSocialReplayedCallback(t *testing.T) {
	for _, p := range socialProviders {
		t.Run(p, func(t *testing.T) {
			a := newSocialApp(t, nil)
			b := harness.NewBrowser(t)
			cb := a.callbackURL(b, p)
			kept := b.Jar.Cookies(mustURL(a.URL))
			if len(kept) != 1 {
				t.Fatalf("%d transaction cookies", len(kept))
			}
			if resp := b.Get(cb); resp.StatusCode != http.StatusOK {
				t.Fatalf("first callback: %d %s", resp.StatusCode, resp.Body)
			}
			calls := a.MB.Calls(mbfake.AccessToken) + a.SN.Calls(graph.AccessToken) + a.GH.Calls(forge.AccessToken)
			b.Jar.SetCookies(mustURL(a.URL), kept)
			wantFailure(t, b.Get(cb), http.StatusBadRequest, providers.CodeInvalidState)
			if n := a.MB.Calls(mbfake.AccessToken) + a.SN.Calls(graph.AccessToken) + a.GH.Calls(forge.AccessToken); n != calls {
				t.Errorf("token endpoint called again on a replay")
			}
			if len(a.identities()) != 1 {
				t.Errorf("%d sign-ins", len(a.identities()))
			}
		})
	}
}

// A used code injected into a fresh sign-in of the same browser passes the
// state check; the provider refuses it as used.
func TestSocialReplayedCode(t *testing.T) {
	for _, p := range []string{"socialnet", "github"} {
		t.Run(p, func(t *testing.T) {
			a := newSocialApp(t, nil)
			b := harness.NewBrowser(t)
			first := a.callbackURL(b, p)
			if resp := b.Get(first); resp.StatusCode != http.StatusOK {
				t.Fatalf("first sign-in: %d %s", resp.StatusCode, resp.Body)
			}
			second := mustURL(a.callbackURL(b, p))
			q := second.Query()
			q.Set("code", mustURL(first).Query().Get("code"))
			second.RawQuery = q.Encode()
			wantFailure(t, b.Get(second.String()), http.StatusBadRequest, providers.CodeReplayed)
			if len(a.identities()) != 1 {
				t.Errorf("%d sign-ins", len(a.identities()))
			}
		})
	}
}

func TestSocialProviderFailures(t *testing.T) {
	t.Parallel() // it waits on time-outs and retries more than it computes: it runs beside the others that do
	type step struct {
		provider string
		set      func(a *socialApp)
		status   int
		code     providers.Code
	}
	var steps []step
	for _, f := range []struct {
		name   string
		mb     mbfake.Fault
		sn     graph.Fault
		gh     forge.Fault
		status int
		code   providers.Code
	}{
		{"5xx", mbfake.FaultServerError, graph.FaultServerError, forge.FaultServerError, http.StatusServiceUnavailable, providers.CodeProviderUnavailable},
		{"huge", mbfake.FaultHugeBody, graph.FaultHugeBody, forge.FaultHugeBody, http.StatusBadRequest, providers.CodeInvalidResponse},
		{"hang", mbfake.FaultHang, graph.FaultHang, forge.FaultHang, http.StatusGatewayTimeout, providers.CodeTimeout},
	} {
		f := f
		for _, e := range []mbfake.Endpoint{mbfake.RequestToken, mbfake.AccessToken, mbfake.VerifyCredentials} {
			e := e
			steps = append(steps, step{"microblog/" + string(e) + "/" + f.name, func(a *socialApp) { a.MB.SetFault(e, f.mb) }, f.status, f.code})
		}
		for _, e := range []graph.Endpoint{graph.AccessToken, graph.Me} {
			e := e
			steps = append(steps, step{"socialnet/" + string(e) + "/" + f.name, func(a *socialApp) { a.SN.SetFault(e, f.sn) }, f.status, f.code})
		}
		if f.name != "5xx" { // goth hides the profile status: covered in providers
			steps = append(steps, step{"github/user/" + f.name, func(a *socialApp) { a.GH.SetFault(forge.UserAPI, f.gh) }, f.status, f.code})
		}
		steps = append(steps, step{"github/access_token/" + f.name, func(a *socialApp) { a.GH.SetFault(forge.AccessToken, f.gh) }, f.status, f.code})
	}
	for _, s := range steps {
		t.Run(s.provider, func(t *testing.T) {
			a := newSocialApp(t, func(set *socialSetup) {
				if s.code == providers.CodeTimeout {
					set.timeout = hangTimeout
				}
			})
			s.set(a)
			p, _, _ := strings.Cut(s.provider, "/")
			start := time.Now()
			resp := harness.NewBrowser(t).Get(a.URL + "/users/auth/" + p)
			wantFailure(t, resp, s.status, s.code)
			if d := time.Since(start); d > hangBound {
				t.Errorf("took %v", d)
			}
		})
	}
}

func TestSocialMalformedProviderAnswers(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(a *socialApp)
		p    string
	}{
		{"microblog request_token", func(a *socialApp) { a.MB.SetFault(mbfake.RequestToken, mbfake.FaultMalformed) }, "microblog"},
		{"microblog access_token", func(a *socialApp) { a.MB.SetFault(mbfake.AccessToken, mbfake.FaultMalformed) }, "microblog"},
		{"microblog profile", func(a *socialApp) { a.MB.SetFault(mbfake.VerifyCredentials, mbfake.FaultMalformed) }, "microblog"},
		{"microblog unconfirmed callback", func(a *socialApp) { a.MB.OmitCallbackConfirmed(true) }, "microblog"},
		{"socialnet token", func(a *socialApp) { a.SN.SetFault(graph.AccessToken, graph.FaultMalformed) }, "socialnet"},
		{"socialnet profile", func(a *socialApp) { a.SN.SetFault(graph.Me, graph.FaultMalformed) }, "socialnet"},
		{"github profile", func(a *socialApp) { a.GH.SetProfileBody([]byte("<html>")) }, "github"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newSocialApp(t, nil)
			tc.set(a)
			wantFailure(t, harness.NewBrowser(t).Get(a.URL+"/users/auth/"+tc.p), http.StatusBadRequest, providers.CodeInvalidResponse)
			if len(a.identities()) != 0 {
				t.Error("hook ran")
			}
		})
	}
}

func TestSocialProfileFields(t *testing.T) {
	for _, tc := range []struct {
		p, body string
	}{
		{"microblog", `{"screen_name":"no_id"}`},
		{"microblog", `{"id_str":1234567890123456789}`},
		{"microblog", `{"id_str":"1234567890123456789","email":{"address":"x"}}`},
		{"microblog", `{"id_str":"1234567890123456789","name":42}`},
		{"socialnet", `{"name":"no id"}`},
		{"socialnet", `{"id":10158123456789012}`},
		{"socialnet", `{"id":"10158123456789012","picture":"https://x/y.jpg"}`},
		{"socialnet", `{"id":"10158123456789012","first_name":["a"]}`},
		{"github", `{"id":"583231","login":"octo"}`},
	} {
		t.Run(tc.p+" "+tc.body, func(t *testing.T) {
			a := newSocialApp(t, nil)
			a.MB.SetProfileBody([]byte(tc.body))
			a.SN.SetProfileBody([]byte(tc.body))
			a.GH.SetProfileBody([]byte(tc.body))
			resp := harness.NewBrowser(t).Get(a.URL + "/users/auth/" + tc.p)
			wantFailure(t, resp, http.StatusBadRequest, providers.CodeInvalidResponse)
			if len(a.identities()) != 0 {
				t.Error("hook ran")
			}
		})
	}
}

func TestSocialOversizedCallback(t *testing.T) {
	for _, p := range socialProviders {
		a := newSocialApp(t, nil)
		b := harness.NewBrowser(t)
		cb := mustURL(a.callbackURL(b, p))
		form := cb.Query()
		form.Set("padding", strings.Repeat("x", 100<<10))
		resp := b.PostForm(a.URL+cb.Path, form)
		wantFailure(t, resp, http.StatusBadRequest, providers.CodeInvalidResponse)
		if len(a.identities()) != 0 {
			t.Errorf("%s: hook ran", p)
		}
	}
}

func TestSocialJSONFailure(t *testing.T) {
	a := newSocialApp(t, func(s *socialSetup) { s.autoApprove = false })
	b := harness.NewBrowser(t).NoFollow()
	resp := b.Get(a.URL + "/users/auth/socialnet.json")
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Body, `"redirect_to"`) {
		t.Fatalf("authorize.json: %d %s", resp.StatusCode, resp.Body)
	}
	var out struct {
		RedirectTo string `json:"redirect_to"`
	}
	if err := json.Unmarshal([]byte(resp.Body), &out); err != nil {
		t.Fatal(err)
	}
	state := mustURL(out.RedirectTo).Query().Get("state")
	resp = b.Get(a.URL + "/users/auth/socialnet/callback?error=access_denied&error_reason=user_denied&state=" + url.QueryEscape(state))
	if resp.StatusCode != http.StatusForbidden || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") ||
		!strings.Contains(resp.Body, `"error":"access_denied"`) {
		t.Errorf("callback: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Body)
	}
}

func socialBetween(s, start, end string) string {
	_, after, ok := strings.Cut(s, start)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(after, end)
	return v
}
