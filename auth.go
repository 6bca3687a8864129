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
package extauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/extauth/extauth/internal/outbound"
	"github.com/extauth/extauth/internal/seal"
	"github.com/extauth/extauth/internal/store"
	"github.com/extauth/extauth/providers"
	"github.com/extauth/extauth/samlsp"
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
// instance; package redisstore shares one Redis among several.
type Store interface {
	// Consume records key until the given time and reports whether it was
	// new: true the first time, false for every later call before until.
	// It must be atomic across instances. An error refuses the sign-in
	// with provider_unavailable.
	Consume(ctx context.Context, key string, until time.Time) (bool, error)
}

// NewMemoryStore returns a Store for a single instance.
func NewMemoryStore() Store { return store.NewMemory(nil) }

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
	CookieKey []byte
	// OldCookieKeys still open cookies sealed before a key rotation.
	OldCookieKeys [][]byte

	// Callbacks holds the hook of each provider.
	Callbacks map[Provider]CallbackFunc
	// OnSuccess is the hook of providers without an entry in Callbacks.
	OnSuccess CallbackFunc
	// OnFailure answers failed sign-ins; the default writes a short HTML
	// page, or JSON for a .json route.
	OnFailure FailureFunc

	// HTTPClient supplies the transport for outbound requests to providers
	// (a proxy, custom roots, or a test server). Its Timeout, when shorter,
	// wins over Timeout.
	HTTPClient *http.Client
	// Timeout bounds each outbound request (default 10s). A whole callback,
	// which may make several requests, is bounded by three times Timeout.
	Timeout time.Duration
	// MaxResponseBytes bounds each outbound response body (default 1 MiB).
	MaxResponseBytes int64

	// Logger receives diagnostics (default slog.Default()). Nothing secret
	// is ever logged: no code, state, token, secret or assertion.
	Logger *slog.Logger
	// Store keeps single-use values (default: in memory, one instance only).
	Store Store

	// StrictPOST accepts only POST on the authorize routes, so that no link
	// or image can start a sign-in.
	StrictPOST bool
	// TransactionTTL is how long a sign-in may take (default and maximum 10
	// minutes).
	TransactionTTL time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time

	// SAML holds the SAML service provider's tunables (clock skew, NameID
	// format, unsolicited responses, single-logout hooks, ...).
	SAML samlsp.Options

	// Extra mounts more providers beside the built-in ones, such as a goth
	// provider adapted with providers.Goth. Their names must not clash.
	// Those that implement providers.EnvSetter receive the same environment
	// as the built-in ones (the bounded HTTP client, their callback URL).
	Extra []Strategy

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
	base       *url.URL
	secure     bool
	sealer     *seal.Sealer
	strategies map[string]providers.Strategy
	order      []string
	callbacks  map[string]CallbackFunc
	onFailure  FailureFunc
	log        *slog.Logger
	store      Store
	ttl        time.Duration
	strictPOST bool
	now        func() time.Time
	// callbackBudget bounds everything one callback does, so several slow
	// provider calls cannot add up past it.
	callbackBudget time.Duration
}

// New validates cfg and o and builds one strategy per configured provider.
// It makes no network request: providers that need discovery or metadata
// fetch them lazily, so the application starts while a provider is down.
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
	a := &Auth{
		base:       base,
		secure:     base.Scheme == "https",
		sealer:     sealer,
		strategies: make(map[string]providers.Strategy),
		callbacks:  make(map[string]CallbackFunc),
		onFailure:  o.OnFailure,
		log:        o.Logger,
		store:      o.Store,
		ttl:        o.TransactionTTL,
		strictPOST: o.StrictPOST,
		now:        o.Now,
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	if a.now == nil {
		a.now = time.Now
	}
	if a.store == nil {
		a.store = store.NewMemory(a.now)
	}
	if a.ttl <= 0 || a.ttl > MaxTransactionTTL {
		a.ttl = MaxTransactionTTL
	}
	if a.onFailure == nil {
		a.onFailure = defaultFailure
	}
	client := outbound.NewClient(o.HTTPClient, o.Timeout, o.MaxResponseBytes)
	a.callbackBudget = 3 * client.Timeout
	env := func(p string) providers.Env {
		return providers.Env{
			CallbackURL: a.callbackURL(p),
			HTTPClient:  client,
			Logger:      a.log.With("provider", p),
			Store:       a.store,
			Now:         a.now,
		}
	}
	var problems []error
	add := func(s providers.Strategy) {
		name := s.Name()
		if !validSlug(name) {
			problems = append(problems, fmt.Errorf("extauth: provider name %q is not a lowercase slug", name))
			return
		}
		if _, dup := a.strategies[name]; dup {
			problems = append(problems, fmt.Errorf("extauth: provider %q is mounted twice", name))
			return
		}
		a.strategies[name] = s
		a.order = append(a.order, name)
	}
	for _, p := range cfg.Providers() {
		s, err := buildStrategy(p, cfg, env(string(p)), &o)
		if err != nil {
			var pe *providers.Error
			if errors.As(err, &pe) {
				// Already "extauth: <code>: ..."; name the provider once.
				problems = append(problems, asError(err, string(p), CodeMisconfigured))
			} else {
				problems = append(problems, fmt.Errorf("extauth: %s: %w", p, err))
			}
			continue
		}
		add(s)
	}
	for _, s := range o.Extra {
		if s == nil {
			problems = append(problems, errors.New("extauth: Options.Extra holds a nil strategy"))
			continue
		}
		if es, ok := s.(providers.EnvSetter); ok && validSlug(s.Name()) {
			es.SetEnv(env(s.Name()))
		}
		add(s)
	}
	for _, name := range a.order {
		cb := o.Callbacks[Provider(name)]
		if cb == nil {
			cb = o.OnSuccess
		}
		if cb == nil {
			problems = append(problems, fmt.Errorf("extauth: %s: no hook: set Options.Callbacks[%q] or Options.OnSuccess", name, name))
			continue
		}
		a.callbacks[name] = cb
	}
	for p := range o.Callbacks {
		if _, ok := a.strategies[string(p)]; !ok {
			a.log.Warn("extauth: hook for a provider that is not configured", "provider", string(p))
		}
	}
	if err := errors.Join(problems...); err != nil {
		a.Close()
		return nil, err
	}
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
		return providers.NewOIDC(providers.OIDCConfig{
			ClientID:     cfg.OIDC.ClientID,
			ClientSecret: cfg.OIDC.ClientSecret.Value(),
			Issuer:       cfg.OIDC.Issuer,
			Options:      o.OIDC,
		}, env)
	case SAML:
		c := cfg.SAML
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
			LogoutRequestsSigned: c.Additional.Security.LogoutRequestsSigned,
			Custom:               custom,

			IdPMetadataCertificatePEM: c.Additional.IdPMetadataCertificate,
		}, env, o.SAML)
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

func (a *Auth) callbackURL(p string) string {
	return a.base.String() + callbackPath(p)
}

// Providers lists the mounted providers: the configured built-in ones in the
// order of the specification, then the extra ones.
func (a *Auth) Providers() []Provider {
	out := make([]Provider, len(a.order))
	for i, n := range a.order {
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
	s, ok := a.strategies[string(SAML)]
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
	for _, s := range a.strategies {
		if c, ok := s.(io.Closer); ok {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

type ctxKey int

const (
	returnToKey ctxKey = iota
	formatKey
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

func withTx(ctx context.Context, returnTo, format string) context.Context {
	return context.WithValue(context.WithValue(ctx, returnToKey, returnTo), formatKey, format)
}
