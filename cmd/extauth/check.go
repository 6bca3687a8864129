package main

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/internal/outbound"
	"github.com/extauth/extauth/providers"
	"github.com/extauth/extauth/samlsp"
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
	f := c.newFlags("check", "-config FILE [-env ENV] [-tenant NAME | -all-tenants] [-base-url URL] [-timeout 10s] [-offline]",
		`Validates a secrets file and reports each of the six providers as enabled,
not configured, or broken with the reasons. Problems name settings, never
their values: check never prints a secret. It says which environment section
it read and why, and fails when no provider is configured there.

For SAML it fetches the IdP metadata from saml_idp_metadata_url, reads it by
the application's rules (its signature checked with idp_metadata_certificate
when that is set) and reports the IdP's entity ID, single sign-on URLs and
signing certificates, and warns when the IdP shows that it uses SHA-1 (the
metadata's own signature, or alg:SigningMethod/DigestMethod lists), which
the application refuses unless Options.SAML.AllowSHA1 or
saml_additional_settings.security.allow_sha1; for OpenID Connect it fetches
<oidc_issuer>/.well-known/openid-configuration, checks that it names the
configured issuer exactly, and reports the endpoints and the ID token signing
algorithms. Certificates (the IdP's and the service provider's
own) that expire within 30 days are warned about.

It builds each provider, the environment's and every tenant's, with
extauth.New as the application does, without the network, so that whatever
the application would refuse is an error here too, with or without flags.
The base URL is -base-url (a tenant's derived from it as below); without it,
a stand-in: the origin of an absolute RelayState, which the application
requires to be its own site, or https://app.invalid. Only with -base-url
can check see that such a RelayState is on another site.

-tenant reports on one tenant of the environment's tenants: section (its
configuration is the environment's with the tenant's settings over it),
-all-tenants on each in turn. A tenant's base URL is not in the file: it is
the tenant's name as a subdomain of -base-url, as the application derives it
by default, or -base-url with the name for {tenant}, as in
https://app.example.org/{tenant}. Documents that tenants share are fetched
once.

It lists the sign-in options each provider's start route takes per request
(request_options) and the host's assurance levels (assurance_levels), and
warns when levels are set that no step-up can ask for (level not allowed).

Exit status 1 means at least one error was found.
`)
	configPath := f.String("config", "", "the secrets file (required)")
	env := f.String("env", "", envHelp)
	tf := addTenantFlags(f, true)
	baseURL := f.String("base-url", "", "the application's external base URL, e.g. https://app.example.org; for tenants, {tenant} stands for the name")
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
	if ok, code := checkBaseURL(f, *baseURL, tf); !ok {
		return code
	}
	if ok, code := tf.usage(f, *baseURL); !ok {
		return code
	}

	cfg, problems, err := extauth.InspectConfig(*configPath, c.configOptions(*env)...)
	if err != nil {
		return c.errorf("check", "%v", err)
	}
	targets, err := tf.targets(cfg, *configPath, *baseURL)
	if err != nil {
		return c.errorf("check", "%v", err)
	}
	ck := &checker{
		c: c, env: cfg, problems: problems, baseURL: *baseURL, offline: *offline,
		prober: &prober{client: outbound.NewClient(nil, *timeout, maxDocumentBytes), timeout: *timeout},
		probed: map[string]*checkReport{},
	}
	mode := checkEnvironment
	switch {
	case *tf.all:
		mode = checkAllTenants
	case *tf.name != "":
		mode = checkOneTenant
	}
	errs, failed := 0, 0
	for i, t := range targets {
		r := ck.report(ctx, t, mode)
		if i > 0 {
			fmt.Fprintln(c.stdout)
		}
		header := "Checking " + *configPath + " (" + environment(cfg) + ")"
		if t.tenant != "" {
			header = "Checking tenant " + t.tenant + " of " + *configPath + " (" + environment(cfg) + ")"
		}
		r.print(c.stdout, header, t.cfg.Providers())
		errs += r.errors()
		if r.errors() > 0 {
			failed++
		}
	}
	if mode == checkAllTenants {
		// What belongs to no tenant, said once rather than per tenant.
		var rest []string
		for _, p := range ck.problems {
			if p.Tenant == "" && (p.Provider == "" || everyTenantOverrides(cfg, p.Provider)) {
				rest = append(rest, p.Error())
			}
		}
		if len(rest) > 0 {
			fmt.Fprintf(c.stdout, "\nErrors in the file outside any tenant:\n")
			for _, m := range rest {
				fmt.Fprintf(c.stdout, "  - %s\n", m)
			}
			errs += len(rest)
		}
		fmt.Fprintf(c.stdout, "\n%s checked, %d with errors.\n", plural(len(targets), "tenant"), failed)
	}
	if errs > 0 {
		fmt.Fprintf(c.stderr, "extauth check: %s\n", plural(errs, "error"))
		return exitFail
	}
	return exitOK
}

