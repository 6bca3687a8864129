//go:build interop

package pgstore

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/extauth/extauth/internal/harness"
	"github.com/extauth/extauth/internal/pgtest"
)

const pgPassword = "pg-interop-6e1d93"

func open(t *testing.T, pool *pgxpool.Pool, o Options) *Store {
	t.Helper()
	s, err := New(pool, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

func mustConsume(t *testing.T, s *Store, key string, until time.Time) bool {
	t.Helper()
	ok, err := s.Consume(context.Background(), key, until)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func count(t *testing.T, pool *pgxpool.Pool, table, where string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table+" WHERE "+where).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestPostgres(t *testing.T) {
	srv := pgtest.Start(t, pgPassword)
	t.Run("consume", func(t *testing.T) { testConsume(t, srv) })
	t.Run("concurrent callers on two pools", func(t *testing.T) { testConcurrent(t, srv) })
	t.Run("sweeper", func(t *testing.T) { testSweeper(t, srv) })
	t.Run("migrate", func(t *testing.T) { testMigrate(t, srv) })
	t.Run("database/sql", func(t *testing.T) { testDatabaseSQL(t, srv) })
	t.Run("wrong password", func(t *testing.T) { testWrongPassword(t, srv) })
	t.Run("least privilege", func(t *testing.T) { testLeastPrivilege(t, srv) })
	t.Run("server stops and comes back", func(t *testing.T) { testRestart(t, srv) })
}

func testConsume(t *testing.T, srv *pgtest.Server) {
	pool := pgPool(t, srv)
	s := open(t, pool, Options{Table: "consume"})
	// A minute: no loaded machine takes that long between two statements,
	// so the row is live throughout.
	until := time.Now().Add(time.Minute)
	if !mustConsume(t, s, "tx:a", until) {
		t.Fatal("first use refused")
	}
	if mustConsume(t, s, "tx:a", until) {
		t.Fatal("second use accepted")
	}
	if !mustConsume(t, s, "tx:b", until) {
		t.Fatal("another key refused")
	}
	var left time.Duration
	if err := pool.QueryRow(context.Background(), `SELECT expires - now() FROM consume WHERE key = 'tx:a'`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left <= 0 || left > time.Minute {
		t.Errorf("the row expires in %v, want within (0, 1m]", left)
	}
	// Expired but not swept (the sweeper waits a minute): not present.
	if _, err := pool.Exec(context.Background(), `UPDATE consume SET expires = now() - interval '1 second' WHERE key = 'tx:a'`); err != nil {
		t.Fatal(err)
	}
	if !mustConsume(t, s, "tx:a", time.Now().Add(time.Minute)) {
		t.Fatal("an expired row counted as present")
	}
	if mustConsume(t, s, "tx:a", time.Now().Add(time.Minute)) {
		t.Fatal("the row that took over the expired one is not single use")
	}
	if n := count(t, pool, "consume", "key = 'tx:a'"); n != 1 {
		t.Errorf("%d rows for tx:a", n)
	}
	// An expiry already past is held for a millisecond.
	mustConsume(t, s, "tx:past", time.Now().Add(-time.Hour))
	time.Sleep(10 * time.Millisecond)
	if !mustConsume(t, s, "tx:past", time.Now().Add(time.Minute)) {
		t.Error("a key with a past expiry is held")
	}
}

// A hundred callers on two pools (two instances) race for each key, new or
// held by an expired row: exactly one wins.
func testConcurrent(t *testing.T, srv *pgtest.Server) {
	pools := []*pgxpool.Pool{pgPool(t, srv), pgPool(t, srv)}
	stores := []*Store{open(t, pools[0], Options{Table: "race"}), open(t, pools[1], Options{Table: "race"})}
	until := time.Now().Add(time.Minute)
	for round := range 20 {
		key := fmt.Sprint("race:", round)
		if round%2 == 1 {
			// A row for the key that expired and was not swept.
			if _, err := pools[0].Exec(context.Background(), `INSERT INTO race VALUES ($1, now() - interval '1 second')`, key); err != nil {
				t.Fatal(err)
			}
		}
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
			t.Fatalf("round %d: %d callers consumed the same key", round, wins.Load())
		}
	}
}

// countingDB counts the statements a store runs.
type countingDB struct {
	db
	n atomic.Int32
}

func (c *countingDB) exec(ctx context.Context, sql string, args ...any) (int64, error) {
	c.n.Add(1)
	return c.db.exec(ctx, sql, args...)
}

func testSweeper(t *testing.T, srv *pgtest.Server) {
	pool := pgPool(t, srv)
	s := open(t, pool, Options{Table: "sweep", SweepInterval: time.Hour, SweepBatch: 7})
	insert := func(n int, expires string) {
		t.Helper()
		if _, err := pool.Exec(context.Background(), `INSERT INTO sweep SELECT 'k' || g || '-' || $2::text, now() + $1::interval FROM generate_series(1, $3::int) g`,
			expires, expires, n); err != nil {
			t.Fatal(err)
		}
	}
	insert(100, "-1 second")
	insert(5, "1 hour")
	cdb := &countingDB{db: s.db}
	s.db = cdb
	n, err := s.sweep(context.Background())
	if err != nil || n != 100 {
		t.Fatalf("sweep = %d, %v; want 100", n, err)
	}
	if got := cdb.n.Load(); got != 15 {
		t.Errorf("%d DELETEs of at most 7 rows for 100 rows, want 15", got)
	}
	if left := count(t, pool, "sweep", "true"); left != 5 {
		t.Errorf("%d rows left, want the 5 live ones", left)
	}

	// In the background, every SweepInterval, until Close.
	var logs bytes.Buffer
	bg := open(t, pool, Options{Table: "sweep", SweepInterval: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	insert(20, "-1 second")
	deadline := time.Now().Add(time.Minute)
	for count(t, pool, "sweep", "true") != 5 {
		if time.Now().After(deadline) {
			t.Fatal("the background sweeper left expired rows")
		}
		time.Sleep(20 * time.Millisecond)
	}
	bg.Close()
	insert(3, "-1 second")
	time.Sleep(200 * time.Millisecond)
	if n := count(t, pool, "sweep", "expires <= now()"); n != 3 {
		t.Errorf("%d expired rows after Close, want the 3 left unswept", n)
	}
	if logs.Len() != 0 {
		t.Errorf("the sweeper logged: %s", logs.String())
	}

	// A failing sweep is logged, without the password. The sweeper's
	// first tick may come late on a loaded machine: wait for its line.
	var failed lockedBuffer
	broken, err := New(pool, Options{Table: "no_such_table", SweepInterval: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&failed, nil))})
	if err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(time.Minute)
	for !strings.Contains(failed.String(), "sweeping expired rows failed") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	broken.Close()
	if !strings.Contains(failed.String(), "sweeping expired rows failed") || !strings.Contains(failed.String(), "no_such_table") {
		t.Errorf("log: %s", failed.String())
	}
	assertNoSecret(t, failed.String(), pgPassword)
}

// lockedBuffer is a bytes.Buffer that a sweeper's logger writes while the
// test reads it.
type lockedBuffer = harness.SyncBuffer

// Migrate is idempotent, safe when instances start together, and takes
// any schema and table name literally.
func testMigrate(t *testing.T, srv *pgtest.Server) {
	pool := pgPool(t, srv)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE SCHEMA "Auth Schema"`); err != nil {
		t.Fatal(err)
	}
	o := Options{Schema: "Auth Schema", Table: `used "keys"; --`}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			s, err := New(pool, o)
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Close()
			if err := s.Migrate(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	s := open(t, pool, o) // and once more
	if !mustConsume(t, s, "k", time.Now().Add(time.Minute)) || mustConsume(t, s, "k", time.Now().Add(time.Minute)) {
		t.Fatal("not single use")
	}
	var cols []string
	rows, _ := pool.Query(ctx, `SELECT column_name || ' ' || data_type FROM information_schema.columns
		WHERE table_schema = 'Auth Schema' AND table_name = 'used "keys"; --' ORDER BY ordinal_position`)
	cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || strings.Join(cols, ", ") != "key text, expires timestamp with time zone" {
		t.Errorf("columns %q (%v)", cols, err)
	}
	var indexes int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE schemaname = 'Auth Schema' AND tablename = 'used "keys"; --'`).Scan(&indexes); err != nil || indexes != 2 {
		t.Errorf("%d indexes (%v), want the primary key and the expiry index", indexes, err)
	}
	missing, err := New(pool, Options{Schema: "no_such_schema"})
	if err != nil {
		t.Fatal(err)
	}
	defer missing.Close()
	if err := missing.Migrate(ctx); err == nil || !strings.Contains(err.Error(), "no_such_schema") {
		t.Errorf("Migrate into a missing schema: %v", err)
	}
	if ok, err := missing.Consume(ctx, "k", time.Now().Add(time.Minute)); ok || err == nil {
		t.Errorf("Consume without its table: %v %v", ok, err)
	}
}

func testDatabaseSQL(t *testing.T, srv *pgtest.Server) {
	db := stdlib.OpenDBFromPool(pgPool(t, srv))
	t.Cleanup(func() { db.Close() })
	s, err := NewDB(db, Options{Table: "via_sql", SweepInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Fifty callers race for one key that lives a minute: however long a
	// loaded machine spreads them, none comes after the winner's row has
	// expired (which would rightly let it take the key over).
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			ok, err := s.Consume(context.Background(), "k", time.Now().Add(time.Minute))
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
		t.Fatalf("%d callers consumed the same key", wins.Load())
	}
	// Expired, the row goes at the next sweep, through database/sql too.
	if _, err := db.Exec(`UPDATE via_sql SET expires = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	var n int
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if err := db.QueryRow(`SELECT count(*) FROM via_sql`).Scan(&n); err != nil || n == 0 || time.Now().After(deadline) {
			if err != nil || n != 0 {
				t.Errorf("%d rows after the sweep (%v)", n, err)
			}
			break
		}
	}
}

func testWrongPassword(t *testing.T, srv *pgtest.Server) {
	const wrong = "not-the-pg-password-77"
	url := strings.Replace(srv.URL(), pgPassword, wrong, 1)
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s, err := New(pool, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ok, err := s.Consume(context.Background(), "k", time.Now().Add(time.Minute))
	if ok || err == nil || !strings.Contains(err.Error(), "password authentication failed") {
		t.Fatalf("Consume = %v, %v", ok, err)
	}
	perr := s.Ping(context.Background())
	for _, text := range []string{err.Error(), fmt.Sprint(perr), fmt.Sprintf("%+v %#v", s, s)} {
		assertNoSecret(t, text, wrong)
		assertNoSecret(t, text, pgPassword)
	}
}

// PostgreSQL stops: every use is refused. It comes back: the pool
// reconnects, and what was consumed before is still consumed.
func testRestart(t *testing.T, srv *pgtest.Server) {
	pool := pgPool(t, srv)
	s := open(t, pool, Options{Table: "restart"})
	until := time.Now().Add(time.Minute)
	mustConsume(t, s, "before", until)
	srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, key := range []string{"during1", "during2"} {
		if ok, err := s.Consume(ctx, key, until); ok || err == nil {
			t.Fatalf("while stopped: %v %v", ok, err)
		}
	}
	srv.Restart()
	if !mustConsume(t, s, "after", until) {
		t.Fatal("refused after the server came back")
	}
	if mustConsume(t, s, "before", until) {
		t.Fatal("a key consumed before the restart was accepted again")
	}
	if !mustConsume(t, s, "during1", until) {
		t.Error("a key refused while the server was down was recorded")
	}
}

// The privileges docs/several-instances.md lists are enough: a role with
// SELECT, INSERT, UPDATE and DELETE on the table alone consumes and sweeps.
func testLeastPrivilege(t *testing.T, srv *pgtest.Server) {
	admin := pgPool(t, srv)
	open(t, admin, Options{Table: "least"}) // migrated by the owner
	ctx := context.Background()
	for _, stmt := range []string{
		`CREATE ROLE app LOGIN PASSWORD 'app-pw-31f0'`,
		`REVOKE ALL ON SCHEMA public FROM PUBLIC`,
		`GRANT USAGE ON SCHEMA public TO app`,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON least TO app`,
		`INSERT INTO least VALUES ('old', now() - interval '1 hour')`,
	} {
		if _, err := admin.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	cfg, err := pgxpool.ParseConfig(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.User, cfg.ConnConfig.Password = "app", "app-pw-31f0"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s, err := New(pool, Options{Table: "least", SweepInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !mustConsume(t, s, "k", time.Now().Add(time.Minute)) || mustConsume(t, s, "k", time.Now().Add(time.Minute)) {
		t.Fatal("not single use")
	}
	if !mustConsume(t, s, "old", time.Now().Add(time.Minute)) {
		t.Fatal("an expired row is not taken over")
	}
	if _, err := pool.Exec(ctx, `INSERT INTO least VALUES ('old2', now() - interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	if n, err := s.sweep(ctx); err != nil || n != 1 {
		t.Fatalf("sweep = %d, %v", n, err)
	}
	if err := s.Migrate(ctx); err == nil {
		t.Error("Migrate succeeded without CREATE on the schema: the test role has too much")
	}
}

// pgPool opens a pgx pool on srv, closed when the test ends.
func pgPool(t testing.TB, srv *pgtest.Server) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}
