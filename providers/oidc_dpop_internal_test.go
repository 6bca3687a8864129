package providers

import (
	"context"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

func testStrategy(t *testing.T) *OIDC {
	t.Helper()
	s, err := NewOIDC(OIDCConfig{ClientID: "c", ClientSecret: "s", Issuer: "https://op.example"},
		Env{CallbackURL: "https://app.example/cb", HTTPClient: http.DefaultClient})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A proof is RFC 9449 4.2's: typ dpop+jwt, the public key in the header
// and no private member, htu without query or fragment (scheme and host
// in lower case), htm, iat, a fresh jti each time, the nonce, and ath the
// token's SHA-256; the key reads back from its encoding with the same
// thumbprint.
func TestDPoPProof(t *testing.T) {
	s := testStrategy(t)
	now := time.Unix(1_800_000_000, 0)
	s.now = func() time.Time { return now }
	for _, alg := range dpopSigningAlgs {
		t.Run(alg, func(t *testing.T) {
			k, err := newDPoPKey(alg)
			if err != nil {
				t.Fatal(err)
			}
			enc, err := k.encode()
			if err != nil {
				t.Fatal(err)
			}
			back, err := parseDPoPKey(enc)
			if err != nil || back.jkt != k.jkt || back.alg != alg {
				t.Fatalf("the key does not read back: %v", err)
			}
			u, _ := url.Parse("HTTPS://API.Example.ORG/v1/me?page=2#top")
			seen := map[string]bool{}
			for range 3 {
				raw, err := back.proof(s, http.MethodGet, u, "n-1", "the-token")
				if err != nil {
					t.Fatal(err)
				}
				jws, err := jose.ParseSignedCompact(raw, []jose.SignatureAlgorithm{jose.SignatureAlgorithm(alg)})
				if err != nil {
					t.Fatal(err)
				}
				h := jws.Signatures[0].Protected
				if h.ExtraHeaders["typ"] != "dpop+jwt" || h.JSONWebKey == nil || !h.JSONWebKey.IsPublic() || h.KeyID != "" {
					t.Fatalf("header %+v", h)
				}
				sum, _ := h.JSONWebKey.Thumbprint(crypto.SHA256)
				if base64.RawURLEncoding.EncodeToString(sum) != k.jkt {
					t.Error("the header's key is not the sign-in's")
				}
				payload, err := jws.Verify(h.JSONWebKey)
				if err != nil {
					t.Fatal(err)
				}
				var c map[string]any
				json.Unmarshal(payload, &c)
				tokenSum := sumSHA256String("the-token")
				if c["htu"] != "https://api.example.org/v1/me" || c["htm"] != "GET" || c["iat"] != float64(now.Unix()) ||
					c["nonce"] != "n-1" || c["ath"] != tokenSum || seen[c["jti"].(string)] {
					t.Errorf("claims %v", c)
				}
				seen[c["jti"].(string)] = true
			}
		})
	}
	for _, bad := range []string{"", "{}", `{"kty":"EC","crv":"P-256","x":"AA","y":"AA"}`, `{"kty":"oct","k":"c2VjcmV0","alg":"HS256"}`} {
		if _, err := parseDPoPKey(bad); err == nil {
			t.Errorf("parseDPoPKey(%q) took it", bad)
		}
	}
	// A public key, or a key of another algorithm than it names, is no
	// key to sign with.
	k, _ := newDPoPKey("ES256")
	pub, _ := (&jose.JSONWebKey{Key: k.priv.Public(), Algorithm: "ES256"}).MarshalJSON()
	other, _ := (&jose.JSONWebKey{Key: k.priv, Algorithm: "PS256"}).MarshalJSON()
	for _, bad := range [][]byte{pub, other} {
		if _, err := parseDPoPKey(string(bad)); err == nil {
			t.Errorf("parseDPoPKey took %s", bad)
		}
	}
}

func sumSHA256String(s string) string {
	k := crypto.SHA256.New()
	io.WriteString(k, s)
	return base64.RawURLEncoding.EncodeToString(k.Sum(nil))
}

// The nonce cache keeps at most maxDPoPOrigins origins (the nonces it
// takes are bounded before it: TestDPoPServerNonceChecked).
func TestDPoPNonceCacheBounded(t *testing.T) {
	var c nonceCache
	for i := range maxDPoPOrigins + 50 {
		c.put(fmt.Sprintf("https://rs%d.example", i), "n")
	}
	if len(c.m) != maxDPoPOrigins {
		t.Errorf("%d origins kept", len(c.m))
	}
}

// The transport sends a request again exactly once when the server asks
// for a new nonce, at an authorization server (400 use_dpop_nonce) and at
// a resource server (401 with a DPoP challenge), with the body again; not
// when the server names the nonce it was given, and not when the body
// cannot be sent again.
func TestDPoPTransportRetriesOnce(t *testing.T) {
	s := testStrategy(t)
	k, err := newDPoPKey("ES256")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		// asks answers a request whose proof carries nonce.
		asks     func(w http.ResponseWriter, nonce string, n int64)
		post     bool
		noReplay bool
		want     int64
	}{
		{"authorization server, then honoured", func(w http.ResponseWriter, nonce string, n int64) {
			if nonce != "fresh" {
				w.Header().Set("DPoP-Nonce", "fresh")
				w.WriteHeader(http.StatusBadRequest)
				io.WriteString(w, `{"error":"use_dpop_nonce"}`)
			}
		}, true, false, 2},
		{"resource server, then honoured", func(w http.ResponseWriter, nonce string, n int64) {
			if nonce != "fresh" {
				w.Header().Set("DPoP-Nonce", "fresh")
				w.Header().Set("WWW-Authenticate", `DPoP error="use_dpop_nonce", error_description="fresh nonce"`)
				w.WriteHeader(http.StatusUnauthorized)
			}
		}, false, false, 2},
		{"a server that never honours its nonce", func(w http.ResponseWriter, nonce string, n int64) {
			w.Header().Set("DPoP-Nonce", fmt.Sprint("n", n))
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":"use_dpop_nonce"}`)
		}, true, false, 2},
		{"a body that cannot be sent again", func(w http.ResponseWriter, nonce string, n int64) {
			w.Header().Set("DPoP-Nonce", fmt.Sprint("n", n))
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":"use_dpop_nonce"}`)
		}, true, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				i := n.Add(1)
				jws, err := jose.ParseSignedCompact(r.Header.Get("DPoP"), []jose.SignatureAlgorithm{jose.ES256})
				if err != nil {
					t.Errorf("request %d: proof %v", i, err)
					return
				}
				var c struct{ Nonce string }
				json.Unmarshal(jws.UnsafePayloadWithoutVerification(), &c)
				if body, _ := io.ReadAll(r.Body); tc.post && string(body) != "a=b" {
					t.Errorf("request %d: body %q", i, body)
				}
				tc.asks(w, c.Nonce, i)
			}))
			defer srv.Close()
			tr := &dpopTransport{next: http.DefaultTransport, s: s}
			s.nonces = nonceCache{}
			method := http.MethodGet
			var body io.Reader
			if tc.post {
				method, body = http.MethodPost, strings.NewReader("a=b")
			}
			req, _ := http.NewRequestWithContext(withDPoP(context.Background(), k), method, srv.URL+"/x", body)
			if tc.noReplay {
				req.GetBody = nil
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if n.Load() != tc.want {
				t.Errorf("%d requests, want %d", n.Load(), tc.want)
			}
		})
	}
}

