package samlsp

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/extauth/extauth/extauthtest/samlidp"
	"github.com/extauth/extauth/providers"
)

// TestDecryptionTable decrypts an assertion encrypted every way IdPs do it,
// by the fake IdP's own encryptor (which shares no code with ours): each
// block cipher, each key transport and its digests, each place the key can
// be. Every row must sign Ada in.
func TestDecryptionTable(t *testing.T) {
	f := newFixture(t, withKeyPair)
	_, spCert := testKey(t, 1)
	cipherNames := []string{samlidp.TripleDESCBC, samlidp.AES128CBC, samlidp.AES192CBC, samlidp.AES256CBC, samlidp.AES128GCM, samlidp.AES256GCM}
	transports := []struct {
		name string
		e    samlidp.Encryption
	}{
		{"rsa-oaep-mgf1p", samlidp.Encryption{KeyTransport: samlidp.RSAOAEPMGF1P}},
		{"rsa-oaep-mgf1p, DigestMethod sha1", samlidp.Encryption{KeyTransport: samlidp.RSAOAEPMGF1P, OAEPDigest: samlidp.DigestSHA1}},
		{"rsa-oaep-mgf1p, DigestMethod sha256", samlidp.Encryption{KeyTransport: samlidp.RSAOAEPMGF1P, OAEPDigest: samlidp.DigestSHA256}},
		{"xmlenc11 rsa-oaep", samlidp.Encryption{KeyTransport: samlidp.RSAOAEP11}},
		{"xmlenc11 rsa-oaep, MGF1 sha1", samlidp.Encryption{KeyTransport: samlidp.RSAOAEP11, MGF: samlidp.MGF1SHA1}},
		{"xmlenc11 rsa-oaep, sha256, MGF1 sha256", samlidp.Encryption{KeyTransport: samlidp.RSAOAEP11, OAEPDigest: samlidp.DigestSHA256, MGF: samlidp.MGF1SHA256}},
		{"xmlenc11 rsa-oaep, sha256, MGF1 sha1", samlidp.Encryption{KeyTransport: samlidp.RSAOAEP11, OAEPDigest: samlidp.DigestSHA256, MGF: samlidp.MGF1SHA1}},
	}
	placements := []samlidp.KeyPlacement{samlidp.KeyInline, samlidp.KeyRetrievalMethod, samlidp.KeyCarriedName, samlidp.KeySibling}
	for _, c := range cipherNames {
		for _, tr := range transports {
			for _, kp := range placements {
				e := tr.e
				e.Cipher, e.Key = c, kp
				name := fmt.Sprintf("%s/%s/%s", c[strings.LastIndex(c, "#")+1:], tr.name, kp)
				t.Run(name, func(t *testing.T) {
					tx, _ := f.begin(f.sp)
					s := f.idp.DefaultSpec(testEntityID, testACS, tx.RequestID)
					s.EncryptTo, s.Encryption = spCert, e
					xml, err := f.idp.Forge(s)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Contains(xml, []byte(c)) || bytes.Contains(xml, []byte("ada@example.org")) {
						t.Fatal("the forger did not encrypt as asked")
					}
					id, err := post(f.sp, tx, responseForm(xml, tx.Binding))
					if err != nil {
						t.Fatalf("refused: %v", err)
					}
					if id.UID != "ada@example.org" {
						t.Fatalf("uid %q", id.UID)
					}
				})
			}
		}
	}
}

