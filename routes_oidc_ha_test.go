package extauth_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/oidcop"
	"github.com/extauth/extauth/internal/harness"
)

// clientKey is a client private key of the tests: the key and its PEM.
type clientKey struct {
	priv crypto.Signer
	pem  string
}

// kid is the key ID extauth publishes the key's signing half under: its
// RFC 7638 thumbprint.
func (k clientKey) kid() string {
	sum, err := (&jose.JSONWebKey{Key: k.priv.Public()}).Thumbprint(crypto.SHA256)
	if err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(sum)
}

// clientKeys are made once per test binary: two RSA 2048 and two EC P-256.
var clientKeys = sync.OnceValue(func() map[string][]clientKey {
	out := map[string][]clientKey{}
	for range 2 {
		r, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		e, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		for name, k := range map[string]crypto.Signer{"RSA": r, "EC": e} {
			der, err := x509.MarshalPKCS8PrivateKey(k)
			if err != nil {
				panic(err)
			}
			out[name] = append(out[name], clientKey{k, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))})
		}
	}
	return out
})

// jwksOf is the key set a client registers by value with key.
func jwksOf(k clientKey) *jose.JSONWebKeySet {
	return &jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: k.priv.Public(), KeyID: "registered", Use: "sig"}}}
}

// highAssurance returns the setup of a provider that takes private_key_jwt
// only, requires PAR and signed request objects and encrypts ID tokens
// (RSA-OAEP-256 + A256GCM), and of an application whose secrets file
// registers it with a key and no secret; edit adjusts both.
func highAssurance(edit func(*oidcop.Config, *extauth.OIDCAdditionalSettings)) oidcSetup {
	enc := oidcop.Encryption{Alg: "RSA-OAEP-256", Enc: "A256GCM"}
	add := extauth.OIDCAdditionalSettings{
		ClientAuthMethod:            "private_key_jwt",
		PrivateKey:                  extauth.NewSecret(clientKeys()["RSA"][0].pem),
		RequestObject:               true,
		IDTokenEncryptedResponseAlg: enc.Alg,
		IDTokenEncryptedResponseEnc: enc.Enc,
	}
	return oidcSetup{
		op: func(c *oidcop.Config) {
			c.AuthMethod = "private_key_jwt"
			c.ClientSecret = ""
			c.ClientJWKSURI = strings.TrimSuffix(c.RedirectURIs[0], "/callback") + "/jwks"
			c.RequirePAR, c.RequireRequestObject = true, true
			c.IDTokenEncryption = enc
			if edit != nil {
				edit(c, &add)
			}
		},
		config: func(cfg *extauth.Config) {
			cfg.OIDC.ClientSecret = extauth.Secret{}
			cfg.OIDC.Additional = add
			switch add.ClientAuthMethod {
			case "client_secret_jwt":
				cfg.OIDC.ClientSecret = extauth.NewSecret(longSecret)
			case "client_secret_basic", "client_secret_post":
				cfg.OIDC.ClientSecret = extauth.NewSecret(oidcSecret)
			}
		},
	}
}

// longSecret is long enough for HS256's 256-bit key.
const longSecret = "a-client-secret-of-at-least-32-bytes:+ %/"

// signIn signs in with a browser that follows every redirect.
func (a *oidcApp) signIn(t *testing.T) *harness.Response {
	t.Helper()
	return harness.NewBrowser(t).Get(a.URL + "/users/auth/oidc")
}

