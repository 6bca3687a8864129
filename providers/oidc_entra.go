package providers

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// tenantPlaceholder is what Entra ID's multi-tenant discovery documents
// put in their issuer where each token's tenant goes.
const tenantPlaceholder = "{tenantid}"

// entraAuthority is the authority an Entra ID issuer setting names:
// https://<host>/<tenant>/v2.0, or https://<host>/<tenant> for the v1
// endpoint.
type entraAuthority struct {
	// tenant is common, organizations, consumers, a tenant ID (lowercase)
	// or a domain name.
	tenant string
	v2     bool
}

func (a entraAuthority) multiTenant() bool {
	return a.tenant == "common" || a.tenant == "organizations"
}

// errEntraAuthority is the shape an Entra ID issuer setting has.
var errEntraAuthority = errors.New("is not an Entra ID authority: it is https://login.microsoftonline.com/<tenant>/v2.0 " +
	"(or the host of your national cloud), where <tenant> is organizations, common, consumers, your tenant ID or a domain of your tenant; " +
	"without /v2.0 it names the v1 endpoint")

func parseEntraAuthority(u *url.URL) (entraAuthority, error) {
	parts := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
	var a entraAuthority
	switch {
	case len(parts) == 2 && parts[1] == "v2.0":
		a.v2 = true
	case len(parts) == 1 || len(parts) == 2 && parts[1] == "":
	default:
		return a, errEntraAuthority
	}
	a.tenant = strings.ToLower(parts[0])
	switch {
	case a.tenant == "common", a.tenant == "organizations", a.tenant == "consumers", isTenantID(a.tenant), validDomain(a.tenant):
		return a, nil
	}
	return a, errEntraAuthority
}

// checkEntra returns the problems of an Entra ID client's settings: the
// authority, and the tenants it admits.
func checkEntra(issuer *url.URL, o OIDCOptions) []*OIDCSettingError {
	var ps []*OIDCSettingError
	bad := func(setting, format string, args ...any) {
		ps = append(ps, &OIDCSettingError{Setting: setting, Reason: fmt.Sprintf(format, args...)})
	}
	a, err := parseEntraAuthority(issuer)
	if err != nil {
		bad(settingIssuer, "%s", err.Error())
		return ps
	}
	tenants, any, err := entraTenants(o.Tenants)
	if err != nil {
		bad(settingTenants, "%s", err.Error())
		return ps
	}
	switch {
	case a.multiTenant() && len(o.Tenants) == 0:
		bad(settingTenants, "is missing: the authority %s signs in the users of any Entra ID tenant, so list the tenant IDs whose users may sign in, "+
			"or write any to admit every tenant", a.tenant)
	case a.tenant == "organizations" && tenants[EntraConsumersTenant]:
		bad(settingTenants, "names the personal-account tenant (consumers), which the organizations authority never signs in: use common")
	case !a.multiTenant() && any:
		bad(settingTenants, "cannot be any: the authority %s signs in one tenant's users only (common or organizations admit others)", a.tenant)
	case a.tenant == "consumers" && len(tenants) > 0 && (len(tenants) > 1 || !tenants[EntraConsumersTenant]):
		bad(settingTenants, "can only name consumers: the consumers authority signs in personal Microsoft accounts only")
	case isTenantID(a.tenant) && len(tenants) > 0 && (len(tenants) > 1 || !tenants[a.tenant]):
		bad(settingTenants, "can only name the authority's own tenant %s (common or organizations admit others)", a.tenant)
	case validDomain(a.tenant) && len(tenants) > 1:
		bad(settingTenants, "can name one tenant only, the one of the domain %s (common or organizations admit others)", a.tenant)
	}
	return ps
}

