package extauth_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/extauth/extauth"
)

// request_options and assurance_levels are read from oidc_ and
// saml_additional_settings, as a list or as words, per tenant too, and
// are never sent to the provider as parameters.
func TestRequestOptionsFromTheSecretsFile(t *testing.T) {
	cfg := mustParse(t, `
production:
  oidc_client_id: app
  oidc_client_secret: s3cret
  oidc_issuer: https://id.example.org
  oidc_additional_settings:
    acr_values: urn:loa:2 urn:loa:3
    request_options: [login_hint, max_age, level]
    assurance_levels:
      substantial: [urn:loa:2, urn:loa:3]
      high: urn:loa:3
  saml_sp_entity_id: https://app.example.org/saml
  saml_idp_metadata_url: https://idp.example.org/metadata
  saml_additional_settings:
    request_options: ForceAuthn, level
    assurance_levels:
      high: https://refeds.org/profile/mfa
  tenants:
    city-a:
      oidc_additional_settings:
        request_options: prompt
`, extauth.Env("production"))
	o := cfg.OIDC.Additional
	if !slices.Equal(o.RequestOptions, []string{"login_hint", "max_age", "level"}) ||
		fmt.Sprint(o.AssuranceLevels) != "map[high:[urn:loa:3] substantial:[urn:loa:2 urn:loa:3]]" {
		t.Errorf("oidc: %q %v", o.RequestOptions, o.AssuranceLevels)
	}
	if len(o.Custom) != 0 {
		t.Errorf("read as authorization parameters: %v", o.Custom)
	}
	s := cfg.SAML.Additional
	if !slices.Equal(s.RequestOptions, []string{"ForceAuthn", "level"}) || fmt.Sprint(s.AssuranceLevels) != "map[high:[https://refeds.org/profile/mfa]]" {
		t.Errorf("saml: %q %v", s.RequestOptions, s.AssuranceLevels)
	}
	if len(s.Custom) != 0 {
		t.Errorf("read as custom entries: %v", s.Custom)
	}
	if got := cfg.Tenants["city-a"].OIDC.Additional; !slices.Equal(got.RequestOptions, []string{"prompt"}) || got.AssuranceLevels != nil {
		t.Errorf("the tenant's: %q %v", got.RequestOptions, got.AssuranceLevels)
	}

	// Each tenant starts with its own allowlist.
	o2 := extauth.Options{BaseURL: "https://app.example.org", CookieKey: testKey, TenantOf: extauth.SubdomainTenants("app.example.org"),
		HTTPClient: &http.Client{Transport: noNetwork{}},
		OnSuccess:  func(http.ResponseWriter, *http.Request, *extauth.Identity) {}}
	a, err := extauth.New(cfg, o2)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for host, want := range map[string]error{"app.example.org": nil, "city-a.app.example.org": fmt.Errorf("x")} {
		r := httptest.NewRequest(http.MethodGet, "https://"+host+"/", nil)
		_, _, err := a.StartForm(r, extauth.OIDC, extauth.SignInOptions{LoginHint: "a@example.org"})
		if (err == nil) != (want == nil) {
			t.Errorf("%s: StartForm with a login_hint: %v", host, err)
		}
	}
}

// noNetwork fails every request: the test makes none.
type noNetwork struct{}

func (noNetwork) RoundTrip(r *http.Request) (*http.Response, error) {
	return nil, fmt.Errorf("no network in this test: %s", r.URL)
}

