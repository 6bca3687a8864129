package providers_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/extauth/extauth/extauthtest/oidcop"
	"github.com/extauth/extauth/providers"
)

const (
	testClientID     = "extauth-test-client"
	testClientSecret = "s3cret:with+odd/chars&more=%"
	testCallback     = "https://app.example/users/auth/oidc/callback"
)

// Keys are generated once per test binary: RSA generation is slow.
var testKeys = sync.OnceValue(func() map[string][]crypto.Signer {
	out := map[string][]crypto.Signer{}
	for _, alg := range []string{"RS256", "ES256"} {
		for range 3 {
			k, err := oidcop.GenerateKey(alg)
			if err != nil {
				panic(err)
			}
			out[alg] = append(out[alg], k)
		}
	}
	return out
})

type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *testClock { return &testClock{t: time.Now()} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// handlerTransport serves requests with a handler in-process, no sockets.
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

type fixture struct {
	t      *testing.T
	op     *oidcop.OP
	issuer string
	s      *providers.OIDC
	clock  *testClock
	// browser talks to the OP without following redirects.
	browser *http.Client
}

type fixtureConfig struct {
	op      func(*oidcop.Config)
	opts    providers.OIDCOptions
	issuer  func(string) string // what the client is configured with
	newStrt func(issuer string, env providers.Env) (*providers.OIDC, error)
}

// newFixture starts a fake OP in-process and an oidc strategy against it.
func newFixture(t *testing.T, fc fixtureConfig) *fixture {
	t.Helper()
	clock := newClock()
	const issuer = "https://op.test/tenant"
	cfg := oidcop.Config{
		Issuer:       issuer,
		ClientID:     testClientID,
		ClientSecret: testClientSecret,
		RedirectURIs: []string{testCallback},
		AutoApprove:  true,
		Keys:         testKeys()["RS256"][:1],
		Now:          clock.Now,
	}
	if fc.op != nil {
		fc.op(&cfg)
	}
	op, err := oidcop.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: handlerTransport{op}, Timeout: slowTimeout}
	env := providers.Env{CallbackURL: testCallback, HTTPClient: client, Now: clock.Now}
	configured := issuer
	if fc.issuer != nil {
		configured = fc.issuer(issuer)
	}
	var s *providers.OIDC
	if fc.newStrt != nil {
		s, err = fc.newStrt(configured, env)
	} else {
		s, err = providers.NewOIDC(providers.OIDCConfig{
			ClientID: testClientID, ClientSecret: testClientSecret, Issuer: configured, Options: fc.opts,
		}, env)
	}
	if err != nil {
		t.Fatal(err)
	}
	browser := &http.Client{
		Transport:     handlerTransport{op},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &fixture{t: t, op: op, issuer: issuer, s: s, clock: clock, browser: browser}
}

func random(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func newOIDCTx() *providers.Transaction {
	return &providers.Transaction{ID: random(16), Provider: "oidc", State: random(32), Verifier: random(32), Nonce: random(16)}
}

// authorize runs Begin and has the OP answer; it returns the callback
// request the OP sends the browser to.
func (f *fixture) authorize(tx *providers.Transaction) (*http.Request, error) {
	f.t.Helper()
	u, err := f.s.Begin(context.Background(), tx)
	if err != nil {
		return nil, err
	}
	resp, err := f.browser.Get(u)
	if err != nil {
		f.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		f.t.Fatalf("OP authorize answered %d", resp.StatusCode)
	}
	return httptest.NewRequest(http.MethodGet, resp.Header.Get("Location"), nil), nil
}

// signIn runs a whole sign-in at the strategy level.
func (f *fixture) signIn() (*providers.Identity, error) {
	f.t.Helper()
	tx := newOIDCTx()
	cb, err := f.authorize(tx)
	if err != nil {
		return nil, err
	}
	if got := f.s.Binding(cb); got != tx.State {
		f.t.Fatalf("Binding = %q, want the state", got)
	}
	return f.s.Complete(context.Background(), cb, tx)
}

func TestOIDCSignInIdentity(t *testing.T) {
	f := newFixture(t, fixtureConfig{})
	id, err := f.signIn()
	if err != nil {
		t.Fatal(err)
	}
	alice := oidcop.DemoUsers()[0]
	if id.Provider != "oidc" || id.UID != alice.Sub || id.Email != alice.Email || !id.EmailVerified ||
		id.Name != alice.Name || id.FirstName != alice.GivenName || id.LastName != alice.FamilyName ||
		id.NickName != alice.PreferredUsername || id.Image != alice.Picture {
		t.Errorf("identity = %+v", id)
	}
	if id.Tokens.AccessToken == "" || id.Tokens.IDToken == "" || id.Tokens.TokenType != "Bearer" || id.Tokens.Expiry.IsZero() {
		t.Errorf("tokens = %#v", id.Tokens.AccessToken != "")
	}
	for _, k := range []string{"iss", "sub", "aud", "exp", "iat", "nonce", "at_hash", "email", "email_verified", "picture"} {
		if _, ok := id.Raw[k]; !ok {
			t.Errorf("Raw lacks claim %q: %v", k, id.Raw)
		}
	}
	if id.Raw["iss"] != f.issuer {
		t.Errorf("Raw iss = %v", id.Raw["iss"])
	}
	// The ID token has everything, so UserInfo is not asked.
	if n := f.op.Hits(oidcop.UserInfo); n != 0 {
		t.Errorf("UserInfo asked %d times", n)
	}
}

func TestOIDCAuthorizeRequest(t *testing.T) {
	f := newFixture(t, fixtureConfig{opts: providers.OIDCOptions{
		Prompt:     "login",
		AuthParams: map[string]string{"ui_locales": "fr"},
	}})
	tx := newOIDCTx()
	u, err := f.s.Begin(context.Background(), tx)
	if err != nil {
		t.Fatal(err)
	}
	pu, _ := url.Parse(u)
	q := pu.Query()
	sum := sha256.Sum256([]byte(tx.Verifier))
	want := map[string]string{
		"response_type":         "code",
		"client_id":             testClientID,
		"redirect_uri":          testCallback,
		"scope":                 "openid email profile",
		"state":                 tx.State,
		"nonce":                 tx.Nonce,
		"code_challenge":        base64.RawURLEncoding.EncodeToString(sum[:]),
		"code_challenge_method": "S256",
		"prompt":                "login",
		"ui_locales":            "fr",
	}
	for k, v := range want {
		if q.Get(k) != v {
			t.Errorf("%s = %q, want %q", k, q.Get(k), v)
		}
	}
	if q.Has("code_verifier") || strings.Contains(u, tx.Verifier) {
		t.Error("the authorization URL carries the PKCE verifier")
	}
	if pu.Scheme+"://"+pu.Host+pu.Path != f.issuer+"/authorize" {
		t.Errorf("authorization endpoint %s", pu)
	}
}

func TestOIDCReservedAuthParams(t *testing.T) {
	for _, k := range []string{"state", "nonce", "redirect_uri", "code_challenge", "response_mode", "scope"} {
		_, err := providers.NewOIDC(providers.OIDCConfig{
			ClientID: "c", ClientSecret: "s", Issuer: "https://op.example",
			Options: providers.OIDCOptions{AuthParams: map[string]string{k: "x"}},
		}, providers.Env{CallbackURL: testCallback, HTTPClient: http.DefaultClient})
		if err == nil {
			t.Errorf("AuthParams %q accepted", k)
		}
	}
}

func TestOIDCConfigValidation(t *testing.T) {
	env := providers.Env{CallbackURL: testCallback, HTTPClient: &http.Client{}}
	bad := map[string]providers.OIDCConfig{
		"http issuer":         {ClientID: "c", ClientSecret: "s", Issuer: "http://op.example"},
		"issuer with query":   {ClientID: "c", ClientSecret: "s", Issuer: "https://op.example?x=1"},
		"relative issuer":     {ClientID: "c", ClientSecret: "s", Issuer: "/op"},
		"no secret":           {ClientID: "c", Issuer: "https://op.example"},
		"HS256 allowed":       {ClientID: "c", ClientSecret: "s", Issuer: "https://op.example", Options: providers.OIDCOptions{SigningAlgs: []string{"RS256", "HS256"}}},
		"none allowed":        {ClientID: "c", ClientSecret: "s", Issuer: "https://op.example", Options: providers.OIDCOptions{SigningAlgs: []string{"none"}}},
		"unknown auth method": {ClientID: "c", ClientSecret: "s", Issuer: "https://op.example", Options: providers.OIDCOptions{AuthMethod: "private_key_jwt"}},
	}
	for name, c := range bad {
		if _, err := providers.NewOIDC(c, env); err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: error shows the secret", name)
		}
	}
	good := providers.OIDCConfig{ClientID: "c", ClientSecret: "s", Issuer: "http://127.0.0.1:9/op"}
	if _, err := providers.NewOIDC(good, env); err != nil {
		t.Errorf("loopback http issuer refused: %v", err)
	}
}

func TestOIDCHonestEmailVerified(t *testing.T) {
	bob := oidcop.DemoUsers()[1]
	f := newFixture(t, fixtureConfig{op: func(c *oidcop.Config) { c.Users = []oidcop.User{bob} }})
	id, err := f.signIn()
	if err != nil {
		t.Fatal(err)
	}
	if id.Email != bob.Email || id.EmailVerified {
		t.Errorf("email %q verified=%v, want %q unverified", id.Email, id.EmailVerified, bob.Email)
	}
}

func TestOIDCUserInfoFillsSparseIDToken(t *testing.T) {
	f := newFixture(t, fixtureConfig{op: func(c *oidcop.Config) { c.SparseIDToken = true }})
	id, err := f.signIn()
	if err != nil {
		t.Fatal(err)
	}
	alice := oidcop.DemoUsers()[0]
	if id.Email != alice.Email || !id.EmailVerified || id.Name != alice.Name || id.NickName != alice.PreferredUsername {
		t.Errorf("identity = %+v", id)
	}
	if n := f.op.Hits(oidcop.UserInfo); n != 1 {
		t.Errorf("UserInfo asked %d times, want 1", n)
	}
	if id.Raw["email"] != alice.Email || id.Raw["nonce"] == nil {
		t.Errorf("Raw does not merge UserInfo and the ID token: %v", id.Raw)
	}
}

func TestOIDCClientAuthentication(t *testing.T) {
	for _, tc := range []struct {
		name       string
		opMethod   string
		ourMethod  string
		wantReject bool
	}{
		{"basic from discovery", "client_secret_basic", "", false},
		{"post from discovery", "client_secret_post", "", false},
		{"basic forced", "client_secret_basic", providers.AuthMethodBasic, false},
		{"post forced", "client_secret_post", providers.AuthMethodPost, false},
		// A method the provider does not list is refused before the
		// token endpoint is asked, naming the setting.
		{"basic against a post-only OP", "client_secret_post", providers.AuthMethodBasic, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureConfig{
				op:   func(c *oidcop.Config) { c.AuthMethod = tc.opMethod },
				opts: providers.OIDCOptions{AuthMethod: tc.ourMethod},
			})
			_, err := f.signIn()
			if tc.wantReject {
				wantCode(t, err, providers.CodeMisconfigured)
				if !strings.Contains(err.Error(), "client_auth_method") || f.op.Hits(oidcop.Token) != 0 {
					t.Errorf("err = %v, token endpoint asked %d times", err, f.op.Hits(oidcop.Token))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestOIDCWrongSecret(t *testing.T) {
	f := newFixture(t, fixtureConfig{newStrt: func(iss string, env providers.Env) (*providers.OIDC, error) {
		return providers.NewOIDC(providers.OIDCConfig{ClientID: testClientID, ClientSecret: "wrong", Issuer: iss}, env)
	}})
	_, err := f.signIn()
	e := wantCode(t, err, providers.CodeInvalidCredentials)
	if strings.Contains(e.Error(), "wrong") {
		t.Errorf("error shows the secret: %v", e)
	}
}

func TestOIDCIssuerMismatch(t *testing.T) {
	f := newFixture(t, fixtureConfig{issuer: func(iss string) string { return iss + "/" }})
	_, err := f.signIn()
	e := wantCode(t, err, providers.CodeMisconfigured)
	if !strings.Contains(e.Error(), "trailing slash") {
		t.Errorf("error does not point at the trailing slash: %v", e)
	}
	if n := f.op.Hits(oidcop.Token); n != 0 {
		t.Errorf("token endpoint called %d times", n)
	}
}

func TestOIDCLazyDiscoveryBackoff(t *testing.T) {
	f := newFixture(t, fixtureConfig{opts: providers.OIDCOptions{
		DiscoveryRetryMin: 2 * time.Second, DiscoveryRetryMax: 8 * time.Second,
	}})
	f.op.SetFaults(oidcop.DiscoveryDown)
	ctx := context.Background()
	// While the provider is down: one attempt, then none until the
	// back-off has passed, however many sign-ins come.
	for range 20 {
		_, err := f.s.Begin(ctx, newOIDCTx())
		wantCode(t, err, providers.CodeProviderUnavailable)
	}
	if n := f.op.Hits(oidcop.Discovery); n != 1 {
		t.Fatalf("%d discovery fetches in the first window, want 1", n)
	}
	// The wait doubles: 2 s, 4 s, 8 s, then stays at the maximum.
	for i, wait := range []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second} {
		f.clock.Add(wait - time.Millisecond)
		_, err := f.s.Begin(ctx, newOIDCTx())
		wantCode(t, err, providers.CodeProviderUnavailable)
		if n := f.op.Hits(oidcop.Discovery); n != int64(i+1) {
			t.Fatalf("attempt before the back-off of %s ended: %d fetches", wait, n)
		}
		f.clock.Add(time.Millisecond)
		_, err = f.s.Begin(ctx, newOIDCTx())
		wantCode(t, err, providers.CodeProviderUnavailable)
		if n := f.op.Hits(oidcop.Discovery); n != int64(i+2) {
			t.Fatalf("no attempt after the back-off of %s: %d fetches", wait, n)
		}
	}
	f.op.SetFaults()
	f.clock.Add(8 * time.Second)
	if _, err := f.signIn(); err != nil {
		t.Fatalf("sign-in once the provider is back: %v", err)
	}
	before := f.op.Hits(oidcop.Discovery)
	for range 5 {
		if _, err := f.signIn(); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.op.Hits(oidcop.Discovery); n != before {
		t.Errorf("discovery fetched again after success: %d -> %d", before, n)
	}
}

// slowHandler holds every request until release is closed.
type slowHandler struct {
	h       http.Handler
	release chan struct{}
}

func (s slowHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	<-s.release
	s.h.ServeHTTP(w, r)
}

func TestOIDCConcurrentDiscoveryIsOneFetch(t *testing.T) {
	f := newFixture(t, fixtureConfig{})
	release := make(chan struct{})
	// Hold discovery until every caller is waiting on it.
	slow := &http.Client{Transport: handlerTransport{slowHandler{f.op, release}}}
	s, err := providers.NewOIDC(providers.OIDCConfig{ClientID: testClientID, ClientSecret: testClientSecret, Issuer: f.issuer},
		providers.Env{CallbackURL: testCallback, HTTPClient: slow, Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Go(func() { errs <- s.Discover(context.Background()) })
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := f.op.Hits(oidcop.Discovery); n != 1 {
		t.Errorf("%d discovery fetches for 50 concurrent callers", n)
	}
}

func TestOIDCDiscoveryCallerGivesUp(t *testing.T) {
	f := newFixture(t, fixtureConfig{})
	release := make(chan struct{})
	slow := &http.Client{Transport: handlerTransport{slowHandler{f.op, release}}}
	s, err := providers.NewOIDC(providers.OIDCConfig{ClientID: testClientID, ClientSecret: testClientSecret, Issuer: f.issuer},
		providers.Env{CallbackURL: testCallback, HTTPClient: slow, Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err = s.Discover(ctx)
	wantCode(t, err, providers.CodeProviderUnavailable)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cause lost: %v", err)
	}
	// The attempt goes on for the callers after it and succeeds.
	close(release)
	if err := s.Discover(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := f.op.Hits(oidcop.Discovery); n != 1 {
		t.Errorf("%d discovery fetches", n)
	}
}

func TestOIDCKeyRotationRefetchesOnce(t *testing.T) {
	f := newFixture(t, fixtureConfig{})
	for range 3 {
		if _, err := f.signIn(); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.op.Hits(oidcop.JWKS); n != 1 {
		t.Fatalf("%d key fetches before rotation", n)
	}
	if _, err := f.op.AddKey(testKeys()["RS256"][1]); err != nil {
		t.Fatal(err)
	}
	// Rotation comes long after the key set was read.
	f.clock.Add(time.Hour)
	for range 10 {
		if _, err := f.signIn(); err != nil {
			t.Fatalf("after rotation: %v", err)
		}
	}
	if n := f.op.Hits(oidcop.JWKS); n != 2 {
		t.Errorf("%d key fetches after rotation, want 2 (one refetch)", n)
	}
}

func TestOIDCUnknownKidIsNotAFetchPerSignIn(t *testing.T) {
	f := newFixture(t, fixtureConfig{opts: providers.OIDCOptions{KeyRefreshInterval: time.Minute}})
	if _, err := f.signIn(); err != nil {
		t.Fatal(err)
	}
	f.clock.Add(2 * time.Minute)
	f.op.SetFaults(oidcop.UnknownKid)
	for range 25 {
		_, err := f.signIn()
		wantCode(t, err, providers.CodeInvalidResponse)
	}
	if n := f.op.Hits(oidcop.JWKS); n != 2 {
		t.Errorf("%d key fetches for 25 tokens naming an unknown key, want 2 (initial + one refetch)", n)
	}
	// After the interval, one more refetch is allowed.
	f.clock.Add(time.Minute)
	_, err := f.signIn()
	wantCode(t, err, providers.CodeInvalidResponse)
	if n := f.op.Hits(oidcop.JWKS); n != 3 {
		t.Errorf("%d key fetches after the interval, want 3", n)
	}
}

func TestOIDCNoKid(t *testing.T) {
	t.Run("one key", func(t *testing.T) {
		f := newFixture(t, fixtureConfig{})
		f.op.SetFaults(oidcop.NoKid)
		if _, err := f.signIn(); err != nil {
			t.Errorf("a token without kid and a single published key: %v", err)
		}
	})
	t.Run("several keys", func(t *testing.T) {
		f := newFixture(t, fixtureConfig{op: func(c *oidcop.Config) { c.Keys = testKeys()["RS256"][:2] }})
		f.op.SetFaults(oidcop.NoKid)
		_, err := f.signIn()
		e := wantCode(t, err, providers.CodeInvalidResponse)
		if !strings.Contains(e.Error(), "kid") {
			t.Errorf("error does not say why: %v", e)
		}
	})
}

func TestOIDCJWKSUnavailable(t *testing.T) {
	f := newFixture(t, fixtureConfig{})
	f.op.SetFaults(oidcop.JWKSDown)
	_, err := f.signIn()
	wantCode(t, err, providers.CodeProviderUnavailable)
	// Held back for the refresh interval, not fetched per sign-in.
	_, err = f.signIn()
	wantCode(t, err, providers.CodeProviderUnavailable)
	if n := f.op.Hits(oidcop.JWKS); n != 1 {
		t.Errorf("%d key fetches while the key set is down", n)
	}
	f.op.SetFaults()
	f.clock.Add(providers.DefaultOIDCKeyRefreshInterval)
	if _, err := f.signIn(); err != nil {
		t.Fatal(err)
	}
}

func TestOIDCTrustedExtraAudience(t *testing.T) {
	f := newFixture(t, fixtureConfig{opts: providers.OIDCOptions{TrustedAudiences: []string{"untrusted-client"}}})
	f.op.SetFaults(oidcop.ExtraAudienceWithAzp)
	if _, err := f.signIn(); err != nil {
		t.Errorf("trusted extra audience with azp: %v", err)
	}
	f.op.SetFaults(oidcop.ExtraAudience)
	_, err := f.signIn()
	wantCode(t, err, providers.CodeInvalidResponse)
}

func TestOIDCES256(t *testing.T) {
	f := newFixture(t, fixtureConfig{op: func(c *oidcop.Config) {
		c.Alg = "ES256"
		c.Keys = testKeys()["ES256"][:1]
	}})
	if _, err := f.signIn(); err != nil {
		t.Fatal(err)
	}
	f.op.SetFaults(oidcop.HS256PublicKey)
	_, err := f.signIn()
	wantCode(t, err, providers.CodeInvalidResponse)
}

func TestOIDCSigningAlgsOption(t *testing.T) {
	// The OP signs RS256; an allow-list without it leaves nothing usable.
	f := newFixture(t, fixtureConfig{opts: providers.OIDCOptions{SigningAlgs: []string{"ES256"}}})
	_, err := f.signIn()
	wantCode(t, err, providers.CodeMisconfigured)
}

func TestOIDCUserInfoOnlyForRequestedScopes(t *testing.T) {
	f := newFixture(t, fixtureConfig{
		op:   func(c *oidcop.Config) { c.SparseIDToken = true },
		opts: providers.OIDCOptions{Scopes: []string{"openid"}},
	})
	id, err := f.signIn()
	if err != nil {
		t.Fatal(err)
	}
	if n := f.op.Hits(oidcop.UserInfo); n != 0 {
		t.Errorf("UserInfo asked %d times for scope openid alone", n)
	}
	if id.UID == "" || id.Email != "" || id.EmailVerified {
		t.Errorf("identity = %+v", id)
	}
}
