package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest"
	"github.com/extauth/extauth/internal/devpage"
	"github.com/extauth/extauth/internal/harness"
)

// The home page names each provider as people know it, with its slug
// beside it, small.
func TestDemoProviderLabels(t *testing.T) {
	base := startDemo(t)
	home := harness.NewBrowser(t).Get(base + "/")
	for p, label := range map[extauth.Provider]string{
		extauth.Microblog:    "Twitter-style microblog",
		extauth.Socialnet:    "Facebook-style social network",
		extauth.SearchOAuth2: "Google account",
		extauth.BlogOAuth2:   "WordPress",
		extauth.SAML:         "SAML (Ada&#39;s university IdP)",
		extauth.OIDC:         "OpenID Connect",
	} {
		want := `<button id="signin-` + string(p) + `"><span>` + label + `</span><span class="slug">` + string(p) + `</span></button>`
		if !strings.Contains(home.Body, want) {
			t.Errorf("the home page lacks %s", want)
		}
	}
}

var styleTag = regexp.MustCompile(`(?s)<style>(.*?)</style>`)

// One stylesheet: the demo's pages link it, and every development
// provider's page carries the same one, from the same source.
func TestDemoOneStylesheet(t *testing.T) {
	base := startDemo(t)
	b := harness.NewBrowser(t)
	css := b.Get(base + "/style.css")
	if css.StatusCode != http.StatusOK || css.Body != string(devpage.CSS()) || !strings.HasPrefix(css.Header.Get("Content-Type"), "text/css") {
		t.Fatalf("/style.css: %d %s", css.StatusCode, css.Header.Get("Content-Type"))
	}
	home := b.Get(base + "/")
	if !strings.Contains(home.Body, `<link rel="stylesheet" href="/style.css">`) || strings.Contains(home.Body, "<style") {
		t.Errorf("the home page does not link the stylesheet alone:\n%s", home.Body)
	}
	if again := b.Do(withHeader(t, base+"/style.css", "If-None-Match", css.Header.Get("ETag"))); again.StatusCode != http.StatusNotModified {
		t.Errorf("revalidating the stylesheet: %d", again.StatusCode)
	}
	for _, p := range []string{"microblog", "socialnet", "search_oauth2", "blog_oauth2", "saml", "oidc"} {
		page := firstProviderPage(t, harness.NewBrowser(t), base, p)
		m := styleTag.FindStringSubmatch(page.Body)
		if m == nil || m[1] != string(devpage.CSS()) {
			t.Errorf("%s's page at %s does not carry the shared stylesheet", p, page.URL.Path)
		}
		if !strings.Contains(page.Body, `<body class="provider">`) || !strings.Contains(page.Body, "development provider") {
			t.Errorf("%s's page lacks the provider layout", p)
		}
	}
}

// firstProviderPage starts a sign-in with p and returns the provider's page,
// waiting out the SAML SP's first metadata fetch.
func firstProviderPage(t *testing.T, b *harness.Browser, base, p string) *harness.Response {
	t.Helper()
	for range 100 {
		page := b.PostForm(base+"/users/auth/"+p, nil)
		if page.StatusCode != http.StatusServiceUnavailable {
			if page.StatusCode != http.StatusOK || !strings.HasPrefix(page.URL.Path, "/dev/"+p+"/") {
				t.Fatalf("%s: the sign-in led to %s (%d)", p, page.URL, page.StatusCode)
			}
			return page
		}
	}
	t.Fatalf("%s stayed unavailable", p)
	return nil
}

func withHeader(t *testing.T, u, k, v string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(k, v)
	return req
}

// The signed-in page reads as a card: name, email and whether it is
// verified, the provider by its label and slug, the UID; the raw JSON is
// folded away.
func TestDemoIdentityCard(t *testing.T) {
	base := startDemo(t)
	b := harness.NewBrowser(t)
	oidcSignIn(t, b, base)
	page := b.Get(base + "/")
	for _, want := range []string{
		`<dd id="name">Alice Example</dd>`,
		`<span id="email">alice@example.org</span><span class="badge ok" id="email-verified">verified</span>`,
		`<dd>OpenID Connect <code id="provider">oidc</code></dd>`,
		`<dd><code id="uid">248289761001</code></dd>`,
		`<details>
<summary>Raw identity (JSON)</summary>
<pre id="identity">{`,
	} {
		if !strings.Contains(page.Body, want) {
			t.Errorf("the signed-in page lacks %s", want)
		}
	}
	if strings.Contains(page.Body, `id="tenant"`) {
		t.Error("the demo's own site shows a tenant")
	}
	raw := html.UnescapeString(page.Body[strings.Index(page.Body, `<pre id="identity">`):])
	if !strings.Contains(raw, `"provider": "oidc"`) || !strings.Contains(raw, `"email_verified": true`) || !strings.Contains(raw, `[REDACTED]`) {
		t.Errorf("the raw JSON is not the redacted identity: %.600s", raw)
	}
}

