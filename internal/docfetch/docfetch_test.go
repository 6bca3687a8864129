package docfetch

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/extauth/extauth/internal/outbound"
	"github.com/extauth/extauth/internal/telemetry"
)

var errPage = errors.New("a web page")

// One kind of document, every way its fetch can end: the document, the
// copy still current, not found, another status, a web page, too large.
func TestGet(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/doc":
			if r.Header.Get("Accept") != "application/samlmetadata+xml" {
				http.Error(w, "accept", http.StatusNotAcceptable)
				return
			}
			if r.Header.Get("If-None-Match") == `"v1"` && r.Header.Get("If-Modified-Since") == "yesterday" {
				w.WriteHeader(http.StatusNotModified)
				return
			}
			w.Header().Set("ETag", `"v1"`)
			w.Header().Set("Last-Modified", "yesterday")
			w.Write([]byte("<doc/>"))
		case "/gone":
			w.WriteHeader(http.StatusGone)
		case "/down":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/page":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write([]byte("<html>login</html>"))
		case "/304":
			w.WriteHeader(http.StatusNotModified)
		case "/big":
			w.Write([]byte(strings.Repeat("x", 2048)))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	f := New(outbound.NewClient(nil, 0, 0), Kind{What: "test metadata", Accept: "application/samlmetadata+xml",
		Endpoint: telemetry.EndpointMetadata, MaxBytes: 1024, HTML: errPage})
	ctx := context.Background()

	doc, err := f.Get(ctx, srv.URL+"/doc", Validators{})
	if err != nil || string(doc.Body) != "<doc/>" || doc.NotModified || doc.ETag != `"v1"` || doc.LastModified != "yesterday" {
		t.Fatalf("the document: %+v, %v", doc, err)
	}
	if again, err := f.Get(ctx, srv.URL+"/doc", doc.Validators); err != nil || !again.NotModified || again.Body != nil || again.ETag != `"v1"` {
		t.Fatalf("a conditional fetch of the copy held: %+v, %v", again, err)
	}
	for _, c := range []struct {
		path string
		is   error
		says string
	}{
		{"/missing", ErrNotFound, "test metadata: HTTP status 404"},
		{"/gone", ErrNotFound, "test metadata: HTTP status 410"},
		{"/down", nil, "test metadata: HTTP status 503"},
		{"/page", errPage, "test metadata: a web page"},
		{"/big", nil, "test metadata: too large (over 1024 bytes)"},
		// Not modified, when no copy was named: no answer at all.
		{"/304", nil, "test metadata: HTTP status 304"},
	} {
		_, err := f.Get(ctx, srv.URL+c.path, Validators{})
		if err == nil || !strings.Contains(err.Error(), c.says) || (c.is != nil && !errors.Is(err, c.is)) ||
			(c.is == nil && errors.Is(err, ErrNotFound)) {
			t.Errorf("%s: %v, want it to say %q", c.path, err, c.says)
		}
	}
}
