package extauth

import (
	"context"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/extauth/extauth/internal/pages"
	"github.com/extauth/extauth/providers"
)

// Pages are the words and the look of the pages extauth serves itself: the
// page that asks for a click before a sign-in or sign-out that nobody
// vouches for, the step-up page (StepUp), a SAML federation's discovery
// page, the page that posts a sign-in to a provider, and the default
// failure and sign-out pages. Each is in the language the browser prefers
// (Accept-Language) among English, German and French and those Messages
// adds, English when none matches. docs/pages.md shows each page.
type Pages struct {
	// ProviderNames are what the pages call each provider, as people know
	// it ("Ada University", "Example Corp account"). A provider without
	// one is called what its configuration says: Google, Facebook and
	// Twitter for their default hosts, the host name of an OpenID
	// provider's issuer or of a blog site, a SAML IdP's name from its
	// metadata; never the slug.
	ProviderNames map[Provider]string
	// ProviderName, when set, names provider p on the pages of tenant (""
	// for the application's own site), for tenants whose providers people
	// know by names of their own ("Alpha University account"); "" leaves
	// the name to ProviderNames and the defaults.
	ProviderName func(tenant string, p Provider) string
	// Messages add languages to the pages, or change extauth's words: by
	// BCP 47 language tag, then by message key, as PageMessages lists
	// them with their text. A language needs only the keys it changes,
	// the others are in English. A text may use the placeholders of its
	// key's English text ({provider}, {site}, ...), which New checks.
	Messages map[string]map[string]string
	// Stylesheet is CSS that follows extauth's own on every page: the
	// host's colours and fonts. The pages' Content-Security-Policy allows
	// it by its hash, and nothing it loads from elsewhere.
	Stylesheet string
}

// PageMessages returns the words of extauth's pages in lang, a BCP 47 tag
// of a language extauth ships ("en", "de", "fr"): each message key that
// Pages.Messages may give, with its text. It returns nil for any other
// language.
func PageMessages(lang string) map[string]string { return pages.Messages(lang) }

// newPages builds the pages of o.
func newPages(o Pages, slug func(string) string) (*pages.Set, map[string]string, error) {
	set, err := pages.New(o.Messages, o.Stylesheet)
	if err != nil {
		return nil, nil, err
	}
	names := map[string]string{}
	for p, n := range o.ProviderNames {
		if n != "" {
			names[slug(string(p))] = n
		}
	}
	return set, names, nil
}

// printer returns the pages' words in r's language.
func (a *Auth) printer(r *http.Request) *pages.Printer { return a.pages.For(r) }

// providerName is what the pages call the provider mounted as name on st.
func (a *Auth) providerName(st *site, name string, p *pages.Printer) string {
	if f := a.opts.Pages.ProviderName; f != nil && st != nil {
		if n := f(st.tenant, a.providerOf(name)); n != "" {
			return n
		}
	}
	if n := a.pageNames[name]; n != "" {
		return n
	}
	if st != nil {
		if dn, ok := st.strategies[name].(providers.DisplayNamer); ok {
			if n := dn.DisplayName(); n != "" {
				return n
			}
		}
	}
	return p.T("provider.generic")
}

// providerOf is the provider mounted as slug.
func (a *Auth) providerOf(slug string) Provider {
	for p, s := range a.slugs {
		if s == slug {
			return Provider(p)
		}
	}
	return Provider(slug)
}

// idpName is what the pages call the IdP entityID of the federation mounted
// as name on st: its name from the federation's metadata, in p's language
// where it has one, else the entity ID.
func (a *Auth) idpName(ctx context.Context, st *site, name, entityID string, p *pages.Printer) string {
	if n, ok := st.strategies[name].(providers.IdPNamer); ok {
		if s := n.IdPName(ctx, entityID, p.Lang); s != "" {
			return s
		}
	}
	return entityID
}

// siteName is what the pages call the application: its host name.
func siteName(st *site) string {
	if st == nil || st.base == nil {
		return ""
	}
	return st.base.Hostname()
}

// home is the way back to st: its root.
func home(st *site, p *pages.Printer) *pages.Link {
	u := "/"
	if st != nil && st.base != nil && st.base.Path != "" {
		u = st.base.Path + "/"
	}
	return &pages.Link{URL: u, Label: p.T("page.back", "site", siteName(st))}
}

// pageFields are a form's hidden fields, in a fixed order.
func pageFields(v url.Values) []pages.Field {
	var out []pages.Field
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range v {
			if !yield(k) {
				return
			}
		}
	}) {
		for _, val := range v[k] {
			out = append(out, pages.Field{Name: k, Value: val})
		}
	}
	return out
}

// writeRedirectPage answers with the page that posts fields to a
// provider's target: by script, or by the user's click without one.
// Nothing of the site goes with it: no referrer, no Origin.
func (a *Auth) writeRedirectPage(w http.ResponseWriter, r *http.Request, m mount, target string, fields url.Values) {
	p := a.printer(r)
	name := a.providerName(m.site, m.name, p)
	p.Write(w, pages.Page{Kind: "redirect", Title: p.T("redirect.title", "provider", name),
		Lead: p.T("redirect.lead", "provider", name),
		Form: &pages.Form{Action: target, Fields: pageFields(fields), Auto: true,
			Button: p.T("redirect.button", "provider", name)},
		Referrer: pages.NoReferrer})
}

