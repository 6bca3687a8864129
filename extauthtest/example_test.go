package extauthtest_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest"
)

// A test of the application's SAML sign-in in mock mode: no IdP, no SAML
// configuration, the application's own routes, hook, session and pages.
// (The test function is a literal here only because an example cannot be
// a test.)
func ExampleMock() {
	testSAMLSignIn := func(t *testing.T, auth *extauth.Auth, appURL string) {
		extauthtest.Mock(auth).SignIn(extauth.SAML)
		page := extauthtest.NewBrowser(t).Post(appURL+"/users/auth/saml", url.Values{"return_to": {"/account"}})
		if page.URL.Path != "/account" || !strings.Contains(page.Body, "Ada Lovelace") {
			t.Fatalf("ended at %s: %s", page.URL, page.Body)
		}
	}
	_ = testSAMLSignIn
}

// Fail makes the next sign-in reach the application's failure page.
func ExampleMocks_Fail() {
	testDenied := func(t *testing.T, auth *extauth.Auth, appURL string) {
		extauthtest.Mock(auth).Fail(extauth.OIDC, extauth.CodeAccessDenied)
		page := extauthtest.NewBrowser(t).Post(appURL+"/users/auth/oidc", nil)
		if page.StatusCode != http.StatusForbidden {
			t.Fatalf("%d %s", page.StatusCode, page.Body)
		}
	}
	_ = testDenied
}

// A test changes what it is about in the provider's default identity.
func ExampleDefaultIdentity() {
	id := extauthtest.DefaultIdentity(extauth.SAML)
	id.Email = "grace@example.org"
	fmt.Println(id.UID, id.SAML.NameIDFormat)
	fmt.Println(id.SAML.Attributes["urn:oid:2.5.4.42"], id.EmailVerified)
	// Output:
	// ada@example.org urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress
	// [Ada] false
}

// One call starts the six providers for the application at its base URL
// and gives its configuration.
func ExampleStartProviders() {
	const base = "http://127.0.0.1:3000"
	fakes, err := extauthtest.StartProviders(base, extauthtest.ProvidersOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer fakes.Close()
	cfg := fakes.Config()
	a, err := extauth.New(cfg, extauth.Options{BaseURL: base, CookieKey: make([]byte, 32),
		OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {}})
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	fmt.Println(a.Providers())
	fmt.Println(cfg.OIDC.Issuer == fakes.URL(extauth.OIDC), strings.HasPrefix(cfg.OIDC.Issuer, "http://127.0.0.1:"))
	// Output:
	// [microblog socialnet search_oauth2 blog_oauth2 saml oidc]
	// true true
}

// Fakes that misbehave, for the application's failure page.
func ExampleProviders_SetFault() {
	fakes, err := extauthtest.StartProviders("http://127.0.0.1:3000", extauthtest.ProvidersOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer fakes.Close()
	fmt.Println(fakes.SetFault(extauth.SAML, extauthtest.Deny))         // access_denied
	fmt.Println(fakes.SetFault(extauth.OIDC, extauthtest.WrongIssuer))  // invalid_response
	fmt.Println(fakes.SetFault(extauth.BlogOAuth2, extauthtest.Hang))   // timeout
	fmt.Println(fakes.SetFault(extauth.Microblog, extauthtest.Expired)) // OAuth 1 signs nothing
	// Output:
	// <nil>
	// <nil>
	// <nil>
	// extauthtest: microblog cannot play the fault "expired"
}

// The developer provider, in a development server only.
func ExampleAddDeveloper() {
	o := extauth.Options{BaseURL: "http://127.0.0.1:3000", CookieKey: make([]byte, 32),
		OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {}}
	if err := extauthtest.AddDeveloper(&o, extauthtest.DeveloperOptions{}); err != nil {
		log.Fatal(err)
	}
	a, err := extauth.New(&extauth.Config{}, o)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	fmt.Println(a.Providers())

	prod := extauth.Options{BaseURL: "https://app.example.org"}
	fmt.Println(extauthtest.AddDeveloper(&prod, extauthtest.DeveloperOptions{}) != nil)
	// Output:
	// [developer]
	// true
}

// A tenant's own SAML IdP and OpenID provider, started for the tenant's
// base URL: their Config is the tenant's configuration.
func ExampleStartProviders_tenant() {
	cityA, err := extauthtest.StartProviders("http://city-a.localhost:3000", extauthtest.ProvidersOptions{
		Only: []extauth.Provider{extauth.SAML, extauth.OIDC},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer cityA.Close()
	cfg := &extauth.Config{Tenants: map[string]*extauth.Config{"city-a": cityA.Config()}}
	a, err := extauth.New(cfg, extauth.Options{BaseURL: "http://localhost:3000", CookieKey: make([]byte, 32),
		TenantOf:  extauth.SubdomainTenants("localhost"),
		OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {}})
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fmt.Println(a.TenantReady(ctx, "city-a"))
	// Output: <nil>
}

// A whole OpenID Federation, offline: the application signs in at its OP
// by automatic registration.
func ExampleNewFederation() {
	testFederationSignIn := func(t *testing.T) {
		var fed *extauthtest.Federation
		srv := extauthtest.Serve(t, func(base string) http.Handler {
			fed = extauthtest.NewFederation(t, base, extauthtest.FederationOptions{})
			auth, err := extauth.New(fed.Config(), extauth.Options{BaseURL: base, CookieKey: make([]byte, 32),
				OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) { fmt.Fprint(w, id.Email) }})
			if err != nil {
				t.Fatal(err)
			}
			mux := http.NewServeMux()
			auth.Mount(mux)
			return mux
		})
		page := extauthtest.NewBrowser(t).Post(srv.URL+"/users/auth/oidc", nil)
		if page.Body != "alice@example.org" || fed.OP.LastAuthorizeQuery().Get("client_id") != srv.URL+"/users/auth/oidc" {
			t.Fatalf("%d %s", page.StatusCode, page.Body)
		}
	}
	_ = testFederationSignIn
}
