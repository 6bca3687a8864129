package main

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crewjam/saml"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest"
	"github.com/extauth/extauth/extauthtest/enterprise"
	"github.com/extauth/extauth/extauthtest/samlidp"
	"github.com/extauth/extauth/internal/testkeys"
)

func TestCheckAllProviders(t *testing.T) {
	f := newProvidersFixture(t)
	path, repl := f.config(t, "all.yml", nil)
	r := runAt(t, testNow, "check", "-config", path)
	if r.code != exitOK || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q\n%s", r.code, r.stderr, r.stdout)
	}
	golden(t, "check_all.golden", repl.apply(r.stdout))
	if f.idp.hits.Load() != 1 || f.op.hits.Load() != 1 {
		t.Errorf("IdP fetched %d times, OP %d times; want once each", f.idp.hits.Load(), f.op.hits.Load())
	}
}

func TestCheckOffline(t *testing.T) {
	f := newProvidersFixture(t)
	path, repl := f.config(t, "all.yml", nil)
	r := runAt(t, testNow, "check", "-offline", "-config", path)
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	golden(t, "check_offline.golden", repl.apply(r.stdout))
	if n := f.idp.hits.Load() + f.op.hits.Load(); n != 0 {
		t.Errorf("-offline made %d requests", n)
	}
}

// Every kind of problem at once: missing and unreadable settings, a
// misspelt key, an issuer that differs by a trailing slash, certificates
// that expire soon or have expired.
func TestCheckProblems(t *testing.T) {
	f := newProvidersFixture(t)
	f.idp.serve("/metadata", "application/samlmetadata+xml", idpMetadata{
		entityID: "https://idp.example.org/saml",
		sso:      []saml.Endpoint{{Binding: saml.HTTPRedirectBinding, Location: f.idp.URL + "/sso"}},
		certs: []*x509.Certificate{
			idpCert(t, "idp-old", time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2030, 5, 1, 0, 0, 0, 0, time.UTC)),
			idpCert(t, "idp-current", time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2030, 6, 11, 18, 0, 0, 0, time.UTC)),
		},
	}.xml(t))
	soon := spPairSoon()
	path, repl := f.config(t, "problems.yml", map[string]string{"SP_CERT": string(soon.certPEM), "SP_KEY": string(soon.keyPEM)})
	r := runAt(t, testNow, "check", "-config", path, "-env", "production")
	if r.code != exitFail {
		t.Errorf("exit %d, want %d", r.code, exitFail)
	}
	golden(t, "check_problems.golden", repl.apply(r.stdout))
	if r.stderr != "extauth check: 4 errors\n" {
		t.Errorf("stderr %q", r.stderr)
	}
	assertNoSecret(t, "check", r.stdout+r.stderr)
}

// With -base-url, check builds each provider as the application would.
func TestCheckBuildsProviders(t *testing.T) {
	path := writeConfig(t, "blog.yml", nil)
	r := runAt(t, testNow, "check", "-config", path, "-base-url", "https://app.example.org")
	if r.code != exitOK || !strings.Contains(r.stdout, "blog_oauth2    enabled") {
		t.Errorf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// A base URL the application would refuse is a usage error, and is not
	// repeated (it may carry a password).
	r = runAt(t, testNow, "check", "-config", path, "-base-url", "https://user:hunter2@app.example.org")
	if r.code != exitUsage || strings.Contains(r.stderr, "hunter2") || !strings.Contains(r.stderr, "-base-url must be") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// A file that configures no provider fails check, which says where it
// looked and why there.
func TestCheckNoProvider(t *testing.T) {
	path := writeConfig(t, "empty.yml", nil)
	r := runAt(t, testNow, "check", "-config", path)
	if r.code != exitFail || !strings.Contains(r.stdout, "\nErrors:\n  - no provider is configured\n") ||
		!strings.HasPrefix(r.stdout, "Checking "+path+" (a flat file, without environment sections)\n") || r.stderr != "extauth check: 1 error\n" {
		t.Errorf("exit %d, stderr %q\n%s", r.code, r.stderr, r.stdout)
	}

	sectioned := writeRaw(t, "sectioned.yml", "development:\n  oidc_client_id: ''\nproduction:\n  oidc_client_id: c\n  oidc_client_secret: s\n  oidc_issuer: https://id.example.org\n")
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
		code int
	}{
		{nil, nil, "development, the default: EXTAUTH_ENV, RAILS_ENV and APP_ENV are not set", exitFail},
		{map[string]string{"APP_ENV": "development"}, nil, "development, from APP_ENV", exitFail},
		{map[string]string{"RAILS_ENV": "development", "APP_ENV": "production"}, nil, "development, from RAILS_ENV", exitFail},
		{map[string]string{"EXTAUTH_ENV": "development", "RAILS_ENV": "production"}, nil, "development, from EXTAUTH_ENV", exitFail},
		{map[string]string{"RAILS_ENV": "production"}, []string{"-env", "development"}, "development, from -env", exitFail},
		{map[string]string{"RAILS_ENV": "production"}, nil, "production, from RAILS_ENV", exitOK},
	} {
		r := runEnv(t, testNow, c.env, append([]string{"check", "-offline", "-config", sectioned}, c.args...)...)
		head := "Checking " + sectioned + " (environment " + c.want + ")\n"
		if r.code != c.code || !strings.HasPrefix(r.stdout, head) {
			t.Errorf("%v %v: exit %d\n%s", c.env, c.args, r.code, r.stdout)
		}
		if c.code == exitFail && !strings.Contains(r.stdout, "  - no provider is configured in environment "+c.want+"\n") {
			t.Errorf("%v %v: no error naming the environment:\n%s", c.env, c.args, r.stdout)
		}
	}
}

// tenantsFixture is the providers fixture with city_a's own IdP, and the
// rendered tenants.yml.
func tenantsFixture(t *testing.T) (*providersFixture, string, replacer) {
	t.Helper()
	f := newProvidersFixture(t)
	f.idp.serve("/city-a/metadata", "application/samlmetadata+xml", idpMetadata{
		entityID: "https://idp.city-a.example.org/saml",
		sso:      []saml.Endpoint{{Binding: saml.HTTPRedirectBinding, Location: f.idp.URL + "/city-a/sso"}},
		certs:    []*x509.Certificate{idpCert(t, "idp.city-a.example.org", time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2032, 1, 1, 0, 0, 0, 0, time.UTC))},
	}.xml(t))
	path, repl := f.config(t, "tenants.yml", nil)
	return f, path, repl
}

