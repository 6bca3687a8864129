package extauth_test

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/extauth/extauth"
)

// New does not run Config.Validate (docs/configuration.md#validation): it
// leaves out a provider that lacks a required setting, without a word,
// and refuses a setting the provider cannot work with, whether Validate
// accepts it or not. Hence a configuration from InspectConfig goes to New
// only when its problems are all its tenants'
// (TestBrokenFileTenantStaysInItsTenant).
func TestNewLeavesOutWhatValidateRefuses(t *testing.T) {
	o := extauth.Options{BaseURL: "https://app.example", CookieKey: testKey,
		OnSuccess: func(http.ResponseWriter, *http.Request, *extauth.Identity) {}}
	blog := extauth.OAuthProvider{Key: blogKey, Secret: extauth.NewSecret(blogSecret), Site: "https://blog.example"}

	half := &extauth.Config{BlogOAuth2: blog, OIDC: extauth.OIDCConfig{ClientID: "c", Issuer: "https://id.example"}}
	var ve *extauth.ValidationError
	if err := half.Validate(); !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Key != "oidc_client_secret" {
		t.Fatalf("Validate: %v, want oidc_client_secret missing", err)
	}
	a, err := extauth.New(half, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer a.Close()
	if got := a.Providers(); !slices.Equal(got, []extauth.Provider{extauth.BlogOAuth2}) {
		t.Errorf("New mounted %v, want blog_oauth2 alone: oidc lacks its secret", got)
	}

	query := &extauth.Config{BlogOAuth2: blog}
	query.BlogOAuth2.Site = "https://blog.example/?p=1"
	if err := query.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if _, err := extauth.New(query, o); err == nil || !strings.Contains(err.Error(), "blog_oauth2_site") {
		t.Errorf("New: %v, want a refusal naming blog_oauth2_site", err)
	}
}
