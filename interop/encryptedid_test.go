//go:build interop

package interop

import (
	"bytes"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/extauth/extauth/internal/harness"
)

// TestSimpleSAMLphpEncryptedNameID: SimpleSAMLphp set to encrypt NameIDs
// for our SP (nameid.encryption) sends the Subject's NameID as an
// EncryptedID (xmlseclibs encrypting it), which we decrypt; our
// SP-initiated LogoutRequest then carries it back as an EncryptedID, which
// xmlsec1 decrypts with the IdP's key and SimpleSAMLphp accepts; its
// IdP-initiated LogoutRequest carries an EncryptedID too, which ends the
// host's session for the NameID it holds.
func TestSimpleSAMLphpEncryptedNameID(t *testing.T) {
	idpKeys := newPair(t, "idp")
	idp := startSimpleSAMLphp(t, idpKeys)
	spKeys := newPair(t, "sp")
	a := startSSPApp(t, idp, &spKeys, true)
	idp.trustSP(t, a.URL+"/users/auth/saml/metadata", nil,
		map[string]any{"nameid.encryption": true, "sign.logout": true, "validate.logout": true})
	b := harness.NewBrowser(t)
	raw, cb := sspSignIn(t, b, a, true)
	if cb.StatusCode != http.StatusOK {
		t.Fatalf("sign-in: %d %s (failures %v)", cb.StatusCode, cb.Body, a.failureList())
	}
	if !bytes.Contains(raw, []byte("EncryptedID")) || regexp.MustCompile(`NameID[^>]*>grace@`).Match(raw) {
		t.Fatalf("SimpleSAMLphp did not encrypt the NameID:\n%s", raw)
	}
	t.Logf("SimpleSAMLphp encrypted the NameID with %q", xmlAlgorithms(raw, "EncryptionMethod"))
	id := a.last()
	checkGrace(t, id)
	if !id.SAML.NameIDEncrypted {
		t.Fatal("Identity.SAML.NameIDEncrypted is false")
	}

	// SP-initiated: the LogoutRequest names Grace by an EncryptedID.
	b.Hops = nil
	page := b.Get(a.URL + "/users/auth/saml/logout")
	toIdP := hop(b, idp.URL+"/saml2/idp/SingleLogoutService.php")
	if toIdP == nil {
		t.Fatalf("no LogoutRequest went to SimpleSAMLphp: hops %v", b.Hops)
	}
	lr := redirectMessage(t, toIdP, "SAMLRequest")
	if !bytes.Contains(lr, []byte("EncryptedID")) || bytes.Contains(lr, []byte("grace@example.org")) {
		t.Fatalf("our LogoutRequest does not carry the NameID encrypted:\n%s", lr)
	}
	file := filepath.Join(t.TempDir(), "logout-request.xml")
	if err := os.WriteFile(file, lr, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("xmlsec1", "--decrypt", "--privkey-pem", idpKeys.keyPath, file).CombinedOutput()
	if err != nil || !regexp.MustCompile(`<saml:NameID [^>]*Format="urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress"[^>]*>grace@example.org</saml:NameID>`).Match(out) {
		t.Fatalf("xmlsec1 could not read our EncryptedID: %v\n%s", err, out)
	}
	if done := a.doneList(); len(done) != 1 || done[0] != nil || page.StatusCode != http.StatusOK || page.Body != "logged out" {
		t.Fatalf("logout: %d %s (Done %v)", page.StatusCode, page.Body, done)
	}

	// IdP-initiated: SimpleSAMLphp's LogoutRequest names Grace by an
	// EncryptedID.
	if _, cb := sspSignIn(t, b, a, true); cb.StatusCode != http.StatusOK {
		t.Fatalf("second sign-in: %d %s", cb.StatusCode, cb.Body)
	}
	b.Hops = nil
	end := idp.URL + "/logout.php"
	page = b.Get(idp.URL + "/saml2/idp/initSLO.php?" + url.Values{"RelayState": {end}}.Encode())
	toUs := hop(b, a.URL+"/users/auth/saml/logout?")
	if toUs == nil {
		t.Fatalf("no LogoutRequest reached our route: hops %v", b.Hops)
	}
	if m := redirectMessage(t, toUs, "SAMLRequest"); !bytes.Contains(m, []byte("EncryptedID")) || bytes.Contains(m, []byte("grace@")) {
		t.Fatalf("SimpleSAMLphp's LogoutRequest does not carry an EncryptedID:\n%s", m)
	}
	ended := a.idpLogoutList()
	if page.StatusCode != http.StatusOK || len(ended) != 1 || ended[0].NameID != "grace@example.org" || !ended[0].NameIDEncrypted ||
		!strings.HasPrefix(page.URL.String(), end) {
		t.Fatalf("IdP-initiated logout ended at %s (%d); OnIdPLogout saw %+v", page.URL, page.StatusCode, ended)
	}
}
