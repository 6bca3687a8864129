package extauth_test

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"encoding/xml"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/beevik/etree"
	"github.com/crewjam/saml"
	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/samlidp"
	"github.com/extauth/extauth/internal/harness"
	"github.com/extauth/extauth/internal/testkeys"
	"github.com/extauth/extauth/providers"
	"github.com/extauth/extauth/samlsp"
)

const samlEntityID = "https://app.example.test/saml"

// samlApp is an application with SAML against a fake crewjam IdP.
type samlApp struct {
	t     *testing.T
	URL   string
	Auth  *extauth.Auth
	IdP   *samlidp.IdP
	store extauth.Store
	// handler is what the server at URL serves.
	handler http.Handler
	signIns
}

// newSAMLIdP starts a fake IdP signing in the demo user without a page.
func newSAMLIdP(t *testing.T) *samlidp.IdP {
	t.Helper()
	key, cert := testkeys.LendPair(t, "Fake SAML IdP", time.Now())
	var idp *samlidp.IdP
	harness.Serve(t, func(base string) http.Handler {
		var err error
		idp, err = samlidp.New(samlidp.Options{BaseURL: base + "/idp", AutoApprove: true, Key: key, Certificate: cert})
		if err != nil {
			t.Fatal(err)
		}
		return idp
	})
	return idp
}

// newSAMLApp mounts extauth with SAML configured for idp, registers the
// app's SP metadata with the IdP and waits until the IdP metadata is in.
func newSAMLApp(t *testing.T, idp *samlidp.IdP, edit func(*extauth.Config, *extauth.Options)) *samlApp {
	t.Helper()
	a := &samlApp{t: t, IdP: idp, store: extauth.NewMemoryStore(extauth.MemoryStoreOptions{})}
	srv := harness.Serve(t, func(base string) http.Handler {
		cfg := &extauth.Config{SAML: extauth.SAMLConfig{SPEntityID: samlEntityID, IdPMetadataURL: idp.MetadataURL()}}
		o := extauth.Options{
			BaseURL:   base,
			CookieKey: testKey,
			Store:     a.store,
			Logger:    slog.New(slog.DiscardHandler),
			OnSuccess: a.onSuccess,
		}
		if edit != nil {
			edit(cfg, &o)
		}
		auth, err := extauth.New(cfg, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { auth.Close() })
		a.Auth = auth
		mux := http.NewServeMux()
		auth.Mount(mux)
		mux.HandleFunc("/{$}", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "home") })
		a.handler = mux
		return mux
	})
	a.URL = srv.URL
	a.register()
	a.waitReady()
	return a
}

func (a *samlApp) register() {
	a.t.Helper()
	resp, err := http.Get(a.URL + "/users/auth/saml/metadata")
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	md, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		a.t.Fatalf("SP metadata: %d %s", resp.StatusCode, md)
	}
	if err := a.IdP.RegisterSP(md); err != nil {
		a.t.Fatal(err)
	}
}

