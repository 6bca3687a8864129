package extauth

import (
	"encoding/json"
	"fmt"
	"log/slog"
)

// Secret holds a client secret or private key. It never reveals its value
// when printed with any fmt verb, logged with slog, or marshalled to JSON,
// text or YAML; call Value to use it.
type Secret struct{ v string }

// NewSecret wraps s.
func NewSecret(s string) Secret { return Secret{v: s} }

// Value returns the secret itself.
func (s Secret) Value() string { return s.v }

// IsZero reports whether the secret is empty.
func (s Secret) IsZero() bool { return s.v == "" }

func (s Secret) redacted() string {
	if s.v == "" {
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
