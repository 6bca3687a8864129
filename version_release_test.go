//go:build release

package extauth_test

import (
	"bytes"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// The tests of this file build a host in a process of their own and run
// only with the release tag (go test -tags release ./..., CI's release
// step): see docs/development.md#releasing.

// A host that requires a release of extauth sees that version in
// Version, as the go command records it in the host's build info. The
// test publishes this tree as v0.99.0 on a module proxy of its own (a
// directory), builds a host that requires it, and runs it. The host has a
// module cache of its own, filled from that proxy and from the shared
// cache's downloads, which the shared cache therefore never holds a made-up
// version of extauth.
func TestVersionOfARequiredRelease(t *testing.T) {
	const version = "v0.99.0"
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	proxy := t.TempDir()
	at := filepath.Join(proxy, "github.com", "extauth", "extauth", "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	var z bytes.Buffer
	if err := zip.Create(&z, module.Version{Path: "github.com/extauth/extauth", Version: version}, moduleFiles(t, root)); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(at, version+".zip"), z.String())
	write(t, filepath.Join(at, version+".mod"), string(gomod))
	write(t, filepath.Join(at, version+".info"), `{"Version":"`+version+`","Time":"2026-11-26T00:00:00Z"}`)
	write(t, filepath.Join(at, "list"), version+"\n")

	host := t.TempDir()
	write(t, filepath.Join(host, "go.mod"), "module example.com/host\n\ngo 1.26.0\n\nrequire github.com/extauth/extauth "+version+"\n")
	write(t, filepath.Join(host, "main.go"), `package main

import (
	"fmt"

	"github.com/extauth/extauth"
)

func main() { fmt.Println(extauth.Version()) }
`)
	downloads := strings.TrimSpace(goCmd(t, ".", nil, "env", "GOMODCACHE")) + "/cache/download"
	env := []string{
		"GOWORK=off", "GOFLAGS=-mod=mod -modcacherw", "GOSUMDB=off", "GOTOOLCHAIN=local",
		"GOMODCACHE=" + filepath.Join(t.TempDir(), "mod"),
		"GOPROXY=file://" + filepath.ToSlash(proxy) + ",file://" + filepath.ToSlash(downloads) + ",off",
	}
	if got := strings.TrimSpace(goCmd(t, host, env, "run", "-trimpath", ".")); got != version {
		t.Errorf("a host requiring extauth %s: Version() = %q", version, got)
	}
}

// moduleFiles are the files of the module at root as git knows them,
// committed or not (ignored ones aside): what a release's module zip holds.
func moduleFiles(t *testing.T, root string) []zip.File {
	t.Helper()
	var files []zip.File
	seen := map[string]bool{}
	for _, name := range strings.Split(goGit(t, root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"), "\x00") {
		if name == "" || seen[name] || name == "go.work" || name == "go.work.sum" || strings.HasPrefix(name, "internal/devdeps/") {
			continue // a file unmerged lists its stages; the workspace and its other module are not the library's
		}
		seen[name] = true
		if _, err := os.Lstat(filepath.Join(root, name)); err != nil {
			continue // deleted, not yet committed
		}
		files = append(files, diskFile{root, name})
	}
	return files
}

type diskFile struct{ root, name string }

func (f diskFile) Path() string                 { return f.name }
func (f diskFile) Lstat() (fs.FileInfo, error)  { return os.Lstat(filepath.Join(f.root, f.name)) }
func (f diskFile) Open() (io.ReadCloser, error) { return os.Open(filepath.Join(f.root, f.name)) }

func goGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}
