package providers

import (
	"net/url"
	"reflect"
	"testing"

	"golang.org/x/oauth2"
)

// pkceAuthURL builds what x/oauth2's AuthCodeURL would, from a prefix made
// once.
func TestPKCEAuthURLMatchesAuthCodeURL(t *testing.T) {
	for _, conf := range []*oauth2.Config{
		{ClientID: "id with space&amp", RedirectURL: "https://app.example/users/auth/x/callback?a=b",
			Endpoint: oauth2.Endpoint{AuthURL: "https://p.example/authorize"}, Scopes: []string{"basic", "email"}},
		{ClientID: "id", Endpoint: oauth2.Endpoint{AuthURL: "https://p.example/authorize?tenant=7"}},
	} {
		state, verifier := "c3RhdGUtc3RhdGU", oauth2.GenerateVerifier()
		got, err := url.Parse(pkceAuthURL(authURLPrefix(conf), state, verifier))
		if err != nil {
			t.Fatal(err)
		}
		want, _ := url.Parse(conf.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier)))
		if got.Scheme+got.Host+got.Path != want.Scheme+want.Host+want.Path || !reflect.DeepEqual(got.Query(), want.Query()) {
			t.Errorf("pkceAuthURL =\n%s\nAuthCodeURL =\n%s", got, want)
		}
	}
}
