// Command apicheck records extauth's exported API and checks changes to it
// against the latest release and CHANGELOG.md. Run it from the module's
// root:
//
//	go run ./internal/apicheck                  # rewrite api/next.txt from the code, print the changes since the latest release
//	go run ./internal/apicheck -release v0.4.0  # at a release: record api/v0.4.0.txt and api/v0.4.0.zip
//	go run ./internal/apicheck -check -module redisstore  # check one nested module's API, writing nothing
//
// The record is api/next.txt: every exported feature of every package a
// host may import, one a line, in the form of Go's api/*.txt files. A
// release adds api/vX.Y.Z.txt, the same lines then, and api/vX.Y.Z.zip,
// the types of its API as apidiff's module export data, so that the
// changes since can be told compatible or breaking by
// golang.org/x/exp/apidiff. The record covers the modules nested in this
// one that a host may require (redisstore, pgstore): they are released
// with it, under the same version.
//
// TestAPI, in this package's tests, fails when the code's API differs
// from api/next.txt, or when a change since the latest release is not
// named in CHANGELOG.md's [Unreleased] section (a breaking one in an entry
// marked **Breaking**), or when the version that section says it becomes
// is too small for the changes. docs/development.md#the-api-record says
// what to do.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/mod/semver"
)

func main() {
	release := flag.String("release", "", "record the API as that of release `vX.Y.Z`: api/vX.Y.Z.txt and api/vX.Y.Z.zip")
	from := flag.String("from", "", "load the module in `dir` (a past release's tree, say) instead of the current directory's, whose api/ is written")
	checkOnly := flag.Bool("check", false, "check the record and the changelog, writing nothing; exit status 1 when they do not hold")
	only := flag.String("module", "", "with -check, check only the nested module in `dir`, relative to the root (a store module's tests check it so)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: go run ./internal/apicheck [-release vX.Y.Z] [-from dir] | -check [-module dir]\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 || (*release != "" && !canonical(*release)) || (*only != "" && !*checkOnly) ||
		(*checkOnly && (*release != "" || *from != "")) {
		flag.Usage()
		os.Exit(2)
	}
	if *checkOnly {
		r, err := check(".", nil, *only)
		if err != nil {
			fmt.Fprintln(os.Stderr, "apicheck:", err)
			os.Exit(1)
		}
		fmt.Print(r.summary())
		if !r.ok() {
			fmt.Print("\n" + r.String())
			os.Exit(1)
		}
		return
	}
	if err := run(os.Stdout, ".", *from, *release, nil); err != nil {
		fmt.Fprintln(os.Stderr, "apicheck:", err)
		os.Exit(1)
	}
}

// run records the API of the module in from (dir when "") under dir's
// api/: as release's when release is set, else as api/next.txt, after
// which it reports what check finds.
func run(w io.Writer, dir, from, release string, env []string) error {
	if _, err := os.Stat(filepath.Join(dir, apiDir)); err != nil {
		return fmt.Errorf("run it from the module's root: %w", err)
	}
	if from == "" {
		from = dir
	}
	m, err := loadModule(from, env, release != "", "")
	if err != nil {
		return err
	}
	lines, err := m.features()
	if err != nil {
		return err
	}
	if release != "" {
		return recordRelease(w, dir, release, m, lines)
	}
	if err := writeLines(filepath.Join(dir, nextFile), lines); err != nil {
		return err
	}
	fmt.Fprintf(w, "recorded %d features of %d packages in %s\n", len(lines), len(m.Packages), nextFile)
	r, err := check(dir, env, "")
	if err != nil {
		return err
	}
	fmt.Fprint(w, r.summary())
	if !r.ok() {
		fmt.Fprint(w, "\n"+r.String())
	}
	return nil
}

// recordRelease writes api/<release>.txt and .zip, and removes the export
// data of earlier releases: only the latest one's is compared with, and
// git keeps the others.
func recordRelease(w io.Writer, dir, release string, m *module, lines []string) error {
	var buf bytes.Buffer
	if err := writeExportData(&buf, m.fset, m.Module); err != nil {
		return err
	}
	old, err := filepath.Glob(filepath.Join(dir, apiDir, "v*.zip"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, apiDir, release+".zip"), buf.Bytes(), 0o644); err != nil {
		return err
	}
	if err := writeLines(filepath.Join(dir, apiDir, release+".txt"), lines); err != nil {
		return err
	}
	for _, f := range old {
		if filepath.Base(f) != release+".zip" {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(w, "recorded %d features of %d packages as %s/%s.txt and %s.zip\n", len(lines), len(m.Packages), apiDir, release, release)
	return nil
}

func canonical(v string) bool { return semver.IsValid(v) && semver.Canonical(v) == v }
