package extauth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/extauth/extauth/internal/safepath"
	"github.com/extauth/extauth/internal/telemetry"
	"github.com/extauth/extauth/providers"
)

const (
	// callbackBodyLimit bounds OAuth callback bodies; SAML strategies ask
	// for more through providers.BodyLimiter.
	callbackBodyLimit = 64 << 10
	// maxCookieBytes keeps a transaction cookie under the 4 KB that every
	// browser stores.
	maxCookieBytes = 4000
	// maxLiveTransactions bounds the transaction cookies one browser keeps
	// per provider (several tabs signing in at once).
	maxLiveTransactions = 4
)

// Values of the headers every route sets. Shared, full slices: a handler
// that adds a value gets a copy from append, never writes into these.
var (
	hdrNoStore    = []string{"no-store"}
	hdrNoReferrer = []string{"no-referrer"}
	hdrNoSniff    = []string{"nosniff"}
)

// Route is one route mounted by Mount.
type Route struct {
	Provider Provider
	// Purpose is "authorize" or "callback"; SAML adds "metadata" and
	// "logout", OpenID Connect "logout", "post_logout",
	// "backchannel_logout" and "frontchannel_logout", and oidc "jwks".
	Purpose string
	// Path is the route's path; each also answers with a ".json" suffix.
	Path    string
	Methods []string
	// URL is the absolute URL: for a callback, the one to register with the
	// provider.
	URL string
}

// extraRouter is a strategy that serves more routes under its own prefix
// (SAML: /users/auth/saml/metadata and /users/auth/saml/logout). Each
// handler checks its own methods.
type extraRouter interface {
	ExtraRoutes() map[string]http.Handler
}

// mount is one provider as the routes serve it: its strategy, under its
// slug, on a site.
type mount struct {
	*site
	name string
	s    providers.Strategy
	tel  *telemetry.Provider
}

// Routes lists the mounted routes: two per provider, plus the extra routes
// of strategies that have them, their own and the logout routes (Methods
// nil: the handler decides).
func (a *Auth) Routes() []Route {
	st := a.site
	var out, extra []Route
	for _, name := range st.order {
		out = append(out, st.providerRoutes(name)...)
		purposes := logoutPurposes(st.strategies[name])
		if er, ok := st.strategies[name].(extraRouter); ok {
			for p := range er.ExtraRoutes() {
				if !slices.Contains(purposes, p) {
					purposes = append(purposes, p)
				}
			}
		}
		extra = append(extra, st.extraRoutes(name, purposes)...)
	}
	return append(out, extra...)
}

// RoutesFor lists the routes Mount registers for the built-in providers ps
// when the application is served at baseURL, in the order of Auth.Routes,
// without building any provider: for tools and admin pages that show what to
// register with each provider before the application runs. It refuses a
// baseURL that New would refuse. Options.Routes does the same with a path
// prefix and slugs.
func RoutesFor(baseURL string, ps ...Provider) ([]Route, error) {
	return Options{BaseURL: baseURL}.Routes(ps...)
}

// Routes lists the routes an Auth built with these options mounts for the
// built-in providers ps, as RoutesFor does, under o.PathPrefix and o.Slugs.
// Only BaseURL, PathPrefix and Slugs are read.
func (o Options) Routes(ps ...Provider) ([]Route, error) {
	base, err := parseBaseURL(o.BaseURL)
	if err != nil {
		return nil, err
	}
	prefix, err := parsePathPrefix(o.PathPrefix)
	if err != nil {
		return nil, err
	}
	slugs, err := parseSlugs(o.Slugs)
	if err != nil {
		return nil, err
	}
	l := layout{base: base, prefix: prefix}
	var out, extra []Route
	for _, p := range ps {
		if !validSlug(string(p)) {
			return nil, fmt.Errorf("extauth: provider name %q is not a lowercase slug", p)
		}
		name := string(p)
		if s, ok := slugs[name]; ok {
			name = s
		}
		out = append(out, l.providerRoutes(name)...)
		extra = append(extra, l.extraRoutes(name, builtinExtraRoutes(p))...)
	}
	return append(out, extra...), nil
}

