package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/extauth/extauth"
)

// withPrometheus installs the OpenTelemetry metrics SDK, read by the
// Prometheus exporter, as a host that exposes /metrics does.
func withPrometheus(b *testing.B) func(*extauth.Options) {
	exporter, err := otelprom.New(otelprom.WithRegisterer(prometheus.NewRegistry()))
	if err != nil {
		b.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	b.Cleanup(func() { mp.Shutdown(context.Background()) })
	return func(o *extauth.Options) { o.MeterProvider = mp }
}

// withPrometheusProvider is withPrometheus's MeterProvider itself.
func withPrometheusProvider(b *testing.B) *sdkmetric.MeterProvider {
	var o extauth.Options
	withPrometheus(b)(&o)
	return o.MeterProvider.(*sdkmetric.MeterProvider)
}

// metricsFloor is what the metrics SDK's measurements of a request cost at
// the least, made by hand beside a route with no provider installed: on
// authorize one counter add, on the callback a counter add and the five
// durations (callback, sign-in, two outbound requests, the store call),
// with their attribute sets made beforehand, no context, and the clock
// read once per duration.
func metricsFloor(b *testing.B, mp *sdkmetric.MeterProvider) func(callback bool) {
	m := mp.Meter("floor")
	counter, err := m.Int64Counter("floor.count")
	if err != nil {
		b.Fatal(err)
	}
	hist, err := m.Float64Histogram("floor.duration")
	if err != nil {
		b.Fatal(err)
	}
	set := metric.WithAttributeSet(attribute.NewSet(attribute.String("provider", "blog_oauth2"), attribute.String("tenant", ""), attribute.String("outcome", "success")))
	add, rec := []metric.AddOption{set}, []metric.RecordOption{set}
	ctx := context.Background()
	epoch := time.Now()
	return func(callback bool) {
		counter.Add(ctx, 1, add...)
		if callback {
			for range 5 {
				hist.Record(ctx, time.Since(epoch).Seconds(), rec...)
			}
		}
	}
}

// withExport installs the tracing SDK sampling every span and feeding it,
// as a host's exporter is fed, through a batch span processor to an
// in-memory exporter. reset exports what the processor holds and empties
// the exporter, so that a long run does not hold every span it made.
func withExport(b *testing.B) (edit func(*extauth.Options), reset func(), tp *sdktrace.TracerProvider) {
	exp := tracetest.NewInMemoryExporter()
	tp = sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithSpanProcessor(sdktrace.NewBatchSpanProcessor(exp)))
	b.Cleanup(func() { tp.Shutdown(context.Background()) })
	return func(o *extauth.Options) { o.TracerProvider = tp }, func() {
		tp.ForceFlush(context.Background())
		exp.Reset()
	}, tp
}

// spanFloor is what the tracing SDK's spans of a request cost at the
// least, made by hand beside a route with no provider installed: the
// authorize or callback span, and, when it records, under a callback's the
// spans of its two requests to the provider, each with the attributes
// extauth gives it.
func spanFloor(tp trace.TracerProvider) func(callback bool) {
	tracer := tp.Tracer("floor")
	route := []attribute.KeyValue{attribute.String("provider", "blog_oauth2"), attribute.String("tenant", ""), attribute.String("outcome", "success")}
	request := []attribute.KeyValue{attribute.String("http.request.method", "POST"), attribute.String("server.address", "public-api.wordpress.com"),
		attribute.String("url.full", "https://public-api.wordpress.com/oauth2/token"), attribute.String("endpoint", "token"),
		attribute.Int("server.port", 443), attribute.String("provider", "blog_oauth2"), attribute.String("tenant", ""),
		attribute.Int("http.response.status_code", 200)}
	internal, client := trace.WithSpanKind(trace.SpanKindInternal), trace.WithSpanKind(trace.SpanKindClient)
	return func(callback bool) {
		ctx, s := tracer.Start(context.Background(), "extauth.callback", internal)
		if !s.IsRecording() {
			s.End()
			return
		}
		if callback {
			for range 2 {
				_, c := tracer.Start(ctx, "POST token", client)
				c.SetAttributes(request...)
				c.End()
			}
		}
		s.SetAttributes(route...)
		s.End()
	}
}

