// Package testkeys holds RSA-2048 key pairs made once and kept in the
// repository (keys.pem, made with openssl genpkey), for the library's own
// tests that need many: generating one takes a tenth of a second to a
// second of CPU, at random, and the suites generated some sixty per run,
// a tenth of the CPU time of a cold go test ./... . They are test keys,
// known to anyone who reads this repository: nothing but tests may use
// them.
package testkeys

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	_ "embed"
	"encoding/pem"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"
)

//go:embed keys.pem
var keysPEM []byte

// N is how many keys there are: RSA takes 0 to N-1.
const N = 16

var keys = sync.OnceValue(func() []*rsa.PrivateKey {
	var out []*rsa.PrivateKey
	for rest := keysPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
		if err != nil {
			panic(fmt.Sprintf("testkeys: key %d: %v", len(out), err))
		}
		out = append(out, k.(*rsa.PrivateKey))
	}
	if len(out) != N {
		panic(fmt.Sprintf("testkeys: keys.pem holds %d keys, not %d", len(out), N))
	}
	return out
})

// RSA returns key i, 0 <= i < N: the same key at each call, and a
// different one for each i.
func RSA(i int) *rsa.PrivateKey { return keys()[i] }

// Pair returns key i with a new self-signed certificate for it, named cn,
// valid from an hour before now for ten years: what
// extauthtest/samlidp.NewKeyPair makes, without generating the key.
func Pair(i int, cn string, now time.Time) (*rsa.PrivateKey, *x509.Certificate, error) {
	key := RSA(i)
	cert, err := certify(key, cn, now.Add(-time.Hour), now.AddDate(10, 0, 0))
	return key, cert, err
}

// Named is how many keys, RSA(0) to RSA(Named-1), are for the tests that
// name a key by its index; Lend lends the others.
const Named = 3

// lent counts the keys Lend has lent, by top-level test.
var lent struct {
	sync.Mutex
	n map[string]int
}

// Lend returns a key for t's top-level test that no earlier call for that
// test returned: RSA(Named) to RSA(N-1) in turn, then keys it generates.
// Tests share these keys, which none can see, since each has IdPs and
// applications of its own.
func Lend(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	test, _, _ := strings.Cut(t.Name(), "/")
	lent.Lock()
	if lent.n == nil {
		lent.n = map[string]int{}
	}
	i := Named + lent.n[test]
	lent.n[test]++
	lent.Unlock()
	if i < N {
		return RSA(i)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// LendPair is Lend with a new self-signed certificate named cn, valid
// from an hour before now for ten years, as Pair and
// extauthtest/samlidp.NewKeyPair make them.
func LendPair(t testing.TB, cn string, now time.Time) (*rsa.PrivateKey, *x509.Certificate) {
	t.Helper()
	return LendDated(t, cn, now.Add(-time.Hour), now.AddDate(10, 0, 0))
}

// LendDated is Lend with a new self-signed certificate named cn, valid
// from notBefore to notAfter.
func LendDated(t testing.TB, cn string, notBefore, notAfter time.Time) (*rsa.PrivateKey, *x509.Certificate) {
	t.Helper()
	key := Lend(t)
	cert, err := certify(key, cn, notBefore, notAfter)
	if err != nil {
		t.Fatal(err)
	}
	return key, cert
}

func certify(key *rsa.PrivateKey, cn string, notBefore, notAfter time.Time) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}
