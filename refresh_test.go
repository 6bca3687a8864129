package extauth_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/oidcop"
	"github.com/extauth/extauth/internal/harness"
)

// offline asks the OP for a refresh token.
func offline(o *extauth.Options) {
	o.OIDC.Scopes = []string{"openid", "email", "profile", "offline_access"}
}

// expired is id as a host would hold it once the access token has
// expired.
func expired(id *extauth.Identity) *extauth.Identity {
	c := *id
	c.Tokens.Expiry = time.Now().Add(-time.Minute)
	return &c
}

// TestOIDCTokenSourceRefreshes: the token source renews an expired access
// token at the OP's token endpoint, verifies the new ID token, and follows
// the OP's rotation of the refresh token.
func TestOIDCTokenSourceRefreshes(t *testing.T) {
	a := newOIDCApp(t, oidcSetup{opts: offline})
	if resp := harness.NewBrowser(t).Get(a.URL + "/users/auth/oidc"); resp.StatusCode != http.StatusOK {
		t.Fatalf("sign-in: %d %s", resp.StatusCode, resp.Body)
	}
	id := a.identities()[0]
	if id.Tokens.RefreshToken == "" {
		t.Fatal("no refresh token")
	}
	ctx := context.Background()
	fresh, err := a.Auth.TokenSource(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	hits := a.OP.Hits(oidcop.Token)
	if tok, err := fresh.Token(); err != nil || tok.AccessToken != id.Tokens.AccessToken || a.OP.Hits(oidcop.Token) != hits {
		t.Fatalf("a live token was renewed: %v", err)
	}

	ts, err := a.Auth.TokenSource(ctx, expired(id))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := ts.Token()
	if err != nil {
		t.Fatalf("refresh: %v\n%s", err, a.Logs)
	}
	raw, _ := tok.Extra("id_token").(string)
	if tok.AccessToken == id.Tokens.AccessToken || tok.RefreshToken == id.Tokens.RefreshToken || raw == "" || !tok.Valid() {
		t.Errorf("renewed token: new access %v, rotated refresh %v, id token %v, valid %v",
			tok.AccessToken != id.Tokens.AccessToken, tok.RefreshToken != id.Tokens.RefreshToken, raw != "", tok.Valid())
	}
	if a.OP.Hits(oidcop.Token) != hits+1 {
		t.Errorf("%d token requests for one refresh", a.OP.Hits(oidcop.Token)-hits)
	}
	// The OP rotated the refresh token: the one of the sign-in is spent.
	if _, err := ts.Token(); err != nil {
		t.Errorf("the renewed token is not reused: %v", err)
	}
	again, _ := a.Auth.TokenSource(ctx, expired(id))
	_, err = again.Token()
	var e *extauth.Error
	if !errors.As(err, &e) || e.Code != extauth.CodeInvalidResponse || !strings.Contains(e.Message, "refresh token") {
		t.Errorf("a spent refresh token: %v", err)
	}
}

// TestOIDCTokenSourceRefusals: a renewed ID token for another user, a
// sign-in without a refresh token, a provider that hangs, and providers
// that cannot renew at all.
func TestOIDCTokenSourceRefusals(t *testing.T) {
	ctx := context.Background()
	t.Run("ID token of another subject", func(t *testing.T) {
		a := newOIDCApp(t, oidcSetup{opts: offline})
		harness.NewBrowser(t).Get(a.URL + "/users/auth/oidc")
		a.OP.SetFaults(oidcop.RefreshWrongSub)
		ts, err := a.Auth.TokenSource(ctx, expired(a.identities()[0]))
		if err != nil {
			t.Fatal(err)
		}
		_, err = ts.Token()
		var e *extauth.Error
		if !errors.As(err, &e) || e.Code != extauth.CodeInvalidResponse || !strings.Contains(err.Error(), "names subject") {
			t.Errorf("got %v", err)
		}
	})
	t.Run("no refresh token", func(t *testing.T) {
		a := newOIDCApp(t, oidcSetup{})
		harness.NewBrowser(t).Get(a.URL + "/users/auth/oidc")
		ts, err := a.Auth.TokenSource(ctx, expired(a.identities()[0]))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ts.Token(); !errors.Is(err, extauth.ErrNoRefresh) {
			t.Errorf("got %v", err)
		}
	})
	t.Run("after the user signed out at the provider", func(t *testing.T) {
		a := newOIDCApp(t, oidcSetup{opts: offline})
		b := harness.NewBrowser(t)
		b.Get(a.URL + "/users/auth/oidc")
		id := a.identities()[0]
		if resp := b.Get(a.OP.Issuer() + "/end_session?id_token_hint=" + url.QueryEscape(id.Tokens.IDToken)); resp.StatusCode != http.StatusOK {
			t.Fatalf("end_session: %d %s", resp.StatusCode, resp.Body)
		}
		ts, _ := a.Auth.TokenSource(ctx, expired(id))
		_, err := ts.Token()
		if !errors.Is(err, &extauth.Error{Code: extauth.CodeInvalidResponse}) {
			t.Errorf("got %v", err)
		}
	})
	t.Run("hanging token endpoint", func(t *testing.T) {
		a := newOIDCApp(t, oidcSetup{opts: func(o *extauth.Options) { offline(o); o.Timeout = hangTimeout }})
		// The sign-in's own calls share the short time-out, which a loaded
		// machine may pass: it is tried again until one succeeds.
		eventually(t, "a sign-in", func() bool {
			harness.NewBrowser(t).Get(a.URL + "/users/auth/oidc")
			return len(a.identities()) > 0
		})
		a.OP.SetFaults(oidcop.TokenHang)
		ts, _ := a.Auth.TokenSource(ctx, expired(a.identities()[0]))
		start := time.Now()
		_, err := ts.Token()
		if !errors.Is(err, &extauth.Error{Code: extauth.CodeTimeout}) || time.Since(start) > hangBound {
			t.Errorf("got %v after %s", err, time.Since(start))
		}
	})
	t.Run("providers without refresh", func(t *testing.T) {
		a := allSix(t, false)
		for _, p := range []extauth.Provider{extauth.Microblog, extauth.Socialnet} {
			if _, err := a.TokenSource(ctx, &extauth.Identity{Provider: string(p), Tokens: extauth.Tokens{AccessToken: "x"}}); !errors.Is(err, extauth.ErrNoRefresh) {
				t.Errorf("%s: %v", p, err)
			}
		}
		if _, err := newOIDCApp(t, oidcSetup{}).Auth.TokenSource(ctx, &extauth.Identity{Provider: "saml"}); !errors.Is(err, extauth.ErrNotConfigured) {
			t.Errorf("unmounted: %v", err)
		}
	})
}

// TestBlogOAuth2TokenSourceRefreshes: WP OAuth Server issues a refresh
// token with the code and renews without rotating it.
func TestBlogOAuth2TokenSourceRefreshes(t *testing.T) {
	a := newApp(t, nil)
	if resp := harness.NewBrowser(t).PostForm(a.URL+"/users/auth/blog_oauth2", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("sign-in: %d %s", resp.StatusCode, resp.Body)
	}
	id := a.identities()[0]
	ts, err := a.Auth.TokenSource(context.Background(), expired(id))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := ts.Token()
	if err != nil || tok.AccessToken == id.Tokens.AccessToken || tok.RefreshToken != id.Tokens.RefreshToken {
		t.Fatalf("refresh: %v", err)
	}
}

// Tokens are renewed only at the provider that issued them, for the tenant
// they were issued at, and for the user they belong to, whatever the host
// kept: a mismatch is refused before any request (issue 21, findings 4
// and 5).
func TestTokenSourceBinding(t *testing.T) {
	ctx := context.Background()
	a := newOIDCApp(t, oidcSetup{opts: offline})
	harness.NewBrowser(t).Get(a.URL + "/users/auth/oidc")
	id := a.identities()[0]
	if id.Tokens.Issuer != a.OP.Issuer() || id.Tokens.Tenant != "" {
		t.Fatalf("the tokens say issuer %q, tenant %q", id.Tokens.Issuer, id.Tokens.Tenant)
	}
	refused := func(name string, id *extauth.Identity, code extauth.Code) {
		t.Helper()
		hits := a.OP.Hits(oidcop.Token)
		ts, err := a.Auth.TokenSource(ctx, id)
		if err == nil {
			_, err = ts.Token()
		}
		if !errors.Is(err, &extauth.Error{Code: code}) {
			t.Errorf("%s: got %v, want %s", name, err, code)
		}
		if a.OP.Hits(oidcop.Token) != hits {
			t.Errorf("%s: the refresh token was sent to the token endpoint", name)
		}
	}
	other := expired(id)
	other.Tokens.Issuer = "https://another-op.example"
	refused("another issuer's tokens", other, extauth.CodeInvalidState)
	unnamed := expired(id)
	unnamed.Tokens.Issuer = ""
	unnamed.Tokens.Tenant = "city-b"
	refused("tokens that name a tenant but no issuer", unnamed, extauth.CodeInvalidState)
	elsewhere := expired(id)
	elsewhere.Tokens.Tenant = "city-b"
	refused("another tenant's tokens", elsewhere, extauth.CodeInvalidState)
	someoneElse := expired(id)
	someoneElse.UID = "someone-else"
	refused("an ID token of another user than the identity's", someoneElse, extauth.CodeInvalidState)
	nobody := expired(id)
	nobody.UID, nobody.Tokens.IDToken = "", ""
	refused("no user at all", nobody, extauth.CodeMisconfigured)

	// The host kept no ID token: the tokens are renewed, and the
	// identity's UID still binds the renewed ID token to the user.
	kept := expired(id)
	kept.Tokens.IDToken = ""
	ts, err := a.Auth.TokenSource(ctx, kept)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := ts.Token()
	if err != nil {
		t.Fatalf("the tokens kept without their ID token: %v", err)
	}
	kept.Tokens.RefreshToken = tok.RefreshToken // rotated by the OP
	a.OP.SetFaults(oidcop.RefreshWrongSub)
	ts, _ = a.Auth.TokenSource(ctx, kept)
	if _, err := ts.Token(); !errors.Is(err, &extauth.Error{Code: extauth.CodeInvalidResponse}) || !strings.Contains(err.Error(), "names subject") {
		t.Errorf("a renewed ID token of another user, the host having kept no ID token: %v", err)
	}
}

// A tenant's tokens are not renewed for another tenant, even when both
// have the same OpenID provider and client: the tokens say where they
// were issued.
func TestTokenSourceTenantBinding(t *testing.T) {
	var mu sync.Mutex
	var got []*extauth.Identity
	ta := newTenantApp(t, []string{"a", "b"}, func(ta *tenantApp, o *extauth.Options) {
		offline(o)
		o.OnSuccess = func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
			mu.Lock()
			got = append(got, id)
			mu.Unlock()
		}
	})
	ta.browser().Get(ta.url("a", "/users/auth/oidc"))
	if len(got) != 1 || got[0].Tokens.Tenant != "a" || got[0].Tokens.RefreshToken == "" {
		t.Fatalf("sign-in at a: %+v", got)
	}
	hits := ta.OP.Hits(oidcop.Token)
	atB := expired(got[0])
	atB.Tenant = "b"
	_, err := ta.Auth.TokenSource(context.Background(), atB)
	if !errors.Is(err, &extauth.Error{Code: extauth.CodeInvalidState}) || ta.OP.Hits(oidcop.Token) != hits {
		t.Errorf("a's tokens at b: %v, %d token requests", err, ta.OP.Hits(oidcop.Token)-hits)
	}
	ts, err := ta.Auth.TokenSource(context.Background(), expired(got[0]))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.Token(); err != nil {
		t.Errorf("a's tokens at a: %v", err)
	}
}

