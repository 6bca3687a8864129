package extauth

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/extauth/extauth/internal/redact"
	"github.com/extauth/extauth/providers"
	"github.com/extauth/extauth/samlsp"
)

// LogoutOptions connect signing out to the host's sessions, whatever the
// protocol: one set of hooks serves SAML single logout and OpenID Connect
// RP-initiated, back-channel and front-channel logout.
type LogoutOptions struct {
	// Session ends the host's session of the signed-in user of r and
	// returns its provider session, for the logout route of provider p
	// (/users/auth/<p>/logout, which every provider has) to end at the
	// provider: typically what Identity.LogoutSession returned at sign-in,
	// kept with the host's session. Without it, when it reports none, or
	// for a provider without a logout of its own, the logout route signs
	// out locally only. The route runs it only for a start the sign-in
	// rules let through. Hosts that send the browser to the provider
	// themselves call Auth.LogoutURL instead.
	Session func(r *http.Request, p Provider) (LogoutSession, bool)
	// OnProviderLogout ends the host's sessions that a provider says have
	// ended: a SAML IdP's LogoutRequest, an OpenID Connect back-channel
	// logout token or front-channel logout request, each verified first.
	// An error is reported to the provider as a failed logout.
	OnProviderLogout func(ctx context.Context, e LogoutEvent) error
	// ReturnTo is the path on this application where the browser lands
	// after signing out at the provider (or locally, when the provider
	// cannot): "/" by default. The logout route's return_to parameter
	// overrides it for one sign-out.
	ReturnTo string
	// Done answers the browser when a sign-out ends: err is nil when the
	// provider confirmed it (or there was nothing to do at the provider),
	// an *Error when the confirmation was not valid or the start was
	// refused (csrf_detected, Session not run). ReturnTo(r) is where
	// it should land. Without it the browser is redirected there, or gets
	// a short error page.
	Done func(w http.ResponseWriter, r *http.Request, err *Error)
}

// LogoutSession names a provider's session of a signed-in user: what
// ending it at the provider needs. Identity.LogoutSession returns it at
// sign-in. It prints, logs and marshals with IDToken redacted: keep its
// fields, not its JSON.
type LogoutSession struct {
	// IDToken is the OpenID Connect ID token of the sign-in, sent to the
	// provider as id_token_hint.
	IDToken string `redact:"secret"`
	// NameID, NameIDFormat and SessionIndex name a SAML session;
	// NameQualifier, SPNameQualifier and SPProvidedID are the NameID's
	// other attributes as the IdP sent them (Identity.SAML's), "" when it
	// sent none: the LogoutRequest carries the NameID exactly so.
	NameID          string
	NameIDFormat    string
	NameQualifier   string
	SPNameQualifier string
	SPProvidedID    string
	// NameIDEncrypted (Identity.SAML's) makes the LogoutRequest carry the
	// NameID as an EncryptedID, as the IdP sent it.
	NameIDEncrypted bool
	SessionIndex    string
	// IdP is the SAML IdP the session is at (Identity.SAML's IdP): in a
	// federation, the one the LogoutRequest goes to.
	IdP string
}

// LogoutSession returns what ending this sign-in's session at the provider
// needs, for the host to keep beside its own session.
func (id *Identity) LogoutSession() LogoutSession {
	s := LogoutSession{IDToken: id.Tokens.IDToken}
	if id.SAML != nil {
		s.NameID, s.NameIDFormat, s.SessionIndex = id.SAML.NameID, id.SAML.NameIDFormat, id.SAML.SessionIndex
		s.NameQualifier, s.SPNameQualifier, s.SPProvidedID = id.SAML.NameQualifier, id.SAML.SPNameQualifier, id.SAML.SPProvidedID
		s.NameIDEncrypted = id.SAML.NameIDEncrypted
		s.IdP = id.SAML.IdP
	}
	return s
}

// Format prints the session with its ID token redacted.
func (s LogoutSession) Format(f fmt.State, verb rune) { redact.Format(f, verb, s) }

// LogValue makes slog print the session with its ID token redacted.
func (s LogoutSession) LogValue() slog.Value { return redact.LogValue(s) }

