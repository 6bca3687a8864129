//go:build interop

package interop

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/beevik/etree"
	"github.com/crewjam/saml"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/internal/harness"
	"github.com/extauth/extauth/providers"
	"github.com/extauth/extauth/samlsp"
)

// SimpleSAMLphp is the Debian package (apt-get install simplesamlphp
// php-cli php-xml): the code under /usr/share/simplesamlphp is
// served as installed, and everything it reads besides (configuration,
// metadata, keys, sessions, logs) is generated per test in a temporary
// directory named by SIMPLESAMLPHP_CONFIG_DIR.
const sspWWW = "/usr/share/simplesamlphp/www"

// The test user of SimpleSAMLphp's exampleauth:UserPass source.
const (
	sspUser     = "grace"
	sspPassword = "correct horse battery staple"
)

// simpleSAMLphp is a running SimpleSAMLphp IdP.
type simpleSAMLphp struct {
	// URL is the base URL, http://127.0.0.1:port, serving sspWWW.
	URL string
	dir string

	mu  sync.Mutex
	sps map[string]map[string]any // saml20-sp-remote entries by entity ID
	// opts are what startSimpleSAMLphpWith was given.
	opts sspOptions
}

// sspOptions change how startSimpleSAMLphpWith runs SimpleSAMLphp.
type sspOptions struct {
	// PublicURL, when set, is where SimpleSAMLphp is reached (its
	// baseurlpath, and so its entity ID and endpoints): a front, such as a
	// TLS server, that Forward tells the address of php -S once it
	// listens. Client then reads its metadata.
	PublicURL string
	Forward   func(phpURL string)
	Client    *http.Client
	// Config and Hosted are added to config.php's and to the hosted IdP's
	// metadata settings.
	Config, Hosted map[string]any
}

// MetadataURL is where the IdP publishes its metadata; its entity ID too.
func (s *simpleSAMLphp) MetadataURL() string { return s.URL + "/saml2/idp/metadata.php" }

// startSimpleSAMLphp serves SimpleSAMLphp with `php -S` on a free loopback
// port, as a SAML IdP signing with idpKeys and authenticating sspUser with
// exampleauth:UserPass. The server is killed when the test ends; if the test
// failed, its stderr, PHP's error log and SimpleSAMLphp's own log are
// printed.
func startSimpleSAMLphp(t *testing.T, idpKeys pair) *simpleSAMLphp {
	t.Helper()
	return startSimpleSAMLphpWith(t, idpKeys, sspOptions{})
}

