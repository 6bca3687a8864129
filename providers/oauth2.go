package providers

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/extauth/extauth/internal/outbound"
	"github.com/extauth/extauth/internal/telemetry"
	"golang.org/x/oauth2"
)

// callbackError turns the error parameters an OAuth 2 provider returns to
// the callback (RFC 6749 4.1.2.1) into an *Error, or nil when there are none.
func callbackError(r *http.Request) *Error {
	r.ParseForm()
	return responseError(r.Form)
}

// responseError is callbackError for the parameters of an authorization
// response.
func responseError(params url.Values) *Error {
	code := params.Get("error")
	if code == "" {
		return nil
	}
	cause := providerAnswer("authorization response", 0, code, params.Get("error_description"))
	if code == "access_denied" {
		return NewError(CodeAccessDenied, "you did not allow the sign-in", cause)
	}
	return NewError(CodeInvalidResponse, "the provider refused the sign-in", cause)
}

// exchange trades an authorization code for tokens with PKCE, through the
// bounded client, and classifies every failure.
func exchange(ctx context.Context, conf *oauth2.Config, client *http.Client, code, verifier string) (*oauth2.Token, error) {
	ctx = context.WithValue(telemetry.WithEndpoint(ctx, telemetry.EndpointToken), oauth2.HTTPClient, client)
	var opts []oauth2.AuthCodeOption
	if verifier != "" {
		opts = append(opts, oauth2.VerifierOption(verifier))
	}
	tok, err := conf.Exchange(ctx, code, opts...)
	if err == nil {
		if tok.AccessToken == "" {
			return nil, NewError(CodeInvalidResponse, "the provider sent no access token", errors.New("token response without access_token"))
		}
		return tok, nil
	}
	return nil, tokenError(err, "token request (authorization code)", "the provider refused the authorization code",
		conf.ClientSecret, code, verifier)
}

// tokenError classifies a failed token request, step, with refused as
// the message of a grant the provider turned down. sent are the values
// of the request that its answer must not carry into the log.
func tokenError(err error, step, refused string, sent ...string) *Error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		// The body of a token error may echo what we sent: only the
		// standard fields are kept, the description through describe.
		cause := providerAnswer(step, re.Response.StatusCode, re.ErrorCode, re.ErrorDescription, sent...)
		switch {
		case re.ErrorCode == "invalid_client" || re.ErrorCode == "unauthorized_client" || re.Response.StatusCode == http.StatusUnauthorized:
			return NewError(CodeInvalidCredentials, "the provider rejected this application's credentials", cause)
		case re.Response.StatusCode >= 500:
			return NewError(CodeProviderUnavailable, "the provider is unavailable", cause)
		default:
			return NewError(CodeInvalidResponse, refused, cause)
		}
	}
	if strings.Contains(err.Error(), "oauth2: cannot parse") || strings.Contains(err.Error(), "oauth2: server response missing access_token") {
		return NewError(CodeInvalidResponse, "the provider's token response is malformed", err)
	}
	return TransportError(err, step)
}

// get GETs url through client, with accessToken in the Authorization
// header (never in the query) when it is set, and returns the answer with
// its whole body, which the client bounds. A URL that makes no request is
// CodeMisconfigured; a transport failure is classified by TransportError.
func get(ctx context.Context, client *http.Client, url, accessToken, accept, what string) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, nil, NewError(CodeMisconfigured, what+": bad URL", err)
	}
	if accessToken != "" {
		req.Header.Set("Authorization", authorization(ctx, accessToken))
	}
	req.Header.Set("Accept", accept)
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, TransportError(err, what)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, TransportError(err, what)
	}
	return resp, body, nil
}

// getJSON fetches url with the access token and decodes the JSON object it
// returns.
func getJSON(ctx context.Context, client *http.Client, url, accessToken, what string) (map[string]any, error) {
	resp, body, err := get(ctx, client, url, accessToken, "application/json", what)
	if err != nil {
		return nil, err
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return nil, NewError(CodeInvalidResponse, what+": the provider refused the access token", fmt.Errorf("%s: HTTP %d", what, resp.StatusCode))
	case resp.StatusCode >= 500:
		return nil, NewError(CodeProviderUnavailable, what+": the provider is unavailable", fmt.Errorf("%s: HTTP %d", what, resp.StatusCode))
	case resp.StatusCode != http.StatusOK:
		return nil, NewError(CodeInvalidResponse, what+": unexpected answer", fmt.Errorf("%s: HTTP %d", what, resp.StatusCode))
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.UseNumber()
	var out map[string]any
	if err := dec.Decode(&out); err != nil || out == nil {
		return nil, NewError(CodeInvalidResponse, what+": malformed JSON", fmt.Errorf("%s: %v", what, errOrNull(err)))
	}
	return out, nil
}

func errOrNull(err error) error {
	if err == nil {
		return errors.New("not a JSON object")
	}
	return err
}

// str reads a string field, accepting JSON numbers too (IDs are sent either
// way); other types read as "".
func str(m map[string]any, key string) string {
	switch v := m[key].(type) {
	case string:
		return v
	case json.Number:
		return v.String()
	default:
		return ""
	}
}

// TransportError turns a failed outbound call into an *Error: time-outs
// become CodeTimeout, oversized bodies CodeInvalidResponse, anything else
// CodeProviderUnavailable. URL queries are scrubbed from the cause.
func TransportError(err error, what string) *Error {
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	cause := outbound.Scrub(err)
	switch {
	case outbound.IsTooLarge(err):
		return NewError(CodeInvalidResponse, what+": response too large", cause)
	case outbound.IsTimeout(err):
		return NewError(CodeTimeout, what+": the provider did not answer in time", cause)
	default:
		return NewError(CodeProviderUnavailable, what+": the provider is unreachable", cause)
	}
}

// authURLPrefix is conf's authorization URL with its fixed parameters,
// ready for pkceAuthURL to append what changes with each sign-in; it is what
// conf.AuthCodeURL builds, sorted once instead of on every request.
func authURLPrefix(conf *oauth2.Config) string {
	v := url.Values{"response_type": {"code"}, "client_id": {conf.ClientID}}
	if conf.RedirectURL != "" {
		v.Set("redirect_uri", conf.RedirectURL)
	}
	if len(conf.Scopes) > 0 {
		v.Set("scope", strings.Join(conf.Scopes, " "))
	}
	sep := "?"
	if strings.Contains(conf.Endpoint.AuthURL, "?") {
		sep = "&"
	}
	return conf.Endpoint.AuthURL + sep + v.Encode()
}

// pkceAuthURL appends state and the S256 challenge of verifier to prefix.
// Both are base64url, which needs no escaping in a query.
func pkceAuthURL(prefix, state, verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	var challenge [43]byte
	base64.RawURLEncoding.Encode(challenge[:], sum[:])
	var b strings.Builder
	b.Grow(len(prefix) + len(state) + 110)
	b.WriteString(prefix)
	b.WriteString("&state=")
	b.WriteString(state)
	b.WriteString("&code_challenge=")
	b.Write(challenge[:])
	b.WriteString("&code_challenge_method=S256")
	return b.String()
}
