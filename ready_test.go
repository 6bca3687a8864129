package extauth_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/extauth/extauth"
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
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
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
