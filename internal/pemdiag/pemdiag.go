// Package pemdiag says why a PEM block does not decode, for configuration
// errors that must help without quoting a byte of a key or certificate.
package pemdiag

import (
	"encoding/base64"
	"encoding/pem"
	"strconv"
	"strings"
)

// Cause guesses why s does not decode as a PEM block at all, to follow a
// reason such as "must be a PEM block of type CERTIFICATE": "; it has no
// -----END line, so it is cut short". It is "" when there is no better
// guess than the reason itself. It never quotes s.
func Cause(s string) string {
	s = strings.TrimSpace(s)
	begin, end := strings.Contains(s, "-----BEGIN "), strings.Contains(s, "-----END ")
	oneLine := !strings.Contains(s, "\n")
	switch {
	case s == "":
		return ""
	case !begin:
		return "; it has no -----BEGIN line: give the whole block, its BEGIN and END lines included"
	case oneLine && strings.Contains(s, `\n`):
		return `; its line breaks are written \n, as two characters, not as line breaks`
	case oneLine:
		return "; it is on one line: its line breaks were lost"
	case !end:
		return "; it has no -----END line, so it is cut short"
	}
	if bt, et, ok := types(s); ok && bt != et {
		return "; its BEGIN and END lines name different types"
	}
	return "; its BEGIN and END lines differ, or the lines between them are not base64"
}

// BodyProblem says what is wrong with a PEM block whose BEGIN and END lines
// are whole and name the same type but whose body does not decode: which
// of its lines holds a character that base64 does not use, or that the
// body does not add up to whole base64 (a line cut short or lost). It is
// "" when s decodes, or when its BEGIN and END lines are at fault (Cause
// tells those). The reason names the type, which is no secret, and the
// line's place in the block, never its content.
func BodyProblem(s string) string {
	if b, _ := pem.Decode([]byte(s)); b != nil {
		return ""
	}
	typ, et, ok := types(s)
	if !ok || typ != et {
		return ""
	}
	lines := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	var body []string
	in := false
	for _, l := range lines {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "-----BEGIN "):
			in = true
		case strings.HasPrefix(l, "-----END "):
			in = false
		case in:
			body = append(body, l)
		}
	}
	// RFC 1421 headers (Proc-Type: ...) and the blank line after them
	// come before the base64; lines are counted from BEGIN all the same.
	headers := 0
	if len(body) > 0 && strings.Contains(body[0], ":") {
		for headers < len(body) && body[headers] != "" {
			headers++
		}
	}
	var all strings.Builder
	for i, l := range body {
		if i <= headers && headers > 0 {
			continue
		}
		if strings.ContainsFunc(l, func(r rune) bool { return !isBase64(r) }) {
			return "is " + article(typ) + " " + typ + " PEM block whose body is not base64: its " + ordinal(i+1) +
				" line after -----BEGIN " + typ + "----- holds a character base64 does not use"
		}
		all.WriteString(l)
	}
	if _, err := base64.StdEncoding.DecodeString(all.String()); err != nil {
		return "is " + article(typ) + " " + typ + " PEM block whose body does not decode as base64: a line of it is cut short, lost or doubled"
	}
	return ""
}

// types returns the types the first BEGIN and END lines of s name.
func types(s string) (begin, end string, ok bool) {
	bt, okb := between(s, "-----BEGIN ", "-----")
	et, oke := between(s, "-----END ", "-----")
	return bt, et, okb && oke
}

func between(s, open, close string) (string, bool) {
	i := strings.Index(s, open)
	if i < 0 {
		return "", false
	}
	rest := s[i+len(open):]
	j := strings.Index(rest, close)
	if j < 0 || strings.ContainsAny(rest[:j], "\n-") {
		return "", false
	}
	return rest[:j], true
}

// article is "an" before a PEM type read with a vowel sound (RSA, EC,
// ENCRYPTED, OPENSSH), else "a".
func article(typ string) string {
	for _, p := range []string{"RSA", "EC ", "ENCRYPTED", "OPENSSH", "X509"} {
		if strings.HasPrefix(typ, p) {
			return "an"
		}
	}
	return "a"
}

func isBase64(r rune) bool {
	return r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '+' || r == '/' || r == '=' || r == ' ' || r == '\t'
}

func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return strconv.Itoa(n) + suffix
}
