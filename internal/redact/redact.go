// Package redact prints structs that hold secrets without their secrets.
//
// A type whose exported fields are tagged `redact:"secret"` gets Format,
// LogValue and MarshalJSON methods that print View(v) instead of itself:
// every fmt verb, slog and encoding/json then show "[REDACTED]" where a
// secret was, and never the secret in any encoding (%x, %q, base64).
package redact

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
)

// Mark stands in for a secret that is set.
const Mark = "[REDACTED]"

// String returns Mark for a non-empty secret and "" for an empty one, so a
// reader still sees whether it was configured.
func String(s string) string {
	if s == "" {
		return ""
	}
	return Mark
}

// View returns a copy of the struct v (or of what a pointer v points to) as a
// value of an unnamed struct type without methods, so printing it cannot
// come back to the caller's Format: fields tagged `redact:"secret"` become
// strings holding Mark, or "" when the secret is empty; func and chan fields
// (and maps and slices of them)
// are left out, since printing them says nothing and encoding/json cannot;
// nested structs that do not print themselves become views too.
func View(v any) any {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return nil
		}
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct {
		return v
	}
	rt := rv.Type()
	var fields []reflect.StructField
	var values []reflect.Value
	for i := 0; i < rt.NumField(); i++ {
		f := rt.Field(i)
		if !f.IsExported() {
			continue
		}
		fv := rv.Field(i)
		switch {
		case f.Tag.Get("redact") == "secret":
			s := ""
			if !fv.IsZero() && !(fv.Kind() == reflect.Slice && fv.Len() == 0) {
				s = Mark
			}
			f.Type, fv = reflect.TypeOf(""), reflect.ValueOf(s)
		case isCode(f.Type) || ((f.Type.Kind() == reflect.Map || f.Type.Kind() == reflect.Slice) && isCode(f.Type.Elem())):
			continue
		case f.Type.Kind() == reflect.Struct && !printsItself(f.Type):
			// Nested options hold hooks too; secrets, by then, sit in
			// types that print themselves.
			fv = reflect.ValueOf(View(fv.Interface()))
			f.Type = fv.Type()
		}
		f.Anonymous = false
		f.Index, f.Offset = nil, 0
		fields = append(fields, f)
		values = append(values, fv)
	}
	out := reflect.New(reflect.StructOf(fields)).Elem()
	for i, fv := range values {
		out.Field(i).Set(fv)
	}
	return out.Interface()
}

var (
	formatter = reflect.TypeFor[fmt.Formatter]()
	stringer  = reflect.TypeFor[fmt.Stringer]()
	marshaler = reflect.TypeFor[json.Marshaler]()
)

func printsItself(t reflect.Type) bool {
	return t.Implements(formatter) || t.Implements(stringer) || t.Implements(marshaler)
}

func isCode(t reflect.Type) bool { return t.Kind() == reflect.Func || t.Kind() == reflect.Chan }

// Format prints View(v) for every verb: %+v and %#v keep their flags, every
// other verb prints as %v, so that %x or %q cannot encode a secret.
func Format(f fmt.State, verb rune, v any) {
	view := View(v)
	switch {
	case verb == 'v' && f.Flag('#'):
		fmt.Fprintf(f, "%#v", view)
	case verb == 'v' && f.Flag('+'):
		fmt.Fprintf(f, "%+v", view)
	default:
		fmt.Fprintf(f, "%v", view)
	}
}

// LogValue is View(v) for slog.
func LogValue(v any) slog.Value { return slog.AnyValue(View(v)) }

// MarshalJSON encodes View(v).
func MarshalJSON(v any) ([]byte, error) { return json.Marshal(View(v)) }

// MarshalYAML is View(v) for gopkg.in/yaml.v3, whose Marshaler this is.
func MarshalYAML(v any) (any, error) { return View(v), nil }
