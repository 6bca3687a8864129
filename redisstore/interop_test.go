//go:build interop

package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/internal/redistest"
	"github.com/extauth/extauth/redisstore"
)

const redisPassword = "interop-5d0c2f8e71"

func open(t *testing.T, addr string, o redisstore.Options) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(addr, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustConsume(t *testing.T, s *redisstore.Store, key string, until time.Time) bool {
	t.Helper()
	ok, err := s.Consume(context.Background(), key, until)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestRedisConsume(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{Password: redisPassword})
	s := open(t, srv.Addr, redisstore.Options{Password: extauth.NewSecret(redisPassword)})
	if err := s.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(300 * time.Millisecond)
	if !mustConsume(t, s, "tx:a", until) {
		t.Fatal("first use refused")
	}
	if mustConsume(t, s, "tx:a", until) {
		t.Fatal("second use accepted")
	}
	if got := srv.CLI(t, "GET", "extauth:tx:a"); got != "1" {
		t.Errorf("GET extauth:tx:a = %q", got)
	}
	pttl, err := strconv.Atoi(srv.CLI(t, "PTTL", "extauth:tx:a"))
	if err != nil || pttl <= 0 || pttl > 300 {
		t.Errorf("PTTL = %d (%v), want within (0, 300] ms", pttl, err)
	}
	time.Sleep(time.Until(until) + 50*time.Millisecond)
	if !mustConsume(t, s, "tx:a", time.Now().Add(time.Minute)) {
		t.Fatal("still refused after its expiry")
	}
	// An expiry already past holds the key for a millisecond, not forever.
	mustConsume(t, s, "tx:past", time.Now().Add(-time.Hour))
	time.Sleep(20 * time.Millisecond)
	if got := srv.CLI(t, "EXISTS", "extauth:tx:past"); got != "0" {
		t.Errorf("a key with a past expiry is still there: EXISTS = %s", got)
	}
}

// Fifty goroutines on one Store, and fifty more on another Store (another
// instance), race for the same keys: exactly one wins each.
func TestRedisConcurrentConsume(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{Password: redisPassword})
	o := redisstore.Options{Password: extauth.NewSecret(redisPassword), PoolSize: 4}
	stores := []*redisstore.Store{open(t, srv.Addr, o), open(t, srv.Addr, o)}
	until := time.Now().Add(time.Minute)
	for round := range 10 {
		key := fmt.Sprint("race:", round)
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := range 100 {
			s := stores[i%2]
			wg.Go(func() {
				ok, err := s.Consume(context.Background(), key, until)
				if err != nil {
					t.Error(err)
				}
				if ok {
					wins.Add(1)
				}
			})
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("round %d: %d goroutines consumed the same key", round, wins.Load())
		}
	}
	clients := srv.CLI(t, "CLIENT", "LIST")
	if n := strings.Count(clients, "cmd=set"); n > 8 {
		t.Errorf("%d connections from two stores with PoolSize 4:\n%s", n, clients)
	}
}

func TestRedisAuth(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{Password: redisPassword})
	until := time.Now().Add(time.Minute)
	t.Run("right password", func(t *testing.T) {
		s := open(t, srv.Addr, redisstore.Options{Password: extauth.NewSecret(redisPassword)})
		if !mustConsume(t, s, "auth:ok", until) {
			t.Fatal("refused")
		}
	})
	t.Run("no password", func(t *testing.T) {
		s := open(t, srv.Addr, redisstore.Options{})
		_, err := s.Consume(context.Background(), "auth:none", until)
		if err == nil || !strings.Contains(err.Error(), "NOAUTH") {
			t.Fatalf("error %v, want NOAUTH", err)
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		wrong := redisPassword + "-not"
		s := open(t, srv.Addr, redisstore.Options{Password: extauth.NewSecret(wrong)})
		_, err := s.Consume(context.Background(), "auth:wrong", until)
		if err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
			t.Fatalf("error %v, want WRONGPASS", err)
		}
		if strings.Contains(err.Error(), wrong) || strings.Contains(err.Error(), redisPassword) {
			t.Fatalf("error %q shows a password", err)
		}
	})
	if got := srv.CLI(t, "EXISTS", "extauth:auth:none", "extauth:auth:wrong"); got != "0" {
		t.Errorf("unauthenticated stores wrote keys: EXISTS = %s", got)
	}
}

