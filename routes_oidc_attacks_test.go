package extauth_test

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/oidcop"
	"github.com/extauth/extauth/internal/harness"
)

// Attacks on the high-assurance OpenID Connect code that an independent
// review found (issue 28), each kept as a test of its own so that a change
// that reopens one fails.

// attackerOP is an OpenID provider that an attacker runs, for instance as
// the IdP of a tenant of its own: its discovery document names an honest
// provider's authorization, token and key endpoints as its own, and its
// own server as the pushed authorization request and revocation
// endpoints, where it keeps every client assertion it is sent.
type attackerOP struct {
	srv *httptest.Server
	mu  sync.Mutex
	// assertions are the client assertions collected, by path.
	assertions map[string][]string
}

func newAttackerOP(t *testing.T, honest *httptest.Server, honestIssuer string) *attackerOP {
	t.Helper()
	resp, err := honest.Client().Get(honestIssuer + "/.well-known/openid-configuration")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	err = json.NewDecoder(resp.Body).Decode(&doc)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	p := &attackerOP{assertions: map[string][]string{}}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			d := map[string]any{}
			for k, v := range doc {
				d[k] = v
			}
			d["issuer"] = p.srv.URL
			d["pushed_authorization_request_endpoint"] = p.srv.URL + "/par"
			d["require_pushed_authorization_requests"] = true
			d["revocation_endpoint"] = p.srv.URL + "/revoke"
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(d)
		case "/par", "/revoke":
			r.ParseForm()
			p.mu.Lock()
			p.assertions[r.URL.Path] = append(p.assertions[r.URL.Path], r.PostForm.Get("client_assertion"))
			p.mu.Unlock()
			if r.URL.Path == "/revoke" {
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"request_uri":"urn:ietf:params:oauth:request_uri:collected","expires_in":60}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *attackerOP) collected(path string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.assertions[path]
}

// audienceOf returns the aud claim of a JWT, unverified.
func audienceOf(t *testing.T, jwt string) any {
	t.Helper()
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWS: %q", jwt)
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(payload, &c); err != nil {
		t.Fatal(err)
	}
	return c["aud"]
}

// TestClientAssertionAudienceInjection plays the audience injection attack
// (Hosseyni, Küsters and Würtele, 2025) with two providers: an honest one,
// where the client is registered with private_key_jwt, and an attacker's,
// which a second configuration of the application (a tenant of the
// attacker's, sharing the client key and naming the victim's client_id)
// trusts as its issuer. The attacker's discovery lists the honest token
// endpoint as its own and its own server for PAR and revocation; every
// assertion it collects there is replayed at the honest provider's token
// and revocation endpoints, which must refuse it as not meant for them.
// With the token endpoint as audience (the old default) the honest
// provider took them; now the default is the issuer identifier, and the
// token-endpoint audience, where an operator still chooses it, names the
// recipient's own URL for an endpoint on another origin.
func TestClientAssertionAudienceInjection(t *testing.T) {
	key := clientKeys()["RSA"][0]
	for _, audience := range []string{"", "issuer", "token_endpoint"} {
		t.Run("client_assertion_audience="+audience, func(t *testing.T) {
			honestSrv, honestPtr := opServer(t)
			honest, err := oidcop.New(oidcop.Config{
				Issuer: honestSrv.URL + "/op", ClientID: oidcClientID, AuthMethod: "private_key_jwt",
				ClientJWKS:   &jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.priv.Public(), KeyID: key.kid(), Use: "sig"}}},
				RedirectURIs: []string{"https://victim.example/users/auth/oidc/callback"},
				AutoApprove:  true, Keys: opKeys()["RS256"][:1],
			})
			if err != nil {
				t.Fatal(err)
			}
			honestPtr.Store(honest)
			evil := newAttackerOP(t, honestSrv, honest.Issuer())

			logs := &lockedLog{}
			srv := harness.Serve(t, func(base string) http.Handler {
				auth, err := extauth.New(&extauth.Config{OIDC: extauth.OIDCConfig{
					ClientID: oidcClientID, Issuer: evil.srv.URL,
					Additional: extauth.OIDCAdditionalSettings{
						ClientAuthMethod:        "private_key_jwt",
						PrivateKey:              extauth.NewSecret(key.pem),
						ClientAssertionAudience: audience,
					},
				}}, extauth.Options{
					BaseURL: base, CookieKey: testKey,
					Logger:    slog.New(slog.NewTextHandler(logs, nil)),
					OnSuccess: func(http.ResponseWriter, *http.Request, *extauth.Identity) { t.Error("signed in") },
				})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { auth.Close() })
				mux := http.NewServeMux()
				auth.Mount(mux)
				mux.HandleFunc("POST /revoke", func(w http.ResponseWriter, r *http.Request) {
					id := &extauth.Identity{Provider: string(extauth.OIDC), Tokens: extauth.Tokens{RefreshToken: "rt", Issuer: evil.srv.URL}}
					if err := auth.RevokeTokens(r.Context(), id); err != nil {
						t.Errorf("revoke at the attacker's provider: %v", err)
					}
				})
				return mux
			})

			// A sign-in start pushes its request, with an assertion, to the
			// attacker; a revocation sends it another.
			b := harness.NewBrowser(t).NoFollow()
			if resp := b.Get(srv.URL + "/users/auth/oidc"); resp.StatusCode != http.StatusFound {
				t.Fatalf("start: %d %s\n%s", resp.StatusCode, resp.Body, logs)
			}
			b.PostForm(srv.URL+"/revoke", nil)
			par, revoke := evil.collected("/par"), evil.collected("/revoke")
			if len(par) != 1 || len(revoke) != 1 {
				t.Fatalf("collected %d PAR and %d revocation assertions", len(par), len(revoke))
			}
			wantAud := map[string][2]string{
				"":               {evil.srv.URL, evil.srv.URL},
				"issuer":         {evil.srv.URL, evil.srv.URL},
				"token_endpoint": {evil.srv.URL + "/par", evil.srv.URL + "/revoke"},
			}[audience]
			for i, a := range []string{par[0], revoke[0]} {
				if aud := audienceOf(t, a); aud != wantAud[i] {
					t.Errorf("assertion %d has aud %v, want %q (one string naming only its recipient)", i, aud, wantAud[i])
				}
			}

			// The replays at the honest provider.
			replay := func(path string, form url.Values, assertion string) int {
				form.Set("client_id", oidcClientID)
				form.Set("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
				form.Set("client_assertion", assertion)
				resp, err := http.PostForm(honest.Issuer()+path, form)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			if status := replay("/token", url.Values{"grant_type": {"authorization_code"}, "code": {"stolen"},
				"redirect_uri": {"https://victim.example/users/auth/oidc/callback"}}, par[0]); status != http.StatusUnauthorized {
				t.Errorf("the PAR assertion replayed at the honest token endpoint: HTTP %d, want 401 (the client was authenticated)", status)
			}
			if status := replay("/revoke", url.Values{"token": {"victims-refresh-token"}}, revoke[0]); status != http.StatusUnauthorized {
				t.Errorf("the revocation assertion replayed at the honest revocation endpoint: HTTP %d, want 401", status)
			}
			if n := len(honest.Assertions()); n != 0 {
				t.Errorf("the honest provider accepted %d collected assertions", n)
			}
			warned := strings.Contains(logs.String(), "audience injection")
			if warned != (audience == "token_endpoint") {
				t.Errorf("start-up warning about the token endpoint audience: %v\n%s", warned, logs)
			}
		})
	}
}