// MarshalJSON writes the session with its ID token redacted.
func (s LogoutSession) MarshalJSON() ([]byte, error) { return redact.MarshalJSON(s) }

// MarshalYAML writes the session with its ID token redacted.
func (s LogoutSession) MarshalYAML() (any, error) { return redact.MarshalYAML(s) }

// LogoutChannel says how a provider told the application of a logout.
type LogoutChannel string

// The channels of a LogoutEvent.
const (
	// LogoutBackChannel: an OpenID Connect logout token the provider
	// posted to /users/auth/<p>/backchannel_logout.
	LogoutBackChannel LogoutChannel = "backchannel"
	// LogoutFrontChannel: a front-channel logout request the provider had
	// the browser make to /users/auth/<p>/frontchannel_logout.
	LogoutFrontChannel LogoutChannel = "frontchannel"
	// LogoutSAMLRequest: a SAML IdP's LogoutRequest to
	// /users/auth/saml/logout.
	LogoutSAMLRequest LogoutChannel = "saml"
)

// LogoutEvent is a provider's verified word that a user's sessions at this
// application must end: every session of Subject, or the one session
// Session names, or that session of that subject.
type LogoutEvent struct {
	// Tenant is the tenant whose provider sent the logout, "" for the
	// application's own providers.
	Tenant   string
	Provider Provider
	// Subject is the user at the provider: the OpenID Connect sub (the
	// Identity's UID) or the SAML NameID (Identity.SAML.NameID). Empty
	// when the provider named only the session.
	Subject string
	// Session is the provider's session: the OpenID Connect sid or the
	// SAML SessionIndex, as Identity.SessionID gave it at sign-in. Empty
	// when the provider named only the user: end all of Subject's.
	Session string
	// NameIDFormat is the SAML NameID's format.
	NameIDFormat string
	// IdP is the entity ID of the SAML IdP that sent the logout: in a
	// federation, Subject is a user of that IdP.
	IdP string
	// Issuer is the OpenID Connect issuer that sent the logout, as the
	// sign-in's Tokens.Issuer recorded it: where it varies (Entra ID's
	// multi-tenant authorities, an OpenID Federation's providers),
	// Subject is a user of that issuer. Match sessions by both.
	Issuer  string
	Channel LogoutChannel
}

// The purposes of the logout routes the routes serve for strategies that
// speak OpenID Connect logout.
const (
	purposeLogout       = "logout"
	purposePostLogout   = "post_logout"
	purposeBackchannel  = "backchannel_logout"
	purposeFrontchannel = "frontchannel_logout"
)

// logoutPurposes lists the logout routes served for s: the start of a
// sign-out for every provider (local only for those without a logout of
// their own, so that a host writes one sign-out button for all), the
// return from the provider for a SessionEnder, the back- and front-channel
// routes for a LogoutReceiver.
func logoutPurposes(s providers.Strategy) []string {
	out := []string{purposeLogout}
	if _, ok := s.(providers.SessionEnder); ok {
		out = append(out, purposePostLogout)
	}
	if _, ok := s.(providers.LogoutReceiver); ok {
		out = append(out, purposeBackchannel, purposeFrontchannel)
	}
	return out
}

// logoutRoute returns the handler of <prefix><name>/<purpose> on st when it
// is one of the logout routes of the strategy mounted there.
func (a *Auth) logoutRoute(st *site, name, purpose string) (http.Handler, bool) {
	s, ok := st.strategies[name]
	if !ok {
		return nil, false
	}
	m := mount{site: st, name: name, s: s}
	_, isEnder := s.(providers.SessionEnder)
	recv, isRecv := s.(providers.LogoutReceiver)
	switch {
	case purpose == purposeLogout:
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { a.serveLogout(w, r, m) }), true
	case purpose == purposePostLogout && isEnder:
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { a.servePostLogout(w, r, m) }), true
	case purpose == purposeBackchannel && isRecv:
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { a.serveBackchannel(w, r, m, recv) }), true
	case purpose == purposeFrontchannel && isRecv:
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { a.serveFrontchannel(w, r, m, recv) }), true
	}
	return nil, false
}

