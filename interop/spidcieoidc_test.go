//go:build interop

package interop

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/internal/harness"
	"github.com/extauth/extauth/internal/oidfed"
)

// spidFederation is spid-cie-oidc (Italy's reference implementation of
// OpenID Federation for SPID and CIE, installed from PyPI by
// interop/spidcieoidc/install.sh) serving a trust anchor at its root and a
// SPID OpenID provider under /oidc/op, one Django process on 127.0.0.1.
type spidFederation struct {
	Base string
	// What setup_federation.py made.
	TA              string         `json:"ta"`
	TAJWKS          map[string]any `json:"ta_jwks"`
	OP              string         `json:"op"`
	OPTrustMarkType string         `json:"op_trust_mark_type"`
	RPTrustMarkType string         `json:"rp_trust_mark_type"`
	RPTrustMark     string         `json:"rp_trust_mark"`
	Username        string         `json:"username"`
	Password        string         `json:"password"`
	log             *lockedBuffer
}

const spidDir = "spidcieoidc"

func spidPython(t testing.TB) string {
	t.Helper()
	py, err := filepath.Abs(filepath.Join(spidDir, ".venv", "bin", "python"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(py); err != nil {
		t.Fatalf("spid-cie-oidc is not installed: run interop/spidcieoidc/install.sh (%v)", err)
	}
	return py
}

// startSPIDFederation makes the federation, with rp (our entity
// identifier, whose federation keys are rpJWKS) as a subordinate of the
// anchor holding its trust mark, and serves it until the test ends.
func startSPIDFederation(t *testing.T, rp string, rpJWKS *jose.JSONWebKeySet) *spidFederation {
	t.Helper()
	py := spidPython(t)
	dir := t.TempDir()
	f := &spidFederation{log: &lockedBuffer{}}
	req, err := json.Marshal(map[string]any{"rp": rp, "rp_jwks": rpJWKS.Keys})
	if err != nil {
		t.Fatal(err)
	}
	for attempt := 0; ; attempt++ {
		port := freePort(t)
		f.Base = "http://127.0.0.1:" + port
		env := append(os.Environ(), "SPID_BASE="+f.Base, "SPID_DB="+filepath.Join(dir, fmt.Sprintf("db%d.sqlite3", attempt)), "PYTHONDONTWRITEBYTECODE=1")
		setup := exec.Command(py, "setup_federation.py")
		setup.Dir, setup.Env, setup.Stdin = spidDir, env, bytes.NewReader(req)
		var stderr bytes.Buffer
		setup.Stderr = &stderr
		out, err := setup.Output()
		if err != nil {
			t.Fatalf("setup_federation.py: %v\n%s", err, stderr.String())
		}
		if err := json.Unmarshal(out, f); err != nil {
			t.Fatalf("setup_federation.py wrote %q: %v", out, err)
		}
		f.log = &lockedBuffer{}
		cmd := exec.Command(py, "manage.py", "runserver", "127.0.0.1:"+port, "--noreload")
		cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = spidDir, env, f.log, f.log
		dieWithParent(cmd)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		err = waitFor(f.log, "Starting development server at "+f.Base+"/", exited)
		if err == nil {
			t.Cleanup(func() {
				cmd.Process.Kill()
				<-exited
				if t.Failed() {
					t.Logf("spid-cie-oidc log:\n%s", f.log.String())
				}
			})
			return f
		}
		cmd.Process.Kill()
		<-exited
		if attempt == 2 {
			t.Fatalf("spid-cie-oidc did not start: %v\n%s", err, f.log.String())
		}
	}
}

// waitFor waits until out holds line, failing if the process exits first.
func waitFor(out *lockedBuffer, line string, exited <-chan error) error {
	deadline := time.After(time.Minute)
	for !strings.Contains(out.String(), line) {
		select {
		case err := <-exited:
			return fmt.Errorf("exited: %v", err)
		case <-deadline:
			return errors.New("did not start within a minute")
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

func pemOf(t testing.TB, k any) string {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

func indentBlock(s, pad string) string {
	return pad + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n"+pad) + "\n"
}

// TestSPIDCIEOIDCAutomaticRegistration is issue 43's "done when": a
// secrets file naming our federation key, the trust anchor (its entity
// identifier and keys) and the OP's entity identifier signs in at
// spid-cie-oidc's SPID OpenID provider by automatic registration. Each
// side resolves the other's trust chain to the anchor: we resolve the
// OP's (its metadata under the anchor's policy, its trust mark verified),
// the OP resolves ours from the entity configuration our route serves and
// admits us only with the anchor's trust mark, then verifies our signed
// request object with the keys of our resolved metadata and our
// private_key_jwt assertion (whose aud is its token endpoint, as SPID
// requires), and answers UserInfo as a JWE (RSA-OAEP, A256CBC-HS512) around
// a signed JWT with the claims we asked for.
// spidApp is our application configured for the federation.
type spidApp struct {
	srv  *httptest.Server
	fed  *spidFederation
	logs *lockedBuffer

	mu  sync.Mutex
	got []*extauth.Identity
}

// startSPIDApp serves our application with a secrets file naming our
// keys, the anchor and the OP, and with (withMark) or without the trust
// mark the anchor issued us.
func startSPIDApp(t *testing.T, withMark bool) *spidApp {
	clientKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	fedKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key, err := oidfed.NewKey(fedKey)
	if err != nil {
		t.Fatal(err)
	}
	a := &spidApp{logs: &lockedBuffer{}}
	a.srv = harness.Serve(t, func(base string) http.Handler {
		rp := base + "/users/auth/oidc"
		fed := startSPIDFederation(t, rp, oidfed.JWKS(key))
		a.fed = fed
		jwks, err := json.Marshal(fed.TAJWKS)
		if err != nil {
			t.Fatal(err)
		}
		marks := fmt.Sprintf(`    trust_marks:
      - id: %s
        trust_mark: %s
`, fed.RPTrustMarkType, fed.RPTrustMark)
		if !withMark {
			marks = ""
		}
		src := fmt.Sprintf(`oidc_issuer: %s
oidc_additional_settings:
  private_key: |
%s  client_assertion_audience: token_endpoint
  scope: openid
  acr_values: https://www.spid.gov.it/SpidL2
  claims: '{"userinfo": {"given_name": null, "family_name": null, "email": null, "https://attributes.eid.gov.it/fiscal_number": null}}'
  userinfo_encrypted_response_alg: RSA-OAEP
  userinfo_encrypted_response_enc: A256CBC-HS512
  federation:
    federation_key: |
%s    authority_hints: [%s]
    trust_anchors:
      %s: '%s'
%s    required_trust_marks: [%s]
    organization_name: extauth interop
    contacts: [ops@example.org]
`, fed.OP, indentBlock(pemOf(t, clientKey), "    "), indentBlock(pemOf(t, fedKey), "      "), fed.TA, fed.TA, jwks,
			marks, fed.OPTrustMarkType)
		cfg, err := extauth.ParseConfig([]byte(src))
		if err != nil {
			t.Fatalf("%v\n%s", err, src)
		}
		auth, err := extauth.New(cfg, extauth.Options{
			BaseURL:   base,
			CookieKey: bytes.Repeat([]byte{9}, 32),
			Logger:    slog.New(slog.NewTextHandler(a.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
				a.mu.Lock()
				a.got = append(a.got, id)
				a.mu.Unlock()
				fmt.Fprintf(w, "signed in as %s", id.Name)
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { auth.Close() })
		mux := http.NewServeMux()
		auth.Mount(mux)
		return mux
	})
	return a
}

func TestSPIDCIEOIDCAutomaticRegistration(t *testing.T) {
	a := startSPIDApp(t, true)
	srv, fed, logs := a.srv, a.fed, a.logs
	b := harness.NewBrowser(t)
	login := b.PostForm(srv.URL+"/users/auth/oidc", nil)
	if login.StatusCode != http.StatusOK || !strings.Contains(login.Body, `name="password"`) {
		t.Fatalf("the OP's login page: %s %d\n%s\nour log:\n%s", login.URL, login.StatusCode, login.Body, logs.String())
	}
	action, form := htmlForm(t, login)
	form.Set("username", fed.Username)
	form.Set("password", fed.Password)
	consent := b.PostForm(action, form)
	if consent.StatusCode != http.StatusOK || !strings.Contains(consent.Body, "agree") {
		t.Fatalf("the OP's consent page: %s %d\n%s", consent.URL, consent.StatusCode, consent.Body)
	}
	action, form = htmlForm(t, consent)
	resp := b.PostForm(action, form)
	if resp.Body != "signed in as Antonio Rossi" {
		t.Fatalf("sign-in: %s %d %s\nour log:\n%s", resp.URL, resp.StatusCode, resp.Body, logs.String())
	}
	a.mu.Lock()
	id := a.got[0]
	a.mu.Unlock()
	if id.Email != "antonio@example.it" || id.UID == "" || id.Raw["acr"] != "https://www.spid.gov.it/SpidL2" {
		t.Fatalf("identity %+v", id)
	}
	// The OP resolved our chain from our entity configuration, which it
	// fetched from our route.
	for _, want := range []string{"GET /.well-known/openid-federation", "/fetch?sub="} {
		if !strings.Contains(fed.log.String(), want) {
			t.Errorf("the federation's log lacks %q", want)
		}
	}
}

// Without the anchor's trust mark in our entity configuration, the SPID
// OP does not admit us (OIDCFED_REQUIRED_TRUST_MARKS): it resolves our
// chain, finds no trust mark, and refuses the authorization request; the
// sign-in fails at our callback, no user is asked for anything.
func TestSPIDCIEOIDCRefusesAnRPWithoutTrustMark(t *testing.T) {
	a := startSPIDApp(t, false)
	b := harness.NewBrowser(t)
	resp := b.PostForm(a.srv.URL+"/users/auth/oidc", nil)
	if strings.Contains(resp.Body, `name="password"`) || resp.StatusCode == http.StatusOK {
		t.Fatalf("the OP admitted an RP without its trust mark: %s %d\n%s", resp.URL, resp.StatusCode, resp.Body)
	}
	if !strings.Contains(a.fed.log.String(), "Error during authz request validation for "+a.srv.URL+"/users/auth/oidc: ['The required Trust Marks are not valid']") {
		t.Fatalf("the OP did not refuse our trust chain:\n%s", a.fed.log.String())
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.got) != 0 {
		t.Fatal("signed in")
	}
}
