package bench

import (
	"context"
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