// checker checks the environment or its tenants, one report each.
type checker struct {
	c        *cli
	env      *extauth.Config
	problems []extauth.Problem
	baseURL  string
	offline  bool
	prober   *prober
	// probed holds what a fetch found, by what was fetched, so that the
	// tenants sharing an IdP or OP cost one request.
	probed map[string]*checkReport
}

// checkMode is what check was asked to report on.
type checkMode int

const (
	checkEnvironment checkMode = iota
	checkOneTenant
	checkAllTenants
)

// report checks one configuration: the environment's, or a tenant's.
func (ck *checker) report(ctx context.Context, t target, mode checkMode) *checkReport {
	r := &checkReport{now: ck.c.now(), broken: map[extauth.Provider][]string{}}
	elsewhere := 0
	for _, p := range ck.problems {
		switch {
		case t.tenant == "" && p.Tenant == "" && p.Provider != "":
			r.fail(p.Provider, p.Key+" "+p.Reason)
		case t.tenant == "":
			// The environment's report lists every other problem too:
			// any of them keeps the application from starting.
			r.general = append(r.general, p.Error())
		case p.Tenant == t.tenant && p.Provider != "":
			r.fail(p.Provider, p.Key+" "+p.Reason)
		case p.Tenant == t.tenant:
			r.general = append(r.general, p.Error())
		case p.Tenant == "" && p.Provider != "" && sameAs(t.cfg, ck.env, p.Provider):
			// The environment's problem is the tenant's: it has the
			// environment's settings for the provider.
			r.fail(p.Provider, p.Key+" "+p.Reason)
		case mode == checkAllTenants:
			// Another tenant's problems are in its own report, the
			// file's after every tenant's.
		case p.Tenant == "" && p.Provider == "":
			r.general = append(r.general, p.Error())
		default:
			elsewhere++
		}
	}
	if elsewhere > 0 {
		r.warn("problems elsewhere in the file (%d) keep it from loading; run extauth check without -tenant to see them", elsewhere)
	}
	tenantFlags := mode != checkEnvironment
	for i, w := range t.cfg.Warnings {
		if t.cfg.WarningLevel(i) < slog.LevelWarn {
			r.notes = append(r.notes, w)
		} else {
			r.warnings = append(r.warnings, w)
		}
	}
	enabled := t.cfg.Providers()
	if len(enabled) == 0 && len(r.broken) == 0 {
		switch {
		case t.tenant != "":
			r.general = append(r.general, "no provider is configured for tenant "+t.tenant)
		case !tenantFlags && anyTenantConfigured(t.cfg):
			r.notes = append(r.notes, "the environment configures no provider of its own; its tenants do (check them with -tenant NAME or -all-tenants)")
		default:
			r.general = append(r.general, "no provider is configured"+inEnvironment(t.cfg))
		}
	}
	if t.tenant == "" && len(t.cfg.Tenants) > 0 && !tenantFlags {
		r.notes = append(r.notes, fmt.Sprintf("the environment has %s (%s); check one with -tenant NAME, or all with -all-tenants",
			plural(len(t.cfg.Tenants), "tenant"), strings.TrimPrefix(strings.TrimPrefix(tenantList(t.cfg), "its tenants are "), "it has ")))
	}
	if t.tenant != "" && t.cfg.SAML.Configured() && t.cfg.SAML.SPEntityID == ck.env.SAML.SPEntityID && ck.env.SAML.Configured() {
		r.warn("saml: tenant %s has the environment's saml_sp_entity_id; an IdP tells service providers apart by it, so give each tenant its own", t.tenant)
	}
	// Only a provider whose settings are sound is built and probed: the
	// reasons it is broken are already known.
	var usable []extauth.Provider
	for _, p := range enabled {
		if len(r.broken[p]) == 0 {
			usable = append(usable, p)
		}
	}
	if len(r.broken[extauth.SAML]) == 0 {
		r.spCertificate(t.cfg.SAML)
		r.metadataCertificate(t.cfg.SAML)
	}
	if len(r.broken[extauth.OIDC]) == 0 {
		r.clientKeys(t.cfg.OIDC)
		r.tlsClientCertificates(t.cfg.OIDC)
		r.oidcProfile(t.cfg.OIDC)
		r.oidcPreset(t.cfg.OIDC)
	}
	r.signInOptions(t.cfg)
	// What New would refuse, New says: each provider is built as the
	// application builds it, whatever the flags.
	usable = slices.DeleteFunc(usable, func(p extauth.Provider) bool {
		if err := buildProvider(t.cfg, p, buildBaseURL(t.cfg, t.baseURL)); err != nil {
			r.fail(p, err.Error())
			return true
		}
		return false
	})
	if mode == checkEnvironment {
		ck.buildTenants(r, t.cfg)
	}
	if !ck.offline {
		if slices.Contains(usable, extauth.SAML) {
			s := t.cfg.SAML
			key := fmt.Sprintf("saml %q %q %v", s.IdPMetadataURL, s.IdPSSOServiceURL, s.Additional.HasKeyPair())
			if f := s.Additional.Federation; f.MDQURL != "" {
				key = fmt.Sprintf("saml mdq %q %q %v %q %q %q %v", f.MDQURL, f.SigningCertificate, f.MaxValidity,
					f.EntityIDs, f.RegistrationAuthorities, f.EntityCategories, f.MDQSHA1)
				ck.probe(r, key, func(pr *prober) { pr.mdq(ctx, s) })
			} else if f.MetadataURL != "" {
				key = fmt.Sprintf("saml federation %q %q %q %v %q %q %q", f.MetadataURL, f.SigningCertificate, f.BackingFile, f.MaxValidity,
					f.EntityIDs, f.RegistrationAuthorities, f.EntityCategories)
				ck.probe(r, key, func(pr *prober) { pr.federation(ctx, s) })
			} else {
				ck.probe(r, key, func(pr *prober) { pr.saml(ctx, s) })
			}
		}
		if slices.Contains(usable, extauth.OIDC) {
			c := t.cfg.OIDC
			// Tenants that share an issuer and a registration share one
			// probe; the key tells registrations apart by the key too.
			a := c.Additional
			sum := sha256.Sum256([]byte(a.PrivateKey.Value() + "\x00" + a.PrivateKeyNew.Value() + "\x00" + a.PrivateKeyOld.Value()))
			a.PrivateKey, a.PrivateKeyNew, a.PrivateKeyOld = extauth.Secret{}, extauth.Secret{}, extauth.Secret{}
			key := fmt.Sprintf("oidc %q %+v %x", c.Issuer, a, sum[:8])
			if c.Additional.Federation != nil {
				base := buildBaseURL(t.cfg, t.baseURL)
				ck.probe(r, key+" "+base, func(pr *prober) { pr.oidcFederation(ctx, c, base) })
			} else {
				ck.probe(r, key, func(pr *prober) { pr.oidc(ctx, c) })
			}
		}
	}
	return r
}

