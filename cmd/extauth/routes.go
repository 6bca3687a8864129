package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/extauth/extauth"
)

// registerWhere says where each provider's console takes the callback URL,
// in lines short enough for a terminal. routes are all the listed routes,
// for SAML's metadata and logout URLs.
func registerWhere(p extauth.Provider, spEntityID string, routes []extauth.Route) string {
	switch p {
	case extauth.Microblog:
		return "as the app's callback URL in the developer portal"
	case extauth.Socialnet:
		return "under Valid OAuth Redirect URIs (host plus path)"
	case extauth.SearchOAuth2:
		lines := []string{"as an Authorized redirect URI of the OAuth client"}
		if logout := oidcLogoutLines(p, routes); len(logout) > 0 {
			lines = append(lines, "Google has no logout endpoints; an issuer set with search_oauth2_site may take these:")
			lines = append(lines, logout...)
		}
		return strings.Join(lines, "\n")
	case extauth.BlogOAuth2:
		return "as the client's Redirect URI in WP OAuth Server (OAuth Server > Clients)"
	case extauth.SAML:
		id := "named by saml_sp_entity_id"
		if spEntityID != "" {
			id = clean(spEntityID)
		}
		lines := []string{"at the IdP, as the Assertion Consumer Service URL (HTTP-POST binding)", "of the SP " + id}
		for _, rt := range routes {
			switch {
			case rt.Provider != extauth.SAML:
			case rt.Purpose == "logout":
				lines = append(lines, "with the Single Logout URL "+rt.URL)
			case rt.Purpose == "metadata":
				lines = append(lines, "or let the IdP read the SP metadata from "+rt.URL+" (extauth metadata prints it)")
			}
		}
		return strings.Join(lines, "\n")
	case extauth.OIDC:
		lines := []string{"as a redirect URI of the client"}
		if logout := oidcLogoutLines(p, routes); len(logout) > 0 {
			lines = append(lines, "and in the client's logout settings:")
			lines = append(lines, logout...)
		}
		if u := jwksURI(p, routes); u != "" {
			lines = append(lines, "with private_key_jwt, request objects or encrypted ID tokens, as the client's jwks_uri:",
				"  jwks_uri                              "+u)
		}
		return strings.Join(lines, "\n")
	}
	return "as the provider's redirect URI"
}

// logoutRegistration holds the OpenID Connect client metadata of p's logout
// routes (RP-Initiated, Back-Channel and Front-Channel Logout 1.0). Both
// session_required values are true: the provider then names the session
// (sid), which the Identity carries, so one logout ends one session.
type logoutRegistration struct {
	PostLogoutRedirectURI             string `json:"post_logout_redirect_uri,omitempty"`
	BackchannelLogoutURI              string `json:"backchannel_logout_uri,omitempty"`
	BackchannelLogoutSessionRequired  bool   `json:"backchannel_logout_session_required,omitempty"`
	FrontchannelLogoutURI             string `json:"frontchannel_logout_uri,omitempty"`
	FrontchannelLogoutSessionRequired bool   `json:"frontchannel_logout_session_required,omitempty"`
}

func oidcLogout(p extauth.Provider, routes []extauth.Route) *logoutRegistration {
	var reg logoutRegistration
	for _, rt := range routes {
		if rt.Provider != p {
			continue
		}
		switch rt.Purpose {
		case "post_logout":
			reg.PostLogoutRedirectURI = rt.URL
		case "backchannel_logout":
			reg.BackchannelLogoutURI, reg.BackchannelLogoutSessionRequired = rt.URL, true
		case "frontchannel_logout":
			reg.FrontchannelLogoutURI, reg.FrontchannelLogoutSessionRequired = rt.URL, true
		}
	}
	if reg == (logoutRegistration{}) {
		return nil
	}
	return &reg
}

// jwksURI is the URL of p's JWKS route, where the client's public keys
// are, or "" when p has none.
func jwksURI(p extauth.Provider, routes []extauth.Route) string {
	for _, rt := range routes {
		if rt.Provider == p && rt.Purpose == "jwks" {
			return rt.URL
		}
	}
	return ""
}

// oidcLogoutLines prints oidcLogout's values, one a line.
func oidcLogoutLines(p extauth.Provider, routes []extauth.Route) []string {
	reg := oidcLogout(p, routes)
	if reg == nil {
		return nil
	}
	return []string{
		"  post_logout_redirect_uri              " + reg.PostLogoutRedirectURI,
		"  backchannel_logout_uri                " + reg.BackchannelLogoutURI,
		"  backchannel_logout_session_required   true",
		"  frontchannel_logout_uri               " + reg.FrontchannelLogoutURI,
		"  frontchannel_logout_session_required  true",
	}
}

