package extauth_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/beevik/etree"
	"github.com/crewjam/saml"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/samlidp"
	"github.com/extauth/extauth/internal/harness"
	"github.com/extauth/extauth/internal/testkeys"
	"github.com/extauth/extauth/providers"
	"github.com/extauth/extauth/samlsp"
)

// artifactIdP is a fake IdP that answers by artifact, its
// ArtifactResolutionService served over TLS by a second server, with a
// certificate of a test CA, that asks for a client certificate, as IdPs'
// back-channel ports do.
type artifactIdP struct {
	*samlidp.IdP
	ca, server *harness.Cert
	// tls is the back-channel server.
	tls *httptest.Server
}

func newArtifactIdP(t *testing.T) *artifactIdP {
	t.Helper()
	p := &artifactIdP{ca: harness.NewCert(t, "artifact test CA", nil, harness.CA)}
	p.server = harness.NewCert(t, "127.0.0.1", p.ca, harness.TLSServer)
	var h atomic.Pointer[samlidp.IdP]
	p.tls = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if idp := h.Load(); idp != nil {
			idp.ServeHTTP(w, r)
			return
		}
		http.Error(w, "starting", http.StatusServiceUnavailable)
	}))
	p.tls.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{p.server.Cert.Raw}, PrivateKey: p.server.Key}},
		ClientAuth: tls.RequestClientCert}
	// The handshakes the TLS tests make fail are theirs to report.
	p.tls.Config.ErrorLog = log.New(io.Discard, "", 0)
	p.tls.StartTLS()
	t.Cleanup(p.tls.Close)
	key, cert := testkeys.LendPair(t, "Fake SAML IdP", time.Now())
	harness.Serve(t, func(base string) http.Handler {
		idp, err := samlidp.New(samlidp.Options{BaseURL: base + "/idp", AutoApprove: true, Key: key, Certificate: cert,
			ArtifactResolutionURL: p.tls.URL + "/idp/ars"})
		if err != nil {
			t.Fatal(err)
		}
		h.Store(idp)
		p.IdP = idp
		return idp
	})
	return p
}

// client is an HTTP client that trusts the test CA and nothing else.
func (p *artifactIdP) client() *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(p.ca.Cert)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

// newArtifactApp is an app with the SP key pair and response_binding:
// artifact against idp, trusting its back-channel's CA.
func newArtifactApp(t *testing.T, idp *artifactIdP, edit func(*extauth.Config, *extauth.Options)) *samlApp {
	t.Helper()
	certPEM, keyPEM := spKeyPair(t)
	return newSAMLApp(t, idp.IdP, func(c *extauth.Config, o *extauth.Options) {
		c.SAML.Additional.Certificate = certPEM
		c.SAML.Additional.PrivateKey = extauth.NewSecret(keyPEM)
		c.SAML.Additional.ResponseBinding = "artifact"
		o.HTTPClient = idp.client()
		if edit != nil {
			edit(c, o)
		}
	})
}

// spCert is the SP certificate the app was given.
func spCert(t *testing.T, c *extauth.Config) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode([]byte(c.SAML.Additional.Certificate))
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// wantError checks that resp is the JSON failure code.
func wantError(t *testing.T, resp *harness.Response, code providers.Code) {
	t.Helper()
	var out struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(resp.Body), &out); err != nil || out.Error != string(code) {
		t.Fatalf("got %d %s, want %s", resp.StatusCode, resp.Body, code)
	}
}

