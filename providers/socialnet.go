package providers

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/extauth/extauth/internal/telemetry"
)

// DefaultGraphVersion is the Graph API version socialnet speaks unless
// SocialnetOptions.GraphVersion says otherwise.
const DefaultGraphVersion = "v21.0"

// The real hosts of socialnet: the login dialog and the Graph API.
const (
	DefaultSocialnetDialogSite = "https://www.facebook.com"
	DefaultSocialnetGraphSite  = "https://graph.facebook.com"
)

// SocialnetOptions are the tunables of the socialnet strategy.
type SocialnetOptions struct {
	// GraphVersion is the versioned path of the dialog and Graph calls
	// ("v21.0"); DefaultGraphVersion when empty. Graph versions expire
	// about two years after release, so hosts move it forward.
	GraphVersion string
	// Scopes are the permissions asked for; ["email"] when nil
	// (public_profile is always granted).
	Scopes []string
	// PKCE sends an S256 code challenge and its verifier. The provider
	// documents PKCE for manually built login flows but calls it in
	// testing, so it is off unless asked for.
	PKCE bool
}

// SocialnetConfig is the registration of the application with the social
// network (Facebook-style OAuth 2).
type SocialnetConfig struct {
	// Key and Secret are socialnet_key and socialnet_secret (the app ID and
	// app secret).
	Key    string
	Secret string `redact:"secret"`
	// Site is socialnet_site: one base for both the dialog and the Graph
	// API, for development and tests. Empty means the real hosts.
	Site    string
	Options SocialnetOptions
}

// Socialnet is the socialnet strategy: the OAuth 2 code flow through the
// login dialog, the code exchanged with the app secret, and the profile read
// from /me with appsecret_proof.
type Socialnet struct {
	cfg     SocialnetConfig
	dialog  *url.URL
	graph   *url.URL
	version string
	scopes  []string
	env     Env
}

var graphVersionRE = regexp.MustCompile(`^v[0-9]+\.[0-9]+$`)

// NewSocialnet returns the socialnet strategy.
func NewSocialnet(cfg SocialnetConfig, env Env) (*Socialnet, error) {
	if cfg.Key == "" || cfg.Secret == "" {
		return nil, NewError(CodeMisconfigured, "socialnet needs socialnet_key and socialnet_secret", nil)
	}
	version := cfg.Options.GraphVersion
	if version == "" {
		version = DefaultGraphVersion
	}
	if !graphVersionRE.MatchString(version) {
		return nil, NewError(CodeMisconfigured, `socialnet Graph API version must look like "v21.0"`, nil)
	}
	dialogSite, graphSite := DefaultSocialnetDialogSite, DefaultSocialnetGraphSite
	if cfg.Site != "" {
		dialogSite, graphSite = cfg.Site, cfg.Site
	}
	dialog, err1 := parseSite(dialogSite)
	graph, err2 := parseSite(graphSite)
	if err1 != nil || err2 != nil {
		return nil, NewError(CodeMisconfigured, "socialnet_site must be an absolute http(s) URL", nil)
	}
	if env.CallbackURL == "" {
		return nil, NewError(CodeMisconfigured, "socialnet needs a callback URL", nil)
	}
	if env.HTTPClient == nil {
		return nil, NewError(CodeMisconfigured, "socialnet needs an HTTP client", nil)
	}
	scopes := cfg.Options.Scopes
	if scopes == nil {
		scopes = []string{"email"}
	}
	return &Socialnet{cfg: cfg, dialog: dialog, graph: graph, version: version, scopes: scopes, env: env}, nil
}

func parseSite(s string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSuffix(s, "/"))
	if err != nil {
		return nil, err
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" {
		return nil, fmt.Errorf("not an absolute http(s) URL")
	}
	return u, nil
}

// Name returns "socialnet".
func (s *Socialnet) Name() string { return "socialnet" }

// DisplayName is Facebook for the default sites, else the host name of the
// dialog site.
func (s *Socialnet) DisplayName() string {
	if s.dialog.String() == DefaultSocialnetDialogSite {
		return "Facebook"
	}
	return s.dialog.Hostname()
}

func (s *Socialnet) endpoint(base *url.URL, path string) *url.URL {
	u := *base
	u.Path = strings.TrimSuffix(u.Path, "/") + "/" + s.version + path
	return &u
}

