package extauth

import (
	"fmt"
	"reflect"
	"slices"

	"gopkg.in/yaml.v3"
)

// keyTenants is the key of the tenants: section of an environment.
const keyTenants = "tenants"

// maxTenantName is the longest tenant name: a DNS label, since a tenant is
// usually told apart by its subdomain.
const maxTenantName = 63

// ValidTenantName reports whether name can name a tenant: 1 to 63 lowercase
// ASCII letters, digits, hyphens and underscores, starting and ending with a
// letter or digit. A tenant name becomes part of host names, cookie names and
// log lines, so nothing else is accepted. (An underscore is not valid in a
// DNS host name: a tenant told apart by subdomain should not use one.)
func ValidTenantName(name string) bool {
	if name == "" || len(name) > maxTenantName {
		return false
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
	if !alnum(name[0]) || !alnum(name[len(name)-1]) {
		return false
	}
	for i := 1; i < len(name)-1; i++ {
		if c := name[i]; !alnum(c) && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

// tenantNameProblem says why a tenant cannot be named name. The name is
// quoted and shortened: it is a key of the file, not a secret, but may hold
// anything.
func tenantNameProblem(name string) Problem {
	shown := name
	if len(shown) > maxTenantName+1 {
		shown = shown[:maxTenantName+1] + "…"
	}
	return Problem{
		Key: keyTenants,
		Reason: fmt.Sprintf("has a tenant named %q; a tenant name is 1 to %d lowercase letters, digits, - and _, "+
			"starting and ending with a letter or digit", shown, maxTenantName),
		Err: ErrInvalidSetting,
	}
}

// tenantProblems returns the problems of tenant t of c, for Validate.
func (c *Config) tenantProblems(name string, t *Config) []Problem {
	if !ValidTenantName(name) {
		return []Problem{tenantNameProblem(name)}
	}
	if t == nil {
		return []Problem{{Tenant: name, Reason: "has a nil configuration", Err: ErrMissingSetting}}
	}
	ps := t.problems(c)
	for i := range ps {
		ps[i].Tenant = name
	}
	return ps
}

// sameProvider reports whether c has the very settings of base for p. The
// comparisons are of whole structs, so that a setting added to a provider
// is compared without this function having to learn of it, and deep:
// Secrets are compared by value (== cannot compare them) and slices by
// their elements.
func (c *Config) sameProvider(base *Config, p Provider) bool {
	var mine, theirs any
	switch p {
	case Microblog:
		mine, theirs = c.Microblog, base.Microblog
	case Socialnet:
		mine, theirs = c.Socialnet, base.Socialnet
	case SearchOAuth2:
		mine, theirs = c.SearchOAuth2, base.SearchOAuth2
	case BlogOAuth2:
		mine, theirs = c.BlogOAuth2, base.BlogOAuth2
	case SAML:
		mine, theirs = c.SAML, base.SAML
	case OIDC:
		mine, theirs = c.OIDC, base.OIDC
	default:
		return false
	}
	return reflect.DeepEqual(mine, theirs)
}

// clearProvider removes every setting of p from c.
func (c *Config) clearProvider(p Provider) {
	switch p {
	case Microblog:
		c.Microblog = OAuthProvider{}
	case Socialnet:
		c.Socialnet = OAuthProvider{}
	case SearchOAuth2:
		c.SearchOAuth2 = OAuthProvider{}
	case BlogOAuth2:
		c.BlogOAuth2 = OAuthProvider{}
	case SAML:
		c.SAML = SAMLConfig{}
	case OIDC:
		c.OIDC = OIDCConfig{}
	}
}

// tenantBase returns the start of a tenant's configuration: a copy of the
// environment's settings, without its warnings and tenants. Slices are
// clipped, so that appending to one tenant's never writes into another's.
func (c *Config) tenantBase(name string) *Config {
	t := *c
	t.Warnings, t.levels, t.Tenants = nil, nil, nil
	t.Tenant = name
	t.SAML.Additional.Custom = slices.Clip(t.SAML.Additional.Custom)
	t.OIDC.Additional.Custom = slices.Clip(t.OIDC.Additional.Custom)
	return &t
}

// tenants reads the tenants: section n of environment env onto env.Tenants
// and returns the tenants' problems, each naming its tenant.
func (l *loader) tenants(env *Config, n *yaml.Node) []Problem {
	envScope := l.scope
	defer func() { l.scope = envScope }()
	general := func(reason string) []Problem {
		return []Problem{{Key: keyTenants, Reason: reason, Err: ErrInvalidSetting}}
	}
	n, err := deref(n)
	if err != nil {
		return general("is an alias that does not resolve")
	}
	if isNull(n) || (n.Kind == yaml.ScalarNode && n.Value == "") {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return general("must be a mapping of tenant names to their settings")
	}
	list, dups, err := l.entries(n, 0, false)
	if err != nil {
		return general("cannot be read: " + err.Error())
	}
	var out []Problem
	for _, name := range dups {
		if ValidTenantName(name) {
			out = append(out, general("gives tenant "+name+" more than once")...)
		}
	}
	env.Tenants = make(map[string]*Config, len(list))
	for _, e := range list {
		if !ValidTenantName(e.key) {
			out = append(out, tenantNameProblem(e.key))
			continue
		}
		l.scope = &scope{tenant: e.key, env: envScope}
		t := env.tenantBase(e.key)
		l.readTenant(t, e.val)
		out = append(out, l.scope.finish(t.problems(env))...)
		t.Warnings, t.levels = l.scope.warnings, l.scope.levels
		env.Tenants[e.key] = t
	}
	return out
}

// readTenant reads one tenant's entries n onto t, a copy of the environment's
// configuration.
func (l *loader) readTenant(t *Config, n *yaml.Node) {
	n, err := deref(n)
	if err != nil {
		l.problem("", "", "is an alias that does not resolve", ErrInvalidSetting)
		return
	}
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		l.problem("", "", "must be a mapping of settings", ErrInvalidSetting)
		return
	}
	entries, dups, err := l.entries(n, 0, true)
	if err != nil {
		l.problem("", "", "cannot be read: "+err.Error(), ErrInvalidSetting)
		return
	}
	l.duplicates(dups, "")
	fs := t.fields()
	read := l.apply(t, fs, entries)
	// A provider is off for the tenant when the tenant empties its
	// required settings; what it inherits of the others goes with them.
	for _, p := range BuiltinProviders() {
		cleared, empty := false, true
		for _, f := range fs {
			if f.provider == p && f.required {
				empty = empty && f.get() == ""
				cleared = cleared || slices.Contains(read, f.key)
			}
		}
		if cleared && empty {
			t.clearProvider(p)
		}
	}
	for _, f := range fs {
		if f.check != nil && f.key != "saml_sp_entity_id" && slices.Contains(read, f.key) && plainHTTP(f.get()) {
			l.warn(f.key + " uses plain http outside localhost; use https")
		}
	}
}
