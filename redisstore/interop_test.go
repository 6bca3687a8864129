//go:build interop

package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/extauth/extauth/internal/redistest"
	"github.com/extauth/extauth/redisstore"
)

const redisPassword = "interop-5d0c2f8e71"

// client is what a host builds: a go-redis client with the context
// honoured, closed when the test ends.
func client(t *testing.T, o *redis.Options) *redis.Client {
	t.Helper()
	o.ContextTimeoutEnabled = true
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	return c
}

func open(t *testing.T, c redis.UniversalClient, o redisstore.Options) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(c, o)
	if err != nil {
		t.Fatal(err)
	}
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

// refused asserts that Consume fails with an error holding want, and
// accepts nothing.
func refused(t *testing.T, s *redisstore.Store, ctx context.Context, key, want string) error {
	t.Helper()
	ok, err := s.Consume(ctx, key, time.Now().Add(time.Minute))
	if ok || err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Consume = %v, %v; want a refusal with %q", ok, err, want)
	}
	return err
}

func TestRedisConsume(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{Password: redisPassword})
	s := open(t, client(t, &redis.Options{Addr: srv.Addr, Password: redisPassword}), redisstore.Options{})
	if err := s.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A minute: no loaded machine takes that long between two commands,
	// so the key is live throughout.
	until := time.Now().Add(time.Minute)
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
	if err != nil || pttl <= 0 || pttl > 60000 {
		t.Errorf("PTTL = %d (%v), want within (0, 60000] ms", pttl, err)
	}
	// Its time-to-live over, Redis forgets it, and so does the store.
	srv.CLI(t, "PEXPIRE", "extauth:tx:a", "1")
	redistest.WaitFor(t, 30*time.Second, "extauth:tx:a to expire", func() bool { return srv.CLI(t, "EXISTS", "extauth:tx:a") == "0" })
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

// The URL form, with a database and a prefix.
func TestRedisFromURL(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{Password: redisPassword})
	s, err := redisstore.NewFromURL("redis://:"+redisPassword+"@"+srv.Addr+"/2?max_retries=1", redisstore.Options{Prefix: "app2:"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !mustConsume(t, s, "k", time.Now().Add(time.Minute)) || mustConsume(t, s, "k", time.Now().Add(time.Minute)) {
		t.Fatal("not single use")
	}
	if got := srv.CLI(t, "-n", "2", "EXISTS", "app2:k"); got != "1" {
		t.Errorf("DB 2: EXISTS app2:k = %s", got)
	}
}

// Fifty goroutines on one Store, and fifty more on another Store with its
// own client (another instance), race for the same keys: exactly one wins
// each, over no more connections than the two pools hold.
func TestRedisConcurrentConsume(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{Password: redisPassword})
	stores := []*redisstore.Store{
		open(t, client(t, &redis.Options{Addr: srv.Addr, Password: redisPassword, PoolSize: 4}), redisstore.Options{}),
		open(t, client(t, &redis.Options{Addr: srv.Addr, Password: redisPassword, PoolSize: 4}), redisstore.Options{}),
	}
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
	if n := strings.Count(clients, "cmd=set"); n > 8 || n < 2 {
		t.Errorf("%d connections from two clients with PoolSize 4:\n%s", n, clients)
	}
}

func TestRedisAuth(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{Password: redisPassword})
	ctx := context.Background()
	t.Run("right password", func(t *testing.T) {
		s := open(t, client(t, &redis.Options{Addr: srv.Addr, Password: redisPassword}), redisstore.Options{})
		if !mustConsume(t, s, "auth:ok", time.Now().Add(time.Minute)) {
			t.Fatal("refused")
		}
	})
	t.Run("no password", func(t *testing.T) {
		s := open(t, client(t, &redis.Options{Addr: srv.Addr}), redisstore.Options{})
		refused(t, s, ctx, "auth:none", "NOAUTH")
	})
	t.Run("wrong password", func(t *testing.T) {
		wrong := redisPassword + "-not"
		s := open(t, client(t, &redis.Options{Addr: srv.Addr, Password: wrong}), redisstore.Options{})
		err := refused(t, s, ctx, "auth:wrong", "WRONGPASS")
		if strings.Contains(err.Error(), wrong) || strings.Contains(err.Error(), redisPassword) {
			t.Fatalf("error %q shows a password", err)
		}
		u, err := redisstore.NewFromURL("redis://:"+wrong+"@"+srv.Addr, redisstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer u.Close()
		if err := u.Ping(ctx); err == nil || strings.Contains(err.Error(), wrong) || strings.Contains(fmt.Sprintf("%+v %#v", u, u), wrong) {
			t.Fatalf("Ping = %v; %+v", err, u)
		}
	})
	if got := srv.CLI(t, "EXISTS", "extauth:auth:none", "extauth:auth:wrong"); got != "0" {
		t.Errorf("unauthenticated stores wrote keys: EXISTS = %s", got)
	}
}