// An RSA DPoP key is made by one sign-in start at a time: while another
// start holds the gate, a start whose request ends first fails as
// unavailable and makes no key; once the gate is free it goes through.
// EC keys never wait.
func TestRSAKeygenOneAtATime(t *testing.T) {
	g := newKeygenGate("PS256")
	release, err := g.acquire(context.Background(), "PS256")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var e *Error
	if _, err := g.acquire(ctx, "PS256"); !errors.As(err, &e) || e.Code != CodeProviderUnavailable {
		t.Fatalf("a second RSA key while the first is made: %v", err)
	}
	if r, err := newKeygenGate("ES256").acquire(ctx, "ES256"); err != nil {
		t.Fatalf("an EC key waited: %v", err)
	} else {
		r()
	}
	release()
	r, err := g.acquire(ctx, "PS256")
	if err != nil {
		t.Fatalf("the gate stayed shut after release: %v", err)
	}
	r()
}

// What a server sends as a nonce, or as a request for one, is taken only
// when it is what RFC 9449 allows: a DPoP-Nonce of 1 to maxDPoPNonce
// NQCHARs, the one bound for every nonce accepted, cached or sent back in
// the one retry; and a use_dpop_nonce asked by the DPoP challenge itself,
// wherever it stands among the challenges of WWW-Authenticate, quoted or
// not. Anything else is answered as the server sent it, with no retry,
// and no proof ever carries a nonce the bound refuses.
func TestDPoPServerNonceChecked(t *testing.T) {
	s := testStrategy(t)
	k, err := newDPoPKey("ES256")
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("n", 64<<10)
	atAS := func(nonce string) func(w http.ResponseWriter) {
		return func(w http.ResponseWriter) {
			w.Header().Set("DPoP-Nonce", nonce)
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":"use_dpop_nonce"}`)
		}
	}
	atRS := func(challenges ...string) func(w http.ResponseWriter) {
		return func(w http.ResponseWriter) {
			w.Header().Set("DPoP-Nonce", "fresh")
			w.Header()["Www-Authenticate"] = challenges
			w.WriteHeader(http.StatusUnauthorized)
		}
	}
	for _, tc := range []struct {
		name string
		// ask answers a request whose proof has no nonce.
		ask   func(w http.ResponseWriter)
		retry bool
	}{
		{"a nonce at the bound", atAS(strings.Repeat("n", maxDPoPNonce)), true},
		{"every character a nonce may hold", atAS("!#[]~" + strings.Repeat("aZ09-._~+/=", 8)), true},
		{"a 64 KiB nonce", atAS(big), false},
		{"a nonce one past the bound", atAS(strings.Repeat("n", maxDPoPNonce+1)), false},
		{"a nonce with a space", atAS("a b"), false},
		{"a nonce with a quote", atAS(`a"b`), false},
		{"a nonce with a backslash", atAS(`a\b`), false},
		{"a nonce with a tab", atAS("a\tb"), false},
		{"a nonce with a non-ASCII character", atAS("nonce-é"), false},
		{"the DPoP challenge second", atRS(`Bearer realm="api", DPoP error="use_dpop_nonce"`), true},
		{"the DPoP challenge in a header of its own", atRS(`Bearer realm="api"`, `DPoP algs="ES256"`, `DPoP error="use_dpop_nonce"`), true},
		{"use_dpop_nonce unquoted", atRS(`DPoP error=use_dpop_nonce`), true},
		{"the scheme and the parameter in other case", atRS(`dpop ERROR="use_dpop_nonce"`), true},
		{"use_dpop_nonce in the Bearer challenge, not DPoP's", atRS(`DPoP algs="ES256", Bearer error="use_dpop_nonce"`), false},
		{"use_dpop_nonce in a description", atRS(`DPoP error="invalid_token", error_description="error=\"use_dpop_nonce\""`), false},
		{"another error", atRS(`DPoP error="invalid_dpop_proof"`), false},
		{"challenges past their bound", atRS(`Bearer realm="` + strings.Repeat("a", 9<<10) + `", DPoP error="use_dpop_nonce"`), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int64
			var longest atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n.Add(1)
				jws, err := jose.ParseSignedCompact(r.Header.Get("DPoP"), []jose.SignatureAlgorithm{jose.ES256})
				if err != nil {
					t.Errorf("proof: %v", err)
					return
				}
				var c struct{ Nonce string }
				json.Unmarshal(jws.UnsafePayloadWithoutVerification(), &c)
				if int64(len(c.Nonce)) > longest.Load() {
					longest.Store(int64(len(c.Nonce)))
				}
				if c.Nonce == "" {
					tc.ask(w)
				}
			}))
			defer srv.Close()
			s.nonces = nonceCache{}
			tr := &dpopTransport{next: http.DefaultTransport, s: s}
			req, _ := http.NewRequestWithContext(withDPoP(context.Background(), k), http.MethodPost, srv.URL+"/token", strings.NewReader("a=b"))
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			want := int64(1)
			if tc.retry {
				want = 2
			}
			if n.Load() != want {
				t.Errorf("%d requests, want %d", n.Load(), want)
			}
			if longest.Load() > maxDPoPNonce {
				t.Errorf("a proof carried a nonce of %d bytes", longest.Load())
			}
			if got := s.nonces.get(origin(req.URL)); !tc.retry && got != "" && got != "fresh" {
				t.Errorf("cached %d bytes of a refused nonce", len(got))
			}
		})
	}
}
