//go:build devdeps

// Package devdeps holds the requirements of what only extauth's own
// examples, browser tests, router tests and benchmarks import, so that the
// library's go.mod, which every importing application reads, does not.
//
// The packages that import these stay in the library's module, where
// `go test ./...` finds them; the repository's go.work adds this module to
// the build, so they compile there. Nothing builds this file: its imports
// only keep `go mod tidy` in this directory from dropping the requirements.
// docs/development.md says how to add one.
package devdeps

import (
	// The browser suite (examples/demo, -tags e2e).
	_ "github.com/chromedp/cdproto"
	_ "github.com/chromedp/chromedp"

	// Routers other than ServeMux: examples/hostapp, and the routes mounted
	// under them in the root package's tests and examples.
	_ "github.com/go-chi/chi/v5"
	_ "github.com/gorilla/mux"

	// gothic's session store, in bench's side-by-side benchmarks.
	_ "github.com/gorilla/sessions"

	// examples/hostapp's users, in SQLite without cgo.
	_ "modernc.org/sqlite"

	// The OpenTelemetry SDK and its Prometheus exporter: the tests that
	// read extauth's instruments, bench's figures with an SDK installed,
	// and the demo's /metrics. The library imports the API only.
	_ "github.com/prometheus/client_golang/prometheus"
	_ "go.opentelemetry.io/otel/exporters/prometheus"
	_ "go.opentelemetry.io/otel/sdk/metric"
	_ "go.opentelemetry.io/otel/sdk/trace"

	// internal/apicheck: the exported API's record, and apidiff's verdict
	// on the changes since the latest release.
	_ "golang.org/x/exp/apidiff"
	_ "golang.org/x/mod/semver"
	_ "golang.org/x/tools/go/gcexportdata"
	_ "golang.org/x/tools/go/packages"
)
