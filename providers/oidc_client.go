package providers

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
	"golang.org/x/oauth2"

	"github.com/extauth/extauth/internal/telemetry"
)

// The client authentication methods that sign a JWT (RFC 7523 2.2, OIDC
// Core 9).
const (
	// AuthMethodSecretJWT signs a client assertion with HMAC keyed with the
	// client secret.
	AuthMethodSecretJWT = "client_secret_jwt"
	// AuthMethodPrivateKeyJWT signs a client assertion with the client's
	// private key (OIDCConfig.PrivateKey), whose public half the provider
	// reads from the client's JWKS route. No secret is shared.
	AuthMethodPrivateKeyJWT = "private_key_jwt"
)

// The values of OIDCOptions.AssertionAudience.
const (
	// OIDCAudienceIssuer makes the issuer identifier, as a single string,
	// the aud of every client assertion: the default, as FAPI 2.0 and
	// draft-ietf-oauth-rfc7523bis require. No other server takes it for
	// its own, so an assertion that reaches an endpoint of another server
	// cannot be replayed at the provider.
	OIDCAudienceIssuer = "issuer"
	// OIDCAudienceTokenEndpoint makes the token endpoint's URL the aud (OIDC
	// Core 9), for providers that accept nothing else. It is open to
	// audience injection (Hosseyni, Küsters and Würtele, 2025) when
	// discovery places the token endpoint on another server than the one
	// an assertion is sent to, so an assertion for an endpoint on another
	// origin than the token endpoint's names that endpoint's own URL
	// instead (RFC 9126 2 has a PAR endpoint accept it), and the strategy
	// warns at start-up.
	OIDCAudienceTokenEndpoint = "token_endpoint"
)

// clientAssertionType is RFC 7523 2.2's client_assertion_type.
const clientAssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

const (
	// assertionLifetime is how long a client assertion is valid: it is
	// made for one request, so only the request's time and the provider's
	// clock skew matter.
	assertionLifetime = time.Minute
	// requestObjectLifetime is how long a request object is valid: the
	// browser carries it to the provider (FAPI 2.0 allows at most an
	// hour).
	requestObjectLifetime = 5 * time.Minute
	// maxFormBody bounds the token request the asserting transport reads
	// back: x/oauth2 builds it, so it is small.
	maxFormBody = 64 << 10
)

// clientKey is one of the client's private keys and the key IDs it is
// published under: one for signing, one for encryption, both derived from
// its RFC 7638 thumbprint, so they are the same on every instance and
// after every restart.
type clientKey struct {
	priv   crypto.Signer
	kid    string
	encKid string
}

// ParseOIDCPrivateKey parses a client private key from PEM: PKCS #8, or
// PKCS #1 for RSA, or SEC 1 for EC, unencrypted. The key must be RSA of at
// least 2048 bits or EC on P-256. The error is fixed text that never
// quotes the input.
func ParseOIDCPrivateKey(text string) (crypto.Signer, error) {
	block, _ := pem.Decode([]byte(text))
	if block == nil {
		return nil, errors.New("must be a PEM block of type PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY")
	}
	if _, ok := block.Headers["Proc-Type"]; ok {
		return nil, errors.New("is encrypted; give the key unencrypted")
	}
	var key any
	var err error
	switch block.Type {
	case "PRIVATE KEY":
		if key, err = x509.ParsePKCS8PrivateKey(block.Bytes); err != nil {
			return nil, errors.New("does not parse as a PKCS #8 private key")
		}
	case "RSA PRIVATE KEY":
		if key, err = x509.ParsePKCS1PrivateKey(block.Bytes); err != nil {
			return nil, errors.New("does not parse as a PKCS #1 RSA private key")
		}
	case "EC PRIVATE KEY":
		if key, err = x509.ParseECPrivateKey(block.Bytes); err != nil {
			return nil, errors.New("does not parse as an EC private key")
		}
	case "ENCRYPTED PRIVATE KEY":
		return nil, errors.New("is encrypted; give the key unencrypted")
	case "CERTIFICATE", "PUBLIC KEY":
		return nil, errors.New("holds a " + strings.ToLower(block.Type) + ", not a private key")
	default:
		return nil, errors.New("must be a PEM block of type PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY")
	}
	switch k := key.(type) {
	case *rsa.PrivateKey:
		if n := k.N.BitLen(); n < minRSABits {
			return nil, fmt.Errorf("is a %d-bit RSA key; at least %d bits are required", n, minRSABits)
		}
		return k, nil
	case *ecdsa.PrivateKey:
		if k.Curve != elliptic.P256() {
			return nil, fmt.Errorf("is an EC key on %s; only P-256 is accepted", k.Curve.Params().Name)
		}
		return k, nil
	}
	return nil, errors.New("must be an RSA or EC P-256 key")
}