// TokenSource and TenantReady take the tenant names the routes take, and
// no others: a name the routes refuse never reaches the host's
// TenantSource nor the cache (issue 21, finding 8).
func TestTenantNameRuleEverywhere(t *testing.T) {
	var mu sync.Mutex
	var lookups []string
	ta := newTenantApp(t, nil, func(ta *tenantApp, o *extauth.Options) {
		o.Tenants = extauth.TenantSourceFunc(func(_ context.Context, tenant string) (*extauth.Config, error) {
			mu.Lock()
			lookups = append(lookups, tenant)
			mu.Unlock()
			return tenantConfig(ta, tenant), nil
		})
	})
	ctx := context.Background()
	for _, name := range []string{"-a", "a-", "a_", "_a", "xn--", "A", "a.b", strings.Repeat("a", 64)} {
		if extauth.ValidTenantName(name) {
			t.Fatalf("%q is a valid tenant name", name)
		}
		if _, err := ta.Auth.TokenSource(ctx, &extauth.Identity{Tenant: name, Provider: "oidc", UID: "u"}); !errors.Is(err, extauth.ErrUnknownTenant) {
			t.Errorf("TokenSource at %q: %v", name, err)
		}
		if err := ta.Auth.TenantReady(ctx, name); !errors.Is(err, extauth.ErrUnknownTenant) {
			t.Errorf("TenantReady of %q: %v", name, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lookups) != 0 {
		t.Errorf("names the routes refuse reached the TenantSource: %q", lookups)
	}
	if !extauth.ValidTenantName(strings.Repeat("a", 63)) || !extauth.ValidTenantName("xn--bcher-kva") {
		t.Error("the rule refuses a valid DNS label")
	}
}

// TestOIDCRenewedIDTokenKeepsTheAuthentication: a renewal authenticates no
// one, so its ID token must say what the sign-in's said of how and when
// the user authenticated (OIDC Core 12.2): the same acr, or none; an
// auth_time not before the sign-in's (a later one: the user authenticated
// again at the provider meanwhile), not in the future, or none. A renewed
// token that says otherwise would let a host that reads it believe in an
// authentication that never happened: it is refused. The baseline is the
// ID token the host keeps in Tokens.IDToken, the sign-in's or the last
// renewed one.
func TestOIDCRenewedIDTokenKeepsTheAuthentication(t *testing.T) {
	const loa2, loa3 = "urn:extauthtest:loa:2", "urn:extauthtest:loa:3"
	signedIn := time.Now().Add(-10 * time.Minute).Truncate(time.Second)
	at := oidcop.Authentication{ACR: loa2, AuthTime: signedIn}
	for _, tc := range []struct {
		name   string
		signIn oidcop.Authentication
		// renewals answer one renewal each, the host keeping each
		// renewed ID token; the last is refused unless code is "".
		renewals []oidcop.Authentication
		code     extauth.Code
		why      string
	}{
		{"the same acr and auth_time", at, []oidcop.Authentication{at}, "", ""},
		{"a later auth_time: the user authenticated again", at,
			[]oidcop.Authentication{{ACR: loa2, AuthTime: signedIn.Add(5 * time.Minute)}}, "", ""},
		{"neither restated", at, []oidcop.Authentication{{}}, "", ""},
		{"neither at sign-in nor renewed", oidcop.Authentication{}, []oidcop.Authentication{{}}, "", ""},
		{"an auth_time before the sign-in's", at,
			[]oidcop.Authentication{{ACR: loa2, AuthTime: signedIn.Add(-time.Hour)}},
			extauth.CodeInvalidResponse, "before the sign-in's"},
		{"an auth_time later, then back", at,
			[]oidcop.Authentication{{ACR: loa2, AuthTime: signedIn.Add(5 * time.Minute)}, at},
			extauth.CodeInvalidResponse, "before the sign-in's"},
		{"an auth_time in the future", at,
			[]oidcop.Authentication{{ACR: loa2, AuthTime: time.Now().Add(24 * time.Hour)}},
			extauth.CodeInsufficientAuthentication, "is after the token was issued"},
		{"another acr", at, []oidcop.Authentication{{ACR: loa3, AuthTime: signedIn}},
			extauth.CodeInvalidResponse, "the sign-in's was"},
		{"an acr where the sign-in had none", oidcop.Authentication{AuthTime: signedIn},
			[]oidcop.Authentication{{ACR: loa3, AuthTime: signedIn}}, extauth.CodeInvalidResponse, "the sign-in's was"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newOIDCApp(t, oidcSetup{opts: offline})
			a.OP.AnswerAt(tc.signIn)
			if resp := harness.NewBrowser(t).Get(a.URL + "/users/auth/oidc"); resp.StatusCode != http.StatusOK {
				t.Fatalf("sign-in: %d %s", resp.StatusCode, resp.Body)
			}
			id := a.identities()[0]
			for i, r := range tc.renewals {
				a.OP.AnswerAt(r)
				ts, err := a.Auth.TokenSource(context.Background(), expired(id))
				if err != nil {
					t.Fatal(err)
				}
				tok, err := ts.Token()
				if i < len(tc.renewals)-1 || tc.code == "" {
					if err != nil {
						t.Fatalf("renewal %d refused: %v", i+1, err)
					}
					// The host keeps the renewed tokens.
					id.Tokens.AccessToken, id.Tokens.RefreshToken = tok.AccessToken, tok.RefreshToken
					id.Tokens.IDToken, _ = tok.Extra("id_token").(string)
					continue
				}
				var e *extauth.Error
				if !errors.As(err, &e) || e.Code != tc.code || !strings.Contains(err.Error(), tc.why) {
					t.Fatalf("renewal %d: got %v, want %s with %q", i+1, err, tc.code, tc.why)
				}
			}
		})
	}
}
