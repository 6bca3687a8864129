//go:build !race

package loadtest

const defaultSignIns = 1_000_000
