package outbound

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/extauth/extauth/internal/telemetry"
)

func TestBodyBound(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := 100
		if r.URL.Path == "/big" {
			n = 101
		}
		if r.URL.Query().Get("chunked") == "" {
			w.Header().Set("Content-Length", strconv.Itoa(n))
		} else {
			w.(http.Flusher).Flush()
		}
		w.Write([]byte(strings.Repeat("x", n)))
	}))
	defer srv.Close()
	c := NewClient(nil, time.Second, 100)
	for _, q := range []string{"", "?chunked=1"} {
		resp, err := c.Get(srv.URL + "/exact" + q)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || len(b) != 100 {
			t.Errorf("body of exactly the bound%s: %d bytes, %v", q, len(b), err)
		}
		resp, err = c.Get(srv.URL + "/big" + q)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		if !errors.Is(err, ErrBodyTooLarge) || !IsTooLarge(err) {
			t.Errorf("body over the bound%s: %v", q, err)
		}
	}
}

func TestTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	c := NewClient(nil, 100*time.Millisecond, 0)
	began := time.Now()
	_, err := c.Get(srv.URL + "/?code=SECRETCODE")
	if !IsTimeout(err) {
		t.Fatalf("err = %v, want a time-out", err)
	}
	// The server holds the request until the test ends.
	if time.Since(began) > 20*time.Second {
		t.Error("time-out not prompt")
	}
	if s := Scrub(err).Error(); strings.Contains(s, "SECRETCODE") {
		t.Errorf("scrubbed error shows the query: %s", s)
	}
	if !IsTimeout(Scrub(err)) {
		t.Error("Scrub lost the time-out")
	}
}

func TestNoRedirects(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://elsewhere.example/", http.StatusFound)
	}))
	defer srv.Close()
	resp, err := NewClient(nil, time.Second, 0).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("redirect followed: %d", resp.StatusCode)
	}
}

func TestRedact(t *testing.T) {
	u, _ := url.Parse("https://user:pw@host.example/p/a?access_token=T#frag")
	if got := Redact(u); got != "https://host.example/p/a" {
		t.Errorf("Redact = %q", got)
	}
}

func TestBaseClientTimeoutWins(t *testing.T) {
	c := NewClient(&http.Client{Timeout: time.Second}, time.Minute, 0)
	if Timeout(c) != time.Second || c.Timeout != 0 {
		t.Errorf("Timeout = %v, http.Client.Timeout = %v", Timeout(c), c.Timeout)
	}
}

// The deadline bounds the headers and the body, and ends with the body.
func TestTimeoutCoversTheBody(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("partial"))
		w.(http.Flusher).Flush()
		if r.URL.Path == "/hang" {
			<-release
		}
	}))
	defer srv.Close()
	defer close(release)
	// A loaded machine may take longer than the time-out to send the
	// headers, or the quick body: then the test is made again with twice
	// the time-out, until the headers come within it.
	for timeout := 200 * time.Millisecond; ; timeout *= 2 {
		retry := func(err error) bool { return IsTimeout(err) && timeout < time.Minute }
		c := NewClient(nil, timeout, 0)
		start := time.Now()
		resp, err := c.Get(srv.URL + "/hang")
		if retry(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		// The body hangs until the test ends.
		if !IsTimeout(err) || time.Since(start) > timeout+20*time.Second {
			t.Errorf("a hanging body: %v after %v", err, time.Since(start))
		}
		resp, err = c.Get(srv.URL + "/ok")
		if retry(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if retry(err) {
			continue
		}
		if err != nil || string(b) != "partial" {
			t.Errorf("a quick body: %q %v", b, err)
		}
		return
	}
}

func TestIsTimeoutFlattened(t *testing.T) {
	flat := errors.New("oauth2: cannot fetch token: net/http: request canceled (Client.Timeout exceeded while reading body)")
	if !IsTimeout(flat) {
		t.Error("a time-out flattened into text is not recognised")
	}
	if IsTimeout(errors.New("connection refused")) || IsTimeout(nil) {
		t.Error("not a time-out")
	}
}

// Documents (metadata, discovery) follow up to three redirects that stay on
// https or go from http to https; nothing else follows any.
func TestDocumentRedirects(t *testing.T) {
	var sawAuth []string
	final := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawAuth = append(sawAuth, r.Header.Get("Authorization")+r.Header.Get("Cookie"))
		io.WriteString(w, "document")
	}))
	defer final.Close()
	var hops func(w http.ResponseWriter, r *http.Request)
	tlsHop := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hops(w, r) }))
	defer tlsHop.Close()
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hops(w, r) }))
	defer plain.Close()
	hops = func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/doc" {
			io.WriteString(w, "document")
			return
		}
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		to := r.URL.Query().Get("to")
		if n > 1 {
			to = tlsHop.URL + "/?n=" + strconv.Itoa(n-1) + "&to=" + url.QueryEscape(to)
		}
		http.Redirect(w, r, to, http.StatusFound)
	}
	c := NewClient(&http.Client{Transport: final.Client().Transport}, time.Second, 100)
	get := func(ctx context.Context, method, u string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, method, u, nil)
		req.Header.Set("Authorization", "Bearer LEAK")
		req.AddCookie(&http.Cookie{Name: "c", Value: "LEAK"})
		resp, err := c.Do(req)
		if err == nil {
			io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		return resp, err
	}
	doc := Document(context.Background())
	hop := func(base string, n int, to string) string {
		return base + "/?n=" + strconv.Itoa(n) + "&to=" + url.QueryEscape(to)
	}
	for _, tt := range []struct {
		name string
		ctx  context.Context
		verb string
		u    string
		ok   bool
	}{
		{"https to https, 3 hops", doc, "GET", hop(tlsHop.URL, 3, final.URL), true},
		{"4 hops", doc, "GET", hop(tlsHop.URL, 4, final.URL), false},
		{"http to https", doc, "GET", hop(plain.URL, 1, final.URL), true},
		{"loopback http to http", doc, "GET", hop(plain.URL, 1, plain.URL+"/doc"), true},
		{"https to http", doc, "GET", hop(tlsHop.URL, 1, plain.URL), false},
		{"to another scheme", doc, "GET", hop(tlsHop.URL, 1, "ftp://example.org/x"), false},
		{"to a URL with credentials", doc, "GET", hop(tlsHop.URL, 1, strings.Replace(final.URL, "https://", "https://u:p@", 1)), false},
		{"not a document", context.Background(), "GET", hop(tlsHop.URL, 1, final.URL), false},
		{"a POST", doc, "POST", hop(tlsHop.URL, 1, final.URL), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sawAuth = nil
			resp, err := get(tt.ctx, tt.verb, tt.u)
			followed := err == nil && resp.StatusCode == http.StatusOK
			if tt.ok != followed {
				status := 0
				if resp != nil {
					status = resp.StatusCode
				}
				t.Fatalf("followed=%v (status %d, err %v), want %v", followed, status, err, tt.ok)
			}
			if !tt.ok && err != nil && !errors.Is(err, ErrRedirect) {
				t.Errorf("refusal %v does not wrap ErrRedirect", err)
			}
			for _, a := range sawAuth {
				if a != "" {
					t.Errorf("credentials carried over a redirect: %q", a)
				}
			}
		})
	}
}

