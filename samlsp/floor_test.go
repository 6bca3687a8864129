package samlsp

import (
	"context"
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
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

// acsCase is one response of the ACS benchmarks beside its floors: what
// the ACS runs (the whole Complete, form decoding included) and what each
// floor runs on the same bytes.
type acsCase struct {
	name string
	acs  func() error
	// floor is the component floor: what verifying the response costs
	// whatever library does it. One parse of the response (etree), and
	// for each signature the exclusive canonicalization of the signed
	// element without its signature (goxmldsig's canonicalizer), its
	// SHA-256 compared with DigestValue, the canonicalization of
	// SignedInfo and the RSA verification of SignatureValue over its
	// SHA-256; for the encrypted response also the content key's RSA-OAEP
	// decryption, the AES-CBC decryption and the parse of the plaintext.
	// Nothing is parsed twice, and no check is made that the response
	// does not need for its signatures to verify.
	floor func() error
	// goxmldsig is the floor of an SP that verifies with goxmldsig, as
	// the ACS does: the parse, and ValidationContext.Validate of each
	// signature, which also searches for the signature, parses its
	// certificate from KeyInfo and parses again the canonical bytes it
	// verified. It includes work the component floor does not, so an ACS
	// that slipped can still sit near it: the component floor is the
	// one the ACS is held to.
	goxmldsig func() error
}

// acsCases are the two responses of BenchmarkComplete, the signed one
// (about 8 KB: a signed Response around a signed assertion) and the
// encrypted one (a signed Response around the signed assertion encrypted
// with AES-128-CBC and RSA-OAEP), each with its floors (see acsCase). The
// floors check nothing else: no shape, no condition, no algorithm policy,
// no bound.
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
		idpKey, ok := sp.md.current().certs[0].PublicKey.(*rsa.PublicKey)
		if !ok {
			tb.Fatal("the fixture's IdP key is not RSA")
		}
		floorOf := func(verify func(*etree.Element) (*etree.Element, error)) func() error {
			return func() error {
				doc := etree.NewDocument()
				if err := doc.ReadFromBytes(x); err != nil {
					return err
				}
				resp, err := verify(doc.Root())
				if err != nil {
					return err
				}
				if !encrypted {
					a := floorChild(resp, "Assertion")
					if a == nil {
						return errors.New("no assertion")
					}
					_, err = verify(a)
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
				_, err = verify(pd.Root())
				return err
			}
		}
		floor := floorOf(func(el *etree.Element) (*etree.Element, error) { return el, componentVerify(el, idpKey) })
		goxmldsig := floorOf(vc.Validate)
		if err := acs(); err != nil {
			tb.Fatal(name, err)
		}
		if err := floor(); err != nil {
			tb.Fatal(name, "floor: ", err)
		}
		if err := goxmldsig(); err != nil {
			tb.Fatal(name, "goxmldsig floor: ", err)
		}
		out = append(out, acsCase{name, acs, floor, goxmldsig})
	}
	return out
}

// componentVerify verifies the enveloped RSA-SHA256 signature of el from
// its components, with the canonicalizer the ACS uses: the exclusive
// canonical form of el without its signature, hashed and compared with
// DigestValue, then that of SignedInfo, hashed, and the RSA PKCS #1 v1.5
// verification of SignatureValue. It checks no algorithm, reference or
// shape (the fixture's are known): the floor of the work, not a verifier.
func componentVerify(el *etree.Element, pub *rsa.PublicKey) error {
	sig := floorChild(el, "Signature")
	si := floorChild(sig, "SignedInfo")
	dv := floorChild(floorChild(si, "Reference"), "DigestValue")
	sv := floorChild(sig, "SignatureValue")
	if dv == nil || sv == nil {
		return errors.New("no DigestValue or SignatureValue")
	}
	want, err := base64.StdEncoding.DecodeString(strings.TrimSpace(dv.Text()))
	if err != nil {
		return err
	}
	value, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(sv.Text()), ""))
	if err != nil {
		return err
	}
	c14n := dsig.MakeC14N10ExclusiveCanonicalizerWithPrefixList("")
	at := sig.Index()
	el.RemoveChildAt(at)
	declareInScope(el)
	signed, err := c14n.Canonicalize(el)
	el.InsertChildAt(at, sig)
	if err != nil {
		return err
	}
	if d := sha256.Sum256(signed); subtle.ConstantTimeCompare(d[:], want) != 1 {
		return errors.New("digest mismatch")
	}
	declareInScope(si)
	canonical, err := c14n.Canonicalize(si)
	if err != nil {
		return err
	}
	h := sha256.Sum256(canonical)
	return rsa.VerifyPKCS1v15(pub, crypto.SHA256, h[:], value)
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

// BenchmarkACSFloor runs the ACS (extauth), its component floor (floor)
// and its goxmldsig floor on the same response, one after the other; with
// -count N,
// internal/benchratio pairs them by round:
//
//	go test -run '^$' -bench ACSFloor$ -benchmem -count 10 ./samlsp/ | go run ./internal/benchratio
func BenchmarkACSFloor(b *testing.B) {
	for _, c := range acsCases(b) {
		for _, side := range []struct {
			name string
			run  func() error
		}{{"extauth", c.acs}, {"floor", c.floor}, {"floor_goxmldsig", c.goxmldsig}} {
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
// the median of the per-round ratios ACS/floor (and ACS/goxmldsig floor),
// logged with every ratio.
//
//	go test -c -o samlsp.test ./samlsp/ && (cd samlsp && ../samlsp.test -test.run '^$' -test.bench ACSFloorRatio -floor.rounds 21)
func BenchmarkACSFloorRatio(b *testing.B) {
	for _, c := range acsCases(b) {
		for _, f := range []struct {
			name  string
			floor func() error
		}{{"floor", c.floor}, {"floor_goxmldsig", c.goxmldsig}} {
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