func (a *samlApp) waitReady() {
	a.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		rec := httptest.NewRecorder()
		a.Auth.ServeHTTP(rec, newRequest(http.MethodPost, a.URL+"/users/auth/saml.json", nil))
		if rec.Code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("SAML never became ready: %d %s", rec.Code, rec.Body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// authorize starts a sign-in through the .json authorize route and returns
// the IdP redirect URL, our AuthnRequest ID and the RelayState handle.
func (a *samlApp) authorize(b *harness.Browser, form url.Values) (string, string, string) {
	a.t.Helper()
	resp := b.PostForm(a.URL+"/users/auth/saml.json", form)
	var out struct {
		RedirectTo string `json:"redirect_to"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(resp.Body), &out) != nil {
		a.t.Fatalf("authorize: %d %s", resp.StatusCode, resp.Body)
	}
	u, err := url.Parse(out.RedirectTo)
	if err != nil {
		a.t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(u.Query().Get("SAMLRequest"))
	if err != nil {
		a.t.Fatal(err)
	}
	x, err := io.ReadAll(flate.NewReader(bytes.NewReader(raw)))
	if err != nil {
		a.t.Fatal(err)
	}
	var req saml.AuthnRequest
	if err := xml.Unmarshal(x, &req); err != nil {
		a.t.Fatal(err)
	}
	return out.RedirectTo, req.ID, u.Query().Get("RelayState")
}

var samlFormField = regexp.MustCompile(`name="(SAMLResponse|RelayState)" value="([^"]*)"`)

// idpForm has the IdP answer and returns its auto-submitting form.
func idpForm(t *testing.T, b *harness.Browser, redirect string) url.Values {
	t.Helper()
	resp := b.Get(redirect)
	form := url.Values{}
	for _, m := range samlFormField.FindAllStringSubmatch(resp.Body, -1) {
		form.Set(m[1], html.UnescapeString(m[2]))
	}
	if resp.StatusCode != http.StatusOK || form.Get("SAMLResponse") == "" {
		t.Fatalf("IdP: %d %s", resp.StatusCode, resp.Body)
	}
	return form
}

func (a *samlApp) callback(b *harness.Browser, form url.Values) *harness.Response {
	return b.PostForm(a.URL+"/users/auth/saml/callback", form)
}

func TestSAMLSignInThroughRoutes(t *testing.T) {
	certPEM, keyPEM := spKeyPair(t)
	for _, encrypted := range []bool{false, true} {
		t.Run(map[bool]string{false: "signed", true: "encrypted"}[encrypted], func(t *testing.T) {
			idp := newSAMLIdP(t)
			a := newSAMLApp(t, idp, func(c *extauth.Config, _ *extauth.Options) {
				c.SAML.Additional.RelayState = "/welcome"
				if encrypted {
					c.SAML.Additional.Certificate = certPEM
					c.SAML.Additional.PrivateKey = extauth.NewSecret(keyPEM)
				}
			})
			b := harness.NewBrowser(t)
			redirect, _, relay := a.authorize(b, nil)
			form := idpForm(t, b, redirect)
			raw, _ := base64.StdEncoding.DecodeString(form.Get("SAMLResponse"))
			if got := bytes.Contains(raw, []byte("EncryptedAssertion")); got != encrypted {
				t.Fatalf("EncryptedAssertion present = %v", got)
			}
			if form.Get("RelayState") != relay || len(relay) > 80 {
				t.Fatalf("RelayState %q", form.Get("RelayState"))
			}
			resp := a.callback(b, form)
			if resp.StatusCode != http.StatusOK || resp.Body != "signed in as ada@example.org" {
				t.Fatalf("callback: %d %s", resp.StatusCode, resp.Body)
			}
			ids := a.identities()
			if len(ids) != 1 || ids[0].Provider != "saml" || ids[0].Email != "ada@example.org" || ids[0].SAML.SessionIndex == "" {
				t.Fatalf("identities = %+v", ids)
			}
			if a.Ret[0] != "/welcome" {
				t.Errorf("ReturnTo = %q, want the configured RelayState", a.Ret[0])
			}
			// The browser's POST again: the transaction is spent.
			if resp := a.callback(b, form); resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("second POST: %d %s", resp.StatusCode, resp.Body)
			}
		})
	}
}

// TestSAMLTamperThroughCallbackRoute runs every tamper row of SECURITY.md
// through the real callback route: a genuine transaction cookie and
// RelayState, and a forged or altered response.
func TestSAMLTamperThroughCallbackRoute(t *testing.T) {
	idp := newSAMLIdP(t)
	a := newSAMLApp(t, idp, nil)
	attackerKey, attackerCert := testkeys.LendPair(t, "attacker", time.Now())
	acs := a.URL + "/users/auth/saml/callback"
	for _, tc := range idp.Tampers(samlidp.Target{EntityID: samlEntityID, ACS: acs, AttackerKey: attackerKey, AttackerCert: attackerCert}) {
		t.Run(tc.Name, func(t *testing.T) {
			b := harness.NewBrowser(t)
			_, requestID, relay := a.authorize(b, nil)
			x, err := tc.Build(requestID)
			if err != nil {
				t.Fatal(err)
			}
			resp := a.callback(b, url.Values{"SAMLResponse": {base64.StdEncoding.EncodeToString(x)}, "RelayState": {relay}})
			if tc.Want == "" {
				if resp.StatusCode != http.StatusOK || resp.Body != "signed in as "+tc.WantUID {
					t.Fatalf("valid response refused: %d %s", resp.StatusCode, resp.Body)
				}
				return
			}
			var out struct {
				Error string `json:"error"`
			}
			if err := json.Unmarshal([]byte(resp.Body), &out); err != nil || out.Error != string(tc.Want) ||
				resp.StatusCode != tc.Want.HTTPStatus() {
				t.Fatalf("got %d %s, want %s", resp.StatusCode, resp.Body, tc.Want)
			}
		})
	}
}

// Two instances behind one load balancer share the cookie key and the
// store: the browser's POST replayed to the other instance is refused.
func TestSAMLReplayToSecondInstance(t *testing.T) {
	idp := newSAMLIdP(t)
	a := newSAMLApp(t, idp, nil)
	// The second instance has the same base URL, key and store, as behind a
	// load balancer.
	second, err := extauth.New(&extauth.Config{SAML: extauth.SAMLConfig{SPEntityID: samlEntityID, IdPMetadataURL: idp.MetadataURL()}},
		extauth.Options{BaseURL: a.URL, CookieKey: testKey, Store: a.store, Logger: slog.New(slog.DiscardHandler),
			OnSuccess: func(w http.ResponseWriter, _ *http.Request, id *extauth.Identity) {
				t.Errorf("the second instance accepted a replay for %s", id.UID)
			}})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	b := harness.NewBrowser(t)
	redirect, _, _ := a.authorize(b, nil)
	form := idpForm(t, b, redirect)
	// The attacker copied the browser's cookies before its POST.
	thief := harness.NewBrowser(t)
	au, _ := url.Parse(a.URL)
	thief.Jar.SetCookies(au, b.Jar.Cookies(au))
	if resp := a.callback(b, form); resp.StatusCode != http.StatusOK {
		t.Fatalf("first: %d %s", resp.StatusCode, resp.Body)
	}
	req := httptest.NewRequest(http.MethodPost, a.URL+"/users/auth/saml/callback", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, c := range thief.Jar.Cookies(au) {
		req.AddCookie(c)
	}
	rec := httptest.NewRecorder()
	second.ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest {
		t.Fatalf("replay on the second instance: %d %s", rec.Code, rec.Body)
	}
}

func TestSAMLCallbackCookieIsCrossSite(t *testing.T) {
	idp := newSAMLIdP(t)
	a, err := extauth.New(&extauth.Config{SAML: extauth.SAMLConfig{SPEntityID: samlEntityID, IdPMetadataURL: idp.MetadataURL()}},
		extauth.Options{BaseURL: "https://app.example", CookieKey: testKey, OnSuccess: func(http.ResponseWriter, *http.Request, *extauth.Identity) {}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var rec *httptest.ResponseRecorder
	deadline := time.Now().Add(time.Minute)
	for {
		rec = httptest.NewRecorder()
		a.ServeHTTP(rec, newRequest(http.MethodPost, "https://app.example/users/auth/saml", nil))
		if rec.Code != http.StatusServiceUnavailable || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("authorize: %d %s", rec.Code, rec.Body)
	}
	sc := rec.Header().Values("Set-Cookie")
	c, err := http.ParseSetCookie(sc[len(sc)-1])
	if err != nil {
		t.Fatal(err)
	}
	if c.SameSite != http.SameSiteNoneMode || !c.Secure || !c.HttpOnly || c.Path != "/users/auth/saml/callback" ||
		!strings.HasPrefix(c.Name, "__Secure-") || c.MaxAge <= 0 || c.MaxAge > 600 {
		t.Fatalf("cookie: %s", sc[len(sc)-1])
	}
	if loc := rec.Header().Get("Location"); !strings.HasPrefix(loc, idp.SSOURL()+"?SAMLRequest=") {
		t.Fatalf("Location %s", loc)
	}
}

func TestSAMLRoutesWhileIdPIsDown(t *testing.T) {
	t.Parallel() // it waits on time-outs and retries more than it computes: it runs beside the others that do
	idp := newSAMLIdP(t)
	idp.Set(func(k *samlidp.Knobs) { k.MetadataStatus = http.StatusInternalServerError })
	a, err := extauth.New(&extauth.Config{SAML: extauth.SAMLConfig{SPEntityID: samlEntityID, IdPMetadataURL: idp.MetadataURL()}},
		extauth.Options{BaseURL: "https://app.example", CookieKey: testKey, OnSuccess: func(http.ResponseWriter, *http.Request, *extauth.Identity) {}})
	if err != nil {
		t.Fatalf("the app must start while the IdP is down: %v", err)
	}
	defer a.Close()
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, newRequest(http.MethodPost, "https://app.example/users/auth/saml.json", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "provider_unavailable") {
		t.Fatalf("authorize: %d %s", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	a.ServeHTTP(rec, newRequest(http.MethodGet, "https://app.example/users/auth/saml/metadata", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), samlEntityID) {
		t.Fatalf("metadata: %d", rec.Code)
	}
	var paths []string
	for _, r := range a.Routes() {
		paths = append(paths, r.Purpose+" "+r.Path)
	}
	want := "authorize /users/auth/saml,callback /users/auth/saml/callback,logout /users/auth/saml/logout,metadata /users/auth/saml/metadata"
	if strings.Join(paths, ",") != want {
		t.Fatalf("routes = %v", paths)
	}
}

func TestSAMLCallbackBindingAndRedirects(t *testing.T) {
	idp := newSAMLIdP(t)
	a := newSAMLApp(t, idp, nil)
	t.Run("unsolicited POST without a transaction", func(t *testing.T) {
		b := harness.NewBrowser(t)
		redirect, _, _ := a.authorize(harness.NewBrowser(t), nil)
		form := idpForm(t, b, redirect)
		resp := a.callback(b, form)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.Body, "invalid_state") {
			t.Fatalf("%d %s", resp.StatusCode, resp.Body)
		}
	})
	t.Run("RelayState changed to a URL", func(t *testing.T) {
		b := harness.NewBrowser(t)
		redirect, _, _ := a.authorize(b, nil)
		form := idpForm(t, b, redirect)
		form.Set("RelayState", "https://evil.example/")
		if resp := a.callback(b, form); resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.Body, "invalid_state") {
			t.Fatalf("%d %s", resp.StatusCode, resp.Body)
		}
	})
	t.Run("return_to to another site ends at /", func(t *testing.T) {
		b := harness.NewBrowser(t)
		redirect, _, _ := a.authorize(b, url.Values{"return_to": {"https://evil.example/"}})
		if strings.Contains(redirect, "evil") {
			t.Fatal("return_to travels to the IdP")
		}
		resp := a.callback(b, idpForm(t, b, redirect))
		if resp.StatusCode != http.StatusOK || a.Ret[len(a.Ret)-1] != "/" {
			t.Fatalf("%d %s, ReturnTo %q", resp.StatusCode, resp.Body, a.Ret)
		}
	})
	t.Run("return_to with an encoded tab ends at /", func(t *testing.T) {
		b := harness.NewBrowser(t)
		redirect, _, _ := a.authorize(b, url.Values{"return_to": {"/%09/evil.example"}})
		resp := a.callback(b, idpForm(t, b, redirect))
		if resp.StatusCode != http.StatusOK || a.Ret[len(a.Ret)-1] != "/" {
			t.Fatalf("%d %s, ReturnTo %q", resp.StatusCode, resp.Body, a.Ret)
		}
	})
	t.Run("return_to path kept in the transaction", func(t *testing.T) {
		b := harness.NewBrowser(t)
		redirect, _, _ := a.authorize(b, url.Values{"return_to": {"/projects/7"}})
		if strings.Contains(redirect, "projects") {
			t.Fatal("return_to travels to the IdP")
		}
		resp := a.callback(b, idpForm(t, b, redirect))
		if resp.StatusCode != http.StatusOK || a.Ret[len(a.Ret)-1] != "/projects/7" {
			t.Fatalf("%d %s, ReturnTo %q", resp.StatusCode, resp.Body, a.Ret)
		}
	})
}

// Without a single logout endpoint at the IdP, signing out through the
// logout route is local: the host's Done hook sees success, not an error
// page, and the log says why.
func TestSAMLLogoutWithoutSLOEndpoint(t *testing.T) {
	idp := newSAMLIdP(t)
	idp.Set(func(k *samlidp.Knobs) { k.NoSLO = true })
	var logs syncBuffer
	var done []error
	a := newSAMLApp(t, idp, func(_ *extauth.Config, o *extauth.Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		o.SAML.Logout.Session = func(*http.Request) (samlsp.LogoutSession, bool) {
			return samlsp.LogoutSession{NameID: "ada@example.org"}, true
		}
		o.SAML.Logout.Done = func(w http.ResponseWriter, r *http.Request, err *providers.Error) {
			if err != nil {
				done = append(done, err)
			} else {
				done = append(done, nil)
			}
			http.Redirect(w, r, "/", http.StatusSeeOther)
		}
	})
	resp := harness.NewBrowser(t).Get(a.URL + "/users/auth/saml/logout")
	if resp.StatusCode != http.StatusOK || resp.URL.Path != "/" || len(done) != 1 || done[0] != nil {
		t.Fatalf("logout without SLO: %d at %s, Done saw %v", resp.StatusCode, resp.URL, done)
	}
	if !strings.Contains(logs.String(), "no HTTP-Redirect single logout endpoint") {
		t.Errorf("no log line says why:\n%s", logs.String())
	}
}

func TestSAMLSingleLogoutRoute(t *testing.T) {
	idp := newSAMLIdP(t)
	var ended []samlsp.LogoutSession
	var mu sync.Mutex
	a := newSAMLApp(t, idp, func(_ *extauth.Config, o *extauth.Options) {
		o.SAML.Logout.Session = func(*http.Request) (samlsp.LogoutSession, bool) {
			return samlsp.LogoutSession{NameID: "ada@example.org", SessionIndex: "idx-1"}, true
		}
		o.SAML.Logout.OnIdPLogout = func(_ context.Context, s samlsp.LogoutSession) error {
			mu.Lock()
			ended = append(ended, s)
			mu.Unlock()
			return nil
		}
	})
	b := harness.NewBrowser(t)
	resp := b.Get(a.URL + "/users/auth/saml/logout")
	if resp.StatusCode != http.StatusOK || resp.URL.Path != "/" || resp.Body != "home" {
		t.Fatalf("SP-initiated logout ended at %s with %d", resp.URL, resp.StatusCode)
	}
	if rec := idp.LastLogout(); rec == nil || rec.Request.NameID.Value != "ada@example.org" {
		t.Fatalf("IdP saw %+v", rec)
	}
	slo := a.URL + "/users/auth/saml/logout"
	lr := &saml.LogoutRequest{ID: "id-idp-1", Version: "2.0", IssueInstant: time.Now(), Destination: slo,
		Issuer: &saml.Issuer{Value: idp.EntityID()}, NameID: &saml.NameID{Value: "ada@example.org"}}
	m, err := idp.RedirectMessage(slo, "SAMLRequest", lr.Element(), "")
	if err != nil {
		t.Fatal(err)
	}
	resp = harness.NewBrowser(t).NoFollow().Get(m)
	if resp.StatusCode != http.StatusSeeOther || len(ended) != 1 || !strings.HasPrefix(resp.Header.Get("Location"), idp.SLOURL()) {
		t.Fatalf("IdP-initiated logout: %d, ended %v", resp.StatusCode, ended)
	}
}

func spKeyPair(t *testing.T) (certPEM, keyPEM string) {
	t.Helper()
	now := time.Now()
	key, cert := testkeys.LendPair(t, "extauth test SP", now)
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// TestSAMLRefusalIsAccessDenied: an IdP that did not authenticate the user
// answers a non-Success status without an assertion; that is a refusal, not
// a malformed response, but only for our own request.
func TestSAMLRefusalIsAccessDenied(t *testing.T) {
	idp := newSAMLIdP(t)
	a := newSAMLApp(t, idp, nil)
	acs := a.URL + "/users/auth/saml/callback"
	cases := []struct {
		name         string
		inResponseTo func(ours string) string
		sign         bool
		status       int
		code         string
	}{
		{"signed refusal", func(ours string) string { return ours }, true, http.StatusForbidden, "access_denied"},
		{"unsigned refusal", func(ours string) string { return ours }, false, http.StatusForbidden, "access_denied"},
		{"refusal of another request", func(string) string { return "id-someone-else" }, true, http.StatusBadRequest, "invalid_response"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := harness.NewBrowser(t)
			_, reqID, relay := a.authorize(b, nil)
			spec := idp.DefaultSpec(samlEntityID, acs, c.inResponseTo(reqID))
			spec.Status = "urn:oasis:names:tc:SAML:2.0:status:Responder"
			spec.NoAssertion, spec.Assertion = true, nil
			spec.SignAssertion, spec.SignResponse = false, c.sign
			raw, err := idp.Forge(spec)
			if err != nil {
				t.Fatal(err)
			}
			resp := a.callback(b, url.Values{"SAMLResponse": {base64.StdEncoding.EncodeToString(raw)}, "RelayState": {relay}})
			if resp.StatusCode != c.status || !strings.Contains(resp.Body, c.code) {
				t.Fatalf("got %d %s, want %d %s", resp.StatusCode, resp.Body, c.status, c.code)
			}
			if len(a.identities()) != 0 {
				t.Fatal("a refusal signed someone in")
			}
		})
	}
}

// unsolicitedForm has the IdP start an IdP-initiated sign-in for our SP,
// with relayState, and returns the form its page would POST to our ACS.
func unsolicitedForm(t *testing.T, a *samlApp, relayState string) url.Values {
	t.Helper()
	u := strings.TrimSuffix(a.IdP.SSOURL(), "/sso") + "/unsolicited?" +
		url.Values{"sp": {samlEntityID}, "RelayState": {relayState}}.Encode()
	form := idpForm(t, harness.NewBrowser(t), u)
	if form.Get("RelayState") != relayState {
		t.Fatalf("the IdP posts RelayState %q, want %q", form.Get("RelayState"), relayState)
	}
	return form
}

func allowIDPInitiated(_ *extauth.Config, o *extauth.Options) { o.SAML.AllowIDPInitiated = true }

func TestSAMLUnsolicitedRefusedByDefault(t *testing.T) {
	a := newSAMLApp(t, newSAMLIdP(t), nil)
	for _, relay := range []string{"", "/projects/7", "https://evil.example/"} {
		resp := a.callback(harness.NewBrowser(t), unsolicitedForm(t, a, relay))
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.Body, "invalid_state") {
			t.Errorf("RelayState %q: %d %s", relay, resp.StatusCode, resp.Body)
		}
	}
	if n := len(a.identities()); n != 0 {
		t.Fatalf("%d unsolicited sign-ins accepted while AllowIDPInitiated is off", n)
	}
}

func TestSAMLUnsolicitedWhenEnabled(t *testing.T) {
	a := newSAMLApp(t, newSAMLIdP(t), allowIDPInitiated)

	t.Run("accepted, ending at /", func(t *testing.T) {
		// The posted RelayState is never a destination, whatever it says.
		for _, relay := range []string{"", "/projects/7", "https://evil.example/", "//evil.example/"} {
			before := len(a.identities())
			resp := a.callback(harness.NewBrowser(t), unsolicitedForm(t, a, relay))
			if resp.StatusCode != http.StatusOK || resp.Body != "signed in as ada@example.org" {
				t.Fatalf("RelayState %q: %d %s", relay, resp.StatusCode, resp.Body)
			}
			if got := a.identities(); len(got) != before+1 || got[before].Provider != "saml" {
				t.Fatalf("RelayState %q: identities %v", relay, got)
			}
			a.mu.Lock()
			ret := a.Ret[len(a.Ret)-1]
			a.mu.Unlock()
			if ret != "/" {
				t.Errorf("RelayState %q: ReturnTo %q, want /", relay, ret)
			}
			if id := a.identities()[before]; !id.Unsolicited {
				t.Errorf("RelayState %q: the identity is not marked unsolicited", relay)
			}
		}
	})

	// The configured landing page, or the host's choice, ends an
	// unsolicited sign-in; the posted RelayState still never does.
	for name, edit := range map[string]func(*extauth.Config, *extauth.Options){
		"configured RelayState": func(c *extauth.Config, o *extauth.Options) {
			allowIDPInitiated(c, o)
			c.SAML.Additional.RelayState = "/landing"
		},
		"UnsolicitedReturnTo": func(c *extauth.Config, o *extauth.Options) {
			allowIDPInitiated(c, o)
			c.SAML.Additional.RelayState = "/not-this"
			o.UnsolicitedReturnTo = "/landing"
		},
	} {
		t.Run(name, func(t *testing.T) {
			a := newSAMLApp(t, newSAMLIdP(t), edit)
			a.callback(harness.NewBrowser(t), unsolicitedForm(t, a, "/projects/7"))
			if len(a.Ret) != 1 || a.Ret[0] != "/landing" {
				t.Fatalf("ReturnTo %v, want /landing", a.Ret)
			}
		})
	}

	t.Run("the same assertion twice", func(t *testing.T) {
		form := unsolicitedForm(t, a, "")
		if resp := a.callback(harness.NewBrowser(t), form); resp.StatusCode != http.StatusOK {
			t.Fatalf("first: %d %s", resp.StatusCode, resp.Body)
		}
		before := len(a.identities())
		resp := a.callback(harness.NewBrowser(t), form)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.Body, "replayed") {
			t.Fatalf("replay: %d %s", resp.StatusCode, resp.Body)
		}
		if len(a.identities()) != before {
			t.Fatal("the replay signed someone in")
		}
	})

	t.Run("solicited sign-ins keep their return_to", func(t *testing.T) {
		b := harness.NewBrowser(t)
		redirect, _, _ := a.authorize(b, url.Values{"return_to": {"/projects/7"}})
		resp := a.callback(b, idpForm(t, b, redirect))
		a.mu.Lock()
		ret := a.Ret[len(a.Ret)-1]
		a.mu.Unlock()
		if resp.StatusCode != http.StatusOK || ret != "/projects/7" {
			t.Fatalf("%d %s, ReturnTo %q", resp.StatusCode, resp.Body, ret)
		}
		if ids := a.identities(); ids[len(ids)-1].Unsolicited {
			t.Error("a sign-in we started is marked unsolicited")
		}
	})

	t.Run("a solicited response without its cookie", func(t *testing.T) {
		// The answer to our request reaches a browser that did not start
		// it: as unsolicited it names a request, so it is refused.
		redirect, _, _ := a.authorize(harness.NewBrowser(t), nil)
		b := harness.NewBrowser(t)
		resp := a.callback(b, idpForm(t, b, redirect))
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.Body, "invalid_response") {
			t.Fatalf("%d %s", resp.StatusCode, resp.Body)
		}
	})

	t.Run("a spent transaction cookie is not an unsolicited callback", func(t *testing.T) {
		// A cookie that is present but no longer good is a solicited
		// sign-in gone wrong: invalid_state, never a second chance as an
		// unsolicited one.
		b := harness.NewBrowser(t)
		redirect, _, _ := a.authorize(b, nil)
		form := idpForm(t, b, redirect)
		acs := a.URL + "/users/auth/saml/callback"
		u, _ := url.Parse(acs)
		cookies := b.Jar.Cookies(u)
		if len(cookies) != 1 {
			t.Fatalf("%d transaction cookies", len(cookies))
		}
		if resp := a.callback(b, form); resp.StatusCode != http.StatusOK {
			t.Fatalf("first: %d %s", resp.StatusCode, resp.Body)
		}
		fresh := unsolicitedForm(t, a, form.Get("RelayState"))
		req, err := http.NewRequest(http.MethodPost, acs, strings.NewReader(fresh.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(cookies[0])
		resp := harness.NewBrowser(t).Do(req)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.Body, "invalid_state") {
			t.Fatalf("%d %s", resp.StatusCode, resp.Body)
		}
	})
}

// TestSAMLLogoutRedirectBypass is the single-logout signature bypass of
// the security review, through the real logout route: a forged, unsigned
// message under a percent-encoded parameter name (SAML%52equest), beside a
// genuine signed query, must not be processed as signed. Nor may a
// duplicated or otherwise encoded binding parameter pass.
func TestSAMLLogoutRedirectBypass(t *testing.T) {
	idp := newSAMLIdP(t)
	var mu sync.Mutex
	var ended []samlsp.LogoutSession
	var done []*providers.Error
	a := newSAMLApp(t, idp, func(_ *extauth.Config, o *extauth.Options) {
		o.SAML.Logout.Session = func(*http.Request) (samlsp.LogoutSession, bool) {
			return samlsp.LogoutSession{NameID: "ada@example.org"}, true
		}
		o.SAML.Logout.OnIdPLogout = func(_ context.Context, s samlsp.LogoutSession) error {
			mu.Lock()
			ended = append(ended, s)
			mu.Unlock()
			return nil
		}
		o.SAML.Logout.Done = func(w http.ResponseWriter, _ *http.Request, err *providers.Error) {
			mu.Lock()
			done = append(done, err)
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		}
	})
	slo := a.URL + "/users/auth/saml/logout"
	get := func(rawQuery string) int {
		return harness.NewBrowser(t).NoFollow().Get(slo + "?" + rawQuery).StatusCode
	}
	query := func(param string, el interface{ Element() *etree.Element }) (signed, unsigned string) {
		m, err := idp.RedirectMessage(slo, param, el.Element(), "")
		if err != nil {
			t.Fatal(err)
		}
		q := m[strings.Index(m, "?")+1:]
		return q, q[:strings.Index(q, "&SigAlg=")]
	}
	lr := func(id, nameID string) *saml.LogoutRequest {
		return &saml.LogoutRequest{ID: id, Version: "2.0", IssueInstant: time.Now(), Destination: slo,
			Issuer: &saml.Issuer{Value: idp.EntityID()}, NameID: &saml.NameID{Value: nameID}}
	}

	t.Run("LogoutRequest", func(t *testing.T) {
		genuine, _ := query("SAMLRequest", lr("id-genuine", "ada@example.org"))
		_, forged := query("SAMLRequest", lr("id-forged", "victim@example.org"))
		encoded := "SAML%52equest" + strings.TrimPrefix(forged, "SAMLRequest")
		for name, q := range map[string]string{
			"encoded name before": encoded + "&" + genuine,
			"encoded name after":  genuine + "&" + encoded,
			"duplicate":           forged + "&" + genuine,
			"encoded RelayState":  genuine + "&Relay%53tate=x",
			"encoded Signature":   strings.Replace(genuine, "&Signature=", "&%53ignature=", 1),
		} {
			get(q)
			mu.Lock()
			n := len(ended)
			mu.Unlock()
			if n != 0 {
				t.Fatalf("%s: OnIdPLogout ran for %+v", name, ended)
			}
		}
		// The genuine query alone still works, once.
		get(genuine)
		if len(ended) != 1 || ended[0].NameID != "ada@example.org" {
			t.Fatalf("genuine: ended %+v", ended)
		}
	})

	t.Run("LogoutResponse", func(t *testing.T) {
		// Our own logout starts; the IdP answers with a signed response.
		b := harness.NewBrowser(t).NoFollow()
		start := b.Get(slo)
		toIdP := start.Header.Get("Location")
		back := b.Get(toIdP).Header.Get("Location")
		if !strings.HasPrefix(back, slo+"?SAMLResponse=") {
			t.Fatalf("the IdP answered %s", back)
		}
		genuine := back[strings.Index(back, "?")+1:]
		pending := func() string { // a request of ours the IdP has not answered
			u, _ := url.Parse(harness.NewBrowser(t).NoFollow().Get(slo).Header.Get("Location"))
			raw, _ := base64.StdEncoding.DecodeString(u.Query().Get("SAMLRequest"))
			x, _ := io.ReadAll(flate.NewReader(bytes.NewReader(raw)))
			var r saml.LogoutRequest
			xml.Unmarshal(x, &r)
			return r.ID
		}()
		_, forged := query("SAMLResponse", &saml.LogoutResponse{ID: "id-forged", InResponseTo: pending, Version: "2.0",
			IssueInstant: time.Now(), Destination: slo, Issuer: &saml.Issuer{Value: idp.EntityID()},
			Status: saml.Status{StatusCode: saml.StatusCode{Value: saml.StatusSuccess}}})
		encoded := "SAML%52esponse" + strings.TrimPrefix(forged, "SAMLResponse")
		for name, q := range map[string]string{
			"encoded name before": encoded + "&" + genuine,
			"encoded name after":  genuine + "&" + encoded,
			"duplicate":           forged + "&" + genuine,
		} {
			mu.Lock()
			done = nil
			mu.Unlock()
			get(q)
			mu.Lock()
			if len(done) != 1 || done[0] == nil {
				t.Fatalf("%s: Done saw %v", name, done)
			}
			mu.Unlock()
		}
		done = nil
		get(genuine)
		if len(done) != 1 || done[0] != nil {
			t.Fatalf("genuine: Done saw %v", done)
		}
	})
}

// TestSAMLSHA1OptIn: an IdP that still signs with RSA-SHA1 is refused,
// unless the host opts in.
func TestSAMLSHA1OptIn(t *testing.T) {
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprintf("AllowSHA1=%v", allow), func(t *testing.T) {
			idp := newSAMLIdP(t)
			a := newSAMLApp(t, idp, func(_ *extauth.Config, o *extauth.Options) { o.SAML.AllowSHA1 = allow })
			acs := a.URL + "/users/auth/saml/callback"
			b := harness.NewBrowser(t)
			_, reqID, relay := a.authorize(b, nil)
			s := idp.DefaultSpec(samlEntityID, acs, reqID)
			s.Sign = samlidp.SignOptions{SignatureMethod: samlidp.RSASHA1, DigestMethod: samlidp.DigestSHA1}
			x, err := idp.Forge(s)
			if err != nil {
				t.Fatal(err)
			}
			resp := a.callback(b, url.Values{"SAMLResponse": {base64.StdEncoding.EncodeToString(x)}, "RelayState": {relay}})
			if allow != (resp.StatusCode == http.StatusOK) {
				t.Fatalf("%d %s", resp.StatusCode, resp.Body)
			}
		})
	}
}