// Each problem of request_options and assurance_levels is named, never
// with its value.
func TestRequestOptionsProblems(t *testing.T) {
	oidc := "oidc_client_id: app\noidc_client_secret: s3cret\noidc_issuer: https://id.example.org\noidc_additional_settings:\n"
	saml := "saml_sp_entity_id: https://app.example.org/saml\nsaml_idp_metadata_url: https://idp.example.org/metadata\nsaml_additional_settings:\n"
	for _, tc := range []struct{ file, key, reason string }{
		{oidc + "  request_options: [login_hint, IsPassive]\n", "oidc_additional_settings.request_options", ""},
		{saml + "  request_options: [prompt]\n", "saml_additional_settings.request_options", ""},
		{oidc + "  assurance_levels:\n    \"very high\": urn:loa:3\n", "oidc_additional_settings.assurance_levels", ""},
		{oidc + "  assurance_levels:\n    high: 'urn:\"3'\n", "oidc_additional_settings.assurance_levels.high", ""},
		{oidc + "  acr_values: urn:loa:2\n  assurance_levels:\n    high: urn:loa:3\n", "oidc_additional_settings.assurance_levels.high", ""},
		{saml + "  authn_context: urn:a:b\n  assurance_levels:\n    high: urn:c:d\n", "saml_additional_settings.assurance_levels.high", ""},
		{saml + "  assurance_levels:\n    high: SECRET-not-a-uri\n", "saml_additional_settings.assurance_levels.high", "must be an absolute URI"},
		{saml + "  assurance_levels:\n    high: mfa\n", "saml_additional_settings.assurance_levels.high",
			"must be an absolute URI, or several separated by spaces (an authentication context class, such as https://refeds.org/profile/mfa)"},
		{saml + "  assurance_levels: [high]\n", "saml_additional_settings.assurance_levels", ""},
	} {
		_, err := extauth.ParseConfig([]byte(tc.file), vars())
		if err == nil {
			t.Errorf("%s: no problem", tc.file)
			continue
		}
		if keys := problemKeys(t, err); !slices.Contains(keys, tc.key) {
			t.Errorf("%s: problems name %q, want %s", tc.file, keys, tc.key)
		}
		if !strings.Contains(err.Error(), tc.key+" "+tc.reason) {
			t.Errorf("%s: %v, want %s %s", tc.file, err, tc.key, tc.reason)
		}
		if strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "urn:c:d") {
			t.Errorf("the problem shows a value: %v", err)
		}
	}
}

// Options set the same in code; the secrets file's entries replace them.
func TestRequestOptionsFromOptions(t *testing.T) {
	cfg := &extauth.Config{OIDC: extauth.OIDCConfig{ClientID: "app", ClientSecret: extauth.NewSecret("s"), Issuer: "https://id.example.org"}}
	o := extauth.Options{BaseURL: "https://app.example.org", CookieKey: testKey, HTTPClient: &http.Client{Transport: noNetwork{}},
		OnSuccess: func(http.ResponseWriter, *http.Request, *extauth.Identity) {}}
	o.OIDC.RequestOptions = []string{"login_hint", "colour"}
	if _, err := extauth.New(cfg, o); err == nil || !strings.Contains(err.Error(), "request_options") {
		t.Fatalf("New with an option the provider does not take: %v", err)
	}
	o.OIDC.RequestOptions = []string{"login_hint"}
	a, err := extauth.New(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodGet, "https://app.example.org/", nil)
	if _, f, err := a.StartForm(r, extauth.OIDC, extauth.SignInOptions{LoginHint: "a@example.org"}); err != nil || f.Get("login_hint") == "" {
		t.Errorf("allowed by Options: %v %v", f, err)
	}
	a.Close()
	cfg.OIDC.Additional.RequestOptions = []string{"prompt"}
	if a, err = extauth.New(cfg, o); err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, _, err := a.StartForm(r, extauth.OIDC, extauth.SignInOptions{LoginHint: "a@example.org"}); err == nil {
		t.Error("the secrets file's request_options did not replace Options'")
	}
	if _, f, err := a.StartForm(r, extauth.OIDC, extauth.SignInOptions{Prompt: "select_account"}); err != nil ||
		f.Encode() != (url.Values{"prompt": {"select_account"}}).Encode() {
		t.Errorf("allowed by the secrets file: %v %v", f, err)
	}
}
