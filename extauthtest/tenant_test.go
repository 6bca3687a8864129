package extauthtest_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest"
	"github.com/extauth/extauth/extauthtest/oidcop"
	"github.com/extauth/extauth/extauthtest/samlidp"
)

// Each tenant gets its own SAML IdP and OpenID provider, started for the
// tenant's base URL, and signs in there, and only there. Each tenant's
// fakes are served on the tenant's own host: over plain HTTP a SAML
// callback's cookie is SameSite=Lax, which a browser does not send with
// an IdP's POST from another site (127.0.0.1 is another site than
// city-a.localhost), so an IdP elsewhere would fail in a browser, as it
// does in the test's.
func TestProvidersForTenants(t *testing.T) {
	var (
		mu   sync.Mutex
		seen []string
		auth *extauth.Auth
	)
	tenantURL := map[string]string{}
	extauthtest.Serve(t, func(base string) http.Handler {
		// Tenants live on subdomains of localhost, which the Browser and
		// the fakes reach at 127.0.0.1.
		base = strings.Replace(base, "127.0.0.1", "localhost", 1)
		cfg := &extauth.Config{Tenants: map[string]*extauth.Config{}}
		mux := http.NewServeMux()
		for _, tn := range []string{"city-a", "city-b"} {
			tenantURL[tn] = strings.Replace(base, "localhost", tn+".localhost", 1)
			tmux := http.NewServeMux()
			fakes, err := extauthtest.MountProviders(tmux, tenantURL[tn], "/dev/", extauthtest.ProvidersOptions{
				Only:      []extauth.Provider{extauth.SAML, extauth.OIDC},
				OIDCUsers: []oidcop.User{{Sub: tn + "-sub", Email: "ada@" + tn + ".example", EmailVerified: true, Name: "Ada"}},
				SAMLUser:  &samlidp.User{NameID: tn + "-nameid", Email: "ada@" + tn + ".example", DisplayName: "Ada"},
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(fakes.Close)
			mux.Handle(tn+".localhost/dev/", tmux)
			cfg.Tenants[tn] = fakes.Config()
		}
		a, err := extauth.New(cfg, extauth.Options{
			BaseURL:   base,
			CookieKey: make([]byte, 32),
			Logger:    slog.New(slog.DiscardHandler),
			TenantOf:  extauth.SubdomainTenants("localhost"),
			OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
				mu.Lock()
				seen = append(seen, fmt.Sprint(extauth.Tenant(r), " ", id.Provider, " ", id.UID))
				mu.Unlock()
				http.Redirect(w, r, extauth.ReturnTo(r), http.StatusSeeOther)
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		auth = a
		a.Mount(mux)
		return mux
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tn := range []string{"city-a", "city-b"} {
		if err := auth.TenantReady(ctx, tn); err != nil {
			t.Fatal(err)
		}
		for _, p := range []extauth.Provider{extauth.SAML, extauth.OIDC} {
			page := extauthtest.NewBrowser(t).Post(tenantURL[tn]+"/users/auth/"+string(p), url.Values{"return_to": {"/done"}})
			if page.URL.Path != "/done" || !strings.HasPrefix(page.URL.Host, tn+".localhost:") {
				t.Fatalf("%s %s: ended at %s (%d) %s", tn, p, page.URL, page.StatusCode, page.Body)
			}
		}
	}
	want := []string{"city-a saml city-a-nameid", "city-a oidc city-a-sub", "city-b saml city-b-nameid", "city-b oidc city-b-sub"}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("signed in %q, want %q", seen, want)
	}
	if err := auth.TenantReady(ctx, "city-z"); !errors.Is(err, extauth.ErrUnknownTenant) {
		t.Fatalf("an unknown tenant: %v", err)
	}
}
