package extauthtest_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/extauth/extauth/extauthtest"
)

// seen records the requests of a test site.
type seen struct {
	mu   sync.Mutex
	reqs []seenRequest
}

type seenRequest struct {
	Method, Path, Site, Origin, Referer, User, Body string
}

func (s *seen) last() seenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reqs[len(s.reqs)-1]
}

func (s *seen) all() []seenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seenRequest(nil), s.reqs...)
}

// site serves pages under test and records what the browser sends.
func site(t *testing.T, s *seen, pages map[string]func(w http.ResponseWriter, r *http.Request)) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.reqs = append(s.reqs, seenRequest{r.Method, r.URL.Path, r.Header.Get("Sec-Fetch-Site"), r.Header.Get("Origin"),
			r.Header.Get("Referer"), r.Header.Get("Sec-Fetch-User"), string(body)})
		s.mu.Unlock()
		if h, ok := pages[r.URL.Path]; ok {
			h(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<p>%s %s</p>", r.Method, r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func html(body string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, body)
	}
}

func redirect(to func() string, code int) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, to(), code) }
}

// The browser marks its requests as a browser does: what started them, from
// which origin, and through which redirects.
func TestBrowserFetchMetadata(t *testing.T) {
	var s seen
	var other, local *httptest.Server
	a := site(t, &s, map[string]func(http.ResponseWriter, *http.Request){
		"/see-other": redirect(func() string { return "/landing" }, http.StatusSeeOther),
		"/to-other":  redirect(func() string { return other.URL + "/there" }, http.StatusFound),
		"/keep-post": redirect(func() string { return other.URL + "/posted" }, http.StatusTemporaryRedirect),
		"/to-tenant": redirect(func() string { return strings.Replace(local.URL, "127.0.0.1", "city-a.localhost", 1) + "/tenant" }, http.StatusFound),
		"/no-referer": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Referrer-Policy", "no-referrer")
			html(`<a href="/x">x</a>`)(w, r)
		},
	})
	other = site(t, &s, nil)
	local = site(t, &s, nil)
	b := extauthtest.NewBrowser(t)

	b.Get(a.URL + "/typed")
	if r := s.last(); r.Site != "none" || r.Origin != "" {
		t.Errorf("typed URL: %+v", r)
	}
	p := b.Post(a.URL+"/see-other", url.Values{"k": {"v"}})
	reqs := s.all()
	if post, get := reqs[len(reqs)-2], reqs[len(reqs)-1]; post.Method != "POST" || post.Site != "same-origin" || post.Origin != a.URL ||
		post.Body != "k=v" || get.Method != "GET" || get.Path != "/landing" || get.Origin != "" || p.URL.Path != "/landing" {
		t.Errorf("POST then 303: %+v %+v ended at %s", post, get, p.URL)
	}
	b.Post(a.URL+"/to-other", nil)
	if r := s.last(); r.Path != "/there" || r.Site != "same-site" {
		// Another port of 127.0.0.1 is another origin of the same site.
		t.Errorf("redirect to another port: %+v", r)
	}
	b.Post(a.URL+"/keep-post", url.Values{"k": {"v"}})
	if r := s.last(); r.Method != "POST" || r.Body != "k=v" || r.Origin != "null" || r.Site != "same-site" {
		t.Errorf("307 to another origin: %+v", r)
	}
	b.Post(a.URL+"/to-tenant", nil)
	if r := s.last(); r.Path != "/tenant" || r.Site != "cross-site" {
		t.Errorf("redirect to a subdomain of localhost (served at 127.0.0.1): %+v", r)
	}
	b.PostFrom("https://evil.example/page", a.URL+"/form", nil)
	if r := s.last(); r.Origin != "null" || r.Site != "cross-site" || r.Referer != "https://evil.example/" {
		// An https page's Origin is not sent to an http URL (Fetch),
		// its Referer is to a loopback one, which is trustworthy
		// (Referrer Policy).
		t.Errorf("cross-site form from https: %+v", r)
	}
	b.PostFrom("http://evil.example/page", a.URL+"/form", nil)
	if r := s.last(); r.Origin != "http://evil.example" || r.Site != "cross-site" || r.Referer != "http://evil.example/" {
		t.Errorf("cross-site form: %+v", r)
	}
	b.PostFrom(a.URL+"/page?q=1", a.URL+"/form", nil)
	if r := s.last(); r.Referer != a.URL+"/page?q=1" || r.Site != "same-origin" {
		t.Errorf("same-origin form: %+v", r)
	}
	b.Click(b.Get(a.URL+"/no-referer"), "x")
	if r := s.last(); r.Path != "/x" || r.Referer != "" || r.Site != "same-origin" || r.User != "?1" {
		t.Errorf("link on a no-referrer page: %+v", r)
	}
	if n := len(b.History); n != len(s.all()) {
		t.Errorf("History has %d URLs, the sites saw %d requests", n, len(s.all()))
	}
}