// checkAssertions holds each client assertion the OP accepted to RFC
// 7523 3: iss and sub the client, aud as expected, a minute of validity,
// a jti never used twice, signed under the key's published kid.
func checkAssertions(t *testing.T, op *oidcop.OP, aud, kid string, want ...oidcop.Endpoint) {
	t.Helper()
	as := op.Assertions()
	var got []oidcop.Endpoint
	jtis := map[any]bool{}
	for _, a := range as {
		got = append(got, a.Endpoint)
		c := a.Claims
		iat, _ := c["iat"].(json.Number).Int64()
		exp, _ := c["exp"].(json.Number).Int64()
		if c["iss"] != oidcClientID || c["sub"] != oidcClientID || c["aud"] != aud || exp-iat != 60 || jtis[c["jti"]] || c["jti"] == "" {
			t.Errorf("%s assertion claims %v", a.Endpoint, c)
		}
		jtis[c["jti"]] = true
		if kid != "" && a.Header["kid"] != kid {
			t.Errorf("%s assertion signed under kid %v, want %s", a.Endpoint, a.Header["kid"], kid)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("assertions at %v, want %v", got, want)
	}
}

// TestOIDCHighAssuranceSecretsFile is issue 23's "done when": a secrets
// file with only a client ID, an issuer and oidc_additional_settings
// (private_key_jwt, a private key, PAR, encrypted ID tokens) signs in
// against a provider that takes private_key_jwt only, requires pushed
// and signed requests and encrypts its ID tokens.
func TestOIDCHighAssuranceSecretsFile(t *testing.T) {
	key := clientKeys()["RSA"][0]
	s := highAssurance(nil)
	s.config = func(cfg *extauth.Config) {
		src := fmt.Sprintf(`
oidc_client_id: %s
oidc_issuer: %s
oidc_additional_settings:
  client_auth_method: private_key_jwt
  private_key: |
%s  pushed_authorization_requests: true
  request_object: true
  id_token_encrypted_response_alg: RSA-OAEP-256
  id_token_encrypted_response_enc: A256GCM
  acr_values: urn:extauthtest:loa:high
  login_hint: alice@example.org
`, oidcClientID, cfg.OIDC.Issuer, indent(indent(key.pem)))
		parsed, err := extauth.ParseConfig([]byte(src))
		if err != nil {
			t.Fatal(err)
		}
		if parsed.OIDC.ClientSecret.Value() != "" || !parsed.OIDC.Configured() {
			t.Fatalf("parsed %+v", parsed.OIDC)
		}
		*cfg = *parsed
	}
	a := newOIDCApp(t, s)
	resp := a.signIn(t)
	alice := oidcop.DemoUsers()[0]
	if resp.StatusCode != http.StatusOK || resp.Body != "signed in as "+alice.Sub {
		t.Fatalf("got %d %q\n%s", resp.StatusCode, resp.Body, a.Logs)
	}
	issuer := a.OP.Issuer()
	checkAssertions(t, a.OP, issuer, key.kid(), oidcop.PAR, oidcop.Token)
	// The browser carried the request_uri alone (RFC 9126 4); the
	// parameters went to the provider pushed, inside a request object.
	front := a.OP.LastAuthorizeQuery()
	if len(front) != 2 || front.Get("client_id") != oidcClientID || !strings.HasPrefix(front.Get("request_uri"), "urn:ietf:params:oauth:request_uri:") {
		t.Errorf("authorization URL parameters %v", front)
	}
	params := a.OP.LastRequestParams()
	for _, k := range []string{"state", "nonce", "code_challenge", "redirect_uri"} {
		if params.Get(k) == "" {
			t.Errorf("the pushed request has no %s: %v", k, params)
		}
	}
	if params.Get("acr_values") != "urn:extauthtest:loa:high" || params.Get("login_hint") != "alice@example.org" {
		t.Errorf("the file's parameters were not sent: %v", params)
	}
	id := a.identities()[0]
	// The ID token arrived encrypted; the identity keeps the signed one
	// inside, which logout sends as id_token_hint.
	if strings.Count(id.Tokens.IDToken, ".") != 2 || id.Raw["acr"] != "urn:extauthtest:loa:high" || id.Email != alice.Email {
		t.Errorf("identity %+v", id)
	}
	if strings.Contains(a.Logs.String(), "BEGIN PRIVATE KEY") || strings.Contains(a.Logs.String(), pemLines(key.pem)[1]) {
		t.Errorf("the private key reached the log")
	}
}

// TestOIDCHighAssuranceVariants signs in with each key type, client
// authentication method, encryption and way of sending the request.
func TestOIDCHighAssuranceVariants(t *testing.T) {
	ec := clientKeys()["EC"][0]
	for _, tc := range []struct {
		name string
		edit func(*oidcop.Config, *extauth.OIDCAdditionalSettings)
		// check looks at the OP after the sign-in.
		check func(t *testing.T, a *oidcApp)
	}{
		{"EC key, ECDH-ES+A128KW, request object by value", func(c *oidcop.Config, s *extauth.OIDCAdditionalSettings) {
			c.RequirePAR = false
			c.IDTokenEncryption = oidcop.Encryption{Alg: "ECDH-ES+A128KW", Enc: "A128GCM"}
			s.PrivateKey = extauth.NewSecret(ec.pem)
			s.IDTokenEncryptedResponseAlg, s.IDTokenEncryptedResponseEnc = "ECDH-ES+A128KW", "A128GCM"
		}, func(t *testing.T, a *oidcApp) {
			front := a.OP.LastAuthorizeQuery()
			if front.Get("request") == "" || front.Has("state") || front.Has("nonce") || front.Get("scope") == "" {
				t.Errorf("authorization URL parameters %v", front)
			}
			checkAssertions(t, a.OP, a.OP.Issuer(), ec.kid(), oidcop.Token)
		}},
		{"ECDH-ES direct, A256CBC-HS512", func(c *oidcop.Config, s *extauth.OIDCAdditionalSettings) {
			c.IDTokenEncryption = oidcop.Encryption{Alg: "ECDH-ES", Enc: "A256CBC-HS512"}
			s.PrivateKey = extauth.NewSecret(ec.pem)
			s.IDTokenEncryptedResponseAlg, s.IDTokenEncryptedResponseEnc = "ECDH-ES", "A256CBC-HS512"
		}, nil},
		{"RSA-OAEP with the default A128CBC-HS256, encrypted UserInfo", func(c *oidcop.Config, s *extauth.OIDCAdditionalSettings) {
			c.SparseIDToken = true
			c.IDTokenEncryption = oidcop.Encryption{Alg: "RSA-OAEP"}
			c.UserInfoEncryption = oidcop.Encryption{Alg: "RSA-OAEP-256", Enc: "A128GCM"}
			s.IDTokenEncryptedResponseAlg, s.IDTokenEncryptedResponseEnc = "RSA-OAEP", ""
			s.UserInfoEncryptedResponseAlg, s.UserInfoEncryptedResponseEnc = "RSA-OAEP-256", "A128GCM"
		}, func(t *testing.T, a *oidcApp) {
			id := a.identities()[0]
			if a.OP.Hits(oidcop.UserInfo) != 1 || id.Email != oidcop.DemoUsers()[0].Email || id.Name == "" {
				t.Errorf("UserInfo asked %d times, identity %+v", a.OP.Hits(oidcop.UserInfo), id)
			}
		}},
		// Keycloak picks a client's encryption key by its alg: the JWKS
		// route publishes one entry per algorithm registered.
		{"a provider that picks the encryption key by alg, as Keycloak does: RSA-OAEP for ID tokens, RSA-OAEP-256 for UserInfo", func(c *oidcop.Config, s *extauth.OIDCAdditionalSettings) {
			c.EncryptionKeyByAlg = true
			c.SparseIDToken = true
			c.IDTokenEncryption = oidcop.Encryption{Alg: "RSA-OAEP", Enc: "A256GCM"}
			c.UserInfoEncryption = oidcop.Encryption{Alg: "RSA-OAEP-256", Enc: "A128GCM"}
			s.IDTokenEncryptedResponseAlg, s.IDTokenEncryptedResponseEnc = "RSA-OAEP", "A256GCM"
			s.UserInfoEncryptedResponseAlg, s.UserInfoEncryptedResponseEnc = "RSA-OAEP-256", "A128GCM"
		}, func(t *testing.T, a *oidcApp) {
			if id := a.identities()[0]; a.OP.Hits(oidcop.UserInfo) != 1 || id.Email != oidcop.DemoUsers()[0].Email {
				t.Errorf("UserInfo asked %d times, identity %+v", a.OP.Hits(oidcop.UserInfo), id)
			}
		}},
		{"a provider that picks the encryption key by alg, EC key, ECDH-ES+A256KW", func(c *oidcop.Config, s *extauth.OIDCAdditionalSettings) {
			c.EncryptionKeyByAlg = true
			c.IDTokenEncryption = oidcop.Encryption{Alg: "ECDH-ES+A256KW", Enc: "A256GCM"}
			s.PrivateKey = extauth.NewSecret(ec.pem)
			s.IDTokenEncryptedResponseAlg, s.IDTokenEncryptedResponseEnc = "ECDH-ES+A256KW", "A256GCM"
		}, nil},
		{"client_secret_jwt", func(c *oidcop.Config, s *extauth.OIDCAdditionalSettings) {
			c.AuthMethod, c.ClientSecret = "client_secret_jwt", longSecret
			s.ClientAuthMethod = "client_secret_jwt"
		}, func(t *testing.T, a *oidcApp) {
			checkAssertions(t, a.OP, a.OP.Issuer(), "", oidcop.PAR, oidcop.Token)
			if alg := a.OP.Assertions()[0].Header["alg"]; alg != "HS256" {
				t.Errorf("assertion signed with %v", alg)
			}
		}},
		{"client_secret_basic at the PAR and token endpoints, with a signed request", func(c *oidcop.Config, s *extauth.OIDCAdditionalSettings) {
			c.AuthMethod, c.ClientSecret = "client_secret_basic", oidcSecret
			s.ClientAuthMethod = "client_secret_basic"
		}, func(t *testing.T, a *oidcApp) {
			if a.OP.Hits(oidcop.PAR) != 1 || len(a.OP.Assertions()) != 0 {
				t.Errorf("PAR asked %d times, %d assertions", a.OP.Hits(oidcop.PAR), len(a.OP.Assertions()))
			}
		}},
		{"the token endpoint as audience by choice, warned about, PAR by setting, no request object", func(c *oidcop.Config, s *extauth.OIDCAdditionalSettings) {
			c.RequirePAR, c.RequireRequestObject = false, false
			s.PushedAuthorizationRequests, s.RequestObject = true, false
			s.ClientAssertionAudience = "token_endpoint"
		}, func(t *testing.T, a *oidcApp) {
			checkAssertions(t, a.OP, a.OP.Issuer()+"/token", clientKeys()["RSA"][0].kid(), oidcop.PAR, oidcop.Token)
			if a.OP.LastRequestParams().Get("nonce") == "" {
				t.Errorf("pushed parameters %v", a.OP.LastRequestParams())
			}
			if !strings.Contains(a.Logs.String(), "audience injection") {
				t.Errorf("no start-up warning about the token endpoint audience:\n%s", a.Logs)
			}
		}},
		{"acr_values and max_age met", func(c *oidcop.Config, s *extauth.OIDCAdditionalSettings) {
			s.ACRValues, s.MaxAge = "urn:extauthtest:loa:high urn:extauthtest:loa:substantial", "600"
		}, func(t *testing.T, a *oidcApp) {
			id := a.identities()[0]
			if id.Raw["acr"] != "urn:extauthtest:loa:high" || id.Raw["auth_time"] == nil {
				t.Errorf("raw claims %v", id.Raw)
			}
			if p := a.OP.LastRequestParams(); p.Get("max_age") != "600" {
				t.Errorf("max_age sent as %q", p.Get("max_age"))
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newOIDCApp(t, highAssurance(tc.edit))
			if resp := a.signIn(t); resp.StatusCode != http.StatusOK || len(a.identities()) != 1 {
				t.Fatalf("got %d %q\n%s", resp.StatusCode, resp.Body, a.Logs)
			}
			if tc.check != nil {
				tc.check(t, a)
			}
		})
	}
}

// TestOIDCHighAssuranceRefusals plays each way a high-assurance sign-in
// must fail: a client assertion the provider refuses (another key than
// registered, expired), an ID token or UserInfo not encrypted as
// registered, a weaker authentication than asked, and settings the
// provider does not support. The hook never runs.
func TestOIDCHighAssuranceRefusals(t *testing.T) {
	plain := func(c *oidcop.Config, s *extauth.OIDCAdditionalSettings) {
		c.RequirePAR, c.RequireRequestObject = false, false
		s.RequestObject = false
	}
	for _, tc := range []struct {
		name   string
		edit   func(*oidcop.Config, *extauth.OIDCAdditionalSettings)
		fault  oidcop.Fault
		status int
		code   string
		why    string // in the log
	}{
		{"client assertion signed with another key than registered", func(c *oidcop.Config, s *extauth.OIDCAdditionalSettings) {
			plain(c, s)
			c.ClientJWKS = jwksOf(clientKeys()["RSA"][1])
		}, "", http.StatusBadGateway, "invalid_credentials", "invalid_client"},
		{"expired client assertion", func(c *oidcop.Config, s *extauth.OIDCAdditionalSettings) {
			plain(c, s)
			c.Now = func() time.Time { return time.Now().Add(10 * time.Minute) }
		}, "", http.StatusBadGateway, "invalid_credentials", "invalid_client"},
		{"pushed request refused for another key", func(c *oidcop.Config, s *extauth.OIDCAdditionalSettings) {
			c.ClientJWKS = jwksOf(clientKeys()["RSA"][1])
		}, "", http.StatusBadGateway, "invalid_credentials", "pushed authorization request"},
		{"unencrypted ID token when encryption is expected", func(c *oidcop.Config, s *extauth.OIDCAdditionalSettings) {
			c.IDTokenEncryption = oidcop.Encryption{}
		}, "", http.StatusBadRequest, "invalid_response", "is not encrypted"},
		{"ID token encrypted with another algorithm than registered", func(c *oidcop.Config, s *extauth.OIDCAdditionalSettings) {
			c.IDTokenEncryption = oidcop.Encryption{Alg: "RSA-OAEP", Enc: "A256GCM"}
		}, "", http.StatusBadRequest, "invalid_response", "other algorithms than registered"},
		{"ID token encrypted to another key", func(c *oidcop.Config, s *extauth.OIDCAdditionalSettings) {
			c.ClientJWKSURI = ""
			c.ClientJWKS = &jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
				{Key: clientKeys()["RSA"][0].priv.Public(), KeyID: clientKeys()["RSA"][0].kid(), Use: "sig"},
				{Key: clientKeys()["RSA"][1].priv.Public(), KeyID: "enc", Use: "enc"}}}
		}, "", http.StatusBadRequest, "invalid_response", "does not decrypt"},
		{"UserInfo not encrypted when encryption is expected", func(c *oidcop.Config, s *extauth.OIDCAdditionalSettings) {
			c.SparseIDToken = true
			s.UserInfoEncryptedResponseAlg = "RSA-OAEP-256"
		}, "", http.StatusBadRequest, "invalid_response", "userinfo: is not encrypted"},
		{"weaker acr than asked", func(c *oidcop.Config, s *extauth.OIDCAdditionalSettings) {
			s.ACRValues = "urn:extauthtest:loa:high"
		}, oidcop.WeakACR, http.StatusForbidden, "insufficient_user_authentication", "is not one of the requested acr_values"},
		{"authentication older than max_age", func(c *oidcop.Config, s *extauth.OIDCAdditionalSettings) {
			s.MaxAge = "300"
		}, oidcop.OldAuthTime, http.StatusForbidden, "insufficient_user_authentication", "more than max_age"},
		{"provider does not list private_key_jwt", func(c *oidcop.Config, s *extauth.OIDCAdditionalSettings) {
			plain(c, s)
			c.AuthMethod, c.ClientSecret = "client_secret_basic", oidcSecret
		}, "", http.StatusInternalServerError, "misconfigured", "oidc_additional_settings.client_auth_method: private_key_jwt is not a method the provider lists"},
		{"provider does not support the encryption", func(c *oidcop.Config, s *extauth.OIDCAdditionalSettings) {
			s.PrivateKey = extauth.NewSecret(clientKeys()["EC"][0].pem)
			s.IDTokenEncryptedResponseAlg = "ECDH-ES+A192KW"
		}, "", http.StatusInternalServerError, "misconfigured", "oidc_additional_settings.id_token_encrypted_response_alg: ECDH-ES+A192KW is not in the provider's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newOIDCApp(t, highAssurance(tc.edit))
			if tc.fault != "" {
				a.OP.SetFaults(tc.fault)
			}
			resp := a.signIn(t)
			wantCode(t, resp, tc.status, tc.code)
			if n := len(a.identities()); n != 0 {
				t.Fatalf("hook called %d times", n)
			}
			if !strings.Contains(a.Logs.String(), tc.why) {
				t.Errorf("the log does not say why (%q):\n%s", tc.why, a.Logs)
			}
			if tc.code == "misconfigured" && a.OP.Hits(oidcop.Token)+a.OP.Hits(oidcop.PAR) != 0 {
				t.Errorf("the provider was asked although the settings cannot work")
			}
		})
	}
}

