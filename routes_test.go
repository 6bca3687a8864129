package extauth_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/providers"
)

// renamed is a strategy that reads an OAuth 2 state but must never complete:
// it stands in for a second provider in the mix-up tests.
type renamed struct{ name string }

func (s renamed) Name() string { return s.name }
func (s renamed) Begin(context.Context, *providers.Transaction) (string, error) {
	return "https://provider.example/authorize", nil
}
func (s renamed) Binding(r *http.Request) string { return r.FormValue("state") }
func (s renamed) Complete(context.Context, *http.Request, *providers.Transaction) (*providers.Identity, error) {
	return nil, errors.New("must not be called")
}

// allSix mounts six strategies under the built-in names, so the route table
// can be checked whatever providers this build has.
func allSix(t *testing.T, strict bool) *extauth.Auth {
	t.Helper()
	var extra []extauth.Strategy
	for _, p := range extauth.BuiltinProviders() {
		extra = append(extra, renamed{name: string(p)})
	}
	a, err := extauth.New(nil, extauth.Options{BaseURL: "https://app.example", CookieKey: testKey, Extra: extra, StrictPOST: strict,
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnSuccess: func(http.ResponseWriter, *http.Request, *extauth.Identity) {}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestRouteTable(t *testing.T) {
	a := allSix(t, false)
	routes := a.Routes()
	if len(routes) != 12 {
		t.Fatalf("%d routes, want 12", len(routes))
	}
	seen := map[string]bool{}
	for _, r := range routes {
		seen[r.Path] = true
		if r.URL != "https://app.example"+r.Path {
			t.Errorf("%s: URL %s", r.Path, r.URL)
		}
		for _, suffix := range []string{"", ".json"} {
			for _, m := range []string{http.MethodGet, http.MethodPost} {
				rec := httptest.NewRecorder()
				req := httptest.NewRequest(m, "https://app.example"+r.Path+suffix, nil)
				a.ServeHTTP(rec, req)
				want := map[string]int{"authorize": http.StatusFound, "callback": http.StatusBadRequest}[r.Purpose]
				if r.Purpose == "authorize" && m == http.MethodPost {
					want = http.StatusSeeOther
				}
				if r.Purpose == "authorize" && suffix == ".json" {
					want = http.StatusOK
				}
				if rec.Code != want {
					t.Errorf("%s %s%s = %d, want %d", m, r.Path, suffix, rec.Code, want)
				}
				if suffix == ".json" && !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
					t.Errorf("%s %s%s answered %s", m, r.Path, suffix, rec.Header().Get("Content-Type"))
				}
			}
		}
	}
	for _, p := range extauth.BuiltinProviders() {
		for _, path := range []string{"/users/auth/" + string(p), "/users/auth/" + string(p) + "/callback"} {
			if !seen[path] {
				t.Errorf("route %s missing", path)
			}
		}
	}

	notFound := []string{"/users/auth/", "/users/auth/unknown", "/users/auth/unknown/callback",
		"/users/auth/saml/callback/extra", "/users/auth/oidc/other", "/users/auth/oidc.xml",
		"/users/auth/oidc/callback.exe", "/users/auth/OIDC", "/users/auth/oidc/", "/users/auth/oidc.json/callback",
		"/users/auth/../auth/oidc", "/users/auth/oidc.", "/users/auth/oidc/callback/"}
	for _, path := range notFound {
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut} {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(m, "https://app.example/", nil)
			req.URL.Path = path
			a.ServeHTTP(rec, req)
			if rec.Code != http.StatusNotFound {
				t.Errorf("%s %s = %d, want 404", m, path, rec.Code)
			}
		}
	}
	for _, m := range []string{http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodHead, http.MethodOptions} {
		for _, path := range []string{"/users/auth/oidc", "/users/auth/oidc/callback.json"} {
			rec := httptest.NewRecorder()
			a.ServeHTTP(rec, httptest.NewRequest(m, "https://app.example"+path, nil))
			if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, POST" {
				t.Errorf("%s %s = %d Allow %q, want 405 with Allow: GET, POST", m, path, rec.Code, rec.Header().Get("Allow"))
			}
		}
	}
}

func TestStrictPOST(t *testing.T) {
	a := allSix(t, true)
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "https://app.example/users/auth/oidc", nil))
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "POST" {
		t.Errorf("GET authorize under StrictPOST = %d Allow %q", rec.Code, rec.Header().Get("Allow"))
	}
	rec = httptest.NewRecorder()
	a.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "https://app.example/users/auth/oidc", nil))
	if rec.Code != http.StatusSeeOther {
		t.Errorf("POST authorize under StrictPOST = %d", rec.Code)
	}
	rec = httptest.NewRecorder()
	a.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "https://app.example/users/auth/oidc/callback", nil))
	if rec.Code == http.StatusMethodNotAllowed {
		t.Error("StrictPOST must not refuse GET callbacks")
	}
}

func TestMountOnServeMux(t *testing.T) {
	a := allSix(t, false)
	mux := http.NewServeMux()
	mux.HandleFunc("/users/auth/saml/metadata-of-host", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(299) })
	a.Mount(mux)
	for path, want := range map[string]int{
		"/users/auth/oidc":                    http.StatusFound,
		"/users/auth/nope":                    http.StatusNotFound,
		"/users/auth/saml/metadata-of-host":   299,
		"/users/auth/socialnet/callback.json": http.StatusBadRequest,
	} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "https://app.example"+path, nil))
		if rec.Code != want {
			t.Errorf("GET %s = %d, want %d", path, rec.Code, want)
		}
	}
}

func TestNewRejects(t *testing.T) {
	hook := func(http.ResponseWriter, *http.Request, *extauth.Identity) {}
	blog := &extauth.Config{BlogOAuth2: extauth.OAuthProvider{Key: "k", Secret: extauth.NewSecret("s"), Site: "https://blog.example"}}
	cases := map[string]struct {
		cfg *extauth.Config
		o   extauth.Options
	}{
		"no base URL":       {blog, extauth.Options{CookieKey: testKey, OnSuccess: hook}},
		"relative base URL": {blog, extauth.Options{BaseURL: "/app", CookieKey: testKey, OnSuccess: hook}},
		"base URL query":    {blog, extauth.Options{BaseURL: "https://a.example/?x=1", CookieKey: testKey, OnSuccess: hook}},
		"short key":         {blog, extauth.Options{BaseURL: "https://a.example", CookieKey: testKey[:16], OnSuccess: hook}},
		"no hook":           {blog, extauth.Options{BaseURL: "https://a.example", CookieKey: testKey}},
		"duplicate name":    {blog, extauth.Options{BaseURL: "https://a.example", CookieKey: testKey, OnSuccess: hook, Extra: []extauth.Strategy{renamed{"blog_oauth2"}}}},
		"bad name":          {nil, extauth.Options{BaseURL: "https://a.example", CookieKey: testKey, OnSuccess: hook, Extra: []extauth.Strategy{renamed{"Bad/Name"}}}},
		"bad site": {&extauth.Config{BlogOAuth2: extauth.OAuthProvider{Key: "k", Secret: extauth.NewSecret("s"), Site: "ftp://x"}},
			extauth.Options{BaseURL: "https://a.example", CookieKey: testKey, OnSuccess: hook}},
	}
	for name, c := range cases {
		if _, err := extauth.New(c.cfg, c.o); err == nil {
			t.Errorf("%s: New accepted it", name)
		} else if strings.Contains(err.Error(), "\x07") {
			t.Errorf("%s: error shows the key", name)
		}
	}
}
