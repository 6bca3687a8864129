// Package expiring holds the fake providers' short-lived state: codes,
// tokens, sessions, pending consent pages, seen nonces. A Map keeps each
// entry until its expiry and at most a fixed number at once, so that a fake
// serving a long-running demo or a load test neither grows without end nor
// spends more per sign-in as sign-ins pile up.
//
// When it is full, a Map drops the entry put longest ago. Each map of a
// fake holds one kind of thing with one lifetime (a code lives a minute, a
// session a day), so the oldest entry is also the first to expire: a live
// entry goes only when Max younger ones were put within its lifetime, never
// while an expired one stays, and never at random.
package expiring

import (
	"iter"
	"time"
)

// DefaultMax is the bound of the fakes' maps: a code is lost only when
// 20 000 other codes were issued within its lifetime before it was redeemed.
const DefaultMax = 20_000

// Map maps keys to values, each until its expiry, at most Max at once. Put
// drops the expired entries among the oldest and, past Max, the oldest:
// each at a constant cost, amortized over the puts. Get, Take and All never
// return an expired entry, whether or not it was dropped yet.
//
// A Map is not safe for concurrent use: each fake holds it under its own
// lock, with the rest of its state.
type Map[V any] struct {
	max int
	now func() time.Time
	m   map[string]*entry[V]
	// list is the ring of entries in the order they were put: list.next
	// is the oldest, list.prev the newest.
	list    entry[V]
	evicted int
}

type entry[V any] struct {
	key        string
	val        V
	expires    time.Time
	prev, next *entry[V]
}

// New returns an empty Map bounded by max (DefaultMax if not positive),
// with now as its clock (time.Now if nil).
func New[V any](max int, now func() time.Time) *Map[V] {
	if max <= 0 {
		max = DefaultMax
	}
	if now == nil {
		now = time.Now
	}
	m := &Map[V]{max: max, now: now, m: make(map[string]*entry[V])}
	m.list.next, m.list.prev = &m.list, &m.list
	return m
}

// Put holds v under key until expires, replacing what key held (which
// then counts as put now). It first drops the oldest entries that have
// expired, then the oldest ones while the map holds more than its bound.
func (m *Map[V]) Put(key string, v V, expires time.Time) {
	if e, ok := m.m[key]; ok {
		m.unlink(e)
		delete(m.m, key)
	}
	e := &entry[V]{key: key, val: v, expires: expires}
	m.m[key] = e
	e.prev, e.next = m.list.prev, &m.list
	m.list.prev.next = e
	m.list.prev = e
	now := m.now()
	for old := m.list.next; old != e && now.After(old.expires); old = m.list.next {
		m.drop(old)
	}
	for len(m.m) > m.max {
		old := m.list.next
		if !now.After(old.expires) {
			m.evicted++
		}
		m.drop(old)
	}
}

// Get returns the value key holds, unless it has expired.
func (m *Map[V]) Get(key string) (V, bool) {
	e, ok := m.m[key]
	if !ok || m.now().After(e.expires) {
		var zero V
		return zero, false
	}
	return e.val, true
}

// Take is Get, and forgets key: a value used once.
func (m *Map[V]) Take(key string) (V, bool) {
	v, ok := m.Get(key)
	m.Delete(key)
	return v, ok
}

// Delete forgets key.
func (m *Map[V]) Delete(key string) {
	if e, ok := m.m[key]; ok {
		m.drop(e)
	}
}

// All yields the live entries, oldest first. The caller may Delete the
// entry it is given, and no other, during the loop.
func (m *Map[V]) All() iter.Seq2[string, V] {
	return func(yield func(string, V) bool) {
		now := m.now()
		for e := m.list.next; e != &m.list; {
			next := e.next
			if !now.After(e.expires) && !yield(e.key, e.val) {
				return
			}
			e = next
		}
	}
}

// Len reports how many entries the map holds, expired ones not dropped
// yet included.
func (m *Map[V]) Len() int { return len(m.m) }

// Evicted reports how many entries the bound dropped before their expiry.
func (m *Map[V]) Evicted() int { return m.evicted }

func (m *Map[V]) drop(e *entry[V]) {
	delete(m.m, e.key)
	m.unlink(e)
}

func (m *Map[V]) unlink(e *entry[V]) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}
