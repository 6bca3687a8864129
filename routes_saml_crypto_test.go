package extauth_test

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/des"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beevik/etree"
	"github.com/crewjam/saml"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/samlidp"
	"github.com/extauth/extauth/internal/harness"
	"github.com/extauth/extauth/internal/loadtest"
	"github.com/extauth/extauth/samlsp"
)

// failureLog is a slog handler that keeps the code and cause of every
// failed sign-in the routes log: what a host that logs or shows
// err.Error() would see.
type failureLog struct {
	mu   sync.Mutex
	errs []string
	warn []string
}

func (f *failureLog) Enabled(context.Context, slog.Level) bool { return true }
func (f *failureLog) WithAttrs([]slog.Attr) slog.Handler       { return f }
func (f *failureLog) WithGroup(string) slog.Handler            { return f }
func (f *failureLog) Handle(_ context.Context, r slog.Record) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	line := r.Message
	r.Attrs(func(a slog.Attr) bool {
		line += fmt.Sprintf(" %s=%v", a.Key, a.Value.Any())
		return true
	})
	if r.Message == "extauth: sign-in failed" {
		f.errs = append(f.errs, line)
	}
	if r.Level >= slog.LevelWarn {
		f.warn = append(f.warn, line)
	}
	return nil
}

func (f *failureLog) last() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.errs) == 0 {
		return ""
	}
	return f.errs[len(f.errs)-1]
}

func (f *failureLog) warnings() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.warn)
}

// cbcAssertion is an EncryptedAssertion the test encrypts itself, as an
// IdP that encrypts with CBC sends it, so that it knows the padding and can
// alter the ciphertext exactly as an attacker who captured it would.
type cbcAssertion struct {
	alg     string
	bs      int
	wrapped []byte
	ct      []byte // the IV, then the ciphertext
	pad     int    // padding bytes at the end of the plaintext
}

