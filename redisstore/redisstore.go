// Package redisstore keeps extauth's single-use values in Redis, so that
// every instance of an application behind a load balancer refuses what
// another has already accepted: a spent sign-in transaction, a SAML
// assertion or request, a logout message.
//
//	store, err := redisstore.New("redis.internal:6379", redisstore.Options{
//		Password: extauth.NewSecret(os.Getenv("REDIS_PASSWORD")),
//	})
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer store.Close()
//	a, err := extauth.New(cfg, extauth.Options{Store: store, ...})
//
// Consume is one command, SET key 1 NX PX ttl, which Redis runs atomically:
// of any number of instances asking for the same key, exactly one is told it
// is new. The package speaks just enough RESP2 for that, AUTH, SELECT and
// PING, over a small pool of connections, with every read and write bounded
// in time and size.
package redisstore

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/extauth/extauth"
)

// Defaults for the zero fields of Options.
const (
	DefaultPrefix       = "extauth:"
	DefaultDialTimeout  = 5 * time.Second
	DefaultReadTimeout  = 3 * time.Second
	DefaultWriteTimeout = 3 * time.Second
	DefaultPoolSize     = 8
	DefaultIdleTimeout  = time.Minute
)

// Options configures a Store. The zero value connects without a password to
// database 0 with the defaults above.
type Options struct {
	// Username names a Redis 6 ACL user; empty authenticates as the default
	// user (plain AUTH password).
	Username string
	// Password is sent with AUTH on every new connection. Like every
	// extauth.Secret it never shows in output, logs or errors.
	Password extauth.Secret
	// DB is the database selected on every new connection.
	DB int
	// Prefix begins every key, so that the store can share a Redis with
	// other data (default "extauth:").
	Prefix string
	// TLSConfig, when set, wraps every connection in TLS. An empty
	// ServerName is taken from the address.
	TLSConfig *tls.Config

	// DialTimeout bounds opening a connection, AUTH and SELECT included.
	DialTimeout time.Duration
	// ReadTimeout bounds waiting for a reply, WriteTimeout sending a
	// command. A context deadline that comes sooner wins.
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	// PoolSize bounds the connections open at once; a command that finds
	// them all busy waits for one as long as its context allows.
	PoolSize int
	// IdleTimeout closes a pooled connection unused for that long instead
	// of reusing it, before a server or firewall drops it silently.
	IdleTimeout time.Duration

	// Dial, when set, opens connections instead of a net.Dialer: through a
	// tunnel, to a Unix socket, or to a test server. It is called with
	// network "tcp" and the address given to New.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Now is the clock that turns Consume's expiry into a time-to-live
	// (default time.Now). Give it the clock of extauth.Options.Now.
	Now func() time.Time
}

// Store is an extauth.Store in Redis. It is safe for concurrent use. It
// connects on first use, not in New.
type Store struct {
	addr string
	// o is a pointer so that printing a Store by reflection shows an
	// address, not the options; String and LogValue print them redacted.
	o *Options

	slots chan struct{} // one token per connection in use or being opened

	mu     sync.Mutex
	idle   []*conn // most recently used last
	closed bool
}

// conn is one connection with its read buffer.
type conn struct {
	nc     net.Conn
	br     *bufio.Reader
	buf    []byte
	usedAt time.Time
	// broken marks a connection that failed or whose reply stream is out
	// of step; it is closed instead of pooled.
	broken bool
}

var _ extauth.Store = (*Store)(nil)

// ErrClosed is wrapped by the error of every command after Close.
var ErrClosed = errors.New("store is closed")

