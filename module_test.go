package extauth_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// An application that imports extauth gets in its module graph (and its
// go.sum) what extauth's packages need and nothing that only extauth's
// examples, browser tests, router tests or benchmarks need: those modules
// are internal/devdeps' requirements, which the repository's go.work adds
// to the build and which no importer ever reads (docs/development.md).
//
// The test makes that importer: a fresh module that imports every package
// of the library an application may import, with extauth replaced by this
// tree, and lets the go command resolve it. Every module in its graph must
// then be one its build uses, one that such a module's own go.mod requires
// (goth's go.mod, for instance, names chi and gorilla/mux at versions of
// its own), or one that go mod why says the importer needs; a module that
// is there only because extauth's go.mod requires it is a leak.
func TestImportersGetOnlyTheLibrarysModules(t *testing.T) {
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	pkgs := libraryPackages(t, root)
	// The library alone: the stores' drivers are not in its graph, since
	// the stores are modules of their own (go-redis and pgx are what they
	// require).
	t.Run("library", func(t *testing.T) {
		graph := checkImporter(t, root, pkgs, nil)
		for _, mv := range graph {
			for _, driver := range []string{"github.com/redis/", "github.com/jackc/"} {
				if strings.HasPrefix(mv, driver) {
					t.Errorf("an importer of the library alone has %s in its module graph", mv)
				}
			}
		}
	})
	// The library and both store modules, as a host that shares its state
	// imports them.
	t.Run("stores", func(t *testing.T) {
		all := slices.Clone(pkgs)
		for _, m := range storeModules {
			all = append(all, "github.com/extauth/extauth/"+m)
		}
		checkImporter(t, root, all, storeModules)
	})
}

// storeModules are the library's nested modules, each one package: the
// shared stores, whose drivers only their importers need.
var storeModules = []string{"redisstore", "pgstore"}

