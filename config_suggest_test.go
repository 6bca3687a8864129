package extauth

import "testing"

func TestSettingKeys(t *testing.T) {
	keys := settingKeys
	if len(keys) != 20 {
		t.Fatalf("%d keys: %v", len(keys), keys)
	}
	// The sixteen of the specification, the three *_site extensions and
	// oidc_additional_settings.
	for _, k := range []string{
		"microblog_key", "microblog_secret", "socialnet_key", "socialnet_secret",
		"search_oauth2_key", "search_oauth2_secret", "blog_oauth2_key", "blog_oauth2_secret",
		"blog_oauth2_site", "saml_sp_entity_id", "saml_idp_metadata_url", "saml_idp_sso_service_url",
		"saml_additional_settings", "oidc_client_id", "oidc_client_secret", "oidc_issuer",
		"microblog_site", "socialnet_site", "search_oauth2_site", "oidc_additional_settings",
	} {
		if !isSettingKey(k) {
			t.Errorf("%s is not a setting key", k)
		}
	}
}
