package samlsp

import (
	"context"
	"sync/atomic"
	"time"
)

// refresher runs the fetches of a document the SP depends on (the IdP
// metadata, a federation's aggregate) in the background: at once, then on
// the schedule each good copy asks for, with a doubling back-off after a
// failure, and early when a reader finds no copy at all (kick). Readers
// never block on it: they see the last good copy, or wait for the attempt
// under way (waitAttempt).
type refresher struct {
	kicks chan struct{}
	// attempt is closed when the fetch under way (or the next one) ends,
	// then replaced.
	attempt atomic.Pointer[chan struct{}]
	lastErr atomic.Pointer[error]
	// fetches counts attempts, for tests and logs.
	fetches atomic.Int64
	// failedAt and nextAt are when an attempt last failed and when the
	// next is due, in Unix nanoseconds by the SP's clock.
	failedAt, nextAt atomic.Int64
	// wait is metadataWait; a test on a loaded machine waits longer.
	wait time.Duration
}

func (r *refresher) init() {
	r.wait = metadataWait
	r.kicks = make(chan struct{}, 1)
	ch := make(chan struct{})
	r.attempt.Store(&ch)
}

// attemptDone wakes whoever waits for the fetch that just ended.
func (r *refresher) attemptDone() {
	ch := make(chan struct{})
	close(*r.attempt.Swap(&ch))
}

// kick asks the loop for an early attempt; it is how a sign-in that found
// no copy makes the next one succeed as soon as the source is back.
func (r *refresher) kick() {
	select {
	case r.kicks <- struct{}{}:
	default:
	}
}

// err returns the last fetch error, nil after a success.
func (r *refresher) err() error {
	if p := r.lastErr.Load(); p != nil {
		return *p
	}
	return nil
}

// waitFor returns a copy from get, asking for an early fetch and waiting
// for it (up to metadataWait, or ctx) when there is none yet.
func waitFor[T any](ctx context.Context, r *refresher, get func() *T) *T {
	// Take the attempt before looking: a fetch that stores a copy after
	// the look closes this channel.
	attempt := *r.attempt.Load()
	if v := get(); v != nil {
		return v
	}
	r.kick()
	t := time.NewTimer(r.wait)
	defer t.Stop()
	select {
	case <-attempt:
	case <-t.C:
	case <-ctx.Done():
	}
	return get()
}

// refreshLoop is what the loop does on each attempt: fetch stores a good
// copy and returns how long it may be used before the next fetch, or fails;
// have reports whether there is a copy; after runs after each attempt.
type refreshLoop struct {
	now             func() time.Time
	retry, maxRetry time.Duration
	fetch           func(ctx context.Context) (time.Duration, error)
	have            func() bool
	after           func()
}

// loop runs until ctx is done.
func (r *refresher) loop(ctx context.Context, l refreshLoop) {
	retry := l.retry
	for {
		started := time.Now()
		r.fetches.Add(1)
		next, err := l.fetch(ctx)
		if ctx.Err() != nil {
			return
		}
		var wait time.Duration
		if err != nil {
			r.lastErr.Store(&err)
			r.failedAt.Store(l.now().UnixNano())
			wait = retry
			retry = min(retry*2, l.maxRetry)
		} else {
			r.lastErr.Store(nil)
			retry = l.retry
			wait = max(next, l.retry)
		}
		r.nextAt.Store(l.now().Add(wait).UnixNano())
		r.attemptDone()
		if l.after != nil {
			l.after()
		}
		timer := time.NewTimer(wait)
	waiting:
		for {
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-timer.C:
				break waiting
			case <-r.kicks:
				// A kick only matters while there is no copy at all; a
				// working copy is refreshed on its own schedule. Too soon
				// after the last attempt, it brings the next one forward
				// to the earliest allowed.
				if !l.have() {
					timer.Stop()
					timer = time.NewTimer(max(minKickSpacing-time.Since(started), 0))
				}
			}
		}
	}
}
