// Command benchratio reads `go test -bench -count N` output and prints, for
// each benchmark whose sub-benchmarks are extauth's side and an anchor's
// (named extauth... and anything else), the median of the per-round ratios
// extauth/anchor of ns/op, B/op and allocs/op, with their range.
//
//	go test -run XXX -bench . -benchmem ./bench/ -rounds 8 | go run ./internal/benchratio
//
// Rounds pair the n-th run of each side: bench's alternate runs the sides
// one after the other in each round, so that both sides of a round ran
// within moments of each other on the same, possibly busy, machine.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// line matches a result; the name loses its -GOMAXPROCS suffix and the #NN
// that repeats of a sub-benchmark get, so that rounds pair by order.
var line = regexp.MustCompile(`^(Benchmark\S+?)(?:#\d+)?(?:-\d+)?\s+\d+\s+([\d.]+) ns/op(?:\s+([\d.]+) B/op)?(?:\s+([\d.]+) allocs/op)?`)

type run struct{ ns, bytes, allocs float64 }

func main() {
	if err := report(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchratio:", err)
		os.Exit(1)
	}
}

func report(in io.Reader, out io.Writer) error {
	runs := map[string][]run{}
	var order []string
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		name := m[1]
		if _, ok := runs[name]; !ok {
			order = append(order, name)
		}
		r := run{}
		r.ns, _ = strconv.ParseFloat(m[2], 64)
		r.bytes, _ = strconv.ParseFloat(m[3], 64)
		r.allocs, _ = strconv.ParseFloat(m[4], 64)
		runs[name] = append(runs[name], r)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	// Group sub-benchmarks by their parent: Benchmark/X/extauth vs Benchmark/X/anchor.
	groups := map[string][]string{}
	var parents []string
	for _, name := range order {
		i := strings.LastIndexByte(name, '/')
		if i < 0 {
			continue
		}
		p := name[:i]
		if _, ok := groups[p]; !ok {
			parents = append(parents, p)
		}
		groups[p] = append(groups[p], name)
	}
	fmt.Fprintf(out, "%-50s %-28s %8s %16s %8s %8s %6s\n", "benchmark", "anchor", "ratio", "range", "B", "allocs", "rounds")
	for _, p := range parents {
		var ours string
		for _, n := range groups[p] {
			if strings.HasPrefix(n[len(p)+1:], "extauth") {
				ours = n
			}
		}
		if ours == "" {
			continue
		}
		for _, other := range groups[p] {
			if other == ours {
				continue
			}
			a, b := runs[ours], runs[other]
			n := min(len(a), len(b))
			if n == 0 {
				continue
			}
			var ns, by, al []float64
			for i := range n {
				ns = append(ns, a[i].ns/b[i].ns)
				if b[i].bytes > 0 {
					by = append(by, a[i].bytes/b[i].bytes)
				}
				if b[i].allocs > 0 {
					al = append(al, a[i].allocs/b[i].allocs)
				}
			}
			fmt.Fprintf(out, "%-50s %-28s %7.2fx %7.2f–%-7.2f %7.2fx %7.2fx %6d\n", ours, other[len(p)+1:],
				median(ns), slices.Min(ns), slices.Max(ns), median(by), median(al), n)
		}
	}
	return nil
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