var (
	postFormAction = regexp.MustCompile(`<form method="post" action="([^"]+)">`)
	postFormField  = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)
)

// postAutoSubmit does what the browser does with the authorize route's
// auto-submitting page: POST its fields, unescaped, to its action.
func postAutoSubmit(t *testing.T, b *harness.Browser, page *harness.Response) *harness.Response {
	t.Helper()
	m := postFormAction.FindStringSubmatch(page.Body)
	if m == nil {
		t.Fatalf("no form in the page: %d %s", page.StatusCode, page.Body)
	}
	form := url.Values{}
	for _, f := range postFormField.FindAllStringSubmatch(page.Body, -1) {
		form.Add(html.UnescapeString(f[1]), html.UnescapeString(f[2]))
	}
	return b.PostForm(html.UnescapeString(m[1]), form)
}

// TestSAMLAuthnRequestBindings signs in with each way of sending the
// AuthnRequest, through the routes, against the in-process IdP: the
// HTTP-Redirect binding, and HTTP-POST, by option or because the IdP lists
// only a POST single sign-on service; unsigned, and signed when the IdP
// requires it (the IdP verifies the query signature or the XML one).
func TestSAMLAuthnRequestBindings(t *testing.T) {
	certPEM, keyPEM := spKeyPair(t)
	const redirect, post = saml.HTTPRedirectBinding, saml.HTTPPostBinding
	for _, tc := range []struct {
		name        string
		option      string
		idpBindings []string
		signed      bool
		want        string
	}{
		{"redirect", "", nil, false, redirect},
		{"redirect, signed", "", nil, true, redirect},
		{"POST by option", samlsp.BindingPOST, nil, false, post},
		{"POST by option, signed", samlsp.BindingPOST, nil, true, post},
		{"POST, the IdP lists only POST", "", []string{post}, false, post},
		{"POST, the IdP lists only POST, signed", "", []string{post}, true, post},
		{"redirect by option though the IdP lists POST first", samlsp.BindingRedirect, []string{post, redirect}, true, redirect},
	} {
		t.Run(tc.name, func(t *testing.T) {
			idp := newSAMLIdP(t)
			idp.Set(func(k *samlidp.Knobs) { k.SSOBindings, k.RequireSignedRequests = tc.idpBindings, tc.signed })
			a := newSAMLApp(t, idp, func(c *extauth.Config, o *extauth.Options) {
				o.SAML.AuthnRequestBinding = tc.option
				if tc.signed {
					c.SAML.Additional.Certificate = certPEM
					c.SAML.Additional.PrivateKey = extauth.NewSecret(keyPEM)
				}
			})
			b := harness.NewBrowser(t)
			b.Header.Set("Sec-Fetch-Site", "same-origin")
			page := b.PostForm(a.URL+"/users/auth/saml", url.Values{"return_to": {"/after"}})
			if tc.want == post {
				if page.URL.Host != strings.TrimPrefix(a.URL, "http://") {
					t.Fatalf("the authorize route redirected to %s instead of answering a form", page.URL)
				}
				page = postAutoSubmit(t, b, page)
			}
			rec := idp.LastAuthnRequest()
			if rec == nil || rec.Binding != tc.want || rec.Signed != tc.signed {
				t.Fatalf("the IdP saw %+v (page %d %s)", rec, page.StatusCode, page.Body)
			}
			form := url.Values{}
			for _, m := range samlFormField.FindAllStringSubmatch(page.Body, -1) {
				form.Set(m[1], html.UnescapeString(m[2]))
			}
			resp := a.callback(b, form)
			if resp.StatusCode != http.StatusOK || resp.Body != "signed in as ada@example.org" || a.Ret[len(a.Ret)-1] != "/after" {
				t.Fatalf("callback: %d %s", resp.StatusCode, resp.Body)
			}
		})
	}
	t.Run("an IdP that requires signatures refuses an unsigned POST", func(t *testing.T) {
		idp := newSAMLIdP(t)
		idp.Set(func(k *samlidp.Knobs) { k.RequireSignedRequests = true })
		a := newSAMLApp(t, idp, func(_ *extauth.Config, o *extauth.Options) { o.SAML.AuthnRequestBinding = samlsp.BindingPOST })
		b := harness.NewBrowser(t)
		if resp := postAutoSubmit(t, b, b.PostForm(a.URL+"/users/auth/saml", nil)); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("the IdP answered %d %s", resp.StatusCode, resp.Body)
		}
	})
}

