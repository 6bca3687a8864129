// Package safepath decides whether a return path taken from a request
// (return_to, RelayState) stays on this site, whatever a browser, proxy or
// framework does to it on the way.
package safepath

import (
	"net/url"
	"strings"
)

// MaxLen bounds a return path.
const MaxLen = 2048

// Path returns s when it is a path on this site, and ok false otherwise.
//
// It must stay one however many times it is percent-decoded (strictly, or
// leniently, keeping invalid escapes), and after
// browsers drop tabs and newlines from it (the URL standard strips them
// anywhere in a URL) or proxies drop other whitespace: so no decoding of it
// may contain a control character or a backslash (browsers read "\" as "/"),
// nor start with "//" once whitespace is removed ("/%09/evil.com" decodes to
// "/<tab>/evil.com", which browsers follow to evil.com).
func Path(s string) (string, bool) {
	if s == "" || len(s) > MaxLen || s[0] != '/' {
		return "", false
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return "", false
	}
	for cur := s; ; {
		if !safeOnce(cur) {
			return "", false
		}
		next := decodeOnce(cur)
		if next == cur {
			return s, true
		}
		cur = next
	}
}

// decodeOnce decodes every valid percent-escape of p and keeps the others as
// they are, as lenient decoders do: a strict one fails where this one goes
// on, so checking this one's output covers both.
func decodeOnce(p string) string {
	if !strings.Contains(p, "%") {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '%' && i+2 < len(p) && ishex(p[i+1]) && ishex(p[i+2]) {
			b.WriteByte(unhex(p[i+1])<<4 | unhex(p[i+2]))
			i += 2
			continue
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

func ishex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// safeOnce checks one decoding of the path.
func safeOnce(p string) bool {
	var squeezed strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c < 0x20 || c == 0x7f || c == '\\':
			return false
		case c == ' ':
			continue
		}
		squeezed.WriteByte(c)
	}
	return !strings.HasPrefix(squeezed.String(), "//")
}

// OnSite returns s as a relative path when it is one (by Path's rules) or
// when it is an absolute URL of origin ("https://app.example.org"), and ok
// false for anything that could leave the site.
func OnSite(s, origin string) (string, bool) {
	if strings.HasPrefix(s, "/") {
		return Path(s)
	}
	if s == "" || len(s) > MaxLen {
		return "", false
	}
	u, err := url.Parse(s)
	if err != nil || !u.IsAbs() || u.User != nil || u.Scheme+"://"+u.Host != origin {
		return "", false
	}
	rel := &url.URL{Path: u.Path, RawPath: u.RawPath, RawQuery: u.RawQuery, Fragment: u.Fragment}
	p := rel.String()
	if p == "" {
		p = "/"
	}
	return Path(p)
}
