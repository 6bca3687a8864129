package providers

import (
	"errors"
	"fmt"
	"net/http"

	"golang.org/x/oauth2"

	"github.com/extauth/extauth/internal/outbound"
)

// APIClienter is implemented by strategies whose tokens a host can call
// the provider's APIs with: APIClient returns a client that sends the
// tokens ts serves (the sign-in's tokens t, renewed) as the provider
// bound them.
type APIClienter interface {
	APIClient(t Tokens, ts oauth2.TokenSource) (*http.Client, error)
}

var _ APIClienter = (*OIDC)(nil)

// ErrInsecureAPIURL is wrapped by the error of a request of an API client
// to a plain http URL that is not on a loopback host: a token would cross
// the network in the clear.
var ErrInsecureAPIURL = errors.New("tokens are sent over https only (plain http only to a loopback host)")

// APIClient returns an HTTP client that calls resource servers with the
// tokens ts serves: each request gets the current access token (renewed
// by ts when it expires) and, for tokens bound to a DPoP key (t.DPoPKey),
// the DPoP scheme and a fresh proof with the token's hash, the resource
// server's nonce cached per origin and one retry when it asks for a new
// one (RFC 9449 7 and 9); other tokens travel as Bearer. Requests go
// through the strategy's bounded client (its time-out, its bound on
// response bodies, its TLS client certificate), follow no redirect (a 3xx
// comes back as it is: following it would hand the token to wherever it
// points) and only over https, or plain http to a loopback host. t must
// be this provider's tokens (t.Issuer), as for TokenSource.
func (s *OIDC) APIClient(t Tokens, ts oauth2.TokenSource) (*http.Client, error) {
	if err := s.ownTokens(s.disc.Load(), t); err != nil {
		return nil, err
	}
	if ts == nil {
		return nil, errors.New("APIClient: no token source")
	}
	key, err := tokensDPoPKey(t)
	if err != nil {
		return nil, err
	}
	next := s.client.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	return &http.Client{
		Transport: &apiTransport{next: &dpopTransport{next: next, s: s}, ts: ts, key: key},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}, nil
}

// apiTransport authorizes each request with the token source's current
// access token, as DPoP when the tokens are bound to a key.
type apiTransport struct {
	next http.RoundTripper
	ts   oauth2.TokenSource
	key  *dpopKey
}

func (t *apiTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	fail := func(err error) (*http.Response, error) {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, err
	}
	if !(r.URL.Scheme == "https" || r.URL.Scheme == "http" && outbound.IsLoopback(r.URL.Hostname())) {
		return fail(fmt.Errorf("%s: %w", outbound.Redact(r.URL), ErrInsecureAPIURL))
	}
	tok, err := t.ts.Token()
	if err != nil {
		return fail(err)
	}
	if err := checkTokenType(t.key, tok.TokenType); err != nil {
		return fail(err)
	}
	ctx := withDPoP(r.Context(), t.key)
	req := r.Clone(ctx)
	req.Header.Set("Authorization", authorization(ctx, tok.AccessToken))
	return t.next.RoundTrip(req)
}
