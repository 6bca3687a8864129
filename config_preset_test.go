package extauth_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/extauth/extauth"
)

// presetFile is a secrets file registering an oidc client at issuer with
// the entries of oidc_additional_settings given.
func presetFile(issuer, entries string) string {
	return "oidc_client_id: app\noidc_client_secret: s3cret-value\noidc_issuer: " + issuer + "\noidc_additional_settings:\n" + entries
}

func TestPresetSettingsLoad(t *testing.T) {
	cfg, err := extauth.ParseConfig([]byte(presetFile("https://login.microsoftonline.com/organizations/v2.0",
		"  preset: entra\n  tenants: ["+tenantA+", "+tenantB+"]\n  groups_overage: graph_transitive\n  graph_url: https://graph.microsoft.us\n  roles_claim: roles\n")))
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.OIDC.Additional
	if a.Preset != "entra" || !slices.Equal(a.Tenants, []string{tenantA, tenantB}) || a.GroupsOverage != "graph_transitive" ||
		a.GraphURL != "https://graph.microsoft.us" || a.RolesClaim != "roles" || len(a.Custom) != 0 || len(cfg.Warnings) != 0 {
		t.Errorf("settings %+v, warnings %q", a, cfg.Warnings)
	}
	// tenants: any, as a word.
	cfg, err = extauth.ParseConfig([]byte(presetFile("https://login.microsoftonline.com/common/v2.0", "  preset: entra\n  tenants: any\n")))
	if err != nil || !slices.Equal(cfg.OIDC.Additional.Tenants, []string{"any"}) {
		t.Errorf("tenants any: %v %v", err, cfg.OIDC.Additional.Tenants)
	}
	cfg, err = extauth.ParseConfig([]byte(presetFile("https://accounts.google.com", "  preset: google-workspace\n  hosted_domain: example.com\n")))
	if err != nil || cfg.OIDC.Additional.HostedDomain != "example.com" {
		t.Errorf("google-workspace: %v %+v", err, cfg.OIDC.Additional)
	}
}

// Each preset setting that cannot work is a problem naming its entry.
func TestPresetSettingsProblems(t *testing.T) {
	const entra = "https://login.microsoftonline.com/"
	for _, tc := range []struct {
		name, issuer, entries string
		key, reason           string
	}{
		{"an unknown preset", "https://id.example.org", "  preset: azure\n",
			"oidc_additional_settings.preset", "must be one of entra, okta, auth0, google-workspace"},
		{"organizations without tenants", entra + "organizations/v2.0", "  preset: entra\n",
			"oidc_additional_settings.tenants", "is missing: the authority organizations signs in the users of any Entra ID tenant"},
		{"common without tenants", entra + "common/v2.0", "  preset: entra\n",
			"oidc_additional_settings.tenants", "or write any to admit every tenant"},
		{"tenants beside any", entra + "common/v2.0", "  preset: entra\n  tenants: [any, " + tenantA + "]\n",
			"oidc_additional_settings.tenants", "lists tenants beside any"},
		{"a tenant that is no tenant ID", entra + "common/v2.0", "  preset: entra\n  tenants: [contoso.com]\n",
			"oidc_additional_settings.tenants", "names something that is not a tenant ID"},
		{"personal accounts through organizations", entra + "organizations/v2.0", "  preset: entra\n  tenants: [consumers]\n",
			"oidc_additional_settings.tenants", "which the organizations authority never signs in: use common"},
		{"other tenants at a tenant's authority", entra + tenantA + "/v2.0", "  preset: entra\n  tenants: [" + tenantB + "]\n",
			"oidc_additional_settings.tenants", "can only name the authority's own tenant"},
		{"any at a tenant's authority", entra + tenantA + "/v2.0", "  preset: entra\n  tenants: any\n",
			"oidc_additional_settings.tenants", "cannot be any"},
		{"not an Entra authority", entra + "organizations/oauth2/v2.0/authorize", "  preset: entra\n  tenants: any\n",
			"oidc_issuer", "is not an Entra ID authority"},
		{"the discovery URL as the Entra issuer", entra + "common/v2.0/.well-known/openid-configuration", "  preset: entra\n  tenants: any\n",
			"oidc_issuer", "is not an Entra ID authority"},
		{"an unknown overage mode", entra + "common/v2.0", "  preset: entra\n  tenants: any\n  groups_overage: ignore\n",
			"oidc_additional_settings.groups_overage", "must be graph, graph_transitive or report"},
		{"a Graph URL with a path", entra + "common/v2.0", "  preset: entra\n  tenants: any\n  graph_url: https://graph.microsoft.com/v1.0\n",
			"oidc_additional_settings.graph_url", "without a path"},
		{"a Graph URL in the clear", entra + "common/v2.0", "  preset: entra\n  tenants: any\n  graph_url: http://graph.example\n",
			"oidc_additional_settings.graph_url", "must be https"},
		{"tenants without the entra preset", "https://id.example.org", "  tenants: any\n",
			"oidc_additional_settings.tenants", "applies only with preset: entra"},
		{"hosted_domain without its preset", "https://id.example.org", "  preset: okta\n  hosted_domain: example.com\n",
			"oidc_additional_settings.hosted_domain", "applies only with preset: google-workspace"},
		{"Okta's authorize endpoint as its issuer", "https://dev-1.okta.com/oauth2/v1/authorize", "  preset: okta\n",
			"oidc_issuer", "is not an Okta issuer"},
		{"Okta's API path as its issuer", "https://dev-1.okta.com/oauth2/v1", "  preset: okta\n",
			"oidc_issuer", "is the path of the org authorization server's endpoints"},
		{"Okta's discovery URL as its issuer", "https://dev-1.okta.com/oauth2/default/.well-known/openid-configuration", "  preset: okta\n",
			"oidc_issuer", "is not an Okta issuer"},
		{"an Auth0 issuer with a path", "https://dev-1.us.auth0.com/authorize", "  preset: auth0\n",
			"oidc_issuer", "is not an Auth0 issuer"},
		{"Workspace without a domain", "https://accounts.google.com", "  preset: google-workspace\n",
			"oidc_additional_settings.hosted_domain", "is missing"},
		{"Workspace with a URL for a domain", "https://accounts.google.com", "  preset: google-workspace\n  hosted_domain: https://example.com\n",
			"oidc_additional_settings.hosted_domain", "must be a domain name"},
		{"Workspace with hd written twice", "https://accounts.google.com", "  preset: google-workspace\n  hosted_domain: example.com\n  hd: other.example\n",
			"oidc_additional_settings.hd", "is set by hosted_domain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := extauth.ParseConfig([]byte(presetFile(tc.issuer, tc.entries)))
			var ve *extauth.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("err = %v", err)
			}
			if !slices.ContainsFunc(ve.Problems, func(p extauth.Problem) bool {
				return p.Key == tc.key && strings.Contains(p.Reason, tc.reason) && p.Provider == extauth.OIDC
			}) {
				t.Errorf("no problem %s %q in %v", tc.key, tc.reason, err)
			}
			assertNoSecrets(t, "error", err, []string{"s3cret-value"})
		})
	}
}

