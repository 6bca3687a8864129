package providers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"regexp"

	"github.com/extauth/extauth/internal/outbound"
	"github.com/markbates/goth"
	"golang.org/x/oauth2"
)

// gothSessionKey is where the goth session lives in Transaction.Extra.
const gothSessionKey = "goth"

// maxGothSession bounds the marshalled goth session: it travels in the
// sealed transaction cookie, which must stay under 4 KB.
const maxGothSession = 2048

// EnvSetter is implemented by strategies built before extauth.New, those
// passed in Options.Extra, that need the environment New builds for every
// provider. New calls SetEnv once, before serving.
type EnvSetter interface {
	SetEnv(Env)
}

// GothStrategy mounts any goth.Provider behind the extauth routes, as
// /users/auth/<name> and /users/auth/<name>/callback where name is the
// provider's Name(). Hosts add it through extauth.Options.Extra.
//
// extauth, not goth, owns the sign-in's safety: the state is the
// transaction's (256 random bits, sealed in the browser's cookie, compared
// in constant time and used once), never a value from the request as in
// gothic; the goth session is kept inside that sealed transaction; and
// failures come back as *Error with the usual codes. goth only builds the
// authorize URL, exchanges the code and reads the profile.
//
// The goth provider must have been constructed with extauth's callback URL
// for it, BaseURL + "/users/auth/<name>/callback"; Begin refuses to start
// when the authorize URL names another. goth calls take no context, so
// Complete stops waiting when its context ends and the goth call finishes
// in the background, bounded by the HTTP client's time-out; see SetEnv for
// how that client is provided.
type GothStrategy struct {
	p   goth.Provider
	env Env
}

// Goth adapts p. Call SetEnv before use (extauth.New does this for the
// strategies in Options.Extra).
func Goth(p goth.Provider) *GothStrategy { return &GothStrategy{p: p} }

// SetEnv gives the strategy extauth's environment. When p is a pointer to
// a struct with an exported HTTPClient *http.Client field left nil, as
// every goth OAuth 2 provider has, SetEnv sets it to env.HTTPClient:
// otherwise goth falls back to http.DefaultClient, which never times out.
// A client the host set itself is left alone. Providers that ignore the
// field (goth's twitter) cannot be bounded this way.
func (g *GothStrategy) SetEnv(env Env) {
	g.env = env
	if env.HTTPClient != nil {
		injectHTTPClient(g.p, env.HTTPClient)
	}
}

func injectHTTPClient(p any, c *http.Client) bool {
	v := reflect.ValueOf(p)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return false
	}
	f := v.Elem().FieldByName("HTTPClient")
	if !f.IsValid() || !f.CanSet() || f.Type() != reflect.TypeFor[*http.Client]() || !f.IsNil() {
		return false
	}
	f.Set(reflect.ValueOf(c))
	return true
}

// Name returns the goth provider's name.
func (g *GothStrategy) Name() string { return g.p.Name() }

// Provider returns the adapted goth provider.
func (g *GothStrategy) Provider() goth.Provider { return g.p }

// Begin asks goth for the authorize URL with the transaction's state and
// keeps the goth session in the transaction.
func (g *GothStrategy) Begin(ctx context.Context, tx *Transaction) (string, error) {
	if tx.State == "" {
		return "", g.fail(NewError(CodeMisconfigured, "the transaction has no state", nil))
	}
	var sess goth.Session
	var authURL string
	// BeginAuth makes a request for OAuth 1.0a providers; it takes no
	// context, so wait for it only as long as ctx allows.
	err := runBounded(ctx, func() error {
		var err error
		if sess, err = g.p.BeginAuth(tx.State); err != nil {
			return err
		}
		authURL, err = sess.GetAuthURL()
		return err
	})
	if err != nil {
		return "", g.fail(gothError(err, "begin"))
	}
	u, err := url.Parse(authURL)
	if err != nil {
		return "", g.fail(NewError(CodeMisconfigured, "begin: the provider built an unusable authorize URL", nil))
	}
	q := u.Query()
	switch {
	case q.Get("state") == tx.State:
		// OAuth 2: the state is the binding, the default.
	case q.Get("oauth_token") != "" && q.Get("state") == "":
		// OAuth 1.0a: the request token names the callback.
		tx.Binding = q.Get("oauth_token")
	default:
		return "", g.fail(NewError(CodeMisconfigured, "begin: the provider does not carry our state to its callback", nil))
	}
	if ru := q.Get("redirect_uri"); ru != "" && g.env.CallbackURL != "" && ru != g.env.CallbackURL {
		return "", g.fail(Errorf(CodeMisconfigured, "begin: the goth provider was built with another callback URL",
			"want %s", g.env.CallbackURL))
	}
	raw := sess.Marshal()
	if len(raw) > maxGothSession {
		return "", g.fail(Errorf(CodeMisconfigured, "begin: the goth session is too large for the transaction cookie", "%d bytes", len(raw)))
	}
	if tx.Extra == nil {
		tx.Extra = map[string]string{}
	}
	tx.Extra[gothSessionKey] = raw
	return authURL, nil
}

// Binding returns the callback's state, or for OAuth 1.0a providers its
// oauth_token (or denied, which carries the same request token).
func (g *GothStrategy) Binding(r *http.Request) string {
	if s := r.FormValue("state"); s != "" {
		return s
	}
	if t := r.FormValue("oauth_token"); t != "" {
		return t
	}
	return r.FormValue("denied")
}

