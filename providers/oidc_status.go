package providers

import "time"

// DiscoveryStatus reports on the discovery document, for monitoring
// (extauth's metrics read it): when the copy in use was fetched (zero
// while there is none), when the next fetch is due (zero when none is
// planned: before the first sign-in asks), and when a fetch last failed
// (zero if none has), by the strategy's clock.
func (s *OIDC) DiscoveryStatus() (fetched, nextRefresh, lastFailure time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.disc.Load()
	if d != nil {
		fetched = s.fetched
	}
	switch {
	case s.lastErr != nil:
		nextRefresh = s.nextAttempt
	case d != nil:
		nextRefresh = d.refreshAt
	}
	return fetched, nextRefresh, s.failedAt
}

// TrustChainStatus reports on the provider's trust chain in a federation,
// for monitoring: when the held chain's earliest exp is (zero while none
// is held), and whether the strategy is federated at all (then its
// DiscoveryStatus is the chain's resolution).
func (s *OIDC) TrustChainStatus() (expires time.Time, federated bool) {
	if s.fed == nil {
		return time.Time{}, false
	}
	if c := s.fed.resolver.Cached(s.issuer); c != nil {
		return c.Expires, true
	}
	return time.Time{}, true
}
