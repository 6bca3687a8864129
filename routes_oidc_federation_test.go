package extauth_test

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/oidcop"
	"github.com/extauth/extauth/internal/harness"
	"github.com/extauth/extauth/internal/oidfed"
)

// oidfedFed is a trust anchor served on a test server of its own, the
// OP and our RP its subordinates.
type oidfedFed struct {
	ta     *oidfed.Authority
	taJWKS string
	// fedKey is our federation key and its PEM.
	fedKey    oidfed.Key
	fedKeyPEM string
	srv       *httptest.Server
}

const spidRPMark = "https://registry.example.it/openid_relying_party/public"

func newOIDCFederation(t *testing.T) *oidfedFed {
	t.Helper()
	f := &oidfedFed{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.StripPrefix("/ta", f.ta).ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	taKey, err := oidfed.NewKey(clientKeys()["EC"][1].priv)
	if err != nil {
		t.Fatal(err)
	}
	f.ta = oidfed.NewAuthority(&oidfed.Entity{ID: f.srv.URL + "/ta", Keys: []oidfed.Key{taKey}})
	f.ta.TrustMarkIssuers = map[string][]string{spidRPMark: {f.ta.ID}}
	b, err := json.Marshal(oidfed.JWKS(taKey))
	if err != nil {
		t.Fatal(err)
	}
	f.taJWKS = string(b)
	priv := clientKeys()["RSA"][1]
	if f.fedKey, err = oidfed.NewKey(priv.priv); err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv.priv)
	if err != nil {
		t.Fatal(err)
	}
	f.fedKeyPEM = string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	return f
}

// setup is an OP of the federation that registers clients automatically,
// and an application whose secrets file names our federation key, the
// anchor and its JWKS, the trust mark the anchor issued us, and the OP's
// entity identifier as oidc_issuer: no client ID, no secret.
func (f *oidfedFed) setup(t *testing.T, entries string) oidcSetup {
	return oidcSetup{
		op: func(c *oidcop.Config) {
			rp := strings.TrimSuffix(c.RedirectURIs[0], "/callback")
			c.ClientID, c.ClientSecret, c.RedirectURIs = rp, "", nil
			c.Federation = &oidcop.Federation{AuthorityHints: []string{f.ta.ID},
				TrustAnchors: []oidcop.TrustAnchor{{EntityID: f.ta.ID, JWKS: *oidfed.JWKS(f.ta.Keys[0])}}}
			f.ta.Add(rp, oidfed.Subordinate{JWKS: oidfed.JWKS(f.fedKey), EntityTypes: []string{oidfed.TypeRelyingParty}})
		},
		config: func(cfg *extauth.Config) {
			parsed, err := extauth.ParseConfig([]byte(f.secrets(t, "oidc_issuer: "+cfg.OIDC.Issuer, entries)))
			if err != nil {
				t.Fatal(err)
			}
			*cfg = *parsed
		},
	}
}

// secrets is the secrets file: head (oidc_issuer), our keys, the anchor,
// and entries of oidc_additional_settings.federation.
func (f *oidfedFed) secrets(t *testing.T, head, entries string) string {
	key := clientKeys()["EC"][0]
	return fmt.Sprintf(`
%s
oidc_additional_settings:
  private_key: |
%s  federation:
    federation_key: |
%s    authority_hints: [%s]
    trust_anchors:
      %s: '%s'
    organization_name: Comune di Esempio
    contacts: [ops@example.it]
%s`, head, indent(indent(key.pem)), indent(indent(indent(f.fedKeyPEM))), f.ta.ID, f.ta.ID, f.taJWKS, entries)
}

// register makes the OP a subordinate of the anchor, once it is built.
func (f *oidfedFed) register(a *oidcApp) {
	f.ta.Add(a.OP.Issuer(), oidfed.Subordinate{JWKS: ptr(a.OP.FederationJWKS()), EntityTypes: []string{oidfed.TypeOpenIDProvider}})
}

func ptr[T any](v T) *T { return &v }