// TestSAMLFirstSignInAfterIdPRecovers: while the IdP is down sign-ins get
// 503; the first one after it comes back succeeds, though the next
// scheduled retry is an hour away.
func TestSAMLFirstSignInAfterIdPRecovers(t *testing.T) {
	t.Parallel() // it waits on time-outs and retries more than it computes: it runs beside the others that do
	idp := newSAMLIdP(t)
	idp.Set(func(k *samlidp.Knobs) { k.MetadataStatus = http.StatusServiceUnavailable })
	var a *extauth.Auth
	srv := harness.Serve(t, func(base string) http.Handler {
		var err error
		a, err = extauth.New(&extauth.Config{SAML: extauth.SAMLConfig{SPEntityID: samlEntityID, IdPMetadataURL: idp.MetadataURL()}},
			extauth.Options{BaseURL: base, CookieKey: testKey, Logger: slog.New(slog.DiscardHandler),
				SAML: samlsp.Options{MetadataRetry: time.Hour},
				OnSuccess: func(w http.ResponseWriter, _ *http.Request, id *extauth.Identity) {
					io.WriteString(w, "signed in as "+id.UID)
				}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		return a
	})
	deadline := time.Now().Add(time.Minute)
	for idp.MetadataHits() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	b := harness.NewBrowser(t).NoFollow()
	if resp := b.PostForm(srv.URL+"/users/auth/saml", nil); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("while the IdP is down: %d", resp.StatusCode)
	}
	idp.Set(func(k *samlidp.Knobs) { k.MetadataStatus = 0 })
	resp := b.PostForm(srv.URL+"/users/auth/saml", nil)
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), idp.SSOURL()) {
		t.Fatalf("the first sign-in after recovery: %d %s", resp.StatusCode, resp.Body)
	}
}

