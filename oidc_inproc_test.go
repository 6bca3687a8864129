package extauth_test

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/internal/fakes/oidcop"
)

// handlerTransport serves outbound requests with a handler in-process: no
// sockets, so thousands of sign-ins stay fast and the counts exact.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := r.Context().Err(); err != nil {
		return nil, err
	}
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}

const inprocBase = "https://app.example"

// inprocApp is the application and a fake OP wired in-process, driven with
// recorded requests instead of a browser.
type inprocApp struct {
	mux     *http.ServeMux
	op      *oidcop.OP
	signIns atomic.Int64
}

func newInprocApp(tb testing.TB) *inprocApp {
	tb.Helper()
	op, err := oidcop.New(oidcop.Config{
		Issuer: "https://op.example/op", ClientID: oidcClientID, ClientSecret: oidcSecret,
		RedirectURIs: []string{inprocBase + "/users/auth/oidc/callback"},
		AutoApprove:  true, Alg: "ES256", Keys: opKeys()["ES256"][:1],
	})
	if err != nil {
		tb.Fatal(err)
	}
	p := &inprocApp{mux: http.NewServeMux(), op: op}
	auth, err := extauth.New(&extauth.Config{OIDC: extauth.OIDCConfig{
		ClientID: oidcClientID, ClientSecret: extauth.NewSecret(oidcSecret), Issuer: op.Issuer(),
	}}, extauth.Options{
		BaseURL:    inprocBase,
		CookieKey:  testKey,
		HTTPClient: &http.Client{Transport: handlerTransport{op}},
		Logger:     slog.New(slog.DiscardHandler),
		OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
			p.signIns.Add(1)
			w.WriteHeader(http.StatusNoContent)
		},
	})
	if err != nil {
		tb.Fatal(err)
	}
	auth.Mount(p.mux)
	return p
}

// pendingCallback is a callback request ready to be sent: what the OP
// redirected to, with the transaction cookie.
type pendingCallback struct {
	url     string
	cookies []*http.Cookie
}

// begin runs the authorize route and the OP's authorization endpoint.
func (p *inprocApp) begin() (pendingCallback, error) {
	rec := httptest.NewRecorder()
	p.mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, inprocBase+"/users/auth/oidc", nil))
	if rec.Code != http.StatusFound {
		return pendingCallback{}, errors.New("authorize: " + rec.Result().Status + " " + rec.Body.String())
	}
	cookies := rec.Result().Cookies()
	opRec := httptest.NewRecorder()
	p.op.ServeHTTP(opRec, httptest.NewRequest(http.MethodGet, rec.Header().Get("Location"), nil))
	if opRec.Code != http.StatusFound {
		return pendingCallback{}, errors.New("OP authorize: " + opRec.Result().Status)
	}
	return pendingCallback{url: opRec.Header().Get("Location"), cookies: cookies}, nil
}

// finish runs the callback route.
func (p *inprocApp) finish(c pendingCallback) error {
	req := httptest.NewRequest(http.MethodGet, c.url, nil)
	for _, ck := range c.cookies {
		req.AddCookie(ck)
	}
	rec := httptest.NewRecorder()
	p.mux.ServeHTTP(rec, req)
	if rec.Code != http.StatusNoContent {
		return errors.New("callback: " + rec.Result().Status + " " + rec.Body.String())
	}
	return nil
}

// TestOIDC10000SignInsOneDiscoveryOneKeyFetch runs 10 000 sign-ins through
// the routes, the first ones concurrently: discovery and the key set are
// each fetched exactly once.
func TestOIDC10000SignInsOneDiscoveryOneKeyFetch(t *testing.T) {
	p := newInprocApp(t)
	const total, workers = 10000, 8
	var wg sync.WaitGroup
	var failed atomic.Int64
	var firstErr sync.Once
	start := make(chan struct{})
	for w := range workers {
		wg.Go(func() {
			<-start
			for range total / workers {
				c, err := p.begin()
				if err == nil {
					err = p.finish(c)
				}
				if err != nil {
					failed.Add(1)
					firstErr.Do(func() { t.Errorf("worker %d: %v", w, err) })
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if n := p.signIns.Load(); n != total || failed.Load() != 0 {
		t.Fatalf("%d sign-ins succeeded, %d failed", n, failed.Load())
	}
	if n := p.op.Hits(oidcop.Discovery); n != 1 {
		t.Errorf("%d discovery fetches, want 1", n)
	}
	if n := p.op.Hits(oidcop.JWKS); n != 1 {
		t.Errorf("%d key set fetches, want 1", n)
	}
	if n := p.op.Hits(oidcop.Token); n != total {
		t.Errorf("%d token requests, want %d", n, total)
	}
}

// BenchmarkCallback/oidc measures the oidc callback route (cookie, state,
// token exchange with the in-process fake OP, ID token verification,
// identity) beside a baseline: the bare x/oauth2 Exchange and go-oidc Verify
// (with the nonce compared) a hand-written client would run for the same
// response. Authorization requests are prepared before the timer starts.
func BenchmarkCallback(b *testing.B) {
	b.Run("oidc", func(b *testing.B) {
		p := newInprocApp(b)
		if c, err := p.begin(); err != nil || p.finish(c) != nil {
			b.Fatal("warm-up sign-in failed")
		}
		pending := make([]pendingCallback, b.N)
		for i := range pending {
			c, err := p.begin()
			if err != nil {
				b.Fatal(err)
			}
			pending[i] = c
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if err := p.finish(pending[i]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("oidc-baseline", func(b *testing.B) {
		p := newInprocApp(b)
		ctx := oidc.ClientContext(context.Background(), &http.Client{Transport: handlerTransport{p.op}})
		provider, err := oidc.NewProvider(ctx, p.op.Issuer())
		if err != nil {
			b.Fatal(err)
		}
		conf := oauth2.Config{
			ClientID: oidcClientID, ClientSecret: oidcSecret, Endpoint: provider.Endpoint(),
			RedirectURL: inprocBase + "/users/auth/oidc/callback", Scopes: []string{"openid", "email", "profile"},
		}
		conf.Endpoint.AuthStyle = oauth2.AuthStyleInHeader
		verifier := provider.Verifier(&oidc.Config{ClientID: oidcClientID})
		type prepared struct{ code, verifier, nonce string }
		prepare := func() prepared {
			v, nonce := oauth2.GenerateVerifier(), oauth2.GenerateVerifier()
			rec := httptest.NewRecorder()
			p.op.ServeHTTP(rec, httptest.NewRequest(http.MethodGet,
				conf.AuthCodeURL("state", oauth2.S256ChallengeOption(v), oidc.Nonce(nonce)), nil))
			u, err := url.Parse(rec.Header().Get("Location"))
			if err != nil {
				b.Fatal(err)
			}
			return prepared{u.Query().Get("code"), v, nonce}
		}
		run := func(c prepared) error {
			tok, err := conf.Exchange(ctx, c.code, oauth2.VerifierOption(c.verifier))
			if err != nil {
				return err
			}
			raw, _ := tok.Extra("id_token").(string)
			idt, err := verifier.Verify(ctx, raw)
			if err != nil {
				return err
			}
			if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(c.nonce)) != 1 {
				return errors.New("nonce")
			}
			var claims map[string]any
			return idt.Claims(&claims)
		}
		if err := run(prepare()); err != nil {
			b.Fatal(err)
		}
		pending := make([]prepared, b.N)
		for i := range pending {
			pending[i] = prepare()
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if err := run(pending[i]); err != nil {
				b.Fatal(err)
			}
		}
	})
}
