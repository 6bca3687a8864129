package redisstore

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	testPassword     = "pw-7c1e0b9d3a"
	sentinelPassword = "sentinel-pw-40e1b7"
)

func mustFromURL(t *testing.T, raw string, o Options) *Store {
	t.Helper()
	s, err := NewFromURL(raw, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// The forms NewFromURL takes, and the go-redis client each one becomes.
func TestNewFromURL(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		s := mustFromURL(t, "redis://app:"+testPassword+"@redis.internal:6380/3?dial_timeout=2s&pool_size=4", Options{})
		o := s.c.(*redis.Client).Options()
		if o.Addr != "redis.internal:6380" || o.DB != 3 || o.Username != "app" || o.Password != testPassword ||
			o.DialTimeout != 2*time.Second || o.PoolSize != 4 || o.TLSConfig != nil || !o.ContextTimeoutEnabled {
			t.Errorf("options %+v", o)
		}
		if got, want := s.String(), `redisstore redis.internal:6380 db 3 tls false user "app" password [REDACTED] prefix "extauth:"`; got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	})
	t.Run("TLS", func(t *testing.T) {
		s := mustFromURL(t, "rediss://:"+testPassword+"@redis.internal", Options{Prefix: "app1:"})
		o := s.c.(*redis.Client).Options()
		if o.Addr != "redis.internal:6379" || o.TLSConfig == nil || o.TLSConfig.ServerName != "redis.internal" || o.Username != "" {
			t.Errorf("options %+v", o)
		}
		if got, want := s.String(), `redisstore redis.internal:6379 db 0 tls true password [REDACTED] prefix "app1:"`; got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	})
	t.Run("unix socket", func(t *testing.T) {
		s := mustFromURL(t, "unix:///run/redis/redis.sock?db=2", Options{})
		o := s.c.(*redis.Client).Options()
		if o.Network != "unix" || o.Addr != "/run/redis/redis.sock" || o.DB != 2 {
			t.Errorf("options %+v", o)
		}
	})
	t.Run("Sentinel", func(t *testing.T) {
		s := mustFromURL(t, "redis+sentinel://:"+sentinelPassword+"@10.0.0.1:26379/1?master_name=mymaster&addr=10.0.0.2:26379&addr=10.0.0.3:26379&password="+testPassword, Options{WaitReplicas: 1})
		o := s.c.(*redis.Client).Options()
		if o.Addr != "FailoverClient" || o.DB != 1 || o.Password != testPassword || !o.ContextTimeoutEnabled {
			t.Errorf("options %+v", o)
		}
		if got, want := s.String(), `redisstore sentinel-managed primary db 1 tls false password [REDACTED] prefix "extauth:" wait 1 replicas`; got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	})
	t.Run("Cluster", func(t *testing.T) {
		s := mustFromURL(t, "rediss+cluster://:"+testPassword+"@10.0.0.1:7000?addr=10.0.0.2:7000&addr=10.0.0.3:7000&read_timeout=2s", Options{})
		o := s.c.(*redis.ClusterClient).Options()
		if strings.Join(o.Addrs, " ") != "10.0.0.1:7000 10.0.0.2:7000 10.0.0.3:7000" || o.Password != testPassword ||
			o.TLSConfig == nil || o.ReadTimeout != 2*time.Second || !o.ContextTimeoutEnabled {
			t.Errorf("options %+v", o)
		}
		if got, want := s.String(), `redisstore cluster 10.0.0.1:7000,10.0.0.2:7000,10.0.0.3:7000 tls true password [REDACTED] prefix "extauth:"`; got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	})
	t.Run("upper-case scheme", func(t *testing.T) {
		s := mustFromURL(t, "REDIS+CLUSTER://h:7000", Options{})
		if _, ok := s.c.(*redis.ClusterClient); !ok {
			t.Errorf("client %T", s.c)
		}
	})
}

func TestNewFromURLErrors(t *testing.T) {
	for _, c := range []struct{ url, err string }{
		{"redis.internal:6379", "scheme must be redis, rediss or unix"},
		{"http://redis.internal", "scheme must be redis, rediss or unix"},
		{"unix+sentinel:///s.sock", "scheme must be redis, rediss or unix"},
		{"redis+ring://h:1", "must end in +sentinel or +cluster"},
		{"redis://h:1/x", `invalid database number: "x"`},
		{"redis://h:1?max_retries=x", "invalid max_retries number"},
		{"redis://h:1?no_such_option=1", "unexpected option: no_such_option"},
		{"redis+sentinel://h:26379", "needs the master_name option"},
		{"redis+cluster://h:7000?addr=nohost", "unable to parse addr param"},
		// A password with an unencoded "/" moves the authority's end: the
		// parser then complains about a port made of the password.
		{"redis://:" + testPassword + "/x@h:1", "does not parse"},
		{"redis://:" + testPassword + "@h:1/x", `invalid database number: "x"`},
		{"redis+sentinel://h:1?master_name=m&password=" + testPassword + "&pool_size=" + testPassword, "invalid pool_size number"},
		{"redis://:" + testPassword + "@h:1?db=" + testPassword, "invalid database number"},
	} {
		_, err := NewFromURL(c.url, Options{})
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("NewFromURL(%q) = %v, want %q", c.url, err, c.err)
			continue
		}
		assertNoSecret(t, err.Error(), testPassword)
		if errors.Unwrap(err) != nil {
			t.Errorf("NewFromURL(%q): the error wraps %v, which may show the URL", c.url, errors.Unwrap(err))
		}
	}
}

