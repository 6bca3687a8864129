//go:build interop && linux

package interop

import (
	"crypto/x509"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/extauth/extauth/internal/harness"
	"github.com/extauth/extauth/samlsp"
)

// kcSAMLClient is our SP as a SAML client of Keycloak: its entity ID, ACS
// and single logout URLs; our AuthnRequests and logout messages must be
// signed with cert; assertions are signed and encrypted to cert
// (AES-256-GCM, the key by RSA-OAEP with MGF1-SHA256); the NameID is the
// email address (forced: Keycloak otherwise follows our AuthnRequest's
// unspecified NameIDPolicy); attributes email, givenName and surname.
func kcSAMLClient(base string, cert *x509.Certificate) map[string]any {
	der := base64.StdEncoding.EncodeToString(cert.Raw)
	attribute := func(user, name string) map[string]any {
		return map[string]any{"name": name, "protocol": "saml", "protocolMapper": "saml-user-property-mapper",
			"config": map[string]string{"user.attribute": user, "attribute.name": name, "friendly.name": name, "attribute.nameformat": "Basic"}}
	}
	return map[string]any{
		"clientId": base + "/saml", "enabled": true, "protocol": "saml",
		"frontchannelLogout": true,
		"redirectUris":       []string{base + "/users/auth/saml/*"},
		"attributes": map[string]string{
			"saml.authnstatement":                     "true",
			"saml.server.signature":                   "true",
			"saml.assertion.signature":                "true",
			"saml.signature.algorithm":                "RSA_SHA256",
			"saml_signature_canonicalization_method":  "http://www.w3.org/2001/10/xml-exc-c14n#",
			"saml.client.signature":                   "true",
			"saml.signing.certificate":                der,
			"saml.encrypt":                            "true",
			"saml.encryption.certificate":             der,
			"saml.encryption.algorithm":               "http://www.w3.org/2009/xmlenc11#aes256-gcm",
			"saml.encryption.keyAlgorithm":            "http://www.w3.org/2009/xmlenc11#rsa-oaep",
			"saml.encryption.digestMethod":            "http://www.w3.org/2001/04/xmlenc#sha256",
			"saml.encryption.maskGenerationFunction":  "http://www.w3.org/2009/xmlenc11#mgf1sha256",
			"saml_name_id_format":                     "email",
			"saml_force_name_id_format":               "true",
			"saml.force.post.binding":                 "true",
			"saml_assertion_consumer_url_post":        base + "/users/auth/saml/callback",
			"saml_single_logout_service_url_redirect": base + "/users/auth/saml/logout",
			"saml_single_logout_service_url_post":     base + "/users/auth/saml/logout",
		},
		"protocolMappers": []map[string]any{attribute("email", "email"), attribute("firstName", "givenName"), attribute("lastName", "surname")},
	}
}

// postForms submits, as a browser's script would, the self-posting forms
// that carry a SAML message (the HTTP-POST binding), until a page has
// none.
func postForms(t *testing.T, b *harness.Browser, page *harness.Response) *harness.Response {
	t.Helper()
	for i := 0; i < 5 && (strings.Contains(page.Body, `name="SAMLResponse"`) || strings.Contains(page.Body, `name="SAMLRequest"`)); i++ {
		action, form := htmlForm(t, page)
		page = b.PostForm(action, form)
	}
	return page
}

