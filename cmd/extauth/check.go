package main

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/internal/outbound"
)

const (
	defaultTimeout = 10 * time.Second
	maxTimeout     = 5 * time.Minute
	// maxDocumentBytes bounds the SAML metadata and the discovery document,
	// as the application bounds every provider response.
	maxDocumentBytes = 1 << 20
	// expiryWarning is how long before a certificate expires check starts
	// warning about it.
	expiryWarning = 30 * 24 * time.Hour
)

func (c *cli) check(ctx context.Context, args []string) int {
	f := c.newFlags("check", "-config FILE [-env ENV] [-base-url URL] [-timeout 10s] [-offline]",
		`Validates a secrets file and reports each of the six providers as enabled,
not configured, or broken with the reasons. Problems name settings, never
their values: check never prints a secret.

For SAML it fetches the IdP metadata from saml_idp_metadata_url, reads it by
the application's rules (its signature checked with idp_metadata_certificate
when that is set) and reports the IdP's entity ID, single sign-on URLs and
signing certificates, and warns when the IdP shows that it uses SHA-1 (the
metadata's own signature, or alg:SigningMethod/DigestMethod lists), which
the application refuses unless Options.SAML.AllowSHA1; for OpenID
Connect it fetches <oidc_issuer>/.well-known/openid-configuration, checks that
it names the configured issuer exactly, and reports the endpoints and the ID
token signing algorithms. Certificates (the IdP's and the service provider's
own) that expire within 30 days are warned about.

With -base-url it also builds each provider as the application would, which
catches what only the provider's code checks.

Exit status 1 means at least one error was found.
`)
	configPath := f.String("config", "", "the secrets file (required)")
	env := f.String("env", "", "environment section of a Rails-style file (default: $EXTAUTH_ENV, else development)")
	baseURL := f.String("base-url", "", "the application's external base URL, e.g. https://app.example.org")
	timeout := f.Duration("timeout", defaultTimeout, "time-out of each request to a provider")
	offline := f.Bool("offline", false, "do not fetch SAML metadata or OIDC discovery")
	if done, code := f.parse(args); done {
		return code
	}
	switch {
	case *configPath == "":
		return f.fail("-config is required")
	case *timeout <= 0 || *timeout > maxTimeout:
		return f.fail("-timeout must be positive and at most %s", maxTimeout)
	}
	if ok, code := checkBaseURL(f, *baseURL); !ok {
		return code
	}

	cfg, problems, err := extauth.InspectConfig(*configPath, configOptions(*env)...)
	if err != nil {
		return c.errorf("check", "%v", err)
	}
	r := &checkReport{now: c.now(), broken: map[extauth.Provider][]string{}}
	for _, p := range problems {
		if p.Provider == "" {
			r.general = append(r.general, p.Error())
			continue
		}
		r.fail(p.Provider, p.Key+" "+p.Reason)
	}
	r.warnings = append(r.warnings, cfg.Warnings...)
	enabled := cfg.Providers()
	// Only a provider whose settings are sound is built and probed: the
	// reasons it is broken are already known.
	var usable []extauth.Provider
	for _, p := range enabled {
		if len(r.broken[p]) == 0 {
			usable = append(usable, p)
		}
	}
	if len(enabled) == 0 && len(problems) == 0 {
		r.warn("no provider is configured")
	}

	if len(r.broken[extauth.SAML]) == 0 {
		r.spCertificate(cfg.SAML)
	}
	if *baseURL != "" {
		for _, p := range usable {
			if err := buildProvider(cfg, p, *baseURL); err != nil {
				r.fail(p, err.Error())
			}
		}
	}
	if !*offline {
		pr := &prober{client: outbound.NewClient(nil, *timeout, maxDocumentBytes), timeout: *timeout, r: r}
		if slices.Contains(usable, extauth.SAML) {
			pr.saml(ctx, cfg.SAML)
		}
		if slices.Contains(usable, extauth.OIDC) {
			pr.oidc(ctx, cfg.OIDC.Issuer)
		}
	}

	header := "Checking " + *configPath
	if *env != "" {
		header += " (environment " + *env + ")"
	}
	r.print(c.stdout, header, enabled)
	if n := r.errors(); n > 0 {
		fmt.Fprintf(c.stderr, "extauth check: %s\n", plural(n, "error"))
		return exitFail
	}
	return exitOK
}

// checkReport gathers what check finds, to print it in a fixed order.
type checkReport struct {
	now      time.Time
	broken   map[extauth.Provider][]string
	general  []string
	warnings []string
	sections []*section
}

// section is a titled list of facts about one provider.
type section struct {
	title string
	rows  [][2]string
}

func (s *section) add(name, value string) { s.rows = append(s.rows, [2]string{name, value}) }

func (r *checkReport) fail(p extauth.Provider, reason string) {
	r.broken[p] = append(r.broken[p], reason)
}

func (r *checkReport) warn(format string, args ...any) {
	r.warnings = append(r.warnings, fmt.Sprintf(format, args...))
}

func (r *checkReport) section(title string) *section {
	for _, s := range r.sections {
		if s.title == title {
			return s
		}
	}
	s := &section{title: title}
	r.sections = append(r.sections, s)
	return s
}

func (r *checkReport) errors() int {
	n := len(r.general)
	for _, reasons := range r.broken {
		n += len(reasons)
	}
	return n
}