// startSimpleSAMLphpWith is startSimpleSAMLphp with opts.
func startSimpleSAMLphpWith(t *testing.T, idpKeys pair, opts sspOptions) *simpleSAMLphp {
	t.Helper()
	if _, err := os.Stat(filepath.Join(sspWWW, "saml2", "idp", "SSOService.php")); err != nil {
		t.Fatalf("SimpleSAMLphp is not installed (apt-get install simplesamlphp php-cli php-xml): %v", err)
	}
	if _, err := exec.LookPath("php"); err != nil {
		t.Fatalf("php is not installed (apt-get install php-cli): %v", err)
	}
	s := &simpleSAMLphp{dir: t.TempDir(), sps: map[string]map[string]any{}, opts: opts}
	for _, d := range []string{"config", "metadata", "log", "tmp", "sessions"} {
		if err := os.Mkdir(filepath.Join(s.dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	s.writeFile(t, "metadata/saml20-sp-remote.json", []byte("{}"))
	// The PHP files only load JSON written by the test, so that no value
	// ever needs PHP quoting.
	s.writeFile(t, "config/config.php", []byte(`<?php
$config = json_decode(file_get_contents(__DIR__ . '/config.json'), true, 512, JSON_THROW_ON_ERROR);
$config['logging.level'] = SimpleSAML\Logger::DEBUG;
`))
	s.writeFile(t, "config/authsources.php", []byte(`<?php
$config = json_decode(file_get_contents(__DIR__ . '/authsources.json'), true, 512, JSON_THROW_ON_ERROR);
`))
	s.writeFile(t, "metadata/saml20-idp-hosted.php", []byte(`<?php
$metadata['__DYNAMIC:1__'] = json_decode(file_get_contents(__DIR__ . '/saml20-idp-hosted.json'), true, 512, JSON_THROW_ON_ERROR);
`))
	s.writeFile(t, "metadata/saml20-sp-remote.php", []byte(`<?php
foreach (json_decode(file_get_contents(__DIR__ . '/saml20-sp-remote.json'), true, 512, JSON_THROW_ON_ERROR) as $id => $md) {
    $metadata[$id] = $md;
}
`))
	s.writeJSON(t, "config/authsources.json", map[string]any{
		"example-userpass": map[string]any{
			"0": "exampleauth:UserPass",
			sspUser + ":" + sspPassword: map[string][]string{
				"uid":         {sspUser},
				"email":       {"grace@example.org"},
				"givenName":   {"Grace"},
				"sn":          {"Hopper"},
				"displayName": {"Grace Hopper"},
			},
		},
	})
	hosted := map[string]any{
		"host":        "__DEFAULT__",
		"privatekey":  idpKeys.keyPath,
		"certificate": idpKeys.certPath,
		"auth":        "example-userpass",
	}
	for k, v := range opts.Hosted {
		hosted[k] = v
	}
	s.writeJSON(t, "metadata/saml20-idp-hosted.json", hosted)

	var stderr *lockedBuffer
	var cmd *exec.Cmd
	// The port is picked before php binds it, so another process may take
	// it first; php then exits at once and we try another.
	for attempt := 0; ; attempt++ {
		port := freePort(t)
		s.URL = "http://127.0.0.1:" + port
		s.writeConfig(t)
		stderr = &lockedBuffer{}
		cmd = exec.Command("php",
			"-d", "display_errors=stderr",
			"-d", "log_errors=On",
			"-d", "error_log="+filepath.Join(s.dir, "log", "php-errors.log"),
			"-d", "session.save_path="+filepath.Join(s.dir, "sessions"),
			"-S", "127.0.0.1:"+port, "-t", sspWWW)
		cmd.Env = append(os.Environ(), "SIMPLESAMLPHP_CONFIG_DIR="+filepath.Join(s.dir, "config"))
		cmd.Stdout = stderr
		cmd.Stderr = stderr
		dieWithParent(cmd)
		if err := cmd.Start(); err != nil {
			t.Fatalf("php -S: %v", err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		err := waitStarted(stderr, port, exited)
		if err == nil {
			t.Cleanup(func() {
				cmd.Process.Kill()
				<-exited
				if t.Failed() {
					s.dumpLogs(t, stderr.String())
				}
			})
			break
		}
		cmd.Process.Kill()
		<-exited
		if attempt == 2 {
			s.dumpLogs(t, stderr.String())
			t.Fatalf("php -S did not start: %v", err)
		}
	}
	client := http.DefaultClient
	if opts.PublicURL != "" {
		opts.Forward(s.URL)
		s.URL, client = opts.PublicURL, opts.Client
	}
	// The IdP must answer its metadata before any SP is pointed at it.
	resp, err := client.Get(s.MetadataURL())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("IDPSSODescriptor")) {
		t.Fatalf("SimpleSAMLphp metadata: %d %s", resp.StatusCode, body)
	}
	return s
}

// writeConfig writes config.json for the current URL.
func (s *simpleSAMLphp) writeConfig(t *testing.T) {
	t.Helper()
	dir := func(d string) string { return filepath.Join(s.dir, d) + "/" }
	base := s.URL
	if s.opts.PublicURL != "" {
		base = s.opts.PublicURL
	}
	config := map[string]any{
		"baseurlpath":                 base + "/",
		"certdir":                     s.dir + "/",
		"loggingdir":                  dir("log"),
		"datadir":                     dir("tmp"),
		"tempdir":                     dir("tmp"),
		"metadatadir":                 dir("metadata"),
		"metadata.sources":            []map[string]string{{"type": "flatfile"}},
		"technicalcontact_name":       "extauth interop",
		"technicalcontact_email":      "interop@example.org",
		"secretsalt":                  rand.Text(),
		"auth.adminpassword":          rand.Text(),
		"admin.checkforupdates":       false,
		"enable.saml20-idp":           true,
		"module.enable":               map[string]bool{"exampleauth": true, "saml": true, "core": true},
		"store.type":                  "phpsession",
		"session.phpsession.savepath": dir("sessions"),
		// Plain HTTP on loopback: a Secure cookie would never come back.
		"session.cookie.secure":  false,
		"language.cookie.secure": false,
		"logging.handler":        "file",
		"logging.logfile":        "simplesamlphp.log",
		// The full SAML messages go to the log, printed if a test fails.
		"debug":          map[string]bool{"saml": true, "backtraces": true, "validatexml": false},
		"showerrors":     true,
		"errorreporting": false,
		"production":     true,
		"timezone":       "UTC",
	}
	for k, v := range s.opts.Config {
		config[k] = v
	}
	s.writeJSON(t, "config/config.json", config)
}

// trustSP registers the SP whose metadata our route serves at mdURL, with
// cert as its key when it publishes none, and SimpleSAMLphp's per-SP options
// (assertion.encryption, validate.authnrequest, sign.logout, ...) on top.
func (s *simpleSAMLphp) trustSP(t *testing.T, mdURL string, cert *pair, options map[string]any) {
	t.Helper()
	md := harness.NewBrowser(t).Get(mdURL)
	if md.StatusCode != http.StatusOK {
		t.Fatalf("SP metadata: %d %s", md.StatusCode, md.Body)
	}
	var ed saml.EntityDescriptor
	if err := xml.Unmarshal([]byte(md.Body), &ed); err != nil || len(ed.SPSSODescriptors) != 1 {
		t.Fatalf("SP metadata: %v\n%s", err, md.Body)
	}
	d := ed.SPSSODescriptors[0]
	entry := map[string]any{
		"entityid": ed.EntityID,
		// The NameID is the user's email address, as a directory would
		// release it, rather than SimpleSAMLphp's default transient one.
		"NameIDFormat":               samlsp.NameIDEmail,
		"simplesaml.nameidattribute": "email",
	}
	var acs, slo []map[string]any
	for _, e := range d.AssertionConsumerServices {
		acs = append(acs, map[string]any{"Binding": e.Binding, "Location": e.Location, "index": e.Index})
	}
	for _, e := range d.SingleLogoutServices {
		slo = append(slo, map[string]any{"Binding": e.Binding, "Location": e.Location})
	}
	entry["AssertionConsumerService"], entry["SingleLogoutService"] = acs, slo
	var keys []map[string]any
	for _, k := range d.KeyDescriptors {
		for _, c := range k.KeyInfo.X509Data.X509Certificates {
			keys = append(keys, map[string]any{"type": "X509Certificate",
				"signing": k.Use != "encryption", "encryption": k.Use != "signing",
				"X509Certificate": strings.Join(strings.Fields(c.Data), "")})
		}
	}
	if len(keys) == 0 && cert != nil {
		keys = append(keys, map[string]any{"type": "X509Certificate", "signing": true, "encryption": true,
			"X509Certificate": base64.StdEncoding.EncodeToString(cert.cert.Raw)})
	}
	if len(keys) > 0 {
		entry["keys"] = keys
	}
	for k, v := range options {
		entry[k] = v
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sps[ed.EntityID] = entry
	s.writeJSON(t, "metadata/saml20-sp-remote.json", s.sps)
}

// log returns SimpleSAMLphp's own log so far.
func (s *simpleSAMLphp) log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "log", "simplesamlphp.log"))
	return string(b)
}

func (s *simpleSAMLphp) dumpLogs(t *testing.T, stderr string) {
	t.Helper()
	phpErrors, _ := os.ReadFile(filepath.Join(s.dir, "log", "php-errors.log"))
	t.Logf("php -S output:\n%s\nPHP error log:\n%s\nSimpleSAMLphp log:\n%s", stderr, phpErrors, s.log())
}

func (s *simpleSAMLphp) writeJSON(t *testing.T, name string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	s.writeFile(t, name, b)
}

// writeFile replaces name atomically: php reads these files on every
// request, and must never see half of one.
func (s *simpleSAMLphp) writeFile(t *testing.T, name string, b []byte) {
	t.Helper()
	path := filepath.Join(s.dir, name)
	tmp := path + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
}

// waitStarted waits until php -S reports that it listens on port: it
// prints so only once it has bound the port, so another process that took
// the port first is never mistaken for it. It fails if php exits first.
func waitStarted(out *lockedBuffer, port string, exited <-chan error) error {
	started := "Development Server (http://127.0.0.1:" + port + ") started"
	deadline := time.After(time.Minute)
	for !strings.Contains(out.String(), started) {
		select {
		case err := <-exited:
			return fmt.Errorf("php exited: %v", err)
		case <-deadline:
			return errors.New("php -S did not report listening within a minute")
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// sspApp is our app, configured for a SAML IdP (SimpleSAMLphp, Keycloak),
// recording what its hooks see.
type sspApp struct {
	URL string
	t   *testing.T
	// metadataURL is the IdP's metadata.
	metadataURL string
	// logs, when set, receives the application's log.
	logs    *lockedBuffer
	handler atomic.Pointer[http.Handler]

	mu         sync.Mutex
	identities []*extauth.Identity
	failures   []*extauth.Error
	loggedOut  []*providers.Error // the Logout.Done results
	idpLogouts []samlsp.LogoutSession
	// edit, when set, adjusts the configuration configure deploys.
	edit func(*extauth.Config)
	// client, when set, is the application's Options.HTTPClient.
	client *http.Client
}

func (a *sspApp) failureList() []*extauth.Error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*extauth.Error(nil), a.failures...)
}

func (a *sspApp) doneList() []*providers.Error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*providers.Error(nil), a.loggedOut...)
}

func (a *sspApp) idpLogoutList() []samlsp.LogoutSession {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]samlsp.LogoutSession(nil), a.idpLogouts...)
}

