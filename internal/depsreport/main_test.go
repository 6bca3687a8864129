package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMain lets a test run the command itself: the test binary is the
// command when DEPSREPORT_MAIN is set.
func TestMain(m *testing.M) {
	if os.Getenv("DEPSREPORT_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// govulncheck's JSON (v1.8.0, -format json) for a module whose code calls a
// vulnerable function of goxmldsig v1.5.0: the config, the OSV entry, then
// one finding per level it reached (module, package, function).
const reachableJSON = `{"config":{"protocol_version":"v1.0.0","scanner_name":"govulncheck","scanner_version":"v1.8.0","db":"file:///vulndb","go_version":"go1.26.8","scan_level":"symbol","scan_mode":"source"}}
{"progress":{"message":"Scanning your code and 40 packages across 12 dependent modules for known vulnerabilities..."}}
{"osv":{"schema_version":"1.3.1","id":"GO-2026-4753","modified":"0001-01-01T00:00:00Z","aliases":["CVE-2026-33487"],"summary":"Loop Variable Capture Signature Bypass in goxmldsig","affected":[{"package":{"name":"github.com/russellhaering/goxmldsig","ecosystem":"Go"},"ranges":[{"type":"SEMVER","events":[{"introduced":"0"},{"fixed":"1.6.0"}]}]}]}}
{"finding":{"osv":"GO-2026-4753","fixed_version":"v1.6.0","trace":[{"module":"github.com/russellhaering/goxmldsig","version":"v1.5.0"}]}}
{"finding":{"osv":"GO-2026-4753","fixed_version":"v1.6.0","trace":[{"module":"github.com/russellhaering/goxmldsig","version":"v1.5.0","package":"github.com/russellhaering/goxmldsig"}]}}
{"finding":{"osv":"GO-2026-4753","fixed_version":"v1.6.0","trace":[{"module":"github.com/russellhaering/goxmldsig","version":"v1.5.0","package":"github.com/russellhaering/goxmldsig","function":"Validate","receiver":"*ValidationContext","position":{"filename":"validate.go","line":410}},{"module":"example.com/app","package":"example.com/app/sso","function":"verify","position":{"filename":"sso/sso.go","line":12}}]}}
`

// The same vulnerability in a package the code imports without calling
// the vulnerable function, and another in a module it only requires.
const notReachableJSON = `{"config":{"protocol_version":"v1.0.0","scanner_name":"govulncheck","scanner_version":"v1.8.0"}}
{"osv":{"id":"GO-2026-4753","summary":"Loop Variable Capture Signature Bypass in goxmldsig"}}
{"osv":{"id":"GO-2099-0001","summary":"A flaw in a module nothing imports"}}
{"finding":{"osv":"GO-2026-4753","fixed_version":"v1.6.0","trace":[{"module":"github.com/russellhaering/goxmldsig","version":"v1.5.0"}]}}
{"finding":{"osv":"GO-2026-4753","fixed_version":"v1.6.0","trace":[{"module":"github.com/russellhaering/goxmldsig","version":"v1.5.0","package":"github.com/russellhaering/goxmldsig"}]}}
{"finding":{"osv":"GO-2099-0001","trace":[{"module":"example.com/unused","version":"v0.1.0"}]}}
`

func TestFindingsReachable(t *testing.T) {
	fs, err := findings(strings.NewReader(reachableJSON))
	if err != nil {
		t.Fatal(err)
	}
	r := &moduleReport{Dir: ".", Module: "example.com/app", Findings: fs}
	if len(fs) != 1 || !r.reachable() {
		t.Fatalf("findings %+v, reachable %v; want the one called", fs, r.reachable())
	}
	var out bytes.Buffer
	r.print(&out)
	want := "GO-2026-4753 github.com/russellhaering/goxmldsig@v1.5.0 (fixed in v1.6.0): called: " +
		"github.com/russellhaering/goxmldsig.*ValidationContext.Validate, from example.com/app/sso.verify"
	if !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "Loop Variable Capture") {
		t.Errorf("report:\n%s\nwant the line %q and the summary", out.String(), want)
	}
}

func TestFindingsNotReachable(t *testing.T) {
	fs, err := findings(strings.NewReader(notReachableJSON))
	if err != nil {
		t.Fatal(err)
	}
	r := &moduleReport{Dir: ".", Module: "example.com/app", Findings: fs}
	if len(fs) != 2 || r.reachable() {
		t.Fatalf("findings %+v, reachable %v; want two, none called", fs, r.reachable())
	}
	var out bytes.Buffer
	r.print(&out)
	for _, want := range []string{"GO-2026-4753 github.com/russellhaering/goxmldsig@v1.5.0 (fixed in v1.6.0): imported, not called",
		"GO-2099-0001 example.com/unused@v0.1.0 (no fix yet): required, not imported"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report:\n%s\nwant %q", out.String(), want)
		}
	}
}