func newClientKey(text string) (*clientKey, error) {
	priv, err := ParseOIDCPrivateKey(text)
	if err != nil {
		return nil, err
	}
	jwk := jose.JSONWebKey{Key: priv.Public()}
	sum, err := jwk.Thumbprint(crypto.SHA256)
	if err != nil {
		return nil, errors.New("has no JWK thumbprint")
	}
	kid := base64.RawURLEncoding.EncodeToString(sum)
	return &clientKey{priv: priv, kid: kid, encKid: kid + "-enc"}, nil
}

func (k *clientKey) isRSA() bool {
	_, ok := k.priv.(*rsa.PrivateKey)
	return ok
}

// jwks builds the client's public key set: each key twice, for signing
// and for encryption, under its two key IDs. Only public halves are in it.
func jwks(keys []*clientKey) ([]byte, error) {
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{}}
	for _, k := range keys {
		set.Keys = append(set.Keys,
			jose.JSONWebKey{Key: k.priv.Public(), KeyID: k.kid, Use: "sig"},
			jose.JSONWebKey{Key: k.priv.Public(), KeyID: k.encKid, Use: "enc"})
	}
	return json.Marshal(set)
}

// JWKS returns the client's public key set (RFC 7517) as the JWKS route
// serves it: the signing and encryption halves of OIDCConfig.PrivateKey
// and NextPrivateKey, never a private part. It is {"keys":[]} without
// keys.
func (s *OIDC) JWKS() []byte { return slices.Clone(s.jwks) }

// ExtraRoutes serves the oidc strategy's JWKS route, /users/auth/oidc/jwks,
// for providers that read the client's keys from its jwks_uri: to verify
// private_key_jwt assertions and request objects, and to encrypt ID tokens
// and UserInfo to it.
func (s *OIDC) ExtraRoutes() map[string]http.Handler { return s.routes }

func (s *OIDC) serveJWKS(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, http.StatusText(http.StatusMethodNotAllowed), http.StatusMethodNotAllowed)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/jwk-set+json")
	// Providers cache the set; a key rotated in is published (as
	// NextPrivateKey) well before it is used, so an hour of caching
	// never leaves a provider without a key it needs.
	h.Set("Cache-Control", "public, max-age=3600")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(s.jwks)))
	if r.Method == http.MethodGet {
		w.Write(s.jwks)
	}
}

// Algorithms the client signs with, by key type. PS256 is FAPI's choice
// for RSA; RS256 is what OIDC requires every provider to accept.
var (
	rsaSigningAlgs  = []string{"PS256", "RS256"}
	ecSigningAlgs   = []string{"ES256"}
	hmacSigningAlgs = []string{"HS256", "HS384", "HS512"}
)

// Algorithms of encrypted ID tokens and UserInfo (RFC 7518 4 and 5).
// RSA1_5 is left out on purpose (its padding is an oracle), and so are the
// symmetric key-wrapping algorithms, which would make the client secret a
// decryption key.
var (
	rsaKeyAlgs = []string{"RSA-OAEP", "RSA-OAEP-256"}
	ecKeyAlgs  = []string{"ECDH-ES", "ECDH-ES+A128KW", "ECDH-ES+A192KW", "ECDH-ES+A256KW"}
	// contentEncs are the content encryptions accepted.
	contentEncs = []string{"A128GCM", "A192GCM", "A256GCM", "A128CBC-HS256", "A192CBC-HS384", "A256CBC-HS512"}
)

// defaultContentEnc is the enc a registration implies when it names only
// the alg (OIDC Dynamic Client Registration 2).
const defaultContentEnc = "A128CBC-HS256"

// OIDCEncryption is the encryption registered for ID tokens or UserInfo
// (id_token_encrypted_response_alg and _enc, userinfo_encrypted_response_alg
// and _enc): the key management algorithm, RSA-OAEP or RSA-OAEP-256 for an
// RSA key, ECDH-ES or ECDH-ES+A128KW, +A192KW, +A256KW for an EC key; and
// the content encryption, A128GCM, A192GCM, A256GCM, A128CBC-HS256,
// A192CBC-HS384 or A256CBC-HS512 (A128CBC-HS256 when empty, as the
// registration's default is).
type OIDCEncryption struct {
	Alg string
	Enc string
}

