package store

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) Now() time.Time { return c.t }

func mustConsume(t *testing.T, m *Memory, key string, until time.Time) bool {
	t.Helper()
	ok, err := m.Consume(context.Background(), key, until)
	if err != nil {
		t.Fatalf("Consume(%q): %v", key, err)
	}
	return ok
}

func TestConsume(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	m := NewMemory(c.Now, 0)
	if !mustConsume(t, m, "a", c.t.Add(time.Minute)) {
		t.Fatal("first use refused")
	}
	if mustConsume(t, m, "a", c.t.Add(time.Minute)) {
		t.Fatal("second use accepted")
	}
	c.t = c.t.Add(time.Minute - time.Nanosecond)
	if mustConsume(t, m, "a", c.t.Add(time.Minute)) {
		t.Fatal("accepted again a nanosecond before its expiry")
	}
	c.t = c.t.Add(time.Nanosecond)
	if !mustConsume(t, m, "a", c.t.Add(time.Minute)) {
		t.Fatal("key still held at its expiry")
	}
	mustConsume(t, m, "b", c.t.Add(time.Second))
	c.t = c.t.Add(2 * time.Minute)
	mustConsume(t, m, "c", c.t.Add(time.Minute))
	if m.Len() != 1 {
		t.Errorf("expired keys not reclaimed: %d held", m.Len())
	}
}

// Expiries outside UnixNano's range (the zero time, years past 2262), one
// already past, and one between two milliseconds.
func TestConsumeExtremeExpiries(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	m := NewMemory(c.Now, 0)
	if !mustConsume(t, m, "zero", time.Time{}) || !mustConsume(t, m, "zero", time.Time{}) {
		t.Error("a key that expired before it was used is refused")
	}
	if !mustConsume(t, m, "past", c.t.Add(-time.Hour)) || m.Len() != 0 {
		t.Errorf("a key with a past expiry is held: %d", m.Len())
	}
	far := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	if !mustConsume(t, m, "far", far) || mustConsume(t, m, "far", far) {
		t.Error("a key held until year 9999 is not single use")
	}
	c.t = time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
	if mustConsume(t, m, "far", far) {
		t.Error("a key held until year 9999 was forgotten in year 3000")
	}
	c.t = time.Unix(5000, 0)
	odd := c.t.Add(1500 * time.Microsecond)
	mustConsume(t, m, "odd", odd)
	c.t = odd.Add(-time.Nanosecond)
	if mustConsume(t, m, "odd", odd) {
		t.Error("a key was forgotten before its expiry of 1.5 ms")
	}
}

func TestConsumeConcurrent(t *testing.T) {
	m := NewMemory(nil, 0)
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			if ok, _ := m.Consume(context.Background(), "k", time.Now().Add(time.Minute)); ok {
				wins.Add(1)
			}
			m.Consume(context.Background(), fmt.Sprint(i), time.Now().Add(time.Minute))
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d goroutines consumed the same key", wins.Load())
	}
}

// At the bound a new key is refused with ErrFull; no live key is forgotten
// to make room, keys already held still count as used, and room comes back
// exactly as keys expire, soonest first.
func TestBound(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	m := NewMemory(c.Now, 3)
	mustConsume(t, m, "a", c.t.Add(3*time.Minute))
	mustConsume(t, m, "b", c.t.Add(time.Minute))
	mustConsume(t, m, "c", c.t.Add(2*time.Minute))
	ok, err := m.Consume(context.Background(), "d", c.t.Add(time.Minute))
	if ok || !errors.Is(err, ErrFull) {
		t.Fatalf("fourth key: %v %v, want ErrFull", ok, err)
	}
	if want := "memory store is full: 3 single-use values held, none expired yet (MaxEntries 3)"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	for _, k := range []string{"a", "b", "c"} {
		if mustConsume(t, m, k, c.t.Add(time.Minute)) {
			t.Errorf("%s accepted twice while the store was full", k)
		}
	}
	// A key with a past expiry needs no room.
	if !mustConsume(t, m, "gone", c.t.Add(-time.Second)) {
		t.Error("a key already expired was refused at the bound")
	}
	c.t = c.t.Add(time.Minute) // b expires
	if !mustConsume(t, m, "d", c.t.Add(time.Hour)) {
		t.Fatal("refused after a key expired")
	}
	if _, err := m.Consume(context.Background(), "e", c.t.Add(time.Hour)); !errors.Is(err, ErrFull) {
		t.Fatalf("fifth key: %v, want ErrFull", err)
	}
	if mustConsume(t, m, "a", c.t.Add(time.Minute)) || mustConsume(t, m, "c", c.t.Add(time.Minute)) {
		t.Error("a live key was forgotten to make room")
	}
	c.t = c.t.Add(2 * time.Minute) // a and c expire
	if m.Len() != 1 {
		t.Fatalf("%d live keys, want d alone", m.Len())
	}
	if !mustConsume(t, m, "e", c.t.Add(time.Hour)) || !mustConsume(t, m, "f", c.t.Add(time.Hour)) {
		t.Fatal("refused after two keys expired")
	}
	if m.Len() != 3 {
		t.Errorf("%d held, want d, e, f", m.Len())
	}
}

