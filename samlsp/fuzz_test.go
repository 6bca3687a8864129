package samlsp

import (
	"bytes"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	xrv "github.com/mattermost/xml-roundtrip-validator"

	"github.com/extauth/extauth/extauthtest/samlidp"
	"github.com/extauth/extauth/internal/store"
	"github.com/extauth/extauth/providers"
)

var updateCorpus = flag.Bool("update-fuzz-corpus", false, "regenerate testdata/fuzz-keys.pem and the FuzzResponse seed corpus")

// The fuzz corpus is signed with a committed test-only key pair at a fixed
// instant, so that its seeds verify and the fuzzer starts from responses
// that reach the deepest checks.
var (
	fuzzNow       = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	fuzzRequestID = "id-fuzz-request"
)

func fuzzKeys(tb testing.TB) (idpKey *rsa.PrivateKey, idpCert *x509.Certificate, spCertPEM, spKeyPEM string) {
	tb.Helper()
	path := filepath.Join("testdata", "fuzz-keys.pem")
	if *updateCorpus {
		var out []byte
		for range 2 {
			k, c, err := samlidp.NewKeyPair("extauth fuzz corpus", fuzzNow)
			if err != nil {
				tb.Fatal(err)
			}
			der, _ := x509.MarshalPKCS8PrivateKey(k)
			out = append(out, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})...)
			out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
		}
		if err := os.WriteFile(path, out, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var blocks []*pem.Block
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		blocks = append(blocks, b)
	}
	if len(blocks) != 4 {
		tb.Fatalf("%s: %d PEM blocks, want 4", path, len(blocks))
	}
	k, err := x509.ParsePKCS8PrivateKey(blocks[0].Bytes)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := x509.ParseCertificate(blocks[1].Bytes)
	if err != nil {
		tb.Fatal(err)
	}
	return k.(*rsa.PrivateKey), c, string(pem.EncodeToMemory(blocks[3])), string(pem.EncodeToMemory(blocks[2]))
}

// fuzzSetup builds an SP whose clock stands at fuzzNow and an IdP metadata
// copy for the committed IdP key, without any network.
func fuzzSetup(tb testing.TB) (*SP, *idpMetadata, *samlidp.IdP) {
	idpKey, idpCert, spCert, spKey := fuzzKeys(tb)
	idp, err := samlidp.New(samlidp.Options{BaseURL: "https://idp.example.test", Key: idpKey, Certificate: idpCert})
	if err != nil {
		tb.Fatal(err)
	}
	sp, err := New(Config{SPEntityID: testEntityID, IdPMetadataURL: "https://idp.example.test/metadata",
		CertificatePEM: spCert, PrivateKeyPEM: spKey},
		providers.Env{CallbackURL: testACS, HTTPClient: refusingClient(), Store: store.NewMemory(nil, 0),
			Now: func() time.Time { return fuzzNow.Add(10 * time.Second) }},
		Options{MetadataRetry: time.Hour})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { sp.Close() })
	md, err := sp.parseMetadata(idp.Metadata())
	if err != nil {
		tb.Fatal(err)
	}
	return sp, md, idp
}

// FuzzResponse feeds arbitrary bytes to the callback's one pass, without
// the recover that validate adds, so any panic fails the fuzz; a response
// it accepts must name a subject and answer our request. And whatever
// parseXML accepts, mattermost's round-trip validator (which crewjam runs,
// in a copy of its own since v0.6, and we do not) accepts too: our
// namespace-well-formedness rules leave nothing for it to catch.
func FuzzResponse(f *testing.F) {
	sp, md, idp := fuzzSetup(f)
	if *updateCorpus {
		writeFuzzCorpus(f, sp, idp)
	}
	now := fuzzNow.Add(10 * time.Second)
	f.Fuzz(func(t *testing.T, raw []byte) {
		a, err := sp.check(raw, fuzzRequestID, md, now)
		if err == nil && (a.NameID == "" || a.InResponseTo != fuzzRequestID || a.ID == "") {
			t.Fatalf("accepted an assertion without subject or request: %+v", a)
		}
		if _, err := parseXML(raw); err == nil {
			if err := xrv.Validate(bytes.NewReader(raw)); err != nil {
				t.Fatalf("parseXML accepts what does not survive an encoding/xml round trip: %v", err)
			}
		}
	})
}

func writeFuzzCorpus(tb testing.TB, sp *SP, idp *samlidp.IdP) {
	dir := filepath.Join("testdata", "fuzz", "FuzzResponse")
	os.MkdirAll(dir, 0o755)
	write := func(name string, b []byte) {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	spec := func() samlidp.Spec { return idp.DefaultSpecAt(testEntityID, testACS, fuzzRequestID, fuzzNow) }
	forge := func(s samlidp.Spec) []byte {
		b, err := idp.Forge(s)
		if err != nil {
			tb.Fatal(err)
		}
		return b
	}
	valid := forge(spec())
	write("signed-assertion", valid)
	s := spec()
	s.SignAssertion, s.SignResponse = false, true
	signedResp := forge(s)
	write("signed-response", signedResp)
	s = spec()
	s.SignResponse = true
	s.EncryptTo = sp.cert
	write("encrypted", forge(s))
	// Shapes that reach the namespace resolution and the other ciphers.
	s = spec()
	s.Namespaces = samlidp.NSRebound
	s.EncryptTo, s.Encryption = sp.cert, samlidp.Encryption{Cipher: samlidp.AES256GCM, KeyTransport: samlidp.RSAOAEP11,
		OAEPDigest: samlidp.DigestSHA256, MGF: samlidp.MGF1SHA256, Key: samlidp.KeyRetrievalMethod}
	write("rebound-encrypted-gcm", forge(s))
	s = spec()
	s.Namespaces, s.SignResponse = samlidp.NSDefault, true
	write("default-namespaces-both-signed", forge(s))
	s = spec()
	s.Namespaces = samlidp.NSMixed
	s.EncryptTo, s.Encryption = sp.cert, samlidp.Encryption{Cipher: samlidp.TripleDESCBC, Key: samlidp.KeyCarriedName, RelyOnContext: true}
	write("mixed-3des", forge(s))
	for n := 1; n <= 8; n++ {
		src := valid
		if n <= 2 {
			src = signedResp
		}
		x, err := samlidp.XSW(n, src, "evil@attacker.example")
		if err != nil {
			tb.Fatal(err)
		}
		write(fmt.Sprintf("xsw%d", n), x)
	}
	write("doctype", append([]byte(`<!DOCTYPE r [<!ENTITY x "y">]>`), valid...))
	write("empty", nil)
}

// TestFuzzCorpusSeedsAreMeaningful keeps the committed corpus honest: the
// valid seeds pass our checks at the corpus instant, the attacks do not.
func TestFuzzCorpusSeedsAreMeaningful(t *testing.T) {
	sp, md, _ := fuzzSetup(t)
	now := fuzzNow.Add(10 * time.Second)
	for name, wantOK := range map[string]bool{"signed-assertion": true, "signed-response": true, "encrypted": true,
		"rebound-encrypted-gcm": true, "default-namespaces-both-signed": true, "mixed-3des": true,
		"xsw1": false, "xsw3": false, "xsw8": false, "doctype": false} {
		raw := readSeed(t, name)
		if _, err := sp.check(raw, fuzzRequestID, md, now); (err == nil) != wantOK {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

func readSeed(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "fuzz", "FuzzResponse", name))
	if err != nil {
		t.Fatal(err)
	}
	var body string
	if _, err := fmt.Sscanf(string(data), "go test fuzz v1\n[]byte(%q)\n", &body); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return []byte(body)
}
