package telemetry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

type memStore struct{ seen map[string]bool }

func (m *memStore) Consume(_ context.Context, key string, _ time.Time) (bool, error) {
	if m.seen[key] {
		return false, nil
	}
	m.seen[key] = true
	return true, nil
}

var (
	tokenRequest = httptest.NewRequest(http.MethodPost, "https://op.example/token", nil)
	began        = time.Now().Add(-time.Second)
)

// signIn runs what one callback records: the operation, an outbound
// request and a store call.
func signIn(p *Provider, key string, s Store) {
	ctx := context.Background()
	ctx, op := p.Start(ctx, true)
	op.Began(began)
	_, q := p.StartRequest(WithEndpoint(ctx, EndpointToken), tokenRequest)
	q.End(200, ResultOK)
	p.Consume(ctx, s, key, began.Add(time.Hour))
	if op != nil {
		op.End()
	}
}

// With the API's no-op providers, or the global ones before an SDK is
// installed, a callback's instrumentation allocates nothing and starts no
// operation.
func TestNoSDKCostsNoAllocation(t *testing.T) {
	for name, c := range map[string]Config{
		"no-op":  {MeterProvider: metricnoop.NewMeterProvider(), TracerProvider: tracenoop.NewTracerProvider()},
		"global": {},
	} {
		t.Run(name, func(t *testing.T) {
			tel, err := New(c)
			if err != nil {
				t.Fatal(err)
			}
			p := tel.Site("").Provider("oidc")
			if _, op := p.Start(context.Background(), true); op != nil {
				t.Fatal("an operation with nothing to record")
			}
			s := &memStore{seen: map[string]bool{}}
			key := "k"
			if n := testing.AllocsPerRun(100, func() { signIn(p, key, s) }); n > 1 {
				// The context marker of the endpoint is the one.
				t.Errorf("a callback's instrumentation allocates %v times", n)
			}
		})
	}
}

