//go:build release

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The tests of this file build the command in a process of their own and
// run only with the release tag (go test -tags release ./..., CI's
// release step): see docs/development.md#releasing.

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
