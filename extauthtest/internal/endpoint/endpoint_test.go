package endpoint_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/extauth/extauth/extauthtest/internal/endpoint"
)

// serve runs a fake with one endpoint "e" behind fs; returned reports each
// time a handler has returned.
func serve(t *testing.T, fs *endpoint.Faults[string]) (url string, returned chan struct{}) {
	t.Helper()
	returned = make(chan struct{}, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { returned <- struct{}{} }()
		if fs.Enter(w, r, "e") {
			io.WriteString(w, "fine")
		}
	}))
	t.Cleanup(func() { fs.Close(); srv.Close() })
	return srv.URL, returned
}

func get(t *testing.T, u string) (int, string, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

func TestFaultsAnswers(t *testing.T) {
	fs := &endpoint.Faults[string]{
		Huge:      endpoint.Huge{ContentType: "application/json", Prefix: `{"x":"`, Fill: 'a', Suffix: `"}`},
		Malformed: endpoint.Body{ContentType: "application/json", Text: "<html>"},
	}
	u, _ := serve(t, fs)

	if status, _, body := get(t, u); status != 200 || body != "fine" {
		t.Errorf("no fault: %d %q", status, body)
	}
	fs.Set("e", endpoint.ServerError)
	if status, _, body := get(t, u); status != 500 || body == "fine" {
		t.Errorf("server error: %d %q", status, body)
	}
	fs.Set("e", endpoint.HugeBody)
	status, ct, body := get(t, u)
	if want := `{"x":"` + strings.Repeat("a", endpoint.HugeBodySize) + `"}`; status != 200 || ct != "application/json" || body != want {
		t.Errorf("huge body: %d %q, %d bytes", status, ct, len(body))
	}
	fs.Set("e", endpoint.Malformed)
	if status, ct, body := get(t, u); status != 200 || ct != "application/json" || body != "<html>" {
		t.Errorf("malformed: %d %q %q", status, ct, body)
	}
	fs.Set("e", endpoint.None)
	if status, _, body := get(t, u); status != 200 || body != "fine" {
		t.Errorf("restored: %d %q", status, body)
	}
	if n := fs.Calls("e"); n != 5 {
		t.Errorf("calls %d, want 5", n)
	}
	if n := fs.Calls("other"); n != 0 {
		t.Errorf("calls of an endpoint never called: %d", n)
	}
}

func TestServerErrorAnswerOfTheFake(t *testing.T) {
	fs := &endpoint.Faults[string]{ServerError: func(w http.ResponseWriter) { http.Error(w, "own shape", http.StatusInternalServerError) }}
	u, _ := serve(t, fs)
	fs.Set("e", endpoint.ServerError)
	if status, _, body := get(t, u); status != 500 || body != "own shape\n" {
		t.Errorf("server error: %d %q", status, body)
	}
}

// A client that gives up on a POST must end the hang: the request body
// has to be read for net/http to notice, which is what Hold is for.
func TestHangEndsWhenTheClientLeaves(t *testing.T) {
	fs := &endpoint.Faults[string]{}
	u, returned := serve(t, fs)
	fs.Set("e", endpoint.Hang)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(url.Values{"code": {"c"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("hang answered %d", resp.StatusCode)
	}
	select {
	case <-returned:
	case <-time.After(30 * time.Second):
		t.Fatal("the handler still hangs after the client left")
	}
}

func TestHangEndsWithClose(t *testing.T) {
	fs := &endpoint.Faults[string]{}
	u, returned := serve(t, fs)
	fs.Set("e", endpoint.Hang)
	go func() {
		if resp, err := http.Post(u, "text/plain", strings.NewReader("body")); err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case <-returned:
		t.Fatal("hang answered before Close")
	case <-time.After(50 * time.Millisecond):
	}
	fs.Close()
	select {
	case <-returned:
	case <-time.After(30 * time.Second):
		t.Fatal("the handler still hangs after Close")
	}
	// A hang after Close ends at once; a second Close is harmless.
	fs.Close()
	get(t, u)
}

func TestRandom(t *testing.T) {
	a, b := endpoint.Random(20), endpoint.Random(20)
	if len(a) != 27 || a == b || strings.ContainsAny(a, "+/=") {
		t.Errorf("Random(20): %q, %q", a, b)
	}
}

func TestAppendQuery(t *testing.T) {
	for _, tc := range []struct{ base, want string }{
		{"https://app.example/cb", "https://app.example/cb?code=c&state=s"},
		{"https://app.example/cb?x=1&state=old", "https://app.example/cb?code=c&state=s&x=1"},
		{"://bad", "://bad"},
	} {
		if got := endpoint.AppendQuery(tc.base, url.Values{"code": {"c"}, "state": {"s"}}); got != tc.want {
			t.Errorf("AppendQuery(%q) = %q, want %q", tc.base, got, tc.want)
		}
	}
}
