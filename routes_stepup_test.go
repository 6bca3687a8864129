package extauth_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/oidcop"
	"github.com/extauth/extauth/internal/harness"
)

// hostSessions is a host's own sessions: the identity of each session
// cookie, set by the sign-in hook.
type hostSessions struct {
	mu   sync.Mutex
	byID map[string]*extauth.Identity
	n    int
}

const sessionCookie = "app_session"

// hook starts a session for id and returns to where the sign-in was
// asked for.
func (s *hostSessions) hook(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
	s.mu.Lock()
	s.n++
	sid := fmt.Sprintf("s%d", s.n)
	s.byID[sid] = id
	s.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: sid, Path: "/"})
	http.Redirect(w, r, extauth.ReturnTo(r), http.StatusSeeOther)
}

func (s *hostSessions) current(r *http.Request) *extauth.Identity {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byID[c.Value]
}

// stepUpApp is an application whose /pay needs the host level high,
// signed in within five minutes.
func stepUpApp(t *testing.T, allowed ...string) (*oidcApp, *hostSessions) {
	t.Helper()
	sessions := &hostSessions{byID: map[string]*extauth.Identity{}}
	need := extauth.Assurance{Level: "high", MaxAge: 5 * time.Minute}
	a := newOIDCApp(t, oidcSetup{
		opts: func(o *extauth.Options) {
			withOptions(allowed...)(o)
			o.OnSuccess = sessions.hook
		},
		mux: func(mux *http.ServeMux, auth *extauth.Auth) {
			mux.Handle("/pay", auth.RequireAssurance(need, sessions.current)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				id := sessions.current(r)
				fmt.Fprintf(w, "paid as %s at %s", id.UID, id.ACR)
			})))
		},
	})
	return a, sessions
}

// The step-up round trip: a session too weak for /pay gets a page that
// starts a sign-in at the level, which comes back to /pay at that level.
func TestStepUpRoundTrip(t *testing.T) {
	a, _ := stepUpApp(t, "level", "max_age")
	b := harness.NewBrowser(t)
	b.Header.Set("Accept", "text/html")
	if resp := b.PostForm(a.URL+"/users/auth/oidc", nil); resp.Body != "home" {
		t.Fatalf("first sign-in: %d %s", resp.StatusCode, resp.Body)
	}
	page := b.Get(a.URL + "/pay?amount=10")
	if page.StatusCode != http.StatusUnauthorized || !strings.Contains(page.Body, "<script") ||
		page.Header.Get("X-Frame-Options") != "DENY" || page.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("step-up page: %d %v\n%s", page.StatusCode, page.Header, page.Body)
	}
	if need, ok := extauth.ParseStepUpChallenge(page.Header); !ok || strings.Join(need.ACRValues, " ") != acrHigh || need.MaxAge != 5*time.Minute {
		t.Errorf("challenge %q reads as %+v %v", page.Header.Get("WWW-Authenticate"), need, ok)
	}
	resp := submitForm(t, b, page, nil)
	if resp.StatusCode != http.StatusOK || resp.URL.RequestURI() != "/pay?amount=10" || resp.Body != "paid as "+oidcop.DemoUsers()[0].Sub+" at "+acrHigh {
		t.Fatalf("after the step-up: %d %s %s", resp.StatusCode, resp.URL, resp.Body)
	}
	if got := a.OP.LastRequestParams(); got.Get("acr_values") != acrHigh || got.Get("max_age") != "300" {
		t.Errorf("the provider was asked %v", got)
	}
	// Now strong and fresh enough: no step-up.
	if resp := b.Get(a.URL + "/pay"); resp.StatusCode != http.StatusOK {
		t.Errorf("second visit: %d %s", resp.StatusCode, resp.Body)
	}
	// Six minutes later it is not fresh any more.
	a.clock.Add(6 * time.Minute)
	if resp := b.Get(a.URL + "/pay"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("after max_age: %d %s", resp.StatusCode, resp.Body)
	}
}

