package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

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

// withExport installs the tracing SDK sampling every span and feeding it,
// as a host's exporter is fed, through a batch span processor to an
// in-memory exporter. reset exports what the processor holds and empties
// the exporter, so that a long run does not hold every span it made.
func withExport(b *testing.B) (edit func(*extauth.Options), reset func()) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithSpanProcessor(sdktrace.NewBatchSpanProcessor(exp)))
	b.Cleanup(func() { tp.Shutdown(context.Background()) })
	return func(o *extauth.Options) { o.TracerProvider = tp }, func() {
		tp.ForceFlush(context.Background())
		exp.Reset()
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
}

// telemetrySetups are the instrumented sides, each measured against
// extauth with no provider installed: the metrics SDK read by the
// Prometheus exporter; the tracing SDK sampling every span into an
// in-memory exporter; the tracing SDK with a parent-based sampler at 0,
// which records nothing; and the metrics and the exported traces
// together.
func telemetrySetups(b *testing.B) []telemetrySetup {
	export, reset := withExport(b)
	exportToo, resetToo := withExport(b)
	return []telemetrySetup{
		{"prometheus", newExtauth(b, withPrometheus(b)), nil},
		{"exported", newExtauth(b, export), reset},
		{"sampled_out", newExtauth(b, withSampledOut(b)), nil},
		{"prometheus_exported", newExtauth(b, withPrometheus(b), exportToo), resetToo},
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
		name, reset := s.name, s.reset
		if i == 1 {
			name, reset = "no_provider", nil
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
				return nil
			}
		}}
	}
	return sides[0], sides[1]
}

// BenchmarkTelemetryRatio is BenchmarkTelemetry in CPU-time rounds
// (-oidc.rounds of them, the order flipping each round; see cpuRatio):
// what each of telemetrySetups costs the OAuth 2 routes over no provider
// installed.
func BenchmarkTelemetryRatio(b *testing.B) {
	none := newExtauth(b)
	for _, s := range telemetrySetups(b) {
		for _, route := range []string{"authorize", "callback"} {
			n := 6000
			if route == "callback" {
				n = 1500
			}
			b.Run(route+"_"+s.name, func(b *testing.B) {
				ours, anchor := telemetrySides(route == "callback", s, none)
				cpuRatio(b, n, ours, anchor)
			})
		}
	}
}
