package main

import (
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/extauth/extauth"
)

// The demo serves one site per tenant beside its own: the pages, the
// sign-in routes and the sessions of each are told apart by host name.

// labels are the names people know the built-in providers by; the pages
// show the slug beside them, small.
var labels = map[extauth.Provider]string{
	extauth.Microblog:    "Twitter-style microblog",
	extauth.Socialnet:    "Facebook-style social network",
	extauth.SearchOAuth2: "Google account",
	extauth.BlogOAuth2:   "WordPress",
	extauth.SAML:         "SAML (Ada's university IdP)",
	extauth.OIDC:         "OpenID Connect",
}

// site is the demo's own site ("" tenant) or one tenant's.
type site struct {
	tenant string
	// name is what the pages call it: "extauth demo", "Alpha University".
	name string
	// base is its base URL: the demo's, or the tenant's host.
	base string
	// providers are those it offers, in the order of its buttons.
	providers []extauth.Provider
	// labels override the provider labels where the site's own providers
	// have names of their own (a tenant's IdP).
	labels map[extauth.Provider]string
}

// label is what the site calls provider p.
func (s *site) label(p extauth.Provider) string {
	if l, ok := s.labels[p]; ok {
		return l
	}
	if l, ok := labels[p]; ok {
		return l
	}
	return string(p)
}

// host is the site's host and port, as the browser's address bar shows it.
func (s *site) host() string {
	u, err := url.Parse(s.base)
	if err != nil {
		return s.base
	}
	return u.Host
}

// sites are the demo's sites: its own first, then the tenants by name.
type sites struct {
	list []*site
	// tenantOf is Options.TenantOf: nil without tenants.
	tenantOf func(*http.Request) (string, error)
}

// of returns the site r is for, nil for a host that is none of them.
func (ss *sites) of(r *http.Request) *site {
	tenant := ""
	if ss.tenantOf != nil {
		t, err := ss.tenantOf(r)
		if err != nil {
			return nil
		}
		tenant = t
	}
	for _, s := range ss.list {
		if s.tenant == tenant {
			return s
		}
	}
	return nil
}

// newSites describes the sites of cfg served at base: the demo's own, and
// each tenant of cfg.Tenants at tenantBase(name). orgs names the tenants
// the demo runs itself (its development tenants).
func newSites(base string, cfg *extauth.Config, tenantBase func(string) string, orgs map[string]devTenant) *sites {
	ss := &sites{list: []*site{{name: appName, base: base, providers: cfg.Providers()}}}
	names := make([]string, 0, len(cfg.Tenants))
	for name := range cfg.Tenants {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		s := &site{tenant: name, name: "Tenant " + name, base: tenantBase(name), providers: cfg.Tenants[name].Providers()}
		if name == federationTenant && cfg.Tenants[name].SAML.Additional.Federation.MetadataURL != "" {
			s.name = federationName
			s.labels = map[extauth.Provider]string{extauth.SAML: federationName}
		}
		if org, ok := orgs[name]; ok {
			s.name = org.org
			s.labels = map[extauth.Provider]string{
				extauth.SAML: "SAML (" + org.org + "'s IdP)",
				extauth.OIDC: org.org + " account",
			}
		}
		ss.list = append(ss.list, s)
	}
	return ss
}

// subdomainBase is the library's default tenant base URL: base with the
// tenant as a subdomain.
func subdomainBase(base string) func(string) string {
	return func(tenant string) string {
		u, err := url.Parse(base)
		if err != nil {
			return base
		}
		u.Host = tenant + "." + u.Host
		return u.String()
	}
}

// localhostTenants serves the tenants at <tenant>.localhost on the demo's
// port, which browsers resolve to the loopback interface themselves: no
// DNS, no /etc/hosts entry. mainHost, the demo's own host (127.0.0.1,
// localhost), is the demo's own site.
func localhostTenants(base string) (tenantOf func(*http.Request) (string, error), tenantBase func(string) string) {
	u, _ := url.Parse(base)
	mainHost := strings.ToLower(u.Hostname())
	sub := extauth.SubdomainTenants("localhost")
	tenantOf = func(r *http.Request) (string, error) {
		if hostOnly(r.Host) == mainHost {
			return "", nil
		}
		return sub(r)
	}
	tenantBase = func(tenant string) string {
		return u.Scheme + "://" + net.JoinHostPort(tenant+".localhost", u.Port())
	}
	if u.Port() == "" {
		tenantBase = func(tenant string) string { return u.Scheme + "://" + tenant + ".localhost" }
	}
	return tenantOf, tenantBase
}

// hostOnly is the host of a Host header, lowercase, without its port.
func hostOnly(hostport string) string {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	return strings.ToLower(strings.TrimSuffix(h, "."))
}
