package main

import (
	"errors"
	"fmt"
	"go/token"
	"go/types"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/exp/apidiff"
	"golang.org/x/mod/modfile"
	"golang.org/x/tools/go/packages"
)

// module is the public API of a module as loadModule finds it.
type module struct {
	*apidiff.Module
	fset *token.FileSet
	// files are the Go files of each package, by import path, for the
	// doc comments that mark what is deprecated.
	files map[string][]string
	// mods are the repository's modules, and loaded the paths of those
	// whose packages were loaded.
	mods   []repoModule
	loaded []string
}

// loadModule type-checks the public packages of the module in dir and of
// the modules nested in it that a host may require (see repoModules):
// every package a host may import, which is every package but commands
// (package main), those under internal/ and examples/, and bench and
// interop, which hold only tests. When only is set, it loads only the
// module in that directory, relative to dir ("." for dir's own), and the
// check covers only its packages: go test ./... then compiles none of the
// stores' dependencies. env is added to the go command's environment
// (tests pass GOWORK=off for their own modules).
//
// The types come from the compiler's export data: for a release's record
// (trim), built with -trimpath, so that what is written from them names no
// directory of this machine; for a check, as go test builds the packages,
// so that its build cache serves them.
func loadModule(dir string, env []string, trim bool, only string) (*module, error) {
	mods, err := repoModules(dir)
	if err != nil {
		return nil, err
	}
	m := &module{Module: &apidiff.Module{Path: mods[0].path}, fset: token.NewFileSet(), files: map[string][]string{}, mods: mods}
	var errs []error
	for _, mod := range mods {
		if only != "" && filepath.Clean(only) != mod.dir {
			continue
		}
		m.loaded = append(m.loaded, mod.path)
		cfg := &packages.Config{
			Mode: packages.NeedName | packages.NeedFiles | packages.NeedTypes | packages.NeedModule,
			Dir:  filepath.Join(dir, mod.dir),
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
		for _, p := range pkgs {
			for _, e := range p.Errors {
				errs = append(errs, fmt.Errorf("%s: %s", p.PkgPath, e.Msg))
			}
			if p.Module == nil || p.Module.Path != mod.path {
				continue
			}
			if public(m.Path, p.PkgPath, p.Name) {
				m.Packages = append(m.Packages, p.Types)
				m.files[p.PkgPath] = p.GoFiles
			}
		}
	}
	if len(m.loaded) == 0 {
		return nil, fmt.Errorf("no module of %s is in %s", m.Path, only)
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

// repoModule is a module of the repository: its directory, relative to
// the root's, and its path.
type repoModule struct{ dir, path string }

// repoModules lists the module in dir, first, and the modules nested in
// it whose paths lie under its path and whose packages a host may import:
// a store whose dependencies (go-redis, pgx) stay out of the graph of an
// application that does not require it, yet which is released with the
// library and holds to the same record. Nested modules of tests and
// examples (bench, examples, internal/devdeps) are left out, as their
// packages are.
func repoModules(dir string) ([]repoModule, error) {
	data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return nil, err
	}
	root := modfile.ModulePath(data)
	if root == "" {
		return nil, fmt.Errorf("%s/go.mod names no module", dir)
	}
	mods := []repoModule{{".", root}}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path != dir && (name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		if d.IsDir() || name != "go.mod" || filepath.Dir(path) == dir {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		p := modfile.ModulePath(data)
		rel, _ := filepath.Rel(dir, filepath.Dir(path))
		if strings.HasPrefix(p, root+"/") && public(root, p, "") {
			mods = append(mods, repoModule{rel, p})
		}
		return nil
	})
	return mods, err
}

// owner is the path of the module of mods that holds the package at path:
// the longest module path that is path or a prefix of it.
func owner(mods []repoModule, path string) string {
	var best string
	for _, m := range mods {
		if (path == m.path || strings.HasPrefix(path, m.path+"/")) && len(m.path) > len(best) {
			best = m.path
		}
	}
	return best
}

// covers reports whether the check covers the package at path: whether
// its module is one that was loaded.
func (m *module) covers(path string) bool {
	return slices.Contains(m.loaded, owner(m.mods, path))
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