// buildTenants builds the providers of each of cfg's tenants as the
// application does on the tenant's first request, and lists what it
// refuses among the environment's errors, as the tenants' problems are:
// each keeps a tenant from signing anyone in. A provider with the
// environment's settings, or with problems already listed, is not built
// again.
func (ck *checker) buildTenants(r *checkReport, cfg *extauth.Config) {
	for _, name := range cfg.TenantNames() {
		t := cfg.Tenants[name]
		for _, p := range t.Providers() {
			if sameAs(t, cfg, p) || slices.ContainsFunc(ck.problems, func(q extauth.Problem) bool { return q.Tenant == name && q.Provider == p }) {
				continue
			}
			if err := buildProvider(t, p, buildBaseURL(t, baseURLFor(ck.baseURL, name))); err != nil {
				r.general = append(r.general, "tenants."+name+": "+string(p)+": "+err.Error())
			}
		}
	}
}

// buildBaseURL is the base URL check builds providers at: the one it was
// given or, without one, a stand-in. A base URL only changes what New
// refuses through an absolute RelayState, which must be on the
// application's site; the stand-in is that site, since check cannot know
// better.
func buildBaseURL(cfg *extauth.Config, given string) string {
	if given != "" {
		return given
	}
	if u, err := url.Parse(cfg.SAML.Additional.RelayState); err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" && u.User == nil {
		return u.Scheme + "://" + u.Host
	}
	return "https://app.invalid"
}