var production = map[string]string{"RAILS_ENV": "production"}

func TestCheckTenants(t *testing.T) {
	t.Run("the environment lists its tenants' problems", func(t *testing.T) {
		_, path, repl := tenantsFixture(t)
		r := runEnv(t, testNow, production, "check", "-config", path)
		if r.code != exitFail || r.stderr != "extauth check: 1 error\n" {
			t.Errorf("exit %d, stderr %q", r.code, r.stderr)
		}
		golden(t, "check_tenants_environment.golden", repl.apply(r.stdout))
	})
	t.Run("one tenant", func(t *testing.T) {
		f, path, repl := tenantsFixture(t)
		r := runEnv(t, testNow, production, "check", "-config", path, "-tenant", "city_a", "-base-url", "https://{tenant}.example.org")
		if r.code != exitOK || r.stderr != "" {
			t.Errorf("exit %d, stderr %q", r.code, r.stderr)
		}
		golden(t, "check_tenant_city_a.golden", repl.apply(r.stdout))
		if want := []string{"/city-a/metadata"}; !slices.Equal(f.idp.paths, want) {
			t.Errorf("IdP asked for %v, want %v", f.idp.paths, want)
		}
	})
	t.Run("every tenant, each shared document fetched once", func(t *testing.T) {
		f, path, repl := tenantsFixture(t)
		r := runEnv(t, testNow, production, "check", "-config", path, "-all-tenants", "-base-url", "https://{tenant}.example.org")
		if r.code != exitFail || r.stderr != "extauth check: 1 error\n" {
			t.Errorf("exit %d, stderr %q", r.code, r.stderr)
		}
		golden(t, "check_all_tenants.golden", repl.apply(r.stdout))
		paths := slices.Clone(f.idp.paths)
		slices.Sort(paths)
		if want := []string{"/city-a/metadata", "/metadata"}; !slices.Equal(paths, want) || f.op.hits.Load() != 1 {
			t.Errorf("IdP asked for %v, want %v; OP %d times, want once", paths, want, f.op.hits.Load())
		}
		assertNoSecret(t, "check", r.stdout+r.stderr)
	})
	t.Run("a tenant without provider", func(t *testing.T) {
		path := writeRaw(t, "t.yml", "oidc_client_id: c\noidc_client_secret: s\noidc_issuer: https://id.example.org\n"+
			"tenants:\n  off: {oidc_client_id: '', oidc_client_secret: '', oidc_issuer: ''}\n")
		r := runAt(t, testNow, "check", "-offline", "-config", path, "-tenant", "off")
		if r.code != exitFail || !strings.Contains(r.stdout, "  - no provider is configured for tenant off\n") {
			t.Errorf("exit %d\n%s", r.code, r.stdout)
		}
		// Only tenants have providers: the environment is then no error.
		path = writeRaw(t, "t.yml", "production:\n  tenants:\n    a: {oidc_client_id: c, oidc_client_secret: s, oidc_issuer: https://id.example.org}\n")
		r = runEnv(t, testNow, production, "check", "-offline", "-config", path)
		if r.code != exitOK || !strings.Contains(r.stdout, "  - the environment configures no provider of its own; its tenants do") {
			t.Errorf("exit %d\n%s", r.code, r.stdout)
		}
	})
	t.Run("problems outside any tenant, once", func(t *testing.T) {
		path := writeRaw(t, "t.yml", "oidc_client_id: c\noidc_issuer: https://id.example.org\n"+
			"tenants:\n  a: {oidc_client_secret: s}\n  b: {oidc_client_secret: s}\n  Bad: {}\n")
		r := runAt(t, testNow, "check", "-offline", "-config", path, "-all-tenants")
		want := "\nErrors in the file outside any tenant:\n" +
			"  - oidc: oidc_client_secret is missing\n" +
			"  - tenants has a tenant named \"Bad\"; a tenant name is 1 to 63 lowercase letters, digits, - and _, starting and ending with a letter or digit\n" +
			"\n2 tenants checked, 0 with errors.\n"
		if r.code != exitFail || !strings.HasSuffix(r.stdout, want) || r.stderr != "extauth check: 2 errors\n" || strings.Count(r.stdout, "Bad") != 1 {
			t.Errorf("exit %d, stderr %q\n%s", r.code, r.stderr, r.stdout)
		}
	})
	t.Run("unknown tenant", func(t *testing.T) {
		_, path, _ := tenantsFixture(t)
		r := runEnv(t, testNow, production, "check", "-config", path, "-tenant", "city_d")
		want := "extauth check: " + path + " has no tenant city_d in environment production, from RAILS_ENV (its tenants are city_a, city_b, city_c)\n"
		if r.code != exitFail || r.stderr != want {
			t.Errorf("exit %d, stderr %q\nwant %q", r.code, r.stderr, want)
		}
		r = runAt(t, testNow, "check", "-config", writeConfig(t, "empty.yml", nil), "-all-tenants")
		if r.code != exitFail || !strings.HasSuffix(r.stderr, "empty.yml has no tenants\n") {
			t.Errorf("exit %d, stderr %q", r.code, r.stderr)
		}
	})
}

func TestCheckUnreadableFile(t *testing.T) {
	dir := t.TempDir()
	for name, args := range map[string][]string{
		"missing":      {"-config", filepath.Join(dir, "absent.yml")},
		"unknown env":  {"-config", writeConfig(t, "problems.yml", map[string]string{"IDP": "https://idp", "OP": "https://op", "SP_CERT": "x", "SP_KEY": "y"}), "-env", "staging"},
		"not YAML":     {"-config", writeRaw(t, "bad.yml", "a: [b\n")},
		"not settings": {"-config", writeRaw(t, "list.yml", "- a\n- b\n")},
	} {
		r := runAt(t, testNow, append([]string{"check"}, args...)...)
		if r.code != exitFail || r.stdout != "" || !strings.HasPrefix(r.stderr, "extauth check: ") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", name, r.code, r.stdout, r.stderr)
		}
	}
}

