package providers

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/extauth/extauth/internal/oidfed"
	"github.com/extauth/extauth/internal/outbound"
)

func ecKeyPEM(t *testing.T) (*ecdsa.PrivateKey, string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return k, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// fedOP is an anchor and an OP under it, served with the OP's metadata
// as each test shapes it.
type fedOP struct {
	srv     *httptest.Server
	ta      *oidfed.Authority
	op      *oidfed.Entity
	opKey   oidfed.Key
	anchors []OIDCTrustAnchor
	// register answers explicit registrations.
	register http.HandlerFunc
}

func newFedOP(t *testing.T, md func(base string) map[string]any) *fedOP {
	f := &fedOP{}
	mux := http.NewServeMux()
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	base := f.srv.URL
	taPriv, _ := ecKeyPEM(t)
	opPriv, _ := ecKeyPEM(t)
	taKey, _ := oidfed.NewKey(taPriv)
	f.opKey, _ = oidfed.NewKey(opPriv)
	f.ta = oidfed.NewAuthority(&oidfed.Entity{ID: base + "/ta", Keys: []oidfed.Key{taKey}})
	f.op = &oidfed.Entity{ID: base + "/op", Keys: []oidfed.Key{f.opKey}, AuthorityHints: []string{f.ta.ID},
		Metadata: map[string]map[string]any{oidfed.TypeOpenIDProvider: md(base + "/op")}}
	f.ta.Add(f.op.ID, oidfed.Subordinate{JWKS: oidfed.JWKS(f.opKey)})
	mux.Handle("/ta/", http.StripPrefix("/ta", f.ta))
	mux.HandleFunc("/op/.well-known/openid-federation", f.op.ServeConfiguration)
	mux.HandleFunc("/op/register", func(w http.ResponseWriter, r *http.Request) { f.register(w, r) })
	jwks, _ := json.Marshal(oidfed.JWKS(taKey))
	f.anchors = []OIDCTrustAnchor{{EntityID: f.ta.ID, JWKS: string(jwks)}}
	return f
}

func opMetadata(op string) map[string]any {
	return map[string]any{
		"issuer": op, "authorization_endpoint": op + "/authorize", "token_endpoint": op + "/token",
		"token_endpoint_auth_methods_supported": []any{"private_key_jwt"}, "id_token_signing_alg_values_supported": []any{"ES256"},
		"request_parameter_supported": true, "client_registration_types_supported": []any{"automatic", "explicit"},
		"federation_registration_endpoint": op + "/register",
	}
}

func (f *fedOP) strategy(t *testing.T, registration string) *OIDC {
	t.Helper()
	_, client := ecKeyPEM(t)
	_, fed := ecKeyPEM(t)
	s, err := NewOIDC(OIDCConfig{Issuer: f.op.ID, PrivateKey: client, Federation: &OIDCFederation{
		Key: fed, AuthorityHints: []string{f.ta.ID}, TrustAnchors: f.anchors, Registration: registration,
	}}, Env{CallbackURL: "https://app.example/users/auth/oidc/callback", HTTPClient: outbound.NewClient(f.srv.Client(), 0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// The provider's ID token keys come from its resolved metadata: by value,
// or a signed_jwks_uri signed with its federation keys (refused when
// signed with another key).
func TestFederationKeysFromMetadata(t *testing.T) {
	ctx := context.Background()
	opPriv, _ := ecKeyPEM(t)
	idKey, _ := oidfed.NewKey(opPriv)
	for _, tc := range []struct {
		name string
		md   func(f *fedOP, op string) map[string]any
		err  string
	}{
		{"by value", func(f *fedOP, op string) map[string]any {
			m := opMetadata(op)
			m["jwks"] = oidfed.JWKS(idKey)
			return m
		}, ""},
		{"signed_jwks_uri", func(f *fedOP, op string) map[string]any {
			m := opMetadata(op)
			m["signed_jwks_uri"] = op + "/jwks.jose"
			return m
		}, ""},
		{"none", func(f *fedOP, op string) map[string]any { return opMetadata(op) }, "has none of jwks, signed_jwks_uri, jwks_uri"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f *fedOP
			f = newFedOP(t, func(op string) map[string]any { return tc.md(f, op) })
			f.op.Metadata[oidfed.TypeOpenIDProvider] = tc.md(f, f.op.ID)
			f.srv.Config.Handler.(*http.ServeMux).HandleFunc("/op/jwks.jose", func(w http.ResponseWriter, r *http.Request) {
				raw, _ := oidfed.Sign(f.opKey, "jwk-set+jwt", map[string]any{"iss": f.op.ID, "sub": f.op.ID, "iat": time.Now().Unix(), "keys": oidfed.JWKS(idKey).Keys})
				io.WriteString(w, raw)
			})
			s := f.strategy(t, "")
			err := s.Discover(ctx)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			d, _ := s.provider(ctx)
			if err := d.keys.ensure(ctx); err != nil {
				t.Fatal(err)
			}
			if keys := d.keys.keys; d.keys.url != "" || len(keys) != 1 || keys[0].KeyID != idKey.KeyID {
				t.Fatalf("keys %v from %q", keys, d.keys.url)
			}
		})
	}
}

// Explicit registration: our entity configuration is posted to the OP's
// federation_registration_endpoint, whose signed answer is verified; an
// answer registering another client ID, or not signed by the OP's
// federation key, is refused.
func TestFederationExplicitRegistration(t *testing.T) {
	ctx := context.Background()
	answer := func(f *fedOP, key oidfed.Key, clientID string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			ec, err := oidfed.Parse(string(body))
			if err != nil || r.Header.Get("Content-Type") != oidfed.ContentTypeEntityStatement || ec.Verify(ec.JWKS) != nil {
				http.Error(w, "bad request", http.StatusBadRequest)
				return
			}
			now := time.Now()
			raw, _ := oidfed.Sign(key, oidfed.TypExplicitRegistration, map[string]any{"iss": f.op.ID, "sub": ec.Subject, "aud": ec.Subject,
				"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "trust_anchor": f.ta.ID, "authority_hints": []string{f.ta.ID},
				"metadata": map[string]any{"openid_relying_party": map[string]any{"client_id": clientID}}})
			w.Header().Set("Content-Type", "application/explicit-registration-response+jwt")
			io.WriteString(w, raw)
		}
	}
	jwksMD := func(op string) map[string]any {
		m := opMetadata(op)
		m["jwks_uri"] = op + "/jwks"
		return m
	}
	t.Run("registered", func(t *testing.T) {
		f := newFedOP(t, jwksMD)
		f.register = answer(f, f.opKey, "https://app.example/users/auth/oidc")
		s := f.strategy(t, OIDCRegistrationExplicit)
		if err := s.Discover(ctx); err != nil {
			t.Fatal(err)
		}
		d, _ := s.provider(ctx)
		if d.refreshAt.After(time.Now().Add(time.Hour)) {
			t.Fatalf("the registration's exp does not bound the copy: refresh at %v", d.refreshAt)
		}
	})
	t.Run("another client ID", func(t *testing.T) {
		f := newFedOP(t, jwksMD)
		f.register = answer(f, f.opKey, "s6BhdRkqt3")
		err := f.strategy(t, OIDCRegistrationExplicit).Discover(ctx)
		if err == nil || !strings.Contains(err.Error(), `the provider issued client_id "s6BhdRkqt3"`) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("answer signed by another key", func(t *testing.T) {
		f := newFedOP(t, jwksMD)
		other, _ := ecKeyPEM(t)
		otherKey, _ := oidfed.NewKey(other)
		f.register = answer(f, otherKey, "https://app.example/users/auth/oidc")
		err := f.strategy(t, OIDCRegistrationExplicit).Discover(ctx)
		if err == nil || !strings.Contains(err.Error(), "is signed by a key its issuer's keys do not hold") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("provider without explicit registration", func(t *testing.T) {
		f := newFedOP(t, func(op string) map[string]any {
			m := jwksMD(op)
			m["client_registration_types_supported"] = []any{"automatic"}
			return m
		})
		err := f.strategy(t, OIDCRegistrationExplicit).Discover(ctx)
		if err == nil || !strings.Contains(err.Error(), "explicit is not in the provider's client_registration_types_supported") {
			t.Fatalf("err = %v", err)
		}
	})
}

// What a federation configuration gets wrong is refused before any
// request, naming the entry.
func TestCheckFederationConfig(t *testing.T) {
	_, client := ecKeyPEM(t)
	_, fed := ecKeyPEM(t)
	good := func() OIDCConfig {
		return OIDCConfig{Issuer: "https://op.example", PrivateKey: client, Federation: &OIDCFederation{
			Key: fed, AuthorityHints: []string{"https://ta.example"},
			TrustAnchors: []OIDCTrustAnchor{{EntityID: "https://ta.example", JWKS: `{"keys":[{"kty":"EC","crv":"P-256","kid":"k","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}`}},
		}}
	}
	if ps := CheckOIDCConfig(good()); len(ps) != 0 {
		t.Fatalf("a good configuration refused: %v", ps)
	}
	for _, tc := range []struct {
		edit    func(*OIDCConfig)
		setting string
		reason  string
	}{
		{func(c *OIDCConfig) { c.Federation.Key = "" }, settingFedKey, "is missing"},
		{func(c *OIDCConfig) { c.Federation.Key = client }, settingFedKey, "holds the client's private_key"},
		{func(c *OIDCConfig) { c.Federation.AuthorityHints = nil }, settingFedHints, "is missing"},
		{func(c *OIDCConfig) { c.Federation.AuthorityHints = []string{"http://ta.example"} }, settingFedHints + "[0]", "must be https"},
		{func(c *OIDCConfig) { c.Federation.TrustAnchors = nil }, settingFedAnchors, "is missing"},
		{func(c *OIDCConfig) { c.Federation.TrustAnchors[0].JWKS = `{"keys":[]}` }, settingFedAnchors + ".https://ta.example", "jwks has no key"},
		{func(c *OIDCConfig) { c.Federation.TrustAnchors[0].JWKS = `not json` }, settingFedAnchors + ".https://ta.example", "must be a JSON Web Key Set"},
		{func(c *OIDCConfig) { c.Federation.Registration = "manual" }, settingFedRegistration, "must be automatic or explicit"},
		{func(c *OIDCConfig) { c.Federation.TrustMarks = []OIDCTrustMark{{Type: "x"}} }, settingFedTrustMarks + "[0]", "needs trust_mark_type"},
		{func(c *OIDCConfig) { c.Options.AuthMethod = AuthMethodBasic }, settingAuthMethod, "must be private_key_jwt in a federation"},
		{func(c *OIDCConfig) { c.PrivateKey = "" }, settingPrivateKey, "is missing (federation needs it)"},
	} {
		c := good()
		f := *c.Federation
		f.TrustAnchors = append([]OIDCTrustAnchor(nil), f.TrustAnchors...)
		c.Federation = &f
		tc.edit(&c)
		ps := CheckOIDCConfig(c)
		found := false
		for _, p := range ps {
			if p.Setting == tc.setting && strings.Contains(p.Reason, tc.reason) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: problems %v, want %q", tc.setting, ps, tc.reason)
		}
	}
	// The entity identifier is the oidc routes' base: another is refused
	// by name, since nothing would serve it.
	c := good()
	c.Federation.EntityID = "https://elsewhere.example/rp"
	_, err := NewOIDC(c, Env{CallbackURL: "https://app.example/users/auth/oidc/callback", HTTPClient: http.DefaultClient})
	if err == nil || !strings.Contains(err.Error(), "entity identifier must be https://app.example/users/auth/oidc") {
		t.Fatalf("err = %v", err)
	}
}
