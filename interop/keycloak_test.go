//go:build interop && linux

package interop

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/extauth/extauth/internal/harness"
)

// Keycloak (https://www.keycloak.org), the most deployed open-source
// identity provider, as the IdP of the OpenID Connect and SAML routes:
// its server distribution from Maven Central, installed and built by
// interop/keycloak/install.sh (which .ci/run runs) and started by
// TestKeycloak, once for all its cases, with a realm file the test writes.
// Linux only: the server's JVM is tied to the test's life with setpriv
// --pdeathsig.

// keycloakDist is where install.sh links the installed distribution,
// relative to this package.
const keycloakDist = "keycloak/dist"

// kcRealm is the test realm; kcUser and kcPassword its one user's.
const (
	kcRealm    = "extauth"
	kcUser     = "alice"
	kcPassword = "wonderland"
	kcEmail    = "alice@example.org"
)

// keycloakStartTimeout bounds Keycloak's start: 15 to 40 s on an idle
// machine with 2 cores, several times that at CI's load.
const keycloakStartTimeout = 5 * time.Minute

// keycloak is a running Keycloak.
type keycloak struct {
	// URL is its base URL, http://127.0.0.1:<port>.
	URL string
	out *lockedBuffer
}

// Issuer is the test realm's issuer.
func (k *keycloak) Issuer() string { return k.URL + "/realms/" + kcRealm }

// SAMLDescriptor is the test realm's SAML IdP metadata.
func (k *keycloak) SAMLDescriptor() string { return k.Issuer() + "/protocol/saml/descriptor" }

// Output is what Keycloak printed so far (its log, at INFO, with the
// realm's events: every refused login or token request with its reason).
func (k *keycloak) Output() string { return k.out.String() }

var kcListening = regexp.MustCompile(`Listening on: http://127\.0\.0\.1:(\d+)`)

// startKeycloak starts Keycloak in a home of its own under a temporary
// directory: the installed distribution's lib, themes and providers linked
// in, its primed database copied, realm imported at start, and the
// certificates of trustPEM trusted for its outbound calls (the https JWKS
// routes of the applications). It stops with the test; a failed test logs
// the end of its output.
func startKeycloak(t *testing.T, realm map[string]any, trustPEM string) *keycloak {
	t.Helper()
	dist, err := filepath.Abs(keycloakDist)
	if err != nil {
		t.Fatal(err)
	}
	javaPath, err := os.ReadFile(filepath.Join(dist, ".extauth-java"))
	if err != nil {
		t.Fatalf("Keycloak is not installed (%v): run interop/keycloak/install.sh (.ci/run does)", err)
	}
	home := t.TempDir()
	for _, d := range []string{"bin", "conf", "data/import", "data/h2"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// kc.sh takes its home from where it lies: a copy here makes this
	// directory the home; what Keycloak only reads is linked.
	copyFile(t, filepath.Join(dist, "bin", "kc.sh"), filepath.Join(home, "bin", "kc.sh"), 0o755)
	for _, d := range []string{"lib", "themes", "providers"} {
		if err := os.Symlink(filepath.Join(dist, d), filepath.Join(home, d)); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"keycloak.conf", "cache-ispn.xml"} {
		copyFile(t, filepath.Join(dist, "conf", f), filepath.Join(home, "conf", f), 0o644)
	}
	copyFile(t, filepath.Join(dist, "data", "h2", "keycloakdb.mv.db"), filepath.Join(home, "data", "h2", "keycloakdb.mv.db"), 0o644)
	realmJSON, err := json.MarshalIndent(realm, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(home, "data", "import", kcRealm+"-realm.json"), realmJSON, 0o644)
	trust := filepath.Join(home, "conf", "trust.pem")
	writeTestFile(t, trust, []byte(trustPEM), 0o644)
	// kc.sh runs Java as a child of its own, which a kill of kc.sh
	// leaves running: Java is started through setpriv, to die with kc.sh,
	// as kc.sh dies with the test binary (dieWithParent).
	java := filepath.Join(home, "bin", "java")
	writeTestFile(t, java, []byte("#!/bin/sh\nexec setpriv --pdeathsig KILL -- '"+strings.TrimSpace(string(javaPath))+"' \"$@\"\n"), 0o755)

	cmd := exec.Command(filepath.Join(home, "bin", "kc.sh"), "start", "--optimized",
		"--cache=local", "--http-enabled=true", "--http-host=127.0.0.1", "--http-port=0",
		"--hostname-strict=false", "--import-realm", "--truststore-paths="+trust)
	cmd.Env = append(os.Environ(), "JAVA="+java)
	k := &keycloak{out: &lockedBuffer{}}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = k.out
	dieWithParent(cmd)
	cmd.SysProcAttr.Setpgid = true
	started := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("kc.sh: %v", err)
	}
	exited := make(chan error, 1)
	port := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			io.WriteString(k.out, line+"\n")
			if m := kcListening.FindStringSubmatch(line); m != nil {
				select {
				case port <- m[1]:
				default:
				}
			}
		}
		io.Copy(k.out, stdout)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		// Keycloak stops on TERM in a second or two; the group holds kc.sh
		// and Java.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			t.Logf("Keycloak's output (the end):\n%s", tail(k.Output(), 200))
		}
	})
	select {
	case p := <-port:
		k.URL = "http://127.0.0.1:" + p
	case err := <-exited:
		t.Fatalf("Keycloak exited before it listened (%v):\n%s", err, tail(k.Output(), 60))
	case <-time.After(keycloakStartTimeout):
		t.Fatalf("Keycloak did not listen within %s:\n%s", keycloakStartTimeout, tail(k.Output(), 60))
	}
	// The realm was imported before Keycloak listened; its discovery
	// document says it is served.
	resp, err := http.Get(k.Issuer() + "/.well-known/openid-configuration")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the realm's discovery: HTTP %d:\n%s", resp.StatusCode, tail(k.Output(), 60))
	}
	t.Logf("Keycloak started in %s at %s", time.Since(started).Round(100*time.Millisecond), k.URL)
	return k
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatalf("Keycloak's distribution is incomplete, run interop/keycloak/install.sh again: %v", err)
	}
	writeTestFile(t, to, b, mode)
}

