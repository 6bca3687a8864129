package extauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/extauth/extauth/internal/outbound"
)

// ErrUnknownTenant is what a TenantSource or Options.TenantOf returns, wrapped
// or not, for a tenant that does not exist: the routes answer 404.
var ErrUnknownTenant = errors.New("unknown tenant")

// TenantSource looks tenants up at run time, as a host does that keeps its
// customers' identity providers in its own database: a tenant created there
// can sign in as soon as LookupTenant returns its configuration (call
// Auth.Invalidate after changing one).
type TenantSource interface {
	// LookupTenant returns the configuration of tenant, or an error wrapping
	// ErrUnknownTenant when there is none. Any other error answers
	// provider_unavailable for that tenant's sign-ins, and that tenant's
	// only.
	LookupTenant(ctx context.Context, tenant string) (*Config, error)
}

// TenantSourceFunc adapts a function to TenantSource.
type TenantSourceFunc func(ctx context.Context, tenant string) (*Config, error)

// LookupTenant calls f.
func (f TenantSourceFunc) LookupTenant(ctx context.Context, tenant string) (*Config, error) {
	return f(ctx, tenant)
}

// Defaults of the tenant cache.
const (
	DefaultMaxTenants        = 1000
	DefaultTenantIdleTimeout = time.Hour
	// tenantRetry is how long a failed tenant lookup or build is answered
	// from memory before it is tried again, so that a dead database or a
	// flood of unknown subdomains costs one lookup, not one per request.
	tenantRetry = 10 * time.Second
)

// SubdomainTenants returns an Options.TenantOf for tenants served on the
// subdomains of parent: "city-a.example.org" is tenant "city-a" when parent
// is "example.org", and parent itself is the application's own site (""). A
// host that is neither, or a deeper subdomain, is an unknown tenant. Ports
// are ignored.
func SubdomainTenants(parent string) func(r *http.Request) (string, error) {
	parent = strings.ToLower(strings.TrimSuffix(parent, "."))
	return func(r *http.Request) (string, error) {
		host := strings.ToLower(r.Host)
		if h, _, ok := strings.Cut(host, ":"); ok && !strings.Contains(h, "]") {
			host = h
		}
		host = strings.TrimSuffix(host, ".")
		if host == parent {
			return "", nil
		}
		label, ok := strings.CutSuffix(host, "."+parent)
		if !ok || !validSlug(label) || strings.Contains(label, "_") {
			return "", fmt.Errorf("host %q is not a tenant of %s: %w", host, parent, ErrUnknownTenant)
		}
		return label, nil
	}
}

// Tenant returns the tenant of the request handed to a hook, "" for the
// application's own providers.
func Tenant(r *http.Request) string {
	s, _ := r.Context().Value(tenantKey).(string)
	return s
}

// Invalidate forgets what is built for tenant, so that its next request
// reads its configuration again (after the host changed it in its
// database). Sign-ins it has in flight still finish.
func (a *Auth) Invalidate(tenant string) {
	if a.tenants != nil {
		a.tenants.drop(tenant)
	}
}

// siteFor returns the site r is for: the application's own, or its tenant's.
func (a *Auth) siteFor(r *http.Request) (*site, error) {
	if a.tenantOf == nil {
		return a.site, nil
	}
	name, err := a.tenantOf(r)
	if err != nil {
		if !errors.Is(err, ErrUnknownTenant) {
			err = fmt.Errorf("%w: %w", ErrUnknownTenant, err)
		}
		return nil, err
	}
	if name == "" {
		return a.site, nil
	}
	if !ValidTenantName(name) {
		return nil, fmt.Errorf("tenant name %q is not valid: %w", name, ErrUnknownTenant)
	}
	st, err := a.tenants.get(r.Context(), name)
	if err != nil {
		return nil, &tenantError{name, err}
	}
	return st, nil
}

// tenantError is a tenant's failure to build, naming the tenant for logs.
type tenantError struct {
	tenant string
	err    error
}

func (e *tenantError) Error() string { return "tenant " + e.tenant + ": " + e.err.Error() }
func (e *tenantError) Unwrap() error { return e.err }