// The global providers start recording once the host installs an SDK,
// even after New: metrics through the API's delegation, spans as soon as
// tracing sees the new global provider.
func TestGlobalProvidersFollowTheHost(t *testing.T) {
	tel, err := New(Config{StoreSpans: true})
	if err != nil {
		t.Fatal(err)
	}
	if tel.tracing() {
		t.Fatal("tracing before any SDK is installed")
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	otel.SetMeterProvider(mp)
	otel.SetTracerProvider(tp)
	if !tel.tracing() {
		t.Fatal("no tracing after the host installed an SDK")
	}
	p := tel.Site("city").Provider("saml")
	signIn(p, "k", &memStore{seen: map[string]bool{}})
	names := map[string]bool{}
	for _, s := range spans.Ended() {
		names[s.Name()] = true
	}
	for _, n := range []string{"extauth.callback", "POST token", "extauth.store.consume"} {
		if !names[n] {
			t.Errorf("no span %s: %v", n, names)
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			got[m.Name] = true
		}
	}
	for _, n := range []string{"extauth.signin.completed", "extauth.signin.duration", "extauth.callback.duration", "extauth.outbound.duration", "extauth.store.duration"} {
		if !got[n] {
			t.Errorf("no %s: %v", n, got)
		}
	}
}

// A TracerProvider that makes spans is told from one that does not.
func TestQuiet(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	if quiet(tp.Tracer("x"), tp, false) {
		t.Error("the SDK found quiet")
	}
	if quiet(tp.Tracer("x"), tp, true) {
		t.Error("the SDK as the global provider found quiet")
	}
	n := tracenoop.NewTracerProvider()
	if !quiet(n.Tracer("x"), n, false) {
		t.Error("the no-op provider found making spans")
	}
}

func TestCodesAndResults(t *testing.T) {
	if codeName(codeIndex("timeout")) != "timeout" || codeName(codeIndex("made up")) != CodeOther {
		t.Error("codes do not round-trip")
	}
	if numSignInSlots != slotCode0+len(Codes)+1 {
		t.Errorf("%d sign-in slots for %d codes", numSignInSlots, len(Codes))
	}
	for status, want := range map[int]Result{200: ResultOK, 204: ResultOK, 302: ResultRedirect, 401: ResultClientError, 503: ResultServerError} {
		if got := StatusResult(status); got != want {
			t.Errorf("StatusResult(%d) = %v, want %v", status, got, want)
		}
	}
	if Endpoint(200).String() != "other" {
		t.Error("an endpoint out of range is not other")
	}
}

// BenchmarkNoSDK is what a callback's instrumentation costs with the
// global providers and no SDK installed: the operation, an outbound
// request and a store call.
func BenchmarkNoSDK(b *testing.B) {
	tel, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	p := tel.Site("").Provider("oidc")
	s := &memStore{seen: map[string]bool{}}
	b.ReportAllocs()
	for b.Loop() {
		signIn(p, "k", s)
	}
}

// An outbound span's attributes are made once per method and URL and kept
// for the next request alike: a request to another URL, or one that ends
// otherwise, gets its own.
func TestRequestSpanAttributes(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	tel, err := New(Config{TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	p := tel.Site("").Provider("oidc")
	other := httptest.NewRequest(http.MethodPost, "https://op2.example:8443/token?code=x", nil)
	for _, c := range []struct {
		r      *http.Request
		status int
		res    Result
		want   map[string]string
	}{
		{tokenRequest, 200, ResultOK, map[string]string{"server.address": "op.example", "server.port": "443", "url.full": "https://op.example/token", "http.response.status_code": "200"}},
		{tokenRequest, 200, ResultOK, map[string]string{"url.full": "https://op.example/token", "http.response.status_code": "200"}},
		{other, 200, ResultOK, map[string]string{"server.address": "op2.example", "server.port": "8443", "url.full": "https://op2.example:8443/token", "http.response.status_code": "200"}},
		{other, 201, ResultOK, map[string]string{"url.full": "https://op2.example:8443/token", "http.response.status_code": "201"}},
		{other, 503, ResultServerError, map[string]string{"http.response.status_code": "503", "error.type": "503", "result": "server_error"}},
		{other, 0, ResultTimeout, map[string]string{"error.type": "timeout", "result": "timeout"}},
		{other, 200, ResultOK, map[string]string{"http.response.status_code": "200"}},
	} {
		before := len(spans.Ended())
		_, q := p.StartRequest(WithEndpoint(context.Background(), EndpointToken), c.r)
		q.End(c.status, c.res)
		ended := spans.Ended()
		if len(ended) != before+1 {
			t.Fatalf("%d spans ended", len(ended)-before)
		}
		got := map[string]string{}
		for _, kv := range ended[len(ended)-1].Attributes() {
			got[string(kv.Key)] = kv.Value.Emit()
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("%s %d: %s = %q, want %q (%v)", c.r.URL.Host, c.status, k, got[k], v, got)
			}
		}
		for _, k := range []string{"error.type", "result", "http.response.status_code"} {
			if _, ok := c.want[k]; !ok && got[k] != "" {
				t.Errorf("%s %d: %s = %q, want none", c.r.URL.Host, c.status, k, got[k])
			}
		}
		if got["provider"] != "oidc" || got["endpoint"] != "token" || got["http.request.method"] != "POST" {
			t.Errorf("%v", got)
		}
	}
}

// Measurements made within a recorded sign-in keep its trace, so that
// exemplars name it; outside any trace they are made without the request's
// context.
func TestExemplarsNameTheTrace(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	tel, err := New(Config{MeterProvider: mp, TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	signIn(tel.Site("").Provider("oidc"), "k", &memStore{seen: map[string]bool{}})
	var cb sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		if s.Name() == "extauth.callback" {
			cb = s
		}
	}
	if cb == nil {
		t.Fatal("no callback span")
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			h, ok := m.Data.(metricdata.Histogram[float64])
			if !ok {
				continue
			}
			for _, dp := range h.DataPoints {
				for _, e := range dp.Exemplars {
					if len(e.TraceID) == 16 && [16]byte(e.TraceID) == [16]byte(cb.SpanContext().TraceID()) {
						seen[m.Name] = true
					}
				}
			}
		}
	}
	for _, n := range []string{"extauth.callback.duration", "extauth.outbound.duration", "extauth.store.duration"} {
		if !seen[n] {
			t.Errorf("no exemplar of %s names the callback's trace: %v", n, seen)
		}
	}
}

// BenchmarkSpanFloor is an authorize request's span made by Op beside the
// SDK's floor for it, the span started, given the same attributes when it
// records, and ended: with every span sampled into an in-memory exporter
// through a batch span processor (exported), and with a parent-based
// sampler at 0 (sampled_out).
//
//	go test -run '^$' -bench SpanFloor -benchmem -count 5 ./internal/telemetry/ | go run ./internal/benchratio
func BenchmarkSpanFloor(b *testing.B) {
	for _, c := range []struct {
		name    string
		sampler sdktrace.Sampler
	}{
		{"exported", sdktrace.AlwaysSample()},
		{"sampled_out", sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0))},
	} {
		exp := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(c.sampler), sdktrace.WithSpanProcessor(sdktrace.NewBatchSpanProcessor(exp)))
		b.Cleanup(func() { tp.Shutdown(context.Background()) })
		tel, err := New(Config{TracerProvider: tp})
		if err != nil {
			b.Fatal(err)
		}
		p := tel.Site("").Provider("oidc")
		tracer := tp.Tracer(ScopeName)
		kv := p.signInSet(slotSuccess).kv
		ctx := context.Background()
		run := func(b *testing.B, f func()) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i++; i%1000 == 0 {
					tp.ForceFlush(ctx)
					exp.Reset()
				}
				f()
			}
		}
		b.Run(c.name+"/floor", func(b *testing.B) {
			run(b, func() {
				_, s := tracer.Start(ctx, "extauth.authorize", internalSpan...)
				if s.IsRecording() {
					s.SetAttributes(kv...)
				}
				s.End()
			})
		})
		b.Run(c.name+"/extauth", func(b *testing.B) {
			run(b, func() {
				octx, op := p.Start(ctx, false)
				p.Started(octx)
				if op != nil {
					op.End()
				}
			})
		})
	}
}

