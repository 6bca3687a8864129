package providers

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/extauth/extauth/internal/oauth1"
	"github.com/extauth/extauth/internal/telemetry"
)

// DefaultMicroblogSite is where microblog's API lives unless
// microblog_site says otherwise.
const DefaultMicroblogSite = "https://api.twitter.com"

// MicroblogConfig is the registration of the application with the
// microblogging service (Twitter-style OAuth 1.0a).
type MicroblogConfig struct {
	// Key and Secret are microblog_key and microblog_secret (the consumer
	// key and consumer secret).
	Key    string
	Secret string `redact:"secret"`
	// Site is microblog_site, the API base; DefaultMicroblogSite when empty.
	Site string
}

// Microblog is the microblog strategy: OAuth 1.0a, three-legged, HMAC-SHA1.
//
// Begin obtains a request token (with our callback, which the provider must
// confirm) and keeps its secret only in the sealed transaction; the
// request token itself is the transaction's binding. Complete exchanges it
// with the verifier for an access token and reads the account from
// 1.1/account/verify_credentials.json, e-mail included.
type Microblog struct {
	consumer *oauth1.Consumer
	site     *url.URL
	env      Env
}

// NewMicroblog returns the microblog strategy.
func NewMicroblog(cfg MicroblogConfig, env Env) (*Microblog, error) {
	if cfg.Key == "" || cfg.Secret == "" {
		return nil, NewError(CodeMisconfigured, "microblog needs microblog_key and microblog_secret", nil)
	}
	site := cfg.Site
	if site == "" {
		site = DefaultMicroblogSite
	}
	u, err := url.Parse(strings.TrimSuffix(site, "/"))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" {
		return nil, NewError(CodeMisconfigured, "microblog_site must be an absolute http(s) URL", nil)
	}
	if env.CallbackURL == "" {
		return nil, NewError(CodeMisconfigured, "microblog needs a callback URL", nil)
	}
	if env.HTTPClient == nil {
		return nil, NewError(CodeMisconfigured, "microblog needs an HTTP client", nil)
	}
	c := &oauth1.Consumer{Key: cfg.Key, Secret: cfg.Secret, Now: env.Now}
	return &Microblog{consumer: c, site: u, env: env}, nil
}

// Name returns "microblog".
func (m *Microblog) Name() string { return "microblog" }

// DisplayName is Twitter for the default site, else the site's host name.
func (m *Microblog) DisplayName() string {
	if m.site.String() == DefaultMicroblogSite {
		return "Twitter"
	}
	return m.site.Hostname()
}

func (m *Microblog) endpoint(path string) *url.URL {
	u := *m.site
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	return &u
}

// Begin asks for a request token and sends the browser to authenticate it.
func (m *Microblog) Begin(ctx context.Context, tx *Transaction) (string, error) {
	vals, perr := m.signedForm(ctx, http.MethodPost, m.endpoint("/oauth/request_token"), oauth1.Request{
		OAuth: map[string]string{"oauth_callback": m.env.CallbackURL},
	}, "request token")
	if perr != nil {
		return "", m.fail(perr)
	}
	token, secret := vals.Get("oauth_token"), vals.Get("oauth_token_secret")
	if token == "" || secret == "" {
		return "", m.fail(NewError(CodeInvalidResponse, "request token: answer lacks the token or its secret", nil))
	}
	// Without the confirmation the provider may be speaking OAuth 1.0
	// (no verifier), which is open to session fixation (RFC 5849 section
	// 2.1); refuse rather than carry on.
	if vals.Get("oauth_callback_confirmed") != "true" {
		return "", m.fail(NewError(CodeInvalidResponse, "request token: the provider did not confirm our callback", nil))
	}
	tx.Binding = token
	tx.TokenSecret = secret
	u := m.endpoint("/oauth/authenticate")
	u.RawQuery = url.Values{"oauth_token": {token}}.Encode()
	return u.String(), nil
}

// Binding returns the request token the callback names: oauth_token after
// consent, or the value of denied, which the provider sets to the same
// request token when the user refuses. Either way the routes find the
// transaction by it, so a refusal is reported as access_denied to the
// browser that started the sign-in, and as invalid_state to any other.
func (m *Microblog) Binding(r *http.Request) string {
	if t := r.FormValue("oauth_token"); t != "" {
		return t
	}
	return r.FormValue("denied")
}

// Complete exchanges the verifier for an access token and reads the account.
func (m *Microblog) Complete(ctx context.Context, r *http.Request, tx *Transaction) (*Identity, error) {
	id, err := m.complete(ctx, r, tx)
	if err != nil {
		return nil, m.fail(err)
	}
	return id, nil
}

