package providers_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/extauth/extauth/extauthtest/graph"
	"github.com/extauth/extauth/providers"
)

const snCallback = "https://app.example/users/auth/socialnet/callback"

type snRig struct {
	t     *testing.T
	fake  *graph.Server
	srv   *httptest.Server
	strat *providers.Socialnet

	mu   sync.Mutex
	seen []string
}

func newSNRig(t *testing.T, mutate func(*graph.Options, *providers.SocialnetConfig, *providers.Env)) *snRig {
	t.Helper()
	o := graph.Options{AppID: "app-123", AppSecret: "app-secret", AutoApprove: true, RedirectURIs: []string{snCallback}}
	cfg := providers.SocialnetConfig{Key: "app-123", Secret: "app-secret"}
	env := providers.Env{CallbackURL: snCallback, HTTPClient: &http.Client{Timeout: slowTimeout}}
	if mutate != nil {
		mutate(&o, &cfg, &env)
	}
	rig := &snRig{t: t, fake: graph.New(o)}
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
	s, err := providers.NewSocialnet(cfg, env)
	if err != nil {
		t.Fatal(err)
	}
	rig.strat = s
	return rig
}

func newTx() *providers.Transaction {
	return &providers.Transaction{
		ID: "tx", Provider: "socialnet",
		State:    "c3RhdGUtc3RhdGUtc3RhdGUtc3RhdGUtc3RhdGUtc3Q",
		Verifier: "dmVyaWZpZXItdmVyaWZpZXItdmVyaWZpZXItdmVyaWY",
	}
}

func (rig *snRig) begin() (*providers.Transaction, string) {
	rig.t.Helper()
	tx := newTx()
	u, err := rig.strat.Begin(context.Background(), tx)
	if err != nil {
		rig.t.Fatal(err)
	}
	return tx, u
}

// consent visits the dialog like a browser and returns the callback
// request, without the #_=_ the dialog appends.
func (rig *snRig) consent(dialogURL string) *http.Request {
	rig.t.Helper()
	return followConsent(rig.t, dialogURL, snCallback)
}

func TestSocialnetHappyPath(t *testing.T) {
	rig := newSNRig(t, nil)
	tx, dialogURL := rig.begin()
	du, _ := url.Parse(dialogURL)
	q := du.Query()
	if du.Path != "/v21.0/dialog/oauth" || q.Get("client_id") != "app-123" || q.Get("redirect_uri") != snCallback ||
		q.Get("state") != tx.State || q.Get("scope") != "email" || q.Get("response_type") != "code" {
		t.Fatalf("dialog URL %s", dialogURL)
	}
	if q.Has("code_challenge") || strings.Contains(dialogURL, "app-secret") {
		t.Fatalf("dialog URL carries what it should not: %s", dialogURL)
	}
	cb := rig.consent(dialogURL)
	if rig.strat.Binding(cb) != tx.State {
		t.Fatal("Binding is not the state")
	}
	start := time.Now()
	id, err := rig.strat.Complete(context.Background(), cb, tx)
	if err != nil {
		t.Fatal(err)
	}
	u := graph.DemoUser
	if id.Provider != "socialnet" || id.UID != u.ID || id.Name != u.Name || id.FirstName != u.FirstName ||
		id.LastName != u.LastName || id.Email != u.Email || id.EmailVerified || id.Image != u.Picture {
		t.Errorf("identity %+v", id)
	}
	if id.Tokens.AccessToken == "" || id.Tokens.TokenType != "bearer" {
		t.Errorf("tokens: type %q, token set %t", id.Tokens.TokenType, id.Tokens.AccessToken != "")
	}
	if want := start.Add(5183944 * time.Second); id.Tokens.Expiry.Before(want.Add(-time.Minute)) || id.Tokens.Expiry.After(want.Add(time.Minute)) {
		t.Errorf("expiry %v, want about %v", id.Tokens.Expiry, want)
	}
	if _, ok := id.Raw["picture"]; !ok {
		t.Errorf("raw %v", id.Raw)
	}
	if n := rig.fake.TokensInQuery(); n != 0 {
		t.Errorf("%d Graph requests carried the access token in the URL", n)
	}
	rig.mu.Lock()
	defer rig.mu.Unlock()
	for _, s := range rig.seen {
		if strings.Contains(s, id.Tokens.AccessToken) || strings.Contains(s, "app-secret") || strings.Contains(s, cb.URL.Query().Get("code")) && !strings.Contains(s, "/dialog/") {
			t.Errorf("a token, secret or code appears in a URL: %s", s)
		}
	}
}