func (c *cli) routes(_ context.Context, args []string) int {
	f := c.newFlags("routes", "(-config FILE [-env ENV] [-tenant NAME | -all-tenants] | -all) -base-url URL [-path-prefix P] [-slug P=S]... [-json]",
		`Lists the routes extauth mounts for the providers a secrets file configures
and, for each provider, the exact callback URL to register with it. The
callback URL is the base URL plus /users/auth/<provider>/callback, never
derived from a request.

-all lists the six providers whether configured or not: the callback URL is
needed to register the application, before the provider hands out the key
and secret the file will hold.

For OpenID Connect it also prints the client's logout settings:
post_logout_redirect_uri, backchannel_logout_uri and frontchannel_logout_uri,
each with session_required true; and for oidc the jwks_uri that publishes
the client's public keys (private_key_jwt, request objects, encrypted ID
tokens: see oidc_additional_settings).

-tenant lists a tenant's routes (the providers of the environment's
configuration with the tenant's settings over it), -all-tenants every
tenant's. A tenant's base URL is not in the file: it is the tenant's name as
a subdomain of -base-url, as the application derives it by default, or
-base-url with the name for {tenant}, as in https://app.example.org/{tenant}.

It names the sign-in options each provider's authorize route takes per
request, as the file's request_options allow them (options allowed in code,
by Options, are not in the file).

-path-prefix and -slug say what the application's Options.PathPrefix and
Options.Slugs say, which the secrets file does not hold: -slug
microblog=twitter lists microblog's routes as /users/auth/twitter, as an
operator registered them for OmniAuth's twitter strategy.
`)
	configPath := f.String("config", "", "the secrets file")
	env := f.String("env", "", envHelp)
	tf := addTenantFlags(f, true)
	all := f.Bool("all", false, "list every built-in provider, configured or not")
	baseURL := f.String("base-url", "", "the application's external base URL, e.g. https://app.example.org; for tenants, {tenant} stands for the name (required)")
	asJSON := f.Bool("json", false, "print JSON for scripts")
	var lay routeLayout
	f.StringVar(&lay.prefix, "path-prefix", "", "where the application mounts the routes, Options.PathPrefix (default /users/auth/)")
	f.Func("slug", "a provider renamed in its routes, as Options.Slugs does: provider=slug (repeatable)", func(v string) error {
		p, slug, ok := strings.Cut(v, "=")
		if !ok || p == "" || slug == "" {
			return errors.New("want provider=slug, e.g. microblog=twitter")
		}
		if lay.slugs == nil {
			lay.slugs = map[extauth.Provider]string{}
		}
		lay.slugs[extauth.Provider(p)] = slug
		return nil
	})
	if done, code := f.parse(args); done {
		return code
	}
	switch {
	case *baseURL == "":
		return f.fail("-base-url is required: callback URLs derive from it")
	case *configPath == "" && !*all:
		return f.fail("give -config FILE, or -all for every provider")
	case *configPath != "" && *all:
		return f.fail("-config and -all exclude each other")
	case *env != "" && *configPath == "":
		return f.fail("-env applies to -config")
	case tf.given() && *configPath == "":
		return f.fail("-tenant and -all-tenants apply to -config")
	}
	if ok, code := checkBaseURL(f, *baseURL, tf); !ok {
		return code
	}
	if ok, code := tf.usage(f, *baseURL); !ok {
		return code
	}

	if *configPath == "" {
		return c.printRoutes([]target{{baseURL: *baseURL}}, extauth.BuiltinProviders(), lay, *asJSON, false)
	}
	cfg, err := c.load(*configPath, *env, *tf.name)
	if err != nil {
		return c.errorf("routes", "%s", describeConfigError(err))
	}
	targets, err := tf.targets(cfg, *configPath, *baseURL)
	if err != nil {
		return c.errorf("routes", "%v", err)
	}
	if !*tf.all && len(targets[0].cfg.Providers()) == 0 {
		if t := targets[0].tenant; t != "" {
			return c.errorf("routes", "tenant %s of %s configures no provider", t, *configPath)
		}
		return c.errorf("routes", "%s configures no provider%s", *configPath, inEnvironment(cfg))
	}
	return c.printRoutes(targets, nil, lay, *asJSON, *tf.all)
}

// routeLayout is what the application's Options say of its routes beyond the
// base URL.
type routeLayout struct {
	prefix string
	slugs  map[extauth.Provider]string
}

// routes lists ps's routes at baseURL under the layout, each named after its
// provider rather than its slug.
func (l routeLayout) routes(baseURL string, ps []extauth.Provider) ([]extauth.Route, error) {
	routes, err := extauth.Options{BaseURL: baseURL, PathPrefix: l.prefix, Slugs: l.slugs}.Routes(ps...)
	if err != nil {
		return nil, err
	}
	for i, rt := range routes {
		for p, slug := range l.slugs {
			if string(rt.Provider) == slug {
				routes[i].Provider = p
			}
		}
	}
	return routes, nil
}

