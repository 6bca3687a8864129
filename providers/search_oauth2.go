package providers

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/oauth2"
)

// GoogleIssuer is the issuer search_oauth2 signs in against unless
// search_oauth2_site overrides it.
const GoogleIssuer = "https://accounts.google.com"

// SearchOAuth2Options tunes the search_oauth2 strategy (Google accounts).
type SearchOAuth2Options struct {
	// OIDCOptions are the OpenID Connect tunables; Prompt is Google's
	// prompt (none, consent, select_account).
	OIDCOptions
	// HostedDomain restricts sign-in to one Google Workspace domain: it is
	// sent as hd, which only preselects accounts, and the ID token's hd
	// claim must then equal it. "*" admits any Workspace account but no
	// consumer account.
	HostedDomain string
	// AccessType is "online" (the default) or "offline", which makes
	// Google issue a refresh token.
	AccessType string
}

// SearchOAuth2Config registers extauth with Google (search_oauth2_key,
// search_oauth2_secret, and search_oauth2_site to point at another issuer).
type SearchOAuth2Config struct {
	ClientID     string
	ClientSecret string `redact:"secret"`
	// Site is the issuer; default GoogleIssuer.
	Site    string
	Options SearchOAuth2Options
}

// NewSearchOAuth2 returns the search_oauth2 strategy: Google through the
// same OpenID Connect code as NewOIDC, so with discovery, PKCE S256, nonce
// and a verified ID token. The hd claim is kept in Identity.Raw.
func NewSearchOAuth2(c SearchOAuth2Config, env Env) (*OIDC, error) {
	issuer := c.Site
	if issuer == "" {
		issuer = GoogleIssuer
	}
	o := c.Options
	switch o.AccessType {
	case "", "online", "offline":
	default:
		return nil, fmt.Errorf("access type %q is not online or offline", o.AccessType)
	}
	for _, k := range []string{"hd", "access_type"} {
		if _, ok := o.AuthParams[k]; ok {
			return nil, fmt.Errorf("authorization parameter %q has its own field in SearchOAuth2Options", k)
		}
	}
	s, err := newOIDC("search_oauth2", OIDCConfig{
		ClientID:     c.ClientID,
		ClientSecret: c.ClientSecret,
		Issuer:       issuer,
		Options:      o.OIDCOptions,
	}, env)
	if err != nil {
		return nil, err
	}
	if o.AccessType != "" {
		s.authParams = append(s.authParams, oauth2.SetAuthURLParam("access_type", o.AccessType))
	}
	if hd := o.HostedDomain; hd != "" {
		s.authParams = append(s.authParams, oauth2.SetAuthURLParam("hd", hd))
		s.check = func(c *idClaims) error { return checkHostedDomain(hd, c.HostedDomain) }
	}
	return s, nil
}

// checkHostedDomain enforces the hosted domain on the signed claim: Google
// documents the hd request parameter as a UI hint that users can strip.
func checkHostedDomain(want, got string) error {
	switch {
	case got == "":
		return NewError(CodeAccessDenied, "this account does not belong to the required domain",
			errors.New("id token: no hosted domain (hd) claim, a consumer account"))
	case want != "*" && !strings.EqualFold(want, got):
		return NewError(CodeAccessDenied, "this account does not belong to the required domain",
			fmt.Errorf("id token: hosted domain %.200q, required %q", got, want))
	}
	return nil
}
