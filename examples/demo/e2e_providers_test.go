//go:build e2e

package main

import (
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// e2eProvider says how a real browser gets through one development
// provider's pages and what the demo must show afterwards. Adding a provider
// to the demo means adding its row here: the suite fails while the home
// page's sign-in buttons and this table disagree.
type e2eProvider struct {
	name string // the slug: the home page's button is #signin-<name>
	// approve gets from the provider's first page back to the demo as a
	// user who consents; the suite then waits for the home page's #uid.
	approve steps
	// deny gets back refusing consent; nil when the provider's page offers
	// no refusal. The demo must then show access_denied.
	deny steps
	uid  string // the UID the demo shows for the development user
	// txCookie is how the browser must hold the sign-in transaction cookie
	// while the user is on the provider's pages.
	txCookie cookieWant
	// signOut lists the document requests the home page's Sign out button
	// leads to, "METHOD path" for the demo's own pages, when the provider
	// ends its own session too; nil means the demo's local sign-out alone,
	// localSignOut, after which the home page notes that the provider's
	// session goes on.
	signOut []string
	// signOutAt gets through the provider's pages during sign-out (an
	// OpenID provider asks to confirm); nil when it has none.
	signOutAt steps
}

// localSignOut is a sign-out that never leaves the demo.
var localSignOut = []string{"POST /logout", "GET /"}

// steps are browser actions in order; click (e2e_browser_test.go) with a
// CSS selector is the usual one. A login form would add
// chromedp.SendKeys(chromedp.ID("user"), "alice") before its click.
type steps = []chromedp.Action[chromedp.Void]

// cookieWant is the expected shape of a transaction cookie in the browser.
// HttpOnly is always required. A provider whose callback is a cross-site
// POST (SAML) needs SameSite=None, which browsers accept only with Secure,
// so such a row reads {sameSite: network.CookieSameSiteNone, secure: true,
// path: "/users/auth/saml/callback"}.
type cookieWant struct {
	sameSite network.CookieSameSite
	secure   bool
	path     string
}

// e2eProviders lists the demo's development providers in this build.
func e2eProviders() []e2eProvider {
	return []e2eProvider{
		{
			name:    "blog_oauth2",
			approve: steps{click("#approve")},
			deny:    steps{click("#deny")},
			uid:     "42",
			// The OAuth callback is a top-level GET, which Lax lets through;
			// the demo runs on plain HTTP, so no Secure.
			txCookie: cookieWant{sameSite: network.CookieSameSiteLax, path: "/"},
		},
		{
			name: "microblog",
			// The account picker: one form per user, each with its own
			// Approve button; Cancel is a form of its own.
			approve: steps{click(`form:has(input[name=user][value="1234567890123456789"]) button[value=approve]`)},
			deny:    steps{click(`button[name=action][value=deny]`)},
			uid:     "1234567890123456789",
			// OAuth 1.0a returns with a top-level GET too.
			txCookie: cookieWant{sameSite: network.CookieSameSiteLax, path: "/"},
		},
		{
			name:     "socialnet",
			approve:  steps{click(`form:has(input[name=user][value="10158123456789012"]) button[value=approve]`)},
			deny:     steps{click(`button[name=action][value=deny]`)},
			uid:      "10158123456789012",
			txCookie: cookieWant{sameSite: network.CookieSameSiteLax, path: "/"},
		},
		{
			name: "saml",
			// Approve answers with the HTTP-POST binding's self-submitting
			// form; the browser's script posts it to the callback.
			approve: steps{click(`button[name=decision][value=approve]`)},
			// Deny posts a Response with a non-Success status and no
			// assertion, which samlsp reports as access_denied.
			deny: steps{click(`button[name=decision][value=deny]`)},
			uid:  "ada@example.org",
			// On plain HTTP the cookie cannot be SameSite=None (browsers
			// demand Secure for it), and the development IdP shares the
			// demo's origin, so its POST is same-site and Lax suffices.
			// TestE2ESAMLCrossSiteOverHTTPS (e2e_crosssite_test.go)
			// serves the demo over HTTPS with the IdP on another site and
			// expects {network.CookieSameSiteNone, true, "/users/auth/saml/callback"}.
			txCookie: cookieWant{sameSite: network.CookieSameSiteLax, path: "/"},
			// Sign-out is SAML single logout: the demo sends a
			// LogoutRequest to the IdP, whose LogoutResponse comes back to
			// the logout route, which then goes home.
			signOut: []string{"POST /logout", "GET /dev/saml/slo", "GET /users/auth/saml/logout", "GET /"},
		},
		{
			name: "oidc",
			// The fake OP's account picker has the first user checked.
			approve:  steps{click(`button[name=decision][value=approve]`)},
			deny:     steps{click(`button[name=decision][value=deny]`)},
			uid:      "248289761001",
			txCookie: cookieWant{sameSite: network.CookieSameSiteLax, path: "/"},
			// Sign-out is RP-initiated logout: the demo sends the browser
			// to the OP's end_session_endpoint, where the user confirms;
			// the OP comes back to post_logout with our state, which goes
			// home.
			signOut: []string{"POST /logout", "GET /dev/oidc/end_session",
				"POST /dev/oidc/end_session/decision", "GET /users/auth/oidc/post_logout", "GET /"},
			signOutAt: steps{click("#op-logout")},
		},
		{
			name:     "search_oauth2",
			approve:  steps{click(`button[name=decision][value=approve]`)},
			deny:     steps{click(`button[name=decision][value=deny]`)},
			uid:      "248289761001",
			txCookie: cookieWant{sameSite: network.CookieSameSiteLax, path: "/"},
			// Google, and its stand-in, have no end_session_endpoint: the
			// sign-out is local, and the home page says so.
		},
	}
}