// TestRSA15KeyTransport: PKCS#1 v1.5 key transport is refused with a
// reason, unless the host allows it.
func TestRSA15KeyTransport(t *testing.T) {
	_, spCert := testKey(t, 1)
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprintf("allowed=%v", allow), func(t *testing.T) {
			f := newFixture(t, withKeyPair, withOptions(func(o *Options) { o.AllowRSA15KeyTransport = allow }))
			tx, _ := f.begin(f.sp)
			s := f.idp.DefaultSpec(testEntityID, testACS, tx.RequestID)
			s.EncryptTo, s.Encryption = spCert, samlidp.Encryption{KeyTransport: samlidp.RSA15, Cipher: samlidp.AES256GCM}
			xml, err := f.idp.Forge(s)
			if err != nil {
				t.Fatal(err)
			}
			id, err := post(f.sp, tx, responseForm(xml, tx.Binding))
			if allow {
				if err != nil || id.UID != "ada@example.org" {
					t.Fatalf("id %+v, err %v", id, err)
				}
				return
			}
			if code(err) != providers.CodeInvalidResponse || !strings.Contains(err.Error(), "Bleichenbacher") ||
				!strings.Contains(err.Error(), "AllowRSA15KeyTransport") {
				t.Fatalf("err = %v, want a refusal naming Bleichenbacher and the option", err)
			}
		})
	}
}

// TestDecryptionRefusals: what must not decrypt, does not.
func TestDecryptionRefusals(t *testing.T) {
	f := newFixture(t, withKeyPair)
	_, spCert := testKey(t, 1)
	forge := func(t *testing.T, e samlidp.Encryption, edit func([]byte) []byte) ([]byte, *providers.Transaction) {
		tx, _ := f.begin(f.sp)
		s := f.idp.DefaultSpec(testEntityID, testACS, tx.RequestID)
		s.EncryptTo, s.Encryption = spCert, e
		xml, err := f.idp.Forge(s)
		if err != nil {
			t.Fatal(err)
		}
		return edit(xml), tx
	}
	cipherValue := func(xml []byte, i int) (start, end int) {
		m := regexp.MustCompile(`CipherValue>([A-Za-z0-9+/=]+)<`).FindAllSubmatchIndex(xml, -1)
		return m[i][2], m[i][3]
	}
	flip := func(i int) func([]byte) []byte {
		return func(xml []byte) []byte {
			s, e := cipherValue(xml, i)
			raw, _ := base64.StdEncoding.DecodeString(string(xml[s:e]))
			raw[len(raw)-1] ^= 1
			return append(append(append([]byte(nil), xml[:s]...), base64.StdEncoding.EncodeToString(raw)...), xml[e:]...)
		}
	}
	for name, tc := range map[string]struct {
		e    samlidp.Encryption
		edit func([]byte) []byte
	}{
		"GCM ciphertext altered":         {samlidp.Encryption{Cipher: samlidp.AES128GCM}, flip(1)},
		"wrapped key altered":            {samlidp.Encryption{Cipher: samlidp.AES128GCM}, flip(0)},
		"unknown block cipher":           {samlidp.Encryption{}, func(x []byte) []byte { return bytes.Replace(x, []byte(samlidp.AES128CBC), []byte("urn:x:rot13"), 1) }},
		"CipherReference":                {samlidp.Encryption{Key: samlidp.KeySibling}, func(x []byte) []byte { return bytes.Replace(x, []byte("CipherValue"), []byte("CipherReference"), 4) }},
		"RetrievalMethod to no key":      {samlidp.Encryption{Key: samlidp.KeyRetrievalMethod}, func(x []byte) []byte { return bytes.Replace(x, []byte(`URI="#_key-1"`), []byte(`URI="#_other"`), 1) }},
		"content encrypted, not element": {samlidp.Encryption{}, func(x []byte) []byte { return bytes.Replace(x, []byte("xmlenc#Element"), []byte("xmlenc#Content"), 1) }},
	} {
		t.Run(name, func(t *testing.T) {
			xml, tx := forge(t, tc.e, tc.edit)
			_, err := post(f.sp, tx, responseForm(xml, tx.Binding))
			t.Logf("refused: %v", err)
			if code(err) != providers.CodeInvalidResponse {
				t.Fatalf("err = %v, want invalid_response", err)
			}
		})
	}
}
