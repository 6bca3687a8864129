//go:build interop

package extauthtest_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A host module outside this repository: a tiny application and its tests.
// Each test signs a user in through the application's own routes with each
// of the six providers, in mock mode and against the fake providers of the
// real protocols, and sees a failure with the code it chose, in fewer than
// ten lines.
var hostModule = map[string]string{
	"app.go": `package host

import (
	"net/http"

	"github.com/extauth/extauth"
)

// New is the host application: extauth's routes, a hook that says who
// signed in, a failure page that says why not.
func New(cfg *extauth.Config, base string) (*extauth.Auth, http.Handler) {
	a, err := extauth.New(cfg, extauth.Options{BaseURL: base, CookieKey: make([]byte, 32),
		OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
			w.Write([]byte("signed in with " + id.Provider + " as " + id.UID))
		},
		OnFailure: func(w http.ResponseWriter, r *http.Request, err *extauth.Error) {
			w.WriteHeader(err.Code.HTTPStatus())
			w.Write([]byte("failed: " + string(err.Code)))
		},
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	a.Mount(mux)
	return a, mux
}
`,
	"app_test.go": `package host

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest"
)

// serve runs the application with the configuration cfg makes for its
// URL, and waits until it can sign in.
func serve(t *testing.T, cfg func(base string) *extauth.Config) (*extauth.Auth, string) {
	var a *extauth.Auth
	srv := extauthtest.Serve(t, func(base string) (h http.Handler) { a, h = New(cfg(base), base); return })
	if err := a.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	return a, srv.URL
}

// Mock mode: no provider is configured.
func TestMockSignIn(t *testing.T) {
	a, url := serve(t, func(string) *extauth.Config { return &extauth.Config{} })
	for _, p := range extauth.BuiltinProviders() {
		extauthtest.Mock(a).SignIn(p).Fail(p, extauth.CodeTimeout)
		b := extauthtest.NewBrowser(t)
		if ok, failed := b.Post(url+"/users/auth/"+string(p), nil).Body, b.Post(url+"/users/auth/"+string(p), nil).Body; !strings.HasPrefix(ok, "signed in with "+string(p)+" as ") || failed != "failed: timeout" {
			t.Errorf("%s: %q, then %q", p, ok, failed)
		}
	}
}

// The fake providers of the real protocols, registered for this
// application's callback URLs.
func TestFakeProviders(t *testing.T) {
	var fakes *extauthtest.Providers
	_, url := serve(t, func(base string) *extauth.Config { fakes = extauthtest.NewProviders(t, base, extauthtest.ProvidersOptions{}); return fakes.Config() })
	for _, p := range extauth.BuiltinProviders() {
		ok := extauthtest.NewBrowser(t).Post(url+"/users/auth/"+string(p), nil).Body
		fakes.SetFault(p, extauthtest.Deny)
		if failed := extauthtest.NewBrowser(t).Post(url+"/users/auth/"+string(p), nil).Body; !strings.HasPrefix(ok, "signed in with "+string(p)+" as ") || failed != "failed: access_denied" {
			t.Errorf("%s: %q, then %q", p, ok, failed)
		}
	}
}
`,
}

// TestExternalModule writes hostModule to a directory outside the
// repository, with a go.mod that replaces extauth by this checkout, and
// runs its tests with the go command, offline: what a host does, and the
// "Done when" of issue 12.
func TestExternalModule(t *testing.T) {
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	goMod := "module example.com/host\n\ngo 1.26.0\n\nrequire github.com/extauth/extauth v0.0.0\n\nreplace github.com/extauth/extauth => " + repo + "\n"
	files := map[string]string{"go.mod": goMod}
	for name, src := range hostModule {
		files[name] = src
	}
	// The repository's go.sum holds every checksum the host needs: its
	// dependencies are extauth's.
	sum, err := os.ReadFile(filepath.Join(repo, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	files["go.sum"] = string(sum)
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	checkTestLength(t, filepath.Join(dir, "app_test.go"), 10)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-v", "./...")
	cmd.Dir = dir
	// Offline, from the module cache: -mod=mod lets the go command fill in
	// the host's requirements from extauth's go.mod.
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test in the host module: %v\n%s", err, out)
	}
	for _, test := range []string{"TestMockSignIn", "TestFakeProviders"} {
		if !strings.Contains(string(out), "--- PASS: "+test) {
			t.Errorf("%s did not pass:\n%s", test, out)
		}
	}
}

// checkTestLength fails t when a test function of file has max lines or
// more between its braces.
func checkTestLength(t *testing.T, file string, max int) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	tests := 0
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || !strings.HasPrefix(fn.Name.Name, "Test") {
			continue
		}
		tests++
		if n := fset.Position(fn.Body.Rbrace).Line - fset.Position(fn.Body.Lbrace).Line - 1; n >= max {
			t.Errorf("%s has %d lines, not fewer than %d", fn.Name.Name, n, max)
		}
	}
	if tests == 0 {
		t.Fatal("no test in the host module")
	}
}
