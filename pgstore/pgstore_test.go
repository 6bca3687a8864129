package pgstore

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

const testPassword = "pg-pw-2b7e9a41c0"

// newPool makes a pool that never connects: pgxpool connects on first use.
func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), "postgres://app:"+testPassword+"@db.internal:5432/app?sslmode=require")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func openStore(t *testing.T, o Options) *Store {
	t.Helper()
	s, err := New(newPool(t), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Names are quoted as identifiers, whatever they hold, and qualified with
// the schema when there is one.
func TestNames(t *testing.T) {
	for _, c := range []struct {
		o            Options
		table, index string
	}{
		{Options{}, `"extauth_single_use"`, `"extauth_single_use_expires"`},
		{Options{Schema: "auth", Table: "used"}, `"auth"."used"`, `"used_expires"`},
		{Options{Schema: `My "Schema"`, Table: `x"; DROP TABLE users; --`}, `"My ""Schema"""."x""; DROP TABLE users; --"`, `"x""; DROP TABLE users; --_expires"`},
		{Options{Table: "a.b"}, `"a.b"`, `"a.b_expires"`},
	} {
		s := openStore(t, c.o)
		if s.table != c.table || s.index != c.index {
			t.Errorf("%+v: table %s index %s, want %s %s", c.o, s.table, s.index, c.table, c.index)
		}
		if !strings.Contains(s.consumeSQL, "INSERT INTO "+c.table+" AS t") || !strings.Contains(s.sweepSQL, "DELETE FROM "+c.table+" WHERE") {
			t.Errorf("statements do not use %s:\n%s\n%s", c.table, s.consumeSQL, s.sweepSQL)
		}
	}
}

// The SQL that docs/several-instances.md gives operators is what Migrate
// runs with the default options.
func TestMigrationSQLInDocs(t *testing.T) {
	doc, err := os.ReadFile("../docs/several-instances.md")
	if err != nil {
		t.Fatal(err)
	}
	want := MigrationSQL(Options{})
	if !strings.Contains(string(doc), "```sql\n"+want+"```") {
		t.Errorf("docs/several-instances.md does not hold, in a sql block:\n%s", want)
	}
	if got := MigrationSQL(Options{Schema: "auth"}); !strings.Contains(got, `CREATE TABLE IF NOT EXISTS "auth"."extauth_single_use"`) ||
		!strings.Contains(got, `CREATE INDEX IF NOT EXISTS "extauth_single_use_expires" ON "auth"."extauth_single_use" (expires)`) {
		t.Errorf("MigrationSQL with a schema:\n%s", got)
	}
}

func TestNewChecks(t *testing.T) {
	if _, err := New(nil, Options{}); err == nil || !strings.Contains(err.Error(), "pool is nil") {
		t.Errorf("nil pool: %v", err)
	}
	if _, err := NewDB(nil, Options{}); err == nil || !strings.Contains(err.Error(), "database is nil") {
		t.Errorf("nil db: %v", err)
	}
	for _, c := range []struct {
		o   Options
		err string
	}{
		{Options{SweepInterval: -time.Second}, "SweepInterval -1s is negative"},
		{Options{SweepBatch: -1}, "SweepBatch -1 is negative"},
	} {
		if _, err := New(newPool(t), c.o); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("New(%+v) = %v, want %q", c.o, err, c.err)
		}
	}
	s := openStore(t, Options{})
	if s.o.SweepInterval != DefaultSweepInterval || s.o.SweepBatch != DefaultSweepBatch || s.o.Logger == nil || s.o.Now == nil {
		t.Errorf("defaults not applied: %+v", s.o)
	}
}

func TestTTLMillis(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int64
	}{
		{1500 * time.Microsecond, 2},
		{time.Nanosecond, 1},
		{0, 1},
		{-time.Hour, 1},
		{10 * time.Minute, 600000},
		{math.MaxInt64, 9223372036855},
	} {
		if got := ttlMillis(c.d); got != c.want {
			t.Errorf("ttlMillis(%v) = %d, want %d", c.d, got, c.want)
		}
	}
}

// Close stops the sweeper, once, without touching the pool.
func TestClose(t *testing.T) {
	pool := newPool(t)
	s, err := New(pool, Options{SweepInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { s.Close(); s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Close did not return")
	}
	select {
	case <-s.done:
	default:
		t.Fatal("the sweeper still runs")
	}
	if pool.Stat().TotalConns() != 0 {
		t.Error("the store connected")
	}
}

// Nothing the package holds prints the pool's password: no fmt verb, slog
// handler or json.Marshal, in clear, hex or base64.
func TestPasswordNeverShown(t *testing.T) {
	s := openStore(t, Options{Schema: "auth"})
	db := stdlib.OpenDBFromPool(newPool(t))
	t.Cleanup(func() { db.Close() })
	sdb, err := NewDB(db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sdb.Close() })
	var out bytes.Buffer
	for _, v := range []any{s, sdb, []*Store{s}, map[string]any{"s": sdb}, struct{ S *Store }{s}, Options{Table: "t"}} {
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
	if !strings.Contains(out.String(), `pgstore table "auth"."extauth_single_use" sweep every 1m0s, 1000 rows at a time`) {
		t.Errorf("no description in:\n%s", out.String())
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