// LogoutURL returns where to send the browser to end the provider's
// session s of provider p, for hosts that redirect themselves after ending
// their own session: the provider's end_session_endpoint (OpenID Connect,
// with id_token_hint and a state that w now binds to the browser in a
// cookie, checked when the provider sends the browser back to
// <prefix><p>/post_logout) or the IdP's single logout service (SAML). The
// provider is that of r's tenant. When the provider cannot end its session
// (no such endpoint, or a protocol without logout) it returns
// LogoutOptions.ReturnTo: a path on this application, the sign-out then
// being local only, as a log line says. The error wraps ErrNotConfigured
// for a provider that is not mounted.
func (a *Auth) LogoutURL(w http.ResponseWriter, r *http.Request, p Provider, s LogoutSession) (string, error) {
	st, err := a.siteFor(r)
	if err != nil {
		return "", fmt.Errorf("extauth: %s: %w", p, err)
	}
	name := a.slug(string(p))
	strat, ok := st.strategies[name]
	if !ok {
		return "", fmt.Errorf("extauth: %s is %w", p, ErrNotConfigured)
	}
	u, _, err := a.providerLogoutURL(w, r, mount{site: st, name: name, s: strat}, s, a.logoutReturnTo)
	if err != nil {
		return "", err
	}
	return u, nil
}

// providerLogoutURL is LogoutURL for a mounted strategy; local reports that
// the provider cannot end its session and u is returnTo.
func (a *Auth) providerLogoutURL(w http.ResponseWriter, r *http.Request, m mount, s LogoutSession, returnTo string) (u string, local bool, err error) {
	switch st := m.s.(type) {
	case *samlsp.SP:
		u, err = st.LogoutURL(r.Context(), samlLogoutSession(s))
	case providers.SessionEnder:
		state := randomString(32)
		u, err = st.EndSessionURL(r.Context(), providers.LogoutSession(s), state, m.url(m.extraPath(m.name, purposePostLogout)))
		if err == nil {
			a.setLogoutCookie(w, m, state, returnTo)
		}
	default:
		err = providers.ErrNoProviderLogout
	}
	if errors.Is(err, providers.ErrNoProviderLogout) {
		m.log.Info("extauth: the provider offers no logout endpoint; signed out locally only", "provider", m.name)
		return returnTo, true, nil
	}
	if err != nil {
		return "", false, asError(err, m.name, CodeProviderUnavailable)
	}
	return u, false, nil
}

// logoutCookieName names the cookie that binds a sign-out's state to the
// browser. "extauth-logout_" never starts a transaction cookie's name,
// which is "extauth_<provider>_...".
func (m mount) logoutCookieName() string {
	name := "extauth-logout_" + m.name
	if m.tenant != "" {
		name = "extauth-logout_" + m.tenant + "." + m.name
	}
	if m.secure {
		return "__Host-" + name
	}
	return name
}

func (m mount) logoutCookie(value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: m.logoutCookieName(), Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: m.secure, SameSite: http.SameSiteLaxMode}
}

// setLogoutCookie seals the sign-out's state and return path into a
// short-lived cookie, as a sign-in's transaction is sealed: the provider
// returns the browser with a top-level GET, which brings a Lax cookie.
func (a *Auth) setLogoutCookie(w http.ResponseWriter, m mount, state, returnTo string) {
	tx := &providers.Transaction{ID: randomString(16), Provider: m.name, Tenant: m.tenant, State: state,
		ReturnTo: returnTo, Expires: a.now().Add(a.ttl)}
	c := m.logoutCookie("", int(a.ttl.Seconds()))
	c.Value = a.sealer.Seal(c.Name, encodeTransaction(tx))
	http.SetCookie(w, c)
}

func setNoStore(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
}

func allowMethods(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m {
			return true
		}
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	http.Error(w, http.StatusText(http.StatusMethodNotAllowed), http.StatusMethodNotAllowed)
	return false
}