// builtinExtraRoutes names the routes a built-in strategy serves beyond
// authorize and callback (its ExtraRoutes), for RoutesFor, which builds no
// strategy. TestRoutesForMatchesBuiltStrategies holds it to what the
// strategies serve.
func builtinExtraRoutes(p Provider) []string {
	switch p {
	case SAML:
		return []string{"metadata", "logout"}
	case OIDC:
		return []string{purposeLogout, purposePostLogout, purposeBackchannel, purposeFrontchannel, providers.PurposeJWKS}
	case SearchOAuth2:
		return []string{purposeLogout, purposePostLogout, purposeBackchannel, purposeFrontchannel}
	}
	return []string{purposeLogout}
}

// CallbackURL returns the URL to register with provider p as its callback
// (redirect URI, or the SAML Assertion Consumer Service) when the application
// is served at baseURL: baseURL + /users/auth/<p>/callback.
func CallbackURL(baseURL string, p Provider) (string, error) {
	routes, err := RoutesFor(baseURL, p)
	if err != nil {
		return "", err
	}
	return routes[1].URL, nil
}

// extraRoutes lists a strategy's extra routes, sorted by purpose. Their
// handlers check their own methods, so Methods is nil.
func (l layout) extraRoutes(name string, purposes []string) []Route {
	purposes = slices.Sorted(slices.Values(purposes))
	out := make([]Route, len(purposes))
	for i, p := range purposes {
		path := l.extraPath(name, p)
		out[i] = Route{Provider: Provider(name), Purpose: p, Path: path, URL: l.url(path)}
	}
	return out
}

// providerRoutes lists a provider's routes; the callback comes second.
func (l layout) providerRoutes(name string) []Route {
	authorize, callback := l.authorizePath(name), l.callbackPath(name)
	methods := []string{http.MethodGet, http.MethodPost}
	return []Route{
		{Provider: Provider(name), Purpose: "authorize", Path: authorize, Methods: methods, URL: l.url(authorize)},
		{Provider: Provider(name), Purpose: "callback", Path: callback, Methods: slices.Clone(methods), URL: l.url(callback)},
	}
}

// Mount registers the routes on mux under Options.PathPrefix (default
// /users/auth/). More specific patterns the host registers under that
// prefix keep precedence.
func (a *Auth) Mount(mux *http.ServeMux) {
	mux.Handle(a.prefix, a)
}

// AllowCrossSiteCallbacks registers on p, a Go 1.25 http.CrossOriginProtection
// wrapped around the application, the routes that identity providers POST to
// from their own site: the SAML callback (Assertion Consumer Service) and
// its single-logout route. CrossOriginProtection would refuse these
// cross-origin POSTs with 403; extauth checks them itself (signatures, the
// transaction cookie, single use). With tenants, SAML's routes are let
// through for every tenant. Call it once per p, after New.
func (a *Auth) AllowCrossSiteCallbacks(p *http.CrossOriginProtection) {
	st := a.site
	paths := map[string]bool{}
	for _, name := range st.order {
		s := st.strategies[name]
		if !crossSite(s) {
			continue
		}
		paths[st.callbackPath(name)] = true
		if er, ok := s.(extraRouter); ok {
			for purpose := range er.ExtraRoutes() {
				paths[st.extraPath(name, purpose)] = true
			}
		}
	}
	if a.tenants != nil {
		// Tenants are built later, and any of them may have SAML.
		name := a.slug(string(SAML))
		paths[st.callbackPath(name)] = true
		for _, purpose := range builtinExtraRoutes(SAML) {
			paths[st.extraPath(name, purpose)] = true
		}
	}
	for _, path := range slices.Sorted(maps.Keys(paths)) {
		p.AddInsecureBypassPattern("POST " + path)
	}
}

