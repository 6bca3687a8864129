package bench

// OpenID Connect, side by side with the libraries extauth is built on, in
// one process with the same RSA-2048 key (RS256):
//
//	go test -run '^$' -bench 'OIDC(Verify|Callback)$' -benchmem ./bench/ -rounds 8 | go run ./internal/benchratio
//	go test -run '^$' -bench 'OIDC.*Ratio' ./bench/
//
// BenchmarkOIDCVerify and BenchmarkOIDCCallback run extauth and its anchor
// as sub-benchmarks, alternating -rounds times (alternate, rounds_test.go).
// The ...Ratio benchmarks time the same two sides themselves, -oidc.rounds
// times in rounds of a few hundred operations (the order flips every round,
// each side timed after a GC, in process CPU time) and report the median of
// the per-round ratios: on a machine shared with other work, CPU time is
// what other processes do not inflate.

import (
	"cmp"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
	"golang.org/x/oauth2"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/oidcop"
	"github.com/extauth/extauth/internal/loadtest"
	"github.com/extauth/extauth/internal/outbound"
	"github.com/extauth/extauth/providers"
)

var oidcRounds = flag.Int("oidc.rounds", 41, "rounds of the OIDC side-by-side benchmarks")

const (
	oidcBase     = "https://app.example"
	oidcIssuer   = "https://op.example/op"
	oidcClientID = "bench-client"
	oidcSecret   = "bench-secret"
)

var oidcKey = sync.OnceValue(func() crypto.Signer {
	k, err := oidcop.GenerateKey("RS256")
	if err != nil {
		panic(err)
	}
	return k
})

// oidcPeer is the provider both sides talk to, in-process: the fake OP for
// discovery and keys, and a token endpoint that answers each code with a
// response minted beforehand, so that the OP's own signing stays out of
// the timings.
type oidcPeer struct {
	op     *oidcop.OP
	signer jose.Signer
	// encrypter, when set, encrypts the minted ID tokens to the client.
	encrypter jose.Encrypter
	mu        sync.Mutex
	canned    map[string][]byte
	client    *http.Client
	// tokenType is the token_type of the minted responses; Bearer when
	// empty.
	tokenType string
}

func newOIDCPeer(tb testing.TB) *oidcPeer { return newOIDCPeerWith(tb, nil) }

// newOIDCPeerWith is newOIDCPeer with the fake OP's configuration edited.
func newOIDCPeerWith(tb testing.TB, edit func(*oidcop.Config)) *oidcPeer {
	tb.Helper()
	cfg := oidcop.Config{
		Issuer: oidcIssuer, ClientID: oidcClientID, ClientSecret: oidcSecret,
		RedirectURIs: []string{oidcBase + "/users/auth/oidc/callback"}, AutoApprove: true,
		Keys: []crypto.Signer{oidcKey()},
	}
	if edit != nil {
		edit(&cfg)
	}
	op, err := oidcop.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: oidcKey()},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", op.ActiveKid()))
	if err != nil {
		tb.Fatal(err)
	}
	p := &oidcPeer{op: op, signer: signer, canned: map[string][]byte{}}
	p.client = &http.Client{Transport: p}
	return p
}

// RoundTrip serves outbound requests in-process, without sockets.
func (p *oidcPeer) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	switch r.URL.Path {
	case "/op/token":
		p.token(rec, r)
	case "/api/me":
		// A resource server that answers at once: what an API call
		// costs the client alone.
		rec.Header().Set("Content-Type", "application/json")
		rec.WriteString(`{"sub":"248289761001"}`)
	default:
		p.op.ServeHTTP(rec, r)
	}
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}