func TestSAMLArtifactSignIn(t *testing.T) {
	idp := newArtifactIdP(t)
	var cfg *extauth.Config
	a := newArtifactApp(t, idp, func(c *extauth.Config, _ *extauth.Options) { cfg = c })
	b := harness.NewBrowser(t)
	redirect, _, relay := a.authorize(b, nil)
	if rec := idp.LastAuthnRequest(); rec != nil {
		t.Fatalf("the IdP saw a request before the browser went there: %+v", rec)
	}
	resp := b.Get(redirect)
	if resp.StatusCode != http.StatusOK || resp.Body != "signed in as ada@example.org" {
		t.Fatalf("sign-in by artifact: %d %s (hops %v)", resp.StatusCode, resp.Body, b.Hops)
	}
	// The page at the URL that carries the artifact sends no Referer on.
	if rp := resp.Header.Get("Referrer-Policy"); rp != "no-referrer" {
		t.Errorf("callback Referrer-Policy = %q", rp)
	}
	// The AuthnRequest asked for the artifact binding; the browser came
	// back with an artifact, and the RelayState handle, in the query.
	if rec := idp.LastAuthnRequest(); rec == nil || !strings.Contains(string(rec.Raw), `ProtocolBinding="`+saml.HTTPArtifactBinding+`"`) {
		t.Fatalf("AuthnRequest does not ask for HTTP-Artifact: %+v", rec)
	}
	var back *url.URL
	for _, h := range b.Hops {
		if u, _ := url.Parse(h); u != nil && strings.HasSuffix(u.Path, "/users/auth/saml/callback") {
			back = u
		}
	}
	if back == nil || back.Query().Get("SAMLart") == "" || back.Query().Get("RelayState") != relay || back.Query().Get("SAMLResponse") != "" {
		t.Fatalf("callback hop %v", back)
	}
	// One ArtifactResolve, signed with the SP key, over TLS with the SP
	// certificate as the client certificate.
	rs := idp.ArtifactResolves()
	if len(rs) != 1 || !rs[0].Found || !rs[0].Signed || rs[0].Issuer != samlEntityID || rs[0].ClientCertificate == nil ||
		!rs[0].ClientCertificate.Equal(spCert(t, cfg)) {
		t.Fatalf("ArtifactResolves = %+v", rs)
	}
	ids := a.identities()
	if len(ids) != 1 || ids[0].Email != "ada@example.org" || ids[0].SAML.SessionIndex == "" {
		t.Fatalf("identities = %+v", ids)
	}
	// The SP metadata offers the artifact ACS beside the POST one, and
	// artifact single logout.
	md := b.Get(a.URL + "/users/auth/saml/metadata").Body
	for _, want := range []string{`Binding="` + saml.HTTPArtifactBinding + `" Location="` + a.URL + `/users/auth/saml/callback" index="1"`,
		`Binding="` + saml.HTTPPostBinding + `" Location="` + a.URL + `/users/auth/saml/callback" index="0" isDefault="true"`,
		`SingleLogoutService Binding="` + saml.HTTPArtifactBinding + `"`} {
		if !strings.Contains(md, want) {
			t.Errorf("SP metadata lacks %s:\n%s", want, md)
		}
	}
}

// TestSAMLArtifactEncrypted: the Response behind the artifact carries an
// encrypted assertion, decrypted as on the POST binding, and the IdP
// signs only the assertion and the ArtifactResponse.
func TestSAMLArtifactEncrypted(t *testing.T) {
	idp := newArtifactIdP(t)
	idp.Set(func(k *samlidp.Knobs) {
		k.Encryption = &samlidp.Encryption{Cipher: samlidp.AES256GCM}
		k.UnsignedResponse = true
	})
	a := newArtifactApp(t, idp, nil)
	b := harness.NewBrowser(t)
	redirect, _, _ := a.authorize(b, nil)
	if resp := b.Get(redirect); resp.StatusCode != http.StatusOK || resp.Body != "signed in as ada@example.org" {
		t.Fatalf("sign-in: %d %s", resp.StatusCode, resp.Body)
	}
}

