// Package store holds the in-memory single-use store.
package store

import (
	"context"
	"sync"
	"time"
)

// Memory is a single-instance Store: a map of keys to expiry, swept lazily.
type Memory struct {
	mu      sync.Mutex
	now     func() time.Time
	keys    map[string]time.Time
	lastGC  time.Time
	gcEvery time.Duration
}

// NewMemory returns an empty store using now as its clock (time.Now if nil).
func NewMemory(now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{now: now, keys: make(map[string]time.Time), gcEvery: time.Minute}
}

// Consume records key until the given time and reports whether it was new.
func (m *Memory) Consume(_ context.Context, key string, until time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if now.Sub(m.lastGC) > m.gcEvery {
		for k, exp := range m.keys {
			if !now.Before(exp) {
				delete(m.keys, k)
			}
		}
		m.lastGC = now
	}
	if exp, ok := m.keys[key]; ok && now.Before(exp) {
		return false, nil
	}
	m.keys[key] = until
	return true, nil
}

// Len reports how many keys are held, for tests of the sweep.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.keys)
}
