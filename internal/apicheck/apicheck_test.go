package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestAPI holds extauth itself to its record: the exported API of every
// public package is api/next.txt, and every change since the latest
// release is named in CHANGELOG.md's [Unreleased] section, a breaking one
// in an entry marked **Breaking**. On failure, regenerate the record with
// "go run ./internal/apicheck" and write the changelog's lines
// (docs/development.md#the-api-record).
func TestAPI(t *testing.T) {
	r, err := check(filepath.Join("..", ".."), nil, ".")
	if err != nil {
		t.Fatal(err)
	}
	if !r.ok() {
		t.Errorf("%s", r)
	}
	t.Logf("%s", r.summary())
}

// The checker over a module of its own: a release recorded, then scratch
// changes to the code, each of which must fail the check until the record
// and the changelog follow it, and be told compatible or breaking.
func TestCheckerTellsAdditionsFromBreaks(t *testing.T) {
	m := newScratchModule(t)
	m.write("m.go", `package m

// T is a value.
type T struct{ A int }

// F does nothing.
func F() {}
`)
	m.write("sub/sub.go", "package sub\n\n// S is another.\ntype S struct{ B string }\n")
	m.write("internal/in/in.go", "package in\n\n// X is internal.\nfunc X() {}\n")
	m.write("cmd/tool/main.go", "package main\n\n// Y is a command's.\nfunc Y() {}\n\nfunc main() {}\n")
	m.changelog("becomes **v0.2.0**", "")
	m.release("v0.1.0")
	m.regenerate()
	m.wantOK()
	lines := m.lines(nextFile)
	for _, want := range []string{
		"pkg example.com/m, func F()",
		"pkg example.com/m, type T struct",
		"pkg example.com/m, type T struct, A int",
		"pkg example.com/m/sub, type S struct, B string",
	} {
		if !slices.Contains(lines, want) {
			t.Errorf("the record lacks %q:\n%s", want, strings.Join(lines, "\n"))
		}
	}
	for _, l := range lines {
		if strings.Contains(l, "internal") || strings.Contains(l, "tool") {
			t.Errorf("the record holds what no host may import: %q", l)
		}
	}

	// An addition fails the check until the record and a changelog line
	// name it; it is compatible.
	m.write("m.go", `package m

// T is a value.
type T struct{ A int }

// F does nothing.
func F() {}

// G is new.
func G() {}
`)
	r := m.check()
	if !slices.Equal(r.added, []string{"pkg example.com/m, func G()"}) || len(r.removed) != 0 {
		t.Errorf("record diff: added %q, removed %q", r.added, r.removed)
	}
	m.wantUnnamed(r, "G: added", true)
	if !strings.Contains(r.String(), regenerate) {
		t.Errorf("the report does not say how to regenerate the record:\n%s", r)
	}
	m.regenerate()
	m.wantUnnamed(m.check(), "G: added", true)
	m.changelog("becomes **v0.2.0**", "### Added\n\n- `G`, which does nothing too.\n")
	m.wantOK()

	// A removal fails the check and is breaking: a changelog line naming
	// it is not enough without the **Breaking** mark.
	m.write("m.go", `package m

// T is a value.
type T struct{ A int }

// G is new.
func G() {}
`)
	r = m.check()
	if !slices.Equal(r.removed, []string{"pkg example.com/m, func F()"}) {
		t.Errorf("record diff: removed %q", r.removed)
	}
	m.wantUnnamed(r, "F: removed", false)
	if !strings.Contains(r.String(), "BREAKING:   F: removed") {
		t.Errorf("the report does not call the removal breaking:\n%s", r)
	}
	m.regenerate()
	m.changelog("becomes **v0.2.0**", "### Added\n\n- `G`, which does nothing too.\n\n### Removed\n\n- `F`.\n")
	m.wantUnnamed(m.check(), "F: removed", false)
	m.changelog("becomes **v0.2.0**", "### Added\n\n- `G`, which does nothing too.\n\n### Removed\n\n- **Breaking** `F`: call `G`\n  instead ([upgrading](docs/upgrading.md)).\n")
	m.wantOK()
	m.changelog("becomes **v0.2.0**", "### Added\n\n- `G`, which does nothing too.\n\n### Removed\n\n- **Breaking:** `F`: call `G`\n  instead ([upgrading](docs/upgrading.md)).\n")
	m.wantOK()

	// A struct that stops being comparable is a breaking change that no
	// exported name shows; the record says it too.
	m.write("m.go", `package m

// T is a value.
type T struct {
	_ [0]func()
	A int
}

// G is new.
func G() {}
`)
	r = m.check()
	if !slices.Equal(r.added, []string{"pkg example.com/m, type T struct, not comparable"}) {
		t.Errorf("record diff: added %q", r.added)
	}
	m.wantUnnamed(r, "T: old is comparable, new is not", false)

	// A breaking change before v1 needs the next minor version.
	m.regenerate()
	m.changelog("becomes **v0.1.1**", "### Added\n\n- `G`.\n\n### Changed\n\n- **Breaking** `F` is gone and `T` cannot be compared ([upgrading](docs/upgrading.md)).\n")
	r = m.check()
	if r.least != "v0.2.0" || len(r.problems) != 1 || !strings.Contains(r.problems[0], "need at least v0.2.0") {
		t.Errorf("version v0.1.1 for a breaking change: least %s, problems %q", r.least, r.problems)
	}
	m.changelog("becomes **v0.2.0**", "### Added\n\n- `G`.\n\n### Changed\n\n- **Breaking** `F` is gone and `T` cannot be compared ([upgrading](docs/upgrading.md)).\n")
	m.wantOK()

	// A deprecation is named under Deprecated.
	m.write("sub/sub.go", "package sub\n\n// S is another.\n//\n// Deprecated: use m.T.\ntype S struct{ B string }\n")
	m.regenerate()
	if !slices.Contains(m.lines(nextFile), "pkg example.com/m/sub, type S //deprecated") {
		t.Errorf("the record does not mark S deprecated:\n%s", strings.Join(m.lines(nextFile), "\n"))
	}
	m.wantUnnamed(m.check(), "pkg example.com/m/sub, type S: deprecated", true)
	m.changelog("becomes **v0.2.0**", "### Added\n\n- `G`.\n\n### Changed\n\n- **Breaking** `F` is gone and `T` cannot be compared ([upgrading](docs/upgrading.md)).\n\n### Deprecated\n\n- `sub.S`: use `m.T`.\n")
	m.wantOK()

	// Internal packages and commands are no one's API.
	m.write("internal/in/in.go", "package in\n\n// Z is internal.\nfunc Z() {}\n")
	m.write("cmd/tool/main.go", "package main\n\nfunc main() {}\n")
	m.wantOK()

	// A release records its API, and the changelog's latest release must be
	// that one: only its export data is kept.
	m.release("v0.2.0")
	r = m.check()
	if r.baseline != "v0.2.0" || len(r.problems) == 0 || !strings.Contains(r.problems[0], `latest release is "v0.1.0"`) {
		t.Errorf("after recording v0.2.0 with the changelog unchanged: baseline %s, problems %q", r.baseline, r.problems)
	}
	if _, err := os.Stat(filepath.Join(m.dir, apiDir, "v0.1.0.zip")); !os.IsNotExist(err) {
		t.Errorf("v0.1.0's export data is kept after v0.2.0's: %v", err)
	}
	m.writeChangelog("# Changelog\n\n## [Unreleased]\n\nThis becomes **v0.2.1**.\n\n## [v0.2.0] - 2026-11-26\n\n## [v0.1.0] - 2026-11-21\n")
	m.wantOK()
}

