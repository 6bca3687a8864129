package providers_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/extauth/extauth/providers"
)

func keyPEM(t testing.TB, typ string, der []byte) string {
	t.Helper()
	return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
}

func pkcs8(t testing.TB, k crypto.Signer) string {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return keyPEM(t, "PRIVATE KEY", der)
}

// TestParseOIDCPrivateKey: RSA of 2048 bits or more and EC P-256 in each
// PEM form parse; anything else is refused with fixed text that never
// quotes the input.
func TestParseOIDCPrivateKey(t *testing.T) {
	rsa2048, _ := rsa.GenerateKey(rand.Reader, 2048)
	rsa1024, _ := rsa.GenerateKey(rand.Reader, 1024)
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	sec1, _ := x509.MarshalECPrivateKey(p256)
	for _, tc := range []struct {
		name, pem, want string
	}{
		{"RSA PKCS #8", pkcs8(t, rsa2048), ""},
		{"RSA PKCS #1", keyPEM(t, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rsa2048)), ""},
		{"EC PKCS #8", pkcs8(t, p256), ""},
		{"EC SEC 1", keyPEM(t, "EC PRIVATE KEY", sec1), ""},
		{"RSA 1024", pkcs8(t, rsa1024), "is a 1024-bit RSA key; at least 2048 bits are required"},
		{"EC P-384", pkcs8(t, p384), "is an EC key on P-384; only P-256 is accepted"},
		{"Ed25519", pkcs8(t, ed), "must be an RSA or EC P-256 key"},
		{"encrypted", "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----\n", "is encrypted"},
		{"a public key", keyPEM(t, "PUBLIC KEY", []byte("junk")), "holds a public key, not a private key"},
		{"garbage in a block", keyPEM(t, "PRIVATE KEY", []byte("SECRET-BYTES")), "does not parse as a PKCS #8 private key"},
		{"no PEM", "SECRET-BYTES", "must be a PEM block"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := providers.ParseOIDCPrivateKey(tc.pem)
			if tc.want == "" {
				if err != nil || k == nil {
					t.Fatalf("%v", err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "MII") {
				t.Errorf("the error quotes the input: %v", err)
			}
		})
	}
}

// The high-assurance options are the oidc strategy's: search_oauth2
// (Google) refuses them rather than ignore them.
func TestSearchOAuth2RefusesHighAssurance(t *testing.T) {
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	env := providers.Env{CallbackURL: "https://app.example/cb", HTTPClient: http.DefaultClient}
	_, err := providers.NewSearchOAuth2(providers.SearchOAuth2Config{ClientID: "c", ClientSecret: "s",
		Options: providers.SearchOAuth2Options{OIDCOptions: providers.OIDCOptions{AuthMethod: providers.AuthMethodPrivateKeyJWT}}}, env)
	if err == nil || !strings.Contains(err.Error(), "for the oidc provider only") {
		t.Errorf("err = %v", err)
	}
	s, err := providers.NewOIDC(providers.OIDCConfig{ClientID: "c", Issuer: "https://id.example", PrivateKey: pkcs8(t, k),
		Options: providers.OIDCOptions{AuthMethod: providers.AuthMethodPrivateKeyJWT}}, env)
	if err != nil || s.ExtraRoutes()[providers.PurposeJWKS] == nil {
		t.Errorf("oidc: %v, routes %v", err, s.ExtraRoutes())
	}
}

func ExampleCheckOIDCConfig() {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		panic(err)
	}
	c := providers.OIDCConfig{
		ClientID:   "app",
		Issuer:     "https://eid.example.gov",
		PrivateKey: string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		Options: providers.OIDCOptions{
			AuthMethod:        providers.AuthMethodPrivateKeyJWT,
			IDTokenEncryption: providers.OIDCEncryption{Alg: "RSA-OAEP-256", Enc: "A256GCM"},
			AuthParams:        map[string]string{"max_age": "an hour"},
		},
	}
	for _, p := range providers.CheckOIDCConfig(c) {
		fmt.Println(p)
	}
	// Output:
	// oidc_additional_settings.id_token_encrypted_response_alg does not suit the EC private_key: use ECDH-ES, ECDH-ES+A128KW, ECDH-ES+A192KW, ECDH-ES+A256KW
	// oidc_additional_settings.max_age must be a number of seconds from 0 to 31622400 (a year), in digits alone
}

