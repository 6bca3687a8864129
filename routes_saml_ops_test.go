package extauth_test

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"encoding/xml"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/crewjam/saml"
	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/samlidp"
	"github.com/extauth/extauth/internal/harness"
	"github.com/extauth/extauth/internal/testkeys"
	"github.com/extauth/extauth/providers"
	"github.com/extauth/extauth/samlsp"
)

// The operations of a SAML deployment that lasts: SP metadata validity, SP
// key rotation and exact NameIDs in single logout, through the routes
// against the fake IdP.

// TestSAMLMetadataRouteValidity: by default the SP metadata carries no
// validUntil (crewjam's two days made an IdP that enforces it stop trusting
// a copy uploaded once); metadata_valid_for and metadata_cache_duration, read
// from the secrets file, put them on the EntityDescriptor.
func TestSAMLMetadataRouteValidity(t *testing.T) {
	idp := newSAMLIdP(t)
	certPEM, keyPEM := spKeyPair(t)
	cases := []struct {
		name      string
		settings  string
		validFor  time.Duration
		cacheDur  string
		withPairs bool
	}{
		{name: "default"},
		{name: "default with a key pair", withPairs: true},
		{name: "xs:durations", settings: "  metadata_valid_for: P30D\n  metadata_cache_duration: PT6H\n", validFor: 30 * 24 * time.Hour, cacheDur: "PT6H"},
		{name: "Go durations", settings: "  metadata_valid_for: 2160h\n  metadata_cache_duration: 30m\n", validFor: 90 * 24 * time.Hour, cacheDur: "PT30M"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			yml := "saml_sp_entity_id: " + samlEntityID + "\nsaml_idp_metadata_url: " + idp.MetadataURL() + "\nsaml_additional_settings:\n" + c.settings
			if c.withPairs {
				yml += "  certificate: |\n" + indentPEM(certPEM) + "  private_key: |\n" + indentPEM(keyPEM)
			}
			cfg, err := extauth.ParseConfig([]byte(yml))
			if err != nil {
				t.Fatal(err)
			}
			a := newSAMLApp(t, idp, func(c *extauth.Config, _ *extauth.Options) { *c = *cfg })
			before := time.Now()
			resp := harness.NewBrowser(t).Get(a.URL + "/users/auth/saml/metadata")
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("metadata: %d %s", resp.StatusCode, resp.Body)
			}
			root := metadataRoot(t, resp.Body)
			validUntil := regexp.MustCompile(`\bvalidUntil="([^"]*)"`).FindAllStringSubmatch(resp.Body, -1)
			if c.validFor == 0 {
				if len(validUntil) != 0 || strings.Contains(resp.Body, "cacheDuration") {
					t.Fatalf("validUntil or cacheDuration without the settings:\n%s", resp.Body)
				}
				return
			}
			// On the EntityDescriptor only: a role of its own would need its
			// own refresh.
			if len(validUntil) != 1 || !strings.Contains(root, `validUntil="`+validUntil[0][1]+`"`) {
				t.Fatalf("validUntil %v, want one on the EntityDescriptor:\n%s", validUntil, resp.Body)
			}
			vu, err := time.Parse(time.RFC3339, validUntil[0][1])
			if err != nil {
				t.Fatal(err)
			}
			if want := before.Add(c.validFor); vu.Before(want.Add(-time.Second)) || vu.After(want.Add(time.Minute)) {
				t.Errorf("validUntil %s, want about %s", vu, want)
			}
			if !strings.Contains(root, `cacheDuration="`+c.cacheDur+`"`) {
				t.Errorf("cacheDuration, want %s: %s", c.cacheDur, root)
			}
			// An IdP reads it as crewjam does.
			var ed saml.EntityDescriptor
			if err := xml.Unmarshal([]byte(resp.Body), &ed); err != nil || !ed.ValidUntil.Equal(vu) {
				t.Errorf("crewjam reads validUntil %v (%v)", ed.ValidUntil, err)
			}
		})
	}
}

// metadataRoot returns the start tag of the document's root element.
func metadataRoot(t *testing.T, doc string) string {
	t.Helper()
	m := regexp.MustCompile(`<(\w+:)?EntityDescriptor\b[^>]*>`).FindString(doc)
	if m == "" {
		t.Fatalf("no EntityDescriptor:\n%s", doc)
	}
	return m
}