// Begin sends the browser to the login dialog.
func (s *Socialnet) Begin(_ context.Context, tx *Transaction) (string, error) {
	if tx.State == "" {
		return "", s.fail(NewError(CodeMisconfigured, "the transaction has no state", nil))
	}
	q := url.Values{
		"client_id":     {s.cfg.Key},
		"redirect_uri":  {s.env.CallbackURL},
		"state":         {tx.State},
		"response_type": {"code"},
		"scope":         {strings.Join(s.scopes, ",")},
	}
	if s.cfg.Options.PKCE {
		if tx.Verifier == "" {
			return "", s.fail(NewError(CodeMisconfigured, "the transaction has no PKCE verifier", nil))
		}
		sum := sha256.Sum256([]byte(tx.Verifier))
		q.Set("code_challenge", base64.RawURLEncoding.EncodeToString(sum[:]))
		q.Set("code_challenge_method", "S256")
	}
	u := s.endpoint(s.dialog, "/dialog/oauth")
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// Binding returns the callback's state.
func (s *Socialnet) Binding(r *http.Request) string { return r.FormValue("state") }

// Complete exchanges the code and reads the profile.
func (s *Socialnet) Complete(ctx context.Context, r *http.Request, tx *Transaction) (*Identity, error) {
	id, err := s.complete(ctx, r, tx)
	if err != nil {
		return nil, s.fail(err)
	}
	return id, nil
}

func (s *Socialnet) complete(ctx context.Context, r *http.Request, tx *Transaction) (*Identity, *Error) {
	want := tx.Binding
	if want == "" {
		want = tx.State
	}
	if st := r.FormValue("state"); want == "" || subtle.ConstantTimeCompare([]byte(st), []byte(want)) != 1 {
		return nil, NewError(CodeInvalidState, "the callback's state is not this sign-in's", nil)
	}
	if e := r.FormValue("error"); e != "" || r.FormValue("error_reason") != "" {
		switch {
		case e == "access_denied" || r.FormValue("error_reason") == "user_denied":
			return nil, NewError(CodeAccessDenied, "the user did not authorize the application", nil)
		case e == "server_error" || e == "temporarily_unavailable":
			return nil, NewError(CodeProviderUnavailable, "the provider could not complete the sign-in", nil)
		default:
			// The value is provider input: keep it out of Message, and
			// bounded in the cause.
			return nil, NewError(CodeInvalidResponse, "the provider returned an error", fmt.Errorf("error=%.64q", e))
		}
	}
	code := r.FormValue("code")
	if code == "" {
		return nil, NewError(CodeInvalidResponse, "the callback lacks a code", nil)
	}

	form := url.Values{
		"client_id":     {s.cfg.Key},
		"client_secret": {s.cfg.Secret},
		"redirect_uri":  {s.env.CallbackURL},
		"code":          {code},
	}
	if s.cfg.Options.PKCE {
		form.Set("code_verifier", tx.Verifier)
	}
	// POST keeps the secret and the code out of any URL (the documented GET
	// puts them in the query, where proxies log them).
	req, err := http.NewRequestWithContext(telemetry.WithEndpoint(ctx, telemetry.EndpointToken), http.MethodPost, s.endpoint(s.graph, "/oauth/access_token").String(), strings.NewReader(form.Encode()))
	if err != nil {
		return nil, NewError(CodeMisconfigured, "token: cannot build the request", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, body, perr := providerCall(s.env.HTTPClient, req, "token")
	if perr != nil {
		return nil, perr
	}
	if resp.StatusCode != http.StatusOK {
		return nil, graphError(resp.StatusCode, body, "token")
	}
	tok, perr := parseGraphToken(body, s.now())
	if perr != nil {
		return nil, perr
	}

	u := s.endpoint(s.graph, "/me")
	mac := hmac.New(sha256.New, []byte(s.cfg.Secret))
	mac.Write([]byte(tok.AccessToken))
	u.RawQuery = url.Values{
		"fields":          {"id,name,email,first_name,last_name,picture"},
		"appsecret_proof": {hex.EncodeToString(mac.Sum(nil))},
	}.Encode()
	req, err = http.NewRequestWithContext(telemetry.WithEndpoint(ctx, telemetry.EndpointUserInfo), http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, NewError(CodeMisconfigured, "profile: cannot build the request", err)
	}
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	req.Header.Set("Accept", "application/json")
	resp, body, perr = providerCall(s.env.HTTPClient, req, "profile")
	if perr != nil {
		return nil, perr
	}
	if resp.StatusCode != http.StatusOK {
		return nil, graphError(resp.StatusCode, body, "profile")
	}
	id, perr := socialnetIdentity(body)
	if perr != nil {
		return nil, perr
	}
	id.Tokens = tok
	return id, nil
}

func (s *Socialnet) now() time.Time {
	if s.env.Now != nil {
		return s.env.Now()
	}
	return time.Now()
}

// parseGraphToken reads the token answer strictly; expires_in counts from now.
func parseGraphToken(body []byte, now time.Time) (Tokens, *Error) {
	raw, err := decodeObject(body)
	if err != nil {
		return Tokens{}, NewError(CodeInvalidResponse, "token: not a JSON object", err)
	}
	f := newProfileFields(raw)
	t := Tokens{AccessToken: f.str("access_token"), TokenType: f.str("token_type")}
	if err := f.Err(); err != nil {
		return Tokens{}, NewError(CodeInvalidResponse, "token: a field has the wrong type", err)
	}
	if t.AccessToken == "" {
		return Tokens{}, NewError(CodeInvalidResponse, "token: no access_token", nil)
	}
	if t.TokenType != "" && !strings.EqualFold(t.TokenType, "bearer") {
		return Tokens{}, NewError(CodeInvalidResponse, "token: not a bearer token", fmt.Errorf("token_type %.32q", t.TokenType))
	}
	if v, ok := raw["expires_in"]; ok && v != nil {
		n, ok := v.(json.Number)
		secs, err := n.Int64()
		// Ten years bounds it well inside time.Duration.
		if !ok || err != nil || secs < 0 || secs > 10*365*24*3600 {
			return Tokens{}, NewError(CodeInvalidResponse, "token: expires_in is not a number of seconds", nil)
		}
		if secs > 0 {
			t.Expiry = now.Add(time.Duration(secs) * time.Second)
		}
	}
	return t, nil
}

func socialnetIdentity(body []byte) (*Identity, *Error) {
	raw, err := decodeObject(body)
	if err != nil {
		return nil, NewError(CodeInvalidResponse, "profile: not a JSON object", err)
	}
	f := newProfileFields(raw)
	id := &Identity{
		Provider:  "socialnet",
		UID:       f.str("id"),
		Name:      f.str("name"),
		FirstName: f.str("first_name"),
		LastName:  f.str("last_name"),
		Email:     f.str("email"),
		Image:     f.obj("picture").obj("data").str("url"),
		Raw:       raw,
	}
	if err := f.Err(); err != nil {
		return nil, NewError(CodeInvalidResponse, "profile: a field has the wrong type", err)
	}
	if id.UID == "" {
		return nil, NewError(CodeInvalidResponse, "profile: no id", nil)
	}
	// The Graph API says nothing about whether the address was confirmed,
	// so it is not reported as verified.
	id.EmailVerified = false
	return id, nil
}

// graphError reads a Graph API error answer:
// {"error":{"message","type","code","error_subcode"}}.
func graphError(status int, body []byte, what string) *Error {
	var e struct {
		Error struct {
			Type    string `json:"type"`
			Code    int    `json:"code"`
			Subcode int    `json:"error_subcode"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e) // a body that is not the Graph shape leaves zeros
	ge := e.Error
	// Codes only: the message is provider text and may quote our input.
	cause := fmt.Errorf("HTTP %d, Graph error code %d subcode %d type %.40q", status, ge.Code, ge.Subcode, ge.Type)
	switch {
	case status >= 500 || ge.Code == 2:
		return NewError(CodeProviderUnavailable, what+": provider failed", cause)
	case ge.Code == 4 || ge.Code == 17 || ge.Code == 32 || ge.Code == 613:
		return NewError(CodeProviderUnavailable, what+": provider rate limit reached", cause)
	case status == http.StatusUnauthorized,
		what == "token" && ge.Type == "OAuthException" && (ge.Code == 1 || ge.Code == 101),
		ge.Code == 100 && strings.Contains(ge.Message, "appsecret_proof"):
		return NewError(CodeInvalidCredentials, what+": the provider rejected the app's credentials", cause)
	case ge.Subcode == 36009:
		return NewError(CodeReplayed, what+": the authorization code was already used", cause)
	case ge.Code == 191:
		return NewError(CodeMisconfigured, what+": the callback URL is not registered with the provider", cause)
	default:
		return NewError(CodeInvalidResponse, what+": the provider refused the request", cause)
	}
}

func (s *Socialnet) fail(e *Error) *Error {
	out := *e
	out.Provider = "socialnet"
	if s.env.Logger != nil {
		s.env.Logger.Debug("socialnet sign-in step failed", "code", string(out.Code), "reason", out.Message)
	}
	return &out
}
