// Package extauth lets a Go web application delegate sign-in to external
// identity providers: OAuth 1.0a, OAuth 2, OpenID Connect and SAML 2.0.
//
// A host loads its secrets file with LoadConfig, builds an *Auth with New,
// mounts the routes on its *http.ServeMux with Mount, and receives a verified,
// normalized *Identity in the callback hook of each provider:
//
//	cfg, err := extauth.LoadConfig("config/secrets.yml")
//	a, err := extauth.New(cfg, extauth.Options{
//		BaseURL:   "https://app.example.org",
//		CookieKey: key, // 32 random bytes, shared by every instance
//		OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) { ... },
//	})
//	a.Mount(mux)
//
// Every sign-in is a transaction sealed into a short-lived cookie, so any
// instance holding the same CookieKey can finish a sign-in another began.
// Values that must be used once across instances go through a Store.
//
// # Guides
//
// The secrets file that LoadConfig reads, its environments and variables, and
// every field of Options are in [Configuration]. Registering the application
// with each provider, and what each puts in the Identity: [OAuth providers]
// (microblog, socialnet, blog_oauth2, any goth provider through
// Options.Extra), [OpenID Connect] (oidc, search_oauth2) and [SAML]. Several
// instances behind a load balancer share a Store, in Redis (package
// redisstore) or PostgreSQL (package pgstore): [Several instances]. The
// extauth command, the failure
// codes an Error carries and what is logged: [Operating]. Testing a host's
// own hooks through the routes: [Testing your app]. What extauth guarantees
// about a sign-in and the tests that prove it: [Security model]. Sessions,
// signing out at the provider (and hearing that it signed the user out) and
// renewing tokens: [After sign-in].
//
// [Configuration]: https://github.com/extauth/extauth/blob/main/docs/configuration.md
// [OAuth providers]: https://github.com/extauth/extauth/blob/main/docs/oauth.md
// [OpenID Connect]: https://github.com/extauth/extauth/blob/main/docs/oidc.md
// [SAML]: https://github.com/extauth/extauth/blob/main/docs/saml.md
// [Several instances]: https://github.com/extauth/extauth/blob/main/docs/several-instances.md
// [Operating]: https://github.com/extauth/extauth/blob/main/docs/operating.md
// [Testing your app]: https://github.com/extauth/extauth/blob/main/docs/testing-your-app.md
// [Security model]: https://github.com/extauth/extauth/blob/main/docs/security.md
// [After sign-in]: https://github.com/extauth/extauth/blob/main/docs/after-sign-in.md
package extauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/extauth/extauth/internal/mock"
	"github.com/extauth/extauth/internal/outbound"
	"github.com/extauth/extauth/internal/pages"
	"github.com/extauth/extauth/internal/seal"
	"github.com/extauth/extauth/internal/store"
	"github.com/extauth/extauth/internal/telemetry"
	"github.com/extauth/extauth/providers"
	"github.com/extauth/extauth/samlsp"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// CallbackFunc is a provider's hook: it receives the verified identity of a
// finished sign-in and answers the browser (typically: start the host's own
// session and redirect to ReturnTo(r)). The response already carries
// Cache-Control: no-store and Referrer-Policy: no-referrer.
type CallbackFunc func(w http.ResponseWriter, r *http.Request, id *Identity)

// FailureFunc answers a failed sign-in. err.Message is safe to show; err.Err
// is for logs.
type FailureFunc func(w http.ResponseWriter, r *http.Request, err *Error)

// Store remembers single-use values across every instance of the
// application: it is how a state, a SAML request ID or an assertion ID is
// accepted once only, even behind a load balancer. NewMemoryStore serves one
// instance; packages redisstore and pgstore share one Redis or PostgreSQL
// among several.
type Store interface {
	// Consume records key until the given time and reports whether it was
	// new: true the first time, false for every later call before until.
	// It must be atomic across instances. An error refuses the sign-in
	// with provider_unavailable.
	Consume(ctx context.Context, key string, until time.Time) (bool, error)
}