func writeRaw(t *testing.T, name, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// samlCheck runs check on a SAML-only configuration whose IdP serves what
// setup gives it, and returns the SAML line of the provider list, the
// report and the exit status.
func samlCheck(t *testing.T, setup func(f *providersFixture), args ...string) (string, result) {
	t.Helper()
	f := newProvidersFixture(t)
	if setup != nil {
		setup(f)
	}
	path, repl := f.config(t, "saml_only.yml", nil)
	r := runAt(t, testNow, append([]string{"check", "-config", path}, args...)...)
	r.stdout = repl.apply(r.stdout)
	return providerLine(r.stdout, "saml"), r
}

func providerLine(report, p string) string {
	for _, l := range strings.Split(report, "\n") {
		if fields := strings.Fields(l); len(fields) > 1 && fields[0] == p {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), p))
		}
	}
	return ""
}

func TestCheckSAMLMetadataFailures(t *testing.T) {
	valid := func(f *providersFixture) idpMetadata {
		return idpMetadata{
			entityID: "https://idp.example.org/saml",
			sso:      []saml.Endpoint{{Binding: saml.HTTPRedirectBinding, Location: f.idp.URL + "/sso"}},
			certs:    []*x509.Certificate{idpCert(t, "idp", testNow.AddDate(-1, 0, 0), testNow.AddDate(1, 0, 0))},
		}
	}
	cases := []struct {
		name  string
		setup func(f *providersFixture)
		args  []string
		want  string
	}{
		{"server error", func(f *providersFixture) {
			f.idp.handle("/metadata", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "down", http.StatusInternalServerError) })
		}, nil, "broken: IdP metadata: answers HTTP 500"},
		{"redirect to another scheme", func(f *providersFixture) {
			f.idp.handle("/metadata", func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "ftp://elsewhere.example/md?token=abc", http.StatusFound)
			})
		}, nil, "broken: IdP metadata: redirect refused: from http to ftp://elsewhere.example/md; configure the document's final https URL"},
		{"hangs", func(f *providersFixture) {
			f.idp.handle("/metadata", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
		}, []string{"-timeout", "200ms"}, "broken: IdP metadata: no answer within 200ms"},
		{"too large", func(f *providersFixture) {
			f.idp.handle("/metadata", func(w http.ResponseWriter, r *http.Request) {
				w.Write([]byte("<x>"))
				w.Write(make([]byte, maxDocumentBytes))
			})
		}, nil, "broken: IdP metadata: the answer is larger than 1048576 bytes"},
		{"doctype", func(f *providersFixture) {
			f.idp.serve("/metadata", "text/xml", []byte(`<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "b">]><x/>`))
		}, nil, "broken: IdP metadata: XML directives (DOCTYPE, ENTITY) are not allowed"},
		{"HTML page", func(f *providersFixture) {
			f.idp.serve("/metadata", "text/html", []byte(`<html><body>login</body>`))
		}, nil, "broken: IdP metadata: the answer is HTML, not SAML metadata"},
		{"not XML", func(f *providersFixture) {
			f.idp.serve("/metadata", "text/xml", []byte(`<x><y></x>`))
		}, nil, "broken: IdP metadata: malformed XML: etree: invalid XML format"},
		{"wrong root", func(f *providersFixture) {
			f.idp.serve("/metadata", "text/xml", []byte(`<feed xmlns="http://www.w3.org/2005/Atom"/>`))
		}, nil, "broken: IdP metadata: the root element is neither md:EntityDescriptor nor md:EntitiesDescriptor"},
		{"no signing certificate", func(f *providersFixture) {
			m := valid(f)
			m.encCerts, m.certs = m.certs, nil
			f.idp.serve("/metadata", "text/xml", m.xml(t))
		}, nil, "broken: IdP metadata: no signing certificate, so no response could be verified"},
		{"every certificate expired", func(f *providersFixture) {
			// The metadata vouches for the key: a warning, and
			// TestCheckSAMLCertificateDatesEnforced for the switch.
			m := valid(f)
			m.certs = []*x509.Certificate{idpCert(t, "old", testNow.AddDate(-3, 0, 0), testNow.AddDate(0, 0, -1))}
			f.idp.serve("/metadata", "text/xml", m.xml(t))
		}, nil, "enabled"},
		{"POST binding only", func(f *providersFixture) {
			m := valid(f)
			m.sso = []saml.Endpoint{{Binding: saml.HTTPPostBinding, Location: f.idp.URL + "/sso"}}
			f.idp.serve("/metadata", "text/xml", m.xml(t))
		}, nil, "enabled"},
		{"no usable binding", func(f *providersFixture) {
			m := valid(f)
			m.sso = []saml.Endpoint{{Binding: saml.HTTPArtifactBinding, Location: f.idp.URL + "/sso"}}
			f.idp.serve("/metadata", "text/xml", m.xml(t))
		}, nil, "broken: IdP metadata: no HTTP-Redirect or HTTP-POST single sign-on endpoint; set saml_idp_sso_service_url"},
		{"metadata expired", func(f *providersFixture) {
			m := valid(f)
			m.validUntil = testNow.Add(-time.Hour)
			f.idp.serve("/metadata", "text/xml", m.xml(t))
		}, nil, "broken: IdP metadata: expired on 2030-06-01T11:00:00Z (validUntil)"},
		{"two IdPs", func(f *providersFixture) {
			a, b := valid(f).entity(), valid(f).entity()
			b.EntityID = "https://other.example/saml"
			f.idp.serve("/metadata", "text/xml", marshalXML(t, saml.EntitiesDescriptor{EntityDescriptors: []saml.EntityDescriptor{a, b}}))
		}, nil, "broken: IdP metadata: describes 2 IdPs; use the URL of one IdP's metadata, or name the IdP with the IdPEntityID option"},
		{"federation bound expired", func(f *providersFixture) {
			past := testNow.Add(-time.Minute)
			f.idp.serve("/metadata", "text/xml", marshalXML(t, saml.EntitiesDescriptor{ValidUntil: &past, EntityDescriptors: []saml.EntityDescriptor{valid(f).entity()}}))
		}, nil, "broken: IdP metadata: expired on 2030-06-01T11:59:00Z (validUntil)"},
		{"federation", func(f *providersFixture) {
			later := testNow.Add(48 * time.Hour)
			sp := saml.EntityDescriptor{EntityID: "https://sp.example", SPSSODescriptors: []saml.SPSSODescriptor{{}}}
			f.idp.serve("/metadata", "text/xml", marshalXML(t, saml.EntitiesDescriptor{ValidUntil: &later,
				EntitiesDescriptors: []saml.EntitiesDescriptor{{EntityDescriptors: []saml.EntityDescriptor{sp, valid(f).entity()}}}}))
		}, nil, "enabled"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			line, r := samlCheck(t, c.setup, c.args...)
			if line != c.want {
				t.Errorf("saml: %q\nwant   %q\n%s", line, c.want, r.stdout)
			}
			wantCode := exitFail
			if c.want == "enabled" {
				wantCode = exitOK
			}
			if r.code != wantCode {
				t.Errorf("exit %d, want %d", r.code, wantCode)
			}
		})
	}
}

