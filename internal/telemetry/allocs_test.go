//go:build !race

package telemetry

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Allocation guards of the instrumentation with a tracing SDK. (The race
// detector's instrumentation makes a few more: hence the build
// constraint.)

// discard is a span exporter that drops what it is given.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// What a callback's instrumentation allocates with the tracing SDK: with
// every span sampled, its span and its request's, each the SDK's own
// allocations (the span, its context, its attributes and its snapshot)
// and no more of ours than the operation; sampled out, the SDK's span
// that records nothing and its context, and no operation. Store calls make no span unless
// asked to.
func TestTracingAllocs(t *testing.T) {
	for _, c := range []struct {
		name    string
		sampler sdktrace.Sampler
		store   bool
		max     float64
	}{
		{"exported", sdktrace.AlwaysSample(), false, tracedAllocs},
		{"exported, store spans", sdktrace.AlwaysSample(), true, tracedStoreAllocs},
		{"sampled out", sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0)), false, sampledOutAllocs},
	} {
		t.Run(c.name, func(t *testing.T) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(c.sampler), sdktrace.WithSyncer(discard{}))
			tel, err := New(Config{TracerProvider: tp, StoreSpans: c.store})
			if err != nil {
				t.Fatal(err)
			}
			p := tel.Site("").Provider("oidc")
			s := &memStore{seen: map[string]bool{}}
			n := testing.AllocsPerRun(200, func() { signIn(p, "k", s) })
			t.Logf("%.0f allocations", n)
			if n > c.max {
				t.Errorf("a traced callback's instrumentation allocates %.0f times, more than %.0f", n, c.max)
			}
		})
	}
}

// The limits of TestTracingAllocs: today's counts with the SDK of
// internal/devdeps (12, 17 and 3; 31 and 5 before issue 34, store span
// included), plus a margin for the first two; the third has none: its
// three are the SDK's two and the test's endpoint context (4 while a
// sampled-out request still made an operation).
const (
	tracedAllocs      = 14
	tracedStoreAllocs = 19
	sampledOutAllocs  = 3
)

// What a callback's instrumentation allocates with the metrics SDK: its
// six measurements (the completed counter, the callback and sign-in
// durations, the outbound request's duration, the store call's) are made
// with attribute sets made once per provider, tenant and outcome, so that
// a measurement allocates nothing; what is left is the operation and the
// test's endpoint context.
func TestMetricsAllocs(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	tel, err := New(Config{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	if err != nil {
		t.Fatal(err)
	}
	p := tel.Site("").Provider("oidc")
	s := &memStore{seen: map[string]bool{}}
	signIn(p, "k", s) // the attribute sets, made on first use
	n := testing.AllocsPerRun(200, func() { signIn(p, "k", s) })
	t.Logf("%.0f allocations", n)
	if n > meteredAllocs {
		t.Errorf("a metered callback's instrumentation allocates %.0f times, more than %d", n, meteredAllocs)
	}
	// And it measured: the six instruments each hold a point.
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	points := 0
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				points += len(d.DataPoints)
			case metricdata.Histogram[float64]:
				points += len(d.DataPoints)
			}
		}
	}
	if points < 5 {
		t.Errorf("the metered callback left %d points", points)
	}
}

// meteredAllocs is TestMetricsAllocs's limit, with no margin: the
// operation and the test's endpoint context.
const meteredAllocs = 2
