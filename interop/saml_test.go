//go:build interop

package interop

import (
	"bytes"
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/internal/fakes/samlidp"
	"github.com/extauth/extauth/internal/harness"
	"github.com/extauth/extauth/providers"
	"github.com/extauth/extauth/samlsp"
)

// pair writes a fresh RSA-2048 key and self-signed certificate as PEM files
// and returns their paths and contents.
type pair struct {
	keyPath, certPath string
	keyPEM, certPEM   string
	key               *rsa.PrivateKey
	cert              *x509.Certificate
}

func newPair(t *testing.T, name string) pair {
	t.Helper()
	key, cert, err := samlidp.NewKeyPair("extauth interop "+name, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p := pair{key: key, cert: cert,
		keyPEM:  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		certPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}))}
	dir := t.TempDir()
	p.keyPath, p.certPath = filepath.Join(dir, name+"-key.pem"), filepath.Join(dir, name+"-cert.pem")
	if err := os.WriteFile(p.keyPath, []byte(p.keyPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.certPath, []byte(p.certPEM), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// startSamlify runs interop/samlify/idp.js and returns its base URL. The
// process ends when the test does.
func startSamlify(t *testing.T, idpKeys pair) string {
	t.Helper()
	return startNode(t, "samlify", "samlify", nil, func(line string) (string, bool) {
		return strings.CutPrefix(line, "listening ")
	}, "idp.js", idpKeys.keyPath, idpKeys.certPath)
}

var formField = regexp.MustCompile(`name="(SAMLResponse|RelayState)" value="([^"]*)"`)

func TestSamlifySignIn(t *testing.T) {
	idpKeys := newPair(t, "idp")
	spKeys := newPair(t, "sp")
	for _, encrypted := range []bool{false, true} {
		t.Run(map[bool]string{false: "signed assertion", true: "encrypted assertion"}[encrypted], func(t *testing.T) {
			idpURL := startSamlify(t, idpKeys)
			var got *extauth.Identity
			var auth *extauth.Auth
			srv := harness.Serve(t, func(base string) http.Handler {
				cfg := &extauth.Config{SAML: extauth.SAMLConfig{
					SPEntityID:     base + "/saml",
					IdPMetadataURL: idpURL + "/metadata",
					Additional: extauth.SAMLAdditionalSettings{
						Certificate: spKeys.certPEM,
						PrivateKey:  extauth.NewSecret(spKeys.keyPEM),
					},
				}}
				var err error
				auth, err = extauth.New(cfg, extauth.Options{BaseURL: base, CookieKey: bytes.Repeat([]byte{9}, 32),
					Logger: slog.New(slog.DiscardHandler),
					OnFailure: func(w http.ResponseWriter, _ *http.Request, err *extauth.Error) {
						t.Logf("sign-in failed: %v", err)
						http.Error(w, string(err.Code), err.Code.HTTPStatus())
					},
					OnSuccess: func(w http.ResponseWriter, _ *http.Request, id *extauth.Identity) {
						got = id
						io.WriteString(w, "signed in")
					}})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { auth.Close() })
				mux := http.NewServeMux()
				auth.Mount(mux)
				return mux
			})
			// Give samlify our SP metadata.
			b := harness.NewBrowser(t)
			md := b.Get(srv.URL + "/users/auth/saml/metadata")
			enc := "0"
			if encrypted {
				enc = "1"
			}
			resp, err := http.Post(idpURL+"/register?encrypt="+enc, "application/xml", strings.NewReader(md.Body))
			if err != nil || resp.StatusCode != http.StatusNoContent {
				t.Fatalf("register: %v %v", resp, err)
			}

			// Wait for our SP to have the IdP metadata, then sign in.
			var start *harness.Response
			deadline := time.Now().Add(10 * time.Second)
			for {
				start = harness.NewBrowser(t).NoFollow().PostForm(srv.URL+"/users/auth/saml", nil)
				if start.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			nb := harness.NewBrowser(t).NoFollow()
			start = nb.PostForm(srv.URL+"/users/auth/saml", nil)
			if start.StatusCode != http.StatusSeeOther {
				t.Fatalf("authorize: %d %s", start.StatusCode, start.Body)
			}
			loc := start.Header.Get("Location")

			// samlify refuses our AuthnRequest once its signature is broken.
			broken := regexp.MustCompile(`Signature=[^&]{8}`).ReplaceAllString(loc, "Signature=AAAAAAAA")
			if r := nb.Get(broken); r.StatusCode != http.StatusBadRequest {
				t.Fatalf("samlify accepted a broken AuthnRequest signature: %d", r.StatusCode)
			}

			page := nb.Get(loc)
			form := url.Values{}
			for _, m := range formField.FindAllStringSubmatch(page.Body, -1) {
				form.Set(m[1], html.UnescapeString(m[2]))
			}
			if page.StatusCode != http.StatusOK || form.Get("SAMLResponse") == "" {
				t.Fatalf("samlify: %d %s", page.StatusCode, page.Body)
			}
			raw, _ := base64.StdEncoding.DecodeString(form.Get("SAMLResponse"))
			if bytes.Contains(raw, []byte("EncryptedAssertion")) != encrypted {
				t.Fatalf("EncryptedAssertion present = %v, want %v", !encrypted, encrypted)
			}
			cb := nb.PostForm(srv.URL+"/users/auth/saml/callback", form)
			if cb.StatusCode != http.StatusOK || got == nil {
				t.Fatalf("callback: %d %s", cb.StatusCode, cb.Body)
			}
			if got.UID != "grace@example.org" || got.Email != "grace@example.org" || got.FirstName != "Grace" ||
				got.LastName != "Hopper" || got.Name != "Grace Hopper" || got.SAML.SessionIndex == "" {
				t.Fatalf("identity = %+v %+v", got, got.SAML)
			}
		})
	}
}

// TestRedirectSignatureVerifiedByOpenSSL checks the HTTP-Redirect binding
// signature of our AuthnRequest with openssl: RSA-SHA256 over exactly
// SAMLRequest=...&RelayState=...&SigAlg=..., as the binding defines it.
func TestRedirectSignatureVerifiedByOpenSSL(t *testing.T) {
	spKeys := newPair(t, "sp")
	idp := fakeIdP(t)
	sp := newSP(t, idp, spKeys)
	tx := &providers.Transaction{ID: "x", Provider: "saml", Expires: time.Now().Add(time.Minute)}
	u, err := sp.Begin(context.Background(), tx)
	if err != nil {
		t.Fatal(err)
	}
	pu, _ := url.Parse(u)
	raw := map[string]string{}
	for _, kv := range strings.Split(pu.RawQuery, "&") {
		k, v, _ := strings.Cut(kv, "=")
		raw[k] = v
	}
	octets := "SAMLRequest=" + raw["SAMLRequest"] + "&RelayState=" + raw["RelayState"] + "&SigAlg=" + raw["SigAlg"]
	sig, err := base64.StdEncoding.DecodeString(pu.Query().Get("Signature"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pub, _ := x509.MarshalPKIXPublicKey(spKeys.cert.PublicKey)
	os.WriteFile(filepath.Join(dir, "pub.pem"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
	os.WriteFile(filepath.Join(dir, "data"), []byte(octets), 0o644)
	os.WriteFile(filepath.Join(dir, "sig"), sig, 0o644)
	out, err := exec.Command("openssl", "dgst", "-sha256", "-verify", filepath.Join(dir, "pub.pem"),
		"-signature", filepath.Join(dir, "sig"), filepath.Join(dir, "data")).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Verified OK") {
		t.Fatalf("openssl: %v %s", err, out)
	}
	// And a changed byte fails, so the check can fail.
	os.WriteFile(filepath.Join(dir, "data"), []byte(octets+"x"), 0o644)
	if out, err := exec.Command("openssl", "dgst", "-sha256", "-verify", filepath.Join(dir, "pub.pem"),
		"-signature", filepath.Join(dir, "sig"), filepath.Join(dir, "data")).CombinedOutput(); err == nil {
		t.Fatalf("openssl verified altered data: %s", out)
	}
}

// TestAuthnRequestVerifiedByXmlsec1 checks our XML-signed AuthnRequest (the
// HTTP-POST binding form) with xmlsec1, trusting only our certificate.
func TestAuthnRequestVerifiedByXmlsec1(t *testing.T) {
	spKeys := newPair(t, "sp")
	idp := fakeIdP(t)
	sp := newSP(t, idp, spKeys)
	tx := &providers.Transaction{ID: "x", Provider: "saml", Expires: time.Now().Add(time.Minute)}
	_, form, err := sp.PostAuthnRequest(context.Background(), tx)
	if err != nil {
		t.Fatal(err)
	}
	x, err := base64.StdEncoding.DecodeString(form.Get("SAMLRequest"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "authnrequest.xml")
	os.WriteFile(file, x, 0o644)
	verify := func(path string) ([]byte, error) {
		return exec.Command("xmlsec1", "--verify", "--enabled-reference-uris", "same-doc",
			"--id-attr:ID", "urn:oasis:names:tc:SAML:2.0:protocol:AuthnRequest",
			"--pubkey-cert-pem", spKeys.certPath, path).CombinedOutput()
	}
	if out, err := verify(file); err != nil || !strings.Contains(string(out), "OK") {
		t.Fatalf("xmlsec1: %v\n%s\n%s", err, out, x)
	}
	if !strings.Contains(string(x), `ID="`+tx.RequestID+`"`) || !strings.Contains(string(x), "rsa-sha256") {
		t.Fatalf("request: %s", x)
	}
	// A changed signed value fails.
	altered := strings.Replace(string(x), tx.RequestID, tx.RequestID+"0", 2)
	os.WriteFile(file, []byte(altered), 0o644)
	if out, err := verify(file); err == nil {
		t.Fatalf("xmlsec1 verified an altered request: %s", out)
	}
	// So does a key that is not ours.
	other := newPair(t, "other")
	os.WriteFile(file, x, 0o644)
	if out, err := exec.Command("xmlsec1", "--verify", "--enabled-reference-uris", "same-doc",
		"--id-attr:ID", "urn:oasis:names:tc:SAML:2.0:protocol:AuthnRequest",
		"--pubkey-cert-pem", other.certPath, file).CombinedOutput(); err == nil {
		t.Fatalf("xmlsec1 verified with another key: %s", out)
	}
}

func fakeIdP(t *testing.T) *samlidp.IdP {
	var idp *samlidp.IdP
	harness.Serve(t, func(base string) http.Handler {
		var err error
		idp, err = samlidp.New(samlidp.Options{BaseURL: base + "/idp", AutoApprove: true})
		if err != nil {
			t.Fatal(err)
		}
		return idp
	})
	return idp
}

func newSP(t *testing.T, idp *samlidp.IdP, keys pair) *samlsp.SP {
	t.Helper()
	sp, err := samlsp.New(samlsp.Config{SPEntityID: "https://app.example/saml", IdPMetadataURL: idp.MetadataURL(),
		CertificatePEM: keys.certPEM, PrivateKeyPEM: keys.keyPEM},
		providers.Env{CallbackURL: "https://app.example/users/auth/saml/callback", HTTPClient: http.DefaultClient,
			Store: extauth.NewMemoryStore(extauth.MemoryStoreOptions{})}, samlsp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	deadline := time.Now().Add(5 * time.Second)
	for !sp.Ready() {
		if time.Now().After(deadline) {
			t.Fatal("IdP metadata never loaded")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return sp
}