// The ACL that docs/redis.md recommends: a user that may only SET and PING
// under its prefix.
func TestRedisACLUser(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{
		Password: redisPassword,
		Lines:    []string{"user extauth on >app-secret-81c4 ~extauth:* resetchannels -@all +set +ping"},
	})
	until := time.Now().Add(time.Minute)
	s := open(t, srv.Addr, redisstore.Options{Username: "extauth", Password: extauth.NewSecret("app-secret-81c4")})
	if err := s.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !mustConsume(t, s, "acl", until) || mustConsume(t, s, "acl", until) {
		t.Fatal("single use broken under the ACL user")
	}
	other := open(t, srv.Addr, redisstore.Options{Username: "extauth", Password: extauth.NewSecret("app-secret-81c4"), Prefix: "other:"})
	if _, err := other.Consume(context.Background(), "acl", until); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("a key outside the ACL's pattern: %v, want NOPERM", err)
	}
	// SELECT is not granted: a DB other than 0 needs +select.
	db1 := open(t, srv.Addr, redisstore.Options{Username: "extauth", Password: extauth.NewSecret("app-secret-81c4"), DB: 1})
	if err := db1.Ping(context.Background()); err == nil || !strings.Contains(err.Error(), "SELECT") {
		t.Fatalf("SELECT without +select: %v", err)
	}
}

func TestRedisDatabasesAndPrefixes(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	until := time.Now().Add(time.Minute)
	db0 := open(t, srv.Addr, redisstore.Options{})
	db5 := open(t, srv.Addr, redisstore.Options{DB: 5})
	app2 := open(t, srv.Addr, redisstore.Options{Prefix: "app2:"})
	for _, s := range []*redisstore.Store{db0, db5, app2} {
		if !mustConsume(t, s, "k", until) {
			t.Fatalf("%v: refused a key only another database or prefix holds", s)
		}
	}
	if got := srv.CLI(t, "-n", "5", "EXISTS", "extauth:k"); got != "1" {
		t.Errorf("DB 5: EXISTS extauth:k = %s", got)
	}
	if got := srv.CLI(t, "EXISTS", "extauth:k", "app2:k"); got != "2" {
		t.Errorf("DB 0: EXISTS = %s", got)
	}
}

// Redis drops the pooled connections (a restart, a failover, CLIENT KILL):
// the next command reconnects on its own.
func TestRedisKilledConnections(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{Password: redisPassword})
	s := open(t, srv.Addr, redisstore.Options{Password: extauth.NewSecret(redisPassword)})
	until := time.Now().Add(time.Minute)
	mustConsume(t, s, "before", until)
	if got := srv.CLI(t, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"); got != "1" {
		t.Fatalf("CLIENT KILL killed %s connections, want the pooled one", got)
	}
	if !mustConsume(t, s, "after", until) {
		t.Fatal("refused after the connection was killed")
	}
	if mustConsume(t, s, "before", until) {
		t.Fatal("the key set before the kill was accepted again")
	}
}

// A context deadline bounds a command even while Redis is blocked.
func TestRedisBusyServer(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	s := open(t, srv.Addr, redisstore.Options{})
	if err := s.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	// CLIENT PAUSE holds every write command for a second.
	srv.CLI(t, "CLIENT", "PAUSE", "1000", "WRITE")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.Consume(ctx, "paused", time.Now().Add(time.Minute))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want context.DeadlineExceeded", err)
	}
	if el := time.Since(start); el > 800*time.Millisecond {
		t.Errorf("returned after %v", el)
	}
}
