package extauth

import "github.com/extauth/extauth/providers"

// Provider is a provider slug, as used in route paths and configuration keys.
type Provider string

// The six built-in providers.
const (
	Microblog    Provider = "microblog"
	Socialnet    Provider = "socialnet"
	SearchOAuth2 Provider = "search_oauth2"
	BlogOAuth2   Provider = "blog_oauth2"
	SAML         Provider = "saml"
	OIDC         Provider = "oidc"
)

// BuiltinProviders returns the built-in providers in the order of the
// specification.
func BuiltinProviders() []Provider {
	return []Provider{Microblog, Socialnet, SearchOAuth2, BlogOAuth2, SAML, OIDC}
}

// Strategy is a provider behind the routes, for Options.Extra; the contract,
// and the helpers to write one, are in package providers.
type Strategy = providers.Strategy
