package outbound

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
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
	if time.Since(began) > 3*time.Second {
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
	if c.Timeout != time.Second {
		t.Errorf("Timeout = %v", c.Timeout)
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
