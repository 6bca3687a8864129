// Command demo is a small web application that signs users in with extauth.
//
// Without -config it runs offline on development providers served by the
// same process, speaking the real protocols, each with a login and consent
// page so the protocol's steps can be seen:
//
//	go run ./examples/demo
//
// With -config it signs in against the real providers of a secrets file:
//
//	EXTAUTH_COOKIE_KEY=$(openssl rand -hex 32) go run ./examples/demo -config config/secrets.yml -env production -base-url https://app.example.org
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/extauth/extauth"
)

func main() {
	err := run(os.Args[1:], os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		// -h asked for the usage, which was printed: not a failure.
	case err != nil:
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:3000", "address to listen on")
	configPath := fs.String("config", "", "secrets file with real providers (default: built-in development providers);\nneeds EXTAUTH_COOKIE_KEY, 32 bytes in base64 or hex")
	env := fs.String("env", "", "environment section of the secrets file (default: $EXTAUTH_ENV, $RAILS_ENV, $APP_ENV, else development)")
	baseURL := fs.String("base-url", "", "external base URL (default: http://<addr>)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: go run ./examples/demo [flags]\n\nThe extauth demo: sign in with six providers. Without -config it runs offline\non built-in development providers.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	base := *baseURL
	if base == "" {
		base = "http://" + ln.Addr().String()
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	handler, closeFn, err := newServer(base, serverOptions{configPath: *configPath, env: *env, logger: logger})
	if err != nil {
		ln.Close()
		return err
	}
	defer closeFn()
	fmt.Printf("extauth demo listening on %s\n", base)
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
	}
	return srv.Serve(ln)
}

// serverOptions are what newServer needs beside the base URL. The zero value
// is the offline demo on its development providers.
type serverOptions struct {
	// configPath names a secrets file with real providers; env picks its
	// section.
	configPath string
	env        string
	logger     *slog.Logger
	// httpClient is the base of extauth's outbound client
	// (extauth.Options.HTTPClient): a test serving the demo and its
	// development providers over HTTPS passes one that trusts its
	// certificate.
	httpClient *http.Client
	// samlIdPMetadataURL, when set, replaces the development SAML IdP under
	// /dev/saml with one the caller serves elsewhere. The HTTPS browser test
	// puts it on another site, so that its POST to the callback is
	// cross-site, as a real IdP's is.
	samlIdPMetadataURL string
}

// newServer builds the demo's handler: the extauth routes, the pages, and
// (without a config file) the development providers.
func newServer(base string, o serverOptions) (http.Handler, func(), error) {
	logger := o.logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	var cfg *extauth.Config
	var err error
	if o.configPath == "" {
		cfg, err = mountDevProviders(mux, base, o.samlIdPMetadataURL, o.httpClient)
	} else {
		var opts []extauth.ConfigOption
		if o.env != "" {
			opts = append(opts, extauth.Env(o.env))
		}
		cfg, err = extauth.LoadConfig(o.configPath, opts...)
		if cfg != nil {
			cfg.LogWarnings(context.Background(), logger)
		}
	}
	if err != nil {
		return nil, nil, err
	}
	key, err := cookieKey(o.configPath != "")
	if err != nil {
		return nil, nil, err
	}
	sessions := newSessions(strings.HasPrefix(base, "https://"))
	a, err := extauth.New(cfg, extauth.Options{
		BaseURL:    base,
		CookieKey:  key,
		Logger:     logger,
		HTTPClient: o.httpClient,
		// Signing out goes through the provider where it can end its own
		// session (SAML single logout, OpenID Connect RP-initiated logout),
		// and the providers' own logouts end the demo's sessions (pages.go).
		Logout: extauth.LogoutOptions{
			Session:          sessions.logoutSession,
			OnProviderLogout: sessions.endProviderSessions,
			Done:             sessions.logoutDone,
		},
		OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
			sessions.signIn(w, id)
			http.Redirect(w, r, extauth.ReturnTo(r), http.StatusSeeOther)
		},
	})
	if err != nil {
		return nil, nil, err
	}
	a.Mount(mux)
	pages := &pages{auth: a, sessions: sessions, logoutRoutes: logoutRoutes(a)}
	mux.HandleFunc("GET /{$}", pages.home)
	mux.HandleFunc("GET /me.json", pages.me)
	mux.HandleFunc("POST /logout", pages.logout)
	// Go's protection against cross-origin POSTs, with a bypass for the
	// routes identity providers POST to from their own site.
	cop := http.NewCrossOriginProtection()
	a.AllowCrossSiteCallbacks(cop)
	return cop.Handler(mux), func() { a.Close() }, nil
}

// cookieKey reads EXTAUTH_COOKIE_KEY (64 hex digits). Development mode makes
// a random one: sign-ins under way do not survive a restart, which is fine.
func cookieKey(required bool) ([]byte, error) {
	if s := os.Getenv("EXTAUTH_COOKIE_KEY"); s != "" {
		k, err := hex.DecodeString(s)
		if err != nil || len(k) != 32 {
			return nil, errors.New("EXTAUTH_COOKIE_KEY must be 64 hex digits (32 bytes)")
		}
		return k, nil
	}
	if required {
		return nil, errors.New("set EXTAUTH_COOKIE_KEY to 64 hex digits (e.g. openssl rand -hex 32); every instance needs the same")
	}
	k := make([]byte, 32)
	rand.Read(k)
	return k, nil
}