func TestSocialnetGraphVersion(t *testing.T) {
	rig := newSNRig(t, func(o *graph.Options, c *providers.SocialnetConfig, _ *providers.Env) {
		o.Version = "v19.0"
		c.Options.GraphVersion = "v19.0"
	})
	tx, dialogURL := rig.begin()
	if !strings.Contains(dialogURL, "/v19.0/dialog/oauth?") {
		t.Fatalf("dialog URL %s", dialogURL)
	}
	if _, err := rig.strat.Complete(context.Background(), rig.consent(dialogURL), tx); err != nil {
		t.Fatal(err)
	}
	// The default version against a provider that serves only v19.0 fails
	// at the exchange, which proves the option reaches every path.
	rig2 := newSNRig(t, func(o *graph.Options, _ *providers.SocialnetConfig, _ *providers.Env) { o.Version = "v19.0" })
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	_, dialogURL = rig2.begin()
	resp, err := c.Get(dialogURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("v21.0 dialog on a v19.0 provider: %d", resp.StatusCode)
	}
	for _, bad := range []string{"21.0", "v21", "v21.0/../../x", "v21.0?x=1"} {
		_, err := providers.NewSocialnet(providers.SocialnetConfig{Key: "k", Secret: "s", Options: providers.SocialnetOptions{GraphVersion: bad}},
			providers.Env{CallbackURL: snCallback, HTTPClient: http.DefaultClient})
		wantCode(t, err, providers.CodeMisconfigured)
	}
}

func TestSocialnetDefaultsToRealHosts(t *testing.T) {
	s, err := providers.NewSocialnet(providers.SocialnetConfig{Key: "k", Secret: "s"},
		providers.Env{CallbackURL: snCallback, HTTPClient: http.DefaultClient})
	if err != nil {
		t.Fatal(err)
	}
	u, err := s.Begin(context.Background(), newTx())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(u, "https://www.facebook.com/v21.0/dialog/oauth?") {
		t.Errorf("dialog URL %s", u)
	}
}

