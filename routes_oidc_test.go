package extauth_test

import (
	"context"
	"crypto"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/oidcop"
	"github.com/extauth/extauth/internal/harness"
)

const (
	oidcClientID = "oidc-client"
	// The secret needs form-urlencoding in client_secret_basic.
	oidcSecret     = "oidc-secret:+ %/é"
	googleClientID = "1234-abc.apps.googleusercontent.com"
	googleSecret   = "google-secret-7d1f"
)

// opKeys are generated once per test binary: RSA generation is slow.
var opKeys = sync.OnceValue(func() map[string][]crypto.Signer {
	out := map[string][]crypto.Signer{}
	for _, alg := range []string{"RS256", "ES256"} {
		for range 2 {
			k, err := oidcop.GenerateKey(alg)
			if err != nil {
				panic(err)
			}
			out[alg] = append(out[alg], k)
		}
	}
	return out
})

// oidcApp is an application with oidc (and optionally search_oauth2)
// against fake OPs on their own servers.
type oidcApp struct {
	t      *testing.T
	URL    string
	Auth   *extauth.Auth
	OP     *oidcop.OP
	Google *oidcop.OP
	Logs   *lockedLog
	clock  *clock
	signIns
}

// lockedLog collects log records that background work (discovery
// refreshes) writes while the test reads them.
type lockedLog = harness.SyncBuffer

type oidcSetup struct {
	op func(*oidcop.Config)
	// config edits the application's configuration.
	config func(*extauth.Config)
	google func(*oidcop.Config) // non-nil configures search_oauth2 too
	opts   func(*extauth.Options)
	// mux adds the host's own routes beside extauth's.
	mux func(*http.ServeMux, *extauth.Auth)
}

// opServer serves an OP that is built once the app's URL is known.
func opServer(t *testing.T) (*httptest.Server, *atomic.Pointer[oidcop.OP]) {
	var p atomic.Pointer[oidcop.OP]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.Load().ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &p
}

func newOIDCApp(t *testing.T, s oidcSetup) *oidcApp {
	t.Helper()
	a := &oidcApp{t: t, Logs: &lockedLog{}, clock: &clock{t: time.Now()}}
	opSrv, opPtr := opServer(t)
	gSrv, gPtr := opServer(t)
	srv := harness.Serve(t, func(base string) http.Handler {
		oc := oidcop.Config{
			Issuer: opSrv.URL + "/op", ClientID: oidcClientID, ClientSecret: oidcSecret,
			RedirectURIs: []string{base + "/users/auth/oidc/callback"},
			AutoApprove:  true, Keys: opKeys()["RS256"][:1], Now: a.clock.Now,
			// The registration values extauth routes prints.
			PostLogoutRedirectURIs: []string{base + "/users/auth/oidc/post_logout"},
			BackchannelLogoutURI:   base + "/users/auth/oidc/backchannel_logout",
			FrontchannelLogoutURI:  base + "/users/auth/oidc/frontchannel_logout",
		}
		if s.op != nil {
			s.op(&oc)
		}
		op, err := oidcop.New(oc)
		if err != nil {
			t.Fatal(err)
		}
		opPtr.Store(op)
		a.OP = op
		cfg := &extauth.Config{OIDC: extauth.OIDCConfig{
			ClientID: oidcClientID, ClientSecret: extauth.NewSecret(oidcSecret), Issuer: oc.Issuer,
		}}
		if s.config != nil {
			s.config(cfg)
		}
		if s.google != nil {
			gc := oidcop.Config{
				Issuer: gSrv.URL + "/google", ClientID: googleClientID, ClientSecret: googleSecret,
				RedirectURIs: []string{base + "/users/auth/search_oauth2/callback"},
				AutoApprove:  true, Keys: opKeys()["RS256"][1:2], Now: a.clock.Now,
				AuthMethod: "client_secret_post",
			}
			s.google(&gc)
			g, err := oidcop.New(gc)
			if err != nil {
				t.Fatal(err)
			}
			gPtr.Store(g)
			a.Google = g
			cfg.SearchOAuth2 = extauth.OAuthProvider{Key: googleClientID, Secret: extauth.NewSecret(googleSecret), Site: gc.Issuer}
		}
		o := extauth.Options{
			BaseURL:   base,
			CookieKey: testKey,
			Logger:    slog.New(slog.NewTextHandler(a.Logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			Now:       a.clock.Now,
			OnSuccess: a.onSuccess,
		}
		if s.opts != nil {
			s.opts(&o)
		}
		auth, err := extauth.New(cfg, o)
		if err != nil {
			t.Fatal(err)
		}
		a.Auth = auth
		t.Cleanup(func() { auth.Close() })
		mux := http.NewServeMux()
		auth.Mount(mux)
		mux.HandleFunc("/{$}", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "home") })
		if s.mux != nil {
			s.mux(mux, auth)
		}
		return mux
	})
	a.URL = srv.URL
	return a
}