// TestOIDCFederationAutomaticRegistration is issue 43's sign-in: a
// secrets file naming our federation key, a trust anchor and the OP's
// entity identifier signs in at an OP that knows nothing of us but our
// entity identifier: it resolves our trust chain from our entity
// configuration, verifies our signed request object and private_key_jwt
// assertion with the keys of our resolved metadata.
func TestOIDCFederationAutomaticRegistration(t *testing.T) {
	f := newOIDCFederation(t)
	a := newOIDCApp(t, f.setup(t, ""))
	f.register(a)
	resp := a.signIn(t)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("got %d %q\n%s", resp.StatusCode, resp.Body, a.Logs)
	}
	rp := a.URL + "/users/auth/oidc"
	front := a.OP.LastAuthorizeQuery()
	if front.Get("client_id") != rp || front.Get("request") == "" {
		t.Fatalf("authorization request %v: want client_id our entity identifier and a request object", front)
	}
	ro := jwtClaims(t, front.Get("request"))
	if ro["iss"] != rp || ro["aud"] != a.OP.Issuer() || ro["sub"] != nil || ro["jti"] == nil {
		t.Fatalf("request object claims %v", ro)
	}
	for _, as := range a.OP.Assertions() {
		if as.Claims["iss"] != rp || as.Claims["sub"] != rp {
			t.Fatalf("assertion %v", as.Claims)
		}
	}
	if id := a.identities()[0]; id.Provider != "oidc" || id.UID == "" {
		t.Fatalf("identity %+v", id)
	}
}

// Our entity configuration: served under the oidc routes with its media
// type, self-signed with the federation key (never the client's), with
// the openid_relying_party metadata an OP registers us by.
func TestOIDCFederationEntityConfiguration(t *testing.T) {
	f := newOIDCFederation(t)
	a := newOIDCApp(t, f.setup(t, ""))
	rp := a.URL + "/users/auth/oidc"
	resp, err := http.Get(rp + "/.well-known/openid-federation")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/entity-statement+jwt" ||
		!strings.HasPrefix(resp.Header.Get("Cache-Control"), "public, max-age=") {
		t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, body)
	}
	st, err := oidfed.Parse(string(body))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Check(time.Now(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := st.Verify(oidfed.JWKS(f.fedKey)); err != nil {
		t.Fatalf("not signed by the federation key: %v", err)
	}
	if st.Issuer != rp || st.Subject != rp || len(st.AuthorityHints) != 1 || st.AuthorityHints[0] != f.ta.ID {
		t.Fatalf("statement %+v", st)
	}
	md := st.Metadata[oidfed.TypeRelyingParty]
	if md["token_endpoint_auth_method"] != "private_key_jwt" || fmt.Sprint(md["redirect_uris"]) != "["+rp+"/callback]" ||
		fmt.Sprint(md["client_registration_types"]) != "[automatic]" || md["client_name"] != "Comune di Esempio" {
		t.Fatalf("openid_relying_party metadata %v", md)
	}
	keys := md["jwks"].(map[string]any)["keys"].([]any)
	uses := map[any]bool{}
	for _, k := range keys {
		km := k.(map[string]any)
		uses[km["use"]] = true
		if km["kid"] == f.fedKey.KeyID || km["d"] != nil {
			t.Fatalf("the client's key set holds %v", km)
		}
	}
	if !uses["sig"] || !uses["enc"] {
		t.Fatalf("the client's keys lack a sig or an enc key: %v", keys)
	}
	if post, _ := http.Post(rp+"/.well-known/openid-federation", "text/plain", nil); post.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST answered %d", post.StatusCode)
	}
}

