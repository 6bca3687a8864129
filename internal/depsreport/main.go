// Command depsreport is CI's dependency report (.ci/deps): for each module
// directory it is given, the direct dependencies that have a newer release,
// and govulncheck's findings against an offline vulnerability database.
//
//	go run ./internal/depsreport -db ../shared/vulndb . examples bench
//
// An available update is reported, never a failure: upgrading is a change
// of its own, with its tests. A vulnerability is a failure when the
// module's code reaches a vulnerable function (govulncheck's symbol-level
// finding); one in a package the code imports but whose vulnerable
// functions it never calls, or in a module it only requires, is reported
// as such and passes. The exit status is 1 when a vulnerability is
// reachable, 2 when a tool fails.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	db := flag.String("db", "../shared/vulndb", "the offline vulnerability database (govulncheck's -db file://)")
	govulncheck := flag.String("govulncheck", "go run golang.org/x/vuln/cmd/govulncheck@v1.8.0", "the govulncheck command")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: depsreport [-db DIR] [-govulncheck CMD] MODULE_DIR...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	dbDir, err := filepath.Abs(*db)
	if err == nil {
		_, err = os.Stat(filepath.Join(dbDir, "index", "db.json"))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "depsreport: vulnerability database: %v\n", err)
		os.Exit(2)
	}
	reachable := false
	for _, dir := range flag.Args() {
		r, err := check(dir, dbDir, strings.Fields(*govulncheck))
		if err != nil {
			fmt.Fprintf(os.Stderr, "depsreport: %s: %v\n", dir, err)
			os.Exit(2)
		}
		r.print(os.Stdout)
		reachable = reachable || r.reachable()
	}
	if reachable {
		fmt.Println("depsreport: FAIL: a vulnerable function is reachable; upgrade the module that fixes it")
		os.Exit(1)
	}
}

// check lists the direct dependencies of the module at dir that have a
// newer release, from its own go.mod (GOWORK=off), and runs govulncheck on
// its packages as they are built: in the repository's workspace, where the
// library's tests and tools (internal/apicheck) find the modules that
// internal/devdeps requires for them, and which builds the library with
// the versions its go.mod names (TestWorkspaceKeepsTheLibrarysVersions),
// those an importer gets. A module outside any workspace is its own build.
func check(dir, db string, govulncheck []string) (*moduleReport, error) {
	r := &moduleReport{Dir: dir}
	out, err := run(dir, false, "go", "list", "-e", "-m", "-u", "-json", "all")
	if err != nil {
		return nil, err
	}
	if r.Module, r.Updates, err = updates(bytes.NewReader(out)); err != nil {
		return nil, fmt.Errorf("go list -m -u: %w", err)
	}
	// The tag builds internal/devdeps' only file; no other file has it.
	args := append(append([]string(nil), govulncheck[1:]...), "-db", "file://"+filepath.ToSlash(db), "-format", "json", "-tags", "devdeps", "./...")
	if out, err = run(dir, true, govulncheck[0], args...); err != nil {
		return nil, err
	}
	if r.Findings, err = findings(bytes.NewReader(out)); err != nil {
		return nil, fmt.Errorf("govulncheck: %w", err)
	}
	return r, nil
}

// run runs name in dir, in the workspace that dir lies in (found from dir,
// whatever GOWORK says, so that a module outside the repository is not
// judged in its workspace) or, without workspace, in the module alone.
func run(dir string, workspace bool, name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	gowork := "GOWORK=off"
	if workspace {
		gowork = "GOWORK="
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOWORK=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, gowork)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

// An update is a direct dependency with a newer release.
type update struct{ Path, Version, Latest string }

// updates reads `go list -m -u -json all` and returns the main module's
// path and its direct requirements with a newer release. A module the main
// module replaces (the library, for examples and bench) is its own, and an
// error looking one up is reported, not fatal.
func updates(r io.Reader) (string, []update, error) {
	var main string
	var out []update
	dec := json.NewDecoder(r)
	for {
		var m struct {
			Path, Version string
			Main          bool
			Indirect      bool
			Replace       *struct{ Path string }
			Update        *struct{ Version string }
			Error         *struct{ Err string }
		}
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return "", nil, err
		}
		switch {
		case m.Main:
			main = m.Path
		case m.Indirect || m.Replace != nil:
		case m.Error != nil:
			out = append(out, update{m.Path, m.Version, "? (" + strings.TrimSpace(strings.SplitN(m.Error.Err, "\n", 2)[0]) + ")"})
		case m.Update != nil:
			out = append(out, update{m.Path, m.Version, m.Update.Version})
		}
	}
	if main == "" {
		return "", nil, errors.New("no main module")
	}
	return main, out, nil
}