// callbackURL starts a sign-in with a browser that does not follow
// redirects, has the OP answer, and returns where the OP sends the browser.
func (a *oidcApp) callbackURL(b *harness.Browser, provider string) string {
	a.t.Helper()
	resp := b.Get(a.URL + "/users/auth/" + provider)
	if resp.StatusCode != http.StatusFound {
		a.t.Fatalf("authorize: %d %s", resp.StatusCode, resp.Body)
	}
	resp = b.Get(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusFound {
		a.t.Fatalf("OP authorize: %d %s", resp.StatusCode, resp.Body)
	}
	return resp.Header.Get("Location")
}

func TestOIDCSignInThroughRoutes(t *testing.T) {
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		t.Run(method, func(t *testing.T) {
			a := newOIDCApp(t, oidcSetup{})
			b := harness.NewBrowser(t)
			var resp *harness.Response
			if method == http.MethodGet {
				resp = b.Get(a.URL + "/users/auth/oidc")
			} else {
				resp = b.PostForm(a.URL+"/users/auth/oidc", url.Values{"return_to": {"/after"}})
			}
			alice := oidcop.DemoUsers()[0]
			if resp.StatusCode != http.StatusOK || resp.Body != "signed in as "+alice.Sub {
				t.Fatalf("got %d %q", resp.StatusCode, resp.Body)
			}
			if resp.Header.Get("Cache-Control") != "no-store" || resp.Header.Get("Referrer-Policy") != "no-referrer" {
				t.Errorf("callback headers %v", resp.Header)
			}
			got := a.identities()
			if len(got) != 1 {
				t.Fatalf("hook called %d times", len(got))
			}
			id := got[0]
			if id.Provider != "oidc" || id.UID != alice.Sub || id.Email != alice.Email || !id.EmailVerified ||
				id.Name != alice.Name || id.FirstName != alice.GivenName || id.LastName != alice.FamilyName ||
				id.NickName != alice.PreferredUsername || id.Image != alice.Picture {
				t.Errorf("identity = %+v", id)
			}
			if id.Tokens.AccessToken == "" || id.Tokens.IDToken == "" || id.Raw["iss"] != a.OP.Issuer() || id.Raw["at_hash"] == nil {
				t.Errorf("tokens or raw claims missing: %v", id.Raw)
			}
			if len(b.Jar.Cookies(mustURL(a.URL))) != 0 {
				t.Errorf("transaction cookie left behind")
			}
		})
	}
}

// formAction finds the one form of a page, with its hidden fields.
var (
	formRe   = regexp.MustCompile(`<form[^>]*action="([^"]+)"`)
	hiddenRe = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)"`)
)

func submitForm(t *testing.T, b *harness.Browser, page *harness.Response, fields url.Values) *harness.Response {
	t.Helper()
	m := formRe.FindStringSubmatch(page.Body)
	if m == nil {
		t.Fatalf("no form on %s: %s", page.URL, page.Body)
	}
	action, err := page.URL.Parse(strings.ReplaceAll(m[1], "&amp;", "&"))
	if err != nil {
		t.Fatal(err)
	}
	form := url.Values{}
	for _, h := range hiddenRe.FindAllStringSubmatch(page.Body, -1) {
		form.Set(h[1], h[2])
	}
	for k, v := range fields {
		form[k] = v
	}
	return b.PostForm(action.String(), form)
}

func TestOIDCConsentPage(t *testing.T) {
	bob := oidcop.DemoUsers()[1]
	for _, decision := range []string{"approve", "deny"} {
		t.Run(decision, func(t *testing.T) {
			a := newOIDCApp(t, oidcSetup{op: func(c *oidcop.Config) { c.AutoApprove = false }})
			b := harness.NewBrowser(t)
			page := b.Get(a.URL + "/users/auth/oidc")
			if page.StatusCode != http.StatusOK || !strings.Contains(page.Body, "Approve") {
				t.Fatalf("consent page: %d %s", page.StatusCode, page.Body)
			}
			resp := submitForm(t, b, page, url.Values{"user": {bob.Sub}, "decision": {decision}})
			if decision == "deny" {
				wantCode(t, resp, http.StatusForbidden, "access_denied")
				if n := a.OP.Hits(oidcop.Token); n != 0 {
					t.Errorf("token endpoint called %d times after a denial", n)
				}
				return
			}
			if resp.Body != "signed in as "+bob.Sub {
				t.Fatalf("got %d %q", resp.StatusCode, resp.Body)
			}
			// Bob's provider does not vouch for his address.
			if id := a.identities()[0]; id.Email != bob.Email || id.EmailVerified {
				t.Errorf("email %q verified=%v", id.Email, id.EmailVerified)
			}
		})
	}
}

