package extauth_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/oidcop"
	"github.com/extauth/extauth/providers"
)

// Ready waits for SAML metadata and OpenID Connect discovery, and names the
// providers whose documents cannot be had.
func TestReady(t *testing.T) {
	ta := newTenantApp(t, nil, nil)
	cfg := &extauth.Config{
		SAML: extauth.SAMLConfig{SPEntityID: "https://app.example/saml", IdPMetadataURL: ta.IdP.MetadataURL()},
		OIDC: extauth.OIDCConfig{ClientID: oidcClientID, ClientSecret: extauth.NewSecret(oidcSecret), Issuer: ta.OP.Issuer()},
	}
	newAuth := func(cfg *extauth.Config) *extauth.Auth {
		a, err := extauth.New(cfg, extauth.Options{BaseURL: "https://app.example", CookieKey: testKey,
			OnSuccess: func(http.ResponseWriter, *http.Request, *extauth.Identity) {}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		return a
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := newAuth(cfg).Ready(ctx); err != nil {
		t.Fatalf("Ready: %v", err)
	}

	down := *cfg
	down.OIDC.Issuer = "http://127.0.0.1:1/op"
	down.SAML.IdPMetadataURL = "http://127.0.0.1:1/md"
	a := newAuth(&down)
	short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := a.Ready(short)
	if err == nil || !strings.Contains(err.Error(), "saml:") || !strings.Contains(err.Error(), "oidc:") {
		t.Fatalf("Ready with both providers down: %v", err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/healthz", nil)
	a.ReadyHandler().ServeHTTP(rec, req.WithContext(short))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "oidc") {
		t.Errorf("ReadyHandler: %d %s", rec.Code, rec.Body)
	}
}

// Ready's error says "extauth:" and each provider's name once: the
// strategies' own errors carry both, which it does not repeat
// ("extauth: not ready: oidc: extauth: oidc: misconfigured" on main). It
// still wraps them for errors.Is.
func TestReadyErrorSaysItsPrefixOnce(t *testing.T) {
	// A client whose method the provider does not advertise: discovery
	// succeeds and the strategy refuses to go on.
	a := newOIDCApp(t, highAssurance(func(c *oidcop.Config, _ *extauth.OIDCAdditionalSettings) {
		c.AuthMethod = "client_secret_basic"
		c.ClientSecret = oidcSecret
	}))
	// A sign-in reads discovery and fails; Ready then has the verdict at
	// once, whatever the load.
	if resp := a.signIn(t); resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("sign-in: %d %s", resp.StatusCode, resp.Body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := a.Auth.Ready(ctx)
	if err == nil || !strings.HasPrefix(err.Error(), "extauth: not ready: oidc: misconfigured: ") ||
		strings.Count(err.Error(), "extauth:") != 1 || strings.Count(err.Error(), "oidc:") != 1 {
		t.Fatalf("Ready: %v", err)
	}
	if !errors.Is(err, &providers.Error{Code: providers.CodeMisconfigured, Provider: "oidc"}) {
		t.Errorf("Ready's error does not wrap the strategy's: %v", err)
	}

	// A tenant's says the tenant, and its provider once.
	ta := newTenantApp(t, []string{"city-a"}, func(ta *tenantApp, _ *extauth.Options) {
		ta.cfg.Tenants["city-a"].OIDC.Issuer = "http://127.0.0.1:1/op"
		ta.cfg.Tenants["city-a"].SAML = extauth.SAMLConfig{}
	})
	short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err = ta.Auth.TenantReady(short, "city-a")
	if err == nil || !strings.HasPrefix(err.Error(), "extauth: tenant city-a not ready: oidc: ") ||
		strings.Count(err.Error(), "extauth:") != 1 {
		t.Fatalf("TenantReady: %v", err)
	}
}

// TenantReady builds a tenant and waits for its providers; an unknown
// tenant, or an application without tenants, is ErrUnknownTenant.
func TestTenantReady(t *testing.T) {
	ta := newTenantApp(t, []string{"city-a"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := ta.Auth.TenantReady(ctx, "city-a"); err != nil {
		t.Fatalf("city-a: %v", err)
	}
	for _, tn := range []string{"city-z", "Not A Slug"} {
		if err := ta.Auth.TenantReady(ctx, tn); !errors.Is(err, extauth.ErrUnknownTenant) {
			t.Errorf("%q: %v", tn, err)
		}
	}
	a, err := extauth.New(&extauth.Config{}, extauth.Options{BaseURL: "https://app.example", CookieKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.TenantReady(ctx, "city-a"); !errors.Is(err, extauth.ErrUnknownTenant) {
		t.Errorf("without tenants: %v", err)
	}
	if err := a.TenantReady(ctx, ""); err != nil {
		t.Errorf("the application's own site: %v", err)
	}

	// A tenant whose IdP is down is named, with the provider.
	down, err := extauth.New(&extauth.Config{}, extauth.Options{BaseURL: "https://app.example", CookieKey: testKey,
		TenantOf:  extauth.SubdomainTenants("app.example"),
		OnSuccess: func(http.ResponseWriter, *http.Request, *extauth.Identity) {},
		Tenants: extauth.TenantSourceFunc(func(context.Context, string) (*extauth.Config, error) {
			return &extauth.Config{SAML: extauth.SAMLConfig{SPEntityID: "https://city-c.app.example/saml", IdPMetadataURL: "http://127.0.0.1:1/md"}}, nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := down.TenantReady(short, "city-c"); err == nil || !strings.Contains(err.Error(), "tenant city-c not ready") || !strings.Contains(err.Error(), "saml:") {
		t.Errorf("a tenant whose IdP is down: %v", err)
	}
}
