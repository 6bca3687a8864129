package extauth

import (
	"errors"
	"fmt"

	"github.com/extauth/extauth/internal/telemetry"
	"github.com/extauth/extauth/providers"
	"github.com/extauth/extauth/samlsp"
)

// newTelemetry makes the instruments of o's MeterProvider and
// TracerProvider. The provider names a failure may carry before any site
// serves it are every built-in one under its slug and o's extra ones.
func (a *Auth) newTelemetry(o *Options) (*telemetry.T, error) {
	var names []string
	for _, p := range BuiltinProviders() {
		names = append(names, a.slug(string(p)))
	}
	for _, s := range o.Extra {
		if s != nil {
			names = append(names, a.slug(s.Name()))
		}
	}
	t, err := telemetry.New(telemetry.Config{
		MeterProvider:  o.MeterProvider,
		TracerProvider: o.TracerProvider,
		Propagator:     o.Propagator,
		Now:            a.now,
		Providers:      names,
		StoreSpans:     o.TraceStoreCalls,
	})
	if err != nil {
		return nil, fmt.Errorf("extauth: %w", err)
	}
	return t, nil
}

// observe hands the asynchronous instruments what they read: the built
// sites, and the number of built tenants. A failure costs those
// instruments, never a sign-in.
func (a *Auth) observe() {
	var tenants func() int64
	if a.tenants != nil {
		tenants = a.tenants.count.Load
	}
	if err := a.tel.Observe(a.telemetrySites, tenants); err != nil {
		a.log.Warn("extauth: the metrics of documents, certificates and tenants are off", "err", err)
	}
}

// telemetrySites yields the instrumentation of every built site: the
// application's own, then each built tenant's.
func (a *Auth) telemetrySites(yield func(*telemetry.Site) bool) {
	if !yield(a.site.tel) || a.tenants == nil {
		return
	}
	a.tenants.entries.Range(func(_, v any) bool {
		e := v.(*tenantEntry)
		select {
		case <-e.ready:
			if e.site != nil {
				return yield(e.site.tel)
			}
		default:
		}
		return true
	})
}

// buildOutcome is the telemetry outcome of a tenant's build that ended
// with err.
func buildOutcome(err error) int {
	switch {
	case err == nil:
		return telemetry.BuildSuccess
	case errors.Is(err, ErrUnknownTenant):
		return telemetry.BuildUnknown
	default:
		return telemetry.BuildFailure
	}
}

// watch names s as the strategy behind p, for the asynchronous
// instruments, with the certificates of a SAML SP.
func watch(p *telemetry.Provider, s providers.Strategy) {
	var certs func() []telemetry.Certificate
	if sp, ok := s.(interface{ CertificateExpiries() []samlsp.CertExpiry }); ok {
		certs = func() []telemetry.Certificate {
			var out []telemetry.Certificate
			for _, c := range sp.CertificateExpiries() {
				out = append(out, telemetry.Certificate{Role: c.Kind, Use: c.Use, SHA256: c.SHA256, NotAfter: c.NotAfter})
			}
			return out
		}
	}
	p.Watch(s, certs)
}