func writeTestFile(t *testing.T, path string, b []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, b, mode); err != nil {
		t.Fatal(err)
	}
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// rpServer serves an application whose handler is set once its
// configuration can be made: Keycloak's realm names the application's
// URLs, and the application names Keycloak's.
type rpServer struct {
	URL     string
	handler atomic.Pointer[http.Handler]
}

// serveRP starts an application's server, over TLS with cert when it is
// set (Keycloak's FAPI profiles refuse http redirect URIs).
func serveRP(t *testing.T, cert *harness.Cert) *rpServer {
	t.Helper()
	rp := &rpServer{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := rp.handler.Load(); h != nil {
			(*h).ServeHTTP(w, r)
			return
		}
		http.Error(w, "starting", http.StatusServiceUnavailable)
	}))
	if cert != nil {
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{cert.Cert.Raw}, PrivateKey: cert.Key}}}
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	rp.URL = srv.URL
	return rp
}

func (rp *rpServer) serve(h http.Handler) { rp.handler.Store(&h) }

// kcLogin answers Keycloak's login page with the test user's password and
// returns the page the form leads to.
func kcLogin(t *testing.T, b *harness.Browser, page *harness.Response, k *keycloak) *harness.Response {
	t.Helper()
	if page.StatusCode != http.StatusOK || !strings.HasPrefix(page.URL.String(), k.Issuer()+"/") || !strings.Contains(page.Body, `id="kc-form-login"`) {
		t.Fatalf("no Keycloak login page: %s %d\n%s", page.URL, page.StatusCode, tail(page.Body, 40))
	}
	action, form := htmlForm(t, page)
	form.Set("username", kcUser)
	form.Set("password", kcPassword)
	return b.PostForm(action, form)
}

