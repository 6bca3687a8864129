package extauth_test

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/samlidp"
	"github.com/extauth/extauth/extauthtest/wpoauth"
	"github.com/extauth/extauth/internal/harness"
	"github.com/extauth/extauth/internal/telemetry"
)

// otelKit is an OpenTelemetry SDK whose metrics are read on demand (the
// SDK's ManualReader) and whose spans are kept in memory (tracetest), for
// the instruments of one Auth.
type otelKit struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	mp     *sdkmetric.MeterProvider
	tp     *sdktrace.TracerProvider
}

func newOtelKit(t *testing.T) *otelKit {
	k := &otelKit{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	k.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(k.reader))
	k.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(k.spans))
	t.Cleanup(func() {
		k.mp.Shutdown(context.Background())
		k.tp.Shutdown(context.Background())
	})
	return k
}

// options installs the kit in o, with W3C trace context on outbound
// requests and the spans of store calls.
func (k *otelKit) options(o *extauth.Options) {
	o.MeterProvider, o.TracerProvider, o.Propagator = k.mp, k.tp, propagation.TraceContext{}
	o.TraceStoreCalls = true
}

// point is one data point: a counter's or gauge's value, a histogram's
// count and sum.
type point struct {
	attrs map[string]string
	value float64
	count uint64
	sum   float64
}

func attrMap(s attribute.Set) map[string]string {
	m := map[string]string{}
	for _, kv := range s.ToSlice() {
		m[string(kv.Key)] = kv.Value.Emit()
	}
	return m
}

// points collects and returns the data points of the metric name.
func (k *otelKit) points(t *testing.T, name string) []point {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := k.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var out []point
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out = append(out, point{attrs: attrMap(p.Attributes), value: float64(p.Value)})
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out = append(out, point{attrs: attrMap(p.Attributes), value: float64(p.Value)})
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					out = append(out, point{attrs: attrMap(p.Attributes), value: p.Value})
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out = append(out, point{attrs: attrMap(p.Attributes), count: p.Count, sum: p.Sum})
				}
			default:
				t.Fatalf("%s: unexpected data %T", name, m.Data)
			}
		}
	}
	return out
}

// point returns the data point of name whose attributes are exactly want,
// failing the test when there is none.
func (k *otelKit) point(t *testing.T, name string, want map[string]string) point {
	t.Helper()
	ps := k.points(t, name)
	for _, p := range ps {
		if maps.Equal(p.attrs, want) {
			return p
		}
	}
	var have []string
	for _, p := range ps[:min(len(ps), 10)] {
		have = append(have, fmt.Sprint(p.attrs))
	}
	t.Fatalf("%s: no point with %v; have %d, such as %v", name, want, len(ps), have)
	return point{}
}

// ended returns the ended spans named name.
func (k *otelKit) ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range k.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func spanAttrs(s sdktrace.ReadOnlySpan) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.Emit()
	}
	return m
}

// outboundHeaders records the headers of the requests extauth sends.
type outboundHeaders struct {
	mu   sync.Mutex
	seen []http.Header
}

func (o *outboundHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	o.mu.Lock()
	o.seen = append(o.seen, r.Header.Clone())
	o.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func blog(extra ...string) map[string]string {
	m := map[string]string{"provider": "blog_oauth2", "tenant": ""}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i]] = extra[i+1]
	}
	return m
}

