package main

import (
	"net"
	"net/http"
	"net/url"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest"
)

// Development providers: extauthtest's fakes of the six providers, served
// by the demo itself under /dev/<provider>/, each registered with the
// demo's callback and logout URLs and showing its login or consent page.

// mountDevProviders serves the development providers under /dev/ on mux and
// returns their configuration. A non-empty samlIdPMetadata is a development
// SAML IdP served elsewhere, used instead of the one under /dev/saml.
// client, when set, is how the development providers reach the demo (its
// SAML metadata, back-channel logouts): a test's HTTPS demo needs its
// certificate trusted.
func mountDevProviders(mux *http.ServeMux, base, samlIdPMetadata string, client *http.Client) (*extauth.Config, error) {
	only := []extauth.Provider{extauth.Microblog, extauth.Socialnet, extauth.BlogOAuth2}
	// The SAML SP fetches the IdP metadata over plain HTTP only from a
	// loopback address, and an OpenID issuer must be HTTPS or plain HTTP
	// on loopback: those development providers are offered when the demo
	// runs there or on HTTPS.
	u, err := url.Parse(base)
	local := err == nil && (u.Scheme == "https" || isLoopback(u.Hostname()))
	if local {
		only = append(only, extauth.SearchOAuth2, extauth.OIDC)
		if samlIdPMetadata == "" {
			only = append(only, extauth.SAML)
		}
	}
	fakes, err := extauthtest.MountProviders(mux, base, "/dev/", extauthtest.ProvidersOptions{
		Only: only, Interactive: true, HTTPClient: client,
	})
	if err != nil {
		return nil, err
	}
	cfg := fakes.Config()
	if local && samlIdPMetadata != "" {
		cfg.SAML = extauth.SAMLConfig{SPEntityID: base + "/users/auth/saml/metadata", IdPMetadataURL: samlIdPMetadata}
	}
	return cfg, nil
}

func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}
