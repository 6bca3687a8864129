package bench

// What DPoP (RFC 9449) costs: the oidc authorize and callback routes with
// dpop: true beside the same routes without, and an API call through
// Auth.Client with a DPoP-bound token beside one with a Bearer token:
//
//	go test -run '^$' -bench 'OIDCDPoP(Ratio|Floor)' ./bench/
//	go test -run '^$' -bench 'OIDCDPoP$' -benchtime 300x -benchmem ./bench/ -rounds 6 | go run ./internal/benchratio
//
// Both sides of each pair are extauth against the same in-process peer,
// which answers at once and checks nothing: the difference is the
// client's work. At authorize, DPoP makes the sign-in's key (an ECDSA
// P-256 key pair) and seals it into the transaction; at the callback it
// reads the key back and signs the token request's proof; an API call
// signs one proof (with the access token's hash). The floor is one ES256
// signature, and one P-256 key generation.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/extauth/extauth"
)

// dpopApp is an application against a peer of its own, with dpop: true or
// not.
func dpopApp(b *testing.B, dpop bool) (*extauth.Auth, *oidcPeer) {
	p := newOIDCPeer(b)
	if dpop {
		p.tokenType = "DPoP"
	}
	a := newBenchApp(b, p, extauth.OIDCAdditionalSettings{DPoP: dpop})
	if err := a.Ready(context.Background()); err != nil {
		b.Fatal(err)
	}
	return a, p
}

func dpopName(dpop bool) string {
	if dpop {
		return "extauth_dpop"
	}
	return "plain"
}

// dpopCallback is the oidc callback route, with dpop: true or not.
func dpopCallback(b *testing.B, dpop bool) oidcSide {
	return haCallback(b, haSetup{name: dpopName(dpop), tokenType: map[bool]string{true: "DPoP"}[dpop],
		add: extauth.OIDCAdditionalSettings{DPoP: dpop}})
}

// dpopAuthorize is the oidc authorize route, with dpop: true or not.
func dpopAuthorize(b *testing.B, dpop bool) oidcSide {
	a, _ := dpopApp(b, dpop)
	return oidcSide{dpopName(dpop), func(tb testing.TB, n int) func(int) error {
		return func(int) error {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodGet, oidcBase+"/users/auth/oidc", nil)
			req.Header.Set("Sec-Fetch-Site", "same-origin")
			a.ServeHTTP(rec, req)
			if rec.Code != http.StatusFound {
				return fmt.Errorf("authorize: %d %s", rec.Code, rec.Body)
			}
			return nil
		}
	}}
}

// dpopAPICall is a GET through Auth.Client with a sign-in's tokens: DPoP
// bound to a key, or Bearer.
func dpopAPICall(b *testing.B, dpop bool) oidcSide {
	a, _ := dpopApp(b, dpop)
	id := &extauth.Identity{Provider: "oidc", UID: "248289761001", Tokens: extauth.Tokens{
		AccessToken: oidcRandom(), TokenType: "Bearer", Expiry: time.Now().Add(time.Hour), Issuer: oidcIssuer}}
	if dpop {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			b.Fatal(err)
		}
		jwk, err := (&jose.JSONWebKey{Key: k, Algorithm: "ES256"}).MarshalJSON()
		if err != nil {
			b.Fatal(err)
		}
		id.Tokens.TokenType, id.Tokens.DPoPKey = "DPoP", string(jwk)
	}
	hc, err := a.Client(context.Background(), id, nil)
	if err != nil {
		b.Fatal(err)
	}
	return oidcSide{dpopName(dpop), func(tb testing.TB, n int) func(int) error {
		return func(int) error {
			resp, err := hc.Get(oidcBase + "/api/me")
			if err != nil {
				return err
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("API call: %d", resp.StatusCode)
			}
			return nil
		}
	}}
}

var dpopPairs = []struct {
	name string
	side func(*testing.B, bool) oidcSide
}{
	{"authorize", dpopAuthorize},
	{"callback", dpopCallback},
	{"api_call", dpopAPICall},
}

// BenchmarkOIDCDPoP runs each pair as sub-benchmarks, alternating -rounds
// times, for internal/benchratio and -benchmem.
func BenchmarkOIDCDPoP(b *testing.B) {
	for _, pair := range dpopPairs {
		b.Run(pair.name, func(b *testing.B) {
			sideBySide(b, pair.side(b, true), pair.side(b, false))
		})
	}
}

// BenchmarkOIDCDPoPRatio is BenchmarkOIDCDPoP in CPU-time rounds: the
// median ratio of each DPoP side to the plain one.
func BenchmarkOIDCDPoPRatio(b *testing.B) {
	for _, pair := range dpopPairs {
		b.Run(pair.name, func(b *testing.B) {
			cpuRatio(b, 100, pair.side(b, true), pair.side(b, false))
		})
	}
}

// BenchmarkOIDCDPoPFloor is the crypto DPoP adds, alone, timed as the
// Ratio benchmarks are: one ES256 signature (a proof) and one P-256 key
// generation (a sign-in's key).
func BenchmarkOIDCDPoPFloor(b *testing.B) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	digest := make([]byte, 32)
	rand.Read(digest)
	for _, f := range []struct {
		name string
		run  func() error
	}{
		{"ecdsa_p256_sign", func() error { _, err := ecdsa.SignASN1(rand.Reader, key, digest); return err }},
		{"ecdsa_p256_keygen", func() error { _, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader); return err }},
	} {
		b.Run(f.name, func(b *testing.B) { cpuFloor(b, 200, f.run) })
	}
}
