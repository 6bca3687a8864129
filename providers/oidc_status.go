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