// A finding is one vulnerability govulncheck found, at the deepest level it
// reached: the module required, a package imported, or a function called.
type finding struct {
	OSV, Module, Version, Fixed string
	// Package is the vulnerable package when the code imports it.
	Package string
	// Symbol is the vulnerable function and Caller the frame of the
	// module's code that leads to it, when the code reaches it.
	Symbol, Caller string
	Summary        string
}

func (f finding) level() string {
	switch {
	case f.Symbol != "":
		return "called"
	case f.Package != "":
		return "imported, not called"
	default:
		return "required, not imported"
	}
}

type frame struct {
	Module, Version, Package, Function, Receiver string
}

func (f frame) name() string {
	switch {
	case f.Function == "":
		return f.Package
	case f.Receiver != "":
		return f.Package + "." + f.Receiver + "." + f.Function
	default:
		return f.Package + "." + f.Function
	}
}

// findings reads govulncheck's JSON stream and keeps, for each
// vulnerability and module, its deepest finding.
func findings(r io.Reader) ([]finding, error) {
	summaries := map[string]string{}
	best := map[string]finding{}
	dec := json.NewDecoder(r)
	sawConfig := false
	for {
		var msg struct {
			Config *json.RawMessage
			OSV    *struct{ ID, Summary string }
			// govulncheck writes "finding"; the field match is
			// case-insensitive.
			Finding *struct {
				OSV          string
				FixedVersion string `json:"fixed_version"`
				Trace        []frame
			}
		}
		if err := dec.Decode(&msg); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, err
		}
		sawConfig = sawConfig || msg.Config != nil
		if msg.OSV != nil {
			summaries[msg.OSV.ID] = msg.OSV.Summary
		}
		if msg.Finding == nil || len(msg.Finding.Trace) == 0 {
			continue
		}
		t := msg.Finding.Trace
		f := finding{OSV: msg.Finding.OSV, Module: t[0].Module, Version: t[0].Version, Fixed: msg.Finding.FixedVersion, Package: t[0].Package}
		if t[0].Function != "" {
			f.Symbol = t[0].name()
			f.Caller = t[len(t)-1].name()
		}
		key := f.OSV + " " + f.Module
		if old, ok := best[key]; !ok || rank(f) > rank(old) {
			best[key] = f
		}
	}
	if !sawConfig {
		return nil, errors.New("no config message: not govulncheck's JSON output")
	}
	out := make([]finding, 0, len(best))
	for _, f := range best {
		f.Summary = summaries[f.OSV]
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool {
		if rank(out[i]) != rank(out[j]) {
			return rank(out[i]) > rank(out[j])
		}
		return out[i].OSV < out[j].OSV
	})
	return out, nil
}

func rank(f finding) int {
	switch {
	case f.Symbol != "":
		return 2
	case f.Package != "":
		return 1
	}
	return 0
}

type moduleReport struct {
	Dir, Module string
	Updates     []update
	Findings    []finding
}

func (r *moduleReport) reachable() bool {
	for _, f := range r.Findings {
		if f.Symbol != "" {
			return true
		}
	}
	return false
}

func (r *moduleReport) print(w io.Writer) {
	fmt.Fprintf(w, "== %s (%s)\n", r.Module, r.Dir)
	if len(r.Updates) == 0 {
		fmt.Fprintln(w, "direct dependencies: all at their newest release")
	} else {
		fmt.Fprintf(w, "direct dependencies with a newer release (%d):\n", len(r.Updates))
		for _, u := range r.Updates {
			fmt.Fprintf(w, "  %s %s -> %s\n", u.Path, u.Version, u.Latest)
		}
	}
	if len(r.Findings) == 0 {
		fmt.Fprintln(w, "vulnerabilities: none known")
		return
	}
	fmt.Fprintf(w, "vulnerabilities (%d):\n", len(r.Findings))
	for _, f := range r.Findings {
		fixed := "no fix yet"
		if f.Fixed != "" {
			fixed = "fixed in " + f.Fixed
		}
		fmt.Fprintf(w, "  %s %s@%s (%s): %s", f.OSV, f.Module, f.Version, fixed, f.level())
		if f.Symbol != "" {
			fmt.Fprintf(w, ": %s, from %s", f.Symbol, f.Caller)
		}
		if f.Summary != "" {
			fmt.Fprintf(w, "\n      %s", f.Summary)
		}
		fmt.Fprintln(w)
	}
}
