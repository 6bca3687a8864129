package main

import (
	"bytes"
	"errors"
	"fmt"
	"go/types"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/exp/apidiff"
	"golang.org/x/mod/semver"
)

// Where the check reads, relative to the module's root.
const (
	apiDir    = "api"
	nextFile  = "api/next.txt"
	changelog = "CHANGELOG.md"
	// regenerate is what the failure messages tell a contributor to run.
	regenerate = "go run ./internal/apicheck"
)

// result is what the check finds in a module.
type result struct {
	// added and removed are the features of the API that api/next.txt
	// lacks, and those it holds that the API no longer has.
	added, removed []string
	// baseline is the latest release whose API is recorded, and report the
	// changes since, as apidiff tells them.
	baseline string
	report   apidiff.Report
	// unnamed are the changes that CHANGELOG.md's [Unreleased] section does
	// not name in a code span: a compatible one anywhere, a breaking one in
	// an entry marked **Breaking**, a deprecation under Deprecated.
	unnamed []apidiff.Change
	// next is the version [Unreleased] says it becomes, and least the
	// smallest version the changes since the baseline allow.
	next, least string
	// problems are inconsistencies between the release records and the
	// changelog.
	problems []string
}

// ok reports whether nothing is wrong.
func (r *result) ok() bool {
	return len(r.added) == 0 && len(r.removed) == 0 && len(r.unnamed) == 0 && len(r.problems) == 0
}

// check compares the module in dir, and the modules nested in it, with
// their API record, their latest release and the changelog; or, with only
// set, just the module in that directory (see loadModule), whose lines
// and packages alone are then compared.
func check(dir string, env []string, only string) (*result, error) {
	m, err := loadModule(dir, env, false, only)
	if err != nil {
		return nil, err
	}
	r := &result{}
	current, err := m.features()
	if err != nil {
		return nil, err
	}
	recorded, err := readLines(filepath.Join(dir, nextFile))
	if err != nil {
		return nil, err
	}
	recorded = m.coveredLines(recorded)
	r.added, r.removed = diffLines(recorded, current)

	var base *apidiff.Module
	r.baseline, base, err = latestRelease(dir)
	if err != nil {
		return nil, err
	}
	base.Packages = slices.DeleteFunc(base.Packages, func(p *types.Package) bool { return !m.covers(p.Path()) })
	r.report = apidiff.ModuleChanges(base, m.Module)

	log, err := os.ReadFile(filepath.Join(dir, changelog))
	if err != nil {
		return nil, err
	}
	cl, err := parseChangelog(log)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", changelog, err)
	}
	if cl.latest != r.baseline {
		r.problems = append(r.problems, fmt.Sprintf(
			"%s's latest release is %q but the latest API record is %s/%s.zip: a release renames [Unreleased] and records its API with %s -release VERSION (docs/development.md#releasing)",
			changelog, cl.latest, apiDir, r.baseline, regenerate))
	}
	for _, c := range r.report.Changes {
		ok := anyEntry
		if !c.Compatible {
			ok = breakingEntry
		}
		if !cl.names(changeName(c.Message, m.Path), ok) {
			r.unnamed = append(r.unnamed, c)
		}
	}
	// Deprecations are doc comments, which apidiff does not read: the
	// record's //deprecated lines that the release's lacks are new.
	released, err := readLines(filepath.Join(dir, apiDir, r.baseline+".txt"))
	if err != nil {
		return nil, err
	}
	released = m.coveredLines(released)
	newly, _ := diffLines(released, current)
	for _, l := range newly {
		if feature, ok := strings.CutSuffix(l, " //deprecated"); ok {
			name := feature[strings.LastIndexAny(feature, " ,")+1:]
			if !cl.names(name, deprecatedEntry) {
				r.unnamed = append(r.unnamed, apidiff.Change{Message: feature + ": deprecated", Compatible: true})
			}
		}
	}
	r.next = cl.next
	r.least = leastVersion(r.baseline, r.report)
	switch {
	case r.next == "":
		r.problems = append(r.problems, fmt.Sprintf("%s's [Unreleased] section names no version it becomes (\"becomes **vX.Y.Z**\")", changelog))
	case semver.Compare(r.next, r.least) < 0:
		r.problems = append(r.problems, fmt.Sprintf(
			"%s's [Unreleased] becomes %s, but the changes since %s need at least %s (the README's versioning policy)",
			changelog, r.next, r.baseline, r.least))
	}
	return r, nil
}