// A nested module that a host may require (a store with dependencies of
// its own) is released with the module and held to the same record; a
// nested module of tests is not. A check of one module alone covers only
// its own lines and changes, so that the root's go test need not compile
// a store's dependencies, and the store's tests check the store.
func TestCheckerCoversNestedModules(t *testing.T) {
	m := newScratchModule(t)
	m.write("m.go", "package m\n\n// F does nothing.\nfunc F() {}\n")
	m.write("store/go.mod", "module example.com/m/store\n\ngo 1.26.0\n")
	m.write("store/store.go", "package store\n\n// Store keeps nothing.\ntype Store struct{}\n")
	m.write("bench/go.mod", "module example.com/m/bench\n\ngo 1.26.0\n")
	m.write("bench/bench.go", "package bench\n\n// B is a benchmark's.\nfunc B() {}\n")
	m.changelog("becomes **v0.2.0**", "")
	m.release("v0.1.0")
	m.regenerate()
	m.wantOK()
	lines := m.lines(nextFile)
	if !slices.Contains(lines, "pkg example.com/m/store, type Store struct") {
		t.Errorf("the record lacks the nested store module:\n%s", strings.Join(lines, "\n"))
	}
	if slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "bench") }) {
		t.Errorf("the record holds the benchmarks' module:\n%s", strings.Join(lines, "\n"))
	}
	if !slices.Contains(m.lines(filepath.Join(apiDir, "v0.1.0.txt")), "pkg example.com/m/store, type Store struct") {
		t.Errorf("the release record lacks the nested store module")
	}

	// A change to the store fails the full check and the store's own, and
	// not the root module's alone.
	m.write("store/store.go", "package store\n\n// Store keeps nothing.\ntype Store struct{}\n\n// New makes one.\nfunc New() *Store { return nil }\n")
	checkOnly := func(only string) *result {
		t.Helper()
		r, err := check(m.dir, m.env, only)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, only := range []string{"", "store"} {
		r := checkOnly(only)
		if !slices.Equal(r.added, []string{"pkg example.com/m/store, func New() *Store"}) || len(r.removed) != 0 {
			t.Errorf("check %q: record diff: added %q, removed %q", only, r.added, r.removed)
		}
		m.wantUnnamed(r, "./store.New: added", true)
	}
	if r := checkOnly("."); !r.ok() {
		t.Errorf("the root module's check fails on the store's change:\n%s", r)
	}

	// And a change to the root module is the store check's none.
	m.write("m.go", "package m\n")
	if r := checkOnly("store"); !slices.Equal(r.added, []string{"pkg example.com/m/store, func New() *Store"}) || len(r.removed) != 0 || len(r.unnamed) != 1 {
		t.Errorf("the store's check: added %q, removed %q, unnamed %v", r.added, r.removed, r.unnamed)
	}
	if r := checkOnly("."); !slices.Equal(r.removed, []string{"pkg example.com/m, func F()"}) || len(r.added) != 0 {
		t.Errorf("the root module's check: added %q, removed %q", r.added, r.removed)
	}
	if _, err := check(m.dir, m.env, "nowhere"); err == nil {
		t.Errorf("a check of a directory that holds no module passes")
	}
}