// replayer sends the first client assertion it sees at a token endpoint
// again in place of every later one, as an attacker who captured one
// would.
type replayer struct {
	mu    sync.Mutex
	first string
}

func (p *replayer) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/token") {
		return http.DefaultTransport.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	form, _ := url.ParseQuery(string(body))
	p.mu.Lock()
	if p.first == "" {
		p.first = form.Get("client_assertion")
	} else {
		form.Set("client_assertion", p.first)
	}
	p.mu.Unlock()
	enc := form.Encode()
	r = r.Clone(r.Context())
	r.Body, r.ContentLength = io.NopCloser(strings.NewReader(enc)), int64(len(enc))
	return http.DefaultTransport.RoundTrip(r)
}

// TestOIDCClientAssertionReplayRefused: a client assertion the provider
// has seen is refused the second time (its jti), so the sign-in that
// replays it fails; extauth makes a fresh one each time, so without the
// replay both succeed.
func TestOIDCClientAssertionReplayRefused(t *testing.T) {
	for _, replay := range []bool{false, true} {
		t.Run(fmt.Sprint("replay=", replay), func(t *testing.T) {
			s := highAssurance(func(c *oidcop.Config, s *extauth.OIDCAdditionalSettings) {
				c.RequirePAR, c.RequireRequestObject = false, false
				s.RequestObject = false
			})
			if replay {
				s.opts = func(o *extauth.Options) { o.HTTPClient = &http.Client{Transport: &replayer{}} }
			}
			a := newOIDCApp(t, s)
			if resp := a.signIn(t); resp.StatusCode != http.StatusOK {
				t.Fatalf("first sign-in: %d %s\n%s", resp.StatusCode, resp.Body, a.Logs)
			}
			resp := a.signIn(t)
			if !replay {
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("second sign-in: %d %s", resp.StatusCode, resp.Body)
				}
				return
			}
			wantCode(t, resp, http.StatusBadGateway, "invalid_credentials")
			if n := len(a.identities()); n != 1 {
				t.Errorf("hook called %d times", n)
			}
		})
	}
}

