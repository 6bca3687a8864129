package main

import (
	"net/http"

	"github.com/extauth/extauth"
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

	return cfg, nil
}