// An authorization parameter that is no setting nor one of OpenID
// Connect's is warned about by the oidc strategy, naming its entry of
// oidc_additional_settings; search_oauth2 has no such mapping (Google's
// parameters come from the host's code) and says nothing.
func TestOIDCUnknownParameterWarned(t *testing.T) {
	for _, name := range []string{"oidc", "search_oauth2"} {
		var logs strings.Builder
		env := providers.Env{CallbackURL: "https://app.example/cb", HTTPClient: http.DefaultClient, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
		o := providers.OIDCOptions{AuthParams: map[string]string{"include_granted_scopes": "true", "ui_locales": "fr"}}
		var err error
		if name == "oidc" {
			_, err = providers.NewOIDC(providers.OIDCConfig{ClientID: "c", ClientSecret: "s", Issuer: "https://id.example", Options: o}, env)
		} else {
			_, err = providers.NewSearchOAuth2(providers.SearchOAuth2Config{ClientID: "c", ClientSecret: "s", Options: providers.SearchOAuth2Options{OIDCOptions: o}}, env)
		}
		if err != nil {
			t.Fatal(err)
		}
		const want = "extauth: oidc_additional_settings.include_granted_scopes is not a setting: it is sent to the provider as the authorization request parameter include_granted_scopes"
		if warned := strings.Contains(logs.String(), want); warned != (name == "oidc") || strings.Contains(logs.String(), "ui_locales") {
			t.Errorf("%s: %s", name, logs.String())
		}
	}
}

// TestOIDCKeyThatIsTheCurrentOneWarned: a private_key_new or
// private_key_old that holds private_key's key is left out, with a
// warning at start-up, so the JWKS publishes the key once.
func TestOIDCKeyThatIsTheCurrentOneWarned(t *testing.T) {
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	key := pkcs8(t, p256)
	for _, c := range []struct {
		cfg  providers.OIDCConfig
		want string
	}{
		{providers.OIDCConfig{NextPrivateKey: key}, "extauth: oidc_additional_settings.private_key_new holds the key of private_key: there is nothing to rotate"},
		{providers.OIDCConfig{OldPrivateKey: key}, "extauth: oidc_additional_settings.private_key_old holds the key of private_key: nothing retires"},
	} {
		var logs strings.Builder
		c.cfg.ClientID, c.cfg.Issuer, c.cfg.PrivateKey = "app", "https://id.example.org", key
		c.cfg.Options.AuthMethod = providers.AuthMethodPrivateKeyJWT
		s, err := providers.NewOIDC(c.cfg, providers.Env{CallbackURL: "https://app.example/cb", HTTPClient: http.DefaultClient,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), c.want) {
			t.Errorf("log %q, want %q", logs.String(), c.want)
		}
		if n := strings.Count(string(s.JWKS()), `"kid"`); n != 2 {
			t.Errorf("the JWKS has %d keys, want the key's two halves: %s", n, s.JWKS())
		}
		keys, warnings, err := providers.OIDCKeys(c.cfg)
		if err != nil || len(keys) != 1 || len(warnings) != 1 || !strings.Contains("extauth: "+warnings[0], c.want) {
			t.Errorf("OIDCKeys: %+v %q %v", keys, warnings, err)
		}
	}
}

// TestOIDCJWKSEncryptionAlgs: the encryption half of the key that signs is
// published with the alg of each algorithm encryption is registered with,
// the ID token's under the encryption kid and UserInfo's, when it
// differs, under a kid of its own; without encryption, once and without
// alg. OIDCKeys says the same, and the kids do not depend on anything
// but the key and the algorithms.
func TestOIDCJWKSEncryptionAlgs(t *testing.T) {
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	for _, tc := range []struct {
		name              string
		idToken, userInfo string
		want              []string // "<kid suffix> <alg>" of the enc entries
	}{
		{"no encryption", "", "", []string{"-enc "}},
		{"ID tokens", "RSA-OAEP-256", "", []string{"-enc RSA-OAEP-256"}},
		{"UserInfo alone", "", "RSA-OAEP", []string{"-enc RSA-OAEP"}},
		{"both, one algorithm", "RSA-OAEP-256", "RSA-OAEP-256", []string{"-enc RSA-OAEP-256"}},
		{"both, two algorithms", "RSA-OAEP-256", "RSA-OAEP", []string{"-enc RSA-OAEP-256", "-enc-RSA-OAEP RSA-OAEP"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := providers.OIDCConfig{ClientID: "app", Issuer: "https://id.example.org", PrivateKey: pkcs8(t, key)}
			c.Options.AuthMethod = providers.AuthMethodPrivateKeyJWT
			c.Options.IDTokenEncryption.Alg = tc.idToken
			c.Options.UserInfoEncryption.Alg = tc.userInfo
			var sets [2]string
			for i := range sets {
				s, err := providers.NewOIDC(c, providers.Env{CallbackURL: "https://app.example/cb", HTTPClient: http.DefaultClient})
				if err != nil {
					t.Fatal(err)
				}
				sets[i] = string(s.JWKS())
			}
			if sets[0] != sets[1] {
				t.Errorf("two instances publish different sets:\n%s\n%s", sets[0], sets[1])
			}
			var set struct {
				Keys []struct{ Kid, Use, Alg string }
			}
			if err := json.Unmarshal([]byte(sets[0]), &set); err != nil {
				t.Fatal(err)
			}
			keys, _, err := providers.OIDCKeys(c)
			if err != nil {
				t.Fatal(err)
			}
			kid := keys[0].KID
			var got, listed []string
			for _, k := range set.Keys {
				switch {
				case k.Use == "sig" && (k.Kid != kid || k.Alg != ""):
					t.Errorf("signing entry %+v", k)
				case k.Use == "enc":
					got = append(got, strings.TrimPrefix(k.Kid, kid)+" "+k.Alg)
				}
			}
			for _, e := range keys[0].Encryption {
				listed = append(listed, strings.TrimPrefix(e.KID, kid)+" "+e.Alg)
			}
			if !slices.Equal(got, tc.want) || !slices.Equal(listed, tc.want) {
				t.Errorf("encryption entries %q, OIDCKeys %q, want %q\n%s", got, listed, tc.want, sets[0])
			}
		})
	}
}
