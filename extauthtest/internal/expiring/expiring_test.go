package expiring_test

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/extauth/extauth/extauthtest/internal/expiring"
	"github.com/extauth/extauth/internal/loadtest"
)

func keys(m *expiring.Map[int]) []string {
	var out []string
	for k := range m.All() {
		out = append(out, k)
	}
	return out
}

// An entry is there until its expiry, then gone for Get, Take and All at
// once, and dropped by the next Put.
func TestExpiry(t *testing.T) {
	c := loadtest.NewClock()
	m := expiring.New[int](10, c.Now)
	m.Put("a", 1, c.Now().Add(time.Minute))
	m.Put("b", 2, c.Now().Add(2*time.Minute))
	if v, ok := m.Get("a"); !ok || v != 1 {
		t.Fatalf("Get(a) = %d, %v", v, ok)
	}
	c.Advance(time.Minute)
	if _, ok := m.Get("a"); !ok {
		t.Fatal("gone at its expiry, not after it")
	}
	c.Advance(time.Nanosecond)
	if _, ok := m.Get("a"); ok {
		t.Fatal("Get returned an expired entry")
	}
	if _, ok := m.Take("a"); ok {
		t.Fatal("Take returned an expired entry")
	}
	m.Put("a2", 3, c.Now().Add(time.Minute))
	if got := keys(m); !slices.Equal(got, []string{"b", "a2"}) || m.Len() != 2 {
		t.Fatalf("after a Put: %v, Len %d", got, m.Len())
	}
	c.Advance(time.Hour)
	if got := keys(m); len(got) != 0 {
		t.Fatalf("All yields expired entries: %v", got)
	}
	m.Put("c", 4, c.Now().Add(time.Minute))
	if m.Len() != 1 {
		t.Fatalf("Put left %d entries, the expired ones included", m.Len())
	}
	if m.Evicted() != 0 {
		t.Fatalf("expired entries counted as evicted: %d", m.Evicted())
	}
}

// Past its bound the map drops the entry put longest ago, one per Put,
// and counts it when it was live; a key put again counts as put now.
func TestBoundDropsTheOldest(t *testing.T) {
	c := loadtest.NewClock()
	m := expiring.New[int](3, c.Now)
	for i := range 3 {
		m.Put(strconv.Itoa(i), i, c.Now().Add(time.Hour))
	}
	m.Put("0", 10, c.Now().Add(time.Hour))
	m.Put("3", 3, c.Now().Add(time.Hour))
	if got := keys(m); !slices.Equal(got, []string{"2", "0", "3"}) || m.Evicted() != 1 {
		t.Fatalf("held %v, evicted %d; want [2 0 3], 1", got, m.Evicted())
	}
	if v, _ := m.Get("0"); v != 10 {
		t.Fatalf("a key put again holds %d", v)
	}
	// An expired oldest entry goes before a live one is evicted.
	m = expiring.New[int](3, c.Now)
	m.Put("short", 0, c.Now().Add(time.Second))
	m.Put("a", 1, c.Now().Add(time.Hour))
	m.Put("b", 2, c.Now().Add(time.Hour))
	c.Advance(2 * time.Second)
	m.Put("c", 3, c.Now().Add(time.Hour))
	if got := keys(m); !slices.Equal(got, []string{"a", "b", "c"}) || m.Evicted() != 0 || m.Len() != 3 {
		t.Fatalf("held %v (Len %d), evicted %d", got, m.Len(), m.Evicted())
	}
}

// Take gives a value once; Delete inside All's loop is allowed.
func TestTakeAndDelete(t *testing.T) {
	c := loadtest.NewClock()
	m := expiring.New[int](0, c.Now)
	for i := range 5 {
		m.Put(strconv.Itoa(i), i, c.Now().Add(time.Hour))
	}
	if v, ok := m.Take("1"); !ok || v != 1 {
		t.Fatalf("Take = %d, %v", v, ok)
	}
	if _, ok := m.Take("1"); ok {
		t.Fatal("taken twice")
	}
	for k, v := range m.All() {
		if v%2 == 0 {
			m.Delete(k)
		}
	}
	if got := keys(m); !slices.Equal(got, []string{"3"}) || m.Len() != 1 {
		t.Fatalf("held %v", got)
	}
	m.Delete("absent")
}
