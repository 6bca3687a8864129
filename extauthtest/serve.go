package extauthtest

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// Serve starts a test server on 127.0.0.1 whose handler build makes from
// the server's own base URL ("http://127.0.0.1:PORT"), so that the
// application under test is configured with its real address: the address
// its callback URLs, and the fake providers' registrations, derive from.
// The server is closed when the test ends.
//
// Requests that arrive while build is still running (an application
// reading its own SAML metadata in the background) are answered 503.
func Serve(t testing.TB, build func(baseURL string) http.Handler) *httptest.Server {
	t.Helper()
	var h atomic.Pointer[http.Handler]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hp := h.Load()
		if hp == nil {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		(*hp).ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	built := build(srv.URL)
	h.Store(&built)
	return srv
}
