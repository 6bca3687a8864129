//go:build devdeps

// Package devdeps holds the requirements of what only the library's own
// tests import, so that the library's go.mod, which every importing
// application reads, does not.
//
// The test files that import these stay in the library's module, where
// `go test ./...` finds them; the repository's go.work adds this module to
// the build, so they compile there. Nothing builds this file: its imports
// only keep `go mod tidy` in this directory from dropping the requirements.
// The examples, the benchmarks and the API record's checker are modules of
// their own (examples/, bench/, internal/apicheck/), with their own go.mod.
// docs/development.md says how to add one.
package devdeps

import (
	// Routers other than ServeMux: the routes mounted under them in the
	// root package's tests and examples.
	_ "github.com/go-chi/chi/v5"
	_ "github.com/gorilla/mux"

	// The OpenTelemetry SDK: the tests that read extauth's instruments.
	// The library imports the API only.
	_ "go.opentelemetry.io/otel/sdk/metric"
	_ "go.opentelemetry.io/otel/sdk/trace"

	// The release gate's tests: module versions and zips.
	_ "golang.org/x/mod/semver"
)
