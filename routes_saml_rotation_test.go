package extauth_test

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"html"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/crewjam/saml"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/samlidp"
	"github.com/extauth/extauth/internal/harness"
	"github.com/extauth/extauth/samlsp"
)

// SP key rotation as docs/saml.md tells it, through the routes, on a
// rolling deployment of two instances, against IdPs that read the SP
// metadata when they please and pick the certificate they encrypt to each
// in their own way. Every sign-in counts; none may fail.

// samlPair is an SP key pair of the tests.
type samlPair struct {
	cert, key string
	x509      *x509.Certificate
}

func newSAMLPair(t *testing.T) samlPair {
	t.Helper()
	cert, key := spKeyPair(t)
	return samlPair{cert: cert, key: key, x509: parseCertPEM(t, cert)}
}

// b64 is the certificate as SP metadata carries it.
func (p samlPair) b64() string { return base64.StdEncoding.EncodeToString(p.x509.Raw) }

// spSlots are the SP key pairs of one secrets file: certificate (cur),
// certificate_new (next) and certificate_old (old); a zero pair is unset.
type spSlots struct{ cur, next, old samlPair }

func (s spSlots) settings() extauth.SAMLAdditionalSettings {
	return extauth.SAMLAdditionalSettings{
		Certificate: s.cur.cert, PrivateKey: extauth.NewSecret(s.cur.key),
		CertificateNew: s.next.cert, PrivateKeyNew: extauth.NewSecret(s.next.key),
		CertificateOld: s.old.cert, PrivateKeyOld: extauth.NewSecret(s.old.key),
	}
}

// rotatingApp is a fleet that signs in with SAML at idp.
type rotatingApp struct {
	*fleet
	idp *samlidp.IdP
}

func newRotatingApp(t *testing.T, idp *samlidp.IdP, instances int) *rotatingApp {
	return &rotatingApp{fleet: newFleet(t, instances, nil), idp: idp}
}

// deploy restarts instance i with the SP key pairs s.
func (a *rotatingApp) deploy(i int, s spSlots) {
	a.t.Helper()
	a.fleet.deploy(i, &extauth.Config{SAML: extauth.SAMLConfig{SPEntityID: samlEntityID, IdPMetadataURL: a.idp.MetadataURL(), Additional: s.settings()}})
}

// at sends the next requests to instance i.
func (a *rotatingApp) at(i int) *rotatingApp {
	a.route.Store(int32(i))
	return a
}

// metadata is the SP metadata instance i serves now.
func (a *rotatingApp) metadata(i int) string {
	a.t.Helper()
	resp := harness.NewBrowser(a.t).Get(a.at(i).URL + "/users/auth/saml/metadata")
	if resp.StatusCode != http.StatusOK {
		a.t.Fatalf("metadata: %d %s", resp.StatusCode, resp.Body)
	}
	return resp.Body
}

// read has the IdP read the SP metadata from its URL, which instance i
// answers.
func (a *rotatingApp) read(i int) {
	a.t.Helper()
	if err := a.idp.RegisterSP([]byte(a.metadata(i))); err != nil {
		a.t.Fatal(err)
	}
}

// published lists the certificates of instance i's SP metadata by use.
func (a *rotatingApp) published(i int) map[string][]string {
	a.t.Helper()
	var ed saml.EntityDescriptor
	if err := xml.Unmarshal([]byte(a.metadata(i)), &ed); err != nil {
		a.t.Fatal(err)
	}
	return spCerts(a.t, &ed)
}

// started is a sign-in between the IdP's answer and the browser's POST;
// failed says why it could not get that far.
type started struct {
	b      *harness.Browser
	form   url.Values
	failed string
}

