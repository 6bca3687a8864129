package extauthtest_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest"
)

// The OpenID providers' consent pages name the application by
// ProvidersOptions.AppName, as a real provider shows the name a client
// registered, and by its client ID without one.
func TestConsentPagesNameTheApplication(t *testing.T) {
	only := []extauth.Provider{extauth.OIDC, extauth.SearchOAuth2}
	for name, want := range map[string]string{"Ada's Bookshop": "<strong>Ada&#39;s Bookshop</strong> asks to sign you in", "": "<strong>extauthtest-client</strong> asks"} {
		a, _ := newAppWithProviders(t, extauthtest.ProvidersOptions{Only: only, Interactive: true, AppName: name}, nil)
		for _, p := range only {
			page := extauthtest.NewBrowser(t).Post(a.URL+"/users/auth/"+string(p), url.Values{})
			if !strings.Contains(page.Body, want) {
				t.Errorf("AppName %q: %s's consent page lacks %q:\n%s", name, p, want, page.Body)
			}
		}
	}
}
