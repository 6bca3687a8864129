package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/extauth/extauth"
)

// Exit statuses, documented in the package comment and the usage text.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// run is the whole command, in-process: tests call it with their own
// arguments and writers and read the exit status it returns.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return newCLI(stdout, stderr, time.Now).run(ctx, args)
}

// cli carries what the commands share. now is the clock certificate expiry
// is judged by, and lookup the process environment the secrets file reads
// (EXTAUTH_ENV, RAILS_ENV, <%= ENV[...] %>), so that tests can pin both.
type cli struct {
	stdout, stderr io.Writer
	now            func() time.Time
	lookup         func(string) (string, bool)
}

func newCLI(stdout, stderr io.Writer, now func() time.Time) *cli {
	return &cli{stdout: stdout, stderr: stderr, now: now, lookup: os.LookupEnv}
}

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(c *cli, ctx context.Context, args []string) int
}

func commands() []command {
	return []command{
		{"keygen", "generate the SAML service-provider key pair, or with -oidc an OpenID Connect client key", (*cli).keygen},
		{"check", "validate a secrets file and probe SAML metadata and OIDC discovery", (*cli).check},
		{"routes", "list the routes and the callback URL to register with each provider", (*cli).routes},
		{"metadata", "print the SAML service-provider metadata XML", (*cli).metadata},
		{"version", "print the version of extauth and the revision it was built from", (*cli).version},
	}
}

func (c *cli) run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(c.stderr, c.usage())
		return exitUsage
	}
	name, rest := args[0], args[1:]
	switch name {
	case "-h", "-help", "--help", "help":
		if name == "help" && len(rest) > 0 {
			// "extauth help keygen" is "extauth keygen -h".
			return c.run(ctx, []string{rest[0], "-h"})
		}
		fmt.Fprint(c.stdout, c.usage())
		return exitOK
	}
	for _, cmd := range commands() {
		if cmd.name == name {
			return cmd.run(c, ctx, rest)
		}
	}
	fmt.Fprintf(c.stderr, "extauth: unknown command %q\n\n%s", name, c.usage())
	return exitUsage
}

func (c *cli) usage() string {
	var b strings.Builder
	b.WriteString(`extauth is the operator's tool for applications that sign users in with
extauth: it generates the SAML key pair and OpenID Connect client keys,
checks a secrets file, and says what to register with each provider.

Usage:
  extauth <command> [flags]

Commands:
`)
	for _, cmd := range commands() {
		fmt.Fprintf(&b, "  %-9s %s\n", cmd.name, cmd.summary)
	}
	b.WriteString(`
Run "extauth <command> -h" for the flags of a command.

` + exitStatusHelp)
	return b.String()
}

const exitStatusHelp = `Exit status: 0 success, 1 errors found or the operation failed, 2 usage error.
`

// flags is a subcommand's flag set with its usage text. The flag package's
// own printing is silenced: -h goes to stdout with status 0, a usage error to
// stderr with status 2.
type flags struct {
	*flag.FlagSet
	c           *cli
	synopsis    string
	description string
}

func (c *cli) newFlags(name, synopsis, description string) *flags {
	fs := flag.NewFlagSet("extauth "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &flags{FlagSet: fs, c: c, synopsis: synopsis, description: description}
}

func (f *flags) usage() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "Usage: %s\n\n%s", strings.TrimSpace(f.Name()+" "+f.synopsis), f.description)
	n := 0
	f.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		b.WriteString("\nFlags:\n")
		f.SetOutput(&b)
		f.PrintDefaults()
		f.SetOutput(io.Discard)
	}
	b.WriteString("\n" + exitStatusHelp)
	return b.String()
}

// parse parses args. When it returns done, the command ends with code: -h
// was given, or the arguments are wrong.
func (f *flags) parse(args []string) (done bool, code int) {
	err := f.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(f.c.stdout, f.usage())
		return true, exitOK
	case err != nil:
		return true, f.fail("%v", err)
	case f.NArg() > 0:
		return true, f.fail("unexpected argument %q", f.Arg(0))
	}
	return false, exitOK
}

// fail reports a usage error with the usage text and returns exitUsage.
func (f *flags) fail(format string, args ...any) int {
	fmt.Fprintf(f.c.stderr, "%s: %s\n\n%s", f.Name(), fmt.Sprintf(format, args...), f.usage())
	return exitUsage
}

// errorf reports a failed operation and returns exitFail.
func (c *cli) errorf(cmd, format string, args ...any) int {
	fmt.Fprintf(c.stderr, "extauth %s: %s\n", cmd, fmt.Sprintf(format, args...))
	return exitFail
}

// checkBaseURL refuses a -base-url that extauth.New would refuse, as a usage
// error, before any file is read. A URL with {tenant} is a template, only
// with -tenant or -all-tenants.
func checkBaseURL(f *flags, baseURL string, tf tenantFlags) (ok bool, code int) {
	if baseURL == "" {
		return true, 0
	}
	if strings.Contains(baseURL, tenantPlaceholder) && !tf.given() {
		return false, f.fail("%s in -base-url stands for a tenant's name: give -tenant NAME or -all-tenants", tenantPlaceholder)
	}
	if _, err := extauth.CallbackURL(baseURLFor(baseURL, "tenant"), extauth.OIDC); err != nil {
		// The value is not repeated: it may hold a user and password.
		return false, f.fail("-base-url must be an absolute http or https URL without user information, query or fragment, like https://app.example.org or https://{tenant}.example.org")
	}
	return true, 0
}

// envHelp is the help of every -env flag.
const envHelp = "environment section of a Rails-style file (default: $EXTAUTH_ENV, else $RAILS_ENV, else $APP_ENV, else development)"

// configOptions turns -env into the loader's option; without it the loader
// reads $EXTAUTH_ENV, $RAILS_ENV or $APP_ENV, else development, as the
// application does.
func (c *cli) configOptions(env string) []extauth.ConfigOption {
	opts := []extauth.ConfigOption{extauth.LookupEnv(c.lookup)}
	if env != "" {
		opts = append(opts, extauth.Env(env))
	}
	return opts
}

// inEnvironment is " in " and environment(cfg), or "" for a flat file.
func inEnvironment(cfg *extauth.Config) string {
	if cfg.EnvironmentSource == "" {
		return ""
	}
	return " in " + environment(cfg)
}

// environment says which section of the file cfg comes from, and why.
func environment(cfg *extauth.Config) string {
	switch cfg.EnvironmentSource {
	case "":
		return "a flat file, without environment sections"
	case "default":
		return "environment " + cfg.Environment + ", the default: EXTAUTH_ENV, RAILS_ENV and APP_ENV are not set"
	case "Env option":
		return "environment " + cfg.Environment + ", from -env"
	}
	return "environment " + cfg.Environment + ", from " + cfg.EnvironmentSource
}

// describeConfigError explains a file that does not load, naming settings
// and never values (the *ValidationError already reads that way).
func describeConfigError(err error) string {
	var ve *extauth.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	var b strings.Builder
	b.WriteString("the configuration has errors (run extauth check for a full report):")
	for _, p := range ve.Problems {
		b.WriteString("\n  " + p.Error())
	}
	return b.String()
}