func (a *sspApp) last() *extauth.Identity {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.identities) == 0 {
		return nil
	}
	return a.identities[len(a.identities)-1]
}

// startSSPApp serves our routes as an SP of idp, with keys as the SP key
// pair (nil: none), signing its LogoutRequests when signLogout is set.
func startSSPApp(t *testing.T, idp *simpleSAMLphp, keys *pair, signLogout bool) *sspApp {
	t.Helper()
	a := serveSSPApp(t)
	a.metadataURL = idp.MetadataURL()
	a.configure(keys, nil, nil, signLogout)
	return a
}

// serveSSPApp starts the server of an app that configure deploys later,
// answering 503 until then: the IdP may need its URL first.
func serveSSPApp(t *testing.T) *sspApp {
	t.Helper()
	a := &sspApp{t: t}
	srv := harness.Serve(t, func(string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if h := a.handler.Load(); h != nil {
				(*h).ServeHTTP(w, r)
				return
			}
			http.Error(w, "starting", http.StatusServiceUnavailable)
		})
	})
	a.URL = srv.URL
	return a
}

// configure (re)starts our application with keys as the SP key pair (nil:
// none), next and old as the next and the retiring pairs of a key rotation
// (nil: none), at the same URL, with the same entity ID and cookie key: a
// deployment of a new secrets file.
func (a *sspApp) configure(keys, next, old *pair, signLogout bool) {
	t := a.t
	t.Helper()
	cfg := &extauth.Config{SAML: extauth.SAMLConfig{
		SPEntityID:     a.URL + "/saml",
		IdPMetadataURL: a.metadataURL,
	}}
	if keys != nil {
		cfg.SAML.Additional.Certificate = keys.certPEM
		cfg.SAML.Additional.PrivateKey = extauth.NewSecret(keys.keyPEM)
		cfg.SAML.Additional.Security.LogoutRequestsSigned = signLogout
	}
	if next != nil {
		cfg.SAML.Additional.CertificateNew = next.certPEM
		cfg.SAML.Additional.PrivateKeyNew = extauth.NewSecret(next.keyPEM)
	}
	if old != nil {
		cfg.SAML.Additional.CertificateOld = old.certPEM
		cfg.SAML.Additional.PrivateKeyOld = extauth.NewSecret(old.keyPEM)
	}
	if a.edit != nil {
		a.edit(cfg)
	}
	logger := slog.New(slog.DiscardHandler)
	if a.logs != nil {
		logger = slog.New(slog.NewTextHandler(a.logs, nil))
	}
	opts := extauth.Options{BaseURL: a.URL, CookieKey: bytes.Repeat([]byte{7}, 32),
		Logger: logger, HTTPClient: a.client,
		OnFailure: func(w http.ResponseWriter, _ *http.Request, err *extauth.Error) {
			a.mu.Lock()
			a.failures = append(a.failures, err)
			a.mu.Unlock()
			http.Error(w, string(err.Code), err.Code.HTTPStatus())
		},
		OnSuccess: func(w http.ResponseWriter, _ *http.Request, id *extauth.Identity) {
			a.mu.Lock()
			a.identities = append(a.identities, id)
			a.mu.Unlock()
			io.WriteString(w, "signed in as "+id.UID)
		}}
	// The signed-in user is the last identity the callback produced.
	opts.SAML.Logout.Session = func(*http.Request) (samlsp.LogoutSession, bool) {
		id := a.last()
		if id == nil || id.SAML == nil {
			return samlsp.LogoutSession{}, false
		}
		s := id.LogoutSession()
		return samlsp.LogoutSession{NameID: s.NameID, NameIDFormat: s.NameIDFormat, NameQualifier: s.NameQualifier,
			SPNameQualifier: s.SPNameQualifier, SPProvidedID: s.SPProvidedID, NameIDEncrypted: s.NameIDEncrypted, SessionIndex: s.SessionIndex}, true
	}
	opts.SAML.Logout.OnIdPLogout = func(_ context.Context, s samlsp.LogoutSession) error {
		a.mu.Lock()
		a.idpLogouts = append(a.idpLogouts, s)
		a.mu.Unlock()
		return nil
	}
	opts.SAML.Logout.Done = func(w http.ResponseWriter, _ *http.Request, err *providers.Error) {
		a.mu.Lock()
		a.loggedOut = append(a.loggedOut, err)
		a.mu.Unlock()
		if err != nil {
			http.Error(w, string(err.Code), err.Code.HTTPStatus())
			return
		}
		io.WriteString(w, "logged out")
	}
	auth, err := extauth.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { auth.Close() })
	// Our SP reads the IdP metadata in the background.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := auth.Ready(ctx); err != nil {
		t.Fatalf("our SP never became ready: %v", err)
	}
	mux := http.NewServeMux()
	auth.Mount(mux)
	var h http.Handler = mux
	a.handler.Store(&h)
}

