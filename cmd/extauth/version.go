package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/extauth/extauth"
)

func (c *cli) version(_ context.Context, args []string) int {
	f := c.newFlags("version", "", `Prints the version of extauth this command was built from, the version
control revision when the build recorded one, and the Go release.
`)
	if done, code := f.parse(args); done {
		return code
	}
	bi, _ := debug.ReadBuildInfo()
	fmt.Fprint(c.stdout, versionText(extauth.Version(), bi))
	return exitOK
}

// versionText is what "extauth version" prints: v is extauth.Version(),
// bi the program's build info (nil if it has none).
func versionText(v string, bi *debug.BuildInfo) string {
	var b strings.Builder
	switch v {
	case "":
		b.WriteString("extauth, version unknown: the program holds no build information\n")
	case "(devel)":
		b.WriteString("extauth (devel): built from a source tree, not from a module version\n")
	default:
		b.WriteString("extauth " + v + "\n")
	}
	b.WriteString(revision(bi) + "\n")
	goVersion := runtime.Version()
	if bi != nil && bi.GoVersion != "" {
		goVersion = bi.GoVersion
	}
	fmt.Fprintf(&b, "%s %s/%s\n", goVersion, runtime.GOOS, runtime.GOARCH)
	return b.String()
}

// revision says which commit the command was built from, as the go
// command recorded it: only a build in a clone of extauth's repository
// records one (go install of a module version builds from the module zip,
// and -buildvcs=false or go run record none).
func revision(bi *debug.BuildInfo) string {
	if bi == nil {
		return "revision unknown"
	}
	if bi.Main.Path != "github.com/extauth/extauth" {
		// The settings describe the main module: the host's, not ours.
		return "revision unknown: built as a dependency of " + bi.Main.Path
	}
	s := map[string]string{}
	for _, kv := range bi.Settings {
		s[kv.Key] = kv.Value
	}
	rev, ok := s["vcs.revision"]
	if !ok {
		return "revision unknown: the build recorded no version control information"
	}
	out := s["vcs"] + " revision " + rev
	if t := s["vcs.time"]; t != "" {
		out += " (" + t + ")"
	}
	if s["vcs.modified"] == "true" {
		out += ", with uncommitted changes"
	}
	return out
}
