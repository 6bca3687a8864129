//go:build interop

package interop

import (
	"bytes"
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/beevik/etree"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/samlidp"
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
			deadline := time.Now().Add(time.Minute)
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

// TestAuthnRequestVerifiedByXmlsec1 checks the XML signature of the
// AuthnRequest the authorize route sends by HTTP-POST with xmlsec1,
// trusting only our certificate: the request as the browser posts it from
// the route's auto-submitting form.
func TestAuthnRequestVerifiedByXmlsec1(t *testing.T) {
	spKeys := newPair(t, "sp")
	idp := fakeIdP(t)
	var auth *extauth.Auth
	srv := harness.Serve(t, func(base string) http.Handler {
		var err error
		auth, err = extauth.New(&extauth.Config{SAML: extauth.SAMLConfig{SPEntityID: base + "/saml", IdPMetadataURL: idp.MetadataURL(),
			Additional: extauth.SAMLAdditionalSettings{Certificate: spKeys.certPEM, PrivateKey: extauth.NewSecret(spKeys.keyPEM)}}},
			extauth.Options{BaseURL: base, CookieKey: bytes.Repeat([]byte{9}, 32), Logger: slog.New(slog.DiscardHandler),
				SAML:      samlsp.Options{AuthnRequestBinding: samlsp.BindingPOST},
				OnSuccess: func(http.ResponseWriter, *http.Request, *extauth.Identity) {}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { auth.Close() })
		return auth
	})
	var page *harness.Response
	deadline := time.Now().Add(time.Minute)
	for {
		page = harness.NewBrowser(t).NoFollow().PostForm(srv.URL+"/users/auth/saml", nil)
		if page.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	m := regexp.MustCompile(`name="SAMLRequest" value="([^"]+)"`).FindStringSubmatch(page.Body)
	if page.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("authorize: %d %s", page.StatusCode, page.Body)
	}
	x, err := base64.StdEncoding.DecodeString(html.UnescapeString(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "authnrequest.xml")
	os.WriteFile(file, x, 0o644)
	verify := func(certPath, path string) ([]byte, error) {
		return exec.Command("xmlsec1", "--verify", "--enabled-reference-uris", "same-doc",
			"--id-attr:ID", "urn:oasis:names:tc:SAML:2.0:protocol:AuthnRequest",
			"--pubkey-cert-pem", certPath, path).CombinedOutput()
	}
	if out, err := verify(spKeys.certPath, file); err != nil || !strings.Contains(string(out), "OK") {
		t.Fatalf("xmlsec1: %v\n%s\n%s", err, out, x)
	}
	if !strings.Contains(string(x), "rsa-sha256") || !strings.Contains(string(x), "xml-exc-c14n") {
		t.Fatalf("request: %s", x)
	}
	id := regexp.MustCompile(`ID="([^"]+)"`).FindSubmatch(x)
	// A changed signed value fails.
	altered := strings.Replace(string(x), string(id[1]), string(id[1])+"0", 2)
	os.WriteFile(file, []byte(altered), 0o644)
	if out, err := verify(spKeys.certPath, file); err == nil {
		t.Fatalf("xmlsec1 verified an altered request: %s", out)
	}
	// So does a key that is not ours.
	other := newPair(t, "other")
	os.WriteFile(file, x, 0o644)
	if out, err := verify(other.certPath, file); err == nil {
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
	deadline := time.Now().Add(time.Minute)
	for !sp.Ready() {
		if time.Now().After(deadline) {
			t.Fatal("IdP metadata never loaded")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return sp
}

// TestEncryptionCheckedByXmlsec1 decrypts, with independent tools, what the
// fake IdP's encryptor produces for samlsp's TestDecryptionTable, so that
// the table's ciphertexts are standard XML Encryption, not an idiom shared
// by the fake and us. xmlsec1 1.2 decrypts every block cipher, with the key
// inline or named by RetrievalMethod, but knows only RSA-OAEP-MGF1P with
// SHA-1; openssl checks the other OAEP parameters by unwrapping the key
// with them (OAEP fails on any other digest or mask function).
func TestEncryptionCheckedByXmlsec1(t *testing.T) {
	spKeys := newPair(t, "sp")
	idp := fakeIdP(t)
	dir := t.TempDir()
	forge := func(t *testing.T, e samlidp.Encryption) *etree.Element {
		s := idp.DefaultSpec("https://app.example/saml", "https://app.example/acs", "id-x")
		s.EncryptTo, s.Encryption = spKeys.cert, e
		el, err := idp.ForgeElement(s)
		if err != nil {
			t.Fatal(err)
		}
		return el.FindElement("./EncryptedAssertion")
	}
	for _, c := range []string{samlidp.TripleDESCBC, samlidp.AES128CBC, samlidp.AES192CBC, samlidp.AES256CBC, samlidp.AES128GCM, samlidp.AES256GCM} {
		for _, kp := range []samlidp.KeyPlacement{samlidp.KeyInline, samlidp.KeyRetrievalMethod} {
			t.Run(fmt.Sprintf("xmlsec1/%s/%s", path.Base(c), kp), func(t *testing.T) {
				doc, err := samlidp.Serialize(forge(t, samlidp.Encryption{Cipher: c, Key: kp}))
				if err != nil {
					t.Fatal(err)
				}
				file := filepath.Join(dir, "enc.xml")
				os.WriteFile(file, doc, 0o644)
				out, err := exec.Command("xmlsec1", "--decrypt", "--privkey-pem", spKeys.keyPath,
					"--enabled-retrieval-method-uris", "same-doc", "--id-attr:Id", "EncryptedKey", file).CombinedOutput()
				if err != nil || !bytes.Contains(out, []byte("ada@example.org")) || !bytes.Contains(out, []byte("Assertion")) {
					t.Fatalf("xmlsec1: %v\n%s\n%s", err, out, doc)
				}
			})
		}
	}
	for _, tc := range []struct {
		e        samlidp.Encryption
		md, mgf1 string
	}{
		{samlidp.Encryption{KeyTransport: samlidp.RSAOAEPMGF1P}, "sha1", "sha1"},
		{samlidp.Encryption{KeyTransport: samlidp.RSAOAEPMGF1P, OAEPDigest: samlidp.DigestSHA256}, "sha256", "sha1"},
		{samlidp.Encryption{KeyTransport: samlidp.RSAOAEP11}, "sha1", "sha1"},
		{samlidp.Encryption{KeyTransport: samlidp.RSAOAEP11, OAEPDigest: samlidp.DigestSHA256, MGF: samlidp.MGF1SHA256}, "sha256", "sha256"},
		{samlidp.Encryption{KeyTransport: samlidp.RSAOAEP11, OAEPDigest: samlidp.DigestSHA256, MGF: samlidp.MGF1SHA1}, "sha256", "sha1"},
	} {
		t.Run(fmt.Sprintf("openssl/%s/%s/mgf1-%s", path.Base(tc.e.KeyTransport), tc.md, tc.mgf1), func(t *testing.T) {
			tc.e.Cipher = samlidp.AES256GCM
			cv := forge(t, tc.e).FindElement(".//EncryptedKey/CipherData/CipherValue")
			wrapped, err := base64.StdEncoding.DecodeString(cv.Text())
			if err != nil {
				t.Fatal(err)
			}
			in := filepath.Join(dir, "wrapped")
			os.WriteFile(in, wrapped, 0o644)
			unwrap := func(md, mgf1 string) ([]byte, error) {
				return exec.Command("openssl", "pkeyutl", "-decrypt", "-inkey", spKeys.keyPath, "-in", in,
					"-pkeyopt", "rsa_padding_mode:oaep", "-pkeyopt", "rsa_oaep_md:"+md, "-pkeyopt", "rsa_mgf1_md:"+mgf1).Output()
			}
			if key, err := unwrap(tc.md, tc.mgf1); err != nil || len(key) != 32 {
				t.Fatalf("openssl: %v, %d-byte key", err, len(key))
			}
			other := map[string]string{"sha1": "sha256", "sha256": "sha1"}
			if _, err := unwrap(other[tc.md], tc.mgf1); err == nil {
				t.Fatal("openssl unwrapped with another OAEP digest: the check cannot fail")
			}
		})
	}
}
