package bench

import (
	"flag"
	"testing"
)

var rounds = flag.Int("rounds", 1, "how many times each benchmark runs its sides, alternating")

// side is one side of a comparison: extauth's, or an anchor's.
type side struct {
	name string
	run  func(b *testing.B)
}

// alternate runs the sides one after the other, *rounds times, as
// sub-benchmarks named after them (repeats get #01, #02...): round n of each
// side ran within moments of the others', so a busy machine slows all alike.
// internal/benchratio pairs them by round.
func alternate(b *testing.B, sides ...side) {
	for range *rounds {
		for _, s := range sides {
			b.Run(s.name, s.run)
		}
	}
}
