package extauth

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/extauth/extauth/internal/pages"
)

// startVerdict is what the authorize route does with a start request.
type startVerdict int

const (
	startAllow   startVerdict = iota
	startRefuse               // 403 csrf_detected
	startConfirm              // the interstitial: the user must click
)

// confirmField carries the interstitial's token back in its POST; the same
// value is in a SameSite=Strict cookie (a double submit), so that only a
// form this site served can carry it.
const confirmField = "extauth_confirm"

// startVerdict decides whether a request may start a sign-in: a login CSRF
// defence (CVE-2015-9284), since a start that another site can trigger lets
// it sign the visitor in, or link an account, with the IdP session the
// browser happens to have. Browsers mark their requests: Sec-Fetch-Site on
// every request to a secure origin (and localhost), Origin on every POST.
// docs/security.md has the table this implements.
func (a *Auth) startVerdict(r *http.Request, m mount) (startVerdict, string) {
	site, origin := r.Header.Get("Sec-Fetch-Site"), r.Header.Get("Origin")
	switch {
	case origin == "null" && site == "same-origin":
		// A form of this very origin, on a page whose referrer policy
		// is no-referrer: under it a browser sends "Origin: null" with
		// every POST (Fetch, "append a request Origin header"). The
		// other sources of a null Origin never come with same-origin:
		// a sandboxed frame's origin is opaque, which is same-origin
		// with nothing, and a redirect through another origin puts
		// that origin in the request's URL list; either makes
		// Sec-Fetch-Site cross-site (Fetch Metadata, "set the
		// Sec-Fetch-Site header"), and no page can set the header
		// itself. Go's http.CrossOriginProtection trusts
		// Sec-Fetch-Site the same way.
		return startAllow, ""
	case origin == "null":
		// A sandboxed frame, or a cross-origin redirect of a POST.
		return startRefuse, "Origin null"
	case site == "cross-site" || site == "same-site":
		// Never this site's own origin. Trusted only when the host says
		// so: a login button on a sibling subdomain or another site of
		// the host's. A GET carries no Origin; its Referer names the
		// page's origin unless the page hid it, and then it is refused.
		from := origin
		if from == "" {
			from = refererOrigin(r)
		}
		if a.trusted[from] {
			return startAllow, ""
		}
		return startRefuse, "Sec-Fetch-Site " + site + " from an untrusted origin"
	case origin != "":
		if origin == m.origin || a.trusted[origin] {
			return startAllow, ""
		}
		return startRefuse, "foreign Origin"
	case site == "same-origin" || site == "none":
		// none: the user typed the URL or used a bookmark.
		return startAllow, ""
	case site != "":
		return startRefuse, "unknown Sec-Fetch-Site value"
	}
	// No fetch metadata and no Origin: a GET from a browser on a plain
	// http site (which gets no Sec-Fetch-Site) or an old one, or a client
	// that is not a browser. Nothing says who started it, so the user
	// confirms with a click on a page of ours, which nobody can frame;
	// that POST carries Origin in every current browser, and in older ones
	// the double-submitted token.
	if r.Method == http.MethodPost && m.confirmed(r) {
		return startAllow, ""
	}
	return startConfirm, ""
}

func refererOrigin(r *http.Request) string {
	u, err := url.Parse(r.Header.Get("Referer"))
	if err != nil || u.Scheme == "" || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

func (m mount) confirmCookieName() string {
	if m.secure {
		return "__Host-extauth_confirm"
	}
	return "extauth_confirm"
}

func (m mount) confirmed(r *http.Request) bool {
	c, err := r.Cookie(m.confirmCookieName())
	if err != nil || c.Value == "" {
		return false
	}
	v := r.PostFormValue(confirmField)
	return subtle.ConstantTimeCompare([]byte(v), []byte(c.Value)) == 1
}

// confirmPage answers a start request nobody vouches for (a sign-in's,
// or a sign-out's: purpose is purposeLogout) with a page on which the user
// confirms with a click. It does not submit itself: a page of ours that
// posted on its own would carry our own Origin and prove nothing about who
// sent the browser here. The request's start fields (carry) ride along.
func (a *Auth) confirmPage(w http.ResponseWriter, r *http.Request, m mount, purpose string, carry url.Values) {
	token := randomString(16)
	http.SetCookie(w, &http.Cookie{Name: m.confirmCookieName(), Value: token, Path: "/", MaxAge: int(a.ttl.Seconds()),
		HttpOnly: true, Secure: m.secure, SameSite: http.SameSiteStrictMode})
	fields := url.Values{confirmField: {token}}
	for k, v := range carry {
		fields[k] = v
	}
	p := a.printer(r)
	name, site := a.providerName(m.site, m.name, p), siteName(m.site)
	page := pages.Page{Kind: "confirm", Title: p.T("confirm.title", "provider", name),
		Lead:  p.T("confirm.lead", "provider", name, "site", site),
		Notes: []string{p.T("confirm.why")},
		Form: &pages.Form{Action: m.base.Path + m.authorizePath(m.name), Fields: pageFields(fields),
			Button: p.T("confirm.button")},
		Back: home(m.site, p), Referrer: pages.SameOrigin}
	if purpose == purposeLogout {
		page.Kind, page.Title = "logout_confirm", p.T("logout.title")
		page.Lead, page.Notes = p.T("logout.lead", "provider", name, "site", site), []string{p.T("logout.why")}
		page.Form.Action, page.Form.Button = m.base.Path+m.extraPath(m.name, purposeLogout), p.T("logout.button")
	}
	p.Write(w, page)
}

// parseTrustedOrigins checks Options.TrustedOrigins: each an origin,
// scheme://host[:port], nothing more.
func parseTrustedOrigins(list []string) (map[string]bool, error) {
	out := map[string]bool{}
	var errs []error
	for _, o := range list {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || strings.ToLower(o) != o {
			errs = append(errs, fmt.Errorf("extauth: Options.TrustedOrigins: %q is not an origin (lowercase scheme://host[:port])", o))
			continue
		}
		out[u.Scheme+"://"+u.Host] = true
	}
	return out, errors.Join(errs...)
}