// TestOIDCIDTokenRow plays each bad ID token of SECURITY.md through the
// callback route: each fails closed with invalid_response and the hook
// never runs.
func TestOIDCIDTokenRow(t *testing.T) {
	twoKeys := func(c *oidcop.Config) { c.Keys = opKeys()["RS256"] }
	for _, tc := range []struct {
		fault oidcop.Fault
		setup func(*oidcop.Config)
		why   string
	}{
		{oidcop.BadSignature, nil, "signature"},
		{oidcop.AlgNone, nil, `algorithm \"none\"`},
		{oidcop.HS256PublicKey, nil, `algorithm \"HS256\"`},
		{oidcop.WrongIssuer, nil, "different provider"},
		{oidcop.WrongAudience, nil, "audience"},
		{oidcop.ExtraAudience, nil, "not trusted"},
		{oidcop.MissingSub, nil, "no subject"},
		{oidcop.MissingIAT, nil, "no issue time"},
		{oidcop.BadNonce, nil, "nonce"},
		{oidcop.BadAtHash, nil, "at_hash"},
		{oidcop.NoKid, twoKeys, "names no key"},
		{oidcop.Expired, nil, "expired"},
		{oidcop.UserInfoSubMismatch, nil, "userinfo sub"},
	} {
		t.Run(string(tc.fault), func(t *testing.T) {
			a := newOIDCApp(t, oidcSetup{op: tc.setup})
			a.OP.SetFaults(tc.fault)
			resp := harness.NewBrowser(t).Get(a.URL + "/users/auth/oidc")
			wantCode(t, resp, http.StatusBadRequest, "invalid_response")
			if n := len(a.identities()); n != 0 {
				t.Fatalf("hook called %d times", n)
			}
			if !strings.Contains(a.Logs.String(), tc.why) {
				t.Errorf("the log does not say why (%q):\n%s", tc.why, a.Logs)
			}
		})
	}
}

func TestOIDCUnknownKidRefetchesOnce(t *testing.T) {
	a := newOIDCApp(t, oidcSetup{})
	b := harness.NewBrowser(t)
	for range 3 {
		if resp := b.Get(a.URL + "/users/auth/oidc"); resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s", resp.StatusCode, resp.Body)
		}
	}
	if _, err := a.OP.AddKey(opKeys()["RS256"][1]); err != nil {
		t.Fatal(err)
	}
	// Past the key refresh interval, within the discovery's lifetime.
	a.clock.Add(time.Minute)
	for range 10 {
		if resp := b.Get(a.URL + "/users/auth/oidc"); resp.StatusCode != http.StatusOK {
			t.Fatalf("after rotation: %d %s", resp.StatusCode, resp.Body)
		}
	}
	if n := a.OP.Hits(oidcop.JWKS); n != 2 {
		t.Errorf("%d key fetches for 13 sign-ins around one rotation, want 2", n)
	}
	if n := a.OP.Hits(oidcop.Discovery); n != 1 {
		t.Errorf("%d discovery fetches", n)
	}
}

// eventually retries f until it reports true, for what happens in the
// background, and fails the test after a minute.
func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !f(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never happened: %s", what)
		}
	}
}

// TestOIDCDiscoveryRefreshFollowsRotation moves the provider's token
// endpoint and key set, and signs with a key published only at the new
// one: sign-ins fail while the held discovery copy is fresh, and follow
// once its lifetime (the OP's max-age=3600) has passed.
func TestOIDCDiscoveryRefreshFollowsRotation(t *testing.T) {
	a := newOIDCApp(t, oidcSetup{})
	b := harness.NewBrowser(t)
	if resp := b.Get(a.URL + "/users/auth/oidc"); resp.StatusCode != http.StatusOK {
		t.Fatalf("first sign-in: %d %s", resp.StatusCode, resp.Body)
	}
	a.OP.RotateEndpoints()
	if _, err := a.OP.AddKey(opKeys()["RS256"][1]); err != nil {
		t.Fatal(err)
	}
	a.clock.Add(59 * time.Minute)
	wantCode(t, b.Get(a.URL+"/users/auth/oidc"), http.StatusBadRequest, "invalid_response")
	a.clock.Add(time.Minute)
	// The first sign-in past the lifetime starts the refresh and is
	// served the held copy meanwhile.
	eventually(t, "a sign-in through the moved endpoints", func() bool {
		return b.Get(a.URL+"/users/auth/oidc").StatusCode == http.StatusOK
	})
	if n := a.OP.Hits(oidcop.Discovery); n != 2 {
		t.Errorf("%d discovery fetches, want 2", n)
	}
	if n := a.OP.Hits(oidcop.JWKS); n != 2 {
		t.Errorf("%d key set fetches, want one at each jwks_uri", n)
	}
	if !strings.Contains(a.Logs.String(), "endpoints changed") {
		t.Errorf("the log does not say the endpoints moved:\n%s", a.Logs)
	}
}

// TestOIDCDiscoveryRefreshKeepsLastGoodCopy: a refresh that fails leaves
// sign-ins on the last good copy, is retried after the back-off, not on
// every sign-in, and a later one succeeds.
func TestOIDCDiscoveryRefreshKeepsLastGoodCopy(t *testing.T) {
	a := newOIDCApp(t, oidcSetup{})
	b := harness.NewBrowser(t)
	signIn := func() {
		t.Helper()
		if resp := b.Get(a.URL + "/users/auth/oidc"); resp.StatusCode != http.StatusOK {
			t.Fatalf("sign-in: %d %s\n%s", resp.StatusCode, resp.Body, a.Logs)
		}
	}
	signIn()
	a.OP.SetFaults(oidcop.DiscoveryDown)
	a.clock.Add(2 * time.Hour)
	signIn()
	eventually(t, "a failed refresh", func() bool { return strings.Contains(a.Logs.String(), "keeping the last good copy") })
	for range 5 {
		signIn()
	}
	if n := a.OP.Hits(oidcop.Discovery); n != 2 {
		t.Errorf("%d discovery fetches within the back-off, want 2", n)
	}
	a.OP.SetFaults()
	a.clock.Add(2 * time.Second)
	signIn()
	eventually(t, "a refresh after the back-off", func() bool {
		return strings.Contains(a.Logs.String(), "OpenID Connect discovery refreshed")
	})
	signIn()
	if n := a.OP.Hits(oidcop.Discovery); n != 3 {
		t.Errorf("%d discovery fetches once fresh again, want 3", n)
	}
}