func indentPEM(s string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if l != "" {
			b.WriteString("    " + l)
		}
	}
	return b.String()
}

// TestSAMLMetadataValiditySettingsValidated: the settings name themselves
// when wrong, and never reach New.
func TestSAMLMetadataValiditySettingsValidated(t *testing.T) {
	base := "saml_sp_entity_id: https://app.example.org/saml\nsaml_idp_metadata_url: https://idp.example.org/md\nsaml_additional_settings:\n"
	cases := []struct {
		settings, key, reason string
	}{
		{"  metadata_valid_for: thirty days\n", "saml_additional_settings.metadata_valid_for", "must be a duration"},
		{"  metadata_valid_for: PT10M\n", "saml_additional_settings.metadata_valid_for", "must be between"},
		{"  metadata_valid_for: P20Y\n", "saml_additional_settings.metadata_valid_for", "must be between"},
		{"  metadata_valid_for: P99999999999999999Y\n", "saml_additional_settings.metadata_valid_for", "must be a duration"},
		{"  metadata_valid_for: -P1D\n", "saml_additional_settings.metadata_valid_for", "must be between"},
		{"  metadata_cache_duration: 10s\n", "saml_additional_settings.metadata_cache_duration", "must be between"},
		// Zero is out of range, not "unset": the file asks for something.
		{"  metadata_valid_for: P0D\n", "saml_additional_settings.metadata_valid_for", "must be between 1 hour and 3650 days"},
		{"  metadata_valid_for: 0s\n", "saml_additional_settings.metadata_valid_for", "must be between 1 hour and 3650 days"},
		{"  metadata_cache_duration: PT0S\n", "saml_additional_settings.metadata_cache_duration", "must be between 1 minute and 3650 days"},
		{"  metadata_valid_for: P1D\n  metadata_cache_duration: P2D\n", "saml_additional_settings.metadata_cache_duration", "must not exceed metadata_valid_for"},
	}
	for _, c := range cases {
		_, err := extauth.ParseConfig([]byte(base + c.settings))
		if keys := problemKeys(t, err); len(keys) != 1 || keys[0] != c.key || !strings.Contains(err.Error(), c.reason) {
			t.Errorf("%q: keys %v, err %v; want %s %q", c.settings, keys, err, c.key, c.reason)
		}
	}
	// Go code that builds its Config skips the loader, not the checks.
	cfg := &extauth.Config{SAML: extauth.SAMLConfig{SPEntityID: "https://app.example.org/saml", IdPMetadataURL: "https://idp.example.org/md",
		Additional: extauth.SAMLAdditionalSettings{MetadataValidFor: time.Minute}}}
	if keys := problemKeys(t, cfg.Validate()); len(keys) != 1 || keys[0] != "saml_additional_settings.metadata_valid_for" {
		t.Errorf("Validate: %v", keys)
	}
}

func parseCertPEM(t *testing.T, s string) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode([]byte(s))
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// spCerts lists the SP metadata's certificates by use, in order.
func spCerts(t *testing.T, ed *saml.EntityDescriptor) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, kd := range ed.SPSSODescriptors[0].KeyDescriptors {
		for _, c := range kd.KeyInfo.X509Data.X509Certificates {
			out[kd.Use] = append(out[kd.Use], strings.Join(strings.Fields(c.Data), ""))
		}
	}
	return out
}

