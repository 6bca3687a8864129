package extauth

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/extauth/extauth/internal/challenge"
	"github.com/extauth/extauth/internal/pages"
	"github.com/extauth/extauth/internal/safepath"
	"github.com/extauth/extauth/providers"
)

// Assurance is what an action needs of the user's authentication: how
// strongly and how recently the user authenticated. The zero value needs
// nothing.
type Assurance struct {
	// Level is one of the host's assurance levels ("substantial",
	// "high"), which each provider's assurance_levels (or the
	// AssuranceLevels of Options.OIDC, Options.SearchOAuth2, Options.SAML)
	// maps to the acr values, or SAML authentication context classes, that
	// meet it. A provider without that level cannot meet it.
	Level string
	// ACRValues are a provider's own acr values (SAML classes), one of
	// which must be met, when Level is empty: what an RFC 9470 challenge
	// names (ParseStepUpChallenge).
	ACRValues []string
	// MaxAge is how long ago the user may have authenticated: zero for
	// any time, negative for "authenticate again now" (RFC 9470's
	// max_age=0). The provider's clock skew is allowed on it.
	MaxAge time.Duration
}

// values returns the acr values (SAML classes) of s that meet need, and
// false when s has no such level. No level and no values ask nothing.
func (need Assurance) values(s providers.Strategy) ([]string, bool) {
	if need.Level == "" {
		return need.ACRValues, true
	}
	ot, ok := s.(providers.OptionTaker)
	if !ok {
		return nil, false
	}
	return ot.AssuranceLevel(need.Level)
}

// Satisfies reports whether the sign-in id, as the host kept it (Tenant,
// Provider, ACR, AuthTime), meets need: its ACR is one of the values the
// level stands for at its provider (or one of need.ACRValues), and its
// AuthTime is within need.MaxAge of now, give or take the provider's clock
// skew. An identity whose provider is not mounted, or has no such level,
// or that says nothing of when the user authenticated, meets no need that
// asks for it.
func (a *Auth) Satisfies(ctx context.Context, id *Identity, need Assurance) bool {
	if id == nil {
		return false
	}
	st, err := a.siteNamed(ctx, id.Tenant)
	if err != nil {
		return false
	}
	s, ok := st.strategies[id.Provider]
	return ok && a.satisfies(s, id, need)
}

func (a *Auth) satisfies(s providers.Strategy, id *Identity, need Assurance) bool {
	values, ok := need.values(s)
	if !ok || len(values) > 0 && !slices.Contains(values, id.ACR) {
		return false
	}
	if need.MaxAge == 0 {
		return true
	}
	skew := providers.DefaultOIDCClockSkew
	if ot, ok := s.(providers.OptionTaker); ok {
		skew = ot.ClockSkew()
	}
	now := a.now()
	return !id.AuthTime.IsZero() && !id.AuthTime.After(now.Add(skew)) && now.Sub(id.AuthTime) <= max(need.MaxAge, 0)+skew
}

// Assure lets a request through when the user's sign-in id meets need, and
// reports true; otherwise it answers the request with a step-up (StepUp)
// and reports false. It is RequireAssurance for one handler:
//
//	if !a.Assure(w, r, current(r), extauth.Assurance{Level: "high", MaxAge: 5 * time.Minute}) {
//		return
//	}
func (a *Auth) Assure(w http.ResponseWriter, r *http.Request, id *Identity, need Assurance) bool {
	if a.Satisfies(r.Context(), id, need) {
		return true
	}
	a.StepUp(w, r, id, need)
	return false
}

// RequireAssurance returns a middleware that lets a request through only
// when the user's sign-in, as current returns it from the host's session,
// meets need; otherwise it starts a step-up (StepUp) that brings the
// browser back to the request's URL once the user has signed in again at
// that level. current returns nil for a request without a session, which
// is answered 401: put the host's own sign-in check first.
func (a *Auth) RequireAssurance(need Assurance, current func(*http.Request) *Identity) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if a.Assure(w, r, current(r), need) {
				next.ServeHTTP(w, r)
			}
		})
	}
}

// StepUp answers r with a new sign-in of id's account with id's provider,
// asking what need says (RFC 9470 step-up authentication), whether or not
// id already meets it: for a host that proxies an API whose answer said so
// (ParseStepUpChallenge). The sign-in must come back as the same account
// (another is refused with access_denied) and is checked at the callback
// as any sign-in's options are, so the provider's hook receives an
// identity that meets need, or OnFailure an insufficient_user_authentication.
//
// The answer is 401 with RFC 9470's WWW-Authenticate challenge. A browser
// navigating (a GET or HEAD that accepts HTML) gets a page whose form
// starts the sign-in and returns to r's URL: it submits itself when the
// request came from this site, and asks for a click otherwise, so that a
// link from another site cannot start a sign-in unseen. Other requests get
// JSON: error, error_description, and the form to post (post_to, form).
// A provider that cannot be asked for need (an OAuth provider asked for a
// level, or options its configuration does not allow) ends in OnFailure,
// never in a sign-in that could not meet need.
func (a *Auth) StepUp(w http.ResponseWriter, r *http.Request, id *Identity, need Assurance) {
	if id == nil {
		http.Error(w, "Sign in first.", http.StatusUnauthorized)
		return
	}
	st, err := a.siteNamed(r.Context(), id.Tenant)
	if err != nil {
		// As a route's request to a tenant that cannot be built: one
		// "(unknown)" tenant in the metrics, its name in the log.
		a.failAt(id.Tenant, a.log.With("tenant", id.Tenant), w, r, "", asError(err, id.Provider, CodeProviderUnavailable))
		return
	}
	s, ok := st.strategies[id.Provider]
	values, level := need.values(s)
	if !ok || !level {
		a.failOn(st, w, r, "", &Error{Code: CodeInsufficientAuthentication, Provider: id.Provider,
			Message: "this needs a stronger sign-in than this provider offers",
			Err:     errStepUp("the provider has no assurance level " + strconv.Quote(need.Level))})
		return
	}
	o := SignInOptions{Level: need.Level, MaxAge: need.MaxAge, Account: id, ReturnTo: stepUpReturn(r)}
	if need.Level == "" {
		o.ACRValues = values
	}
	action, fields, err := a.startForm(st, id.Provider, o)
	if err != nil {
		a.failOn(st, w, r, "", &Error{Code: CodeMisconfigured, Provider: id.Provider,
			Message: "this needs a stronger sign-in, which is not configured for this provider", Err: err})
		return
	}
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("WWW-Authenticate", stepUpChallenge(values, need.MaxAge))
	if (r.Method == http.MethodGet || r.Method == http.MethodHead) && strings.Contains(r.Header.Get("Accept"), "text/html") {
		a.writeStepUpPage(w, r, st, id, need, action, fields)
		return
	}
	writeJSON(w, http.StatusUnauthorized, map[string]any{
		"error":             string(CodeInsufficientAuthentication),
		"error_description": "a stronger or more recent sign-in is needed",
		"post_to":           action,
		"form":              fields,
	})
}

