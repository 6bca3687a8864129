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

// Identity is the verified, normalized user a callback hook receives.
type Identity = providers.Identity

// Error is the error a failed sign-in produces; see providers.Error.
type Error = providers.Error

// Code is the stable reason of an *Error.
type Code = providers.Code

// Strategy is a provider behind the routes; see providers.Strategy.
type Strategy = providers.Strategy
