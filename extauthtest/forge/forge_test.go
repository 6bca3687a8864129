package forge_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/extauth/extauth/extauthtest/forge"
)

const cb = "https://app.example/users/auth/github/callback"

var noFollow = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func TestForgeChecks(t *testing.T) {
	f := forge.New(forge.Options{ClientID: "id", ClientSecret: "secret", CallbackURL: cb, AutoApprove: true})
	srv := httptest.NewServer(f)
	defer srv.Close()
	authURL, tokenURL, userURL, _ := forge.URLs(srv.URL)

	resp, err := noFollow.Get(authURL + "?" + url.Values{"client_id": {"id"}, "redirect_uri": {"https://evil.example/cb"}, "state": {"s"}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 || resp.Header.Get("Location") != "" {
		t.Errorf("foreign redirect_uri: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, err = noFollow.Get(authURL + "?" + url.Values{"client_id": {"id"}, "redirect_uri": {cb}, "state": {"s"}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	code := loc.Query().Get("code")
	if code == "" || loc.Query().Get("state") != "s" {
		t.Fatalf("authorize redirect %s", loc)
	}

	post := func(form url.Values, user, pass string) string {
		req, _ := http.NewRequest("POST", tokenURL, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if b := post(url.Values{"code": {code}, "client_id": {"id"}, "client_secret": {"nope"}}, "", ""); !strings.Contains(b, "incorrect_client_credentials") {
		t.Errorf("bad secret in body: %s", b)
	}
	if b := post(url.Values{"code": {code}}, "id", "nope"); !strings.Contains(b, "incorrect_client_credentials") {
		t.Errorf("bad secret in Basic: %s", b)
	}
	if b := post(url.Values{"code": {code}, "redirect_uri": {cb + "x"}}, "id", "secret"); !strings.Contains(b, "redirect_uri_mismatch") {
		t.Errorf("redirect mismatch: %s", b)
	}
	b := post(url.Values{"code": {code}, "redirect_uri": {cb}}, "id", "secret")
	v, _ := url.ParseQuery(b)
	if v.Get("access_token") == "" {
		t.Fatalf("exchange: %s", b)
	}
	if b := post(url.Values{"code": {code}}, "id", "secret"); !strings.Contains(b, "bad_verification_code") {
		t.Errorf("code reused: %s", b)
	}
	req, _ := http.NewRequest("GET", userURL, nil)
	req.Header.Set("Authorization", "Bearer "+v.Get("access_token"))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), forge.DemoUser.Login) {
		t.Errorf("user: %d %s", resp.StatusCode, body)
	}
	req.Header.Set("Authorization", "Bearer forged")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("forged token: %d", resp.StatusCode)
	}
}

func TestForgeDeny(t *testing.T) {
	f := forge.New(forge.Options{ClientID: "id", ClientSecret: "secret", Prefix: "/fake/forge"})
	mux := http.NewServeMux()
	mux.Handle("/fake/forge/", http.StripPrefix("/fake/forge", f))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	q := url.Values{"client_id": {"id"}, "redirect_uri": {cb}, "state": {"s<>"}}
	resp, err := http.Get(srv.URL + "/fake/forge/login/oauth/authorize?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), `action="/fake/forge/login/oauth/authorize"`) || strings.Contains(string(page), "s<>") {
		t.Fatalf("page:\n%s", page)
	}
	form := url.Values{"action": {"deny"}}
	for k, vs := range q {
		form[k] = vs
	}
	resp, err = noFollow.PostForm(srv.URL+"/fake/forge/login/oauth/authorize", form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if loc.Query().Get("error") != "access_denied" || loc.Query().Get("state") != "s<>" {
		t.Errorf("deny redirect %s", loc)
	}
}