// checkImporter makes an importer of pkgs, requiring the library and the
// nested modules stores, each replaced by its directory in root, and fails
// on any module of its graph that only the library's or a store's go.mod
// brings. It returns the graph.
func checkImporter(t *testing.T, root string, pkgs, stores []string) []string {
	t.Helper()
	dir := t.TempDir()
	var src strings.Builder
	src.WriteString("package main\n\nimport (\n")
	for _, p := range pkgs {
		fmt.Fprintf(&src, "\t_ %q\n", p)
	}
	src.WriteString(")\n\nfunc main() {}\n")
	write(t, filepath.Join(dir, "main.go"), src.String())
	const zero = " v0.0.0-00010101000000-000000000000\n"
	var mod strings.Builder
	mod.WriteString("module example.com/importer\n\ngo 1.26.0\n\nrequire github.com/extauth/extauth" + zero)
	for _, m := range stores {
		mod.WriteString("require github.com/extauth/extauth/" + m + zero)
	}
	mod.WriteString("\nreplace github.com/extauth/extauth => " + root + "\n")
	for _, m := range stores {
		mod.WriteString("replace github.com/extauth/extauth/" + m + " => " + filepath.Join(root, m) + "\n")
	}
	write(t, filepath.Join(dir, "go.mod"), mod.String())
	// The go.sum files of the library and of the stores hold the checksums
	// their graphs need, a superset of the importer's.
	var sums []byte
	for _, m := range append([]string{"."}, stores...) {
		b, err := os.ReadFile(filepath.Join(root, m, "go.sum"))
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, b...)
	}
	write(t, filepath.Join(dir, "go.sum"), string(sums))
	// What the other modules of the workspace require for the tests, the
	// examples and the benchmarks.
	devdeps := map[string]bool{}
	for _, m := range []string{"internal/devdeps", "examples", "bench", "internal/apicheck"} {
		n := 0
		for _, r := range goModRequires(t, filepath.Join(root, m, "go.mod")) {
			if !r.Indirect && r.Path != "github.com/extauth/extauth" {
				devdeps[r.Path] = true
				n++
			}
		}
		if n == 0 {
			t.Fatalf("%s requires nothing", m)
		}
	}
	// The module cache serves it; the proxy only what the cache lacks, such
	// as a dependency's test dependencies on a fresh machine.
	env := []string{"GOWORK=off", "GOFLAGS=-mod=mod", "GOSUMDB=off", "GOTOOLCHAIN=local"}

	// The modules the importer's build uses, at their selected versions.
	used := map[string]bool{}
	for _, mv := range lines(goCmd(t, dir, env, "list", "-deps", "-f", "{{with .Module}}{{.Path}}@{{.Version}}{{end}}", ".")) {
		used[mv] = true
	}
	// The library, at the version the stores require (the requirement
	// above is older), from root.
	self := ""
	for mv := range used {
		if modulePath(mv) == "github.com/extauth/extauth" {
			self = mv
		}
	}
	if self == "" {
		t.Fatalf("the importer does not build extauth: %v", used)
	}

	// What those modules' go.mod files require, transitively, extauth's and
	// the importer's own requirements left out.
	edges := map[string][]string{}
	for _, l := range lines(goCmd(t, dir, env, "mod", "graph")) {
		from, to, ok := strings.Cut(l, " ")
		if !ok {
			t.Fatalf("go mod graph: %q", l)
		}
		edges[from] = append(edges[from], to)
	}
	allowed := map[string]bool{}
	var queue []string
	for mv := range used {
		allowed[mv] = true
		if mv != self {
			queue = append(queue, mv)
		}
	}
	for len(queue) > 0 {
		mv := queue[0]
		queue = queue[1:]
		for _, to := range edges[mv] {
			if !allowed[to] {
				allowed[to] = true
				queue = append(queue, to)
			}
		}
	}

	allowedPath := map[string]bool{}
	for mv := range allowed {
		allowedPath[modulePath(mv)] = true
	}
	graph := lines(goCmd(t, dir, env, "list", "-m", "-f", "{{if not .Main}}{{.Path}}@{{.Version}}{{end}}", "all"))
	var unreached []string
	for _, mv := range graph {
		if !allowedPath[modulePath(mv)] {
			unreached = append(unreached, modulePath(mv))
		}
	}
	// Pruning also hides why some are there: yaml.v3's tests, which are in
	// the importer's "all", need kr/text through check.v1 and kr/pretty,
	// whose go.mod files the pruned graph does not load. go mod why says.
	var leaked []string
	if len(unreached) > 0 {
		why := goCmd(t, dir, env, append([]string{"mod", "why", "-m"}, unreached...)...)
		for _, block := range strings.Split(why, "# ")[1:] {
			path, rest, _ := strings.Cut(block, "\n")
			if strings.HasPrefix(strings.TrimSpace(rest), "(main module does not need") {
				leaked = append(leaked, path)
			}
		}
	}
	if len(leaked) > 0 {
		t.Errorf("an importer's module graph holds %d modules that only extauth's go.mod brings, which its packages do not need:\n\t%s\n"+
			"if only examples or tests import them, require them in internal/devdeps (docs/development.md), and run .ci/tidy",
			len(leaked), strings.Join(leaked, "\n\t"))
	}
	// Pruning hides what the go.mod files of most modules in the graph
	// require, so versions are not checked in general, but the modules of
	// internal/devdeps are: goth's go.mod names chi, gorilla/mux and
	// gorilla/sessions, at the versions an importer may get; a higher one
	// would be extauth's.
	for _, mv := range graph {
		if devdeps[modulePath(mv)] && !allowed[mv] {
			t.Errorf("an importer's module graph holds %s, at the version internal/devdeps requires", mv)
		}
		for _, heavy := range []string{"github.com/chromedp/", "modernc.org/", "github.com/prometheus/", "google.golang.org/protobuf"} {
			if strings.HasPrefix(mv, heavy) {
				t.Errorf("an importer's module graph holds %s", mv)
			}
		}
	}
	if len(graph) < 10 || len(used) < 10 {
		t.Fatalf("implausibly small graph (%d) or build (%d): %v", len(graph), len(used), graph)
	}
	t.Logf("the importer of %d packages builds from %d modules; its module graph holds %d", len(pkgs), len(used), len(graph))
	return graph
}

// The library's own tests run with the versions its go.mod names, which
// are those an importer gets: the other modules of go.work (internal/devdeps,
// examples, bench) must not raise any of them.
func TestWorkspaceKeepsTheLibrarysVersions(t *testing.T) {
	if _, err := os.Stat("go.work"); err != nil {
		t.Fatalf("the repository's go.work: %v", err)
	}
	lib := goModRequires(t, "go.mod")
	if len(lib) == 0 {
		t.Fatal("go.mod requires nothing")
	}
	selected := map[string]string{}
	for _, l := range lines(goCmd(t, ".", nil, "list", "-m", "-f", "{{.Path}} {{.Version}}", "all")) {
		p, v, _ := strings.Cut(l, " ")
		selected[p] = v
	}
	for _, r := range lib {
		if selected[r.Path] != r.Version {
			t.Errorf("go.mod requires %s %s but the workspace builds with %q: raise it in go.mod or lower it in internal/devdeps", r.Path, r.Version, selected[r.Path])
		}
	}
	for _, d := range goModRequires(t, "internal/devdeps/go.mod") {
		if !d.Indirect && slices.ContainsFunc(lib, func(r requirement) bool { return r.Path == d.Path }) {
			t.Errorf("go.mod requires %s, which internal/devdeps holds for the examples and tests", d.Path)
		}
	}
}