func (m *Microblog) complete(ctx context.Context, r *http.Request, tx *Transaction) (*Identity, *Error) {
	if r.FormValue("denied") != "" {
		return nil, NewError(CodeAccessDenied, "the user did not authorize the application", nil)
	}
	token := r.FormValue("oauth_token")
	// The routes compared the binding already; a strategy that trusts no
	// caller compares again, in constant time.
	if token == "" || tx.Binding == "" || subtle.ConstantTimeCompare([]byte(token), []byte(tx.Binding)) != 1 {
		return nil, NewError(CodeInvalidState, "the callback's request token is not the one this sign-in was given", nil)
	}
	if tx.TokenSecret == "" {
		return nil, NewError(CodeInvalidState, "the sign-in lost its request token secret", nil)
	}
	verifier := r.FormValue("oauth_verifier")
	if verifier == "" {
		return nil, NewError(CodeInvalidResponse, "the callback lacks oauth_verifier", nil)
	}

	vals, perr := m.signedForm(ctx, http.MethodPost, m.endpoint("/oauth/access_token"), oauth1.Request{
		Token: token, TokenSecret: tx.TokenSecret,
		OAuth: map[string]string{"oauth_verifier": verifier},
	}, "access token")
	if perr != nil {
		return nil, perr
	}
	access, secret := vals.Get("oauth_token"), vals.Get("oauth_token_secret")
	if access == "" || secret == "" {
		return nil, NewError(CodeInvalidResponse, "access token: answer lacks the token or its secret", nil)
	}

	u := m.endpoint("/1.1/account/verify_credentials.json")
	u.RawQuery = url.Values{"include_email": {"true"}, "skip_status": {"true"}}.Encode()
	resp, body, perr := m.signed(telemetry.WithEndpoint(ctx, telemetry.EndpointUserInfo), http.MethodGet, u, oauth1.Request{Token: access, TokenSecret: secret}, "account")
	if perr != nil {
		return nil, perr
	}
	if resp.StatusCode != http.StatusOK {
		return nil, m.statusError(resp.StatusCode, body, "account")
	}
	id, perr := microblogIdentity(body)
	if perr != nil {
		return nil, perr
	}
	// The access token answer names the user too; a profile of someone
	// else means the provider (or something between us) is confused.
	if uid := vals.Get("user_id"); uid != "" && uid != id.UID {
		return nil, NewError(CodeInvalidResponse, "account: the profile is not the user who signed in", nil)
	}
	id.Tokens = Tokens{AccessToken: access, Secret: secret}
	return id, nil
}

func microblogIdentity(body []byte) (*Identity, *Error) {
	raw, err := decodeObject(body)
	if err != nil {
		return nil, NewError(CodeInvalidResponse, "account: not a JSON object", err)
	}
	f := newProfileFields(raw)
	id := &Identity{
		Provider:    "microblog",
		UID:         f.str("id_str"),
		NickName:    f.str("screen_name"),
		Name:        f.str("name"),
		Email:       f.str("email"),
		Image:       f.str("profile_image_url_https"),
		Description: f.str("description"),
		Location:    f.str("location"),
		Raw:         raw,
	}
	if err := f.Err(); err != nil {
		return nil, NewError(CodeInvalidResponse, "account: a profile field has the wrong type", err)
	}
	if id.UID == "" {
		return nil, NewError(CodeInvalidResponse, "account: the profile has no id_str", nil)
	}
	// The API returns an address only when the account's address is
	// verified (null otherwise), so an address present is a verified one.
	id.EmailVerified = id.Email != ""
	return id, nil
}

// signed sends a request signed for the consumer and the given token.
func (m *Microblog) signed(ctx context.Context, method string, u *url.URL, sr oauth1.Request, what string) (*http.Response, []byte, *Error) {
	sr.Method, sr.URL = method, u
	auth, err := m.consumer.Authorization(sr)
	if err != nil {
		return nil, nil, NewError(CodeMisconfigured, what+": cannot sign the request", err)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return nil, nil, NewError(CodeMisconfigured, what+": cannot build the request", err)
	}
	req.Header.Set("Authorization", auth)
	req.Header.Set("Accept", "application/json")
	return providerCall(m.env.HTTPClient, req, what)
}

// signedForm sends a signed request whose answer is a form-encoded body
// (the token endpoints).
func (m *Microblog) signedForm(ctx context.Context, method string, u *url.URL, sr oauth1.Request, what string) (url.Values, *Error) {
	resp, body, perr := m.signed(telemetry.WithEndpoint(ctx, telemetry.EndpointToken), method, u, sr, what)
	if perr != nil {
		return nil, perr
	}
	if resp.StatusCode != http.StatusOK {
		return nil, m.statusError(resp.StatusCode, body, what)
	}
	vals, err := url.ParseQuery(strings.TrimSpace(string(body)))
	if err != nil {
		return nil, NewError(CodeInvalidResponse, what+": not a form-encoded answer", err)
	}
	return vals, nil
}

// statusError reads the provider's refusal. Its JSON error codes are
// documented: 32 means our signature did not verify (a wrong consumer
// secret), 135 a clock too far off, 415 a callback URL not registered. A
// 401 without them at the access-token step is the provider refusing the
// request token or the verifier: already exchanged, expired or not the one
// it issued.
func (m *Microblog) statusError(status int, body []byte, what string) *Error {
	var e struct {
		Errors []struct {
			Code int `json:"code"`
		} `json:"errors"`
	}
	code := 0
	if json.Unmarshal(body, &e) == nil && len(e.Errors) > 0 {
		code = e.Errors[0].Code
	}
	cause := errors.New("HTTP " + http.StatusText(status))
	switch {
	case status >= 500:
		return statusError(status, what)
	case code == 32:
		return NewError(CodeInvalidCredentials, what+": the provider rejected the application's credentials", cause)
	case code == 135:
		return NewError(CodeMisconfigured, what+": the provider says our clock is off", cause)
	case code == 415:
		return NewError(CodeMisconfigured, what+": the callback URL is not registered with the provider", cause)
	case status == http.StatusUnauthorized && what == "access token":
		return NewError(CodeReplayed, what+": the provider refused the request token or verifier (already used, expired or not the one issued)", cause)
	case status == http.StatusUnauthorized:
		return NewError(CodeInvalidCredentials, what+": the provider refused the request", cause)
	default:
		return statusError(status, what)
	}
}

func (m *Microblog) fail(e *Error) *Error {
	out := *e
	out.Provider = "microblog"
	if m.env.Logger != nil {
		m.env.Logger.Debug("microblog sign-in step failed", "code", string(out.Code), "reason", out.Message)
	}
	return &out
}
