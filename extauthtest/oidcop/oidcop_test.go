package oidcop_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/extauth/extauth/extauthtest/oidcop"
)

const (
	clientID = "client"
	secret   = "se cret:+%"
	redirect = "https://app.example/cb"
	verifier = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGH"
)

func challenge(v string) string {
	sum := sha256.Sum256([]byte(v))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// start mounts the OP under /op on a mux, as the demo does.
func start(t *testing.T, edit func(*oidcop.Config)) (*oidcop.OP, *httptest.Server) {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	cfg := oidcop.Config{
		Issuer: srv.URL + "/op", ClientID: clientID, ClientSecret: secret,
		RedirectURIs: []string{redirect}, AutoApprove: true, Alg: "ES256",
	}
	if edit != nil {
		edit(&cfg)
	}
	op, err := oidcop.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux.Handle("/op/", op)
	return op, srv
}

var noFollow = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func authorizeQuery() url.Values {
	return url.Values{
		"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {redirect},
		"scope": {"openid email"}, "state": {"st"}, "nonce": {"n"},
		"code_challenge": {challenge(verifier)}, "code_challenge_method": {"S256"},
	}
}

// code runs an authorization request and returns the callback parameters.
func code(t *testing.T, op *oidcop.OP, q url.Values) url.Values {
	t.Helper()
	resp, err := noFollow.Get(op.Issuer() + "/authorize?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("authorize: %d", resp.StatusCode)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || !strings.HasPrefix(loc.String(), redirect+"?") {
		t.Fatalf("redirected to %q", resp.Header.Get("Location"))
	}
	return loc.Query()
}

func tokenRequest(t *testing.T, op *oidcop.OP, form url.Values, basic bool) (int, map[string]any) {
	t.Helper()
	if !basic {
		form.Set("client_id", clientID)
		form.Set("client_secret", secret)
	}
	req, _ := http.NewRequest(http.MethodPost, op.Issuer()+"/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if basic {
		req.SetBasicAuth(url.QueryEscape(clientID), url.QueryEscape(secret))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func grantForm(c string) url.Values {
	return url.Values{"grant_type": {"authorization_code"}, "code": {c}, "redirect_uri": {redirect}, "code_verifier": {verifier}}
}

func TestTokenEndpointChecks(t *testing.T) {
	op, _ := start(t, nil)
	cb := code(t, op, authorizeQuery())
	if cb.Get("state") != "st" || cb.Get("iss") != op.Issuer() {
		t.Fatalf("callback parameters %v", cb)
	}
	for name, f := range map[string]url.Values{
		"wrong redirect_uri": {"grant_type": {"authorization_code"}, "code": {cb.Get("code")}, "redirect_uri": {redirect + "x"}, "code_verifier": {verifier}},
		"wrong verifier":     {"grant_type": {"authorization_code"}, "code": {cb.Get("code")}, "redirect_uri": {redirect}, "code_verifier": {verifier + "x"}},
	} {
		// Each failure burns the code, as real servers do.
		c := code(t, op, authorizeQuery()).Get("code")
		f.Set("code", c)
		if status, body := tokenRequest(t, op, f, true); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
			t.Errorf("%s: %d %v", name, status, body)
		}
	}
	status, body := tokenRequest(t, op, grantForm(cb.Get("code")), true)
	if status != http.StatusOK || body["id_token"] == nil || body["access_token"] == nil {
		t.Fatalf("exchange: %d %v", status, body)
	}
	if status, body := tokenRequest(t, op, grantForm(cb.Get("code")), true); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Errorf("code reused: %d %v", status, body)
	}
	// UserInfo with the access token.
	req, _ := http.NewRequest(http.MethodGet, op.Issuer()+"/userinfo", nil)
	req.Header.Set("Authorization", "Bearer "+body["access_token"].(string))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var info map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&info)
	resp.Body.Close()
	if info["sub"] != oidcop.DemoUsers()[0].Sub || info["email"] != oidcop.DemoUsers()[0].Email {
		t.Errorf("userinfo %v", info)
	}
}