// entraTenants reads Tenants: the tenant IDs it names (consumers read as
// EntraConsumersTenant), or any.
func entraTenants(list []string) (map[string]bool, bool, error) {
	out := map[string]bool{}
	any := false
	for _, t := range list {
		switch lt := strings.ToLower(t); {
		case lt == OIDCAnyTenant:
			any = true
		case lt == "consumers":
			out[EntraConsumersTenant] = true
		case isTenantID(lt):
			out[lt] = true
		default:
			return nil, false, errors.New("names something that is not a tenant ID (a GUID, as the portal's Overview shows it), consumers or any")
		}
	}
	if any && len(list) > 1 {
		return nil, false, errors.New("lists tenants beside any: write any alone, or the tenants alone")
	}
	return out, any, nil
}

// entraPolicy is an Entra ID client's authority and the tenants it
// admits.
type entraPolicy struct {
	authority entraAuthority
	any       bool
	tenants   map[string]bool
}

func newEntraPolicy(issuer string, o OIDCOptions) (*entraPolicy, error) {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil, err
	}
	a, err := parseEntraAuthority(u)
	if err != nil {
		return nil, err
	}
	tenants, any, err := entraTenants(o.Tenants)
	if err != nil {
		return nil, err
	}
	return &entraPolicy{authority: a, any: any, tenants: tenants}, nil
}

// entraIssuer is the issuer an Entra ID discovery document names: one
// tenant's, or with {tenantid} the template of every tenant's.
type entraIssuer struct {
	issuer string
	// tenant is the one tenant of issuer, tenantPlaceholder for a
	// template.
	tenant string
	v2     bool
}

// acceptIssuer checks the issuer of the authority's discovery document,
// doc, which differs from the authority (the setting) as Entra ID's
// do: the v2.0 endpoint's is https://<host>/<tenant ID>/v2.0 on the
// authority's host; the v1 endpoint's https://<STS host>/<tenant ID>/,
// on its security token service's host (sts.windows.net in the public
// cloud). For common and organizations the tenant is the {tenantid}
// template; for consumers the personal-account tenant; for a tenant ID
// that tenant; for a domain the ID of the tenant it belongs to.
func (p *entraPolicy) acceptIssuer(doc string, authority *url.URL) (*entraIssuer, error) {
	u, err := url.Parse(doc)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, errors.New("is not an absolute URL")
	}
	// The v1 issuer names a host that serves nothing; the v2.0 one is the
	// authority's own.
	if scheme := map[bool]string{true: authority.Scheme, false: "https"}[p.authority.v2]; u.Scheme != scheme {
		return nil, fmt.Errorf("is not an %s URL", scheme)
	}
	parts := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
	if p.authority.v2 {
		if u.Host != authority.Host || len(parts) != 2 || parts[1] != "v2.0" {
			return nil, fmt.Errorf("is not a v2.0 issuer of %s (https://%s/<tenant ID>/v2.0)", authority.Host, authority.Host)
		}
	} else if len(parts) != 2 || parts[1] != "" {
		return nil, errors.New("is not a v1 issuer (https://<security token service>/<tenant ID>/)")
	}
	seg := parts[0]
	a := p.authority
	switch {
	case a.multiTenant():
		if seg != tenantPlaceholder {
			return nil, fmt.Errorf("names no %s template, which the %s authority's issuer is", tenantPlaceholder, a.tenant)
		}
	case a.tenant == "consumers":
		if seg != EntraConsumersTenant {
			return nil, fmt.Errorf("is not the personal-account tenant's (%s)", EntraConsumersTenant)
		}
	case isTenantID(a.tenant):
		if seg != a.tenant {
			return nil, fmt.Errorf("is another tenant's than the authority's %s", a.tenant)
		}
	default:
		if !isTenantID(seg) {
			return nil, fmt.Errorf("names no tenant ID for the domain %s", a.tenant)
		}
		if len(p.tenants) > 0 && !p.tenants[seg] {
			return nil, fmt.Errorf("is the tenant %s's, which tenants does not name", seg)
		}
	}
	return &entraIssuer{issuer: doc, tenant: seg, v2: a.v2}, nil
}

// sameIssuer is the entraIssuer of a discovery document whose issuer is
// the authority itself, https://<host>/<tenant ID>/v2.0, or nil when the
// authority names no tenant ID.
func (p *entraPolicy) sameIssuer(issuer string) *entraIssuer {
	if !isTenantID(p.authority.tenant) || !p.authority.v2 {
		return nil
	}
	return &entraIssuer{issuer: issuer, tenant: p.authority.tenant, v2: true}
}

