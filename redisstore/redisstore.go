// Package redisstore keeps extauth's single-use values in Redis, so that
// every instance of an application behind a load balancer refuses what
// another has already accepted: a spent sign-in transaction, a SAML
// assertion or request, a logout message.
//
// It runs on the host's go-redis client (github.com/redis/go-redis/v9):
// a standalone server (redis.NewClient), a Sentinel-managed primary
// (redis.NewFailoverClient) or Redis Cluster (redis.NewClusterClient), with
// TLS, ACL users, pools and time-outs set there as for any other use of
// go-redis. NewFromURL builds the client from a URL for the common cases.
//
// Consume is one command, SET key 1 NX PX ttl, which Redis runs atomically:
// of any number of instances asking for the same key, exactly one is told it
// is new. It touches one key, so with Cluster it goes to the primary of that
// key's slot and needs no multi-key operation.
package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/extauth/extauth"
)

// Defaults for the zero fields of Options.
const (
	DefaultPrefix      = "extauth:"
	DefaultWaitTimeout = time.Second
)

// Options configures a Store. The zero value is ready to use.
type Options struct {
	// Prefix begins every key, so that the store can share a Redis with
	// other data (default "extauth:"). With Cluster, a hash tag in it
	// ("{...}") would put every key in one slot, on one primary.
	Prefix string

	// WaitReplicas, when positive, makes Consume accept a new key only
	// once that many replicas have acknowledged it (WAIT, sent on the same
	// connection as the SET). Redis replicates asynchronously: without it,
	// a failover can promote a replica that never received the last keys,
	// and a callback accepted just before the failover could be accepted
	// again after it. Set it to the number of replicas, since Sentinel may
	// promote any of them. A key not acknowledged in time is refused (the
	// user starts again), never accepted; so while fewer replicas are
	// connected, as after a failover until the old primary rejoins as a
	// replica, sign-ins are refused.
	WaitReplicas int
	// WaitTimeout bounds the wait for the replicas (default 1s). It must
	// be shorter than the client's ReadTimeout.
	WaitTimeout time.Duration

	// Now is the clock that turns Consume's expiry into a time-to-live
	// (default time.Now). Give it the clock of extauth.Options.Now.
	Now func() time.Time
}

// Store is an extauth.Store in Redis. It is safe for concurrent use. It
// connects on first use, not in New.
//
// Nothing it prints shows a password: every fmt verb, slog and
// encoding/json print the description String returns.
type Store struct {
	c         redis.UniversalClient
	o         Options
	owned     bool // the store made c, so Close closes it
	closeOnce sync.Once
}

var (
	_ extauth.Store    = (*Store)(nil)
	_ extauth.Releaser = (*Store)(nil)
)