// Releaser is implemented by a Store that can give a value back before its
// expiry; every Store of this module does, and a host's own should.
//
// A callback's transaction is consumed before the provider's answer is
// checked, so that two callbacks with one cookie cannot both go on; when
// the answer then fails verification, extauth releases it. Without
// Release, a failed callback holds its value until the transaction would
// have expired (up to TransactionTTL), and anyone can start sign-ins of
// their own and send junk callbacks to fill the store: New logs a warning
// for a Store without it.
type Releaser interface {
	// Release forgets key, so that a later Consume of it reports it new.
	// Releasing a key that is not held is not an error.
	Release(ctx context.Context, key string) error
}

// DefaultMemoryStoreMaxEntries is the bound of a memory store given none.
// An entry costs about 100 bytes, so the store stays under about 10 MB. A
// sign-in holds one entry (three for SAML) for at most TransactionTTL (10
// minutes), so the bound allows a sustained 160 sign-ins a second (55 with
// SAML), more than one instance that keeps its state in memory should
// serve.
const DefaultMemoryStoreMaxEntries = store.DefaultMaxEntries

// MemoryStoreOptions configures NewMemoryStore.
type MemoryStoreOptions struct {
	// MaxEntries bounds how many single-use values the store holds at once
	// (default DefaultMemoryStoreMaxEntries when zero or negative). Every
	// finished sign-in holds one until its transaction would have expired;
	// a callback that fails verification gives its value back at once
	// (Release), so junk callbacks cannot fill the store. At the bound,
	// expired values having been dropped first, a new value is refused: the
	// sign-in fails with provider_unavailable (503) and the log line says
	// the store is full. Values are never dropped before their expiry to
	// make room, since that would let a used callback be accepted again.
	MaxEntries int
	// Now is the store's clock (default time.Now); give it the clock of
	// Options.Now if that is set.
	Now func() time.Time
}

// NewMemoryStore returns a Store for a single instance, held in its memory.
// New uses one with the default options when Options.Store is nil.
// The Store it returns is also a Releaser.
func NewMemoryStore(o MemoryStoreOptions) Store { return store.NewMemory(o.Now, o.MaxEntries) }

