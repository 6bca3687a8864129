package extauthtest

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/extauth/extauth/internal/harness"
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
	return harness.Serve(t, build)
}
