package providers_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	fake "github.com/extauth/extauth/extauthtest/oauth1"
	"github.com/extauth/extauth/providers"
)

const mbCallback = "https://app.example/users/auth/microblog/callback"

type mbRig struct {
	t     *testing.T
	fake  *fake.Server
	srv   *httptest.Server
	strat *providers.Microblog

	mu   sync.Mutex
	seen []string // every URL the strategy requested
}

func newMBRig(t *testing.T, mutate func(*fake.Options, *providers.MicroblogConfig, *providers.Env)) *mbRig {
	t.Helper()
	o := fake.Options{ConsumerKey: "ck-microblog", ConsumerSecret: "cs-microblog", AutoApprove: true, CallbackURLs: []string{mbCallback}}
	cfg := providers.MicroblogConfig{Key: "ck-microblog", Secret: "cs-microblog"}
	env := providers.Env{CallbackURL: mbCallback, HTTPClient: &http.Client{Timeout: slowTimeout}}
	if mutate != nil {
		mutate(&o, &cfg, &env)
	}
	rig := &mbRig{t: t, fake: fake.New(o)}
	rig.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rig.mu.Lock()
		rig.seen = append(rig.seen, r.URL.String())
		rig.mu.Unlock()
		rig.fake.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { rig.fake.Close(); rig.srv.Close() })
	if cfg.Site == "" {
		cfg.Site = rig.srv.URL
	}
	s, err := providers.NewMicroblog(cfg, env)
	if err != nil {
		t.Fatal(err)
	}
	rig.strat = s
	return rig
}

// begin starts a sign-in and returns the transaction and the URL the
// browser is sent to.
func (rig *mbRig) begin() (*providers.Transaction, string, error) {
	tx := &providers.Transaction{ID: "tx1", Provider: "microblog", State: "state-unused-by-oauth1"}
	u, err := rig.strat.Begin(context.Background(), tx)
	return tx, u, err
}

// consent visits the provider's authenticate page like a browser and
// returns the callback request it redirects to.
func (rig *mbRig) consent(authURL string) *http.Request {
	rig.t.Helper()
	return followConsent(rig.t, authURL, mbCallback)
}

// followConsent visits a fake provider's consent page like a browser, the
// fake approving at once, and returns the request for the callback it
// redirects to, without the fragment a browser keeps to itself.
func followConsent(t *testing.T, consentURL, callback string) *http.Request {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(consentURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, callback+"?") {
		t.Fatalf("consent page answered %d, Location %q", resp.StatusCode, loc)
	}
	loc, _, _ = strings.Cut(loc, "#")
	return httptest.NewRequest(http.MethodGet, loc, nil)
}

// The time-outs of the fault tests. A hang is ended by a short client
// time-out (hangTimeout) or context; every other fault gets a client
// time-out that no loaded machine reaches (slowTimeout), since reading a
// huge body is not a matter of time; and a hang must end well before what
// it would wait for if the time-out under test were ignored (the fakes
// hang until the client leaves; a client that is not under test waits
// slowTimeout): within hangBound, which load does not stretch a return to.
const (
	hangTimeout = 300 * time.Millisecond
	slowTimeout = time.Minute
	hangBound   = 20 * time.Second
)

// faultTimeout is the client time-out of a fault test.
func faultTimeout(hang bool) time.Duration {
	if hang {
		return hangTimeout
	}
	return slowTimeout
}

func wantCode(t *testing.T, err error, code providers.Code) *providers.Error {
	t.Helper()
	var pe *providers.Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %v is not a *providers.Error (want %s)", err, code)
	}
	if pe.Code != code {
		t.Fatalf("code %s (%v), want %s", pe.Code, err, code)
	}
	return pe
}

