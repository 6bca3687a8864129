package extauth_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/internal/harness"
)

// TestArtifactSettings: response_binding and artifact are read from the
// secrets file (not sent to the IdP as custom entries), and every wrong
// value is one problem naming its setting, never quoting a key.
func TestArtifactSettings(t *testing.T) {
	tlsPair := harness.NewCert(t, "artifact client", nil, harness.TLSClient)
	other := harness.NewCert(t, "another client", nil, harness.TLSClient)
	block := func(s string) string {
		return "      " + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n      ") + "\n"
	}
	src := "saml_sp_entity_id: urn:example:sp\nsaml_idp_metadata_url: https://idp.example.org/md\n" +
		"saml_additional_settings:\n  response_binding: artifact\n  artifact:\n    tls_certificate: |\n" + block(tlsPair.CertPEM) +
		"    tls_private_key: |\n" + block(tlsPair.KeyPEM) + "    idp_tls_certificate: |\n" + block(other.CertPEM+tlsPair.CertPEM) +
		"    want_response_signed: true\n"
	cfg := mustParse(t, src)
	a := cfg.SAML.Additional
	if a.ResponseBinding != "artifact" || a.Artifact.TLSCertificate == "" || a.Artifact.TLSPrivateKey.Value() == "" ||
		!a.Artifact.WantResponseSigned || len(a.Custom) != 0 || len(cfg.Warnings) != 0 {
		t.Fatalf("read %+v, warnings %v", a, cfg.Warnings)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	const pre = "saml_additional_settings."
	for name, tc := range map[string]struct {
		edit func(*extauth.SAMLAdditionalSettings)
		want string
	}{
		"unknown binding":         {func(s *extauth.SAMLAdditionalSettings) { s.ResponseBinding = "redirect" }, pre + "response_binding"},
		"artifact settings, post": {func(s *extauth.SAMLAdditionalSettings) { s.ResponseBinding = "post" }, pre + "artifact"},
		"no key pair at all": {func(s *extauth.SAMLAdditionalSettings) {
			s.Artifact.TLSCertificate, s.Artifact.TLSPrivateKey = "", extauth.Secret{}
		}, pre + "response_binding"},
		"key of another certificate": {func(s *extauth.SAMLAdditionalSettings) {
			s.Artifact.TLSPrivateKey = extauth.NewSecret(other.KeyPEM)
		}, pre + "artifact.tls_private_key"},
		"half a pair": {func(s *extauth.SAMLAdditionalSettings) { s.Artifact.TLSPrivateKey = extauth.Secret{} }, pre + "artifact.tls_certificate"},
		"next pair alone": {func(s *extauth.SAMLAdditionalSettings) {
			s.Artifact.TLSCertificateNew, s.Artifact.TLSPrivateKeyNew = s.Artifact.TLSCertificate, s.Artifact.TLSPrivateKey
			s.Artifact.TLSCertificate, s.Artifact.TLSPrivateKey = "", extauth.Secret{}
			s.Certificate, s.PrivateKey = fullConfig(t).SAML.Additional.Certificate, fullConfig(t).SAML.Additional.PrivateKey
		}, pre + "artifact.tls_certificate_new"},
		"pin not PEM": {func(s *extauth.SAMLAdditionalSettings) { s.Artifact.IdPTLSCertificate = "MIIBsecretish" }, pre + "artifact.idp_tls_certificate"},
	} {
		c := mustParse(t, src)
		tc.edit(&c.SAML.Additional)
		err := c.Validate()
		if keys := problemKeys(t, err); !slices.Equal(keys, []string{tc.want}) {
			t.Errorf("%s: problems %v (%v)", name, keys, err)
		}
		if err != nil && strings.Contains(err.Error(), "PRIVATE KEY") {
			t.Errorf("%s: the error quotes a key: %v", name, err)
		}
	}
	// The secrets file's typo is warned about, with the right name.
	cfg = mustParse(t, strings.Replace(src, "want_response_signed", "want_response_sign", 1))
	if len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0], "want_response_signed") {
		t.Errorf("warnings %v", cfg.Warnings)
	}
}