func encryptCBC(t *testing.T, alg string, plain []byte, to *x509.Certificate) *cbcAssertion {
	t.Helper()
	var cek []byte
	var block cipher.Block
	var err error
	switch alg {
	case samlidp.AES256CBC:
		cek = make([]byte, 32)
		rand.Read(cek)
		block, err = aes.NewCipher(cek)
	case samlidp.TripleDESCBC:
		cek = make([]byte, 24)
		rand.Read(cek)
		block, err = des.NewTripleDESCipher(cek)
	default:
		t.Fatalf("no CBC cipher %s", alg)
	}
	if err != nil {
		t.Fatal(err)
	}
	bs := block.BlockSize()
	pad := bs - len(plain)%bs
	ct := make([]byte, bs+len(plain)+pad)
	rand.Read(ct)
	copy(ct[bs:], plain)
	ct[len(ct)-1] = byte(pad)
	cipher.NewCBCEncrypter(block, ct[:bs]).CryptBlocks(ct[bs:], ct[bs:])
	wrapped, err := rsa.EncryptOAEP(sha1.New(), rand.Reader, to.PublicKey.(*rsa.PublicKey), cek, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &cbcAssertion{alg: alg, bs: bs, wrapped: wrapped, ct: ct, pad: pad}
}

// element is the EncryptedAssertion carrying ct with the content key.
func (c *cbcAssertion) element(ct []byte) string {
	return `<saml:EncryptedAssertion><xenc:EncryptedData xmlns:xenc="http://www.w3.org/2001/04/xmlenc#" ` +
		`Type="http://www.w3.org/2001/04/xmlenc#Element"><xenc:EncryptionMethod Algorithm="` + c.alg + `"/>` +
		`<ds:KeyInfo xmlns:ds="http://www.w3.org/2000/09/xmldsig#"><xenc:EncryptedKey>` +
		`<xenc:EncryptionMethod Algorithm="http://www.w3.org/2001/04/xmlenc#rsa-oaep-mgf1p"/>` +
		`<xenc:CipherData><xenc:CipherValue>` + base64.StdEncoding.EncodeToString(c.wrapped) + `</xenc:CipherValue></xenc:CipherData>` +
		`</xenc:EncryptedKey></ds:KeyInfo><xenc:CipherData><xenc:CipherValue>` + base64.StdEncoding.EncodeToString(ct) +
		`</xenc:CipherValue></xenc:CipherData></xenc:EncryptedData></saml:EncryptedAssertion>`
}

// lastByte returns the ciphertext altered, by the byte of the block before
// the last, so that the plaintext's last byte (the padding count) is last:
// the block before the last is garbled, as any such change leaves it.
func (c *cbcAssertion) lastByte(last byte) []byte {
	ct := bytes.Clone(c.ct)
	ct[len(ct)-c.bs-1] ^= byte(c.pad) ^ last
	return ct
}

// unsignedResponse wraps an EncryptedAssertion in the Response an IdP that
// signs only the assertion sends: nothing the SP can verify covers the
// ciphertext, which is what makes a CBC oracle exploitable.
func unsignedResponse(idp *samlidp.IdP, acs, requestID, encrypted string) []byte {
	id := make([]byte, 16)
	rand.Read(id)
	return []byte(fmt.Sprintf(`<samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" `+
		`xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" ID="id-%x" Version="2.0" IssueInstant="%s" `+
		`Destination="%s" InResponseTo="%s"><saml:Issuer>%s</saml:Issuer><samlp:Status>`+
		`<samlp:StatusCode Value="urn:oasis:names:tc:SAML:2.0:status:Success"/></samlp:Status>%s</samlp:Response>`,
		id, time.Now().UTC().Format("2006-01-02T15:04:05Z"), acs, requestID, idp.EntityID(), encrypted))
}

// sizedAssertion returns the assertion the IdP signs for requestID,
// serialized alone with the namespaces it uses declared on it, grown to
// exactly size bytes by a group-membership attribute, as a directory that
// sends every group a user is in does.
func sizedAssertion(t *testing.T, idp *samlidp.IdP, acs, requestID string, size int) []byte {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Second)
	build := func(groups, extra int) []byte {
		s := idp.DefaultSpecAt(samlEntityID, acs, requestID, now)
		var vals []saml.AttributeValue
		for i := range groups {
			vals = append(vals, saml.AttributeValue{Type: "xs:string", Value: fmt.Sprintf("cn=group-%05d,ou=groups,dc=example,dc=org", i)})
		}
		vals = append(vals, saml.AttributeValue{Type: "xs:string", Value: strings.Repeat("x", extra)})
		st := &s.Assertion.AttributeStatements[0]
		st.Attributes = append(st.Attributes, saml.Attribute{Name: "urn:oid:1.3.6.1.4.1.5923.1.5.1.1", FriendlyName: "isMemberOf",
			NameFormat: "urn:oasis:names:tc:SAML:2.0:attrname-format:uri", Values: vals})
		x, err := idp.Forge(s)
		if err != nil {
			t.Fatal(err)
		}
		root, err := samlidp.Parse(x)
		if err != nil {
			t.Fatal(err)
		}
		a := root.FindElement("./Assertion")
		for _, at := range root.Attr {
			if at.Space == "xmlns" && a.SelectAttr("xmlns:"+at.Key) == nil {
				a.CreateAttr("xmlns:"+at.Key, at.Value)
			}
		}
		out, err := samlidp.Serialize(a)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	base, ten := build(0, 1), build(10, 1)
	per := (len(ten) - len(base)) / 10
	groups, extra := (size-len(base))/per, 1
	x := build(groups, extra)
	// Session indexes grow a digit now and then: converge.
	for range 5 {
		if len(x) == size {
			return x
		}
		extra += size - len(x)
		x = build(groups, extra)
	}
	t.Fatalf("cannot make a %d-byte assertion (got %d)", size, len(x))
	return nil
}

// cbcApp is a SAML application with a key pair, and the IdP whose
// assertions it decrypts.
type cbcApp struct {
	*samlApp
	cert *x509.Certificate
	log  *failureLog
	acs  string
}

func newCBCApp(t *testing.T, edit func(*extauth.Config, *extauth.Options)) *cbcApp {
	t.Helper()
	certPEM, keyPEM := spKeyPair(t)
	cert, err := samlsp.ParseCertificatePEM(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	fl := &failureLog{}
	idp := newSAMLIdP(t)
	a := newSAMLApp(t, idp, func(c *extauth.Config, o *extauth.Options) {
		c.SAML.Additional.Certificate = certPEM
		c.SAML.Additional.PrivateKey = extauth.NewSecret(keyPEM)
		o.Logger = slog.New(fl)
		if edit != nil {
			edit(c, o)
		}
	})
	return &cbcApp{samlApp: a, cert: cert, log: fl, acs: a.URL + "/users/auth/saml/callback"}
}

// cbcAnswer is what the callback route answered to one response.
type cbcAnswer struct {
	status int
	body   string
	logged string
	took   time.Duration
}

// post starts a sign-in and posts, for it, an unsigned Response carrying
// enc: what anyone who starts sign-ins of their own can send. It calls the
// callback route's handler itself, with the browser's cookies, and took is
// the CPU time the handler spent: the work an attacker's timing would
// reveal (the callback waits on nothing), which a busy machine does not
// stretch as it stretches a round trip's wall-clock time.
func (a *cbcApp) post(t *testing.T, enc string) cbcAnswer {
	t.Helper()
	b := harness.NewBrowser(t)
	_, requestID, relay := a.authorize(b, nil)
	form := url.Values{"SAMLResponse": {base64.StdEncoding.EncodeToString(unsignedResponse(a.IdP, a.acs, requestID, enc))}, "RelayState": {relay}}
	req := httptest.NewRequest(http.MethodPost, a.acs, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, c := range b.Jar.Cookies(req.URL) {
		req.AddCookie(c)
	}
	rec := httptest.NewRecorder()
	took := loadtest.ThreadCPUOf(func() { a.handler.ServeHTTP(rec, req) })
	return cbcAnswer{status: rec.Code, body: rec.Body.String(), logged: a.log.last(), took: took}
}

// signIn posts a genuine encrypted assertion for a sign-in of its own and
// requires it to succeed: the control that the altered ones are one change
// away from a valid response.
func (a *cbcApp) signIn(t *testing.T, alg string, size int) *cbcAssertion {
	t.Helper()
	b := harness.NewBrowser(t)
	_, requestID, relay := a.authorize(b, nil)
	enc := encryptCBC(t, alg, sizedAssertion(t, a.IdP, a.acs, requestID, size), a.cert)
	form := url.Values{"SAMLResponse": {base64.StdEncoding.EncodeToString(unsignedResponse(a.IdP, a.acs, requestID, enc.element(enc.ct)))}, "RelayState": {relay}}
	if resp := a.callback(b, form); resp.StatusCode != http.StatusOK || resp.Body != "signed in as ada@example.org" {
		t.Fatalf("the genuine %d-byte assertion was refused: %d %s %s", size, resp.StatusCode, resp.Body, a.log.last())
	}
	return enc
}

// TestSAMLCBCFailuresAlike: every way a CBC plaintext can fail, when no
// verified signature covers it, gives one answer: a bad padding, a garbled
// block with a good padding, a well-formed element that is not an
// assertion (once "unexpected structure"), a truncated ciphertext, a
// genuine assertion with a bad padding byte.
func TestSAMLCBCFailuresAlike(t *testing.T) {
	a := newCBCApp(t, nil)
	enc := a.signIn(t, samlidp.AES256CBC, 8<<10)
	notAssertion := encryptCBC(t, samlidp.AES256CBC, []byte(`<saml:Issuer xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion">x</saml:Issuer>`), a.cert)
	half := enc.ct[:len(enc.ct)/2/enc.bs*enc.bs]
	cases := map[string]string{
		"bad padding":               enc.element(enc.lastByte(0)),
		"padding over a block":      enc.element(enc.lastByte(17)),
		"good padding, bad content": enc.element(enc.lastByte(1)),
		"not an assertion":          notAssertion.element(notAssertion.ct),
		"truncated":                 enc.element(half),
	}
	var first *cbcAnswer
	var firstName string
	for name, x := range cases {
		got := a.post(t, x)
		t.Logf("%s: %d %s", name, got.status, got.logged)
		if first == nil {
			first, firstName = &got, name
			continue
		}
		if got.status != first.status || got.body != first.body || got.logged != first.logged {
			t.Errorf("%s and %s answered differently:\n%d %s\n%s\n%d %s\n%s", name, firstName,
				got.status, got.body, got.logged, first.status, first.body, first.logged)
		}
	}
}

// TestSAMLResponseSignatureBeforeDecryption: when the Response is signed,
// its signature is verified before anything is decrypted, so a ciphertext
// altered after the IdP signed is refused as a bad signature, never
// decrypted.
func TestSAMLResponseSignatureBeforeDecryption(t *testing.T) {
	a := newCBCApp(t, nil)
	b := harness.NewBrowser(t)
	_, requestID, relay := a.authorize(b, nil)
	s := a.IdP.DefaultSpec(samlEntityID, a.acs, requestID)
	s.SignResponse, s.EncryptTo, s.Encryption = true, a.cert, samlidp.Encryption{Cipher: samlidp.AES256CBC}
	x, err := a.IdP.Forge(s)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`CipherValue>([A-Za-z0-9+/=]+)<`).FindAllSubmatchIndex(x, -1)
	start, end := m[1][2], m[1][3]
	ct, _ := base64.StdEncoding.DecodeString(string(x[start:end]))
	ct[len(ct)-17] ^= 0xff // a bad padding, once decrypted
	x = append(append(append([]byte(nil), x[:start]...), base64.StdEncoding.EncodeToString(ct)...), x[end:]...)
	resp := a.callback(b, url.Values{"SAMLResponse": {base64.StdEncoding.EncodeToString(x)}, "RelayState": {relay}})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.Body, "signature is invalid") ||
		strings.Contains(a.log.last(), "CBC") || strings.Contains(a.log.last(), "padding") {
		t.Fatalf("%d %s\n%s", resp.StatusCode, resp.Body, a.log.last())
	}
}

// samlSecretsYAML is a secrets file for idp with the SP key pair and the
// given saml_additional_settings.security entries.
func samlSecretsYAML(idp *samlidp.IdP, certPEM, keyPEM, security string) string {
	y := "saml_sp_entity_id: " + samlEntityID + "\nsaml_idp_metadata_url: " + idp.MetadataURL() + "\n" +
		"saml_additional_settings:\n  certificate: |\n" + indent(indent(certPEM)) + "  private_key: |\n" + indent(indent(keyPEM))
	if security != "" {
		y += "  security:\n" + security
	}
	return y
}

// fromSecrets is an edit for newSAMLApp that configures SAML from a
// secrets file.
func fromSecrets(t *testing.T, yaml string, fl *failureLog) func(*extauth.Config, *extauth.Options) {
	return func(c *extauth.Config, o *extauth.Options) {
		*c = *mustParse(t, yaml)
		if fl != nil {
			o.Logger = slog.New(fl)
		}
	}
}

var encryptionMethod = regexp.MustCompile(`EncryptionMethod Algorithm="([^"]+)"`)

// TestSAMLRefuseCBCFromSecretsFile: saml_additional_settings.security.
// refuse_cbc_encryption refuses CBC-encrypted assertions with a reason
// naming the setting, keeps AES-GCM working, and leaves CBC out of the SP
// metadata; without it, the metadata lists AES-GCM first and CBC still
// signs in (SimpleSAMLphp, samlify and crewjam's IdP send it).
func TestSAMLRefuseCBCFromSecretsFile(t *testing.T) {
	certPEM, keyPEM := spKeyPair(t)
	gcm := []string{samlidp.AES256GCM, samlidp.AES128GCM, "http://www.w3.org/2009/xmlenc11#aes192-gcm"}
	for _, refuse := range []bool{false, true} {
		t.Run(fmt.Sprintf("refuse_cbc_encryption=%v", refuse), func(t *testing.T) {
			idp := newSAMLIdP(t)
			fl := &failureLog{}
			a := newSAMLApp(t, idp, fromSecrets(t, samlSecretsYAML(idp, certPEM, keyPEM, fmt.Sprintf("    refuse_cbc_encryption: %v\n", refuse)), fl))
			md := harness.NewBrowser(t).Get(a.URL + "/users/auth/saml/metadata").Body
			var algs []string
			for _, m := range encryptionMethod.FindAllStringSubmatch(md, -1) {
				algs = append(algs, m[1])
			}
			if len(algs) < 4 || !slices.Equal(algs[:3], gcm) {
				t.Fatalf("metadata EncryptionMethods %v: AES-GCM must come first", algs)
			}
			if hasCBC := slices.ContainsFunc(algs, func(s string) bool { return strings.HasSuffix(s, "-cbc") }); hasCBC == refuse {
				t.Fatalf("metadata EncryptionMethods %v with refuse_cbc_encryption=%v", algs, refuse)
			}
			for _, c := range []string{samlidp.AES256CBC, samlidp.TripleDESCBC, samlidp.AES128GCM, samlidp.AES256GCM} {
				idp.Set(func(k *samlidp.Knobs) { k.Encryption = &samlidp.Encryption{Cipher: c} })
				b := harness.NewBrowser(t)
				redirect, _, _ := a.authorize(b, nil)
				form := idpForm(t, b, redirect)
				raw, _ := base64.StdEncoding.DecodeString(form.Get("SAMLResponse"))
				if !bytes.Contains(raw, []byte(c)) {
					t.Fatalf("the IdP did not encrypt with %s", c)
				}
				resp := a.callback(b, form)
				refused := refuse && strings.HasSuffix(c, "-cbc")
				switch {
				case !refused && (resp.StatusCode != http.StatusOK || resp.Body != "signed in as ada@example.org"):
					t.Fatalf("%s: %d %s %s", c, resp.StatusCode, resp.Body, fl.last())
				case refused && (resp.StatusCode != http.StatusBadRequest || !strings.Contains(fl.last(), "refuse_cbc_encryption")):
					t.Fatalf("%s with CBC refused: %d %s %s", c, resp.StatusCode, resp.Body, fl.last())
				}
			}
		})
	}
}

// TestSAMLAllowSHA1FromSecretsFile: an operator can accept an IdP that
// still signs with SHA-1 from the secrets file
// (saml_additional_settings.security.allow_sha1), with the same start-up
// warning as Options.SAML.AllowSHA1, naming the setting; the refusal
// without it names the field a host sets, Options.SAML.AllowSHA1 (not
// "Options.AllowSHA1"), and the setting.
func TestSAMLAllowSHA1FromSecretsFile(t *testing.T) {
	certPEM, keyPEM := spKeyPair(t)
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprintf("allow_sha1=%v", allow), func(t *testing.T) {
			idp := newSAMLIdP(t)
			fl := &failureLog{}
			a := newSAMLApp(t, idp, fromSecrets(t, samlSecretsYAML(idp, certPEM, keyPEM, fmt.Sprintf("    allow_sha1: %v\n", allow)), fl))
			warned := slices.ContainsFunc(fl.warnings(), func(w string) bool {
				return strings.Contains(w, "SHA-1 signatures and digests are accepted") && strings.Contains(w, "saml_additional_settings.security.allow_sha1")
			})
			if warned != allow {
				t.Fatalf("start-up warning = %v, want %v: %q", warned, allow, fl.warnings())
			}
			b := harness.NewBrowser(t)
			_, reqID, relay := a.authorize(b, nil)
			s := idp.DefaultSpec(samlEntityID, a.URL+"/users/auth/saml/callback", reqID)
			s.Sign = samlidp.SignOptions{SignatureMethod: samlidp.RSASHA1, DigestMethod: samlidp.DigestSHA1}
			x, err := idp.Forge(s)
			if err != nil {
				t.Fatal(err)
			}
			resp := a.callback(b, url.Values{"SAMLResponse": {base64.StdEncoding.EncodeToString(x)}, "RelayState": {relay}})
			if allow {
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%d %s %s", resp.StatusCode, resp.Body, fl.last())
				}
				return
			}
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(fl.last(), "Options.SAML.AllowSHA1") ||
				!strings.Contains(fl.last(), "security.allow_sha1") {
				t.Fatalf("%d %s\n%s", resp.StatusCode, resp.Body, fl.last())
			}
		})
	}
	// A federation names no IdP: allow_sha1 there would accept SHA-1 of
	// every IdP of the aggregate, and on the aggregate's signature, which
	// vouches for every IdP's keys. From the secrets file or from the
	// host's options, it is refused.
	t.Run("with a federation", func(t *testing.T) {
		fed := "saml_sp_entity_id: " + samlEntityID + "\nsaml_additional_settings:\n  federation:\n" +
			"    metadata_url: https://fed.example.invalid/aggregate.xml\n    signing_certificate: |\n" + indent(indent(federationCertPEM(t)))
		if _, err := extauth.ParseConfig([]byte(fed), vars()); err != nil {
			t.Fatalf("the federation alone: %v", err)
		}
		_, err := extauth.ParseConfig([]byte(fed+"  security:\n    allow_sha1: true\n"), vars())
		if keys := problemKeys(t, err); !slices.Equal(keys, []string{"saml_additional_settings.security.allow_sha1"}) {
			t.Fatalf("problems %v (%v)", keys, err)
		}
		cfg, err := extauth.ParseConfig([]byte(fed), vars())
		if err != nil {
			t.Fatal(err)
		}
		_, err = extauth.New(cfg, extauth.Options{BaseURL: "https://app.example.org", CookieKey: testKey, SAML: samlsp.Options{AllowSHA1: true},
			OnSuccess: func(http.ResponseWriter, *http.Request, *extauth.Identity) {}})
		if err == nil || !strings.Contains(err.Error(), "Options.SAML.AllowSHA1 does not apply to a federation") {
			t.Fatalf("New with Options.SAML.AllowSHA1 and a federation: %v", err)
		}
	})
	t.Run("not a boolean", func(t *testing.T) {
		for _, key := range []string{"allow_sha1", "refuse_cbc_encryption"} {
			_, err := extauth.ParseConfig([]byte(samlSecretsYAML(newSAMLIdP(t), certPEM, keyPEM, "    "+key+": maybe\n")), vars())
			if keys := problemKeys(t, err); !slices.Contains(keys, "saml_additional_settings.security."+key) {
				t.Fatalf("problems %v", keys)
			}
		}
	})
}

