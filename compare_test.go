package extauth_test

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/extauth/extauth"
)

// A Secret holds its value behind a pointer (so that fmt never prints it),
// so == of two Secrets, or of two values holding one, would compare where
// the values are held: equal secrets would compare unequal. It must not
// compile instead; Secret.Equal and reflect.DeepEqual compare values.
func TestSecretsCannotBeCompared(t *testing.T) {
	for _, v := range []any{
		extauth.Secret{}, extauth.OAuthProvider{}, extauth.OIDCConfig{}, extauth.OIDCAdditionalSettings{},
		extauth.SAMLConfig{}, extauth.SAMLAdditionalSettings{}, extauth.Config{}, extauth.Options{},
	} {
		if reflect.TypeOf(v).Comparable() {
			t.Errorf("%T is comparable with ==", v)
		}
	}
	a, b := extauth.NewSecret("s"), extauth.NewSecret("s")
	if !a.Equal(b) || a.Equal(extauth.NewSecret("t")) || !reflect.DeepEqual(a, b) || !extauth.NewSecret("").Equal(extauth.Secret{}) {
		t.Error("Secret.Equal or reflect.DeepEqual does not compare values")
	}
}

// Every exported type of the packages whose types hold secrets that holds
// a Secret, however deep in its structs and arrays, is not comparable:
// one added later cannot bring == back.
func TestEveryTypeHoldingASecretIsNotComparable(t *testing.T) {
	imp := exportDataImporter(t, "github.com/extauth/extauth", "github.com/extauth/extauth/providers")
	root, err := imp.Import("github.com/extauth/extauth")
	if err != nil {
		t.Fatal(err)
	}
	secret := root.Scope().Lookup("Secret").Type()
	checked := 0
	for _, path := range []string{"github.com/extauth/extauth", "github.com/extauth/extauth/providers"} {
		pkg, err := imp.Import(path)
		if err != nil {
			t.Fatal(err)
		}
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
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "host.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	failed := map[int]string{}
	conf := types.Config{
		Importer: exportDataImporter(t, "github.com/extauth/extauth"),
		Error:    func(err error) { e := err.(types.Error); failed[fset.Position(e.Pos).Line] = e.Msg },
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

// exportDataImporter imports the packages named (and their dependencies)
// from the export data the go command builds for them: what a host's
// compiler reads.
func exportDataImporter(t *testing.T, pkgs ...string) types.Importer {
	t.Helper()
	out := goCmd(t, ".", nil, append([]string{"list", "-export", "-deps", "-f", "{{if .Export}}{{.ImportPath}}\t{{.Export}}{{end}}"}, pkgs...)...)
	files := map[string]string{}
	for _, l := range lines(out) {
		path, file, _ := strings.Cut(l, "\t")
		files[path] = file
	}
	return importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		file, ok := files[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
}