// start begins a sign-in at instance i: authorize, then the IdP, which
// checks the AuthnRequest and answers with an encrypted assertion.
func (a *rotatingApp) start(i int) started {
	a.t.Helper()
	b := harness.NewBrowser(a.t)
	resp := b.PostForm(a.at(i).URL+"/users/auth/saml.json", nil)
	var out struct {
		RedirectTo string `json:"redirect_to"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(resp.Body), &out) != nil {
		return started{failed: fmt.Sprintf("authorize at instance %d: %d %s", i, resp.StatusCode, resp.Body)}
	}
	page := b.Get(out.RedirectTo)
	form := url.Values{}
	for _, m := range samlFormField.FindAllStringSubmatch(page.Body, -1) {
		form.Set(m[1], html.UnescapeString(m[2]))
	}
	if page.StatusCode != http.StatusOK || form.Get("SAMLResponse") == "" {
		return started{failed: fmt.Sprintf("the IdP refused the request of instance %d: %d %s", i, page.StatusCode, page.Body)}
	}
	raw, _ := base64.StdEncoding.DecodeString(form.Get("SAMLResponse"))
	if !strings.Contains(string(raw), "EncryptedAssertion") {
		a.t.Fatalf("the IdP did not encrypt the assertion")
	}
	return started{b: b, form: form}
}

// finish posts the IdP's answer to instance i and counts the sign-in.
func (a *rotatingApp) finish(step string, s started, i int) {
	a.t.Helper()
	why := s.failed
	if why == "" {
		resp := s.b.PostForm(a.at(i).URL+"/users/auth/saml/callback", s.form)
		if resp.StatusCode != http.StatusOK || resp.Body != "signed in as ada@example.org" {
			why = fmt.Sprintf("callback at instance %d: %d %s", i, resp.StatusCode, resp.Body)
		}
	}
	a.count(step, why)
}

// idpBehaviour is how an IdP reads the SP metadata and picks the
// certificate it encrypts to.
type idpBehaviour struct {
	name string
	// encryptTo is how it picks the SP's encryption certificate.
	encryptTo samlidp.CertChoice
	// verifies: it verifies the signature of each AuthnRequest.
	verifies bool
	// everySignIn: it reads the SP metadata before each sign-in, from
	// whichever instance answers.
	everySignIn bool
	// beforePromotion: it reads the metadata when the procedure waits
	// for it, after certificate_new is deployed. An IdP that verifies our
	// signatures must, or it refuses those of the promoted key.
	beforePromotion bool
	// usesRetiring: after the promotion, until it reads the metadata
	// again, it encrypts to the retiring certificate.
	usesRetiring bool
}

// round signs in once for each pair of instances, starting at one and
// ending at the other, as a load balancer spreads a browser's requests;
// for an IdP that reads the metadata at every sign-in, once for each
// instance that may answer its read too.
func (a *rotatingApp) round(step string, b idpBehaviour) {
	a.t.Helper()
	n := len(a.instances)
	reads := 1
	if b.everySignIn {
		reads = n
	}
	for i := range reads * n * n {
		if b.everySignIn {
			a.read(i / (n * n))
		}
		a.finish(step, a.start(i/n%n), i%n)
	}
}

// rollOut deploys s to each instance in turn, with a sign-in in flight
// across each restart and a round while the instances differ.
func (a *rotatingApp) rollOut(step string, s spSlots, b idpBehaviour) {
	a.t.Helper()
	a.fleet.rollOut(step, func(i int) { a.deploy(i, s) }, func(i int) func(string) {
		if b.everySignIn {
			a.read(i)
		}
		s := a.start(i)
		return func(step string) { a.finish(step, s, i) }
	}, func(step string) { a.round(step, b) })
}

// TestSAMLKeyRotationThroughRoutes plays docs/saml.md's rotation
// procedure through the routes, on two instances deployed one after the
// other, for IdPs that read the SP metadata late or at every sign-in and
// encrypt to the first, the last or the first-seen certificate: not one
// sign-in fails, and the metadata publishes at each step what the
// procedure says. The retiring pair (certificate_old) is what carries an
// IdP that still encrypts to the old certificate after the promotion;
// publishing the next certificate for signing only is what keeps an IdP
// that takes the newest certificate from encrypting to a key that an
// instance not yet deployed lacks.
func TestSAMLKeyRotationThroughRoutes(t *testing.T) {
	behaviours := []idpBehaviour{
		{name: "encrypts to the certificate it first saw, verifies signatures, reads the metadata late",
			encryptTo: samlidp.PinnedCert, verifies: true, beforePromotion: true, usesRetiring: true},
		{name: "cached the metadata before the rotation, ignores signatures, reads it only after the promotion",
			encryptTo: samlidp.FirstCert, usesRetiring: true},
		{name: "encrypts to the newest certificate, reads the metadata at every sign-in",
			encryptTo: samlidp.LastCert, verifies: true, everySignIn: true},
		{name: "encrypts to the first certificate, reads the metadata at every sign-in",
			encryptTo: samlidp.FirstCert, verifies: true, everySignIn: true},
	}
	pA, pB := newSAMLPair(t), newSAMLPair(t)
	for _, b := range behaviours {
		t.Run(b.name, func(t *testing.T) {
			idp := newSAMLIdP(t)
			idp.Set(func(k *samlidp.Knobs) {
				k.EncryptToCert = b.encryptTo
				k.RequireSignedRequests = b.verifies
				k.IgnoreRequestSignatures = !b.verifies
			})
			a := newRotatingApp(t, idp, 2)
			want := func(step string, enc, sig []samlPair) {
				t.Helper()
				w := map[string][]string{}
				for _, p := range enc {
					w["encryption"] = append(w["encryption"], p.b64())
				}
				for _, p := range sig {
					w["signing"] = append(w["signing"], p.b64())
				}
				for i := range a.instances {
					if got := a.published(i); fmt.Sprint(got) != fmt.Sprint(w) {
						t.Fatalf("%s: instance %d publishes %v, want %v", step, i, got, w)
					}
				}
			}

			// Before: the pair A on both instances, which the IdP has.
			a.deploy(0, spSlots{cur: pA})
			a.deploy(1, spSlots{cur: pA})
			a.read(0)
			a.round("before", b)

			// 1. certificate_new: published for signing, not for
			// encryption.
			a.rollOut("step 1", spSlots{cur: pA, next: pB}, b)
			want("step 1", []samlPair{pA}, []samlPair{pA, pB})
			// 2. The IdP reads the metadata, if it does before the
			// promotion.
			if b.beforePromotion {
				a.read(1)
			}
			a.round("step 2", b)
			// 3. Promotion: B signs; A retires, decrypts, is published for
			// signing only.
			a.rollOut("step 3", spSlots{cur: pB, old: pA}, b)
			want("step 3", []samlPair{pB}, []samlPair{pB, pA})
			if b.usesRetiring && !strings.Contains(a.logs.String(), "the IdP encrypted an assertion to the retiring SP certificate") {
				t.Errorf("no log line says the IdP still encrypts to certificate_old:\n%s", a.logs)
			}
			// 4. The IdP reads the metadata, late.
			a.round("step 3, the IdP has not read the metadata since the promotion", b)
			a.read(0)
			a.round("step 4", b)
			// 5. certificate_old goes.
			a.rollOut("step 5", spSlots{cur: pB}, b)
			want("step 5", []samlPair{pB}, []samlPair{pB})
			a.round("after", b)

			a.noFailures(40)
		})
	}

	// The promotion without certificate_old, as this page said before:
	// an IdP that has not read the metadata since fails every sign-in
	// until it does, with a clear error.
	t.Run("promoted without certificate_old", func(t *testing.T) {
		idp := newSAMLIdP(t)
		a := newRotatingApp(t, idp, 1)
		a.deploy(0, spSlots{cur: pA})
		a.read(0)
		a.deploy(0, spSlots{cur: pA, next: pB})
		a.read(0)
		a.deploy(0, spSlots{cur: pB})
		a.finish("promoted", a.start(0), 0)
		if len(a.failures) != 1 || !strings.Contains(a.failures[0], "the encrypted assertion could not be decrypted") {
			t.Fatalf("failures %q", a.failures)
		}
	})

	// Promoting before the IdP has the new certificate, with an IdP that
	// verifies our signatures: it refuses the request signed with the key
	// it does not know.
	t.Run("promoted before the IdP read the metadata", func(t *testing.T) {
		idp := newSAMLIdP(t)
		idp.Set(func(k *samlidp.Knobs) { k.RequireSignedRequests = true })
		a := newRotatingApp(t, idp, 1)
		a.deploy(0, spSlots{cur: pA})
		a.read(0)
		a.deploy(0, spSlots{cur: pA, next: pB})
		a.deploy(0, spSlots{cur: pB, old: pA})
		if s := a.start(0); !strings.Contains(s.failed, "the IdP refused the request") || !strings.Contains(s.failed, "signature") {
			t.Fatalf("an IdP without the new certificate: %+v", s)
		}
	})
}

// TestSAMLRetiringKeyPairValidated: certificate_old and private_key_old get
// the checks of the current pair, each problem naming its setting, and
// need a current pair that replaced them; a pair cannot be retiring and
// next at once. A retiring pair that is the current one is no problem:
// the SP warns and publishes it once.
func TestSAMLRetiringKeyPairValidated(t *testing.T) {
	cur, next, old := newSAMLPair(t), newSAMLPair(t), newSAMLPair(t)
	const (
		certOld = "saml_additional_settings.certificate_old"
		keyOld  = "saml_additional_settings.private_key_old"
	)
	cases := []struct {
		name   string
		s      spSlots
		keyOld string // private_key_old when it differs from s.old.key
		want   []string
		reason string
	}{
		{name: "valid", s: spSlots{cur: cur, old: old}},
		{name: "valid, with the next pair of another rotation", s: spSlots{cur: cur, next: next, old: old}},
		{name: "the current pair", s: spSlots{cur: cur, old: cur}},
		{name: "mismatched", s: spSlots{cur: cur, old: old}, keyOld: cur.key, want: []string{keyOld}, reason: "does not match the public key of certificate_old"},
		{name: "only certificate_old", s: spSlots{cur: cur, old: samlPair{cert: old.cert}}, want: []string{keyOld}, reason: "is missing (certificate_old is set"},
		{name: "only private_key_old", s: spSlots{cur: cur, old: samlPair{key: old.key}}, want: []string{certOld}, reason: "is missing (private_key_old is set"},
		{name: "not PEM", s: spSlots{cur: cur, old: samlPair{cert: "MIIB", key: old.key}}, want: []string{certOld}, reason: "PEM block of type CERTIFICATE"},
		{name: "no current pair", s: spSlots{old: old}, want: []string{certOld}, reason: "there is no current one"},
		{name: "the next pair", s: spSlots{cur: cur, next: next, old: next}, want: []string{certOld}, reason: "cannot be retiring and next at once"},
	}
	for _, c := range cases {
		a := c.s.settings()
		if c.keyOld != "" {
			a.PrivateKeyOld = extauth.NewSecret(c.keyOld)
		}
		cfg := &extauth.Config{SAML: extauth.SAMLConfig{SPEntityID: "https://app.example.org/saml", IdPMetadataURL: "https://idp.example.org/md", Additional: a}}
		err := cfg.Validate()
		if c.want == nil {
			cert, key, oerr := a.OldKeyPair()
			if err != nil || oerr != nil || cert == nil || key == nil || !key.PublicKey.Equal(cert.PublicKey) {
				t.Errorf("%s: %v, OldKeyPair %v", c.name, err, oerr)
			}
			continue
		}
		keys := problemKeys(t, err)
		if fmt.Sprint(keys) != fmt.Sprint(c.want) || !strings.Contains(err.Error(), c.reason) {
			t.Errorf("%s: keys %v, err %v; want %v %q", c.name, keys, err, c.want, c.reason)
		}
		if strings.Contains(err.Error(), "PRIVATE KEY") || strings.Contains(err.Error(), old.key[40:80]) {
			t.Errorf("%s: the error quotes a key: %v", c.name, err)
		}
	}

	// The strategy checks the same when given a Config that skipped
	// Validate.
	for _, c := range []struct {
		cfg  samlsp.Config
		want string
	}{
		{samlsp.Config{CertificatePEM: cur.cert, PrivateKeyPEM: cur.key, CertificateOldPEM: old.cert, PrivateKeyOldPEM: cur.key},
			"saml_additional_settings.private_key_old: does not match certificate_old"},
		{samlsp.Config{CertificateOldPEM: old.cert, PrivateKeyOldPEM: old.key},
			"saml_additional_settings.certificate_old: the retiring key pair needs a current one"},
		{samlsp.Config{CertificatePEM: cur.cert, PrivateKeyPEM: cur.key, CertificateNewPEM: next.cert, PrivateKeyNewPEM: next.key,
			CertificateOldPEM: next.cert, PrivateKeyOldPEM: next.key}, "cannot be retiring and next at once"},
	} {
		c.cfg.SPEntityID, c.cfg.IdPMetadataURL = samlEntityID, "https://idp.example.org/md"
		if _, err := samlsp.New(c.cfg, testSAMLEnv(), samlsp.Options{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("samlsp.New: %v, want %q", err, c.want)
		}
	}

	// The current pair as certificate_old: a warning, and nothing retires.
	var logs syncBuffer
	env := testSAMLEnv()
	env.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	sp, err := samlsp.New(samlsp.Config{SPEntityID: samlEntityID, IdPMetadataURL: "https://idp.example.org/md",
		CertificatePEM: cur.cert, PrivateKeyPEM: cur.key, CertificateOldPEM: cur.cert, PrivateKeyOldPEM: cur.key}, env, samlsp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "certificate_old holds the current key pair; nothing retires") {
		t.Errorf("no warning:\n%s", logs.String())
	}
	if uses := sp.CertificateExpiries(); len(uses) != 1 || uses[0].Use != samlsp.CertUseSignDecrypt {
		t.Errorf("certificates %+v", uses)
	}
}

// TestSAMLKeyRotationPerTenant: a tenant's secrets give it its own
// certificate_old; its metadata route publishes it for signing only, its
// SP decrypts what the IdP still encrypts to it, and the log line that
// says so names the tenant. The other tenant is not rotating.
func TestSAMLKeyRotationPerTenant(t *testing.T) {
	pA, pB := newSAMLPair(t), newSAMLPair(t)
	ta := newTenantApp(t, []string{"a", "b"}, func(ta *tenantApp, _ *extauth.Options) {
		pem := func(s string) string { return "|\n" + indent(indent(indent(s))) }
		file := "tenants:\n" +
			"  a:\n    saml_sp_entity_id: https://a.example.test/saml\n    saml_idp_metadata_url: " + ta.IdP.MetadataURL() + "\n" +
			"    saml_additional_settings:\n" +
			"      certificate: " + pem(pB.cert) + "      private_key: " + pem(pB.key) +
			"      certificate_old: " + pem(pA.cert) + "      private_key_old: " + pem(pA.key) +
			"  b:\n    saml_sp_entity_id: https://b.example.test/saml\n    saml_idp_metadata_url: " + ta.IdP.MetadataURL() + "\n" +
			"    saml_additional_settings:\n" +
			"      certificate: " + pem(pA.cert) + "      private_key: " + pem(pA.key)
		cfg, err := extauth.ParseConfig([]byte(file), extauth.LookupEnv(nil))
		if err != nil {
			t.Fatal(err)
		}
		ta.cfg = cfg
	})
	b := ta.browser()
	for tn, want := range map[string]map[string][]string{
		"a": {"encryption": {pB.b64()}, "signing": {pB.b64(), pA.b64()}},
		"b": {"encryption": {pA.b64()}, "signing": {pA.b64()}},
	} {
		md := b.Get(ta.url(tn, "/users/auth/saml/metadata"))
		var ed saml.EntityDescriptor
		if err := xml.Unmarshal([]byte(md.Body), &ed); err != nil {
			t.Fatal(err)
		}
		if got := spCerts(t, &ed); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("tenant %s publishes %v, want %v", tn, got, want)
		}
		ta.registerSAML(b, tn)
	}
	// The IdP still encrypts to A, as it did before tenant a promoted B.
	ta.IdP.Set(func(k *samlidp.Knobs) { k.EncryptTo = pA.x509 })
	for _, tn := range []string{"a", "b"} {
		form := ta.samlStart(b, tn)
		if resp := b.PostForm(ta.url(tn, "/users/auth/saml/callback"), form); resp.StatusCode != http.StatusOK || resp.Body != "signed in at "+tn {
			t.Fatalf("tenant %s: %d %s\n%s", tn, resp.StatusCode, resp.Body, ta.Logs)
		}
	}
	line := logLine(t, ta.Logs.String(), "the IdP encrypted an assertion to the retiring SP certificate")
	if !strings.Contains(line, "tenant=a") || !strings.Contains(line, "sha256=") {
		t.Errorf("log line %s", line)
	}
	if n := strings.Count(ta.Logs.String(), "retiring SP certificate"); n != 1 {
		t.Errorf("%d log lines about the retiring certificate, want 1 (tenant b has none)", n)
	}
}
