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

// withTracing installs the tracing SDK recording every span, with no
// exporter: what making the spans costs.
func withTracing(b *testing.B) func(*extauth.Options) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
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

func authorizeSide(name string, a *extauth.Auth) side {
	return side{name, func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			rec := httptest.NewRecorder()
			a.ServeHTTP(rec, start(appBase+"/users/auth/blog_oauth2"))
			if rec.Code != http.StatusSeeOther {
				b.Fatal(rec.Code, rec.Body)
			}
		}
	}}
}

func callbackSide(name string, a *extauth.Auth) side {
	return side{name, func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
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

// BenchmarkTelemetry is what extauth's OpenTelemetry instrumentation costs
// the OAuth 2 authorize and callback routes of BenchmarkAuthorize and
// BenchmarkCallback: extauth with no provider installed (the global ones,
// which record nothing) as the anchor, beside the metrics SDK read by the
// Prometheus exporter (extauth_prometheus), and beside that plus a tracing
// SDK recording every span (extauth_prometheus_traced, in the *_traced
// sub-benchmarks).
func BenchmarkTelemetry(b *testing.B) {
	none := newExtauth(b)
	prom := newExtauth(b, withPrometheus(b))
	traced := newExtauth(b, withPrometheus(b), withTracing(b))
	b.Run("authorize", func(b *testing.B) {
		alternate(b, authorizeSide("no_provider", none), authorizeSide("extauth_prometheus", prom))
	})
	b.Run("callback", func(b *testing.B) {
		alternate(b, callbackSide("no_provider", none), callbackSide("extauth_prometheus", prom))
	})
	b.Run("authorize_traced", func(b *testing.B) {
		alternate(b, authorizeSide("no_provider", none), authorizeSide("extauth_prometheus_traced", traced))
	})
	b.Run("callback_traced", func(b *testing.B) {
		alternate(b, callbackSide("no_provider", none), callbackSide("extauth_prometheus_traced", traced))
	})
}

// telemetrySides are the authorize or callback route of a and of b as
// sides of cpuRatio: each callback request is made, with its sign-in
// started, before the timing.
func telemetrySides(callbackRoute bool, names [2]string, auths [2]*extauth.Auth) (ours, anchor oidcSide) {
	var sides [2]oidcSide
	for i, a := range auths {
		sides[i] = oidcSide{names[i], func(tb testing.TB, n int) func(int) error {
			if !callbackRoute {
				return func(int) error {
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
			return func(j int) error {
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
// what the metrics SDK with the Prometheus exporter, and that plus
// tracing, cost the OAuth 2 routes over no provider installed.
func BenchmarkTelemetryRatio(b *testing.B) {
	none := newExtauth(b)
	prom := newExtauth(b, withPrometheus(b))
	traced := newExtauth(b, withPrometheus(b), withTracing(b))
	for _, route := range []string{"authorize", "callback"} {
		n := 2000
		if route == "callback" {
			n = 500
		}
		b.Run(route, func(b *testing.B) {
			ours, anchor := telemetrySides(route == "callback", [2]string{"prometheus", "no_provider"}, [2]*extauth.Auth{prom, none})
			cpuRatio(b, n, ours, anchor)
		})
		b.Run(route+"_traced", func(b *testing.B) {
			ours, anchor := telemetrySides(route == "callback", [2]string{"prometheus_traced", "no_provider"}, [2]*extauth.Auth{traced, none})
			cpuRatio(b, n, ours, anchor)
		})
	}
}