// Pages that submit a form by script on load are followed, whichever way
// they name it; a page with a button waits for a click.
func TestBrowserAutoSubmit(t *testing.T) {
	var s seen
	a := site(t, &s, map[string]func(http.ResponseWriter, *http.Request){
		"/by-index": html(`<html><body><form action="/wrong" method="post"></form><form method="post" action="/acs">
<input type="hidden" name="SAMLResponse" value="PHNhbWw+"><input type="hidden" name="RelayState" value="r&amp;s"></form>
<script>document.forms[1].submit()</script></body></html>`),
		"/by-id": html(`<html><body><form method="post" action="/acs" id="SAMLResponseForm"><input type="hidden" name="SAMLResponse" value="x">
<input id="SAMLSubmitButton" type="submit" value="Submit"></form>
<script>document.getElementById('SAMLSubmitButton').style.visibility='hidden';document.getElementById('SAMLResponseForm').submit();</script></body></html>`),
		"/onload": html(`<html><body onload="document.forms[0].submit()"><form method="post" action="/acs"><input type="hidden" name="a" value="1"></form></body></html>`),
		"/click":  html(`<form method="post" action="/acs"><input type="hidden" name="a" value="1"><button>Continue</button></form>`),
	})
	b := extauthtest.NewBrowser(t)
	for path, body := range map[string]string{"/by-index": "RelayState=r%26s&SAMLResponse=PHNhbWw%2B", "/by-id": "SAMLResponse=x", "/onload": "a=1"} {
		p := b.Get(a.URL + path)
		if r := s.last(); p.URL.Path != "/acs" || r.Method != "POST" || r.Body != body || r.Origin != a.URL || r.User != "" {
			t.Errorf("%s: ended at %s, posted %+v", path, p.URL, r)
		}
	}
	p := b.Get(a.URL + "/click")
	if p.URL.Path != "/click" {
		t.Fatalf("a page waiting for a click was submitted: %s", p.URL)
	}
	if p = b.Click(p, "Continue"); p.URL.Path != "/acs" || s.last().Body != "a=1" || s.last().User != "?1" {
		t.Errorf("click: %s %+v", p.URL, s.last())
	}
}

// Submit sends what the form holds, as a browser would, with the fields
// the test fills in.
func TestBrowserSubmit(t *testing.T) {
	var s seen
	a := site(t, &s, map[string]func(http.ResponseWriter, *http.Request){
		"/form": html(`<form method="post" action="/done">
<input name="text" value="t"><input type="checkbox" name="on" checked><input type="checkbox" name="off" value="x">
<input type="radio" name="r" value="1"><input type="radio" name="r" value="2" checked>
<select name="s"><option value="a">A</option><option selected>B</option></select>
<textarea name="ta"> some text </textarea><input name="disabled" value="d" disabled>
<button name="decision" value="deny">Deny</button><button name="decision" value="approve" id="approve">Approve</button>
</form><form method="get" action="/search"><input name="q"><input type="submit" value="Search"></form>`),
	})
	b := extauthtest.NewBrowser(t)
	b.Submit(b.Get(a.URL+"/form"), "approve", url.Values{"text": {"typed"}, "extra": {"e"}})
	got, _ := url.ParseQuery(s.last().Body)
	want := url.Values{"text": {"typed"}, "on": {"on"}, "r": {"2"}, "s": {"B"}, "ta": {"some text"}, "decision": {"approve"}, "extra": {"e"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("posted %v, want %v", got, want)
	}
	p := b.Submit(b.Get(a.URL+"/form"), "Search", url.Values{"q": {"a b"}})
	if p.URL.Path != "/search" || p.URL.RawQuery != "q=a+b" || s.last().Method != "GET" {
		t.Errorf("GET form: %s %+v", p.URL, s.last())
	}
}

// The browser keeps cookies per site, and reaches subdomains of localhost.
func TestBrowserCookies(t *testing.T) {
	var s seen
	a := site(t, &s, map[string]func(http.ResponseWriter, *http.Request){
		"/set": func(w http.ResponseWriter, r *http.Request) {
			http.SetCookie(w, &http.Cookie{Name: "sid", Value: r.Host, Path: "/"})
		},
	})
	b := extauthtest.NewBrowser(t)
	tenant := strings.Replace(a.URL, "127.0.0.1", "city-a.localhost", 1)
	b.Get(a.URL + "/set")
	b.Get(tenant + "/set")
	if c := b.Cookie(a.URL, "sid"); c == nil || !strings.HasPrefix(c.Value, "127.0.0.1") {
		t.Errorf("cookie of 127.0.0.1: %v", c)
	}
	if c := b.Cookie(tenant, "sid"); c == nil || !strings.HasPrefix(c.Value, "city-a.localhost") {
		t.Errorf("cookie of city-a.localhost: %v", c)
	}
}
