package extauth

import (
	"errors"
	"fmt"
	"strings"
)

// ErrTemplate is the class of problems with a ${VAR} or ERB look-up that
// cannot be evaluated: ERB other than <%= ENV[...] %> look-ups, a malformed
// reference, or ENV.fetch of an unset variable without a default.
var ErrTemplate = errors.New("unsupported or failed variable look-up")

// The sources of the environment's name, in the order they are tried; the
// values of Config.EnvironmentSource.
const (
	envFromOption  = "Env option"
	envFromDefault = "default"
)

// envVariables name the environment section, the first one set winning:
// extauth's own, then the ones Rails and other frameworks set.
var envVariables = []string{"EXTAUTH_ENV", "RAILS_ENV", "APP_ENV"}

// chooseEnvironment returns the environment section to read and why.
func chooseEnvironment(o loadOptions) (name, source string) {
	if o.env != "" {
		return o.env, envFromOption
	}
	for _, v := range envVariables {
		if name, ok := o.lookup(v); ok && name != "" {
			return name, v
		}
	}
	return "development", envFromDefault
}

// why says how the environment was chosen, for messages.
func why(source string) string {
	switch source {
	case envFromOption:
		return "chosen with the Env option"
	case envFromDefault:
		return "the default: EXTAUTH_ENV, RAILS_ENV and APP_ENV are not set"
	}
	return "from " + source
}

// expand substitutes the look-ups of one decoded value: the tokens the ERB
// pass left (see renderERB) and ${VAR}. It runs on the value after YAML
// parsing, so a variable can never add keys or change the structure of the
// file, and its result is not expanded again.
func (l *loader) expand(p Provider, key, s string) (string, bool) {
	if !strings.Contains(s, "${") && !l.erb.has(s) {
		return s, true
	}
	// Every tag of a value that is read counts as read, also those after
	// one that fails: the value's problem covers them.
	for rest := s; ; {
		_, tag, after, isTag := l.erb.next(rest)
		if !isTag {
			break
		}
		tag.used, rest = true, after
	}
	var b strings.Builder
	for s != "" {
		before, tag, after, isTag := l.erb.next(s)
		ok := l.expandDollars(&b, p, key, before)
		if !ok {
			return "", false
		}
		if !isTag {
			break
		}
		if reason := tag.problem(); reason != "" {
			l.problem(p, key, reason, ErrTemplate)
			return "", false
		}
		v, set := l.lookup(tag.ref.name)
		switch {
		case set:
		case tag.ref.hasDefault:
			v = tag.ref.def
		case tag.ref.required:
			l.problem(p, key, fmt.Sprintf("needs environment variable %s, which is not set (ENV.fetch without a default, line %d)", tag.ref.name, tag.line), ErrTemplate)
			return "", false
		default:
			v = l.variable(key, tag.ref.name)
		}
		b.WriteString(v)
		s = after
	}
	return b.String(), true
}

// expandDollars writes s to b with its ${VAR} references substituted.
func (l *loader) expandDollars(b *strings.Builder, p Provider, key, s string) bool {
	for s != "" {
		i := strings.IndexByte(s, '$')
		if i < 0 {
			b.WriteString(s)
			return true
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
				return false
			}
			b.WriteString(l.variable(key, s[2:end]))
			s = s[end+1:]
		default:
			b.WriteByte('$')
			s = s[1:]
		}
	}
	return true
}

// expandKey substitutes the ERB look-ups of a mapping key (a tenant's name
// from the environment, say). ${VAR} is not a look-up in keys, as in Rails.
// A tag that cannot be evaluated stays unused, for sweep to report, and
// shows as <%…%>.
func (l *loader) expandKey(s string) string {
	if !l.erb.has(s) {
		return s
	}
	var b strings.Builder
	for s != "" {
		before, tag, after, isTag := l.erb.next(s)
		b.WriteString(before)
		if !isTag {
			break
		}
		s = after
		if tag.kind != erbLookup {
			b.WriteString("<%…%>")
			continue
		}
		first := !tag.used
		tag.used = true
		v, set := l.lookup(tag.ref.name)
		switch {
		case set:
		case tag.ref.hasDefault:
			v = tag.ref.def
		case tag.ref.required && first:
			l.general = append(l.general, Problem{
				Reason: fmt.Sprintf("line %d: a key needs environment variable %s, which is not set (ENV.fetch without a default)", tag.line, tag.ref.name),
				Err:    ErrTemplate,
			})
		case first:
			l.warn(fmt.Sprintf("line %d: environment variable %s is not set (in a key)", tag.line, tag.ref.name))
		}
		b.WriteString(v)
	}
	return b.String()
}

// variable returns the value of an optional variable, noting when it is
// unset: the setting then reads as empty, and if it was required the
// missing-setting problem says why.
func (l *loader) variable(key, name string) string {
	v, ok := l.lookup(name)
	if !ok {
		l.warn(key + ": environment variable " + name + " is not set")
		l.hint(key, "environment variable "+name+" is not set")
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
