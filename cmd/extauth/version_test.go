package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

// A build of the command in a clone of the repository prints the release
// its commit is tagged with, or the pseudo-version after it, and the
// commit: the tree as it is is copied into a new repository, committed
// and tagged v0.4.0.
func TestVersionOfABuildInAClone(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	clone := t.TempDir()
	files := strings.Split(runIn(t, root, "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"), "\x00")
	for _, name := range files {
		data, err := os.ReadFile(filepath.Join(root, name))
		if name == "" || err != nil {
			continue // deleted, not yet committed
		}
		path := filepath.Join(clone, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git := func(args ...string) string {
		return strings.TrimSpace(runIn(t, clone, "git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, args...)...))
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-q", "-m", "the tree")
	git("tag", "-a", "v0.4.0", "-m", "v0.4.0")
	build := func() string {
		bin := filepath.Join(t.TempDir(), "extauth")
		// GOFLAGS may say -buildvcs=false (.ci/run does); this build must not.
		cmd := exec.Command("go", "build", "-buildvcs=true", "-trimpath", "-o", bin, "./cmd/extauth")
		cmd.Dir = clone
		cmd.Env = append(os.Environ(), "GOFLAGS=", "GOTOOLCHAIN=local")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		return runIn(t, clone, bin, "version")
	}
	head := git("rev-parse", "HEAD")
	if got, want := build(), "extauth v0.4.0\ngit revision "+head+" ("; !strings.HasPrefix(got, want) {
		t.Errorf("the tagged commit:\n%s\nwant it to start with\n%s", got, want)
	}
	git("commit", "-q", "--allow-empty", "-m", "after the release")
	head = git("rev-parse", "HEAD")
	want := regexp.MustCompile(`^extauth v0\.4\.1-0\.\d{14}-` + head[:12] + "\ngit revision " + head + ` \(`)
	if got := build(); !want.MatchString(got) {
		t.Errorf("a commit after the tag:\n%s\nwant it to match %s", got, want)
	}
}

func runIn(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return string(out)
}
