package extauth

import (
	"net/http"
	"net/url"
	"testing"

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