// ServeHTTP serves the routes, for routers other than http.ServeMux: every
// path under the prefix that is not one of them is answered 404.
func (a *Auth) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p, ok := a.routePath(r)
	if !ok {
		a.log.Warn("extauth: request outside the routes' prefix: mount the routes at "+a.prefix+
			" or set Options.PathPrefix to where they are mounted", "path", r.URL.Path, "prefix", a.prefix)
		http.NotFound(w, r)
		return
	}
	rest := p[len(a.prefix):]
	st, err := a.siteFor(r)
	if err != nil {
		if errors.Is(err, ErrUnknownTenant) {
			a.log.Debug("extauth: no such tenant", "host", r.Host, "err", err)
			http.NotFound(w, r)
			return
		}
		// The tenant's lookup or configuration failed: that tenant's
		// sign-ins fail, nobody else's.
		name, _, format, _ := parseRoute(rest)
		e := asError(err, name, CodeProviderUnavailable)
		e.Provider = name
		var te *tenantError
		if errors.As(err, &te) {
			e.Err = te.err
			a.failAt(te.tenant, a.log.With("tenant", te.tenant), w, r, format, e)
			return
		}
		a.fail(w, r, format, e)
		return
	}
	name, purpose, _ := strings.Cut(rest, "/")
	if purpose != "" && purpose != "callback" {
		if er, ok := st.strategies[name].(extraRouter); ok {
			if h := er.ExtraRoutes()[purpose]; h != nil {
				h.ServeHTTP(w, r)
				return
			}
		}
		if h, ok := a.logoutRoute(st, name, purpose); ok {
			h.ServeHTTP(w, r)
			return
		}
	}
	name, callback, format, ok := parseRoute(rest)
	if !ok {
		http.NotFound(w, r)
		return
	}
	m, mocked := a.mockMount(r, st, name, callback)
	if !mocked {
		s, ok := st.strategies[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		m = mount{site: st, name: name, s: s}
	}
	m.tel = st.tel.Lookup(name)
	allowed := "GET, POST"
	if a.strictPOST && !callback {
		allowed = "POST"
	}
	if !(r.Method == http.MethodPost || (r.Method == http.MethodGet && allowed != "POST")) {
		w.Header().Set("Allow", allowed)
		http.Error(w, http.StatusText(http.StatusMethodNotAllowed), http.StatusMethodNotAllowed)
		return
	}
	h := w.Header()
	h["Cache-Control"] = hdrNoStore
	h["Referrer-Policy"] = hdrNoReferrer
	h["X-Content-Type-Options"] = hdrNoSniff
	if ctx, op := m.tel.Start(r.Context(), callback); ctx != r.Context() {
		if op != nil {
			defer op.End()
		}
		r = r.WithContext(ctx)
	}
	if callback {
		a.callback(w, r, m, format)
	} else {
		a.authorize(w, r, m, format)
	}
}

// routePath is the request's path when it lies under the prefix. Under
// http.StripPrefix, r.URL.Path has lost the mount point, but the request
// line still has it.
func (a *Auth) routePath(r *http.Request) (string, bool) {
	if strings.HasPrefix(r.URL.Path, a.prefix) {
		return r.URL.Path, true
	}
	if r.RequestURI != "" {
		if u, err := url.ParseRequestURI(r.RequestURI); err == nil && strings.HasPrefix(u.Path, a.prefix) {
			return u.Path, true
		}
	}
	return "", false
}

// parseRoute splits <p>[/callback][.<format>], the path after the prefix.
// Formats are limited to html and json: anything else is not a route.
func parseRoute(rest string) (name string, callback bool, format string, ok bool) {
	if rest == "" {
		return "", false, "", false
	}
	if i := strings.LastIndexByte(rest, '.'); i >= 0 && !strings.Contains(rest[i:], "/") {
		format = rest[i+1:]
		rest = rest[:i]
		if format != "json" && format != "html" {
			return "", false, "", false
		}
	}
	name, tail, hasTail := strings.Cut(rest, "/")
	if hasTail {
		if tail != "callback" {
			return "", false, "", false
		}
		callback = true
	}
	if !validSlug(name) {
		return "", false, "", false
	}
	return name, callback, format, true
}

