package providers_test

import (
	"context"
	"errors"
	"net/url"
	"testing"

	"github.com/extauth/extauth/extauthtest/oidcop"
	"github.com/extauth/extauth/providers"
)

func TestOIDCEndSessionURL(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, fixtureConfig{})
	id, err := f.signIn()
	if err != nil {
		t.Fatal(err)
	}
	u, err := f.s.EndSessionURL(ctx, providers.LogoutSession{IDToken: id.Tokens.IDToken}, "st", "https://app.example/users/auth/oidc/post_logout")
	if err != nil {
		t.Fatal(err)
	}
	pu, err := url.Parse(u)
	if err != nil || pu.Path != "/tenant/end_session" {
		t.Fatalf("%q %v", u, err)
	}
	want := url.Values{"id_token_hint": {id.Tokens.IDToken}, "client_id": {testClientID},
		"post_logout_redirect_uri": {"https://app.example/users/auth/oidc/post_logout"}, "state": {"st"}}
	if q := pu.Query(); q.Encode() != want.Encode() {
		t.Errorf("query %v, want %v", q, want)
	}
	if u, err := f.s.EndSessionURL(ctx, providers.LogoutSession{}, "st", "https://app.example/p"); err != nil || url.Values(mustQuery(t, u)).Has("id_token_hint") {
		t.Errorf("without an ID token: %q %v", u, err)
	}

	// An ID token of another provider's is not handed to this one.
	other := newFixture(t, fixtureConfig{op: func(c *oidcop.Config) { c.Issuer = "https://other.test" }, issuer: func(string) string { return "https://other.test" }})
	foreign, err := other.signIn()
	if err != nil {
		t.Fatal(err)
	}
	var pe *providers.Error
	if _, err := f.s.EndSessionURL(ctx, providers.LogoutSession{IDToken: foreign.Tokens.IDToken}, "st", "https://app.example/p"); !errors.As(err, &pe) || pe.Code != providers.CodeMisconfigured {
		t.Errorf("foreign ID token: %v", err)
	}

	none := newFixture(t, fixtureConfig{op: func(c *oidcop.Config) { c.NoEndSession = true }})
	if _, err := none.s.EndSessionURL(ctx, providers.LogoutSession{}, "st", "https://app.example/p"); !errors.Is(err, providers.ErrNoProviderLogout) {
		t.Errorf("without end_session_endpoint: %v", err)
	}
}

func mustQuery(t *testing.T, u string) url.Values {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return pu.Query()
}

// A back-channel logout needs the Store that makes its jti single use.
func TestOIDCBackchannelLogoutNeedsStore(t *testing.T) {
	f := newFixture(t, fixtureConfig{})
	tok, err := f.op.LogoutToken("sub-1", "")
	if err != nil {
		t.Fatal(err)
	}
	var pe *providers.Error
	if _, err := f.s.BackchannelLogout(context.Background(), tok); !errors.As(err, &pe) || pe.Code != providers.CodeMisconfigured {
		t.Errorf("got %v", err)
	}
}
