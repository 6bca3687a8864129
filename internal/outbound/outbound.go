// Package outbound builds the HTTP client every strategy uses to talk to
// providers: bounded in time and in response size, and classifying transport
// failures into the stable error codes.
package outbound

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/extauth/extauth/internal/telemetry"
)

// Defaults for NewClient.
const (
	DefaultTimeout  = 10 * time.Second
	DefaultMaxBody  = 1 << 20
	maxIdleConns    = 32
	dialTimeout     = 5 * time.Second
	tlsHandshake    = 5 * time.Second
	responseHeaders = 10 * time.Second
)

// ErrBodyTooLarge is returned while reading a response body past the bound.
var ErrBodyTooLarge = errors.New("response body exceeds the size bound")

// NewClient returns a client whose requests time out after timeout and whose
// response bodies fail with ErrBodyTooLarge past maxBody bytes. Zero values
// take the defaults. base, when not nil, supplies the transport to wrap.
func NewClient(base *http.Client, timeout time.Duration, maxBody int64) *http.Client {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if maxBody <= 0 {
		maxBody = DefaultMaxBody
	}
	var rt http.RoundTripper
	var jar http.CookieJar
	if base != nil {
		rt = base.Transport
		jar = base.Jar
		if base.Timeout > 0 && base.Timeout < timeout {
			timeout = base.Timeout
		}
	}
	if rt == nil {
		rt = &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           dialLoopbackNames((&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext),
			TLSHandshakeTimeout:   tlsHandshake,
			ResponseHeaderTimeout: responseHeaders,
			MaxIdleConns:          maxIdleConns,
			MaxIdleConnsPerHost:   maxIdleConns,
			IdleConnTimeout:       90 * time.Second,
			ForceAttemptHTTP2:     true,
		}
	}
	// The time-out is a deadline on each request's context, set by the
	// transport, rather than http.Client.Timeout, which starts a goroutine
	// and a timer per request to enforce it.
	return &http.Client{
		Transport:     &limitTransport{base: rt, max: maxBody, timeout: timeout},
		Jar:           jar,
		CheckRedirect: checkRedirect,
	}
}

// Timeout returns the time-out of a client NewClient made: each request,
// its body read included, and each redirect hop is bounded by it. Zero for
// other clients.
func Timeout(c *http.Client) time.Duration {
	if t, ok := c.Transport.(*limitTransport); ok {
		return t.timeout
	}
	return 0
}

// MaxRedirects bounds the redirects a document fetch follows.
const MaxRedirects = 3

type documentKey struct{}

// Document marks ctx as the fetch of a public document (SAML metadata,
// OpenID Connect discovery, a key set), whose URL may move: the client then
// follows up to MaxRedirects redirects of a GET that stay on https, or go
// from http to https (http to http only between loopback hosts, for
// development), never to another scheme, never carrying credentials. Every
// other request (token, profile, logout) follows none: a provider's
// endpoints have no business redirecting us, and following would let a
// compromised one point our credentials elsewhere. Each hop is under the
// client's time-out and size bound.
func Document(ctx context.Context) context.Context {
	return context.WithValue(ctx, documentKey{}, true)
}

// ErrRedirect is wrapped by the error of a document fetch whose redirect is
// refused.
var ErrRedirect = errors.New("redirect refused")

func checkRedirect(req *http.Request, via []*http.Request) error {
	first := via[0]
	if first.Context().Value(documentKey{}) == nil || first.Method != http.MethodGet {
		return http.ErrUseLastResponse
	}
	if len(via) > MaxRedirects {
		return fmt.Errorf("%w: more than %d redirects", ErrRedirect, MaxRedirects)
	}
	prev, next := via[len(via)-1].URL, req.URL
	if next.User != nil {
		return fmt.Errorf("%w: to a URL with credentials", ErrRedirect)
	}
	switch {
	case next.Scheme == "https":
	case next.Scheme == "http" && prev.Scheme == "http" && IsLoopback(prev.Hostname()) && IsLoopback(next.Hostname()):
	default:
		return fmt.Errorf("%w: from %s to %s", ErrRedirect, prev.Scheme, Redact(next))
	}
	req.Header.Del("Authorization")
	req.Header.Del("Cookie")
	return nil
}

