package telemetry

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"time"

	"go.opentelemetry.io/otel/metric"
)

// What the asynchronous instruments read from a strategy, when it has it:
// the SAML SP (samlsp.SP) and the OpenID Connect strategy
// (providers.OIDC).
type (
	// metadataStatus: a SAML SP's IdP metadata.
	metadataStatus interface {
		MetadataStatus() (fetched, nextRefresh, lastFailure time.Time)
	}
	// discoveryStatus: an OpenID Connect discovery document.
	discoveryStatus interface {
		DiscoveryStatus() (fetched, nextRefresh, lastFailure time.Time)
	}
	// certificateHolder: the certificates a SAML SP relies on, its own
	// and its IdP's signing ones.
	certificateHolder interface {
		Certificates() (own, idp []*x509.Certificate)
	}
)

// observe reports the provider's documents and certificates at now.
func (p *Provider) observe(o metric.Observer, now time.Time) {
	t := p.t
	var doc string
	var fetched, next, failed time.Time
	switch s := p.strategy.(type) {
	case metadataStatus:
		doc = "metadata"
		fetched, next, failed = s.MetadataStatus()
	case discoveryStatus:
		doc = "discovery"
		fetched, next, failed = s.DiscoveryStatus()
	}
	if doc != "" {
		attrs := metric.WithAttributes(append(p.base[:len(p.base):len(p.base)], KeyDocument.String(doc))...)
		if !fetched.IsZero() {
			o.ObserveFloat64(t.docAge, now.Sub(fetched).Seconds(), attrs)
		}
		if !next.IsZero() {
			o.ObserveFloat64(t.docNext, next.Sub(now).Seconds(), attrs)
		}
		if !failed.IsZero() {
			o.ObserveFloat64(t.docFailure, float64(failed.UnixMilli())/1e3, attrs)
		}
	}
	if h, ok := p.strategy.(certificateHolder); ok {
		own, idp := h.Certificates()
		for _, group := range []struct {
			role  string
			certs []*x509.Certificate
		}{{"sp", own}, {"idp", idp}} {
			for _, c := range group.certs {
				sum := sha256.Sum256(c.Raw)
				o.ObserveFloat64(t.certExpiry, c.NotAfter.Sub(now).Seconds(), metric.WithAttributes(
					append(p.base[:len(p.base):len(p.base)], KeyRole.String(group.role), KeySHA256.String(hex.EncodeToString(sum[:])))...))
			}
		}
	}
}
