package main

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"encoding/xml"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/crewjam/saml"

	"github.com/extauth/extauth"
)

func TestUsage(t *testing.T) {
	r := runCLI(t)
	if r.code != exitUsage || r.stdout != "" {
		t.Errorf("no arguments: exit %d, stdout %q", r.code, r.stdout)
	}
	golden(t, "usage.golden", r.stderr)
	for _, args := range [][]string{{"-h"}, {"help"}, {"--help"}} {
		r := runCLI(t, args...)
		if r.code != exitOK || r.stderr != "" {
			t.Errorf("%q: exit %d, stderr %q", args, r.code, r.stderr)
		}
		golden(t, "usage.golden", r.stdout)
	}
	r = runCLI(t, "frobnicate")
	if r.code != exitUsage || !strings.HasPrefix(r.stderr, "extauth: unknown command \"frobnicate\"\n\nextauth is") {
		t.Errorf("unknown command: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestCommandUsage(t *testing.T) {
	for _, cmd := range commands() {
		for _, args := range [][]string{{cmd.name, "-h"}, {cmd.name, "-help"}, {"help", cmd.name}} {
			r := runCLI(t, args...)
			if r.code != exitOK || r.stderr != "" {
				t.Errorf("%q: exit %d, stderr %q", args, r.code, r.stderr)
			}
			golden(t, "usage_"+cmd.name+".golden", r.stdout)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"check"}, "extauth check: -config is required"},
		{[]string{"check", "-config", "x.yml", "-timeout", "0s"}, "extauth check: -timeout must be positive"},
		{[]string{"check", "-config", "x.yml", "-timeout", "1h"}, "extauth check: -timeout must be positive and at most 5m0s"},
		{[]string{"check", "-config", "x.yml", "-base-url", "app.example.org"}, "extauth check: -base-url must be an absolute http or https URL"},
		{[]string{"check", "-config", "x.yml", "stray"}, `extauth check: unexpected argument "stray"`},
		{[]string{"routes", "-config", "x.yml"}, "extauth routes: -base-url is required"},
		{[]string{"routes", "-base-url", "https://app.example"}, "extauth routes: give -config FILE, or -all"},
		{[]string{"routes", "-all", "-config", "x.yml", "-base-url", "https://app.example"}, "extauth routes: -config and -all exclude each other"},
		{[]string{"routes", "-all", "-env", "production", "-base-url", "https://app.example"}, "extauth routes: -env applies to -config"},
		{[]string{"routes", "-all", "-base-url", "https://app.example/?q=1"}, "extauth routes: -base-url must be"},
		{[]string{"metadata", "-base-url", "https://app.example"}, "extauth metadata: -config is required"},
		{[]string{"metadata", "-config", "x.yml"}, "extauth metadata: -base-url is required"},
		{[]string{"metadata", "-config", "x.yml", "-base-url", "ftp://app.example"}, "extauth metadata: -base-url must be"},
		{[]string{"check", "-config", "x.yml", "-tenant", "a", "-all-tenants"}, "extauth check: -tenant and -all-tenants exclude each other"},
		{[]string{"check", "-config", "x.yml", "-tenant", "City A"}, "extauth check: -tenant must be a tenant name"},
		{[]string{"check", "-config", "x.yml", "-base-url", "https://{tenant}.example.org"}, "extauth check: {tenant} in -base-url stands for a tenant's name: give -tenant NAME or -all-tenants"},
		{[]string{"routes", "-all", "-tenant", "a", "-base-url", "https://{tenant}.example.org"}, "extauth routes: -tenant and -all-tenants apply to -config"},
		{[]string{"routes", "-config", "x.yml", "-all-tenants", "-base-url", "https://{tenant}:x/"}, "extauth routes: -base-url must be"},
		{[]string{"metadata", "-config", "x.yml", "-base-url", "https://{tenant}.example.org"}, "extauth metadata: {tenant} in -base-url"},
		{[]string{"metadata", "-config", "x.yml", "-all-tenants", "-base-url", "https://x.example.org"}, "extauth metadata: flag provided but not defined: -all-tenants"},
	} {
		r := runCLI(t, c.args...)
		if r.code != exitUsage || r.stdout != "" || !strings.HasPrefix(r.stderr, c.want) || !strings.Contains(r.stderr, "\nUsage: extauth "+c.args[0]) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want status 2 and %q with the usage", c.args, r.code, r.stdout, r.stderr, c.want)
		}
	}
}