func (a *Auth) authorize(w http.ResponseWriter, r *http.Request, m mount, format string) {
	name, s := m.name, m.s
	// ParseForm reads a bounded body (10 MB by net/http); the authorize
	// form is tiny, so bound it much harder.
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := r.ParseForm(); err != nil {
		a.failMount(m, w, r, format, &Error{Code: CodeInvalidResponse, Provider: name,
			Message: "malformed request", Err: err})
		return
	}
	chooser, _ := s.(providers.IdPChooser)
	if chooser != nil && !chooser.ChoosesIdP() {
		chooser = nil
	}
	idp := ""
	if chooser != nil && r.Form.Get("idp") == "" && len(r.Form["op"]) > 0 {
		// An OpenID Federation's providers are chosen by op, as SAML
		// federations' IdPs by idp; the rest of the start reads idp.
		r.Form["idp"], r.Form["op"] = r.Form["op"], nil
	}
	if len(r.Form["idp"]) > 1 {
		a.failMount(m, w, r, format, &Error{Code: CodeInvalidResponse, Provider: name,
			Message: "the identity provider is named more than once", Err: errors.New("the start request has more than one idp field")})
		return
	}
	if chooser != nil {
		// A page to choose the IdP starts nothing: it needs none of the
		// start rules, which apply to the choice it posts.
		if idp = r.Form.Get("idp"); idp == "" {
			returnTo := safeReturnField(r.Form.Get("return_to"))
			verdict, _ := a.startVerdict(r, m)
			carry := startFields(r.Form, verdict == startAllow)
			d := providers.Discovery{Action: m.base.Path + m.authorizePath(name), ReturnTo: returnTo, LastChoice: m.lastChoice(r),
				JSON: format == "json", Return: func() string { return a.discoveryReturn(w, m, carry) },
				Render: func(list providers.DiscoveryList) error { return a.writeDiscovery(w, r, m, format, carry, list) }}
			if r.Form.Get(discoveryField) != "" {
				// Back from the external discovery service without a
				// choice (a passive service that knows none): sending
				// the browser there again would loop.
				d.Return = nil
			}
			if err := chooser.Discover(w, r, d); err != nil {
				a.failMount(m, w, r, format, asError(err, name, CodeProviderUnavailable))
			}
			return
		}
	}
	verdict, why := a.startVerdict(r, m)
	if chooser != nil && verdict != startAllow && m.discoveryReturned(w, r) {
		// The browser comes back from the external discovery service it
		// was sent to: a cross-site navigation, but one this browser
		// started here, as its cookie proves.
		verdict = startAllow
	}
	switch {
	case verdict == startRefuse:
		a.failMount(m, w, r, format, &Error{Code: CodeCSRFDetected, Provider: name,
			Message: "sign-in must start from this site", Err: errors.New("authorize request refused: " + why)})
		return
	case verdict == startConfirm && format == "json":
		a.failMount(m, w, r, format, &Error{Code: CodeCSRFDetected, Provider: name,
			Message: "sign-in must start from this site", Err: errors.New("authorize request without Origin or Sec-Fetch-Site")})
		return
	case verdict == startConfirm:
		a.confirmPage(w, r, m, "", startFields(r.Form, false))
		return
	}
	now := a.now()
	// One read of crypto/rand for the four values: 16 + 3×32 bytes.
	var rnd [112]byte
	rand.Read(rnd[:])
	enc := base64.RawURLEncoding
	tx := &providers.Transaction{
		ID:       enc.EncodeToString(rnd[:16]),
		Provider: name,
		Tenant:   m.tenant,
		State:    enc.EncodeToString(rnd[16:48]),
		Verifier: enc.EncodeToString(rnd[48:80]),
		Nonce:    enc.EncodeToString(rnd[80:112]),
		ReturnTo: SafeReturnTo(r.Form.Get("return_to")),
		Suffix:   format,
		Expires:  now.Add(a.ttl),
		IdP:      idp,
	}
	if e := a.startOptions(r, m, tx); e != nil {
		a.failMount(m, w, r, format, e)
		return
	}
	var target string
	var form url.Values
	var err error
	if ps, ok := s.(providers.PostStarter); chooser != nil {
		target, form, err = chooser.BeginAt(r.Context(), tx)
	} else if ok && ps.StartsWithPost() {
		target, form, err = ps.BeginPost(r.Context(), tx)
	} else {
		target, err = s.Begin(r.Context(), tx)
	}
	if err != nil {
		a.failMount(m, w, r, format, asError(err, name, CodeProviderUnavailable))
		return
	}
	if tx.Binding == "" {
		tx.Binding = tx.State
	}
	cookieName := m.cookieName(tx.Binding)
	value := a.sealer.Seal(cookieName, encodeTransaction(tx))
	if len(cookieName)+len(value) > maxCookieBytes {
		a.failMount(m, w, r, format, &Error{Code: CodeMisconfigured, Provider: name,
			Message: "sign-in state too large", Err: errors.New("transaction cookie exceeds 4000 bytes")})
		return
	}
	a.pruneTransactions(w, r, m)
	m.setTxCookie(w, cookieName, value, int(a.ttl.Seconds()))
	if chooser != nil {
		m.rememberChoice(w, tx.IdP)
	}
	m.tel.Started(r.Context())
	if form != nil {
		if format == "json" {
			writeJSON(w, http.StatusOK, map[string]any{"post_to": target, "form": form})
			return
		}
		a.writeRedirectPage(w, r, m, target, form)
		return
	}
	if format == "json" {
		writeJSON(w, http.StatusOK, map[string]string{"redirect_to": target})
		return
	}
	status := http.StatusFound
	if r.Method == http.MethodPost {
		status = http.StatusSeeOther
	}
	// The target is the provider's absolute URL, built by the strategy: no
	// resolving against the request and no HTML body, which http.Redirect
	// would add for a GET and nobody reads.
	w.Header()["Location"] = []string{target}
	w.WriteHeader(status)
}

