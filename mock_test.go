package extauth_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/internal/harness"
	"github.com/extauth/extauth/internal/mock"
	"github.com/extauth/extauth/providers"
)

// In mock mode a queued result signs in through the real routes, cookie and
// hooks, for a provider that is not even configured; without one, or
// outside mock mode, nothing changes.
func TestMockMode(t *testing.T) {
	var failures []string
	a := newApp(t, func(o *extauth.Options) {
		o.OnFailure = func(w http.ResponseWriter, r *http.Request, err *extauth.Error) {
			failures = append(failures, err.Provider+" "+string(err.Code))
			http.Error(w, string(err.Code), err.Code.HTTPStatus())
		}
	})
	b := harness.NewBrowser(t)
	if resp := b.PostForm(a.URL+"/users/auth/saml", nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("saml before mock mode: %d", resp.StatusCode)
	}
	set := mock.NewSet()
	a.Auth.UseMocks(set)
	set.Push("saml", mock.Result{Identity: &providers.Identity{UID: "grace", Email: "grace@example.org"}})
	set.Push("blog_oauth2", mock.Result{Failure: providers.NewError(providers.CodeAccessDenied, "refused", nil)})
	resp := b.PostForm(a.URL+"/users/auth/saml", url.Values{"return_to": {"/after"}})
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Body, "signed in as grace") {
		t.Fatalf("mocked saml sign-in: %d %s", resp.StatusCode, resp.Body)
	}
	if ids := a.identities(); len(ids) != 1 || ids[0].Provider != "saml" || ids[0].Email != "grace@example.org" || a.Ret[0] != "/after" {
		t.Fatalf("hook saw %+v, ReturnTo %v", ids, a.Ret)
	}
	if resp := b.PostForm(a.URL+"/users/auth/blog_oauth2", nil); resp.StatusCode != http.StatusForbidden || len(failures) != 1 || failures[0] != "blog_oauth2 access_denied" {
		t.Fatalf("mocked failure: %d, OnFailure saw %v", resp.StatusCode, failures)
	}
	// Nothing queued: the real provider again, and saml is gone.
	if resp := b.PostForm(a.URL+"/users/auth/blog_oauth2", nil); resp.StatusCode != http.StatusOK || len(a.identities()) != 2 {
		t.Fatalf("real blog_oauth2 after the mocks ran out: %d %s", resp.StatusCode, resp.Body)
	}
	if resp := b.PostForm(a.URL+"/users/auth/saml", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("saml with nothing queued: %d", resp.StatusCode)
	}
	// A mock callback is still bound to its transaction and used once.
	set.Push("saml", mock.Result{Identity: &providers.Identity{UID: "x"}})
	start := harness.NewBrowser(t).NoFollow()
	loc := start.PostForm(a.URL+"/users/auth/saml", nil).Header.Get("Location")
	wantCode(t, harness.NewBrowser(t).Get(loc), http.StatusBadRequest, "invalid_state")
}

// Outside mock mode the mock parameter is nothing: the provider's own
// callback runs.
func TestMockParameterIgnoredOutsideMockMode(t *testing.T) {
	a := newApp(t, nil)
	b := harness.NewBrowser(t)
	wantCode(t, b.Get(a.URL+"/users/auth/blog_oauth2/callback.json?state=x&extauth_mock=1"), http.StatusBadRequest, "invalid_state")
	if len(a.identities()) != 0 {
		t.Fatal("signed in")
	}
}
