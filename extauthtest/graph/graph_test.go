package graph_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/extauth/extauth/extauthtest/graph"
)

const cb = "https://app.example/users/auth/socialnet/callback"

var noFollow = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func start(t *testing.T, o graph.Options) (*graph.Server, string) {
	t.Helper()
	o.AppID, o.AppSecret = "app", "secret"
	f := graph.New(o)
	srv := httptest.NewServer(f)
	t.Cleanup(func() { f.Close(); srv.Close() })
	return f, srv.URL
}

// code runs the dialog and returns the code.
func code(t *testing.T, base, redirectURI, scope string) string {
	t.Helper()
	resp, err := noFollow.Get(base + "/v21.0/dialog/oauth?" + url.Values{
		"client_id": {"app"}, "redirect_uri": {redirectURI}, "state": {"s"}, "scope": {scope},
	}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusFound {
		t.Fatalf("dialog: %d %v", resp.StatusCode, err)
	}
	if loc.Query().Get("state") != "s" {
		t.Fatalf("state not returned: %s", loc)
	}
	return loc.Query().Get("code")
}

type graphErr struct {
	Error struct {
		Code    int `json:"code"`
		Subcode int `json:"error_subcode"`
	} `json:"error"`
}

func exchange(t *testing.T, base string, form url.Values) (int, map[string]any, graphErr) {
	t.Helper()
	resp, err := http.PostForm(base+"/v21.0/oauth/access_token", form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var ok map[string]any
	var ge graphErr
	json.Unmarshal(b, &ok)
	json.Unmarshal(b, &ge)
	return resp.StatusCode, ok, ge
}

func proof(token, secret string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(token))
	return hex.EncodeToString(m.Sum(nil))
}

func me(t *testing.T, base, rawQuery, bearer string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/v21.0/me?"+rawQuery, nil)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestExchangeChecks(t *testing.T) {
	_, base := start(t, graph.Options{AutoApprove: true, RedirectURIs: []string{cb, cb + "2"}})
	c := code(t, base, cb, "email")
	good := url.Values{"client_id": {"app"}, "client_secret": {"secret"}, "redirect_uri": {cb}, "code": {c}}
	with := func(k, v string) url.Values {
		f := url.Values{}
		for kk, vv := range good {
			f[kk] = vv
		}
		f.Set(k, v)
		return f
	}
	for _, tc := range []struct {
		name          string
		form          url.Values
		code, subcode int
	}{
		{"wrong secret", with("client_secret", "nope"), 1, 0},
		{"no secret", with("client_secret", ""), 1, 0},
		{"wrong app", with("client_id", "other"), 101, 0},
		{"other redirect_uri", with("redirect_uri", cb+"2"), 100, 0},
		{"unknown code", with("code", "forged"), 100, 0},
	} {
		st, _, ge := exchange(t, base, tc.form)
		if st != 400 || ge.Error.Code != tc.code || ge.Error.Subcode != tc.subcode {
			t.Errorf("%s: %d %+v", tc.name, st, ge)
		}
	}
	// Failed attempts do not spend the code; the right one does.
	st, tok, _ := exchange(t, base, good)
	if st != 200 || tok["access_token"] == "" || tok["token_type"] != "bearer" {
		t.Fatalf("exchange: %d %v", st, tok)
	}
	token := tok["access_token"].(string)
	if st, _ := me(t, base, "appsecret_proof="+proof(token, "secret"), token); st != 200 {
		t.Fatalf("me: %d", st)
	}
	st, _, ge := exchange(t, base, good)
	if st != 400 || ge.Error.Subcode != 36009 {
		t.Errorf("second use: %d %+v", st, ge)
	}
	// Reuse revoked the token the code bought.
	if st, _ := me(t, base, "appsecret_proof="+proof(token, "secret"), token); st != 400 {
		t.Errorf("token survived a code replay: %d", st)
	}
}

func TestCodeExpires(t *testing.T) {
	now := time.Now()
	_, base := start(t, graph.Options{AutoApprove: true, Now: func() time.Time { return now }})
	c := code(t, base, cb, "")
	now = now.Add(graph.CodeLifetime + time.Second)
	st, _, ge := exchange(t, base, url.Values{"client_id": {"app"}, "client_secret": {"secret"}, "redirect_uri": {cb}, "code": {c}})
	if st != 400 || ge.Error.Subcode != 36007 {
		t.Errorf("expired code: %d %+v", st, ge)
	}
}

func TestMeChecksProofAndScopes(t *testing.T) {
	f, base := start(t, graph.Options{AutoApprove: true})
	get := func(scope string) string {
		c := code(t, base, cb, scope)
		_, tok, _ := exchange(t, base, url.Values{"client_id": {"app"}, "client_secret": {"secret"}, "redirect_uri": {cb}, "code": {c}})
		return tok["access_token"].(string)
	}
	token := get("email")
	fields := "fields=id,name,email,first_name,last_name,picture"
	for _, tc := range []struct {
		name, query, bearer string
		status              int
	}{
		{"no proof", fields, token, 400},
		{"proof from another secret", fields + "&appsecret_proof=" + proof(token, "other"), token, 400},
		{"proof of another token", fields + "&appsecret_proof=" + proof("x", "secret"), token, 400},
		{"not hex", fields + "&appsecret_proof=zz", token, 400},
		{"no token", fields + "&appsecret_proof=" + proof(token, "secret"), "", 400},
		{"unknown field", "fields=id,password&appsecret_proof=" + proof(token, "secret"), token, 400},
		{"good", fields + "&appsecret_proof=" + proof(token, "secret"), token, 200},
	} {
		if st, body := me(t, base, tc.query, tc.bearer); st != tc.status {
			t.Errorf("%s: %d %s", tc.name, st, body)
		}
	}
	_, body := me(t, base, fields+"&appsecret_proof="+proof(token, "secret"), token)
	var p map[string]any
	json.Unmarshal([]byte(body), &p)
	if p["id"] != graph.DemoUser.ID || p["email"] != graph.DemoUser.Email {
		t.Errorf("profile %v", p)
	}
	// Without the email permission there is no email.
	t2 := get("public_profile")
	_, body = me(t, base, fields+"&appsecret_proof="+proof(t2, "secret"), t2)
	if strings.Contains(body, "email") {
		t.Errorf("email without the permission: %s", body)
	}
	// Only the fields asked for.
	_, body = me(t, base, "fields=id&appsecret_proof="+proof(token, "secret"), token)
	if strings.Contains(body, "name") {
		t.Errorf("fields not honoured: %s", body)
	}
	// The real API takes a token in the query; the fake counts it.
	if f.TokensInQuery() != 0 {
		t.Fatal("counter not zero")
	}
	me(t, base, "access_token="+token+"&appsecret_proof="+proof(token, "secret"), "")
	if f.TokensInQuery() != 1 {
		t.Errorf("token in query not counted")
	}
}

func TestDialogRefusesWithoutRedirecting(t *testing.T) {
	_, base := start(t, graph.Options{AutoApprove: true, RedirectURIs: []string{cb}})
	for name, q := range map[string]url.Values{
		"unregistered redirect": {"client_id": {"app"}, "redirect_uri": {"https://evil.example/cb"}},
		"no redirect":           {"client_id": {"app"}},
		"unknown app":           {"client_id": {"other"}, "redirect_uri": {cb}},
		"token flow":            {"client_id": {"app"}, "redirect_uri": {cb}, "response_type": {"token"}},
		"plain PKCE":            {"client_id": {"app"}, "redirect_uri": {cb}, "code_challenge": {"x"}, "code_challenge_method": {"plain"}},
	} {
		resp, err := noFollow.Get(base + "/v21.0/dialog/oauth?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 || resp.Header.Get("Location") != "" {
			t.Errorf("%s: %d, Location %q", name, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	resp, err := noFollow.Get(base + "/v2/dialog/oauth?" + url.Values{"client_id": {"app"}, "redirect_uri": {cb}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("bad version: %d", resp.StatusCode)
	}
}

func TestDialogPageUnderPrefix(t *testing.T) {
	f := graph.New(graph.Options{AppID: "app", AppSecret: "secret", Prefix: "/fake/socialnet",
		Users: []graph.User{{ID: "1", Name: "<img src=x onerror=alert(1)>"}}})
	mux := http.NewServeMux()
	mux.Handle("/fake/socialnet/", http.StripPrefix("/fake/socialnet", f))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/fake/socialnet/v21.0/dialog/oauth?" + url.Values{"client_id": {"app"}, "redirect_uri": {cb}, "state": {"st"}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(b)
	if strings.Contains(page, "<img") || !strings.Contains(page, `action="/fake/socialnet/v21.0/dialog/oauth"`) {
		t.Fatalf("page:\n%s", page)
	}
	_, rest, _ := strings.Cut(page, `name="request" value="`)
	id, _, _ := strings.Cut(rest, `"`)
	resp, err = noFollow.PostForm(srv.URL+"/fake/socialnet/v21.0/dialog/oauth", url.Values{"request": {id}, "user": {"1"}, "action": {"approve"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if loc.Query().Get("code") == "" || loc.Query().Get("state") != "st" || loc.Fragment != "_=_" {
		t.Errorf("approve redirect %s", loc)
	}
	// The dialog request is single use.
	resp, err = noFollow.PostForm(srv.URL+"/fake/socialnet/v21.0/dialog/oauth", url.Values{"request": {id}, "user": {"1"}, "action": {"approve"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("dialog decision replayed: %d", resp.StatusCode)
	}
}