// probe runs fetch against a report of its own, once per key, and adds
// what it found to r.
func (ck *checker) probe(r *checkReport, key string, fetch func(pr *prober)) {
	found, ok := ck.probed[key]
	if !ok {
		found = &checkReport{now: r.now, broken: map[extauth.Provider][]string{}}
		pr := *ck.prober
		pr.r = found
		fetch(&pr)
		ck.probed[key] = found
	}
	for _, s := range found.sections {
		r.section(s.title).rows = append(r.section(s.title).rows, s.rows...)
	}
	for p, reasons := range found.broken {
		r.broken[p] = append(r.broken[p], reasons...)
	}
	r.warnings = append(r.warnings, found.warnings...)
}

// everyTenantOverrides reports whether no tenant of cfg has the
// environment's settings for p, so that no tenant's report shows the
// environment's problems with p.
func everyTenantOverrides(cfg *extauth.Config, p extauth.Provider) bool {
	for _, t := range cfg.Tenants {
		if sameAs(t, cfg, p) {
			return false
		}
	}
	return true
}

func anyTenantConfigured(cfg *extauth.Config) bool {
	for _, t := range cfg.Tenants {
		if len(t.Providers()) > 0 {
			return true
		}
	}
	return false
}

// checkReport gathers what check finds, to print it in a fixed order.
type checkReport struct {
	now      time.Time
	broken   map[extauth.Provider][]string
	general  []string
	warnings []string
	// notes need no action, such as a setting read under its other name.
	notes    []string
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
	if len(r.notes) > 0 {
		fmt.Fprintf(w, "\nNotes:\n")
		for _, m := range r.notes {
			fmt.Fprintf(w, "  - %s\n", m)
		}
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

// spCertificate reports the service provider's own key pairs. Problems
// with them are already among the configuration's; this only adds what
// valid pairs tell: whom each names, its fingerprint, when it expires,
// what it does now (signs, decrypts, is published for what) and, during a
// key rotation, what to do next.
func (r *checkReport) spCertificate(cfg extauth.SAMLConfig) {
	a := cfg.Additional
	cert, _, err := a.KeyPair()
	if err != nil {
		return
	}
	next, _, err := a.NextKeyPair()
	if err != nil {
		return
	}
	old, _, err := a.OldKeyPair()
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
	// What the application ignores, with a warning, the check shows as it
	// does: one pair is not two.
	if next != nil && samePublicKey(next, cert) {
		r.warn("saml: saml_additional_settings.certificate_new holds the current key pair: there is nothing to rotate; remove certificate_new and private_key_new")
		next = nil
	}
	if old != nil && samePublicKey(old, cert) {
		r.warn("saml: saml_additional_settings.certificate_old holds the current key pair: nothing retires; to promote certificate_new, " +
			"it becomes certificate and private_key, otherwise remove certificate_old and private_key_old")
		old = nil
	}
	const procedure = `docs/saml.md, "Rotating the SP key pair"`
	switch {
	case next == nil && old == nil:
		s.add("SP key pair", "requests are signed (RSA-SHA256), encrypted assertions are decrypted")
	case old == nil:
		s.add("SP key pair", "rotation under way: certificate_new is added, to be promoted (step 1 of "+procedure+")")
	case next == nil:
		s.add("SP key pair", "rotation under way: certificate_new was promoted to certificate, certificate_old retires (step 3 of "+procedure+")")
	default:
		s.add("SP key pair", "rotations under way: certificate_old retires from the last, certificate_new is added for the next ("+procedure+")")
	}
	certRows(s, "SP certificate", cert, r.now, "signs requests, decrypts assertions; published for encryption and signing")
	if next != nil {
		certRows(s, "SP certificate_new", next, r.now, "decrypts assertions, signs nothing; published for signing only")
	}
	if old != nil {
		certRows(s, "SP certificate_old", old, r.now, "decrypts assertions, never signs again; published for signing only")
	}
	// In a federation the IdPs read the SP metadata from the federation's
	// aggregate (or its MDQ answers), which its registry publishes; an IdP
	// may use an aggregate until its validUntil.
	federated := a.Federation.MetadataURL != "" || a.Federation.MDQURL != ""
	const promote = "then promote: certificate and private_key become certificate_old and private_key_old, certificate_new and private_key_new become certificate and private_key"
	switch {
	case next != nil && federated:
		s.add("Next step", "give the federation's registry the SP metadata (extauth metadata prints it), which it publishes in the aggregate (or its MDQ answers) "+
			"for every IdP; wait until it has, and until the last aggregate without certificate_new has expired (its validUntil): an IdP may use an aggregate "+
			"until then, and one that verifies our signatures must know certificate_new before it signs; "+promote+` (docs/saml.md, "Rotating in a federation")`)
	case next != nil:
		s.add("Next step", "give the IdP the SP metadata and wait until it has read it (an IdP that verifies our signatures must know certificate_new before it signs); "+promote)
	}
	switch {
	case old != nil && federated:
		s.add("Next step", "give the federation's registry the SP metadata (certificate_old is no longer published for encryption); keep certificate_old and "+
			"private_key_old until the registry has published it and the last aggregate that published certificate_old for encryption has expired (its validUntil, "+
			"up to max_validity after it was signed), and the application has logged for a day no assertion encrypted to certificate_old; then remove them "+
			`(docs/saml.md, "Rotating in a federation")`)
	case old != nil:
		s.add("Next step", "give the IdP the SP metadata (certificate_old is no longer published for encryption); once it encrypts to certificate "+
			"(the application logs hourly while it still encrypts to certificate_old), remove certificate_old and private_key_old")
	}
	if next != nil {
		if msg := expiryProblem(next, r.now); msg != "" {
			r.warn("saml: the next SP certificate (saml_additional_settings.certificate_new) %s", msg)
		}
	}
	// The retiring certificate's dates matter to no one: it only decrypts.
	if msg := expiryProblem(cert, r.now); msg != "" {
		advice := "make the next pair with extauth keygen -next and rotate to it (" + procedure + ")"
		if next != nil {
			advice = "promote certificate_new once the IdP has read the metadata with it"
		}
		r.warn("saml: the SP certificate (saml_additional_settings.certificate) %s; %s", msg, advice)
	}
}

// metadataCertificate reports idp_metadata_certificate, with its
// fingerprint, to match against the federation's or the IdP's.
func (r *checkReport) metadataCertificate(cfg extauth.SAMLConfig) {
	c := cfg.Additional.IdPMetadataCertificate
	if c == "" || !cfg.Configured() {
		return
	}
	cert, err := samlsp.ParseCertificatePEM(c)
	if err != nil {
		return
	}
	certRows(r.section("SAML"), "IdP metadata certificate", cert, r.now, "verifies the signature of the IdP metadata")
	if msg := expiryProblem(cert, r.now); msg != "" {
		r.warn("saml: the IdP metadata certificate (saml_additional_settings.idp_metadata_certificate) %s", msg)
	}
}

// clientKeys reports what the oidc strategy warns of at start-up, and the
// OpenID Connect client's keys as it uses them: each with its key IDs,
// whether it signs, that it decrypts, what the JWKS route publishes of
// it, and, during a key rotation, what to do next. Problems with them are
// already among the configuration's.
func (r *checkReport) clientKeys(cfg extauth.OIDCConfig) {
	if !cfg.Configured() {
		return
	}
	keys, warnings, err := cfg.ClientKeys()
	if err != nil {
		return
	}
	for _, w := range warnings {
		r.warn("oidc: %s", w)
	}
	if cfg.Additional.PrivateKey.IsZero() {
		return
	}
	s := r.section("OIDC")
	const procedure = `docs/oidc.md, "Keys, the JWKS route and rotation"`
	var next, old bool
	for _, k := range keys {
		next = next || strings.HasSuffix(k.Setting, ".private_key_new")
		old = old || strings.HasSuffix(k.Setting, ".private_key_old")
	}
	switch {
	case !next && !old:
		s.add("Client key", "signs client assertions and request objects, decrypts ID tokens and UserInfo")
	case !old:
		s.add("Client key", "rotation under way: private_key_new is added, to be promoted (step 1 of "+procedure+")")
	case !next:
		s.add("Client key", "rotation under way: private_key_new was promoted to private_key, private_key_old retires (step 3 of "+procedure+")")
	default:
		s.add("Client key", "rotations under way: private_key_old retires from the last, private_key_new is added for the next ("+procedure+")")
	}
	for _, k := range keys {
		name := strings.TrimPrefix(k.Setting, providers.OIDCSettingsKey+".")
		s.add(name, k.Type+", kid "+k.KID)
		use := "decrypts, signs nothing; published for signing only"
		switch {
		case k.Signs:
			use = "signs, decrypts; published for signing, and for encryption as " + encryptionEntries(k.Encryption)
		case name == "private_key_old":
			use = "decrypts, never signs again; published for signing only"
		}
		s.add("", use)
	}
	if next {
		s.add("Next step", "deploy, and wait until the provider has read the JWKS again (its cache, often an hour; one that "+
			"verifies assertions or request objects must know private_key_new before it signs); then promote: private_key "+
			"becomes private_key_old, private_key_new becomes private_key")
	}
	if old {
		s.add("Next step", "once the provider has read the JWKS again (private_key_old is no longer published for encryption) "+
			"and encrypts to private_key, remove private_key_old")
	}
}

// oidcProfile reports the rules of the client's security profile as the
// strategy applies them, what it implies and what it was given, and DPoP
// with or without a profile: offline, since they are the configuration's.
func (r *checkReport) oidcProfile(cfg extauth.OIDCConfig) {
	if !cfg.Configured() {
		return
	}
	o := cfg.Applied()
	if o.Profile == "" && !o.DPoP {
		return
	}
	// A section is listed where it is first asked for: only when it has
	// rows to show.
	s := r.section("OIDC")
	dpop := "proofs signed " + o.DPoPSigningAlg + " with a key made per sign-in, which the tokens are bound to"
	bound := ""
	switch {
	case o.DPoP:
		bound = "DPoP: " + dpop
	case cfg.Additional.TLSClientCertificate != "":
		bound = "mutual TLS: the tokens are bound to tls_client_certificate"
	}
	switch o.Profile {
	case "":
		if o.DPoP {
			s.add("DPoP", dpop+` (docs/oidc.md, "DPoP")`)
		}
		return
	case providers.OIDCProfileFAPI2:
		s.add("Profile", o.Profile+": the FAPI 2.0 Security Profile's client rules, as applied (docs/oidc.md, \"The profile's rules\")")
	default:
		s.add("Profile", o.Profile+": FAPI 2.0 Security Profile and Message Signing client rules, as applied (docs/oidc.md, \"The profile's rules\")")
	}
	s.add("", "client authentication: "+o.AuthMethod)
	s.add("", "pushed authorization requests, PKCE with S256")
	s.add("", "client assertions' audience: the issuer, as one string")
	s.add("", "sender-constrained tokens: "+bound)
	s.add("", "algorithms: "+strings.Join(o.SigningAlgs, ", ")+" only, for what the client signs and the ID tokens it accepts")
	s.add("", "the iss parameter required in every authorization response")
	if o.Profile == providers.OIDCProfileFAPI2MessageSigning {
		s.add("", "signed request objects; authorization responses as signed JWTs (JARM, response_mode "+o.ResponseMode+")")
	}
}

// oidcPreset reports what the client's preset implies, as the strategy
// applies it: offline, since it is the configuration's.
func (r *checkReport) oidcPreset(cfg extauth.OIDCConfig) {
	if !cfg.Configured() {
		return
	}
	rules := cfg.PresetRules()
	if len(rules) == 0 {
		return
	}
	s := r.section("OIDC")
	s.add("Preset", cfg.Additional.Preset+": "+rules[0]+` (docs/oidc.md, "Presets")`)
	for _, rule := range rules[1:] {
		s.add("", rule)
	}
}

// tlsClientCertificates reports the OpenID Connect client's TLS
// certificates (mutual TLS, RFC 8705) with their fingerprints, to match
// against the provider's registration, and warns of one that expires.
func (r *checkReport) tlsClientCertificates(cfg extauth.OIDCConfig) {
	a := cfg.Additional
	for _, c := range []struct{ name, pem, use string }{
		{"tls_client_certificate", a.TLSClientCertificate, "presented to the provider and its resource servers (mutual TLS); the tokens are bound to it"},
		{"tls_client_certificate_new", a.TLSClientCertificateNew, "published at the JWKS route, not presented yet; make it the current pair once the provider has read it (docs/oidc.md, \"Mutual TLS\")"},
	} {
		if c.pem == "" {
			continue
		}
		cert, err := samlsp.ParseCertificatePEM(c.pem)
		if err != nil {
			continue
		}
		certRows(r.section("OIDC"), c.name, cert, r.now, c.use)
		if msg := expiryProblem(cert, r.now); msg != "" {
			r.warn("oidc: the TLS client certificate (%s.%s) %s", providers.OIDCSettingsKey, c.name, msg)
		}
	}
}

// certRows adds a certificate to s: its subject and validity, its
// SHA-256 fingerprint, as IdP consoles show it, and what it is used for.
func certRows(s *section, name string, cert *x509.Certificate, now time.Time, use string) {
	s.add(name, describeCert(cert, now))
	s.add("", "SHA-256 "+fingerprint(cert))
	if use != "" {
		s.add("", use)
	}
}

// samePublicKey reports whether two certificates hold one key.
func samePublicKey(a, b *x509.Certificate) bool {
	k, ok := a.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	return ok && k.Equal(b.PublicKey)
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
// with a throwaway cookie key and a hook that is never called. The SAML
// strategy starts fetching the IdP metadata as soon as it is built: its
// client refuses every request, so that building is about the settings
// alone, and -offline holds. What providers serve is the prober's business.
func buildProvider(cfg *extauth.Config, p extauth.Provider, baseURL string) error {
	key := make([]byte, 32)
	rand.Read(key)
	a, err := extauth.New(only(cfg, p), extauth.Options{
		BaseURL:    baseURL,
		CookieKey:  key,
		Logger:     slog.New(slog.DiscardHandler),
		HTTPClient: &http.Client{Transport: noNetwork()},
		OnSuccess:  func(http.ResponseWriter, *http.Request, *extauth.Identity) {},
	})
	if err != nil {
		return fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "extauth: "+string(p)+": "))
	}
	return a.Close()
}

// noNetwork is a transport that refuses every connection. It is an
// *http.Transport, as an application's must be for a provider that
// presents a TLS client certificate (mutual TLS), which New adds to it.
func noNetwork() *http.Transport {
	refuse := func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("extauth check builds providers without the network")
	}
	return &http.Transport{DialContext: refuse, DialTLSContext: refuse}
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

// encryptionEntries says how the JWKS publishes a key's encryption half:
// "kid K" without an algorithm, else "kid K (alg A)" for each entry.
func encryptionEntries(es []providers.OIDCPublishedKey) string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = "kid " + e.KID
		if e.Alg != "" {
			parts[i] += " (alg " + e.Alg + ")"
		}
	}
	return strings.Join(parts, ", ")
}