// The ACL that docs/several-instances.md recommends: a user that may only
// SET and PING under its prefix. go-redis's HELLO and CLIENT SETINFO are
// refused by it, and go-redis falls back to AUTH, as the test shows.
func TestRedisACLUser(t *testing.T) {
	const aclPassword = "app-secret-81c4"
	srv := redistest.Start(t, redistest.Config{
		Password: redisPassword,
		Lines:    []string{"user extauth on >" + aclPassword + " ~extauth:* resetchannels -@all +set +ping"},
	})
	until := time.Now().Add(time.Minute)
	s := open(t, client(t, &redis.Options{Addr: srv.Addr, Username: "extauth", Password: aclPassword}), redisstore.Options{})
	if err := s.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !mustConsume(t, s, "acl", until) || mustConsume(t, s, "acl", until) {
		t.Fatal("single use broken under the ACL user")
	}
	other := open(t, client(t, &redis.Options{Addr: srv.Addr, Username: "extauth", Password: aclPassword}), redisstore.Options{Prefix: "other:"})
	refused(t, other, context.Background(), "acl", "NOPERM")
	// SELECT is not granted: a DB other than 0 needs +select.
	db1 := open(t, client(t, &redis.Options{Addr: srv.Addr, Username: "extauth", Password: aclPassword, DB: 1, MaxRetries: -1}), redisstore.Options{})
	refused(t, db1, context.Background(), "acl", "NOPERM")
}

func TestRedisDatabasesAndPrefixes(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	until := time.Now().Add(time.Minute)
	db0 := open(t, client(t, &redis.Options{Addr: srv.Addr}), redisstore.Options{})
	db5 := open(t, client(t, &redis.Options{Addr: srv.Addr, DB: 5}), redisstore.Options{})
	app2 := open(t, client(t, &redis.Options{Addr: srv.Addr}), redisstore.Options{Prefix: "app2:"})
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

// Redis down: every use is refused, promptly, until it is back.
func TestRedisDown(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{Password: redisPassword})
	// A dial time-out of a minute: a refusal well before it is one that
	// did not wait for Redis.
	s := open(t, client(t, &redis.Options{Addr: srv.Addr, Password: redisPassword, MaxRetries: 1, DialTimeout: time.Minute}), redisstore.Options{})
	mustConsume(t, s, "before", time.Now().Add(time.Minute))
	srv.Stop()
	start := time.Now()
	refused(t, s, context.Background(), "while-down", "connection refused")
	if el := time.Since(start); el > 30*time.Second {
		t.Errorf("refused after %v", el)
	}
	srv.Restart()
	if !mustConsume(t, s, "after", time.Now().Add(time.Minute)) {
		t.Fatal("refused after Redis came back")
	}
}

// Redis holds every write (CLIENT PAUSE): the sign-in's deadline ends the
// wait when the client honours contexts, the client's ReadTimeout when it
// does not; both refuse.
//
// The pause lasts two minutes and the client that honours contexts has a
// ReadTimeout of one: each refusal must come well before what it would
// wait for if the deadline or the ReadTimeout under test were ignored,
// bounds no loaded machine reaches.
func TestRedisTimeout(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	withCtx := open(t, client(t, &redis.Options{Addr: srv.Addr, MaxRetries: -1, ReadTimeout: time.Minute}), redisstore.Options{})
	noCtx := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: 200 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { noCtx.Close() })
	readTimeout := open(t, noCtx, redisstore.Options{})
	for _, s := range []*redisstore.Store{withCtx, readTimeout} {
		if err := s.Ping(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	srv.CLI(t, "CLIENT", "PAUSE", "120000", "WRITE")
	t.Cleanup(func() { srv.CLI(t, "CLIENT", "UNPAUSE") })

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := refused(t, withCtx, ctx, "paused", "deadline exceeded")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v, want context.DeadlineExceeded", err)
	}
	if el := time.Since(start); el > 30*time.Second {
		t.Errorf("context deadline: returned after %v", el)
	}

	start = time.Now()
	refused(t, readTimeout, context.Background(), "paused2", "i/o timeout")
	if el := time.Since(start); el < 200*time.Millisecond || el > 30*time.Second {
		t.Errorf("ReadTimeout: returned after %v", el)
	}
}

