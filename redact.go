package extauth

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/extauth/extauth/internal/redact"
)

// Format prints the options with CookieKey and OldCookieKeys redacted,
// whatever the verb: %x of a []byte field would otherwise be the key in hex.
func (o Options) Format(f fmt.State, verb rune) { redact.Format(f, verb, o) }

// LogValue makes slog print the options with the cookie keys redacted.
func (o Options) LogValue() slog.Value { return redact.LogValue(o) }

// MarshalJSON writes the options with the cookie keys redacted and without
// hooks, client, logger, store and extra strategies.
func (o Options) MarshalJSON() ([]byte, error) { return redact.MarshalJSON(o) }

// MarshalYAML writes the options as MarshalJSON does.
func (o Options) MarshalYAML() (any, error) { return redact.MarshalYAML(o) }

// String describes the Auth by its base URL and providers: its strategies
// hold client secrets and keys, which no verb may print.
func (a *Auth) String() string {
	return "extauth.Auth(" + a.site.base.String() + " " + strings.Join(a.site.order, ",") + ")"
}

// Format prints String for every verb.
func (a *Auth) Format(f fmt.State, _ rune) { fmt.Fprint(f, a.String()) }

// LogValue makes slog print String.
func (a *Auth) LogValue() slog.Value { return slog.StringValue(a.String()) }
