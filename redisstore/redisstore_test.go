package redisstore

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/extauth/extauth"
)

const testPassword = "pw-7c1e0b9d3a"

// fakeClock is shared by a store and the fake server in the expiry tests.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newStore(t testing.TB, addr string, o Options) *Store {
	t.Helper()
	s, err := New(addr, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func consume(t testing.TB, s *Store, key string, until time.Time) bool {
	t.Helper()
	ok, err := s.Consume(context.Background(), key, until)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestConsume(t *testing.T) {
	f := newTCPFake(t)
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	f.setClock(clock.Now)
	s := newStore(t, f.addr(), Options{Now: clock.Now})
	until := clock.Now().Add(90 * time.Second)
	if !consume(t, s, "tx:abc", until) {
		t.Fatal("first use refused")
	}
	if consume(t, s, "tx:abc", until) {
		t.Fatal("second use accepted")
	}
	if !consume(t, s, "tx:other", until) {
		t.Fatal("another key refused")
	}
	clock.Add(89*time.Second + 999*time.Millisecond)
	if consume(t, s, "tx:abc", until) {
		t.Fatal("accepted again a millisecond before its expiry")
	}
	clock.Add(time.Millisecond)
	if !consume(t, s, "tx:abc", clock.Now().Add(time.Minute)) {
		t.Fatal("still refused after its expiry")
	}
	want := []string{
		"1: SET extauth:tx:abc 1 NX PX 90000",
		"1: SET extauth:tx:abc 1 NX PX 90000",
		"1: SET extauth:tx:other 1 NX PX 90000",
		"1: SET extauth:tx:abc 1 NX PX 1",
		"1: SET extauth:tx:abc 1 NX PX 60000",
	}
	if got := f.commands(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("commands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if accepted, _, _ := f.counts(); accepted != 1 {
		t.Errorf("%d connections for sequential commands, want 1 reused", accepted)
	}
}

// The time-to-live covers until: rounded up, never zero or negative.
func TestConsumeTTL(t *testing.T) {
	f := newTCPFake(t)
	now := time.Unix(1_700_000_000, 0)
	s := newStore(t, f.addr(), Options{Now: func() time.Time { return now }, Prefix: "app1/"})
	for i, c := range []struct {
		until time.Time
		px    string
	}{
		{now.Add(1500 * time.Microsecond), "2"},
		{now.Add(time.Nanosecond), "1"},
		{now, "1"},
		{now.Add(-time.Hour), "1"},
		{time.Time{}, "1"},
		{now.Add(10 * time.Minute), "600000"},
		{now.Add(1<<63 - 1), "9223372036855"},
	} {
		consume(t, s, fmt.Sprint("k", i), c.until)
		cmds := f.commands()
		if want := fmt.Sprintf("1: SET app1/k%d 1 NX PX %s", i, c.px); cmds[len(cmds)-1] != want {
			t.Errorf("until now%+v: %q, want %q", c.until.Sub(now), cmds[len(cmds)-1], want)
		}
	}
}

// reply answers every SET with raw bytes.
func answerSET(raw string) func(c *fakeConn, cmd []string) bool {
	return func(c *fakeConn, cmd []string) bool {
		if cmd[0] != "SET" {
			return false
		}
		c.write(raw)
		return true
	}
}

func TestConsumeReplies(t *testing.T) {
	for _, c := range []struct {
		name, raw string
		want      bool
		err       string // a part of the error; "" for none
		protocol  bool   // the error is a protocol error
		keepsConn bool   // the connection survives
	}{
		{name: "OK", raw: "+OK\r\n", want: true, keepsConn: true},
		{name: "nil", raw: "$-1\r\n", want: false, keepsConn: true},
		{name: "error reply", raw: "-READONLY You can't write against a read only replica.\r\n", err: "redis: READONLY", keepsConn: true},
		{name: "OOM", raw: "-OOM command not allowed when used memory > 'maxmemory'.\r\n", err: "redis: OOM", keepsConn: true},
		{name: "other status", raw: "+QUEUED\r\n", err: `unexpected status "QUEUED"`, protocol: true, keepsConn: true},
		{name: "integer", raw: ":1\r\n", err: "unexpected integer 1", protocol: true, keepsConn: true},
		{name: "bulk", raw: "$2\r\nOK\r\n", err: "unexpected bulk string of 2 bytes", protocol: true, keepsConn: true},
		{name: "array", raw: "*1\r\n+OK\r\n", err: "unexpected array", protocol: true},
		{name: "RESP3 null", raw: "_\r\n", err: "unknown reply type", protocol: true},
		{name: "no CR", raw: "+OK\n", err: "not terminated by CRLF", protocol: true},
		{name: "bare LF", raw: "\n", err: "not terminated by CRLF", protocol: true},
		{name: "empty line", raw: "\r\n", err: "empty reply line", protocol: true},
		{name: "text", raw: "HTTP/1.1 400 Bad Request\r\n", err: "unknown reply type", protocol: true},
		{name: "line too long", raw: "+" + strings.Repeat("a", maxLine) + "\r\n", err: "longer than", protocol: true},
		{name: "bulk too long", raw: "$99999999\r\n", err: "exceeds", protocol: true},
		{name: "negative bulk", raw: "$-2\r\n", err: "bulk length -2", protocol: true},
		{name: "bad number", raw: "$1x\r\n", err: "bad number", protocol: true},
		{name: "huge number", raw: ":99999999999999999999\r\n", err: "bad number", protocol: true},
		{name: "bulk unterminated", raw: "$2\r\nOKxx", err: "not terminated", protocol: true},
		{name: "two replies", raw: "+OK\r\n+OK\r\n", err: "data after the reply", protocol: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newTCPFake(t)
			f.setBehave(answerSET(c.raw))
			s := newStore(t, f.addr(), Options{})
			got, err := s.Consume(context.Background(), "k", time.Now().Add(time.Minute))
			switch {
			case c.err == "" && err != nil:
				t.Fatalf("error %v", err)
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Fatalf("error %v, want one with %q", err, c.err)
			case got != c.want:
				t.Fatalf("Consume = %v, want %v", got, c.want)
			}
			if c.protocol != errors.Is(err, errProtocol) {
				t.Errorf("errors.Is(%v, errProtocol) = %v", err, !c.protocol)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "redisstore: SET: ") {
				t.Errorf("error %q is not wrapped", err)
			}
			// The next command works, on the same connection only if it
			// is still in step.
			f.setBehave(nil)
			if !consume(t, s, "k2", time.Now().Add(time.Minute)) {
				t.Fatal("next command refused")
			}
			wantConns := 2
			if c.keepsConn {
				wantConns = 1
			}
			if accepted, _, _ := f.counts(); accepted != wantConns {
				t.Errorf("%d connections, want %d", accepted, wantConns)
			}
		})
	}
}

// A server that never answers: the context's deadline, the read time-out
// and a plain cancellation each end the wait, and the connection is closed.
func TestServerHangs(t *testing.T) {
	hang := func(c *fakeConn, cmd []string) bool {
		if cmd[0] != "SET" {
			return false
		}
		c.hang()
		return true
	}
	until := time.Now().Add(time.Minute)
	t.Run("context deadline", func(t *testing.T) {
		f := newTCPFake(t)
		f.setBehave(hang)
		s := newStore(t, f.addr(), Options{})
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := s.Consume(ctx, "k", until)
		if el := time.Since(start); el < 100*time.Millisecond || el > 2*time.Second {
			t.Errorf("returned after %v", el)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("error %v, want context.DeadlineExceeded", err)
		}
		f.waitOpen(t, 0)
	})
	t.Run("read time-out", func(t *testing.T) {
		f := newTCPFake(t)
		f.setBehave(hang)
		s := newStore(t, f.addr(), Options{ReadTimeout: 100 * time.Millisecond})
		// On a pooled connection, which a failure could otherwise retry.
		if err := s.Ping(context.Background()); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err := s.Consume(context.Background(), "k", until)
		if el := time.Since(start); el < 100*time.Millisecond || el > 2*time.Second {
			t.Errorf("returned after %v", el)
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("error %v, want an I/O time-out", err)
		}
		if accepted, _, _ := f.counts(); accepted != 1 {
			t.Errorf("%d connections: a time-out must not be retried", accepted)
		}
		f.waitOpen(t, 0)
	})
	t.Run("cancelled", func(t *testing.T) {
		f := newTCPFake(t)
		f.setBehave(hang)
		s := newStore(t, f.addr(), Options{})
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		start := time.Now()
		_, err := s.Consume(ctx, "k", until)
		if el := time.Since(start); el > 2*time.Second {
			t.Errorf("returned after %v", el)
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v, want context.Canceled", err)
		}
		f.waitOpen(t, 0)
	})
	t.Run("during AUTH", func(t *testing.T) {
		f := newTCPFake(t)
		f.setAuth("", testPassword)
		f.setBehave(func(c *fakeConn, cmd []string) bool {
			if cmd[0] == "AUTH" {
				c.hang()
				return true
			}
			return false
		})
		s := newStore(t, f.addr(), Options{Password: extauth.NewSecret(testPassword), DialTimeout: 100 * time.Millisecond})
		start := time.Now()
		_, err := s.Consume(context.Background(), "k", until)
		if el := time.Since(start); el > 2*time.Second {
			t.Errorf("returned after %v", el)
		}
		if err == nil || !strings.Contains(err.Error(), "AUTH") {
			t.Fatalf("error %v, want an AUTH time-out", err)
		}
		f.waitOpen(t, 0)
	})
}

// A connection that drops in the middle of a reply is an error, closed,
// and not retried: it was new, so the server did not drop it for idling.
func TestDroppedMidReply(t *testing.T) {
	f := newTCPFake(t)
	f.setBehave(func(c *fakeConn, cmd []string) bool {
		if cmd[0] != "SET" {
			return false
		}
		c.answer(cmd)
		c.write("+O")
		c.nc.Close()
		return true
	})
	s := newStore(t, f.addr(), Options{})
	_, err := s.Consume(context.Background(), "k", time.Now().Add(time.Minute))
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("error %v, want io.ErrUnexpectedEOF", err)
	}
	if accepted, _, _ := f.counts(); accepted != 1 {
		t.Errorf("%d connections, want 1", accepted)
	}
	f.setBehave(nil)
	if consume(t, s, "k", time.Now().Add(time.Minute)) {
		t.Error("the key set before the drop was accepted again")
	}
}

// A pooled connection the server closed while idle: the command is sent
// again on a new connection. If the server had run it before dropping, the
// second answer is nil: a retry can refuse a use, never grant one twice.
func TestStaleConnectionRetriedOnce(t *testing.T) {
	until := time.Now().Add(time.Minute)
	t.Run("closed while idle", func(t *testing.T) {
		f := newTCPFake(t)
		s := newStore(t, f.addr(), Options{})
		consume(t, s, "a", until)
		f.mu.Lock()
		for c := range f.open {
			c.nc.Close()
		}
		f.mu.Unlock()
		f.waitOpen(t, 0)
		if !consume(t, s, "b", until) {
			t.Fatal("refused after the retry")
		}
		if accepted, _, _ := f.counts(); accepted != 2 {
			t.Errorf("%d connections, want 2", accepted)
		}
	})
	t.Run("ran, then dropped", func(t *testing.T) {
		f := newTCPFake(t)
		s := newStore(t, f.addr(), Options{Now: func() time.Time { return until.Add(-time.Minute) }})
		consume(t, s, "a", until)
		f.setBehave(func(c *fakeConn, cmd []string) bool {
			if c.n != 1 {
				return false
			}
			c.answer(cmd)
			c.nc.Close()
			return true
		})
		if consume(t, s, "b", until) {
			t.Fatal("accepted a key the lost first attempt had set")
		}
		want := "1: SET extauth:a 1 NX PX 60000|1: SET extauth:b 1 NX PX 60000|2: SET extauth:b 1 NX PX 60000"
		if got := strings.Join(f.commands(), "|"); got != want {
			t.Errorf("commands %q, want %q", got, want)
		}
	})
	t.Run("new connection fails too", func(t *testing.T) {
		f := newTCPFake(t)
		s := newStore(t, f.addr(), Options{})
		consume(t, s, "a", until)
		f.setBehave(func(c *fakeConn, cmd []string) bool {
			c.nc.Close()
			return true
		})
		_, err := s.Consume(context.Background(), "b", until)
		if err == nil {
			t.Fatal("no error")
		}
		if accepted, _, _ := f.counts(); accepted != 2 {
			t.Errorf("%d connections, want 2: one retry only", accepted)
		}
	})
}

func TestIdleTimeout(t *testing.T) {
	f := newTCPFake(t)
	s := newStore(t, f.addr(), Options{IdleTimeout: 20 * time.Millisecond})
	consume(t, s, "a", time.Now().Add(time.Minute))
	time.Sleep(40 * time.Millisecond)
	consume(t, s, "b", time.Now().Add(time.Minute))
	if accepted, _, _ := f.counts(); accepted != 2 {
		t.Errorf("%d connections, want a new one after the idle time-out", accepted)
	}
	f.waitOpen(t, 1)
}

func TestAuthAndSelect(t *testing.T) {
	until := time.Now().Add(time.Minute)
	t.Run("password and DB", func(t *testing.T) {
		f := newTCPFake(t)
		f.setAuth("", testPassword)
		s := newStore(t, f.addr(), Options{Password: extauth.NewSecret(testPassword), DB: 3,
			Now: func() time.Time { return until.Add(-time.Minute) }})
		if err := s.Ping(context.Background()); err != nil {
			t.Fatal(err)
		}
		consume(t, s, "k", until)
		want := "1: AUTH " + testPassword + "|1: SELECT 3|1: PING|1: SET extauth:k 1 NX PX 60000"
		if got := strings.Join(f.commands(), "|"); got != want {
			t.Errorf("commands %q, want %q", got, want)
		}
		// Databases are separate key spaces.
		other := newStore(t, f.addr(), Options{Password: extauth.NewSecret(testPassword), DB: 4})
		if !consume(t, other, "k", until) {
			t.Error("DB 4 saw DB 3's key")
		}
	})
	t.Run("ACL user", func(t *testing.T) {
		f := newTCPFake(t)
		f.setAuth("extauth", testPassword)
		s := newStore(t, f.addr(), Options{Username: "extauth", Password: extauth.NewSecret(testPassword)})
		if !consume(t, s, "k", until) {
			t.Fatal("refused")
		}
		if got := f.commands()[0]; got != "1: AUTH extauth "+testPassword {
			t.Errorf("first command %q", got)
		}
	})
	t.Run("no password", func(t *testing.T) {
		f := newTCPFake(t)
		f.setAuth("", testPassword)
		s := newStore(t, f.addr(), Options{})
		_, err := s.Consume(context.Background(), "k", until)
		if err == nil || !strings.Contains(err.Error(), "NOAUTH") {
			t.Fatalf("error %v, want NOAUTH", err)
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		f := newTCPFake(t)
		f.setAuth("", "another")
		s := newStore(t, f.addr(), Options{Password: extauth.NewSecret(testPassword)})
		err := s.Ping(context.Background())
		if err == nil || !strings.Contains(err.Error(), "AUTH: redis: WRONGPASS") {
			t.Fatalf("error %v, want WRONGPASS", err)
		}
		if strings.Contains(err.Error(), testPassword) {
			t.Fatalf("error %q shows the password", err)
		}
		f.waitOpen(t, 0)
	})
	t.Run("server echoes the password", func(t *testing.T) {
		f := newTCPFake(t)
		f.setBehave(func(c *fakeConn, cmd []string) bool {
			c.write("-ERR bad password " + cmd[1] + " for you\r\n")
			return true
		})
		s := newStore(t, f.addr(), Options{Password: extauth.NewSecret(testPassword)})
		_, err := s.Consume(context.Background(), "k", until)
		if err == nil || strings.Contains(err.Error(), testPassword) || !strings.Contains(err.Error(), "bad password [REDACTED] for you") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("bad DB", func(t *testing.T) {
		f := newTCPFake(t)
		s := newStore(t, f.addr(), Options{DB: 99})
		err := s.Ping(context.Background())
		if err == nil || !strings.Contains(err.Error(), "SELECT: redis: ERR DB index is out of range") {
			t.Fatalf("error %v", err)
		}
	})
}

// Fifty goroutines race for one key: exactly one wins, over at most
// PoolSize connections.
func TestConcurrentConsume(t *testing.T) {
	f := newTCPFake(t)
	s := newStore(t, f.addr(), Options{PoolSize: 3})
	var wins atomic.Int32
	var wg sync.WaitGroup
	until := time.Now().Add(time.Minute)
	for i := range 50 {
		wg.Go(func() {
			ok, err := s.Consume(context.Background(), "same", until)
			if err != nil {
				t.Error(err)
			}
			if ok {
				wins.Add(1)
			}
			if ok, err := s.Consume(context.Background(), fmt.Sprint("own", i), until); !ok || err != nil {
				t.Errorf("own key: %v %v", ok, err)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d goroutines consumed the same key", wins.Load())
	}
	if _, _, peak := f.counts(); peak > 3 || peak < 1 {
		t.Errorf("%d connections open at once, PoolSize is 3", peak)
	}
}

// A command that finds every connection busy waits only as long as its
// context allows.
func TestPoolWaitHonoursContext(t *testing.T) {
	f := newTCPFake(t)
	release := make(chan struct{})
	free := sync.OnceFunc(func() { close(release) })
	t.Cleanup(free) // before the fake stops, should the test fail early
	f.setBehave(func(c *fakeConn, cmd []string) bool {
		if cmd[1] != "extauth:slow" {
			return false
		}
		<-release
		c.write(c.answer(cmd))
		return true
	})
	s := newStore(t, f.addr(), Options{PoolSize: 1})
	done := make(chan error, 1)
	go func() {
		_, err := s.Consume(context.Background(), "slow", time.Now().Add(time.Minute))
		done <- err
	}()
	f.waitOpen(t, 1)
	for len(f.commands()) == 0 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := s.Consume(ctx, "fast", time.Now().Add(time.Minute))
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "waiting for a free connection") {
		t.Fatalf("error %v", err)
	}
	free()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !consume(t, s, "fast", time.Now().Add(time.Minute)) {
		t.Fatal("refused after the slot freed")
	}
	if accepted, _, _ := f.counts(); accepted != 1 {
		t.Errorf("%d connections, PoolSize is 1", accepted)
	}
}

func TestClose(t *testing.T) {
	f := newTCPFake(t)
	s := newStore(t, f.addr(), Options{})
	consume(t, s, "a", time.Now().Add(time.Minute))
	f.waitOpen(t, 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	f.waitOpen(t, 0)
	if _, err := s.Consume(context.Background(), "b", time.Now().Add(time.Minute)); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	if err := s.Ping(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Ping after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := newStore(t, addr, Options{})
	_, err = s.Consume(context.Background(), "k", time.Now().Add(time.Minute))
	if err == nil || !strings.Contains(err.Error(), "redisstore: SET: dial "+addr) {
		t.Fatalf("error %v", err)
	}
}

func TestNewDoesNotConnect(t *testing.T) {
	var dials atomic.Int32
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return nil, errors.New("no network here")
	}
	s, err := New("redis.example:6379", Options{Dial: dial})
	if err != nil {
		t.Fatal(err)
	}
	if dials.Load() != 0 {
		t.Fatal("New dialled")
	}
	if err := s.Ping(context.Background()); err == nil || dials.Load() != 1 {
		t.Fatalf("Ping: %v after %d dials", err, dials.Load())
	}
	for _, c := range []struct {
		addr string
		o    Options
		err  string
	}{
		{"localhost", Options{}, "missing port"},
		{"", Options{}, "missing port"},
		{"", Options{Dial: dial}, "address is empty"},
		{"h:1", Options{DB: -1}, "DB -1"},
		{"h:1", Options{ReadTimeout: -1}, "time-out is negative"},
		{"h:1", Options{PoolSize: -1}, "PoolSize -1"},
		{"h:1", Options{Username: "u"}, "without a Password"},
	} {
		if _, err := New(c.addr, c.o); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("New(%q, %+v) = %v, want %q", c.addr, c.o, err, c.err)
		}
	}
}

// Nothing prints the password: fmt with any verb, slog as text and JSON.
func TestPasswordNeverShown(t *testing.T) {
	o := Options{Username: "app", Password: extauth.NewSecret(testPassword), DB: 2}
	s := newStore(t, "127.0.0.1:6379", o)
	var out bytes.Buffer
	for _, v := range []any{s, *s.o, o, &o} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
			fmt.Fprintf(&out, verb+"\n", v)
		}
		slog.New(slog.NewTextHandler(&out, nil)).Info("store", "v", v)
		slog.New(slog.NewJSONHandler(&out, nil)).Info("store", "v", v)
	}
	if strings.Contains(out.String(), testPassword) {
		t.Fatalf("password shown:\n%s", out.String())
	}
	if got := s.String(); got != `redisstore 127.0.0.1:6379 db 2 prefix "extauth:" tls false user "app" password [REDACTED]` {
		t.Errorf("String() = %q", got)
	}
}

func TestTLS(t *testing.T) {
	cert := selfSigned(t, "redis.test")
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	f := newFakeRedis(t, ln)
	roots := x509.NewCertPool()
	roots.AddCert(cert.Leaf)
	dialTo := func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, f.addr())
	}
	s := newStore(t, "redis.test:6380", Options{TLSConfig: &tls.Config{RootCAs: roots}, Dial: dialTo})
	if !consume(t, s, "k", time.Now().Add(time.Minute)) {
		t.Fatal("refused")
	}
	// The certificate must name the host of the address.
	wrong := newStore(t, "other.test:6380", Options{TLSConfig: &tls.Config{RootCAs: roots}, Dial: dialTo})
	if _, err := wrong.Consume(context.Background(), "k2", time.Now().Add(time.Minute)); err == nil || !strings.Contains(err.Error(), "TLS handshake") {
		t.Fatalf("wrong host name: %v", err)
	}
}

func selfSigned(t *testing.T, host string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

// In a synctest bubble every goroutine must have ended when the test
// function returns, so a hang, a cancellation, a drop and Close leave
// nothing behind, and fake time makes the waits instant.
func TestNoGoroutineLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln := newPipeListener()
		f := newFakeRedis(t, ln)
		f.setBehave(func(c *fakeConn, cmd []string) bool {
			switch cmd[1] {
			case "extauth:hang":
				c.hang()
			case "extauth:drop":
				c.write("$5\r\nab")
				c.nc.Close()
			default:
				return false
			}
			return true
		})
		s, err := New("pipe:1", Options{Dial: ln.Dial, PoolSize: 2, ReadTimeout: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		until := time.Now().Add(time.Minute)
		if ok, err := s.Consume(t.Context(), "a", until); !ok || err != nil {
			t.Fatalf("%v %v", ok, err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		start := time.Now()
		if _, err := s.Consume(ctx, "hang", until); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("hang: %v", err)
		}
		cancel()
		if el := time.Since(start); el != 30*time.Second {
			t.Errorf("hang ended after %v of fake time, want the context's 30s", el)
		}
		ctx, cancel = context.WithCancel(t.Context())
		time.AfterFunc(time.Second, cancel)
		start = time.Now()
		if _, err := s.Consume(ctx, "hang", until); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled: %v", err)
		}
		if el := time.Since(start); el != time.Second {
			t.Errorf("cancelled after %v of fake time, want 1s", el)
		}
		if _, err := s.Consume(t.Context(), "drop", until); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("drop: %v", err)
		}
		var wg sync.WaitGroup
		for i := range 10 {
			wg.Go(func() {
				if ok, err := s.Consume(t.Context(), fmt.Sprint("k", i), until); !ok || err != nil {
					t.Errorf("%v %v", ok, err)
				}
			})
		}
		wg.Wait()
		s.Close()
		ln.Close()
		f.stop()
	})
}