// A SAML identity lists its attributes under their friendly names beside
// the OIDs the IdP sent; SAML never vouches for the email.
func TestDemoSAMLAttributes(t *testing.T) {
	base := startDemo(t)
	b := harness.NewBrowser(t)
	samlSignIn(t, b, base)
	page := b.Get(base + "/")
	for _, want := range []string{
		`<dd id="name">Ada Lovelace</dd>`,
		`<span class="badge" id="email-unverified">not verified</span>`,
		`<table id="saml-attributes" class="stacked">`,
		`<td><strong>mail</strong></td><td class="oid">urn:oid:0.9.2342.19200300.100.1.3</td><td>ada@example.org</td>`,
		`<td><strong>givenName</strong></td><td class="oid">urn:oid:2.5.4.42</td><td>Ada</td>`,
		`<td><strong>displayName</strong></td><td class="oid">urn:oid:2.16.840.1.113730.3.1.241</td><td>Ada Lovelace</td>`,
	} {
		if !strings.Contains(page.Body, want) {
			t.Errorf("the signed-in page lacks %s", want)
		}
	}
	for name, want := range map[string]string{
		"urn:oid:1.3.6.1.4.1.5923.1.1.1.6":                                   "eduPersonPrincipalName",
		"http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress": "emailaddress",
		"memberOf":                  "memberOf",
		"urn:oid:1.2.3.4.5.6.7.8.9": "",
	} {
		if got := friendlyName(name); got != want {
			t.Errorf("friendlyName(%q) = %q, want %q", name, got, want)
		}
	}
}

// The failure page explains the code in plain words, with the status the
// code calls for.
func TestDemoFailurePage(t *testing.T) {
	base := startDemo(t)
	b := harness.NewBrowser(t)
	consent := b.PostForm(base+"/users/auth/blog_oauth2", nil)
	page := b.PostForm(consent.URL.String(), url.Values{"decision": {"deny"}})
	for _, want := range []string{
		`<section class="card error" id="failure">`,
		`<h1>Sign-in didn&#39;t complete</h1>`,
		explanations[extauth.CodeAccessDenied].what[:40],
		`<dd>WordPress <code>blog_oauth2</code></dd>`,
		`<code id="failure-code">access_denied</code> <span class="muted small">HTTP 403</span>`,
		`<a class="btn primary" href="/" id="back">Back to sign-in</a>`,
	} {
		if !strings.Contains(page.Body, html.EscapeString(want)) && !strings.Contains(page.Body, want) {
			t.Errorf("the failure page lacks %s", want)
		}
	}
	if !strings.Contains(page.Body, `<dd id="message">You did not allow the sign-in.</dd>`) {
		t.Errorf("the failure page does not give extauth's message as a sentence:\n%s", page.Body)
	}
	if page.StatusCode != http.StatusForbidden {
		t.Errorf("status %d, want 403", page.StatusCode)
	}

	// A .json route gets JSON, as from the library's own failure page:
	// here a sign-in started by a link on another site.
	b.Header = http.Header{"Sec-Fetch-Site": {"cross-site"}}
	json := b.Get(base + "/users/auth/blog_oauth2.json")
	if json.StatusCode != http.StatusForbidden || json.Header.Get("Content-Type") != "application/json" ||
		!strings.Contains(json.Body, `"error":"csrf_detected"`) {
		t.Errorf("a .json failure: %d %s %s", json.StatusCode, json.Header.Get("Content-Type"), json.Body)
	}
}

// Every code extauth defines has its plain words: the test reads the codes
// from the library's source, so a new code cannot go unexplained.
func TestDemoExplainsEveryCode(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "../../errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var codes []extauth.Code
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || vs.Type == nil || len(vs.Values) != 1 {
			return true
		}
		if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Code" {
			return true
		}
		if lit, ok := vs.Values[0].(*ast.BasicLit); ok {
			s, _ := strconv.Unquote(lit.Value)
			codes = append(codes, extauth.Code(s))
		}
		return true
	})
	if len(codes) < 9 {
		t.Fatalf("found only %d codes in errors.go: %q", len(codes), codes)
	}
	for _, c := range codes {
		e, ok := explanations[c]
		if !ok || e.what == "" || e.todo == "" {
			t.Errorf("no plain words for %s", c)
		}
	}
	if len(explanations) != len(codes) {
		t.Errorf("%d explanations for %d codes", len(explanations), len(codes))
	}
}

// Each fault a development provider plays reaches the failure page with
// its own explanation and status.
func TestDemoFailurePageForEachFault(t *testing.T) {
	base, demo := startDemoWith(t, serverOptions{})
	fakes := demo.dev.fakes[""]
	for _, tc := range []struct {
		provider extauth.Provider
		fault    extauthtest.Fault
		code     extauth.Code
	}{
		{extauth.BlogOAuth2, extauthtest.ServerError, extauth.CodeProviderUnavailable},
		{extauth.BlogOAuth2, extauthtest.HugeBody, extauth.CodeInvalidResponse},
		{extauth.OIDC, extauthtest.WrongIssuer, extauth.CodeInvalidResponse},
	} {
		if err := fakes.SetFault(tc.provider, tc.fault); err != nil {
			t.Fatal(err)
		}
		b := harness.NewBrowser(t)
		page := b.PostForm(base+"/users/auth/"+string(tc.provider), nil)
		switch tc.provider {
		case extauth.BlogOAuth2:
			page = b.PostForm(page.URL.String(), url.Values{"decision": {"approve"}})
		case extauth.OIDC:
			page = b.PostForm(base+formAction(t, page.Body), url.Values{
				"interaction": {hiddenValue(page.Body, "interaction")}, "user": {"248289761001"}, "decision": {"approve"}})
		}
		fakes.SetFault(tc.provider, extauthtest.NoFault)
		if page.StatusCode != tc.code.HTTPStatus() || !strings.Contains(page.Body, `<code id="failure-code">`+string(tc.code)+`</code>`) ||
			!strings.Contains(page.Body, html.EscapeString(explanations[tc.code].what)) {
			t.Errorf("%s %s: %d %s", tc.provider, tc.fault, page.StatusCode, page.Body)
		}
	}
}