// printRoutes prints the routes of each target, of its configured providers
// or, without a configuration, of ps.
func (c *cli) printRoutes(targets []target, ps []extauth.Provider, lay routeLayout, asJSON, many bool) int {
	var docs []routesDoc
	w := c.stdout
	for i, t := range targets {
		providers, entityID := ps, ""
		if t.cfg != nil {
			providers, entityID = t.cfg.Providers(), t.cfg.SAML.SPEntityID
		}
		routes, err := lay.routes(t.baseURL, providers)
		if err != nil {
			return c.errorf("routes", "%v", err)
		}
		if asJSON {
			docs = append(docs, newRoutesDoc(t, routes, entityID))
			continue
		}
		if i > 0 {
			fmt.Fprintln(w)
		}
		if many {
			fmt.Fprintf(w, "Tenant %s\n\n", t.tenant)
		}
		if len(providers) == 0 {
			fmt.Fprintf(w, "No provider is configured for tenant %s.\n", t.tenant)
			continue
		}
		tenant := ""
		if t.tenant != "" && !many {
			tenant = " for tenant " + t.tenant
		}
		fmt.Fprintf(w, "Routes under %s%s (authorize and callback answer GET and POST, also with a .json suffix):\n\n", strings.TrimSuffix(t.baseURL, "/"), tenant)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, rt := range routes {
			methods := strings.Join(rt.Methods, ", ")
			if methods == "" {
				// An extra route's handler checks its own methods.
				methods = "(its own)"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", rt.Provider, rt.Purpose, rt.Path, methods)
		}
		tw.Flush()
		if opts := fileSignInOptions(t.cfg); len(opts) > 0 {
			fmt.Fprintf(w, "\nSign-in options the authorize routes take (form fields; docs/after-sign-in.md):\n\n")
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			for _, o := range opts {
				fmt.Fprintf(tw, "  %s\t%s\n", o.Provider, cmp.Or(strings.Join(o.Options, ", "), "none"))
			}
			tw.Flush()
		}
		fmt.Fprintf(w, "\nCallback URL to register with each provider:\n")
		for _, rt := range routes {
			if rt.Purpose != "callback" {
				continue
			}
			where := strings.ReplaceAll(registerWhere(rt.Provider, entityID, routes), "\n", "\n    ")
			fmt.Fprintf(w, "\n  %s\n    %s\n    %s\n", rt.Provider, rt.URL, where)
		}
	}
	switch {
	case !asJSON:
		return exitOK
	case many:
		return writeJSON(w, struct {
			Tenants []routesDoc `json:"tenants"`
		}{docs})
	}
	return writeJSON(w, docs[0])
}

// routeJSON and registration are the -json shapes, with stable lowercase
// names for scripts.
type routeJSON struct {
	Provider string   `json:"provider"`
	Purpose  string   `json:"purpose"`
	Path     string   `json:"path"`
	Methods  []string `json:"methods,omitempty"`
	URL      string   `json:"url"`
}

type registration struct {
	Provider    string              `json:"provider"`
	CallbackURL string              `json:"callback_url"`
	Where       string              `json:"where"`
	Logout      *logoutRegistration `json:"logout,omitempty"`
	JWKSURI     string              `json:"jwks_uri,omitempty"`
}

// routesDoc is the -json document of one configuration.
type routesDoc struct {
	Tenant   string         `json:"tenant,omitempty"`
	BaseURL  string         `json:"base_url"`
	Routes   []routeJSON    `json:"routes"`
	Register []registration `json:"register"`
	// SignInOptions are the per-request options of the providers whose
	// secrets allow any.
	SignInOptions []signInOptions `json:"sign_in_options,omitempty"`
}

func newRoutesDoc(t target, routes []extauth.Route, entityID string) routesDoc {
	doc := routesDoc{Tenant: t.tenant, BaseURL: strings.TrimSuffix(t.baseURL, "/"), Routes: []routeJSON{}, Register: []registration{}}
	if t.cfg != nil {
		doc.SignInOptions = fileSignInOptions(t.cfg)
	}
	for _, rt := range routes {
		doc.Routes = append(doc.Routes, routeJSON{string(rt.Provider), rt.Purpose, rt.Path, rt.Methods, rt.URL})
		if rt.Purpose == "callback" {
			where := strings.ReplaceAll(registerWhere(rt.Provider, entityID, routes), "\n", "; ")
			doc.Register = append(doc.Register, registration{string(rt.Provider), rt.URL, where, oidcLogout(rt.Provider, routes), jwksURI(rt.Provider, routes)})
		}
	}
	return doc
}

func writeJSON(w io.Writer, v any) int {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return exitFail
	}
	return exitOK
}