// TestOIDCJWKSRoute: the JWKS route publishes the public halves of
// private_key, for signing and for encryption, and of private_key_new and
// private_key_old, for signing only, under key IDs that another instance
// with the same keys publishes too; never a private part. Without keys the
// set is empty; search_oauth2 has no such route.
func TestOIDCJWKSRoute(t *testing.T) {
	rsaKey, ecKey, oldKey := clientKeys()["RSA"][0], clientKeys()["EC"][1], clientKeys()["EC"][0]
	// An RSA key rotated to an EC one: so neither is encrypted to.
	setup := highAssurance(func(c *oidcop.Config, s *extauth.OIDCAdditionalSettings) {
		c.IDTokenEncryption = oidcop.Encryption{}
		s.IDTokenEncryptedResponseAlg, s.IDTokenEncryptedResponseEnc = "", ""
		s.PrivateKeyNew = extauth.NewSecret(ecKey.pem)
		s.PrivateKeyOld = extauth.NewSecret(oldKey.pem)
	})
	var sets [2][]byte
	for i := range sets {
		a := newOIDCApp(t, setup)
		resp, err := http.Get(a.URL + "/users/auth/oidc/jwks")
		if err != nil {
			t.Fatal(err)
		}
		sets[i], _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/jwk-set+json" || resp.Header.Get("Cache-Control") == "" {
			t.Fatalf("%d %v", resp.StatusCode, resp.Header)
		}
		if i == 0 {
			post, err := http.Post(a.URL+"/users/auth/oidc/jwks", "text/plain", nil)
			if err != nil {
				t.Fatal(err)
			}
			post.Body.Close()
			if post.StatusCode != http.StatusMethodNotAllowed {
				t.Errorf("POST: %d", post.StatusCode)
			}
		}
	}
	if !bytes.Equal(sets[0], sets[1]) {
		t.Errorf("two instances publish different sets:\n%s\n%s", sets[0], sets[1])
	}
	var raw struct{ Keys []map[string]any }
	if err := json.Unmarshal(sets[0], &raw); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, k := range raw.Keys {
		for _, private := range []string{"d", "p", "q", "dp", "dq", "qi", "k"} {
			if _, ok := k[private]; ok {
				t.Errorf("key %v publishes its private member %s", k["kid"], private)
			}
		}
		got = append(got, fmt.Sprint(k["kty"], " ", k["use"], " ", k["kid"]))
	}
	want := []string{
		"RSA sig " + rsaKey.kid(), "RSA enc " + rsaKey.kid() + "-enc",
		"EC sig " + ecKey.kid(), "EC sig " + oldKey.kid(),
	}
	if !slices.Equal(got, want) {
		t.Errorf("keys %v, want %v", got, want)
	}

	a := newOIDCApp(t, oidcSetup{google: func(*oidcop.Config) {}})
	resp := harness.NewBrowser(t).Get(a.URL + "/users/auth/oidc/jwks")
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(resp.Body) != `{"keys":[]}` {
		t.Errorf("without keys: %d %q", resp.StatusCode, resp.Body)
	}
	if resp := harness.NewBrowser(t).Get(a.URL + "/users/auth/search_oauth2/jwks"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("search_oauth2 jwks: %d", resp.StatusCode)
	}
}

