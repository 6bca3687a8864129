package main

import (
	"net"
	"net/http"
	"net/url"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest"
	"github.com/extauth/extauth/extauthtest/oidcop"
	"github.com/extauth/extauth/extauthtest/samlidp"
)

// Development providers: extauthtest's fakes of the six providers, served
// by the demo itself under /dev/<provider>/, each registered with the
// demo's callback and logout URLs and showing its login or consent page.
// Each development tenant has a SAML IdP and an OpenID provider of its own,
// served under /dev/ on the tenant's host.

// devTenant is one of the demo's development tenants: an organisation with
// its own identity provider and its own people.
type devTenant struct {
	org       string
	samlUser  samlidp.User
	oidcUsers []oidcop.User
}

// devTenants are served at a.localhost and b.localhost.
var devTenants = map[string]devTenant{
	"a": {
		org: "Alpha University",
		samlUser: samlidp.User{NameID: "grace@alpha.example", NameIDFormat: "urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress",
			Email: "grace@alpha.example", GivenName: "Grace", Surname: "Hopper", DisplayName: "Grace Hopper", UserName: "grace"},
		oidcUsers: []oidcop.User{
			{Sub: "alpha-1001", Email: "grace@alpha.example", EmailVerified: true, Name: "Grace Hopper", GivenName: "Grace", FamilyName: "Hopper", PreferredUsername: "grace"},
			{Sub: "alpha-1002", Email: "katherine@alpha.example", EmailVerified: true, Name: "Katherine Johnson", GivenName: "Katherine", FamilyName: "Johnson", PreferredUsername: "katherine"},
		},
	},
	"b": {
		org: "Beta Institute",
		samlUser: samlidp.User{NameID: "alan@beta.example", NameIDFormat: "urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress",
			Email: "alan@beta.example", GivenName: "Alan", Surname: "Turing", DisplayName: "Alan Turing", UserName: "alan"},
		oidcUsers: []oidcop.User{
			{Sub: "beta-2001", Email: "alan@beta.example", EmailVerified: true, Name: "Alan Turing", GivenName: "Alan", FamilyName: "Turing", PreferredUsername: "alan"},
			{Sub: "beta-2002", Email: "barbara@beta.example", EmailVerified: false, Name: "Barbara Liskov", GivenName: "Barbara", FamilyName: "Liskov", PreferredUsername: "barbara"},
		},
	},
}

// appName is what the development providers' consent pages call the demo.
const appName = "extauth demo"

// devProviders are the development providers the demo serves.
type devProviders struct {
	cfg *extauth.Config
	// fakes are the providers of each site, "" for the demo's own.
	fakes map[string]*extauthtest.Providers
	// tenantOf and tenantBase tell the tenants apart; nil without tenants.
	tenantOf   func(*http.Request) (string, error)
	tenantBase func(string) string
	// federation are the IdPs of the development federation, which the
	// tenant federationTenant signs in through.
	federation []*samlidp.IdP
}

