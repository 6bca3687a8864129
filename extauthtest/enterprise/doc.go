// Package enterprise is a set of fake identity providers as organisations
// deploy them, for the OpenID Connect presets of extauth's oidc provider
// (oidc_additional_settings.preset) and the applications that use them:
// Microsoft Entra ID with Microsoft Graph (NewEntra), Okta (NewOkta),
// Auth0 (NewAuth0) and Google Workspace (NewWorkspace). Each serves its
// provider's discovery documents byte for byte as the provider serves
// them, but for its hosts, which become the fake's; its endpoints at the
// provider's paths; ID tokens with the provider's own claims; and its
// logout as the provider does it. So an application tests its sign-in,
// its groups and its logout against a preset offline.
//
// Each fake is built on oidcop, whose knobs (faults, counters, key
// rotation) its providers keep: Entra.Authority, Okta.Org and Server,
// Auth0.OP, and the *oidcop.OP NewWorkspace returns.
//
// Entra ID is the one with most to it: the authorities common,
// organizations, consumers and each tenant's (by ID and by domain), v2.0
// and v1 endpoints, each user's tokens issued as its own tenant's, and a
// groups overage (_claim_names, _claim_sources) for a user in more than
// GroupsLimit groups, which its Graph resolves page by page for a token
// with GroupMember.Read.All, and refuses otherwise.
package enterprise
