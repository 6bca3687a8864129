package providers_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/markbates/goth"
	"github.com/markbates/goth/providers/github"
	"golang.org/x/oauth2"

	"github.com/extauth/extauth/extauthtest/forge"
	"github.com/extauth/extauth/providers"
)

const ghCallback = "https://app.example/users/auth/github/callback"

type gothRig struct {
	t     *testing.T
	fake  *forge.Server
	srv   *httptest.Server
	gh    *github.Provider
	strat *providers.GothStrategy
}

func newGothRig(t *testing.T, secret string, client *http.Client) *gothRig {
	t.Helper()
	f := forge.New(forge.Options{ClientID: "gh-id", ClientSecret: "gh-secret", CallbackURL: ghCallback, AutoApprove: true})
	srv := httptest.NewServer(f)
	t.Cleanup(func() { f.Close(); srv.Close() })
	a, tok, prof, email := forge.URLs(srv.URL)
	gh := github.NewCustomisedURL("gh-id", secret, ghCallback, a, tok, prof, email)
	s := providers.Goth(gh)
	s.SetEnv(providers.Env{CallbackURL: ghCallback, HTTPClient: client})
	return &gothRig{t: t, fake: f, srv: srv, gh: gh, strat: s}
}

func (rig *gothRig) begin() (*providers.Transaction, string) {
	rig.t.Helper()
	tx := newTx()
	u, err := rig.strat.Begin(context.Background(), tx)
	if err != nil {
		rig.t.Fatal(err)
	}
	return tx, u
}

func (rig *gothRig) consent(authURL string) *http.Request {
	rig.t.Helper()
	return followConsent(rig.t, authURL, ghCallback)
}

func TestGothHappyPath(t *testing.T) {
	client := &http.Client{Timeout: slowTimeout}
	rig := newGothRig(t, "gh-secret", client)
	if rig.gh.HTTPClient != client {
		t.Fatal("SetEnv did not give the goth provider extauth's client")
	}
	if rig.strat.Name() != "github" || rig.strat.Provider() != goth.Provider(rig.gh) {
		t.Fatalf("name %q", rig.strat.Name())
	}
	tx, authURL := rig.begin()
	au, _ := url.Parse(authURL)
	if au.Query().Get("state") != tx.State || tx.Binding != "" || tx.Extra["goth"] == "" {
		t.Fatalf("authorize URL %s, tx %+v", authURL, tx)
	}
	cb := rig.consent(authURL)
	if rig.strat.Binding(cb) != tx.State {
		t.Fatal("Binding is not the state")
	}
	id, err := rig.strat.Complete(context.Background(), cb, tx)
	if err != nil {
		t.Fatal(err)
	}
	u := forge.DemoUser
	if id.Provider != "github" || id.UID != "583231" || id.NickName != u.Login || id.Name != u.Name ||
		id.Email != u.Email || id.EmailVerified || id.Image != u.Avatar || id.Description != u.Bio || id.Location != u.Location {
		t.Errorf("identity %+v", id)
	}
	if id.Tokens.AccessToken == "" || id.Raw["login"] != u.Login {
		t.Errorf("tokens or raw missing: %v", id.Raw)
	}
}

func TestGothLeavesHostClientAlone(t *testing.T) {
	mine := &http.Client{Timeout: time.Second}
	gh := github.New("id", "secret", ghCallback)
	gh.HTTPClient = mine
	providers.Goth(gh).SetEnv(providers.Env{CallbackURL: ghCallback, HTTPClient: &http.Client{}})
	if gh.HTTPClient != mine {
		t.Error("the host's own client was replaced")
	}
}