// withSampledOut installs the tracing SDK with the common production
// sampler, parent-based at a ratio of 0, feeding a batch span processor:
// requests that come untraced are recorded by nobody.
func withSampledOut(b *testing.B) func(*extauth.Options) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0))),
		sdktrace.WithSpanProcessor(sdktrace.NewBatchSpanProcessor(tracetest.NewInMemoryExporter())))
	b.Cleanup(func() { tp.Shutdown(context.Background()) })
	return func(o *extauth.Options) { o.TracerProvider = tp }
}

// sampledOutProvider is withSampledOut's TracerProvider itself.
func sampledOutProvider(b *testing.B) trace.TracerProvider {
	var o extauth.Options
	withSampledOut(b)(&o)
	return o.TracerProvider
}

// callbackRequest starts a sign-in at a and returns its callback request,
// with the transaction cookie.
func callbackRequest(a *extauth.Auth) *http.Request {
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, start(appBase+"/users/auth/blog_oauth2"))
	loc, _ := url.Parse(rec.Header().Get("Location"))
	r := httptest.NewRequest(http.MethodGet, callback+"?code=c&state="+url.QueryEscape(loc.Query().Get("state")), nil)
	for _, c := range rec.Result().Cookies() {
		r.AddCookie(c)
	}
	return r
}

// resetEvery is how many operations a side runs between two resets of its
// exporter (outside the timer).
const resetEvery = 1000

func authorizeSide(name string, a *extauth.Auth, reset func()) side {
	return side{name, func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if i++; reset != nil && i%resetEvery == 0 {
				b.StopTimer()
				reset()
				b.StartTimer()
			}
			rec := httptest.NewRecorder()
			a.ServeHTTP(rec, start(appBase+"/users/auth/blog_oauth2"))
			if rec.Code != http.StatusSeeOther {
				b.Fatal(rec.Code, rec.Body)
			}
		}
	}}
}

func callbackSide(name string, a *extauth.Auth, reset func()) side {
	return side{name, func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			b.StopTimer()
			if i++; reset != nil && i%resetEvery == 0 {
				reset()
			}
			r := callbackRequest(a)
			b.StartTimer()
			rec := httptest.NewRecorder()
			a.ServeHTTP(rec, r)
			if rec.Code != http.StatusSeeOther {
				b.Fatal(rec.Code, rec.Body)
			}
		}
	}}
}

// telemetrySetup is one instrumented side of BenchmarkTelemetry and
// BenchmarkTelemetryRatio: its name, its Auth, and what empties its
// exporter between rounds (nil when it has none).
type telemetrySetup struct {
	name  string
	a     *extauth.Auth
	reset func()
	// after, when set, runs after each request, timed with it: the
	// floor's own spans.
	after func(callback bool)
}

// telemetrySetups are the instrumented sides, each measured against
// extauth with no provider installed: the metrics SDK read by the
// Prometheus exporter; the tracing SDK sampling every span into an
// in-memory exporter; the tracing SDK with a parent-based sampler at 0,
// which records nothing; and the metrics and the exported traces
// together.
func telemetrySetups(b *testing.B) []telemetrySetup {
	export, reset, _ := withExport(b)
	exportToo, resetToo, _ := withExport(b)
	return []telemetrySetup{
		{"prometheus", newExtauth(b, withPrometheus(b)), nil, nil},
		{"exported", newExtauth(b, export), reset, nil},
		{"sampled_out", newExtauth(b, withSampledOut(b)), nil, nil},
		{"prometheus_exported", newExtauth(b, withPrometheus(b), exportToo), resetToo, nil},
	}
}