func TestOIDCMixUpDefence(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault oidcop.Fault
		noIss bool
		ok    bool
	}{
		{"wrong iss", oidcop.IssParamWrong, false, false},
		{"missing iss although advertised", oidcop.IssParamMissing, false, false},
		{"no iss from a provider that does not advertise it", "", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newOIDCApp(t, oidcSetup{op: func(c *oidcop.Config) { c.NoIssParameter = tc.noIss }})
			a.OP.SetFaults(tc.fault)
			b := harness.NewBrowser(t).NoFollow()
			cb := a.callbackURL(b, "oidc")
			resp := b.Get(cb)
			if tc.ok {
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%d %s", resp.StatusCode, resp.Body)
				}
				return
			}
			wantCode(t, resp, http.StatusBadRequest, "invalid_response")
			if n := a.OP.Hits(oidcop.Token); n != 0 {
				t.Errorf("the code went to the token endpoint (%d calls)", n)
			}
		})
	}
}

func TestOIDCStateThroughRoutes(t *testing.T) {
	t.Run("no cookie", func(t *testing.T) {
		a := newOIDCApp(t, oidcSetup{})
		cb := a.callbackURL(harness.NewBrowser(t).NoFollow(), "oidc")
		wantCode(t, harness.NewBrowser(t).Get(cb), http.StatusBadRequest, "invalid_state")
		if n := a.OP.Hits(oidcop.Token); n != 0 {
			t.Errorf("token endpoint called %d times", n)
		}
	})
	t.Run("wrong state", func(t *testing.T) {
		a := newOIDCApp(t, oidcSetup{})
		b := harness.NewBrowser(t).NoFollow()
		cb, _ := url.Parse(a.callbackURL(b, "oidc"))
		q := cb.Query()
		q.Set("state", q.Get("state")+"x")
		cb.RawQuery = q.Encode()
		wantCode(t, b.Get(cb.String()), http.StatusBadRequest, "invalid_state")
		if n := a.OP.Hits(oidcop.Token); n != 0 {
			t.Errorf("token endpoint called %d times", n)
		}
	})
	t.Run("replayed", func(t *testing.T) {
		a := newOIDCApp(t, oidcSetup{})
		b := harness.NewBrowser(t).NoFollow()
		cb := a.callbackURL(b, "oidc")
		cookies := b.Jar.Cookies(mustURL(a.URL))
		if resp := b.Get(cb); resp.StatusCode != http.StatusOK {
			t.Fatalf("first callback: %d %s", resp.StatusCode, resp.Body)
		}
		b.Jar.SetCookies(mustURL(a.URL), cookies)
		wantCode(t, b.Get(cb), http.StatusBadRequest, "invalid_state")
		if n := a.OP.Hits(oidcop.Token); n != 1 {
			t.Errorf("token endpoint called %d times", n)
		}
	})
	t.Run("state from the authorize request is ignored", func(t *testing.T) {
		a := newOIDCApp(t, oidcSetup{})
		b := harness.NewBrowser(t).NoFollow()
		resp := b.Get(a.URL + "/users/auth/oidc?state=attacker&nonce=attacker&code_challenge=attacker")
		u, _ := url.Parse(resp.Header.Get("Location"))
		q := u.Query()
		if q.Get("state") == "attacker" || q.Get("nonce") == "attacker" || q.Get("code_challenge") == "attacker" || len(q.Get("state")) < 22 {
			t.Errorf("authorize URL took values from the request: %v", q)
		}
	})
	t.Run("state of another provider", func(t *testing.T) {
		a := newOIDCApp(t, oidcSetup{google: func(*oidcop.Config) {}})
		b := harness.NewBrowser(t).NoFollow()
		gcb, _ := url.Parse(a.callbackURL(b, "search_oauth2"))
		// Replay Google's answer (state and code) on the oidc callback.
		wantCode(t, b.Get(a.URL+"/users/auth/oidc/callback?"+gcb.RawQuery), http.StatusBadRequest, "invalid_state")
		if n := a.OP.Hits(oidcop.Token) + a.Google.Hits(oidcop.Token); n != 0 {
			t.Errorf("token endpoints called %d times", n)
		}
	})
}