// stepUpReason says why a step-up page asks for a new sign-in.
func stepUpReason(p *pages.Printer, level string, maxAge time.Duration) string {
	minutes := strconv.FormatInt(int64((max(maxAge, 0)+time.Minute-1)/time.Minute), 10)
	switch {
	case level != "" && maxAge > 0:
		return p.T("stepup.level_recent", "level", level, "minutes", minutes)
	case level != "" && maxAge < 0:
		return p.T("stepup.level_now", "level", level)
	case level != "":
		return p.T("stepup.level", "level", level)
	case maxAge > 0:
		return p.T("stepup.recent", "minutes", minutes)
	case maxAge < 0:
		return p.T("stepup.now")
	}
	return p.T("stepup.stronger")
}

// defaultFailure is the failure page of Options.OnFailure's default: what
// failed in the browser's language, the code, and the ways on.
func (a *Auth) defaultFailure(w http.ResponseWriter, r *http.Request, err *Error) {
	status := err.Code.HTTPStatus()
	msg := err.Message
	if msg == "" {
		msg = "Sign-in failed."
	}
	if Format(r) == "json" {
		writeJSON(w, status, map[string]string{
			"error":             string(err.Code),
			"error_description": msg,
			"provider":          err.Provider,
		})
		return
	}
	p := a.printer(r)
	tenant, _ := r.Context().Value(tenantKey).(string)
	st, serr := a.siteNamed(r.Context(), tenant)
	if serr != nil {
		st = nil
	}
	a.writeFailure(w, p, st, err, "failure")
}

// writeFailure answers with the failure page of err on st (nil when the
// site could not be built); kind is "failure" or "logout_failure".
func (a *Auth) writeFailure(w http.ResponseWriter, p *pages.Printer, st *site, err *Error, kind string) {
	name, mounted := p.T("provider.generic"), false
	if st != nil {
		_, mounted = st.strategies[err.Provider]
		name = a.providerName(st, err.Provider, p)
	}
	page := pages.Page{Kind: kind, Status: err.Code.HTTPStatus(), Code: string(err.Code), CodeLabel: p.T("failure.code"),
		Details: err.Message, DetailsLabel: p.T("failure.details"), Back: home(st, p), Referrer: pages.NoReferrer}
	if kind == "logout_failure" {
		page.Title, page.Lead = p.T("logout_failure.title"), p.T("logout_failure.lead")
		p.Write(w, page)
		return
	}
	page.Title = p.T("failure.title")
	key := "failure." + string(err.Code)
	if _, known := pages.Messages("en")[key]; !known {
		key = "failure.other"
	}
	page.Lead = p.T(key, "provider", name, "site", siteName(st))
	if mounted && retryable(err.Code) {
		page.Retry = &pages.Link{URL: st.base.Path + st.authorizePath(err.Provider), Label: p.T("failure.retry")}
	}
	p.Write(w, page)
}

// retryable reports whether a new sign-in may end otherwise than the one
// that failed with c: not when the configuration is at fault.
func retryable(c Code) bool {
	return c != CodeMisconfigured && c != CodeInvalidCredentials
}

// writeDiscovery answers a discovery request on m with list: the page, or
// with the .json route the list. Every form of the page carries the start
// request's fields (carry) on to the start.
func (a *Auth) writeDiscovery(w http.ResponseWriter, r *http.Request, m mount, format string, carry url.Values, list providers.DiscoveryList) error {
	if format == "json" {
		type idp struct {
			EntityID string `json:"entity_id"`
			Name     string `json:"name"`
			Logo     string `json:"logo,omitempty"`
		}
		out := struct {
			IdPs []idp `json:"idps"`
			More bool  `json:"more"`
		}{IdPs: []idp{}, More: list.More}
		for _, c := range list.Choices {
			out.IdPs = append(out.IdPs, idp{c.EntityID, c.Name, c.Logo})
		}
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Vary", "Accept-Language, Cookie")
		writeJSON(w, http.StatusOK, out)
		return nil
	}
	p := a.printer(r)
	d := &pages.Discovery{Action: m.base.Path + m.authorizePath(m.name), Fields: pageFields(carry), Query: list.Query,
		LastHeading: p.T("discovery.last"), SearchLabel: p.T("discovery.search"), SearchButton: p.T("discovery.search_btn"),
		ListLabel: p.T("discovery.list")}
	choice := func(c providers.DiscoveryChoice) pages.Choice {
		return pages.Choice{EntityID: c.EntityID, Name: c.Name, Lang: c.Lang, Logo: template.URL(c.Logo), Width: c.LogoWidth, Height: c.LogoHeight}
	}
	if list.Last != nil {
		last := choice(*list.Last)
		d.Last = &last
	}
	for _, c := range list.Choices {
		d.Choices = append(d.Choices, choice(c))
	}
	switch {
	case len(list.Choices) == 0 && list.Query == "" && list.Listed > 0:
		d.Status = p.T("discovery.type")
	case len(list.Choices) == 0 && list.Query != "":
		d.Status = p.T("discovery.no_match", "query", list.Query)
	case len(list.Choices) == 0:
		d.Status = p.T("discovery.none")
	case list.More:
		d.Status = p.T("discovery.more", "count", strconv.Itoa(len(list.Choices)))
	default:
		d.Status = p.Count("discovery.count", len(list.Choices))
	}
	page := pages.Page{Kind: "discovery", Title: p.T("discovery.title"), Lead: p.T("discovery.lead"), Discovery: d,
		Back: home(m.site, p), Referrer: pages.SameOrigin}
	// The level a start asks for is shown only when it is one of the
	// provider's, so that a link cannot put words of its own on the page.
	if ot, ok := m.s.(providers.OptionTaker); ok {
		if level := carry.Get(providers.OptionLevel); level != "" {
			if _, known := ot.AssuranceLevel(level); known {
				page.Notes = []string{p.T("discovery.level", "level", level)}
			}
		}
	}
	p.Write(w, page)
	return nil
}