// A sign-in through the routes is counted, timed and traced: the sign-in
// from its start to its callback, the callback's own time, each outbound
// request and the store call, as spans under the callback's, with the
// trace context sent to the provider and nothing secret in any attribute.
func TestTelemetrySignIn(t *testing.T) {
	k := newOtelKit(t)
	out := &outboundHeaders{}
	a := newApp(t, func(o *extauth.Options) {
		k.options(o)
		o.HTTPClient = &http.Client{Transport: out}
	})
	b := harness.NewBrowser(t).NoFollow()
	cb := a.approve(b, a.start(b, url.Values{"return_to": {"/private?x=1"}}))
	if got := k.point(t, "extauth.signin.started", blog()).value; got != 1 {
		t.Errorf("started = %v after the authorize route", got)
	}
	a.clock.Add(42 * time.Second)
	if resp := b.Get(cb); resp.StatusCode != http.StatusOK {
		t.Fatalf("callback: %d %s", resp.StatusCode, resp.Body)
	}

	if got := k.point(t, "extauth.signin.completed", blog("outcome", "success")).value; got != 1 {
		t.Errorf("completed = %v", got)
	}
	if d := k.point(t, "extauth.signin.duration", blog("outcome", "success")); d.count != 1 || d.sum < 41.9 || d.sum > 42.5 {
		t.Errorf("sign-in duration: %d, sum %v s, want one of 42 s", d.count, d.sum)
	}
	if d := k.point(t, "extauth.callback.duration", blog("outcome", "success")); d.count != 1 || d.sum <= 0 || d.sum > 10 {
		t.Errorf("callback duration: %d, sum %v s", d.count, d.sum)
	}
	for _, e := range []string{"token", "userinfo"} {
		if d := k.point(t, "extauth.outbound.duration", blog("endpoint", e, "result", "ok")); d.count != 1 {
			t.Errorf("%s requests: %d", e, d.count)
		}
	}
	if d := k.point(t, "extauth.store.duration", blog("result", "new")); d.count != 1 {
		t.Errorf("store calls: %d", d.count)
	}
	if n := len(k.points(t, "extauth.outbound.duration")); n != 2 {
		t.Errorf("%d outbound series, want 2", n)
	}

	// Spans: authorize and callback, the callback's children.
	authz, cbs := k.ended("extauth.authorize"), k.ended("extauth.callback")
	if len(authz) != 1 || len(cbs) != 1 {
		t.Fatalf("%d authorize and %d callback spans", len(authz), len(cbs))
	}
	if got := spanAttrs(cbs[0]); got["provider"] != "blog_oauth2" || got["outcome"] != "success" || cbs[0].Status().Code == codes.Error {
		t.Errorf("callback span: %v %v", got, cbs[0].Status())
	}
	children := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range k.spans.Ended() {
		if s.Parent().SpanID() == cbs[0].SpanContext().SpanID() {
			children[s.Name()] = s
		}
	}
	for _, name := range []string{"POST token", "GET userinfo", "extauth.store.consume"} {
		if children[name] == nil {
			t.Errorf("no %q span under the callback's; children: %v", name, slices.Collect(maps.Keys(children)))
		}
	}
	if s := children["POST token"]; s != nil {
		attrs := spanAttrs(s)
		if attrs["endpoint"] != "token" || attrs["http.response.status_code"] != "200" || attrs["server.address"] != "127.0.0.1" {
			t.Errorf("token span attributes: %v", attrs)
		}
		// The provider got the token span's trace context.
		want := fmt.Sprintf("00-%s-%s-01", s.SpanContext().TraceID(), s.SpanContext().SpanID())
		found := false
		out.mu.Lock()
		for _, h := range out.seen {
			found = found || h.Get("Traceparent") == want
		}
		out.mu.Unlock()
		if !found {
			t.Errorf("no outbound request carried traceparent %s", want)
		}
	}

	// Nothing secret in any attribute: no token, code, state, user,
	// e-mail, cookie or URL query.
	id := a.identities()[0]
	cbURL, _ := url.Parse(cb)
	secrets := []string{id.Tokens.AccessToken, id.Tokens.RefreshToken, cbURL.Query().Get("code"), cbURL.Query().Get("state"),
		id.Email, "Ada", "?", "private"}
	for _, s := range k.spans.Ended() {
		for k, v := range spanAttrs(s) {
			for _, secret := range secrets {
				if secret != "" && strings.Contains(v, secret) {
					t.Errorf("span %s attribute %s = %q holds %q", s.Name(), k, v, secret)
				}
			}
			if k == "uid" || strings.Contains(v, id.UID+"@") {
				t.Errorf("span %s attribute %s = %q", s.Name(), k, v)
			}
		}
	}
}

// Store calls make spans only with Options.TraceStoreCalls: by default a
// traced callback has the spans of its outbound requests under its own,
// and its store call is measured by the store duration histogram alone.
func TestTelemetryStoreSpansOff(t *testing.T) {
	k := newOtelKit(t)
	a := newApp(t, func(o *extauth.Options) {
		k.options(o)
		o.TraceStoreCalls = false
	})
	b := harness.NewBrowser(t).NoFollow()
	if resp := b.Get(a.approve(b, a.start(b, nil))); resp.StatusCode != http.StatusOK {
		t.Fatalf("callback: %d %s", resp.StatusCode, resp.Body)
	}
	if d := k.point(t, "extauth.store.duration", blog("result", "new")); d.count != 1 {
		t.Errorf("store calls: %d", d.count)
	}
	cbs := k.ended("extauth.callback")
	if len(cbs) != 1 {
		t.Fatalf("%d callback spans", len(cbs))
	}
	var children []string
	for _, s := range k.spans.Ended() {
		if s.Parent().SpanID() == cbs[0].SpanContext().SpanID() {
			children = append(children, s.Name())
		}
	}
	slices.Sort(children)
	if want := []string{"GET userinfo", "POST token"}; !slices.Equal(children, want) {
		t.Errorf("spans under the callback's: %v, want %v", children, want)
	}
}