// The workspace is every module of the repository: each directory holding a
// go.mod is in go.work, each module but the library's builds it from this
// tree (a replacement by the directory around it), and .ci/run tests each
// one the root's ./... does not reach (CI_MODULES).
func TestWorkspaceModules(t *testing.T) {
	var work struct{ Use []struct{ DiskPath string } }
	if err := json.Unmarshal([]byte(goCmd(t, ".", nil, "work", "edit", "-json")), &work); err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, u := range work.Use {
		used[filepath.ToSlash(filepath.Clean(u.DiskPath))] = true
	}
	found := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && path != ".") {
			return filepath.SkipDir
		}
		if d.Name() == "go.mod" {
			found[filepath.ToSlash(filepath.Dir(path))] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(used, found) {
		t.Errorf("go.work uses %v; the repository's modules are %v", slices.Sorted(maps.Keys(used)), slices.Sorted(maps.Keys(found)))
	}
	ci, err := os.ReadFile(".ci/run")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^CI_MODULES=\(([^)]*)\)`).FindSubmatch(ci)
	if m == nil {
		t.Fatal(".ci/run has no CI_MODULES=(...)")
	}
	listed := map[string]bool{}
	for _, f := range strings.Fields(string(m[1])) {
		listed[strings.TrimSuffix(strings.TrimPrefix(f, "./"), "/...")] = true
	}
	for dir := range found {
		if dir == "." || dir == "internal/devdeps" {
			continue
		}
		if !listed[dir] {
			t.Errorf(".ci/run's CI_MODULES lacks ./%s/...: CI would not vet or test it", dir)
		}
		var mod struct {
			Module  struct{ Path string }
			Replace []struct{ Old, New struct{ Path string } }
		}
		if err := json.Unmarshal([]byte(goCmd(t, ".", nil, "mod", "edit", "-json", dir+"/go.mod")), &mod); err != nil {
			t.Fatal(err)
		}
		// The library is the tree around the module: ../ for bench,
		// ../../ for internal/apicheck.
		root := strings.Repeat("../", strings.Count(dir, "/")+1)
		if !slices.ContainsFunc(mod.Replace, func(r struct{ Old, New struct{ Path string } }) bool {
			return r.Old.Path == "github.com/extauth/extauth" && r.New.Path == root
		}) {
			t.Errorf("%s/go.mod does not replace github.com/extauth/extauth with %s", dir, root)
		}
	}
	if len(listed) < 2 {
		t.Errorf("CI_MODULES lists %v", listed)
	}
}

type requirement struct {
	Path, Version string
	Indirect      bool
}

// goModRequires reads a go.mod file's requirements.
func goModRequires(t *testing.T, gomod string) []requirement {
	t.Helper()
	var mod struct{ Require []requirement }
	if err := json.Unmarshal([]byte(goCmd(t, ".", nil, "mod", "edit", "-json", gomod)), &mod); err != nil {
		t.Fatal(err)
	}
	return mod.Require
}

func modulePath(mv string) string {
	p, _, _ := strings.Cut(mv, "@")
	return p
}

// libraryPackages lists the packages of the library an application may
// import: not commands, not internal ones, not the examples'.
func libraryPackages(t *testing.T, root string) []string {
	t.Helper()
	var pkgs []string
	for _, l := range lines(goCmd(t, root, nil, "list", "-f", "{{.Name}} {{.ImportPath}}", "./...")) {
		name, path, _ := strings.Cut(l, " ")
		rel := strings.TrimPrefix(path, "github.com/extauth/extauth")
		if name == "main" || strings.HasPrefix(rel, "/examples/") || strings.HasPrefix(rel, "/bench") || strings.HasPrefix(rel, "/interop") ||
			slices.Contains(strings.Split(rel, "/"), "internal") {
			continue
		}
		pkgs = append(pkgs, path)
	}
	sort.Strings(pkgs)
	for _, want := range []string{"github.com/extauth/extauth", "github.com/extauth/extauth/extauthtest", "github.com/extauth/extauth/providers", "github.com/extauth/extauth/samlsp"} {
		if !slices.Contains(pkgs, want) {
			t.Fatalf("library packages %v lack %s", pkgs, want)
		}
	}
	return pkgs
}

func goCmd(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s (in %s): %v\n%s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return string(out)
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
