package main

import (
	"archive/zip"
	"bytes"
	"fmt"
	"go/token"
	"go/types"
	"io"
	"strings"

	"golang.org/x/exp/apidiff"
	"golang.org/x/tools/go/gcexportdata"
)

// The types of a release's API are kept as apidiff's own module export
// data ("apidiff -m -w FILE MODULE" writes the same format, and
// "apidiff -m FILE MODULE" reads it): a zip archive holding an entry
// "module" with the module path, and for each package an entry
// "<import path>.x" with its gcexportdata. The entries carry no time, so
// that the same API always makes the same bytes.

func writeExportData(w io.Writer, fset *token.FileSet, m *apidiff.Module) error {
	z := zip.NewWriter(w)
	entry := func(name string) (io.Writer, error) {
		return z.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate})
	}
	e, err := entry("module")
	if err != nil {
		return err
	}
	if _, err := io.WriteString(e, m.Path); err != nil {
		return err
	}
	for _, p := range m.Packages {
		e, err := entry(p.Path() + ".x")
		if err != nil {
			return err
		}
		if err := gcexportdata.Write(e, fset, p); err != nil {
			return fmt.Errorf("export data of %s: %w", p.Path(), err)
		}
	}
	return z.Close()
}

func readExportData(data []byte) (*apidiff.Module, error) {
	z, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	m := &apidiff.Module{}
	for _, f := range z.File {
		r, err := f.Open()
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			return nil, err
		}
		if f.Name == "module" {
			m.Path = string(b)
			continue
		}
		path, ok := strings.CutSuffix(f.Name, ".x")
		if !ok {
			return nil, fmt.Errorf("unexpected entry %q", f.Name)
		}
		// Each package gets its own imports: apidiff compares one package
		// at a time and knows other packages' types by path and name.
		p, err := gcexportdata.Read(bytes.NewReader(b), fset, map[string]*types.Package{}, path)
		if err != nil {
			return nil, fmt.Errorf("export data of %s: %w", path, err)
		}
		m.Packages = append(m.Packages, p)
	}
	if m.Path == "" {
		return nil, fmt.Errorf("no module entry")
	}
	return m, nil
}
