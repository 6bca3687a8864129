package extauthtest_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest"
)

// A form's POST carries the Origin that Fetch serializes under the page's
// referrer policy: "null" under no-referrer, whatever else the page is.
func TestBrowserOriginFollowsTheReferrerPolicy(t *testing.T) {
	var s seen
	form := `<form method="post" action="/posted"><button>Go</button></form>`
	var other string
	pages := map[string]func(http.ResponseWriter, *http.Request){
		"/default": html(form),
		"/header": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Referrer-Policy", "no-referrer")
			html(form)(w, r)
		},
		"/meta":         html(`<meta name="referrer" content="no-referrer">` + form),
		"/same-origin":  html(`<meta name="referrer" content="same-origin">` + form),
		"/rel":          html(`<form method="post" action="/posted" rel="noreferrer"><button>Go</button></form>`),
		"/unknown-last": html(`<meta name="referrer" content="no-referrer, no-such-policy">` + form),
		// The meta element, applied after the header, wins.
		"/meta-over-header": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Referrer-Policy", "no-referrer")
			html(`<meta name="referrer" content="same-origin">`+form)(w, r)
		},
		"/to-other": func(w http.ResponseWriter, r *http.Request) {
			html(`<meta name="referrer" content="same-origin"><form method="post" action="`+other+`/posted"><button>Go</button></form>`)(w, r)
		},
	}
	a := site(t, &s, pages)
	other = site(t, &s, nil).URL
	b := extauthtest.NewBrowser(t)
	for path, want := range map[string]struct{ origin, referer string }{
		"/default":          {a.URL, a.URL + "/default"},
		"/header":           {"null", ""},
		"/meta":             {"null", ""},
		"/same-origin":      {a.URL, a.URL + "/same-origin"},
		"/rel":              {"null", ""},
		"/unknown-last":     {"null", ""},
		"/meta-over-header": {a.URL, a.URL + "/meta-over-header"},
		"/to-other":         {"null", ""},
	} {
		b.Click(b.Get(a.URL+path), "Go")
		if r := s.last(); r.Method != "POST" || r.Origin != want.origin || r.Referer != want.referer {
			t.Errorf("%s: POST with Origin %q Referer %q, want %q %q", path, r.Origin, r.Referer, want.origin, want.referer)
		}
	}
}

// A plain-http site gets no fetch metadata; a navigation asks for HTML.
func TestBrowserPlainHTTPSite(t *testing.T) {
	var s seen
	var accept string
	a := site(t, &s, map[string]func(http.ResponseWriter, *http.Request){
		"/accept": func(w http.ResponseWriter, r *http.Request) { accept = r.Header.Get("Accept") },
	})
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(a.URL, "http://"))
	b := extauthtest.NewBrowser(t)
	b.Hosts = map[string]string{"app.test": "127.0.0.1"}
	b.Get("http://app.test:" + port + "/accept")
	if r := s.last(); r.Site != "" || r.Path != "/accept" {
		t.Errorf("a plain-http site got fetch metadata: %+v", r)
	}
	if !strings.HasPrefix(accept, "text/html,") {
		t.Errorf("navigation Accept %q", accept)
	}
	b.Get(a.URL + "/accept")
	if r := s.last(); r.Site != "none" {
		t.Errorf("a loopback address is trustworthy and gets fetch metadata: %+v", r)
	}
}