// IsLoopback reports whether host names the machine itself: a loopback
// address, localhost, or a name under .localhost (RFC 6761, 6.3), such as
// the tenant subdomains a.localhost that browsers reach at 127.0.0.1. It is
// the one rule for where plain http is allowed (SAML metadata, OpenID
// Connect issuers and endpoints, document redirects).
func IsLoopback(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// dialLoopbackNames dials the names under .localhost at 127.0.0.1 without
// asking a resolver, as browsers do: Go's resolver sends them to DNS, which
// could answer with another machine, and IsLoopback lets plain http go to
// them.
func dialLoopbackNames(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, port, err := net.SplitHostPort(addr); err == nil {
			host = strings.ToLower(strings.TrimSuffix(host, "."))
			if strings.HasSuffix(host, ".localhost") {
				addr = net.JoinHostPort("127.0.0.1", port)
			}
		}
		return dial(ctx, network, addr)
	}
}

type limitTransport struct {
	base    http.RoundTripper
	max     int64
	timeout time.Duration
	// tel, when set, measures and traces each request (Observed).
	tel *telemetry.Provider
}

// Observed returns a copy of c, a client NewClient made, whose requests p
// measures and traces: their duration and result by endpoint kind (the
// one their context was marked with, telemetry.WithEndpoint), a span each
// and the trace context in their headers. Other clients, or a nil p, come
// back as they are.
func Observed(c *http.Client, p *telemetry.Provider) *http.Client {
	t, ok := c.Transport.(*limitTransport)
	if !ok || p == nil {
		return c
	}
	lt := *t
	lt.tel = p
	oc := *c
	oc.Transport = &lt
	return &oc
}

// WithBounds returns a copy of c with another time-out and size bound, for
// the one document that is larger and slower than every other (a SAML
// federation's aggregate): a client NewClient made keeps its transport and
// its observation; any other is wrapped by NewClient.
func WithBounds(c *http.Client, timeout time.Duration, maxBody int64) *http.Client {
	t, ok := c.Transport.(*limitTransport)
	if !ok {
		return NewClient(c, timeout, maxBody)
	}
	lt := *t
	lt.timeout, lt.max = timeout, maxBody
	oc := *c
	oc.Transport = &lt
	return &oc
}

func (t *limitTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx := r.Context()
	// The body is made first: its observation, with the carrier that
	// writes the trace context, must live on the heap, and the body is
	// there anyway.
	b := &limitedBody{left: t.max}
	if t.tel != nil {
		ctx, b.obs = t.tel.StartRequest(ctx, r)
	}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	out := r.WithContext(ctx)
	b.obs.Inject(out)
	resp, err := t.base.RoundTrip(out)
	if err != nil {
		cancel()
		b.obs.End(0, result(err))
		return nil, err
	}
	if resp.ContentLength > t.max {
		resp.Body.Close()
		cancel()
		b.obs.End(resp.StatusCode, telemetry.ResultTooLarge)
		return nil, fmt.Errorf("%s %s: %w", r.Method, Redact(r.URL), ErrBodyTooLarge)
	}
	b.rc, b.cancel, b.status = resp.Body, cancel, resp.StatusCode
	resp.Body = b
	return resp, nil
}

// result classifies a failed request for its metrics.
func result(err error) telemetry.Result {
	switch {
	case IsTooLarge(err):
		return telemetry.ResultTooLarge
	case IsTimeout(err):
		return telemetry.ResultTimeout
	default:
		return telemetry.ResultError
	}
}

