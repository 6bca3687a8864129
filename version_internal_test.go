package extauth

import (
	"runtime/debug"
	"testing"
)

func TestVersionIn(t *testing.T) {
	dep := func(v string, r *debug.Module) *debug.BuildInfo {
		return &debug.BuildInfo{
			Main: debug.Module{Path: "example.com/host", Version: "(devel)"},
			Deps: []*debug.Module{
				{Path: "github.com/extauth/extauth/internal/devdeps", Version: "v9.9.9"},
				{Path: modulePath, Version: v, Replace: r},
				{Path: "golang.org/x/oauth2", Version: "v0.37.0"},
			},
		}
	}
	for name, c := range map[string]struct {
		bi   *debug.BuildInfo
		want string
	}{
		"a host requiring a release":    {dep("v0.4.0", nil), "v0.4.0"},
		"a host requiring a commit":     {dep("v0.4.1-0.20261201093000-abcdef012345", nil), "v0.4.1-0.20261201093000-abcdef012345"},
		"a host replacing it by a dir":  {dep("v0.4.0", &debug.Module{Path: "../extauth"}), "(devel)"},
		"a host replacing it by a fork": {dep("v0.4.0", &debug.Module{Path: "example.com/fork/extauth", Version: "v0.4.2"}), "v0.4.2"},
		"go install cmd/extauth@v0.4.0": {&debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "v0.4.0"}}, "v0.4.0"},
		"a build in a clone":            {&debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "v0.4.1-0.20261201093000-abcdef012345+dirty"}}, "v0.4.1-0.20261201093000-abcdef012345+dirty"},
		"go run, -buildvcs=false":       {&debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "(devel)"}}, "(devel)"},
		"a program without extauth":     {&debug.BuildInfo{Main: debug.Module{Path: "example.com/other"}}, ""},
	} {
		if got := versionIn(c.bi); got != c.want {
			t.Errorf("%s: %q, want %q", name, got, c.want)
		}
	}
	// A test binary is extauth's own tree: no version.
	if v := Version(); v != "(devel)" {
		t.Errorf("Version() in extauth's tests = %q, want (devel)", v)
	}
}