func TestMicroblogHappyPath(t *testing.T) {
	rig := newMBRig(t, nil)
	tx, authURL, err := rig.begin()
	if err != nil {
		t.Fatal(err)
	}
	au, _ := url.Parse(authURL)
	if au.Path != "/oauth/authenticate" || au.Query().Get("oauth_token") == "" {
		t.Fatalf("authorize URL %s", authURL)
	}
	if tx.Binding != au.Query().Get("oauth_token") || tx.TokenSecret == "" {
		t.Fatalf("transaction not bound to the request token: %+v", tx)
	}
	if strings.Contains(authURL, tx.TokenSecret) {
		t.Fatal("the request token secret left the sealed transaction")
	}
	cb := rig.consent(authURL)
	if got := rig.strat.Binding(cb); got != tx.Binding {
		t.Fatalf("Binding = %q, want the request token", got)
	}
	id, err := rig.strat.Complete(context.Background(), cb, tx)
	if err != nil {
		t.Fatal(err)
	}
	u := fake.DemoUser
	if id.Provider != "microblog" || id.UID != u.ID || id.NickName != u.ScreenName || id.Name != u.Name ||
		id.Email != u.Email || !id.EmailVerified || id.Image != u.Image || id.Description != u.Description ||
		id.Location != u.Location {
		t.Errorf("identity %+v", id)
	}
	if id.Tokens.AccessToken == "" || id.Tokens.Secret == "" {
		t.Errorf("credentials missing: token %t secret %t", id.Tokens.AccessToken != "", id.Tokens.Secret != "")
	}
	if id.Raw["screen_name"] != u.ScreenName {
		t.Errorf("raw profile %v", id.Raw)
	}
	if _, ok := id.Raw["status"]; ok {
		t.Error("skip_status=true was not sent")
	}
	// Tokens travel in Authorization headers only.
	rig.mu.Lock()
	defer rig.mu.Unlock()
	for _, s := range rig.seen {
		if strings.Contains(s, id.Tokens.AccessToken) || strings.Contains(s, id.Tokens.Secret) || strings.Contains(s, tx.TokenSecret) {
			t.Errorf("a token or secret appears in a URL: %s", s)
		}
	}
}

func TestMicroblogRequiresCallbackConfirmed(t *testing.T) {
	rig := newMBRig(t, nil)
	rig.fake.OmitCallbackConfirmed(true)
	tx, _, err := rig.begin()
	wantCode(t, err, providers.CodeInvalidResponse)
	if tx.Binding != "" || tx.TokenSecret != "" {
		t.Error("a refused request token was kept in the transaction")
	}
}

func TestMicroblogBadSecret(t *testing.T) {
	rig := newMBRig(t, func(_ *fake.Options, c *providers.MicroblogConfig, _ *providers.Env) { c.Secret = "wrong" })
	_, _, err := rig.begin()
	pe := wantCode(t, err, providers.CodeInvalidCredentials)
	if pe.Provider != "microblog" || strings.Contains(pe.Error(), "wrong") {
		t.Errorf("error %q", pe.Error())
	}
}

func TestMicroblogCallbackNotRegistered(t *testing.T) {
	rig := newMBRig(t, func(o *fake.Options, _ *providers.MicroblogConfig, _ *providers.Env) {
		o.CallbackURLs = []string{"https://elsewhere.example/cb"}
	})
	_, _, err := rig.begin()
	wantCode(t, err, providers.CodeMisconfigured)
}

func TestMicroblogClockSkew(t *testing.T) {
	rig := newMBRig(t, func(_ *fake.Options, _ *providers.MicroblogConfig, e *providers.Env) {
		e.Now = func() time.Time { return time.Now().Add(-time.Hour) }
	})
	_, _, err := rig.begin()
	wantCode(t, err, providers.CodeMisconfigured)
}

func TestMicroblogTokenMismatch(t *testing.T) {
	rig := newMBRig(t, nil)
	tx, authURL, err := rig.begin()
	if err != nil {
		t.Fatal(err)
	}
	cb := rig.consent(authURL)
	// A second sign-in's callback (another request token) against the first
	// transaction: the verifier is genuine, the binding is not.
	tx2, authURL2, err := rig.begin()
	if err != nil {
		t.Fatal(err)
	}
	cb2 := rig.consent(authURL2)
	_, err = rig.strat.Complete(context.Background(), cb2, tx)
	wantCode(t, err, providers.CodeInvalidState)
	if n := rig.fake.Calls(fake.AccessToken); n != 0 {
		t.Errorf("access_token called %d times on a mismatched token", n)
	}
	// And the other way round, still without reaching the provider.
	_, err = rig.strat.Complete(context.Background(), cb, tx2)
	wantCode(t, err, providers.CodeInvalidState)
	if n := rig.fake.Calls(fake.AccessToken); n != 0 {
		t.Errorf("access_token called %d times on a mismatched token", n)
	}
}

func TestMicroblogMissingVerifier(t *testing.T) {
	rig := newMBRig(t, nil)
	tx, authURL, err := rig.begin()
	if err != nil {
		t.Fatal(err)
	}
	cb := rig.consent(authURL)
	q := cb.URL.Query()
	q.Del("oauth_verifier")
	cb = httptest.NewRequest(http.MethodGet, mbCallback+"?"+q.Encode(), nil)
	_, err = rig.strat.Complete(context.Background(), cb, tx)
	wantCode(t, err, providers.CodeInvalidResponse)
}

func TestMicroblogMissingTokenSecret(t *testing.T) {
	rig := newMBRig(t, nil)
	tx, authURL, err := rig.begin()
	if err != nil {
		t.Fatal(err)
	}
	cb := rig.consent(authURL)
	tx.TokenSecret = ""
	_, err = rig.strat.Complete(context.Background(), cb, tx)
	wantCode(t, err, providers.CodeInvalidState)
}