func (r *checkReport) print(w io.Writer, header string, enabled []extauth.Provider) {
	fmt.Fprintf(w, "%s\n\nProviders:\n", header)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, p := range extauth.BuiltinProviders() {
		status := "not configured"
		switch {
		case len(r.broken[p]) > 0:
			status = "broken: " + strings.Join(r.broken[p], "; ")
		case slices.Contains(enabled, p):
			status = "enabled"
		}
		fmt.Fprintf(tw, "  %s\t%s\n", p, status)
	}
	tw.Flush()
	for _, s := range r.sections {
		fmt.Fprintf(w, "\n%s:\n", s.title)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, row := range s.rows {
			fmt.Fprintf(tw, "  %s\t%s\n", row[0], row[1])
		}
		tw.Flush()
	}
	if len(r.warnings) > 0 {
		fmt.Fprintf(w, "\nWarnings:\n")
		for _, m := range r.warnings {
			fmt.Fprintf(w, "  - %s\n", m)
		}
	}
	if len(r.general) > 0 {
		fmt.Fprintf(w, "\nErrors:\n")
		for _, m := range r.general {
			fmt.Fprintf(w, "  - %s\n", m)
		}
	}
	fmt.Fprintf(w, "\n%s, %s.\n", plural(r.errors(), "error"), plural(len(r.warnings), "warning"))
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// spCertificate reports the service provider's own key pair. Problems with
// it are already among the configuration's; this only adds what a valid
// pair tells: whom it names and when it expires.
func (r *checkReport) spCertificate(cfg extauth.SAMLConfig) {
	cert, _, err := cfg.Additional.KeyPair()
	if err != nil {
		return
	}
	if !cfg.Configured() && cert == nil {
		return
	}
	s := r.section("SAML")
	if cert == nil {
		s.add("SP key pair", "none: requests are not signed, encrypted assertions are refused")
		return
	}
	s.add("SP key pair", "requests are signed (RSA-SHA256), encrypted assertions are decrypted")
	s.add("SP certificate", describeCert(cert, r.now))
	if msg := expiryProblem(cert, r.now); msg != "" {
		r.warn("saml: the SP certificate (saml_additional_settings.certificate) %s; make a new pair with extauth keygen and give the IdP the new metadata", msg)
	}
}

// describeCert names a certificate by its subject and validity.
func describeCert(cert *x509.Certificate, now time.Time) string {
	d := clean(cert.Subject.String())
	if d == "" {
		d = "(empty subject)"
	}
	switch {
	case now.Before(cert.NotBefore):
		return fmt.Sprintf("%s, not valid before %s", d, day(cert.NotBefore))
	case now.After(cert.NotAfter):
		return fmt.Sprintf("%s, expired on %s (%s ago)", d, day(cert.NotAfter), days(now.Sub(cert.NotAfter)))
	}
	return fmt.Sprintf("%s, expires on %s (in %s)", d, day(cert.NotAfter), days(cert.NotAfter.Sub(now)))
}

// expiryProblem says why a certificate deserves a warning: it has expired,
// is not valid yet, or expires within 30 days.
func expiryProblem(cert *x509.Certificate, now time.Time) string {
	switch {
	case now.After(cert.NotAfter):
		return fmt.Sprintf("expired on %s", day(cert.NotAfter))
	case now.Before(cert.NotBefore):
		return fmt.Sprintf("is not valid before %s", day(cert.NotBefore))
	case cert.NotAfter.Sub(now) <= expiryWarning:
		return fmt.Sprintf("expires in %s, on %s", days(cert.NotAfter.Sub(now)), day(cert.NotAfter))
	}
	return ""
}

func day(t time.Time) string { return t.UTC().Format(time.DateOnly) }

func days(d time.Duration) string {
	n := int(d / (24 * time.Hour))
	switch n {
	case 0:
		return "less than a day"
	case 1:
		return "1 day"
	}
	return fmt.Sprintf("%d days", n)
}

// buildProvider builds p alone, as extauth.New would in the application,
// with a throwaway cookie key and a hook that is never called. New makes no
// request to the provider.
func buildProvider(cfg *extauth.Config, p extauth.Provider, baseURL string) error {
	key := make([]byte, 32)
	rand.Read(key)
	a, err := extauth.New(only(cfg, p), extauth.Options{
		BaseURL:   baseURL,
		CookieKey: key,
		Logger:    slog.New(slog.DiscardHandler),
		OnSuccess: func(http.ResponseWriter, *http.Request, *extauth.Identity) {},
	})
	if err != nil {
		return fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "extauth: "+string(p)+": "))
	}
	return a.Close()
}

// only returns a configuration with p's settings alone, so that New's
// verdict is about p.
func only(cfg *extauth.Config, p extauth.Provider) *extauth.Config {
	var out extauth.Config
	switch p {
	case extauth.Microblog:
		out.Microblog = cfg.Microblog
	case extauth.Socialnet:
		out.Socialnet = cfg.Socialnet
	case extauth.SearchOAuth2:
		out.SearchOAuth2 = cfg.SearchOAuth2
	case extauth.BlogOAuth2:
		out.BlogOAuth2 = cfg.BlogOAuth2
	case extauth.SAML:
		out.SAML = cfg.SAML
	case extauth.OIDC:
		out.OIDC = cfg.OIDC
	}
	return &out
}
