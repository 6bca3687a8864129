//go:build !race

package extauth_test

import (
	"bytes"
	mrand "math/rand/v2"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/extauth/extauth/extauthtest/samlidp"
	"github.com/extauth/extauth/internal/loadtest"
	"github.com/extauth/extauth/samlsp"
)

// The timing test runs without the race detector, which slows the parser
// tenfold and the whole test to minutes; what it measures, the work done
// after a CBC decryption, is the same code either way, and the race
// detector runs TestSAMLCBCFailuresAlike on it.

// TestSAMLCBCPaddingOracleClosed is finding 2 of issue 21 (Jager and
// Somorovsky, "How to Break XML Encryption"): through the real callback
// route, with an unsigned Response, a bad CBC padding and a good padding
// with bad content (the block before it garbled, as any change leaves it)
// must be indistinguishable in status, body, code, message, logged cause
// and time, at 64 KiB and at the largest ciphertext the SP accepts, for
// AES-CBC and 3DES. The two kinds alternate in random order, after a
// warm-up, and the median of 40 rounds' ratios must be within 1.1x. The
// time is the CPU time of the callback's handler (cbcApp.post), which a
// loaded machine does not stretch as it does wall-clock time; a measurement
// that fails the ratio is made again, twice at most, and a real oracle
// fails every time.
func TestSAMLCBCPaddingOracleClosed(t *testing.T) {
	a := newCBCApp(t, nil)
	const (
		warmUp   = 5
		measured = 40
		attempts = 3
		// maxRatio is far from the 1.00 to 1.01 of the closed oracle, and
		// from an early return on a bad padding: 1.22 (3DES, 64 KiB) to
		// 1.66 (AES, the largest ciphertext).
		maxRatio = 1.1
	)
	for _, tc := range []struct {
		name string
		alg  string
		size int
	}{
		{"aes256-cbc/64KiB", samlidp.AES256CBC, 64 << 10},
		{"aes256-cbc/largest", samlidp.AES256CBC, samlsp.DefaultMaxDecryptedBytes},
		{"tripledes-cbc/64KiB", samlidp.TripleDESCBC, 64 << 10},
		{"tripledes-cbc/largest", samlidp.TripleDESCBC, samlsp.DefaultMaxDecryptedBytes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enc := a.signIn(t, tc.alg, tc.size)
			if tc.size == samlsp.DefaultMaxDecryptedBytes {
				// The genuine one is the largest ciphertext accepted: one
				// block more is refused before any decryption.
				if want := enc.bs + (tc.size/enc.bs+1)*enc.bs; len(enc.ct) != want {
					t.Fatalf("ciphertext of %d bytes, want the largest accepted, %d", len(enc.ct), want)
				}
				more := append(bytes.Clone(enc.ct), make([]byte, enc.bs)...)
				if got := a.post(t, enc.element(more)); got.status != http.StatusBadRequest || !strings.Contains(got.logged, "too large") {
					t.Fatalf("a ciphertext one block over the bound: %d %s", got.status, got.logged)
				}
			}
			good := byte(1)
			if enc.pad == 1 {
				good = 2
			}
			kinds := []struct {
				name string
				enc  string
			}{
				{"bad padding", enc.element(enc.lastByte(0))},
				{"good padding, bad content", enc.element(enc.lastByte(good))},
			}
			var ratio float64
			for attempt := 1; attempt <= attempts; attempt++ {
				times := make([][]time.Duration, len(kinds))
				var first *cbcAnswer
				for round := range warmUp + measured {
					// Each round posts both kinds in a random order, each
					// after a collection: a deterministic order lets the
					// collector's period fall on one kind more than the
					// other.
					for _, k := range mrand.Perm(len(kinds)) {
						runtime.GC()
						got := a.post(t, kinds[k].enc)
						if first == nil {
							first = &got
						}
						if got.status != first.status || got.body != first.body || got.logged != first.logged {
							t.Fatalf("%s answered differently:\n%d %s\n%s\nagainst\n%d %s\n%s", kinds[k].name,
								got.status, got.body, got.logged, first.status, first.body, first.logged)
						}
						if round >= warmUp {
							times[k] = append(times[k], got.took)
						}
					}
				}
				if first.status != http.StatusBadRequest || !strings.Contains(first.body, "could not be decrypted") {
					t.Fatalf("answer %d %s", first.status, first.body)
				}
				// Each round's two times are taken side by side, so their
				// ratio cancels what a loaded machine changes slowly (the
				// other core's work, the caches, the clock): the median of
				// the rounds' ratios, as the benchmarks compare.
				ratios := make([]float64, len(times[0]))
				for i := range ratios {
					ratios[i] = float64(times[0][i]) / float64(times[1][i])
				}
				slices.Sort(ratios)
				r := ratios[len(ratios)/2]
				ratio = max(r, 1/r)
				m0, m1 := loadtest.Median(times[0]), loadtest.Median(times[1])
				t.Logf("attempt %d: median %s %v, %s %v: median of the rounds' ratios %.2f", attempt, kinds[0].name, m0, kinds[1].name, m1, ratio)
				if ratio <= maxRatio {
					return
				}
			}
			t.Fatalf("the two kinds take different times: ratio %.2f over %d attempts", ratio, attempts)
		})
	}
}
