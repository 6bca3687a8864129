//go:build e2e

package main

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestE2ESocialnetLeavesNoFragment: socialnet, like Facebook, appends #_=_
// to the callback URL, and the browser keeps it across the redirect home.
// The demo's pages strip it, as Facebook apps do, so the address bar shows
// the page alone; any other fragment stays.
func TestE2ESocialnetLeavesNoFragment(t *testing.T) {
	d := startDemoServer(t)
	tb := startBrowser(t).open(t, d)
	tb.do("sizing the page as a laptop's", laptop)

	tb.startSignIn("socialnet")
	tb.do("continuing at the social network", e2eProvider{name: "socialnet"}.approveSteps()...)
	tb.do("waiting for the signed-in home page", chromedp.WaitVisible(chromedp.ID("uid")))
	if href := tb.href(); href != d.base+"/" {
		t.Errorf("signed in with socialnet, the address bar shows %s, want %s/", href, d.base)
	}
	tb.screenshot("30-signed-in-socialnet")

	for fragment, want := range map[string]string{"#_=_": "/", "#identity": "/#identity"} {
		// From another document: a fragment alone would not load the page.
		tb.do("loading the home page with "+fragment, chromedp.Navigate("about:blank"),
			chromedp.Navigate(d.base+"/"+fragment), chromedp.WaitVisible(chromedp.ID("uid")))
		if href := tb.href(); href != d.base+want {
			t.Errorf("loaded with %s, the address bar shows %s, want %s%s", fragment, href, d.base, want)
		}
	}
}

// TestE2EProviderButtons: every development provider's first page has one
// look for its actions: what signs the user in is a filled button in the
// provider's colour, what refuses is an outlined one, no bolder than it.
func TestE2EProviderButtons(t *testing.T) {
	d := startDemoServer(t)
	b := startBrowser(t)
	for i, p := range e2eProviders() {
		t.Run(p.name, func(t *testing.T) {
			tb := b.open(t, d)
			tb.do("sizing the page as a laptop's", laptop)
			tb.startSignIn(p.name)
			type button struct {
				Text, Value, Background, Border string
				Weight                          int
			}
			buttons := get(tb, "reading the buttons", chromedp.Evaluate[[]button](`Array.from(document.querySelectorAll("button"), b => {
				const s = getComputedStyle(b);
				return {Text: b.innerText, Value: b.value, Background: s.backgroundColor, Border: s.borderTopColor, Weight: parseInt(s.fontWeight)};
			})`))
			accent := get(tb, "reading the provider's colour", chromedp.Evaluate[string](`(() => {
				const probe = document.createElement("span");
				probe.style.color = "var(--accent)";
				document.body.append(probe);
				const c = getComputedStyle(probe).color;
				probe.remove();
				return c;
			})()`))
			var approve, deny []button
			for _, b := range buttons {
				switch b.Value {
				case "approve":
					approve = append(approve, b)
				case "deny":
					deny = append(deny, b)
				}
			}
			if len(approve) == 0 || len(deny) == 0 {
				t.Fatalf("the page has approving buttons %v and refusing ones %v; want both", approve, deny)
			}
			for _, a := range approve {
				if a.Background != accent {
					t.Errorf("%q is %s, not filled with the provider's colour %s", a.Text, a.Background, accent)
				}
				for _, r := range deny {
					if r.Background == accent || r.Weight > a.Weight {
						t.Errorf("%q (%s, weight %d) stands out more than %q (%s, weight %d)", r.Text, r.Background, r.Weight, a.Text, a.Background, a.Weight)
					}
				}
			}
			tb.screenshot(strings.Join([]string{"31", string(rune('a' + i)), "first-page", p.name}, "-"))
		})
	}
}

// TestE2ESAMLAttributesFitOnANarrowScreen: at 500 px, a phone's width, the
// SAML attributes table stays inside its card and the page does not
// scroll sideways.
func TestE2ESAMLAttributesFitOnANarrowScreen(t *testing.T) {
	d := startDemoServer(t)
	tb := startBrowser(t).open(t, d)
	tb.do("sizing the page at 500 px", chromedp.EmulateViewport(500, 900))
	tb.startSignIn("saml")
	tb.do("approving at the IdP", click(`button[name=decision][value=approve]`))
	tb.do("waiting for the signed-in page", chromedp.WaitVisible(chromedp.ID("saml-attributes")))
	type box struct{ TableRight, CardRight, PageWidth, ViewWidth float64 }
	got := get(tb, "measuring the table", chromedp.Evaluate[box](`(() => {
		const table = document.querySelector("#saml-attributes"), card = table.closest(".card");
		const cs = getComputedStyle(card);
		return {TableRight: table.getBoundingClientRect().right,
			CardRight: card.getBoundingClientRect().right - parseFloat(cs.paddingRight) - parseFloat(cs.borderRightWidth),
			PageWidth: document.documentElement.scrollWidth, ViewWidth: document.documentElement.clientWidth};
	})()`))
	if got.TableRight > got.CardRight+0.5 {
		t.Errorf("the attributes table ends at %.1f px, past its card's content at %.1f px", got.TableRight, got.CardRight)
	}
	if got.PageWidth > got.ViewWidth {
		t.Errorf("the page is %.0f px wide in a %.0f px window: it scrolls sideways", got.PageWidth, got.ViewWidth)
	}
	tb.screenshot("32-signed-in-saml-500px")
}

// TestE2EOIDCConsentNamesTheApplication: the OpenID provider's consent page
// names the application, as a real provider shows the client's registered
// name, not its client ID.
func TestE2EOIDCConsentNamesTheApplication(t *testing.T) {
	d := startDemoServer(t)
	tb := startBrowser(t).open(t, d)
	tb.do("sizing the page as a laptop's", laptop)
	for _, p := range []string{"oidc", "search_oauth2"} {
		tb.startSignIn(p)
		if text := tb.text("main"); !strings.Contains(text, "extauth demo asks to sign you in") || strings.Contains(text, "extauthtest-client") {
			t.Errorf("%s's consent page says:\n%s", p, text)
		}
		tb.screenshot("33-consent-names-the-application-" + p)
	}
}

// href is the tab's location.href, fragment included.
func (tb *tab) href() string {
	tb.t.Helper()
	return get(tb, "reading location.href", chromedp.Evaluate[string](`location.href`))
}

// approveSteps are the row's approve steps, from e2eProviders.
func (p e2eProvider) approveSteps() steps {
	for _, row := range e2eProviders() {
		if row.name == p.name {
			return row.approve
		}
	}
	return nil
}