var (
	formTag  = regexp.MustCompile(`(?is)<form\b[^>]*>`)
	inputTag = regexp.MustCompile(`(?is)<input\b[^>]*>`)
	attr     = regexp.MustCompile(`(?is)\b(name|value|action)\s*=\s*"([^"]*)"`)
)

// htmlForm reads the first form of page: its action, resolved against the
// page's URL, and the values of its named inputs.
func htmlForm(t *testing.T, page *harness.Response) (string, url.Values) {
	t.Helper()
	f := formTag.FindString(page.Body)
	if f == "" {
		t.Fatalf("no form at %s (%d):\n%s", page.URL, page.StatusCode, page.Body)
	}
	var action string
	for _, m := range attr.FindAllStringSubmatch(f, -1) {
		if strings.EqualFold(m[1], "action") {
			action = html.UnescapeString(m[2])
		}
	}
	u, err := page.URL.Parse(action)
	if err != nil {
		t.Fatalf("form action %q: %v", action, err)
	}
	values := url.Values{}
	for _, in := range inputTag.FindAllString(page.Body, -1) {
		var name, value string
		for _, m := range attr.FindAllStringSubmatch(in, -1) {
			switch strings.ToLower(m[1]) {
			case "name":
				name = html.UnescapeString(m[2])
			case "value":
				value = html.UnescapeString(m[2])
			}
		}
		if name != "" {
			values.Set(name, value)
		}
	}
	return u.String(), values
}

// isLoginForm reports whether page is SimpleSAMLphp's username/password form.
func isLoginForm(page *harness.Response) bool {
	return page.StatusCode == http.StatusOK && strings.Contains(page.URL.Path, "/core/loginuserpass.php") &&
		strings.Contains(page.Body, `name="password"`)
}

// hop returns the first URL b requested that starts with prefix.
func hop(b *harness.Browser, prefix string) *url.URL {
	for _, h := range b.Hops {
		if strings.HasPrefix(h, prefix) {
			u, err := url.Parse(h)
			if err == nil {
				return u
			}
		}
	}
	return nil
}

// sspSignIn starts a sign-in at our route with b, answers SimpleSAMLphp's
// login form when it shows one (login), and returns the decoded
// SAMLResponse it posts back, after b has posted it to our callback.
func sspSignIn(t *testing.T, b *harness.Browser, a *sspApp, login bool) (samlResponse []byte, callback *harness.Response) {
	t.Helper()
	return sspSignInWith(t, b, a, nil, login)
}

// sspSignInWith is sspSignIn with the start's form fields (sign-in
// options).
func sspSignInWith(t *testing.T, b *harness.Browser, a *sspApp, start url.Values, login bool) (samlResponse []byte, callback *harness.Response) {
	t.Helper()
	page := b.PostForm(a.URL+"/users/auth/saml", start)
	if login {
		if !isLoginForm(page) {
			t.Fatalf("expected SimpleSAMLphp's login form, got %s (%d):\n%s", page.URL, page.StatusCode, page.Body)
		}
		action, form := htmlForm(t, page)
		if form.Get("AuthState") == "" {
			t.Fatalf("login form without AuthState: %s", page.Body)
		}
		form.Set("username", sspUser)
		form.Set("password", sspPassword)
		page = b.PostForm(action, form)
	} else if isLoginForm(page) {
		t.Fatalf("SimpleSAMLphp asked for the password again: its session was expected to sign us in")
	}
	action, form := htmlForm(t, page)
	if action != a.URL+"/users/auth/saml/callback" || form.Get("SAMLResponse") == "" {
		t.Fatalf("SimpleSAMLphp did not post a SAMLResponse to our callback: %s %v\n%s", action, form, page.Body)
	}
	raw, err := base64.StdEncoding.DecodeString(form.Get("SAMLResponse"))
	if err != nil {
		t.Fatal(err)
	}
	return raw, b.PostForm(action, form)
}

// xmlAlgorithms lists the Algorithm attributes of the elements named local
// in doc, in document order, with the prefix each element was written with.
func xmlAlgorithms(doc []byte, local string) []string {
	var out []string
	re := regexp.MustCompile(`<(\w+:)?` + local + `\b[^>]*\bAlgorithm="([^"]*)"`)
	for _, m := range re.FindAllSubmatch(doc, -1) {
		out = append(out, string(m[1])+local+" "+string(m[2]))
	}
	return out
}