func TestIsLoopback(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1":               true,
		"127.1.2.3":               true,
		"::1":                     true,
		"localhost":               true,
		"LOCALHOST.":              true,
		"a.localhost":             true,
		"city-a.Localhost":        true,
		"localhost.example.org":   false,
		"a.localhost.example.org": false,
		"notlocalhost":            false,
		"example.org":             false,
		"10.0.0.1":                false,
		"":                        false,
	} {
		if got := IsLoopback(host); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", host, got, want)
		}
	}
}

// Names under .localhost reach 127.0.0.1 without a resolver: Go's would
// ask DNS, which might answer with another machine, or not at all offline.
func TestLocalhostNamesDialLoopback(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Host)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	resp, err := NewClient(nil, 2*time.Second, 100).Get("http://tenant-a.localhost:" + u.Port() + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if want := "tenant-a.localhost:" + u.Port(); string(body) != want {
		t.Errorf("the server saw Host %q, want %q", body, want)
	}
}

// An observed client sends the trace context of the request's span, in a
// copy of the caller's headers, and records the request when its body is
// closed.
func TestObservedClient(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	tel, err := telemetry.New(telemetry.Config{TracerProvider: tp, Propagator: propagation.TraceContext{}})
	if err != nil {
		t.Fatal(err)
	}
	base := NewClient(nil, time.Second, 0)
	c := Observed(base, tel.Site("").Provider("oidc"))
	if c == base || base.Transport.(*limitTransport).tel != nil {
		t.Fatal("Observed changed the client it was given")
	}
	req, _ := http.NewRequestWithContext(telemetry.WithEndpoint(context.Background(), telemetry.EndpointDiscovery),
		http.MethodGet, srv.URL+"/.well-known/openid-configuration?x=secret", nil)
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body.Close()
	if len(req.Header) != 1 {
		t.Errorf("the caller's headers changed: %v", req.Header)
	}
	ended := spans.Ended()
	if len(ended) != 1 || ended[0].Name() != "GET discovery" {
		t.Fatalf("spans: %v", ended)
	}
	want := "00-" + ended[0].SpanContext().TraceID().String() + "-" + ended[0].SpanContext().SpanID().String() + "-01"
	if got.Get("Traceparent") != want || got.Get("Accept") != "application/json" {
		t.Errorf("the provider got %v, want traceparent %s", got, want)
	}
	for _, kv := range ended[0].Attributes() {
		if strings.Contains(kv.Value.Emit(), "secret") {
			t.Errorf("attribute %s = %s shows the query", kv.Key, kv.Value.Emit())
		}
	}
}