func TestGothStateNeverFromRequest(t *testing.T) {
	rig := newGothRig(t, "gh-secret", &http.Client{Timeout: slowTimeout})
	tx, authURL := rig.begin()
	cb := rig.consent(authURL)
	// Without its session (a transaction from elsewhere) nothing happens.
	_, err := rig.strat.Complete(context.Background(), cb, &providers.Transaction{State: tx.State})
	wantCode(t, err, providers.CodeInvalidState)
	bad := *tx
	bad.Extra = map[string]string{"goth": "{not json"}
	_, err = rig.strat.Complete(context.Background(), cb, &bad)
	wantCode(t, err, providers.CodeInvalidState)
	if n := rig.fake.Calls(forge.AccessToken); n != 0 {
		t.Errorf("token endpoint called %d times", n)
	}
}

func TestGothDenied(t *testing.T) {
	rig := newGothRig(t, "gh-secret", &http.Client{Timeout: slowTimeout})
	tx, _ := rig.begin()
	cb := httptest.NewRequest("GET", ghCallback+"?error=access_denied&state="+tx.State, nil)
	_, err := rig.strat.Complete(context.Background(), cb, tx)
	pe := wantCode(t, err, providers.CodeAccessDenied)
	if pe.Provider != "github" {
		t.Errorf("provider %q", pe.Provider)
	}
	cb = httptest.NewRequest("GET", ghCallback+"?error=%3Cb%3E&state="+tx.State, nil)
	_, err = rig.strat.Complete(context.Background(), cb, tx)
	pe = wantCode(t, err, providers.CodeInvalidResponse)
	if strings.Contains(pe.Message, "<b>") {
		t.Error("provider input in the message")
	}
}

func TestGothBadSecret(t *testing.T) {
	rig := newGothRig(t, "wrong-secret", &http.Client{Timeout: slowTimeout})
	tx, authURL := rig.begin()
	_, err := rig.strat.Complete(context.Background(), rig.consent(authURL), tx)
	pe := wantCode(t, err, providers.CodeInvalidCredentials)
	if strings.Contains(pe.Error(), "wrong-secret") {
		t.Error("secret in the error")
	}
}

func TestGothReplayedCode(t *testing.T) {
	rig := newGothRig(t, "gh-secret", &http.Client{Timeout: slowTimeout})
	tx, authURL := rig.begin()
	cb := rig.consent(authURL)
	if _, err := rig.strat.Complete(context.Background(), cb, tx); err != nil {
		t.Fatal(err)
	}
	_, err := rig.strat.Complete(context.Background(), cb, tx)
	wantCode(t, err, providers.CodeReplayed)
}

func TestGothFaults(t *testing.T) {
	for _, tc := range []struct {
		name  string
		step  forge.Endpoint
		fault forge.Fault
		body  string
		code  providers.Code
	}{
		{"token 5xx", forge.AccessToken, forge.FaultServerError, "", providers.CodeProviderUnavailable},
		{"token hang", forge.AccessToken, forge.FaultHang, "", providers.CodeTimeout},
		{"profile hang", forge.UserAPI, forge.FaultHang, "", providers.CodeTimeout},
		{"profile huge", forge.UserAPI, forge.FaultHugeBody, "", providers.CodeInvalidResponse},
		{"profile 5xx", forge.UserAPI, forge.FaultServerError, "", providers.CodeInvalidResponse},
		{"profile not JSON", forge.UserAPI, forge.FaultNone, "<html>", providers.CodeInvalidResponse},
		{"profile id of the wrong type", forge.UserAPI, forge.FaultNone, `{"id":"583231","login":"x"}`, providers.CodeInvalidResponse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rig := newGothRig(t, "gh-secret", &http.Client{Timeout: faultTimeout(tc.fault == forge.FaultHang)})
			tx, authURL := rig.begin()
			cb := rig.consent(authURL)
			rig.fake.SetFault(tc.step, tc.fault)
			if tc.body != "" {
				rig.fake.SetProfileBody([]byte(tc.body))
			}
			start := time.Now()
			_, err := rig.strat.Complete(context.Background(), cb, tx)
			wantCode(t, err, tc.code)
			if d := time.Since(start); d > hangBound {
				t.Errorf("took %v", d)
			}
		})
	}
}

