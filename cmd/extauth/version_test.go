package main

import (
	"runtime/debug"
	"strings"
	"testing"
)

// In-process, the command is extauth's own test binary: built from the
// tree, with no version and no revision.
func TestVersion(t *testing.T) {
	r := runCLI(t, "version")
	want := "extauth (devel): built from a source tree, not from a module version\n" +
		"revision unknown: the build recorded no version control information\n"
	if r.code != exitOK || r.stderr != "" || !strings.HasPrefix(r.stdout, want) || !strings.Contains(r.stdout, "\ngo1.") {
		t.Errorf("extauth version: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, "version", "-x"); r.code != exitUsage {
		t.Errorf("extauth version -x: exit %d", r.code)
	}
}

// What each kind of build records, and what the command makes of it.
func TestVersionText(t *testing.T) {
	settings := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	main := debug.Module{Path: "github.com/extauth/extauth"}
	for name, c := range map[string]struct {
		version string
		bi      *debug.BuildInfo
		want    string
	}{
		"go install ./cmd/extauth@v0.4.0": {"v0.4.0", &debug.BuildInfo{GoVersion: "go1.26.8", Main: main},
			"extauth v0.4.0\nrevision unknown: the build recorded no version control information\ngo1.26.8 "},
		"go build in a clone, uncommitted changes": {"v0.4.1-0.20261201093000-abcdef012345+dirty", &debug.BuildInfo{GoVersion: "go1.26.8", Main: main,
			Settings: settings("vcs", "git", "vcs.revision", "abcdef0123456789", "vcs.time", "2026-12-01T09:30:00Z", "vcs.modified", "true")},
			"extauth v0.4.1-0.20261201093000-abcdef012345+dirty\ngit revision abcdef0123456789 (2026-12-01T09:30:00Z), with uncommitted changes\ngo1.26.8 "},
		"a host's go tool": {"v0.4.0", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "example.com/host"},
			Settings: settings("vcs", "git", "vcs.revision", "0123456789abcdef")},
			"extauth v0.4.0\nrevision unknown: built as a dependency of example.com/host\ngo1.26.8 "},
		"no build info": {"", nil, "extauth, version unknown: the program holds no build information\nrevision unknown\ngo1."},
	} {
		if got := versionText(c.version, c.bi); !strings.HasPrefix(got, c.want) {
			t.Errorf("%s:\n%s\nwant it to start with\n%s", name, got, c.want)
		}
	}
}