func (a *Auth) callback(w http.ResponseWriter, r *http.Request, m mount, format string) {
	name, s := m.name, m.s
	limit := int64(callbackBodyLimit)
	if bl, ok := s.(providers.BodyLimiter); ok && bl.MaxCallbackBytes() > limit {
		limit = bl.MaxCallbackBytes()
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	if err := r.ParseForm(); err != nil {
		a.failMount(m, w, r, format, &Error{Code: CodeInvalidResponse, Provider: name,
			Message: "malformed or oversized callback", Err: err})
		return
	}
	tx, err := a.openTransaction(w, r, m)
	unsolicited := false
	if errors.Is(err, errNoTransaction) && acceptsUnsolicited(s) {
		m.log.Info("extauth: unsolicited callback", "provider", name)
		tx, err, unsolicited = a.unsolicitedTransaction(m), nil, true
	}
	if err != nil {
		// The store being down is ours to fix, not the user's doing.
		var storeErr *Error
		if !errors.As(err, &storeErr) {
			storeErr = &Error{Code: CodeInvalidState, Provider: name,
				Message: "this sign-in is not valid any more; please start again", Err: err}
		}
		a.failMount(m, w, r, format, storeErr)
		return
	}
	if !unsolicited {
		telemetry.FromContext(r.Context()).Began(tx.Expires.Add(-a.ttl))
	}
	if tx.Suffix != "" {
		format = tx.Suffix
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.callbackBudget)
	defer cancel()
	id, err := s.Complete(ctx, r, tx)
	if err == nil && id == nil {
		err = errors.New("strategy returned no identity")
	}
	if err == nil {
		err = checkAccount(tx, id)
	}
	if err != nil {
		if !unsolicited {
			// The answer did not verify: give the transaction back, or
			// junk callbacks to sign-ins of one's own would fill the
			// store. Only a verified answer keeps it, so that one is
			// still accepted once only, and while this callback ran, a
			// second one with the same cookie was refused.
			release := func(ctx context.Context) error { return m.store.release(ctx, txKey(tx)) }
			if rerr := m.tel.Release(r.Context(), release); rerr != nil {
				m.log.Warn("extauth: cannot release a failed callback's transaction", "provider", name, "err", rerr)
			}
		}
		a.failMount(m, w, r, format, asError(err, name, CodeInvalidResponse))
		return
	}
	id.Provider = name
	m.log.Debug("extauth: signed in", "provider", name)
	host := identityFrom(id)
	host.Tenant, host.Unsolicited = m.tenant, unsolicited
	if _, says := s.(providers.OptionTaker); !says && host.AuthTime.IsZero() {
		// The provider cannot say when the user authenticated: the
		// sign-in is the latest time we know of.
		host.AuthTime = a.now()
	}
	if host.Tokens != (Tokens{}) {
		host.Tokens.Tenant = m.tenant
	}
	m.callbacks[name](w, r.WithContext(withTx(r.Context(), tx.ReturnTo, format, m.tenant)), host)
}

// errNoTransaction is openTransaction's error when the callback names no
// transaction cookie of this browser's at all, as opposed to one that is
// present but bad: only then may a callback be unsolicited.
var errNoTransaction = errors.New("no sign-in of this browser's to match")

// openTransaction finds the cookie named by the callback's binding, opens
// it, checks it belongs to this provider, is live, matches the binding, and
// has not been used; then expires it.
func (a *Auth) openTransaction(w http.ResponseWriter, r *http.Request, m mount) (*providers.Transaction, error) {
	binding := m.s.Binding(r)
	if binding == "" {
		return nil, fmt.Errorf("the callback carries no state: %w", errNoTransaction)
	}
	name := m.cookieName(binding)
	c, err := r.Cookie(name)
	if err != nil {
		return nil, fmt.Errorf("no transaction cookie for the callback's state: %w", errNoTransaction)
	}
	// The cookie is spent whatever happens next.
	http.SetCookie(w, m.txCookie(name, "", -1))
	raw, err := a.sealer.Open(name, c.Value)
	if err != nil {
		return nil, errors.New("transaction cookie does not open")
	}
	tx, err := decodeTransaction(raw)
	if err != nil {
		return nil, err
	}
	if tx.Provider != m.name {
		return nil, errors.New("transaction belongs to another provider")
	}
	if tx.Tenant != m.tenant {
		return nil, errors.New("transaction belongs to another tenant")
	}
	if !a.now().Before(tx.Expires) {
		return nil, errors.New("transaction expired")
	}
	if subtle.ConstantTimeCompare([]byte(tx.Binding), []byte(binding)) != 1 {
		return nil, errors.New("state does not match the transaction")
	}
	fresh, err := m.tel.Consume(r.Context(), &m.store, txKey(tx), tx.Expires)
	if err != nil {
		return nil, &Error{Code: CodeProviderUnavailable, Provider: m.name,
			Message: "sign-in is unavailable; please try again shortly",
			Err:     fmt.Errorf("single-use store: %w", err)}
	}
	if !fresh {
		return nil, errors.New("transaction already used")
	}
	return tx, nil
}

// txKey is the single-use key of a transaction.
func txKey(tx *providers.Transaction) string { return "tx:" + tx.ID }

func acceptsUnsolicited(s providers.Strategy) bool {
	u, ok := s.(providers.UnsolicitedCallback)
	return ok && u.AcceptsUnsolicited()
}

// unsolicitedTransaction stands in for the transaction of a callback that no
// sign-in of ours started. Nothing in it comes from the request: in
// particular not the posted RelayState, which for IdP-initiated SAML is
// whatever the IdP, or whoever made the browser post, chose. The sign-in
// ends at Options.UnsolicitedReturnTo, else the provider's configured
// landing page, else "/". Complete sees no RequestID and checks the answer
// as unsolicited; its own replay checks make it single-use.
func (a *Auth) unsolicitedTransaction(m mount) *providers.Transaction {
	returnTo := a.opts.UnsolicitedReturnTo
	if l, ok := m.s.(interface{ LandingPage() string }); ok && returnTo == "" {
		returnTo = l.LandingPage()
	}
	return &providers.Transaction{
		ID:       randomString(16),
		Provider: m.name,
		Tenant:   m.tenant,
		ReturnTo: SafeReturnTo(returnTo),
		Expires:  a.now().Add(a.ttl),
	}
}

// cookieName derives the per-transaction cookie name from the binding, so a
// browser can run several sign-ins at once and the callback finds its own
// without trying each.
func (m mount) cookieName(binding string) string {
	sum := sha256.Sum256([]byte(binding))
	return m.cookieStem() + base64.RawURLEncoding.EncodeToString(sum[:9])
}

// cookieStem starts the names of a provider's transaction cookies: with the
// tenant's name too, so that tenants on one host never prune or read each
// other's.
func (m mount) cookieStem() string {
	if m.tenant != "" {
		return m.cookiePrefix() + m.tenant + "." + m.name + "_"
	}
	return m.cookiePrefix() + m.name + "_"
}

func (m mount) cookiePrefix() string {
	switch {
	case !m.secure:
		return "extauth_"
	case crossSite(m.s):
		// __Host- would demand Path=/; this cookie is scoped to its callback.
		return "__Secure-extauth_"
	default:
		return "__Host-extauth_"
	}
}

func crossSite(s providers.Strategy) bool {
	cs, ok := s.(providers.CrossSiteCallback)
	return ok && cs.CrossSiteCallback()
}

// setTxCookie adds the Set-Cookie header of txCookie without going through
// http.Cookie's sanitising String: the name is ours and the value base64url.
func (m mount) setTxCookie(w http.ResponseWriter, name, value string, maxAge int) {
	path, sameSite := "/", "Lax"
	if crossSite(m.s) && m.secure {
		path, sameSite = m.base.Path+m.callbackPath(m.name), "None"
	}
	var b strings.Builder
	b.Grow(len(name) + len(value) + len(path) + 64)
	b.WriteString(name)
	b.WriteByte('=')
	b.WriteString(value)
	b.WriteString("; Path=")
	b.WriteString(path)
	b.WriteString("; Max-Age=")
	b.WriteString(strconv.Itoa(max(maxAge, 0)))
	b.WriteString("; HttpOnly")
	if m.secure {
		b.WriteString("; Secure")
	}
	b.WriteString("; SameSite=")
	b.WriteString(sameSite)
	w.Header()["Set-Cookie"] = append(w.Header()["Set-Cookie"], b.String())
}

func (m mount) txCookie(name, value string, maxAge int) *http.Cookie {
	c := &http.Cookie{
		Name:     name,
		Value:    value,
		Path:     "/",
		MaxAge:   maxAge,
		HttpOnly: true,
		Secure:   m.secure,
		SameSite: http.SameSiteLaxMode,
	}
	if crossSite(m.s) && m.secure {
		// The IdP POSTs the callback cross-site: Lax cookies would not come
		// along. Narrow the cookie to that one path instead.
		c.Path = m.base.Path + m.callbackPath(m.name)
		c.SameSite = http.SameSiteNoneMode
	}
	return c
}

// pruneTransactions expires this provider's transaction cookies that no
// longer open or have expired, and the oldest past maxLiveTransactions.
func (a *Auth) pruneTransactions(w http.ResponseWriter, r *http.Request, m mount) {
	prefix := m.cookieStem()
	if !slices.ContainsFunc(r.Header["Cookie"], func(h string) bool { return strings.Contains(h, prefix) }) {
		return
	}
	type live struct {
		name    string
		expires int64
	}
	var alive []live
	now := a.now()
	for _, c := range r.Cookies() {
		if !strings.HasPrefix(c.Name, prefix) {
			continue
		}
		raw, err := a.sealer.Open(c.Name, c.Value)
		var tx *providers.Transaction
		if err == nil {
			tx, err = decodeTransaction(raw)
		}
		if err != nil || !now.Before(tx.Expires) {
			http.SetCookie(w, m.txCookie(c.Name, "", -1))
			continue
		}
		alive = append(alive, live{c.Name, tx.Expires.UnixNano()})
	}
	if len(alive) < maxLiveTransactions {
		return
	}
	sort.Slice(alive, func(i, j int) bool { return alive[i].expires < alive[j].expires })
	for _, l := range alive[:len(alive)-maxLiveTransactions+1] {
		http.SetCookie(w, m.txCookie(l.name, "", -1))
	}
}

// SafeReturnTo returns s when it is a path on this application, and "/"
// otherwise: it refuses absolute and scheme-relative URLs, backslashes and
// control characters, and any path that would become one of these once
// decoded, however many times, and with tabs, newlines and spaces removed
// (/%2F%2Fevil, /%09/evil.com, /%2509/evil.com all become "/").
func SafeReturnTo(s string) string {
	if p, ok := safepath.Path(s); ok {
		return p
	}
	return "/"
}

func randomString(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (a *Auth) fail(w http.ResponseWriter, r *http.Request, format string, err *Error) {
	a.failOn(a.site, w, r, format, err)
}

// failOn answers a failure on st, logging it with st's tenant and
// counting it at st's provider: st was built, so its tenant is no
// unknown one (failAt).
func (a *Auth) failOn(st *site, w http.ResponseWriter, r *http.Request, format string, err *Error) {
	st.tel.Lookup(err.Provider).Failed(r.Context(), string(err.Code))
	a.answerFailure(st.tenant, st.log, w, r, format, err)
}

// failMount answers a failure of a request to m's authorize or callback
// route, and counts it at m's provider: an authorize request has no
// operation in its context to carry it (telemetry.Provider.Start).
func (a *Auth) failMount(m mount, w http.ResponseWriter, r *http.Request, format string, err *Error) {
	m.tel.Failed(r.Context(), string(err.Code))
	a.answerFailure(m.site.tenant, m.site.log, w, r, format, err)
}

// failAt answers a failure at tenant, also one whose site could not be
// built, logging it with log.
func (a *Auth) failAt(tenant string, log *slog.Logger, w http.ResponseWriter, r *http.Request, format string, err *Error) {
	a.tel.Failed(r.Context(), tenant, err.Provider, string(err.Code))
	a.answerFailure(tenant, log, w, r, format, err)
}

// answerFailure logs a failure at tenant with log and hands it to the
// host's OnFailure.
func (a *Auth) answerFailure(tenant string, log *slog.Logger, w http.ResponseWriter, r *http.Request, format string, err *Error) {
	log.Warn("extauth: sign-in failed", "provider", err.Provider, "code", string(err.Code), "err", err.Err)
	a.onFailure(w, r.WithContext(withTx(r.Context(), "", format, tenant)), err)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}

// lastChoiceMaxAge is how long a browser remembers the IdP it chose.
const lastChoiceMaxAge = 180 * 24 * 60 * 60

// choiceCookieName names the cookie that remembers the IdP this browser
// last chose at a provider that lets users choose one.
// Its name does not start with the stem of the transaction cookies, which
// pruneTransactions expires when they do not open.
func (m mount) choiceCookieName() string { return m.idpCookieName("idpchoice_") }

// idpCookieName names a cookie of the IdP choice: kind, then the tenant
// and the provider.
func (m mount) idpCookieName(kind string) string {
	prefix := "extauth_"
	if m.secure {
		prefix = "__Host-extauth_"
	}
	if m.tenant != "" {
		return prefix + kind + m.tenant + "." + m.name
	}
	return prefix + kind + m.name
}

// rememberChoice sets the cookie of the IdP a sign-in started at, for the
// discovery page to show it first next time. It is no secret and grants
// nothing: the page only looks it up among the IdPs it lists.
func (m mount) rememberChoice(w http.ResponseWriter, idp string) {
	http.SetCookie(w, &http.Cookie{Name: m.choiceCookieName(), Value: base64.RawURLEncoding.EncodeToString([]byte(idp)),
		Path: "/", MaxAge: lastChoiceMaxAge, HttpOnly: true, Secure: m.secure, SameSite: http.SameSiteLaxMode})
}

// lastChoice reads the cookie rememberChoice set, "" when there is none.
func (m mount) lastChoice(r *http.Request) string {
	c, err := r.Cookie(m.choiceCookieName())
	if err != nil || len(c.Value) > 2048 {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil {
		return ""
	}
	return string(b)
}

// safeReturnField is return_to as a form field carries it on: a path of
// this site, "" for none or for the default.
func safeReturnField(s string) string {
	if p := SafeReturnTo(s); p != "/" {
		return p
	}
	return ""
}

// discoveryField carries, through an external discovery service and back,
// the handle of the cookie discoveryReturn sets.
const discoveryField = "ds"

// discoveryCookieName names the cookie of a browser's round trip to an
// external discovery service.
func (m mount) discoveryCookieName() string { return m.idpCookieName("idpds_") }

// discoveryReturn arms a round trip to an external discovery service: a
// random handle, in a cookie the service's cross-site return carries
// (SameSite=Lax, a top-level GET) and in the return URL it is given, which
// is the authorize route's absolute URL.
func (a *Auth) discoveryReturn(w http.ResponseWriter, m mount, carry url.Values) string {
	handle := randomString(16)
	http.SetCookie(w, &http.Cookie{Name: m.discoveryCookieName(), Value: handle, Path: "/", MaxAge: int(a.ttl.Seconds()),
		HttpOnly: true, Secure: m.secure, SameSite: http.SameSiteLaxMode})
	q := url.Values{discoveryField: {handle}}
	for k, v := range carry {
		q[k] = v
	}
	return m.url(m.authorizePath(m.name)) + "?" + q.Encode()
}

// discoveryReturned reports whether r is this browser's return from the
// external discovery service it was sent to (its handle matches its
// cookie), and spends the cookie.
func (m mount) discoveryReturned(w http.ResponseWriter, r *http.Request) bool {
	handle := r.Form.Get(discoveryField)
	if handle == "" || r.Method != http.MethodGet {
		return false
	}
	c, err := r.Cookie(m.discoveryCookieName())
	if err != nil || c.Value == "" {
		return false
	}
	http.SetCookie(w, &http.Cookie{Name: m.discoveryCookieName(), Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: m.secure, SameSite: http.SameSiteLaxMode})
	return subtle.ConstantTimeCompare([]byte(handle), []byte(c.Value)) == 1
}