func TestNewChecks(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "h:1", ReadTimeout: time.Second})
	t.Cleanup(func() { c.Close() })
	for _, tc := range []struct {
		c   redis.UniversalClient
		o   Options
		err string
	}{
		{nil, Options{}, "client is nil"},
		{c, Options{WaitReplicas: -1}, "WaitReplicas -1 is negative"},
		{c, Options{WaitReplicas: 1, WaitTimeout: -time.Second}, "WaitTimeout -1s is negative"},
		{c, Options{WaitReplicas: 1}, "WaitTimeout 1s must be shorter than the client's ReadTimeout 1s"},
		{c, Options{WaitReplicas: 1, WaitTimeout: 2 * time.Second}, "must be shorter"},
	} {
		if _, err := New(tc.c, tc.o); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("New(%+v) = %v, want %q", tc.o, err, tc.err)
		}
	}
	s, err := New(c, Options{WaitReplicas: 1, WaitTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if s.o.Prefix != DefaultPrefix || s.o.Now == nil {
		t.Errorf("defaults not applied: %+v", s.o)
	}
}

// The time-to-live covers until: rounded up to the millisecond, never zero
// or negative, never overflowing.
func TestTTL(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want time.Duration
	}{
		{1500 * time.Microsecond, 2 * time.Millisecond},
		{time.Nanosecond, time.Millisecond},
		{0, time.Millisecond},
		{-time.Hour, time.Millisecond},
		{10 * time.Minute, 10 * time.Minute},
		{1<<63 - 1, 9223372036854 * time.Millisecond},
	} {
		if got := ttlUntil(c.d); got != c.want {
			t.Errorf("ttlUntil(%v) = %v, want %v", c.d, got, c.want)
		}
	}
}

// Close closes only a client the store made.
func TestClose(t *testing.T) {
	own := mustFromURL(t, "redis://127.0.0.1:1", Options{})
	if err := own.Close(); err != nil {
		t.Fatal(err)
	}
	if err := own.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := own.Consume(context.Background(), "k", time.Now().Add(time.Minute)); !errors.Is(err, redis.ErrClosed) {
		t.Errorf("Consume after Close: %v, want redis.ErrClosed", err)
	}

	hosts := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer hosts.Close()
	s, err := New(hosts, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := hosts.Ping(context.Background()).Err(); errors.Is(err, redis.ErrClosed) {
		t.Error("Close closed the host's client")
	}
}

// A Redis nobody answers for: an error, never an acceptance, and no
// password in it.
func TestUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := mustFromURL(t, "redis://app:"+testPassword+"@"+addr+"?max_retries=-1", Options{})
	ok, err := s.Consume(context.Background(), "k", time.Now().Add(time.Minute))
	if ok || err == nil || !strings.Contains(err.Error(), "redisstore: SET: dial tcp "+addr) {
		t.Fatalf("Consume = %v, %v", ok, err)
	}
	assertNoSecret(t, err.Error(), testPassword)
	if err := s.Ping(context.Background()); err == nil || !strings.Contains(err.Error(), "redisstore: PING") {
		t.Fatalf("Ping: %v", err)
	}
}

// Nothing the package holds prints a password: no fmt verb, slog handler or
// json.Marshal, for each kind of client, in clear, hex or base64.
func TestPasswordNeverShown(t *testing.T) {
	standalone := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", Username: "app", Password: testPassword})
	failover := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:26379"},
		SentinelPassword: sentinelPassword, Password: testPassword})
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:7000"}, Password: testPassword})
	for _, c := range []redis.UniversalClient{standalone, failover, cluster} {
		t.Cleanup(func() { c.Close() })
	}
	var values []any
	for _, c := range []redis.UniversalClient{standalone, failover, cluster} {
		s, err := New(c, Options{})
		if err != nil {
			t.Fatal(err)
		}
		values = append(values, s, []*Store{s}, map[string]any{"store": s}, struct{ S *Store }{s})
	}
	for _, raw := range []string{
		"redis://app:" + testPassword + "@127.0.0.1:6379/2",
		"redis+sentinel://:" + sentinelPassword + "@127.0.0.1:26379?master_name=m&password=" + testPassword,
		"redis+cluster://:" + testPassword + "@127.0.0.1:7000",
	} {
		s := mustFromURL(t, raw, Options{})
		values = append(values, s)
	}
	values = append(values, Options{Prefix: "p:"}, &Options{WaitReplicas: 1})
	var out bytes.Buffer
	for _, v := range values {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X"} {
			fmt.Fprintf(&out, verb+"\n", v)
		}
		slog.New(slog.NewTextHandler(&out, nil)).Info("store", "v", v)
		slog.New(slog.NewJSONHandler(&out, nil)).Info("store", "v", v)
		if j, err := json.Marshal(v); err == nil {
			out.Write(j)
		}
	}
	assertNoSecret(t, out.String(), testPassword)
	assertNoSecret(t, out.String(), sentinelPassword)
	if !strings.Contains(out.String(), "password [REDACTED]") {
		t.Errorf("the output describes no store:\n%s", out.String())
	}
}

// assertNoSecret fails if text holds secret in clear, in hex (either case)
// or in base64 (either alphabet, padded or not).
func assertNoSecret(t *testing.T, text, secret string) {
	t.Helper()
	b := []byte(secret)
	for _, form := range []string{
		secret,
		hex.EncodeToString(b),
		strings.ToUpper(hex.EncodeToString(b)),
		base64.StdEncoding.EncodeToString(b),
		base64.RawStdEncoding.EncodeToString(b),
		base64.URLEncoding.EncodeToString(b),
		base64.RawURLEncoding.EncodeToString(b),
	} {
		if strings.Contains(text, form) {
			t.Fatalf("%q appears in:\n%s", form, text)
		}
	}
}
