package oauth1_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	fake "github.com/extauth/extauth/extauthtest/oauth1"
	signer "github.com/extauth/extauth/internal/oauth1"
)

const cb = "https://app.example/users/auth/microblog/callback"

func newFake(t *testing.T, o fake.Options) (*fake.Server, *httptest.Server) {
	t.Helper()
	if o.ConsumerKey == "" {
		o.ConsumerKey, o.ConsumerSecret = "ck", "cs"
	}
	f := fake.New(o)
	srv := httptest.NewServer(f)
	t.Cleanup(func() { f.Close(); srv.Close() })
	return f, srv
}

// send signs and sends a request with extauth's signer; form, when not
// nil, is sent as a form-encoded body and signed as such.
func send(t *testing.T, c *signer.Consumer, method, rawURL string, form url.Values, sr signer.Request) (int, string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	sr.Method, sr.URL, sr.Form = method, u, form
	auth, err := c.Authorization(sr)
	if err != nil {
		t.Fatal(err)
	}
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, rawURL, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("Authorization", auth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// signIn runs the three legs and returns the access token and secret.
func signIn(t *testing.T, c *signer.Consumer, base string) (string, string) {
	t.Helper()
	st, body := send(t, c, "POST", base+"/oauth/request_token", nil, signer.Request{OAuth: map[string]string{"oauth_callback": cb}})
	if st != 200 {
		t.Fatalf("request_token: %d %s", st, body)
	}
	v, _ := url.ParseQuery(body)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(base + "/oauth/authenticate?oauth_token=" + url.QueryEscape(v.Get("oauth_token")))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	st, body = send(t, c, "POST", base+"/oauth/access_token", nil, signer.Request{
		Token: v.Get("oauth_token"), TokenSecret: v.Get("oauth_token_secret"),
		OAuth: map[string]string{"oauth_verifier": loc.Query().Get("oauth_verifier")},
	})
	if st != 200 {
		t.Fatalf("access_token: %d %s", st, body)
	}
	a, _ := url.ParseQuery(body)
	return a.Get("oauth_token"), a.Get("oauth_token_secret")
}

// Two independent encoders (extauth's signer and the fake's, built on
// url.QueryEscape) must agree on every awkward parameter, in the query and
// in a form body, or one of them is wrong.
func TestSignaturesAgreeOnAwkwardParameters(t *testing.T) {
	_, srv := newFake(t, fake.Options{AutoApprove: true})
	c := &signer.Consumer{Key: "ck", Secret: "cs"}
	token, secret := signIn(t, c, srv.URL)
	for _, v := range []string{"a b", "a+b", "~tilde", "*star", "é日本😀", "=&%/?#", "", "a%20b", "\x00"} {
		q := url.Values{"include_email": {"true"}, "skip_status": {"true"}, "p": {v}, v + "k": {"x", "w"}}
		st, body := send(t, c, "GET", srv.URL+"/1.1/account/verify_credentials.json?"+q.Encode(), nil,
			signer.Request{Token: token, TokenSecret: secret})
		if st != 200 {
			t.Errorf("query %q: %d %s", v, st, body)
		}
	}
	// A form body is covered by the signature too: request_token accepts one.
	for _, v := range []string{"a b", "+", "~*", "é", "x=y&z"} {
		st, body := send(t, c, "POST", srv.URL+"/oauth/request_token", url.Values{"x_auth_access_type": {v}},
			signer.Request{OAuth: map[string]string{"oauth_callback": cb}})
		if st != 200 {
			t.Errorf("form %q: %d %s", v, st, body)
		}
	}
}

func TestRejectsTamperedRequests(t *testing.T) {
	_, srv := newFake(t, fake.Options{AutoApprove: true})
	c := &signer.Consumer{Key: "ck", Secret: "cs"}
	token, secret := signIn(t, c, srv.URL)
	vc := srv.URL + "/1.1/account/verify_credentials.json?include_email=true"
	u, _ := url.Parse(vc)
	auth, _ := c.Authorization(signer.Request{Method: "GET", URL: u, Token: token, TokenSecret: secret})

	do := func(rawURL, auth string) int {
		req, _ := http.NewRequest("GET", rawURL, nil)
		req.Header.Set("Authorization", auth)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// Changing a signed query parameter breaks the signature.
	if st := do(srv.URL+"/1.1/account/verify_credentials.json?include_email=false", auth); st != 401 {
		t.Errorf("altered query: %d", st)
	}
	// The genuine request passes once...
	if st := do(vc, auth); st != 200 {
		t.Fatalf("genuine: %d", st)
	}
	// ...and its nonce is then spent.
	if st := do(vc, auth); st != 401 {
		t.Errorf("replayed nonce: %d", st)
	}
	// The access token without its secret opens nothing.
	st, _ := send(t, c, "GET", vc, nil, signer.Request{Token: token})
	if st != 401 {
		t.Errorf("token without secret: %d", st)
	}
	// Another consumer secret is refused.
	st, _ = send(t, &signer.Consumer{Key: "ck", Secret: "other"}, "GET", vc, nil, signer.Request{Token: token, TokenSecret: secret})
	if st != 401 {
		t.Errorf("wrong consumer secret: %d", st)
	}
	// Another consumer key too.
	st, _ = send(t, &signer.Consumer{Key: "other", Secret: "cs"}, "GET", vc, nil, signer.Request{Token: token, TokenSecret: secret})
	if st != 401 {
		t.Errorf("wrong consumer key: %d", st)
	}
	// No Authorization header at all.
	if st := do(vc, ""); st != 400 {
		t.Errorf("unsigned: %d", st)
	}
}

func TestTimestampWindow(t *testing.T) {
	_, srv := newFake(t, fake.Options{AutoApprove: true, Window: time.Minute})
	for _, skew := range []time.Duration{-2 * time.Minute, 2 * time.Minute} {
		c := &signer.Consumer{Key: "ck", Secret: "cs", Now: func() time.Time { return time.Now().Add(skew) }}
		st, body := send(t, c, "POST", srv.URL+"/oauth/request_token", nil, signer.Request{OAuth: map[string]string{"oauth_callback": cb}})
		if st != 401 || !strings.Contains(body, "135") {
			t.Errorf("skew %v: %d %s", skew, st, body)
		}
	}
	c := &signer.Consumer{Key: "ck", Secret: "cs", Now: func() time.Time { return time.Now().Add(-30 * time.Second) }}
	if st, body := send(t, c, "POST", srv.URL+"/oauth/request_token", nil, signer.Request{OAuth: map[string]string{"oauth_callback": cb}}); st != 200 {
		t.Errorf("within the window: %d %s", st, body)
	}
}

func TestNonceOncePerTimestamp(t *testing.T) {
	_, srv := newFake(t, fake.Options{})
	fixed := time.Now()
	c := &signer.Consumer{Key: "ck", Secret: "cs", Now: func() time.Time { return fixed }, Nonce: func() (string, error) { return "same", nil }}
	req := signer.Request{OAuth: map[string]string{"oauth_callback": cb}}
	if st, body := send(t, c, "POST", srv.URL+"/oauth/request_token", nil, req); st != 200 {
		t.Fatalf("first: %d %s", st, body)
	}
	if st, _ := send(t, c, "POST", srv.URL+"/oauth/request_token", nil, req); st != 401 {
		t.Errorf("same nonce and timestamp accepted twice: %d", st)
	}
}

func TestRequestTokenRules(t *testing.T) {
	_, srv := newFake(t, fake.Options{CallbackURLs: []string{cb}})
	c := &signer.Consumer{Key: "ck", Secret: "cs"}
	for _, tc := range []struct {
		callback string
		status   int
	}{
		{cb, 200},
		{"", 400},
		{"oob", 400},
		{"https://evil.example/cb", 403},
	} {
		oauth := map[string]string{}
		if tc.callback != "" {
			oauth["oauth_callback"] = tc.callback
		}
		if st, body := send(t, c, "POST", srv.URL+"/oauth/request_token", nil, signer.Request{OAuth: oauth}); st != tc.status {
			t.Errorf("callback %q: %d %s", tc.callback, st, body)
		}
	}
	// A request token request must not name a token.
	if st, _ := send(t, c, "POST", srv.URL+"/oauth/request_token", nil, signer.Request{Token: "t", OAuth: map[string]string{"oauth_callback": cb}}); st != 401 {
		t.Errorf("token on request_token: %d", st)
	}
}

// Two exchanges of one approved request token race; exactly one wins.
func TestVerifierSingleUseUnderRace(t *testing.T) {
	_, srv := newFake(t, fake.Options{AutoApprove: true})
	c := &signer.Consumer{Key: "ck", Secret: "cs"}
	st, body := send(t, c, "POST", srv.URL+"/oauth/request_token", nil, signer.Request{OAuth: map[string]string{"oauth_callback": cb}})
	if st != 200 {
		t.Fatal(body)
	}
	v, _ := url.ParseQuery(body)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(srv.URL + "/oauth/authenticate?oauth_token=" + url.QueryEscape(v.Get("oauth_token")))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, _ := send(t, c, "POST", srv.URL+"/oauth/access_token", nil, signer.Request{
				Token: v.Get("oauth_token"), TokenSecret: v.Get("oauth_token_secret"),
				OAuth: map[string]string{"oauth_verifier": loc.Query().Get("oauth_verifier")},
			})
			if st == 200 {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if wins != 1 {
		t.Errorf("%d exchanges of one verifier succeeded", wins)
	}
}

func TestUnapprovedTokenCannotBeExchanged(t *testing.T) {
	_, srv := newFake(t, fake.Options{})
	c := &signer.Consumer{Key: "ck", Secret: "cs"}
	_, body := send(t, c, "POST", srv.URL+"/oauth/request_token", nil, signer.Request{OAuth: map[string]string{"oauth_callback": cb}})
	v, _ := url.ParseQuery(body)
	st, _ := send(t, c, "POST", srv.URL+"/oauth/access_token", nil, signer.Request{
		Token: v.Get("oauth_token"), TokenSecret: v.Get("oauth_token_secret"),
		OAuth: map[string]string{"oauth_verifier": ""},
	})
	if st != 401 {
		t.Errorf("unapproved token exchanged: %d", st)
	}
}

func TestConsentPageEscapesAndOffersDeny(t *testing.T) {
	_, srv := newFake(t, fake.Options{Prefix: "/fake/mb", Users: []fake.User{{ID: "1", ScreenName: "x", Name: "<script>alert(1)</script>"}}})
	c := &signer.Consumer{Key: "ck", Secret: "cs"}
	_, body := send(t, c, "POST", srv.URL+"/oauth/request_token", nil, signer.Request{OAuth: map[string]string{"oauth_callback": cb}})
	v, _ := url.ParseQuery(body)
	resp, err := http.Get(srv.URL + "/oauth/authenticate?oauth_token=" + url.QueryEscape(v.Get("oauth_token")))
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	s := string(page)
	if strings.Contains(s, "<script>") || !strings.Contains(s, `action="/fake/mb/oauth/authenticate"`) || !strings.Contains(s, `value="deny"`) {
		t.Errorf("page:\n%s", s)
	}
	resp, err = http.Get(srv.URL + "/oauth/authenticate?oauth_token=unknown")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("unknown token page: %d", resp.StatusCode)
	}
}

func TestHangEndsWithClose(t *testing.T) {
	f, srv := newFake(t, fake.Options{})
	f.SetFault(fake.RequestToken, fake.FaultHang)
	done := make(chan int)
	go func() {
		resp, err := http.Post(srv.URL+"/oauth/request_token", "", nil)
		if err != nil {
			done <- -1
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	time.Sleep(50 * time.Millisecond)
	f.Close()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("hanging handler did not end on Close")
	}
	if f.Calls(fake.RequestToken) != 1 {
		t.Errorf("calls %d", f.Calls(fake.RequestToken))
	}
}
