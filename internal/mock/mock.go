// Package mock holds the queued results of extauthtest's mock mode. It is
// internal so that only extauthtest can make a Set: an Auth switches into
// mock mode only when a test hands it one.
package mock

import (
	"sync"

	"github.com/extauth/extauth/providers"
)

// Result is what one mocked sign-in yields: an identity, or a failure.
type Result struct {
	Identity *providers.Identity
	Failure  *providers.Error
}

// Set queues results per provider, and holds each between the authorize
// route that took it and the callback that delivers it.
type Set struct {
	mu      sync.Mutex
	queued  map[string][]Result
	started map[string]Result // by transaction ID
}

// NewSet returns an empty Set.
func NewSet() *Set {
	return &Set{queued: map[string][]Result{}, started: map[string]Result{}}
}

// Push queues r for the next sign-in with provider.
func (s *Set) Push(provider string, r Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queued[provider] = append(s.queued[provider], r)
}

// Pending reports whether a result is queued for provider.
func (s *Set) Pending(provider string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queued[provider]) > 0
}

// Start takes the next result queued for provider and keeps it for the
// transaction txID; false when none is queued.
func (s *Set) Start(provider, txID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queued[provider]
	if len(q) == 0 {
		return false
	}
	s.started[txID], s.queued[provider] = q[0], q[1:]
	return true
}

// Finish returns, once, the result kept for txID.
func (s *Set) Finish(txID string) (Result, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.started[txID]
	delete(s.started, txID)
	return r, ok
}
