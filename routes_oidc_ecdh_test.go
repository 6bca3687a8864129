package extauth_test

import (
	"bytes"
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"math/big"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
	josecipher "github.com/go-jose/go-jose/v4/cipher"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/oidcop"
)

// TestOIDCEncryptedIDTokenInvalidCurve plays the invalid-curve attack on
// an ID token encrypted with ECDH-ES (Jager, Schwenk and Somorovsky,
// ESORICS 2015, against JOSE libraries): the attacker, who can inject a
// token, puts in the header an ephemeral key (epk) that is not a point of
// the client's curve, and encrypts with the secret that a client which
// does not check the point would compute from it with its private key.
// Such a client decrypts it, and over many tokens, each a point of small
// order, would tell the attacker its key. Here the forger knows the key,
// so it computes that secret exactly: a client without the check would
// take every token below and sign the user in. extauth refuses each
// (invalid_response, "does not decrypt", the hook never runs); the
// control, the same forger with a genuine ephemeral key, signs in, so the
// refusals are the point's and nothing else of the forgery's.
func TestOIDCEncryptedIDTokenInvalidCurve(t *testing.T) {
	ec := clientKeys()["EC"][0]
	priv := ec.priv.(*ecdsa.PrivateKey)
	p := elliptic.P256().Params().P
	for _, tc := range []struct {
		name string
		// epk returns the ephemeral key for the header, and the secret a
		// client would agree with it that does not check it.
		epk func(t *testing.T) (map[string]any, []byte)
		ok  bool
	}{
		{"a fresh P-256 key (the control)", func(t *testing.T) (map[string]any, []byte) {
			eph, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			x, _ := priv.Curve.ScalarMult(eph.X, eph.Y, priv.D.Bytes())
			return ecJWK("P-256", eph.X, eph.Y, 32), pad(x, 32)
		}, true},
		{"a point off P-256, on a curve with its a and another b", func(t *testing.T) (map[string]any, []byte) {
			x, err := rand.Int(rand.Reader, p)
			if err != nil {
				t.Fatal(err)
			}
			y, err := rand.Int(rand.Reader, p)
			if err != nil {
				t.Fatal(err)
			}
			return ecJWK("P-256", x, y, 32), invalidCurveSecret(priv, x, y)
		}, false},
		{"(0, 0), a point of order 2 on y² = x³ - 3x", func(t *testing.T) (map[string]any, []byte) {
			zero := new(big.Int)
			return ecJWK("P-256", zero, zero, 32), invalidCurveSecret(priv, zero, zero)
		}, false},
		{"a key of P-384", func(t *testing.T) (map[string]any, []byte) {
			eph, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			// A client that takes the curve from the header multiplies on
			// it with its own scalar.
			x, _ := elliptic.P384().ScalarMult(eph.X, eph.Y, priv.D.Bytes())
			return ecJWK("P-384", eph.X, eph.Y, 48), pad(x, 48)
		}, false},
		{"a P-256 key whose x is given plus the field's size", func(t *testing.T) (map[string]any, []byte) {
			eph, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			x, _ := priv.Curve.ScalarMult(eph.X, eph.Y, priv.D.Bytes())
			return ecJWK("P-256", new(big.Int).Add(eph.X, p), eph.Y, 32), pad(x, 32)
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &idTokenForger{t: t, priv: priv, epk: tc.epk}
			s := highAssurance(func(c *oidcop.Config, s *extauth.OIDCAdditionalSettings) {
				c.IDTokenEncryption = oidcop.Encryption{Alg: "ECDH-ES", Enc: "A256GCM"}
				s.PrivateKey = extauth.NewSecret(ec.pem)
				s.IDTokenEncryptedResponseAlg, s.IDTokenEncryptedResponseEnc = "ECDH-ES", "A256GCM"
			})
			s.opts = func(o *extauth.Options) { o.HTTPClient = &http.Client{Transport: f} }
			a := newOIDCApp(t, s)
			resp := a.signIn(t)
			if f.forged.Load() != 1 {
				t.Fatalf("%d ID tokens forged", f.forged.Load())
			}
			if tc.ok {
				if resp.StatusCode != http.StatusOK || len(a.identities()) != 1 {
					t.Fatalf("the control was refused: %d %s\n%s", resp.StatusCode, resp.Body, a.Logs)
				}
				return
			}
			wantCode(t, resp, http.StatusBadRequest, "invalid_response")
			if n := len(a.identities()); n != 0 {
				t.Fatalf("hook called %d times", n)
			}
			if !strings.Contains(a.Logs.String(), "does not decrypt") {
				t.Errorf("the log does not say why:\n%s", a.Logs)
			}
		})
	}
}

