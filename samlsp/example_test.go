package samlsp_test

import (
	"log"
	"net/http"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/samlsp"
)

// ExampleOptions configures the SAML strategy for an older IdP that still
// signs with RSA-SHA1 and verifies only signatures inside the XML.
func ExampleOptions() {
	cfg, err := extauth.LoadConfig("config/secrets.yml")
	if err != nil {
		log.Fatal(err)
	}
	cookieKey := []byte("0123456789abcdef0123456789abcdef")
	onSuccess := func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {}

	auth, err := extauth.New(cfg, extauth.Options{
		BaseURL:   "https://app.example.org",
		CookieKey: cookieKey,
		OnSuccess: onSuccess,
		SAML: samlsp.Options{
			// The IdP signs with RSA-SHA1 and cannot move to RSA-SHA256 yet.
			AllowSHA1: true,
			// The IdP verifies only XML signatures: send AuthnRequests by POST.
			AuthnRequestBinding: samlsp.BindingPOST,
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer auth.Close()
}