// TestSAMLNextKeyPairValidated: certificate_new and private_key_new get the
// checks of the current pair, each problem naming its setting, and need a
// current pair to replace.
func TestSAMLNextKeyPairValidated(t *testing.T) {
	curCert, curKey := spKeyPair(t)
	newCert, newKey := spKeyPair(t)
	const (
		certNew = "saml_additional_settings.certificate_new"
		keyNew  = "saml_additional_settings.private_key_new"
	)
	cases := []struct {
		name                     string
		cert, key, certNew, kNew string
		want                     []string
		reason                   string
	}{
		{"valid", curCert, curKey, newCert, newKey, nil, ""},
		{"mismatched", curCert, curKey, newCert, curKey, []string{keyNew}, "does not match the public key of certificate_new"},
		{"only certificate_new", curCert, curKey, newCert, "", []string{keyNew}, "is missing (certificate_new is set"},
		{"only private_key_new", curCert, curKey, "", newKey, []string{certNew}, "is missing (private_key_new is set"},
		{"not PEM", curCert, curKey, "MIIB", newKey, []string{certNew}, "PEM block of type CERTIFICATE"},
		{"no current pair", "", "", newCert, newKey, []string{certNew}, "there is no current one"},
	}
	for _, c := range cases {
		a := extauth.SAMLAdditionalSettings{Certificate: c.cert, PrivateKey: extauth.NewSecret(c.key),
			CertificateNew: c.certNew, PrivateKeyNew: extauth.NewSecret(c.kNew)}
		cfg := &extauth.Config{SAML: extauth.SAMLConfig{SPEntityID: "https://app.example.org/saml", IdPMetadataURL: "https://idp.example.org/md", Additional: a}}
		err := cfg.Validate()
		if c.want == nil {
			cert, key, nerr := a.NextKeyPair()
			if err != nil || nerr != nil || cert == nil || key == nil || !key.PublicKey.Equal(cert.PublicKey) {
				t.Errorf("%s: %v, NextKeyPair %v", c.name, err, nerr)
			}
			continue
		}
		keys := problemKeys(t, err)
		if fmt.Sprint(keys) != fmt.Sprint(c.want) || !strings.Contains(err.Error(), c.reason) {
			t.Errorf("%s: keys %v, err %v; want %v %q", c.name, keys, err, c.want, c.reason)
		}
		if strings.Contains(err.Error(), "PRIVATE KEY") || strings.Contains(err.Error(), newKey[40:80]) {
			t.Errorf("%s: the error quotes a key: %v", c.name, err)
		}
	}
	// The strategy checks the same when given a Config that skipped
	// Validate.
	_, err := samlsp.New(samlsp.Config{SPEntityID: samlEntityID, IdPMetadataURL: "https://idp.example.org/md",
		CertificatePEM: curCert, PrivateKeyPEM: curKey, CertificateNewPEM: newCert, PrivateKeyNewPEM: curKey},
		testSAMLEnv(), samlsp.Options{})
	if err == nil || !strings.Contains(err.Error(), "saml_additional_settings.private_key_new: does not match certificate_new") {
		t.Errorf("samlsp.New with a mismatched next pair: %v", err)
	}
}