// tenantBase is the base URL of tenant: Options.TenantBaseURL's, or BaseURL
// with the tenant's name as a subdomain.
func (a *Auth) tenantBase(tenant string) (*url.URL, error) {
	if a.tenantBaseURL != nil {
		s, err := a.tenantBaseURL(tenant)
		if err != nil {
			return nil, err
		}
		return parseBaseURL(s)
	}
	u := *a.site.base
	u.Host = tenant + "." + u.Host
	return &u, nil
}

// buildTenant builds the site of tenant from its configuration. It makes no
// network request: strategies fetch their metadata and discovery on first
// use, as they do for the application's own site.
func (a *Auth) buildTenant(ctx context.Context, tenant string) (*site, error) {
	var cfg *Config
	if c, ok := a.fileTenants[tenant]; ok {
		cfg = c
	} else if a.tenantSource != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), outbound.Timeout(a.client))
		defer cancel()
		c, err := a.tenantSource.LookupTenant(ctx, tenant)
		if err != nil {
			if errors.Is(err, ErrUnknownTenant) {
				return nil, err
			}
			return nil, &Error{Code: CodeProviderUnavailable, Message: "sign-in is unavailable; please try again shortly",
				Err: fmt.Errorf("tenant lookup: %w", err)}
		}
		if c == nil {
			return nil, fmt.Errorf("tenant source has no %q: %w", tenant, ErrUnknownTenant)
		}
		cfg = c
	} else {
		return nil, fmt.Errorf("no tenant %q: %w", tenant, ErrUnknownTenant)
	}
	misconfigured := func(err error) error {
		return &Error{Code: CodeMisconfigured, Message: "sign-in is not configured correctly for this site", Err: err}
	}
	if err := cfg.Validate(); err != nil {
		return nil, misconfigured(err)
	}
	base, err := a.tenantBase(tenant)
	if err != nil {
		return nil, misconfigured(fmt.Errorf("base URL: %w", err))
	}
	o := a.opts
	o.Extra = nil // instances of the host's own, for its own site only
	st, problems := a.buildSite(tenant, base, cfg, &o)
	if err := errors.Join(problems...); err != nil {
		st.close()
		return nil, misconfigured(err)
	}
	return st, nil
}

// tenantCache holds the built tenants. A request for a built tenant reads a
// sync.Map and an atomic: no lock is shared between tenants on the hot path.
// The first request of a tenant builds it while the others of the same
// tenant wait; at most max are kept, the least recently used going first,
// and none idle longer than idle.
//
// A tenant that cannot be built (unknown, or its lookup or configuration
// failing) is remembered apart, in failures: anyone can ask for made-up
// subdomains, and such answers must never count toward max, or a flood of
// them would evict, close and rebuild every real tenant.
type tenantCache struct {
	a       *Auth
	max     int
	idle    time.Duration
	entries sync.Map // tenant name → *tenantEntry, built or being built
	count   atomic.Int64
	evictMu sync.Mutex
	fails   failureCache
	stop    chan struct{}
	done    chan struct{}
}

type tenantEntry struct {
	ready chan struct{}
	site  *site
	err   error
	// used is when the tenant was last asked for, by the real clock: it
	// orders evictions, which Options.Now has no say in.
	used atomic.Int64
}

func (e *tenantEntry) touch() { e.used.Store(time.Now().UnixNano()) }

func newTenantCache(a *Auth, max int, idle time.Duration) *tenantCache {
	c := &tenantCache{a: a, max: max, idle: idle, stop: make(chan struct{}), done: make(chan struct{})}
	c.fails.init(maxTenantFailures)
	go c.janitor()
	return c
}

