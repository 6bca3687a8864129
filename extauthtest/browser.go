package extauthtest

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	"golang.org/x/net/publicsuffix"
)

// Browser is an HTTP client that behaves, as far as a sign-in can tell, like
// a current browser, so that a host test drives its sign-in through its own
// pages in a few lines:
//
//   - it keeps cookies, per site, in a cookie jar;
//   - it sends the Fetch Metadata a browser sends (Sec-Fetch-Site, -Mode,
//     -Dest, -User) and Origin on every POST, so that extauth's login CSRF
//     defence sees a start from the application's own page, and a host
//     behind http.CrossOriginProtection sees what it would in production;
//   - it follows redirects (at most 30), turning a POST into a GET after
//     301, 302 and 303 and keeping it after 307 and 308;
//   - it submits the forms a page submits on load by script, as a SAML
//     IdP's POST binding page and extauth's own do, and nothing else: a
//     page that waits for a click waits for Click;
//   - it reaches every name under .localhost at 127.0.0.1, as browsers do,
//     so that tenants on subdomains of localhost need no resolver.
//
// It runs no other script and, like net/http/cookiejar, ignores SameSite.
// Every method fails the test on a transport error. A Browser is not safe
// for concurrent use.
type Browser struct {
	t      testing.TB
	client *http.Client
	// Jar holds the cookies.
	Jar *cookiejar.Jar
	// History lists every URL requested, redirects and submitted forms
	// included, in order.
	History []string
	// Header is added to every request (a User-Agent, Accept-Language).
	Header http.Header
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
	return &Browser{
		t:   t,
		Jar: jar,
		client: &http.Client{
			Jar:       jar,
			Transport: localhostTransport(),
			Timeout:   30 * time.Second,
			// Redirects are followed by navigate, which sets the
			// headers of each hop as a browser does.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		Header: http.Header{"User-Agent": {"extauthtest.Browser"}},
	}
}

// localhostTransport is a transport that reaches every name under
// .localhost at 127.0.0.1, as browsers do (RFC 6761: such names are the
// loopback interface), whatever the system resolver says: tenants on
// subdomains of localhost work in a test as in Chrome.
func localhostTransport() *http.Transport {
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, port, err := net.SplitHostPort(addr); err == nil && strings.HasSuffix(strings.ToLower(host), ".localhost") {
			addr = net.JoinHostPort("127.0.0.1", port)
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
}

// Get navigates to u as a user does who types it into the address bar
// (Sec-Fetch-Site: none).
func (b *Browser) Get(u string) *Page {
	b.t.Helper()
	return b.navigate(request{method: http.MethodGet, url: u, user: true})
}

// Post submits form to u from a page of u's own origin, as a sign-in
// button on one of the application's pages does (Origin: u's origin,
// Sec-Fetch-Site: same-origin). The application's sign-in routes accept
// exactly this: Post(app+"/users/auth/saml", nil) starts a SAML sign-in.
func (b *Browser) Post(u string, form url.Values) *Page {
	b.t.Helper()
	pu := b.parse(u)
	return b.navigate(request{method: http.MethodPost, url: u, form: form, initiator: origin(pu), referer: origin(pu) + "/", user: true})
}

// PostFrom submits form to u from a page at pageURL, which may be another
// site: what a cross-site form does (a login CSRF attempt, when u starts a
// sign-in).
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
		return b.navigate(b.fromPage(p, http.MethodGet, href, nil))
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
	return b.submitForm(p, form, values)
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
	referer   string
	// user is true when a user's action started it (Sec-Fetch-User).
	user bool
}

func (b *Browser) navigate(req request) *Page {
	b.t.Helper()
	var chain []*url.URL
	method, target, form := req.method, req.url, req.form
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
		if method == http.MethodPost {
			hr.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			hr.Header.Set("Origin", postOrigin(req.initiator, chain))
		}
		hr.Header.Set("Sec-Fetch-Site", fetchSite(req.initiator, chain))
		hr.Header.Set("Sec-Fetch-Mode", "navigate")
		hr.Header.Set("Sec-Fetch-Dest", "document")
		if req.user {
			hr.Header.Set("Sec-Fetch-User", "?1")
		}
		if ref := referrer(req.referer, u); ref != "" {
			hr.Header.Set("Referer", ref)
		}
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
		if loc := resp.Header.Get("Location"); loc != "" && isRedirect(resp.StatusCode) {
			next, err := u.Parse(loc)
			if err != nil {
				b.t.Fatalf("extauthtest: %s redirects to %q: %v", u, loc, err)
			}
			target = next.String()
			if resp.StatusCode != http.StatusTemporaryRedirect && resp.StatusCode != http.StatusPermanentRedirect {
				method, form = http.MethodGet, nil
			}
			continue
		}
		p := &Page{StatusCode: resp.StatusCode, Header: resp.Header, URL: u, Body: string(data)}
		if next, ok := b.autoSubmit(p); ok {
			// The form's page starts a new navigation of its own.
			req = next
			method, target, form, chain = next.method, next.url, next.form, nil
			continue
		}
		return p
	}
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
			return b.formRequest(p, form, formValues(form), false), true
		}
	}
	return request{}, false
}

