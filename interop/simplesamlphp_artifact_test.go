//go:build interop

package interop

import (
	"bytes"
	"compress/flate"
	"encoding/base64"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crewjam/saml"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/internal/harness"
)

// startSimpleSAMLphpArtifact runs SimpleSAMLphp as an IdP that answers by
// artifact (saml20.sendartifact, which needs a data store: SQLite through
// PDO, Debian's php-sqlite3), behind a TLS front that requires one of the
// SP's certificates on its ArtifactResolutionService.
func startSimpleSAMLphpArtifact(t *testing.T, idpKeys pair) (*simpleSAMLphp, *tlsFront) {
	t.Helper()
	front := newTLSFront(t, "/saml2/idp/ArtifactResolutionService.php")
	idp := startSimpleSAMLphpWith(t, idpKeys, sspOptions{PublicURL: front.URL, Forward: front.forward, Client: front.client(),
		Config: map[string]any{"store.type": "sql", "store.sql.dsn": "sqlite:" + filepath.Join(t.TempDir(), "store.sqlite")},
		Hosted: map[string]any{"saml20.sendartifact": true}})
	return idp, front
}

// xmlsec1Verifies has xmlsec1 (libxml2's canonicalization, sharing no code
// with ours) verify the ArtifactResponse signature of a SOAP answer with
// the IdP's certificate, and returns whether it holds and what it said.
func xmlsec1Verifies(t *testing.T, soap []byte, idpKeys pair) (bool, string) {
	t.Helper()
	return xmlsec1VerifiesSOAP(t, soap, "ArtifactResponse", idpKeys)
}

// xmlsec1VerifiesSOAP has xmlsec1 verify the signature of the SAML
// protocol message msg in a SOAP envelope with the key of keys.
func xmlsec1VerifiesSOAP(t *testing.T, soap []byte, msg string, keys pair) (bool, string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "answer.xml")
	if err := os.WriteFile(file, soap, 0o600); err != nil {
		t.Fatal(err)
	}
	// Only the IdP's key: a certificate in KeyInfo would be checked as a
	// chain, which a self-signed one fails for reasons of its own.
	out, err := exec.Command("xmlsec1", "--verify", "--enabled-key-data", "rsa", "--id-attr:ID", "urn:oasis:names:tc:SAML:2.0:protocol:"+msg,
		"--pubkey-cert-pem", keys.certPath,
		"--node-xpath", `//*[local-name()="`+msg+`"]/*[local-name()="Signature"]`, file).CombinedOutput()
	return err == nil, string(out)
}

// sspArtifactSignIn signs in at our route through SimpleSAMLphp's login
// form with b and returns our callback's answer and the SAMLRequest it was
// sent, inflated.
func sspArtifactSignIn(t *testing.T, b *harness.Browser, a *sspApp, idp *simpleSAMLphp) (*harness.Response, []byte) {
	t.Helper()
	page := b.PostForm(a.URL+"/users/auth/saml", nil)
	if !isLoginForm(page) {
		t.Fatalf("expected SimpleSAMLphp's login form, got %s (%d):\n%s", page.URL, page.StatusCode, page.Body)
	}
	action, form := htmlForm(t, page)
	form.Set("username", sspUser)
	form.Set("password", sspPassword)
	page = b.PostForm(action, form)
	sso := hop(b, idp.URL+"/saml2/idp/SSOService.php")
	if sso == nil {
		t.Fatalf("no AuthnRequest to SimpleSAMLphp: hops %v", b.Hops)
	}
	raw, _ := base64.StdEncoding.DecodeString(sso.Query().Get("SAMLRequest"))
	req, _ := io.ReadAll(flate.NewReader(bytes.NewReader(raw)))
	return page, req
}