// Each way a sign-in fails is counted under its code, with the outbound
// result that caused it, and the span carries the code as its status.
func TestTelemetrySignInFailures(t *testing.T) {
	cases := []struct {
		name     string
		edit     func(*extauth.Options)
		fake     func(*wpoauth.Server)
		run      func(a *app, b *harness.Browser) *harness.Response
		code     string
		outbound map[string]string // endpoint and result of the request that failed
	}{
		{name: "access denied", run: func(a *app, b *harness.Browser) *harness.Response {
			a.Fake.AutoApprove = false
			page := b.Get(a.start(b, nil).String())
			denied := b.PostForm(page.URL.String(), url.Values{"decision": {"deny"}})
			return b.Get(denied.Header.Get("Location"))
		}, code: "access_denied"},
		{name: "cross-site start", run: func(a *app, b *harness.Browser) *harness.Response {
			b.Header.Set("Sec-Fetch-Site", "cross-site")
			return b.PostForm(a.URL+"/users/auth/blog_oauth2", nil)
		}, code: "csrf_detected"},
		{name: "no transaction cookie", run: func(a *app, b *harness.Browser) *harness.Response {
			cb := a.approve(b, a.start(b, nil))
			return harness.NewBrowser(a.t).NoFollow().Get(cb)
		}, code: "invalid_state"},
		{name: "bad code", run: func(a *app, b *harness.Browser) *harness.Response {
			return b.Get(strings.Replace(a.approve(b, a.start(b, nil)), "code=", "code=x", 1))
		}, code: "invalid_response", outbound: map[string]string{"endpoint": "token", "result": "client_error"}},
		{name: "token endpoint down", fake: func(s *wpoauth.Server) { s.TokenStatus = 500 },
			code: "provider_unavailable", outbound: map[string]string{"endpoint": "token", "result": "server_error"}},
		{name: "client secret rotated", fake: func(s *wpoauth.Server) { s.ClientSecret = "rotated" },
			code: "invalid_credentials", outbound: map[string]string{"endpoint": "token", "result": "client_error"}},
		{name: "token too large", edit: func(o *extauth.Options) { o.MaxResponseBytes = 8 << 10 }, fake: func(s *wpoauth.Server) { s.HugeToken = 1 << 20 },
			code: "invalid_response", outbound: map[string]string{"endpoint": "token", "result": "too_large"}},
		{name: "provider hangs", edit: func(o *extauth.Options) { o.Timeout = hangTimeout }, fake: func(s *wpoauth.Server) { s.Hang = true },
			code: "timeout", outbound: map[string]string{"endpoint": "token", "result": "timeout"}},
		{name: "profile not JSON", fake: func(s *wpoauth.Server) { s.MeBody = "<html>" },
			code: "invalid_response", outbound: map[string]string{"endpoint": "userinfo", "result": "ok"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := newOtelKit(t)
			a := newApp(t, func(o *extauth.Options) {
				k.options(o)
				if c.edit != nil {
					c.edit(o)
				}
			})
			b := harness.NewBrowser(t).NoFollow()
			var resp *harness.Response
			if c.run != nil {
				resp = c.run(a, b)
			} else {
				cb := a.approve(b, a.start(b, nil))
				a.Fake.Lock()
				c.fake(a.Fake)
				a.Fake.Unlock()
				resp = b.Get(cb)
			}
			if !strings.Contains(resp.Body, c.code) {
				t.Fatalf("answer %d %q, want %s", resp.StatusCode, resp.Body, c.code)
			}
			if got := k.point(t, "extauth.signin.completed", blog("outcome", "failure", "code", c.code)).value; got != 1 {
				t.Errorf("failures with %s: %v", c.code, got)
			}
			if ps := k.points(t, "extauth.signin.completed"); len(ps) != 1 {
				t.Errorf("completed series: %v", ps)
			}
			if c.outbound != nil {
				if d := k.point(t, "extauth.outbound.duration", blog("endpoint", c.outbound["endpoint"], "result", c.outbound["result"])); d.count != 1 {
					t.Errorf("outbound %v: %d", c.outbound, d.count)
				}
				// The provider's answer failed: the transaction was taken,
				// then given back.
				for _, res := range []string{"new", "released"} {
					if d := k.point(t, "extauth.store.duration", blog("result", res)); d.count != 1 {
						t.Errorf("store calls that ended %s: %d", res, d.count)
					}
				}
				if len(k.ended("extauth.store.release")) != 1 {
					t.Errorf("no store release span")
				}
			}
			var failed sdktrace.ReadOnlySpan
			for _, s := range append(k.ended("extauth.callback"), k.ended("extauth.authorize")...) {
				if s.Status().Code == codes.Error {
					failed = s
				}
			}
			if failed == nil || failed.Status().Description != c.code || spanAttrs(failed)["code"] != c.code {
				t.Errorf("no span failed with %s", c.code)
			}
		})
	}
}

