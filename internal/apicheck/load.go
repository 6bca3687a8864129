package main

import (
	"errors"
	"fmt"
	"go/token"
	"go/types"
	"os"
	"slices"
	"strings"

	"golang.org/x/exp/apidiff"
	"golang.org/x/tools/go/packages"
)

// module is the public API of a module as loadModule finds it.
type module struct {
	*apidiff.Module
	fset *token.FileSet
	// files are the Go files of each package, by import path, for the
	// doc comments that mark what is deprecated.
	files map[string][]string
}

// loadModule type-checks the public packages of the module in dir: every
// package a host may import, which is every package but commands
// (package main), those under internal/ and examples/, and bench and
// interop, which hold only tests. env is added to the go command's
// environment (tests pass GOWORK=off for their own modules).
//
// The types come from the compiler's export data: for a release's record
// (trim), built with -trimpath, so that what is written from them names no
// directory of this machine; for a check, as go test builds the packages,
// so that its build cache serves them.
func loadModule(dir string, env []string, trim bool) (*module, error) {
	m := &module{Module: &apidiff.Module{}, fset: token.NewFileSet(), files: map[string][]string{}}
	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedTypes | packages.NeedModule,
		Dir:  dir,
		Fset: m.fset,
	}
	if trim {
		cfg.BuildFlags = []string{"-trimpath"}
	}
	if env != nil {
		cfg.Env = append(os.Environ(), env...)
	}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, p := range pkgs {
		for _, e := range p.Errors {
			errs = append(errs, fmt.Errorf("%s: %s", p.PkgPath, e.Msg))
		}
		if p.Module == nil || !p.Module.Main {
			continue
		}
		if m.Path == "" {
			m.Path = p.Module.Path
		}
		if public(m.Path, p.PkgPath, p.Name) {
			m.Packages = append(m.Packages, p.Types)
			m.files[p.PkgPath] = p.GoFiles
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(m.Packages) == 0 {
		return nil, fmt.Errorf("no public package in %s", dir)
	}
	slices.SortFunc(m.Packages, func(a, b *types.Package) int { return strings.Compare(a.Path(), b.Path()) })
	return m, nil
}

// public reports whether a host may import the package: module_test.go's
// libraryPackages draws the same line for the importer it builds.
func public(module, path, name string) bool {
	if name == "main" {
		return false
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
	elems := strings.Split(rel, "/")
	return !slices.Contains(elems, "internal") && !slices.Contains([]string{"examples", "bench", "interop"}, elems[0])
}