// A step-up is of the session's account: one that comes back as another
// (the provider's session was someone else's) is refused, and the host's
// session keeps its identity.
func TestStepUpRefusesAnotherAccount(t *testing.T) {
	a, sessions := stepUpApp(t, "level", "max_age")
	sessions.byID["mallory"] = &extauth.Identity{Provider: "oidc", UID: "mallory-sub"}
	b := harness.NewBrowser(t)
	b.Header.Set("Accept", "text/html")
	b.Jar.SetCookies(mustURL(a.URL), []*http.Cookie{{Name: sessionCookie, Value: "mallory"}})
	page := b.Get(a.URL + "/pay")
	resp := submitForm(t, b, page, nil)
	wantCode(t, resp, http.StatusForbidden, "access_denied")
	if sessions.n != 0 {
		t.Errorf("the hook ran for another account")
	}
	// The field is sealed: changed, it refuses the start.
	fields := url.Values{}
	for _, m := range hiddenRe.FindAllStringSubmatch(page.Body, -1) {
		fields.Set(m[1], m[2])
	}
	fields.Set("extauth_account", fields.Get("extauth_account")[1:])
	wantCode(t, b.PostForm(a.URL+"/users/auth/oidc", fields), http.StatusBadRequest, "invalid_response")
}

// A request that is not a browser's navigation gets RFC 9470's 401 and
// JSON saying what to post; one from another site gets a page that waits
// for a click.
func TestStepUpAnswers(t *testing.T) {
	a, sessions := stepUpApp(t, "level", "max_age")
	sessions.byID["weak"] = &extauth.Identity{Provider: "oidc", UID: "alice", ACR: acrSubstantial, AuthTime: time.Now()}
	b := harness.NewBrowser(t).NoFollow()
	b.Jar.SetCookies(mustURL(a.URL), []*http.Cookie{{Name: sessionCookie, Value: "weak"}})

	b.Header.Set("Accept", "application/json")
	resp := b.Get(a.URL + "/pay")
	var body struct {
		Error  string     `json:"error"`
		PostTo string     `json:"post_to"`
		Form   url.Values `json:"form"`
	}
	if resp.StatusCode != http.StatusUnauthorized || json.Unmarshal([]byte(resp.Body), &body) != nil ||
		body.Error != "insufficient_user_authentication" || body.PostTo != "/users/auth/oidc" ||
		body.Form.Get("level") != "high" || body.Form.Get("max_age") != "300" || body.Form.Get("return_to") != "/pay" {
		t.Fatalf("JSON answer: %d %s", resp.StatusCode, resp.Body)
	}
	if !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), `Bearer error="insufficient_user_authentication"`) {
		t.Errorf("WWW-Authenticate %q", resp.Header.Get("WWW-Authenticate"))
	}

	b.Header.Set("Accept", "text/html")
	b.Header.Set("Sec-Fetch-Site", "cross-site")
	resp = b.Get(a.URL + "/pay")
	if resp.StatusCode != http.StatusUnauthorized || strings.Contains(resp.Body, "<script") || !strings.Contains(resp.Body, `<button type="submit"`) {
		t.Errorf("a step-up from another site's link submits itself: %d\n%s", resp.StatusCode, resp.Body)
	}

	b.Header.Set("Sec-Fetch-Site", "same-origin")
	b.Jar.SetCookies(mustURL(a.URL), []*http.Cookie{{Name: sessionCookie, Value: "none"}})
	if resp := b.Get(a.URL + "/pay"); resp.StatusCode != http.StatusUnauthorized || strings.Contains(resp.Body, "form") {
		t.Errorf("no session: %d %s", resp.StatusCode, resp.Body)
	}
}

// A step-up the provider cannot be asked for ends in OnFailure, never in a
// sign-in that would come back as weak as before and loop.
func TestStepUpThatCannotBeAsked(t *testing.T) {
	a, sessions := stepUpApp(t, "max_age") // level is not allowed
	sessions.byID["weak"] = &extauth.Identity{Provider: "oidc", UID: "alice"}
	sessions.byID["oauth"] = &extauth.Identity{Provider: "blog_oauth2", UID: "7"}
	b := harness.NewBrowser(t).NoFollow()
	b.Header.Set("Accept", "text/html")
	for session, want := range map[string]string{"weak": "misconfigured", "oauth": "insufficient_user_authentication"} {
		b.Jar.SetCookies(mustURL(a.URL), []*http.Cookie{{Name: sessionCookie, Value: session}})
		resp := b.Get(a.URL + "/pay")
		if resp.StatusCode < 400 || !strings.Contains(resp.Body, want) || strings.Contains(resp.Body, "<form") {
			t.Errorf("%s: %d %s, want a failure with %s", session, resp.StatusCode, resp.Body, want)
		}
	}
	if n := a.OP.Hits(oidcop.Authorize); n != 0 {
		t.Errorf("the provider was asked %d times", n)
	}
}