// TestSAMLArtifactTLSPair presents a TLS pair of its own, not the SP key
// pair, published in the SP metadata with the next one of a rotation.
func TestSAMLArtifactTLSPair(t *testing.T) {
	idp := newArtifactIdP(t)
	cur := harness.NewCert(t, "extauth artifact client", nil, harness.TLSClient)
	next := harness.NewCert(t, "extauth artifact client next", nil, harness.TLSClient)
	a := newArtifactApp(t, idp, func(c *extauth.Config, _ *extauth.Options) {
		c.SAML.Additional.Artifact = extauth.SAMLArtifact{TLSCertificate: cur.CertPEM, TLSPrivateKey: extauth.NewSecret(cur.KeyPEM),
			TLSCertificateNew: next.CertPEM, TLSPrivateKeyNew: extauth.NewSecret(next.KeyPEM)}
	})
	idp.Set(func(k *samlidp.Knobs) { k.Artifact.RequireClientCertificate, k.Artifact.RequireSigned = true, true })
	b := harness.NewBrowser(t)
	redirect, _, _ := a.authorize(b, nil)
	if resp := b.Get(redirect); resp.StatusCode != http.StatusOK {
		t.Fatalf("sign-in: %d %s", resp.StatusCode, resp.Body)
	}
	if rs := idp.ArtifactResolves(); len(rs) != 1 || rs[0].ClientCertificate == nil || !rs[0].ClientCertificate.Equal(cur.Cert) {
		t.Fatalf("client certificate presented: %+v", rs)
	}
	md := b.Get(a.URL + "/users/auth/saml/metadata").Body
	for _, c := range []*harness.Cert{cur, next} {
		if !strings.Contains(md, base64.StdEncoding.EncodeToString(c.Cert.Raw)) {
			t.Errorf("SP metadata does not publish %s", c.Cert.Subject)
		}
	}
}

