package extauth

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/extauth/extauth/internal/seal"
	"github.com/extauth/extauth/providers"
)

// BenchmarkTakeOptions is what the start route adds to every start: the
// sign-in options of its form, none (the usual start) or three allowed
// ones, sealed into the transaction.
func BenchmarkTakeOptions(b *testing.B) {
	s, err := providers.NewOIDC(providers.OIDCConfig{ClientID: "c", ClientSecret: "s", Issuer: "https://id.example.org",
		Options: providers.OIDCOptions{RequestOptions: []string{"login_hint", "prompt", "max_age"}}},
		providers.Env{CallbackURL: "https://app.example.org/users/auth/oidc/callback", HTTPClient: http.DefaultClient})
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		form url.Values
	}{
		{"none", url.Values{"return_to": {"/account"}}},
		{"three", url.Values{"return_to": {"/account"}, "login_hint": {"ada@example.org"}, "prompt": {"login"}, "max_age": {"300"}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tx := &providers.Transaction{}
				if _, err := takeOptions(s, tc.form, tx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A step-up comes back as the same account only from the party that
// asserted the account: the same UID from another IdP of a federation, or
// from another issuer where the identity named one, is another account.
func TestCheckAccountBindsTheAssertingParty(t *testing.T) {
	tx := func(uid, party string) *providers.Transaction {
		extra := map[string]string{accountKey: uid}
		if party != "" {
			extra[partyKey] = party
		}
		return &providers.Transaction{Extra: extra}
	}
	saml := func(uid, idp string) *providers.Identity {
		return &providers.Identity{UID: uid, SAML: &providers.SAMLInfo{IdP: idp}}
	}
	oidc := func(uid, iss string) *providers.Identity {
		return &providers.Identity{UID: uid, Tokens: providers.Tokens{Issuer: iss}}
	}
	for _, tc := range []struct {
		name string
		tx   *providers.Transaction
		id   *providers.Identity
		ok   bool
	}{
		{"same IdP", tx("alice", "idp https://a.example/idp"), saml("alice", "https://a.example/idp"), true},
		{"another IdP, same NameID", tx("alice", "idp https://a.example/idp"), saml("alice", "https://b.example/idp"), false},
		{"same IdP, another NameID", tx("alice", "idp https://a.example/idp"), saml("bob", "https://a.example/idp"), false},
		{"same issuer", tx("sub-1", "iss https://op.example"), oidc("sub-1", "https://op.example"), true},
		{"another issuer, same sub", tx("sub-1", "iss https://op.example"), oidc("sub-1", "https://other.example"), false},
		{"an issuer where an IdP was sealed", tx("alice", "idp https://op.example"), oidc("alice", "https://op.example"), false},
		{"no party sealed: one issuer per provider", tx("sub-1", ""), oidc("sub-1", "https://op.example"), true},
		{"not a step-up", &providers.Transaction{}, oidc("anyone", "https://op.example"), true},
	} {
		if err := checkAccount(tc.tx, tc.id); (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	// The sealed account binds the party, and opens only for its tenant
	// and provider.
	sealer, err := seal.New(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	a := &Auth{sealer: sealer}
	sealed := a.sealAccount("t1", "saml", "idp https://a.example/idp", "alice")
	if party, uid, ok := a.openAccount("t1", "saml", sealed); !ok || party != "idp https://a.example/idp" || uid != "alice" {
		t.Errorf("openAccount: %q %q %v", party, uid, ok)
	}
	if _, _, ok := a.openAccount("t2", "saml", sealed); ok {
		t.Error("another tenant's sealed account opens")
	}
}
