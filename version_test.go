package extauth_test

import (
	"log/slog"

	"github.com/extauth/extauth"
)

func ExampleVersion() {
	// In a host's start-up log, beside its own version:
	slog.Info("starting", "extauth", extauth.Version())
}