func TestOIDCPKCEVerifierFromCookieOnly(t *testing.T) {
	a := newOIDCApp(t, oidcSetup{})
	b := harness.NewBrowser(t).NoFollow()
	resp := b.Get(a.URL + "/users/auth/oidc")
	auth, _ := url.Parse(resp.Header.Get("Location"))
	if q := auth.Query(); q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) != 43 {
		t.Fatalf("authorize URL without an S256 challenge: %v", q)
	}
	resp = b.Get(auth.String())
	// The OP checks b64url(sha256(verifier)) == challenge at the token
	// endpoint; a verifier taken from the request would fail it.
	resp = b.Get(resp.Header.Get("Location") + "&code_verifier=" + strings.Repeat("a", 43))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, resp.Body)
	}
}

func TestOIDCRedirectURIFromConfiguration(t *testing.T) {
	a := newOIDCApp(t, oidcSetup{})
	b := harness.NewBrowser(t).NoFollow()
	req, _ := http.NewRequest(http.MethodGet, a.URL+"/users/auth/oidc?redirect_uri=https://evil.example/cb", nil)
	req.Host = "evil.example"
	req.Header.Set("X-Forwarded-Host", "evil.example")
	resp := b.Do(req)
	u, _ := url.Parse(resp.Header.Get("Location"))
	if got := u.Query().Get("redirect_uri"); got != a.URL+"/users/auth/oidc/callback" {
		t.Errorf("redirect_uri = %q", got)
	}
}

func TestOIDCLoginCSRF(t *testing.T) {
	a := newOIDCApp(t, oidcSetup{})
	b := harness.NewBrowser(t).NoFollow()
	b.Header.Set("Sec-Fetch-Site", "cross-site")
	wantCode(t, b.Get(a.URL+"/users/auth/oidc"), http.StatusForbidden, "csrf_detected")
	if n := a.OP.Hits(oidcop.Discovery); n != 0 {
		t.Errorf("a refused start reached the provider (%d discovery fetches)", n)
	}
}

func TestOIDCProviderDownAtStart(t *testing.T) {
	a := newOIDCApp(t, oidcSetup{opts: func(o *extauth.Options) {
		o.OIDC.DiscoveryRetryMin = 5 * time.Second
	}})
	a.OP.SetFaults(oidcop.DiscoveryDown)
	b := harness.NewBrowser(t)
	for range 10 {
		resp := b.Get(a.URL + "/users/auth/oidc.json")
		wantCode(t, resp, http.StatusServiceUnavailable, `"error":"provider_unavailable"`)
	}
	if n := a.OP.Hits(oidcop.Discovery); n != 1 {
		t.Errorf("%d discovery fetches for 10 sign-ins while down, want 1", n)
	}
	a.OP.SetFaults()
	a.clock.Add(5 * time.Second)
	if resp := b.Get(a.URL + "/users/auth/oidc"); resp.StatusCode != http.StatusOK {
		t.Fatalf("once the provider is back: %d %s", resp.StatusCode, resp.Body)
	}
	assertNoRepeatedAttributes(t, a.Logs.String())
}

// assertNoRepeatedAttributes fails on a slog text line that names one
// attribute twice ("provider=oidc provider=oidc"): a logger that already
// carries an attribute must not be given it again.
func assertNoRepeatedAttributes(t *testing.T, logs string) {
	t.Helper()
	attr := regexp.MustCompile(`(?:^| )([a-z_]+)=`)
	for _, line := range strings.Split(logs, "\n") {
		seen := map[string]bool{}
		for _, m := range attr.FindAllStringSubmatch(line, -1) {
			if seen[m[1]] {
				t.Errorf("%s twice in: %s", m[1], line)
			}
			seen[m[1]] = true
		}
	}
}

func TestOIDCTokenEndpointFailures(t *testing.T) {
	for _, tc := range []struct {
		fault  oidcop.Fault
		status int
		code   string
	}{
		{oidcop.TokenServerError, http.StatusServiceUnavailable, "provider_unavailable"},
		{oidcop.TokenHugeBody, http.StatusBadRequest, "invalid_response"},
		{oidcop.TokenHang, http.StatusGatewayTimeout, "timeout"},
	} {
		t.Run(string(tc.fault), func(t *testing.T) {
			a := newOIDCApp(t, oidcSetup{opts: func(o *extauth.Options) {
				o.Timeout = slowTimeout
				if tc.fault == oidcop.TokenHang {
					o.Timeout = hangTimeout
				}
			}})
			a.OP.SetFaults(tc.fault)
			start := time.Now()
			wantCode(t, harness.NewBrowser(t).Get(a.URL+"/users/auth/oidc"), tc.status, tc.code)
			if d := time.Since(start); d > hangBound {
				t.Errorf("took %s", d)
			}
		})
	}
}

