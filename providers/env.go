package providers

import (
	"context"
	"log/slog"
	"net/http"
	"time"
)

// Env is what the routes hand every strategy when they build it.
type Env struct {
	// CallbackURL is the absolute callback URL registered with the provider:
	// the configured base URL plus /users/auth/<provider>/callback. It never
	// comes from the request's Host header.
	CallbackURL string
	// HTTPClient makes every outbound request. The routes give one with a
	// time-out and a response-body bound; strategies must not use
	// http.DefaultClient.
	HTTPClient *http.Client
	// Logger receives diagnostics. Never log codes, tokens, secrets or
	// assertions.
	Logger *slog.Logger
	// Store is shared across instances for single-use values (assertion IDs).
	Store Store
	// Now is the clock; tests move it.
	Now func() time.Time
}

// Store remembers single-use values across every instance of the
// application. It is how a state, a SAML request ID or an assertion ID can be
// used once only, even behind a load balancer.
type Store interface {
	// Consume records key until the given time and reports whether it was
	// new: true the first time, false for every later call before until.
	// It must be atomic across instances.
	Consume(ctx context.Context, key string, until time.Time) (bool, error)
}
