package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/crewjam/saml"
)

// TestCheckSAMLArtifactTLS: with response_binding: artifact, check
// connects to the IdP's ArtifactResolutionService as the strategy will,
// presenting the SP's certificate and checking the server's against the
// pinned one; a server certificate nothing trusts, and metadata without
// the service, fail the provider.
func TestCheckSAMLArtifactTLS(t *testing.T) {
	var mu sync.Mutex
	var presented []*x509.Certificate
	ars := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			presented = append(presented, r.TLS.PeerCertificates[0])
		}
		mu.Unlock()
		http.Error(w, "ArtifactResolve must be POSTed", http.StatusMethodNotAllowed)
	}))
	ars.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
	ars.Config.ErrorLog = log.New(io.Discard, "", 0)
	ars.StartTLS()
	t.Cleanup(ars.Close)
	serverPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ars.Certificate().Raw}))
	sp := spPair()

	run := func(t *testing.T, withARS bool, pin string) result {
		f := newProvidersFixture(t)
		m := idpMetadata{entityID: "https://idp.example.org/saml", sso: []saml.Endpoint{{Binding: saml.HTTPRedirectBinding, Location: f.idp.URL + "/sso"}},
			certs: []*x509.Certificate{sp.cert}}
		ed := m.entity()
		if withARS {
			ed.IDPSSODescriptors[0].SSODescriptor.ArtifactResolutionServices = []saml.IndexedEndpoint{
				{Binding: saml.SOAPBinding, Location: ars.URL + "/ars", Index: 0}}
		}
		f.idp.serve("/metadata", "application/samlmetadata+xml", marshalXML(t, ed))
		file := "saml_sp_entity_id: https://app.example/saml\nsaml_idp_metadata_url: " + f.idp.URL + "/metadata\n" +
			"saml_additional_settings:\n  certificate: |\n" + block(string(sp.certPEM)) + "  private_key: |\n" + block(string(sp.keyPEM)) +
			"  response_binding: artifact\n"
		if pin != "" {
			file += "  artifact:\n    idp_tls_certificate: |\n" + indent(block(pin), "  ")
		}
		return runAt(t, testNow, "check", "-config", writeRaw(t, "artifact.yml", file))
	}

	t.Run("pinned", func(t *testing.T) {
		r := run(t, true, serverPEM)
		if r.code != exitOK {
			t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		for _, want := range []string{"artifact resolution", ars.URL + "/ars", "trusted by artifact.idp_tls_certificate",
			"SHA-256 " + fingerprint(ars.Certificate()), "SHA-256 " + fingerprint(sp.cert), "the service answered HTTP 405"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("check does not say %q:\n%s", want, r.stdout)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if len(presented) == 0 || !presented[len(presented)-1].Equal(sp.cert) {
			t.Errorf("the SP certificate was not presented: %v", presented)
		}
	})
	for _, tc := range []struct {
		name, pin string
		withARS   bool
		want      string
	}{
		{"not trusted", "", true, "artifact resolution service: saml artifact resolution: the identity provider's TLS certificate is not trusted"},
		{"pinned another", string(sp.certPEM), true, "artifact.idp_tls_certificate"},
		{"no service", serverPEM, false, "no ArtifactResolutionService with the SOAP binding"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, tc.withARS, tc.pin)
			if r.code != exitFail || !strings.Contains(r.stdout, tc.want) {
				t.Fatalf("exit %d, want %d and %q:\n%s", r.code, exitFail, tc.want, r.stdout)
			}
		})
	}
}
