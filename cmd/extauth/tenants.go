package main

import (
	"fmt"
	"net/url"
	"reflect"
	"strings"

	"github.com/extauth/extauth"
)

// tenantPlaceholder stands for a tenant's name in -base-url: a tenant's base
// URL is not in the secrets file, since the host derives it
// (Options.TenantBaseURL).
const tenantPlaceholder = "{tenant}"

// baseURLFor returns tenant's base URL: the template with the tenant's name
// for {tenant}, or without {tenant} the tenant's name as a subdomain of the
// base URL, as extauth.New derives it when Options.TenantBaseURL is not set.
func baseURLFor(template, tenant string) string {
	if strings.Contains(template, tenantPlaceholder) || tenant == "" || template == "" {
		return strings.ReplaceAll(template, tenantPlaceholder, tenant)
	}
	u, err := url.Parse(template)
	if err != nil {
		return template // checkBaseURL has refused it already
	}
	u.Host = tenant + "." + u.Host
	return u.String()
}

// tenantFlags are -tenant and -all-tenants.
type tenantFlags struct {
	name *string
	all  *bool
}

func addTenantFlags(f *flags, withAll bool) tenantFlags {
	tf := tenantFlags{name: f.String("tenant", "", "a tenant of the environment's tenants: section")}
	if withAll {
		tf.all = f.Bool("all-tenants", false, "every tenant of the file, one after the other")
	} else {
		tf.all = new(bool)
	}
	return tf
}

func (tf tenantFlags) given() bool { return *tf.name != "" || *tf.all }

// usage checks the tenant flags against each other and -base-url.
func (tf tenantFlags) usage(f *flags, baseURL string) (ok bool, code int) {
	switch {
	case *tf.name != "" && *tf.all:
		return false, f.fail("-tenant and -all-tenants exclude each other")
	case *tf.name != "" && !extauth.ValidTenantName(*tf.name):
		return false, f.fail("-tenant must be a tenant name: lowercase letters, digits, - and _")
	}
	return true, 0
}

// target is one configuration a command reports on: the environment's, or
// a tenant's, with its base URL.
type target struct {
	tenant  string
	cfg     *extauth.Config
	baseURL string
}

// targets returns what the tenant flags select of cfg: the environment
// alone, the named tenant, or every tenant in name order.
func (tf tenantFlags) targets(cfg *extauth.Config, path, baseURL string) ([]target, error) {
	switch {
	case *tf.all:
		if len(cfg.Tenants) == 0 {
			return nil, fmt.Errorf("%s has no tenants%s", path, inEnvironment(cfg))
		}
		var out []target
		for _, name := range cfg.TenantNames() {
			out = append(out, target{name, cfg.Tenants[name], baseURLFor(baseURL, name)})
		}
		return out, nil
	case *tf.name != "":
		name := *tf.name
		t, ok := cfg.Tenants[name]
		if !ok {
			return nil, fmt.Errorf("%s has no tenant %s%s (%s)", path, name, inEnvironment(cfg), tenantList(cfg))
		}
		return []target{{name, t, baseURLFor(baseURL, name)}}, nil
	}
	return []target{{"", cfg, baseURL}}, nil
}

// tenantList names a few of cfg's tenants, for messages.
func tenantList(cfg *extauth.Config) string {
	names := cfg.TenantNames()
	switch {
	case len(names) == 0:
		return "it has no tenants"
	case len(names) > 10:
		return fmt.Sprintf("it has %d tenants: %s, …", len(names), strings.Join(names[:10], ", "))
	}
	return "its tenants are " + strings.Join(names, ", ")
}

// sameAs reports whether tenant t has the environment's settings for p, so
// that the environment's problems with p are t's too.
func sameAs(t, env *extauth.Config, p extauth.Provider) bool {
	return reflect.DeepEqual(only(t, p), only(env, p))
}

// load reads the file for routes and metadata as the application does, so
// that any problem fails them; except that for one tenant only the
// problems that are the tenant's count: what it shows then does not depend
// on other tenants' settings.
func (c *cli) load(path, env, tenant string) (*extauth.Config, error) {
	if tenant == "" {
		return extauth.LoadConfig(path, c.configOptions(env)...)
	}
	cfg, problems, err := extauth.InspectConfig(path, c.configOptions(env)...)
	if err != nil {
		return nil, err
	}
	t := cfg.Tenants[tenant]
	var its []extauth.Problem
	for _, p := range problems {
		if p.Tenant == tenant || p.Tenant == "" && (p.Provider == "" || t == nil || sameAs(t, cfg, p.Provider)) {
			its = append(its, p)
		}
	}
	if len(its) > 0 {
		return nil, &extauth.ValidationError{Problems: its}
	}
	return cfg, nil
}