func (e *entraIssuer) template() bool { return e.tenant == tenantPlaceholder }

// discoveryIssuer checks the issuer of the configured issuer's discovery
// document, doc: the configured issuer itself, or for an Entra ID client
// (entra) the one its authority's document names, which it returns.
func discoveryIssuer(configured string, entra *entraPolicy, doc string) (*entraIssuer, error) {
	if entra == nil {
		if doc == configured {
			return nil, nil
		}
		hint := ""
		if strings.TrimSuffix(doc, "/") == strings.TrimSuffix(configured, "/") {
			hint = " (they differ only by a trailing slash)"
		}
		return nil, fmt.Errorf("configured issuer is %q%s: they must match exactly", configured, hint)
	}
	if doc == configured {
		if e := entra.sameIssuer(doc); e != nil {
			return e, nil
		}
		return nil, errors.New("the authority itself, which no Entra ID authority's issuer is")
	}
	authority, err := url.Parse(configured)
	if err != nil {
		return nil, err
	}
	e, err := entra.acceptIssuer(doc, authority)
	if err != nil {
		return nil, fmt.Errorf("which %w, for the authority %s", err, configured)
	}
	return e, nil
}

// CheckOIDCIssuer returns why the issuer a discovery document names, doc,
// is not one the oidc strategy accepts for c: c's issuer exactly (with
// the trailing slash Auth0's tokens carry, under OIDCPresetAuth0), or
// under OIDCPresetEntra the issuer of the authority's tenant, or the
// {tenantid} template of a multi-tenant authority. extauth check runs it
// on the document it fetched, as the strategy does on its first sign-in.
func CheckOIDCIssuer(c OIDCConfig, doc string) error {
	issuer := presetIssuer(c)
	var entra *entraPolicy
	if c.Options.Preset == OIDCPresetEntra {
		p, err := newEntraPolicy(issuer, presetOptions(c.Options))
		if err != nil {
			return fmt.Errorf("%s %w", settingIssuer, err)
		}
		entra = p
	}
	_, err := discoveryIssuer(issuer, entra, doc)
	return err
}

// forTenant is the issuer of tenant tid's tokens.
func (e *entraIssuer) forTenant(tid string) string {
	if !e.template() {
		return e.issuer
	}
	return strings.Replace(e.issuer, tenantPlaceholder, tid, 1)
}

// matches reports whether iss is the issuer of one tenant's tokens.
func (e *entraIssuer) matches(iss string) bool {
	_, ok := e.tenantOf(iss)
	return ok
}

// tenantOf is the tenant whose issuer iss is; ok is false when iss is no
// tenant's issuer of e.
func (e *entraIssuer) tenantOf(iss string) (tid string, ok bool) {
	if !e.template() {
		return e.tenant, iss == e.issuer
	}
	prefix, suffix, _ := strings.Cut(e.issuer, tenantPlaceholder)
	tid, ok = strings.CutPrefix(iss, prefix)
	if !ok {
		return "", false
	}
	tid, ok = strings.CutSuffix(tid, suffix)
	return tid, ok && isTenantID(tid)
}

// ownTokens refuses tokens that another issuer issued, or that do not say
// which, before they are sent anywhere (issuedBy). An Entra ID client's
// tokens carry the issuer of their user's tenant: they are its own when
// that is an issuer of d's (nil: not discovered yet, which admits only the
// configured issuer) for a tenant the client admits.
func (s *OIDC) ownTokens(d *discovered, t Tokens) error {
	if s.entra == nil || t.Issuer == "" || t.Issuer == s.issuer || d == nil || d.entra == nil {
		return issuedBy(t, s.issuer)
	}
	tid, ok := d.entra.tenantOf(t.Issuer)
	if !ok {
		return issuedBy(t, s.issuer)
	}
	if err := s.entra.allows(tid); err != nil {
		return NewError(CodeInvalidState, "the tokens cannot be renewed here: sign in again",
			fmt.Errorf("refresh: the tokens were issued by tenant %s, which the client no longer admits", tid))
	}
	return nil
}