// TestSAMLSignedIdPMetadata: with saml_additional_settings.
// idp_metadata_certificate the app signs in against signed metadata only.
func TestSAMLSignedIdPMetadata(t *testing.T) {
	t.Parallel() // it waits on time-outs and retries more than it computes: it runs beside the others that do
	mdKey, mdCert := testkeys.LendPair(t, "federation metadata signer", time.Now())
	certPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: mdCert.Raw}))
	pin := func(c *extauth.Config, _ *extauth.Options) { c.SAML.Additional.IdPMetadataCertificate = certPEM }

	idp := newSAMLIdP(t)
	idp.Set(func(k *samlidp.Knobs) { k.MetadataSigner = &samlidp.MetadataSigner{Key: mdKey, Cert: mdCert} })
	a := newSAMLApp(t, idp, pin)
	b := harness.NewBrowser(t)
	redirect, _, _ := a.authorize(b, nil)
	if resp := a.callback(b, idpForm(t, b, redirect)); resp.StatusCode != http.StatusOK {
		t.Fatalf("signed metadata: %d %s", resp.StatusCode, resp.Body)
	}

	unsigned := newSAMLIdP(t)
	app, err := extauth.New(&extauth.Config{SAML: extauth.SAMLConfig{SPEntityID: samlEntityID, IdPMetadataURL: unsigned.MetadataURL(),
		Additional: extauth.SAMLAdditionalSettings{IdPMetadataCertificate: certPEM}}},
		extauth.Options{BaseURL: "https://app.example", CookieKey: testKey, Logger: slog.New(slog.DiscardHandler),
			OnSuccess: func(http.ResponseWriter, *http.Request, *extauth.Identity) {}})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	deadline := time.Now().Add(time.Minute)
	for unsigned.MetadataHits() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	rec := httptest.NewRecorder()
	app.ServeHTTP(rec, newRequest(http.MethodPost, "https://app.example/users/auth/saml.json", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("unsigned metadata: %d %s", rec.Code, rec.Body)
	}
}

