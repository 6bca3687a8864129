package extauth_test

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/enterprise"
	"github.com/extauth/extauth/extauthtest/oidcop"
	"github.com/extauth/extauth/internal/harness"
	"github.com/extauth/extauth/providers"
)

const (
	presetClient = "0oa1preset2client3x4"
	presetSecret = "preset-secret-5b3d"
)

// withLogouts has the application keep each sign-in's logout session and
// land signed-out browsers on /signed-out.
func withLogouts(l *logouts, s *presetSetup) {
	s.opts = l.options
	s.mux = func(mux *http.ServeMux, _ *extauth.Auth) {
		mux.HandleFunc("/signed-out", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "signed out") })
	}
}

// oktaApp is an application signing in with a fake Okta org, at the org
// authorization server (server "") or a custom one.
func oktaApp(t *testing.T, server string, edit func(*enterprise.OktaConfig), additional func(*extauth.OIDCAdditionalSettings), l *logouts) (*presetApp, *enterprise.Okta) {
	t.Helper()
	var okta *enterprise.Okta
	s := presetSetup{config: func(base string) extauth.OIDCConfig {
		srv, set := handlerServer(t)
		cfg := enterprise.OktaConfig{URL: srv.URL, ClientID: presetClient, ClientSecret: presetSecret,
			RedirectURIs:           []string{base + "/users/auth/oidc/callback"},
			PostLogoutRedirectURIs: []string{base + "/users/auth/oidc/post_logout"},
			AutoApprove:            true, Keys: opKeys()["RS256"]}
		if edit != nil {
			edit(&cfg)
		}
		o, err := enterprise.NewOkta(cfg)
		if err != nil {
			t.Fatal(err)
		}
		set(o)
		okta = o
		issuer := srv.URL
		if server != "" {
			issuer += "/oauth2/" + server
		}
		c := extauth.OIDCConfig{ClientID: presetClient, ClientSecret: extauth.NewSecret(presetSecret), Issuer: issuer,
			Additional: extauth.OIDCAdditionalSettings{Preset: "okta"}}
		if additional != nil {
			additional(&c.Additional)
		}
		return c
	}}
	if l != nil {
		withLogouts(l, &s)
	}
	return newPresetApp(t, s), okta
}

