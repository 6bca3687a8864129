package extauth

import (
	"context"
	"time"

	"github.com/extauth/extauth/internal/store"
)

// siteStore is the Store a site's routes and strategies use: the host's
// Store, with the site's key prefix, and a deadline of extauth's own on
// every call.
//
// The deadline is Options.Timeout: a request's own context has none (a
// browser may wait minutes), and a hung Redis or PostgreSQL must fail the
// sign-in with provider_unavailable promptly rather than hold the request,
// its goroutine and a pool connection until the client leaves. The memory
// store never blocks, so it goes without (and without the allocations).
type siteStore struct {
	s        Store
	r        Releaser // nil when s cannot release
	prefix   string
	timeout  time.Duration
	blocking bool
}

func newSiteStore(s Store, timeout time.Duration) siteStore {
	r, _ := s.(Releaser)
	_, mem := s.(*store.Memory)
	return siteStore{s: s, r: r, timeout: timeout, blocking: !mem}
}

// withPrefix keeps a tenant's keys apart, so that the same assertion ID at
// two tenants is no false replay, while a replay within a tenant is still
// refused across instances.
func (s siteStore) withPrefix(prefix string) siteStore {
	s.prefix += prefix
	return s
}

// Consume is the host Store's Consume, bounded by the deadline.
func (s siteStore) Consume(ctx context.Context, key string, until time.Time) (bool, error) {
	if s.blocking {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.timeout)
		defer cancel()
	}
	return s.s.Consume(ctx, s.prefix+key, until)
}

// release gives back a key consumed by a callback that then failed, when
// the host's Store can. It runs whatever became of the request's context
// (a failed callback may have failed by running out of time), bounded by
// the deadline; a failure to release only leaves the key until its
// expiry, so it is not the user's concern.
func (s siteStore) release(ctx context.Context, key string) error {
	if s.r == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
	defer cancel()
	return s.r.Release(ctx, s.prefix+key)
}
