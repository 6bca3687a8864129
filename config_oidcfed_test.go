package extauth_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/extauth/extauth"
)

const fedAnchorJWKS = `{"keys":[{"kty":"EC","crv":"P-256","kid":"k","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}`

func fedYAML(t *testing.T, extra string) string {
	key := clientKeys()["EC"][0].pem
	fed := clientKeys()["EC"][1].pem
	return `oidc_issuer: https://op.example.it
oidc_additional_settings:
  private_key: |
` + indent(key) + `  federation:
    federation_key: |
` + indent(indent(fed)) + `    authority_hints: [https://ta.example.it]
` + extra
}

// A secrets file's federation: the anchors' keys as JSON text or YAML,
// trust marks under either name, and no oidc_client_id or secret needed.
func TestConfigOIDCFederation(t *testing.T) {
	cfg := mustParse(t, fedYAML(t, `    trust_anchors:
      https://ta.example.it: '`+fedAnchorJWKS+`'
      https://other-ta.example.it:
        keys:
          - {kty: EC, crv: P-256, kid: k2, x: f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU, y: x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0}
    trust_marks:
      - id: https://ta.example.it/openid_relying_party/public
        trust_mark: eyJ.a.b
      - trust_mark_type: https://ta.example.it/other
        trust_mark: eyJ.c.d
    required_trust_marks: https://ta.example.it/openid_provider/public
    trust_mark_status: true
    registration: explicit
    organization_name: Comune di Esempio
    contacts: [ict@comune.example.it]
    configuration_lifetime: 12h
`))
	if !cfg.OIDC.Configured() || cfg.OIDC.ClientID != "" || !cfg.OIDC.ClientSecret.IsZero() {
		t.Fatalf("oidc %+v", cfg.OIDC)
	}
	f := cfg.OIDC.Additional.Federation
	if f == nil || len(f.TrustAnchors) != 2 || f.TrustAnchors[1].EntityID != "https://other-ta.example.it" ||
		!strings.Contains(f.TrustAnchors[1].JWKS, `"kid":"k2"`) || len(f.TrustMarks) != 2 || f.TrustMarks[0].Type != "https://ta.example.it/openid_relying_party/public" ||
		f.TrustMarks[1].TrustMark != "eyJ.c.d" || f.RequiredTrustMarks[0] != "https://ta.example.it/openid_provider/public" || !f.TrustMarkStatus ||
		f.Registration != "explicit" || f.Contacts[0] != "ict@comune.example.it" || f.ConfigurationLifetime.Hours() != 12 || f.FederationKey.IsZero() {
		t.Fatalf("federation %+v", f)
	}
}

// Each mistake is reported by the entry that makes it.
func TestConfigOIDCFederationProblems(t *testing.T) {
	for _, tc := range []struct{ extra, key, reason string }{
		{"    trust_anchor: {}\n", "oidc_additional_settings.federation.trust_anchor", "is not a federation setting extauth knows (did you mean trust_anchors?)"},
		{"    trust_anchors:\n      https://ta.example.it: '{}'\n", "oidc_additional_settings.federation.trust_anchors.https://ta.example.it", "jwks has no key"},
		{"    trust_anchors:\n      https://ta.example.it: '" + fedAnchorJWKS + "'\n    trust_marks: eyJ\n", "oidc_additional_settings.federation.trust_marks", "must be a list of trust_mark_type and trust_mark"},
		{"    trust_anchors:\n      https://ta.example.it: '" + fedAnchorJWKS + "'\n    registration: manual\n", "oidc_additional_settings.federation.registration", "must be automatic or explicit"},
		{"", "oidc_additional_settings.federation.trust_anchors", "is missing"},
	} {
		_, err := extauth.ParseConfig([]byte(fedYAML(t, tc.extra)), vars())
		var ve *extauth.ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%s: err = %v", tc.key, err)
			continue
		}
		found := false
		for _, p := range ve.Problems {
			if p.Key == tc.key && strings.Contains(p.Reason, tc.reason) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: problems %v, want %q", tc.key, ve.Problems, tc.reason)
		}
	}
}