// TestIssuerAudienceIsOneString: the default assertion audience is the
// issuer identifier as a single JSON string, not an array (FAPI 2.0
// Security Profile 5.3.2.1; arrays are what audience injection exploits in
// providers that accept any member).
func TestIssuerAudienceIsOneString(t *testing.T) {
	a := newOIDCApp(t, highAssurance(nil))
	if resp := a.signIn(t); resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s\n%s", resp.StatusCode, resp.Body, a.Logs)
	}
	as := a.OP.Assertions()
	if len(as) == 0 {
		t.Fatal("no assertion")
	}
	for _, x := range as {
		if aud, ok := x.Claims["aud"].(string); !ok || aud != a.OP.Issuer() {
			t.Errorf("%s assertion aud %#v, want the string %q", x.Endpoint, x.Claims["aud"], a.OP.Issuer())
		}
	}
}

// TestFutureAuthTimeRefused: an auth_time a day ahead would satisfy any
// max_age (and any freshness check a host makes on it); it is refused with
// insufficient_user_authentication whether max_age was asked or not, and
// the hook never runs.
func TestFutureAuthTimeRefused(t *testing.T) {
	for _, maxAge := range []string{"300", ""} {
		t.Run("max_age="+maxAge, func(t *testing.T) {
			a := newOIDCApp(t, highAssurance(func(_ *oidcop.Config, s *extauth.OIDCAdditionalSettings) { s.MaxAge = maxAge }))
			a.OP.SetFaults(oidcop.FutureAuthTime)
			resp := a.signIn(t)
			wantCode(t, resp, http.StatusForbidden, "insufficient_user_authentication")
			if n := len(a.identities()); n != 0 {
				t.Fatalf("hook called %d times", n)
			}
			if !strings.Contains(a.Logs.String(), "auth_time") {
				t.Errorf("the log does not name auth_time:\n%s", a.Logs)
			}
			// The same provider, dating it right, signs in.
			a.OP.SetFaults()
			if resp := a.signIn(t); resp.StatusCode != http.StatusOK || len(a.identities()) != 1 {
				t.Fatalf("without the fault: %d %s\n%s", resp.StatusCode, resp.Body, a.Logs)
			}
		})
	}
}

// TestFarExpLogoutTokensDoNotFillTheStore: a logout token's jti is kept
// only while the token could be accepted (its iat window, or its exp if
// sooner), not until an exp ten years ahead. Ten times the memory store's
// bound of such tokens, sent over a few hours of the application's clock,
// are each accepted once, and a sign-in afterwards still finds room in the
// store that sign-ins share.
func TestFarExpLogoutTokensDoNotFillTheStore(t *testing.T) {
	const bound = 64
	a, l := logoutApp(t, oidcSetup{opts: func(o *extauth.Options) {
		o.Store = extauth.NewMemoryStore(extauth.MemoryStoreOptions{MaxEntries: bound, Now: o.Now})
	}})
	id := a.signInKeeping(harness.NewBrowser(t), l)
	const batch = bound / 4
	for sent := 0; sent < 10*bound; sent += batch {
		for range batch {
			tok, err := a.OP.LogoutToken(id.UID, "", oidcop.LogoutFarExp)
			if err != nil {
				t.Fatal(err)
			}
			if status, _, body := backchannel(t, a, tok); status != http.StatusOK {
				t.Fatalf("logout token %d: %d %s\n%s", sent, status, body, a.Logs)
			}
		}
		// Past the accepted age (five minutes) and the clock skew.
		a.clock.Add(10 * time.Minute)
	}
	if resp := a.signIn(t); resp.StatusCode != http.StatusOK {
		t.Fatalf("sign-in after the logout tokens: %d %s", resp.StatusCode, resp.Body)
	}
}
