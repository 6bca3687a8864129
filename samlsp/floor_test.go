package samlsp

import (
	"context"
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rsa"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/beevik/etree"
	dsig "github.com/russellhaering/goxmldsig"
)

var floorRounds = flag.Int("floor.rounds", 15, "CPU-time rounds of BenchmarkACSFloorRatio")

// acsCase is one response of the ACS benchmarks beside its floor: what the
// ACS runs (the whole Complete, form decoding included) and what the
// floor runs on the same bytes.
type acsCase struct {
	name  string
	acs   func() error
	floor func() error
	// bare is the floor with each signature's KeyInfo removed before
	// goxmldsig sees it, as the ACS does (it verifies with the IdP's
	// certificates from the metadata, never the message's): goxmldsig
	// then parses no certificate from the message.
	bare func() error
}

// acsCases are the two responses of BenchmarkComplete, the signed one
// (about 8 KB: a signed Response around a signed assertion) and the
// encrypted one (a signed Response around the signed assertion encrypted
// with AES-128-CBC and RSA-OAEP), each with its goxmldsig floor: what no
// SAML SP that verifies with goxmldsig can do without. For the signed one,
// the etree parse of the response and goxmldsig's Validate of each
// signature; for the encrypted one, also the base64 decoding and RSA-OAEP
// decryption of the content key, the AES-CBC decryption and the parse of
// the plaintext. The floor checks nothing else: no shape, no condition, no
// algorithm policy, no bound.
func acsCases(tb testing.TB) []acsCase {
	var out []acsCase
	for _, encrypted := range []bool{false, true} {
		f := newFixture(tb, withKeyPair)
		sp, err := New(f.cfg, f.env(alwaysFresh{}), f.opts)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { sp.Close() })
		f.waitReady(sp)
		tx, _ := f.begin(sp)
		s := f.idp.DefaultSpec(testEntityID, testACS, tx.RequestID)
		s.SignResponse = true
		name := "signed_response_and_assertion"
		spKey, spCert := testKey(tb, 1)
		if encrypted {
			s.EncryptTo = spCert
			name = "encrypted_assertion"
		}
		x, err := f.idp.Forge(s)
		if err != nil {
			tb.Fatal(err)
		}
		body := responseForm(x, tx.Binding).Encode()
		acs := func() error {
			r := httptest.NewRequest(http.MethodPost, testACS, strings.NewReader(body))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			_, err := sp.Complete(context.Background(), r, tx)
			return err
		}
		vc := dsig.NewDefaultValidationContext(&dsig.MemoryX509CertificateStore{Roots: sp.md.current().certs})
		vc.IdAttribute = "ID"
		vc.Clock = dsig.NewFakeClockAt(sp.env.Now())
		floorOf := func(bare bool) func() error {
			validate := func(el *etree.Element) (*etree.Element, error) {
				if bare {
					if sig := floorChild(el, "Signature"); sig != nil {
						if ki := floorChild(sig, "KeyInfo"); ki != nil {
							sig.RemoveChild(ki)
						}
					}
				}
				return vc.Validate(el)
			}
			return func() error {
				doc := etree.NewDocument()
				if err := doc.ReadFromBytes(x); err != nil {
					return err
				}
				resp, err := validate(doc.Root())
				if err != nil {
					return err
				}
				if !encrypted {
					a := floorChild(resp, "Assertion")
					if a == nil {
						return errors.New("no assertion")
					}
					_, err = validate(a)
					return err
				}
				data := floorChild(floorChild(resp, "EncryptedAssertion"), "EncryptedData")
				ek := floorChild(floorChild(data, "KeyInfo"), "EncryptedKey")
				wrapped, err := floorCipherValue(ek)
				if err != nil {
					return err
				}
				cek, err := spKey.Decrypt(nil, wrapped, &rsa.OAEPOptions{Hash: crypto.SHA1, MGFHash: crypto.SHA1})
				if err != nil {
					return err
				}
				ct, err := floorCipherValue(data)
				if err != nil {
					return err
				}
				block, err := aes.NewCipher(cek)
				if err != nil {
					return err
				}
				plain := make([]byte, len(ct)-aes.BlockSize)
				cipher.NewCBCDecrypter(block, ct[:aes.BlockSize]).CryptBlocks(plain, ct[aes.BlockSize:])
				plain = plain[:len(plain)-int(plain[len(plain)-1])]
				pd := etree.NewDocument()
				if err := pd.ReadFromBytes(plain); err != nil {
					return err
				}
				_, err = validate(pd.Root())
				return err
			}
		}
		floor, bare := floorOf(false), floorOf(true)
		if err := acs(); err != nil {
			tb.Fatal(name, err)
		}
		if err := floor(); err != nil {
			tb.Fatal(name, "floor: ", err)
		}
		if err := bare(); err != nil {
			tb.Fatal(name, "bare floor: ", err)
		}
		out = append(out, acsCase{name, acs, floor, bare})
	}
	return out
}