// TestSAMLArtifactAttacks plays SECURITY.md's row on the artifact binding
// through the real routes: each attack is refused, and no artifact ever
// appears in the log.
func TestSAMLArtifactAttacks(t *testing.T) {
	logs := &harness.SyncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var seen []string
	idp := newArtifactIdP(t)
	a := newArtifactApp(t, idp, func(_ *extauth.Config, o *extauth.Options) { o.Logger = logger })
	other := newArtifactIdP(t)

	// start begins a sign-in and returns the browser, our request ID and
	// the RelayState handle.
	start := func(t *testing.T) (*harness.Browser, string, string) {
		b := harness.NewBrowser(t)
		_, id, relay := a.authorize(b, nil)
		return b, id, relay
	}
	deliver := func(b *harness.Browser, art, relay string) *harness.Response {
		seen = append(seen, art)
		return b.Get(samlidp.ArtifactURL(a.URL+"/users/auth/saml/callback", art, relay))
	}
	response := func(t *testing.T, p *samlidp.IdP, requestID string) []byte {
		spec := p.DefaultSpec(samlEntityID, a.URL+"/users/auth/saml/callback", requestID)
		x, err := p.Forge(spec)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	resolves := func() int { return len(idp.ArtifactResolves()) }

	t.Run("valid", func(t *testing.T) {
		b, id, relay := start(t)
		if resp := deliver(b, idp.IssueArtifact(response(t, idp.IdP, id)), relay); resp.StatusCode != http.StatusOK {
			t.Fatalf("a genuine artifact was refused: %d %s", resp.StatusCode, resp.Body)
		}
	})
	t.Run("replayed", func(t *testing.T) {
		// The IdP would answer again: the SP alone refuses, and never asks.
		idp.Set(func(k *samlidp.Knobs) { k.Artifact.Reusable = true })
		defer idp.Set(func(k *samlidp.Knobs) { k.Artifact.Reusable = false })
		b, id, relay := start(t)
		art := idp.IssueArtifact(response(t, idp.IdP, id))
		if resp := deliver(b, art, relay); resp.StatusCode != http.StatusOK {
			t.Fatalf("first use: %d %s", resp.StatusCode, resp.Body)
		}
		before := resolves()
		b2, _, relay2 := start(t)
		wantError(t, deliver(b2, art, relay2), providers.CodeReplayed)
		if resolves() != before {
			t.Error("a replayed artifact was sent to the IdP")
		}
	})
	t.Run("another IdP's source ID", func(t *testing.T) {
		b, id, relay := start(t)
		// The other IdP's genuine artifact for a response it made for us.
		art := other.IssueArtifact(response(t, other.IdP, id))
		before, otherBefore := resolves(), len(other.ArtifactResolves())
		wantError(t, deliver(b, art, relay), providers.CodeInvalidResponse)
		if resolves() != before || len(other.ArtifactResolves()) != otherBefore {
			t.Error("an artifact of another IdP was resolved")
		}
	})
	t.Run("mismatched InResponseTo", func(t *testing.T) {
		idp.Set(func(k *samlidp.Knobs) {
			k.Artifact.Mutate = func(ar *etree.Element) { ar.CreateAttr("InResponseTo", "id-someone-elses-resolve") }
		})
		defer idp.Set(func(k *samlidp.Knobs) { k.Artifact.Mutate = nil })
		b, id, relay := start(t)
		wantError(t, deliver(b, idp.IssueArtifact(response(t, idp.IdP, id)), relay), providers.CodeInvalidResponse)
	})
	t.Run("response for another request", func(t *testing.T) {
		b, _, relay := start(t)
		wantError(t, deliver(b, idp.IssueArtifact(response(t, idp.IdP, "id-another-request")), relay), providers.CodeInvalidResponse)
	})
	t.Run("nothing signed", func(t *testing.T) {
		// Neither the ArtifactResponse nor the Response nor the
		// assertion: refused as on the POST binding.
		idp.Set(func(k *samlidp.Knobs) { k.Artifact.Unsigned = true })
		defer idp.Set(func(k *samlidp.Knobs) { k.Artifact.Unsigned = false })
		b, id, relay := start(t)
		spec := idp.DefaultSpec(samlEntityID, a.URL+"/users/auth/saml/callback", id)
		spec.SignAssertion, spec.SignResponse = false, false
		x, err := idp.Forge(spec)
		if err != nil {
			t.Fatal(err)
		}
		wantError(t, deliver(b, idp.IssueArtifact(x), relay), providers.CodeInvalidResponse)
	})
	t.Run("unknown artifact", func(t *testing.T) {
		b, id, relay := start(t)
		art := idp.IssueArtifact(response(t, idp.IdP, id))
		// Resolved once by someone else (the IdP forgets it): the SP gets
		// an empty ArtifactResponse.
		raw, _ := base64.StdEncoding.DecodeString(art)
		raw[43] ^= 1
		wantError(t, deliver(b, base64.StdEncoding.EncodeToString(raw), relay), providers.CodeInvalidResponse)
	})
	t.Run("malformed", func(t *testing.T) {
		b, _, relay := start(t)
		for _, art := range []string{"not base64!", base64.StdEncoding.EncodeToString(make([]byte, 44)), strings.Repeat("A", 400)} {
			wantError(t, deliver(b, art, relay), providers.CodeInvalidResponse)
			b, _, relay = start(t)
		}
	})
	t.Run("huge SOAP answer", func(t *testing.T) {
		idp.Set(func(k *samlidp.Knobs) { k.Artifact.Huge = int(samlsp.DefaultMaxResponseBytes) + 64<<10 })
		defer idp.Set(func(k *samlidp.Knobs) { k.Artifact.Huge = 0 })
		b, id, relay := start(t)
		wantError(t, deliver(b, idp.IssueArtifact(response(t, idp.IdP, id)), relay), providers.CodeInvalidResponse)
	})
	for _, line := range strings.Split(logs.String(), "\n") {
		for _, art := range seen {
			if strings.Contains(line, art) || strings.Contains(line, url.QueryEscape(art)) {
				t.Errorf("an artifact is in the log: %s", line)
			}
		}
	}
	if !strings.Contains(logs.String(), "saml") {
		t.Errorf("nothing was logged: the check above proves nothing:\n%s", logs)
	}
}

// TestSAMLArtifactWantResponseSigned: with want_response_signed an
// ArtifactResponse without the IdP's signature is refused, though the
// assertion inside is signed; without it, the same is accepted.
func TestSAMLArtifactWantResponseSigned(t *testing.T) {
	for _, want := range []bool{false, true} {
		t.Run(map[bool]string{false: "not required", true: "required"}[want], func(t *testing.T) {
			idp := newArtifactIdP(t)
			idp.Set(func(k *samlidp.Knobs) { k.Artifact.Unsigned = true })
			a := newArtifactApp(t, idp, func(c *extauth.Config, _ *extauth.Options) {
				c.SAML.Additional.Artifact.WantResponseSigned = want
			})
			b := harness.NewBrowser(t)
			redirect, _, _ := a.authorize(b, nil)
			resp := b.Get(redirect)
			if !want {
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("sign-in: %d %s", resp.StatusCode, resp.Body)
				}
				return
			}
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.Body, "invalid_response") {
				t.Fatalf("unsigned ArtifactResponse accepted: %d %s", resp.StatusCode, resp.Body)
			}
		})
	}
}