// TestOIDCTokenEndpointRefusalDiagnosed: when the token endpoint refuses
// a grant, the log names the step and what the provider answered, its
// error and its error_description, bounded and with what it echoed of
// the request (the code, the refresh token) and its line break taken
// out; the user's page shows extauth's fixed message, never the
// provider's words.
func TestOIDCTokenEndpointRefusalDiagnosed(t *testing.T) {
	a := newOIDCApp(t, oidcSetup{config: func(c *extauth.Config) {
		c.OIDC.Additional.Scope = "openid email profile offline_access"
	}})
	b := harness.NewBrowser(t).NoFollow()
	if resp := b.Get(a.callbackURL(b, "oidc")); resp.StatusCode != http.StatusOK {
		t.Fatalf("sign-in: %d %s", resp.StatusCode, resp.Body)
	}
	id := a.identities()[0]
	a.OP.SetFaults(oidcop.TokenRefused)

	b = harness.NewBrowser(t).NoFollow()
	cb := a.callbackURL(b, "oidc")
	code := mustURL(cb).Query().Get("code")
	page := b.Get(cb)
	wantCode(t, page, http.StatusBadRequest, "invalid_response")
	if !strings.Contains(page.Body, "the provider refused the authorization code") || strings.Contains(page.Body, "Invalid grant") {
		t.Errorf("the page does not say what the step was, or quotes the provider:\n%s", page.Body)
	}
	want := `err="token request (authorization code): HTTP 400 error=\"invalid_request\" error_description=\"Invalid grant [redacted]:?see the provider's log\""`
	if logs := a.Logs.String(); !strings.Contains(logs, want) || strings.Contains(logs, code) {
		t.Errorf("the log does not say what the provider answered (or holds the code):\n%s\nwant %s", logs, want)
	}

	stale := *id
	stale.Tokens.Expiry = time.Now().Add(-time.Hour)
	ts, err := a.Auth.TokenSource(context.Background(), &stale)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ts.Token()
	want = `token request (refresh): HTTP 400 error="invalid_request" error_description="Invalid grant [redacted]:?see the provider's log"`
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), id.Tokens.RefreshToken) {
		t.Errorf("refresh: %v, want %s", err, want)
	}
}

func TestOIDCWrongClientSecret(t *testing.T) {
	a := newOIDCApp(t, oidcSetup{op: func(c *oidcop.Config) { c.ClientSecret = "another" }})
	wantCode(t, harness.NewBrowser(t).Get(a.URL+"/users/auth/oidc"), http.StatusBadGateway, "invalid_credentials")
}

func TestOIDCNothingSecretLogged(t *testing.T) {
	a := newOIDCApp(t, oidcSetup{})
	b := harness.NewBrowser(t).NoFollow()
	cb := a.callbackURL(b, "oidc")
	if resp := b.Get(cb); resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, resp.Body)
	}
	// A failing one too: failures log their causes.
	a.OP.SetFaults(oidcop.BadNonce)
	b2 := harness.NewBrowser(t).NoFollow()
	cb2 := a.callbackURL(b2, "oidc")
	wantCode(t, b2.Get(cb2), http.StatusBadRequest, "invalid_response")
	id := a.identities()[0]
	secrets := []string{oidcSecret, url.QueryEscape(oidcSecret), id.Tokens.AccessToken, id.Tokens.IDToken}
	for _, u := range []string{cb, cb2} {
		q := mustURL(u).Query()
		secrets = append(secrets, q.Get("code"), q.Get("state"))
	}
	logs := a.Logs.String()
	for _, s := range secrets {
		if s == "" || strings.Contains(logs, s) {
			t.Errorf("log contains a secret (or it is empty) %q:\n%s", s, logs)
		}
	}
	if !strings.Contains(logs, "nonce") {
		t.Errorf("the failure is not logged:\n%s", logs)
	}
}

// TestOIDCEmailVerifiedHonestAcrossProviders signs the same address in
// through two providers: the hook sees each provider's own verdict.
func TestOIDCEmailVerifiedHonestAcrossProviders(t *testing.T) {
	shared := "pat@example.org"
	a := newOIDCApp(t, oidcSetup{
		op: func(c *oidcop.Config) {
			c.Users = []oidcop.User{{Sub: "op-1", Email: shared, EmailVerified: true, Name: "Pat"}}
		},
		google: func(c *oidcop.Config) {
			c.Users = []oidcop.User{{Sub: "g-1", Email: shared, EmailVerified: false, Name: "Pat"}}
		},
	})
	b := harness.NewBrowser(t)
	for _, p := range []string{"oidc", "search_oauth2"} {
		if resp := b.Get(a.URL + "/users/auth/" + p); resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", p, resp.StatusCode, resp.Body)
		}
	}
	got := a.identities()
	if got[0].Provider != "oidc" || got[0].UID != "op-1" || got[0].Email != shared || !got[0].EmailVerified {
		t.Errorf("oidc identity %+v", got[0])
	}
	if got[1].Provider != "search_oauth2" || got[1].UID != "g-1" || got[1].Email != shared || got[1].EmailVerified {
		t.Errorf("search_oauth2 identity %+v", got[1])
	}
}

