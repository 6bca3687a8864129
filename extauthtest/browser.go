package extauthtest

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	"golang.org/x/net/publicsuffix"
)

// Browser is an HTTP client that behaves, as far as a sign-in can tell, like
// a current browser (Chromium, whose behaviour here Firefox and Safari
// share), so that a host test drives its sign-in through its own pages in a
// few lines, and fails where a real browser would fail. It emulates:
//
//   - the Fetch Metadata a browser sends to a potentially trustworthy URL
//     (https, localhost and its subdomains, loopback addresses):
//     Sec-Fetch-Site, -Mode, -Dest and -User; to a plain-http site it sends
//     none, as browsers do;
//   - Origin on every POST as Fetch serializes it: the page's origin, or
//     "null" under the page's referrer policy no-referrer (or same-origin to
//     another origin, or an https page posting to plain http) and once a
//     redirect took the request through another origin;
//   - Referer by the page's referrer policy (its Referrer-Policy header, a
//     <meta name="referrer"> element, rel="noreferrer" and a link's
//     referrerpolicy; strict-origin-when-cross-origin by default), which a
//     redirect's own Referrer-Policy header changes;
//   - the Accept of a navigation (text/html first), unless Header sets one;
//   - cookies per site in a cookie jar, sent by their SameSite rules: Strict
//     ones only on a same-site request (the page that started it, and every
//     URL it was redirected through, of the same scheme and registrable
//     domain; a URL typed in counts as same-site), Lax ones (and those
//     without SameSite, Lax by default) also on a cross-site GET
//     navigation, None ones always; a SameSite=None cookie without Secure,
//     and a __Host- or __Secure- cookie that breaks its prefix's rules, are
//     refused when set;
//   - redirects (at most 30), a POST turned into a GET after 301, 302 and
//     303 and kept after 307 and 308;
//   - the forms a page submits on load by script, as a SAML IdP's POST
//     binding page and extauth's own do, and nothing else: a page that waits
//     for a click waits for Click;
//   - host names under .localhost at 127.0.0.1, as browsers resolve them,
//     so that tenants on subdomains of localhost need no resolver, and
//     those of Hosts at the addresses it gives.
//
// It does not run scripts (beyond that submission), render, load a page's
// subresources (images, styles, frames), apply a Content-Security-Policy,
// honour X-Frame-Options, cache, nor follow a <meta http-equiv="refresh">;
// Chromium's exception that sends a Lax-by-default cookie younger than two
// minutes with a cross-site POST is not emulated (extauth's cookies all say
// their SameSite). The browser suite (examples/demo, -tags e2e) runs the
// same sign-ins in headless Chromium. Every method fails the test on a
// transport error. A Browser is not safe for concurrent use.
type Browser struct {
	t      testing.TB
	client *http.Client
	// Jar holds the cookies. The Browser reads and writes it itself, by
	// the SameSite rules; a cookie a test adds here counts as Lax.
	Jar *cookiejar.Jar
	// History lists every URL requested, redirects and submitted forms
	// included, in order.
	History []string
	// Header is added to every request (a User-Agent, Accept-Language).
	Header http.Header
	// Hosts maps host names to the IP address the Browser connects to
	// instead of looking them up, as a hosts file does: a test that serves
	// the application at http://app.test (a plain-http site, which gets no
	// fetch metadata) maps app.test to 127.0.0.1.
	Hosts map[string]string
	// sameSite remembers the SameSite attribute of each cookie in Jar, by
	// name and value (which is all Jar gives back).
	sameSite map[string]http.SameSite
}

// maxRedirects bounds one navigation, as browsers do (Chrome: 20, Firefox:
// 20); a few more for the form posts a sign-in adds.
const maxRedirects = 30

// maxBody bounds the body a Browser reads from one response.
const maxBody = 16 << 20