// serveLogout starts a sign-out: the host ends its session in
// LogoutOptions.Session, which names the provider session to end at the
// provider, if any. It has a sign-in's start rules (the same table, the
// same click-to-continue page, StrictPOST): whatever starts it runs the
// host's hook and moves the browser, so another site must not be able to.
func (a *Auth) serveLogout(w http.ResponseWriter, r *http.Request, m mount) {
	setNoStore(w)
	methods := []string{http.MethodGet, http.MethodPost}
	if a.strictPOST {
		methods = methods[1:]
	}
	if !allowMethods(w, r, methods...) {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "malformed request", http.StatusBadRequest)
		return
	}
	returnTo := a.logoutReturnTo
	if rt := r.Form.Get("return_to"); rt != "" {
		returnTo = SafeReturnTo(rt)
	}
	switch verdict, why := a.startVerdict(r, m); verdict {
	case startRefuse:
		a.logoutDone(w, r, m, returnTo, &Error{Code: CodeCSRFDetected, Provider: m.name,
			Message: "sign-out must start from this site", Err: errors.New("sign-out refused: " + why)})
		return
	case startConfirm:
		carry := url.Values{}
		if rt := safeReturnField(r.Form.Get("return_to")); rt != "" {
			carry.Set("return_to", rt)
		}
		a.confirmPage(w, r, m, purposeLogout, carry)
		return
	}
	var sess LogoutSession
	ok := false
	if a.logout.Session != nil {
		sess, ok = a.logout.Session(r.WithContext(withTx(r.Context(), returnTo, "", m.tenant)), Provider(m.name))
	}
	if !ok {
		m.log.Info("extauth: no provider session to end; signed out locally only", "provider", m.name)
		a.logoutDone(w, r, m, returnTo, nil)
		return
	}
	u, local, err := a.providerLogoutURL(w, r, m, sess, returnTo)
	if err != nil || local {
		a.logoutDone(w, r, m, returnTo, asErrorOrNil(err, m.name))
		return
	}
	http.Redirect(w, r, u, http.StatusSeeOther)
}

func asErrorOrNil(err error, provider string) *Error {
	if err == nil {
		return nil
	}
	return asError(err, provider, CodeProviderUnavailable)
}

// servePostLogout is the post_logout_redirect_uri: the provider sends the
// browser back here with the state of a sign-out this browser started.
func (a *Auth) servePostLogout(w http.ResponseWriter, r *http.Request, m mount) {
	setNoStore(w)
	if !allowMethods(w, r, http.MethodGet) {
		return
	}
	returnTo, err := a.openLogoutCookie(w, r, m)
	if err != nil {
		a.logoutDone(w, r, m, a.logoutReturnTo, &Error{Code: CodeInvalidState, Provider: m.name,
			Message: "this sign-out cannot be confirmed", Err: err})
		return
	}
	m.log.Info("extauth: signed out at the provider", "provider", m.name)
	a.logoutDone(w, r, m, returnTo, nil)
}

// openLogoutCookie checks the returning state against the sealed cookie,
// spends both, and returns where the sign-out lands.
func (a *Auth) openLogoutCookie(w http.ResponseWriter, r *http.Request, m mount) (string, error) {
	state := r.URL.Query().Get("state")
	c, err := r.Cookie(m.logoutCookieName())
	if err != nil {
		return "", errors.New("no sign-out of this browser's is under way")
	}
	http.SetCookie(w, m.logoutCookie("", -1))
	raw, err := a.sealer.Open(c.Name, c.Value)
	if err != nil {
		return "", errors.New("sign-out cookie does not open")
	}
	tx, err := decodeTransaction(raw)
	switch {
	case err != nil:
		return "", err
	case tx.Provider != m.name || tx.Tenant != m.tenant:
		return "", errors.New("sign-out belongs to another provider")
	case !a.now().Before(tx.Expires):
		return "", errors.New("sign-out expired")
	case state == "" || subtle.ConstantTimeCompare([]byte(tx.State), []byte(state)) != 1:
		return "", errors.New("state does not match the sign-out")
	}
	fresh, err := m.store.Consume(r.Context(), "logout:"+tx.ID, tx.Expires)
	if err != nil {
		return "", fmt.Errorf("single-use store: %w", err)
	}
	if !fresh {
		return "", errors.New("sign-out already confirmed")
	}
	return tx.ReturnTo, nil
}

