package main

import (
	"strings"
	"testing"
)

func TestReport(t *testing.T) {
	in := `goos: linux
BenchmarkX/extauth-2   	  100	  100.0 ns/op	  10 B/op	  1 allocs/op
BenchmarkX/anchor-2    	  100	  200.0 ns/op	  20 B/op	  2 allocs/op
BenchmarkX/extauth#01-2   	  100	  300.0 ns/op	  10 B/op	  1 allocs/op
BenchmarkX/anchor#01-2    	  100	  100.0 ns/op	  20 B/op	  2 allocs/op
BenchmarkX/extauth#02-2   	  100	  100.0 ns/op	  10 B/op	  1 allocs/op
BenchmarkX/anchor-2    	  100	  100.0 ns/op	  20 B/op	  2 allocs/op
`
	var out strings.Builder
	if err := report(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	// Per-round ratios 0.5, 3, 1: the median is 1, not the ratio of sums.
	if !strings.Contains(out.String(), "1.00x") || !strings.Contains(out.String(), "0.50–3.00") || !strings.Contains(out.String(), "0.50x") {
		t.Errorf("report:\n%s", out.String())
	}
}
