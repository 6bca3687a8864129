//go:build interop

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeVulnDB writes a vulnerability database, laid out as govulncheck's
// -db file:// reads it, with one made-up entry: yaml.v3's Unmarshal is
// vulnerable in every version.
func fakeVulnDB(t *testing.T) string {
	t.Helper()
	db := t.TempDir()
	files := map[string]string{
		"index/db.json":      `{"modified":"2026-01-01T00:00:00Z"}`,
		"index/modules.json": `[{"path":"gopkg.in/yaml.v3","vulns":[{"id":"GO-2099-0001","modified":"2026-01-01T00:00:00Z"}]}]`,
		"index/vulns.json":   `[{"id":"GO-2099-0001","modified":"2026-01-01T00:00:00Z","aliases":[]}]`,
		"ID/GO-2099-0001.json": `{"schema_version":"1.3.1","id":"GO-2099-0001","modified":"2026-01-01T00:00:00Z","published":"2026-01-01T00:00:00Z",` +
			`"summary":"A made-up flaw in yaml.Unmarshal, for the test of .ci/deps","details":"Not real.",` +
			`"affected":[{"package":{"name":"gopkg.in/yaml.v3","ecosystem":"Go"},"ranges":[{"type":"SEMVER","events":[{"introduced":"0"}]}],` +
			`"ecosystem_specific":{"imports":[{"path":"gopkg.in/yaml.v3","symbols":["Unmarshal"]}]}}]}`,
	}
	for name, body := range files {
		p := filepath.Join(db, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

// module writes a module of its own with main.go and tidies it.
func module(t *testing.T, requires, main string) string {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/app\n\ngo 1.26.0\n\nrequire (\n"+requires+")\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "main.go"), []byte(main), 0o644)
	tidy := exec.Command("go", "mod", "tidy")
	tidy.Dir = dir
	tidy.Env = append(os.Environ(), "GOWORK=off", "GOSUMDB=off", "GOFLAGS=-mod=mod")
	if out, err := tidy.CombinedOutput(); err != nil {
		t.Fatalf("go mod tidy: %v\n%s", err, out)
	}
	return dir
}

// ciDeps runs .ci/deps on dir against db and returns its exit status and
// output.
func ciDeps(t *testing.T, db, dir string) (int, string) {
	t.Helper()
	cmd := exec.Command("../../.ci/deps", dir)
	cmd.Env = append(os.Environ(), "VULNDB="+db)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

// .ci/deps with the real govulncheck and the proxy: a module whose code
// calls the vulnerable function fails the run; a module with a newer
// release of a direct dependency, which imports the vulnerable package
// without calling the function, passes, the update and the finding listed.
func TestCIDepsWithGovulncheck(t *testing.T) {
	db := fakeVulnDB(t)

	called := module(t, "\tgopkg.in/yaml.v3 v3.0.1\n", `package main

import "gopkg.in/yaml.v3"

func main() {
	var v map[string]any
	yaml.Unmarshal([]byte("a: 1"), &v)
}
`)
	status, out := ciDeps(t, db, called)
	if status != 1 || !strings.Contains(out, "GO-2099-0001 gopkg.in/yaml.v3@v3.0.1 (no fix yet): called: gopkg.in/yaml.v3.Unmarshal, from example.com/app.main") ||
		!strings.Contains(out, "FAIL: a vulnerable function is reachable") {
		t.Fatalf("reachable vulnerability: exit %d\n%s", status, out)
	}

	updateOnly := module(t, "\tgithub.com/go-jose/go-jose/v4 v4.1.8\n\tgopkg.in/yaml.v3 v3.0.1\n", `package main

import (
	"fmt"

	"github.com/go-jose/go-jose/v4"
	"gopkg.in/yaml.v3"
)

func main() {
	b, _ := yaml.Marshal(map[string]int{"a": 1})
	fmt.Println(string(b), jose.RS256)
}
`)
	status, out = ciDeps(t, db, updateOnly)
	if status != 0 || !strings.Contains(out, "github.com/go-jose/go-jose/v4 v4.1.8 -> v4.") ||
		!strings.Contains(out, "GO-2099-0001 gopkg.in/yaml.v3@v3.0.1 (no fix yet): imported, not called") {
		t.Fatalf("update and an unreachable vulnerability: exit %d\n%s", status, out)
	}
}

// .ci/deps on this repository's root module: its tools (internal/apicheck)
// import modules that only internal/devdeps requires, so govulncheck must
// load the root in the workspace, as the tests build it; alone, the
// packages do not load and the report is a tool failure (exit 2).
func TestCIDepsOnTheRepository(t *testing.T) {
	db := fakeVulnDB(t)
	status, out := ciDeps(t, db, "../..")
	if status == 2 || !strings.Contains(out, "== github.com/extauth/extauth (") || strings.Contains(out, "loading packages") {
		t.Fatalf("the repository's root module: exit %d\n%s", status, out)
	}
}
