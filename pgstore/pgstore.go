// Package pgstore keeps extauth's single-use values in PostgreSQL, so that
// every instance of an application behind a load balancer refuses what
// another has already accepted: a spent sign-in transaction, a SAML
// assertion or request, a logout message. It suits the many applications
// that run PostgreSQL and no Redis.
//
// It runs on the host's pgx pool (github.com/jackc/pgx/v5/pgxpool), or on a
// database/sql handle with any PostgreSQL driver. Its table holds a key and
// an expiry a row; Migrate creates it.
//
// Consume is one statement, an INSERT that a primary key makes single-use:
//
//	INSERT INTO extauth_single_use AS t (key, expires)
//	VALUES ($1, now() + interval '1 millisecond' * $2::bigint)
//	ON CONFLICT (key) DO UPDATE SET expires = excluded.expires
//	WHERE t.expires <= now()
//
// One row affected means the key was new, or only held by an expired row,
// which the statement takes over; none means a live row holds it. Under
// concurrency PostgreSQL settles it: a second insert of the same key waits
// for the first to commit, then meets its row, and ON CONFLICT DO UPDATE
// re-checks the WHERE on the newest version of the row it locked, so of
// any number of callers exactly one is told the key is new, whether the
// key was absent or expired. Expiries are computed and compared on the
// database's clock, so the instances' clocks need not agree with it.
//
// Expired rows never count as present; a background sweeper deletes them
// in bounded batches and stops with Close.
package pgstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/extauth/extauth"
)

// Defaults for the zero fields of Options.
const (
	DefaultTable         = "extauth_single_use"
	DefaultSweepInterval = time.Minute
	DefaultSweepBatch    = 1000
)

// Options configures a Store. The zero value is ready to use.
type Options struct {
	// Schema holds the table; empty means the first schema of the
	// connection's search_path. Migrate does not create it.
	Schema string
	// Table is the table's name (default "extauth_single_use"). Schema and
	// Table are quoted as identifiers, so any name is taken literally.
	Table string

	// SweepInterval is how often the store deletes expired rows (default
	// one minute). Every instance sweeps; they skip the rows another is
	// deleting.
	SweepInterval time.Duration
	// SweepBatch bounds the rows one DELETE removes (default 1000), so that
	// a sweep never holds many locks or one long transaction; a sweep runs
	// batches until fewer than that are left.
	SweepBatch int

	// Logger receives the sweeper's failures (default slog.Default()).
	Logger *slog.Logger
	// Now is the clock that turns Consume's expiry into a time-to-live
	// (default time.Now). Give it the clock of extauth.Options.Now.
	Now func() time.Time
}