// routesConfig renders all.yml with fixed URLs: routes and metadata make no
// request, so no server is needed and the output is stable.
func routesConfig(t *testing.T, name string) (string, replacer) {
	t.Helper()
	sp := spPair()
	path := writeConfig(t, name, map[string]string{
		"IDP": "https://idp.example.org", "OP": "https://id.example.org",
		"SP_CERT": string(sp.certPEM), "SP_KEY": string(sp.keyPEM),
	})
	return path, replacer{filepath.Dir(path): "$DIR"}
}

func TestRoutes(t *testing.T) {
	path, _ := routesConfig(t, "all.yml")
	r := runCLI(t, "routes", "-config", path, "-base-url", "https://app.example.org/")
	if r.code != exitOK || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	golden(t, "routes_all.golden", r.stdout)
	assertNoSecret(t, "routes", r.stdout)

	r = runCLI(t, "routes", "-config", path, "-base-url", "https://app.example.org", "-json")
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	golden(t, "routes_all_json.golden", r.stdout)
	var doc struct {
		Routes []struct {
			Provider, Purpose, Path, URL string
			Methods                      []string
		}
		Register []struct {
			Provider    string
			CallbackURL string `json:"callback_url"`
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatal(err)
	}
	// Two routes per provider, SAML's metadata and logout, four logout
	// routes each for oidc and search_oauth2, a (local) sign-out route each
	// for the other three, and oidc's JWKS.
	if len(doc.Routes) != 26 || len(doc.Register) != 6 {
		t.Errorf("%d routes, %d registrations; want 26 and 6", len(doc.Routes), len(doc.Register))
	}
	for _, reg := range doc.Register {
		if want := "https://app.example.org/users/auth/" + reg.Provider + "/callback"; reg.CallbackURL != want {
			t.Errorf("%s: callback %s, want %s", reg.Provider, reg.CallbackURL, want)
		}
	}
}

func TestRoutesOfSomeProviders(t *testing.T) {
	path := writeConfig(t, "blog.yml", nil)
	r := runCLI(t, "routes", "-config", path, "-base-url", "https://app.example.org/prefix")
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	golden(t, "routes_blog.golden", r.stdout)
}

// -all serves the operator who registers the application before the file
// has any provider.
func TestRoutesAll(t *testing.T) {
	r := runCLI(t, "routes", "-all", "-base-url", "http://127.0.0.1:3000")
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	golden(t, "routes_every.golden", r.stdout)
}

func TestRoutesBadConfig(t *testing.T) {
	path := writeRaw(t, "bad.yml", "blog_oauth2_key: k\nblog_oauth2_secret: SECRET-blog-b3c5\noidc_issuer: not a url\n")
	r := runCLI(t, "routes", "-config", path, "-base-url", "https://app.example.org")
	want := "extauth routes: the configuration has errors (run extauth check for a full report):\n" +
		"  blog_oauth2: blog_oauth2_site is missing\n" +
		"  oidc: oidc_client_id is missing\n" +
		"  oidc: oidc_client_secret is missing\n" +
		"  oidc: oidc_issuer must be an absolute http or https URL\n"
	if r.code != exitFail || r.stdout != "" || r.stderr != want {
		t.Errorf("exit %d, stdout %q, stderr:\n%s\nwant:\n%s", r.code, r.stdout, r.stderr, want)
	}
	assertNoSecret(t, "routes", r.stderr)

	path = writeConfig(t, "empty.yml", nil)
	r = runCLI(t, "routes", "-config", path, "-base-url", "https://app.example.org")
	if r.code != exitFail || r.stderr != "extauth routes: "+path+" configures no provider\n" {
		t.Errorf("no provider: exit %d, stderr %q", r.code, r.stderr)
	}
}

// A tenant's routes are under its own base URL, with its own providers.
func TestRoutesTenants(t *testing.T) {
	_, path, _ := tenantsFixture(t)
	dir := replacer{filepath.Dir(path): "$DIR"}
	r := runEnv(t, testNow, production, "routes", "-config", path, "-tenant", "city_b", "-base-url", "https://{tenant}.example.org")
	if r.code != exitOK || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	golden(t, "routes_tenant_city_b.golden", r.stdout)
	// Without {tenant}, a tenant is a subdomain of the base URL, as in the
	// application without Options.TenantBaseURL.
	r2 := runEnv(t, testNow, production, "routes", "-config", path, "-tenant", "city_b", "-base-url", "https://example.org")
	if r2.code != exitOK || r2.stdout != r.stdout {
		t.Errorf("exit %d, stderr %q\n%s", r2.code, r2.stderr, r2.stdout)
	}

	fixed := writeRaw(t, "tenants.yml", strings.Replace(readFile(t, path), "facebook_key: only-a-key", "facebook_key: ''", 1))
	r = runEnv(t, testNow, production, "routes", "-config", fixed, "-all-tenants", "-base-url", "https://{tenant}.example.org")
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	golden(t, "routes_all_tenants.golden", r.stdout)

	r = runEnv(t, testNow, production, "routes", "-config", fixed, "-all-tenants", "-base-url", "https://app.example.org/{tenant}", "-json")
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	golden(t, "routes_all_tenants_json.golden", r.stdout)
	var doc struct {
		Tenants []struct {
			Tenant   string
			BaseURL  string `json:"base_url"`
			Register []struct {
				Provider    string
				CallbackURL string `json:"callback_url"`
			}
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"city_a": {"saml", "oidc"}, "city_b": {"microblog", "saml", "oidc"}, "city_c": {"oidc"}}
	if len(doc.Tenants) != 3 {
		t.Fatalf("%d tenants", len(doc.Tenants))
	}
	for _, tenant := range doc.Tenants {
		var got []string
		for _, reg := range tenant.Register {
			got = append(got, reg.Provider)
			if wantURL := "https://app.example.org/" + tenant.Tenant + "/users/auth/" + reg.Provider + "/callback"; reg.CallbackURL != wantURL {
				t.Errorf("%s: %s", tenant.Tenant, reg.CallbackURL)
			}
		}
		if !slices.Equal(got, want[tenant.Tenant]) {
			t.Errorf("%s: providers %v, want %v", tenant.Tenant, got, want[tenant.Tenant])
		}
	}

	// city_c's problem keeps the file from loading, as the application
	// would refuse it; city_b's routes do not depend on it, city_c's do.
	r = runEnv(t, testNow, production, "routes", "-config", path, "-base-url", "https://app.example.org")
	if r.code != exitFail || !strings.Contains(r.stderr, "  tenants.city_c: socialnet: socialnet_secret is missing (facebook_secret in this file)\n") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	r = runEnv(t, testNow, production, "routes", "-config", path, "-tenant", "city_c", "-base-url", "https://{tenant}.example.org")
	if r.code != exitFail || !strings.Contains(r.stderr, "  tenants.city_c: socialnet: socialnet_secret is missing") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	r = runEnv(t, testNow, production, "routes", "-config", path, "-tenant", "nope", "-base-url", "https://{tenant}.example.org")
	if r.code != exitFail || !strings.Contains(dir.apply(r.stderr), "$DIR/tenants.yml has no tenant nope") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// The SP metadata is the document the application serves: the entity ID,
// the ACS at the callback URL, and the certificate when there is a key pair.
func TestMetadata(t *testing.T) {
	f := newProvidersFixture(t)
	for _, c := range []struct {
		file string
		cert *x509.Certificate
	}{{"all.yml", spPair().cert}, {"saml_only.yml", nil}} {
		path, _ := f.config(t, c.file, nil)
		r := runCLI(t, "metadata", "-config", path, "-base-url", "https://app.example.org/")
		if r.code != exitOK || r.stderr != "" {
			t.Fatalf("%s: exit %d, stderr %q", c.file, r.code, r.stderr)
		}
		assertNoSecret(t, "metadata", r.stdout)
		cfg, err := extauth.LoadConfig(path, extauth.LookupEnv(nil))
		if err != nil {
			t.Fatal(err)
		}
		var ed saml.EntityDescriptor
		if err := xml.Unmarshal([]byte(r.stdout), &ed); err != nil {
			t.Fatalf("%s: %v\n%s", c.file, err, r.stdout)
		}
		if ed.EntityID != cfg.SAML.SPEntityID || len(ed.SPSSODescriptors) != 1 {
			t.Fatalf("%s: entity %q with %d SP descriptors", c.file, ed.EntityID, len(ed.SPSSODescriptors))
		}
		sp := ed.SPSSODescriptors[0]
		acs, _ := extauth.CallbackURL("https://app.example.org", extauth.SAML)
		if len(sp.AssertionConsumerServices) != 1 || sp.AssertionConsumerServices[0].Location != acs ||
			sp.AssertionConsumerServices[0].Binding != saml.HTTPPostBinding {
			t.Errorf("%s: ACS %+v, want %s over HTTP-POST", c.file, sp.AssertionConsumerServices, acs)
		}
		var certs []string
		for _, kd := range sp.KeyDescriptors {
			for _, xc := range kd.KeyInfo.X509Data.X509Certificates {
				certs = append(certs, xc.Data)
			}
		}
		switch {
		case c.cert == nil && len(certs) != 0:
			t.Errorf("%s: certificates without a key pair", c.file)
		case c.cert != nil && (len(certs) == 0 || !slices.Contains(certs, base64.StdEncoding.EncodeToString(c.cert.Raw))):
			t.Errorf("%s: the SP certificate is not in the metadata", c.file)
		}
	}
}

// A tenant's SP metadata has its entity ID and its ACS under its base URL.
func TestMetadataTenant(t *testing.T) {
	_, path, _ := tenantsFixture(t)
	r := runEnv(t, testNow, production, "metadata", "-config", path, "-tenant", "city_a", "-base-url", "https://{tenant}.example.org")
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	var ed saml.EntityDescriptor
	if err := xml.Unmarshal([]byte(r.stdout), &ed); err != nil {
		t.Fatal(err)
	}
	if ed.EntityID != "https://city-a.example.org/users/auth/saml/metadata" || len(ed.SPSSODescriptors) != 1 ||
		ed.SPSSODescriptors[0].AssertionConsumerServices[0].Location != "https://city_a.example.org/users/auth/saml/callback" {
		t.Errorf("entity %q, %+v", ed.EntityID, ed.SPSSODescriptors)
	}
	// city_c's own problem is in the way; once fixed, it has no SAML.
	r = runEnv(t, testNow, production, "metadata", "-config", path, "-tenant", "city_c", "-base-url", "https://{tenant}.example.org")
	if r.code != exitFail || !strings.Contains(r.stderr, "\n  tenants.city_c: socialnet: socialnet_secret is missing") {
		t.Errorf("city_c: exit %d, stderr %q", r.code, r.stderr)
	}
	fixed := writeRaw(t, "tenants.yml", strings.Replace(readFile(t, path), "facebook_key: only-a-key", "facebook_key: ''", 1))
	r = runEnv(t, testNow, production, "metadata", "-config", fixed, "-tenant", "city_c", "-base-url", "https://{tenant}.example.org")
	if r.code != exitFail || !strings.HasPrefix(r.stderr, "extauth metadata: saml is not configured in tenant city_c of ") {
		t.Errorf("city_c: exit %d, stderr %q", r.code, r.stderr)
	}
}

// Without SAML there is no SP metadata: the command says so and fails. The
// path through Auth.SAMLMetadata is the one a SAML build takes too.
func TestMetadataWithoutSAML(t *testing.T) {
	path := writeConfig(t, "blog.yml", nil)
	r := runCLI(t, "metadata", "-config", path, "-base-url", "https://app.example.org")
	if r.code != exitFail || r.stdout != "" {
		t.Errorf("exit %d, stdout %q", r.code, r.stdout)
	}
	golden(t, "metadata_no_saml.golden", replacer{filepath.Dir(path): "$DIR"}.apply(r.stderr))
}

func TestMetadataBadConfig(t *testing.T) {
	path := writeRaw(t, "bad.yml", "saml_sp_entity_id: not an id\nsaml_idp_metadata_url: https://idp.example/md\n")
	r := runCLI(t, "metadata", "-config", path, "-base-url", "https://app.example.org")
	if r.code != exitFail || !strings.Contains(r.stderr, "saml: saml_sp_entity_id must be an absolute http or https URL or a URN") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	r = runCLI(t, "metadata", "-config", filepath.Join(t.TempDir(), "absent.yml"), "-base-url", "https://app.example.org")
	if r.code != exitFail || !strings.HasPrefix(r.stderr, "extauth metadata: extauth: config: open ") {
		t.Errorf("missing file: exit %d, stderr %q", r.code, r.stderr)
	}
}

// No command prints a secret of the file, whatever it finds: every command
// is run on the file with every provider and on the one with problems.
func TestNoSecretPrinted(t *testing.T) {
	f := newProvidersFixture(t)
	all, _ := f.config(t, "all.yml", nil)
	problems, _ := f.config(t, "problems.yml", nil)
	tenants, _ := f.config(t, "tenants.yml", nil)
	broken := writeRaw(t, "broken.yml", "oidc_client_secret: SECRET-oidc-c8e1\nblog_oauth2_secret: SECRET-blog-b3c5\n"+
		"saml_sp_entity_id: urn:x:y\nsaml_additional_settings:\n  private_key: SECRET-microblog-4f1c\n  tenant: \"-----BEGIN SECRET-socialnet-9a2e\"\n")
	for _, args := range [][]string{
		{"check", "-config", all},
		{"check", "-config", all, "-base-url", "https://app.example.org"},
		{"check", "-config", all, "-offline"},
		{"check", "-config", problems, "-env", "production"},
		{"check", "-config", problems, "-env", "production", "-base-url", "https://app.example.org"},
		{"check", "-config", broken},
		{"routes", "-config", all, "-base-url", "https://app.example.org"},
		{"routes", "-config", all, "-base-url", "https://app.example.org", "-json"},
		{"routes", "-config", broken, "-base-url", "https://app.example.org"},
		{"metadata", "-config", all, "-base-url", "https://app.example.org"},
		{"metadata", "-config", broken, "-base-url", "https://app.example.org"},
		{"check", "-config", tenants},
		{"check", "-config", tenants, "-all-tenants", "-base-url", "https://{tenant}.example.org"},
		{"check", "-config", tenants, "-tenant", "city_b"},
		{"routes", "-config", tenants, "-all-tenants", "-base-url", "https://{tenant}.example.org", "-json"},
		{"metadata", "-config", tenants, "-tenant", "city_a", "-base-url", "https://{tenant}.example.org"},
	} {
		r := runEnv(t, testNow, production, args...)
		if r.stdout == "" && r.stderr == "" {
			t.Errorf("%q printed nothing", args)
		}
		assertNoSecret(t, strings.Join(args[:1], " "), r.stdout+r.stderr)
	}
}

// The goldens hold no secret either: they are committed.
func TestGoldensHoldNoSecret(t *testing.T) {
	goldens, err := filepath.Glob(filepath.Join("testdata", "*.golden"))
	if err != nil || len(goldens) == 0 {
		t.Fatalf("no goldens: %v", err)
	}
	for _, g := range goldens {
		b, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		assertNoSecret(t, g, string(b))
		if strings.Contains(string(b), "PRIVATE KEY") {
			t.Errorf("%s holds a private key", g)
		}
	}
}

// The leak detector itself: it finds a key and a secret, and does not take
// the public half of the key, which certificates carry, for a leak.
func TestSecretsIn(t *testing.T) {
	kp := spPair()
	if leaks := secretsIn(t, "x "+string(kp.keyPEM)); len(leaks) != 1 {
		t.Errorf("a printed key: %v", leaks)
	}
	if leaks := secretsIn(t, "oidc_client_secret=SECRET-oidc-c8e1"); len(leaks) != 1 {
		t.Errorf("a printed secret: %v", leaks)
	}
	// SP metadata carries the certificate as one base64 run, whose
	// alignment can match the key's lines over the modulus.
	block, _ := pem.Decode(kp.certPEM)
	certB64 := base64.StdEncoding.EncodeToString(block.Bytes)
	if leaks := secretsIn(t, string(kp.certPEM)+certB64); len(leaks) != 0 {
		t.Errorf("a printed certificate: %v", leaks)
	}
}

// routes lists the routes where the application's PathPrefix and Slugs put
// them, as an operator registered them for another library.
func TestRoutesPathPrefixAndSlugs(t *testing.T) {
	r := runAt(t, testNow, "routes", "-all", "-base-url", "https://app.example.org", "-path-prefix", "/auth/", "-slug", "microblog=twitter")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"microblog      callback", "/auth/twitter/callback", "https://app.example.org/auth/twitter/callback",
		"https://app.example.org/auth/oidc/callback"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "/users/auth/") {
		t.Errorf("the default prefix is still printed:\n%s", r.stdout)
	}
	if r := runAt(t, testNow, "routes", "-all", "-base-url", "https://app.example.org", "-slug", "twitter"); r.code != 2 {
		t.Errorf("a -slug without = exits %d", r.code)
	}
}