// IdP metadata that moved (a redirect, as a CDN or an http-to-https hop
// does) is followed, and sign-in works.
func TestSAMLMetadataFollowsRedirect(t *testing.T) {
	var idp *samlidp.IdP
	var redirected atomic.Int64
	key, cert := testkeys.LendPair(t, "Fake SAML IdP", time.Now())
	srv := harness.Serve(t, func(base string) http.Handler {
		var err error
		idp, err = samlidp.New(samlidp.Options{BaseURL: base + "/idp", AutoApprove: true, Key: key, Certificate: cert})
		if err != nil {
			t.Fatal(err)
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/old-metadata" {
				redirected.Add(1)
				http.Redirect(w, r, "/idp/metadata", http.StatusMovedPermanently)
				return
			}
			idp.ServeHTTP(w, r)
		})
	})
	a := newSAMLApp(t, idp, func(c *extauth.Config, _ *extauth.Options) { c.SAML.IdPMetadataURL = srv.URL + "/old-metadata" })
	if redirected.Load() == 0 {
		t.Fatal("the metadata URL was never redirected: the test proves nothing")
	}
	b := harness.NewBrowser(t)
	redirect, _, _ := a.authorize(b, nil)
	if resp := a.callback(b, idpForm(t, b, redirect)); resp.StatusCode != http.StatusOK {
		t.Fatalf("sign-in with moved metadata: %d %s", resp.StatusCode, resp.Body)
	}
}
