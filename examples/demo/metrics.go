package main

import (
	"context"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// metrics is the OpenTelemetry SDK behind extauth's metrics, read by the
// Prometheus exporter and served at /metrics.
type metrics struct {
	provider *sdkmetric.MeterProvider
	handler  http.Handler
}

// newMetrics makes the metrics with a registry of their own, so that
// several servers (the tests') do not meet in Prometheus's global one.
func newMetrics() (*metrics, error) {
	registry := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry))
	if err != nil {
		return nil, err
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	return &metrics{provider: provider, handler: promhttp.HandlerFor(registry, promhttp.HandlerOpts{})}, nil
}

func (m *metrics) close() { m.provider.Shutdown(context.Background()) }
