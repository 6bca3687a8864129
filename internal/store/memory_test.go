package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestConsume(t *testing.T) {
	now := time.Unix(1000, 0)
	m := NewMemory(func() time.Time { return now })
	ctx := context.Background()
	if ok, _ := m.Consume(ctx, "a", now.Add(time.Minute)); !ok {
		t.Fatal("first use refused")
	}
	if ok, _ := m.Consume(ctx, "a", now.Add(time.Minute)); ok {
		t.Fatal("second use accepted")
	}
	now = now.Add(2 * time.Minute)
	if ok, _ := m.Consume(ctx, "a", now.Add(time.Minute)); !ok {
		t.Fatal("key still held after its expiry")
	}
	m.Consume(ctx, "b", now.Add(time.Second))
	now = now.Add(2 * time.Minute)
	m.Consume(ctx, "c", now.Add(time.Minute))
	if m.Len() != 1 {
		t.Errorf("expired keys not swept: %d held", m.Len())
	}
}

func TestConsumeConcurrent(t *testing.T) {
	m := NewMemory(nil)
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ok, _ := m.Consume(context.Background(), "k", time.Now().Add(time.Minute)); ok {
				wins.Add(1)
			}
			m.Consume(context.Background(), fmt.Sprint(i), time.Now().Add(time.Minute))
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d goroutines consumed the same key", wins.Load())
	}
}
