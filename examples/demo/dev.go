package main

import (
	"net"
	"net/http"
	"net/url"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/internal/fakes/graph"
	"github.com/extauth/extauth/internal/fakes/oauth1"
	"github.com/extauth/extauth/internal/fakes/oidcop"
	"github.com/extauth/extauth/internal/fakes/samlidp"
	"github.com/extauth/extauth/internal/fakes/wpoauth"
)

// Development providers: the same fakes the tests use, served by the demo
// itself under /dev/<provider>/, each registered with the demo's callback
// URL and showing a consent page.
const (
	devClientID     = "extauth-demo"
	devClientSecret = "extauth-demo-secret"
)

// mountDevProviders serves the development providers under /dev/ on mux and
// returns their configuration. A non-empty samlIdPMetadata is a development
// SAML IdP served elsewhere, used instead of the one under /dev/saml.
// client, when set, is how the development OP reaches the demo for
// back-channel logouts (a test's HTTPS demo needs its certificate trusted).
func mountDevProviders(mux *http.ServeMux, base, samlIdPMetadata string, client *http.Client) (*extauth.Config, error) {
	cfg := &extauth.Config{}

	blog := wpoauth.New(devClientID, devClientSecret, base+"/users/auth/blog_oauth2/callback")
	blog.Prefix = "/dev/blog"
	mux.Handle(blog.Prefix+"/", blog)
	cfg.BlogOAuth2 = extauth.OAuthProvider{Key: devClientID, Secret: extauth.NewSecret(devClientSecret), Site: base + blog.Prefix}

	const mbPrefix = "/dev/microblog"
	mb := oauth1.New(oauth1.Options{ConsumerKey: devClientID, ConsumerSecret: devClientSecret, Prefix: mbPrefix,
		CallbackURLs: []string{base + "/users/auth/microblog/callback"}})
	mux.Handle(mbPrefix+"/", http.StripPrefix(mbPrefix, mb))
	cfg.Microblog = extauth.OAuthProvider{Key: devClientID, Secret: extauth.NewSecret(devClientSecret), Site: base + mbPrefix}

	const snPrefix = "/dev/socialnet"
	sn := graph.New(graph.Options{AppID: devClientID, AppSecret: devClientSecret, Prefix: snPrefix,
		RedirectURIs: []string{base + "/users/auth/socialnet/callback"}})
	mux.Handle(snPrefix+"/", http.StripPrefix(snPrefix, sn))
	cfg.Socialnet = extauth.OAuthProvider{Key: devClientID, Secret: extauth.NewSecret(devClientSecret), Site: base + snPrefix}

	// SAML: a crewjam IdP with a login page, which reads the demo's SP
	// metadata the first time it is asked to sign in. The SP fetches the
	// IdP metadata over plain HTTP only from a loopback address, so the
	// development IdP is offered when the demo runs there or on HTTPS.
	if u, err := url.Parse(base); err == nil && (u.Scheme == "https" || isLoopback(u.Hostname())) {
		cfg.SAML = extauth.SAMLConfig{SPEntityID: base + "/saml", IdPMetadataURL: samlIdPMetadata}
		if samlIdPMetadata == "" {
			idp, err := samlidp.New(samlidp.Options{BaseURL: base + "/dev/saml", SPMetadataURL: base + "/users/auth/saml/metadata"})
			if err != nil {
				return nil, err
			}
			mux.Handle("/dev/saml/", idp)
			cfg.SAML.IdPMetadataURL = idp.MetadataURL()
		}

		// OpenID Connect: a fake OP for oidc and another standing in for
		// Google. An issuer must be HTTPS, or plain HTTP on loopback, so
		// they share SAML's condition. ES256 keys are quick to make. The
		// oidc one is registered with the logout URIs extauth routes
		// prints: signing out of the demo ends its session too, and its
		// "sign out of every application" reaches the demo over the back
		// channel.
		op, err := oidcop.New(oidcop.Config{
			Issuer: base + "/dev/oidc", ClientID: devClientID, ClientSecret: devClientSecret,
			RedirectURIs: []string{base + "/users/auth/oidc/callback"}, Alg: "ES256",
			PostLogoutRedirectURIs: []string{base + "/users/auth/oidc/post_logout"},
			BackchannelLogoutURI:   base + "/users/auth/oidc/backchannel_logout",
			FrontchannelLogoutURI:  base + "/users/auth/oidc/frontchannel_logout",
			HTTPClient:             client,
		})
		if err != nil {
			return nil, err
		}
		mux.Handle("/dev/oidc/", op)
		cfg.OIDC = extauth.OIDCConfig{ClientID: devClientID, ClientSecret: extauth.NewSecret(devClientSecret), Issuer: op.Issuer()}

		google, err := oidcop.New(oidcop.Config{
			Issuer: base + "/dev/google", ClientID: devClientID, ClientSecret: devClientSecret,
			RedirectURIs: []string{base + "/users/auth/search_oauth2/callback"}, Alg: "ES256",
			AuthMethod: "client_secret_post",
			// Google offers no RP-initiated logout: signing out of a
			// search_oauth2 session is local.
			NoEndSession: true,
		})
		if err != nil {
			return nil, err
		}
		mux.Handle("/dev/google/", google)
		cfg.SearchOAuth2 = extauth.OAuthProvider{Key: devClientID, Secret: extauth.NewSecret(devClientSecret), Site: google.Issuer()}
	}
	return cfg, nil
}

func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}