// NewBrowser returns a Browser with an empty cookie jar that fails t on
// transport errors.
func NewBrowser(t testing.TB) *Browser {
	jar, err := cookiejar.New(&cookiejar.Options{PublicSuffixList: publicsuffix.List})
	if err != nil {
		t.Fatal(err)
	}
	b := &Browser{
		t:        t,
		Jar:      jar,
		Header:   http.Header{"User-Agent": {"extauthtest.Browser"}},
		sameSite: map[string]http.SameSite{},
	}
	b.client = &http.Client{
		// No Jar: navigate sends and keeps cookies by their SameSite
		// rules, which net/http/cookiejar ignores.
		Transport: b.transport(),
		Timeout:   30 * time.Second,
		// Redirects are followed by navigate, which sets the headers of
		// each hop as a browser does.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return b
}

// transport reaches every name under .localhost at 127.0.0.1, as browsers
// do (RFC 6761: such names are the loopback interface), whatever the
// system resolver says, and the names of Hosts at their addresses: tenants
// on subdomains of localhost work in a test as in Chrome.
func (b *Browser) transport() *http.Transport {
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, port, err := net.SplitHostPort(addr); err == nil {
			host = strings.ToLower(host)
			switch ip, mapped := b.Hosts[host]; {
			case mapped:
				addr = net.JoinHostPort(ip, port)
			case strings.HasSuffix(host, ".localhost"):
				addr = net.JoinHostPort("127.0.0.1", port)
			}
		}
		return dialer.DialContext(ctx, network, addr)
	}
	return transport
}

// Page is a response the Browser ended on, after redirects and
// self-submitting forms.
type Page struct {
	// StatusCode and Header are the last response's.
	StatusCode int
	Header     http.Header
	// URL is where the Browser ended.
	URL *url.URL
	// Body is the last response's body.
	Body string
	// ReferrerPolicy is the page's referrer policy: its
	// <meta name="referrer">, else its Referrer-Policy header, else the
	// default strict-origin-when-cross-origin.
	ReferrerPolicy string
}

// Get navigates to u as a user does who types it into the address bar
// (Sec-Fetch-Site: none).
func (b *Browser) Get(u string) *Page {
	b.t.Helper()
	return b.navigate(request{method: http.MethodGet, url: u, user: true})
}

// Post submits form to u from a page of u's own origin, as a sign-in
// button on one of the application's pages does (Origin: u's origin,
// Sec-Fetch-Site: same-origin where the browser sends fetch metadata). The
// application's sign-in routes accept exactly this:
// Post(app+"/users/auth/saml", nil) starts a SAML sign-in.
func (b *Browser) Post(u string, form url.Values) *Page {
	b.t.Helper()
	pu := b.parse(u)
	return b.navigate(request{method: http.MethodPost, url: u, form: form, initiator: origin(pu), referer: origin(pu) + "/", user: true})
}

// PostFrom submits form to u from a page at pageURL, which may be another
// site: what a cross-site form does (a login CSRF attempt, when u starts a
// sign-in). The page has the default referrer policy.
func (b *Browser) PostFrom(pageURL, u string, form url.Values) *Page {
	b.t.Helper()
	pu := b.parse(pageURL)
	return b.navigate(request{method: http.MethodPost, url: u, form: form, initiator: origin(pu), referer: pageURL, user: true})
}

// Click follows the link, or submits the form of the button, on p whose
// label is label: the link's or button's text (spaces trimmed), or its id,
// or an input button's value. It fails the test when p has none.
func (b *Browser) Click(p *Page, label string) *Page {
	b.t.Helper()
	return b.Submit(p, label, nil)
}