// enabled reports whether encryption is registered.
func (e OIDCEncryption) enabled() bool { return e.Alg != "" }

func (e OIDCEncryption) withDefault() OIDCEncryption {
	if e.Alg != "" && e.Enc == "" {
		e.Enc = defaultContentEnc
	}
	return e
}

// signingAlg picks the algorithm the client signs with: want when set,
// else the first of the key's algorithms the provider advertises
// (advertised empty: none advertised, the first). ok is false when the
// provider advertises none of them.
func signingAlg(want string, candidates, advertised []string) (string, bool) {
	if want != "" {
		return want, len(advertised) == 0 || slices.Contains(advertised, want)
	}
	if len(advertised) == 0 {
		// RS256 is the one algorithm every provider must accept.
		if slices.Contains(candidates, "RS256") {
			return "RS256", true
		}
		return candidates[0], true
	}
	for _, a := range candidates {
		if slices.Contains(advertised, a) {
			return a, true
		}
	}
	return "", false
}

// keyAlgs returns the signing algorithms of k, or HMAC's for none.
func keyAlgs(k *clientKey) []string {
	switch {
	case k == nil:
		return hmacSigningAlgs
	case k.isRSA():
		return rsaSigningAlgs
	}
	return ecSigningAlgs
}

// newSigner returns a JWS signer of alg with k, or with the client secret
// for an HMAC algorithm.
func (s *OIDC) newSigner(alg string, typ jose.ContentType) (jose.Signer, error) {
	key := jose.SigningKey{Algorithm: jose.SignatureAlgorithm(alg)}
	if strings.HasPrefix(alg, "HS") {
		key.Key = []byte(s.clientSecret)
	} else {
		key.Key = jose.JSONWebKey{Key: s.keys[0].priv, KeyID: s.keys[0].kid}
	}
	return jose.NewSigner(key, (&jose.SignerOptions{}).WithType(typ))
}

// signClaims signs claims with signer, adding iat, exp and a unique jti.
func (s *OIDC) signClaims(signer jose.Signer, claims map[string]any, life time.Duration) (string, error) {
	now := s.now()
	claims["iat"] = now.Unix()
	claims["exp"] = now.Add(life).Unix()
	claims["jti"] = randomID()
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}

func randomID() string {
	var b [16]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// assertion returns a client assertion (RFC 7523 3) for a request to
// endpoint: iss and sub the client ID, aud as assertionAudience says, a
// minute of validity and a unique jti.
func (s *OIDC) assertion(d *discovered, endpoint string) (string, error) {
	return s.signClaims(d.assertionSigner, map[string]any{"iss": s.clientID, "sub": s.clientID, "aud": s.assertionAudience(d, endpoint)}, assertionLifetime)
}

// assertionAudience is the aud of a client assertion sent to endpoint: a
// single string that only the provider, or endpoint itself, takes for its
// own. Discovery may place the pushed authorization request and
// revocation endpoints on any host, and a tenant's provider may be
// hostile: an assertion whose aud named a server other than its recipient
// would let the recipient authenticate as this client there for the
// assertion's lifetime.
func (s *OIDC) assertionAudience(d *discovered, endpoint string) string {
	if s.opts.AssertionAudience != OIDCAudienceTokenEndpoint {
		return d.issuer
	}
	token := d.oauth.Endpoint.TokenURL
	if sameOrigin(endpoint, token) {
		return token
	}
	return endpoint
}

// sameOrigin reports whether two absolute URLs have one scheme, host and
// port (RFC 6454), a port left out being the scheme's.
func sameOrigin(a, b string) bool {
	origin := func(raw string) string {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			return ""
		}
		scheme, port := strings.ToLower(u.Scheme), u.Port()
		if port == "" {
			port = map[string]string{"https": "443", "http": "80"}[scheme]
		}
		return scheme + "://" + strings.ToLower(u.Hostname()) + ":" + port
	}
	o := origin(a)
	return o != "" && o == origin(b)
}