// coveredLines are the lines of a record whose packages the check covers.
func (m *module) coveredLines(lines []string) []string {
	return slices.DeleteFunc(lines, func(l string) bool {
		path, _, _ := strings.Cut(strings.TrimPrefix(l, "pkg "), ",")
		return !m.covers(path)
	})
}

// String is the report a contributor reads when the check fails.
func (r *result) String() string {
	var b strings.Builder
	if len(r.added)+len(r.removed) > 0 {
		fmt.Fprintf(&b, "The exported API differs from its record, %s:\n", nextFile)
		for _, l := range r.removed {
			fmt.Fprintf(&b, "\t- %s\n", l)
		}
		for _, l := range r.added {
			fmt.Fprintf(&b, "\t+ %s\n", l)
		}
		fmt.Fprintf(&b, "Regenerate the record from the module's root with\n\t%s\nand commit it with the code.\n\n", regenerate)
	}
	if len(r.unnamed) > 0 {
		fmt.Fprintf(&b, "Changes since %s that %s's [Unreleased] section does not name:\n", r.baseline, changelog)
		for _, c := range r.unnamed {
			if c.Compatible {
				fmt.Fprintf(&b, "\tcompatible: %s\n", c.Message)
			} else {
				fmt.Fprintf(&b, "\tBREAKING:   %s\n", c.Message)
			}
		}
		b.WriteString("Name each in an entry of [Unreleased], in backticks (`Options.Name`): an addition under Added, a deprecation under Deprecated, " +
			"a breaking change in an entry marked **Breaking** with its upgrade note and a link to docs/upgrading.md.\n\n")
	}
	for _, p := range r.problems {
		b.WriteString(p + "\n")
	}
	return b.String()
}

// summary lists the changes since the baseline, breaking ones first.
func (r *result) summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Changes since %s (the next release is %s; at least %s):\n", r.baseline, r.next, r.least)
	if len(r.report.Changes) == 0 {
		b.WriteString("\tnone\n")
	}
	for _, compatible := range []bool{false, true} {
		for _, c := range r.report.Changes {
			if c.Compatible != compatible {
				continue
			}
			kind := "BREAKING:  "
			if compatible {
				kind = "compatible:"
			}
			fmt.Fprintf(&b, "\t%s %s\n", kind, c.Message)
		}
	}
	return b.String()
}

