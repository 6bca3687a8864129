package extauth_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/semver"
)

// A release is a dated heading of CHANGELOG.md, its API recorded in api/,
// and the docs that name the version to get or to expect naming it
// (docs/development.md#releasing). TestReleaseVersionsAgree holds them
// together, so that no page names a version that was never cut, and a cut
// that forgets a page fails here, naming it.

// changelogRelease is a release heading of CHANGELOG.md and its section.
type changelogRelease struct {
	version, date, text string
}

var (
	changelogHeading = regexp.MustCompile(`^## \[(v\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})$`)
	changelogBecomes = regexp.MustCompile(`becomes \*\*(v\d+\.\d+\.\d+)\*\*`)
)

// changelogReleases reads CHANGELOG.md: the version [Unreleased] becomes,
// and each release, newest first.
func changelogReleases(t *testing.T, data string) (next string, releases []changelogRelease) {
	t.Helper()
	var cur *changelogRelease
	unreleased := false
	for _, l := range strings.Split(data, "\n") {
		if strings.HasPrefix(l, "## ") {
			unreleased = l == "## [Unreleased]"
			cur = nil
			if unreleased {
				if len(releases) > 0 {
					t.Errorf("CHANGELOG.md: ## [Unreleased] comes after the release %s; it is the first section", releases[0].version)
				}
				continue
			}
			m := changelogHeading.FindStringSubmatch(l)
			if m == nil {
				t.Errorf("CHANGELOG.md: heading %q is neither ## [Unreleased] nor ## [vX.Y.Z] - YYYY-MM-DD", l)
				continue
			}
			releases = append(releases, changelogRelease{version: m[1], date: m[2]})
			cur = &releases[len(releases)-1]
			continue
		}
		if unreleased && next == "" {
			if m := changelogBecomes.FindStringSubmatch(l); m != nil {
				next = m[1]
			}
		}
		if cur != nil {
			cur.text += l + "\n"
		}
	}
	return next, releases
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestReleaseVersionsAgree(t *testing.T) {
	next, releases := changelogReleases(t, readFile(t, "CHANGELOG.md"))
	if len(releases) == 0 {
		t.Fatal("CHANGELOG.md has no release heading (## [vX.Y.Z] - YYYY-MM-DD)")
	}
	latest := releases[0].version
	t.Logf("latest release %s (%s), next %s", latest, releases[0].date, next)

	// The changelog: newest first, dated, no date to come, and the next
	// version after the latest.
	for i, r := range releases {
		day, err := time.Parse(time.DateOnly, r.date)
		if err != nil {
			t.Errorf("CHANGELOG.md: %s is dated %q: %v", r.version, r.date, err)
		} else if day.After(time.Now().UTC()) {
			t.Errorf("CHANGELOG.md: %s is dated %s, a day to come: a release heading is dated the day it is cut", r.version, r.date)
		}
		if i > 0 {
			prev := releases[i-1]
			if semver.Compare(prev.version, r.version) <= 0 || prev.date < r.date {
				t.Errorf("CHANGELOG.md: %s (%s) is above %s (%s): releases go newest first", prev.version, prev.date, r.version, r.date)
			}
		}
	}
	if next == "" || semver.Compare(next, latest) <= 0 {
		t.Errorf("CHANGELOG.md: [Unreleased] becomes %q, which is not after the latest release %s", next, latest)
	}

	// The API record: a .txt for every release, the latest's export data
	// and no other.
	for _, r := range releases {
		if _, err := os.Stat(filepath.Join("api", r.version+".txt")); err != nil {
			t.Errorf("api/: no record of %s: go run ./internal/apicheck -release %s", r.version, r.version)
		}
	}
	txts, err := filepath.Glob("api/v*.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range txts {
		if v := strings.TrimSuffix(filepath.Base(f), ".txt"); semver.Compare(v, latest) > 0 {
			t.Errorf("%s records %s, but CHANGELOG.md's latest release is %s", f, v, latest)
		}
	}
	zips, err := filepath.Glob("api/v*.zip")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join("api", latest+".zip"); !slices.Equal(zips, []string{want}) {
		t.Errorf("api/ holds the export data %v, want only %s (go run ./internal/apicheck -release %s)", zips, want, latest)
	}

	// The docs that name a version to get, to expect or to compare with.
	docs := []struct {
		page, what string
		re         *regexp.Regexp
		want       string
	}{
		{"docs/upgrading.md", "the version to go get", regexp.MustCompile(`go get github\.com/extauth/extauth@(v[0-9.]+)`), latest},
		{"api/README.md", "the export data apidiff reads", regexp.MustCompile(`apidiff -m api/(v[0-9.]+)\.zip`), latest},
		{"docs/operating.md", "what extauth version prints", regexp.MustCompile("(?m)^extauth (v[0-9.]+)$"), latest},
		{"docs/operating.md", "what go install builds", regexp.MustCompile(`cmd/extauth@(v[0-9.]+)`), latest},
		{"docs/operating.md", "the tagged commit", regexp.MustCompile(`at the commit tagged (v[0-9.]+)`), latest},
		{"docs/operating.md", "the pseudo-version after the tag", regexp.MustCompile("`(v[0-9]+\\.[0-9]+\\.[0-9]+)-0\\.[0-9]{14}-"), nextPatch(latest)},
	}
	for _, d := range docs {
		ms := d.re.FindAllStringSubmatch(readFile(t, d.page), -1)
		if len(ms) == 0 {
			t.Errorf("%s no longer states %s (%s): update this test with the page", d.page, d.what, d.re)
		}
		for _, m := range ms {
			if m[1] != d.want {
				t.Errorf("%s: %s is %s, want %s (CHANGELOG.md's latest release is %s)", d.page, d.what, m[1], d.want, latest)
			}
		}
	}

	// development.md's table of releases has a row for each, and upgrading.md
	// a section for each release that breaks something, which the
	// release's heading links to.
	development := readFile(t, "docs/development.md")
	upgrading := readFile(t, "docs/upgrading.md")
	for i, r := range releases {
		if !strings.Contains(development, "\n| "+r.version+" | ") {
			t.Errorf("docs/development.md#releasing: the table of releases has no row for %s", r.version)
		}
		if i+1 == len(releases) || !strings.Contains(r.text, "**Breaking") {
			continue
		}
		heading := "From " + releases[i+1].version + " to " + r.version
		if !strings.Contains(upgrading, "\n## "+heading+"\n") {
			t.Errorf("docs/upgrading.md: %s breaks something but has no section ## %s", r.version, heading)
		}
		if link := "docs/upgrading.md#" + slug(heading); !strings.Contains(r.text, "("+link+")") {
			t.Errorf("CHANGELOG.md: %s breaks something but its section does not link to %s", r.version, link)
		}
	}
	// A section of upgrading.md goes to a release or to the version
	// [Unreleased] becomes, from the release before it.
	known := map[string]string{next: latest}
	for i, r := range releases[:len(releases)-1] {
		known[r.version] = releases[i+1].version
	}
	for _, m := range regexp.MustCompile(`(?m)^## From (v\S+) to (v\S+)$`).FindAllStringSubmatch(upgrading, -1) {
		if from, ok := known[m[2]]; !ok || from != m[1] {
			t.Errorf("docs/upgrading.md: section %q: want From <the release before> to <a release or %s>", strings.TrimPrefix(m[0], "## "), next)
		}
	}
}

// nextPatch is the version after v with its patch number one up: what a
// pseudo-version after tag v starts with.
func nextPatch(v string) string {
	i := strings.LastIndexByte(v, '.')
	patch, err := strconv.Atoi(v[i+1:])
	if err != nil {
		panic(v + " is not a version vX.Y.Z")
	}
	return v[:i+1] + strconv.Itoa(patch+1)
}
