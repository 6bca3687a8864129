// Package harness drives sign-ins end to end in tests: a browser-like client
// with a cookie jar that follows redirects across the app and the fake
// providers, and servers whose handler is built once their URL is known.
package harness

import (
	"bytes"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Serve starts a test server whose handler is made by build from the
// server's own base URL, so the app can be configured with its real address.
func Serve(t testing.TB, build func(baseURL string) http.Handler) *httptest.Server {
	t.Helper()
	var h atomic.Pointer[http.Handler]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hp := h.Load()
		if hp == nil {
			// The app may call itself while build is still running (the
			// demo's SAML SP reads its IdP's metadata in the background);
			// it must see a server that is not ready, not a data race.
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		(*hp).ServeHTTP(w, r)
	}))
	built := build(srv.URL)
	h.Store(&built)
	t.Cleanup(srv.Close)
	return srv
}

// Browser is a cookie-keeping HTTP client that records every hop.
type Browser struct {
	T      testing.TB
	Client *http.Client
	Jar    *cookiejar.Jar
	// Hops lists every URL requested, redirects included, in order.
	Hops []string
	// Header is added to every request. It starts with Sec-Fetch-Site:
	// same-origin, as a current browser sends it when a page of the app
	// starts a sign-in; tests of other starts change or delete it.
	Header http.Header
}

// NewBrowser returns a browser that follows up to 20 redirects.
func NewBrowser(t testing.TB) *Browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	b := &Browser{T: t, Jar: jar, Header: http.Header{"Sec-Fetch-Site": {"same-origin"}}}
	b.Client = &http.Client{
		Jar:     jar,
		Timeout: 30 * time.Second,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 20 {
				return http.ErrUseLastResponse
			}
			b.Hops = append(b.Hops, req.URL.String())
			for k, v := range b.Header {
				req.Header[k] = v
			}
			return nil
		},
	}
	return b
}

// NoFollow makes the browser stop at the first redirect and return it.
func (b *Browser) NoFollow() *Browser {
	b.Client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return b
}

// Response is a finished request: status, headers, the final URL and the body.
type Response struct {
	*http.Response
	Body string
	URL  *url.URL
}

// Do sends req with the browser's headers and reads the whole answer.
func (b *Browser) Do(req *http.Request) *Response {
	b.T.Helper()
	for k, v := range b.Header {
		req.Header[k] = v
	}
	b.Hops = append(b.Hops, req.URL.String())
	resp, err := b.Client.Do(req)
	if err != nil {
		b.T.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.T.Fatalf("reading %s: %v", req.URL, err)
	}
	return &Response{Response: resp, Body: string(body), URL: resp.Request.URL}
}

// Get requests u.
func (b *Browser) Get(u string) *Response {
	b.T.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		b.T.Fatal(err)
	}
	return b.Do(req)
}

// PostForm posts form to u.
func (b *Browser) PostForm(u string, form url.Values) *Response {
	b.T.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		b.T.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.Do(req)
}

// Cookie returns the named cookie the jar would send to u, or nil.
func (b *Browser) Cookie(u, name string) *http.Cookie {
	pu, err := url.Parse(u)
	if err != nil {
		b.T.Fatal(err)
	}
	for _, c := range b.Jar.Cookies(pu) {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// SyncBuffer is a bytes.Buffer that goroutines may write while a test reads
// it: the log of background work, the output of a child process.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
