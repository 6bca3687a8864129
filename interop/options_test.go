//go:build interop

package interop

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/internal/harness"
	"github.com/extauth/extauth/providers"
)

const (
	interopLoaLow  = "urn:interop:loa:low"
	interopLoaHigh = "urn:interop:loa:high"
)

// TestOIDCProviderSignInOptions sends per-request options to oidc-provider
// and holds its answers to what was asked: login_hint fills its login
// form, prompt=login and max_age make it ask for the password although its
// session is alive, acr_values come back as acr, and auth_time is fresh. A
// step-up through RequireAssurance comes back to the page at the level. An
// acr value the provider does not support comes back as no acr, which is
// refused.
func TestOIDCProviderSignInOptions(t *testing.T) {
	const secret = "options-interop-secret"
	var (
		mu      sync.Mutex
		got     []*extauth.Identity
		failed  []*extauth.Error
		issuer  string
		logs    lockedBuffer
		session *extauth.Identity
	)
	current := func(*http.Request) *extauth.Identity {
		mu.Lock()
		defer mu.Unlock()
		return session
	}
	srv := harness.Serve(t, func(base string) http.Handler {
		issuer = startOIDCProvider(t, []opClient{{
			ClientID: "extauth-options", ClientSecret: secret,
			RedirectURIs:            []string{base + "/users/auth/oidc/callback"},
			TokenEndpointAuthMethod: providers.AuthMethodBasic,
		}}, "", "ACR_VALUES="+interopLoaLow+" "+interopLoaHigh)
		cfg := &extauth.Config{OIDC: extauth.OIDCConfig{ClientID: "extauth-options", ClientSecret: extauth.NewSecret(secret), Issuer: issuer}}
		cfg.OIDC.Additional.RequestOptions = []string{"login_hint", "prompt", "max_age", "acr_values", "level"}
		cfg.OIDC.Additional.AssuranceLevels = map[string][]string{"high": {interopLoaHigh}}
		a, err := extauth.New(cfg, extauth.Options{
			BaseURL:   base,
			CookieKey: bytes.Repeat([]byte{5}, 32),
			Logger:    slog.New(slog.NewTextHandler(&logs, nil)),
			OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
				mu.Lock()
				got = append(got, id)
				session = id
				mu.Unlock()
				http.Redirect(w, r, extauth.ReturnTo(r), http.StatusSeeOther)
			},
			OnFailure: func(w http.ResponseWriter, _ *http.Request, err *extauth.Error) {
				mu.Lock()
				failed = append(failed, err)
				mu.Unlock()
				http.Error(w, string(err.Code), err.Code.HTTPStatus())
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		mux := http.NewServeMux()
		a.Mount(mux)
		mux.HandleFunc("/{$}", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "home") })
		// oidc-provider takes acr_values as a voluntary claim: on a
		// live session it answers with the session's acr. Asking for
		// an authentication now (max_age=0) makes it log the user in
		// again, at the level.
		need := extauth.Assurance{Level: "high", MaxAge: -1}
		mux.Handle("/transfer", a.RequireAssurance(need, current)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "transfer as %s at %s", current(r).UID, current(r).ACR)
		})))
		return mux
	})
	last := func() *extauth.Identity {
		mu.Lock()
		defer mu.Unlock()
		return got[len(got)-1]
	}
	b := harness.NewBrowser(t)
	b.Header.Set("Accept", "text/html")

	// login_hint fills the provider's login form; acr_values come back.
	start := time.Now().Add(-time.Second)
	login := b.PostForm(srv.URL+"/users/auth/oidc", url.Values{"login_hint": {"alice"}, "acr_values": {interopLoaLow}})
	if !strings.Contains(login.Body, `name="login"`) || !strings.Contains(login.Body, `value="alice"`) {
		t.Fatalf("the login form does not hold the login_hint: %s %d\n%s", login.URL, login.StatusCode, login.Body)
	}
	consent := submit(t, b, login, url.Values{"login": {"alice"}, "password": {"any"}})
	if resp := submit(t, b, consent, nil); resp.Body != "home" {
		t.Fatalf("sign-in: %s %d %s\nlogs:\n%s", resp.URL, resp.StatusCode, resp.Body, logs.String())
	}
	first := last()
	if first.UID != "alice" || first.ACR != interopLoaLow {
		t.Errorf("first sign-in: UID %q ACR %q", first.UID, first.ACR)
	}

	// The provider's session signs alice in again without a password...
	if resp := b.PostForm(srv.URL+"/users/auth/oidc", nil); resp.Body != "home" {
		t.Fatalf("a sign-in on the provider's session: %s %d %s", resp.URL, resp.StatusCode, resp.Body)
	}
	// ...but not with prompt=login, which also brings a fresh auth_time.
	time.Sleep(1100 * time.Millisecond) // auth_time has whole seconds
	login = b.PostForm(srv.URL+"/users/auth/oidc", url.Values{"prompt": {"login"}})
	if !strings.Contains(login.Body, `name="password"`) {
		t.Fatalf("prompt=login did not ask for the password: %s %d\n%s", login.URL, login.StatusCode, login.Body)
	}
	if resp := submit(t, b, login, url.Values{"login": {"alice"}, "password": {"any"}}); resp.Body != "home" {
		t.Fatalf("prompt=login sign-in: %s %d %s\nlogs:\n%s", resp.URL, resp.StatusCode, resp.Body, logs.String())
	}
	if at := last().AuthTime; at.IsZero() || !at.After(start) {
		t.Errorf("auth_time after prompt=login: %v, want after %v", at, start)
	}

	// The step-up: /transfer needs level high, authenticated now. The
	// page posts the start; max_age=0 makes the provider ask for the
	// password.
	page := b.Get(srv.URL + "/transfer")
	if page.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/transfer before the step-up: %d %s", page.StatusCode, page.Body)
	}
	login = submit(t, b, page, nil)
	if !strings.Contains(login.Body, `name="password"`) {
		t.Fatalf("the step-up did not ask for the password: %s %d\n%s", login.URL, login.StatusCode, login.Body)
	}
	resp := submit(t, b, login, url.Values{"login": {"alice"}, "password": {"any"}})
	if resp.StatusCode != http.StatusOK || resp.URL.Path != "/transfer" || resp.Body != "transfer as alice at "+interopLoaHigh {
		t.Fatalf("after the step-up: %s %d %s\nlogs:\n%s", resp.URL, resp.StatusCode, resp.Body, logs.String())
	}
	if stepped := last(); time.Since(stepped.AuthTime) > time.Minute {
		t.Errorf("the step-up's auth_time %v is not fresh", stepped.AuthTime)
	}

	// An acr value the provider does not support: it answers with the acr
	// of its session, and the sign-in is refused, not passed off at
	// another level.
	n := len(got)
	resp = b.PostForm(srv.URL+"/users/auth/oidc", url.Values{"acr_values": {"urn:interop:loa:unknown"}})
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(resp.Body, "insufficient_user_authentication") || len(got) != n {
		t.Fatalf("an unsupported acr_values: %s %d %s", resp.URL, resp.StatusCode, resp.Body)
	}
	if !strings.Contains(logs.String(), "is not one of the requested acr_values") {
		t.Errorf("the log does not say why:\n%s", logs.String())
	}
}

