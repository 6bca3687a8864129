package providers

import (
	"fmt"

	"golang.org/x/oauth2"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// The presets OIDCOptions.Preset (preset) shapes the client for: each
// provider as organisations deploy it, with the quirks a generic relying
// party refuses or gets subtly wrong. A preset fills what its provider
// needs and nothing else; OIDCConfig.PresetRules says what, and extauth
// check prints it.
const (
	// OIDCPresetEntra is Microsoft Entra ID (Azure AD), v2.0 or v1
	// endpoints, as the issuer's authority says: for a multi-tenant
	// authority (common, organizations) the discovery document's
	// {tenantid} issuer template, each ID token's iss checked against its
	// tid and the tid against Tenants; the tenant's ID in
	// Identity.Directory, with the groups, roles and wids claims and a
	// groups overage resolved at Microsoft Graph or reported
	// (GroupsOverage); the email claim taken as unverified unless the
	// token says xms_edov.
	OIDCPresetEntra = "entra"
	// OIDCPresetOkta is Okta, its org authorization server (issuer
	// https://<domain>) or a custom one (https://<domain>/oauth2/<id>):
	// the groups claim into Identity.Directory.
	OIDCPresetOkta = "okta"
	// OIDCPresetAuth0 is Auth0, on its own domain or a custom one: the
	// issuer with the trailing slash Auth0 issues tokens with, and
	// logout at /v2/logout when discovery names no end_session_endpoint.
	OIDCPresetAuth0 = "auth0"
	// OIDCPresetGoogleWorkspace is Google Workspace: the users of
	// HostedDomain only, sent as the hd parameter and checked in the ID
	// token's hd claim; the domain in Identity.Directory.
	OIDCPresetGoogleWorkspace = "google-workspace"
)

// OIDCPresets returns the values of OIDCOptions.Preset.
func OIDCPresets() []string {
	return []string{OIDCPresetEntra, OIDCPresetOkta, OIDCPresetAuth0, OIDCPresetGoogleWorkspace}
}

// What an Entra ID groups overage becomes (OIDCOptions.GroupsOverage).
const (
	// GroupsOverageGraph reads the user's direct group memberships at
	// Microsoft Graph (/me/memberOf) with the sign-in's access token, when
	// its scopes allow it; otherwise the overage is reported. The default.
	GroupsOverageGraph = "graph"
	// GroupsOverageGraphTransitive reads the transitive memberships
	// (/me/transitiveMemberOf), nested groups included, as the groups
	// claim counts them.
	GroupsOverageGraphTransitive = "graph_transitive"
	// GroupsOverageReport never asks Graph: an overage is reported.
	GroupsOverageReport = "report"
)

// OIDCAnyTenant, as the one entry of OIDCOptions.Tenants (tenants: any),
// admits the users of every Entra ID tenant through a multi-tenant
// authority. It must be written: an empty list admits none.
const OIDCAnyTenant = "any"

// EntraConsumersTenant is the tenant of personal Microsoft accounts: the
// tid of their ID tokens, and the tenant the consumers authority stands
// for. Tenants may name it as "consumers".
const EntraConsumersTenant = "9188040d-6c67-4c5b-b112-36a304b66dad"

// DefaultGraphTimeout bounds the resolution of a groups overage at
// Microsoft Graph, all its pages together.
const DefaultGraphTimeout = 10 * time.Second

// The entries of oidc_additional_settings the presets add.
const (
	settingPreset        = OIDCSettingsKey + ".preset"         // Preset
	settingTenants       = OIDCSettingsKey + ".tenants"        // Tenants
	settingHostedDomain  = OIDCSettingsKey + ".hosted_domain"  // HostedDomain
	settingGroupsClaim   = OIDCSettingsKey + ".groups_claim"   // GroupsClaim
	settingRolesClaim    = OIDCSettingsKey + ".roles_claim"    // RolesClaim
	settingGroupsOverage = OIDCSettingsKey + ".groups_overage" // GroupsOverage
	settingGraphURL      = OIDCSettingsKey + ".graph_url"      // GraphURL
	settingIssuer        = "oidc_issuer"
)

// guidRE is a tenant ID as Entra ID writes it: a GUID in lowercase.
var guidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// isTenantID reports whether s is a tenant ID in Entra ID's form.
func isTenantID(s string) bool { return guidRE.MatchString(s) }

// presetOptions is o with what its preset implies where o leaves it open:
// the claims the preset reads into Identity.Directory, Entra ID's overage
// handling and Graph time-out, and the client assertions' audience Entra
// ID requires.
func presetOptions(o OIDCOptions) OIDCOptions {
	switch o.Preset {
	case OIDCPresetEntra:
		if o.GroupsClaim == "" {
			o.GroupsClaim = "groups"
		}
		if o.RolesClaim == "" {
			o.RolesClaim = "roles"
		}
		if o.GroupsOverage == "" {
			o.GroupsOverage = GroupsOverageGraph
		}
		if o.GraphTimeout <= 0 {
			o.GraphTimeout = DefaultGraphTimeout
		}
		// Entra ID takes client assertions addressed to its token
		// endpoint only (its v2.0 protocol reference): with the issuer
		// as audience no sign-in could succeed.
		if o.AuthMethod == AuthMethodPrivateKeyJWT && o.AssertionAudience == "" {
			o.AssertionAudience = OIDCAudienceTokenEndpoint
		}
	case OIDCPresetOkta:
		if o.GroupsClaim == "" {
			o.GroupsClaim = "groups"
		}
	}
	return o
}

// presetIssuer is the issuer the strategy expects for c: Auth0's with the
// trailing slash its tokens carry, whether or not the file wrote it;
// c.Issuer for the others.
func presetIssuer(c OIDCConfig) string {
	if c.Options.Preset == OIDCPresetAuth0 && !strings.HasSuffix(c.Issuer, "/") {
		if u, err := url.Parse(c.Issuer); err == nil && u.Path == "" {
			return c.Issuer + "/"
		}
	}
	return c.Issuer
}

// applyPreset prepares what the preset checks at each sign-in: the
// tenants an Entra ID client admits, the hd of a Google Workspace one.
func (s *OIDC) applyPreset() error {
	o := &s.opts
	switch o.Preset {
	case OIDCPresetEntra:
		p, err := newEntraPolicy(s.issuer, *o)
		if err != nil {
			return fmt.Errorf("%s %q: %w", settingIssuer, s.issuer, err)
		}
		s.entra = p
		s.check = func(c *idClaims) error { return p.allows(tenantOf(c.raw)) }
	case OIDCPresetGoogleWorkspace:
		hd := o.HostedDomain
		s.authParams = append(s.authParams, oauth2.SetAuthURLParam("hd", hd))
		s.check = func(c *idClaims) error { return checkHostedDomain(hd, c.HostedDomain) }
	}
	return nil
}

// auth0Logout is Auth0's own logout endpoint, for a tenant whose
// discovery document names no end_session_endpoint (the tenant setting
// "RP-Initiated Logout End Session Endpoint Discovery" is off): /v2/logout
// with client_id and returnTo. It takes no state, so the state rides in
// returnTo's query, which Auth0 leaves out when it matches returnTo
// against the Allowed Logout URLs, and sends back as it was.
func (s *OIDC) auth0Logout(state, postLogoutRedirectURI string) (string, error) {
	back, err := url.Parse(postLogoutRedirectURI)
	if err != nil {
		return "", NewError(CodeMisconfigured, "the logout request is incomplete", fmt.Errorf("post_logout_redirect_uri: %w", err))
	}
	q := back.Query()
	q.Set("state", state)
	back.RawQuery = q.Encode()
	return strings.TrimSuffix(s.issuer, "/") + "/v2/logout?" + url.Values{"client_id": {s.clientID}, "returnTo": {back.String()}}.Encode(), nil
}

// checkPreset returns the problems of c's preset settings, naming the
// entries of oidc_additional_settings (and oidc_issuer).
func checkPreset(c OIDCConfig, o OIDCOptions) []*OIDCSettingError {
	var ps []*OIDCSettingError
	bad := func(setting, format string, args ...any) {
		ps = append(ps, &OIDCSettingError{Setting: setting, Reason: fmt.Sprintf(format, args...)})
	}
	if o.Preset != "" && !slices.Contains(OIDCPresets(), o.Preset) {
		bad(settingPreset, "must be one of %s", strings.Join(OIDCPresets(), ", "))
		return ps
	}
	only := func(setting, value, preset string) {
		if value != "" && o.Preset != preset {
			bad(setting, "applies only with preset: %s", preset)
		}
	}
	if len(o.Tenants) > 0 && o.Preset != OIDCPresetEntra {
		bad(settingTenants, "applies only with preset: %s", OIDCPresetEntra)
	}
	only(settingGroupsOverage, o.GroupsOverage, OIDCPresetEntra)
	only(settingGraphURL, o.GraphURL, OIDCPresetEntra)
	only(settingHostedDomain, o.HostedDomain, OIDCPresetGoogleWorkspace)
	for _, cl := range []struct{ setting, name string }{{settingGroupsClaim, o.GroupsClaim}, {settingRolesClaim, o.RolesClaim}} {
		if cl.name != "" && strings.TrimSpace(cl.name) != cl.name {
			bad(cl.setting, "has spaces around the claim name")
		}
	}
	u, err := url.Parse(c.Issuer)
	if err != nil || c.Issuer == "" {
		return ps // oidc_issuer's own problem
	}
	switch o.Preset {
	case OIDCPresetEntra:
		ps = append(ps, checkEntra(u, o)...)
	case OIDCPresetOkta:
		if u.Path == "/oauth2/v1" {
			bad(settingIssuer, "is the path of the org authorization server's endpoints, not an issuer: the org authorization server's issuer is https://<your Okta domain> alone")
		} else if p := u.Path; p != "" && !oktaCustomPath.MatchString(p) {
			bad(settingIssuer, "is not an Okta issuer: it is https://<your Okta domain> for the org authorization server, "+
				"or https://<your Okta domain>/oauth2/<authorization server ID> (such as /oauth2/default) for a custom one, "+
				"with nothing after it (discovery adds /.well-known/openid-configuration itself)")
		}
	case OIDCPresetAuth0:
		if u.Path != "" && u.Path != "/" {
			bad(settingIssuer, "is not an Auth0 issuer: it is https://<your tenant or custom domain>/ with no path "+
				"(discovery adds /.well-known/openid-configuration itself)")
		}
	case OIDCPresetGoogleWorkspace:
		if _, ok := o.AuthParams["hd"]; ok {
			bad(OIDCSettingsKey+".hd", "is set by hosted_domain under preset %s: remove it", o.Preset)
		}
		switch {
		case o.HostedDomain == "":
			bad(settingHostedDomain, "is missing (preset %s signs in the users of one Workspace domain: name it, or * for any Workspace domain)", o.Preset)
		case o.HostedDomain != "*" && !validDomain(o.HostedDomain):
			bad(settingHostedDomain, "must be a domain name, such as example.com, or *")
		}
	}
	if o.GroupsOverage != "" && !slices.Contains([]string{GroupsOverageGraph, GroupsOverageGraphTransitive, GroupsOverageReport}, o.GroupsOverage) {
		bad(settingGroupsOverage, "must be %s, %s or %s", GroupsOverageGraph, GroupsOverageGraphTransitive, GroupsOverageReport)
	}
	if o.GraphURL != "" {
		if err := checkIssuer(o.GraphURL); err != nil {
			bad(settingGraphURL, "%s", err.Error())
		} else if gu, _ := url.Parse(o.GraphURL); strings.Trim(gu.Path, "/") != "" {
			bad(settingGraphURL, "must be Microsoft Graph's base URL, without a path (such as https://graph.microsoft.com)")
		}
	}
	return ps
}

// oktaCustomPath is the path of an Okta custom authorization server's
// issuer.
var oktaCustomPath = regexp.MustCompile(`^/oauth2/[A-Za-z0-9_-]+$`)

// validDomain reports whether s is a DNS domain name of two labels or
// more.
func validDomain(s string) bool { return strings.Contains(s, ".") && isDomain(s) }

// PresetRules says what c's preset implies, as the strategy applies it,
// one sentence a line: extauth check prints them. Nil without a preset.
func (c OIDCConfig) PresetRules() []string {
	o := presetOptions(c.profileOptions())
	issuer := presetIssuer(c)
	var rules []string
	add := func(format string, args ...any) { rules = append(rules, fmt.Sprintf(format, args...)) }
	claims := func() {
		var parts []string
		if o.GroupsClaim != "" {
			parts = append(parts, "the "+o.GroupsClaim+" claim as its groups")
		}
		if o.RolesClaim != "" {
			parts = append(parts, "the "+o.RolesClaim+" claim as its roles")
		}
		if len(parts) > 0 {
			add("Identity.Directory: %s", strings.Join(parts, ", "))
		}
	}
	switch o.Preset {
	case OIDCPresetEntra:
		u, err := url.Parse(issuer)
		if err != nil {
			return nil
		}
		a, err := parseEntraAuthority(u)
		if err != nil {
			return nil
		}
		version := "v2.0 endpoint (ID tokens of version 2.0)"
		if !a.v2 {
			version = "v1 endpoint (ID tokens of version 1.0; the v2.0 endpoint is the current one)"
		}
		add("Microsoft Entra ID, %s, authority %s", version, a.tenant)
		switch {
		case a.multiTenant() && slices.Contains(o.Tenants, OIDCAnyTenant):
			add("tenants: any: the users of every Entra ID tenant%s can sign in; each ID token's iss must be the discovery document's {tenantid} template with the token's own tid",
				map[bool]string{true: " and personal Microsoft accounts", false: ""}[a.tenant == "common"])
		case a.multiTenant():
			add("tenants: only %s; each ID token's iss must be the discovery document's {tenantid} template with the token's own tid", strings.Join(o.Tenants, ", "))
		case a.tenant == "consumers":
			add("personal Microsoft accounts only (tenant %s)", EntraConsumersTenant)
		default:
			add("one tenant (%s): its ID tokens' tid must be its own", a.tenant)
		}
		add("Tokens.Issuer is the tenant's own issuer: renewal, step-up and logout are bound to the tenant of the sign-in")
		add("email: Entra ID lets users and administrators edit it, so EmailVerified is true only with the xms_edov optional claim")
		add("Identity.Directory: the tid claim as TenantID, the %s claim as its groups, the %s claim as its roles, the wids claim as WIDs", o.GroupsClaim, o.RolesClaim)
		switch o.GroupsOverage {
		case GroupsOverageReport:
			add("groups overage: reported (Directory.GroupsSource %q), never resolved", GroupsUnresolved)
		default:
			where := "the discovery document's msgraph_host"
			if o.GraphURL != "" {
				where = o.GraphURL
			}
			path := "/me/memberOf"
			if o.GroupsOverage == GroupsOverageGraphTransitive {
				path = "/me/transitiveMemberOf"
			}
			add("groups overage: Microsoft Graph's %s read at %s, within %s and %d pages, when the access token's scopes allow it "+
				"(GroupMember.Read.All, Group.Read.All or Directory.Read.All), otherwise reported (Directory.GroupsSource %q)",
				path, where, o.GraphTimeout, maxGraphPages, GroupsUnresolved)
		}
		if o.AuthMethod == AuthMethodPrivateKeyJWT {
			add("client assertions addressed to the token endpoint (client_assertion_audience: %s), as Entra ID requires", o.AssertionAudience)
		}
	case OIDCPresetOkta:
		u, err := url.Parse(issuer)
		if err != nil {
			return nil
		}
		if u.Path == "" {
			add("Okta org authorization server (%s): its access tokens are for Okta's own APIs only", issuer)
		} else {
			add("Okta custom authorization server %s (%s)", strings.TrimPrefix(u.Path, "/oauth2/"), issuer)
		}
		claims()
		add("logout: Okta's end_session_endpoint, which needs id_token_hint: keep the ID token with the session (LogoutSession.IDToken)")
	case OIDCPresetAuth0:
		add("issuer %s: Auth0 issues tokens with the trailing slash", issuer)
		claims()
		add("logout: the end_session_endpoint when discovery names one, otherwise Auth0's /v2/logout with client_id and returnTo " +
			"(list the post_logout URL under the application's Allowed Logout URLs)")
	case OIDCPresetGoogleWorkspace:
		if o.HostedDomain == "*" {
			add("hd: any Google Workspace domain; consumer Google accounts are refused (no hd claim)")
		} else {
			add("hd=%s sent (a hint users can remove) and the ID token's hd claim must be %s: other domains and consumer accounts are refused", o.HostedDomain, o.HostedDomain)
		}
		add("Identity.Directory: the hd claim as Domain")
		if issuer != GoogleIssuer {
			add("issuer %s is not Google's (%s)", issuer, GoogleIssuer)
		}
		add("logout: Google has no end_session_endpoint, so signing out ends the application's session only")
	}
	return rules
}