func TestSearchOAuth2ThroughRoutes(t *testing.T) {
	workspace := oidcop.User{Sub: "g-42", Email: "ada@corp.example", EmailVerified: true, Name: "Ada", HostedDomain: "corp.example"}
	consumer := oidcop.User{Sub: "g-43", Email: "ada@gmail.example", EmailVerified: true, Name: "Ada"}
	setup := func(u oidcop.User) oidcSetup {
		return oidcSetup{
			google: func(c *oidcop.Config) { c.Users = []oidcop.User{u} },
			opts: func(o *extauth.Options) {
				o.SearchOAuth2.HostedDomain = "corp.example"
				o.SearchOAuth2.AccessType = "offline"
				o.SearchOAuth2.Prompt = "consent"
			},
		}
	}
	t.Run("workspace account", func(t *testing.T) {
		a := newOIDCApp(t, setup(workspace))
		resp := harness.NewBrowser(t).Get(a.URL + "/users/auth/search_oauth2")
		if resp.StatusCode != http.StatusOK || resp.Body != "signed in as g-42" {
			t.Fatalf("%d %s", resp.StatusCode, resp.Body)
		}
		q := a.Google.LastAuthorizeQuery()
		for k, v := range map[string]string{"hd": "corp.example", "access_type": "offline", "prompt": "consent", "code_challenge_method": "S256"} {
			if q.Get(k) != v {
				t.Errorf("authorize %s = %q, want %q", k, q.Get(k), v)
			}
		}
		if q.Get("nonce") == "" {
			t.Error("no nonce sent")
		}
		id := a.identities()[0]
		if id.Provider != "search_oauth2" || !id.EmailVerified || id.Raw["hd"] != "corp.example" || id.Tokens.RefreshToken == "" {
			t.Errorf("identity %+v", id)
		}
	})
	t.Run("account outside the hosted domain", func(t *testing.T) {
		a := newOIDCApp(t, setup(consumer))
		wantCode(t, harness.NewBrowser(t).Get(a.URL+"/users/auth/search_oauth2"), http.StatusForbidden, "access_denied")
		if n := len(a.identities()); n != 0 {
			t.Errorf("hook called %d times", n)
		}
	})
	t.Run("bad ID token", func(t *testing.T) {
		a := newOIDCApp(t, setup(workspace))
		a.Google.SetFaults(oidcop.BadSignature)
		wantCode(t, harness.NewBrowser(t).Get(a.URL+"/users/auth/search_oauth2"), http.StatusBadRequest, "invalid_response")
	})
}

func TestOIDCNoOpenRedirect(t *testing.T) {
	a := newOIDCApp(t, oidcSetup{})
	cases := map[string]string{
		"/settings?tab=1":       "/settings?tab=1",
		"//evil.example":        "/",
		"/\\evil.example":       "/",
		"/%2F%2Fevil":           "/",
		"https://evil.example/": "/",
		"javascript:alert(1)":   "/",
	}
	var order []string
	for in := range cases {
		order = append(order, in)
		b := harness.NewBrowser(t)
		if resp := b.PostForm(a.URL+"/users/auth/oidc", url.Values{"return_to": {in}}); resp.StatusCode != http.StatusOK {
			t.Fatalf("%q: %d %s", in, resp.StatusCode, resp.Body)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, in := range order {
		if a.Ret[i] != cases[in] {
			t.Errorf("return_to %q -> %q, want %q", in, a.Ret[i], cases[in])
		}
	}
}

// handlerTransport serves outbound requests with a handler in-process: no
// sockets, so thousands of sign-ins stay fast and the counts exact.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := r.Context().Err(); err != nil {
		return nil, err
	}
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}

const inprocBase = "https://app.example"

// inprocApp is the application and a fake OP wired in-process, driven with
// recorded requests instead of a browser.
type inprocApp struct {
	mux     *http.ServeMux
	op      *oidcop.OP
	signIns atomic.Int64
}

func newInprocApp(tb testing.TB) *inprocApp {
	tb.Helper()
	op, err := oidcop.New(oidcop.Config{
		Issuer: "https://op.example/op", ClientID: oidcClientID, ClientSecret: oidcSecret,
		RedirectURIs: []string{inprocBase + "/users/auth/oidc/callback"},
		AutoApprove:  true, Alg: "ES256", Keys: opKeys()["ES256"][:1],
	})
	if err != nil {
		tb.Fatal(err)
	}
	p := &inprocApp{mux: http.NewServeMux(), op: op}
	auth, err := extauth.New(&extauth.Config{OIDC: extauth.OIDCConfig{
		ClientID: oidcClientID, ClientSecret: extauth.NewSecret(oidcSecret), Issuer: op.Issuer(),
	}}, extauth.Options{
		BaseURL:    inprocBase,
		CookieKey:  testKey,
		HTTPClient: &http.Client{Transport: handlerTransport{op}},
		Logger:     slog.New(slog.DiscardHandler),
		OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
			p.signIns.Add(1)
			w.WriteHeader(http.StatusNoContent)
		},
	})
	if err != nil {
		tb.Fatal(err)
	}
	auth.Mount(p.mux)
	return p
}

// pendingCallback is a callback request ready to be sent: what the OP
// redirected to, with the transaction cookie.
type pendingCallback struct {
	url     string
	cookies []*http.Cookie
}