// Without spans (no tracer provider, or a sampler that keeps none) an
// authorize request carries no operation: its start and its failure are
// counted at once, at its own provider and tenant, as with spans.
func TestTelemetryMetricsWithoutSpans(t *testing.T) {
	for _, c := range []struct {
		name    string
		sampler sdktrace.Sampler
	}{
		{"no tracer provider", nil},
		{"sampled out", sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0))},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := newOtelKit(t)
			rec := tracetest.NewSpanRecorder()
			a := newApp(t, func(o *extauth.Options) {
				o.MeterProvider = k.mp
				if c.sampler != nil {
					tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(c.sampler), sdktrace.WithSpanProcessor(rec))
					t.Cleanup(func() { tp.Shutdown(context.Background()) })
					o.TracerProvider = tp
				}
			})
			b := harness.NewBrowser(t).NoFollow()
			cb := a.approve(b, a.start(b, nil))
			if got := k.point(t, "extauth.signin.started", blog()).value; got != 1 {
				t.Errorf("started = %v after the authorize route", got)
			}
			if resp := b.Get(cb); resp.StatusCode != http.StatusOK {
				t.Fatalf("callback: %d %s", resp.StatusCode, resp.Body)
			}
			if got := k.point(t, "extauth.signin.completed", blog("outcome", "success")).value; got != 1 {
				t.Errorf("completed = %v", got)
			}

			cross := harness.NewBrowser(t).NoFollow()
			cross.Header.Set("Sec-Fetch-Site", "cross-site")
			if resp := cross.PostForm(a.URL+"/users/auth/blog_oauth2", nil); !strings.Contains(resp.Body, "csrf_detected") {
				t.Fatalf("cross-site start: %d %q", resp.StatusCode, resp.Body)
			}
			if got := k.point(t, "extauth.signin.completed", blog("outcome", "failure", "code", "csrf_detected")).value; got != 1 {
				t.Errorf("failures with csrf_detected: %v", got)
			}
			if ps := k.points(t, "extauth.signin.completed"); len(ps) != 2 {
				t.Errorf("completed series: %v", ps)
			}
			if got := k.point(t, "extauth.signin.started", blog()).value; got != 1 {
				t.Errorf("started = %v after a refused start", got)
			}
			if n := len(rec.Ended()); n != 0 {
				t.Errorf("%d spans recorded", n)
			}
		})
	}

	// At a tenant: counted at that tenant, not as an unknown one.
	k := newOtelKit(t)
	ta := newTenantApp(t, []string{"city-a"}, func(_ *tenantApp, o *extauth.Options) { o.MeterProvider = k.mp })
	if resp := ta.browser().PostForm(ta.url("city-a", "/users/auth/oidc"), nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("OIDC at city-a: %d %s", resp.StatusCode, resp.Body)
	}
	cross := ta.browser()
	cross.Header.Set("Sec-Fetch-Site", "cross-site")
	if resp := cross.PostForm(ta.url("city-a", "/users/auth/oidc"), nil); !strings.Contains(resp.Body, "csrf_detected") {
		t.Fatalf("cross-site start at city-a: %d %q", resp.StatusCode, resp.Body)
	}
	if got := k.point(t, "extauth.signin.started", map[string]string{"provider": "oidc", "tenant": "city-a"}).value; got != 1 {
		t.Errorf("started at city-a: %v", got)
	}
	if got := k.point(t, "extauth.signin.completed", map[string]string{"provider": "oidc", "tenant": "city-a", "outcome": "failure", "code": "csrf_detected"}).value; got != 1 {
		t.Errorf("failures with csrf_detected at city-a: %v", got)
	}
}

// failingStore is a store that is down.
type failingStore struct{}

func (failingStore) Consume(context.Context, string, time.Time) (bool, error) {
	return false, errors.New("connection refused")
}

