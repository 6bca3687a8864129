package providers

import (
	"fmt"
	"log/slog"

	"github.com/extauth/extauth/internal/redact"
)

// The configurations print, log and marshal with their secrets (the fields
// tagged redact:"secret") redacted, whatever the verb.

// Format prints the configuration with its secret redacted.
func (c MicroblogConfig) Format(f fmt.State, verb rune) { redact.Format(f, verb, c) }

// LogValue makes slog print the configuration with its secret redacted.
func (c MicroblogConfig) LogValue() slog.Value { return redact.LogValue(c) }

// MarshalJSON writes the configuration with its secret redacted.
func (c MicroblogConfig) MarshalJSON() ([]byte, error) { return redact.MarshalJSON(c) }

// MarshalYAML writes the configuration with its secret redacted.
func (c MicroblogConfig) MarshalYAML() (any, error) { return redact.MarshalYAML(c) }

// Format prints the configuration with its secret redacted.
func (c SocialnetConfig) Format(f fmt.State, verb rune) { redact.Format(f, verb, c) }

// LogValue makes slog print the configuration with its secret redacted.
func (c SocialnetConfig) LogValue() slog.Value { return redact.LogValue(c) }

// MarshalJSON writes the configuration with its secret redacted.
func (c SocialnetConfig) MarshalJSON() ([]byte, error) { return redact.MarshalJSON(c) }

// MarshalYAML writes the configuration with its secret redacted.
func (c SocialnetConfig) MarshalYAML() (any, error) { return redact.MarshalYAML(c) }

// Format prints the configuration with its secret redacted.
func (c BlogOAuth2Config) Format(f fmt.State, verb rune) { redact.Format(f, verb, c) }

// LogValue makes slog print the configuration with its secret redacted.
func (c BlogOAuth2Config) LogValue() slog.Value { return redact.LogValue(c) }

// MarshalJSON writes the configuration with its secret redacted.
func (c BlogOAuth2Config) MarshalJSON() ([]byte, error) { return redact.MarshalJSON(c) }

// MarshalYAML writes the configuration with its secret redacted.
func (c BlogOAuth2Config) MarshalYAML() (any, error) { return redact.MarshalYAML(c) }

// Format prints the configuration with its secret redacted.
func (c SearchOAuth2Config) Format(f fmt.State, verb rune) { redact.Format(f, verb, c) }

// LogValue makes slog print the configuration with its secret redacted.
func (c SearchOAuth2Config) LogValue() slog.Value { return redact.LogValue(c) }

// MarshalJSON writes the configuration with its secret redacted.
func (c SearchOAuth2Config) MarshalJSON() ([]byte, error) { return redact.MarshalJSON(c) }

// MarshalYAML writes the configuration with its secret redacted.
func (c SearchOAuth2Config) MarshalYAML() (any, error) { return redact.MarshalYAML(c) }

// Format prints the configuration with its secret redacted.
func (c OIDCConfig) Format(f fmt.State, verb rune) { redact.Format(f, verb, c) }

// LogValue makes slog print the configuration with its secret redacted.
func (c OIDCConfig) LogValue() slog.Value { return redact.LogValue(c) }

// MarshalJSON writes the configuration with its secret redacted.
func (c OIDCConfig) MarshalJSON() ([]byte, error) { return redact.MarshalJSON(c) }

// MarshalYAML writes the configuration with its secret redacted.
func (c OIDCConfig) MarshalYAML() (any, error) { return redact.MarshalYAML(c) }

// Format prints the transaction with its state, verifier, nonce, binding
// and token secret redacted: any of them would let its reader finish or
// forge the sign-in.
func (tx Transaction) Format(f fmt.State, verb rune) { redact.Format(f, verb, tx) }

// LogValue makes slog print the transaction redacted.
func (tx Transaction) LogValue() slog.Value { return redact.LogValue(tx) }

// MarshalJSON writes the transaction redacted. The routes seal transactions
// with their own encoding, never with JSON.
func (tx Transaction) MarshalJSON() ([]byte, error) { return redact.MarshalJSON(tx) }

// MarshalYAML writes the transaction redacted.
func (tx Transaction) MarshalYAML() (any, error) { return redact.MarshalYAML(tx) }

// The strategies hold client secrets: each prints as its kind and name only.

func (s *Microblog) String() string                { return "providers.Microblog(" + s.Name() + ")" }
func (s *Microblog) Format(f fmt.State, _ rune)    { fmt.Fprint(f, s.String()) }
func (s *Microblog) LogValue() slog.Value          { return slog.StringValue(s.String()) }
func (s *Socialnet) String() string                { return "providers.Socialnet(" + s.Name() + ")" }
func (s *Socialnet) Format(f fmt.State, _ rune)    { fmt.Fprint(f, s.String()) }
func (s *Socialnet) LogValue() slog.Value          { return slog.StringValue(s.String()) }
func (s *BlogOAuth2) String() string               { return "providers.BlogOAuth2(" + s.Name() + ")" }
func (s *BlogOAuth2) Format(f fmt.State, _ rune)   { fmt.Fprint(f, s.String()) }
func (s *BlogOAuth2) LogValue() slog.Value         { return slog.StringValue(s.String()) }
func (s *OIDC) String() string                     { return "providers.OIDC(" + s.Name() + ")" }
func (s *OIDC) Format(f fmt.State, _ rune)         { fmt.Fprint(f, s.String()) }
func (s *OIDC) LogValue() slog.Value               { return slog.StringValue(s.String()) }
func (s *GothStrategy) String() string             { return "providers.GothStrategy(" + s.Name() + ")" }
func (s *GothStrategy) Format(f fmt.State, _ rune) { fmt.Fprint(f, s.String()) }
func (s *GothStrategy) LogValue() slog.Value       { return slog.StringValue(s.String()) }