// Complete lets goth exchange the code and read the user.
func (g *GothStrategy) Complete(ctx context.Context, r *http.Request, tx *Transaction) (*Identity, error) {
	id, err := g.complete(ctx, r, tx)
	if err != nil {
		return nil, g.fail(err)
	}
	return id, nil
}

func (g *GothStrategy) complete(ctx context.Context, r *http.Request, tx *Transaction) (*Identity, *Error) {
	if err := r.ParseForm(); err != nil {
		return nil, NewError(CodeInvalidResponse, "the callback is malformed", err)
	}
	switch e := r.Form.Get("error"); {
	case e == "access_denied" || r.Form.Get("denied") != "":
		return nil, NewError(CodeAccessDenied, "the user did not authorize the application", nil)
	case e != "":
		return nil, NewError(CodeInvalidResponse, "the provider returned an error", fmt.Errorf("error=%.64q", e))
	}
	raw := tx.Extra[gothSessionKey]
	if raw == "" {
		return nil, NewError(CodeInvalidState, "the sign-in has no goth session", nil)
	}
	sess, err := g.p.UnmarshalSession(raw)
	if err != nil {
		return nil, NewError(CodeInvalidState, "the sign-in's goth session is unreadable", nil)
	}
	// goth reads only what it needs (code, oauth_verifier); give it a copy
	// so nothing it does touches the request.
	params := url.Values{}
	for k, vs := range r.Form {
		params[k] = append([]string(nil), vs...)
	}
	var user goth.User
	var step string
	err = runBounded(ctx, func() error {
		step = "token"
		if _, err := sess.Authorize(g.p, params); err != nil {
			return err
		}
		step = "profile"
		var err error
		user, err = g.p.FetchUser(sess)
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, gothError(ctx.Err(), "sign-in")
		}
		return nil, gothError(err, step)
	}
	if user.UserID == "" {
		return nil, NewError(CodeInvalidResponse, "profile: the provider returned no user ID", nil)
	}
	return &Identity{
		Provider:    g.p.Name(),
		UID:         user.UserID,
		Email:       user.Email,
		Name:        user.Name,
		FirstName:   user.FirstName,
		LastName:    user.LastName,
		NickName:    user.NickName,
		Description: user.Description,
		Location:    user.Location,
		Image:       user.AvatarURL,
		// goth does not say whether an address was verified.
		EmailVerified: false,
		Tokens: Tokens{
			AccessToken:  user.AccessToken,
			RefreshToken: user.RefreshToken,
			Secret:       user.AccessTokenSecret,
			Expiry:       user.ExpiresAt,
			IDToken:      user.IDToken,
		},
		Raw: user.RawData,
	}, nil
}

// runBounded runs f, which takes no context, and returns when it returns or
// when ctx ends, whichever is first. f keeps running after ctx ends; the
// HTTP client's time-out bounds it, and its result is dropped.
func runBounded(ctx context.Context, f func() error) error {
	done := make(chan error, 1)
	go func() {
		defer func() {
			// A goth provider fed a shape it did not expect may panic
			// (type assertions on the session, nil maps); that is an
			// invalid answer, not a crash of the host.
			if p := recover(); p != nil {
				done <- fmt.Errorf("%w: %v", errGothPanic, p)
			}
		}()
		done <- f()
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

var errGothPanic = errors.New("goth provider panicked")

// urlQueryRE finds URL queries in free text. goth's errors are not ours:
// some providers put the access token in a URL and format its errors with
// %v, out of reach of scrubURLError.
var urlQueryRE = regexp.MustCompile(`(https?://[^\s?"'<>]*)\?[^\s"'<>]*`)

// gothError classifies an error from a goth call.
func gothError(err error, step string) *Error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		// Only the status, the OAuth error code and the description
		// through describe: the body may echo input.
		cause := providerAnswer(step, status, re.ErrorCode, re.ErrorDescription)
		switch {
		case status >= 500 || re.ErrorCode == "server_error" || re.ErrorCode == "temporarily_unavailable":
			return NewError(CodeProviderUnavailable, step+": provider failed", cause)
		case status == http.StatusUnauthorized || re.ErrorCode == "invalid_client" ||
			re.ErrorCode == "unauthorized_client" || re.ErrorCode == "incorrect_client_credentials":
			return NewError(CodeInvalidCredentials, step+": the provider rejected the application's credentials", cause)
		case re.ErrorCode == "invalid_grant" || re.ErrorCode == "bad_verification_code":
			return NewError(CodeReplayed, step+": the provider refused the code (already used, expired or not issued to us)", cause)
		case re.ErrorCode == "redirect_uri_mismatch":
			return NewError(CodeMisconfigured, step+": the callback URL is not the one registered", cause)
		default:
			return NewError(CodeInvalidResponse, step+": the provider refused the exchange", cause)
		}
	}
	if outbound.IsTimeout(err) || outbound.IsTooLarge(err) {
		return TransportError(err, step)
	}
	var ue *url.Error
	if errors.As(err, &ue) || errors.Is(err, context.Canceled) {
		return TransportError(err, step)
	}
	cause := errors.New(urlQueryRE.ReplaceAllString(err.Error(), "$1?[query removed]"))
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	if errors.As(err, &se) || errors.As(err, &te) {
		return NewError(CodeInvalidResponse, step+": the provider's answer is not the JSON expected", cause)
	}
	return NewError(CodeInvalidResponse, step+": the provider's answer could not be used", cause)
}

func (g *GothStrategy) fail(e *Error) *Error {
	out := *e
	out.Provider = g.p.Name()
	if g.env.Logger != nil {
		g.env.Logger.Debug("goth sign-in step failed", "code", string(out.Code), "reason", out.Message)
	}
	return &out
}