// A store that fails, or is full, is counted apart from the providers, and
// the sign-in is counted as provider_unavailable.
func TestTelemetryStoreOutage(t *testing.T) {
	for _, c := range []struct {
		name   string
		store  extauth.Store
		before int // sign-ins that fill the store first
		result string
	}{
		{"down", failingStore{}, 0, "error"},
		{"full", extauth.NewMemoryStore(extauth.MemoryStoreOptions{MaxEntries: 1}), 1, "full"},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := newOtelKit(t)
			a := newApp(t, func(o *extauth.Options) {
				k.options(o)
				o.Store = c.store
			})
			b := harness.NewBrowser(t).NoFollow()
			for range c.before {
				b.Get(a.approve(b, a.start(b, nil)))
			}
			wantCode(t, b.Get(a.approve(b, a.start(b, nil))), http.StatusServiceUnavailable, "provider_unavailable")
			if d := k.point(t, "extauth.store.duration", blog("result", c.result)); d.count != 1 {
				t.Errorf("store calls that ended %s: %d", c.result, d.count)
			}
			if got := k.point(t, "extauth.signin.completed", blog("outcome", "failure", "code", "provider_unavailable")).value; got != 1 {
				t.Errorf("failures: %v", got)
			}
			var storeSpan sdktrace.ReadOnlySpan
			for _, s := range k.ended("extauth.store.consume") {
				if spanAttrs(s)["result"] == c.result {
					storeSpan = s
				}
			}
			if storeSpan == nil || storeSpan.Status().Code != codes.Error {
				t.Errorf("no failed store span")
			}
		})
	}
}

// The SAML SP reports its metadata's age, next refresh and last failure,
// and the expiry of its own certificate and of the IdP's, as gauges read
// at collection.
func TestTelemetrySAMLMetadataAndCertificates(t *testing.T) {
	k := newOtelKit(t)
	idp := newSAMLIdP(t)
	certPEM, keyPEM := spKeyPair(t)
	var mdOK sync.Map // "ok" while the metadata is served
	mdOK.Store("ok", true)
	mdSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := mdOK.Load("ok"); !ok {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		resp, err := http.Get(idp.MetadataURL())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		io.Copy(w, resp.Body)
	}))
	t.Cleanup(mdSrv.Close)
	a := newSAMLApp(t, idp, func(c *extauth.Config, o *extauth.Options) {
		k.options(o)
		c.SAML.IdPMetadataURL = mdSrv.URL
		c.SAML.Additional.Certificate, c.SAML.Additional.PrivateKey = certPEM, extauth.NewSecret(keyPEM)
		o.SAML.MetadataRefresh, o.SAML.MetadataRetry = 50*time.Millisecond, 50*time.Millisecond
	})
	a.waitReady()
	saml := map[string]string{"provider": "saml", "tenant": "", "document": "metadata"}
	if p := k.point(t, "extauth.document.age", saml); p.value < 0 || p.value > 60 {
		t.Errorf("metadata age %v s", p.value)
	}
	k.point(t, "extauth.document.next_refresh", saml)
	if ps := k.points(t, "extauth.document.last_failure_time"); len(ps) != 0 {
		t.Errorf("a failure before any: %v", ps)
	}
	certs := k.points(t, "extauth.certificate.expiry")
	roles := map[string]int{}
	for _, p := range certs {
		roles[p.attrs["role"]]++
		use := map[string]string{"sp": "sign+decrypt", "idp": "verify"}[p.attrs["role"]]
		if p.attrs["provider"] != "saml" || len(p.attrs["sha256"]) != 64 || p.value < 86400 || p.attrs["use"] != use {
			t.Errorf("certificate point %v = %v", p.attrs, p.value)
		}
	}
	if roles["sp"] != 1 || roles["idp"] < 1 {
		t.Errorf("certificates by role: %v", roles)
	}

	// The IdP's metadata goes away: the failure is reported, the copy kept.
	began := time.Now()
	mdOK.Delete("ok")
	eventually(t, "a metadata failure reported", func() bool {
		ps := k.points(t, "extauth.document.last_failure_time")
		return len(ps) == 1 && ps[0].value >= float64(began.Unix())-1
	})
	k.point(t, "extauth.document.age", saml)
	if ps := k.points(t, "extauth.certificate.expiry"); len(ps) != len(certs) {
		t.Errorf("certificates after the failure: %d, before %d", len(ps), len(certs))
	}
	if d := k.point(t, "extauth.outbound.duration", map[string]string{"provider": "saml", "tenant": "",
		"endpoint": "metadata", "result": "server_error"}); d.count < 1 {
		t.Errorf("failed metadata fetches: %d", d.count)
	}
	var failedFetch bool
	for _, s := range k.ended("GET metadata") {
		failedFetch = failedFetch || s.Status().Code == codes.Error && spanAttrs(s)["http.response.status_code"] == "503"
	}
	if !failedFetch {
		t.Error("no failed metadata fetch span")
	}
}

