package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// The type checks of extauth.Secret's rule live here, beside the API
// record, rather than in the root package's tests: they need go/types,
// whose compiling (with the importers) was 5.5 of the CPU seconds a cold
// go test ./... spent; the root's TestSecretsCannotBeCompared keeps the
// rule for the types it names, by reflection.

// secretPackages are the packages whose exported types hold secrets.
var secretPackages = []string{"github.com/extauth/extauth", "github.com/extauth/extauth/providers"}

// loadSecretPackages type-checks secretPackages from the export data go
// test has built for them.
func loadSecretPackages(t *testing.T) map[string]*types.Package {
	t.Helper()
	pkgs, err := packages.Load(&packages.Config{
		Mode: packages.NeedName | packages.NeedTypes,
		Dir:  filepath.Join("..", ".."),
	}, secretPackages...)
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]*types.Package{}
	for _, p := range pkgs {
		for _, e := range p.Errors {
			t.Fatalf("%s: %s", p.PkgPath, e.Msg)
		}
		byPath[p.PkgPath] = p.Types
	}
	return byPath
}

// A Secret holds its value behind a pointer (so that fmt never prints it),
// so == of two Secrets, or of two values holding one, would compare where
// the values are held: equal secrets would compare unequal. Every exported
// type of the packages whose types hold secrets that holds a Secret,
// however deep in its structs and arrays, is not comparable: one added
// later cannot bring == back.
func TestEveryTypeHoldingASecretIsNotComparable(t *testing.T) {
	pkgs := loadSecretPackages(t)
	secret := pkgs[secretPackages[0]].Scope().Lookup("Secret").Type()
	checked := 0
	for _, path := range secretPackages {
		pkg := pkgs[path]
		for _, name := range pkg.Scope().Names() {
			tn, ok := pkg.Scope().Lookup(name).(*types.TypeName)
			if !ok || !tn.Exported() || !holds(tn.Type(), secret) {
				continue
			}
			checked++
			if types.Comparable(tn.Type()) {
				t.Errorf("%s.%s holds a Secret and is comparable with ==", pkg.Name(), name)
			}
		}
	}
	// Secret, OAuthProvider, the SAML and OpenID Connect settings and
	// their additional settings, Config.
	if checked < 7 {
		t.Errorf("found %d types holding a Secret", checked)
	}
}

// holds reports whether a value of t holds a value of secret in itself,
// through its fields and array elements.
func holds(t, secret types.Type) bool {
	if types.Identical(t, secret) {
		return true
	}
	switch u := t.Underlying().(type) {
	case *types.Struct:
		for f := range u.Fields() {
			if holds(f.Type(), secret) {
				return true
			}
		}
	case *types.Array:
		return holds(u.Elem(), secret)
	}
	return false
}

// What a host would write does not compile: each line of the program
// with == of a type holding a Secret, or a Secret as a map key, is a type
// error, and the control line, == of Tokens, is not.
func TestComparingSecretsDoesNotCompile(t *testing.T) {
	const src = `package host

import "github.com/extauth/extauth"

var (
	_ = extauth.Secret{} == extauth.Secret{}
	_ = extauth.NewSecret("s") != extauth.NewSecret("s")
	_ = extauth.OAuthProvider{} == extauth.OAuthProvider{}
	_ = extauth.OIDCConfig{} == extauth.OIDCConfig{}
	_ = map[extauth.Secret]bool{}
	_ = any(extauth.Tokens{}) == any(extauth.Tokens{}) && extauth.Tokens{} == extauth.Tokens{} // control
)
`
	pkgs := loadSecretPackages(t)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "host.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	failed := map[int]string{}
	conf := types.Config{
		Importer: importerFunc(func(path string) (*types.Package, error) {
			if p, ok := pkgs[path]; ok {
				return p, nil
			}
			t.Fatalf("the host program imports %s", path)
			return nil, nil
		}),
		Error: func(err error) { e := err.(types.Error); failed[fset.Position(e.Pos).Line] = e.Msg },
	}
	conf.Check("host", fset, []*ast.File{f}, nil)
	for i, line := range strings.Split(src, "\n") {
		n := i + 1
		switch {
		case strings.Contains(line, "// control"):
			if msg, ok := failed[n]; ok {
				t.Errorf("line %d, the control, does not compile: %s", n, msg)
			}
		case strings.HasPrefix(line, "\t_ = "):
			msg, ok := failed[n]
			if !ok {
				t.Errorf("line %d compiles: %s", n, strings.TrimSpace(line))
			} else if !strings.Contains(msg, "cannot be compared") && !strings.Contains(msg, "invalid map key") {
				t.Errorf("line %d fails for another reason: %s", n, msg)
			}
		}
	}
	if len(failed) == 0 {
		t.Fatal("nothing failed to compile")
	}
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }
