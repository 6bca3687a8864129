// Command demo is a small web application that signs users in with extauth.
//
// Without -config it runs offline on development providers served by the
// same process, speaking the real protocols, each with a login and consent
// page so the protocol's steps can be seen. Beside its own site it serves
// two tenants, http://a.localhost:3000 and http://b.localhost:3000, each
// with a SAML IdP and an OpenID provider of its own, and a third,
// http://f.localhost:3000, that signs in through a development SAML
// federation of three IdPs, with a discovery page to choose one:
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
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/internal/devpage"
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
	highAssurance := fs.Bool("oidc-high-assurance", false, "run the development OpenID provider as a high-assurance one: private_key_jwt only,\npushed and signed authorization requests, encrypted ID tokens")
	fapi2 := fs.Bool("oidc-fapi2", false, "run the development OpenID provider as a FAPI 2.0 one, shaped as Singpass's: the\nSecurity Profile enforced, DPoP with nonces, encrypted ID tokens")
	var tf tlsFlags
	fs.BoolVar(&tf.selfSigned, "tls", false, "serve HTTPS with a self-signed certificate made at start for 127.0.0.1, ::1 and localhost\n(for providers that refuse http redirect URIs, such as Keycloak's FAPI 2.0 policies)")
	fs.StringVar(&tf.certFile, "tls-cert", "", "serve HTTPS with this certificate (PEM, its chain after it); needs -tls-key")
	fs.StringVar(&tf.keyFile, "tls-key", "", "the private key of -tls-cert (PEM)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: go run ./examples/demo [flags]\n\nThe extauth demo: sign in with six providers. Without -config it runs offline\non built-in development providers.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	secure, err := tf.load(time.Now())
	if err != nil {
		return err
	}
	ln, err := secure.listen(*addr)
	if err != nil {
		return err
	}
	base := *baseURL
	if base == "" {
		base = secure.scheme() + "://" + ln.Addr().String()
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if (*highAssurance || *fapi2) && *configPath != "" {
		ln.Close()
		return errors.New("-oidc-high-assurance and -oidc-fapi2 are for the development providers; a secrets file says itself how to sign in")
	}
	demo, err := newServer(base, serverOptions{configPath: *configPath, env: *env, logger: logger,
		oidcHighAssurance: *highAssurance, oidcFAPI2: *fapi2, httpClient: secure.httpClient()})
	if err != nil {
		ln.Close()
		return err
	}
	defer demo.Close()
	demo.announce(os.Stdout)
	if secure != nil {
		fmt.Println(secure.note)
	}
	srv := &http.Server{
		Handler:           demo,
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
	// oidcHighAssurance runs the development OpenID providers as
	// high-assurance ones (extauthtest.ProvidersOptions.OIDCHighAssurance).
	oidcHighAssurance bool
	// oidcFAPI2 runs them as FAPI 2.0 ones
	// (extauthtest.ProvidersOptions.OIDCFAPI2).
	oidcFAPI2 bool
}

// server is the demo: its handler, and the development providers it serves
// (nil with a secrets file), which the tests reach into.
type server struct {
	http.Handler
	dev     *devProviders
	auth    *extauth.Auth
	sites   *sites
	metrics *metrics
	// oidcMode is the mode of the development OpenID providers, nil for
	// the ordinary one.
	oidcMode *oidcMode
}

// oidcMode is what -oidc-high-assurance or -oidc-fapi2 makes of the
// development OpenID providers: the start line and the home page say so.
type oidcMode struct {
	// ID is the home page's notice's; Flag the flag's; Note what changes.
	ID, Flag, Title, Note string
}

var (
	highAssuranceMode = oidcMode{ID: "oidc-high-assurance", Flag: "-oidc-high-assurance", Title: "OpenID Connect: high-assurance mode",
		Note: "the development OpenID providers run in high-assurance mode: private_key_jwt only, pushed and signed authorization requests, encrypted ID tokens"}
	fapi2Mode = oidcMode{ID: "oidc-fapi2", Flag: "-oidc-fapi2", Title: "OpenID Connect: FAPI 2.0 mode",
		Note: "the development OpenID providers run as FAPI 2.0 providers shaped as Singpass's: the Security Profile enforced, DPoP with nonces, encrypted ID tokens"}
)

// mode is the mode o runs the development OpenID providers in.
func (o serverOptions) mode() *oidcMode {
	switch {
	case o.oidcFAPI2:
		return &fapi2Mode
	case o.oidcHighAssurance:
		return &highAssuranceMode
	}
	return nil
}

// announce prints where the demo listens, and in what mode: its start
// line, then its tenants and its metrics.
func (s *server) announce(w io.Writer) {
	base := s.sites.list[0].base
	if s.oidcMode != nil {
		fmt.Fprintf(w, "extauth demo listening on %s; %s\n", base, s.oidcMode.Note)
	} else {
		fmt.Fprintf(w, "extauth demo listening on %s\n", base)
	}
	for _, t := range s.sites.list[1:] {
		fmt.Fprintf(w, "  tenant %s (%s): %s\n", t.tenant, t.name, t.base)
	}
	fmt.Fprintf(w, "  metrics (Prometheus, OpenTelemetry names under extauth_): %s/metrics\n", base)
}

// Close stops the demo's background work and its development providers.
func (s *server) Close() {
	s.auth.Close()
	s.metrics.close()
	if s.dev != nil {
		s.dev.close()
	}
}

// newServer builds the demo: the extauth routes, the pages, and (without a
// config file) the development providers, for the demo's own site and for
// each tenant's.
func newServer(base string, o serverOptions) (*server, error) {
	logger := o.logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	srv := &server{oidcMode: o.mode()}
	var cfg *extauth.Config
	var tenantOf func(*http.Request) (string, error)
	tenantBase := subdomainBase(base)
	if o.configPath == "" {
		dev, err := mountDevProviders(mux, base, o)
		if err != nil {
			return nil, err
		}
		srv.dev, cfg = dev, dev.cfg
		if dev.tenantOf != nil {
			tenantOf, tenantBase = dev.tenantOf, dev.tenantBase
		}
	} else {
		var opts []extauth.ConfigOption
		if o.env != "" {
			opts = append(opts, extauth.Env(o.env))
		}
		var err error
		cfg, err = extauth.LoadConfig(o.configPath, opts...)
		if cfg != nil {
			cfg.LogWarnings(context.Background(), logger)
		}
		if err != nil {
			return nil, err
		}
		// A secrets file's tenants are served on subdomains of the
		// base URL's host.
		if len(cfg.Tenants) > 0 {
			u, _ := url.Parse(base)
			tenantOf = extauth.SubdomainTenants(u.Hostname())
		}
	}
	fail := func(err error) (*server, error) {
		if srv.dev != nil {
			srv.dev.close()
		}
		return nil, err
	}
	key, err := cookieKey(o.configPath != "")
	if err != nil {
		return fail(err)
	}
	m, err := newMetrics()
	if err != nil {
		return fail(err)
	}
	srv.metrics = m
	sessions := newSessions(strings.HasPrefix(base, "https://"))
	sites := newSites(base, cfg, tenantBase, devTenants)
	sites.tenantOf = tenantOf
	srv.sites = sites
	pages := &pages{sessions: sessions, sites: sites, log: logger, oidcMode: o.mode()}
	opts := extauth.Options{
		BaseURL:    base,
		CookieKey:  key,
		Logger:     logger,
		HTTPClient: o.httpClient,
		TenantOf:   tenantOf,
		// extauth's metrics go to the OpenTelemetry SDK, which the
		// Prometheus exporter serves at /metrics.
		MeterProvider: m.provider,
		// The demo's sign-out button ends the demo's session, then sends
		// the browser to the provider where it can end its own (SAML
		// single logout, OpenID Connect RP-initiated logout), which comes
		// back to Done; the providers' own logouts end the demo's sessions.
		Logout: extauth.LogoutOptions{
			OnProviderLogout: sessions.endProviderSessions,
			Done:             pages.logoutDone,
		},
		OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
			sessions.signIn(w, id)
			http.Redirect(w, r, extauth.ReturnTo(r), http.StatusSeeOther)
		},
		OnFailure: pages.onFailure,
		// The pages extauth serves itself (the step-up page, the
		// discovery page, ...) call the providers what the demo's own
		// pages call them, at each site.
		Pages: extauth.Pages{ProviderName: func(tenant string, p extauth.Provider) string {
			for _, s := range sites.list {
				if s.tenant == tenant {
					return s.label(p)
				}
			}
			return ""
		}},
	}
	if tenantOf != nil {
		opts.TenantBaseURL = func(tenant string) (string, error) { return tenantBase(tenant), nil }
	}
	a, err := extauth.New(cfg, opts)
	if err != nil {
		m.close()
		return fail(err)
	}
	srv.auth, pages.auth = a, a
	a.Mount(mux)
	mux.Handle("GET /style.css", devpage.Handler())
	mux.HandleFunc("GET /{$}", pages.home)
	mux.HandleFunc("GET /me.json", pages.me)
	adminNeeds := extauth.Assurance{Level: levelHigh, MaxAge: adminMaxAge}
	mux.Handle("GET /admin", pages.signedIn(a.RequireAssurance(adminNeeds, pages.current)(http.HandlerFunc(pages.admin))))
	mux.HandleFunc("POST /logout", pages.logout)
	// In production, serve /metrics where only Prometheus reaches it.
	mux.Handle("GET /metrics", m.handler)
	// Go's protection against cross-origin POSTs, with a bypass for the
	// routes identity providers POST to from their own site.
	cop := http.NewCrossOriginProtection()
	a.AllowCrossSiteCallbacks(cop)
	srv.Handler = cop.Handler(mux)
	return srv, nil
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
