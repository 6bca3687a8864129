// Package bench holds side-by-side benchmarks of extauth against the
// libraries it wraps or replaces, run in one process with the sides
// alternating in rounds so that machine noise hits both alike. It has no
// code of its own: everything is in its _test.go files. BENCHMARKS.md at the
// repository root says how to run them and what they showed.
package bench
