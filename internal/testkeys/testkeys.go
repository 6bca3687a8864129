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
	"sync"
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
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return key, cert, err
}