// TestCheckSAMLCertificateDatesEnforced: an IdP whose only signing
// certificate has expired is a warning by default, since its key verifies
// all the same, and a failure with security.enforce_idp_certificate_dates.
func TestCheckSAMLCertificateDatesEnforced(t *testing.T) {
	for _, c := range []struct {
		file, line, note string
		code             int
	}{
		{"saml_only.yml", "enabled", "extauth verifies with their keys all the same", exitOK},
		{"saml_dates.yml", "broken: IdP metadata: no signing certificate is valid now, and security.enforce_idp_certificate_dates is set, " +
			"so every response would be refused", "", exitFail},
	} {
		f := newProvidersFixture(t)
		f.idp.serve("/metadata", "text/xml", idpMetadata{
			entityID: "https://idp.example.org/saml",
			sso:      []saml.Endpoint{{Binding: saml.HTTPRedirectBinding, Location: f.idp.URL + "/sso"}},
			certs:    []*x509.Certificate{idpCert(t, "old", testNow.AddDate(-3, 0, 0), testNow.AddDate(0, 0, -1))},
		}.xml(t))
		path, repl := f.config(t, c.file, nil)
		r := runAt(t, testNow, "check", "-config", path)
		out := repl.apply(r.stdout)
		if line := providerLine(out, "saml"); line != c.line || r.code != c.code || !strings.Contains(out, c.note) {
			t.Errorf("%s: saml %q, exit %d; want %q, %d and %q\n%s", c.file, line, r.code, c.line, c.code, c.note, out)
		}
	}
}

func TestCheckSAMLDetails(t *testing.T) {
	_, r := samlCheck(t, func(f *providersFixture) {
		f.idp.serve("/metadata", "text/xml", idpMetadata{
			entityID:   "https://idp.example.org/saml\u202etxt.exe",
			sso:        []saml.Endpoint{{Binding: saml.HTTPRedirectBinding, Location: f.idp.URL + "/sso"}},
			certs:      []*x509.Certificate{idpCert(t, "idp", testNow.AddDate(-1, 0, 0), testNow.Add(12*time.Hour))},
			wantSigned: true,
		}.xml(t))
	})
	for _, want := range []string{
		// Text from the network reaches the terminal quoted when it holds
		// anything unprintable, here a right-to-left override.
		`IdP entity ID            "https://idp.example.org/saml\u202etxt.exe"`,
		"IdP signing certificate  CN=idp, expires on 2030-06-02 (in less than a day)",
		"SP key pair              none: requests are not signed, encrypted assertions are refused",
		"  - saml: the IdP signing certificate CN=idp expires in less than a day, on 2030-06-02\n",
		"  - saml: the IdP wants signed authentication requests (WantAuthnRequestsSigned), but saml_additional_settings has no certificate and private_key; make them with extauth keygen\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("report lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "\u202e") {
		t.Error("a bidi override from the IdP reached the terminal")
	}
}

func TestCheckOIDCDiscovery(t *testing.T) {
	cases := []struct {
		name string
		edit func(doc map[string]any, op string)
		want string
		warn string
	}{
		{"valid", func(map[string]any, string) {}, "enabled", ""},
		{"wrong issuer", func(doc map[string]any, op string) { doc["issuer"] = "https://evil.example" },
			`broken: discovery: the document names issuer "https://evil.example" but oidc_issuer is "{{OP}}"; they must match exactly`, ""},
		{"no jwks_uri", func(doc map[string]any, _ string) { delete(doc, "jwks_uri") }, "broken: discovery: jwks_uri is missing", ""},
		{"plain http endpoint elsewhere", func(doc map[string]any, _ string) { doc["token_endpoint"] = "http://token.example/token" },
			"broken: discovery: token_endpoint must be https", ""},
		{"only HMAC and none", func(doc map[string]any, _ string) {
			doc["id_token_signing_alg_values_supported"] = []string{"HS256", "none"}
		},
			"broken: discovery: the provider signs ID tokens with none of the algorithms extauth accepts (RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA)", ""},
		{"no algorithms advertised", func(doc map[string]any, _ string) { delete(doc, "id_token_signing_alg_values_supported") },
			"enabled", "oidc: the discovery document lacks id_token_signing_alg_values_supported, which it must have; extauth assumes RS256"},
		{"no usable client authentication", func(doc map[string]any, _ string) {
			doc["token_endpoint_auth_methods_supported"] = []string{"private_key_jwt"}
		}, "broken: discovery: the token endpoint supports neither client_secret_basic nor client_secret_post", ""},
		{"no PKCE S256", func(doc map[string]any, _ string) { doc["code_challenge_methods_supported"] = []string{"plain"} },
			"enabled", "oidc: the provider does not advertise PKCE S256 (code_challenge_methods_supported)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newProvidersFixture(t)
			doc := discoveryDoc(f.op.URL)
			c.edit(doc, f.op.URL)
			f.op.serveJSON(t, "/.well-known/openid-configuration", doc)
			path, repl := f.config(t, "oidc_only.yml", nil)
			r := runAt(t, testNow, "check", "-config", path)
			out := repl.apply(r.stdout)
			if got := providerLine(out, "oidc"); got != c.want {
				t.Errorf("oidc: %q\nwant  %q\n%s", got, c.want, out)
			}
			if c.warn != "" && !strings.Contains(out, "  - "+c.warn+"\n") {
				t.Errorf("no warning %q:\n%s", c.warn, out)
			}
			if (r.code == exitOK) != (c.want == "enabled") {
				t.Errorf("exit %d", r.code)
			}
			assertNoSecret(t, "check", r.stdout+r.stderr)
		})
	}
}