// authenticate adds the client's credentials to a form request to one of
// the provider's endpoints (token, pushed authorization requests,
// revocation) by the method the token endpoint uses.
func (s *OIDC) authenticate(d *discovered, endpoint string, form url.Values, h http.Header) error {
	switch d.method {
	case AuthMethodBasic:
		// RFC 6749 2.3.1: each half is form-urlencoded before base64.
		cred := url.QueryEscape(s.clientID) + ":" + url.QueryEscape(s.clientSecret)
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(cred)))
	case AuthMethodPost:
		form.Set("client_id", s.clientID)
		form.Set("client_secret", s.clientSecret)
	default:
		a, err := s.assertion(d, endpoint)
		if err != nil {
			return NewError(CodeMisconfigured, "the client assertion cannot be signed", fmt.Errorf("client assertion: %w", err))
		}
		form.Set("client_id", s.clientID)
		form.Set("client_assertion_type", clientAssertionType)
		form.Set("client_assertion", a)
	}
	return nil
}

// assertingTransport adds a fresh client assertion to every request x/oauth2
// makes to the token endpoint (code exchange and refresh), which has no
// option for it on refreshes.
type assertingTransport struct {
	next http.RoundTripper
	s    *OIDC
	d    *discovered
	// tokenURL is the token endpoint as a request's URL prints it.
	tokenURL string
}

func newAssertingTransport(next http.RoundTripper, s *OIDC, d *discovered) *assertingTransport {
	t := &assertingTransport{next: next, s: s, d: d, tokenURL: d.oauth.Endpoint.TokenURL}
	if u, err := url.Parse(t.tokenURL); err == nil {
		t.tokenURL = u.String()
	}
	return t
}

func (t *assertingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPost || r.URL.String() != t.tokenURL || r.Body == nil {
		return t.next.RoundTrip(r)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxFormBody+1))
	r.Body.Close()
	if err != nil {
		return nil, err
	}
	if len(body) > maxFormBody {
		return nil, errors.New("token request too large")
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, fmt.Errorf("token request: %w", err)
	}
	if err := t.s.authenticate(t.d, t.d.oauth.Endpoint.TokenURL, form, r.Header); err != nil {
		return nil, err
	}
	enc := form.Encode()
	req := r.Clone(r.Context())
	req.Body = io.NopCloser(strings.NewReader(enc))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(enc)), nil }
	req.ContentLength = int64(len(enc))
	return t.next.RoundTrip(req)
}

// postForm posts form to one of the provider's endpoints, authenticated as
// the client, through the bounded client, and returns the status and body.
func (s *OIDC) postForm(ctx context.Context, d *discovered, endpoint string, form url.Values, what string) (int, []byte, error) {
	h := http.Header{}
	if err := s.authenticate(d, endpoint, form, h); err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return 0, nil, NewError(CodeMisconfigured, what+": bad URL", err)
	}
	req.Header = h
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, TransportError(err, what)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, TransportError(err, what)
	}
	return resp.StatusCode, body, nil
}

// endpointError classifies an error answer of a provider's endpoint as
// tokenError does for the token endpoint, keeping only the standard error
// field of the body, which may echo what we sent.
func endpointError(status int, body []byte, what, refused string) *Error {
	var e struct {
		Error string `json:"error"`
	}
	json.Unmarshal(body, &e)
	cause := fmt.Errorf("%s: HTTP %d error=%.64q", what, status, e.Error)
	switch {
	case e.Error == "invalid_client" || e.Error == "unauthorized_client" || status == http.StatusUnauthorized:
		return NewError(CodeInvalidCredentials, "the provider rejected this application's credentials", cause)
	case status >= 500 || status == http.StatusTooManyRequests:
		return NewError(CodeProviderUnavailable, "the provider is unavailable", cause)
	}
	return NewError(CodeInvalidResponse, refused, cause)
}

// authRequestParams returns the parameters of the authorization request for tx,
// as x/oauth2 would put them in the authorization URL.
func (s *OIDC) authRequestParams(d *discovered, tx *Transaction) url.Values {
	conf := d.oauth
	conf.Endpoint.AuthURL = ""
	opts := make([]oauth2.AuthCodeOption, 0, 2+len(s.authParams))
	opts = append(opts, oauth2.S256ChallengeOption(tx.Verifier), oidc.Nonce(tx.Nonce))
	opts = append(opts, s.authParams...)
	v, _ := url.ParseQuery(strings.TrimPrefix(conf.AuthCodeURL(tx.State, opts...), "?"))
	return v
}

// requestObject signs params as a request object (RFC 9101 4): every
// parameter a claim, max_age a number, with iss the client, aud the
// issuer, and a short lifetime.
func (s *OIDC) requestObject(d *discovered, params url.Values) (string, error) {
	claims := make(map[string]any, len(params)+6)
	for k, v := range params {
		claims[k] = v[0]
	}
	if ma, ok := claims["max_age"].(string); ok {
		if n, err := strconv.ParseInt(ma, 10, 64); err == nil {
			claims["max_age"] = n
		}
	}
	claims["iss"] = s.clientID
	claims["aud"] = d.issuer
	claims["nbf"] = s.now().Unix()
	return s.signClaims(d.requestSigner, claims, requestObjectLifetime)
}

