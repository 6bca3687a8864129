// Package store holds the in-memory single-use store.
package store

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
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
//
// Keys are spread over shards, each with its own lock, so that concurrent
// sign-ins (of different tenants, say) do not queue on one mutex; the bound
// is one count for the whole store.
type Memory struct {
	now    func() time.Time
	max    int64
	held   atomic.Int64
	seed   maphash.Seed
	shards [shardCount]shard
}

const shardCount = 32

type shard struct {
	mu sync.Mutex
	// keys maps each held key to its expiry in Unix milliseconds.
	keys map[string]int64
	// byExpiry holds an entry for each key of keys, soonest expiry first:
	// every Consume reclaims the shard's expired ones before it looks a key
	// up, so a key is never in keys after its expiry. A released key leaves
	// its entry behind, stale: an entry counts only while keys holds its
	// key with its expiry.
	byExpiry expiryHeap
	// stale counts byExpiry's entries whose key was released; past
	// len(keys) they are swept, so the heap stays within twice the live
	// keys, however many are released.
	stale int
	_     [64]byte // keeps shards' locks off each other's cache lines
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
	m := &Memory{now: now, max: int64(maxEntries), seed: maphash.MakeSeed()}
	for i := range m.shards {
		m.shards[i].keys = make(map[string]int64)
	}
	return m
}

// Consume records key until the given time and reports whether it was new.
// When the store already holds its maximum of live keys, a new key is
// refused with an error wrapping ErrFull; a key already held is still
// reported as used.
func (m *Memory) Consume(_ context.Context, key string, until time.Time) (bool, error) {
	s := &m.shards[maphash.String(m.seed, key)%shardCount]
	s.mu.Lock()
	defer s.mu.Unlock()
	now := floorMilli(m.now())
	m.reclaimShard(s, now)
	if _, held := s.keys[key]; held {
		return false, nil
	}
	expires := ceilMilli(until)
	if expires <= now {
		// Used now and expired already: nothing left to remember.
		return true, nil
	}
	if m.held.Load() >= m.max {
		// Other shards may hold expired keys not reclaimed yet: they go
		// before anyone is refused.
		m.reclaim(s, now)
	}
	if m.held.Add(1) > m.max {
		m.held.Add(-1)
		return false, fmt.Errorf("%w: %d single-use values held, none expired yet (MaxEntries %d)", ErrFull, m.held.Load(), m.max)
	}
	s.keys[key] = expires
	heap.Push(&s.byExpiry, entry{expires: expires, key: key})
	return true, nil
}

// Release forgets key before its expiry, so that a later Consume of it
// reports it new: how a sign-in whose callback failed verification gives
// back what it held. Releasing a key not held does nothing.
func (m *Memory) Release(_ context.Context, key string) error {
	s := &m.shards[maphash.String(m.seed, key)%shardCount]
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, held := s.keys[key]; !held {
		return nil
	}
	delete(s.keys, key)
	m.held.Add(-1)
	s.stale++
	if s.stale > len(s.keys) {
		live := s.byExpiry[:0]
		for _, e := range s.byExpiry {
			if exp, ok := s.keys[e.key]; ok && exp == e.expires {
				live = append(live, e)
			}
		}
		clear(s.byExpiry[len(live):])
		s.byExpiry = live
		heap.Init(&s.byExpiry)
		s.stale = 0
	}
	return nil
}

// reclaimShard drops s's expired keys; the caller holds s's lock.
func (m *Memory) reclaimShard(s *shard, now int64) {
	for len(s.byExpiry) > 0 && s.byExpiry[0].expires <= now {
		e := heap.Pop(&s.byExpiry).(entry)
		if exp, ok := s.keys[e.key]; ok && exp == e.expires {
			delete(s.keys, e.key)
			m.held.Add(-1)
		} else if s.stale > 0 {
			s.stale--
		}
	}
}

// reclaim drops the expired keys of every shard but mine, whose lock the
// caller holds and which it just reclaimed (nil: every shard).
func (m *Memory) reclaim(mine *shard, now int64) {
	for i := range m.shards {
		s := &m.shards[i]
		if s == mine {
			continue
		}
		s.mu.Lock()
		m.reclaimShard(s, now)
		s.mu.Unlock()
	}
}

// Len reports how many live keys are held, reclaiming the expired ones.
func (m *Memory) Len() int {
	m.reclaim(nil, floorMilli(m.now()))
	return int(m.held.Load())
}

// Max reports the bound on held keys.
func (m *Memory) Max() int { return int(m.max) }

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
