package telemetry

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Endpoint is the kind of provider endpoint an outbound request is for.
type Endpoint uint8

// The endpoint kinds.
const (
	// EndpointOther is a request nobody marked (a goth provider's own).
	EndpointOther Endpoint = iota
	// EndpointToken: an OAuth token endpoint (code exchange, refresh; the
	// request and access token endpoints of OAuth 1.0a).
	EndpointToken
	// EndpointUserInfo: OpenID Connect UserInfo, or a provider's profile
	// API.
	EndpointUserInfo
	// EndpointJWKS: an OpenID provider's key set.
	EndpointJWKS
	// EndpointDiscovery: an OpenID provider's discovery document.
	EndpointDiscovery
	// EndpointMetadata: a SAML IdP's metadata.
	EndpointMetadata
	// EndpointLogout: a logout call made from the server (OAuth token
	// revocation at sign-out).
	EndpointLogout
	// EndpointPAR: an OAuth pushed authorization request (RFC 9126).
	EndpointPAR
	// EndpointArtifact: a SAML IdP's ArtifactResolutionService (an
	// ArtifactResolve over SOAP, back-channel).
	EndpointArtifact
	numEndpoints
)

var endpointNames = [numEndpoints]string{"other", "token", "userinfo", "jwks", "discovery", "metadata", "logout", "par", "artifact"}

// String returns the endpoint's attribute value.
func (e Endpoint) String() string {
	if e < numEndpoints {
		return endpointNames[e]
	}
	return endpointNames[EndpointOther]
}

type endpointKey struct{}

// WithEndpoint marks ctx as that of requests to an endpoint of kind e.
func WithEndpoint(ctx context.Context, e Endpoint) context.Context {
	return context.WithValue(ctx, endpointKey{}, e)
}

func endpointOf(ctx context.Context) Endpoint {
	e, _ := ctx.Value(endpointKey{}).(Endpoint)
	if e >= numEndpoints {
		return EndpointOther
	}
	return e
}

// Result is how an outbound request ended.
type Result uint8

// The results.
const (
	ResultOK Result = iota // a 2xx answer
	ResultRedirect
	ResultClientError // 4xx
	ResultServerError // 5xx
	ResultTimeout
	ResultTooLarge // the answer passed the size bound
	ResultError    // no answer: the connection failed
	numResults
)

var resultNames = [numResults]string{"ok", "redirect", "client_error", "server_error", "timeout", "too_large", "error"}

// String returns the result's attribute value.
func (r Result) String() string { return resultNames[r] }

// StatusResult is the result of an answer with HTTP status code status.
func StatusResult(status int) Result {
	switch {
	case status >= 500:
		return ResultServerError
	case status >= 400:
		return ResultClientError
	case status >= 300:
		return ResultRedirect
	default:
		return ResultOK
	}
}

// Request is one outbound request being observed: its span, when it has
// one, and its start. The zero Request observes nothing.
type Request struct {
	p *Provider
	// mctx is the context of the duration's measurement (see
	// measureContext).
	mctx     context.Context
	span     trace.Span
	attrs    *reqAttrs
	start    monotonic
	endpoint Endpoint
	// carrier writes the trace context into the request's headers (see
	// Inject); kept here so that a Request that lives on the heap needs
	// no allocation of its own for it.
	carrier headerCopy
}

// spanNames are the names of the outbound spans of GET and POST requests,
// by endpoint kind: "GET jwks", "POST token"...
var spanNames = func() (n [2][numEndpoints]string) {
	for e := range numEndpoints {
		n[0][e] = http.MethodGet + " " + e.String()
		n[1][e] = http.MethodPost + " " + e.String()
	}
	return n
}()

func spanName(method string, e Endpoint) string {
	switch method {
	case http.MethodGet:
		return spanNames[0][e]
	case http.MethodPost:
		return spanNames[1][e]
	}
	return method + " " + e.String()
}

// StartRequest begins observing r, an outbound request of p's, made with
// ctx: its endpoint kind is the one ctx was marked with (WithEndpoint).
// It returns the context to send r with, which carries the request's
// span when there is one: a request made during an authorize or callback
// whose span records nothing gets none. Call Inject on the request that
// is sent, then End.
func (p *Provider) StartRequest(ctx context.Context, r *http.Request) (context.Context, Request) {
	q := Request{p: p, endpoint: endpointOf(ctx)}
	if p.t.recording(ctx) {
		ctx, q.span = p.t.tracer.Start(ctx, spanName(r.Method, q.endpoint), clientSpan...)
		if q.span.IsRecording() {
			q.attrs = p.requestAttrs(r, q.endpoint)
		}
	}
	// The clock is read only for an instrument that records: on some
	// machines reading it costs more than the rest of this.
	if p.t.outboundDur.Enabled(ctx) {
		q.mctx = measureContext(ctx, q.span)
		q.start = readClock()
	}
	return ctx, q
}

// reqAttrs are the span attributes of the requests of one method to one
// URL (scheme, host and path): a provider's requests to an endpoint kind
// go to one URL, so they are made once and shared by its spans, which the
// SDK copies.
type reqAttrs struct {
	method, scheme, host, path string
	kv                         []attribute.KeyValue
	// answered is kv with the status code of the last answer that was not
	// an error.
	answered atomic.Pointer[statusAttrs]
}