// Options configures New. BaseURL, CookieKey and a hook for every configured
// provider (Callbacks or OnSuccess) are required.
type Options struct {
	// BaseURL is the application's external origin, e.g.
	// "https://app.example.org". Callback URLs are BaseURL plus the callback
	// path; they never come from the request's Host header. An https
	// BaseURL makes every cookie Secure with the __Host- prefix.
	BaseURL string

	// CookieKey seals transaction cookies with AES-256-GCM: 32 random bytes,
	// the same on every instance.
	CookieKey []byte `redact:"secret"`
	// OldCookieKeys still open cookies sealed before a key rotation.
	OldCookieKeys [][]byte `redact:"secret"`

	// Callbacks holds the hook of each provider.
	Callbacks map[Provider]CallbackFunc
	// OnSuccess is the hook of providers without an entry in Callbacks.
	OnSuccess CallbackFunc
	// OnFailure answers failed sign-ins; the default writes a page that
	// says what failed in the browser's language (Pages), or JSON for a
	// .json route.
	OnFailure FailureFunc
	// Pages are the words and the look of the pages extauth serves
	// itself: provider names, translations, a stylesheet.
	Pages Pages

	// HTTPClient supplies the transport for outbound requests to providers
	// (a proxy, custom roots, or a test server). Its Timeout, when shorter,
	// wins over Timeout.
	HTTPClient *http.Client `json:"-"`
	// Timeout bounds each outbound request (default 10s). A whole callback,
	// which may make several requests, is bounded by three times Timeout.
	Timeout time.Duration
	// MaxResponseBytes bounds each outbound response body (default 1 MiB).
	MaxResponseBytes int64

	// Logger receives diagnostics (default slog.Default()). Nothing secret
	// is ever logged: no code, state, token, secret or assertion.
	Logger *slog.Logger `json:"-"`
	// MeterProvider receives extauth's metrics, and TracerProvider its
	// spans: sign-ins started and completed, their durations, outbound
	// requests, store calls, tenants, metadata and discovery freshness,
	// certificate expiry (docs/operating.md lists them). Default: the
	// global providers of go.opentelemetry.io/otel, which record nothing
	// until the host installs an SDK; extauth itself uses the
	// OpenTelemetry API only.
	MeterProvider  metric.MeterProvider `json:"-"`
	TracerProvider trace.TracerProvider `json:"-"`
	// Propagator writes the trace context into the requests extauth makes
	// to providers (default: the global one, which writes nothing until the
	// host sets one, e.g. propagation.TraceContext{}).
	Propagator propagation.TextMapPropagator `json:"-"`
	// TraceStoreCalls makes a span of each call to Store within a traced
	// sign-in (extauth.store.consume, extauth.store.release). Off by
	// default: a memory store's call costs far less than its span, and the
	// store duration histogram measures every call either way; turn it on
	// to see a shared store's round trips in traces.
	TraceStoreCalls bool

	// Store keeps single-use values (default: NewMemoryStore with the
	// default bound and the clock Now, for one instance only; see
	// MemoryStoreOptions for what happens at the bound).
	Store Store `json:"-"`

	// StrictPOST accepts only POST on the authorize routes, so that no link
	// or image can start a sign-in.
	StrictPOST bool
	// PathPrefix is where the routes live, default "/users/auth/" (the
	// specification's). It must start and end with "/". Set it when the
	// routes are mounted elsewhere, as chi's r.Mount("/auth", a) and
	// gorilla/mux's PathPrefix("/auth/").Handler(a) do: PathPrefix
	// "/auth/". Under http.StripPrefix the routes still find their path in
	// the request line. Callback URLs are BaseURL + PathPrefix + ...
	PathPrefix string
	// UnsolicitedReturnTo is where sign-ins that no request of ours
	// started (IdP-initiated SAML, with Options.SAML.AllowIDPInitiated)
	// end: a path on this site. Default: the provider's configured landing
	// page (saml_additional_settings' RelayState), else "/". Never the
	// RelayState the IdP posts.
	UnsolicitedReturnTo string
	// Slugs renames providers in the routes, so that callback URLs an
	// operator already registered keep working: {extauth.Microblog:
	// "twitter"} serves /users/auth/twitter and
	// /users/auth/twitter/callback. The slug is also Identity.Provider,
	// Error.Provider and the provider in logs; Callbacks may be keyed by
	// either name.
	Slugs map[Provider]string
	// TenantOf says which tenant a request is for, "" for the application's
	// own providers (those of cfg itself). Nil: no tenants. An error, or a
	// tenant neither cfg.Tenants nor Tenants knows, answers 404.
	// SubdomainTenants serves <tenant>.example.org.
	TenantOf func(r *http.Request) (string, error)
	// Tenants looks up, at run time, tenants that cfg.Tenants does not
	// hold: those a host keeps in its database.
	Tenants TenantSource `json:"-"`
	// TenantBaseURL returns a tenant's base URL, from which its callback
	// URLs, SAML entity ID defaults and metadata URL derive. Default:
	// BaseURL with the tenant as a subdomain (https://<tenant>.example.org).
	TenantBaseURL func(tenant string) (string, error)
	// MaxTenants bounds the tenants kept built in memory (default 1000);
	// the least recently used go first. TenantIdleTimeout drops a tenant
	// unused that long (default 1 h). Either only costs a rebuild: no
	// network, the metadata and discovery fetched again on first use.
	MaxTenants        int
	TenantIdleTimeout time.Duration

	// TrustedOrigins are other origins ("https://www.example.org") whose
	// pages may start a sign-in: a login button on a sibling subdomain or
	// another site of yours. A start from any other site, sibling
	// subdomains included, is refused as csrf_detected.
	TrustedOrigins []string
	// TransactionTTL is how long a sign-in may take (default and maximum 10
	// minutes).
	TransactionTTL time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time

	// SAML holds the SAML service provider's tunables (clock skew, NameID
	// format, unsolicited responses, ...). Its single-logout hooks, when
	// set, win over Logout's for SAML.
	SAML samlsp.Options

	// Logout connects signing out to the host's sessions for every
	// protocol: ending the provider's session (SAML single logout, OpenID
	// Connect RP-initiated logout) and hearing that the provider ended one
	// (a SAML IdP's LogoutRequest, OpenID Connect back- and front-channel
	// logout).
	Logout LogoutOptions `json:"-"`

	// Extra mounts more providers beside the built-in ones, such as a goth
	// provider adapted with providers.Goth. Their names must not clash.
	// Those that implement providers.EnvSetter receive the same environment
	// as the built-in ones (the bounded HTTP client, their callback URL).
	Extra []Strategy `json:"-"`

	// Socialnet tunes the socialnet provider (Graph API version, scopes,
	// PKCE).
	Socialnet providers.SocialnetOptions

	// OIDC tunes the oidc provider: scopes, client authentication, the ID
	// token algorithm allow-list, trusted audiences, discovery back-off.
	OIDC providers.OIDCOptions
	// SearchOAuth2 tunes the search_oauth2 provider (Google): the same
	// tunables plus hosted domain and access type.
	SearchOAuth2 providers.SearchOAuth2Options
}

