//go:build interop

package interop

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/extauth/extauth/internal/harness"
)

// tlsFront is the TLS server in front of an IdP that serves plain HTTP
// (php -S, Python's wsgiref), as Apache or nginx is in a deployment: it
// asks every client for a certificate and, on the IdP's back-channel path
// (its ArtifactResolutionService), requires one of the SP's, as Apache's
// SSLVerifyClient with an SSLRequire on the certificate does; elsewhere a
// browser presents none.
type tlsFront struct {
	URL string
	ca  *harness.Cert
	// backChannel is the path that requires a client certificate.
	backChannel string
	target      atomic.Pointer[url.URL]

	mu        sync.Mutex
	allowed   []*x509.Certificate
	presented []*x509.Certificate
	// requests and answers are the back-channel's requests and the IdP's
	// answers, as they went through.
	requests, answers [][]byte
}

func newTLSFront(t *testing.T, backChannel string) *tlsFront {
	t.Helper()
	f := &tlsFront{ca: harness.NewCert(t, "extauth interop CA", nil, harness.CA), backChannel: backChannel}
	server := harness.NewCert(t, "127.0.0.1", f.ca, harness.TLSServer)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{server.Cert.Raw}, PrivateKey: server.Key}},
		ClientAuth: tls.RequestClientCert}
	// Refused handshakes are the tests' to report.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

// forward points the front at the IdP's plain-HTTP server.
func (f *tlsFront) forward(to string) {
	u, err := url.Parse(to)
	if err != nil {
		panic(err)
	}
	f.target.Store(u)
}

// require sets the client certificates the back-channel accepts.
func (f *tlsFront) require(certs ...*x509.Certificate) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.allowed = certs
}

// backChannelAnswers are the IdP's answers on the back-channel, in order.
func (f *tlsFront) backChannelAnswers() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.answers...)
}

// backChannelRequests are the SP's requests on the back-channel, in order.
func (f *tlsFront) backChannelRequests() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.requests...)
}

// backChannelCerts are the client certificates presented on the
// back-channel path, one per request.
func (f *tlsFront) backChannelCerts() []*x509.Certificate {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*x509.Certificate(nil), f.presented...)
}

func (f *tlsFront) serve(w http.ResponseWriter, r *http.Request) {
	to := f.target.Load()
	if to == nil {
		http.Error(w, "starting", http.StatusServiceUnavailable)
		return
	}
	if strings.HasPrefix(r.URL.Path, f.backChannel) {
		var c *x509.Certificate
		if len(r.TLS.PeerCertificates) > 0 {
			c = r.TLS.PeerCertificates[0]
		}
		f.mu.Lock()
		f.presented = append(f.presented, c)
		ok := false
		for _, a := range f.allowed {
			ok = ok || (c != nil && c.Equal(a))
		}
		f.mu.Unlock()
		if !ok {
			http.Error(w, "a client certificate of the SP is required", http.StatusForbidden)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "cannot read the request", http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.requests = append(f.requests, body)
		f.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		p := httputil.NewSingleHostReverseProxy(to)
		p.ModifyResponse = func(resp *http.Response) error {
			body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
			resp.Body.Close()
			f.mu.Lock()
			f.answers = append(f.answers, body)
			f.mu.Unlock()
			resp.Body = io.NopCloser(bytes.NewReader(body))
			return err
		}
		p.ServeHTTP(w, r)
		return
	}
	httputil.NewSingleHostReverseProxy(to).ServeHTTP(w, r)
}

// client is an HTTP client that trusts the front's CA, and nothing else.
func (f *tlsFront) client() *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(f.ca.Cert)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

// browser is a harness browser that trusts the front.
func (f *tlsFront) browser(t *testing.T) *harness.Browser {
	b := harness.NewBrowser(t)
	b.Client.Transport = f.client().Transport
	return b
}