// TestSAMLAllowSHA1PerTenant: allow_sha1 in the secrets file is a
// setting of the SAML configuration it is written in, an IdP at the
// application or at one tenant, and reaches no other, even where one IdP
// serves them all: tenant a allows SHA-1, tenant b and the application's
// own site do not, and the same SHA-1-signed answer of the IdP they share
// signs in at a only. Nor does the IdP's metadata turn it on: it lists
// SHA-1 alone as what it signs and digests with (alg:SigningMethod,
// alg:DigestMethod), and b and the application still refuse, naming
// both settings that could allow it.
func TestSAMLAllowSHA1PerTenant(t *testing.T) {
	ta := newTenantApp(t, []string{"a", "b"}, func(ta *tenantApp, _ *extauth.Options) {
		md := ta.IdP.Metadata()
		i := bytes.Index(md, []byte("<IDPSSODescriptor"))
		if i < 0 {
			t.Fatalf("no IDPSSODescriptor in the IdP metadata:\n%s", md)
		}
		const alg = `xmlns:alg="urn:oasis:names:tc:SAML:metadata:algsupport"`
		ext := `<Extensions><alg:SigningMethod ` + alg + ` Algorithm="` + samlidp.RSASHA1 + `"/>` +
			`<alg:DigestMethod ` + alg + ` Algorithm="` + samlidp.DigestSHA1 + `"/></Extensions>`
		md = append(append(append([]byte(nil), md[:i]...), ext...), md[i:]...)
		ta.IdP.Set(func(k *samlidp.Knobs) { k.MetadataBody = md })
		file := "saml_sp_entity_id: https://example.test/saml\nsaml_idp_metadata_url: " + ta.IdP.MetadataURL() + "\n" +
			"tenants:\n" +
			"  a:\n    saml_sp_entity_id: https://a.example.test/saml\n    saml_idp_metadata_url: " + ta.IdP.MetadataURL() + "\n" +
			"    saml_additional_settings:\n      security:\n        allow_sha1: true\n" +
			"  b:\n    saml_sp_entity_id: https://b.example.test/saml\n    saml_idp_metadata_url: " + ta.IdP.MetadataURL() + "\n"
		cfg, err := extauth.ParseConfig([]byte(file), extauth.LookupEnv(nil))
		if err != nil {
			t.Fatal(err)
		}
		ta.cfg = cfg
	})
	b := ta.browser()
	for _, tn := range []string{"a", "b", ""} {
		ta.registerSAML(b, tn)
		form := ta.samlStart(b, tn)
		entityID := "https://example.test/saml"
		if tn != "" {
			entityID = "https://" + tn + ".example.test/saml"
		}
		spec := ta.IdP.DefaultSpec(entityID, ta.url(tn, "/users/auth/saml/callback"), inResponseTo(t, form.Get("SAMLResponse")))
		spec.Sign = samlidp.SignOptions{SignatureMethod: samlidp.RSASHA1, DigestMethod: samlidp.DigestSHA1}
		x, err := ta.IdP.Forge(spec)
		if err != nil {
			t.Fatal(err)
		}
		form.Set("SAMLResponse", base64.StdEncoding.EncodeToString(x))
		resp := b.PostForm(ta.url(tn, "/users/auth/saml/callback"), form)
		if tn == "a" {
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("tenant a, which allows SHA-1: %d %s\n%s", resp.StatusCode, resp.Body, ta.Logs)
			}
			continue
		}
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("tenant %q, which does not allow SHA-1, took a SHA-1 signature: %d %s", tn, resp.StatusCode, resp.Body)
		}
	}
	logs := ta.Logs.String()
	if !strings.Contains(logs, "Options.SAML.AllowSHA1") || !strings.Contains(logs, "security.allow_sha1") {
		t.Errorf("the refusals do not name the settings:\n%s", logs)
	}
	// Each SP read the metadata's SHA-1 and judged it by its own setting.
	if strings.Count(logs, "the IdP uses SHA-1") < 3 || !strings.Contains(logs, "accepted=true") || !strings.Contains(logs, "accepted=false") {
		t.Errorf("the SPs did not read the metadata's SHA-1 each by its own setting:\n%s", logs)
	}
	if want := []string{"a a saml ada@example.org"}; !slices.Equal(ta.signIns(), want) {
		t.Errorf("sign-ins %q, want %q", ta.signIns(), want)
	}
}

