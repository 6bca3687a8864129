// Package store holds the in-memory single-use store.
package store

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// DefaultMaxEntries bounds a Memory store when NewMemory is given no bound.
const DefaultMaxEntries = 100_000

// ErrFull is wrapped by the error of a Consume that found the store holding
// its maximum of live entries.
var ErrFull = errors.New("memory store is full")

// Memory is a single-instance Store: a set of keys, each held until its
// expiry, with at most a fixed number held at once.
//
// At the bound it refuses new keys with an error rather than forgetting a
// live one: a key forgotten before its expiry could be consumed a second
// time, which is the replay the store exists to stop. Expired keys are
// always reclaimed first, so the bound only bites while that many are live.
type Memory struct {
	mu   sync.Mutex
	now  func() time.Time
	max  int
	keys map[string]struct{}
	// byExpiry holds each key of keys exactly once, soonest expiry first:
	// every Consume reclaims the expired ones before it looks a key up, so
	// a key is never in keys after its expiry and never pushed twice.
	byExpiry expiryHeap
}

// NewMemory returns an empty store using now as its clock (time.Now if nil)
// that holds at most maxEntries keys (DefaultMaxEntries if not positive).
func NewMemory(now func() time.Time, maxEntries int) *Memory {
	if now == nil {
		now = time.Now
	}
	if maxEntries <= 0 {
		maxEntries = DefaultMaxEntries
	}
	return &Memory{now: now, max: maxEntries, keys: make(map[string]struct{})}
}

// Consume records key until the given time and reports whether it was new.
// When the store already holds its maximum of live keys, a new key is
// refused with an error wrapping ErrFull; a key already held is still
// reported as used.
func (m *Memory) Consume(_ context.Context, key string, until time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := floorMilli(m.now())
	for len(m.byExpiry) > 0 && m.byExpiry[0].expires <= now {
		e := heap.Pop(&m.byExpiry).(entry)
		delete(m.keys, e.key)
	}
	if _, held := m.keys[key]; held {
		return false, nil
	}
	expires := ceilMilli(until)
	if expires <= now {
		// Used now and expired already: nothing left to remember.
		return true, nil
	}
	if len(m.keys) >= m.max {
		return false, fmt.Errorf("%w: %d single-use values held, none expired yet (MaxEntries %d)", ErrFull, len(m.keys), m.max)
	}
	m.keys[key] = struct{}{}
	heap.Push(&m.byExpiry, entry{expires: expires, key: key})
	return true, nil
}

// Len reports how many keys are held, expired ones not yet reclaimed
// included.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.keys)
}

// Max reports the bound on held keys.
func (m *Memory) Max() int { return m.max }

// floorMilli and ceilMilli are t in Unix milliseconds, rounded down and
// up: a key is held at least until its expiry, and an int64 of
// milliseconds spans every time a host will pass (a zero time.Time too,
// which UnixNano could not count).
func floorMilli(t time.Time) int64 { return t.UnixMilli() }

func ceilMilli(t time.Time) int64 {
	ms := t.UnixMilli()
	if t.After(time.UnixMilli(ms)) {
		ms++
	}
	return ms
}

// entry is a key and its expiry in Unix milliseconds: 24 bytes, the
// key's bytes shared with the map.
type entry struct {
	expires int64
	key     string
}

// expiryHeap is a container/heap of entries, soonest expiry on top.
type expiryHeap []entry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].expires < h[j].expires }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(entry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = entry{} // drop the key's reference
	*h = old[:len(old)-1]
	return e
}