// A sign-in is refused when the OP's chain is not valid: here the anchor
// vouches for another key of the OP's.
func TestOIDCFederationUntrustedOP(t *testing.T) {
	f := newOIDCFederation(t)
	a := newOIDCApp(t, f.setup(t, ""))
	f.ta.Add(a.OP.Issuer(), oidfed.Subordinate{JWKS: oidfed.JWKS(f.fedKey)})
	resp := a.signIn(t)
	if resp.StatusCode != http.StatusServiceUnavailable || a.OP.Hits(oidcop.Authorize) != 0 {
		t.Fatalf("got %d, %d authorization requests", resp.StatusCode, a.OP.Hits(oidcop.Authorize))
	}
	if logs := a.Logs.String(); !strings.Contains(logs, "is signed by a key its issuer's keys do not hold") {
		t.Fatalf("the log does not say which statement failed which rule:\n%s", logs)
	}
}

// The OP resolves our chain: when the anchor vouches for another key of
// ours, it refuses the authorization request, whatever we sign.
func TestOIDCFederationOPResolvesOurChain(t *testing.T) {
	f := newOIDCFederation(t)
	a := newOIDCApp(t, f.setup(t, ""))
	f.register(a)
	f.ta.Add(a.URL+"/users/auth/oidc", oidfed.Subordinate{JWKS: oidfed.JWKS(f.ta.Keys[0])})
	resp := a.signIn(t)
	if resp.StatusCode == http.StatusOK || !strings.Contains(resp.Body, "no valid trust chain") {
		t.Fatalf("got %d %q: the OP accepted a client whose chain does not verify", resp.StatusCode, resp.Body)
	}
}

// The metrics of a federated provider: its trust chain's resolution is
// the document gauges' "trust_chain", and the time left until its
// earliest exp a gauge of its own.
func TestOIDCFederationMetrics(t *testing.T) {
	f := newOIDCFederation(t)
	k := newOtelKit(t)
	s := f.setup(t, "")
	s.opts = k.options
	a := newOIDCApp(t, s)
	f.register(a)
	if resp := a.signIn(t); resp.StatusCode != http.StatusOK {
		t.Fatalf("got %d %q\n%s", resp.StatusCode, resp.Body, a.Logs)
	}
	k.point(t, "extauth.document.age", map[string]string{"provider": "oidc", "tenant": "", "document": "trust_chain"})
	p := k.point(t, "extauth.trust_chain.expiry", map[string]string{"provider": "oidc", "tenant": ""})
	// The OP's configuration, the shortest-lived statement, lasts an hour.
	if p.value <= 0 || p.value > time.Hour.Seconds() {
		t.Fatalf("trust chain expiry in %v s", p.value)
	}
}