func TestCheckOIDCNotFound(t *testing.T) {
	f := newProvidersFixture(t)
	path, repl := f.config(t, "oidc_only.yml", map[string]string{"OP": f.op.URL + "/tenant"})
	r := runAt(t, testNow, "check", "-config", path)
	if got := providerLine(repl.apply(r.stdout), "oidc"); got != "broken: discovery: answers HTTP 404" || r.code != exitFail {
		t.Errorf("exit %d, oidc %q", r.code, got)
	}
	if want := "/tenant/.well-known/openid-configuration"; !slices.Contains(f.op.paths, want) {
		t.Errorf("requested %v, want %s", f.op.paths, want)
	}
}

// only must give New exactly one provider, whichever it is.
func TestOnlyIsolatesEachProvider(t *testing.T) {
	cfg, err := extauth.LoadConfig("../../testdata/config/full.yml", extauth.LookupEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Providers()) != 6 {
		t.Fatalf("full.yml configures %v", cfg.Providers())
	}
	for _, p := range extauth.BuiltinProviders() {
		c := only(cfg, p)
		if got := c.Providers(); !slices.Equal(got, []extauth.Provider{p}) {
			t.Errorf("only(%s) configures %v", p, got)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("only(%s): %v", p, err)
		}
	}
}

func TestClean(t *testing.T) {
	for in, want := range map[string]string{
		"https://idp.example/sso": "https://idp.example/sso",
		"CN=Ünïcode":              "CN=Ünïcode",
		"a\x1b[2Jb":               `"a\x1b[2Jb"`,
		"line\nbreak":             `"line\nbreak"`,
		"bad\xffutf8":             `"bad\xffutf8"`,
		strings.Repeat("x", 250):  strings.Repeat("x", 200) + "…",
	} {
		if got := clean(in); got != want {
			t.Errorf("clean(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://idp.example/md":                  "https://idp.example/md",
		"https://idp.example/md?token=s3cr3t":     "https://idp.example/md?…",
		"https://user:pw@idp.example/md#frag":     "https://idp.example/md",
		"https://idp.example/md?":                 "https://idp.example/md?…",
		"http://[::1]:%zz/":                       "(a malformed URL)",
		"https://idp.example/a b?x=1":             "https://idp.example/a%20b?…",
		"https://idp.example/\x1b[0m?access=key1": "(a malformed URL)",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCheckSAMLSHA1AndSignedMetadata: check reads what the IdP shows of
// its algorithms and verifies the metadata's signature as the application
// will.
func TestCheckSAMLSHA1AndSignedMetadata(t *testing.T) {
	mdKey, mdCert := testkeys.LendPair(t, "metadata signer", testNow)
	sign := func(t *testing.T, doc []byte, o samlidp.SignOptions) []byte {
		out, err := samlidp.SignMetadata(doc, &samlidp.MetadataSigner{Key: mdKey, Cert: mdCert, Sign: o})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	valid := func(f *providersFixture) idpMetadata {
		return idpMetadata{
			entityID: "https://idp.example.org/saml",
			sso:      []saml.Endpoint{{Binding: saml.HTTPRedirectBinding, Location: f.idp.URL + "/sso"}},
			certs:    []*x509.Certificate{idpCert(t, "idp", testNow.AddDate(-1, 0, 0), testNow.AddDate(1, 0, 0))},
		}
	}
	sha1 := samlidp.SignOptions{SignatureMethod: samlidp.RSASHA1, DigestMethod: samlidp.DigestSHA1}
	pinned := map[string]string{"IDP_MD_CERT": string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: mdCert.Raw}))}
	for _, tc := range []struct {
		name   string
		config string
		extra  map[string]string
		doc    func(f *providersFixture) []byte
		line   string
		want   []string
	}{
		{"SHA-1 signing methods only", "saml_only.yml", nil, func(f *providersFixture) []byte {
			return algSupport(valid(f).xml(t), "http://www.w3.org/2000/09/xmldsig#rsa-sha1", "http://www.w3.org/2000/09/xmldsig#sha1")
		}, "enabled", []string{
			"  - saml: the IdP uses SHA-1 (the IdP lists only SHA-1 signing methods (alg:SigningMethod): http://www.w3.org/2000/09/xmldsig#rsa-sha1); extauth refuses SHA-1 signatures and digests unless the application sets extauth.Options.SAML.AllowSHA1 or saml_additional_settings.security.allow_sha1\n",
			"  - saml: the IdP uses SHA-1 (the IdP lists only SHA-1 digest methods (alg:DigestMethod): http://www.w3.org/2000/09/xmldsig#sha1)",
		}},
		{"SHA-256 among the signing methods", "saml_only.yml", nil, func(f *providersFixture) []byte {
			return algSupport(valid(f).xml(t), "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256", "http://www.w3.org/2001/04/xmlenc#sha256")
		}, "enabled", []string{"0 errors, 0 warnings."}},
		{"metadata signed with SHA-1, not pinned", "saml_only.yml", nil, func(f *providersFixture) []byte {
			return sign(t, valid(f).xml(t), sha1)
		}, "enabled", []string{
			"metadata signature       rsa-sha1, not verified (no idp_metadata_certificate)",
			"  - saml: the IdP uses SHA-1 (the metadata is signed with http://www.w3.org/2000/09/xmldsig#rsa-sha1)",
		}},
		{"signed and pinned", "saml_pinned.yml", pinned, func(f *providersFixture) []byte {
			return sign(t, valid(f).xml(t), samlidp.SignOptions{})
		}, "enabled", []string{"metadata signature rsa-sha256, verified with idp_metadata_certificate",
			"IdP metadata certificate CN=metadata signer, expires on 2040-06-01 (in 3653 days)\n SHA-256 " + fingerprint(mdCert) + "\n verifies the signature of the IdP metadata\n"}},
		{"unsigned but pinned", "saml_pinned.yml", pinned, func(f *providersFixture) []byte { return valid(f).xml(t) },
			"broken: IdP metadata: the metadata is not signed, and idp_metadata_certificate requires a signature", nil},
		{"signed with SHA-1 and pinned", "saml_pinned.yml", pinned, func(f *providersFixture) []byte {
			return sign(t, valid(f).xml(t), sha1)
		}, "broken: IdP metadata: the metadata signature is invalid: signature on EntityDescriptor: signature method http://www.w3.org/2000/09/xmldsig#rsa-sha1: SHA-1 is refused unless Options.SAML.AllowSHA1 or security.allow_sha1", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newProvidersFixture(t)
			f.idp.serve("/metadata", "text/xml", tc.doc(f))
			path, repl := f.config(t, tc.config, tc.extra)
			r := runAt(t, testNow, "check", "-config", path)
			r.stdout = repl.apply(r.stdout)
			if line := providerLine(r.stdout, "saml"); line != tc.line {
				t.Fatalf("saml: %q, want %q\n%s", line, tc.line, r.stdout)
			}
			for _, w := range tc.want {
				if !strings.Contains(rows(r.stdout), rows(w)) {
					t.Errorf("report lacks %q:\n%s", w, r.stdout)
				}
			}
		})
	}
}

// algSupport adds alg:SigningMethod and alg:DigestMethod to the IdP's
// metadata, as IdPs that implement the algorithm support profile do.
func algSupport(doc []byte, signing, digest string) []byte {
	ext := `<Extensions><alg:SigningMethod xmlns:alg="urn:oasis:names:tc:SAML:metadata:algsupport" Algorithm="` + signing +
		`"/><alg:DigestMethod xmlns:alg="urn:oasis:names:tc:SAML:metadata:algsupport" Algorithm="` + digest + `"/></Extensions>`
	i := bytes.Index(doc, []byte("<IDPSSODescriptor"))
	return append(append(append([]byte(nil), doc[:i]...), ext...), doc[i:]...)
}

// Metadata that moved is read where it went, as the application reads it,
// and check names the final URL to configure instead.
func TestCheckReportsMovedDocuments(t *testing.T) {
	f := newProvidersFixture(t)
	f.idp.serve("/moved", "application/samlmetadata+xml", idpMetadata{
		entityID: "https://idp.example.org/saml",
		sso:      []saml.Endpoint{{Binding: saml.HTTPRedirectBinding, Location: f.idp.URL + "/sso"}},
		certs:    []*x509.Certificate{idpCert(t, "idp", testNow.AddDate(-1, 0, 0), testNow.AddDate(1, 0, 0))},
	}.xml(t))
	f.idp.handle("/metadata", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/moved", http.StatusMovedPermanently)
	})
	path, repl := f.config(t, "saml_only.yml", nil)
	r := runAt(t, testNow, "check", "-config", path)
	r.stdout = repl.apply(r.stdout)
	if line := providerLine(r.stdout, "saml"); line != "enabled" {
		t.Fatalf("saml: %q\n%s", line, r.stdout)
	}
	if !strings.Contains(r.stdout, "SAML IdP metadata moved:") || !strings.Contains(r.stdout, "/metadata redirects to ") ||
		!strings.Contains(r.stdout, "/moved; configure that URL directly") {
		t.Errorf("report does not name the final URL:\n%s", r.stdout)
	}
}

