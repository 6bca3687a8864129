package samlsp

import (
	"crypto/x509"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"bytes"
	"compress/flate"
	"context"
	"encoding/base64"
	"encoding/xml"
	"github.com/beevik/etree"
	"io"
	"net/url"
	"strings"
	"testing"

	"github.com/crewjam/saml"

	"github.com/extauth/extauth/extauthtest/samlidp"
	"github.com/extauth/extauth/providers"
)

// decodeRedirect returns the AuthnRequest carried by an HTTP-Redirect URL.
func decodeRedirect(t *testing.T, u string) (*url.URL, *saml.AuthnRequest, []byte) {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(pu.Query().Get("SAMLRequest"))
	if err != nil {
		t.Fatal(err)
	}
	x, err := io.ReadAll(flate.NewReader(bytes.NewReader(raw)))
	if err != nil {
		t.Fatal(err)
	}
	var req saml.AuthnRequest
	if err := xml.Unmarshal(x, &req); err != nil {
		t.Fatal(err)
	}
	return pu, &req, x
}

func TestAuthnRequest(t *testing.T) {
	f := newFixture(t, withConfig(func(c *Config) {
		c.AuthnContext = "urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport"
		c.Custom = []Param{{"organization", "acme & co"}, {"tenant", "eu"}}
		c.RelayState = "/dashboard?tab=1"
	}), withOptions(func(o *Options) { o.NameIDFormat = NameIDPersistent }))
	tx, u := f.begin(f.sp)
	pu, req, x := decodeRedirect(t, u)
	q := pu.Query()

	if req.ID != tx.RequestID || !strings.HasPrefix(req.ID, "id-") {
		t.Errorf("request ID %q, tx.RequestID %q", req.ID, tx.RequestID)
	}
	if req.Destination != f.idp.SSOURL() || req.AssertionConsumerServiceURL != testACS ||
		req.ProtocolBinding != saml.HTTPPostBinding || req.Issuer.Value != testEntityID {
		t.Errorf("request = %s", x)
	}
	if req.NameIDPolicy == nil || req.NameIDPolicy.Format == nil || *req.NameIDPolicy.Format != NameIDPersistent {
		t.Errorf("NameIDPolicy = %s", x)
	}
	if req.RequestedAuthnContext == nil || req.RequestedAuthnContext.AuthnContextClassRef != "urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport" {
		t.Errorf("RequestedAuthnContext missing: %s", x)
	}
	if q.Get("organization") != "acme & co" || q.Get("tenant") != "eu" {
		t.Errorf("custom parameters: %v", q)
	}
	// RelayState is a short random handle; the destination stays in the
	// sealed transaction.
	if rs := q.Get("RelayState"); rs != tx.Binding || len(rs) > 80 || len(rs) < 22 {
		t.Errorf("RelayState %q, binding %q", rs, tx.Binding)
	}
	if strings.Contains(u, "dashboard") {
		t.Error("the post-login destination travels on the wire")
	}
	if tx.ReturnTo != "/dashboard?tab=1" {
		t.Errorf("ReturnTo = %q", tx.ReturnTo)
	}
	if q.Get("Signature") != "" || q.Get("SigAlg") != "" {
		t.Error("signed without a key pair")
	}
	tx2, _ := f.begin(f.sp)
	if tx2.Binding == tx.Binding || tx2.RequestID == tx.RequestID {
		t.Error("handles or request IDs repeat")
	}
}

func TestAuthnRequestSigned(t *testing.T) {
	f := newFixture(t, withKeyPair, withConfig(func(c *Config) {
		c.Custom = []Param{{"organization", "acme"}}
	}))
	_, cert := testKey(t, 1)
	for name, sso := range map[string]string{
		"metadata SSO URL":            "",
		"override with its own query": "QUERY",
	} {
		t.Run(name, func(t *testing.T) {
			sp := f.sp
			if sso == "QUERY" {
				cfg := f.cfg
				cfg.IdPSSOServiceURL = f.idp.SSOURL() + "?tenant=x&a=b"
				var err error
				sp, err = New(cfg, f.env(f.store), f.opts)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { sp.Close() })
				f.waitReady(sp)
			}
			_, u := f.begin(sp)
			pu, _, _ := decodeRedirect(t, u)
			if pu.Query().Get("SigAlg") != "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256" {
				t.Fatalf("SigAlg = %q", pu.Query().Get("SigAlg"))
			}
			if err := samlidp.VerifyRedirectSignature(pu.RawQuery, "SAMLRequest", cert); err != nil {
				t.Fatalf("signature does not verify: %v", err)
			}
			if sso == "QUERY" && (pu.Query().Get("tenant") != "x" || !strings.HasPrefix(pu.RawQuery, "tenant=x&a=b&SAMLRequest=")) {
				t.Fatalf("query = %s", pu.RawQuery)
			}
			// Tampering with any signed parameter breaks the signature.
			bad := strings.Replace(pu.RawQuery, "RelayState=", "RelayState=x", 1)
			if samlidp.VerifyRedirectSignature(bad, "SAMLRequest", cert) == nil {
				t.Fatal("a changed RelayState still verifies")
			}
		})
	}
}

