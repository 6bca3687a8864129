package providers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/oauth2"

	"github.com/extauth/extauth/internal/telemetry"
)

// BlogOAuth2Config registers extauth with a WordPress site running WP OAuth
// Server (blog_oauth2_key, blog_oauth2_secret, blog_oauth2_site).
type BlogOAuth2Config struct {
	ClientID     string
	ClientSecret string `redact:"secret"`
	// Site is the WordPress base URL; the endpoints are Site+/oauth/authorize,
	// /oauth/token and /oauth/me.
	Site string
	// Scopes default to "basic".
	Scopes []string
}

// BlogOAuth2 signs users in with a self-hosted WordPress "WP OAuth Server":
// authorization code with state and PKCE S256, profile from /oauth/me.
type BlogOAuth2 struct {
	conf   oauth2.Config
	meURL  string
	client *http.Client
	// authPrefix is the authorization URL up to the per-sign-in parameters.
	authPrefix string
}

// Issuer returns what the strategy's sign-ins record as Tokens.Issuer: its
// token endpoint, since WP OAuth Server has no issuer identifier.
func (b *BlogOAuth2) Issuer() string { return b.conf.Endpoint.TokenURL }

// NewBlogOAuth2 returns the blog_oauth2 strategy.
func NewBlogOAuth2(c BlogOAuth2Config, env Env) (*BlogOAuth2, error) {
	if c.ClientID == "" || c.ClientSecret == "" {
		return nil, errors.New("blog_oauth2_key and blog_oauth2_secret are required")
	}
	site, err := siteURL(c.Site)
	if err != nil {
		return nil, fmt.Errorf("blog_oauth2_site: %w", err)
	}
	scopes := c.Scopes
	if len(scopes) == 0 {
		scopes = []string{"basic"}
	}
	s := &BlogOAuth2{
		conf: oauth2.Config{
			ClientID:     c.ClientID,
			ClientSecret: c.ClientSecret,
			Endpoint: oauth2.Endpoint{
				AuthURL:  site + "/oauth/authorize",
				TokenURL: site + "/oauth/token",
				// WP OAuth Server reads client credentials from the form.
				AuthStyle: oauth2.AuthStyleInParams,
			},
			RedirectURL: env.CallbackURL,
			Scopes:      scopes,
		},
		meURL:  site + "/oauth/me",
		client: env.HTTPClient,
	}
	s.authPrefix = authURLPrefix(&s.conf)
	return s, nil
}

// siteURL checks an absolute http(s) base URL and drops its trailing slash.
func siteURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", errors.New("must be an absolute http(s) URL without query, fragment or user")
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}

// Name returns "blog_oauth2".
func (b *BlogOAuth2) Name() string { return "blog_oauth2" }

// DisplayName is the host name of the blog site.
func (b *BlogOAuth2) DisplayName() string { return hostName(b.conf.Endpoint.AuthURL) }

// Begin returns the authorization URL with state and the PKCE challenge.
func (b *BlogOAuth2) Begin(_ context.Context, tx *Transaction) (string, error) {
	return pkceAuthURL(b.authPrefix, tx.State, tx.Verifier), nil
}

// Binding returns the state parameter.
func (b *BlogOAuth2) Binding(r *http.Request) string { return r.FormValue("state") }

// Complete exchanges the code (with the PKCE verifier from the transaction,
// never from the request) and reads the profile.
func (b *BlogOAuth2) Complete(ctx context.Context, r *http.Request, tx *Transaction) (*Identity, error) {
	if err := callbackError(r); err != nil {
		return nil, err
	}
	code := r.FormValue("code")
	if code == "" {
		return nil, NewError(CodeInvalidResponse, "the provider sent no authorization code", errors.New("callback without code"))
	}
	tok, err := exchange(ctx, &b.conf, b.client, code, tx.Verifier)
	if err != nil {
		return nil, err
	}
	me, err := getJSON(telemetry.WithEndpoint(ctx, telemetry.EndpointUserInfo), b.client, b.meURL, tok.AccessToken, "profile")
	if err != nil {
		return nil, err
	}
	uid := str(me, "ID")
	if uid == "" {
		return nil, NewError(CodeInvalidResponse, "the provider's profile has no user ID", errors.New("/oauth/me without ID"))
	}
	id := &Identity{
		UID:      uid,
		Email:    str(me, "user_email"),
		Name:     str(me, "display_name"),
		NickName: str(me, "user_login"),
		Image:    firstString(me, "avatar", "avatar_url"),
		Raw:      me,
		Tokens: Tokens{
			AccessToken:  tok.AccessToken,
			RefreshToken: tok.RefreshToken,
			TokenType:    tok.TokenType,
			Expiry:       tok.Expiry,
			Issuer:       b.Issuer(),
		},
	}
	if id.Name == "" {
		id.Name = id.NickName
	}
	return id, nil
}

func firstString(m map[string]any, keys ...string) string {
	for _, k := range keys {
		if s := str(m, k); s != "" {
			return s
		}
	}
	return ""
}