func TestMicroblogDenied(t *testing.T) {
	rig := newMBRig(t, func(o *fake.Options, _ *providers.MicroblogConfig, _ *providers.Env) { o.AutoApprove = false })
	tx, authURL, err := rig.begin()
	if err != nil {
		t.Fatal(err)
	}
	// The consent page offers the user and a deny button; press deny.
	resp, err := http.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("consent page: %d", resp.StatusCode)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err = c.PostForm(rig.srv.URL+"/oauth/authenticate", url.Values{"oauth_token": {tx.Binding}, "action": {"deny"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cb := httptest.NewRequest(http.MethodGet, resp.Header.Get("Location"), nil)
	if cb.URL.Query().Get("denied") != tx.Binding {
		t.Fatalf("deny redirect %s", cb.URL)
	}
	if got := rig.strat.Binding(cb); got != tx.Binding {
		t.Fatalf("Binding of a refusal = %q, want the request token", got)
	}
	_, err = rig.strat.Complete(context.Background(), cb, tx)
	wantCode(t, err, providers.CodeAccessDenied)
	if n := rig.fake.Calls(fake.AccessToken); n != 0 {
		t.Errorf("access_token called %d times after a refusal", n)
	}
}

func TestMicroblogConsentPageApprove(t *testing.T) {
	alice := fake.User{ID: "42", ScreenName: "alice", Name: "Alice <b>", Email: ""}
	rig := newMBRig(t, func(o *fake.Options, _ *providers.MicroblogConfig, _ *providers.Env) {
		o.AutoApprove = false
		o.Users = []fake.User{fake.DemoUser, alice}
	})
	tx, authURL, err := rig.begin()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err = c.PostForm(rig.srv.URL+"/oauth/authenticate", url.Values{"oauth_token": {tx.Binding}, "user": {"42"}, "action": {"approve"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cb := httptest.NewRequest(http.MethodGet, resp.Header.Get("Location"), nil)
	id, err := rig.strat.Complete(context.Background(), cb, tx)
	if err != nil {
		t.Fatal(err)
	}
	if id.UID != "42" || id.Email != "" || id.EmailVerified || id.Name != "Alice <b>" {
		t.Errorf("identity %+v", id)
	}
}

func TestMicroblogReplayedVerifier(t *testing.T) {
	rig := newMBRig(t, nil)
	tx, authURL, err := rig.begin()
	if err != nil {
		t.Fatal(err)
	}
	cb := rig.consent(authURL)
	if _, err := rig.strat.Complete(context.Background(), cb, tx); err != nil {
		t.Fatal(err)
	}
	// Same transaction, same callback: the request token is spent.
	_, err = rig.strat.Complete(context.Background(), cb, tx)
	wantCode(t, err, providers.CodeReplayed)
}

func TestMicroblogWrongVerifier(t *testing.T) {
	rig := newMBRig(t, nil)
	tx, authURL, err := rig.begin()
	if err != nil {
		t.Fatal(err)
	}
	cb := rig.consent(authURL)
	q := cb.URL.Query()
	q.Set("oauth_verifier", "guessed")
	_, err = rig.strat.Complete(context.Background(), httptest.NewRequest(http.MethodGet, mbCallback+"?"+q.Encode(), nil), tx)
	wantCode(t, err, providers.CodeReplayed)
	// The genuine verifier still works: a wrong guess does not burn it.
	if _, err := rig.strat.Complete(context.Background(), cb, tx); err != nil {
		t.Fatal(err)
	}
}

func TestMicroblogProviderFaults(t *testing.T) {
	steps := []fake.Endpoint{fake.RequestToken, fake.AccessToken, fake.VerifyCredentials}
	for _, tc := range []struct {
		name  string
		fault fake.Fault
		code  providers.Code
	}{
		{"5xx", fake.FaultServerError, providers.CodeProviderUnavailable},
		{"huge", fake.FaultHugeBody, providers.CodeInvalidResponse},
		{"malformed", fake.FaultMalformed, providers.CodeInvalidResponse},
		{"hang", fake.FaultHang, providers.CodeTimeout},
	} {
		for _, step := range steps {
			t.Run(tc.name+"/"+string(step), func(t *testing.T) {
				rig := newMBRig(t, func(_ *fake.Options, _ *providers.MicroblogConfig, e *providers.Env) {
					e.HTTPClient = &http.Client{Timeout: faultTimeout(tc.fault == fake.FaultHang)}
				})
				rig.fake.SetFault(step, tc.fault)
				start := time.Now()
				tx, authURL, err := rig.begin()
				if step != fake.RequestToken {
					if err != nil {
						t.Fatal(err)
					}
					_, err = rig.strat.Complete(context.Background(), rig.consent(authURL), tx)
				}
				wantCode(t, err, tc.code)
				if d := time.Since(start); d > hangBound {
					t.Errorf("took %v", d)
				}
			})
		}
	}
}

func TestMicroblogHangHonoursContext(t *testing.T) {
	// The client waits a minute: the context must win.
	rig := newMBRig(t, func(_ *fake.Options, _ *providers.MicroblogConfig, e *providers.Env) {
		e.HTTPClient = &http.Client{Timeout: slowTimeout}
	})
	rig.fake.SetFault(fake.RequestToken, fake.FaultHang)
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	start := time.Now()
	_, err := rig.strat.Begin(ctx, &providers.Transaction{ID: "x"})
	wantCode(t, err, providers.CodeTimeout)
	if d := time.Since(start); d > hangBound {
		t.Errorf("timeout took %v", d)
	}
}

func TestMicroblogProfileShapes(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		ok         bool
	}{
		{"minimal", `{"id_str":"1234567890123456789"}`, true},
		{"nulls", `{"id_str":"1234567890123456789","email":null,"name":null}`, true},
		{"missing id_str", `{"id":1234567890123456789,"screen_name":"x"}`, false},
		{"empty id_str", `{"id_str":""}`, false},
		{"numeric id_str", `{"id_str":1234567890123456789}`, false},
		{"object name", `{"id_str":"1234567890123456789","name":{"a":1}}`, false},
		{"array email", `{"id_str":"1234567890123456789","email":["a@b"]}`, false},
		{"bool screen_name", `{"id_str":"1234567890123456789","screen_name":true}`, false},
		{"array", `[{"id_str":"1"}]`, false},
		{"null", `null`, false},
		{"string", `"id_str"`, false},
		{"empty", ``, false},
		{"truncated", `{"id_str":"1`, false},
		{"trailing", `{"id_str":"1234567890123456789"} {}`, false},
		{"someone else", `{"id_str":"999"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rig := newMBRig(t, nil)
			rig.fake.SetProfileBody([]byte(tc.body))
			tx, authURL, err := rig.begin()
			if err != nil {
				t.Fatal(err)
			}
			id, err := rig.strat.Complete(context.Background(), rig.consent(authURL), tx)
			if tc.ok {
				if err != nil || id.UID != fake.DemoUser.ID {
					t.Fatalf("got %v, %v", id, err)
				}
				return
			}
			pe := wantCode(t, err, providers.CodeInvalidResponse)
			if pe.Message == "" {
				t.Error("no message")
			}
		})
	}
}

func TestMicroblogUnderPrefix(t *testing.T) {
	// The demo mounts the fake under a path; signatures cover that path.
	f := fake.New(fake.Options{ConsumerKey: "k", ConsumerSecret: "s", AutoApprove: true, Prefix: "/fake/microblog"})
	mux := http.NewServeMux()
	mux.Handle("/fake/microblog/", http.StripPrefix("/fake/microblog", f))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	s, err := providers.NewMicroblog(providers.MicroblogConfig{Key: "k", Secret: "s", Site: srv.URL + "/fake/microblog/"},
		providers.Env{CallbackURL: mbCallback, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	tx := &providers.Transaction{ID: "x"}
	authURL, err := s.Begin(context.Background(), tx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(authURL, srv.URL+"/fake/microblog/oauth/authenticate?") {
		t.Fatalf("authorize URL %s", authURL)
	}
	rig := &mbRig{t: t}
	id, err := s.Complete(context.Background(), rig.consent(authURL), tx)
	if err != nil {
		t.Fatal(err)
	}
	if id.UID != fake.DemoUser.ID {
		t.Errorf("uid %q", id.UID)
	}
}

func TestNewMicroblogRefusesBadConfig(t *testing.T) {
	env := providers.Env{CallbackURL: mbCallback, HTTPClient: http.DefaultClient}
	for name, tc := range map[string]struct {
		cfg providers.MicroblogConfig
		env providers.Env
	}{
		"no key":      {providers.MicroblogConfig{Secret: "s"}, env},
		"no secret":   {providers.MicroblogConfig{Key: "k"}, env},
		"bad site":    {providers.MicroblogConfig{Key: "k", Secret: "s", Site: "api.example"}, env},
		"no callback": {providers.MicroblogConfig{Key: "k", Secret: "s"}, providers.Env{HTTPClient: http.DefaultClient}},
		"no client":   {providers.MicroblogConfig{Key: "k", Secret: "s"}, providers.Env{CallbackURL: mbCallback}},
	} {
		if _, err := providers.NewMicroblog(tc.cfg, tc.env); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			wantCode(t, err, providers.CodeMisconfigured)
		}
	}
	s, err := providers.NewMicroblog(providers.MicroblogConfig{Key: "k", Secret: "s"}, env)
	if err != nil || s.Name() != "microblog" {
		t.Fatalf("default site: %v", err)
	}
}