func checkGrace(t *testing.T, id *extauth.Identity) {
	t.Helper()
	if id == nil {
		t.Fatal("the host's hook saw no identity")
	}
	if id.Provider != "saml" || id.UID != "grace@example.org" || id.Email != "grace@example.org" ||
		id.FirstName != "Grace" || id.LastName != "Hopper" || id.Name != "Grace Hopper" {
		t.Fatalf("identity = %+v", id)
	}
	if id.SAML == nil || id.SAML.NameID != "grace@example.org" || id.SAML.NameIDFormat != samlsp.NameIDEmail ||
		id.SAML.SessionIndex == "" || len(id.SAML.Attributes["uid"]) != 1 {
		t.Fatalf("SAML info = %+v", id.SAML)
	}
}

// TestSimpleSAMLphpSignIn signs in through our routes at SimpleSAMLphp:
// its login form, its signed (or encrypted) assertion, our callback, the
// host's hook. The last two rows make SimpleSAMLphp require signed
// AuthnRequests from our SP (validate.authnrequest): with our key pair the
// sign-in succeeds, and without it SimpleSAMLphp itself refuses the request.
func TestSimpleSAMLphpSignIn(t *testing.T) {
	idpKeys := newPair(t, "idp")
	idp := startSimpleSAMLphp(t, idpKeys)
	spKeys := newPair(t, "sp")
	cases := []struct {
		name      string
		keys      *pair
		options   map[string]any
		encrypted bool
		verified  bool // SimpleSAMLphp verifies our AuthnRequest signature
		refused   bool
	}{
		{name: "signed assertion", keys: &spKeys},
		{name: "encrypted assertion", keys: &spKeys, options: map[string]any{"assertion.encryption": true}, encrypted: true},
		{name: "signed AuthnRequest required", keys: &spKeys, options: map[string]any{"validate.authnrequest": true}, verified: true},
		// Control: the IdP still holds our certificate and still requires
		// signed requests, but our SP has lost its key pair.
		{name: "unsigned AuthnRequest refused", keys: nil, options: map[string]any{"validate.authnrequest": true}, refused: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := startSSPApp(t, idp, c.keys, false)
			idp.trustSP(t, a.URL+"/users/auth/saml/metadata", &spKeys, c.options)
			b := harness.NewBrowser(t)
			if c.refused {
				logFrom := len(idp.log())
				page := b.PostForm(a.URL+"/users/auth/saml", nil)
				sso := hop(b, idp.URL+"/saml2/idp/SSOService.php")
				if sso == nil || sso.Query().Get("SAMLRequest") == "" || sso.Query().Has("Signature") {
					t.Fatalf("expected an unsigned AuthnRequest to SimpleSAMLphp, hops %v", b.Hops)
				}
				// SimpleSAMLphp 1.19 serves its error page with status 200;
				// the page (showerrors) and its log say why.
				const why = "Validation of received messages enabled, but no signature found on message."
				if isLoginForm(page) || !strings.Contains(page.Body, why) || !strings.Contains(idp.log()[logFrom:], why) {
					t.Fatalf("SimpleSAMLphp did not refuse the unsigned AuthnRequest: %d at %s:\n%s", page.StatusCode, page.URL, page.Body)
				}
				if a.last() != nil {
					t.Fatal("signed in without a signed AuthnRequest")
				}
				return
			}
			if c.verified {
				// A signature SimpleSAMLphp cannot verify is refused too: it
				// checks the signature, not only that there is one.
				start := harness.NewBrowser(t).NoFollow().PostForm(a.URL+"/users/auth/saml", nil)
				page := harness.NewBrowser(t).Get(corruptSignature(t, start.Header.Get("Location")))
				if isLoginForm(page) || !strings.Contains(page.Body, "Unable to validate signature on query string.") {
					t.Fatalf("SimpleSAMLphp accepted a corrupted AuthnRequest signature: %d at %s:\n%s", page.StatusCode, page.URL, page.Body)
				}
			}
			logFrom := len(idp.log())
			raw, cb := sspSignIn(t, b, a, true)
			if verified := strings.Contains(idp.log()[logFrom:], "Validation with key #0 succeeded."); verified != c.verified {
				t.Fatalf("SimpleSAMLphp verified our AuthnRequest signature: %v, want %v", verified, c.verified)
			}
			sso := hop(b, idp.URL+"/saml2/idp/SSOService.php")
			if sso == nil || sso.Query().Get("Signature") == "" ||
				sso.Query().Get("SigAlg") != "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256" {
				t.Fatalf("expected an RSA-SHA256-signed AuthnRequest, hops %v", b.Hops)
			}
			if cb.StatusCode != http.StatusOK || cb.Body != "signed in as grace@example.org" {
				t.Fatalf("callback: %d %s (failures %v)", cb.StatusCode, cb.Body, a.failureList())
			}
			hasEncrypted := bytes.Contains(raw, []byte("EncryptedAssertion>"))
			hasPlain := regexp.MustCompile(`<(\w+:)?Assertion\b`).Match(raw)
			if hasEncrypted != c.encrypted || hasPlain == c.encrypted {
				t.Fatalf("EncryptedAssertion %v, plaintext Assertion %v; want encrypted = %v:\n%s", hasEncrypted, hasPlain, c.encrypted, raw)
			}
			if c.encrypted {
				t.Logf("SimpleSAMLphp encrypted with %q", xmlAlgorithms(raw, "EncryptionMethod"))
			} else {
				t.Logf("SimpleSAMLphp signed with %q", xmlAlgorithms(raw, "SignatureMethod"))
			}
			checkGrace(t, a.last())
		})
	}
}