// A tenant's sign-ins carry its name; the cache's builds, size and
// evictions are counted.
func TestTelemetryTenant(t *testing.T) {
	k := newOtelKit(t)
	ta := newTenantApp(t, []string{"city-a"}, func(_ *tenantApp, o *extauth.Options) { k.options(o) })
	b := ta.browser()
	if resp := b.PostForm(ta.url("city-a", "/users/auth/oidc"), nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("OIDC at city-a: %d %s", resp.StatusCode, resp.Body)
	}
	at := map[string]string{"provider": "oidc", "tenant": "city-a"}
	if got := k.point(t, "extauth.signin.started", at).value; got != 1 {
		t.Errorf("started at city-a: %v", got)
	}
	if got := k.point(t, "extauth.signin.completed", map[string]string{"provider": "oidc", "tenant": "city-a", "outcome": "success"}).value; got != 1 {
		t.Errorf("completed at city-a: %v", got)
	}
	for _, e := range []string{"discovery", "jwks", "token"} {
		k.point(t, "extauth.outbound.duration", map[string]string{"provider": "oidc", "tenant": "city-a", "endpoint": e, "result": "ok"})
	}
	k.point(t, "extauth.document.age", map[string]string{"provider": "oidc", "tenant": "city-a", "document": "discovery"})
	// A step-up that fails before any sign-in starts is city-a's
	// failure, not that of a tenant that could not be built.
	stepUp := func(tenant string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		ta.Auth.StepUp(rec, httptest.NewRequest(http.MethodGet, ta.url("city-a", "/account"), nil),
			&extauth.Identity{Tenant: tenant, Provider: "oidc", UID: "u1"}, extauth.Assurance{Level: "no-such-level"})
		return rec
	}
	if rec := stepUp("city-a"); !strings.Contains(rec.Body.String(), string(extauth.CodeInsufficientAuthentication)) {
		t.Fatalf("step-up to a level oidc lacks: %d %s", rec.Code, rec.Body)
	}
	if got := k.point(t, "extauth.signin.completed", map[string]string{"provider": "oidc", "tenant": "city-a", "outcome": "failure",
		"code": string(extauth.CodeInsufficientAuthentication)}).value; got != 1 {
		t.Errorf("the failed step-up at city-a: %v", got)
	}
	// One for a tenant that does not exist is that of an unknown one.
	stepUp("city-z")
	if got := k.point(t, "extauth.signin.completed", map[string]string{"provider": "oidc", "tenant": "(unknown)", "outcome": "failure",
		"code": string(extauth.CodeProviderUnavailable)}).value; got != 1 {
		t.Errorf("the failed step-up at a tenant that does not exist: %v", got)
	}
	if got := k.point(t, "extauth.tenant.builds", map[string]string{"outcome": "success"}).value; got != 1 {
		t.Errorf("builds: %v", got)
	}
	if got := k.point(t, "extauth.tenant.cached", map[string]string{}).value; got != 1 {
		t.Errorf("cached: %v", got)
	}
	ta.Auth.Invalidate("city-a")
	if got := k.point(t, "extauth.tenant.evictions", map[string]string{"reason": "invalidated"}).value; got != 1 {
		t.Errorf("evictions: %v", got)
	}
	if got := k.point(t, "extauth.tenant.cached", map[string]string{}).value; got != 0 {
		t.Errorf("cached after Invalidate: %v", got)
	}
	for _, p := range k.points(t, "extauth.document.age") {
		if p.attrs["tenant"] == "city-a" {
			t.Errorf("an evicted tenant is still observed: %v", p.attrs)
		}
	}
}