// New returns a Store for the Redis at addr ("host:port"). It checks the
// options but does not connect; Ping does, for a start-up check.
func New(addr string, o Options) (*Store, error) {
	if o.Dial == nil {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("redisstore: address %q: %w", addr, err)
		}
	} else if addr == "" {
		return nil, errors.New("redisstore: address is empty")
	}
	switch {
	case o.DB < 0:
		return nil, fmt.Errorf("redisstore: DB %d is negative", o.DB)
	case o.DialTimeout < 0, o.ReadTimeout < 0, o.WriteTimeout < 0, o.IdleTimeout < 0:
		return nil, errors.New("redisstore: a time-out is negative")
	case o.PoolSize < 0:
		return nil, fmt.Errorf("redisstore: PoolSize %d is negative", o.PoolSize)
	case o.Username != "" && o.Password.IsZero():
		return nil, errors.New("redisstore: Username is set without a Password")
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.ReadTimeout == 0 {
		o.ReadTimeout = DefaultReadTimeout
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.PoolSize == 0 {
		o.PoolSize = DefaultPoolSize
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.Dial == nil {
		o.Dial = (&net.Dialer{}).DialContext
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.TLSConfig != nil {
		o.TLSConfig = o.TLSConfig.Clone()
		if o.TLSConfig.ServerName == "" {
			if host, _, err := net.SplitHostPort(addr); err == nil {
				o.TLSConfig.ServerName = host
			}
		}
	}
	return &Store{addr: addr, o: &o, slots: make(chan struct{}, o.PoolSize)}, nil
}

// Consume records key until the given time and reports whether it was new.
// It runs SET <prefix><key> 1 NX PX <ms> with the time left until until,
// rounded up and at least one millisecond, so Redis drops the key by
// itself. A relative time-to-live is measured on Redis's clock, so the
// instances' clocks need not agree with it.
//
// An error means the answer is unknown; the caller must refuse the use.
func (s *Store) Consume(ctx context.Context, key string, until time.Time) (bool, error) {
	ttl := until.Sub(s.o.Now())
	ms := int64(ttl / time.Millisecond)
	if ttl%time.Millisecond > 0 {
		ms++
	}
	if ms < 1 {
		ms = 1
	}
	r, err := s.do(ctx, "SET", s.o.Prefix+key, "1", "NX", "PX", strconv.FormatInt(ms, 10))
	if err != nil {
		return false, fmt.Errorf("redisstore: SET: %w", err)
	}
	switch {
	case r.kind == '+' && r.str == "OK":
		return true, nil
	case r.kind == '$' && r.null:
		return false, nil
	case r.kind == '-':
		return false, fmt.Errorf("redisstore: SET: %w", serverError(r.str))
	}
	return false, fmt.Errorf("redisstore: SET: %w: unexpected %s", errProtocol, r.describe())
}

// Ping checks that Redis answers, authentication and database included.
func (s *Store) Ping(ctx context.Context) error {
	r, err := s.do(ctx, "PING")
	if err != nil {
		return fmt.Errorf("redisstore: PING: %w", err)
	}
	return expect(r, "PING", "PONG", "")
}

// Close closes the idle connections and makes every later command fail
// with ErrClosed; connections in use close when their command ends.
func (s *Store) Close() error {
	s.mu.Lock()
	idle := s.idle
	s.idle, s.closed = nil, true
	s.mu.Unlock()
	for _, c := range idle {
		c.nc.Close()
	}
	return nil
}

// String describes the store without its password.
func (s *Store) String() string {
	auth := "no password"
	if !s.o.Password.IsZero() {
		auth = "password " + s.o.Password.String()
		if s.o.Username != "" {
			auth = "user " + strconv.Quote(s.o.Username) + " " + auth
		}
	}
	return fmt.Sprintf("redisstore %s db %d prefix %q tls %t %s", s.addr, s.o.DB, s.o.Prefix, s.o.TLSConfig != nil, auth)
}

// GoString is String, so that %#v is safe too.
func (s *Store) GoString() string { return s.String() }

// LogValue describes the store to slog without its password.
func (s *Store) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("addr", s.addr),
		slog.Int("db", s.o.DB),
		slog.String("prefix", s.o.Prefix),
		slog.Bool("tls", s.o.TLSConfig != nil),
		slog.Any("password", s.o.Password),
	)
}

// do runs one command on a pooled connection.
func (s *Store) do(ctx context.Context, args ...string) (reply, error) {
	c, reused, err := s.get(ctx)
	if err != nil {
		return reply{}, err
	}
	r, err := s.roundTrip(ctx, c, args...)
	if err != nil && reused && retryable(err) && ctx.Err() == nil {
		// A pooled connection that the server or a middlebox closed while
		// it sat idle. Sending again is safe for SET NX: if the first one
		// reached Redis, the second finds the key and answers nil, so a
		// retry can refuse a use but never accept one twice.
		c.nc.Close()
		c, err = s.dial(ctx)
		if err != nil {
			<-s.slots
			return reply{}, err
		}
		r, err = s.roundTrip(ctx, c, args...)
	}
	s.put(c)
	return r, err
}

// get takes a free slot, then an idle connection or a new one.
func (s *Store) get(ctx context.Context) (c *conn, reused bool, err error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, false, fmt.Errorf("waiting for a free connection: %w", ctx.Err())
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.slots
		return nil, false, ErrClosed
	}
	var stale []*conn
	for len(s.idle) > 0 && c == nil {
		last := s.idle[len(s.idle)-1]
		s.idle = s.idle[:len(s.idle)-1]
		if time.Since(last.usedAt) < s.o.IdleTimeout {
			c = last
		} else {
			stale = append(stale, last)
		}
	}
	s.mu.Unlock()
	for _, st := range stale {
		st.nc.Close()
	}
	if c != nil {
		return c, true, nil
	}
	c, err = s.dial(ctx)
	if err != nil {
		<-s.slots
		return nil, false, err
	}
	return c, false, nil
}

// put pools a healthy connection, closes a broken one, frees the slot.
func (s *Store) put(c *conn) {
	s.mu.Lock()
	if !c.broken && !s.closed {
		c.usedAt = time.Now()
		s.idle = append(s.idle, c)
		c = nil
	}
	s.mu.Unlock()
	if c != nil {
		c.nc.Close()
	}
	<-s.slots
}