// limitedBody bounds a body and ends its request's deadline, and its
// observation, when closed.
type limitedBody struct {
	rc     io.ReadCloser
	left   int64
	cancel context.CancelFunc
	obs    telemetry.Request
	status int
	// err is the first error of a read other than io.EOF.
	err error
}

func (b *limitedBody) Read(p []byte) (int, error) {
	n, err := b.read(p)
	if err != nil && err != io.EOF && b.err == nil {
		b.err = err
	}
	return n, err
}

func (b *limitedBody) read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body of exactly the bound from a longer one.
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n > 0 {
			return 0, ErrBodyTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error {
	err := b.rc.Close()
	b.cancel()
	res := telemetry.StatusResult(b.status)
	if b.err != nil {
		res = result(b.err)
	}
	b.obs.End(b.status, res)
	// A second Close must not record the request twice.
	b.obs = telemetry.Request{}
	return err
}

// Redact returns u without its query, fragment and user information, for
// error messages: a provider URL may carry a token or a code.
func Redact(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := *u
	c.User = nil
	c.RawQuery = ""
	c.ForceQuery = false
	c.Fragment = ""
	c.RawFragment = ""
	return c.String()
}

// IsTimeout reports whether err is a time-out: a deadline or a net.Error
// that says so.
func IsTimeout(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	// x/oauth2 flattens body-read errors with %v; the text is all that is left.
	if msg := err.Error(); strings.Contains(msg, "Client.Timeout exceeded") || strings.Contains(msg, context.DeadlineExceeded.Error()) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// IsTooLarge reports whether err comes from the body bound. Libraries that
// flatten errors with %v lose the chain, so the text is recognised too.
func IsTooLarge(err error) bool {
	return errors.Is(err, ErrBodyTooLarge) || (err != nil && strings.Contains(err.Error(), ErrBodyTooLarge.Error()))
}

// Scrub replaces a *url.Error's URL with its redacted form, keeping the
// chain for errors.Is: a request URL may carry a code or a token.
func Scrub(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil {
			c := *ue
			c.URL = Redact(u)
			return &c
		}
		c := *ue
		c.URL = "(unparseable URL)"
		return &c
	}
	return err
}

// ErrNoClientCertificate is wrapped by the error of WithClientCertificate
// for a client whose transport cannot present a certificate.
var ErrNoClientCertificate = errors.New("the HTTP client's transport cannot present a TLS client certificate: Options.HTTPClient's Transport must be an *http.Transport, or nil")

// WithClientCertificate returns a copy of c, a client NewClient made, that
// presents the certificate get returns when a server asks for one (mutual
// TLS, RFC 8705), keeping c's bounds, telemetry and TLS settings (its
// trusted roots). c's transport must be an *http.Transport.
func WithClientCertificate(c *http.Client, get func(*tls.CertificateRequestInfo) (*tls.Certificate, error)) (*http.Client, error) {
	return WithTLS(c, func(cfg *tls.Config) { cfg.GetClientCertificate = get })
}

// WithTLS returns a copy of c, a client NewClient made, whose transport is
// a clone of c's with its TLS configuration changed by edit (a client
// certificate, the server certificates trusted), keeping c's bounds,
// telemetry and every other TLS setting. c's transport must be an
// *http.Transport: otherwise the error wraps ErrNoClientCertificate.
func WithTLS(c *http.Client, edit func(*tls.Config)) (*http.Client, error) {
	lt, ok := c.Transport.(*limitTransport)
	if !ok {
		return nil, ErrNoClientCertificate
	}
	base, ok := lt.base.(*http.Transport)
	if !ok {
		return nil, ErrNoClientCertificate
	}
	tr := base.Clone()
	if tr.TLSClientConfig == nil {
		tr.TLSClientConfig = &tls.Config{}
	}
	edit(tr.TLSClientConfig)
	withTLS := *lt
	withTLS.base = tr
	out := *c
	out.Transport = &withTLS
	return &out, nil
}