// begin runs the authorize route and the OP's authorization endpoint.
func (p *inprocApp) begin() (pendingCallback, error) {
	rec := httptest.NewRecorder()
	p.mux.ServeHTTP(rec, newRequest(http.MethodGet, inprocBase+"/users/auth/oidc", nil))
	if rec.Code != http.StatusFound {
		return pendingCallback{}, errors.New("authorize: " + rec.Result().Status + " " + rec.Body.String())
	}
	cookies := rec.Result().Cookies()
	opRec := httptest.NewRecorder()
	p.op.ServeHTTP(opRec, httptest.NewRequest(http.MethodGet, rec.Header().Get("Location"), nil))
	if opRec.Code != http.StatusFound {
		return pendingCallback{}, errors.New("OP authorize: " + opRec.Result().Status)
	}
	return pendingCallback{url: opRec.Header().Get("Location"), cookies: cookies}, nil
}

// finish runs the callback route.
func (p *inprocApp) finish(c pendingCallback) error {
	req := httptest.NewRequest(http.MethodGet, c.url, nil)
	for _, ck := range c.cookies {
		req.AddCookie(ck)
	}
	rec := httptest.NewRecorder()
	p.mux.ServeHTTP(rec, req)
	if rec.Code != http.StatusNoContent {
		return errors.New("callback: " + rec.Result().Status + " " + rec.Body.String())
	}
	return nil
}

// TestOIDC10000SignInsOneDiscoveryOneKeyFetch runs 10 000 sign-ins through
// the routes, the first ones concurrently: discovery and the key set are
// each fetched exactly once.
func TestOIDC10000SignInsOneDiscoveryOneKeyFetch(t *testing.T) {
	p := newInprocApp(t)
	const total, workers = 10000, 8
	var wg sync.WaitGroup
	var failed atomic.Int64
	var firstErr sync.Once
	start := make(chan struct{})
	for w := range workers {
		wg.Go(func() {
			<-start
			for range total / workers {
				c, err := p.begin()
				if err == nil {
					err = p.finish(c)
				}
				if err != nil {
					failed.Add(1)
					firstErr.Do(func() { t.Errorf("worker %d: %v", w, err) })
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if n := p.signIns.Load(); n != total || failed.Load() != 0 {
		t.Fatalf("%d sign-ins succeeded, %d failed", n, failed.Load())
	}
	if n := p.op.Hits(oidcop.Discovery); n != 1 {
		t.Errorf("%d discovery fetches, want 1", n)
	}
	if n := p.op.Hits(oidcop.JWKS); n != 1 {
		t.Errorf("%d key set fetches, want 1", n)
	}
	if n := p.op.Hits(oidcop.Token); n != total {
		t.Errorf("%d token requests, want %d", n, total)
	}
}

// A discovery document that moved (here a redirect to the same path with a
// query, as a trailing-slash fix or a CDN does) is followed, and sign-in
// works; one that moves to another scheme is not.
func TestOIDCDiscoveryFollowsRedirect(t *testing.T) {
	for _, tt := range []struct {
		name, to string
		ok       bool
	}{{"moved", "/op/.well-known/openid-configuration?moved=1", true}, {"to another scheme", "ftp://127.0.0.1/discovery", false}} {
		t.Run(tt.name, func(t *testing.T) {
			var op atomic.Pointer[oidcop.OP]
			var redirected atomic.Int64
			front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasSuffix(r.URL.Path, "/.well-known/openid-configuration") && r.URL.RawQuery == "" {
					redirected.Add(1)
					http.Redirect(w, r, tt.to, http.StatusMovedPermanently)
					return
				}
				op.Load().ServeHTTP(w, r)
			}))
			t.Cleanup(front.Close)
			var hooked atomic.Int64
			srv := harness.Serve(t, func(base string) http.Handler {
				o, err := oidcop.New(oidcop.Config{Issuer: front.URL + "/op", ClientID: oidcClientID, ClientSecret: oidcSecret,
					RedirectURIs: []string{base + "/users/auth/oidc/callback"}, AutoApprove: true, Keys: opKeys()["RS256"][:1]})
				if err != nil {
					t.Fatal(err)
				}
				op.Store(o)
				a, err := extauth.New(&extauth.Config{OIDC: extauth.OIDCConfig{ClientID: oidcClientID, ClientSecret: extauth.NewSecret(oidcSecret), Issuer: o.Issuer()}},
					extauth.Options{BaseURL: base, CookieKey: testKey, Logger: slog.New(slog.DiscardHandler),
						OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) { hooked.Add(1) }})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { a.Close() })
				mux := http.NewServeMux()
				a.Mount(mux)
				return mux
			})
			resp := harness.NewBrowser(t).PostForm(srv.URL+"/users/auth/oidc.json", nil)
			if redirected.Load() == 0 {
				t.Fatal("discovery was never redirected: the test proves nothing")
			}
			if got := resp.StatusCode == http.StatusOK; got != tt.ok {
				t.Fatalf("authorize after a redirected discovery: %d %s", resp.StatusCode, resp.Body)
			}
			if tt.ok {
				if r := harness.NewBrowser(t).PostForm(srv.URL+"/users/auth/oidc", nil); r.StatusCode != http.StatusOK || hooked.Load() != 1 {
					t.Fatalf("sign-in: %d %s", r.StatusCode, r.Body)
				}
			}
		})
	}
}
