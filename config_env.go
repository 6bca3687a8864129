package extauth

import (
	"errors"
	"strings"
)

// ErrTemplate is the class of problems with a ${VAR} or <%= ENV[...] %>
// look-up that cannot be evaluated: any other ERB, a malformed reference, or
// ENV.fetch of an unset variable without a default.
var ErrTemplate = errors.New("unsupported or failed variable look-up")

// expand substitutes the variable look-ups of one decoded value. It runs on
// the value after YAML parsing, so a variable can never add keys or change
// the structure of the file, and its result is not expanded again.
func (l *loader) expand(p Provider, key, s string) (string, bool) {
	if !strings.Contains(s, "${") && !strings.Contains(s, "<%") {
		return s, true
	}
	var b strings.Builder
	for s != "" {
		i := strings.IndexAny(s, "$<")
		if i < 0 {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:i])
		s = s[i:]
		switch {
		case strings.HasPrefix(s, "$${"):
			b.WriteString("${")
			s = s[3:]
		case strings.HasPrefix(s, "${"):
			end := strings.IndexByte(s, '}')
			if end < 0 || !isVarName(s[2:end]) {
				l.problem(p, key, "has a ${ that is not a ${NAME} reference (write $${ for a literal ${)", ErrTemplate)
				return "", false
			}
			b.WriteString(l.variable(key, s[2:end]))
			s = s[end+1:]
		case strings.HasPrefix(s, "<%%"):
			b.WriteString("<%")
			s = s[3:]
		case strings.HasPrefix(s, "<%="):
			end := strings.Index(s, "%>")
			if end < 0 {
				l.problem(p, key, "has an unterminated <%= tag", ErrTemplate)
				return "", false
			}
			ref, ok := parseENV(strings.TrimSpace(strings.TrimSuffix(s[3:end], "-")))
			if !ok {
				l.problem(p, key, `has ERB other than <%= ENV["NAME"] %> or <%= ENV.fetch("NAME", "default") %>`, ErrTemplate)
				return "", false
			}
			v, set := l.lookup(ref.name)
			switch {
			case set:
			case ref.hasDefault:
				v = ref.def
			case ref.required:
				l.problem(p, key, "needs environment variable "+ref.name+", which is not set (ENV.fetch without a default)", ErrTemplate)
				return "", false
			default:
				v = l.variable(key, ref.name)
			}
			b.WriteString(v)
			s = s[end+2:]
		case strings.HasPrefix(s, "<%"):
			l.problem(p, key, `has ERB code; only <%= ENV["NAME"] %> look-ups are supported`, ErrTemplate)
			return "", false
		default:
			b.WriteByte(s[0])
			s = s[1:]
		}
	}
	return b.String(), true
}

// variable returns the value of an optional variable, noting when it is
// unset: the setting then reads as empty, and if it was required the
// missing-setting problem says why.
func (l *loader) variable(key, name string) string {
	v, ok := l.lookup(name)
	if !ok {
		l.warn("%s: environment variable %s is not set", key, name)
		l.hints[key] = append(l.hints[key], "environment variable "+name+" is not set")
	}
	return v
}

func isVarName(s string) bool {
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for _, c := range []byte(s) {
		if c != '_' && !(c >= 'A' && c <= 'Z') && !(c >= 'a' && c <= 'z') && !(c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// envRef is one parsed <%= ENV... %> expression.
type envRef struct {
	name       string
	def        string
	hasDefault bool
	// required is ENV.fetch without a default, which raises in Ruby when the
	// variable is unset.
	required bool
}

// parseENV parses the few Ruby expressions that secrets files use to read
// the environment:
//
//	ENV["NAME"]
//	ENV["NAME"] || "default"
//	ENV.fetch("NAME")
//	ENV.fetch("NAME", "default")   (or nil)
//	ENV.fetch("NAME") { "default" }
//
// with single or double quotes. Defaults apply only when the variable is
// unset, as in Ruby, where an empty string is truthy.
func parseENV(expr string) (envRef, bool) {
	var r envRef
	s := &rubyScanner{s: expr}
	if !s.lit("ENV") {
		return r, false
	}
	var ok bool
	switch {
	case s.lit("["):
		if r.name, ok = s.str(); !ok || !s.lit("]") {
			return r, false
		}
		if s.lit("||") {
			if r.def, ok = s.str(); !ok {
				return r, false
			}
			r.hasDefault = true
		}
	case s.lit(".fetch("):
		if r.name, ok = s.str(); !ok {
			return r, false
		}
		switch {
		case s.lit(","):
			if !s.lit("nil") {
				if r.def, ok = s.str(); !ok {
					return r, false
				}
			}
			r.hasDefault = true
			if !s.lit(")") {
				return r, false
			}
		case s.lit(")"):
			if s.lit("{") {
				if r.def, ok = s.str(); !ok || !s.lit("}") {
					return r, false
				}
				r.hasDefault = true
			} else {
				r.required = true
			}
		default:
			return r, false
		}
	default:
		return r, false
	}
	return r, s.done() && isVarName(r.name)
}

// rubyScanner reads tokens of a tiny Ruby subset, skipping blanks before each.
type rubyScanner struct{ s string }

func (r *rubyScanner) skip() { r.s = strings.TrimLeft(r.s, " \t") }

func (r *rubyScanner) lit(tok string) bool {
	r.skip()
	if strings.HasPrefix(r.s, tok) {
		r.s = r.s[len(tok):]
		return true
	}
	return false
}

// str reads a quoted string without escapes or #{} interpolation, the only
// kind whose value can be known without running Ruby.
func (r *rubyScanner) str() (string, bool) {
	r.skip()
	if r.s == "" || (r.s[0] != '"' && r.s[0] != '\'') {
		return "", false
	}
	q := r.s[0]
	end := strings.IndexByte(r.s[1:], q)
	if end < 0 {
		return "", false
	}
	v := r.s[1 : 1+end]
	if strings.ContainsRune(v, '\\') || (q == '"' && strings.Contains(v, "#{")) {
		return "", false
	}
	r.s = r.s[end+2:]
	return v, true
}

func (r *rubyScanner) done() bool {
	r.skip()
	return r.s == ""
}
