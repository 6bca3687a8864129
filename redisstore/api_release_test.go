//go:build release

package redisstore_test

import (
	"os/exec"
	"testing"
)

// TestAPI holds this module to the repository's API record (api/next.txt
// at its root) and CHANGELOG.md, as the library's own TestAPI holds the
// library: the store is released with it, under the same version. It runs
// apicheck from the repository's root, so it runs in a checkout, with the
// release gate's tests (go test -tags release), not from a module cache.
func TestAPI(t *testing.T) {
	cmd := exec.Command("go", "run", "./internal/apicheck", "-check", "-module", "redisstore")
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v:\n%s\nRegenerate the record from the repository's root with go run ./internal/apicheck (docs/development.md#the-api-record).", err, out)
	}
	t.Logf("%s", out)
}