// New returns a Store that runs its commands on c. It does not connect;
// Ping does, for a start-up check. c stays the caller's: Close does not
// close it.
//
// Commands are bounded by c's time-outs and retries. Set
// ContextTimeoutEnabled in c's options so that a sign-in's context (the
// request's, bounded by extauth) also bounds them: go-redis ignores
// context deadlines on the network otherwise.
func New(c redis.UniversalClient, o Options) (*Store, error) {
	if c == nil {
		return nil, errors.New("redisstore: the client is nil")
	}
	switch {
	case o.WaitReplicas < 0:
		return nil, fmt.Errorf("redisstore: WaitReplicas %d is negative", o.WaitReplicas)
	case o.WaitTimeout < 0:
		return nil, fmt.Errorf("redisstore: WaitTimeout %v is negative", o.WaitTimeout)
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.WaitTimeout == 0 {
		o.WaitTimeout = DefaultWaitTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if rt := readTimeout(c); o.WaitReplicas > 0 && rt > 0 && o.WaitTimeout >= rt {
		return nil, fmt.Errorf("redisstore: WaitTimeout %v must be shorter than the client's ReadTimeout %v", o.WaitTimeout, rt)
	}
	return &Store{c: c, o: o}, nil
}

// readTimeout is c's ReadTimeout when c is one of go-redis's clients, 0
// when unknown or disabled.
func readTimeout(c redis.UniversalClient) time.Duration {
	var rt time.Duration
	switch c := c.(type) {
	case *redis.Client:
		rt = c.Options().ReadTimeout
	case *redis.ClusterClient:
		rt = c.Options().ReadTimeout
	}
	return max(rt, 0)
}

// Consume records key until the given time and reports whether it was new.
// It runs SET <prefix><key> 1 NX PX <ms> with the time left until until,
// rounded up and at least one millisecond, so Redis drops the key by
// itself. A relative time-to-live is measured on Redis's clock, so the
// instances' clocks need not agree with it.
//
// Only Redis's OK is an acceptance. An error means the answer is unknown
// and the caller must refuse the use. A command that go-redis sends again
// after losing the first attempt's reply cannot accept a key twice: if the
// first attempt ran, the second finds the key.
func (s *Store) Consume(ctx context.Context, key string, until time.Time) (bool, error) {
	k, ttl := s.o.Prefix+key, ttlUntil(until.Sub(s.o.Now()))
	args := redis.SetArgs{Mode: "NX", TTL: ttl}
	if s.o.WaitReplicas == 0 {
		return setResult(ctx, s.c.SetArgs(ctx, k, "1", args))
	}
	var node redis.Cmdable = s.c
	if cc, ok := s.c.(*redis.ClusterClient); ok {
		// A cluster pipeline would send the keyless WAIT to any node; it
		// must follow the SET on its connection.
		n, err := cc.MasterForKey(ctx, k)
		if err != nil {
			return false, withContext(ctx, "the key's primary", err)
		}
		node = n
	}
	var set *redis.StatusCmd
	var wait *redis.IntCmd
	// Pipelined sends both on one connection; their own errors are read
	// below, so Exec's (the first of them) adds nothing.
	_, _ = node.Pipelined(ctx, func(p redis.Pipeliner) error {
		set = p.SetArgs(ctx, k, "1", args)
		// Pipeliner lacks Wait; this is the command it would queue.
		wait = redis.NewIntCmd(ctx, "wait", s.o.WaitReplicas, s.o.WaitTimeout.Milliseconds())
		return p.Process(ctx, wait)
	})
	fresh, err := setResult(ctx, set)
	if !fresh || err != nil {
		return false, err
	}
	acked, err := wait.Result()
	if err != nil {
		return false, withContext(ctx, "WAIT", err)
	}
	if acked < int64(s.o.WaitReplicas) {
		return false, fmt.Errorf("redisstore: %d of %d replicas acknowledged the key within %v", acked, s.o.WaitReplicas, s.o.WaitTimeout)
	}
	return true, nil
}

// Release deletes key (DEL), so that a later Consume of it reports it new:
// extauth gives back the key of a sign-in whose callback failed
// verification, which then holds nothing in Redis. It does not wait for
// replicas: a failover that brings the key back only refuses that sign-in.
func (s *Store) Release(ctx context.Context, key string) error {
	if err := s.c.Del(ctx, s.o.Prefix+key).Err(); err != nil {
		return withContext(ctx, "DEL", err)
	}
	return nil
}

func setResult(ctx context.Context, cmd *redis.StatusCmd) (bool, error) {
	status, err := cmd.Result()
	switch {
	case errors.Is(err, redis.Nil):
		return false, nil
	case err != nil:
		return false, withContext(ctx, "SET", err)
	case status == "OK":
		return true, nil
	}
	return false, fmt.Errorf("redisstore: SET: unexpected reply %q", status)
}

// withContext wraps err, and the context's error when the context ended:
// go-redis reports a deadline it set on the connection as a network
// time-out, which says less to whoever reads the log.
func withContext(ctx context.Context, op string, err error) error {
	ctxErr := ctx.Err()
	var ne net.Error
	if dl, ok := ctx.Deadline(); ctxErr == nil && ok && errors.As(err, &ne) && ne.Timeout() && !time.Now().Before(dl) {
		// The connection's deadline was the context's and fired a moment
		// before the context's own timer.
		ctxErr = context.DeadlineExceeded
	}
	if ctxErr != nil && !errors.Is(err, ctxErr) {
		return fmt.Errorf("redisstore: %s: %w (%w)", op, ctxErr, err)
	}
	return fmt.Errorf("redisstore: %s: %w", op, err)
}

// ttlUntil rounds d up to a whole number of milliseconds, at least one (a
// PX of 0 is an error) and at most what a time.Duration holds.
func ttlUntil(d time.Duration) time.Duration {
	const most = math.MaxInt64 / int64(time.Millisecond)
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond > 0 {
		ms++
	}
	return time.Duration(min(max(ms, 1), most)) * time.Millisecond
}

// Ping checks that Redis answers, authentication and database included.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.c.Ping(ctx).Err(); err != nil {
		return withContext(ctx, "PING", err)
	}
	return nil
}

// Close closes the client if the store made it (NewFromURL); a client
// given to New is left to its owner.
func (s *Store) Close() error {
	var err error
	if s.owned {
		s.closeOnce.Do(func() { err = s.c.Close() })
	}
	return err
}

// String describes the store: where it connects, never with a password.
func (s *Store) String() string {
	var b strings.Builder
	b.WriteString("redisstore ")
	switch c := s.c.(type) {
	case *redis.Client:
		o := c.Options()
		if o.Addr == "FailoverClient" { // go-redis's placeholder
			b.WriteString("sentinel-managed primary")
		} else {
			b.WriteString(o.Addr)
		}
		fmt.Fprintf(&b, " db %d", o.DB)
		describeAuth(&b, o.Username, o.Password, o.TLSConfig != nil)
	case *redis.ClusterClient:
		o := c.Options()
		fmt.Fprintf(&b, "cluster %s", strings.Join(o.Addrs, ","))
		describeAuth(&b, o.Username, o.Password, o.TLSConfig != nil)
	default:
		fmt.Fprintf(&b, "%T", c)
	}
	fmt.Fprintf(&b, " prefix %q", s.o.Prefix)
	if s.o.WaitReplicas > 0 {
		fmt.Fprintf(&b, " wait %d replicas", s.o.WaitReplicas)
	}
	return b.String()
}

func describeAuth(b *strings.Builder, user, password string, tls bool) {
	fmt.Fprintf(b, " tls %t", tls)
	if user != "" {
		fmt.Fprintf(b, " user %s", strconv.Quote(user))
	}
	if password != "" {
		b.WriteString(" password [REDACTED]")
	}
}

// Format prints String for every verb, so that no verb reaches the client
// and its options.
func (s *Store) Format(f fmt.State, verb rune) {
	if verb == 'q' {
		fmt.Fprint(f, strconv.Quote(s.String()))
		return
	}
	fmt.Fprint(f, s.String())
}

// LogValue makes slog print String.
func (s *Store) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON encodes String.
func (s *Store) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }
