package extauth_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/extauth/extauth"
)

// A certificate or key that does not parse is named with the line of the
// secrets file it is on and the likely cause, never a byte of it. The
// commonest cause is YAML's: a block pasted without "|" is folded into one
// line, which no longer decodes.
func TestPEMProblemsNameTheLineAndTheCause(t *testing.T) {
	full := fullConfig(t)
	certPEM := full.SAML.Additional.Certificate
	keyPEM := full.SAML.Additional.PrivateKey.Value()
	// plain writes a block as a plain YAML scalar, which YAML folds.
	plain := func(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n    ") }
	oneLine := strings.Join(strings.Fields(keyPEM), " ")
	escaped := strings.ReplaceAll(strings.TrimSpace(certPEM), "\n", `\n`)
	head := "saml_sp_entity_id: https://app.example/saml\nsaml_idp_metadata_url: https://idp.example/metadata\nsaml_additional_settings:\n"
	tests := []struct {
		name string
		src  string
		env  []string
		key  string
		// want are said by the problem, {line} standing for the line of
		// the key's last part in src.
		want []string
	}{
		{
			name: "key pasted without |",
			src:  head + "  certificate: |\n" + indent(indent(certPEM)) + "  private_key: " + plain(keyPEM) + "\n",
			key:  "saml_additional_settings.private_key",
			want: []string{"it is on one line: its line breaks were lost (line {line}: YAML folds the lines of a value that is not a literal block into one; write private_key: | and the block on the lines below it, indented)"},
		},
		{
			name: "certificate written with >",
			src:  head + "  certificate: >\n" + indent(indent(certPEM)) + "  private_key: |\n" + indent(indent(keyPEM)),
			key:  "saml_additional_settings.certificate",
			want: []string{"must be a PEM block of type CERTIFICATE; it is on one line", "(line {line}: written with >, which folds the block's lines into one; write certificate: | instead)"},
		},
		{
			name: "key from a variable on one line",
			src:  head + "  certificate: |\n" + indent(indent(certPEM)) + "  private_key: ${SAML_KEY}\n",
			env:  []string{"SAML_KEY", oneLine},
			key:  "saml_additional_settings.private_key",
			want: []string{"it is on one line", "(line {line}: the environment variable holds the block without its line breaks)"},
		},
		{
			name: "certificate from a variable with \\n for line breaks",
			src:  head + "  certificate: <%= ENV[\"SAML_CERT\"] %>\n  private_key: |\n" + indent(indent(keyPEM)),
			env:  []string{"SAML_CERT", escaped},
			key:  "saml_additional_settings.certificate",
			want: []string{`its line breaks are written \n, as two characters, not as line breaks (line {line}, from an environment variable)`},
		},
		{
			name: "key cut short",
			src:  head + "  certificate: |\n" + indent(indent(certPEM)) + "  private_key: |\n" + indent(indent(keyPEM[:len(keyPEM)/2])),
			key:  "saml_additional_settings.private_key",
			want: []string{"it has no -----END line, so it is cut short (line {line})"},
		},
		{
			name: "certificate without its BEGIN and END lines",
			src: head + "  certificate: |\n" + indent(indent(strings.Join(pemLines(certPEM), "\n"))) + "\n" +
				"  private_key: |\n" + indent(indent(keyPEM)),
			key:  "saml_additional_settings.certificate",
			want: []string{"it has no -----BEGIN line: give the whole block, its BEGIN and END lines included (line {line})"},
		},
		{
			// Not "must be a PEM block of type CERTIFICATE": it is one,
			// whose body does not decode.
			name: "certificate whose body is not base64",
			src: head + "  certificate: |\n" + indent(indent(strings.Replace(certPEM, pemLines(certPEM)[2], "MIIB!notbase64", 1))) +
				"  private_key: |\n" + indent(indent(keyPEM)),
			key:  "saml_additional_settings.certificate",
			want: []string{"certificate is a CERTIFICATE PEM block whose body is not base64: its 3rd line after -----BEGIN CERTIFICATE----- holds a character base64 does not use (line {line})"},
		},
		{
			name: "key with a line lost",
			src: head + "  certificate: |\n" + indent(indent(certPEM)) +
				"  private_key: |\n" + indent(indent(strings.Replace(keyPEM, pemLines(keyPEM)[3]+"\n", pemLines(keyPEM)[3][:5]+"\n", 1))),
			key:  "saml_additional_settings.private_key",
			want: []string{"private_key is a PRIVATE KEY PEM block whose body does not decode as base64: a line of it is cut short, lost or doubled (line {line})"},
		},
		{
			name: "certificate and key swapped",
			src:  head + "  certificate: |\n" + indent(indent(keyPEM)) + "  private_key: |\n" + indent(indent(certPEM)),
			key:  "saml_additional_settings.certificate",
			want: []string{"not a private key (are certificate and private_key swapped?) (line {line})"},
		},
		{
			name: "a tenant's IdP certificate pasted without |",
			src: "oidc_client_id: c\noidc_client_secret: s\noidc_issuer: https://id.example\ntenants:\n  city-a:\n" +
				"    saml_sp_entity_id: https://a.app.example/saml\n    saml_idp_metadata_url: https://idp.example/metadata\n" +
				"    saml_additional_settings:\n      idp_metadata_certificate: " + strings.ReplaceAll(plain(certPEM), "\n", "\n    ") + "\n",
			key:  "saml_additional_settings.idp_metadata_certificate",
			want: []string{"tenants.city-a: saml: saml_additional_settings.idp_metadata_certificate must be a PEM block of type CERTIFICATE; it is on one line", "(line {line}: YAML folds"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, problems, err := inspect(t, tt.src, vars(tt.env...))
			if err != nil {
				t.Fatalf("InspectConfig: %v\n%s", err, tt.src)
			}
			var got []string
			for _, p := range problems {
				if p.Key == tt.key {
					got = append(got, p.Error())
				}
			}
			if len(got) != 1 {
				t.Fatalf("problems with %s: %q, want one (all: %v)", tt.key, got, problems)
			}
			name := tt.key[strings.LastIndexByte(tt.key, '.')+1:]
			line := strings.Count(tt.src[:strings.Index(tt.src, " "+name+":")], "\n") + 1
			for _, w := range tt.want {
				if w = strings.ReplaceAll(w, "{line}", strconv.Itoa(line)); !strings.Contains(got[0], w) {
					t.Errorf("%s\nwant it to say %q", got[0], w)
				}
			}
			for _, secret := range append(pemLines(keyPEM), pemLines(certPEM)...) {
				if len(secret) > 16 && strings.Contains(got[0], secret[:16]) {
					t.Fatalf("the problem quotes the PEM: %s", got[0])
				}
			}
		})
	}

	// A Config built in code has no lines, but the cause is the value's.
	cfg := *full
	cfg.SAML.Additional.PrivateKey = extauth.NewSecret(oneLine)
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "private_key must be a PEM block of type RSA PRIVATE KEY or PRIVATE KEY; it is on one line: its line breaks were lost") ||
		strings.Contains(err.Error(), "(line ") {
		t.Errorf("Validate: %v", err)
	}
}

// oidc_additional_settings' private_key is named with its line too.
func TestOIDCPrivateKeyProblemNamesTheLine(t *testing.T) {
	full := fullConfig(t)
	keyPEM := full.SAML.Additional.PrivateKey.Value()
	src := "oidc_client_id: c\noidc_issuer: https://id.example\noidc_additional_settings:\n  client_auth_method: private_key_jwt\n" +
		"  private_key: " + strings.ReplaceAll(strings.TrimSpace(keyPEM), "\n", "\n    ") + "\n"
	_, problems, err := inspect(t, src, vars())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		if p.Key == "oidc_additional_settings.private_key" {
			got = append(got, p.Error())
		}
	}
	if len(got) != 1 || !strings.Contains(got[0], "(line 5: YAML folds the lines of a value that is not a literal block into one; write private_key: | and the block on the lines below it, indented)") {
		t.Errorf("problems with private_key: %q (all: %v)", got, problems)
	}
}