// TestOIDCKeyRotation: with private_key_new set, a provider that already
// encrypts to it (it read the JWKS from an instance that promoted it) is
// understood, while assertions are still signed with private_key.
func TestOIDCKeyRotation(t *testing.T) {
	old, next := clientKeys()["RSA"][0], clientKeys()["RSA"][1]
	a := newOIDCApp(t, highAssurance(func(c *oidcop.Config, s *extauth.OIDCAdditionalSettings) {
		s.PrivateKeyNew = extauth.NewSecret(next.pem)
		c.ClientJWKS = &jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
			{Key: old.priv.Public(), KeyID: old.kid(), Use: "sig"},
			{Key: next.priv.Public(), KeyID: next.kid(), Use: "sig"},
			{Key: next.priv.Public(), KeyID: next.kid() + "-enc", Use: "enc"},
		}}
	}))
	if resp := a.signIn(t); resp.StatusCode != http.StatusOK {
		t.Fatalf("got %d %q\n%s", resp.StatusCode, resp.Body, a.Logs)
	}
	checkAssertions(t, a.OP, a.OP.Issuer(), old.kid(), oidcop.PAR, oidcop.Token)
}

// TestOIDCRefreshAndRevokeWithClientAssertion: renewing tokens and
// revoking them authenticate with a fresh client assertion each, as the
// code exchange does; a revoked refresh token renews nothing.
func TestOIDCRefreshAndRevokeWithClientAssertion(t *testing.T) {
	a := newOIDCApp(t, highAssurance(func(_ *oidcop.Config, s *extauth.OIDCAdditionalSettings) {
		s.Scope = "openid email profile offline_access"
	}))
	if resp := a.signIn(t); resp.StatusCode != http.StatusOK {
		t.Fatalf("got %d %q\n%s", resp.StatusCode, resp.Body, a.Logs)
	}
	id := a.identities()[0]
	if id.Tokens.RefreshToken == "" {
		t.Fatal("no refresh token")
	}
	ctx := context.Background()
	stale := *id
	stale.Tokens.Expiry = time.Now().Add(-time.Hour)
	ts, err := a.Auth.TokenSource(ctx, &stale)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := ts.Token()
	if err != nil {
		t.Fatalf("refresh: %v\n%s", err, a.Logs)
	}
	renewed := *id
	renewed.Tokens.AccessToken, renewed.Tokens.RefreshToken = tok.AccessToken, tok.RefreshToken
	// Tokens of another issuer, or another tenant, go nowhere.
	for _, edit := range []func(*extauth.Identity){
		func(o *extauth.Identity) { o.Tokens.Issuer = "https://evil.example" },
		func(o *extauth.Identity) { o.Tokens.Issuer, o.Tokens.Tenant = "", "city-b" },
		func(o *extauth.Identity) { o.Tokens.Tenant = "city-b" },
	} {
		other := renewed
		edit(&other)
		var e *extauth.Error
		if err := a.Auth.RevokeTokens(ctx, &other); !errors.As(err, &e) || e.Code != extauth.CodeInvalidState {
			t.Errorf("foreign tokens: %v", err)
		}
	}
	if a.OP.Hits(oidcop.Revocation) != 0 {
		t.Fatalf("foreign tokens reached the revocation endpoint")
	}
	if err := a.Auth.RevokeTokens(ctx, &renewed); err != nil {
		t.Fatal(err)
	}
	key := clientKeys()["RSA"][0]
	checkAssertions(t, a.OP, a.OP.Issuer(), key.kid(),
		oidcop.PAR, oidcop.Token, oidcop.Token, oidcop.Revocation, oidcop.Revocation)
	if a.OP.Revoked() != 2 {
		t.Errorf("%d tokens revoked", a.OP.Revoked())
	}
	renewed.Tokens.Expiry = time.Now().Add(-time.Hour)
	ts, err = a.Auth.TokenSource(ctx, &renewed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.Token(); err == nil {
		t.Error("a revoked refresh token renewed the tokens")
	}

	// A provider without a revocation endpoint, or a provider that is not
	// OpenID Connect, says so.
	if err := a.Auth.RevokeTokens(ctx, &extauth.Identity{Provider: "saml"}); !errors.Is(err, extauth.ErrNotConfigured) {
		t.Errorf("saml: %v", err)
	}
}

// TestOIDCLogoutTokenWithoutExp: providers that implement an earlier
// draft of Back-Channel Logout send logout tokens without exp. Such a
// token is accepted on its iat and jti, with a warning; replayed, or with
// an old iat, it is refused as any other. An encrypted logout token (as
// oidc-provider sends when ID tokens are encrypted) is decrypted first.
func TestOIDCLogoutTokenWithoutExp(t *testing.T) {
	for _, encrypted := range []bool{false, true} {
		t.Run(fmt.Sprint("encrypted=", encrypted), func(t *testing.T) {
			s := oidcSetup{}
			if encrypted {
				s = highAssurance(nil)
			}
			a, l := logoutApp(t, s)
			id := a.signInKeeping(harness.NewBrowser(t), l)
			tok, err := a.OP.LogoutToken(id.UID, id.SessionID, oidcop.LogoutNoExp)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Count(tok, "."); got != map[bool]int{false: 2, true: 4}[encrypted] {
				t.Fatalf("token has %d dots", got)
			}
			if status, _, body := backchannel(t, a, tok); status != http.StatusOK {
				t.Fatalf("%d %s\n%s", status, body, a.Logs)
			}
			if !strings.Contains(a.Logs.String(), "level=WARN") || !strings.Contains(a.Logs.String(), "logout token without exp") {
				t.Errorf("no warning:\n%s", a.Logs)
			}
			if status, _, _ := backchannel(t, a, tok); status != http.StatusBadRequest {
				t.Errorf("replayed: %d", status)
			}
			old, err := a.OP.LogoutToken(id.UID, id.SessionID, oidcop.LogoutNoExp, oidcop.LogoutOldIAT)
			if err != nil {
				t.Fatal(err)
			}
			if status, _, _ := backchannel(t, a, old); status != http.StatusBadRequest {
				t.Errorf("old iat without exp: %d", status)
			}
			if events, _ := l.seen(); len(events) != 1 {
				t.Errorf("events %+v", events)
			}
		})
	}
}

// TestOIDCJWKSRoutePerTenant: each tenant publishes its own client's keys
// at its own JWKS route; the route needs no discovery.
func TestOIDCJWKSRoutePerTenant(t *testing.T) {
	keyed := func(k clientKey) *extauth.Config {
		return &extauth.Config{OIDC: extauth.OIDCConfig{ClientID: "c", Issuer: "https://id.example.org",
			Additional: extauth.OIDCAdditionalSettings{ClientAuthMethod: "private_key_jwt", PrivateKey: extauth.NewSecret(k.pem)}}}
	}
	cfg := keyed(clientKeys()["RSA"][0])
	cfg.Tenants = map[string]*extauth.Config{"city-a": keyed(clientKeys()["EC"][0]), "city-b": keyed(clientKeys()["EC"][1])}
	for name, t2 := range cfg.Tenants {
		t2.Tenant = name
	}
	a, err := extauth.New(cfg, extauth.Options{BaseURL: "https://app.example.org", CookieKey: testKey,
		OnSuccess: func(http.ResponseWriter, *http.Request, *extauth.Identity) {},
		TenantOf:  func(r *http.Request) (string, error) { return r.Header.Get("X-Tenant"), nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for tenant, k := range map[string]clientKey{"": clientKeys()["RSA"][0], "city-a": clientKeys()["EC"][0], "city-b": clientKeys()["EC"][1]} {
		req := httptest.NewRequest(http.MethodGet, "https://app.example.org/users/auth/oidc/jwks", nil)
		req.Header.Set("X-Tenant", tenant)
		rec := httptest.NewRecorder()
		a.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"kid":"`+k.kid()+`"`) || strings.Count(rec.Body.String(), `"kid"`) != 2 {
			t.Errorf("tenant %q: %d %s", tenant, rec.Code, rec.Body)
		}
	}
}

// A provider that refuses to revoke one of the tokens (Keycloak refuses a
// confidential client's DPoP-bound refresh token) still has the other
// revoked, and RevokeTokens reports the refusal.
func TestOIDCRevokeTriesEachToken(t *testing.T) {
	a := newOIDCApp(t, oidcSetup{
		config: func(c *extauth.Config) { c.OIDC.Additional.Scope = "openid email profile offline_access" },
		opts: func(o *extauth.Options) {
			o.HTTPClient = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				if strings.HasSuffix(r.URL.Path, "/revoke") {
					body, _ := io.ReadAll(r.Body)
					if form, _ := url.ParseQuery(string(body)); form.Get("token_type_hint") == "refresh_token" {
						return &http.Response{StatusCode: http.StatusBadRequest, Header: http.Header{"Content-Type": {"application/json"}},
							Body: io.NopCloser(strings.NewReader(`{"error":"invalid_token"}`)), Request: r}, nil
					}
					r.Body = io.NopCloser(bytes.NewReader(body))
				}
				return http.DefaultTransport.RoundTrip(r)
			})}
		},
	})
	if resp := a.signIn(t); resp.StatusCode != http.StatusOK {
		t.Fatalf("got %d %q\n%s", resp.StatusCode, resp.Body, a.Logs)
	}
	id := a.identities()[0]
	if id.Tokens.RefreshToken == "" {
		t.Fatal("no refresh token")
	}
	err := a.Auth.RevokeTokens(context.Background(), id)
	if !errors.Is(err, &extauth.Error{Code: extauth.CodeInvalidResponse}) || !strings.Contains(err.Error(), "invalid_token") {
		t.Errorf("a refused refresh token's revocation: %v", err)
	}
	if n := a.OP.Revoked(); n != 1 {
		t.Errorf("%d tokens revoked, want the access token", n)
	}
}

// roundTripFunc is an http.RoundTripper of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