// TestSAMLLogoutEchoesNameID: SP-initiated single logout through the
// routes, at an IdP that matches the NameID exactly (as Lasso-based IdPs
// do): the LogoutRequest carries the NameID of the assertion, attribute for
// attribute, present where it was and absent where it was not, and the IdP
// ends its session. On main only the second case passed, by coincidence.
func TestSAMLLogoutEchoesNameID(t *testing.T) {
	// Each user is that of an IdP whose entity ID is idpID.
	cases := []struct {
		name string
		user func(idpID string) samlidp.User
	}{
		{"emailAddress, no qualifiers", func(string) samlidp.User { return samlidp.DemoUser }},
		{"persistent, qualified with both entity IDs", func(idpID string) samlidp.User {
			u := samlidp.DemoUser
			u.NameID, u.NameIDFormat = "a3f1c9e07", samlsp.NameIDPersistent
			u.NameQualifier, u.SPNameQualifier = idpID, samlEntityID
			return u
		}},
		{"persistent, another NameQualifier and an SPProvidedID", func(string) samlidp.User {
			u := samlidp.DemoUser
			u.NameID, u.NameIDFormat = "a3f1c9e07", samlsp.NameIDPersistent
			u.NameQualifier, u.SPProvidedID = "https://directory.example.org", "ada-at-app"
			return u
		}},
		{"no Format", func(string) samlidp.User {
			u := samlidp.DemoUser
			u.NameIDFormat = ""
			return u
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var idp *samlidp.IdP
			var user samlidp.User
			key, cert := testkeys.LendPair(t, "Fake SAML IdP", time.Now())
			harness.Serve(t, func(base string) http.Handler {
				// The IdP's entity ID is its metadata URL.
				user = c.user(base + "/idp/metadata")
				var err error
				if idp, err = samlidp.New(samlidp.Options{BaseURL: base + "/idp", AutoApprove: true, User: user, Key: key, Certificate: cert}); err != nil {
					t.Fatal(err)
				}
				return idp
			})
			if user.NameQualifier != "" && user.SPNameQualifier != "" && user.NameQualifier != idp.EntityID() {
				t.Fatalf("the qualifier %s is not the IdP's entity ID %s", user.NameQualifier, idp.EntityID())
			}
			idp.Set(func(k *samlidp.Knobs) { k.StrictLogout = true })
			var session extauth.LogoutSession
			var done []*extauth.Error
			a := newSAMLApp(t, idp, func(_ *extauth.Config, o *extauth.Options) {
				o.Logout.Session = func(*http.Request, extauth.Provider) (extauth.LogoutSession, bool) { return session, true }
				o.Logout.Done = func(w http.ResponseWriter, r *http.Request, err *extauth.Error) {
					done = append(done, err)
					io.WriteString(w, "done")
				}
			})
			b := harness.NewBrowser(t)
			redirect, _, _ := a.authorize(b, nil)
			if resp := a.callback(b, idpForm(t, b, redirect)); resp.StatusCode != http.StatusOK {
				t.Fatalf("sign-in: %d %s", resp.StatusCode, resp.Body)
			}
			id := a.identities()[0]
			if id.SAML.NameID != user.NameID || id.SAML.NameIDFormat != user.NameIDFormat || id.SAML.NameQualifier != user.NameQualifier ||
				id.SAML.SPNameQualifier != user.SPNameQualifier || id.SAML.SPProvidedID != user.SPProvidedID {
				t.Fatalf("Identity.SAML = %+v, want the NameID of %+v", id.SAML, user)
			}
			// The host kept what Identity.LogoutSession gave it, through JSON.
			kept, err := json.Marshal(id.SAML)
			if err != nil {
				t.Fatal(err)
			}
			var back extauth.SAMLInfo
			if err := json.Unmarshal(kept, &back); err != nil {
				t.Fatal(err)
			}
			session = (&extauth.Identity{SAML: &back}).LogoutSession()

			resp := b.Get(a.URL + "/users/auth/saml/logout")
			if resp.StatusCode != http.StatusOK || len(done) != 1 || done[0] != nil || idp.RefusedLogouts() != 0 {
				t.Fatalf("logout: %d %s, Done saw %v, the IdP refused %d", resp.StatusCode, resp.Body, done, idp.RefusedLogouts())
			}
			rec := idp.LastLogout()
			if rec == nil || rec.Request.NameID.Value != user.NameID || rec.Request.SessionIndex == nil ||
				rec.Request.SessionIndex.Value != id.SAML.SessionIndex {
				t.Fatalf("the IdP ended %+v", rec)
			}

			// The IdP is strict: a qualifier it never sent finds no session.
			redirect, _, _ = a.authorize(b, nil)
			if resp := a.callback(b, idpForm(t, b, redirect)); resp.StatusCode != http.StatusOK {
				t.Fatalf("second sign-in: %d %s", resp.StatusCode, resp.Body)
			}
			session = a.identities()[1].LogoutSession()
			session.SPNameQualifier += "x"
			b.Get(a.URL + "/users/auth/saml/logout")
			if len(done) != 2 || done[1] == nil || done[1].Code != extauth.CodeAccessDenied || idp.RefusedLogouts() != 1 {
				t.Fatalf("a NameID with an altered qualifier: Done saw %v, the IdP refused %d", done, idp.RefusedLogouts())
			}
		})
	}
}

// testSAMLEnv is enough of an environment for samlsp.New to check a
// configuration.
func testSAMLEnv() providers.Env {
	return providers.Env{CallbackURL: "https://app.example.org/users/auth/saml/callback", HTTPClient: http.DefaultClient,
		Store: extauth.NewMemoryStore(extauth.MemoryStoreOptions{}), Logger: slog.New(slog.DiscardHandler)}
}

// datedPEMPair is testkeys.LendDated in PEM, certificate then key.
func datedPEMPair(t *testing.T, cn string, notBefore, notAfter time.Time) [2]string {
	t.Helper()
	key, cert := testkeys.LendDated(t, cn, notBefore, notAfter)
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return [2]string{string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))}
}