type statusAttrs struct {
	status int
	kv     []attribute.KeyValue
}

// requestAttrs returns the span attributes of r, to an endpoint of kind e:
// the last ones made for e when r goes to the same URL with the same
// method, else new ones, which are kept.
func (p *Provider) requestAttrs(r *http.Request, e Endpoint) *reqAttrs {
	u := r.URL
	path := u.EscapedPath()
	slot := &p.requests[e]
	if a := slot.Load(); a != nil && a.method == r.Method && a.scheme == u.Scheme && a.host == u.Host && a.path == path {
		return a
	}
	a := &reqAttrs{method: r.Method, scheme: u.Scheme, host: u.Host, path: path, kv: p.requestAttributes(r, e)}
	slot.Store(a)
	return a
}

// requestAttributes are the span attributes of r: OpenTelemetry's HTTP
// client conventions, with the URL cut to scheme, host and path (a query
// may carry a code or a token), and extauth's own.
func (p *Provider) requestAttributes(r *http.Request, e Endpoint) []attribute.KeyValue {
	u := r.URL
	kv := make([]attribute.KeyValue, 0, 5+len(p.base))
	kv = append(kv,
		attribute.String("http.request.method", r.Method),
		attribute.String("server.address", u.Hostname()),
		attribute.String("url.full", u.Scheme+"://"+u.Host+u.EscapedPath()),
		KeyEndpoint.String(e.String()),
	)
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	if n, err := strconv.Atoi(port); err == nil {
		kv = append(kv, attribute.Int("server.port", n))
	}
	return slices.Clip(append(kv, p.base...))
}

// ended returns the attributes of a request that ended with status (0
// when there was no answer) and res: kv, with the status code, and the
// error type and result of a failure. Those of an answer that is not an
// error are kept for the next request that ends alike.
func (a *reqAttrs) ended(status int, res Result) []attribute.KeyValue {
	if res < ResultClientError {
		if status <= 0 {
			return a.kv
		}
		if s := a.answered.Load(); s != nil && s.status == status {
			return s.kv
		}
		s := &statusAttrs{status, append(a.kv, attribute.Int("http.response.status_code", status))}
		a.answered.Store(s)
		return s.kv
	}
	kv := a.kv
	if status > 0 {
		kv = append(kv, attribute.Int("http.response.status_code", status))
	}
	et := res.String()
	if status > 0 {
		et = strconv.Itoa(status)
	}
	return append(kv, attribute.String("error.type", et), KeyResult.String(res.String()))
}

// Inject writes the trace context of the request's context into r's
// headers with the propagator, copying the headers first: r is the
// transport's own copy of the caller's request, whose headers it must
// leave alone. Call it on a Request that stays where it is until r is
// sent (a field of a value on the heap): the carrier is part of it.
func (q *Request) Inject(r *http.Request) {
	if q.p == nil || !trace.SpanContextFromContext(r.Context()).IsValid() {
		return
	}
	q.carrier = headerCopy{r: r}
	q.p.t.prop.Inject(r.Context(), &q.carrier)
	q.carrier = headerCopy{}
}

// headerCopy is a propagation carrier that copies the request's headers
// before its first write.
type headerCopy struct {
	r      *http.Request
	copied bool
}

func (c *headerCopy) Get(key string) string { return c.r.Header.Get(key) }

func (c *headerCopy) Set(key, value string) {
	if !c.copied {
		c.r.Header = c.r.Header.Clone()
		if c.r.Header == nil {
			c.r.Header = http.Header{}
		}
		c.copied = true
	}
	c.r.Header.Set(key, value)
}

func (c *headerCopy) Keys() []string {
	keys := make([]string, 0, len(c.r.Header))
	for k := range c.r.Header {
		keys = append(keys, k)
	}
	return keys
}

// End records the request: its duration with status (0 when there was no
// answer) and result, and ends its span.
func (q *Request) End(status int, res Result) {
	p := q.p
	if p == nil {
		return
	}
	if d := p.t.outboundDur; q.start != 0 && d.Enabled(q.mctx) {
		d.Record(q.mctx, q.start.seconds(), p.outboundSet(q.endpoint, res).rec...)
	}
	if q.span == nil {
		return
	}
	if q.attrs != nil && q.span.IsRecording() {
		q.span.SetAttributes(q.attrs.ended(status, res)...)
		if res >= ResultClientError {
			q.span.SetStatus(codes.Error, res.String())
		}
	}
	q.span.End()
}

func (p *Provider) outboundSet(e Endpoint, res Result) *optSet {
	sets := p.outbound.Load()
	if sets == nil {
		p.outbound.CompareAndSwap(nil, new([numOutboundSlots]atomic.Pointer[optSet]))
		sets = p.outbound.Load()
	}
	slot := &sets[int(e)*int(numResults)+int(res)]
	if s := slot.Load(); s != nil {
		return s
	}
	s := newOptSet(append(append(make([]attribute.KeyValue, 0, 4), p.base...),
		KeyEndpoint.String(e.String()), KeyResult.String(res.String()))...)
	slot.Store(s)
	return s
}

// numOutboundSlots is how many attribute sets a provider's outbound
// requests can have: one per endpoint and result.
const numOutboundSlots = int(numEndpoints) * int(numResults)