// latestRelease reads the export data of the latest release recorded in
// api/: the highest vX.Y.Z of the api/vX.Y.Z.txt files, whose .zip must
// be beside it.
func latestRelease(dir string) (string, *apidiff.Module, error) {
	var versions []string
	entries, err := os.ReadDir(filepath.Join(dir, apiDir))
	if err != nil {
		return "", nil, err
	}
	for _, e := range entries {
		if v, ok := strings.CutSuffix(e.Name(), ".txt"); ok && canonical(v) {
			versions = append(versions, v)
		}
	}
	if len(versions) == 0 {
		return "", nil, fmt.Errorf("%s holds no release record (vX.Y.Z.txt)", apiDir)
	}
	semver.Sort(versions)
	v := versions[len(versions)-1]
	data, err := os.ReadFile(filepath.Join(dir, apiDir, v+".zip"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil, fmt.Errorf("%s/%s.txt has no export data beside it (%s.zip): record a release with %s -release %s", apiDir, v, v, regenerate, v)
	}
	if err != nil {
		return "", nil, err
	}
	m, err := readExportData(data)
	if err != nil {
		return "", nil, fmt.Errorf("%s/%s.zip: %w", apiDir, v, err)
	}
	return v, m, nil
}

// leastVersion is the smallest version after baseline that the changes
// allow, by semantic versioning as the README states it: before v1, a
// breaking change or an addition takes the next minor version and
// anything else the next patch; from v1 on, a breaking change takes the
// next major version, an addition the next minor one.
func leastVersion(baseline string, r apidiff.Report) string {
	var major, minor, patch int
	fmt.Sscanf(baseline, "v%d.%d.%d", &major, &minor, &patch)
	breaking := slices.ContainsFunc(r.Changes, func(c apidiff.Change) bool { return !c.Compatible })
	added := len(r.Changes) > 0
	switch {
	case breaking && major > 0:
		return fmt.Sprintf("v%d.0.0", major+1)
	case breaking || added:
		return fmt.Sprintf("v%d.%d.0", major, minor+1)
	}
	return fmt.Sprintf("v%d.%d.%d", major, minor, patch+1)
}

// changeName is the name a changelog line must give a change: for
// "./providers.OIDC.Foo: added" it is Foo, for "(*Auth).Version: added"
// Version, and for "package example.com/m/sub: added" sub (the path
// within the module).
func changeName(message, module string) string {
	obj, _, _ := strings.Cut(message, ": ")
	if p, ok := strings.CutPrefix(obj, "package "); ok {
		if p == module {
			return p
		}
		return strings.TrimPrefix(p, module+"/")
	}
	obj = strings.NewReplacer("(", "", ")", "", "*", "").Replace(obj)
	if i := strings.LastIndex(obj, "/"); i >= 0 {
		obj = obj[i+1:] // the last element of a package path: its name
	}
	parts := strings.Split(obj, ".")
	return parts[len(parts)-1]
}

// changelogSection is what check reads of CHANGELOG.md.
type changelogSection struct {
	// entries are the items of the [Unreleased] section, each with the
	// lines that continue it.
	entries []entry
	// next is the version [Unreleased] becomes ("becomes **vX.Y.Z**" in
	// its text) and latest the first release heading after it.
	next, latest string
}

// entry is one item of the changelog and the group ("### Added") it is in.
type entry struct{ group, text string }

var (
	releaseHeading = regexp.MustCompile(`^## \[(v\d+\.\d+\.\d+)\]`)
	becomes        = regexp.MustCompile(`becomes \*\*(v\d+\.\d+\.\d+)\*\*`)
	codeSpan       = regexp.MustCompile("`([^`]+)`")
	// breakingMark is **Breaking**, or **Breaking:**.
	breakingMark = regexp.MustCompile(`\*\*Breaking:?\*\*`)
)

func parseChangelog(data []byte) (*changelogSection, error) {
	c := &changelogSection{}
	in := false
	group := ""
	for line := range bytes.Lines(data) {
		l := strings.TrimRight(string(line), "\r\n")
		switch {
		case l == "## [Unreleased]":
			in = true
			continue
		case strings.HasPrefix(l, "## "):
			if in {
				if m := releaseHeading.FindStringSubmatch(l); m != nil {
					c.latest = m[1]
				}
				return c, nil
			}
			continue
		}
		if !in {
			continue
		}
		if m := becomes.FindStringSubmatch(l); m != nil && c.next == "" {
			c.next = m[1]
		}
		switch {
		case strings.HasPrefix(l, "### "):
			group = strings.TrimSpace(l[4:])
		case strings.HasPrefix(l, "- "):
			c.entries = append(c.entries, entry{group, l})
		case strings.HasPrefix(l, "  ") && len(c.entries) > 0:
			c.entries[len(c.entries)-1].text += "\n" + l
		}
	}
	if !in {
		return nil, errors.New("no \"## [Unreleased]\" section")
	}
	return c, nil
}

// names reports whether an entry that ok accepts names name in a code
// span, as a whole word: `Options.Version` names Version, `Versions` does
// not.
func (c *changelogSection) names(name string, ok func(entry) bool) bool {
	word := regexp.MustCompile(`(^|[^\w])` + regexp.QuoteMeta(name) + `($|[^\w])`)
	for _, e := range c.entries {
		if !ok(e) {
			continue
		}
		for _, m := range codeSpan.FindAllStringSubmatch(e.text, -1) {
			if word.MatchString(m[1]) {
				return true
			}
		}
	}
	return false
}

// What an entry must be to name a change: any entry for a compatible
// change, one marked **Breaking** for a breaking one, one under
// Deprecated for a deprecation.
func anyEntry(entry) bool        { return true }
func breakingEntry(e entry) bool { return breakingMark.MatchString(e.text) }
func deprecatedEntry(e entry) bool {
	return e.group == "Deprecated"
}

// diffLines returns the lines of b not in a, and those of a not in b;
// both are sorted.
func diffLines(a, b []string) (added, removed []string) {
	inA := map[string]bool{}
	for _, l := range a {
		inA[l] = true
	}
	inB := map[string]bool{}
	for _, l := range b {
		inB[l] = true
		if !inA[l] {
			added = append(added, l)
		}
	}
	for _, l := range a {
		if !inB[l] {
			removed = append(removed, l)
		}
	}
	return added, removed
}

func readLines(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for line := range strings.Lines(string(data)) {
		if l := strings.TrimRight(line, "\r\n"); l != "" {
			out = append(out, l)
		}
	}
	return out, nil
}

func writeLines(path string, lines []string) error {
	return os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}