func TestClientAuthenticationMethods(t *testing.T) {
	for _, method := range []string{"client_secret_basic", "client_secret_post"} {
		t.Run(method, func(t *testing.T) {
			op, _ := start(t, func(c *oidcop.Config) { c.AuthMethod = method })
			basic := method == "client_secret_basic"
			if status, _ := tokenRequest(t, op, grantForm(code(t, op, authorizeQuery()).Get("code")), !basic); status != http.StatusUnauthorized {
				t.Errorf("the other method: %d, want 401", status)
			}
			if status, body := tokenRequest(t, op, grantForm(code(t, op, authorizeQuery()).Get("code")), basic); status != http.StatusOK {
				t.Errorf("registered method: %d %v", status, body)
			}
		})
	}
}

func TestBasicAuthIsFormURLEncoded(t *testing.T) {
	op, _ := start(t, nil)
	form := grantForm(code(t, op, authorizeQuery()).Get("code"))
	req, _ := http.NewRequest(http.MethodPost, op.Issuer()+"/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	// The raw secret contains characters that form-urlencoding changes.
	req.SetBasicAuth(clientID, secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a secret sent without form-urlencoding: %d, want 401", resp.StatusCode)
	}
}

func TestAuthorizeRefusals(t *testing.T) {
	op, _ := start(t, nil)
	for name, edit := range map[string]func(url.Values){
		"no PKCE":    func(q url.Values) { q.Del("code_challenge") },
		"plain PKCE": func(q url.Values) { q.Set("code_challenge_method", "plain") },
		"no openid":  func(q url.Values) { q.Set("scope", "email") },
	} {
		q := authorizeQuery()
		edit(q)
		if cb := code(t, op, q); cb.Get("error") == "" || cb.Get("code") != "" {
			t.Errorf("%s: %v", name, cb)
		}
	}
	for name, edit := range map[string]func(url.Values){
		"unregistered redirect_uri": func(q url.Values) { q.Set("redirect_uri", "https://evil.example/cb") },
		"unknown client":            func(q url.Values) { q.Set("client_id", "other") },
	} {
		q := authorizeQuery()
		edit(q)
		resp, err := noFollow.Get(op.Issuer() + "/authorize?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400 and no redirect", name, resp.StatusCode)
		}
	}
}

func TestConsentPage(t *testing.T) {
	op, srv := start(t, func(c *oidcop.Config) { c.AutoApprove = false })
	for _, decision := range []string{"approve", "deny"} {
		resp, err := noFollow.Get(op.Issuer() + "/authorize?" + authorizeQuery().Encode())
		if err != nil {
			t.Fatal(err)
		}
		page, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		body := string(page)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Approve") || !strings.Contains(body, "Deny") {
			t.Fatalf("consent page: %d %s", resp.StatusCode, body)
		}
		i := strings.Index(body, `name="interaction" value="`)
		interaction := body[i+len(`name="interaction" value="`):]
		interaction = interaction[:strings.Index(interaction, `"`)]
		bob := oidcop.DemoUsers()[1].Sub
		resp, err = noFollow.PostForm(srv.URL+"/op/authorize/decision", url.Values{
			"interaction": {interaction}, "decision": {decision}, "user": {bob},
		})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc, _ := url.Parse(resp.Header.Get("Location"))
		q := loc.Query()
		switch decision {
		case "approve":
			if q.Get("code") == "" || q.Get("state") != "st" {
				t.Errorf("approve: %v", q)
			}
		case "deny":
			if q.Get("error") != "access_denied" || q.Get("state") != "st" || q.Get("iss") != op.Issuer() {
				t.Errorf("deny: %v", q)
			}
		}
	}
}

func TestHangEndsWithTheRequest(t *testing.T) {
	op, _ := start(t, nil)
	op.SetFaults(oidcop.TokenHang)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, op.Issuer()+"/token", strings.NewReader(""))
	start := time.Now()
	_, err := http.DefaultClient.Do(req)
	if err == nil || time.Since(start) > 30*time.Second {
		t.Errorf("hang: err=%v after %s", err, time.Since(start))
	}
}