// mountDevProviders serves the development providers under /dev/ on mux
// and returns their configuration. o.samlIdPMetadataURL, when set, is a
// SAML IdP served elsewhere, used instead of the one under /dev/saml.
// o.httpClient, when set, is how the development providers reach the demo
// (its SAML metadata, back-channel logouts): a test's HTTPS demo needs its
// certificate trusted.
func mountDevProviders(mux *http.ServeMux, base string, o serverOptions) (*devProviders, error) {
	only := []extauth.Provider{extauth.Microblog, extauth.Socialnet, extauth.BlogOAuth2}
	// The SAML SP fetches the IdP metadata over plain HTTP only from a
	// loopback host, and an OpenID issuer must be HTTPS or plain HTTP on
	// a loopback host: those development providers are offered when the
	// demo runs there or on HTTPS.
	u, err := url.Parse(base)
	local := err == nil && (u.Scheme == "https" || isLoopback(u.Hostname()))
	if local {
		only = append(only, extauth.SearchOAuth2, extauth.OIDC)
		if o.samlIdPMetadataURL == "" {
			only = append(only, extauth.SAML)
		}
	}
	fakes, err := extauthtest.MountProviders(mux, base, "/dev/", extauthtest.ProvidersOptions{
		Only: only, Interactive: true, HTTPClient: o.httpClient, OIDCHighAssurance: o.oidcHighAssurance, OIDCFAPI2: o.oidcFAPI2, AppName: appName,
	})
	if err != nil {
		return nil, err
	}
	dev := &devProviders{cfg: fakes.Config(), fakes: map[string]*extauthtest.Providers{"": fakes}}
	allowStepUp(dev.cfg)
	if local && o.samlIdPMetadataURL != "" {
		dev.cfg.SAML = extauth.SAMLConfig{SPEntityID: base + "/users/auth/saml/metadata", IdPMetadataURL: o.samlIdPMetadataURL}
	}
	// Tenants live on subdomains of localhost, which only a demo on a
	// loopback host over plain HTTP can serve without a certificate of
	// its own.
	if !local || u.Scheme != "http" || !isLoopback(u.Hostname()) {
		return dev, nil
	}
	dev.tenantOf, dev.tenantBase = localhostTenants(base)
	dev.cfg.Tenants = map[string]*extauth.Config{}
	for name, t := range devTenants {
		// Each tenant's fakes are registered for the tenant's own
		// callback URLs, and served on its host only: a.localhost/dev/saml
		// is tenant a's IdP, where the pattern's host wins over the
		// demo's own /dev/saml.
		tmux := http.NewServeMux()
		tenantBase := dev.tenantBase(name)
		samlUser := t.samlUser
		tf, err := extauthtest.MountProviders(tmux, tenantBase, "/dev/", extauthtest.ProvidersOptions{
			Only: []extauth.Provider{extauth.SAML, extauth.OIDC}, Interactive: true, HTTPClient: o.httpClient, AppName: appName,
			SAMLUser: &samlUser, OIDCUsers: t.oidcUsers, OIDCHighAssurance: o.oidcHighAssurance, OIDCFAPI2: o.oidcFAPI2,
		})
		if err != nil {
			dev.close()
			return nil, err
		}
		mux.Handle(name+".localhost/dev/", tmux)
		dev.fakes[name] = tf
		dev.cfg.Tenants[name] = tf.Config()
		allowStepUp(dev.cfg.Tenants[name])
	}
	fmux := http.NewServeMux()
	fcfg, idps, err := mountDevFederation(fmux, dev.tenantBase(federationTenant), o.httpClient)
	if err != nil {
		dev.close()
		return nil, err
	}
	mux.Handle(federationTenant+".localhost/dev/", fmux)
	dev.cfg.Tenants[federationTenant] = fcfg
	dev.federation = idps
	return dev, nil
}

// close stops the development providers.
func (d *devProviders) close() {
	for _, f := range d.fakes {
		f.Close()
	}
}

func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// The demo's assurance level "high", as its development providers know it:
// the fake OpenID provider asserts the first acr value asked for, the fake
// IdP the first class.
const (
	levelHigh = "high"
	acrHigh   = "urn:extauthtest:loa:high"
	classHigh = "https://refeds.org/profile/mfa"
)

// allowStepUp lets the development OpenID provider and SAML IdP take the
// options a step-up asks for, a level and a max_age, and maps the demo's
// level high to their values, as an operator's secrets file would
// (request_options, assurance_levels).
func allowStepUp(cfg *extauth.Config) {
	if cfg.OIDC.Configured() {
		cfg.OIDC.Additional.RequestOptions = []string{"login_hint", "prompt", "max_age", "level"}
		cfg.OIDC.Additional.AssuranceLevels = map[string][]string{levelHigh: {acrHigh}}
	}
	if cfg.SAML.Configured() {
		cfg.SAML.Additional.RequestOptions = []string{"ForceAuthn", "max_age", "level"}
		cfg.SAML.Additional.AssuranceLevels = map[string][]string{levelHigh: {classHigh}}
	}
}
