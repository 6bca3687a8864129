// Package extauthtest lets an application that signs its users in with
// extauth develop and test its sign-in without the real providers, as
// net/http/httptest lets it test its handlers without a network. It gives
// three ways, from the quickest to the most complete:
//
//   - mock mode: the next sign-in with a provider yields the identity a
//     test chose, or fails with the code it chose, through the
//     application's real routes, hooks, session and pages, for any
//     provider, configured or not;
//   - fake providers that speak the real protocols (OAuth 1.0a, OAuth 2,
//     OpenID Connect, SAML 2.0), started on 127.0.0.1 for the application's
//     own callback URLs, with their consent pages for a person and a table
//     of faults for the failure pages; one call gives the application its
//     configuration for them, so that it runs offline in development;
//   - a developer provider: a form that asks for a name and an email, for
//     the quickest local start, refused anywhere but on a loopback address.
//
// Browser drives any of them through the application's own pages as a
// browser does.
//
// # Mock mode
//
// Mock(auth) switches one *extauth.Auth into mock mode; nothing else can,
// so no configuration or environment can switch it on in production, and
// tests running in parallel, each with its own Auth, never see each
// other's mocks. Then, in a test of the application served at appURL:
//
//	extauthtest.Mock(auth).SignIn(extauth.SAML)
//	page := extauthtest.NewBrowser(t).Post(appURL+"/users/auth/saml", url.Values{"return_to": {"/account"}})
//	// page is the application's /account page, signed in as ada@example.org
//
// SignIn without an identity signs in DefaultIdentity(provider): the fake
// provider's default user, with the raw data shaped as the real provider
// sends it. Fail(provider, code) makes the next sign-in reach OnFailure
// with that code.
//
// # Fake providers
//
// StartProviders (NewProviders in a test) starts a fake of each built-in
// provider, registered for the application's callback and logout URLs;
// Providers.Config is the application's configuration for them, and
// SecretsYAML the same as a secrets file. MountProviders serves them on
// the application's own mux instead. The application signs in against them
// exactly as against the real ones; call Auth.Ready first, which waits for
// the SAML metadata and the OpenID Connect discovery documents. SetFault
// makes one deny, hang, send a huge body or a bad signature, name the
// wrong issuer or send an expired token, with the code each gives in its
// table. Each fake is also a field of Providers, with knobs of its own;
// the fakes are in the subpackages oauth1 (microblog), graph (socialnet),
// oidcop (oidc, and search_oauth2 with GoogleClaims), wpoauth
// (blog_oauth2) and samlidp (saml), and forge is a GitHub-style OAuth 2
// provider for goth's github provider, each an http.Handler to serve as a
// test likes. enterprise has the oidc presets' providers as organisations
// deploy them: Microsoft Entra ID with Microsoft Graph, Okta, Auth0 and
// Google Workspace.
//
// What a sign-in leaves at a fake (a code, a token, a session, a consent
// page waiting, a nonce) is kept until it expires, and at most 20 000 of
// each kind: past that the oldest goes first, so a fake serving a
// long-running development server or a load test holds a bounded amount
// and costs the same at its millionth sign-in as at its first, and a code
// is lost only when 20 000 others were issued before it was redeemed.
//
// For a tenant (extauth.Options.TenantOf), start providers for the
// tenant's base URL: their Config is the tenant's configuration, and
// Auth.TenantReady waits for them. Browser and the fakes reach every name
// under .localhost at 127.0.0.1, as browsers do, so tenants on subdomains
// of localhost need no resolver.
//
// # The developer provider
//
// AddDeveloper mounts a provider, "developer", whose sign-in is a form
// asking for a name and an email address: the quickest way to work on an
// application's pages before any provider is registered. It signs anyone
// in as anyone, so it refuses to run unless the application's BaseURL is
// a loopback address.
//
// The guide, with the tests of examples/hostapp as its examples, is
// [Testing your app].
//
// [Testing your app]: https://github.com/extauth/extauth/blob/main/docs/testing-your-app.md
package extauthtest
