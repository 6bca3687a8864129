//go:build race

package loadtest

const defaultSignIns = 100_000