// dial opens and prepares a connection: TLS, AUTH, SELECT, all within
// DialTimeout.
func (s *Store) dial(ctx context.Context) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, s.o.DialTimeout)
	defer cancel()
	nc, err := s.o.Dial(ctx, "tcp", s.addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", s.addr, err)
	}
	if s.o.TLSConfig != nil {
		tc := tls.Client(nc, s.o.TLSConfig)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, fmt.Errorf("TLS handshake with %s: %w", s.addr, err)
		}
		nc = tc
	}
	c := &conn{nc: nc, br: bufio.NewReaderSize(nc, maxLine)}
	if !s.o.Password.IsZero() {
		args := []string{"AUTH", s.o.Password.Value()}
		if s.o.Username != "" {
			args = []string{"AUTH", s.o.Username, s.o.Password.Value()}
		}
		if err := s.handshake(ctx, c, args, "AUTH", "OK"); err != nil {
			return nil, err
		}
	}
	if s.o.DB != 0 {
		if err := s.handshake(ctx, c, []string{"SELECT", strconv.Itoa(s.o.DB)}, "SELECT", "OK"); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (s *Store) handshake(ctx context.Context, c *conn, args []string, name, want string) error {
	r, err := s.roundTrip(ctx, c, args...)
	if err == nil {
		err = expect(r, name, want, s.o.Password.Value())
	} else {
		err = fmt.Errorf("%s: %w", name, err)
	}
	if err != nil {
		c.nc.Close()
	}
	return err
}

// expect checks for the status want; redact is blanked out of an error
// reply, should a server ever echo it.
func expect(r reply, name, want, redact string) error {
	switch {
	case r.kind == '+' && r.str == want:
		return nil
	case r.kind == '-':
		msg := r.str
		if redact != "" {
			msg = strings.ReplaceAll(msg, redact, "[REDACTED]")
		}
		return fmt.Errorf("%s: %w", name, serverError(msg))
	}
	return fmt.Errorf("%s: %w: unexpected %s", name, errProtocol, r.describe())
}

// aLongTimeAgo is a deadline that has passed: setting it interrupts a
// blocked read or write at once.
var aLongTimeAgo = time.Unix(1, 0)

// roundTrip writes one command and reads its reply, each within its
// time-out and the context. Any failure marks the connection broken.
func (s *Store) roundTrip(ctx context.Context, c *conn, args ...string) (reply, error) {
	// A context that ends without a deadline (the client went away) must
	// interrupt the I/O too.
	stop := context.AfterFunc(ctx, func() { c.nc.SetDeadline(aLongTimeAgo) })
	r, err := s.exchange(ctx, c, args)
	if !stop() {
		// The deadline was (or is being) moved into the past: whatever
		// the exchange got, the connection cannot serve another command.
		c.broken = true
	}
	if err != nil {
		c.broken = true
		if ctxErr := ctx.Err(); ctxErr != nil {
			return reply{}, fmt.Errorf("%w (%w)", ctxErr, err)
		}
		// The I/O deadline was the context's and fired a moment before
		// the context noticed.
		if dl, ok := ctx.Deadline(); ok && isTimeout(err) && !time.Now().Before(dl) {
			return reply{}, fmt.Errorf("%w (%w)", context.DeadlineExceeded, err)
		}
		return reply{}, err
	}
	return r, nil
}

func (s *Store) exchange(ctx context.Context, c *conn, args []string) (reply, error) {
	c.buf = appendCommand(c.buf[:0], args...)
	if err := c.nc.SetWriteDeadline(deadline(ctx, s.o.WriteTimeout)); err != nil {
		return reply{}, err
	}
	if _, err := c.nc.Write(c.buf); err != nil {
		return reply{}, err
	}
	if err := c.nc.SetReadDeadline(deadline(ctx, s.o.ReadTimeout)); err != nil {
		return reply{}, err
	}
	r, err := readReply(c.br)
	if err == nil && c.br.Buffered() > 0 {
		// Redis answers each command once; more bytes mean the stream is
		// out of step, and the next command would read a stale answer.
		return reply{}, protocolErr("data after the reply")
	}
	return r, err
}

// deadline is now plus d, or the context's deadline if that comes first.
func deadline(ctx context.Context, d time.Duration) time.Time {
	t := time.Now().Add(d)
	if dl, ok := ctx.Deadline(); ok && dl.Before(t) {
		return dl
	}
	return t
}

// retryable reports a failure of the connection itself, not a time-out (a
// server that hangs would only make us wait twice) nor a confused reply.
func retryable(err error) bool {
	return !isTimeout(err) && !errors.Is(err, errProtocol)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// serverError is an error reply from Redis, such as NOAUTH, WRONGPASS,
// READONLY (a replica) or OOM (maxmemory reached).
type serverError string

func (e serverError) Error() string { return "redis: " + string(e) }