// TestSimpleSAMLphpArtifact signs in through SimpleSAMLphp answering by
// artifact: our AuthnRequest asks for HTTP-Artifact, SimpleSAMLphp sends
// the browser back with SAMLart in the query, and our SP resolves it at
// SimpleSAMLphp's ArtifactResolutionService over TLS with its certificate,
// which the front requires, and its signed ArtifactResolve, which xmlsec1
// verifies with our certificate (SimpleSAMLphp does not check it);
// SimpleSAMLphp signs the ArtifactResponse and the assertion in it, and
// xmlsec1 verifies the former as we do. The
// artifact is SimpleSAMLphp's own (type 0x0004, the SHA-1 of its entity
// ID), resolved once: the same callback URL a second time is refused.
// With assertion.encryption SimpleSAMLphp 1.19 sends an ArtifactResponse
// whose signature does not verify (xmlsec1 says so too), which we refuse.
// Without the certificate the front wants, the resolution fails.
func TestSimpleSAMLphpArtifact(t *testing.T) {
	idpKeys := newPair(t, "idp")
	idp, front := startSimpleSAMLphpArtifact(t, idpKeys)
	spKeys := newPair(t, "sp")
	front.require(spKeys.cert)
	for _, tc := range []struct {
		name    string
		options map[string]any
		// broken: SimpleSAMLphp 1.19 breaks its own ArtifactResponse
		// signature around an encrypted assertion (it signs the
		// EncryptedData's dsig:KeyInfo, then PHP's DOM writes it as
		// ds:KeyInfo, under the ArtifactResponse's xmlns:ds): xmlsec1
		// refuses it as we do.
		broken bool
	}{
		{"signed assertion", nil, false},
		{"encrypted assertion", map[string]any{"assertion.encryption": true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := serveSSPApp(t)
			a.metadataURL, a.client = idp.MetadataURL(), front.client()
			a.edit = func(c *extauth.Config) { c.SAML.Additional.ResponseBinding = "artifact" }
			a.configure(&spKeys, nil, nil, false)
			idp.trustSP(t, a.URL+"/users/auth/saml/metadata", &spKeys, tc.options)
			logFrom := len(idp.log())
			before := len(front.backChannelCerts())
			b := front.browser(t)
			cb, req := sspArtifactSignIn(t, b, a, idp)
			answers := front.backChannelAnswers()
			if len(answers) == 0 {
				t.Fatal("no answer on the back-channel")
			}
			verified, out := xmlsec1Verifies(t, answers[len(answers)-1], idpKeys)
			if verified == tc.broken {
				t.Fatalf("xmlsec1 verifies SimpleSAMLphp's ArtifactResponse: %v, want %v:\n%s", verified, !tc.broken, out)
			}
			if tc.broken {
				fs := errorTexts(a.failureList())
				if cb.StatusCode != http.StatusBadRequest || len(fs) != 1 || !strings.Contains(fs[0], "the ArtifactResponse signature is invalid") {
					t.Fatalf("the broken signature: %d %s, failures %v", cb.StatusCode, cb.Body, fs)
				}
				return
			}
			if cb.StatusCode != http.StatusOK || cb.Body != "signed in as grace@example.org" {
				t.Fatalf("callback: %d %s (failures %v)", cb.StatusCode, cb.Body, errorTexts(a.failureList()))
			}
			if !bytes.Contains(req, []byte(`ProtocolBinding="`+saml.HTTPArtifactBinding+`"`)) {
				t.Fatalf("the AuthnRequest does not ask for HTTP-Artifact:\n%s", req)
			}
			back := hop(b, a.URL+"/users/auth/saml/callback")
			if back == nil || back.Query().Get("SAMLart") == "" || back.Query().Get("RelayState") == "" {
				t.Fatalf("SimpleSAMLphp did not send an artifact to our callback: hops %v", b.Hops)
			}
			certs := front.backChannelCerts()[before:]
			if len(certs) != 1 || certs[0] == nil || !certs[0].Equal(spKeys.cert) {
				t.Fatalf("the back-channel saw client certificates %v, want the SP's once", certs)
			}
			// SimpleSAMLphp 1.19 does not check our ArtifactResolve's
			// signature: xmlsec1 does, with our certificate.
			reqs := front.backChannelRequests()
			if ok, out := xmlsec1VerifiesSOAP(t, reqs[len(reqs)-1], "ArtifactResolve", spKeys); !ok {
				t.Fatalf("xmlsec1 does not verify our ArtifactResolve:\n%s\n%s", out, reqs[len(reqs)-1])
			}
			log := idp.log()[logFrom:]
			for _, want := range []string{"ArtifactResolve", "ArtifactResponse"} {
				if !strings.Contains(log, want) {
					t.Errorf("SimpleSAMLphp's log does not show the %s", want)
				}
			}
			if enc := strings.Contains(log, "EncryptedAssertion"); enc != (tc.options != nil) {
				t.Errorf("EncryptedAssertion in SimpleSAMLphp's messages: %v", enc)
			}
			checkGrace(t, a.last())
			// The browser's artifact again: the transaction is spent,
			// and the artifact would be refused besides.
			if again := b.Get(back.String()); again.StatusCode == http.StatusOK {
				t.Fatalf("the artifact was accepted twice: %s", again.Body)
			}
		})
	}
	t.Run("client certificate refused", func(t *testing.T) {
		a := serveSSPApp(t)
		a.metadataURL, a.client = idp.MetadataURL(), front.client()
		a.edit = func(c *extauth.Config) { c.SAML.Additional.ResponseBinding = "artifact" }
		other := newPair(t, "another sp")
		a.configure(&other, nil, nil, false)
		idp.trustSP(t, a.URL+"/users/auth/saml/metadata", &other, nil)
		cb, _ := sspArtifactSignIn(t, front.browser(t), a, idp)
		if cb.StatusCode == http.StatusOK || len(a.failureList()) != 1 || a.failureList()[0].Code != extauth.CodeProviderUnavailable {
			t.Fatalf("signed in without the certificate the IdP's back-channel wants: %d %s %v", cb.StatusCode, cb.Body, a.failureList())
		}
	})
}

// errorTexts are the failures with their causes.
func errorTexts(errs []*extauth.Error) []string {
	var out []string
	for _, e := range errs {
		s := e.Message
		if e.Err != nil {
			s += ": " + e.Err.Error()
		}
		out = append(out, s)
	}
	return out
}
