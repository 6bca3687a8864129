package providers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"golang.org/x/oauth2"

	"github.com/extauth/extauth/internal/telemetry"
)

// maxGraphPages bounds the pages of group memberships read from Microsoft
// Graph for one sign-in: with 999 a page, some twenty thousand groups.
const maxGraphPages = 20

// graphPageSize is the most memberships Graph returns in a page ($top).
const graphPageSize = 999

// graphReadScopes are the Microsoft Graph permissions with which a user's
// token reads the user's group memberships.
var graphReadScopes = []string{"GroupMember.Read.All", "Group.Read.All", "Directory.Read.All", "Group.ReadWrite.All", "Directory.ReadWrite.All"}

// graphGroups resolves an Entra ID groups overage: the user's group
// memberships read at Microsoft Graph with the sign-in's access token,
// page after page, within GraphTimeout for all of them. It asks only
// Graph (GraphURL, or the discovery document's msgraph_host), never the
// endpoint the token's _claim_sources names: that is whatever the token
// says, and the access token must not go anywhere else. The error says,
// in words fit for the host and its logs, why the groups are unknown.
func (s *OIDC) graphGroups(ctx context.Context, d *discovered, claims map[string]any, tok *oauth2.Token) ([]string, error) {
	o := &s.opts
	if o.GroupsOverage == GroupsOverageReport {
		return nil, errors.New("groups_overage is report: Microsoft Graph is not asked")
	}
	base := strings.TrimSuffix(o.GraphURL, "/")
	if base == "" {
		if d.graphHost == "" {
			return nil, errors.New("the discovery document names no Microsoft Graph host (msgraph_host): set graph_url")
		}
		base = "https://" + d.graphHost
	}
	if src := claimSource(claims, "groups"); src != "" && !sameOrigin(src, base) {
		// Entra ID's own points at Azure AD Graph (graph.windows.net),
		// which Microsoft retired; whatever it says, it is not asked.
		s.log.Debug("extauth: the ID token's _claim_sources endpoint for groups is not asked; Microsoft Graph is",
			"provider", s.name, "endpoint_host", hostOf(src), "graph", base)
	}
	if !strings.EqualFold(tok.TokenType, "bearer") && tok.TokenType != "" {
		return nil, fmt.Errorf("the access token is %s-bound; Microsoft Graph takes bearer tokens", tok.TokenType)
	}
	if !graphScopeAllows(grantedScopes(tok, s.scopes), base) {
		return nil, fmt.Errorf("the access token's scopes allow no reading of group memberships: ask for one of %s "+
			"(scope) and have it granted in the app registration", strings.Join(graphReadScopes[:3], ", "))
	}
	ctx, cancel := context.WithTimeout(telemetry.WithEndpoint(ctx, telemetry.EndpointUserInfo), o.GraphTimeout)
	defer cancel()
	path := "/v1.0/me/memberOf"
	if o.GroupsOverage == GroupsOverageGraphTransitive {
		path = "/v1.0/me/transitiveMemberOf"
	}
	next := base + path + "?" + url.Values{"$select": {"id"}, "$top": {fmt.Sprint(graphPageSize)}}.Encode()
	groups := []string{}
	seen := map[string]bool{}
	for page := 0; next != ""; page++ {
		if page == maxGraphPages {
			return nil, fmt.Errorf("Microsoft Graph lists more than %d pages of memberships: not read further", maxGraphPages)
		}
		// A next page elsewhere would receive the access token.
		if u, err := url.Parse(next); err != nil || u.User != nil || !sameOrigin(next, base) || !strings.HasPrefix(u.Path, path) {
			return nil, fmt.Errorf("Microsoft Graph's next page (@odata.nextLink) is not on %s%s: not followed", base, path)
		}
		resp, body, err := get(ctx, s.client, next, tok.AccessToken, "application/json", "Microsoft Graph")
		if err != nil {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, fmt.Errorf("Microsoft Graph did not answer within %s", o.GraphTimeout)
			}
			return nil, fmt.Errorf("Microsoft Graph cannot be reached: %s", AsError(err, s.name, CodeProviderUnavailable).Message)
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("Microsoft Graph answered HTTP %d%s", resp.StatusCode, graphErrorCode(body))
		}
		var answer struct {
			Value []struct {
				Type string `json:"@odata.type"`
				ID   string `json:"id"`
			} `json:"value"`
			NextLink string `json:"@odata.nextLink"`
		}
		if err := json.Unmarshal(body, &answer); err != nil || answer.Value == nil {
			return nil, errors.New("Microsoft Graph's answer is not a list of memberships")
		}
		for _, v := range answer.Value {
			// memberOf lists directory roles and administrative units
			// beside groups; roles are the wids claim's.
			if v.Type == "#microsoft.graph.group" && v.ID != "" && !seen[v.ID] {
				seen[v.ID] = true
				groups = append(groups, v.ID)
			}
		}
		next = answer.NextLink
	}
	return groups, nil
}

// grantedScopes are the scopes of tok: the token response's scope, or
// when it names none those requested, which RFC 6749 5.1 says it then
// granted.
func grantedScopes(tok *oauth2.Token, requested []string) []string {
	if s, ok := tok.Extra("scope").(string); ok && s != "" {
		return strings.Fields(s)
	}
	return requested
}

// graphScopeAllows reports whether one of scopes lets a token read group
// memberships at Graph. Entra ID writes Graph's scopes with or without
// Graph's URL before them.
func graphScopeAllows(scopes []string, base string) bool {
	for _, sc := range scopes {
		for _, prefix := range []string{base + "/", "https://graph.microsoft.com/"} {
			if len(sc) > len(prefix) && strings.EqualFold(sc[:len(prefix)], prefix) {
				sc = sc[len(prefix):]
				break
			}
		}
		if slices.ContainsFunc(graphReadScopes, func(g string) bool { return strings.EqualFold(g, sc) }) {
			return true
		}
	}
	return false
}

// claimSource is the endpoint of a distributed claim (OIDC Core 5.6.2),
// "" when claims names none for name.
func claimSource(claims map[string]any, name string) string {
	names, _ := claims["_claim_names"].(map[string]any)
	src, _ := names[name].(string)
	sources, _ := claims["_claim_sources"].(map[string]any)
	entry, _ := sources[src].(map[string]any)
	endpoint, _ := entry["endpoint"].(string)
	return endpoint
}

func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Host
}

// graphErrorCode is ": <code>" for a Graph error body naming its code
// (Authorization_RequestDenied, InvalidAuthenticationToken), "" otherwise;
// only letters, digits, dots and underscores, so nothing the provider
// wrote reaches a log or a page as it was.
func graphErrorCode(body []byte) string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error.Code == "" || len(e.Error.Code) > 64 {
		return ""
	}
	for _, c := range e.Error.Code {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.') {
			return ""
		}
	}
	return " " + e.Error.Code
}