// pushedRequest is the answer of a pushed authorization request endpoint
// (RFC 9126 2.2).
type pushedRequest struct {
	RequestURI string `json:"request_uri"`
	ExpiresIn  int64  `json:"expires_in"`
}

// push sends the authorization request to the provider's pushed
// authorization request endpoint and returns the request_uri that stands
// for it.
func (s *OIDC) push(ctx context.Context, d *discovered, params url.Values) (string, error) {
	status, body, err := s.postForm(telemetry.WithEndpoint(ctx, telemetry.EndpointPAR), d, d.parURL, params, "pushed authorization request")
	if err != nil {
		return "", err
	}
	if status != http.StatusCreated && status != http.StatusOK {
		return "", endpointError(status, body, "pushed authorization request", "the provider refused the pushed authorization request")
	}
	var pr pushedRequest
	if err := json.Unmarshal(body, &pr); err != nil || pr.RequestURI == "" {
		return "", NewError(CodeInvalidResponse, "the provider's answer to the pushed authorization request is malformed",
			errors.New("pushed authorization request: no request_uri in the answer"))
	}
	return pr.RequestURI, nil
}

// beginHighAssurance builds the authorization URL of a sign-in that pushes
// its request (PAR) or signs it (a request object), or both.
func (s *OIDC) beginHighAssurance(ctx context.Context, d *discovered, tx *Transaction) (string, error) {
	params := s.authRequestParams(d, tx)
	front := params
	if d.requestSigner != nil {
		ro, err := s.requestObject(d, params)
		if err != nil {
			return "", NewError(CodeMisconfigured, "the request object cannot be signed", fmt.Errorf("request object: %w", err))
		}
		// OIDC Core 6.1: response_type, client_id and scope stay in the
		// OAuth 2.0 syntax too, equal to the object's.
		front = url.Values{"client_id": {s.clientID}, "response_type": params["response_type"], "scope": params["scope"], "request": {ro}}
	}
	if d.par {
		uri, err := s.push(ctx, d, front)
		if err != nil {
			return "", err
		}
		front = url.Values{"client_id": {s.clientID}, "request_uri": {uri}}
	}
	var b bytes.Buffer
	b.WriteString(d.oauth.Endpoint.AuthURL)
	if strings.Contains(d.oauth.Endpoint.AuthURL, "?") {
		b.WriteByte('&')
	} else {
		b.WriteByte('?')
	}
	b.WriteString(front.Encode())
	return b.String(), nil
}

var _ Revoker = (*OIDC)(nil)

// RevokeTokens revokes t's refresh token, then its access token, at the
// provider's revocation_endpoint (RFC 7009), each authenticated as the
// client is at the token endpoint: with a fresh client assertion under
// the JWT methods. Tokens another issuer issued, or that do not say which,
// are refused before any request, as TokenSource refuses them. A provider
// answers 200 also for a token it does not know, so revoking twice is no
// error.
func (s *OIDC) RevokeTokens(ctx context.Context, t Tokens) error {
	if err := issuedBy(t, s.issuer); err != nil {
		return err
	}
	d, err := s.provider(ctx)
	if err != nil {
		return err
	}
	if d.revocationURL == "" {
		return NewError(CodeMisconfigured, "the provider cannot revoke tokens",
			fmt.Errorf("%w: discovery names no revocation_endpoint", ErrNoRevocation))
	}
	if t.RefreshToken == "" && t.AccessToken == "" {
		return NewError(CodeMisconfigured, "there is no token to revoke", errors.New("revocation: no token"))
	}
	for _, tok := range []struct{ value, hint string }{{t.RefreshToken, "refresh_token"}, {t.AccessToken, "access_token"}} {
		if tok.value == "" {
			continue
		}
		form := url.Values{"token": {tok.value}, "token_type_hint": {tok.hint}}
		status, body, err := s.postForm(telemetry.WithEndpoint(ctx, telemetry.EndpointLogout), d, d.revocationURL, form, "revocation")
		if err != nil {
			return err
		}
		if status != http.StatusOK {
			return endpointError(status, body, "revocation", "the provider refused to revoke the tokens")
		}
	}
	return nil
}