// TestCheckOIDCHighAssurance: check holds oidc_additional_settings to the
// provider's discovery document as the strategy will, naming the entry.
func TestCheckOIDCHighAssurance(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(doc map[string]any)
		want string
	}{
		{"valid", func(map[string]any) {}, "enabled"},
		{"method not advertised", func(doc map[string]any) {
			doc["token_endpoint_auth_methods_supported"] = []string{"client_secret_basic"}
		},
			`broken: discovery: oidc_additional_settings.client_auth_method: private_key_jwt is not a method the provider lists in token_endpoint_auth_methods_supported ["client_secret_basic"]`},
		{"encryption not advertised", func(doc map[string]any) { delete(doc, "id_token_encryption_alg_values_supported") },
			`broken: discovery: oidc_additional_settings.id_token_encrypted_response_alg: RSA-OAEP-256 is not in the provider's id_token_encryption_alg_values_supported []`},
		{"no request objects by value", func(doc map[string]any) { doc["request_parameter_supported"] = false },
			"broken: discovery: oidc_additional_settings.request_object: the provider does not take request objects by value (request_parameter_supported is not true): set pushed_authorization_requests too"},
		{"PAR required without an endpoint", func(doc map[string]any) { doc["require_pushed_authorization_requests"] = true },
			"broken: discovery: require_pushed_authorization_requests: the provider has no pushed_authorization_request_endpoint"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newProvidersFixture(t)
			doc := discoveryDoc(f.op.URL)
			doc["token_endpoint_auth_methods_supported"] = []string{"private_key_jwt"}
			doc["request_parameter_supported"] = true
			doc["id_token_encryption_alg_values_supported"] = []string{"RSA-OAEP", "RSA-OAEP-256"}
			doc["id_token_encryption_enc_values_supported"] = []string{"A128CBC-HS256", "A256GCM"}
			c.edit(doc)
			f.op.serveJSON(t, "/.well-known/openid-configuration", doc)
			path, repl := f.config(t, "oidc_ha.yml", nil)
			r := runAt(t, testNow, "check", "-config", path)
			out := repl.apply(r.stdout)
			if got := providerLine(out, "oidc"); got != c.want {
				t.Errorf("oidc: %q\nwant  %q\n%s", got, c.want, out)
			}
			if (r.code == exitOK) != (c.want == "enabled") {
				t.Errorf("exit %d", r.code)
			}
			assertNoSecret(t, "check", r.stdout+r.stderr)
		})
	}
}

// The secrets file of extauthtest's fake providers passes check in every
// mode, as docs/testing-your-app.md tells file-based applications to use
// it (extauthtest's TestProvidersSecretsYAML signs in with the same files).
func TestCheckProvidersSecretsYAML(t *testing.T) {
	for name, o := range map[string]extauthtest.ProvidersOptions{
		"default":                   {},
		"SAML key pair":             {SAMLKeyPair: true},
		"OIDC high assurance":       {OIDCHighAssurance: true},
		"high assurance, SAML keys": {OIDCHighAssurance: true, SAMLKeyPair: true},
		"only OIDC, high assurance": {Only: []extauth.Provider{extauth.OIDC}, OIDCHighAssurance: true},
		"path prefix":               {PathPrefix: "/auth/"},
	} {
		t.Run(name, func(t *testing.T) {
			const base = "http://127.0.0.1:3000"
			fakes := extauthtest.NewProviders(t, base, o)
			path := filepath.Join(t.TempDir(), "secrets.yml")
			if err := os.WriteFile(path, fakes.SecretsYAML(), 0o600); err != nil {
				t.Fatal(err)
			}
			r := runCLI(t, "check", "-config", path, "-base-url", base)
			if r.code != exitOK || r.stderr != "" || !strings.Contains(r.stdout, "0 errors, 0 warnings.") {
				t.Fatalf("exit %d, stderr %q\n%s\n%s", r.code, r.stderr, r.stdout, fakes.SecretsYAML())
			}
			for _, p := range fakes.Config().Providers() {
				if got := providerLine(r.stdout, string(p)); got != "enabled" {
					t.Errorf("%s: %q\n%s", p, got, r.stdout)
				}
			}
			if o.OIDCHighAssurance && !strings.Contains(r.stdout, "private_key_jwt") {
				t.Errorf("the report does not show the client authentication:\n%s", r.stdout)
			}
		})
	}
}