// BenchmarkMetricsFloor is what signIn records with the metrics SDK
// (the completed counter, the callback, sign-in, outbound and store
// durations), made by the instrumentation (extauth) beside the SDK's floor
// for the same measurements (floor): the five calls with their attribute
// sets made beforehand, a background context, and the clock read at the
// start and the end of each of the three server durations.
//
//	go test -run '^$' -bench MetricsFloor -benchmem -count 5 ./internal/telemetry/ | go run ./internal/benchratio
func BenchmarkMetricsFloor(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() { mp.Shutdown(context.Background()) })
	tel, err := New(Config{MeterProvider: mp})
	if err != nil {
		b.Fatal(err)
	}
	p := tel.Site("").Provider("oidc")
	s := &memStore{seen: map[string]bool{}}
	ctx := context.Background()
	success, token, stored := p.signInSet(slotSuccess), p.outboundSet(EndpointToken, ResultOK), p.storeSet(storeUsed)
	b.Run("callback/floor", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			start := readClock()
			q := readClock()
			tel.outboundDur.Record(ctx, q.seconds(), token.rec...)
			st := readClock()
			s.Consume(ctx, "k", began)
			tel.storeDur.Record(ctx, st.seconds(), stored.rec...)
			tel.completed.Add(ctx, 1, success.add...)
			tel.callbackDur.Record(ctx, start.seconds(), success.rec...)
			tel.signInDur.Record(ctx, tel.now().Sub(began).Seconds(), success.rec...)
		}
	})
	b.Run("callback/extauth", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			signIn(p, "k", s)
		}
	})
}
