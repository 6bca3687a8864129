package enterprise

import (
	"crypto"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/extauth/extauth/extauthtest/oidcop"
)

// WorkspaceConfig sets the fake Google up.
type WorkspaceConfig struct {
	// URL is where it is served, for each of Google's hosts
	// (accounts.google.com, oauth2.googleapis.com,
	// openidconnect.googleapis.com, www.googleapis.com): their paths do
	// not meet.
	URL          string
	ClientID     string
	ClientSecret string
	RedirectURIs []string
	// Users are Google accounts: those with a HostedDomain are Workspace
	// accounts of that domain (the hd claim), the others consumer ones.
	Users       []oidcop.User
	AutoApprove bool
	Keys        []crypto.Signer
	Now         func() time.Time
}

// NewWorkspace returns a fake Google for Workspace accounts: Google's
// discovery document, its paths, ID tokens shaped as Google's (azp, hd
// for a Workspace account, no sid) and no end_session_endpoint. It is an
// *oidcop.OP with GoogleClaims, an http.Handler for URL.
func NewWorkspace(cfg WorkspaceConfig) (*oidcop.OP, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Host == "" || strings.Trim(u.Path, "/") != "" {
		return nil, fmt.Errorf("enterprise: URL %q is not a base URL", cfg.URL)
	}
	if len(cfg.Users) == 0 {
		cfg.Users = []oidcop.User{
			{Sub: "110248495921238986420", Email: "ada@example.com", EmailVerified: true, Name: "Ada Lovelace", GivenName: "Ada",
				FamilyName: "Lovelace", Picture: "https://lh3.googleusercontent.com/a/ada", HostedDomain: "example.com"},
			{Sub: "110248495921238986421", Email: "ada.lovelace@gmail.com", EmailVerified: true, Name: "Ada L.", GivenName: "Ada",
				FamilyName: "L.", Picture: "https://lh3.googleusercontent.com/a/adal"},
		}
	}
	base := strings.TrimSuffix(cfg.URL, "/")
	return oidcop.New(oidcop.Config{
		Issuer: base, ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, RedirectURIs: cfg.RedirectURIs,
		AutoApprove: cfg.AutoApprove, Keys: cfg.Keys, Now: cfg.Now, Users: cfg.Users,
		GoogleClaims: true, NoEndSession: true, NoIssParameter: true,
		DiscoveryCacheControl: "public, max-age=3600",
		Routes: map[oidcop.Endpoint]string{
			oidcop.Authorize: "/o/oauth2/v2/auth", oidcop.Token: "/token", oidcop.UserInfo: "/v1/userinfo",
			oidcop.JWKS: "/oauth2/v3/certs", oidcop.Revocation: "/revoke",
		},
		Document: googleDocument(base),
	})
}