// corruptSignature flips one bit of the Signature parameter of an
// HTTP-Redirect binding URL, leaving the signed parameters byte for byte.
func corruptSignature(t *testing.T, redirect string) string {
	t.Helper()
	u, err := url.Parse(redirect)
	if err != nil {
		t.Fatal(err)
	}
	params := strings.Split(u.RawQuery, "&")
	found := false
	for i, p := range params {
		v, ok := strings.CutPrefix(p, "Signature=")
		if !ok {
			continue
		}
		v, err := url.QueryUnescape(v)
		if err != nil {
			t.Fatal(err)
		}
		sig, err := base64.StdEncoding.DecodeString(v)
		if err != nil || len(sig) == 0 {
			t.Fatalf("Signature %q: %v", v, err)
		}
		sig[len(sig)/2] ^= 1
		params[i] = "Signature=" + url.QueryEscape(base64.StdEncoding.EncodeToString(sig))
		found = true
	}
	if !found {
		t.Fatalf("no Signature in %s", redirect)
	}
	u.RawQuery = strings.Join(params, "&")
	return u.String()
}

// TestSimpleSAMLphpSingleLogout signs in at SimpleSAMLphp and logs out
// through our /users/auth/saml/logout route: our LogoutRequest goes to its
// SingleLogoutService by HTTP-Redirect, and its LogoutResponse comes back to
// our route, which hands the result to the Logout.Done hook. With sign.logout
// and validate.logout, each side signs and each verifies the other; the
// control rows drop one signature, and the side that wants it refuses. The
// last subtest is the other direction, SimpleSAMLphp's own initSLO.php.
func TestSimpleSAMLphpSingleLogout(t *testing.T) {
	idpKeys := newPair(t, "idp")
	idp := startSimpleSAMLphp(t, idpKeys)
	spKeys := newPair(t, "sp")
	cases := []struct {
		name string
		// signRequest signs our LogoutRequest; signResponse is SimpleSAMLphp's
		// sign.logout for our SP. SimpleSAMLphp always requires our
		// signature (validate.logout), and we always require its.
		signRequest, signResponse bool
	}{
		{"signed both ways", true, true},
		{"unsigned LogoutRequest refused by SimpleSAMLphp", false, true},
		{"unsigned LogoutResponse refused by us", true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := startSSPApp(t, idp, &spKeys, c.signRequest)
			idp.trustSP(t, a.URL+"/users/auth/saml/metadata", nil,
				map[string]any{"sign.logout": c.signResponse, "validate.logout": true})
			b := harness.NewBrowser(t)
			if _, cb := sspSignIn(t, b, a, true); cb.StatusCode != http.StatusOK {
				t.Fatalf("sign-in: %d %s (failures %v)", cb.StatusCode, cb.Body, a.failureList())
			}
			checkGrace(t, a.last())
			// SimpleSAMLphp now has a session for this browser: a second
			// sign-in goes through without its login form.
			if _, cb := sspSignIn(t, b, a, false); cb.StatusCode != http.StatusOK {
				t.Fatalf("second sign-in: %d %s", cb.StatusCode, cb.Body)
			}

			b.Hops = nil
			logFrom := len(idp.log())
			page := b.Get(a.URL + "/users/auth/saml/logout")
			toIdP := hop(b, idp.URL+"/saml2/idp/SingleLogoutService.php")
			if toIdP == nil || toIdP.Query().Get("SAMLRequest") == "" {
				t.Fatalf("no LogoutRequest went to SimpleSAMLphp: hops %v", b.Hops)
			}
			if signed := toIdP.Query().Get("Signature") != ""; signed != c.signRequest {
				t.Fatalf("LogoutRequest signed = %v, want %v", signed, c.signRequest)
			}
			if !c.signRequest {
				const why = "Validation of received messages enabled, but no signature found on message."
				if !strings.Contains(page.Body, why) || !strings.Contains(idp.log()[logFrom:], why) {
					t.Fatalf("SimpleSAMLphp did not refuse the unsigned LogoutRequest: %d at %s:\n%s", page.StatusCode, page.URL, page.Body)
				}
				if len(a.doneList()) != 0 {
					t.Fatal("logout finished although SimpleSAMLphp refused it")
				}
				// Its session lives on.
				if _, cb := sspSignIn(t, b, a, false); cb.StatusCode != http.StatusOK {
					t.Fatalf("sign-in after the refused logout: %d %s", cb.StatusCode, cb.Body)
				}
				return
			}
			if !strings.Contains(idp.log()[logFrom:], "Validation with key #0 succeeded.") {
				t.Fatal("SimpleSAMLphp did not verify our LogoutRequest signature")
			}
			back := hop(b, a.URL+"/users/auth/saml/logout?")
			if back == nil || back.Query().Get("SAMLResponse") == "" {
				t.Fatalf("no LogoutResponse came back: hops %v", b.Hops)
			}
			if signed := back.Query().Get("Signature") != ""; signed != c.signResponse {
				t.Fatalf("LogoutResponse signed = %v, want %v", signed, c.signResponse)
			}
			done := a.doneList()
			if len(done) != 1 {
				t.Fatalf("Logout.Done called %d times", len(done))
			}
			if !c.signResponse {
				if done[0] == nil || page.StatusCode == http.StatusOK {
					t.Fatalf("an unsigned LogoutResponse was accepted: %d %s", page.StatusCode, page.Body)
				}
				return
			}
			if done[0] != nil || page.StatusCode != http.StatusOK || page.Body != "logged out" {
				t.Fatalf("logout: %d %s (Done: %v)", page.StatusCode, page.Body, done[0])
			}
			// SimpleSAMLphp's session is over: the next sign-in asks for the
			// password again.
			if _, cb := sspSignIn(t, b, a, true); cb.StatusCode != http.StatusOK {
				t.Fatalf("sign-in after logout: %d %s", cb.StatusCode, cb.Body)
			}
		})
	}

	// SimpleSAMLphp starts the logout (its initSLO.php): its signed
	// LogoutRequest reaches our route, the OnIdPLogout hook ends the
	// host's session, and our signed LogoutResponse goes back.
	t.Run("IdP-initiated", func(t *testing.T) {
		a := startSSPApp(t, idp, &spKeys, true)
		idp.trustSP(t, a.URL+"/users/auth/saml/metadata", nil,
			map[string]any{"sign.logout": true, "validate.logout": true})
		b := harness.NewBrowser(t)
		if _, cb := sspSignIn(t, b, a, true); cb.StatusCode != http.StatusOK {
			t.Fatalf("sign-in: %d %s (failures %v)", cb.StatusCode, cb.Body, a.failureList())
		}
		id := a.last()
		checkGrace(t, id)
		b.Hops = nil
		logFrom := len(idp.log())
		end := idp.URL + "/logout.php"
		page := b.Get(idp.URL + "/saml2/idp/initSLO.php?" + url.Values{"RelayState": {end}}.Encode())
		toUs := hop(b, a.URL+"/users/auth/saml/logout?")
		if toUs == nil || toUs.Query().Get("SAMLRequest") == "" || toUs.Query().Get("Signature") == "" {
			t.Fatalf("no signed LogoutRequest reached our route: hops %v", b.Hops)
		}
		back := hop(b, idp.URL+"/saml2/idp/SingleLogoutService.php")
		if back == nil || back.Query().Get("SAMLResponse") == "" || back.Query().Get("Signature") == "" {
			t.Fatalf("no signed LogoutResponse went back: hops %v", b.Hops)
		}
		if !strings.Contains(idp.log()[logFrom:], "Validation with key #0 succeeded.") {
			t.Fatal("SimpleSAMLphp did not verify our LogoutResponse signature")
		}
		if page.StatusCode != http.StatusOK || page.URL.String() != end {
			t.Fatalf("logout ended at %s with %d", page.URL, page.StatusCode)
		}
		ended := a.idpLogoutList()
		if len(ended) != 1 || ended[0].NameID != id.SAML.NameID || ended[0].NameIDFormat != samlsp.NameIDEmail ||
			ended[0].SessionIndex != id.SAML.SessionIndex {
			t.Fatalf("OnIdPLogout saw %+v, want the session of %+v", ended, id.SAML)
		}
		if _, cb := sspSignIn(t, b, a, true); cb.StatusCode != http.StatusOK {
			t.Fatalf("sign-in after logout: %d %s", cb.StatusCode, cb.Body)
		}
	})
}