// A replica answers READONLY; a full Redis with noeviction answers OOM.
func TestRedisReadOnlyAndOOM(t *testing.T) {
	primary := redistest.Start(t, redistest.Config{Password: redisPassword})
	replica := redistest.Start(t, redistest.Config{Password: redisPassword, ReplicaOf: primary})
	s := open(t, client(t, &redis.Options{Addr: replica.Addr, Password: redisPassword, MaxRetries: -1}), redisstore.Options{})
	refused(t, s, context.Background(), "ro", "READONLY")

	p := open(t, client(t, &redis.Options{Addr: primary.Addr, Password: redisPassword, MaxRetries: -1}), redisstore.Options{})
	primary.CLI(t, "CONFIG", "SET", "maxmemory-policy", "noeviction")
	primary.CLI(t, "CONFIG", "SET", "maxmemory", "1")
	refused(t, p, context.Background(), "oom", "OOM")
	primary.CLI(t, "CONFIG", "SET", "maxmemory", "0")
	if !mustConsume(t, p, "oom", time.Now().Add(time.Minute)) {
		t.Fatal("the key refused under OOM was recorded")
	}
}

// Redis drops the pooled connections (a restart, a failover, CLIENT KILL):
// the next command reconnects on its own.
func TestRedisKilledConnections(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{Password: redisPassword})
	s := open(t, client(t, &redis.Options{Addr: srv.Addr, Password: redisPassword, PoolSize: 1}), redisstore.Options{})
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

// The connection drops after Redis ran the SET and before its reply
// arrived. go-redis sends it again on a new connection, where Redis finds
// the key: the use is refused, never accepted twice.
func TestRedisReplyLost(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	px := newDropProxy(t, srv.Addr)
	s := open(t, client(t, &redis.Options{Addr: px.addr(), PoolSize: 1}), redisstore.Options{})
	if err := s.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	px.dropNextReply.Store(true)
	ok, err := s.Consume(context.Background(), "lost", time.Now().Add(time.Minute))
	if ok {
		t.Fatal("accepted although the first attempt had set the key")
	}
	if err != nil {
		t.Logf("refused with %v", err)
	}
	if got := srv.CLI(t, "EXISTS", "extauth:lost"); got != "1" {
		t.Fatalf("the lost SET did not run: EXISTS = %s", got)
	}
	if n := px.conns.Load(); n < 2 {
		t.Errorf("%d connections: the command was not sent again", n)
	}
	if mustConsume(t, s, "lost", time.Now().Add(time.Minute)) {
		t.Fatal("accepted afterwards")
	}
}

// dropProxy forwards TCP to Redis; armed, it closes the connection instead
// of passing on the next reply.
type dropProxy struct {
	ln            net.Listener
	target        string
	dropNextReply atomic.Bool
	conns         atomic.Int32
}

func newDropProxy(t *testing.T, target string) *dropProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.conns.Add(1)
			go p.serve(c)
		}
	}()
	return p
}

func (p *dropProxy) addr() string { return p.ln.Addr().String() }