// TestSAMLArtifactBackChannelTLS: the back-channel's TLS server
// certificate must be trusted (by the roots, or pinned), and a slow IdP
// times out.
func TestSAMLArtifactBackChannelTLS(t *testing.T) {
	idp := newArtifactIdP(t)
	stranger := harness.NewCert(t, "127.0.0.1", nil, harness.TLSServer)
	cases := []struct {
		name string
		edit func(*extauth.Config, *extauth.Options)
		want int
	}{
		{"pinned leaf", func(c *extauth.Config, _ *extauth.Options) {
			c.SAML.Additional.Artifact.IdPTLSCertificate = idp.server.CertPEM
		}, http.StatusOK},
		{"pinned CA", func(c *extauth.Config, o *extauth.Options) {
			c.SAML.Additional.Artifact.IdPTLSCertificate = idp.ca.CertPEM
			o.HTTPClient = nil // the system's roots, which do not know the test CA: the pin alone
		}, http.StatusOK},
		{"pinned another certificate", func(c *extauth.Config, _ *extauth.Options) {
			c.SAML.Additional.Artifact.IdPTLSCertificate = stranger.CertPEM
		}, providers.CodeProviderUnavailable.HTTPStatus()},
		{"roots that do not know it", func(_ *extauth.Config, o *extauth.Options) { o.HTTPClient = nil }, providers.CodeProviderUnavailable.HTTPStatus()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newArtifactApp(t, idp, tc.edit)
			b := harness.NewBrowser(t)
			redirect, _, _ := a.authorize(b, nil)
			resp := b.Get(redirect)
			if resp.StatusCode != tc.want {
				t.Fatalf("got %d %s, want %d", resp.StatusCode, resp.Body, tc.want)
			}
			if tc.want != http.StatusOK && !strings.Contains(resp.Body, "TLS certificate is not trusted") {
				t.Errorf("the failure does not say why: %s", resp.Body)
			}
		})
	}
	t.Run("slow IdP", func(t *testing.T) {
		slow := newArtifactIdP(t)
		a := newArtifactApp(t, slow, func(_ *extauth.Config, o *extauth.Options) { o.Timeout = 3 * time.Second })
		slow.Set(func(k *samlidp.Knobs) { k.Artifact.Hang = true })
		b := harness.NewBrowser(t)
		redirect, _, _ := a.authorize(b, nil)
		resp := b.Get(redirect)
		if resp.StatusCode != providers.CodeTimeout.HTTPStatus() || !strings.Contains(resp.Body, string(providers.CodeTimeout)) {
			t.Fatalf("got %d %s, want a time-out", resp.StatusCode, resp.Body)
		}
	})
}