// Without oidc_issuer, users choose among the federation's providers: the
// op field names one, a start that names none gets the discovery page with
// each provider's organization_name, a provider not listed is refused
// before any request, and the sign-in is at the provider chosen.
func TestOIDCFederationChooseProvider(t *testing.T) {
	f := newOIDCFederation(t)
	op2Srv, op2Ptr := opServer(t)
	var op2 *oidcop.OP
	s := f.setup(t, "")
	base := s.op
	s.op = func(c *oidcop.Config) {
		base(c)
		c.Federation.OrganizationName = "Regione Alfa"
		c2 := *c
		c2.Issuer = op2Srv.URL + "/op2"
		fed := *c.Federation
		fed.OrganizationName = "Regione Beta"
		c2.Federation = &fed
		c2.Keys = opKeys()["RS256"][1:2]
		var err error
		if op2, err = oidcop.New(c2); err != nil {
			t.Fatal(err)
		}
		op2Ptr.Store(op2)
	}
	s.config = func(cfg *extauth.Config) {
		src := f.secrets(t, "", "    providers: ["+cfg.OIDC.Issuer+", "+op2Srv.URL+"/op2]\n")
		parsed, err := extauth.ParseConfig([]byte(src))
		if err != nil {
			t.Fatalf("%v\n%s", err, src)
		}
		*cfg = *parsed
	}
	a := newOIDCApp(t, s)
	f.register(a)
	f.ta.Add(op2.Issuer(), oidfed.Subordinate{JWKS: ptr(op2.FederationJWKS())})

	b := harness.NewBrowser(t)
	page := b.Get(a.URL + "/users/auth/oidc")
	if page.StatusCode != http.StatusOK || !strings.Contains(page.Body, "Regione Alfa") || !strings.Contains(page.Body, "Regione Beta") {
		t.Fatalf("discovery page %d:\n%s\n%s", page.StatusCode, page.Body, a.Logs)
	}
	resp := b.PostForm(a.URL+"/users/auth/oidc", url.Values{"op": {op2.Issuer()}})
	if resp.StatusCode != http.StatusOK || op2.Hits(oidcop.Authorize) != 1 || a.OP.Hits(oidcop.Authorize) != 0 {
		t.Fatalf("sign-in at the second provider: %d %s (authorizations %d and %d)\n%s", resp.StatusCode, resp.Body,
			a.OP.Hits(oidcop.Authorize), op2.Hits(oidcop.Authorize), a.Logs)
	}
	id := a.identities()[0]
	if id.Tokens.Issuer != op2.Issuer() {
		t.Fatalf("tokens of %q", id.Tokens.Issuer)
	}
	// A step-up of that account starts at the same provider, and at no
	// other: the sealed account binds its issuer.
	r := httptest.NewRequest(http.MethodGet, a.URL+"/", nil)
	action, fields, err := a.Auth.StartForm(r, extauth.OIDC, extauth.SignInOptions{Account: id})
	if err != nil || fields.Get("idp") != op2.Issuer() {
		t.Fatalf("step-up form: %v %v", fields, err)
	}
	if resp := b.PostForm(a.URL+action, fields); resp.StatusCode != http.StatusOK || op2.Hits(oidcop.Authorize) != 2 || len(a.identities()) != 2 {
		t.Fatalf("step-up at the session's provider: %d %s\n%s", resp.StatusCode, resp.Body, a.Logs)
	}
	fields.Set("idp", a.OP.Issuer())
	wantCode(t, b.PostForm(a.URL+action, fields), http.StatusForbidden, "access_denied")
	if a.OP.Hits(oidcop.Authorize) != 0 {
		t.Errorf("the step-up went to another provider of the federation")
	}
	resp = harness.NewBrowser(t).PostForm(a.URL+"/users/auth/oidc", url.Values{"op": {"https://rogue.example/op"}})
	if resp.StatusCode != http.StatusBadGateway && resp.StatusCode != http.StatusBadRequest || len(a.identities()) != 2 {
		t.Fatalf("an unlisted provider: %d %s", resp.StatusCode, resp.Body)
	}
	if !strings.Contains(a.Logs.String(), "not one of the providers users may choose") {
		t.Fatalf("the log does not say why:\n%s", a.Logs)
	}
}

// With list_providers, the providers are those the anchor's list
// endpoint lists as OpenID providers.
func TestOIDCFederationListedProviders(t *testing.T) {
	f := newOIDCFederation(t)
	s := f.setup(t, "")
	s.config = func(cfg *extauth.Config) {
		parsed, err := extauth.ParseConfig([]byte(f.secrets(t, "", "    list_providers: true\n")))
		if err != nil {
			t.Fatal(err)
		}
		*cfg = *parsed
	}
	a := newOIDCApp(t, s)
	f.register(a)
	// Another entity under the anchor that is no OP is not offered.
	f.ta.Add("https://rp.example/other", oidfed.Subordinate{JWKS: oidfed.JWKS(f.fedKey), EntityTypes: []string{oidfed.TypeRelyingParty}})
	page := harness.NewBrowser(t).Get(a.URL + "/users/auth/oidc.json")
	if page.StatusCode != http.StatusOK || !strings.Contains(page.Body, a.OP.Issuer()) || strings.Contains(page.Body, "rp.example") {
		t.Fatalf("discovery %d: %s\n%s", page.StatusCode, page.Body, a.Logs)
	}
	resp := harness.NewBrowser(t).PostForm(a.URL+"/users/auth/oidc", url.Values{"op": {a.OP.Issuer()}})
	if resp.StatusCode != http.StatusOK || len(a.identities()) != 1 {
		t.Fatalf("sign-in: %d %s", resp.StatusCode, resp.Body)
	}
}