// TestCheckOIDCFAPI2: extauth check holds a provider to what profile:
// fapi2 and DPoP need of it, from its discovery document, as the first
// sign-in would: pushed requests, an ID token algorithm FAPI 2.0 allows,
// the DPoP algorithm.
func TestCheckOIDCFAPI2(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(doc map[string]any)
		want string
	}{
		{"valid", func(map[string]any) {}, "enabled"},
		{"no pushed authorization requests", func(doc map[string]any) { delete(doc, "pushed_authorization_request_endpoint") },
			"broken: discovery: oidc_additional_settings.pushed_authorization_requests: the provider has no pushed_authorization_request_endpoint"},
		{"ID tokens signed with RS256 only", func(doc map[string]any) { doc["id_token_signing_alg_values_supported"] = []string{"RS256"} },
			`broken: discovery: id_token_signing_alg_values_supported ["RS256"] has none of ["PS256" "ES256" "EdDSA"]`},
		{"no ES256 proofs", func(doc map[string]any) { doc["dpop_signing_alg_values_supported"] = []string{"EdDSA"} },
			`broken: discovery: oidc_additional_settings.dpop_signing_alg: ES256 is not in the provider's dpop_signing_alg_values_supported ["EdDSA"]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newProvidersFixture(t)
			doc := discoveryDoc(f.op.URL)
			doc["token_endpoint_auth_methods_supported"] = []string{"private_key_jwt"}
			doc["token_endpoint_auth_signing_alg_values_supported"] = []string{"PS256", "ES256"}
			doc["id_token_signing_alg_values_supported"] = []string{"PS256", "ES256"}
			doc["pushed_authorization_request_endpoint"] = f.op.URL + "/par"
			doc["dpop_signing_alg_values_supported"] = []string{"ES256", "EdDSA"}
			c.edit(doc)
			f.op.serveJSON(t, "/.well-known/openid-configuration", doc)
			path, repl := f.config(t, "oidc_fapi2.yml", nil)
			r := runAt(t, testNow, "check", "-config", path)
			out := repl.apply(r.stdout)
			if got := providerLine(out, "oidc"); !strings.HasPrefix(got, c.want) {
				t.Errorf("oidc: %q\nwant  %q\n%s", got, c.want, out)
			}
			if (r.code == exitOK) != (c.want == "enabled") {
				t.Errorf("exit %d", r.code)
			}
			assertNoSecret(t, "check", r.stdout+r.stderr)
			if c.want == "enabled" {
				wantRows(t, r, []string{
					"dpop_signing_alg_values_supported ES256, EdDSA\n",
					"Profile fapi2: the FAPI 2.0 Security Profile's client rules, as applied",
					"\n client authentication: private_key_jwt\n pushed authorization requests, PKCE with S256\n" +
						" client assertions' audience: the issuer, as one string\n" +
						" sender-constrained tokens: DPoP: proofs signed ES256 with a key made per sign-in, which the tokens are bound to\n" +
						" algorithms: PS256, ES256, EdDSA only, for what the client signs and the ID tokens it accepts\n" +
						" the iss parameter required in every authorization response\n",
				}, []string{"JARM"})
			}
		})
	}
}

// TestCheckShowsProfileRules: offline too, check prints the rules of the
// client's profile as the strategy applies them, what the profile implies
// and what the file gives (mTLS, Message Signing), and DPoP without a
// profile.
func TestCheckShowsProfileRules(t *testing.T) {
	key := string(spPair().keyPEM)
	cert := string(spPair().certPEM)
	file := func(entries string) string {
		path := writeRaw(t, "oidc.yml", "oidc_client_id: app\noidc_issuer: https://id.example.invalid\noidc_additional_settings:\n"+entries)
		return path
	}
	for _, c := range []struct {
		name, entries string
		want, not     []string
	}{
		{"message signing, PS256 proofs", "  profile: fapi2-message-signing\n  dpop: true\n  dpop_signing_alg: PS256\n  private_key: |\n" + block(key),
			[]string{"Profile fapi2-message-signing: FAPI 2.0 Security Profile and Message Signing client rules, as applied",
				" sender-constrained tokens: DPoP: proofs signed PS256 with a key made per sign-in",
				" signed request objects; authorization responses as signed JWTs (JARM, response_mode jwt)\n"}, nil},
		{"mTLS", "  profile: fapi2\n  tls_client_certificate: |\n" + block(cert) + "  tls_client_key: |\n" + block(key),
			[]string{" client authentication: tls_client_auth\n",
				" sender-constrained tokens: mutual TLS: the tokens are bound to tls_client_certificate\n"}, []string{"JARM", "DPoP"}},
		{"DPoP without a profile", "  client_auth_method: private_key_jwt\n  dpop: true\n  private_key: |\n" + block(key),
			[]string{"DPoP proofs signed ES256 with a key made per sign-in, which the tokens are bound to (docs/oidc.md, \"DPoP\")\n"},
			[]string{"Profile fapi"}},
		{"neither", "  client_auth_method: private_key_jwt\n  private_key: |\n" + block(key), nil, []string{"Profile fapi", "DPoP"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runAt(t, testNow, "check", "-offline", "-config", file(c.entries))
			if r.code != exitOK {
				t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			wantRows(t, r, c.want, c.not)
		})
	}
}

// TestCheckShowsPresetRules: offline too, check says what the client's
// preset implies: the authority and tenants of Entra ID, where a groups
// overage is read, Okta's authorization server, Auth0's logout, the
// Workspace domain.
func TestCheckShowsPresetRules(t *testing.T) {
	for _, c := range []struct {
		name, issuer, entries string
		want                  []string
	}{
		{"entra", "https://login.microsoftonline.com/organizations/v2.0",
			"  preset: entra\n  tenants: [aaaaaaaa-1111-4111-8111-aaaaaaaaaaaa]\n  groups_overage: graph_transitive\n",
			[]string{"Preset entra: Microsoft Entra ID, v2.0 endpoint (ID tokens of version 2.0), authority organizations (docs/oidc.md, \"Presets\")\n",
				" tenants: only aaaaaaaa-1111-4111-8111-aaaaaaaaaaaa;", "/me/transitiveMemberOf", "xms_edov"}},
		{"okta", "https://dev-1.okta.com/oauth2/default", "  preset: okta\n",
			[]string{"Preset okta: Okta custom authorization server default", " logout: Okta's end_session_endpoint, which needs id_token_hint"}},
		{"auth0", "https://dev-1.us.auth0.com", "  preset: auth0\n",
			[]string{"Preset auth0: issuer https://dev-1.us.auth0.com/: Auth0 issues tokens with the trailing slash", "/v2/logout"}},
		{"google-workspace", "https://accounts.google.com", "  preset: google-workspace\n  hosted_domain: example.com\n",
			[]string{"Preset google-workspace: hd=example.com sent"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := writeRaw(t, "oidc.yml", "oidc_client_id: app\noidc_client_secret: s\noidc_issuer: "+c.issuer+"\noidc_additional_settings:\n"+c.entries)
			r := runAt(t, testNow, "check", "-offline", "-config", path)
			if r.code != exitOK {
				t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			wantRows(t, r, c.want, nil)
		})
	}
}

// TestCheckProbesPresetProviders: online, check reads a preset's provider
// as the strategy does: Entra ID's multi-tenant document names the
// {tenantid} template, and Auth0's its issuer with the trailing slash
// oidc_issuer may leave out, and neither is a mismatch.
func TestCheckProbesPresetProviders(t *testing.T) {
	srv := httptest.NewServer(nil)
	defer srv.Close()
	entra, err := enterprise.NewEntra(enterprise.EntraConfig{LoginURL: srv.URL, GraphURL: srv.URL, ClientID: "app", ClientSecret: "s",
		RedirectURIs: []string{"https://app.example.org/users/auth/oidc/callback"},
		Tenants:      []enterprise.EntraTenant{{ID: "aaaaaaaa-1111-4111-8111-aaaaaaaaaaaa", Users: []enterprise.EntraUser{{ObjectID: "x"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	auth0Srv := httptest.NewServer(nil)
	defer auth0Srv.Close()
	auth0, err := enterprise.NewAuth0(enterprise.Auth0Config{URL: auth0Srv.URL, ClientID: "app", ClientSecret: "s",
		RedirectURIs: []string{"https://app.example.org/users/auth/oidc/callback"}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler, auth0Srv.Config.Handler = entra.Login(), auth0
	for _, c := range []struct{ name, issuer, entries, want string }{
		{"entra", srv.URL + "/organizations/v2.0", "  preset: entra\n  tenants: any\n", srv.URL + "/{tenantid}/v2.0"},
		{"auth0", auth0Srv.URL, "  preset: auth0\n", auth0Srv.URL + "/"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := writeRaw(t, "oidc.yml", "oidc_client_id: app\noidc_client_secret: s\noidc_issuer: "+c.issuer+"\noidc_additional_settings:\n"+c.entries)
			r := runAt(t, testNow, "check", "-config", path, "-base-url", "https://app.example.org")
			if r.code != exitOK || providerLine(r.stdout, "oidc") != "enabled" || !strings.Contains(r.stdout, c.want) {
				t.Fatalf("exit %d, want the issuer %s\n%s%s", r.code, c.want, r.stdout, r.stderr)
			}
		})
	}
}

// TestCheckWarnsTokenEndpointAudience: an operator who keeps the token
// endpoint as the client assertions' audience is told the risk (audience
// injection) and what to do, and the provider stays usable.
func TestCheckWarnsTokenEndpointAudience(t *testing.T) {
	f := newProvidersFixture(t)
	path, repl := f.config(t, "oidc_token_audience.yml", nil)
	r := runAt(t, testNow, "check", "-offline", "-config", path)
	out := repl.apply(r.stdout)
	if r.code != exitOK || providerLine(out, "oidc") != "enabled" {
		t.Fatalf("exit %d\n%s", r.code, out)
	}
	_, warnings, _ := strings.Cut(out, "\nWarnings:\n")
	if !strings.Contains(warnings, "oidc_additional_settings.client_assertion_audience") || !strings.Contains(warnings, "audience injection") {
		t.Errorf("no warning naming the setting and the risk:\n%s", out)
	}
}

// check prints the OpenID Connect client's TLS certificates (mutual TLS)
// with their SHA-256 fingerprints and what each does, as it prints the
// SAML certificates, and warns of the one that expires soon.
func TestCheckShowsTLSClientCertificates(t *testing.T) {
	cur, next := spPair(), spPairSoon()
	file := "oidc_client_id: app\noidc_issuer: https://id.example.invalid\noidc_additional_settings:\n" +
		"  client_auth_method: tls_client_auth\n" +
		"  tls_client_certificate: |\n" + block(string(cur.certPEM)) + "  tls_client_key: |\n" + block(string(cur.keyPEM)) +
		"  tls_client_certificate_new: |\n" + block(string(next.certPEM)) + "  tls_client_key_new: |\n" + block(string(next.keyPEM))
	r := runAt(t, testNow, "check", "-offline", "-config", writeRaw(t, "mtls.yml", file))
	if r.code != exitOK {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"tls_client_certificate", "SHA-256 " + fingerprint(cur.cert), "presented to the provider",
		"tls_client_certificate_new", "SHA-256 " + fingerprint(next.cert), "not presented yet",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("check does not say %q:\n%s", want, r.stdout)
		}
	}
	_, warnings, _ := strings.Cut(r.stdout, "\nWarnings:\n")
	if !strings.Contains(warnings, "oidc: the TLS client certificate (oidc_additional_settings.tls_client_certificate_new) expires") {
		t.Errorf("no warning of the certificate that expires soon:\n%s", r.stdout)
	}
	if strings.Contains(r.stdout, "PRIVATE KEY") {
		t.Errorf("a private key printed:\n%s", r.stdout)
	}
}