func TestFindingsRefusesOtherOutput(t *testing.T) {
	for _, in := range []string{"", "Scanning your code...\nNo vulnerabilities found.\n", `{"progress":{"message":"x"}}`} {
		if _, err := findings(strings.NewReader(in)); err == nil {
			t.Errorf("%q read as govulncheck's JSON", in)
		}
	}
}

// go list -m -u -json all, abridged: the main module, a direct dependency
// with a newer release, one at its newest, an indirect one with a newer
// release, the library a module replaces with the tree, and a lookup error.
const listJSON = `{"Path":"github.com/extauth/extauth/examples","Main":true,"Dir":"/src/examples","GoVersion":"1.26.0"}
{"Path":"github.com/crewjam/saml","Version":"v0.5.1","Update":{"Path":"github.com/crewjam/saml","Version":"v0.6.3"}}
{"Path":"github.com/go-chi/chi/v5","Version":"v5.5.0"}
{"Path":"golang.org/x/sys","Version":"v0.49.0","Indirect":true,"Update":{"Path":"golang.org/x/sys","Version":"v0.50.0"}}
{"Path":"github.com/extauth/extauth","Version":"v0.0.0-00010101000000-000000000000","Replace":{"Path":"../"},"Error":{"Err":"module lookup disabled"}}
{"Path":"example.com/gone","Version":"v1.0.0","Error":{"Err":"reading https://proxy.golang.org/example.com/gone/@v/list: 404 Not Found\n\tserver response: not found"}}
`

func TestUpdates(t *testing.T) {
	main, us, err := updates(strings.NewReader(listJSON))
	if err != nil {
		t.Fatal(err)
	}
	if main != "github.com/extauth/extauth/examples" || len(us) != 2 ||
		us[0] != (update{"github.com/crewjam/saml", "v0.5.1", "v0.6.3"}) || us[1].Path != "example.com/gone" || !strings.Contains(us[1].Latest, "404") {
		t.Fatalf("main %q, updates %+v", main, us)
	}
}

// The command over a module of its own with a stand-in govulncheck that
// prints canned output: a reachable finding fails (exit 1), a finding that
// is not reachable passes, a govulncheck that fails is an error (exit 2).
func TestCommandExitStatus(t *testing.T) {
	mod := t.TempDir()
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module example.com/app\n\ngo 1.26.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	db := t.TempDir()
	os.MkdirAll(filepath.Join(db, "index"), 0o755)
	os.WriteFile(filepath.Join(db, "index", "db.json"), []byte(`{"modified":"2026-08-21T20:38:00Z"}`), 0o644)
	for name, tc := range map[string]struct {
		output, exit string
		status       int
		want         string
	}{
		"reachable":     {reachableJSON, "0", 1, "FAIL: a vulnerable function is reachable"},
		"not reachable": {notReachableJSON, "0", 0, "imported, not called"},
		"tool fails":    {"", "3", 2, "depsreport: " + mod},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			canned, standIn := filepath.Join(dir, "govulncheck.json"), filepath.Join(dir, "govulncheck")
			os.WriteFile(canned, []byte(tc.output), 0o644)
			os.WriteFile(standIn, []byte("#!/bin/sh\ncat "+canned+"\nexit "+tc.exit+"\n"), 0o755)
			cmd := exec.Command(os.Args[0], "-db", db, "-govulncheck", standIn, mod)
			cmd.Env = append(os.Environ(), "DEPSREPORT_MAIN=1")
			out, err := cmd.CombinedOutput()
			status := 0
			if ee, ok := err.(*exec.ExitError); ok {
				status = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if status != tc.status || !strings.Contains(string(out), tc.want) {
				t.Fatalf("exit %d, want %d; output:\n%s\nwant %q", status, tc.status, out, tc.want)
			}
		})
	}
}