// Store is an extauth.Store in PostgreSQL. It is safe for concurrent use.
//
// Nothing it prints shows a password: every fmt verb, slog and
// encoding/json print the description String returns, never the pool and
// its connection settings.
type Store struct {
	db    db
	o     Options
	table string // schema-qualified and quoted
	index string // quoted, unqualified: an index lives in its table's schema

	consumeSQL, sweepSQL, releaseSQL string

	stop      context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

var (
	_ extauth.Store    = (*Store)(nil)
	_ extauth.Releaser = (*Store)(nil)
)

// New returns a Store on pool and starts its sweeper. It does not touch
// the database: Migrate creates the table, Ping checks the connection.
// The pool stays the caller's; Close stops the sweeper only.
func New(pool *pgxpool.Pool, o Options) (*Store, error) {
	if pool == nil {
		return nil, errors.New("pgstore: the pool is nil")
	}
	return newStore(pgxDB{pool}, o)
}

// NewDB is New for a database/sql handle, opened with any PostgreSQL
// driver (pgx's stdlib, lib/pq).
func NewDB(db *sql.DB, o Options) (*Store, error) {
	if db == nil {
		return nil, errors.New("pgstore: the database is nil")
	}
	return newStore(sqlDB{db}, o)
}

func newStore(d db, o Options) (*Store, error) {
	switch {
	case o.SweepInterval < 0:
		return nil, fmt.Errorf("pgstore: SweepInterval %v is negative", o.SweepInterval)
	case o.SweepBatch < 0:
		return nil, fmt.Errorf("pgstore: SweepBatch %d is negative", o.SweepBatch)
	}
	if o.Table == "" {
		o.Table = DefaultTable
	}
	if o.SweepInterval == 0 {
		o.SweepInterval = DefaultSweepInterval
	}
	if o.SweepBatch == 0 {
		o.SweepBatch = DefaultSweepBatch
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	table, index := names(o)
	ctx, stop := context.WithCancel(context.Background())
	s := &Store{
		db: d, o: o, table: table, index: index,
		consumeSQL: `INSERT INTO ` + table + ` AS t (key, expires)
VALUES ($1, now() + interval '1 millisecond' * $2::bigint)
ON CONFLICT (key) DO UPDATE SET expires = excluded.expires
WHERE t.expires <= now()`,
		// The outer condition is checked again on the row the DELETE
		// locks, should a Consume have taken the row over in between.
		sweepSQL: `DELETE FROM ` + table + ` WHERE key IN (
SELECT key FROM ` + table + ` WHERE expires <= now()
ORDER BY expires LIMIT $1 FOR UPDATE SKIP LOCKED)
AND expires <= now()`,
		releaseSQL: `DELETE FROM ` + table + ` WHERE key = $1`,
		stop:       stop,
		done:       make(chan struct{}),
	}
	go s.sweeper(ctx)
	return s, nil
}

// names quotes the table, schema-qualified when a schema is set, and its
// expiry index.
func names(o Options) (table, index string) {
	id := pgx.Identifier{o.Table}
	if o.Schema != "" {
		id = pgx.Identifier{o.Schema, o.Table}
	}
	return id.Sanitize(), pgx.Identifier{o.Table + "_expires"}.Sanitize()
}

// MigrationSQL is what Migrate runs, for operators who run their migrations
// themselves.
func MigrationSQL(o Options) string {
	if o.Table == "" {
		o.Table = DefaultTable
	}
	table, index := names(o)
	return migrationSQL(table, index)
}

func migrationSQL(table, index string) string {
	return `CREATE TABLE IF NOT EXISTS ` + table + ` (
	key     text        PRIMARY KEY,
	expires timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS ` + index + ` ON ` + table + ` (expires);
`
}

// Migrate creates the table and its index if they do not exist. Instances
// starting together may all call it: a transaction-scoped advisory lock
// on the table's name makes them take turns.
func (s *Store) Migrate(ctx context.Context) error {
	if err := s.db.migrate(ctx, s.table, migrationSQL(s.table, s.index)); err != nil {
		return fmt.Errorf("pgstore: migrate %s: %w", s.table, err)
	}
	return nil
}

// Consume records key until the given time and reports whether it was new.
// The row expires at the database's now() plus the time left until until,
// rounded up to the millisecond.
//
// An error means the answer is unknown; the caller must refuse the use. A
// statement that failed on its connection is run once more: if the first
// attempt had committed, the second finds the key, so a retry can refuse a
// use but never accept one twice.
func (s *Store) Consume(ctx context.Context, key string, until time.Time) (bool, error) {
	ms := ttlMillis(until.Sub(s.o.Now()))
	n, err := s.db.exec(ctx, s.consumeSQL, key, ms)
	if err != nil && retryable(ctx, err) {
		n, err = s.db.exec(ctx, s.consumeSQL, key, ms)
	}
	if err != nil {
		return false, fmt.Errorf("pgstore: consume: %w", err)
	}
	switch n {
	case 1:
		return true, nil
	case 0:
		return false, nil
	}
	return false, fmt.Errorf("pgstore: consume: %d rows affected", n)
}

// Release deletes key's row, so that a later Consume of it reports it new:
// extauth gives back the key of a sign-in whose callback failed
// verification, which then holds no row.
func (s *Store) Release(ctx context.Context, key string) error {
	_, err := s.db.exec(ctx, s.releaseSQL, key)
	if err != nil && retryable(ctx, err) {
		_, err = s.db.exec(ctx, s.releaseSQL, key)
	}
	if err != nil {
		return fmt.Errorf("pgstore: release: %w", err)
	}
	return nil
}

// retryable is a failure of the connection rather than an answer of the
// server, with time left to try again.
func retryable(ctx context.Context, err error) bool {
	var pgErr *pgconn.PgError
	return ctx.Err() == nil && !errors.As(err, &pgErr) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// ttlMillis rounds d up to whole milliseconds, at least one.
func ttlMillis(d time.Duration) int64 {
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond > 0 && ms < math.MaxInt64 {
		ms++
	}
	return max(ms, 1)
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.db.ping(ctx); err != nil {
		return fmt.Errorf("pgstore: ping: %w", err)
	}
	return nil
}

// Close stops the sweeper and waits for a sweep in progress to end. It
// leaves the pool open. Consume still works after Close.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.stop()
		<-s.done
	})
	return nil
}

func (s *Store) sweeper(ctx context.Context) {
	defer close(s.done)
	tick := time.NewTicker(s.o.SweepInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if _, err := s.sweep(ctx); err != nil && ctx.Err() == nil {
			s.o.Logger.Warn("pgstore: sweeping expired rows failed", "table", s.table, "err", err)
		}
	}
}

// sweep deletes expired rows, SweepBatch at a time, until fewer are left.
func (s *Store) sweep(ctx context.Context) (int64, error) {
	var total int64
	for {
		n, err := s.db.exec(ctx, s.sweepSQL, s.o.SweepBatch)
		total += n
		if err != nil || n < int64(s.o.SweepBatch) {
			return total, err
		}
	}
}

// String describes the store: its table and sweep, nothing of the
// connection.
func (s *Store) String() string {
	return fmt.Sprintf("pgstore table %s sweep every %v, %d rows at a time", s.table, s.o.SweepInterval, s.o.SweepBatch)
}

// Format prints String for every verb, so that no verb reaches the pool
// and its connection settings.
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

// db is what the store needs of a pgx pool or a database/sql handle.
type db interface {
	exec(ctx context.Context, sql string, args ...any) (int64, error)
	// migrate runs ddl in a transaction holding an advisory lock on name.
	migrate(ctx context.Context, name, ddl string) error
	ping(ctx context.Context) error
}

const lockSQL = `SELECT pg_advisory_xact_lock(hashtext($1))`

type pgxDB struct{ p *pgxpool.Pool }

func (d pgxDB) exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := d.p.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

func (d pgxDB) migrate(ctx context.Context, name, ddl string) error {
	return pgx.BeginFunc(ctx, d.p, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, lockSQL, name); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, ddl)
		return err
	})
}

func (d pgxDB) ping(ctx context.Context) error { return d.p.Ping(ctx) }

type sqlDB struct{ d *sql.DB }

func (d sqlDB) exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := d.d.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (d sqlDB) migrate(ctx context.Context, name, ddl string) error {
	tx, err := d.d.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, lockSQL, name); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, ddl); err != nil {
		return err
	}
	return tx.Commit()
}

func (d sqlDB) ping(ctx context.Context) error { return d.d.PingContext(ctx) }