// kcConsent accepts Keycloak's consent page, if page is one.
func kcConsent(t *testing.T, b *harness.Browser, page *harness.Response) *harness.Response {
	t.Helper()
	if !strings.Contains(page.Body, `name="accept"`) {
		return page
	}
	action, form := htmlForm(t, page)
	form.Del("cancel")
	form.Set("accept", "Yes")
	return b.PostForm(action, form)
}

// kcUserRep is the realm's one user.
func kcUserRep() map[string]any {
	return map[string]any{
		"username": kcUser, "enabled": true, "email": kcEmail, "emailVerified": true,
		"firstName": "Alice", "lastName": "Liddell",
		"credentials": []map[string]any{{"type": "password", "value": kcPassword, "temporary": false}},
	}
}

// kcKeyProviders are the realm's keys: RS256 (Keycloak's default for ID
// tokens and SAML), PS256 (what FAPI 2.0 clients get), and the HMAC and
// AES keys Keycloak signs and encrypts its own cookies and codes with.
// A realm file that names key providers gets none by default.
func kcKeyProviders() []map[string]any {
	p := func(name, id string, config map[string][]string) map[string]any {
		return map[string]any{"name": name, "providerId": id, "subComponents": map[string]any{}, "config": config}
	}
	return []map[string]any{
		p("rsa-rs256", "rsa-generated", map[string][]string{"priority": {"100"}, "algorithm": {"RS256"}, "keySize": {"2048"}}),
		p("rsa-ps256", "rsa-generated", map[string][]string{"priority": {"90"}, "algorithm": {"PS256"}, "keySize": {"2048"}}),
		p("hmac", "hmac-generated", map[string][]string{"priority": {"100"}, "algorithm": {"HS512"}}),
		p("aes", "aes-generated", map[string][]string{"priority": {"100"}}),
	}
}

// TestKeycloak signs in through our routes at Keycloak, as a new user
// would set each up (docs/oidc.md#keycloak, docs/saml.md#keycloak), one
// Keycloak for every case: the realm file holds a client for each, whose
// application serves at a URL made before Keycloak starts.
func TestKeycloak(t *testing.T) {
	pki := newTestPKI(t)
	basic := serveRP(t, nil)
	fapi := serveRP(t, pki.server)
	encrypted := serveRP(t, nil)
	saml := serveSSPApp(t)
	samlKeys := newPair(t, "keycloak-sp")
	fapiKey, encKey := rsaKeyPEM(t), rsaKeyPEM(t)

	realm := map[string]any{
		"realm": kcRealm, "enabled": true,
		// Keycloak serves plain HTTP on loopback; the applications' own
		// https matters to the FAPI policy, which checks their URIs.
		"sslRequired":         "none",
		"eventsEnabled":       true,
		"users":               []map[string]any{kcUserRep()},
		"components":          map[string]any{"org.keycloak.keys.KeyProvider": kcKeyProviders()},
		"roles":               map[string]any{"client": map[string]any{kcFAPIClient: []map[string]any{{"name": kcFAPIRole}}}},
		"clientPolicies":      map[string]any{"policies": []map[string]any{kcFAPIPolicy()}},
		"accessTokenLifespan": 300,
		"clients": []map[string]any{
			kcBasicClient(basic.URL),
			kcFAPI2Client(fapi.URL),
			kcEncryptedClient(encrypted.URL),
			kcSAMLClient(saml.URL, samlKeys.cert),
		},
	}
	k := startKeycloak(t, realm, pki.ca.CertPEM)

	t.Run("code flow, refresh, revocation, RP-initiated and back-channel logout", func(t *testing.T) {
		testKeycloakCodeFlow(t, k, basic)
	})
	t.Run("FAPI 2.0 client policy with DPoP", func(t *testing.T) {
		testKeycloakFAPI2(t, k, fapi, fapiKey, pki)
	})
	t.Run("encrypted ID tokens to the key of the JWKS route", func(t *testing.T) {
		testKeycloakEncryptedIDToken(t, k, encrypted, encKey)
	})
	t.Run("SAML: signed requests, encrypted assertions, single logout", func(t *testing.T) {
		testKeycloakSAML(t, k, saml, samlKeys)
	})
}