func TestSocialnetDenied(t *testing.T) {
	rig := newSNRig(t, func(o *graph.Options, _ *providers.SocialnetConfig, _ *providers.Env) { o.AutoApprove = false })
	tx, dialogURL := rig.begin()
	resp, err := http.Get(dialogURL)
	if err != nil {
		t.Fatal(err)
	}
	page := readAll(t, resp)
	if !strings.Contains(page, "email address") || !strings.Contains(page, `value="deny"`) {
		t.Fatalf("dialog page:\n%s", page)
	}
	reqID := between(page, `name="request" value="`, `"`)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err = c.PostForm(rig.srv.URL+"/v21.0/dialog/oauth", url.Values{"request": {reqID}, "action": {"deny"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _, _ := strings.Cut(resp.Header.Get("Location"), "#")
	cb := httptest.NewRequest(http.MethodGet, loc, nil)
	if cb.URL.Query().Get("error_reason") != "user_denied" || rig.strat.Binding(cb) != tx.State {
		t.Fatalf("deny redirect %s", loc)
	}
	_, err = rig.strat.Complete(context.Background(), cb, tx)
	wantCode(t, err, providers.CodeAccessDenied)
	if n := rig.fake.Calls(graph.AccessToken); n != 0 {
		t.Errorf("token endpoint called %d times after a refusal", n)
	}
}

func TestSocialnetCallbackErrors(t *testing.T) {
	rig := newSNRig(t, nil)
	tx := newTx()
	for _, tc := range []struct {
		query string
		code  providers.Code
	}{
		{"error_reason=user_denied", providers.CodeAccessDenied},
		{"error=access_denied", providers.CodeAccessDenied},
		{"error=server_error", providers.CodeProviderUnavailable},
		{"error=%3Cscript%3Ealert(1)%3C%2Fscript%3E", providers.CodeInvalidResponse},
		{"", providers.CodeInvalidResponse}, // no code
	} {
		q := "state=" + tx.State
		if tc.query != "" {
			q += "&" + tc.query
		}
		_, err := rig.strat.Complete(context.Background(), httptest.NewRequest("GET", snCallback+"?"+q, nil), tx)
		pe := wantCode(t, err, tc.code)
		if strings.Contains(pe.Message, "script") {
			t.Errorf("provider input echoed in the message: %q", pe.Message)
		}
	}
	if n := rig.fake.Calls(graph.AccessToken); n != 0 {
		t.Errorf("token endpoint called %d times", n)
	}
}

func TestSocialnetBadSecret(t *testing.T) {
	rig := newSNRig(t, func(_ *graph.Options, c *providers.SocialnetConfig, _ *providers.Env) { c.Secret = "not-the-secret" })
	tx, dialogURL := rig.begin()
	_, err := rig.strat.Complete(context.Background(), rig.consent(dialogURL), tx)
	pe := wantCode(t, err, providers.CodeInvalidCredentials)
	if strings.Contains(pe.Error(), "not-the-secret") {
		t.Errorf("secret in the error: %q", pe.Error())
	}
}

func TestSocialnetStateMismatch(t *testing.T) {
	rig := newSNRig(t, nil)
	tx, dialogURL := rig.begin()
	cb := rig.consent(dialogURL)
	other := newTx()
	other.State = "another-transaction-state"
	_, err := rig.strat.Complete(context.Background(), cb, other)
	wantCode(t, err, providers.CodeInvalidState)
	// A callback without state at all.
	q := cb.URL.Query()
	q.Del("state")
	_, err = rig.strat.Complete(context.Background(), httptest.NewRequest("GET", snCallback+"?"+q.Encode(), nil), tx)
	wantCode(t, err, providers.CodeInvalidState)
	if n := rig.fake.Calls(graph.AccessToken); n != 0 {
		t.Errorf("token endpoint called %d times on a mismatched state", n)
	}
}

func TestSocialnetReplayedCode(t *testing.T) {
	rig := newSNRig(t, nil)
	tx, dialogURL := rig.begin()
	cb := rig.consent(dialogURL)
	if _, err := rig.strat.Complete(context.Background(), cb, tx); err != nil {
		t.Fatal(err)
	}
	_, err := rig.strat.Complete(context.Background(), cb, tx)
	wantCode(t, err, providers.CodeReplayed)
}

func TestSocialnetPKCE(t *testing.T) {
	rig := newSNRig(t, func(_ *graph.Options, c *providers.SocialnetConfig, _ *providers.Env) { c.Options.PKCE = true })
	tx, dialogURL := rig.begin()
	du, _ := url.Parse(dialogURL)
	sum := sha256.Sum256([]byte(tx.Verifier))
	if du.Query().Get("code_challenge") != base64.RawURLEncoding.EncodeToString(sum[:]) || du.Query().Get("code_challenge_method") != "S256" {
		t.Fatalf("dialog URL %s", dialogURL)
	}
	// A code_verifier on the callback is ignored: the verifier comes from
	// the transaction only.
	cb := rig.consent(dialogURL)
	q := cb.URL.Query()
	q.Set("code_verifier", "attacker-chosen")
	if _, err := rig.strat.Complete(context.Background(), httptest.NewRequest("GET", snCallback+"?"+q.Encode(), nil), tx); err != nil {
		t.Fatal(err)
	}
	// The wrong verifier is refused by the provider.
	tx2, dialogURL2 := rig.begin()
	cb2 := rig.consent(dialogURL2)
	tx2.Verifier = "d3JvbmctdmVyaWZpZXItd3JvbmctdmVyaWZpZXItd3Jvbmc"
	_, err := rig.strat.Complete(context.Background(), cb2, tx2)
	wantCode(t, err, providers.CodeInvalidResponse)
}

func TestSocialnetProviderFaults(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault graph.Fault
		code  providers.Code
	}{
		{"5xx", graph.FaultServerError, providers.CodeProviderUnavailable},
		{"huge", graph.FaultHugeBody, providers.CodeInvalidResponse},
		{"malformed", graph.FaultMalformed, providers.CodeInvalidResponse},
		{"hang", graph.FaultHang, providers.CodeTimeout},
	} {
		for _, step := range []graph.Endpoint{graph.AccessToken, graph.Me} {
			t.Run(tc.name+"/"+string(step), func(t *testing.T) {
				rig := newSNRig(t, func(_ *graph.Options, _ *providers.SocialnetConfig, e *providers.Env) {
					e.HTTPClient = &http.Client{Timeout: faultTimeout(tc.fault == graph.FaultHang)}
				})
				tx, dialogURL := rig.begin()
				cb := rig.consent(dialogURL)
				rig.fake.SetFault(step, tc.fault)
				start := time.Now()
				_, err := rig.strat.Complete(context.Background(), cb, tx)
				wantCode(t, err, tc.code)
				if d := time.Since(start); d > hangBound {
					t.Errorf("took %v", d)
				}
			})
		}
	}
}

func TestSocialnetHangHonoursContext(t *testing.T) {
	// The client waits a minute: the context must win.
	rig := newSNRig(t, func(_ *graph.Options, _ *providers.SocialnetConfig, e *providers.Env) {
		e.HTTPClient = &http.Client{Timeout: slowTimeout}
	})
	tx, dialogURL := rig.begin()
	cb := rig.consent(dialogURL)
	rig.fake.SetFault(graph.AccessToken, graph.FaultHang)
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	start := time.Now()
	_, err := rig.strat.Complete(ctx, cb, tx)
	wantCode(t, err, providers.CodeTimeout)
	if d := time.Since(start); d > hangBound {
		t.Errorf("timeout took %v", d)
	}
}

func TestSocialnetProfileShapes(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		ok         bool
	}{
		{"minimal", `{"id":"10158123456789012"}`, true},
		{"nulls", `{"id":"1","email":null,"picture":null}`, true},
		{"picture without data", `{"id":"1","picture":{}}`, true},
		{"missing id", `{"name":"x"}`, false},
		{"empty id", `{"id":""}`, false},
		{"numeric id", `{"id":10158123456789012}`, false},
		{"array name", `{"id":"1","name":["a"]}`, false},
		{"number email", `{"id":"1","email":7}`, false},
		{"string picture", `{"id":"1","picture":"https://x/y.jpg"}`, false},
		{"string picture data", `{"id":"1","picture":{"data":"x"}}`, false},
		{"numeric picture url", `{"id":"1","picture":{"data":{"url":5}}}`, false},
		{"array", `[]`, false},
		{"null", `null`, false},
		{"empty", ``, false},
		{"html", `<html></html>`, false},
		{"truncated", `{"id":"1"`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rig := newSNRig(t, nil)
			rig.fake.SetProfileBody([]byte(tc.body))
			tx, dialogURL := rig.begin()
			id, err := rig.strat.Complete(context.Background(), rig.consent(dialogURL), tx)
			if tc.ok {
				if err != nil || id.UID == "" {
					t.Fatalf("got %v, %v", id, err)
				}
				return
			}
			wantCode(t, err, providers.CodeInvalidResponse)
		})
	}
}