// Okta's org and custom authorization servers sign in, each with its
// groups; an ID token of one is refused by a client of the other; logout
// is Okta's end_session_endpoint with id_token_hint.
func TestOktaAuthorizationServers(t *testing.T) {
	t.Run("org", func(t *testing.T) {
		a, okta := oktaApp(t, "", func(c *enterprise.OktaConfig) { c.GroupsClaimFilter = true }, nil, nil)
		if resp := harness.NewBrowser(t).Get(a.URL + "/users/auth/oidc"); resp.StatusCode != http.StatusOK {
			t.Fatalf("sign-in: %d %s\n%s", resp.StatusCode, resp.Body, a.Logs)
		}
		id := a.only()
		if id.Tokens.Issuer != okta.Org().Issuer() || id.Raw["idp"] == nil || id.Directory == nil ||
			!slices.Equal(id.Directory.Groups, []string{"Everyone", "Engineering"}) || id.Directory.GroupsSource != extauth.GroupsFromToken {
			t.Errorf("identity %+v, directory %+v", id, id.Directory)
		}
	})
	t.Run("custom", func(t *testing.T) {
		a, okta := oktaApp(t, "default", nil, func(s *extauth.OIDCAdditionalSettings) { s.Scope = "openid email profile groups" }, nil)
		if resp := harness.NewBrowser(t).Get(a.URL + "/users/auth/oidc"); resp.StatusCode != http.StatusOK {
			t.Fatalf("sign-in: %d %s\n%s", resp.StatusCode, resp.Body, a.Logs)
		}
		id := a.only()
		if id.Tokens.Issuer != okta.Server("default").Issuer() || !slices.Contains(id.Directory.Groups, "Engineering") {
			t.Errorf("issuer %q, directory %+v", id.Tokens.Issuer, id.Directory)
		}
		// The org server's token, for the same client and user, is not
		// the custom server's: each signs with its own keys and names
		// itself. Both are refused.
		ctx := context.Background()
		claims := map[string]any{"iss": okta.Org().Issuer(), "sub": id.UID, "aud": presetClient,
			"iat": a.clock.Now().Unix(), "exp": a.clock.Now().Unix() + 300, "nonce": "n"}
		custom, err := providers.NewOIDC(providers.OIDCConfig{ClientID: presetClient, ClientSecret: presetSecret,
			Issuer: okta.Server("default").Issuer(), Options: providers.OIDCOptions{Preset: "okta"}},
			providers.Env{CallbackURL: a.URL + "/users/auth/oidc/callback", HTTPClient: http.DefaultClient, Now: a.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		for signer, why := range map[*oidcop.OP]string{okta.Org(): "no key of the provider's key set", okta.Server("default"): "issued by a different provider"} {
			tok, err := signer.SignJWT(nil, claims)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := custom.VerifyIDToken(ctx, tok, "", "n"); err == nil || !strings.Contains(err.Error(), why) {
				t.Errorf("the org server's ID token at a client of the custom server: %v, want %q", err, why)
			}
		}
	})
	t.Run("logout", func(t *testing.T) {
		l := &logouts{}
		a, _ := oktaApp(t, "default", nil, nil, l)
		at := presetLogout(t, a, harness.NewBrowser(t), l, "/oauth2/default/v1/logout")
		if at.Query().Get("id_token_hint") == "" {
			t.Errorf("Okta's logout without id_token_hint: %s", at)
		}
	})
}

// auth0App is an application signing in with a fake Auth0 tenant; issuer
// edits the issuer setting from the tenant's URL.
func auth0App(t *testing.T, preset bool, issuer func(string) string, edit func(*enterprise.Auth0Config), additional func(*extauth.OIDCAdditionalSettings), l *logouts) (*presetApp, *enterprise.Auth0) {
	t.Helper()
	var tenant *enterprise.Auth0
	s := presetSetup{config: func(base string) extauth.OIDCConfig {
		srv, set := handlerServer(t)
		cfg := enterprise.Auth0Config{URL: srv.URL, ClientID: presetClient, ClientSecret: presetSecret,
			RedirectURIs:      []string{base + "/users/auth/oidc/callback"},
			AllowedLogoutURLs: []string{base + "/users/auth/oidc/post_logout"},
			AutoApprove:       true, Keys: opKeys()["RS256"][:1]}
		if edit != nil {
			edit(&cfg)
		}
		a0, err := enterprise.NewAuth0(cfg)
		if err != nil {
			t.Fatal(err)
		}
		set(a0)
		tenant = a0
		c := extauth.OIDCConfig{ClientID: presetClient, ClientSecret: extauth.NewSecret(presetSecret), Issuer: issuer(srv.URL)}
		if preset {
			c.Additional.Preset = "auth0"
		}
		if additional != nil {
			additional(&c.Additional)
		}
		return c
	}}
	if l != nil {
		withLogouts(l, &s)
	}
	return newPresetApp(t, s), tenant
}

// Auth0 issues tokens with a trailing slash: the preset takes the issuer
// with or without it; without the preset the missing slash is named. On a
// custom domain, tokens that carry the tenant's other domain are refused.
// Roles come from the Action's namespaced claim.
func TestAuth0Issuer(t *testing.T) {
	noSlash := func(u string) string { return u }
	slash := func(u string) string { return u + "/" }
	for _, tc := range []struct {
		name   string
		preset bool
		issuer func(string) string
		edit   func(*enterprise.Auth0Config)
		status int
		why    string
	}{
		{"preset, issuer without the slash", true, noSlash, nil, http.StatusOK, ""},
		{"preset, issuer with the slash", true, slash, nil, http.StatusOK, ""},
		{"no preset, issuer without the slash", false, noSlash, nil, http.StatusInternalServerError, "they differ only by a trailing slash"},
		{"custom domain, token of the tenant's domain", true, noSlash,
			func(c *enterprise.Auth0Config) { c.TokenIssuer = "https://dev-example.us.auth0.com/" }, http.StatusBadRequest, "issued by a different provider"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, tenant := auth0App(t, tc.preset, tc.issuer, func(c *enterprise.Auth0Config) {
				c.RolesClaim = "https://app.example/roles"
				c.Users = []enterprise.Auth0User{{ID: "auth0|665f1e2d3c4b5a6978877665", Name: "Ada", Email: "ada@example.org", EmailVerified: true,
					Roles: []string{"editor"}}}
				if tc.edit != nil {
					tc.edit(c)
				}
			}, func(s *extauth.OIDCAdditionalSettings) { s.RolesClaim = "https://app.example/roles" }, nil)
			resp := harness.NewBrowser(t).Get(a.URL + "/users/auth/oidc")
			if resp.StatusCode != tc.status || !strings.Contains(a.Logs.String(), tc.why) {
				t.Fatalf("got %d %s, want %d and %q in the log:\n%s", resp.StatusCode, resp.Body, tc.status, tc.why, a.Logs)
			}
			if tc.status != http.StatusOK {
				if n := len(a.identities()); n != 0 {
					t.Errorf("hook called %d times", n)
				}
				return
			}
			id := a.only()
			if id.Tokens.Issuer != tenant.OP().Issuer() || !strings.HasSuffix(id.Tokens.Issuer, "/") || !id.EmailVerified ||
				id.Directory == nil || !id.Directory.HasRole("editor") {
				t.Errorf("issuer %q, email verified %v, directory %+v", id.Tokens.Issuer, id.EmailVerified, id.Directory)
			}
		})
	}
}

// Auth0's logout: the end_session_endpoint when discovery names it, else
// /v2/logout with client_id and returnTo, the state riding in returnTo.
func TestAuth0Logout(t *testing.T) {
	for _, endSession := range []bool{false, true} {
		t.Run(map[bool]string{false: "/v2/logout", true: "/oidc/logout"}[endSession], func(t *testing.T) {
			l := &logouts{}
			a, tenant := auth0App(t, true, func(u string) string { return u }, func(c *enterprise.Auth0Config) { c.EndSessionDiscovery = endSession }, nil, l)
			path := map[bool]string{false: "/v2/logout", true: "/oidc/logout"}[endSession]
			at := presetLogout(t, a, harness.NewBrowser(t), l, path)
			q := at.Query()
			if endSession {
				if q.Get("id_token_hint") == "" || q.Get("state") == "" {
					t.Errorf("/oidc/logout %s", at)
				}
				return
			}
			back := mustURL(q.Get("returnTo"))
			if q.Get("client_id") != presetClient || back.Path != "/users/auth/oidc/post_logout" || len(back.Query().Get("state")) < 40 ||
				tenant.Logouts() != 1 {
				t.Errorf("/v2/logout %s, %d sign-outs", at, tenant.Logouts())
			}
		})
	}
}

// workspaceApp is an application signing in with a fake Google for the
// Workspace domain hd.
func workspaceApp(t *testing.T, hd string) (*presetApp, *oidcop.OP) {
	t.Helper()
	var google *oidcop.OP
	a := newPresetApp(t, presetSetup{config: func(base string) extauth.OIDCConfig {
		srv, set := handlerServer(t)
		op, err := enterprise.NewWorkspace(enterprise.WorkspaceConfig{URL: srv.URL, ClientID: googleClientID, ClientSecret: googleSecret,
			RedirectURIs: []string{base + "/users/auth/oidc/callback"}, Keys: opKeys()["RS256"][:1],
			Users: []oidcop.User{
				{Sub: "1001", Email: "ada@example.com", EmailVerified: true, Name: "Ada", HostedDomain: "example.com"},
				{Sub: "1002", Email: "ada@other.example", EmailVerified: true, Name: "Ada Other", HostedDomain: "other.example"},
				{Sub: "1003", Email: "ada@gmail.com", EmailVerified: true, Name: "Ada Consumer"},
			}})
		if err != nil {
			t.Fatal(err)
		}
		set(op)
		google = op
		return extauth.OIDCConfig{ClientID: googleClientID, ClientSecret: extauth.NewSecret(googleSecret), Issuer: srv.URL,
			Additional: extauth.OIDCAdditionalSettings{Preset: "google-workspace", HostedDomain: hd}}
	}})
	return a, google
}

// Google Workspace: hd is sent, and the ID token's hd claim decides: the
// domain's accounts sign in, another domain's and consumer accounts are
// refused, whatever the hint did.
func TestGoogleWorkspaceHostedDomain(t *testing.T) {
	for _, tc := range []struct {
		hd, sub string
		ok      bool
	}{
		{"example.com", "1001", true},
		{"example.com", "1002", false},
		{"example.com", "1003", false},
		{"*", "1002", true},
		{"*", "1003", false},
	} {
		t.Run(tc.hd+" "+tc.sub, func(t *testing.T) {
			a, google := workspaceApp(t, tc.hd)
			resp := a.signInAs(harness.NewBrowser(t), tc.sub)
			if got := google.LastAuthorizeQuery().Get("hd"); got != tc.hd {
				t.Errorf("hd sent %q", got)
			}
			if !tc.ok {
				wantCode(t, resp, http.StatusForbidden, "access_denied")
				return
			}
			if resp.Body != "signed in as "+tc.sub {
				t.Fatalf("got %d %s\n%s", resp.StatusCode, resp.Body, a.Logs)
			}
			if d := a.only().Directory; d == nil || d.Domain == "" || d.Domain == "*" {
				t.Errorf("directory %+v", d)
			}
		})
	}
}
