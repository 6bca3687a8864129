package extauth

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"path"
	"strings"

	"github.com/extauth/extauth/internal/outbound"
	"github.com/extauth/extauth/internal/telemetry"
	"github.com/extauth/extauth/providers"
)

// DefaultPathPrefix is where the routes live unless Options.PathPrefix says
// otherwise: the specification's /users/auth/.
const DefaultPathPrefix = "/users/auth/"

// site is one set of mounted providers at one base URL: the application's
// own, or one tenant's.
type site struct {
	layout
	// tenant is "" for the application's own site.
	tenant string
	origin string
	secure bool
	// strategies, and their hooks, are keyed by the slug they are mounted
	// under.
	strategies map[string]providers.Strategy
	callbacks  map[string]CallbackFunc
	order      []string
	// log and store carry the tenant: its log lines name it, its
	// single-use keys are its own.
	log   *slog.Logger
	store siteStore
	tel   *telemetry.Site
	// ignored are the sign-in options its providers were sent without
	// allowing them, each logged once.
	ignored *ignoredOptions
}

// layout is where a site's routes are: the one place that knows their paths.
type layout struct {
	base   *url.URL
	prefix string
}

func (l layout) authorizePath(name string) string { return l.prefix + name }
func (l layout) callbackPath(name string) string  { return l.prefix + name + "/callback" }
func (l layout) extraPath(name, purpose string) string {
	return l.prefix + name + "/" + purpose
}

// url is the absolute URL of a route path.
func (l layout) url(path string) string { return l.base.String() + path }

// buildSite builds the strategies of every provider cfg configures, and o's
// extra ones, mounted under their slugs at base. It returns every problem
// it meets rather than the first.
func (a *Auth) buildSite(tenant string, base *url.URL, cfg *Config, o *Options) (*site, []error) {
	st := &site{
		layout:     layout{base: base, prefix: a.prefix},
		tenant:     tenant,
		origin:     base.Scheme + "://" + base.Host,
		secure:     base.Scheme == "https",
		strategies: make(map[string]providers.Strategy),
		callbacks:  make(map[string]CallbackFunc),
		log:        a.log,
		store:      a.store,
		tel:        a.tel.Site(tenant),
		ignored:    &ignoredOptions{},
	}
	if tenant != "" {
		st.log = a.log.With("tenant", tenant)
		st.store = st.store.withPrefix("t/" + tenant + "/")
	}
	env := func(slug string) providers.Env {
		tel := st.tel.Provider(slug)
		return providers.Env{
			CallbackURL: st.url(st.callbackPath(slug)),
			HTTPClient:  outbound.Observed(a.client, tel),
			Logger:      st.log.With("provider", slug),
			Store:       tel.Store(st.store),
			Now:         a.now,
		}
	}
	var problems []error
	add := func(slug string, s providers.Strategy) {
		if _, dup := st.strategies[slug]; dup {
			problems = append(problems, fmt.Errorf("extauth: provider %q is mounted twice", slug))
			return
		}
		st.strategies[slug] = s
		st.order = append(st.order, slug)
		watch(st.tel.Provider(slug), s)
	}
	for _, p := range cfg.Providers() {
		slug := a.slug(string(p))
		s, err := buildStrategy(p, cfg, env(slug), a.withLogout(o, st, slug))
		if err != nil {
			var pe *providers.Error
			if errors.As(err, &pe) {
				// Already "extauth: <code>: ..."; name the provider once.
				problems = append(problems, asError(err, slug, CodeMisconfigured))
			} else {
				problems = append(problems, fmt.Errorf("extauth: %s: %w", slug, err))
			}
			continue
		}
		add(slug, s)
	}
	for _, s := range o.Extra {
		if s == nil {
			problems = append(problems, errors.New("extauth: Options.Extra holds a nil strategy"))
			continue
		}
		if !validSlug(s.Name()) {
			problems = append(problems, fmt.Errorf("extauth: provider name %q is not a lowercase slug", s.Name()))
			continue
		}
		slug := a.slug(s.Name())
		if es, ok := s.(providers.EnvSetter); ok {
			es.SetEnv(env(slug))
		}
		add(slug, s)
	}
	for _, name := range st.order {
		cb := o.Callbacks[Provider(name)]
		if cb == nil {
			cb = o.Callbacks[Provider(st.strategies[name].Name())]
		}
		if cb == nil {
			cb = o.OnSuccess
		}
		if cb == nil {
			problems = append(problems, fmt.Errorf("extauth: %s: no hook: set Options.Callbacks[%q] or Options.OnSuccess", name, name))
			continue
		}
		st.callbacks[name] = cb
	}
	return st, problems
}

func (st *site) close() error {
	var errs []error
	for _, s := range st.strategies {
		if c, ok := s.(io.Closer); ok {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// slug is the name provider p is mounted under.
func (a *Auth) slug(p string) string {
	if s, ok := a.slugs[p]; ok {
		return s
	}
	return p
}

func parsePathPrefix(p string) (string, error) {
	if p == "" {
		return DefaultPathPrefix, nil
	}
	if !strings.HasPrefix(p, "/") || !strings.HasSuffix(p, "/") || path.Clean(p)+"/" != p && p != "/" ||
		strings.ContainsAny(p, "{}?#%\\ \t\r\n") {
		return "", fmt.Errorf("extauth: Options.PathPrefix %q must be a clean path that starts and ends with /", p)
	}
	return p, nil
}

func parseSlugs(m map[Provider]string) (map[string]string, error) {
	out := make(map[string]string, len(m))
	used := map[string]Provider{}
	var errs []error
	for p, s := range m {
		if !validSlug(s) {
			errs = append(errs, fmt.Errorf("extauth: Options.Slugs[%q] = %q is not a lowercase slug", p, s))
			continue
		}
		if q, dup := used[s]; dup {
			errs = append(errs, fmt.Errorf("extauth: Options.Slugs gives %q and %q the same slug %q", p, q, s))
		}
		used[s] = p
		out[string(p)] = s
	}
	return out, errors.Join(errs...)
}
