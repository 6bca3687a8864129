package extauthtest_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest"
	"github.com/extauth/extauth/extauthtest/oidcop"
)

// The fake federation signs the application in at its OP by automatic
// registration, offline: the application resolves the OP's chain through
// the intermediate to the anchor (the OP's trust mark required), the OP
// resolves the application's from the entity configuration it serves.
func TestFederationSignIn(t *testing.T) {
	for _, fromYAML := range []bool{false, true} {
		var fed *extauthtest.Federation
		a := newApp(t, func(base string) *extauth.Config {
			fed = extauthtest.NewFederation(t, base, extauthtest.FederationOptions{})
			if !fromYAML {
				return fed.Config()
			}
			cfg, err := extauth.ParseConfig(fed.SecretsYAML())
			if err != nil {
				t.Fatalf("%v\n%s", err, fed.SecretsYAML())
			}
			return cfg
		}, nil)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := a.Ready(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		page := extauthtest.NewBrowser(t).Post(a.URL+"/users/auth/oidc", url.Values{"return_to": {"/after"}})
		if page.URL.Path != "/after" {
			t.Fatalf("yaml %v: ended at %s (%d): %s, failure %v", fromYAML, page.URL, page.StatusCode, page.Body, a.lastFailure())
		}
		ids := a.identities()
		if len(ids) != 1 || ids[0].Email != oidcop.DemoUsers()[0].Email {
			t.Fatalf("identities %+v", ids)
		}
		if fed.OP.Hits(oidcop.Authorize) != 1 || fed.OP.LastAuthorizeQuery().Get("client_id") != a.URL+"/users/auth/oidc" {
			t.Fatalf("authorization request %v", fed.OP.LastAuthorizeQuery())
		}
	}
}

// The OP refuses an application its federation does not vouch for: here
// one whose federation key the intermediate does not hold.
func TestFederationRefusesAnotherKey(t *testing.T) {
	var fed *extauthtest.Federation
	a := newApp(t, func(base string) *extauth.Config {
		fed = extauthtest.NewFederation(t, base, extauthtest.FederationOptions{})
		cfg := fed.Config()
		other := extauthtest.NewFederation(t, base, extauthtest.FederationOptions{}).Config()
		cfg.OIDC.Additional.Federation.FederationKey = other.OIDC.Additional.Federation.FederationKey
		return cfg
	}, nil)
	page := extauthtest.NewBrowser(t).Post(a.URL+"/users/auth/oidc", url.Values{"return_to": {"/after"}})
	if page.URL.Path == "/after" || page.StatusCode == http.StatusOK && len(a.identities()) > 0 {
		t.Fatalf("signed in with a key the federation does not hold: %s %d", page.URL, page.StatusCode)
	}
	if fed.OP.Hits(oidcop.Authorize) != 1 {
		t.Fatalf("%d authorization requests", fed.OP.Hits(oidcop.Authorize))
	}
}

// Each tenant is a relying party of its own: its entity identifier is
// under its host, where its entity configuration is served, and it signs
// in at its own federation's OP.
func TestFederationTenants(t *testing.T) {
	feds := map[string]*extauthtest.Federation{}
	a := newApp(t, func(base string) *extauth.Config {
		u, _ := url.Parse(base)
		cfg := &extauth.Config{Tenants: map[string]*extauth.Config{}}
		for _, tenant := range []string{"city-a", "city-b"} {
			feds[tenant] = extauthtest.NewFederation(t, "http://"+tenant+".localhost:"+u.Port(), extauthtest.FederationOptions{})
			cfg.Tenants[tenant] = feds[tenant].Config()
		}
		return cfg
	}, func(o *extauth.Options) {
		o.BaseURL = strings.Replace(o.BaseURL, "127.0.0.1", "localhost", 1)
		o.TenantOf = extauth.SubdomainTenants("localhost")
	})
	u, _ := url.Parse(a.URL)
	for _, tenant := range []string{"city-a", "city-b"} {
		site := "http://" + tenant + ".localhost:" + u.Port()
		page := extauthtest.NewBrowser(t).Post(site+"/users/auth/oidc", url.Values{"return_to": {"/after"}})
		if page.URL.Path != "/after" {
			t.Fatalf("%s: ended at %s (%d): %s, failure %v", tenant, page.URL, page.StatusCode, page.Body, a.lastFailure())
		}
		if got := feds[tenant].OP.LastAuthorizeQuery().Get("client_id"); got != site+"/users/auth/oidc" {
			t.Fatalf("%s: client_id %q", tenant, got)
		}
	}
}