// Submit fills the fields of the form that holds the button labelled
// label (as Click finds it) with fields, then clicks the button: how a test
// types a name and an email into a form. A field the form does not have is
// added.
func (b *Browser) Submit(p *Page, label string, fields url.Values) *Page {
	b.t.Helper()
	doc := b.parseHTML(p)
	n := findClickable(doc, label)
	if n == nil {
		b.t.Fatalf("extauthtest: no link or button %q on %s", label, p.URL)
		return nil
	}
	if n.DataAtom == atom.A {
		href, _ := attr(n, "href")
		return b.navigate(b.fromPage(p, n, http.MethodGet, href, nil))
	}
	form := enclosingForm(n)
	if form == nil {
		b.t.Fatalf("extauthtest: button %q on %s is in no form", label, p.URL)
		return nil
	}
	values := formValues(form)
	if name, ok := attr(n, "name"); ok && name != "" {
		v, _ := attr(n, "value")
		values.Add(name, v)
	}
	for k, v := range fields {
		values[k] = v
	}
	return b.navigate(b.formRequest(p, form, n, values, true))
}

// Cookie returns the cookie named name that the Browser would send to u,
// or nil.
func (b *Browser) Cookie(u, name string) *http.Cookie {
	for _, c := range b.Jar.Cookies(b.parse(u)) {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// request is one navigation: its first request, and who started it.
type request struct {
	method, url string
	form        url.Values
	// initiator is the origin of the page that started the navigation, ""
	// when the user did through the browser itself.
	initiator string
	// referer is the URL of the page that started it, "" for none; policy
	// the referrer policy it goes by ("" for the default).
	referer, policy string
	// user is true when a user's action started it (Sec-Fetch-User).
	user bool
}

// defaultPolicy is the referrer policy of a page that sets none.
const defaultPolicy = "strict-origin-when-cross-origin"

// referrerPolicies are the policies a browser knows; a token it does not
// know is ignored.
var referrerPolicies = []string{"no-referrer", "no-referrer-when-downgrade", "same-origin", "origin",
	"strict-origin", "origin-when-cross-origin", "strict-origin-when-cross-origin", "unsafe-url"}

// lastPolicy is the policy a Referrer-Policy header (or meta element)
// sets: the last token of the list that the browser knows, "" for none.
func lastPolicy(values ...string) string {
	out := ""
	for _, v := range values {
		for _, tok := range strings.Split(v, ",") {
			tok = strings.ToLower(strings.TrimSpace(tok))
			if slices.Contains(referrerPolicies, tok) {
				out = tok
			}
		}
	}
	return out
}

func (b *Browser) navigate(req request) *Page {
	b.t.Helper()
	var chain []*url.URL
	method, target, form, policy := req.method, req.url, req.form, req.policy
	for hop := 0; ; hop++ {
		if hop > maxRedirects {
			b.t.Fatalf("extauthtest: more than %d redirects from %s %s", maxRedirects, req.method, req.url)
		}
		u := b.parse(target)
		chain = append(chain, u)
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader(form.Encode())
		}
		hr, err := http.NewRequest(method, u.String(), body)
		if err != nil {
			b.t.Fatalf("extauthtest: %s %s: %v", method, u, err)
		}
		for k, v := range b.Header {
			hr.Header[k] = v
		}
		if hr.Header.Get("Accept") == "" {
			hr.Header.Set("Accept", navigationAccept)
		}
		if method == http.MethodPost {
			hr.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			hr.Header.Set("Origin", postOrigin(req.initiator, policy, chain))
		}
		if trustworthy(u) {
			hr.Header.Set("Sec-Fetch-Site", fetchSite(req.initiator, chain))
			hr.Header.Set("Sec-Fetch-Mode", "navigate")
			hr.Header.Set("Sec-Fetch-Dest", "document")
			if req.user {
				hr.Header.Set("Sec-Fetch-User", "?1")
			}
		}
		if ref := referrer(req.referer, policy, u); ref != "" {
			hr.Header.Set("Referer", ref)
		}
		b.addCookies(hr, req.initiator, chain)
		b.History = append(b.History, u.String())
		resp, err := b.client.Do(hr)
		if err != nil {
			b.t.Fatalf("extauthtest: %s %s: %v", method, u, err)
		}
		data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		resp.Body.Close()
		if err != nil {
			b.t.Fatalf("extauthtest: reading %s: %v", u, err)
		}
		b.keepCookies(u, resp)
		if loc := resp.Header.Get("Location"); loc != "" && isRedirect(resp.StatusCode) {
			next, err := u.Parse(loc)
			if err != nil {
				b.t.Fatalf("extauthtest: %s redirects to %q: %v", u, loc, err)
			}
			target = next.String()
			if resp.StatusCode != http.StatusTemporaryRedirect && resp.StatusCode != http.StatusPermanentRedirect {
				method, form = http.MethodGet, nil
			}
			// A redirect's own policy governs the rest of the way
			// (Fetch, "set request's referrer policy on redirect").
			if p := lastPolicy(resp.Header.Values("Referrer-Policy")...); p != "" {
				policy = p
			}
			continue
		}
		p := &Page{StatusCode: resp.StatusCode, Header: resp.Header, URL: u, Body: string(data)}
		p.ReferrerPolicy = pagePolicy(p)
		if next, ok := b.autoSubmit(p); ok {
			// The form's page starts a new navigation of its own.
			req = next
			method, target, form, policy, chain = next.method, next.url, next.form, next.policy, nil
			continue
		}
		return p
	}
}

// navigationAccept is what Chromium accepts on a navigation.
const navigationAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8"

// trustworthy reports whether u is a potentially trustworthy URL, to which
// browsers send fetch metadata: https, or a loopback host.
func trustworthy(u *url.URL) bool {
	if u.Scheme == "https" || u.Scheme == "wss" {
		return true
	}
	host := strings.ToLower(u.Hostname())
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// pagePolicy is p's referrer policy: its meta element's, which a browser
// applies after the header's, else its header's, else the default.
func pagePolicy(p *Page) string {
	policy := lastPolicy(p.Header.Values("Referrer-Policy")...)
	if strings.HasPrefix(p.Header.Get("Content-Type"), "text/html") && strings.Contains(p.Body, "referrer") {
		if doc, err := html.Parse(strings.NewReader(p.Body)); err == nil {
			walk(doc, func(n *html.Node) bool {
				if n.DataAtom == atom.Meta {
					if name, _ := attr(n, "name"); strings.EqualFold(name, "referrer") {
						if content, _ := attr(n, "content"); lastPolicy(content) != "" {
							policy = lastPolicy(content)
						}
					}
				}
				return true
			})
		}
	}
	if policy == "" {
		return defaultPolicy
	}
	return policy
}

// addCookies adds to hr the cookies of the jar that its navigation may
// carry: by each cookie's SameSite, and whether the request is same-site.
func (b *Browser) addCookies(hr *http.Request, initiator string, chain []*url.URL) {
	same := initiator == ""
	if !same {
		same = true
		for _, u := range chain {
			if !sameSite(initiator, u) {
				same = false
			}
		}
	}
	safe := hr.Method == http.MethodGet || hr.Method == http.MethodHead
	for _, c := range b.Jar.Cookies(hr.URL) {
		switch b.sameSite[c.Name+"\x00"+c.Value] {
		case http.SameSiteNoneMode:
		case http.SameSiteStrictMode:
			if !same {
				continue
			}
		default:
			if !same && !safe {
				continue
			}
		}
		hr.AddCookie(c)
	}
}

// keepCookies stores the cookies resp sets, refusing those a browser
// refuses, and remembers their SameSite.
func (b *Browser) keepCookies(u *url.URL, resp *http.Response) {
	var keep []*http.Cookie
	for _, c := range resp.Cookies() {
		if why := refusedCookie(c); why != "" {
			b.t.Logf("extauthtest: %s sets cookie %s, which a browser refuses: %s", u, c.Name, why)
			continue
		}
		if c.MaxAge >= 0 {
			b.sameSite[c.Name+"\x00"+c.Value] = c.SameSite
		}
		keep = append(keep, c)
	}
	if len(keep) > 0 {
		b.Jar.SetCookies(u, keep)
	}
}

// refusedCookie says why a browser refuses to keep c, "" when it keeps it.
func refusedCookie(c *http.Cookie) string {
	switch {
	case c.SameSite == http.SameSiteNoneMode && !c.Secure:
		return "SameSite=None without Secure"
	case strings.HasPrefix(c.Name, "__Secure-") && !c.Secure:
		return "a __Secure- cookie without Secure"
	case strings.HasPrefix(c.Name, "__Host-") && (!c.Secure || c.Domain != "" || c.Path != "/"):
		return "a __Host- cookie needs Secure, no Domain and Path=/"
	}
	return ""
}

func isRedirect(code int) bool {
	switch code {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// autoSubmit finds the form p submits by script on load and returns its
// submission: a script that calls document.forms[N].submit() or
// document.getElementById('ID').submit(), in a script element or the body's
// onload.
func (b *Browser) autoSubmit(p *Page) (request, bool) {
	if !strings.HasPrefix(p.Header.Get("Content-Type"), "text/html") || !strings.Contains(p.Body, "submit()") {
		return request{}, false
	}
	doc := b.parseHTML(p)
	var scripts []string
	walk(doc, func(n *html.Node) bool {
		if n.DataAtom == atom.Script && n.FirstChild != nil {
			scripts = append(scripts, n.FirstChild.Data)
		}
		if n.DataAtom == atom.Body {
			if v, ok := attr(n, "onload"); ok {
				scripts = append(scripts, v)
			}
		}
		return true
	})
	forms := findAll(doc, atom.Form)
	for _, s := range scripts {
		var form *html.Node
		if m := submitByIndex.FindStringSubmatch(s); m != nil {
			if i, err := strconv.Atoi(m[1]); err == nil && i < len(forms) {
				form = forms[i]
			}
		} else if m := submitByID.FindStringSubmatch(s); m != nil {
			for _, f := range forms {
				if id, _ := attr(f, "id"); id == m[1] {
					form = f
				}
			}
		}
		if form != nil {
			return b.formRequest(p, form, nil, formValues(form), false), true
		}
	}
	return request{}, false
}

var (
	submitByIndex = regexp.MustCompile(`document\.forms\[(\d+)\]\.submit\(\)`)
	submitByID    = regexp.MustCompile(`document\.getElementById\(['"]([^'"]+)['"]\)\.submit\(\)`)
)

// formRequest is the navigation that submitting form on p with values
// starts; by is the button clicked, nil for a submission by script.
func (b *Browser) formRequest(p *Page, form, by *html.Node, values url.Values, user bool) request {
	b.t.Helper()
	action, _ := attr(form, "action")
	method, _ := attr(form, "method")
	method = strings.ToUpper(method)
	if by != nil {
		// A button's formaction and formmethod win over its form's.
		if a, ok := attr(by, "formaction"); ok {
			action = a
		}
		if m, ok := attr(by, "formmethod"); ok {
			method = strings.ToUpper(m)
		}
	}
	if enc, _ := attr(form, "enctype"); enc != "" && enc != "application/x-www-form-urlencoded" {
		b.t.Fatalf("extauthtest: form on %s has enctype %q; only application/x-www-form-urlencoded is supported", p.URL, enc)
	}
	if method != http.MethodPost {
		u := b.resolve(p, action)
		u.RawQuery = values.Encode()
		r := b.fromPage(p, form, http.MethodGet, u.String(), nil)
		r.user = user
		return r
	}
	r := b.fromPage(p, form, http.MethodPost, action, values)
	r.user = user
	return r
}

// fromPage is a navigation that element el (a link or a form) of page p
// starts to ref (relative to p), under p's referrer policy, or
// no-referrer for an element with rel="noreferrer", or the policy of a
// link's referrerpolicy.
func (b *Browser) fromPage(p *Page, el *html.Node, method, ref string, form url.Values) request {
	policy := p.ReferrerPolicy
	if policy == "" {
		policy = pagePolicy(p)
	}
	if el != nil {
		if rel, _ := attr(el, "rel"); slices.Contains(strings.Fields(strings.ToLower(rel)), "noreferrer") {
			policy = "no-referrer"
		} else if rp, _ := attr(el, "referrerpolicy"); el.DataAtom == atom.A && lastPolicy(rp) != "" {
			policy = lastPolicy(rp)
		}
	}
	return request{method: method, url: b.resolve(p, ref).String(), form: form, initiator: origin(p.URL), referer: p.URL.String(),
		policy: policy, user: true}
}

func (b *Browser) resolve(p *Page, ref string) *url.URL {
	u, err := p.URL.Parse(strings.TrimSpace(ref))
	if err != nil {
		b.t.Fatalf("extauthtest: %q on %s: %v", ref, p.URL, err)
	}
	u.Fragment = ""
	return u
}

func (b *Browser) parse(u string) *url.URL {
	pu, err := url.Parse(u)
	if err != nil || !pu.IsAbs() {
		b.t.Fatalf("extauthtest: %q is not an absolute URL", u)
	}
	return pu
}

func (b *Browser) parseHTML(p *Page) *html.Node {
	b.t.Helper()
	doc, err := html.Parse(strings.NewReader(p.Body))
	if err != nil {
		b.t.Fatalf("extauthtest: page %s: %v", p.URL, err)
	}
	return doc
}

// referrer is the Referer of a request to to from the page at from, under
// policy (Referrer Policy, "determine request's referrer"): the whole URL,
// its origin, or nothing.
func referrer(from, policy string, to *url.URL) string {
	if from == "" {
		return ""
	}
	f, err := url.Parse(from)
	if err != nil {
		return ""
	}
	f.Fragment, f.User = "", nil
	full, justOrigin := f.String(), origin(f)+"/"
	sameOrigin := origin(f) == origin(to)
	downgrade := trustworthy(f) && !trustworthy(to)
	switch policy {
	case "no-referrer":
		return ""
	case "unsafe-url":
		return full
	case "origin":
		return justOrigin
	case "same-origin":
		if sameOrigin {
			return full
		}
		return ""
	case "origin-when-cross-origin":
		if sameOrigin {
			return full
		}
		return justOrigin
	case "strict-origin":
		if downgrade {
			return ""
		}
		return justOrigin
	case "no-referrer-when-downgrade":
		if downgrade {
			return ""
		}
		return full
	}
	// strict-origin-when-cross-origin, the default.
	switch {
	case sameOrigin:
		return full
	case downgrade:
		return ""
	}
	return justOrigin
}

func origin(u *url.URL) string { return u.Scheme + "://" + u.Host }

// fetchSite is Sec-Fetch-Site for a request started by initiator (an
// origin, "" for the user) that went through chain: the relation of the
// initiator to the least related URL of the chain.
func fetchSite(initiator string, chain []*url.URL) string {
	if initiator == "" {
		return "none"
	}
	out := "same-origin"
	for _, u := range chain {
		switch {
		case origin(u) == initiator:
		case sameSite(initiator, u):
			out = "same-site"
		default:
			return "cross-site"
		}
	}
	return out
}

// postOrigin is the Origin of a POST started by initiator (an origin, ""
// for the user) under the referrer policy policy, that went through chain
// (Fetch, "append a request Origin header"): "null" once a redirect took
// it to another origin than the one it was first sent to, or when the
// policy hides it from where it goes now.
func postOrigin(initiator, policy string, chain []*url.URL) string {
	if initiator == "" {
		return "null"
	}
	cur := chain[len(chain)-1]
	for _, u := range chain[:len(chain)-1] {
		if origin(u) != origin(cur) {
			return "null"
		}
	}
	switch policy {
	case "no-referrer":
		return "null"
	case "same-origin":
		if initiator != origin(cur) {
			return "null"
		}
	case "", "no-referrer-when-downgrade", "strict-origin", "strict-origin-when-cross-origin":
		if strings.HasPrefix(initiator, "https:") && cur.Scheme != "https" {
			return "null"
		}
	}
	return initiator
}

// sameSite compares the scheme and registrable domain of an origin and a
// URL; ports do not count, and an IP address is its own site.
func sameSite(originURL string, u *url.URL) bool {
	o, err := url.Parse(originURL)
	if err != nil || o.Scheme != u.Scheme {
		return false
	}
	return siteOf(o.Hostname()) == siteOf(u.Hostname())
}

func siteOf(host string) string {
	if s, err := publicsuffix.EffectiveTLDPlusOne(host); err == nil {
		return s
	}
	return host
}

// findClickable returns the first link or button labelled label.
func findClickable(doc *html.Node, label string) *html.Node {
	var found *html.Node
	walk(doc, func(n *html.Node) bool {
		if found != nil {
			return false
		}
		if n.Type != html.ElementNode {
			return true
		}
		id, _ := attr(n, "id")
		switch {
		case n.DataAtom == atom.A:
			if _, ok := attr(n, "href"); ok && (textOf(n) == label || id == label) {
				found = n
			}
		case n.DataAtom == atom.Button:
			if typ, _ := attr(n, "type"); (typ == "" || typ == "submit") && (textOf(n) == label || id == label) {
				found = n
			}
		case n.DataAtom == atom.Input:
			typ, _ := attr(n, "type")
			v, _ := attr(n, "value")
			if (typ == "submit" || typ == "image") && (v == label || id == label) {
				found = n
			}
		}
		return true
	})
	return found
}

func enclosingForm(n *html.Node) *html.Node {
	for p := n.Parent; p != nil; p = p.Parent {
		if p.DataAtom == atom.Form {
			return p
		}
	}
	return nil
}

// formValues are what form submits without its buttons: its named inputs
// (checked ones only for checkboxes and radios), text areas and selects.
func formValues(form *html.Node) url.Values {
	v := url.Values{}
	walk(form, func(n *html.Node) bool {
		name, ok := attr(n, "name")
		if !ok || name == "" {
			return true
		}
		if _, disabled := attr(n, "disabled"); disabled {
			return true
		}
		switch n.DataAtom {
		case atom.Input:
			typ, _ := attr(n, "type")
			val, _ := attr(n, "value")
			switch strings.ToLower(typ) {
			case "submit", "image", "button", "reset", "file":
			case "checkbox", "radio":
				if _, checked := attr(n, "checked"); checked {
					if val == "" {
						val = "on"
					}
					v.Add(name, val)
				}
			default:
				v.Add(name, val)
			}
		case atom.Textarea:
			v.Add(name, textOf(n))
		case atom.Select:
			var first, selected *html.Node
			walk(n, func(o *html.Node) bool {
				if o.DataAtom == atom.Option {
					if first == nil {
						first = o
					}
					if _, ok := attr(o, "selected"); ok && selected == nil {
						selected = o
					}
				}
				return true
			})
			if selected == nil {
				selected = first
			}
			if selected != nil {
				val, ok := attr(selected, "value")
				if !ok {
					val = textOf(selected)
				}
				v.Add(name, val)
			}
			return false
		}
		return true
	})
	return v
}

func walk(n *html.Node, f func(*html.Node) bool) {
	if !f(n) {
		return
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		walk(c, f)
	}
}

func findAll(doc *html.Node, a atom.Atom) []*html.Node {
	var out []*html.Node
	walk(doc, func(n *html.Node) bool {
		if n.DataAtom == a {
			out = append(out, n)
		}
		return true
	})
	return out
}

func attr(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Namespace == "" && a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

// textOf is n's text, with runs of white space as one space, trimmed.
func textOf(n *html.Node) string {
	var b strings.Builder
	walk(n, func(c *html.Node) bool {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
		return true
	})
	return strings.Join(strings.Fields(b.String()), " ")
}
