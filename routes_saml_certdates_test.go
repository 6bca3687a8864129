package extauth_test

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/samlidp"
	"github.com/extauth/extauth/internal/harness"
	"github.com/extauth/extauth/internal/testkeys"
)

// datedIdP is a fake IdP that signs with a certificate valid from nb to
// na, whatever today is.
func datedIdP(t *testing.T, nb, na time.Time) *samlidp.IdP {
	t.Helper()
	key, _ := testkeys.LendPair(t, "Fake SAML IdP", time.Now())
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "dated IdP"}, NotBefore: nb, NotAfter: na,
		KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	var idp *samlidp.IdP
	harness.Serve(t, func(base string) http.Handler {
		idp, err = samlidp.New(samlidp.Options{BaseURL: base + "/idp", AutoApprove: true, Key: key, Certificate: cert})
		if err != nil {
			t.Fatal(err)
		}
		return idp
	})
	return idp
}

// The certificate dates of an IdP's signing key, per the SAML V2.0
// Metadata Interoperability Profile: a key from metadata that was
// verified (fetched over HTTPS, or a federation's signed aggregate) is
// trusted because the metadata says so, and its certificate's dates do not
// decide; with security.enforce_idp_certificate_dates they do. Expired
// self-signed IdP certificates are common in eduGAIN, and Shibboleth SP,
// SimpleSAMLphp and pysaml2 accept them.
func TestSAMLIdPCertificateDates(t *testing.T) {
	now := time.Now()
	dates := []struct {
		name   string
		nb, na time.Time
	}{
		{"expired", now.AddDate(-3, 0, 0), now.AddDate(-1, 0, 0)},
		{"not yet valid", now.AddDate(0, 1, 0), now.AddDate(3, 0, 0)},
	}
	enforce := func(c *extauth.Config, _ *extauth.Options) {
		c.SAML.Additional.Security.EnforceIdPCertificateDates = true
	}
	for _, d := range dates {
		t.Run("one IdP, "+d.name, func(t *testing.T) {
			idp := datedIdP(t, d.nb, d.na)
			a := newSAMLApp(t, idp, nil)
			b := harness.NewBrowser(t)
			redirect, _, _ := a.authorize(b, nil)
			if resp := a.callback(b, idpForm(t, b, redirect)); resp.StatusCode != http.StatusOK {
				t.Fatalf("by default a key of the metadata verifies whatever its certificate's dates: %d %s", resp.StatusCode, resp.Body)
			}
			if err := a.Auth.Ready(context.Background()); err != nil {
				t.Errorf("Ready: %v", err)
			}

			strict := newSAMLApp(t, idp, enforce)
			b = harness.NewBrowser(t)
			redirect, _, _ = strict.authorize(b, nil)
			resp := strict.callback(b, idpForm(t, b, redirect))
			if resp.StatusCode == http.StatusOK || !strings.Contains(resp.Body, string(extauth.CodeInvalidResponse)) {
				t.Fatalf("with enforce_idp_certificate_dates: %d %s", resp.StatusCode, resp.Body)
			}
			// The callback has fetched the metadata: Ready's first look
			// says why, and a context already done makes it look once
			// instead of waiting for a certificate that never comes.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if err := strict.Auth.Ready(ctx); err == nil || !strings.Contains(err.Error(), "IdP signing certificate") {
				t.Errorf("Ready with the dates enforced and no valid certificate: %v", err)
			}
		})
		t.Run("federation, "+d.name, func(t *testing.T) {
			f := newFederation(t)
			f.A = datedIdP(t, d.nb, d.na)
			f.publish(now.Add(7 * 24 * time.Hour))
			for _, strict := range []bool{false, true} {
				var edit func(*extauth.Config, *extauth.Options)
				if strict {
					edit = enforce
				}
				a := f.start(edit)
				b := harness.NewBrowser(t)
				resp := a.callback(b, idpForm(t, b, a.startAt(b, f.A.EntityID())))
				switch {
				case !strict && resp.StatusCode != http.StatusOK:
					t.Fatalf("a federation IdP's key verifies whatever its certificate's dates: %d %s", resp.StatusCode, resp.Body)
				case strict && (resp.StatusCode == http.StatusOK || !strings.Contains(resp.Body, string(extauth.CodeInvalidResponse))):
					t.Fatalf("with enforce_idp_certificate_dates: %d %s", resp.StatusCode, resp.Body)
				}
			}
		})
	}
}
