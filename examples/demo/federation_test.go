package main

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/extauth/extauth/extauthtest"
)

// The federation tenant signs in through the discovery page: a search by
// name in any language, a click on the IdP, its login page; then the admin
// area steps up at that same IdP, and comes back at the level high.
func TestDemoFederationDiscoveryAndStepUp(t *testing.T) {
	base, demo := startDemoWith(t, serverOptions{})
	u, _ := url.Parse(base)
	fed := "http://" + federationTenant + ".localhost:" + u.Port()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := demo.auth.TenantReady(ctx, federationTenant); err != nil {
		t.Fatal(err)
	}
	b := extauthtest.NewBrowser(t)
	b.Header.Set("Accept-Language", "de")
	home := b.Get(fed + "/")
	if !strings.Contains(home.Body, "<h1>Sign in to "+federationName+"</h1>") {
		t.Fatalf("the federation tenant's home page:\n%s", home.Body)
	}
	disc := b.Click(home, "signin-saml")
	for _, want := range []string{`<html lang="de">`, "Mit Ihrer Organisation anmelden", "Universität Lichtenberg", "Ada Lovelace University", "3 Organisationen."} {
		if !strings.Contains(disc.Body, want) {
			t.Errorf("the discovery page lacks %q:\n%s", want, disc.Body)
		}
	}
	found := b.Submit(disc, "Suchen", url.Values{"q": {"universitat"}})
	if !strings.Contains(found.Body, "Universität Lichtenberg") || strings.Contains(found.Body, "Ada Lovelace University") || !strings.Contains(found.Body, "1 Organisation.") {
		t.Fatalf("a search for universitat:\n%s", found.Body)
	}
	login := b.Click(found, "Universität Lichtenberg")
	if !strings.Contains(login.Body, "Emmy Noether") {
		t.Fatalf("the IdP's login page:\n%s", login.Body)
	}
	signedIn := b.Submit(login, "Approve", nil)
	if !strings.Contains(signedIn.Body, `<code id="uid">emmy@lichtenberg.example</code>`) || !strings.Contains(signedIn.Body, `/dev/idp/lichtenberg/metadata</code>`) {
		t.Fatalf("signed in:\n%s", signedIn.Body)
	}
	// The admin area needs level high: the step-up page submits itself
	// (the browser came from this site), to the same IdP, which asks again.
	again := b.Click(signedIn, "Admin area")
	if !strings.Contains(again.Body, "Emmy Noether") || !strings.Contains(again.URL.Path, "/dev/idp/lichtenberg/") {
		t.Fatalf("the step-up went to %s:\n%s", again.URL, again.Body)
	}
	admin := b.Submit(again, "Approve", nil)
	if admin.URL.Path != "/admin" || !strings.Contains(admin.Body, `<code id="admin-acr">`+classHigh+`</code>`) ||
		!strings.Contains(admin.Body, `<dd id="admin-uid">emmy@lichtenberg.example</dd>`) {
		t.Fatalf("after the step-up: %s %d\n%s", admin.URL, admin.StatusCode, admin.Body)
	}
	if p := b.Get(fed + "/admin"); p.StatusCode != http.StatusOK || p.URL.Path != "/admin" {
		t.Errorf("a second visit: %s %d", p.URL, p.StatusCode)
	}
}