// What each preset implies, as extauth check lists it.
func TestPresetRules(t *testing.T) {
	rules := func(issuer, entries string) string {
		t.Helper()
		cfg, err := extauth.ParseConfig([]byte(presetFile(issuer, entries)))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(cfg.OIDC.PresetRules(), "\n")
	}
	for _, tc := range []struct {
		issuer, entries string
		want            []string
	}{
		{"https://login.microsoftonline.com/organizations/v2.0", "  preset: entra\n  tenants: [" + tenantA + "]\n", []string{
			"v2.0 endpoint", "authority organizations", "tenants: only " + tenantA, "Tokens.Issuer is the tenant's own issuer",
			"xms_edov", "the groups claim as its groups", "/me/memberOf", "GroupMember.Read.All"}},
		{"https://login.microsoftonline.com/common", "  preset: entra\n  tenants: any\n  groups_overage: report\n", []string{
			"v1 endpoint", "tenants: any: the users of every Entra ID tenant and personal Microsoft accounts", "groups overage: reported"}},
		{"https://dev-1.okta.com", "  preset: okta\n", []string{"Okta org authorization server", "id_token_hint"}},
		{"https://dev-1.okta.com/oauth2/default", "  preset: okta\n", []string{"Okta custom authorization server default"}},
		{"https://dev-1.us.auth0.com", "  preset: auth0\n  roles_claim: https://app.example/roles\n", []string{
			"issuer https://dev-1.us.auth0.com/", "/v2/logout", "the https://app.example/roles claim as its roles"}},
		{"https://accounts.google.com", "  preset: google-workspace\n  hosted_domain: example.com\n", []string{
			"hd=example.com sent", "the ID token's hd claim must be example.com", "signing out ends the application's session only"}},
		{"https://id.example.org", "  prompt: login\n", nil},
	} {
		got := rules(tc.issuer, tc.entries)
		if tc.want == nil && got != "" {
			t.Errorf("no preset, rules %q", got)
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s %s: rules do not say %q:\n%s", tc.issuer, tc.entries, w, got)
			}
		}
	}
}