// ssoRequest returns the AuthnRequest b sent to SimpleSAMLphp since its
// hop from.
func ssoRequest(t *testing.T, b *harness.Browser, idp *simpleSAMLphp, from int) string {
	t.Helper()
	for _, h := range b.Hops[from:] {
		if strings.HasPrefix(h, idp.URL+"/saml2/idp/SSOService.php") {
			u, err := url.Parse(h)
			if err != nil {
				t.Fatal(err)
			}
			return string(redirectMessage(t, u, "SAMLRequest"))
		}
	}
	t.Fatalf("no AuthnRequest to SimpleSAMLphp in %v", b.Hops[from:])
	return ""
}

// TestSimpleSAMLphpForceAuthnAndContext sends the SAML per-request options
// to SimpleSAMLphp: ForceAuthn (and max_age, which sends it) make it ask
// for the password although its session is alive, and the AuthnInstant of
// its answer is fresh; a RequestedAuthnContext it cannot meet (it answers
// Password over plain HTTP, whatever was asked) is refused with
// insufficient_user_authentication, one it meets is accepted.
func TestSimpleSAMLphpForceAuthnAndContext(t *testing.T) {
	idp := startSimpleSAMLphp(t, newPair(t, "idp"))
	a := startSSPApp(t, idp, nil, false)
	a.edit = func(c *extauth.Config) {
		c.SAML.Additional.RequestOptions = []string{"ForceAuthn", "max_age", "authn_context"}
	}
	a.configure(nil, nil, nil, false)
	idp.trustSP(t, a.URL+"/users/auth/saml/metadata", nil, nil)
	b := harness.NewBrowser(t)

	sspSignIn(t, b, a, true)
	// SimpleSAMLphp's session signs the user in again without a password...
	sspSignIn(t, b, a, false)
	for _, start := range []url.Values{{"ForceAuthn": {"true"}}, {"max_age": {"60"}}} {
		// ...but not when the request forces a new authentication.
		time.Sleep(1100 * time.Millisecond) // AuthnInstant has whole seconds
		before := time.Now().Truncate(time.Second)
		from := len(b.Hops)
		_, cb := sspSignInWith(t, b, a, start, true)
		if cb.StatusCode != http.StatusOK {
			t.Fatalf("%v: callback %d %s (failures %v)", start, cb.StatusCode, cb.Body, a.failureList())
		}
		if req := ssoRequest(t, b, idp, from); !strings.Contains(req, `ForceAuthn="true"`) {
			t.Errorf("%v: the AuthnRequest does not force the authentication:\n%s", start, req)
		}
		if id := a.last(); id.AuthTime.Before(before) || id.ACR != "urn:oasis:names:tc:SAML:2.0:ac:classes:Password" {
			t.Errorf("%v: AuthTime %v (want from %v), ACR %q", start, id.AuthTime, before, id.ACR)
		}
	}

	const transport = "urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport"
	from := len(b.Hops)
	_, cb := sspSignInWith(t, b, a, url.Values{"authn_context": {transport}}, false)
	if cb.StatusCode != http.StatusForbidden || !strings.Contains(cb.Body, "insufficient_user_authentication") {
		t.Fatalf("a class SimpleSAMLphp did not meet: %d %s", cb.StatusCode, cb.Body)
	}
	if req := ssoRequest(t, b, idp, from); !strings.Contains(req, `<samlp:RequestedAuthnContext Comparison="exact"><saml:AuthnContextClassRef>`+transport) {
		t.Errorf("the AuthnRequest does not ask for the class:\n%s", req)
	}
	_, cb = sspSignInWith(t, b, a, url.Values{"authn_context": {transport + " urn:oasis:names:tc:SAML:2.0:ac:classes:Password"}}, false)
	if cb.StatusCode != http.StatusOK {
		t.Fatalf("a class SimpleSAMLphp met: %d %s (failures %v)", cb.StatusCode, cb.Body, a.failureList())
	}
}
