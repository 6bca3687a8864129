// Package challenge reads the authentication challenges of an answer's
// WWW-Authenticate headers (RFC 9110 11.6.1), for the two places that act
// on one: a step-up a resource server asks for (RFC 9470) and a DPoP
// nonce it asks to be used (RFC 9449 9).
package challenge

import (
	"net/http"
	"strings"
)

// MaxBytes bounds the WWW-Authenticate headers read, all values together:
// headers past it are not read at all.
const MaxBytes = 8 << 10

// Challenge is one challenge: its scheme and its parameters, scheme and
// parameter names in lower case, the first value of a parameter named
// twice. A token68 (Basic's, Negotiate's) is not kept.
type Challenge struct {
	Scheme string
	Params map[string]string
}

// Parse returns the challenges of h's WWW-Authenticate headers, in order,
// and ok false, with none, when together they exceed MaxBytes. A value
// that stops parsing gives the challenges before the fault.
func Parse(h http.Header) (cs []Challenge, ok bool) {
	total := 0
	values := h.Values("WWW-Authenticate")
	for _, v := range values {
		if total += len(v); total > MaxBytes {
			return nil, false
		}
	}
	for _, v := range values {
		cs = parse(v, cs)
	}
	return cs, true
}

// parse appends the challenges of one header value to out:
//
//	#challenge, challenge = auth-scheme [ 1*SP ( token68 / #auth-param ) ]
//
// A bare token right after a scheme is its token68; after a comma it is
// the next challenge's scheme.
func parse(s string, out []Challenge) []Challenge {
	p := parser{s: s}
	// token68 says a token68 may come next: the last thing read was a
	// scheme, with no comma since.
	token68 := false
	for {
		if p.skipSeparators() {
			token68 = false
		}
		if p.done() {
			return out
		}
		name := p.token()
		if name == "" {
			return out
		}
		p.skip(" \t")
		if p.peek() != '=' {
			if token68 {
				// A token68 without padding.
				token68 = false
				continue
			}
			out = append(out, Challenge{Scheme: strings.ToLower(name), Params: map[string]string{}})
			token68 = true
			continue
		}
		p.i++
		p.skip(" \t")
		if c := p.peek(); c == '=' || c == ',' || c == 0 {
			// A token68 with its padding.
			p.skip("=")
			token68 = false
			continue
		}
		token68 = false
		var value string
		if p.peek() == '"' {
			var ok bool
			if value, ok = p.quoted(); !ok {
				return out
			}
		} else if value = p.token(); value == "" {
			return out
		}
		if len(out) == 0 {
			// A parameter before any scheme.
			return out
		}
		params := out[len(out)-1].Params
		if _, dup := params[strings.ToLower(name)]; !dup {
			params[strings.ToLower(name)] = value
		}
	}
}

type parser struct {
	s string
	i int
}

func (p *parser) done() bool { return p.i >= len(p.s) }

func (p *parser) peek() byte {
	if p.done() {
		return 0
	}
	return p.s[p.i]
}

func (p *parser) skip(chars string) {
	for !p.done() && strings.IndexByte(chars, p.s[p.i]) >= 0 {
		p.i++
	}
}

// skipSeparators skips whitespace and commas, and reports whether it
// skipped a comma.
func (p *parser) skipSeparators() (comma bool) {
	for !p.done() {
		switch p.s[p.i] {
		case ',':
			comma = true
		case ' ', '\t':
		default:
			return comma
		}
		p.i++
	}
	return comma
}

// token reads RFC 9110's token, and the slash of token68 (whose = ends
// it).
func (p *parser) token() string {
	start := p.i
	for !p.done() && isTokenChar(p.s[p.i]) {
		p.i++
	}
	return p.s[start:p.i]
}

func isTokenChar(c byte) bool {
	return c > ' ' && c < 0x7f && !strings.ContainsRune(`"(),:;<=>?@[\]{}`, rune(c))
}

// quoted reads a quoted-string, undoing its backslash escapes.
func (p *parser) quoted() (string, bool) {
	p.i++
	var b strings.Builder
	for !p.done() {
		c := p.s[p.i]
		p.i++
		switch c {
		case '"':
			return b.String(), true
		case '\\':
			if p.done() {
				return "", false
			}
			c = p.s[p.i]
			p.i++
		}
		b.WriteByte(c)
	}
	return "", false
}
