// Command hostapp is a small but complete host application of extauth: a
// chi router, its users in SQLite keyed by (provider, uid), its own
// session cookie started in OnSuccess, a failure page fed by OnFailure,
// and sign-out that ends the provider's session too (SAML single logout,
// OpenID Connect RP-initiated logout). Its tests show how a host tests its
// sign-in with package extauthtest.
//
// Without -config it runs offline in development mode, against fake
// providers that speak the real protocols, and a developer sign-in form:
//
//	go run ./examples/hostapp
//
// With -config it signs in against the real providers of a secrets file:
//
//	HOSTAPP_COOKIE_KEY=$(openssl rand -hex 32) go run ./examples/hostapp -config config/secrets.yml -env production -base-url https://app.example.org
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
	"os/signal"
	"time"

	"github.com/extauth/extauth"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, nil); err != nil {
		fmt.Fprintln(os.Stderr, "hostapp:", err)
		os.Exit(1)
	}
}

// run serves the application until ctx ends; ready, when set, is called
// with the base URL once it serves.
func run(ctx context.Context, args []string, stdout io.Writer, ready func(base string)) error {
	fs := flag.NewFlagSet("hostapp", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:3000", "address to listen on")
	configPath := fs.String("config", "", "secrets file with real providers (default: development mode, fake providers)")
	env := fs.String("env", "", "environment section of the secrets file")
	baseURL := fs.String("base-url", "", "external base URL (default: http://<addr>)")
	dbPath := fs.String("db", "hostapp.db", "SQLite database file")
	router := fs.String("router", "chi", "router to serve on: chi, servemux or gorilla")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	base := *baseURL
	if base == "" {
		base = "http://" + ln.Addr().String()
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	dev := *configPath == ""
	var cfg *extauth.Config
	if dev {
		fakes, err := startDevProviders(base, stdout)
		if err != nil {
			return err
		}
		defer fakes.Close()
		cfg = fakes.Config()
	} else {
		var opts []extauth.ConfigOption
		if *env != "" {
			opts = append(opts, extauth.Env(*env))
		}
		if cfg, err = extauth.LoadConfig(*configPath, opts...); err != nil {
			return err
		}
	}
	key, err := cookieKey(!dev)
	if err != nil {
		return err
	}
	a, err := newApp(ctx, cfg, options{baseURL: base, dbPath: *dbPath, cookieKey: key, logger: logger, developer: dev, router: *router})
	if err != nil {
		return err
	}
	defer a.Close()
	fmt.Fprintf(stdout, "hostapp listening on %s\n", base)
	srv := &http.Server{
		Handler:           a,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
	}
	if ready != nil {
		ready(base)
	}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// cookieKey reads HOSTAPP_COOKIE_KEY (64 hex digits). Development mode
// makes a random one: sign-ins under way do not survive a restart.
func cookieKey(required bool) ([]byte, error) {
	if s := os.Getenv("HOSTAPP_COOKIE_KEY"); s != "" {
		k, err := hex.DecodeString(s)
		if err != nil || len(k) != 32 {
			return nil, errors.New("HOSTAPP_COOKIE_KEY must be 64 hex digits (32 bytes)")
		}
		return k, nil
	}
	if required {
		return nil, errors.New("set HOSTAPP_COOKIE_KEY to 64 hex digits (openssl rand -hex 32); every instance needs the same")
	}
	k := make([]byte, 32)
	rand.Read(k)
	return k, nil
}