func TestSocialnetTokenShapes(t *testing.T) {
	for _, tc := range []struct {
		name, body string
	}{
		{"no token", `{"token_type":"bearer"}`},
		{"numeric token", `{"access_token":12345}`},
		{"mac token", `{"access_token":"x","token_type":"mac"}`},
		{"string expiry", `{"access_token":"x","expires_in":"soon"}`},
		{"negative expiry", `{"access_token":"x","expires_in":-5}`},
		{"absurd expiry", `{"access_token":"x","expires_in":1e30}`},
		{"form encoded", `access_token=x&expires=5`},
		{"null", `null`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rig := newSNRig(t, nil)
			rig.fake.SetTokenBody([]byte(tc.body))
			tx, dialogURL := rig.begin()
			_, err := rig.strat.Complete(context.Background(), rig.consent(dialogURL), tx)
			wantCode(t, err, providers.CodeInvalidResponse)
			if n := rig.fake.Calls(graph.Me); n != 0 {
				t.Errorf("profile fetched with a bad token answer")
			}
		})
	}
}

func TestNewSocialnetRefusesBadConfig(t *testing.T) {
	env := providers.Env{CallbackURL: snCallback, HTTPClient: http.DefaultClient}
	for name, tc := range map[string]struct {
		cfg providers.SocialnetConfig
		env providers.Env
	}{
		"no key":      {providers.SocialnetConfig{Secret: "s"}, env},
		"no secret":   {providers.SocialnetConfig{Key: "k"}, env},
		"bad site":    {providers.SocialnetConfig{Key: "k", Secret: "s", Site: "graph.example"}, env},
		"no callback": {providers.SocialnetConfig{Key: "k", Secret: "s"}, providers.Env{HTTPClient: http.DefaultClient}},
		"no client":   {providers.SocialnetConfig{Key: "k", Secret: "s"}, providers.Env{CallbackURL: snCallback}},
	} {
		_, err := providers.NewSocialnet(tc.cfg, tc.env)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		wantCode(t, err, providers.CodeMisconfigured)
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return b.String()
}

func between(s, start, end string) string {
	_, after, ok := strings.Cut(s, start)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(after, end)
	return v
}
