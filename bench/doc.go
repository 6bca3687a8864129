// Package bench holds extauth's side-by-side benchmarks: each runs a route of
// extauth and what a Go developer would otherwise write or pick (x/oauth2 by
// hand, gothic, crewjam/saml, go-oidc) on the same inputs, in one process.
// Run them with -rounds N so that the sides alternate in N rounds, and read
// the median of per-round ratios with internal/benchratio:
//
//	go test -run XXX -bench . -benchmem ./bench/ -rounds 8 | go run ./internal/benchratio
//
// BENCHMARKS.md at the repository root holds the figures.
package bench
