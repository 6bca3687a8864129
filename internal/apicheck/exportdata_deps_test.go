package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestAPI loads the export data of every package of the module (go list
// -export), and the go command compiles what its build cache lacks. These
// imports make every package of the module that this package may import
// a dependency of this test binary, so that go test ./... has compiled
// them, and what they import, before TestAPI runs, and TestAPI's go list
// finds them in the cache. Without them, from an empty build cache,
// TestAPI compiled go-redis, pgx and the stores beside go test, which was
// compiling them too (TestAPI took 82 s of a cold go test ./...).
import (
	_ "github.com/extauth/extauth"
	_ "github.com/extauth/extauth/extauthtest"
	_ "github.com/extauth/extauth/extauthtest/enterprise"
	_ "github.com/extauth/extauth/extauthtest/forge"
	_ "github.com/extauth/extauth/extauthtest/graph"
	_ "github.com/extauth/extauth/extauthtest/oauth1"
	_ "github.com/extauth/extauth/extauthtest/oidcop"
	_ "github.com/extauth/extauth/extauthtest/samlidp"
	_ "github.com/extauth/extauth/extauthtest/wpoauth"
	_ "github.com/extauth/extauth/internal/devpage"
	_ "github.com/extauth/extauth/internal/harness"
	_ "github.com/extauth/extauth/internal/loadtest"
	_ "github.com/extauth/extauth/internal/mock"
	_ "github.com/extauth/extauth/internal/oauth1"
	_ "github.com/extauth/extauth/internal/oidfed"
	_ "github.com/extauth/extauth/internal/outbound"
	_ "github.com/extauth/extauth/internal/pages"
	_ "github.com/extauth/extauth/internal/pemdiag"
	_ "github.com/extauth/extauth/internal/pgtest"
	_ "github.com/extauth/extauth/internal/redact"
	_ "github.com/extauth/extauth/internal/redistest"
	_ "github.com/extauth/extauth/internal/safepath"
	_ "github.com/extauth/extauth/internal/seal"
	_ "github.com/extauth/extauth/internal/spelling"
	_ "github.com/extauth/extauth/internal/store"
	_ "github.com/extauth/extauth/internal/telemetry"
	_ "github.com/extauth/extauth/internal/testkeys"
	_ "github.com/extauth/extauth/interop"
	_ "github.com/extauth/extauth/providers"
	_ "github.com/extauth/extauth/samlsp"
)

// Every package of the module that TestAPI's go list compiles is built
// before TestAPI runs: imported above, or a dependency of what is (a
// command is compiled for its own tests, and packages under another
// internal directory for those that import them).
func TestAPIFindsItsExportDataBuilt(t *testing.T) {
	deps := goList(t, ".", "list", "-deps", "-test", "-f", "{{.ImportPath}}", ".")
	for i, p := range deps {
		deps[i], _, _ = strings.Cut(p, " ")
	}
	for _, p := range goList(t, "../..", "list", "-f", `{{if and (ne .Name "main") .GoFiles}}{{.ImportPath}}{{end}}`, "./...") {
		if !slices.Contains(deps, p) {
			t.Errorf("%s is not a dependency of internal/apicheck's tests: import it in exportdata_deps_test.go, or TestAPI compiles it beside go test from an empty build cache", p)
		}
	}
}

func goList(t *testing.T, dir string, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	return strings.Fields(string(out))
}
