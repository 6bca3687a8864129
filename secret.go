package extauth

import (
	"encoding/json"
	"fmt"
	"log/slog"
)

// Secret holds a client secret or private key. It never reveals its value
// when printed with any fmt verb, logged with slog, or marshalled to JSON,
// text or YAML; call Value to use it.
//
// Secrets cannot be compared with ==, which would compare where the values
// are held: compare them with Equal. The value sits behind a pointer: fmt,
// meeting a pointer to a struct that holds a Secret inside a map or slice
// with a verb it cannot apply (%s of a map[string]*Config), prints that
// struct by reflection without calling any Format method, and then shows a
// pointer field as an address only.
type Secret struct {
	// _ makes == a compile error instead of a comparison of pointers
	// (docs/upgrading.md#v030-to-v040).
	_ [0]func()
	p *string
}

// NewSecret wraps s.
func NewSecret(s string) Secret {
	if s == "" {
		return Secret{}
	}
	return Secret{p: &s}
}

// Value returns the secret itself.
func (s Secret) Value() string {
	if s.p == nil {
		return ""
	}
	return *s.p
}

// IsZero reports whether the secret is empty.
func (s Secret) IsZero() bool { return s.p == nil }

// Equal reports whether s and o hold the same value.
func (s Secret) Equal(o Secret) bool { return s.Value() == o.Value() }

func (s Secret) redacted() string {
	if s.IsZero() {
		return ""
	}
	return "[REDACTED]"
}

// String returns "[REDACTED]", or "" for an empty secret.
func (s Secret) String() string { return s.redacted() }

// GoString returns the same as String, so %#v is safe too.
func (s Secret) GoString() string { return s.redacted() }

// Format makes every fmt verb print the redacted form.
func (s Secret) Format(f fmt.State, _ rune) { fmt.Fprint(f, s.redacted()) }

// LogValue makes slog print the redacted form.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.redacted()) }

// MarshalJSON writes the redacted form.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.redacted()) }

// MarshalText writes the redacted form.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.redacted()), nil }

// MarshalYAML writes the redacted form.
func (s Secret) MarshalYAML() (any, error) { return s.redacted(), nil }
