package bench

import (
	"bytes"
	"compress/flate"
	"crypto/rsa"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"testing"
)

var rounds = flag.Int("rounds", 7, "rounds of each side-by-side benchmark; each round runs both sides for -benchtime")

// result is one side's figures in one round.
type result struct{ ns, bytes, allocs float64 }

// measured runs f as a sub-benchmark body and keeps the figures of its last
// (calibrated) run in *out.
func measured(f func(*testing.B), out *result) func(*testing.B) {
	return func(b *testing.B) {
		b.ReportAllocs()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f(b)
		runtime.ReadMemStats(&after)
		if b.N > 0 {
			n := float64(b.N)
			*out = result{float64(b.Elapsed().Nanoseconds()) / n,
				float64(after.TotalAlloc-before.TotalAlloc) / n, float64(after.Mallocs-before.Mallocs) / n}
		}
	}
}

// sideBySide measures ours against theirs in -rounds rounds, as the
// sub-benchmarks roundN/ours and roundN/theirs, alternating which side runs
// first. A last sub-benchmark, "median", reports the medians over the rounds
// of our ns/op, B/op and allocs/op, theirs (as theirs-ns/op, ...), and of the
// per-round ratios ours/theirs of ns/op ("ratio"); its iteration count is
// meaningless. setup is called before every round and returns the two sides;
// it may build inputs that expire (a SAML response is valid for minutes).
func sideBySide(b *testing.B, setup func() (ours, theirs func(*testing.B))) {
	var us, them []result
	var ratios []float64
	for i := range *rounds {
		ours, theirs := setup()
		var o, t result
		run := func(name string, f func(*testing.B), r *result) bool {
			return b.Run(fmt.Sprintf("round%d/%s", i+1, name), measured(f, r))
		}
		var ok bool
		if i%2 == 0 {
			ok = run("ours", ours, &o) && run("theirs", theirs, &t)
		} else {
			ok = run("theirs", theirs, &t) && run("ours", ours, &o)
		}
		if !ok || o.ns == 0 || t.ns == 0 {
			b.Fatalf("round %d: a side failed", i+1)
		}
		us, them, ratios = append(us, o), append(them, t), append(ratios, o.ns/t.ns)
	}
	col := func(rs []result, f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		return median(v)
	}
	ns := func(r result) float64 { return r.ns }
	by := func(r result) float64 { return r.bytes }
	al := func(r result) float64 { return r.allocs }
	b.Run("median", func(b *testing.B) {
		b.ReportAllocs()
		b.ReportMetric(col(us, ns), "ns/op")
		b.ReportMetric(col(us, by), "B/op")
		b.ReportMetric(col(us, al), "allocs/op")
		b.ReportMetric(col(them, ns), "theirs-ns/op")
		b.ReportMetric(col(them, by), "theirs-B/op")
		b.ReportMetric(col(them, al), "theirs-allocs/op")
		b.ReportMetric(median(ratios), "ratio")
	})
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	n := len(v)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

func inflate(data []byte) ([]byte, error) {
	return io.ReadAll(io.LimitReader(flate.NewReader(bytes.NewReader(data)), 1<<20))
}

var (
	keysOnce sync.Once
	keys     [2]struct {
		key  *rsa.PrivateKey
		cert *x509.Certificate
	}
)