// MaxTransactionTTL bounds Options.TransactionTTL.
const MaxTransactionTTL = 10 * time.Minute

// Auth holds everything the routes need. It is safe for concurrent use.
type Auth struct {
	// site is the application's own providers at BaseURL.
	site *site
	// opts are the options New was given, to build tenants with.
	opts          Options
	tenantOf      func(*http.Request) (string, error)
	tenantSource  TenantSource
	tenantBaseURL func(string) (string, error)
	fileTenants   map[string]*Config
	tenants       *tenantCache
	// mocks is extauthtest's mock mode, nil outside a host's tests.
	mocks atomic.Pointer[mock.Set]
	// prefix is Options.PathPrefix, cleaned.
	prefix string
	// slugs maps a provider's own name to the slug it is mounted under.
	slugs      map[string]string
	trusted    map[string]bool
	sealer     *seal.Sealer
	client     *http.Client
	onFailure  FailureFunc
	log        *slog.Logger
	store      siteStore
	ttl        time.Duration
	strictPOST bool
	now        func() time.Time
	// callbackBudget bounds everything one callback does, so several slow
	// provider calls cannot add up past it.
	callbackBudget time.Duration
	logout         LogoutOptions
	logoutReturnTo string
	tel            *telemetry.T
	// adoptable are the providers whose tokens stored before v0.3.0
	// TokenSource adopts (adoptableProviders).
	adoptable map[string]*sync.Once
	// pages renders the pages extauth serves; pageNames are
	// Options.Pages.ProviderNames by slug.
	pages     *pages.Set
	pageNames map[string]string
}