func (p *dropProxy) serve(c net.Conn) {
	defer c.Close()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer up.Close()
	go io.Copy(up, c)
	buf := make([]byte, 64<<10)
	for {
		n, err := up.Read(buf)
		if n > 0 {
			if p.dropNextReply.CompareAndSwap(true, false) {
				return
			}
			if _, err := c.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// WaitReplicas: accepted once the replica has the key; refused when no
// replica acknowledges it in time, and the key then stays used.
func TestRedisWaitReplicas(t *testing.T) {
	const aclPassword = "wait-acl-0c9e2b"
	primary := redistest.Start(t, redistest.Config{Password: redisPassword, Lines: []string{
		// docs/several-instances.md's ACL with what WaitReplicas needs.
		"user extauth on >" + aclPassword + " ~extauth:* resetchannels -@all +set +ping +wait",
	}})
	replica := redistest.Start(t, redistest.Config{Password: redisPassword, ReplicaOf: primary})
	primary.WaitOnline(t, 1)
	// WAIT returns as soon as the replica acknowledges: a long WaitTimeout
	// costs nothing while it is healthy, and a loaded machine's replica
	// may take longer than a short one to acknowledge.
	const wait, read = 30 * time.Second, time.Minute
	s := open(t, client(t, &redis.Options{Addr: primary.Addr, Password: redisPassword, ReadTimeout: read}), redisstore.Options{WaitReplicas: 1, WaitTimeout: wait})
	until := time.Now().Add(time.Minute)
	if !mustConsume(t, s, "w", until) || mustConsume(t, s, "w", until) {
		t.Fatal("not single use with WaitReplicas")
	}
	if got := replica.CLI(t, "EXISTS", "extauth:w"); got != "1" {
		t.Errorf("accepted before the replica had the key: EXISTS = %s", got)
	}
	acl := open(t, client(t, &redis.Options{Addr: primary.Addr, Username: "extauth", Password: aclPassword, ReadTimeout: read}), redisstore.Options{WaitReplicas: 1, WaitTimeout: wait})
	if !mustConsume(t, acl, "acl", until) || mustConsume(t, acl, "acl", until) {
		t.Fatal("not single use under the ACL user")
	}

	// Without a replica the wait ends at WaitTimeout: not before, and not
	// at the client's read time-out, a minute, which a WAIT that ignored
	// WaitTimeout would reach.
	lone := redistest.Start(t, redistest.Config{})
	l := open(t, client(t, &redis.Options{Addr: lone.Addr, ReadTimeout: read}), redisstore.Options{WaitReplicas: 1, WaitTimeout: 100 * time.Millisecond})
	start := time.Now()
	refused(t, l, context.Background(), "w", "0 of 1 replicas acknowledged the key within 100ms")
	if el := time.Since(start); el < 100*time.Millisecond || el > read/2 {
		t.Errorf("refused after %v", el)
	}
	if mustConsume(t, l, "w", until) {
		t.Fatal("a key refused for want of replicas was accepted later")
	}
}

// Redis Cluster of three primaries: keys spread over every primary,
// stores of four instances (one as the restricted ACL user) race for each, exactly one wins, and no
// multi-key command ran: each node's command statistics list SET and
// connection and cluster-topology commands only (a multi-key command
// across slots would also fail with CROSSSLOT).
func TestRedisCluster(t *testing.T) {
	const aclPassword = "cluster-acl-55d1e0"
	cl := redistest.StartCluster(t, 3, redistest.Config{Password: redisPassword, Lines: []string{
		// docs/several-instances.md's ACL, plus what a cluster client reads.
		"user extauth on >" + aclPassword + " ~extauth:* resetchannels -@all +set +ping +cluster|slots",
	}})
	var stores []*redisstore.Store
	for i := range 3 {
		o := &redis.ClusterOptions{Addrs: []string{cl.Nodes[i].Addr}, Password: redisPassword, ContextTimeoutEnabled: true}
		if i == 2 {
			o.Username, o.Password = "extauth", aclPassword
		}
		c := redis.NewClusterClient(o)
		t.Cleanup(func() { c.Close() })
		stores = append(stores, open(t, c, redisstore.Options{}))
	}
	url := "redis+cluster://:" + redisPassword + "@" + cl.Nodes[0].Addr + "?addr=" + cl.Nodes[1].Addr
	fromURL, err := redisstore.NewFromURL(url, redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fromURL.Close()
	stores = append(stores, fromURL)

	until := time.Now().Add(time.Minute)
	const keys = 300
	var wins [keys]atomic.Int32
	var wg sync.WaitGroup
	for i := range keys {
		for j, s := range stores {
			wg.Go(func() {
				ok, err := s.Consume(context.Background(), fmt.Sprintf("tx:%d", i), until)
				if err != nil {
					t.Errorf("store %d key %d: %v", j, i, err)
				}
				if ok {
					wins[i].Add(1)
				}
			})
		}
	}
	wg.Wait()
	for i := range wins {
		if n := wins[i].Load(); n != 1 {
			t.Errorf("key %d accepted %d times", i, n)
		}
	}
	total := 0
	for _, node := range cl.Nodes {
		n, err := strconv.Atoi(node.CLI(t, "DBSIZE"))
		if err != nil || n < keys/10 {
			t.Errorf("%s holds %d keys (%v): not spread", node.Addr, n, err)
		}
		total += n
		for _, line := range strings.Split(node.CLI(t, "INFO", "commandstats"), "\n") {
			name, _, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "cmdstat_"), ":")
			if !ok {
				continue
			}
			switch {
			case name == "set", name == "ping", name == "hello", name == "auth", name == "info",
				name == "dbsize", strings.HasPrefix(name, "cluster|"), strings.HasPrefix(name, "client|"),
				strings.HasPrefix(name, "command"), name == "readonly":
			default:
				t.Errorf("%s ran %s", node.Addr, strings.TrimSpace(line))
			}
		}
	}
	if total != keys {
		t.Errorf("%d keys in the cluster, want %d", total, keys)
	}

	// WaitReplicas on a cluster without replicas: the WAIT follows the SET
	// to its primary, answers 0 and refuses.
	w := open(t, redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), Password: redisPassword, ContextTimeoutEnabled: true}),
		redisstore.Options{WaitReplicas: 1, WaitTimeout: 50 * time.Millisecond})
	refused(t, w, context.Background(), "tx:wait", "0 of 1 replicas")
}