// A flood of requests for tenants that do not exist, or whose lookup
// fails, adds no attribute value: they are all one tenant, "(unknown)",
// however many names they use.
func TestTelemetryUnknownTenantsAddNoAttributes(t *testing.T) {
	k := newOtelKit(t)
	lookupDown := errors.New("tenant database down")
	ta := newTenantApp(t, []string{"city-a"}, func(_ *tenantApp, o *extauth.Options) {
		k.options(o)
		o.Tenants = extauth.TenantSourceFunc(func(_ context.Context, tenant string) (*extauth.Config, error) {
			if strings.HasPrefix(tenant, "down") {
				return nil, lookupDown
			}
			return nil, extauth.ErrUnknownTenant
		})
	})
	// series lists every attribute set of every instrument.
	series := func() map[string]bool {
		var rm metricdata.ResourceMetrics
		if err := k.reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		add := func(name string, s attribute.Set) { out[name+" "+s.Encoded(attribute.DefaultEncoder())] = true }
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				switch d := m.Data.(type) {
				case metricdata.Sum[int64]:
					for _, p := range d.DataPoints {
						add(m.Name, p.Attributes)
					}
				case metricdata.Gauge[int64]:
					for _, p := range d.DataPoints {
						add(m.Name, p.Attributes)
					}
				case metricdata.Gauge[float64]:
					for _, p := range d.DataPoints {
						add(m.Name, p.Attributes)
					}
				case metricdata.Histogram[float64]:
					for _, p := range d.DataPoints {
						add(m.Name, p.Attributes)
					}
				}
			}
		}
		return out
	}
	flood := func(from, to int) {
		for i := from; i < to; i++ {
			prefix := "nope"
			if i%2 == 1 {
				prefix = "down"
			}
			path := []string{"/users/auth/oidc", "/users/auth/oidc/callback?state=x&code=y", "/users/auth/saml", "/users/auth/made-up-" + fmt.Sprint(i)}[i%4]
			req := httptest.NewRequest(http.MethodPost, ta.url("", path), nil)
			req.Host = fmt.Sprintf("%s-%d.localhost:%s", prefix, i, ta.port)
			req.Header.Set("Sec-Fetch-Site", "same-origin")
			ta.Auth.ServeHTTP(httptest.NewRecorder(), req)
		}
	}
	flood(0, 20)
	before := series()
	flood(20, 10_000)
	after := series()
	if !maps.Equal(before, after) {
		var added []string
		for s := range after {
			if !before[s] {
				added = append(added, s)
			}
		}
		sort.Strings(added)
		if len(added) > 10 {
			added = append(added[:10], fmt.Sprintf("... %d in all", len(added)))
		}
		t.Errorf("10 000 requests for unknown tenants added series: %v", added)
	}
	// They were counted, under one tenant.
	p := k.point(t, "extauth.signin.completed", map[string]string{"provider": "oidc", "tenant": "(unknown)",
		"outcome": "failure", "code": "provider_unavailable"})
	if p.value < 100 {
		t.Errorf("failed lookups counted %v times", p.value)
	}
	for s := range after {
		if strings.Contains(s, "nope-") || strings.Contains(s, "down-") || strings.Contains(s, "made-up") {
			t.Errorf("a requested name became an attribute value: %s", s)
		}
	}
}

// A host that installs an OpenTelemetry SDK gets extauth's metrics and
// spans; here the SDK's reader that collects on demand stands in for an
// exporter's (Prometheus, OTLP). The authorize route counts the sign-in
// as started.
func ExampleOptions_metrics() {
	reader := sdkmetric.NewManualReader()
	meters := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer meters.Shutdown(context.Background())
	cfg := &extauth.Config{BlogOAuth2: extauth.OAuthProvider{Key: "id", Secret: extauth.NewSecret("secret"), Site: "https://blog.example.org"}}
	a, err := extauth.New(cfg, extauth.Options{
		BaseURL:       "https://app.example.org",
		CookieKey:     make([]byte, 32), // 32 random bytes in production
		OnSuccess:     func(http.ResponseWriter, *http.Request, *extauth.Identity) {},
		MeterProvider: meters,
		// TracerProvider: an SDK's, with an exporter of its own.
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()

	start := httptest.NewRequest(http.MethodPost, "https://app.example.org/users/auth/blog_oauth2", nil)
	start.Header.Set("Sec-Fetch-Site", "same-origin")
	a.ServeHTTP(httptest.NewRecorder(), start)

	var rm metricdata.ResourceMetrics
	reader.Collect(context.Background(), &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		p := m.Data.(metricdata.Sum[int64]).DataPoints[0]
		provider, _ := p.Attributes.Value("provider")
		fmt.Println(m.Name, provider.AsString(), p.Value)
	}
	// Output: extauth.signin.started blog_oauth2 1
}

// Every failure code an Error can carry is one of the code attributes of
// the metrics, so that none is counted as "other".
func TestTelemetryKnowsEveryCode(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			if id, ok := v.Type.(*ast.Ident); ok && id.Name == "Code" {
				for _, val := range v.Values {
					codes = append(codes, strings.Trim(val.(*ast.BasicLit).Value, `"`))
				}
			}
		}
	}
	slices.Sort(codes)
	want := slices.Sorted(slices.Values(telemetry.Codes))
	if len(codes) == 0 || !slices.Equal(codes, want) {
		t.Errorf("errors.go has the codes %q, internal/telemetry %q", codes, want)
	}
}