// testKeycloakSAML: sign-in at Keycloak as a SAML IdP read from its
// descriptor, with our AuthnRequest signed (Keycloak requires it) and the
// assertion signed and encrypted (AES-256-GCM, RSA-OAEP with MGF1-SHA256);
// then single logout started by us (signed both ways), and started by
// Keycloak (its logout page: a LogoutRequest to our route, whose hook
// ends the host's session).
func testKeycloakSAML(t *testing.T, k *keycloak, a *sspApp, keys pair) {
	a.logs = &lockedBuffer{}
	a.metadataURL = k.SAMLDescriptor()
	a.configure(&keys, nil, nil, true)
	b := harness.NewBrowser(t)
	signIn := func(login bool) *harness.Response {
		t.Helper()
		b.Hops = nil
		page := b.PostForm(a.URL+"/users/auth/saml", nil)
		toKC := hop(b, k.Issuer()+"/protocol/saml?")
		if toKC == nil || toKC.Query().Get("SAMLRequest") == "" || toKC.Query().Get("Signature") == "" {
			t.Fatalf("no signed AuthnRequest went to Keycloak: hops %v", b.Hops)
		}
		if login {
			page = kcLogin(t, b, page, k)
		}
		action, form := htmlForm(t, page)
		if action != a.URL+"/users/auth/saml/callback" || form.Get("SAMLResponse") == "" {
			t.Fatalf("Keycloak did not post a SAMLResponse to our callback: %s %s\n%s", page.URL, action, tail(page.Body, 30))
		}
		raw, err := base64.StdEncoding.DecodeString(form.Get("SAMLResponse"))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(xmlAlgorithms(raw, "EncryptionMethod"), " "); !strings.Contains(string(raw), "EncryptedAssertion") ||
			!strings.Contains(got, "xmlenc11#aes256-gcm") || !strings.Contains(got, "xmlenc11#rsa-oaep") {
			t.Errorf("the assertion is not encrypted as configured: %s", got)
		}
		return b.PostForm(action, form)
	}
	if cb := signIn(true); cb.StatusCode != http.StatusOK || cb.Body != "signed in as "+kcEmail {
		t.Fatalf("sign-in: %d %s (failures %v)\nour log:\n%s", cb.StatusCode, cb.Body, a.failureList(), a.logs)
	}
	id := a.last()
	if id.Email != kcEmail || id.FirstName != "Alice" || id.LastName != "Liddell" || id.SAML == nil ||
		id.SAML.NameIDFormat != samlsp.NameIDEmail || id.SAML.SessionIndex == "" {
		t.Fatalf("identity %+v, SAML %+v", id, id.SAML)
	}

	// Single logout started by us: our signed LogoutRequest; Keycloak's
	// signed LogoutResponse back to our route.
	b.Hops = nil
	page := postForms(t, b, b.Get(a.URL+"/users/auth/saml/logout"))
	toKC := hop(b, k.Issuer()+"/protocol/saml?")
	if toKC == nil || toKC.Query().Get("SAMLRequest") == "" || toKC.Query().Get("Signature") == "" {
		t.Fatalf("no signed LogoutRequest went to Keycloak: hops %v", b.Hops)
	}
	if done := a.doneList(); len(done) != 1 || done[0] != nil || page.Body != "logged out" {
		t.Fatalf("logout ended at %s (%d): %s (Done: %v)\nour log:\n%s", page.URL, page.StatusCode, tail(page.Body, 20), done, a.logs)
	}
	// Keycloak's session is over: the next sign-in shows its login page.
	if cb := signIn(true); cb.Body != "signed in as "+kcEmail {
		t.Fatalf("sign-in after logout: %d %s", cb.StatusCode, cb.Body)
	}
	id = a.last()

	// Single logout started at Keycloak: its logout page sends our route a
	// LogoutRequest for the session, and our hook ends it.
	b.Hops = nil
	confirm := b.Get(k.Issuer() + kcEndSessionSub)
	action, form := htmlForm(t, confirm)
	form.Set("confirmLogout", "Logout")
	page = postForms(t, b, b.PostForm(action, form))
	toUs := hop(b, a.URL+"/users/auth/saml/logout")
	if toUs == nil {
		t.Fatalf("no LogoutRequest reached our route: hops %v\n%s", b.Hops, tail(page.Body, 20))
	}
	ended := a.idpLogoutList()
	if len(ended) != 1 || ended[0].NameID != id.SAML.NameID || ended[0].SessionIndex != id.SAML.SessionIndex {
		t.Fatalf("OnIdPLogout saw %+v, want the session of %+v\nour log:\n%s", ended, id.SAML, a.logs)
	}
	if page.StatusCode != http.StatusOK || !strings.HasPrefix(page.URL.String(), k.URL) {
		t.Errorf("Keycloak's logout ended at %s (%d)", page.URL, page.StatusCode)
	}
}
