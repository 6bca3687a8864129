package telemetry

import (
	"time"

	"go.opentelemetry.io/otel/metric"
)

// What the asynchronous instruments read from a strategy, when it has it:
// the SAML SP (samlsp.SP) and the OpenID Connect strategy
// (providers.OIDC). Certificates come through Watch.
type (
	// metadataStatus: a SAML SP's IdP metadata.
	metadataStatus interface {
		MetadataStatus() (fetched, nextRefresh, lastFailure time.Time)
	}
	// federationStatus: a SAML SP's federation aggregate.
	federationStatus interface {
		FederationStatus() (entities, idps int, ok bool)
	}
	// mdqStats: a SAML SP's MDQ look-ups, by result (a fixed list).
	mdqStats interface {
		MDQStats() map[string]int64
	}
	// artifactStats: a SAML SP's artifacts received, by result (a fixed
	// list).
	artifactStats interface {
		ArtifactStats() map[string]int64
	}
	// discoveryStatus: an OpenID Connect discovery document.
	discoveryStatus interface {
		DiscoveryStatus() (fetched, nextRefresh, lastFailure time.Time)
	}
	// trustChainStatus: an OpenID provider's trust chain (OpenID
	// Federation), which stands for its discovery document.
	trustChainStatus interface {
		TrustChainStatus() (expires time.Time, federated bool)
	}
)

// Certificate is one certificate a strategy relies on, for the expiry
// gauge: a SAML SP's own (Role "sp") or its IdP's signing one ("idp"), and
// what is done with it (Use: samlsp's "sign+decrypt", "decrypt" for the
// next pair of a rotation, "retiring" for the retiring one, "verify"), so
// that an alert can leave out what expires without harm.
type Certificate struct {
	Role     string
	Use      string
	SHA256   string // hex fingerprint
	NotAfter time.Time
}

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
	if s, ok := p.strategy.(trustChainStatus); ok {
		if expires, federated := s.TrustChainStatus(); federated {
			doc = "trust_chain"
			if !expires.IsZero() {
				o.ObserveFloat64(t.chainExpiry, expires.Sub(now).Seconds(), metric.WithAttributes(p.base...))
			}
		}
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
	if s, ok := p.strategy.(federationStatus); ok {
		if entities, idps, ok := s.FederationStatus(); ok {
			attrs := metric.WithAttributes(p.base...)
			o.ObserveInt64(t.fedEntities, int64(entities), attrs)
			o.ObserveInt64(t.fedIdPs, int64(idps), attrs)
		}
	}
	if s, ok := p.strategy.(mdqStats); ok {
		for result, n := range s.MDQStats() {
			o.ObserveInt64(t.fedMDQ, n, metric.WithAttributes(append(p.base[:len(p.base):len(p.base)], KeyResult.String(result))...))
		}
	}
	if s, ok := p.strategy.(artifactStats); ok {
		for result, n := range s.ArtifactStats() {
			o.ObserveInt64(t.artifacts, n, metric.WithAttributes(append(p.base[:len(p.base):len(p.base)], KeyResult.String(result))...))
		}
	}
	if p.certificates == nil {
		return
	}
	for _, c := range p.certificates() {
		o.ObserveFloat64(t.certExpiry, c.NotAfter.Sub(now).Seconds(), metric.WithAttributes(
			append(p.base[:len(p.base):len(p.base)], KeyRole.String(c.Role), KeyUse.String(c.Use), KeySHA256.String(c.SHA256))...))
	}
}
