package main

import (
	"fmt"
	"go/types"
	"slices"
	"strings"
)

// features renders the exported API of pkgs one feature a line, sorted, in
// the form of Go's own api/*.txt files (cmd/api):
//
//	pkg P, const Name Type = value
//	pkg P, var Name Type
//	pkg P, func Name(params) results
//	pkg P, type Name struct
//	pkg P, type Name struct, Field Type
//	pkg P, type Name struct, embedded Type
//	pkg P, type Name struct, not comparable
//	pkg P, type Name interface { M1, M2 }
//	pkg P, type Name interface, M1(params) results
//	pkg P, type Name interface, unexported methods
//	pkg P, type Name = Other
//	pkg P, method (Name) M(params) results
//	pkg P, method (*Name) M(params) results
//
// and, as in Go's files since 1.21, what a doc comment deprecates:
//
//	pkg P, func Name //deprecated
//	pkg P, type Name struct, Field //deprecated
//
// Parameter names are left out, since changing them changes nothing for
// a caller. "not comparable" is ours: Go's files leave comparability out,
// but a struct that stops being comparable breaks every == of it.
func (m *module) features() ([]string, error) {
	var out []string
	for _, p := range m.Packages {
		out = append(out, packageFeatures(p)...)
		dep, err := deprecations(p.Path(), m.files[p.Path()])
		if err != nil {
			return nil, err
		}
		out = append(out, dep...)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func packageFeatures(p *types.Package) []string {
	prefix := "pkg " + p.Path() + ", "
	q := func(other *types.Package) string {
		if other == p {
			return ""
		}
		return other.Name()
	}
	typ := func(t types.Type) string { return typeString(t, q) }
	var out []string
	add := func(format string, args ...any) { out = append(out, prefix+fmt.Sprintf(format, args...)) }

	scope := p.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		switch obj := obj.(type) {
		case *types.Const:
			add("const %s %s = %s", name, typ(obj.Type()), obj.Val().ExactString())
		case *types.Var:
			add("var %s %s", name, typ(obj.Type()))
		case *types.Func:
			add("func %s%s", name, signature(obj.Type().(*types.Signature), q))
		case *types.TypeName:
			out = append(out, typeFeatures(prefix, obj, q)...)
		}
	}
	return out
}

func typeFeatures(prefix string, obj *types.TypeName, q types.Qualifier) []string {
	typ := func(t types.Type) string { return typeString(t, q) }
	name := obj.Name()
	var out []string
	add := func(format string, args ...any) { out = append(out, prefix+fmt.Sprintf(format, args...)) }
	if a, ok := obj.Type().(*types.Alias); ok {
		add("type %s = %s", name, typ(a.Rhs()))
		return out
	}
	named, ok := obj.Type().(*types.Named)
	if !ok {
		add("type %s %s", name, typ(obj.Type()))
		return out
	}
	if tp := named.TypeParams(); tp.Len() > 0 {
		var b strings.Builder
		for i := range tp.Len() {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s %s", tp.At(i).Obj().Name(), typ(tp.At(i).Constraint()))
		}
		name += "[" + b.String() + "]"
	}
	switch u := named.Underlying().(type) {
	case *types.Struct:
		add("type %s struct", name)
		for f := range u.Fields() {
			switch {
			case !f.Exported():
			case f.Embedded():
				add("type %s struct, embedded %s", name, typ(f.Type()))
			default:
				add("type %s struct, %s %s", name, f.Name(), typ(f.Type()))
			}
		}
		if !types.Comparable(named) {
			add("type %s struct, not comparable", name)
		}
	case *types.Interface:
		var names []string
		unexported := false
		for m := range u.Methods() {
			if !m.Exported() {
				unexported = true
				continue
			}
			names = append(names, m.Name())
			add("type %s interface, %s%s", name, m.Name(), signature(m.Type().(*types.Signature), q))
		}
		if unexported {
			add("type %s interface, unexported methods", name)
		}
		add("type %s interface { %s }", name, strings.Join(names, ", "))
	default:
		add("type %s %s", name, typ(u))
	}
	// The method sets of T and *T, promoted methods included: each method
	// a value of T has is listed on T, the others on *T.
	value := types.NewMethodSet(named)
	for sel := range types.NewMethodSet(types.NewPointer(named)).Methods() {
		m := sel.Obj().(*types.Func)
		if !m.Exported() {
			continue
		}
		recv := obj.Name()
		if value.Lookup(m.Pkg(), m.Name()) == nil {
			recv = "*" + recv
		}
		add("method (%s) %s%s", recv, m.Name(), signature(m.Type().(*types.Signature), q))
	}
	return out
}

// signature writes sig's parameters and results without their names.
func signature(sig *types.Signature, q types.Qualifier) string {
	var b strings.Builder
	tuple := func(t *types.Tuple, variadic bool) {
		for i := range t.Len() {
			if i > 0 {
				b.WriteString(", ")
			}
			v := t.At(i).Type()
			if variadic && i == t.Len()-1 {
				b.WriteString("..." + typeString(v.(*types.Slice).Elem(), q))
				continue
			}
			b.WriteString(typeString(v, q))
		}
	}
	if tp := sig.TypeParams(); tp.Len() > 0 {
		b.WriteString("[")
		for i := range tp.Len() {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s %s", tp.At(i).Obj().Name(), typeString(tp.At(i).Constraint(), q))
		}
		b.WriteString("]")
	}
	b.WriteString("(")
	tuple(sig.Params(), sig.Variadic())
	b.WriteString(")")
	switch r := sig.Results(); r.Len() {
	case 0:
	case 1:
		b.WriteString(" " + typeString(r.At(0).Type(), q))
	default:
		b.WriteString(" (")
		tuple(r, false)
		b.WriteString(")")
	}
	return b.String()
}

// typeString is types.TypeString without the names of parameters and
// results in the func types t holds (a hook's func(w, r, id) field).
func typeString(t types.Type, q types.Qualifier) string {
	return types.TypeString(unnamed(t), q)
}

func unnamed(t types.Type) types.Type {
	switch t := t.(type) {
	case *types.Pointer:
		return types.NewPointer(unnamed(t.Elem()))
	case *types.Slice:
		return types.NewSlice(unnamed(t.Elem()))
	case *types.Array:
		return types.NewArray(unnamed(t.Elem()), t.Len())
	case *types.Map:
		return types.NewMap(unnamed(t.Key()), unnamed(t.Elem()))
	case *types.Chan:
		return types.NewChan(t.Dir(), unnamed(t.Elem()))
	case *types.Signature:
		tuple := func(tu *types.Tuple) *types.Tuple {
			vars := make([]*types.Var, tu.Len())
			for i := range tu.Len() {
				vars[i] = types.NewParam(tu.At(i).Pos(), tu.At(i).Pkg(), "", unnamed(tu.At(i).Type()))
			}
			return types.NewTuple(vars...)
		}
		return types.NewSignatureType(nil, nil, nil, tuple(t.Params()), tuple(t.Results()), t.Variadic())
	}
	return t
}