func (p *oidcPeer) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	body, ok := p.canned[r.PostForm.Get("code")]
	delete(p.canned, r.PostForm.Get("code"))
	p.mu.Unlock()
	if !ok {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"error":"invalid_grant"}`))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(body)
}

func oidcRandom() string {
	b := make([]byte, 24)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// idToken mints an ID token as a provider would: the profile claims
// included, so neither side asks UserInfo.
func (p *oidcPeer) idToken(tb testing.TB, nonce, accessToken string) string {
	sum := sha256.Sum256([]byte(accessToken))
	now := time.Now()
	claims, _ := json.Marshal(map[string]any{
		"iss": oidcIssuer, "sub": "248289761001", "aud": oidcClientID,
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "nonce": nonce,
		"at_hash": base64.RawURLEncoding.EncodeToString(sum[:16]),
		"email":   "alice@example.org", "email_verified": true, "name": "Alice Example",
		"given_name": "Alice", "family_name": "Example", "preferred_username": "alice",
		"picture": "https://example.org/alice.png",
	})
	jws, err := p.signer.Sign(claims)
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := jws.CompactSerialize()
	if err != nil {
		tb.Fatal(err)
	}
	if p.encrypter != nil {
		jwe, err := p.encrypter.Encrypt([]byte(raw))
		if err != nil {
			tb.Fatal(err)
		}
		if raw, err = jwe.CompactSerialize(); err != nil {
			tb.Fatal(err)
		}
	}
	return raw
}

// grant makes the token endpoint answer code once, for a sign-in with nonce.
func (p *oidcPeer) grant(tb testing.TB, nonce string) string {
	code, access := oidcRandom(), oidcRandom()
	body, _ := json.Marshal(map[string]any{
		"access_token": access, "token_type": cmp.Or(p.tokenType, "Bearer"), "expires_in": 3600,
		"id_token": p.idToken(tb, nonce, access),
	})
	p.mu.Lock()
	p.canned[code] = body
	p.mu.Unlock()
	return code
}

// oidcSide is one side of a comparison: prepare readies n operations
// outside the timing and returns the function that runs the i-th.
type oidcSide struct {
	name    string
	prepare func(tb testing.TB, n int) func(i int) error
}

// sideBySide runs the sides as sub-benchmarks, alternating -rounds times.
func sideBySide(b *testing.B, ours, anchor oidcSide) {
	var sides []side
	for _, s := range []oidcSide{ours, anchor} {
		sides = append(sides, side{s.name, func(b *testing.B) {
			run := s.prepare(b, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if err := run(i); err != nil {
					b.Fatal(err)
				}
			}
		}})
	}
	alternate(b, sides...)
}

// cpuRatio times the sides in alternating rounds of n operations each and
// reports the median per-round ratio of the first side's time to the
// second's. Rounds are timed in process CPU time (loadtest.ProcessCPU), so that
// other processes on a shared machine do not land in one side's round.
func cpuRatio(b *testing.B, n int, ours, anchor oidcSide) {
	// The rounds run once, however often the framework calls the
	// benchmark to size b.N: their count is -oidc.rounds.
	var once sync.Once
	var ratios, oursNs, anchorNs []float64
	b.Run("rounds", func(b *testing.B) {
		timeSide := func(s oidcSide) float64 {
			run := s.prepare(b, n)
			runtime.GC()
			start := loadtest.ProcessCPU()
			for i := range n {
				if err := run(i); err != nil {
					b.Fatal(err)
				}
			}
			return float64((loadtest.ProcessCPU() - start).Nanoseconds()) / float64(n)
		}
		once.Do(func() {
			for r := range *oidcRounds {
				var o, a float64
				if r%2 == 0 {
					o, a = timeSide(ours), timeSide(anchor)
				} else {
					a, o = timeSide(anchor), timeSide(ours)
				}
				ratios, oursNs, anchorNs = append(ratios, o/a), append(oursNs, o), append(anchorNs, a)
			}
			b.Logf("per-round ratios %s/%s: %s", ours.name, anchor.name, formatAll(ratios))
		})
		b.ReportMetric(median(ratios), "ratio")
		// The rounds run once, so the framework's own ns/op means nothing:
		// report the first side's median instead.
		b.ReportMetric(median(oursNs), "ns/op")
		b.ReportMetric(median(oursNs), ours.name+"-ns/op")
		b.ReportMetric(median(anchorNs), anchor.name+"-ns/op")
	})
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func formatAll(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf("%.3f", x)
	}
	return strings.Join(parts, " ")
}

// BenchmarkOIDCVerify is the ID token step of a callback: extauth's
// verification (go-oidc's checks plus nonce, iat, azp, sub and at_hash,
// and the claims decoded for the identity) beside go-oidc's Verify, the
// nonce compared and the claims decoded into a map, on the same token.
func BenchmarkOIDCVerify(b *testing.B) {
	ours, anchor := verifySides(b)
	sideBySide(b, ours, anchor)
}

// BenchmarkOIDCVerifyRatio is BenchmarkOIDCVerify in CPU-time rounds.
func BenchmarkOIDCVerifyRatio(b *testing.B) {
	ours, anchor := verifySides(b)
	cpuRatio(b, 500, ours, anchor)
}

func verifySides(b *testing.B) (ours, anchor oidcSide) {
	p := newOIDCPeer(b)
	ctx := context.Background()
	client := outbound.NewClient(p.client, 0, 0)
	s, err := providers.NewOIDC(providers.OIDCConfig{ClientID: oidcClientID, ClientSecret: oidcSecret, Issuer: oidcIssuer},
		providers.Env{CallbackURL: oidcBase + "/users/auth/oidc/callback", HTTPClient: client})
	if err != nil {
		b.Fatal(err)
	}
	gctx := oidc.ClientContext(ctx, client)
	provider, err := oidc.NewProvider(gctx, oidcIssuer)
	if err != nil {
		b.Fatal(err)
	}
	verifier := provider.Verifier(&oidc.Config{ClientID: oidcClientID})
	const nonce, access = "n-0S6_WzA2Mj", "jHkWEdUXMU1BwAsC4vtUsZwnNvTIxEl0z9K3vx5KF0Y"
	raw := p.idToken(b, nonce, access)
	if _, err := s.VerifyIDToken(ctx, raw, access, nonce); err != nil {
		b.Fatal(err)
	}
	return oidcSide{"extauth", func(testing.TB, int) func(int) error {
			return func(int) error {
				_, err := s.VerifyIDToken(ctx, raw, access, nonce)
				return err
			}
		}},
		oidcSide{"go-oidc", func(testing.TB, int) func(int) error {
			return func(int) error {
				t, err := verifier.Verify(gctx, raw)
				if err != nil {
					return err
				}
				if subtle.ConstantTimeCompare([]byte(t.Nonce), []byte(nonce)) != 1 {
					return errors.New("nonce")
				}
				var claims map[string]any
				return t.Claims(&claims)
			}
		}}
}

// oidcCallbacks prepares n callback requests of one side: each runs the
// side's authorize handler, has the peer answer its nonce once, and keeps
// the callback request the provider would send the browser to.
func oidcCallbacks(tb testing.TB, p *oidcPeer, h http.Handler, authorize string, n int) []*http.Request {
	reqs := make([]*http.Request, n)
	for i := range reqs {
		rec := httptest.NewRecorder()
		start := httptest.NewRequest(http.MethodGet, oidcBase+authorize, nil)
		// As a browser sends it from a page of the application.
		start.Header.Set("Sec-Fetch-Site", "same-origin")
		h.ServeHTTP(rec, start)
		if rec.Code != http.StatusFound {
			tb.Fatalf("authorize: %d %s", rec.Code, rec.Body)
		}
		loc, err := url.Parse(rec.Header().Get("Location"))
		if err != nil {
			tb.Fatal(err)
		}
		q := loc.Query()
		cb := url.Values{"code": {p.grant(tb, q.Get("nonce"))}, "state": {q.Get("state")}, "iss": {oidcIssuer}}
		req := httptest.NewRequest(http.MethodGet, q.Get("redirect_uri")+"?"+cb.Encode(), nil)
		for _, c := range rec.Result().Cookies() {
			req.AddCookie(c)
		}
		reqs[i] = req
	}
	return reqs
}

// handByHand is what an application writes with x/oauth2 and go-oidc alone:
// state, verifier and nonce in a cookie, the code exchanged with PKCE, the
// ID token verified, the nonce compared and the claims decoded.
func handByHand(tb testing.TB, p *oidcPeer) http.Handler {
	ctx := oidc.ClientContext(context.Background(), outbound.NewClient(p.client, 0, 0))
	provider, err := oidc.NewProvider(ctx, oidcIssuer)
	if err != nil {
		tb.Fatal(err)
	}
	conf := oauth2.Config{
		ClientID: oidcClientID, ClientSecret: oidcSecret, Endpoint: provider.Endpoint(),
		RedirectURL: oidcBase + "/hand/callback", Scopes: []string{oidc.ScopeOpenID, "email", "profile"},
	}
	conf.Endpoint.AuthStyle = oauth2.AuthStyleInHeader
	verifier := provider.Verifier(&oidc.Config{ClientID: oidcClientID})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hand", func(w http.ResponseWriter, r *http.Request) {
		state, pkce, nonce := oidcRandom(), oauth2.GenerateVerifier(), oidcRandom()
		http.SetCookie(w, &http.Cookie{Name: "hand", Value: state + "." + pkce + "." + nonce, Path: "/",
			MaxAge: 600, HttpOnly: true, Secure: true, SameSite: http.SameSiteLaxMode})
		http.Redirect(w, r, conf.AuthCodeURL(state, oauth2.S256ChallengeOption(pkce), oidc.Nonce(nonce)), http.StatusFound)
	})
	mux.HandleFunc("GET /hand/callback", func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie("hand")
		parts := []string{}
		if err == nil {
			parts = strings.Split(c.Value, ".")
		}
		if len(parts) != 3 || subtle.ConstantTimeCompare([]byte(parts[0]), []byte(r.FormValue("state"))) != 1 {
			http.Error(w, "bad state", http.StatusBadRequest)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: "hand", Path: "/", MaxAge: -1})
		tok, err := conf.Exchange(r.Context(), r.FormValue("code"), oauth2.VerifierOption(parts[1]))
		if err != nil {
			http.Error(w, "exchange", http.StatusBadGateway)
			return
		}
		raw, _ := tok.Extra("id_token").(string)
		idt, err := verifier.Verify(r.Context(), raw)
		if err != nil || subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(parts[2])) != 1 {
			http.Error(w, "id token", http.StatusBadRequest)
			return
		}
		var claims map[string]any
		if err := idt.Claims(&claims); err != nil {
			http.Error(w, "claims", http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	return oidcClientContext(ctx, mux)
}

// oidcClientContext hands go-oidc's client context to the handler's
// requests, as an application wiring its own client would.
func oidcClientContext(ctx context.Context, h http.Handler) http.Handler {
	client := ctx.Value(oauth2.HTTPClient)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), oauth2.HTTPClient, client)))
	})
}

// BenchmarkOIDCCallback is the oidc callback route (transaction cookie,
// state, single use, iss, code exchange with PKCE, ID token checks,
// identity, hook) beside the hand-written handler above, both answering
// the same token endpoint.
func BenchmarkOIDCCallback(b *testing.B) {
	ours, anchor := callbackSides(b)
	sideBySide(b, ours, anchor)
}

// BenchmarkOIDCCallbackRatio is BenchmarkOIDCCallback in CPU-time rounds.
func BenchmarkOIDCCallbackRatio(b *testing.B) {
	ours, anchor := callbackSides(b)
	cpuRatio(b, 300, ours, anchor)
}

func callbackSides(b *testing.B) (ours, anchor oidcSide) {
	p := newOIDCPeer(b)
	a := newBenchApp(b, p, extauth.OIDCAdditionalSettings{})
	hand := handByHand(b, p)
	through := func(name string, h http.Handler, authorize string) oidcSide {
		return oidcSide{name, func(tb testing.TB, n int) func(int) error {
			reqs := oidcCallbacks(tb, p, h, authorize, n)
			return func(i int) error {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, reqs[i])
				if rec.Code != http.StatusNoContent {
					return fmt.Errorf("%s callback: %d %s", name, rec.Code, rec.Body)
				}
				return nil
			}
		}}
	}
	ours, anchor = through("extauth", a, "/users/auth/oidc"), through("by-hand", hand, "/hand")
	// Warm both up: discovery and keys are fetched once, outside the timing.
	for _, s := range []oidcSide{ours, anchor} {
		if err := s.prepare(b, 1)(0); err != nil {
			b.Fatal(err)
		}
	}
	return ours, anchor
}
