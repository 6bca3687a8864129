package extauth_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/extauth/extauth"
)

// brokenFiles are the files under testdata/config/broken, each with the
// settings its error must name and the class of error.
var brokenFiles = []struct {
	file string
	env  string
	keys []string
	err  error
}{
	{"half_filled.yml", "", []string{"blog_oauth2_site"}, extauth.ErrMissingSetting},
	{"half_filled_oidc.yml", "", []string{"oidc_client_id", "oidc_issuer"}, extauth.ErrMissingSetting},
	{"half_filled_saml.yml", "", []string{"saml_sp_entity_id", "saml_idp_metadata_url"}, extauth.ErrMissingSetting},
	{"bad_url.yml", "", []string{"blog_oauth2_site"}, extauth.ErrInvalidSetting},
	{"url_credentials.yml", "", []string{"microblog_site"}, extauth.ErrInvalidSetting},
	{"bad_issuer.yml", "", []string{"oidc_issuer"}, extauth.ErrInvalidSetting},
	{"bad_entity_id.yml", "", []string{"saml_sp_entity_id"}, extauth.ErrInvalidSetting},
	{"bad_metadata_url.yml", "", []string{"saml_idp_metadata_url"}, extauth.ErrInvalidSetting},
	{"http_metadata_url.yml", "", []string{"saml_idp_metadata_url"}, extauth.ErrInvalidSetting},
	{"bad_relay_state.yml", "", []string{"saml_additional_settings.RelayState"}, extauth.ErrInvalidSetting},
	{"bad_authn_context.yml", "", []string{"saml_additional_settings.authn_context"}, extauth.ErrInvalidSetting},
	{"bad_pem.yml", "", []string{"saml_additional_settings.certificate"}, extauth.ErrInvalidKeyPair},
	{"bad_key_pem.yml", "", []string{"saml_additional_settings.private_key"}, extauth.ErrInvalidKeyPair},
	{"key_mismatch.yml", "", []string{"saml_additional_settings.private_key"}, extauth.ErrInvalidKeyPair},
	{"rsa_1024.yml", "", []string{"saml_additional_settings.certificate", "saml_additional_settings.private_key"}, extauth.ErrInvalidKeyPair},
	{"ec_key.yml", "", []string{"saml_additional_settings.certificate", "saml_additional_settings.private_key"}, extauth.ErrInvalidKeyPair},
	{"only_cert.yml", "", []string{"saml_additional_settings.private_key"}, extauth.ErrMissingSetting},
	{"only_key.yml", "", []string{"saml_additional_settings.certificate"}, extauth.ErrMissingSetting},
	{"unknown_env.yml", "staging", nil, extauth.ErrUnknownEnvironment},
	{"bad_erb.yml", "", []string{"microblog_secret"}, extauth.ErrTemplate},
	{"fetch_unset.yml", "", []string{"oidc_client_secret"}, extauth.ErrTemplate},
	{"bad_dollar.yml", "", []string{"socialnet_secret"}, extauth.ErrTemplate},
	{"nested_custom.yml", "", []string{"saml_additional_settings.organization"}, extauth.ErrInvalidSetting},
	{"pem_in_custom.yml", "", []string{"saml_additional_settings.privte_key", "saml_additional_settings.private_key"}, extauth.ErrInvalidSetting},
	{"reserved_custom.yml", "", []string{"saml_additional_settings.SAMLRequest"}, extauth.ErrInvalidSetting},
	{"bad_bool.yml", "", []string{"saml_additional_settings.security.logout_requests_signed"}, extauth.ErrInvalidSetting},
	{"wrong_type.yml", "", []string{"microblog_key"}, extauth.ErrInvalidSetting},
	{"duplicate_key.yml", "", []string{"microblog_secret"}, extauth.ErrInvalidSetting},
	{"additional_not_mapping.yml", "", []string{"saml_additional_settings"}, extauth.ErrInvalidSetting},
	{"merge_loop.yml", "", []string{"saml_additional_settings"}, extauth.ErrInvalidSetting},
}

func TestBrokenFiles(t *testing.T) {
	listed, err := filepath.Glob("testdata/config/broken/*.yml")
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != len(brokenFiles) {
		t.Errorf("%d files in testdata/config/broken, %d in the table", len(listed), len(brokenFiles))
	}
	for _, tt := range brokenFiles {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join("testdata/config/broken", tt.file)
			cfg, err := extauth.LoadConfig(path, extauth.Env(tt.env), vars())
			if err == nil {
				t.Fatalf("loaded: %+v", cfg)
			}
			if cfg != nil {
				t.Error("a Config returned with the error")
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("err = %v, want %v", err, tt.err)
			}
			if tt.keys == nil {
				if !strings.Contains(err.Error(), `"`+tt.env+`"`) {
					t.Errorf("error %q does not name environment %s", err, tt.env)
				}
			} else if keys := problemKeys(t, err); !slices.Equal(keys, tt.keys) {
				t.Errorf("keys %v, want %v", keys, tt.keys)
			}
			for _, v := range fileValues(t, path) {
				if strings.Contains(err.Error(), v) {
					t.Errorf("error shows value %q: %v", v, err)
				}
			}
		})
	}
}

// fileValues returns the distinctive values of a YAML file (mapping values
// and list items, and every line of multi-line ones), for checking that an
// error never repeats one.
func fileValues(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var out []string
	add := func(v string) {
		for _, line := range strings.Split(v, "\n") {
			// Short values ("true", "/x") could occur in any message.
			if len(line) >= 8 {
				out = append(out, line)
			}
		}
	}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c)
			}
		case yaml.MappingNode:
			for i := 1; i < len(n.Content); i += 2 {
				walk(n.Content[i])
			}
		case yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c)
			}
		case yaml.ScalarNode:
			add(n.Value)
		}
	}
	walk(&doc)
	if len(out) == 0 {
		t.Fatalf("%s has no values to look for", path)
	}
	return out
}