// Satisfies holds an identity to the level's values at its provider and to
// the age, with the provider's clock skew, and nothing else.
func TestSatisfies(t *testing.T) {
	a := newOIDCApp(t, oidcSetup{opts: withOptions("level")})
	now := a.clock.Now()
	id := func(acr string, at time.Time) *extauth.Identity {
		return &extauth.Identity{Provider: "oidc", UID: "u", ACR: acr, AuthTime: at}
	}
	high5 := extauth.Assurance{Level: "high", MaxAge: 5 * time.Minute}
	for _, tc := range []struct {
		id   *extauth.Identity
		need extauth.Assurance
		want bool
	}{
		{id(acrHigh, now), high5, true},
		{id(acrHigh, now.Add(-5*time.Minute-50*time.Second)), high5, true}, // within the skew
		{id(acrHigh, now.Add(-7*time.Minute)), high5, false},
		{id(acrHigh, now.Add(5*time.Minute)), high5, false}, // in the future
		{id(acrHigh, time.Time{}), high5, false},
		{id(acrSubstantial, now), high5, false},
		{id(acrSubstantial, now), extauth.Assurance{Level: "substantial"}, true},
		{id("", now), extauth.Assurance{Level: "substantial"}, false},
		{id(acrHigh, now), extauth.Assurance{Level: "supreme"}, false},
		{id("x", now), extauth.Assurance{ACRValues: []string{"x", "y"}}, true},
		{id("z", now), extauth.Assurance{ACRValues: []string{"x", "y"}}, false},
		{id("", now.Add(-30*time.Second)), extauth.Assurance{MaxAge: -1}, true},
		{id("", now.Add(-2*time.Minute)), extauth.Assurance{MaxAge: -1}, false},
		{id("", time.Time{}), extauth.Assurance{}, true},
		{&extauth.Identity{Provider: "saml", ACR: acrHigh, AuthTime: now}, extauth.Assurance{Level: "high"}, false},
		{nil, extauth.Assurance{}, false},
	} {
		if got := a.Auth.Satisfies(context.Background(), tc.id, tc.need); got != tc.want {
			t.Errorf("Satisfies(%+v, %+v) = %v, want %v", tc.id, tc.need, got, tc.want)
		}
	}
}

func TestParseStepUpChallenge(t *testing.T) {
	for _, tc := range []struct {
		headers []string
		want    *extauth.Assurance
	}{
		// RFC 9470 section 3's examples.
		{[]string{`Bearer error="insufficient_user_authentication", error_description="A different authentication level is required", acr_values="myACR"`},
			&extauth.Assurance{ACRValues: []string{"myACR"}}},
		{[]string{`Bearer error="insufficient_user_authentication", error_description="More recent authentication is required", max_age="5"`},
			&extauth.Assurance{MaxAge: 5 * time.Second}},
		{[]string{`Bearer error=insufficient_user_authentication, max_age=0`}, &extauth.Assurance{MaxAge: -1}},
		{[]string{`DPoP algs="ES256 PS256", error="insufficient_user_authentication", acr_values="urn:a urn:b"`},
			&extauth.Assurance{ACRValues: []string{"urn:a", "urn:b"}}},
		{[]string{`Basic realm="x"`, `Negotiate abc/+==, Bearer realm="api", error="insufficient_user_authentication", acr_values="q\"r"`},
			&extauth.Assurance{ACRValues: []string{`q"r`}}},
		{[]string{`Bearer error="invalid_token", acr_values="x"`}, nil},
		{[]string{`Bearer error="insufficient_user_authentication", max_age="soon"`}, nil},
		{[]string{`Bearer error="insufficient_user_authentication`}, nil},
		{[]string{`error="insufficient_user_authentication"`}, nil},
		{nil, nil},
	} {
		h := http.Header{"Www-Authenticate": tc.headers}
		got, ok := extauth.ParseStepUpChallenge(h)
		if (tc.want != nil) != ok || ok && fmt.Sprint(got) != fmt.Sprint(*tc.want) {
			t.Errorf("ParseStepUpChallenge(%q) = %+v, %v; want %+v", tc.headers, got, ok, tc.want)
		}
	}
	big := http.Header{"Www-Authenticate": {`Bearer realm="` + strings.Repeat("a", 9000) + `", error="insufficient_user_authentication"`}}
	if _, ok := extauth.ParseStepUpChallenge(big); ok {
		t.Error("an oversized header was read")
	}
}