// floorChild returns el's first child element named tag, in any namespace.
func floorChild(el *etree.Element, tag string) *etree.Element {
	if el == nil {
		return nil
	}
	for _, c := range el.ChildElements() {
		if c.Tag == tag {
			return c
		}
	}
	return nil
}

func floorCipherValue(el *etree.Element) ([]byte, error) {
	cv := floorChild(floorChild(el, "CipherData"), "CipherValue")
	if cv == nil {
		return nil, errors.New("no CipherValue")
	}
	return base64.StdEncoding.DecodeString(cv.Text())
}

// BenchmarkACSFloor runs the ACS (extauth) and its goxmldsig floor (floor)
// on the same response, one after the other; with -count N,
// internal/benchratio pairs them by round:
//
//	go test -run '^$' -bench ACSFloor$ -benchmem -count 10 ./samlsp/ | go run ./internal/benchratio
func BenchmarkACSFloor(b *testing.B) {
	for _, c := range acsCases(b) {
		for _, side := range []struct {
			name string
			run  func() error
		}{{"extauth", c.acs}, {"floor", c.floor}, {"floor_bare", c.bare}} {
			b.Run(c.name+"/"+side.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := side.run(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkACSFloorRatio is BenchmarkACSFloor in process CPU time, which
// the other processes of a busy machine do not inflate: -floor.rounds
// rounds of n operations of each side, the order flipping each round, and
// the median of the per-round ratios ACS/floor (and ACS/bare floor),
// logged with every ratio.
//
//	go test -c -o samlsp.test ./samlsp/ && (cd samlsp && ../samlsp.test -test.run '^$' -test.bench ACSFloorRatio -floor.rounds 21)
func BenchmarkACSFloorRatio(b *testing.B) {
	for _, c := range acsCases(b) {
		for _, f := range []struct {
			name  string
			floor func() error
		}{{"floor", c.floor}, {"floor_bare", c.bare}} {
			b.Run(c.name+"/"+f.name, func(b *testing.B) {
				var ratios []float64
				timeSide := func(run func() error, n int) float64 {
					runtime.GC()
					start := cpuTime()
					for range n {
						if err := run(); err != nil {
							b.Fatal(err)
						}
					}
					return float64(cpuTime()-start) / float64(n)
				}
				const n = 100
				for r := range *floorRounds {
					var acs, floor float64
					if r%2 == 0 {
						acs, floor = timeSide(c.acs, n), timeSide(f.floor, n)
					} else {
						floor, acs = timeSide(f.floor, n), timeSide(c.acs, n)
					}
					ratios = append(ratios, acs/floor)
				}
				s := slices.Sorted(slices.Values(ratios))
				parts := make([]string, len(ratios))
				for i, r := range ratios {
					parts[i] = fmt.Sprintf("%.3f", r)
				}
				b.Logf("per-round ratios ACS/%s: %s", f.name, strings.Join(parts, " "))
				b.ReportMetric(s[len(s)/2], "ratio")
				b.ReportMetric(s[0], "min-ratio")
				b.ReportMetric(s[len(s)-1], "max-ratio")
			})
		}
	}
}
