package samlsp

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/crewjam/saml"

	"github.com/extauth/extauth/extauthtest/samlidp"
	"github.com/extauth/extauth/providers"
)

// alwaysFresh is a store that never remembers, so that one response can be
// replayed b.N times through the full callback path, store call included.
type alwaysFresh struct{}

func (alwaysFresh) Consume(context.Context, string, time.Time) (bool, error) { return true, nil }

var _ providers.Store = alwaysFresh{}

// The strategy's own hot paths, for profiling; bench/ compares them with
// crewjam through the routes.

// BenchmarkBegin measures building the redirect AuthnRequest, unsigned and
// signed, beside the floor of the signed one: an RSA-2048 PKCS #1 v1.5
// signature with the same key.
func BenchmarkBegin(b *testing.B) {
	key, _ := testKey(b, 1)
	sum := sha256.Sum256([]byte("SAMLRequest=...&RelayState=...&SigAlg=..."))
	b.Run("rsa_sign_floor", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := rsa.SignPKCS1v15(nil, key, crypto.SHA256, sum[:]); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, signed := range []bool{false, true} {
		mods := []fixtureOption{}
		name := "unsigned"
		if signed {
			mods, name = append(mods, withKeyPair), "signed"
		}
		f := newFixture(b, mods...)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := f.sp.Begin(context.Background(), newTx()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkComplete measures the ACS, Complete on the signed and on the
// encrypted response of acsCases.
func BenchmarkComplete(b *testing.B) {
	for _, c := range acsCases(b) {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := c.acs(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDeflateLevels compresses the AuthnRequest Begin sends at each
// DEFLATE level, with a reused writer, and reports the bytes out: the
// measurement behind deflateLevel.
func BenchmarkDeflateLevels(b *testing.B) {
	f := newFixture(b)
	var x bytes.Buffer
	f.sp.md.current().authn[0].write(&x, "id-0123456789abcdef0123456789abcdef01234567", time.Now(), nil)
	for _, level := range []int{flate.NoCompression, flate.HuffmanOnly, flate.BestSpeed, 5, flate.BestCompression} {
		w, err := flate.NewWriter(nil, level)
		if err != nil {
			b.Fatal(err)
		}
		var out bytes.Buffer
		b.Run(fmt.Sprintf("level=%d", level), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				out.Reset()
				w.Reset(&out)
				w.Write(x.Bytes())
				w.Close()
			}
			b.ReportMetric(float64(x.Len()), "bytes-in")
			b.ReportMetric(float64(out.Len()), "bytes-out")
		})
	}
}

// BenchmarkCompleteEncrypted measures the encrypted ACS path by cipher and
// by whether a Response signature covers the ciphertext, and what a
// CBC ciphertext with a bad padding costs (the attacker's probe: refused at
// once before the oracle was closed, parsed like any other since), at the
// fixture's size and at 64 KiB. Run it on two trees to compare them.
func BenchmarkCompleteEncrypted(b *testing.B) {
	f := newFixture(b, withKeyPair)
	sp, err := New(f.cfg, f.env(alwaysFresh{}), f.opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sp.Close() })
	f.waitReady(sp)
	_, spCert := testKey(b, 1)
	for _, tc := range []struct {
		name       string
		cipher     string
		signed     bool
		size       int
		badPadding bool
	}{
		{"aes128-cbc/signed_response", samlidp.AES128CBC, true, 0, false},
		{"aes128-cbc/unsigned_response", samlidp.AES128CBC, false, 0, false},
		{"aes128-gcm/unsigned_response", samlidp.AES128GCM, false, 0, false},
		{"aes256-cbc/unsigned_response/64KiB", samlidp.AES256CBC, false, 64 << 10, false},
		{"aes256-cbc/unsigned_response/bad_padding", samlidp.AES256CBC, false, 0, true},
		{"aes256-cbc/unsigned_response/64KiB/bad_padding", samlidp.AES256CBC, false, 64 << 10, true},
	} {
		tx, _ := f.begin(sp)
		s := f.idp.DefaultSpec(testEntityID, testACS, tx.RequestID)
		s.SignResponse, s.EncryptTo, s.Encryption = tc.signed, spCert, samlidp.Encryption{Cipher: tc.cipher}
		if tc.size > 0 {
			var vals []saml.AttributeValue
			for i := range tc.size / 190 {
				vals = append(vals, saml.AttributeValue{Type: "xs:string", Value: fmt.Sprintf("cn=group-%05d,ou=groups,dc=example,dc=org", i)})
			}
			st := &s.Assertion.AttributeStatements[0]
			st.Attributes = append(st.Attributes, saml.Attribute{Name: "urn:oid:1.3.6.1.4.1.5923.1.5.1.1", Values: vals})
		}
		x, err := f.idp.Forge(s)
		if err != nil {
			b.Fatal(err)
		}
		if tc.badPadding {
			// The last byte of the block before the last: the padding
			// count becomes at least 0xef.
			m := regexp.MustCompile(`CipherValue>([A-Za-z0-9+/=]+)<`).FindAllSubmatchIndex(x, -1)
			start, end := m[1][2], m[1][3]
			ct, _ := base64.StdEncoding.DecodeString(string(x[start:end]))
			ct[len(ct)-17] ^= 0xff
			x = append(append(append([]byte(nil), x[:start]...), base64.StdEncoding.EncodeToString(ct)...), x[end:]...)
		}
		body := responseForm(x, tx.Binding).Encode()
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, testACS, strings.NewReader(body))
				r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				_, err := sp.Complete(context.Background(), r, tx)
				if (err == nil) == tc.badPadding {
					b.Fatal(err)
				}
			}
		})
	}
}