func (c *tenantCache) get(ctx context.Context, name string) (*site, error) {
	for {
		v, ok := c.entries.Load(name)
		if !ok {
			if err := c.fails.get(name); err != nil {
				return nil, err
			}
			e := &tenantEntry{ready: make(chan struct{})}
			if v, ok = c.entries.LoadOrStore(name, e); !ok {
				c.fill(ctx, name, e)
				v = e
			}
		}
		e := v.(*tenantEntry)
		select {
		case <-e.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if e.err != nil {
			// Those who waited for this build get its error; the next
			// request reads it from failures.
			return nil, e.err
		}
		e.touch()
		return e.site, nil
	}
}

func (c *tenantCache) fill(ctx context.Context, name string, e *tenantEntry) {
	e.site, e.err = c.a.buildTenant(ctx, name)
	e.touch()
	if e.err != nil {
		if !errors.Is(e.err, ErrUnknownTenant) {
			c.a.log.Warn("extauth: tenant cannot sign in", "tenant", name, "err", e.err)
		}
		c.fails.put(name, e.err, time.Now().Add(tenantRetry))
		close(e.ready)
		c.entries.CompareAndDelete(name, e)
		return
	}
	n := c.count.Add(1)
	close(e.ready)
	if n > int64(c.max) {
		c.evictOldest()
	}
}

// evictOldest drops least recently used tenants until max remain. It scans
// every entry: it runs only when a new tenant is built past the bound.
func (c *tenantCache) evictOldest() {
	c.evictMu.Lock()
	defer c.evictMu.Unlock()
	for c.count.Load() > int64(c.max) {
		var oldest string
		var oldestEntry *tenantEntry
		c.entries.Range(func(k, v any) bool {
			e := v.(*tenantEntry)
			select {
			case <-e.ready:
			default:
				return true // being built
			}
			if e.site == nil {
				return true // failed, on its way out
			}
			if oldestEntry == nil || e.used.Load() < oldestEntry.used.Load() {
				oldest, oldestEntry = k.(string), e
			}
			return true
		})
		if oldestEntry == nil {
			return
		}
		c.remove(oldest, oldestEntry)
	}
}

func (c *tenantCache) remove(name string, e *tenantEntry) {
	// Only built entries are counted; a failed one leaves by itself.
	if e.site != nil && c.entries.CompareAndDelete(name, e) {
		c.count.Add(-1)
		e.site.close()
	}
}

func (c *tenantCache) drop(name string) {
	c.fails.drop(name)
	if v, ok := c.entries.Load(name); ok {
		e := v.(*tenantEntry)
		select {
		case <-e.ready:
			c.remove(name, e)
		default:
			// Being built from the old configuration: wait for it, then
			// drop it, so the next request reads the new one.
			go func() {
				<-e.ready
				c.remove(name, e)
			}()
		}
	}
}

func (c *tenantCache) janitor() {
	defer close(c.done)
	every := max(c.idle/4, 50*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			cutoff := time.Now().Add(-c.idle).UnixNano()
			c.entries.Range(func(k, v any) bool {
				e := v.(*tenantEntry)
				select {
				case <-e.ready:
					if e.used.Load() < cutoff {
						c.remove(k.(string), e)
					}
				default:
				}
				return true
			})
		}
	}
}

func (c *tenantCache) close() error {
	close(c.stop)
	<-c.done
	var errs []error
	c.entries.Range(func(k, v any) bool {
		e := v.(*tenantEntry)
		select {
		case <-e.ready:
			if e.site != nil {
				errs = append(errs, e.site.close())
			}
		default:
		}
		return true
	})
	return errors.Join(errs...)
}

// maxTenantFailures bounds the tenants whose failure is remembered: enough
// for every broken tenant a host has, while a flood of made-up subdomains
// costs at most this much memory. Past it a failure is not remembered, and
// the tenant is looked up again on its next request.
const maxTenantFailures = 1024

// failureCache remembers, for tenantRetry, the tenants that could not be
// built, so that a dead database or a repeated unknown subdomain costs one
// lookup, not one per request.
type failureCache struct {
	mu  sync.Mutex
	max int
	m   map[string]failure
}

type failure struct {
	err   error
	until time.Time
}

func (f *failureCache) init(max int) {
	f.max = max
	f.m = make(map[string]failure)
}

// get returns the failure remembered for name, nil if none is live.
func (f *failureCache) get(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.m[name]
	if !ok {
		return nil
	}
	if time.Now().Before(e.until) {
		return e.err
	}
	delete(f.m, name)
	return nil
}

func (f *failureCache) put(name string, err error, until time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.m[name]; !ok && len(f.m) >= f.max {
		now := time.Now()
		for k, e := range f.m {
			if !now.Before(e.until) {
				delete(f.m, k)
			}
		}
		if len(f.m) >= f.max {
			return
		}
	}
	f.m[name] = failure{err, until}
}

func (f *failureCache) drop(name string) {
	f.mu.Lock()
	delete(f.m, name)
	f.mu.Unlock()
}