// New validates o and builds one strategy per provider cfg configures
// (Config.Providers), refusing any setting the strategy cannot work with.
// It makes no network request: providers that need discovery or metadata
// fetch them lazily, so the application starts while a provider is down.
//
// New does not run Config.Validate on cfg: give it what LoadConfig or
// ParseConfig returns, or a Config that Validate accepts. A provider with
// only some of its required settings is not configured, so New would leave
// it out without a word. The configurations of tenants are validated and
// built on each tenant's first request instead, and a broken one fails
// that tenant's sign-ins only (CodeMisconfigured); so a configuration from
// InspectConfig whose problems are all its tenants' may be given to New.
func New(cfg *Config, o Options) (*Auth, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	base, err := parseBaseURL(o.BaseURL)
	if err != nil {
		return nil, err
	}
	sealer, err := seal.New(append([][]byte{o.CookieKey}, o.OldCookieKeys...)...)
	if err != nil {
		return nil, fmt.Errorf("extauth: CookieKey: %w", err)
	}
	trusted, err := parseTrustedOrigins(o.TrustedOrigins)
	if err != nil {
		return nil, err
	}
	prefix, err := parsePathPrefix(o.PathPrefix)
	if err != nil {
		return nil, err
	}
	if o.UnsolicitedReturnTo != "" && SafeReturnTo(o.UnsolicitedReturnTo) != o.UnsolicitedReturnTo {
		return nil, errors.New("extauth: Options.UnsolicitedReturnTo must be a path on this site")
	}
	slugs, err := parseSlugs(o.Slugs)
	if err != nil {
		return nil, err
	}
	a := &Auth{
		prefix:     prefix,
		slugs:      slugs,
		trusted:    trusted,
		sealer:     sealer,
		onFailure:  o.OnFailure,
		log:        o.Logger,
		ttl:        o.TransactionTTL,
		strictPOST: o.StrictPOST,
		now:        o.Now,

		logout:         o.Logout,
		logoutReturnTo: logoutReturnTo(o.Logout),
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	if a.now == nil {
		a.now = time.Now
	}
	if a.ttl <= 0 || a.ttl > MaxTransactionTTL {
		a.ttl = MaxTransactionTTL
	}
	if a.pages, a.pageNames, err = newPages(o.Pages, a.slug); err != nil {
		return nil, fmt.Errorf("extauth: %w", err)
	}
	if a.onFailure == nil {
		a.onFailure = a.defaultFailure
	}
	a.client = outbound.NewClient(o.HTTPClient, o.Timeout, o.MaxResponseBytes)
	a.callbackBudget = 3 * outbound.Timeout(a.client)
	hostStore := o.Store
	if hostStore == nil {
		hostStore = NewMemoryStore(MemoryStoreOptions{Now: a.now})
	}
	if _, ok := hostStore.(Releaser); !ok {
		a.log.Warn("extauth: Options.Store cannot release values (no Release method): a callback that fails holds its value until the transaction would have expired, so junk callbacks can fill the store; implement extauth.Releaser")
	}
	a.store = newSiteStore(hostStore, outbound.Timeout(a.client))
	if o.SAML.Federations == nil {
		// The tenants that sign in through one federation share its
		// aggregate: fetched, verified and kept once.
		o.SAML.Federations = &samlsp.Federations{}
	}
	a.opts = o
	if a.tel, err = a.newTelemetry(&o); err != nil {
		return nil, err
	}
	st, problems := a.buildSite("", base, cfg, &o)
	a.site = st
	for p := range o.Callbacks {
		if _, ok := st.strategies[a.slug(string(p))]; !ok && o.TenantOf == nil {
			a.log.Warn("extauth: hook for a provider that is not configured", "provider", string(p))
		}
	}
	if o.TenantOf != nil {
		a.tenantOf, a.tenantSource, a.tenantBaseURL, a.fileTenants = o.TenantOf, o.Tenants, o.TenantBaseURL, cfg.Tenants
		maxTenants, idle := o.MaxTenants, o.TenantIdleTimeout
		if maxTenants <= 0 {
			maxTenants = DefaultMaxTenants
		}
		if idle <= 0 {
			idle = DefaultTenantIdleTimeout
		}
		a.tenants = newTenantCache(a, maxTenants, idle)
	} else if len(cfg.Tenants) > 0 || o.Tenants != nil {
		problems = append(problems, errors.New("extauth: tenants are configured but Options.TenantOf is nil: nothing says which tenant a request is for"))
	}
	if err := errors.Join(problems...); err != nil {
		a.Close()
		return nil, err
	}
	a.adoptable = adoptableProviders(cfg, o.Tenants, a.slug)
	a.observe()
	return a, nil
}

// buildStrategy is the one place that maps a configured built-in provider to
// its strategy.
func buildStrategy(p Provider, cfg *Config, env providers.Env, o *Options) (providers.Strategy, error) {
	switch p {
	case Microblog:
		return providers.NewMicroblog(providers.MicroblogConfig{
			Key:    cfg.Microblog.Key,
			Secret: cfg.Microblog.Secret.Value(),
			Site:   cfg.Microblog.Site,
		}, env)
	case Socialnet:
		return providers.NewSocialnet(providers.SocialnetConfig{
			Key:     cfg.Socialnet.Key,
			Secret:  cfg.Socialnet.Secret.Value(),
			Site:    cfg.Socialnet.Site,
			Options: o.Socialnet,
		}, env)
	case BlogOAuth2:
		return providers.NewBlogOAuth2(providers.BlogOAuth2Config{
			ClientID:     cfg.BlogOAuth2.Key,
			ClientSecret: cfg.BlogOAuth2.Secret.Value(),
			Site:         cfg.BlogOAuth2.Site,
		}, env)
	case SearchOAuth2:
		return providers.NewSearchOAuth2(providers.SearchOAuth2Config{
			ClientID:     cfg.SearchOAuth2.Key,
			ClientSecret: cfg.SearchOAuth2.Secret.Value(),
			Site:         cfg.SearchOAuth2.Site,
			Options:      o.SearchOAuth2,
		}, env)
	case OIDC:
		if cfg.OIDC.choosesProvider() {
			return providers.NewOIDCFederationChooser(cfg.OIDC.strategyConfig(o.OIDC), env)
		}
		return providers.NewOIDC(cfg.OIDC.strategyConfig(o.OIDC), env)
	case SAML:
		c := cfg.SAML
		so := o.SAML
		if c.Additional.RequestOptions != nil {
			so.RequestOptions = c.Additional.RequestOptions
		}
		if c.Additional.AssuranceLevels != nil {
			so.AssuranceLevels = c.Additional.AssuranceLevels
		}
		custom := make([]samlsp.Param, len(c.Additional.Custom))
		for i, p := range c.Additional.Custom {
			custom[i] = samlsp.Param{Name: p.Name, Value: p.Value}
		}
		return samlsp.New(samlsp.Config{
			SPEntityID:           c.SPEntityID,
			IdPMetadataURL:       c.IdPMetadataURL,
			IdPSSOServiceURL:     c.IdPSSOServiceURL,
			RelayState:           c.Additional.RelayState,
			AuthnContext:         c.Additional.AuthnContext,
			CertificatePEM:       c.Additional.Certificate,
			PrivateKeyPEM:        c.Additional.PrivateKey.Value(),
			CertificateNewPEM:    c.Additional.CertificateNew,
			PrivateKeyNewPEM:     c.Additional.PrivateKeyNew.Value(),
			CertificateOldPEM:    c.Additional.CertificateOld,
			PrivateKeyOldPEM:     c.Additional.PrivateKeyOld.Value(),
			LogoutRequestsSigned: c.Additional.Security.LogoutRequestsSigned,
			RefuseCBCEncryption:  c.Additional.Security.RefuseCBCEncryption,
			AllowSHA1:            c.Additional.Security.AllowSHA1,
			NameIDEncrypted:      c.Additional.Security.NameIDEncrypted,

			EnforceIdPCertificateDates: c.Additional.Security.EnforceIdPCertificateDates,
			ResponseBinding:            c.Additional.ResponseBinding,
			Artifact:                   c.Additional.Artifact.Strategy(),
			Custom:                     custom,

			IdPMetadataCertificatePEM: c.Additional.IdPMetadataCertificate,
			MetadataValidFor:          c.Additional.MetadataValidFor,
			MetadataCacheDuration:     c.Additional.MetadataCacheDuration,
			Info:                      c.Additional.SPMetadata.info(),
			Federation: samlsp.FederationConfig{
				MetadataURL:             c.Additional.Federation.MetadataURL,
				MDQURL:                  c.Additional.Federation.MDQURL,
				MDQSHA1:                 c.Additional.Federation.MDQSHA1,
				SigningCertificatePEM:   c.Additional.Federation.SigningCertificate,
				BackingFile:             c.Additional.Federation.BackingFile,
				MaxValidity:             c.Additional.Federation.MaxValidity,
				EntityIDs:               c.Additional.Federation.EntityIDs,
				RegistrationAuthorities: c.Additional.Federation.RegistrationAuthorities,
				EntityCategories:        c.Additional.Federation.EntityCategories,
				DiscoveryURL:            c.Additional.Federation.DiscoveryURL,
			},
		}, env, so)
	}
	return nil, fmt.Errorf("provider %q is not available in this build", p)
}

func parseBaseURL(s string) (*url.URL, error) {
	if s == "" {
		return nil, errors.New("extauth: Options.BaseURL is required")
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("extauth: Options.BaseURL: %w", err)
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, errors.New("extauth: Options.BaseURL must be an absolute http(s) URL without user, query or fragment")
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

func validSlug(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// Providers lists the mounted providers: the configured built-in ones in the
// order of the specification, then the extra ones.
func (a *Auth) Providers() []Provider {
	out := make([]Provider, len(a.site.order))
	for i, n := range a.site.order {
		out[i] = Provider(n)
	}
	return out
}

// ErrNotConfigured is wrapped by the error of an operation on a provider that
// is not configured (or not mounted), such as SAMLMetadata without SAML.
var ErrNotConfigured = errors.New("not configured")

// SAMLMetadata returns the service-provider metadata document of the saml
// provider (entity ID, Assertion Consumer Service, signing and encryption
// certificate when the key pair is configured), for the IdP's administrator.
// It needs no network: the document depends on the configuration and
// BaseURL only. When SAML is not configured, the error wraps
// ErrNotConfigured.
func (a *Auth) SAMLMetadata() ([]byte, error) {
	s, ok := a.site.strategies[a.slug(string(SAML))]
	if !ok {
		return nil, fmt.Errorf("extauth: saml is %w", ErrNotConfigured)
	}
	mp, ok := s.(providers.MetadataPublisher)
	if !ok {
		return nil, fmt.Errorf("extauth: the saml provider (%T) publishes no metadata: %w", s, ErrNotConfigured)
	}
	md, err := mp.Metadata()
	if err != nil {
		return nil, fmt.Errorf("extauth: saml metadata: %w", err)
	}
	return md, nil
}

// Close stops what the strategies run in the background (metadata and
// discovery refreshes). The routes keep answering.
func (a *Auth) Close() error {
	var errs []error
	if a.tenants != nil {
		errs = append(errs, a.tenants.close())
	}
	if a.site != nil {
		errs = append(errs, a.site.close())
	}
	if a.tel != nil {
		errs = append(errs, a.tel.Close())
	}
	return errors.Join(errs...)
}

type ctxKey int

const (
	returnToKey ctxKey = iota
	formatKey
	tenantKey
)

// ReturnTo returns where the browser asked to go after sign-in: a validated
// path relative to the application (never another origin), "/" by default.
// It is set on the request handed to a CallbackFunc.
func ReturnTo(r *http.Request) string {
	if s, ok := r.Context().Value(returnToKey).(string); ok && s != "" {
		return s
	}
	return "/"
}

// Format returns the format suffix of the route that started the sign-in
// ("json"), or "" for none. It is set on the request handed to the hooks.
func Format(r *http.Request) string {
	s, _ := r.Context().Value(formatKey).(string)
	return s
}

func withTx(ctx context.Context, returnTo, format, tenant string) context.Context {
	ctx = context.WithValue(context.WithValue(ctx, returnToKey, returnTo), formatKey, format)
	if tenant != "" {
		ctx = context.WithValue(ctx, tenantKey, tenant)
	}
	return ctx
}