// TestSAMLEncryptedNameID: an IdP may send the Subject's identifier as an
// EncryptedID (eID and federation profiles require it): it is decrypted
// with the SP key, by the rules of encrypted assertions, and the identity
// gets the NameID it holds, whether the assertion around it is encrypted
// or not, and whatever the block cipher.
func TestSAMLEncryptedNameID(t *testing.T) {
	certPEM, keyPEM := spKeyPair(t)
	idp := newSAMLIdP(t)
	fl := &failureLog{}
	a := newSAMLApp(t, idp, fromSecrets(t, samlSecretsYAML(idp, certPEM, keyPEM, ""), fl))
	for _, c := range []string{samlidp.AES128GCM, samlidp.AES256CBC} {
		for _, plainAssertion := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/assertion encrypted=%v", c[strings.LastIndex(c, "#")+1:], !plainAssertion), func(t *testing.T) {
				idp.Set(func(k *samlidp.Knobs) {
					k.EncryptNameID, k.NoEncrypt, k.Encryption = true, plainAssertion, &samlidp.Encryption{Cipher: c}
				})
				b := harness.NewBrowser(t)
				redirect, _, _ := a.authorize(b, nil)
				form := idpForm(t, b, redirect)
				raw, _ := base64.StdEncoding.DecodeString(form.Get("SAMLResponse"))
				if bytes.Contains(raw, []byte("EncryptedAssertion")) == plainAssertion ||
					(plainAssertion && (!bytes.Contains(raw, []byte("EncryptedID")) || bytes.Contains(raw, []byte("NameID ")))) {
					t.Fatalf("the IdP did not send what the test asked:\n%s", raw)
				}
				n := len(a.identities())
				resp := a.callback(b, form)
				if resp.StatusCode != http.StatusOK || resp.Body != "signed in as ada@example.org" {
					t.Fatalf("%d %s %s", resp.StatusCode, resp.Body, fl.last())
				}
				id := a.identities()[n]
				if id.SAML.NameID != "ada@example.org" || id.SAML.NameIDFormat != samlsp.NameIDEmail {
					t.Fatalf("identity %+v", id.SAML)
				}
			})
		}
	}
}