// The export data of a release reads back as the same API, and the same
// API always writes the same bytes. The module is loaded as a check loads
// it, not with a release's -trimpath: that changes only the directories
// the positions name, and would compile net/http and the standard library
// under it a second time, which go test has already compiled
// (TestCheckerTellsAdditionsFromBreaks records releases with -trimpath).
func TestExportDataRoundTrip(t *testing.T) {
	m := newScratchModule(t)
	m.write("m.go", "package m\n\nimport \"net/http\"\n\n// H serves.\ntype H struct{ Next http.Handler }\n\n// ServeHTTP serves.\nfunc (H) ServeHTTP(http.ResponseWriter, *http.Request) {}\n")
	mod, err := loadModule(m.dir, m.env, false, "")
	if err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	if err := writeExportData(&a, mod.fset, mod.Module); err != nil {
		t.Fatal(err)
	}
	if err := writeExportData(&b, mod.fset, mod.Module); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("the same API wrote different bytes")
	}
	back, err := readExportData(a.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	want, err := mod.features()
	if err != nil {
		t.Fatal(err)
	}
	got, err := (&module{Module: back}).features()
	if err != nil {
		t.Fatal(err)
	}
	if back.Path != "example.com/m" || !slices.Equal(got, want) {
		t.Errorf("read back %s:\n%s\nwant:\n%s", back.Path, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestChangeName(t *testing.T) {
	for msg, want := range map[string]string{
		"G: added":                                  "G",
		"(*Auth).Version: added":                    "Version",
		"Secret.Equal: added":                       "Equal",
		"Options.Foo: changed from int to string":   "Foo",
		"./providers.OIDC.Foo: added":               "Foo",
		"./extauthtest/oidcop.(*OP).Revoked: added": "Revoked",
		"package example.com/m/sub/deep: added":     "sub/deep",
		"package example.com/m: removed":            "example.com/m",
	} {
		if got := changeName(msg, "example.com/m"); got != want {
			t.Errorf("changeName(%q) = %q, want %q", msg, got, want)
		}
	}
}

// scratchModule is a module of the test's own, example.com/m, with an
// api/ directory and a changelog.
type scratchModule struct {
	t   *testing.T
	dir string
	env []string
}

func newScratchModule(t *testing.T) *scratchModule {
	m := &scratchModule{t: t, dir: t.TempDir(), env: []string{"GOWORK=off", "GOFLAGS=", "GOTOOLCHAIN=local"}}
	m.write("go.mod", "module example.com/m\n\ngo 1.26.0\n")
	if err := os.Mkdir(filepath.Join(m.dir, apiDir), 0o755); err != nil {
		t.Fatal(err)
	}
	return m
}

func (m *scratchModule) write(name, content string) {
	m.t.Helper()
	path := filepath.Join(m.dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		m.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		m.t.Fatal(err)
	}
}

// changelog writes a changelog whose [Unreleased] section holds intro
// and groups, after a release v0.1.0.
func (m *scratchModule) changelog(intro, groups string) {
	m.writeChangelog("# Changelog\n\n## [Unreleased]\n\nThis " + intro + ".\n\n" + groups + "\n## [v0.1.0] - 2026-11-21\n\n### Added\n\n- `F` and `T`.\n")
}

func (m *scratchModule) writeChangelog(s string) { m.write(changelog, s) }

func (m *scratchModule) release(v string) {
	m.t.Helper()
	if err := run(&bytes.Buffer{}, m.dir, "", v, m.env); err != nil {
		m.t.Fatal(err)
	}
}

// regenerate is "go run ./internal/apicheck" in the module.
func (m *scratchModule) regenerate() {
	m.t.Helper()
	var out bytes.Buffer
	if err := run(&out, m.dir, "", "", m.env); err != nil {
		m.t.Fatal(err)
	}
	if !strings.Contains(out.String(), "recorded") {
		m.t.Errorf("regenerating says: %s", &out)
	}
}

func (m *scratchModule) check() *result {
	m.t.Helper()
	r, err := check(m.dir, m.env, "")
	if err != nil {
		m.t.Fatal(err)
	}
	return r
}

func (m *scratchModule) wantOK() {
	m.t.Helper()
	if r := m.check(); !r.ok() {
		m.t.Errorf("the check fails:\n%s", r)
	}
}

// wantUnnamed requires the check to fail on exactly one change, message,
// which the changelog does not name, compatible or not.
func (m *scratchModule) wantUnnamed(r *result, message string, compatible bool) {
	m.t.Helper()
	if r.ok() {
		m.t.Errorf("the check passes; want it to fail on %q", message)
		return
	}
	if len(r.unnamed) != 1 || r.unnamed[0].Message != message || r.unnamed[0].Compatible != compatible {
		m.t.Errorf("unnamed changes %+v; want only %q (compatible %v)", r.unnamed, message, compatible)
	}
}

func (m *scratchModule) lines(name string) []string {
	m.t.Helper()
	l, err := readLines(filepath.Join(m.dir, name))
	if err != nil {
		m.t.Fatal(err)
	}
	return l
}