// logoutDone answers the end of a sign-out with the host's Done, or the
// default: a redirect to returnTo, or a short error page.
func (a *Auth) logoutDone(w http.ResponseWriter, r *http.Request, m mount, returnTo string, err *Error) {
	if err != nil {
		m.log.Warn("extauth: sign-out failed", "provider", err.Provider, "code", string(err.Code), "err", err.Err)
	}
	a.finishLogout(a.logout.Done, w, r, m.tenant, returnTo, err)
}

func (a *Auth) finishLogout(done func(http.ResponseWriter, *http.Request, *Error), w http.ResponseWriter, r *http.Request, tenant, returnTo string, err *Error) {
	r = r.WithContext(withTx(r.Context(), returnTo, "", tenant))
	switch {
	case done != nil:
		done(w, r, err)
	case err == nil:
		http.Redirect(w, r, returnTo, http.StatusSeeOther)
	default:
		st, serr := a.siteNamed(r.Context(), tenant)
		if serr != nil {
			st = nil
		}
		a.writeFailure(w, a.printer(r), st, err, "logout_failure")
	}
}

// serveBackchannel receives an OpenID Connect back-channel logout: the
// provider posts a logout token, answered 200 once the host has ended the
// sessions it names and 400 otherwise (Back-Channel Logout 1.0, 2.8), never
// cached.
func (a *Auth) serveBackchannel(w http.ResponseWriter, r *http.Request, m mount, recv providers.LogoutReceiver) {
	w.Header().Set("Cache-Control", "no-store")
	if !allowMethods(w, r, http.MethodPost) {
		return
	}
	refuse := func(err *Error) {
		m.log.Warn("extauth: back-channel logout refused", "provider", m.name, "code", string(err.Code), "err", err.Err)
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request", "error_description": err.Message})
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		refuse(&Error{Code: CodeInvalidResponse, Provider: m.name, Message: "malformed request", Err: err})
		return
	}
	tokens := r.PostForm["logout_token"]
	if len(tokens) != 1 {
		refuse(&Error{Code: CodeInvalidResponse, Provider: m.name, Message: "the request must carry one logout_token",
			Err: fmt.Errorf("%d logout_token parameters in the body", len(tokens))})
		return
	}
	if a.logout.OnProviderLogout == nil {
		refuse(&Error{Code: CodeMisconfigured, Provider: m.name, Message: "this application does not end sessions on the provider's word",
			Err: errors.New("Options.Logout.OnProviderLogout is not set")})
		return
	}
	ev, err := recv.BackchannelLogout(r.Context(), tokens[0])
	if err != nil {
		refuse(asError(err, m.name, CodeInvalidResponse))
		return
	}
	if err := a.providerLogout(r.Context(), m, ev, LogoutBackChannel); err != nil {
		refuse(err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// serveFrontchannel receives an OpenID Connect front-channel logout: the
// provider has the browser load this URL (in a frame) with iss and sid.
func (a *Auth) serveFrontchannel(w http.ResponseWriter, r *http.Request, m mount, recv providers.LogoutReceiver) {
	h := w.Header()
	h.Set("Cache-Control", "no-cache, no-store")
	h.Set("Pragma", "no-cache")
	if !allowMethods(w, r, http.MethodGet) {
		return
	}
	refuse := func(err *Error) {
		m.log.Warn("extauth: front-channel logout refused", "provider", m.name, "code", string(err.Code), "err", err.Err)
		http.Error(w, err.Message, http.StatusBadRequest)
	}
	if a.logout.OnProviderLogout == nil {
		refuse(&Error{Code: CodeMisconfigured, Provider: m.name, Message: "this application does not end sessions on the provider's word",
			Err: errors.New("Options.Logout.OnProviderLogout is not set")})
		return
	}
	q := r.URL.Query()
	ev, err := recv.FrontchannelLogout(r.Context(), q.Get("iss"), q.Get("sid"))
	if err != nil {
		refuse(asError(err, m.name, CodeInvalidResponse))
		return
	}
	if err := a.providerLogout(r.Context(), m, ev, LogoutFrontChannel); err != nil {
		refuse(err)
		return
	}
	h.Set("Content-Type", "text/html; charset=utf-8")
	w.Write([]byte("<!doctype html><title>Signed out</title>\n"))
}

// providerLogout hands a verified logout to the host.
func (a *Auth) providerLogout(ctx context.Context, m mount, ev providers.LogoutEvent, ch LogoutChannel) *Error {
	err := a.logout.OnProviderLogout(ctx, LogoutEvent{Tenant: m.tenant, Provider: Provider(m.name), Subject: ev.Subject,
		Session: ev.Session, NameIDFormat: ev.NameIDFormat, Issuer: ev.Issuer, Channel: ch})
	if err != nil {
		return &Error{Code: CodeProviderUnavailable, Provider: m.name, Message: "the application could not end the sessions", Err: err}
	}
	m.log.Info("extauth: signed out on the provider's word", "provider", m.name, "channel", string(ch))
	return nil
}

// withLogout is o with Options.Logout adapted into the SAML strategy's hooks
// for the provider mounted as slug on st.
func (a *Auth) withLogout(o *Options, st *site, slug string) *Options {
	so := *o
	so.SAML = a.samlOptions(o, st, slug)
	return &so
}

// samlOptions adapts Options.Logout into the SAML strategy's own hooks for
// the provider mounted as slug on st, leaving any hook set directly in
// Options.SAML.Logout in place.
func (a *Auth) samlOptions(o *Options, st *site, slug string) samlsp.Options {
	so, lo, tenant := o.SAML, o.Logout, st.tenant
	if so.Logout.Start == nil && so.Logout.Session == nil {
		// The SAML logout URL is also where a sign-out starts: the same
		// start rules and hooks (Options.Logout) as every other
		// provider's logout route. A host that set the SAML hooks itself
		// keeps the SP's own start, which takes same-origin requests only.
		so.Logout.Start = func(w http.ResponseWriter, r *http.Request) {
			a.serveLogout(w, r, mount{site: st, name: slug, s: st.strategies[slug]})
		}
	}
	if so.Logout.Session == nil && lo.Session != nil {
		so.Logout.Session = func(r *http.Request) (samlsp.LogoutSession, bool) {
			s, ok := lo.Session(r, SAML)
			return samlLogoutSession(s), ok && s.NameID != ""
		}
	}
	if so.Logout.OnIdPLogout == nil && lo.OnProviderLogout != nil {
		so.Logout.OnIdPLogout = func(ctx context.Context, s samlsp.LogoutSession) error {
			return lo.OnProviderLogout(ctx, LogoutEvent{Tenant: tenant, Provider: SAML, Subject: s.NameID, Session: s.SessionIndex,
				NameIDFormat: s.NameIDFormat, IdP: s.IdP, Channel: LogoutSAMLRequest})
		}
	}
	if so.Logout.Done == nil {
		returnTo := logoutReturnTo(lo)
		so.Logout.Done = func(w http.ResponseWriter, r *http.Request, err *providers.Error) {
			var e *Error
			if err != nil {
				e = asError(err, string(SAML), CodeInvalidResponse)
			}
			a.finishLogout(lo.Done, w, r, tenant, returnTo, e)
		}
	}
	return so
}

// samlLogoutSession is the SAML part of s, the NameID whole.
func samlLogoutSession(s LogoutSession) samlsp.LogoutSession {
	return samlsp.LogoutSession{NameID: s.NameID, NameIDFormat: s.NameIDFormat, NameQualifier: s.NameQualifier,
		SPNameQualifier: s.SPNameQualifier, SPProvidedID: s.SPProvidedID, NameIDEncrypted: s.NameIDEncrypted, SessionIndex: s.SessionIndex, IdP: s.IdP}
}

func logoutReturnTo(lo LogoutOptions) string {
	if lo.ReturnTo == "" {
		return "/"
	}
	return SafeReturnTo(lo.ReturnTo)
}
