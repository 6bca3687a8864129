package safepath

import (
	"net/url"
	"strings"
	"testing"
)

func TestPath(t *testing.T) {
	good := []string{"/", "/settings", "/a/b?c=d#e", "/a%2Fb", "/?next=//evil.com", "/%25", "/caf%C3%A9", "/a b"}
	bad := []string{
		"", "settings", "//evil.com", "//", "//?x", "//#x", "/\\evil.com", "\\\\evil.com", "https://evil.com", "javascript:alert(1)",
		"/%2F%2Fevil.com", "/%2f/evil.com", "/%5Cevil.com", "/%5cevil.com", "/%09/evil.com", "/%0a/evil.com", "/%0D/evil.com",
		"/%09%2Fevil.com", "/%0A%0D/evil.com", "/%20/evil.com", "/ /evil.com", "/%2509/evil.com", "/%252F%252Fevil.com", "/%252F",
		"/\t/evil.com", "/\n/evil.com", "/x\x00", "/x\x7f", "/%7F", "/%00", strings.Repeat("/a", MaxLen),
	}
	for _, s := range good {
		if got, ok := Path(s); !ok || got != s {
			t.Errorf("Path(%q) = %q, %v; want it kept", s, got, ok)
		}
	}
	for _, s := range bad {
		if got, ok := Path(s); ok {
			t.Errorf("Path(%q) = %q, want refused", s, got)
		}
	}
}

func TestOnSite(t *testing.T) {
	const origin = "https://app.example.org"
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"/welcome", "/welcome", true},
		{"https://app.example.org/welcome?x=1", "/welcome?x=1", true},
		{"https://app.example.org", "/", true},
		{"https://app.example.org//evil.com", "", false},
		{"https://app.example.org/%09/evil.com", "", false},
		{"https://evil.com/welcome", "", false},
		{"http://app.example.org/welcome", "", false},
		{"https://user@app.example.org/", "", false},
		{"https://app.example.org.evil.com/", "", false},
		{"//app.example.org/x", "", false},
	}
	for _, tt := range tests {
		got, ok := OnSite(tt.in, origin)
		if got != tt.want || ok != tt.ok {
			t.Errorf("OnSite(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// leaves reports whether p, read as a browser might after some proxy or
// framework decoded it, names another origin: a scheme, or an authority.
func leaves(p string) bool {
	var b strings.Builder
	for _, r := range p {
		if r <= ' ' || r == 0x7f {
			continue // ASCII whitespace and control characters
		}
		if r == '\\' {
			r = '/'
		}
		b.WriteRune(r)
	}
	s := b.String()
	if strings.HasPrefix(s, "//") {
		return true
	}
	u, err := url.Parse(s)
	return err == nil && (u.Scheme != "" || u.Host != "")
}

// FuzzPath holds Path to its property: what it accepts, decoded any number
// of times and with ASCII whitespace and control characters stripped, never
// has a scheme or an authority.
func FuzzPath(f *testing.F) {
	for _, s := range []string{"/", "/a", "//evil", "/%09/evil.com", "/%2F%2Fevil", "/%5Cevil", "/%2509/x", "/ /x", "https://x", "/%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := Path(s)
		if !ok {
			return
		}
		if got != s {
			t.Fatalf("Path(%q) changed it to %q", s, got)
		}
		for cur := got; ; {
			if leaves(cur) {
				t.Fatalf("Path accepted %q, which decodes to %q", s, cur)
			}
			next, err := url.PathUnescape(cur)
			if err != nil || next == cur {
				// Also a lenient decoder that keeps bad escapes as they
				// are and decodes the rest.
				if lenient := lenientUnescape(cur); lenient != cur && leaves(lenient) {
					t.Fatalf("Path accepted %q, which a lenient decoder turns into %q", s, lenient)
				}
				return
			}
			cur = next
		}
	})
}

func lenientUnescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := url.PathUnescape(s[i : i+3]); err == nil {
				b.WriteString(v)
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