// TestSAMLCertificateExpiryThroughRoutes: the running application watches
// the certificates SAML depends on. An SP certificate that has expired is
// logged as an error that says signing goes on, and sign-ins do go on; an
// IdP whose every signing certificate has expired makes Ready and the
// health route report it, as the sign-ins that now fail do.
func TestSAMLCertificateExpiryThroughRoutes(t *testing.T) {
	now := time.Now()
	t.Run("expired SP certificate", func(t *testing.T) {
		sp := datedPEMPair(t, "expired SP", now.AddDate(-2, 0, 0), now.Add(-24*time.Hour))
		idp := newSAMLIdP(t)
		idp.Set(func(k *samlidp.Knobs) { k.RequireSignedRequests = true })
		var logs syncBuffer
		a := newSAMLApp(t, idp, func(c *extauth.Config, o *extauth.Options) {
			c.SAML.Additional.Certificate, c.SAML.Additional.PrivateKey = sp[0], extauth.NewSecret(sp[1])
			o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		})
		b := harness.NewBrowser(t)
		redirect, _, _ := a.authorize(b, nil)
		form := idpForm(t, b, redirect)
		raw, _ := base64.StdEncoding.DecodeString(form.Get("SAMLResponse"))
		if resp := a.callback(b, form); resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), "EncryptedAssertion") {
			t.Fatalf("sign-in with an expired SP certificate: %d %s", resp.StatusCode, resp.Body)
		}
		if err := a.Auth.Ready(context.Background()); err != nil {
			t.Fatalf("Ready: %v", err)
		}
		line := logLine(t, logs.String(), "the SP certificate has expired")
		for _, want := range []string{"level=ERROR", "goes on signing requests and decrypting assertions", "provider=saml",
			"setting=saml_additional_settings.certificate", `subject="CN=expired SP"`} {
			if !strings.Contains(line, want) {
				t.Errorf("log line lacks %q: %s", want, line)
			}
		}
	})
	expiredIdP := func(t *testing.T) *samlidp.IdP {
		key, cert := testkeys.LendDated(t, "expired IdP", now.AddDate(-2, 0, 0), now.Add(-time.Hour))
		var idp *samlidp.IdP
		harness.Serve(t, func(base string) http.Handler {
			var err error
			if idp, err = samlidp.New(samlidp.Options{BaseURL: base + "/idp", AutoApprove: true, Key: key, Certificate: cert}); err != nil {
				t.Fatal(err)
			}
			return idp
		})
		return idp
	}
	t.Run("expired IdP certificate", func(t *testing.T) {
		// By default its key verifies (the metadata vouches for it):
		// ready, a warning that says so.
		var logs syncBuffer
		a := newSAMLApp(t, expiredIdP(t), func(c *extauth.Config, o *extauth.Options) {
			o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		})
		if err := a.Auth.Ready(context.Background()); err != nil {
			t.Fatalf("Ready: %v", err)
		}
		b := harness.NewBrowser(t)
		redirect, _, _ := a.authorize(b, nil)
		if resp := a.callback(b, idpForm(t, b, redirect)); resp.StatusCode != http.StatusOK {
			t.Fatalf("sign-in with an expired IdP certificate: %d %s", resp.StatusCode, resp.Body)
		}
		line := logLine(t, logs.String(), "an IdP signing certificate has expired")
		for _, want := range []string{"level=WARN", "goes on verifying with its key", "Metadata Interoperability Profile",
			"enforce_idp_certificate_dates", "subject=\"CN=expired IdP\""} {
			if !strings.Contains(line, want) {
				t.Errorf("log line lacks %q: %s", want, line)
			}
		}
	})
	t.Run("expired IdP certificate, dates enforced", func(t *testing.T) {
		var logs syncBuffer
		a := newSAMLApp(t, expiredIdP(t), func(c *extauth.Config, o *extauth.Options) {
			c.SAML.Additional.Security.EnforceIdPCertificateDates = true
			o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		})
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		err := a.Auth.Ready(ctx)
		ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err == nil || !strings.Contains(err.Error(), "saml: every IdP signing certificate has expired") {
			t.Fatalf("Ready: %v", err)
		}
		rec := httptest.NewRecorder()
		a.Auth.ReadyHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/health", nil).WithContext(ctx))
		if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "every IdP signing certificate has expired") {
			t.Fatalf("health: %d %s", rec.Code, rec.Body)
		}
		// It is not for show: the sign-in fails.
		b := harness.NewBrowser(t)
		redirect, _, _ := a.authorize(b, nil)
		if resp := a.callback(b, idpForm(t, b, redirect)); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("sign-in with an expired IdP certificate: %d %s", resp.StatusCode, resp.Body)
		}
		line := logLine(t, logs.String(), "an IdP signing certificate has expired")
		for _, want := range []string{"level=ERROR", "every sign-in fails", "subject=\"CN=expired IdP\"", "idp_signing_certs_valid=0"} {
			if !strings.Contains(line, want) {
				t.Errorf("log line lacks %q: %s", want, line)
			}
		}
	})
}