// BenchmarkTelemetry is what extauth's OpenTelemetry instrumentation costs
// the OAuth 2 authorize and callback routes of BenchmarkAuthorize and
// BenchmarkCallback: extauth with no provider installed (the global ones,
// which record nothing) as the anchor, beside each of telemetrySetups in
// sub-benchmarks named route_setup (authorize_prometheus,
// callback_exported...), each with its sides no_provider and extauth.
func BenchmarkTelemetry(b *testing.B) {
	none := newExtauth(b)
	for _, s := range telemetrySetups(b) {
		b.Run("authorize_"+s.name, func(b *testing.B) {
			alternate(b, authorizeSide("no_provider", none, nil), authorizeSide("extauth", s.a, s.reset))
		})
		b.Run("callback_"+s.name, func(b *testing.B) {
			alternate(b, callbackSide("no_provider", none, nil), callbackSide("extauth", s.a, s.reset))
		})
	}
}

// telemetrySides are the authorize or callback route of s and of none as
// sides of cpuRatio: each callback request is made, with its sign-in
// started, before the timing, and s's exporter emptied.
func telemetrySides(callbackRoute bool, s telemetrySetup, none *extauth.Auth) (ours, anchor oidcSide) {
	var sides [2]oidcSide
	for i, a := range [2]*extauth.Auth{s.a, none} {
		name, reset, after := s.name, s.reset, s.after
		if i == 1 {
			name, reset, after = "no_provider", nil, nil
		}
		sides[i] = oidcSide{name, func(tb testing.TB, n int) func(int) error {
			// The exporter is emptied as a host's exporter empties its
			// batches: the spans it holds would otherwise grow the heap
			// that each collection marks.
			if reset != nil {
				reset()
			}
			if !callbackRoute {
				return func(j int) error {
					if reset != nil && j%resetEvery == resetEvery-1 {
						reset()
					}
					rec := httptest.NewRecorder()
					a.ServeHTTP(rec, start(appBase+"/users/auth/blog_oauth2"))
					if rec.Code != http.StatusSeeOther {
						return fmt.Errorf("authorize: %d", rec.Code)
					}
					if after != nil {
						after(false)
					}
					return nil
				}
			}
			reqs := make([]*http.Request, n)
			for j := range reqs {
				reqs[j] = callbackRequest(a)
			}
			// The spans of the authorize requests that made them are
			// exported now, not in the timed rounds.
			if reset != nil {
				reset()
			}
			return func(j int) error {
				if reset != nil && j%resetEvery == resetEvery-1 {
					reset()
				}
				rec := httptest.NewRecorder()
				a.ServeHTTP(rec, reqs[j])
				if rec.Code != http.StatusSeeOther {
					return fmt.Errorf("callback: %d", rec.Code)
				}
				if after != nil {
					after(true)
				}
				return nil
			}
		}}
	}
	return sides[0], sides[1]
}

// BenchmarkTelemetryRatio is BenchmarkTelemetry in CPU-time rounds
// (-oidc.rounds of them, the order flipping each round; see cpuRatio):
// what each of telemetrySetups costs the OAuth 2 routes over no provider
// installed, and, as prometheus_sdk_floor, exported_sdk_floor and
// sampled_out_sdk_floor, what the measurements and the spans cost at the
// least: the route with no
// provider, followed by the same measurements or spans made by hand
// (metricsFloor, spanFloor) with the same SDK and exporter.
func BenchmarkTelemetryRatio(b *testing.B) {
	_, floorReset, floorTP := withExport(b)
	setups := append(telemetrySetups(b),
		telemetrySetup{"prometheus_sdk_floor", nil, nil, metricsFloor(b, withPrometheusProvider(b))},
		telemetrySetup{"exported_sdk_floor", nil, floorReset, spanFloor(floorTP)},
		telemetrySetup{"sampled_out_sdk_floor", nil, nil, spanFloor(sampledOutProvider(b))})
	for _, s := range setups {
		for _, route := range []string{"authorize", "callback"} {
			n := 6000
			if route == "callback" {
				n = 1500
			}
			b.Run(route+"_"+s.name, func(b *testing.B) {
				// Each row has an anchor of its own, and a floor its own
				// Auth: a memory store that every row filled would end
				// at its bound.
				none, row := newExtauth(b), s
				if row.a == nil {
					row.a = newExtauth(b)
				}
				ours, anchor := telemetrySides(route == "callback", row, none)
				cpuRatio(b, n, ours, anchor)
			})
		}
	}
}
