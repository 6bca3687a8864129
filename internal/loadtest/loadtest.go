// Package loadtest runs the load tests of the fake providers: a million
// sign-ins through a fake's own issue and redeem paths (Run), with no live
// code lost and the same cost per sign-in at the end of the run as at its
// start (Growth).
//
// A sign-in here is what the fake stores and looks up: the code (or
// request token, or session) it issues, and its redemption some sign-ins
// later, as a browser and a client that come back while others sign in.
// The HTTP around them and the signatures cost the same at the millionth
// sign-in as at the first; what can grow is what the fake holds, and that
// is what runs a million times here, in seconds. The demo's load test
// (examples/demo) drives fewer sign-ins through the real routes.
//
// Costs are CPU time, which a busy machine does not stretch as it
// stretches wall-clock time, compared as medians of many slices.
package loadtest

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// Clock is a fake clock that a run moves forward at each sign-in.
type Clock struct{ ns atomic.Int64 }

// NewClock returns a clock at a fixed instant.
func NewClock() *Clock {
	c := &Clock{}
	c.ns.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

// Now is the clock's time.
func (c *Clock) Now() time.Time { return time.Unix(0, c.ns.Load()) }

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// Run is one load test.
type Run struct {
	// SignIns is how many sign-ins the run makes: a million by default, a
	// tenth of that under the race detector, which slows each tenfold.
	SignIns int
	// Lag is how many sign-ins later each code is redeemed (500 by
	// default): so many codes are live at any time, and each waits
	// Lag*Step, within its lifetime.
	Lag int
	// Step is how far the clock moves at each sign-in: 2 ms by default,
	// so that 30 000 sign-ins are made within a code's minute, and the
	// fake's maps of codes, tokens and sessions all fill to their bound.
	Step time.Duration
	// Clock is the fake's clock.
	Clock *Clock
	// Issue begins sign-in i and returns what the fake issued for it.
	Issue func(i int) string
	// Redeem finishes the sign-in that was issued code; an error is a
	// lost sign-in.
	Redeem func(code string) error
}

// sliceLen is how many sign-ins make one slice of a Run, whose cost is
// measured; the first and the last compared slices each cover 20 000
// sign-ins, the fakes' bound, so the first ones are all before any map is
// full.
const (
	sliceLen = 500
	compared = 40
)

// MaxGrowth is how much more the last slices of a run may cost than the
// first (their medians): a fake that scans its map at each sign-in costs
// tens of times more once the map is full.
const MaxGrowth = 3

// Do makes the run and fails t on a lost sign-in or on a cost per
// sign-in that grows.
func (r Run) Do(t *testing.T) {
	t.Helper()
	n := r.SignIns
	if n == 0 {
		n = defaultSignIns
	}
	lag := r.Lag
	if lag == 0 {
		lag = 500
	}
	step := r.Step
	if step == 0 {
		step = 2 * time.Millisecond
	}
	if n < 2*compared*sliceLen {
		t.Fatalf("loadtest: %d sign-ins are too few to compare the first and last %d", n, compared*sliceLen)
	}
	stop := lockThread()
	defer stop()
	// live holds the codes issued and not redeemed yet, a ring: live[i%lag]
	// is sign-in i's until sign-in i+lag redeems it.
	live := make([]string, lag)
	lost := 0
	var costs []time.Duration
	start := ThreadCPU()
	redeem := func(code string) {
		if err := r.Redeem(code); err != nil {
			if lost < 5 {
				t.Errorf("a live sign-in lost: %v", err)
			}
			lost++
		}
	}
	for i := range n {
		r.Clock.Advance(step)
		if i >= lag {
			redeem(live[i%lag])
		}
		live[i%lag] = r.Issue(i)
		if (i+1)%sliceLen == 0 {
			now := ThreadCPU()
			costs = append(costs, now-start)
			start = now
		}
	}
	for i := max(n-lag, 0); i < n; i++ {
		redeem(live[i%lag])
	}
	if lost > 0 {
		t.Errorf("%d of %d sign-ins lost", lost, n)
	}
	Growth(t, costs, compared, fmt.Sprintf("%d sign-ins in slices of %d", n, sliceLen))
}

// Growth fails t when the median cost of the last n slices of a run
// exceeds MaxGrowth times the median of its first n slices.
func Growth(t *testing.T, costs []time.Duration, n int, what string) {
	t.Helper()
	first, last := Median(costs[:n]), Median(costs[len(costs)-n:])
	t.Logf("%s: median cost %v in the first %d slices, %v in the last %d", what, first, n, last, n)
	if last > MaxGrowth*first {
		t.Errorf("%s: the cost grew %.1f times from the first %d slices to the last (medians %v, %v)",
			what, float64(last)/float64(first), n, first, last)
	}
}

// ThreadCPUOf runs f on one thread and returns the CPU time it took: what
// f costs, whatever else the machine runs, for a timing test that compares
// work done, not the time a busy scheduler gave it. f must do its work on
// its own goroutine.
func ThreadCPUOf(f func()) time.Duration {
	stop := lockThread()
	defer stop()
	start := ThreadCPU()
	f()
	return ThreadCPU() - start
}

// Median is the median of ds.
func Median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
