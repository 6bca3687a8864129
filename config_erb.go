package extauth

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// Rails runs a secrets file through ERB before YAML reads it, so a tag may
// sit anywhere, even where its own quotes would end a YAML string:
//
//	oidc_client_secret: "<%= ENV["OIDC_SECRET"] %>"
//
// renderERB does the same first pass without running any code: it replaces
// every tag with a token of plain letters, digits and dots, which YAML reads
// the same in any context (plain, quoted, block scalars, flow collections,
// keys, comments). The tokens are resolved after parsing, in the values and
// keys that extauth reads, to the variable's value verbatim. So a value never
// passes through YAML: it cannot change the structure of the file, needs no
// escaping for its context, and cannot reach a YAML error message. A tag
// that cannot be evaluated fails when its value is read (naming the setting
// and the line) and, if no value holds it, when loading ends (naming the line).

// erbKind is what a tag does.
type erbKind uint8

const (
	// erbLookup is <%= ENV["NAME"] %> or one of its variants (parseENV):
	// the only tags extauth evaluates.
	erbLookup erbKind = iota
	// erbOutput is <%= ... %> with any other Ruby expression. It writes one
	// value, so it is harmless where extauth reads nothing.
	erbOutput
	// erbCode is <% ... %>, <%- ... %> or <%== ... %>: Ruby code, such as an
	// if around settings, that may change which lines the file has.
	erbCode
	// erbUnclosed is a <% without %> on its line.
	erbUnclosed
)

// erbTag is one tag of the file.
type erbTag struct {
	line int
	kind erbKind
	ref  envRef
	// used is set once a value or key holding the tag is read.
	used bool
}

// erbTags are the tags of one file, and the prefix of their tokens.
type erbTags struct {
	prefix string
	tags   []erbTag
}

// tokenTerminator ends a token's index. The prefix is "ERBTAG<n>.": its first
// letter occurs nowhere else in a token, so a token's prefix cannot overlap
// the text around it or another token.
const tokenTerminator = '.'

// renderERB replaces the ERB tags of data with tokens; see above. Text without
// "<%" is returned unchanged.
func renderERB(data []byte) ([]byte, *erbTags) {
	if !bytes.Contains(data, []byte("<%")) {
		return data, &erbTags{}
	}
	for n := 0; ; n++ {
		prefix := "ERBTAG" + strconv.Itoa(n) + string(tokenTerminator)
		if bytes.Contains(data, []byte(prefix)) {
			continue
		}
		out, t := renderWith(data, prefix)
		// Removing a comment or unescaping <%% can join text into the
		// prefix; a prefix that then occurs other than in the tokens is
		// given up for the next.
		if bytes.Count(out, []byte(prefix)) == len(t.tags) {
			return out, t
		}
	}
}

func renderWith(data []byte, prefix string) ([]byte, *erbTags) {
	t := &erbTags{prefix: prefix}
	var out bytes.Buffer
	out.Grow(len(data))
	line := 1
	for len(data) > 0 {
		i := bytes.Index(data, []byte("<%"))
		if i < 0 {
			out.Write(data)
			break
		}
		line += bytes.Count(data[:i], []byte("\n"))
		out.Write(data[:i])
		data = data[i:]
		if bytes.HasPrefix(data, []byte("<%%")) {
			// ERB's escape for a literal <%.
			out.WriteString("<%")
			data = data[3:]
			continue
		}
		eol := bytes.IndexByte(data, '\n')
		if eol < 0 {
			eol = len(data)
		}
		end := bytes.Index(data[2:eol], []byte("%>"))
		if end < 0 {
			// Only the opening is replaced: the rest of the line stays, so
			// the value it sits in is still found and named.
			t.write(&out, erbTag{line: line, kind: erbUnclosed})
			data = data[2:]
			continue
		}
		body := string(data[2 : 2+end])
		data = data[2+end+2:]
		switch {
		case strings.HasPrefix(body, "#"):
			// A comment writes nothing.
		case strings.HasPrefix(body, "=="):
			t.write(&out, erbTag{line: line, kind: erbCode})
		case strings.HasPrefix(body, "="):
			expr := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(body[1:]), "-"))
			if ref, ok := parseENV(expr); ok {
				t.write(&out, erbTag{line: line, kind: erbLookup, ref: ref})
			} else {
				t.write(&out, erbTag{line: line, kind: erbOutput})
			}
		default:
			t.write(&out, erbTag{line: line, kind: erbCode})
		}
	}
	return out.Bytes(), t
}

func (t *erbTags) write(out *bytes.Buffer, tag erbTag) {
	out.WriteString(t.prefix)
	out.WriteString(strconv.Itoa(len(t.tags)))
	out.WriteByte(tokenTerminator)
	t.tags = append(t.tags, tag)
}

// next finds the first token in s: the text before it, the tag, and the text
// after it. ok is false when s holds no token. Text that only looks like a
// token (YAML escapes can spell one) is left as text.
func (t *erbTags) next(s string) (before string, tag *erbTag, after string, ok bool) {
	if t.prefix == "" {
		return s, nil, "", false
	}
	from := 0
	for {
		i := strings.Index(s[from:], t.prefix)
		if i < 0 {
			return s, nil, "", false
		}
		i += from
		rest := s[i+len(t.prefix):]
		j := 0
		for j < len(rest) && j < 10 && rest[j] >= '0' && rest[j] <= '9' {
			j++
		}
		if j > 0 && j < len(rest) && rest[j] == tokenTerminator {
			if n, err := strconv.Atoi(rest[:j]); err == nil && n < len(t.tags) {
				return s[:i], &t.tags[n], rest[j+1:], true
			}
		}
		from = i + 1
	}
}

// has reports whether s holds a token.
func (t *erbTags) has(s string) bool {
	_, _, _, ok := t.next(s)
	return ok
}

// problem says why a tag in a value cannot be evaluated, or "" for a look-up.
func (tag *erbTag) problem() string {
	switch tag.kind {
	case erbOutput:
		return fmt.Sprintf(`has ERB extauth cannot evaluate, on line %d; only <%%= ENV["NAME"] %%> and ENV.fetch look-ups are supported`, tag.line)
	case erbCode:
		return fmt.Sprintf(`has ERB code, on line %d; only <%%= ENV["NAME"] %%> look-ups are supported`, tag.line)
	case erbUnclosed:
		return fmt.Sprintf("has an ERB tag on line %d that is not closed on its line", tag.line)
	}
	return ""
}

// sweep reports the tags that no value or key extauth read held: code, which
// could change what the file says, is an error wherever it is; an
// expression that writes a value extauth does not read is only noted.
func (l *loader) sweep() {
	for i := range l.erb.tags {
		tag := &l.erb.tags[i]
		if tag.used {
			continue
		}
		switch tag.kind {
		case erbCode, erbUnclosed:
			reason := fmt.Sprintf(`line %d: ERB code is not supported; only <%%= ENV["NAME"] %%> look-ups are`, tag.line)
			if tag.kind == erbUnclosed {
				reason = fmt.Sprintf("line %d: an ERB tag is not closed on its line", tag.line)
			}
			l.general = append(l.general, Problem{Reason: reason, Err: ErrTemplate})
		case erbOutput:
			l.warn(fmt.Sprintf("line %d: ERB extauth cannot evaluate is ignored (it is in no setting extauth reads)", tag.line))
		}
	}
}

// firstBad returns the first tag that cannot be evaluated, or nil.
func (t *erbTags) firstBad() *erbTag {
	for i := range t.tags {
		if t.tags[i].kind != erbLookup {
			return &t.tags[i]
		}
	}
	return nil
}