// Cookies go by their SameSite: Strict ones only with same-site requests,
// Lax ones also with another site's links (a GET), never with its POSTs.
func TestBrowserSameSiteCookies(t *testing.T) {
	var s seen
	var got []string
	a := site(t, &s, map[string]func(http.ResponseWriter, *http.Request){
		"/set": func(w http.ResponseWriter, r *http.Request) {
			for _, c := range []*http.Cookie{{Name: "strict", Value: "1", SameSite: http.SameSiteStrictMode},
				{Name: "lax", Value: "1", SameSite: http.SameSiteLaxMode}, {Name: "default", Value: "1"},
				{Name: "none", Value: "1", SameSite: http.SameSiteNoneMode}, {Name: "__Host-x", Value: "1", Path: "/"}} {
				http.SetCookie(w, c)
			}
		},
		"/read": func(w http.ResponseWriter, r *http.Request) {
			got = got[:0]
			for _, c := range r.Cookies() {
				got = append(got, c.Name)
			}
		},
	})
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(a.URL, "http://"))
	evil := site(t, &s, map[string]func(http.ResponseWriter, *http.Request){
		"/link": html(`<a href="http://127.0.0.1:` + port + `/read">x</a>`),
	})
	evilURL := strings.Replace(evil.URL, "127.0.0.1", "evil.localhost", 1)
	b := extauthtest.NewBrowser(t)
	b.Get(a.URL + "/set")
	b.Get(a.URL + "/read")
	if strings.Join(got, " ") != "strict lax default" {
		// SameSite=None without Secure, and a __Host- cookie without
		// Secure, are refused when set.
		t.Errorf("same-site request sent %q", got)
	}
	b.Click(b.Get(evilURL+"/link"), "x")
	if strings.Join(got, " ") != "lax default" {
		t.Errorf("another site's link sent %q", got)
	}
	b.PostFrom(evilURL+"/page", a.URL+"/read", nil)
	if len(got) != 0 {
		t.Errorf("another site's POST sent %q", got)
	}
}

// The kit's browser fails where a browser fails. On a plain-http site,
// which gets no fetch metadata, a page of the host's whose referrer policy
// is no-referrer sends "Origin: null" with its sign-in form, which extauth
// refuses (it cannot tell it from a sandboxed frame's); extauth's own
// click-to-continue page, with the policy same-origin, signs in.
func TestBrowserFailsWhereABrowserFails(t *testing.T) {
	var base string
	srv := extauthtest.Serve(t, func(b string) http.Handler {
		_, port, _ := net.SplitHostPort(strings.TrimPrefix(b, "http://"))
		base = "http://app.test:" + port
		// extauth's own calls to the fakes reach app.test at 127.0.0.1.
		dialer := &net.Dialer{}
		client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if strings.HasPrefix(addr, "app.test:") {
				addr = "127.0.0.1:" + port
			}
			return dialer.DialContext(ctx, network, addr)
		}}}
		mux := http.NewServeMux()
		fakes, err := extauthtest.MountProviders(mux, base, "/dev/", extauthtest.ProvidersOptions{
			Only: []extauth.Provider{extauth.BlogOAuth2}, HTTPClient: client})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(fakes.Close)
		a, err := extauth.New(fakes.Config(), extauth.Options{BaseURL: base, CookieKey: make([]byte, 32), HTTPClient: client,
			Logger: slog.New(slog.DiscardHandler),
			OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
				w.Write([]byte("signed in as " + id.UID))
			}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		a.Mount(mux)
		mux.HandleFunc("GET /hidden-referrer", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte(`<meta name="referrer" content="no-referrer"><form method="post" action="/users/auth/blog_oauth2"><button>Sign in</button></form>`))
		})
		return mux
	})
	_ = srv
	b := extauthtest.NewBrowser(t)
	b.Hosts = map[string]string{"app.test": "127.0.0.1"}
	p := b.Click(b.Get(base+"/hidden-referrer"), "Sign in")
	if p.StatusCode != http.StatusForbidden || !strings.Contains(p.Body, "csrf_detected") {
		t.Errorf("a no-referrer page's form on plain http: %d %s", p.StatusCode, p.Body)
	}
	// A link (a GET without fetch metadata) gets the click-to-continue
	// page, whose form sends the site's Origin.
	p = b.Get(base + "/users/auth/blog_oauth2?" + url.Values{"return_to": {"/after"}}.Encode())
	if p.StatusCode != http.StatusOK {
		t.Fatalf("click-to-continue page: %d\n%s", p.StatusCode, p.Body)
	}
	policy := p.ReferrerPolicy
	if p = b.Click(p, "Continue"); p.StatusCode != http.StatusOK || !strings.HasPrefix(p.Body, "signed in as ") {
		t.Errorf("after Continue on a page of policy %s: %d %s\n%s", policy, p.StatusCode, p.URL, p.Body)
	}
}