// check checks a token's iss against its tid: the issuer of the
// token's own tenant, so that a tenant cannot pass its tokens off as
// another's, and its version against the endpoint's.
func (e *entraIssuer) check(c *tokenClaims) error {
	tid, _ := c.raw["tid"].(string)
	switch {
	case !isTenantID(tid):
		return errors.New("no tenant ID (tid) in Entra ID's form")
	case !e.template() && tid != e.tenant:
		return fmt.Errorf("tenant (tid) %s is not the issuer's, %s", tid, e.tenant)
	}
	if want := e.forTenant(tid); c.issuer != want {
		return fmt.Errorf("issuer %.200q is not the issuer of the token's tenant (tid %s), %q", c.issuer, tid, want)
	}
	want := map[bool]string{true: "2.0", false: "1.0"}[e.v2]
	if ver, ok := c.raw["ver"]; ok && ver != want {
		return fmt.Errorf("version (ver) %.16q from an endpoint that issues %s tokens", fmt.Sprint(ver), want)
	}
	return nil
}

// allows refuses a token of a tenant the client does not admit: one that
// tenants does not name (without any), or a personal account through the
// organizations authority.
func (p *entraPolicy) allows(tid string) error {
	a := p.authority
	switch {
	case a.tenant == "organizations" && tid == EntraConsumersTenant:
		return NewError(CodeAccessDenied, "personal Microsoft accounts cannot sign in here; use a work or school account",
			errors.New("id token: a personal Microsoft account (tid "+EntraConsumersTenant+") through the organizations authority"))
	case !a.multiTenant():
		// The issuer is the one tenant's: check has held the token to it.
		return nil
	case p.any || p.tenants[tid]:
		return nil
	}
	return NewError(CodeAccessDenied, "your organisation is not allowed to sign in here",
		fmt.Errorf("id token: tenant %s is not one of oidc_additional_settings.tenants", tid))
}

// verifyIssuer checks a token's iss: the provider's issuer, or for Entra
// ID the issuer of the token's own tenant (entraIssuer.check).
func (d *discovered) verifyIssuer(c *tokenClaims) error {
	switch {
	case c.issuer == "":
		return errors.New("no issuer (iss)")
	case d.entra != nil:
		return d.entra.check(c)
	case c.issuer != d.issuer:
		return fmt.Errorf("issued by a different provider: iss %.200q, expected %q", c.issuer, d.issuer)
	}
	return nil
}

// issuerMatches reports whether iss can be the issuer of the provider's
// tokens: its issuer, or for Entra ID's multi-tenant authorities a
// tenant's.
func (d *discovered) issuerMatches(iss string) bool {
	if d.entra != nil {
		return d.entra.matches(iss)
	}
	return iss == d.issuer
}

// graphHost is a discovery document's msgraph_host when it is a host
// name, "" otherwise.
func graphHost(h string) string {
	if !validDomain(h) {
		return ""
	}
	return strings.ToLower(h)
}

// tenantOf is the tid of verified claims, "" for a token without one.
func tenantOf(claims map[string]any) string {
	tid, _ := claims["tid"].(string)
	return tid
}

// entraEmailVerified says whether Entra ID vouches for the email claim:
// only the xms_edov optional claim (email domain owner verified) does.
// The claim is editable by users and administrators of the tenant that
// issues it, which is how an account of one tenant can claim an address
// of another's (nOAuth).
func entraEmailVerified(claims map[string]any) bool {
	switch v := claims["xms_edov"].(type) {
	case json.Number:
		return v == "1"
	case string:
		return v == "1" || v == "true"
	}
	return isTrue(claims["xms_edov"])
}

// entraNickName is a v1 token's user principal name, where v2.0 tokens
// have preferred_username.
func entraNickName(claims map[string]any) string {
	for _, k := range []string{"preferred_username", "upn", "unique_name"} {
		if v := str(claims, k); v != "" {
			return v
		}
	}
	return ""
}
