package main

import (
	"cmp"
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
)

// deprecations lists, as //deprecated feature lines, the exported
// declarations of a package whose doc comment has a paragraph starting
// "Deprecated: " (go.dev/wiki/Deprecated): functions, methods, types,
// constants, variables, struct fields and interface methods.
func deprecations(pkg string, files []string) ([]string, error) {
	prefix := "pkg " + pkg + ", "
	var out []string
	add := func(doc *ast.CommentGroup, feature string) {
		if deprecated(doc) {
			out = append(out, prefix+feature+" //deprecated")
		}
	}
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					add(d.Doc, "func "+d.Name.Name)
					continue
				}
				if recv := receiver(d.Recv.List[0].Type); recv != "" {
					add(d.Doc, "method ("+recv+") "+d.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					doc := d.Doc
					if len(d.Specs) > 1 || d.Lparen.IsValid() {
						doc = nil
					}
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						add(cmp.Or(s.Doc, doc), "type "+s.Name.Name)
						members(s, add)
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								add(cmp.Or(s.Doc, doc), d.Tok.String()+" "+n.Name)
							}
						}
					}
				}
			}
		}
	}
	return out, nil
}

// members marks a struct's fields and an interface's methods.
func members(s *ast.TypeSpec, add func(*ast.CommentGroup, string)) {
	var kind string
	var list *ast.FieldList
	switch t := s.Type.(type) {
	case *ast.StructType:
		kind, list = "struct", t.Fields
	case *ast.InterfaceType:
		kind, list = "interface", t.Methods
	default:
		return
	}
	for _, f := range list.List {
		for _, n := range f.Names {
			if n.IsExported() {
				add(f.Doc, "type "+s.Name.Name+" "+kind+", "+n.Name)
			}
		}
	}
}

// receiver is "T" or "*T" for an exported receiver type, else "".
func receiver(e ast.Expr) string {
	star := ""
	if s, ok := e.(*ast.StarExpr); ok {
		star, e = "*", s.X
	}
	switch t := e.(type) {
	case *ast.IndexExpr:
		e = t.X
	case *ast.IndexListExpr:
		e = t.X
	}
	if id, ok := e.(*ast.Ident); ok && id.IsExported() {
		return star + id.Name
	}
	return ""
}

// deprecated reports whether a paragraph of doc starts "Deprecated: ".
func deprecated(doc *ast.CommentGroup) bool {
	if doc == nil {
		return false
	}
	paragraphStart := true
	for line := range strings.Lines(doc.Text()) {
		line = strings.TrimSpace(line)
		if paragraphStart && strings.HasPrefix(line, "Deprecated: ") {
			return true
		}
		paragraphStart = line == ""
	}
	return false
}