func TestJWKSPublishesEveryKey(t *testing.T) {
	op, _ := start(t, nil)
	first := op.ActiveKid()
	second, err := op.RotateKey()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(op.Issuer() + "/jwks")
	if err != nil {
		t.Fatal(err)
	}
	var set struct {
		Keys []struct {
			Kid, Alg, Use, Kty string
			D                  string `json:"d"`
		}
	}
	_ = json.NewDecoder(resp.Body).Decode(&set)
	resp.Body.Close()
	if len(set.Keys) != 2 || set.Keys[0].Kid != first || set.Keys[1].Kid != second {
		t.Fatalf("keys %+v", set.Keys)
	}
	for _, k := range set.Keys {
		if k.D != "" || k.Alg != "ES256" || k.Use != "sig" || k.Kty != "EC" {
			t.Errorf("key %+v", k)
		}
	}
	if op.Hits(oidcop.JWKS) != 1 {
		t.Errorf("hits %d", op.Hits(oidcop.JWKS))
	}
}

// TestRefreshGrantRotates: offline access brings a refresh token, which
// renews the tokens once (it rotates) and names the same session.
func TestRefreshGrantRotates(t *testing.T) {
	op, _ := start(t, nil)
	q := authorizeQuery()
	q.Set("scope", "openid email offline_access")
	_, body := tokenRequest(t, op, grantForm(code(t, op, q).Get("code")), true)
	rt, _ := body["refresh_token"].(string)
	if rt == "" {
		t.Fatalf("no refresh token: %v", body)
	}
	refresh := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}}
	status, renewed := tokenRequest(t, op, refresh, true)
	if status != http.StatusOK || renewed["access_token"] == body["access_token"] || renewed["refresh_token"] == rt || renewed["id_token"] == nil {
		t.Fatalf("refresh: %d %v", status, renewed)
	}
	if status, again := tokenRequest(t, op, refresh, true); status != http.StatusBadRequest || again["error"] != "invalid_grant" {
		t.Errorf("spent refresh token: %d %v", status, again)
	}
}

// TestEndSessionChecks: the end_session_endpoint takes only the client's
// registered post_logout_redirect_uri and its own ID tokens as hints, ends
// the session the hint names, and returns the state.
func TestEndSessionChecks(t *testing.T) {
	const postLogout = "https://app.example/signed-out"
	op, _ := start(t, func(c *oidcop.Config) { c.PostLogoutRedirectURIs = []string{postLogout} })
	_, body := tokenRequest(t, op, grantForm(code(t, op, authorizeQuery()).Get("code")), true)
	idToken := body["id_token"].(string)
	sub := oidcop.DemoUsers()[0].Sub
	if len(op.Sessions(sub)) != 1 {
		t.Fatalf("sessions %v", op.Sessions(sub))
	}
	forged, err := op.LogoutToken(sub, "", oidcop.LogoutWrongKey)
	if err != nil {
		t.Fatal(err)
	}
	end := func(q url.Values) *http.Response {
		resp, err := noFollow.Get(op.Issuer() + "/end_session?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for name, q := range map[string]url.Values{
		"unregistered redirect": {"id_token_hint": {idToken}, "post_logout_redirect_uri": {"https://evil.example/"}},
		"another client":        {"client_id": {"other"}, "post_logout_redirect_uri": {postLogout}},
		"forged hint":           {"id_token_hint": {forged}, "post_logout_redirect_uri": {postLogout}},
	} {
		if resp := end(q); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d", name, resp.StatusCode)
		}
	}
	resp := end(url.Values{"id_token_hint": {idToken}, "client_id": {clientID}, "post_logout_redirect_uri": {postLogout}, "state": {"s t"}})
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != postLogout+"?state=s+t" {
		t.Errorf("logout: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if got := op.Sessions(sub); len(got) != 0 {
		t.Errorf("sessions left: %v", got)
	}
}