func TestReturnPaths(t *testing.T) {
	origin := "https://app.example.test"
	for in, want := range map[string]string{
		"/":                              "/",
		"/a/b?c=d#e":                     "/a/b?c=d#e",
		"https://app.example.test/x?y":   "/x?y",
		"https://app.example.test":       "/",
		"//evil.example":                 "",
		"/\\evil.example":                "",
		"/%2F%2Fevil.example":            "",
		"/%5cevil.example":               "",
		"https://evil.example/":          "",
		"https://app.example.test.evil/": "",
		"javascript:alert(1)":            "",
		"http://app.example.test/x":      "",
		"https://user@app.example.test/": "",
		"relative":                       "",
		"/a\nb":                          "",
	} {
		got, ok := SafeReturnPath(in, origin)
		if (want == "") == ok || got != want {
			t.Errorf("SafeReturnPath(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}

	f := newFixture(t)
	tx := newTx()
	tx.ReturnTo = "//evil.example"
	if _, err := f.sp.Begin(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	if tx.ReturnTo != "/" {
		t.Errorf("ReturnTo = %q, want /", tx.ReturnTo)
	}
	_, err := New(Config{SPEntityID: testEntityID, IdPMetadataURL: "https://idp.example/md", RelayState: "https://evil.example/"},
		f.env(f.store), Options{})
	if code(err) != providers.CodeMisconfigured || !strings.Contains(err.Error(), "RelayState") {
		t.Errorf("RelayState https://evil.example accepted: %v", err)
	}
}

func TestKeyPairChecks(t *testing.T) {
	c1, k1 := pemPair(t, 1)
	c2, _ := pemPair(t, 2)
	for name, tc := range map[string]struct{ cert, key, want string }{
		"mismatched":    {c2, k1, "private_key: does not match the certificate"},
		"key missing":   {c1, "", "must be set together"},
		"garbage key":   {c1, "not a key", "private_key: not a PEM private key"},
		"garbage cert":  {"not a cert", k1, "certificate: not a PEM certificate"},
		"small RSA key": {smallPair(t)[0], smallPair(t)[1], "at least 2048 bits"},
	} {
		_, _, err := ParseKeyPair(tc.cert, tc.key)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", name, err, tc.want)
		}
		if err != nil && (strings.Contains(err.Error(), "PRIVATE KEY") || strings.Contains(err.Error(), "BEGIN")) {
			t.Errorf("%s: the error quotes the PEM", name)
		}
	}
	if _, _, err := ParseKeyPair(c1, k1); err != nil {
		t.Fatal(err)
	}
}

func TestPostAuthnRequestSigned(t *testing.T) {
	f := newFixture(t, withKeyPair, withConfig(func(c *Config) { c.Custom = []Param{{"organization", "acme"}} }))
	tx := newTx()
	action, form, err := f.sp.BeginPost(context.Background(), tx)
	if err != nil {
		t.Fatal(err)
	}
	if action != f.idp.SSOURL() || form.Get("RelayState") != tx.Binding || form.Get("organization") != "acme" {
		t.Fatalf("action %s form %v", action, form)
	}
	x, err := base64.StdEncoding.DecodeString(form.Get("SAMLRequest"))
	if err != nil {
		t.Fatal(err)
	}
	doc := etree.NewDocument()
	if err := doc.ReadFromBytes(x); err != nil {
		t.Fatal(err)
	}
	// The schema puts the signature right after the Issuer.
	if kids := doc.Root().ChildElements(); len(kids) < 2 || kids[0].Tag != "Issuer" || kids[1].Tag != "Signature" {
		t.Fatalf("children: %s", x)
	}
	_, cert := testKey(t, 1)
	v := &verifier{certs: []*x509.Certificate{cert}, now: time.Now}
	signed, err := v.verify(doc.Root())
	if err != nil {
		t.Fatalf("enveloped signature: %v", err)
	}
	if signed.SelectAttrValue("ID", "") != tx.RequestID {
		t.Fatalf("signed ID %q, tx %q", signed.SelectAttrValue("ID", ""), tx.RequestID)
	}
}

func TestNoSecretInPrints(t *testing.T) {
	certPEM, keyPEM := pemPair(t, 1)
	cfg := Config{SPEntityID: testEntityID, IdPMetadataURL: "https://idp.example/md", CertificatePEM: certPEM, PrivateKeyPEM: keyPEM}
	f := newFixture(t, withKeyPair)
	var logs bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&logs, nil))
	l.Info("x", "cfg", cfg, "sp", f.sp)
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := testKey(t, 1)
	secretBits := []string{strings.Split(keyPEM, "\n")[1][:20], key.D.String()[:20], fmt.Sprint(key.D)[:20]}
	for _, out := range []string{fmt.Sprintf("%v %+v %#v %s", cfg, cfg, cfg, cfg), fmt.Sprintf("%v %+v %#v %s", f.sp, f.sp, f.sp, f.sp), string(js), logs.String()} {
		for _, s := range secretBits {
			if strings.Contains(out, s) {
				t.Fatalf("secret printed: %s", out)
			}
		}
	}
	if !strings.Contains(fmt.Sprintf("%+v", cfg), "[REDACTED]") {
		t.Fatal("redaction marker missing")
	}
}