// logLine returns the one line of logs that holds msg.
func logLine(t *testing.T, logs, msg string) string {
	t.Helper()
	var found []string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, msg) {
			found = append(found, l)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d lines say %q:\n%s", len(found), msg, logs)
	}
	return found[0]
}

// TestSAMLCertificateExpiryPerTenant: each tenant's SP watches its own
// certificates; its log lines and TenantReady name the tenant.
func TestSAMLCertificateExpiryPerTenant(t *testing.T) {
	now := time.Now()
	good := newSAMLIdP(t)
	key, cert := testkeys.LendDated(t, "expired IdP", now.AddDate(-2, 0, 0), now.Add(-time.Hour))
	var bad *samlidp.IdP
	harness.Serve(t, func(base string) http.Handler {
		var err error
		if bad, err = samlidp.New(samlidp.Options{BaseURL: base + "/idp", AutoApprove: true, Key: key, Certificate: cert}); err != nil {
			t.Fatal(err)
		}
		return bad
	})
	soon := datedPEMPair(t, "SP of a", now.Add(-time.Hour), now.Add(10*24*time.Hour))
	cfg := &extauth.Config{Tenants: map[string]*extauth.Config{
		"a": {SAML: extauth.SAMLConfig{SPEntityID: "https://a.example.test/saml", IdPMetadataURL: good.MetadataURL(),
			Additional: extauth.SAMLAdditionalSettings{Certificate: soon[0], PrivateKey: extauth.NewSecret(soon[1])}}},
		"b": {SAML: extauth.SAMLConfig{SPEntityID: "https://b.example.test/saml", IdPMetadataURL: bad.MetadataURL(),
			Additional: extauth.SAMLAdditionalSettings{Security: extauth.SAMLSecurity{EnforceIdPCertificateDates: true}}}},
	}}
	var logs syncBuffer
	auth, err := extauth.New(cfg, extauth.Options{BaseURL: "https://app.example.test", CookieKey: testKey,
		Logger:        slog.New(slog.NewTextHandler(&logs, nil)),
		TenantOf:      func(r *http.Request) (string, error) { return r.Header.Get("X-Tenant"), nil },
		TenantBaseURL: func(name string) (string, error) { return "https://" + name + ".example.test", nil },
		OnSuccess:     func(http.ResponseWriter, *http.Request, *extauth.Identity) {}})
	if err != nil {
		t.Fatal(err)
	}
	defer auth.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := auth.TenantReady(ctx, "a"); err != nil {
		t.Fatalf("tenant a: %v", err)
	}
	// Tenant b never becomes ready: TenantReady answers its last error when
	// the context ends, which on a loaded machine may come before its
	// metadata is in ("no copy of the identity provider's metadata yet");
	// asked again, it names the expired certificate once it is.
	var errB error
	eventually(t, "tenant b's expired certificate", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		errB = auth.TenantReady(ctx, "b")
		return errB == nil || strings.Contains(errB.Error(), "certificate")
	})
	if errB == nil || !strings.Contains(errB.Error(), "tenant b not ready: saml: every IdP signing certificate has expired") {
		t.Fatalf("tenant b: %v", errB)
	}
	if l := logLine(t, logs.String(), "the SP certificate expires soon"); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "tenant=a") ||
		!strings.Contains(l, "expires_in=2") {
		t.Errorf("tenant a: %s", l)
	}
	if l := logLine(t, logs.String(), "an IdP signing certificate has expired"); !strings.Contains(l, "tenant=b") {
		t.Errorf("tenant b: %s", l)
	}
}