// A federation reports its aggregate as a document, its entities and IdPs,
// and its signing certificate alone: not the certificates of its
// thousands of IdPs, which would make a time series each.
func TestTelemetrySAMLFederation(t *testing.T) {
	k := newOtelKit(t)
	f := newFederation(t)
	f.start(func(c *extauth.Config, o *extauth.Options) {
		k.options(o)
		c.SAML.Additional.Federation.EntityIDs = []string{f.A.EntityID()}
	})
	saml := map[string]string{"provider": "saml", "tenant": ""}
	if p := k.point(t, "extauth.federation.entities", saml); p.value != 2 {
		t.Errorf("entities %v, want 2", p.value)
	}
	if p := k.point(t, "extauth.federation.idps", saml); p.value != 1 {
		t.Errorf("IdPs %v, want the 1 the allow-list keeps", p.value)
	}
	k.point(t, "extauth.document.age", map[string]string{"provider": "saml", "tenant": "", "document": "metadata"})
	certs := k.points(t, "extauth.certificate.expiry")
	if len(certs) != 1 || certs[0].attrs["role"] != "federation" {
		t.Errorf("certificates: %v", certs)
	}
}

// MDQ look-ups are counted by result, a fixed list.
func TestTelemetrySAMLFederationMDQ(t *testing.T) {
	k := newOtelKit(t)
	f := newFederation(t)
	ea, _ := samlidp.Decorate(f.A.Metadata(), samlidp.Entity{DisplayNames: map[string]string{"en": "University of Aa"}})
	mdq := newMDQServer(t, f.signer, false, ea)
	a := f.start(func(c *extauth.Config, o *extauth.Options) {
		k.options(o)
		c.SAML.Additional.Federation = extauth.SAMLFederation{MDQURL: mdq.URL, SigningCertificate: f.certPEM(), EntityIDs: []string{f.A.EntityID()}}
	})
	b := harness.NewBrowser(t)
	for range 3 {
		a.startAt(b, f.A.EntityID())
	}
	b.PostForm(a.URL+"/users/auth/saml.json", url.Values{"idp": {"https://junk.example.org/idp"}})
	// A start looks its IdP up twice (its binding, its request): the
	// counts are of look-ups.
	for result, least := range map[string]float64{"fetched": 1, "hit": 2, "not_listed": 1} {
		p := k.point(t, "extauth.federation.mdq.lookups", map[string]string{"provider": "saml", "tenant": "", "result": result})
		if p.value < least || result == "fetched" && p.value != least {
			t.Errorf("%s: %v, want %v", result, p.value, least)
		}
	}
}

// countingTP counts the spans its tracers start, recording or not.
type countingTP struct {
	trace.TracerProvider
	started atomic.Int64
}

func (c *countingTP) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return countingTracer{c.TracerProvider.Tracer(name, opts...), c}
}

type countingTracer struct {
	trace.Tracer
	c *countingTP
}

func (t countingTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	t.c.started.Add(1)
	return t.Tracer.Start(ctx, name, opts...)
}

// With a parent-based sampler at 0 and no meter, the common production
// set-up, a sign-in makes one span per route, which records nothing, and
// none for its outbound requests or store calls; the trace's decision (not
// sampled) still reaches the provider, one trace ID in each request of the
// callback. The route then runs without an operation of its own
// (internal/telemetry's TestTracingAllocs counts what that saves).
func TestTelemetrySampledOut(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	sdk := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0))), sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { sdk.Shutdown(context.Background()) })
	tp := &countingTP{TracerProvider: sdk}
	out := &outboundHeaders{}
	a := newApp(t, func(o *extauth.Options) {
		o.TracerProvider, o.Propagator = tp, propagation.TraceContext{}
		o.TraceStoreCalls = true
		o.HTTPClient = &http.Client{Transport: out}
	})
	b := harness.NewBrowser(t).NoFollow()
	before := tp.started.Load()
	cb := a.approve(b, a.start(b, url.Values{"return_to": {"/private"}}))
	if resp := b.Get(cb); resp.StatusCode != http.StatusOK {
		t.Fatalf("callback: %d %s", resp.StatusCode, resp.Body)
	}
	if n := tp.started.Load() - before; n != 2 {
		t.Errorf("%d spans started for a sampled-out sign-in, want 2 (authorize and callback)", n)
	}
	if n := len(rec.Ended()); n != 0 {
		t.Errorf("%d spans recorded with a sampler at 0", n)
	}
	out.mu.Lock()
	defer out.mu.Unlock()
	if len(out.seen) < 2 {
		t.Fatalf("%d outbound requests, want the token and UserInfo requests", len(out.seen))
	}
	traces := map[string]bool{}
	for _, h := range out.seen {
		tp := strings.Split(h.Get("Traceparent"), "-")
		if len(tp) != 4 || tp[3] != "00" {
			t.Errorf("outbound traceparent %q, want one not sampled", h.Get("Traceparent"))
			continue
		}
		traces[tp[1]] = true
	}
	if len(traces) != 1 {
		t.Errorf("the callback's requests carry %d trace IDs, want 1", len(traces))
	}
}