var (
	submitByIndex = regexp.MustCompile(`document\.forms\[(\d+)\]\.submit\(\)`)
	submitByID    = regexp.MustCompile(`document\.getElementById\(['"]([^'"]+)['"]\)\.submit\(\)`)
)

func (b *Browser) submitForm(p *Page, form *html.Node, values url.Values) *Page {
	b.t.Helper()
	return b.navigate(b.formRequest(p, form, values, true))
}

// formRequest is the navigation that submitting form on p with values
// starts.
func (b *Browser) formRequest(p *Page, form *html.Node, values url.Values, user bool) request {
	b.t.Helper()
	action, _ := attr(form, "action")
	method, _ := attr(form, "method")
	method = strings.ToUpper(method)
	if enc, _ := attr(form, "enctype"); enc != "" && enc != "application/x-www-form-urlencoded" {
		b.t.Fatalf("extauthtest: form on %s has enctype %q; only application/x-www-form-urlencoded is supported", p.URL, enc)
	}
	if method != http.MethodPost {
		u := b.resolve(p, action)
		u.RawQuery = values.Encode()
		r := b.fromPage(p, http.MethodGet, u.String(), nil)
		r.user = user
		return r
	}
	r := b.fromPage(p, http.MethodPost, action, values)
	r.user = user
	return r
}

// fromPage is a navigation that page p starts to ref (relative to p).
func (b *Browser) fromPage(p *Page, method, ref string, form url.Values) request {
	referer := p.URL.String()
	if noReferrer(p) {
		referer = ""
	}
	return request{method: method, url: b.resolve(p, ref).String(), form: form, initiator: origin(p.URL), referer: referer, user: true}
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

// noReferrer reports whether p asks for no Referer on the navigations it
// starts (Referrer-Policy header or meta element).
func noReferrer(p *Page) bool {
	if strings.Contains(p.Header.Get("Referrer-Policy"), "no-referrer") {
		return true
	}
	return strings.Contains(p.Body, `name="referrer" content="no-referrer"`)
}

// referrer applies the default policy, strict-origin-when-cross-origin: the
// whole URL to the same origin, the origin to another one.
func referrer(from string, to *url.URL) string {
	if from == "" {
		return ""
	}
	f, err := url.Parse(from)
	if err != nil {
		return ""
	}
	if f.Scheme == "https" && to.Scheme != "https" {
		return ""
	}
	f.Fragment, f.User = "", nil
	if origin(f) == origin(to) {
		return f.String()
	}
	return origin(f) + "/"
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

// postOrigin is the Origin of a POST: the initiator's, or "null" once a
// redirect took it to another origin than the one it was first sent to.
func postOrigin(initiator string, chain []*url.URL) string {
	if initiator == "" {
		return "null"
	}
	for _, u := range chain[:len(chain)-1] {
		if origin(u) != origin(chain[len(chain)-1]) {
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