// TestSAMLArtifactLogout: an IdP that sends its logout messages by
// artifact, configured from a secrets file: the LogoutResponse of an
// SP-initiated logout and an IdP's LogoutRequest both come to the single
// logout URL as artifacts, are resolved and checked as on the other
// bindings; a LogoutRequest signed by nobody, in an unsigned
// ArtifactResponse, is refused.
func TestSAMLArtifactLogout(t *testing.T) {
	idp := newArtifactIdP(t)
	idp.Set(func(k *samlidp.Knobs) { k.Artifact.Always = true })
	certPEM, keyPEM := spKeyPair(t)
	client := harness.NewCert(t, "extauth artifact client", nil, harness.TLSClient)
	var done []*extauth.Error
	var ended []extauth.LogoutEvent
	fl := &failureLog{}
	a := newSAMLApp(t, idp.IdP, func(c *extauth.Config, o *extauth.Options) {
		fromSecrets(t, samlSecretsYAML(idp.IdP, certPEM, keyPEM, "")+"  response_binding: artifact\n  artifact:\n"+
			"    tls_certificate: |\n"+indent(indent(indent(client.CertPEM)))+"    tls_private_key: |\n"+indent(indent(indent(client.KeyPEM)))+
			"    idp_tls_certificate: |\n"+indent(indent(indent(idp.ca.CertPEM)))+"    want_response_signed: true\n", fl)(c, o)
		o.HTTPClient = idp.client()
		o.Logout.Session = func(*http.Request, extauth.Provider) (extauth.LogoutSession, bool) {
			return extauth.LogoutSession{NameID: "ada@example.org", NameIDFormat: samlsp.NameIDEmail, SessionIndex: "idx-1"}, true
		}
		o.Logout.Done = func(w http.ResponseWriter, _ *http.Request, err *extauth.Error) {
			done = append(done, err)
			io.WriteString(w, "done")
		}
		o.Logout.OnProviderLogout = func(_ context.Context, e extauth.LogoutEvent) error {
			ended = append(ended, e)
			return nil
		}
	})
	b := harness.NewBrowser(t)
	resp := b.Get(a.URL + "/users/auth/saml/logout")
	if resp.StatusCode != http.StatusOK || len(done) != 1 || done[0] != nil {
		t.Fatalf("SP-initiated logout: %d %s, Done saw %v; %s", resp.StatusCode, resp.Body, done, fl.last())
	}
	if rs := idp.ArtifactResolves(); len(rs) != 1 || !rs[0].Found || rs[0].ClientCertificate == nil || !rs[0].ClientCertificate.Equal(client.Cert) {
		t.Fatalf("ArtifactResolves = %+v", rs)
	}

	slo := a.URL + "/users/auth/saml/logout"
	logoutRequest := func(id string) []byte {
		el := (&saml.LogoutRequest{ID: id, Version: "2.0", IssueInstant: time.Now(), Destination: slo,
			Issuer: &saml.Issuer{Value: idp.EntityID()}, NameID: &saml.NameID{Value: "ada@example.org", Format: samlsp.NameIDEmail}}).Element()
		x, err := samlidp.Serialize(el)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	// The IdP logs Ada out by artifact; the ArtifactResponse is signed,
	// the LogoutRequest inside is not: the former covers it.
	resp = harness.NewBrowser(t).NoFollow().Get(samlidp.ArtifactURL(slo, idp.IssueArtifact(logoutRequest("id-idp-1")), ""))
	if resp.StatusCode != http.StatusSeeOther || len(ended) != 1 || ended[0].Subject != "ada@example.org" {
		t.Fatalf("IdP-initiated logout by artifact: %d %s, ended %+v; %s", resp.StatusCode, resp.Body, ended, fl.last())
	}
	// Neither signed: refused, as an unsigned logout message is on every
	// binding (want_response_signed refuses it first here).
	idp.Set(func(k *samlidp.Knobs) { k.Artifact.Unsigned = true })
	resp = harness.NewBrowser(t).NoFollow().Get(samlidp.ArtifactURL(slo, idp.IssueArtifact(logoutRequest("id-idp-2")), ""))
	if len(ended) != 1 || len(done) != 2 || done[1] == nil || done[1].Code != extauth.CodeInvalidResponse {
		t.Fatalf("unsigned logout by artifact: %d %s, ended %+v, done %v", resp.StatusCode, resp.Body, ended, done)
	}
}

// TestSAMLArtifactUnsolicited: with AllowIDPInitiated an IdP may start a
// sign-in with an artifact alone; its source ID must be the IdP's.
func TestSAMLArtifactUnsolicited(t *testing.T) {
	idp := newArtifactIdP(t)
	other := newArtifactIdP(t)
	a := newArtifactApp(t, idp, func(_ *extauth.Config, o *extauth.Options) { o.SAML.AllowIDPInitiated = true })
	acs := a.URL + "/users/auth/saml/callback"
	for _, tc := range []struct {
		name string
		from *artifactIdP
		want int
	}{{"the IdP", idp, http.StatusOK}, {"another IdP", other, http.StatusBadRequest}} {
		t.Run(tc.name, func(t *testing.T) {
			x, err := tc.from.Forge(tc.from.DefaultSpec(samlEntityID, acs, ""))
			if err != nil {
				t.Fatal(err)
			}
			resp := harness.NewBrowser(t).Get(samlidp.ArtifactURL(acs, tc.from.IssueArtifact(x), ""))
			if resp.StatusCode != tc.want {
				t.Fatalf("got %d %s, want %d", resp.StatusCode, resp.Body, tc.want)
			}
		})
	}
}

// TestSAMLArtifactFederation: in a federation, each IdP's artifacts are
// resolved at its own ArtifactResolutionService (plain http on loopback,
// as the development IdPs serve it); a sign-in started at A refuses B's
// artifact unresolved; an unsolicited artifact is matched to its IdP by
// its source ID among the aggregate's IdPs.
func TestSAMLArtifactFederation(t *testing.T) {
	certPEM, keyPEM := spKeyPair(t)
	f := newFederation(t)
	a := f.start(func(c *extauth.Config, o *extauth.Options) {
		c.SAML.Additional.Certificate = certPEM
		c.SAML.Additional.PrivateKey = extauth.NewSecret(keyPEM)
		c.SAML.Additional.ResponseBinding = "artifact"
		o.SAML.AllowIDPInitiated = true
	})
	acs := a.URL + "/users/auth/saml/callback"
	for _, idp := range []*samlidp.IdP{f.A, f.B} {
		b := harness.NewBrowser(t)
		resp := b.Get(a.startAt(b, idp.EntityID()))
		ids := a.identities()
		if resp.StatusCode != http.StatusOK || ids[len(ids)-1].SAML.IdP != idp.EntityID() || len(idp.ArtifactResolves()) != 1 {
			t.Fatalf("sign-in at %s by artifact: %d %s", idp.EntityID(), resp.StatusCode, resp.Body)
		}
	}
	b := harness.NewBrowser(t)
	redirect := a.startAt(b, f.A.EntityID())
	u, _ := url.Parse(redirect)
	x, err := f.B.Forge(f.B.DefaultSpec(samlEntityID, acs, "id-any"))
	if err != nil {
		t.Fatal(err)
	}
	resp := b.Get(samlidp.ArtifactURL(acs, f.B.IssueArtifact(x), u.Query().Get("RelayState")))
	if resp.StatusCode != http.StatusBadRequest || len(f.B.ArtifactResolves()) != 1 {
		t.Fatalf("B's artifact for a sign-in at A: %d %s, B resolved %d", resp.StatusCode, resp.Body, len(f.B.ArtifactResolves()))
	}
	if x, err = f.B.Forge(f.B.DefaultSpec(samlEntityID, acs, "")); err != nil {
		t.Fatal(err)
	}
	resp = harness.NewBrowser(t).Get(samlidp.ArtifactURL(acs, f.B.IssueArtifact(x), ""))
	ids := a.identities()
	if resp.StatusCode != http.StatusOK || ids[len(ids)-1].SAML.IdP != f.B.EntityID() || !ids[len(ids)-1].Unsolicited {
		t.Fatalf("B's unsolicited artifact: %d %s", resp.StatusCode, resp.Body)
	}
}
