package main

import (
	"net/http"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/internal/fakes/graph"
	"github.com/extauth/extauth/internal/fakes/oauth1"
	"github.com/extauth/extauth/internal/fakes/wpoauth"
)

// Development providers: the same fakes the tests use, served by the demo
// itself under /dev/<provider>/, each registered with the demo's callback
// URL and showing a consent page.
const (
	devClientID     = "extauth-demo"
	devClientSecret = "extauth-demo-secret"
)

func mountDevProviders(mux *http.ServeMux, base string) (*extauth.Config, error) {
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

	return cfg, nil
}
