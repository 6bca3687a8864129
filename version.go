package extauth

import "runtime/debug"

// modulePath is extauth's module, as a host's build info names it.
const modulePath = "github.com/extauth/extauth"

// Version returns the version of extauth built into the running program,
// for a host's diagnostics (a status page, a support request, a log line
// at start-up): the version of the module the host's go.mod selected,
// such as "v0.4.0" or a pseudo-version "v0.4.1-0.20261201093000-abcdef012345",
// as the go command recorded it in the program's build info.
//
// It is "(devel)" when extauth is built from a source tree rather than a
// module version: its own tests and demo, go run, a build with
// -buildvcs=false, or a host whose go.mod replaces extauth with a
// directory. It is "" when the program holds no build information (built
// without module support).
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	return versionIn(bi)
}

// versionIn finds extauth in bi: the main module when the program is one
// of extauth's own (cmd/extauth), else a dependency.
func versionIn(bi *debug.BuildInfo) string {
	if bi.Main.Path == modulePath {
		return bi.Main.Version
	}
	for _, m := range bi.Deps {
		if m.Path != modulePath {
			continue
		}
		switch r := m.Replace; {
		case r == nil:
			return m.Version
		case r.Version == "":
			return "(devel)" // replaced by a directory: its code has no version
		default:
			return r.Version
		}
	}
	return ""
}