// TestSAMLEncryptedNameIDLogout: single logout with encrypted NameIDs,
// through the routes, at an IdP that matches NameIDs exactly. The
// LogoutRequest carries the NameID as an EncryptedID, encrypted to the
// IdP's encryption certificate, when the IdP sent it encrypted (kept in
// Identity.SAML through the host's JSON) or when
// saml_additional_settings.security.name_id_encrypted is set, and in clear
// otherwise; the IdP, decrypting with crewjam's xmlenc, ends its session.
// An IdP-initiated LogoutRequest with an EncryptedID ends the host's
// session for the NameID it holds.
func TestSAMLEncryptedNameIDLogout(t *testing.T) {
	certPEM, keyPEM := spKeyPair(t)
	for _, tc := range []struct {
		name            string
		idpEncrypts     bool
		setting         bool
		wantEncryptedID bool
	}{
		{"plain NameID", false, false, false},
		{"the IdP sent an EncryptedID", true, false, true},
		{"name_id_encrypted", false, true, true},
		{"both", true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			idp := newSAMLIdP(t)
			idp.Set(func(k *samlidp.Knobs) {
				k.StrictLogout, k.EncryptNameID = true, tc.idpEncrypts
				if tc.idpEncrypts {
					k.Encryption = &samlidp.Encryption{Cipher: samlidp.AES128GCM}
				}
			})
			security := ""
			if tc.setting {
				security = "    name_id_encrypted: true\n"
			}
			var session extauth.LogoutSession
			var done []*extauth.Error
			var ended []extauth.LogoutEvent
			fl := &failureLog{}
			a := newSAMLApp(t, idp, func(c *extauth.Config, o *extauth.Options) {
				fromSecrets(t, samlSecretsYAML(idp, certPEM, keyPEM, security), fl)(c, o)
				o.Logout.Session = func(*http.Request, extauth.Provider) (extauth.LogoutSession, bool) { return session, true }
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
			redirect, _, _ := a.authorize(b, nil)
			if resp := a.callback(b, idpForm(t, b, redirect)); resp.StatusCode != http.StatusOK {
				t.Fatalf("sign-in: %d %s %s", resp.StatusCode, resp.Body, fl.last())
			}
			id := a.identities()[0]
			if id.SAML.NameIDEncrypted != tc.idpEncrypts || id.SAML.NameID != "ada@example.org" {
				t.Fatalf("Identity.SAML = %+v", id.SAML)
			}
			kept, _ := json.Marshal(id.SAML)
			var back extauth.SAMLInfo
			if err := json.Unmarshal(kept, &back); err != nil {
				t.Fatal(err)
			}
			session = (&extauth.Identity{SAML: &back}).LogoutSession()

			resp := b.Get(a.URL + "/users/auth/saml/logout")
			if resp.StatusCode != http.StatusOK || len(done) != 1 || done[0] != nil || idp.RefusedLogouts() != 0 {
				t.Fatalf("logout: %d %s, Done saw %v, the IdP refused %d", resp.StatusCode, resp.Body, done, idp.RefusedLogouts())
			}
			rec := idp.LastLogout()
			if rec == nil || rec.EncryptedID != tc.wantEncryptedID || rec.Request.NameID == nil || rec.Request.NameID.Value != "ada@example.org" ||
				rec.Request.NameID.Format != samlsp.NameIDEmail {
				t.Fatalf("the IdP saw %+v (want EncryptedID %v)", rec, tc.wantEncryptedID)
			}

			// The IdP logs Ada out, naming her by an EncryptedID.
			slo := a.URL + "/users/auth/saml/logout"
			lr := (&saml.LogoutRequest{ID: "id-idp-1", Version: "2.0", IssueInstant: time.Now(), Destination: slo,
				Issuer: &saml.Issuer{Value: idp.EntityID()}, NameID: &saml.NameID{Value: "ada@example.org", Format: samlsp.NameIDEmail}}).Element()
			spCert, err := samlsp.ParseCertificatePEM(certPEM)
			if err != nil {
				t.Fatal(err)
			}
			if err := samlidp.EncryptNameID(lr, spCert, samlidp.Encryption{Cipher: samlidp.AES256CBC}); err != nil {
				t.Fatal(err)
			}
			// The message as it travels is deflated and base64: read the
			// element itself (the encoded URL holds "ada" by chance in
			// about one run in 250).
			doc := etree.NewDocument()
			doc.SetRoot(lr.Copy())
			if x, err := doc.WriteToString(); err != nil || strings.Contains(x, "ada@example.org") {
				t.Fatalf("the NameID is in clear (%v):\n%s", err, x)
			}
			m, err := idp.RedirectMessage(slo, "SAMLRequest", lr, "")
			if err != nil {
				t.Fatal(err)
			}
			resp = harness.NewBrowser(t).NoFollow().Get(m)
			if resp.StatusCode != http.StatusSeeOther || len(ended) != 1 || ended[0].Subject != "ada@example.org" ||
				ended[0].NameIDFormat != samlsp.NameIDEmail {
				t.Fatalf("IdP-initiated logout: %d %s, ended %+v %s", resp.StatusCode, resp.Body, ended, fl.last())
			}
		})
	}
	t.Run("name_id_encrypted, the IdP publishes no encryption key", func(t *testing.T) {
		idp := newSAMLIdP(t)
		md := regexp.MustCompile(`(?s)<KeyDescriptor use="encryption">.*?</KeyDescriptor>`).ReplaceAll(idp.Metadata(), nil)
		if bytes.Contains(md, []byte(`use="encryption"`)) {
			t.Fatal("the encryption key is still in the IdP metadata")
		}
		idp.Set(func(k *samlidp.Knobs) { k.MetadataBody = md })
		var done []*extauth.Error
		a := newSAMLApp(t, idp, func(c *extauth.Config, o *extauth.Options) {
			fromSecrets(t, samlSecretsYAML(idp, certPEM, keyPEM, "    name_id_encrypted: true\n"), nil)(c, o)
			o.Logout.Session = func(*http.Request, extauth.Provider) (extauth.LogoutSession, bool) {
				return extauth.LogoutSession{NameID: "ada@example.org", SessionIndex: "idx-1"}, true
			}
			o.Logout.Done = func(w http.ResponseWriter, _ *http.Request, err *extauth.Error) { done = append(done, err) }
		})
		resp := harness.NewBrowser(t).NoFollow().Get(a.URL + "/users/auth/saml/logout")
		// The route hands the failure to the host's Done hook.
		if resp.StatusCode == http.StatusSeeOther || len(done) != 1 || done[0] == nil ||
			!strings.Contains(done[0].Message, "name_id_encrypted") || idp.LastLogout() != nil {
			t.Fatalf("%d %s; Done saw %v", resp.StatusCode, resp.Header.Get("Location"), done)
		}
	})
}
