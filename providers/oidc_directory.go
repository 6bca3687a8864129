package providers

import (
	"context"

	"golang.org/x/oauth2"
)

// Directory is what an organisation's directory says of a user, from the
// ID token of a provider that carries it: the tenant, the groups and roles
// (the claims OIDCOptions.GroupsClaim and RolesClaim name, which a preset
// sets), Entra ID's directory roles, Google Workspace's domain.
type Directory struct {
	// TenantID is the directory the user signed in from: Entra ID's tid
	// (EntraConsumersTenant for a personal Microsoft account).
	TenantID string `json:"tenant_id,omitempty"`
	// Domain is the user's Google Workspace domain (the hd claim).
	Domain string `json:"domain,omitempty"`
	// Groups are the groups the user is a member of, as the provider
	// names them (Entra ID: object IDs, unless the app registration
	// emits names). GroupsSource says whether the list is whole.
	Groups []string `json:"groups,omitempty"`
	// GroupsSource is where Groups come from: GroupsFromToken,
	// GroupsFromGraph, or GroupsUnresolved when the provider said the
	// user is in more groups than a token holds (an overage) and they
	// could not be read, GroupsProblem saying why: Groups is then empty
	// and means nothing. "" when the token has no groups claim at all (the
	// provider does not send one, or the user is in no group).
	GroupsSource string `json:"groups_source,omitempty"`
	// GroupsProblem says why an overage was not resolved.
	GroupsProblem string `json:"groups_problem,omitempty"`
	// Roles are the user's roles in the application (Entra ID's app
	// roles, an Auth0 roles claim).
	Roles []string `json:"roles,omitempty"`
	// WIDs are Entra ID's directory roles of the user, by role template
	// ID (the wids claim).
	WIDs []string `json:"wids,omitempty"`
}

// The values of Directory.GroupsSource.
const (
	// GroupsFromToken: the ID token's groups claim.
	GroupsFromToken = "token"
	// GroupsFromGraph: Microsoft Graph, after an overage.
	GroupsFromGraph = "graph"
	// GroupsUnresolved: an overage that was not resolved.
	GroupsUnresolved = "overage"
)

// readsDirectory reports whether the strategy fills Identity.Directory.
func (s *OIDC) readsDirectory() bool {
	o := &s.opts
	return o.Preset != "" || o.GroupsClaim != "" || o.RolesClaim != ""
}

// directory reads the user's directory information from the verified
// claims of a sign-in, resolving an Entra ID groups overage with tok as
// the options say; nil when the strategy reads none.
func (s *OIDC) directory(ctx context.Context, d *discovered, claims map[string]any, tok *oauth2.Token) *Directory {
	if !s.readsDirectory() {
		return nil
	}
	o := &s.opts
	dir := &Directory{}
	if o.Preset == OIDCPresetEntra {
		dir.TenantID = tenantOf(claims)
		dir.WIDs, _ = claimStrings(claims["wids"])
	}
	if o.Preset == OIDCPresetGoogleWorkspace {
		dir.Domain = str(claims, "hd")
	}
	if o.RolesClaim != "" {
		dir.Roles, _ = claimStrings(claims[o.RolesClaim])
	}
	if o.GroupsClaim != "" {
		if groups, ok := claimStrings(claims[o.GroupsClaim]); ok {
			dir.Groups, dir.GroupsSource = groups, GroupsFromToken
		}
	}
	if o.Preset == OIDCPresetEntra && groupsOverage(claims) {
		dir.Groups = nil
		groups, err := s.graphGroups(ctx, d, claims, tok)
		if err != nil {
			dir.GroupsSource, dir.GroupsProblem = GroupsUnresolved, err.Error()
			s.log.Warn("extauth: the user is in more groups than the ID token holds (a groups overage) and they were not resolved",
				"provider", s.name, "tenant_id", dir.TenantID, "reason", dir.GroupsProblem)
		} else {
			dir.Groups, dir.GroupsSource = groups, GroupsFromGraph
		}
	}
	return dir
}

// groupsOverage reports whether an Entra ID token says the user's groups
// did not fit: the groups claim named as a distributed claim
// (_claim_names), or, from the implicit flow, hasgroups.
func groupsOverage(claims map[string]any) bool {
	if names, ok := claims["_claim_names"].(map[string]any); ok {
		if _, ok := names["groups"]; ok {
			return true
		}
	}
	return isTrue(claims["hasgroups"])
}

// claimStrings reads a claim that lists strings: an array of strings (the
// entries that are not strings are left out), or a single string; ok is
// false when the claim is absent or neither.
func claimStrings(v any) ([]string, bool) {
	switch v := v.(type) {
	case string:
		return []string{v}, true
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out, true
	}
	return nil, false
}