// Complete returns when its context ends even if goth's client would wait
// longer: the strategy, not goth, bounds the callback.
func TestGothHangHonoursContext(t *testing.T) {
	rig := newGothRig(t, "gh-secret", &http.Client{Timeout: slowTimeout})
	tx, authURL := rig.begin()
	cb := rig.consent(authURL)
	rig.fake.SetFault(forge.AccessToken, forge.FaultHang)
	ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
	defer cancel()
	start := time.Now()
	_, err := rig.strat.Complete(ctx, cb, tx)
	wantCode(t, err, providers.CodeTimeout)
	if d := time.Since(start); d > hangBound {
		t.Errorf("took %v", d)
	}
}

func TestGothRefusesForeignCallback(t *testing.T) {
	gh := github.New("id", "secret", "https://app.example/elsewhere")
	s := providers.Goth(gh)
	s.SetEnv(providers.Env{CallbackURL: ghCallback, HTTPClient: http.DefaultClient})
	_, err := s.Begin(context.Background(), newTx())
	wantCode(t, err, providers.CodeMisconfigured)
}

// stateless is a goth provider whose authorize URL drops the state: the
// adapter cannot bind its callback and must refuse to start.
type stateless struct{ *github.Provider }

type statelessSession struct{ github.Session }

func (s stateless) BeginAuth(string) (goth.Session, error) {
	return &statelessSession{github.Session{AuthURL: "https://forge.example/authorize?client_id=id"}}, nil
}

func TestGothRefusesProviderWithoutState(t *testing.T) {
	s := providers.Goth(stateless{github.New("id", "secret", ghCallback)})
	tx := newTx()
	_, err := s.Begin(context.Background(), tx)
	wantCode(t, err, providers.CodeMisconfigured)
	if tx.Extra["goth"] != "" {
		t.Error("session kept for a refused start")
	}
}

// panicky is a goth provider that panics on FetchUser.
type panicky struct{ *github.Provider }

func (panicky) FetchUser(goth.Session) (goth.User, error) { panic("boom") }

func TestGothPanicIsInvalidResponse(t *testing.T) {
	f := forge.New(forge.Options{ClientID: "gh-id", ClientSecret: "gh-secret", AutoApprove: true})
	srv := httptest.NewServer(f)
	defer srv.Close()
	a, tok, prof, email := forge.URLs(srv.URL)
	s := providers.Goth(panicky{github.NewCustomisedURL("gh-id", "gh-secret", ghCallback, a, tok, prof, email)})
	tx := newTx()
	authURL, err := s.Begin(context.Background(), tx)
	if err != nil {
		t.Fatal(err)
	}
	rig := &gothRig{t: t}
	_, err = s.Complete(context.Background(), rig.consent(authURL), tx)
	wantCode(t, err, providers.CodeInvalidResponse)
}

func TestGothErrorClassification(t *testing.T) {
	for _, tc := range []struct {
		status int
		code   string
		want   providers.Code
	}{
		{500, "", providers.CodeProviderUnavailable},
		{200, "temporarily_unavailable", providers.CodeProviderUnavailable},
		{401, "", providers.CodeInvalidCredentials},
		{400, "invalid_client", providers.CodeInvalidCredentials},
		{400, "invalid_grant", providers.CodeReplayed},
		{400, "redirect_uri_mismatch", providers.CodeMisconfigured},
		{400, "invalid_request", providers.CodeInvalidResponse},
	} {
		re := &oauth2.RetrieveError{Response: &http.Response{StatusCode: tc.status}, ErrorCode: tc.code, Body: []byte("secret-body")}
		pe := providers.GothErrorForTest(re)
		if pe.Code != tc.want || strings.Contains(pe.Error(), "secret-body") {
			t.Errorf("%d %s: %v", tc.status, tc.code, pe)
		}
	}
	// Free-text goth errors lose any URL query they quote.
	pe := providers.GothErrorForTest(errors.New(`Get "https://graph.example/me?access_token=EAAsecret&x=1": boom`))
	if strings.Contains(pe.Error(), "EAAsecret") || pe.Code != providers.CodeInvalidResponse {
		t.Errorf("got %v", pe)
	}
}