// writeStepUpPage answers a browser's navigation with the step-up page:
// why it needs a new sign-in, and the form that starts it, which submits
// itself when the navigation came from this site (or the address bar) and
// waits for a click otherwise, so that a link from another site cannot
// start a sign-in unseen. The form posts to this site: the page's
// referrer policy lets the browser send its Origin.
func (a *Auth) writeStepUpPage(w http.ResponseWriter, r *http.Request, st *site, id *Identity, need Assurance, action string, fields url.Values) {
	p := a.printer(r)
	name := a.providerName(st, id.Provider, p)
	todo := p.T("stepup.action", "provider", name)
	if idp := fields.Get("idp"); idp != "" {
		todo = p.T("stepup.action_at", "provider", name, "idp", a.idpName(r.Context(), st, id.Provider, idp, p))
	}
	fetchSite := r.Header.Get("Sec-Fetch-Site")
	auto := fetchSite == "same-origin" || fetchSite == "none"
	notes := []string{todo}
	if auto {
		notes = append(notes, p.T("stepup.auto", "provider", name))
	}
	p.Write(w, pages.Page{Kind: "step_up", Status: http.StatusUnauthorized, Title: p.T("stepup.title"),
		Lead: stepUpReason(p, need.Level, need.MaxAge), Notes: notes,
		Form: &pages.Form{Action: action, Fields: pageFields(fields), Button: p.T("stepup.button", "provider", name), Auto: auto},
		Back: &pages.Link{URL: home(st, p).URL, Label: p.T("stepup.back")}, Referrer: pages.SameOrigin})
}

type errStepUp string

func (e errStepUp) Error() string { return "step-up: " + string(e) }

// stepUpReturn is where a step-up returns: the request's own path for a
// GET or HEAD, else the page the request came from when it is this
// site's, else "/".
func stepUpReturn(r *http.Request) string {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return SafeReturnTo(r.URL.RequestURI())
	}
	if ref, err := url.Parse(r.Header.Get("Referer")); err == nil && ref.Host == r.Host {
		if p, ok := safepath.Path(ref.RequestURI()); ok {
			return p
		}
	}
	return "/"
}

// stepUpChallenge is RFC 9470's WWW-Authenticate challenge for values and
// maxAge.
func stepUpChallenge(values []string, maxAge time.Duration) string {
	var b strings.Builder
	b.WriteString(`Bearer error="insufficient_user_authentication", error_description="A stronger or more recent sign-in is needed"`)
	if len(values) > 0 {
		b.WriteString(`, acr_values=`)
		b.WriteString(strconv.Quote(strings.Join(values, " ")))
	}
	if maxAge != 0 {
		b.WriteString(", max_age=")
		b.WriteString(strconv.FormatInt(int64(max(maxAge, 0)/time.Second), 10))
	}
	return b.String()
}

// ParseStepUpChallenge reads an RFC 9470 step-up challenge from the
// WWW-Authenticate headers of a protected resource's answer: a challenge,
// of any scheme (Bearer, DPoP), with error="insufficient_user_authentication".
// Its acr_values become ACRValues and its max_age MaxAge (max_age=0 a
// negative MaxAge: authenticate again now). ok is false when there is no
// such challenge. Hand the result to StepUp:
//
//	if need, ok := extauth.ParseStepUpChallenge(resp.Header); ok {
//		a.StepUp(w, r, id, need)
//		return
//	}
func ParseStepUpChallenge(h http.Header) (need Assurance, ok bool) {
	cs, ok := challenge.Parse(h)
	if !ok {
		return Assurance{}, false
	}
	for _, c := range cs {
		if c.Params["error"] != string(CodeInsufficientAuthentication) {
			continue
		}
		need.ACRValues = strings.Fields(c.Params["acr_values"])
		if s, ok := c.Params["max_age"]; ok {
			d, err := providers.ParseMaxAge(s)
			if err != nil {
				return Assurance{}, false
			}
			need.MaxAge = d
			if d == 0 {
				need.MaxAge = -1
			}
		}
		return need, true
	}
	return Assurance{}, false
}
