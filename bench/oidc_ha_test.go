package bench

// What high assurance costs a sign-in: the oidc callback route with a
// client assertion (private_key_jwt) beside the same route with
// client_secret_basic, and with an encrypted ID token beside a signed one,
// for an RSA-2048 and an EC P-256 client key:
//
//	go test -run '^$' -bench 'OIDCHighAssuranceRatio' ./bench/
//	go test -run '^$' -bench 'OIDCHighAssurance$' -benchtime 300x -benchmem ./bench/ -rounds 6 | go run ./internal/benchratio
//	go test -run '^$' -bench 'OIDCHighAssuranceFloor' -benchmem ./bench/
//
// Both sides of each pair are extauth, against the same in-process
// provider, whose token endpoint answers with responses minted before the
// timing: the difference is the assertion's signature (the code exchange
// sends one), or the ID token's decryption.

import (
	"crypto"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/oidcop"
	"github.com/extauth/extauth/internal/loadtest"
)

// haClientKeys are the client's keys: RSA 2048 and EC P-256, PEM.
var haClientKeys = sync.OnceValue(func() map[string]crypto.Signer {
	r, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	e, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return map[string]crypto.Signer{"RSA": r, "EC": e}
})

func pemKey(tb testing.TB, k crypto.Signer) string {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		tb.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// haSetup is one side of a comparison: the provider's client
// authentication method, the application's oidc_additional_settings, and
// the encryption of the canned ID tokens.
type haSetup struct {
	name   string
	method string
	add    extauth.OIDCAdditionalSettings
	enc    *oidcop.Encryption
	key    crypto.Signer
	// tokenType is the token_type the provider answers with.
	tokenType string
}

// haCallback is the oidc callback route of an application configured as s
// says, against a peer of its own.
func haCallback(b *testing.B, s haSetup) oidcSide {
	p := newOIDCPeerWith(b, func(c *oidcop.Config) {
		if s.method != "" {
			c.AuthMethod = s.method
		}
	})
	p.tokenType = s.tokenType
	if s.enc != nil {
		enc, err := jose.NewEncrypter(jose.ContentEncryption(s.enc.Enc),
			jose.Recipient{Algorithm: jose.KeyAlgorithm(s.enc.Alg), Key: s.key.Public()},
			(&jose.EncrypterOptions{}).WithContentType("JWT"))
		if err != nil {
			b.Fatal(err)
		}
		p.encrypter = enc
	}
	a := newBenchApp(b, p, s.add)
	side := oidcSide{s.name, func(tb testing.TB, n int) func(int) error {
		reqs := oidcCallbacks(tb, p, a, "/users/auth/oidc", n)
		return func(i int) error {
			rec := httptest.NewRecorder()
			a.ServeHTTP(rec, reqs[i])
			if rec.Code != http.StatusNoContent {
				return fmt.Errorf("%s callback: %d %s", s.name, rec.Code, rec.Body)
			}
			return nil
		}
	}}
	// Discovery and keys are fetched once, outside the timing.
	if err := side.prepare(b, 1)(0); err != nil {
		b.Fatal(err)
	}
	return side
}

// newBenchApp is an application whose oidc client is registered with the
// peer, with the oidc_additional_settings add, its hook answering 204.
func newBenchApp(b *testing.B, p *oidcPeer, add extauth.OIDCAdditionalSettings) *extauth.Auth {
	cfg := &extauth.Config{OIDC: extauth.OIDCConfig{ClientID: oidcClientID, ClientSecret: extauth.NewSecret(oidcSecret), Issuer: oidcIssuer, Additional: add}}
	a, err := extauth.New(cfg, extauth.Options{
		BaseURL: oidcBase, CookieKey: make([]byte, 32), HTTPClient: p.client,
		Logger: slog.New(slog.DiscardHandler),
		OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
			w.WriteHeader(http.StatusNoContent)
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close() })
	return a
}

// cpuFloor reports what run costs alone, timed as the Ratio benchmarks
// time a side: in process CPU time, the median of -oidc.rounds rounds of
// per calls, so that a floor and the operations above it are measured
// alike.
func cpuFloor(b *testing.B, per int, run func() error) {
	var once sync.Once
	var perOp []float64
	once.Do(func() {
		for range *oidcRounds {
			runtime.GC()
			start := loadtest.ProcessCPU()
			for range per {
				if err := run(); err != nil {
					b.Fatal(err)
				}
			}
			perOp = append(perOp, float64((loadtest.ProcessCPU()-start).Nanoseconds())/float64(per))
		}
	})
	b.ReportMetric(median(perOp), "ns/op")
}

// haPairs are the comparisons: each high-assurance side beside the plain
// callback.
func haPairs(b *testing.B) []struct {
	name       string
	ours, base haSetup
} {
	keys := haClientKeys()
	// benchratio pairs a side named extauth... with the other.
	plain := haSetup{name: "plain"}
	assertion := func(kind string) haSetup {
		return haSetup{name: "extauth_private_key_jwt", method: "private_key_jwt", key: keys[kind],
			add: extauth.OIDCAdditionalSettings{ClientAuthMethod: "private_key_jwt", PrivateKey: extauth.NewSecret(pemKey(b, keys[kind]))}}
	}
	encrypted := func(kind, alg, enc string) haSetup {
		return haSetup{name: "extauth_jwe", key: keys[kind], enc: &oidcop.Encryption{Alg: alg, Enc: enc},
			add: extauth.OIDCAdditionalSettings{PrivateKey: extauth.NewSecret(pemKey(b, keys[kind])),
				IDTokenEncryptedResponseAlg: alg, IDTokenEncryptedResponseEnc: enc}}
	}
	return []struct {
		name       string
		ours, base haSetup
	}{
		{"assertion_RSA_PS256", assertion("RSA"), plain},
		{"assertion_EC_ES256", assertion("EC"), plain},
		{"jwe_RSA-OAEP-256_A256GCM", encrypted("RSA", "RSA-OAEP-256", "A256GCM"), plain},
		{"jwe_ECDH-ES_A256GCM", encrypted("EC", "ECDH-ES", "A256GCM"), plain},
	}
}

// BenchmarkOIDCHighAssurance runs each pair as sub-benchmarks, alternating
// -rounds times, for internal/benchratio and -benchmem.
func BenchmarkOIDCHighAssurance(b *testing.B) {
	for _, pair := range haPairs(b) {
		b.Run(pair.name, func(b *testing.B) {
			sideBySide(b, haCallback(b, pair.ours), haCallback(b, pair.base))
		})
	}
}

// BenchmarkOIDCHighAssuranceRatio is BenchmarkOIDCHighAssurance in
// CPU-time rounds: the median ratio of each high-assurance callback to
// the plain one.
func BenchmarkOIDCHighAssuranceRatio(b *testing.B) {
	for _, pair := range haPairs(b) {
		b.Run(pair.name, func(b *testing.B) {
			cpuRatio(b, 60, haCallback(b, pair.ours), haCallback(b, pair.base))
		})
	}
}

// BenchmarkOIDCHighAssuranceFloor is what the crypto of each comparison
// costs alone, in crypto/rsa, crypto/ecdsa and crypto/ecdh, in CPU-time
// rounds as BenchmarkOIDCHighAssuranceRatio: the floor of the time the
// high-assurance callbacks add.
func BenchmarkOIDCHighAssuranceFloor(b *testing.B) {
	keys := haClientKeys()
	rsaKey, ecKey := keys["RSA"].(*rsa.PrivateKey), keys["EC"].(*ecdsa.PrivateKey)
	digest := make([]byte, 32)
	rand.Read(digest)
	cek := make([]byte, 32)
	wrapped, err := rsa.EncryptOAEP(sha256.New(), rand.Reader, &rsaKey.PublicKey, cek, nil)
	if err != nil {
		b.Fatal(err)
	}
	ecdhKey, err := ecKey.ECDH()
	if err != nil {
		b.Fatal(err)
	}
	peer, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range []struct {
		name string
		run  func() error
	}{
		{"rsa_pss_sign", func() error {
			_, err := rsa.SignPSS(rand.Reader, rsaKey, crypto.SHA256, digest, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
			return err
		}},
		{"ecdsa_p256_sign", func() error { _, err := ecdsa.SignASN1(rand.Reader, ecKey, digest); return err }},
		{"rsa_oaep256_decrypt", func() error { _, err := rsa.DecryptOAEP(sha256.New(), nil, rsaKey, wrapped, nil); return err }},
		{"ecdh_p256", func() error { _, err := ecdhKey.ECDH(peer.PublicKey()); return err }},
	} {
		b.Run(f.name, func(b *testing.B) { cpuFloor(b, 50, f.run) })
	}
}