// The default bound applies when none is given.
func TestDefaultBound(t *testing.T) {
	for _, n := range []int{0, -1} {
		if got := NewMemory(nil, n).Max(); got != DefaultMaxEntries {
			t.Errorf("NewMemory(nil, %d).Max() = %d, want %d", n, got, DefaultMaxEntries)
		}
	}
}

// BenchmarkBytesPerEntry fills a store with keys shaped like a transaction's
// ("tx:" and 22 characters) and reports the heap each one costs, its key's
// bytes included. With the default bound this times DefaultMaxEntries is the
// most the store can hold.
func BenchmarkBytesPerEntry(b *testing.B) {
	raw := make([]byte, 16)
	until := time.Now().Add(time.Hour)
	for b.Loop() {
		b.StopTimer()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		keys := make([]string, DefaultMaxEntries)
		for i := range keys {
			rand.Read(raw)
			keys[i] = "tx:" + base64.RawURLEncoding.EncodeToString(raw)
		}
		b.StartTimer()
		m := NewMemory(nil, len(keys))
		for _, k := range keys {
			if ok, err := m.Consume(context.Background(), k, until); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
		b.StopTimer()
		keys = nil // the store's references to the keys are the only ones left
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(m.Len()), "B/entry")
		runtime.KeepAlive(m)
		b.StartTimer()
	}
}

// Keys spread over shards share one bound: a shard full of expired keys is
// reclaimed before a new key elsewhere is refused.
func TestBoundAcrossShards(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	m := NewMemory(c.Now, 100)
	for i := range 100 {
		mustConsume(t, m, fmt.Sprint("short", i), c.t.Add(time.Second))
	}
	if _, err := m.Consume(context.Background(), "one-more", c.t.Add(time.Hour)); !errors.Is(err, ErrFull) {
		t.Fatalf("101st live key: %v, want ErrFull", err)
	}
	c.t = c.t.Add(time.Second)
	for i := range 100 {
		if !mustConsume(t, m, fmt.Sprint("long", i), c.t.Add(time.Hour)) {
			t.Fatalf("key %d refused with every earlier key expired", i)
		}
	}
	if m.Len() != 100 {
		t.Errorf("Len %d, want 100", m.Len())
	}
}

// A released key is new again at once, and frees its room; an entry it
// leaves in the heap never drops a key consumed again later, and released
// keys' entries are swept so the heap stays within twice the live keys.
func TestRelease(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	m := NewMemory(c.Now, 2)
	ctx := context.Background()
	mustConsume(t, m, "a", c.t.Add(time.Minute))
	mustConsume(t, m, "b", c.t.Add(time.Minute))
	if err := m.Release(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if m.Len() != 1 {
		t.Errorf("%d held after a release, want 1", m.Len())
	}
	if !mustConsume(t, m, "c", c.t.Add(time.Minute)) {
		t.Fatal("the released key's room was not given back")
	}
	m.Release(ctx, "c")
	// a again, held longer than its first, released, entry.
	if !mustConsume(t, m, "a", c.t.Add(3*time.Minute)) {
		t.Fatal("a released key is refused")
	}
	c.t = c.t.Add(2 * time.Minute) // past a's first expiry, b's and c's
	if mustConsume(t, m, "a", c.t.Add(time.Minute)) {
		t.Fatal("the released entry's expiry dropped the key consumed again")
	}
	if err := m.Release(ctx, "never-held"); err != nil || m.Len() != 1 {
		t.Errorf("releasing a key not held: %v, %d held", err, m.Len())
	}

	big := NewMemory(c.Now, 1_000_000)
	for i := range 100_000 {
		k := fmt.Sprint("junk", i)
		mustConsume(t, big, k, c.t.Add(10*time.Minute))
		big.Release(ctx, k)
	}
	entries := 0
	for i := range big.shards {
		entries += len(big.shards[i].byExpiry)
	}
	if big.Len() != 0 || entries > 2*shardCount {
		t.Errorf("after 100 000 consumed and released keys: %d held, %d heap entries", big.Len(), entries)
	}
}