// invalidCurveSecret is the x coordinate of d·(x, y) as a client computes
// it that runs the point through P-256's formulas without checking it is
// on P-256: they never use b, so the point is multiplied on the curve of
// P-256's a through it, y² = x³ - 3x + b' (crypto/elliptic's generic
// arithmetic, on that curve's parameters).
func invalidCurveSecret(priv *ecdsa.PrivateKey, x, y *big.Int) []byte {
	params := elliptic.P256().Params()
	b := new(big.Int).Mul(y, y)
	x3 := new(big.Int).Exp(x, big.NewInt(3), params.P)
	b.Sub(b, x3)
	b.Add(b, new(big.Int).Mul(big.NewInt(3), x))
	b.Mod(b, params.P)
	other := &elliptic.CurveParams{P: params.P, N: params.N, B: b, Gx: x, Gy: y, BitSize: 256, Name: "P-256 with another b"}
	zx, _ := other.ScalarMult(x, y, priv.D.Bytes())
	return pad(zx, 32)
}

// ecJWK is an EC public key as a JWK, each coordinate in size bytes or
// more: what an attacker writes, checked by no library.
func ecJWK(crv string, x, y *big.Int, size int) map[string]any {
	return map[string]any{"kty": "EC", "crv": crv,
		"x": base64.RawURLEncoding.EncodeToString(pad(x, size)), "y": base64.RawURLEncoding.EncodeToString(pad(y, size))}
}

// pad is n big-endian, left-padded with zeros to size bytes.
func pad(n *big.Int, size int) []byte {
	b := n.Bytes()
	if len(b) >= size {
		return b
	}
	return append(make([]byte, size-len(b)), b...)
}

// idTokenForger replaces the ID token of the token endpoint's answer with
// one encrypted anew (ECDH-ES, A256GCM) around the same signed token,
// with the ephemeral key and secret epk gives: a token injected by an
// attacker who holds a genuine signed ID token of the sign-in.
type idTokenForger struct {
	t      *testing.T
	priv   *ecdsa.PrivateKey
	epk    func(*testing.T) (map[string]any, []byte)
	forged atomic.Int64
}

func (f *idTokenForger) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/token") || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	var answer map[string]any
	if err := json.Unmarshal(body, &answer); err != nil {
		return nil, err
	}
	raw, _ := answer["id_token"].(string)
	jwe, err := jose.ParseEncryptedCompact(raw, []jose.KeyAlgorithm{jose.ECDH_ES}, []jose.ContentEncryption{jose.A256GCM})
	if err != nil {
		f.t.Errorf("the provider's ID token: %v", err)
		return nil, err
	}
	signed, err := jwe.Decrypt(f.priv)
	if err != nil {
		f.t.Errorf("the provider's ID token: %v", err)
		return nil, err
	}
	epk, z := f.epk(f.t)
	answer["id_token"] = sealECDHES(f.t, jwe.Header.KeyID, epk, z, signed)
	f.forged.Add(1)
	body, _ = json.Marshal(answer)
	resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	resp.Header.Del("Content-Length")
	return resp, nil
}

// sealECDHES encrypts plaintext as a compact JWE of ECDH-ES direct key
// agreement (RFC 7518 4.6) with A256GCM, whose content key is derived
// from the shared secret z by the Concat KDF (go-jose's), for the key
// kid, with epk in its header: by hand, since go-jose checks the
// ephemeral key and will not build what an attacker sends.
func sealECDHES(t *testing.T, kid string, epk map[string]any, z, plaintext []byte) string {
	t.Helper()
	header, err := json.Marshal(map[string]any{"alg": "ECDH-ES", "enc": "A256GCM", "kid": kid, "epk": epk, "cty": "JWT"})
	if err != nil {
		t.Fatal(err)
	}
	prefixed := func(b []byte) []byte { return binary.BigEndian.AppendUint32(nil, uint32(len(b))) }
	algID := append(prefixed([]byte("A256GCM")), "A256GCM"...)
	cek := make([]byte, 32)
	kdf := josecipher.NewConcatKDF(crypto.SHA256, z, algID, prefixed(nil), prefixed(nil), binary.BigEndian.AppendUint32(nil, 256), nil)
	if _, err := io.ReadFull(kdf, cek); err != nil {
		t.Fatal(err)
	}
	block, err := aes.NewCipher(cek)
	if err != nil {
		t.Fatal(err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	iv := make([]byte, gcm.NonceSize())
	rand.Read(iv)
	protected := base64.RawURLEncoding.EncodeToString(header)
	sealed := gcm.Seal(nil, iv, plaintext, []byte(protected))
	ct, tag := sealed[:len(sealed)-gcm.Overhead()], sealed[len(sealed)-gcm.Overhead():]
	enc := base64.RawURLEncoding.EncodeToString
	return protected + ".." + enc(iv) + "." + enc(ct) + "." + enc(tag)
}