// nameIDOf returns the value and the attributes of the one saml:NameID in
// doc, a SAML message.
func nameIDOf(t *testing.T, doc []byte) (string, map[string]string) {
	t.Helper()
	d := etree.NewDocument()
	if err := d.ReadFromBytes(doc); err != nil {
		t.Fatal(err)
	}
	var found []*etree.Element
	var walk func(el *etree.Element)
	walk = func(el *etree.Element) {
		if el.Tag == "NameID" && el.NamespaceURI() == "urn:oasis:names:tc:SAML:2.0:assertion" {
			found = append(found, el)
		}
		for _, c := range el.ChildElements() {
			walk(c)
		}
	}
	walk(d.Root())
	if len(found) != 1 {
		t.Fatalf("%d NameIDs in\n%s", len(found), doc)
	}
	attrs := map[string]string{}
	for _, a := range found[0].Attr {
		if a.Space == "" && a.Key != "xmlns" {
			attrs[a.Key] = a.Value
		}
	}
	return found[0].Text(), attrs
}

// redirectMessage decodes the SAML message of an HTTP-Redirect binding URL.
func redirectMessage(t *testing.T, u *url.URL, param string) []byte {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(u.Query().Get(param))
	if err != nil {
		t.Fatal(err)
	}
	x, err := io.ReadAll(io.LimitReader(flate.NewReader(bytes.NewReader(raw)), 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// TestSimpleSAMLphpLogoutEchoesNameID: SimpleSAMLphp issues an
// emailAddress NameID (with the SPNameQualifier it adds); our LogoutRequest
// names the user with exactly that NameID, no attribute added or dropped,
// and SimpleSAMLphp ends its session.
func TestSimpleSAMLphpLogoutEchoesNameID(t *testing.T) {
	idp := startSimpleSAMLphp(t, newPair(t, "idp"))
	spKeys := newPair(t, "sp")
	a := startSSPApp(t, idp, &spKeys, true)
	idp.trustSP(t, a.URL+"/users/auth/saml/metadata", nil, map[string]any{"sign.logout": true, "validate.logout": true})
	b := harness.NewBrowser(t)
	raw, cb := sspSignIn(t, b, a, true)
	if cb.StatusCode != http.StatusOK {
		t.Fatalf("sign-in: %d %s", cb.StatusCode, cb.Body)
	}
	issued, issuedAttrs := nameIDOf(t, raw)
	if issued != "grace@example.org" || issuedAttrs["Format"] != samlsp.NameIDEmail {
		t.Fatalf("SimpleSAMLphp issued %q %v", issued, issuedAttrs)
	}
	t.Logf("SimpleSAMLphp's NameID: %q %v", issued, issuedAttrs)
	id := a.last()
	if id.SAML.NameQualifier != issuedAttrs["NameQualifier"] || id.SAML.SPNameQualifier != issuedAttrs["SPNameQualifier"] ||
		id.SAML.SPProvidedID != issuedAttrs["SPProvidedID"] {
		t.Fatalf("Identity.SAML %+v, issued %v", id.SAML, issuedAttrs)
	}

	b.Hops = nil
	page := b.Get(a.URL + "/users/auth/saml/logout")
	toIdP := hop(b, idp.URL+"/saml2/idp/SingleLogoutService.php")
	if toIdP == nil {
		t.Fatalf("no LogoutRequest went to SimpleSAMLphp: hops %v", b.Hops)
	}
	sent, sentAttrs := nameIDOf(t, redirectMessage(t, toIdP, "SAMLRequest"))
	if sent != issued || fmt.Sprint(sentAttrs) != fmt.Sprint(issuedAttrs) {
		t.Fatalf("LogoutRequest NameID %q %v, issued %q %v", sent, sentAttrs, issued, issuedAttrs)
	}
	if done := a.doneList(); page.StatusCode != http.StatusOK || page.Body != "logged out" || len(done) != 1 || done[0] != nil {
		t.Fatalf("logout: %d %s (Done %v)", page.StatusCode, page.Body, done)
	}
	// SimpleSAMLphp's session is over.
	if _, cb := sspSignIn(t, b, a, true); cb.StatusCode != http.StatusOK {
		t.Fatalf("sign-in after logout: %d %s", cb.StatusCode, cb.Body)
	}
}

// sspKey is a key entry of SimpleSAMLphp's SP metadata for cert.
func sspKey(cert *x509.Certificate, signing, encryption bool) map[string]any {
	return map[string]any{"type": "X509Certificate", "signing": signing, "encryption": encryption,
		"X509Certificate": base64.StdEncoding.EncodeToString(cert.Raw)}
}

// TestSimpleSAMLphpKeyRotation plays docs/saml.md's rotation while
// SimpleSAMLphp encrypts every assertion to us (assertion.encryption) and
// verifies every AuthnRequest signature (validate.authnrequest), reading our
// metadata only where the procedure waits for it and after the promotion:
// our SP goes from (old) to (old + new) to (new + retiring old) to (new),
// and every sign-in succeeds, the one after the promotion by the retiring
// key, to which SimpleSAMLphp still encrypts. Promoting without keeping the
// old pair fails that sign-in. Logout at the end is signed with the new key.
func TestSimpleSAMLphpKeyRotation(t *testing.T) {
	idp := startSimpleSAMLphp(t, newPair(t, "idp"))
	oldKeys, newKeys := newPair(t, "sp-old"), newPair(t, "sp-new")
	opts := func(extra map[string]any) map[string]any {
		o := map[string]any{"assertion.encryption": true, "validate.authnrequest": true, "sign.logout": true, "validate.logout": true}
		for k, v := range extra {
			o[k] = v
		}
		return o
	}
	a := startSSPApp(t, idp, &oldKeys, true)
	md := a.URL + "/users/auth/saml/metadata"
	b := harness.NewBrowser(t)
	signIn := func(step string, login bool) []byte {
		t.Helper()
		logFrom := len(idp.log())
		raw, cb := sspSignIn(t, b, a, login)
		if cb.StatusCode != http.StatusOK || cb.Body != "signed in as grace@example.org" {
			t.Fatalf("%s: %d %s (failures %v)", step, cb.StatusCode, cb.Body, a.failureList())
		}
		if !bytes.Contains(raw, []byte("EncryptedAssertion")) {
			t.Fatalf("%s: SimpleSAMLphp did not encrypt", step)
		}
		if !regexp.MustCompile(`Validation with key #\d succeeded\.`).MatchString(idp.log()[logFrom:]) {
			t.Fatalf("%s: SimpleSAMLphp did not verify our AuthnRequest", step)
		}
		return raw
	}

	// (old)
	idp.trustSP(t, md, nil, opts(nil))
	signIn("(old)", true)

	// 1. certificate_new; SimpleSAMLphp still with the old metadata.
	a.configure(&oldKeys, &newKeys, nil, true)
	signIn("step 1, IdP with the old metadata", false)
	// 2. It reads the new metadata: the new certificate for signing only,
	// so it goes on encrypting to the old one.
	idp.trustSP(t, md, nil, opts(nil))
	signIn("step 2, IdP with the new metadata", false)

	// 3. Promotion: SimpleSAMLphp verifies the request signed with the new
	// key, and still encrypts to the old one, which retires and decrypts.
	a.configure(&newKeys, nil, &oldKeys, true)
	signIn("step 3, IdP with the step 2 metadata", false)
	// 4. It reads the metadata again: it encrypts to the new certificate.
	idp.trustSP(t, md, nil, opts(nil))
	signIn("step 4, IdP with the promoted metadata", false)
	// certificate_old goes.
	a.configure(&newKeys, nil, nil, true)
	signIn("(new)", false)
	if n := len(a.failureList()); n != 0 {
		t.Fatalf("failed sign-ins during the rotation: %v", a.failureList())
	}

	// The mistake: promoting without certificate_old while the IdP still
	// encrypts to the old key.
	idp.trustSP(t, md, nil, opts(map[string]any{"keys": []map[string]any{
		sspKey(oldKeys.cert, false, true), sspKey(newKeys.cert, true, false)}}))
	if _, cb := sspSignIn(t, b, a, false); cb.StatusCode != http.StatusBadRequest || len(a.failureList()) != 1 ||
		!strings.Contains(a.failureList()[0].Message, "could not be decrypted") {
		t.Fatalf("an assertion for the retired key: %d %s (failures %v)", cb.StatusCode, cb.Body, a.failureList())
	}

	// Logout, signed with the new key, which SimpleSAMLphp verifies.
	idp.trustSP(t, md, nil, opts(nil))
	b.Hops = nil
	logFrom := len(idp.log())
	if page := b.Get(a.URL + "/users/auth/saml/logout"); page.StatusCode != http.StatusOK || page.Body != "logged out" {
		t.Fatalf("logout: %d %s", page.StatusCode, page.Body)
	}
	if !strings.Contains(idp.log()[logFrom:], "Validation with key #0 succeeded.") {
		t.Fatal("SimpleSAMLphp did not verify our LogoutRequest")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if n := len(a.identities); n != 6 {
		t.Fatalf("%d sign-ins, want 6", n)
	}
}
