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

	jose "github.com/go-jose/go-jose/v4"

	"github.com/extauth/extauth/internal/pemdiag"
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

// encEntry is one entry of the encryption half of a key in the client's
// JWKS: its kid and the key management algorithm it is published for.
type encEntry struct{ kid, alg string }

// encEntries returns the entries the encryption half of k is published
// under, one per algorithm in algs (each with its alg, since providers
// such as Keycloak pick a client's encryption key by algorithm and take
// an RSA key without alg for an RS256 signing key), the first under
// encKid and each other under encKid-<alg>, so that a provider that
// indexes the set by kid keeps them all; a single entry without alg when
// algs is empty.
func (k *clientKey) encEntries(algs []string) []encEntry {
	if len(algs) == 0 {
		return []encEntry{{kid: k.encKid}}
	}
	out := make([]encEntry, len(algs))
	for i, a := range algs {
		out[i] = encEntry{kid: k.encKid, alg: a}
		if i > 0 {
			out[i].kid = k.encKid + "-" + a
		}
	}
	return out
}

// encAlgs are the key management algorithms the client registered
// encryption with, the ID token's first, each once.
func encAlgs(o OIDCOptions) []string {
	var out []string
	for _, a := range []string{o.IDTokenEncryption.Alg, o.UserInfoEncryption.Alg} {
		if a != "" && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// ParseOIDCPrivateKey parses a client private key from PEM: PKCS #8, or
// PKCS #1 for RSA, or SEC 1 for EC, unencrypted. The key must be RSA of at
// least 2048 bits or EC on P-256. The error is fixed text that never
// quotes the input.
func ParseOIDCPrivateKey(text string) (crypto.Signer, error) {
	block, _ := pem.Decode([]byte(text))
	if block == nil {
		if r := pemdiag.BodyProblem(text); r != "" {
			return nil, errors.New(r)
		}
		return nil, errors.New("must be a PEM block of type PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY" + pemdiag.Cause(text))
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

// OIDCKey is one of an OpenID Connect client's private keys as the oidc
// strategy uses it, for extauth check to show: every key decrypts; the
// one of private_key alone signs and is published for encryption.
type OIDCKey struct {
	// Setting is the entry that holds it: oidc_additional_settings.
	// private_key, private_key_new or private_key_old.
	Setting string
	// Type is "RSA 2048" (the size in bits) or "EC P-256".
	Type string
	// KID and EncKID are the key IDs of its signing and encryption
	// halves, derived from its RFC 7638 thumbprint.
	KID, EncKID string
	// Signs: client assertions and request objects are signed with it.
	Signs bool
	// Published lists the halves the JWKS route publishes: "sig", and
	// "enc" for the key that signs.
	Published []string
	// Encryption lists the entries of the key's encryption half in the
	// JWKS, for the key that signs (empty for the others): one for each
	// algorithm encryption is registered with (the ID token's first),
	// the first under EncKID and each other under EncKID-<alg>; one
	// without an algorithm when none is registered.
	Encryption []OIDCPublishedKey
}

// OIDCPublishedKey is an entry of the client's JWKS: its key ID and the
// algorithm (alg) it is published for, empty for none.
type OIDCPublishedKey struct {
	KID, Alg string
}

// roleKey is a client key with the role its setting gives it.
type roleKey struct {
	key     *clientKey
	setting string
	signs   bool
}

// clientKeys parses the client's keys in the order the strategy uses
// them, private_key first, then private_key_new and private_key_old, with
// the warnings a start-up logs: a next or retiring key that is the current
// one is left out, as it holds nothing to rotate. c has passed
// CheckOIDCConfig.
func clientKeys(c OIDCConfig) ([]roleKey, []string, error) {
	var out []roleKey
	var warnings []string
	for i, e := range []struct{ setting, text string }{
		{settingPrivateKey, c.PrivateKey}, {settingPrivateKeyNew, c.NextPrivateKey}, {settingPrivateKeyOld, c.OldPrivateKey},
	} {
		if e.text == "" {
			continue
		}
		k, err := newClientKey(e.text)
		if err != nil {
			return nil, nil, err
		}
		if i > 0 && len(out) > 0 && out[0].key.kid == k.kid {
			if i == 1 {
				warnings = append(warnings, e.setting+" holds the key of private_key: there is nothing to rotate; remove private_key_new")
			} else {
				warnings = append(warnings, e.setting+" holds the key of private_key: nothing retires; to promote private_key_new, "+
					"it becomes private_key, else remove private_key_old")
			}
			continue
		}
		out = append(out, roleKey{key: k, setting: e.setting, signs: i == 0})
	}
	return out, warnings, nil
}

// OIDCKeys returns the client keys of c as the oidc strategy uses them,
// and every warning the strategy logs at start-up: about the keys (a next
// or retiring key that is the current one), the assertions' audience, an
// unused client secret, and authorization parameters that are no setting.
// The error is CheckOIDCConfig's first problem.
func OIDCKeys(c OIDCConfig) ([]OIDCKey, []string, error) {
	if ps := CheckOIDCConfig(c); len(ps) > 0 {
		return nil, nil, ps[0]
	}
	keys, keyWarnings, err := clientKeys(c)
	if err != nil {
		return nil, nil, err
	}
	warnings := append(startupWarnings(c, c.profileOptions()), keyWarnings...)
	out := make([]OIDCKey, len(keys))
	for i, k := range keys {
		out[i] = OIDCKey{Setting: k.setting, Type: keyType(k.key), KID: k.key.kid, EncKID: k.key.encKid, Signs: k.signs, Published: []string{"sig"}}
		if k.signs {
			out[i].Published = append(out[i].Published, "enc")
			for _, e := range k.key.encEntries(encAlgs(c.profileOptions())) {
				out[i].Encryption = append(out[i].Encryption, OIDCPublishedKey{KID: e.kid, Alg: e.alg})
			}
		}
	}
	return out, warnings, nil
}

func keyType(k *clientKey) string {
	if r, ok := k.priv.(*rsa.PrivateKey); ok {
		return "RSA " + strconv.Itoa(r.N.BitLen())
	}
	return "EC P-256"
}

// jwks builds the client's public key set. Every key is published for
// signing, under its kid: the next one before it signs anything, the
// retiring one for what it signed before it retired. The key that signs
// is also published for encryption, once for each of algs (encEntries),
// and no other: a provider that reads the set encrypts to a key every
// instance of a rolling deployment holds (the next key is not on all of
// them yet), and moves off the retiring one, whose private half decrypts
// what a provider that has not read the set since still sends. The
// client's TLS certificates, for self_signed_tls_client_auth, come first.
// Only public halves are in it.
func jwks(keys []roleKey, certificates []jose.JSONWebKey, algs []string) ([]byte, error) {
	set := jose.JSONWebKeySet{Keys: certificates}
	if set.Keys == nil {
		set.Keys = []jose.JSONWebKey{}
	}
	for _, k := range keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.key.priv.Public(), KeyID: k.key.kid, Use: "sig"})
		if k.signs {
			for _, e := range k.key.encEntries(algs) {
				set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.key.priv.Public(), KeyID: e.kid, Algorithm: e.alg, Use: "enc"})
			}
		}
	}
	return json.Marshal(set)
}

// JWKS returns the client's public key set (RFC 7517) as the JWKS route
// serves it: the signing halves of OIDCConfig.PrivateKey, NextPrivateKey
// and OldPrivateKey, the encryption half of PrivateKey (with the alg of
// each algorithm encryption is registered with), never a private part.
// It is {"keys":[]} without keys.
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
	// NextPrivateKey) well before it signs, and a retiring one keeps
	// decrypting (as OldPrivateKey), so an hour of caching never leaves a
	// provider without a key it needs.
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
	case AuthMethodTLS, AuthMethodSelfSignedTLS:
		// RFC 8705 2: the certificate authenticates; the form names the
		// client.
		form.Set("client_id", s.clientID)
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

// endpointClient is the client of the provider's endpoints that take the
// client's credentials or tokens (d.tokenClient): the bounded client,
// under a transport that adds a fresh client assertion with the JWT
// methods and, under that, one that adds a DPoP proof to the requests
// whose context carries a key.
func (s *OIDC) endpointClient(d *discovered) *http.Client {
	rt := s.client.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	if d.method == AuthMethodSecretJWT || d.method == AuthMethodPrivateKeyJWT {
		rt = newAssertingTransport(rt, s, d)
	}
	// Always there: tokens bound to a key by an earlier configuration
	// still get their proofs.
	rt = &dpopTransport{next: rt, s: s}
	return &http.Client{Transport: rt, Jar: s.client.Jar, CheckRedirect: s.client.CheckRedirect, Timeout: s.client.Timeout}
}

// assertingTransport adds a fresh client assertion to every request to the
// token, pushed authorization request and revocation endpoints: x/oauth2
// has no option for it on refreshes, and a request sent again (for a DPoP
// nonce) needs a new one, since a provider takes each jti once.
type assertingTransport struct {
	next http.RoundTripper
	s    *OIDC
	d    *discovered
	// urls maps the endpoints, as a request's URL prints them, to their
	// URLs as discovery names them.
	urls map[string]string
}

func newAssertingTransport(next http.RoundTripper, s *OIDC, d *discovered) *assertingTransport {
	t := &assertingTransport{next: next, s: s, d: d, urls: map[string]string{}}
	for _, e := range []string{d.oauth.Endpoint.TokenURL, d.parURL, d.revocationURL} {
		if u, err := url.Parse(e); e != "" && err == nil {
			t.urls[u.String()] = e
		}
	}
	return t
}

func (t *assertingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	endpoint, ok := t.urls[r.URL.String()]
	if r.Method != http.MethodPost || !ok || r.Body == nil {
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
	if err := t.s.authenticate(t.d, endpoint, form, r.Header); err != nil {
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
	// With an assertion, the endpoint client adds it.
	if d.method == AuthMethodBasic || d.method == AuthMethodPost || tlsMethod(d.method) {
		if err := s.authenticate(d, endpoint, form, h); err != nil {
			return 0, nil, err
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return 0, nil, NewError(CodeMisconfigured, what+": bad URL", err)
	}
	req.Header = h
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := d.tokenClient.Do(req)
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
// tokenError does for the token endpoint, keeping only the standard
// fields of the body, which may echo what we sent: the error, and the
// error_description through describe, with sent kept out.
func endpointError(status int, body []byte, what, refused string, sent ...string) *Error {
	var e struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	json.Unmarshal(body, &e)
	cause := providerAnswer(what, status, e.Error, e.Description, sent...)
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
func (s *OIDC) authRequestParams(ctx context.Context, d *discovered, tx *Transaction) (url.Values, error) {
	conf := d.oauth
	conf.Endpoint.AuthURL = ""
	opts, err := s.authCodeOptions(ctx, d, tx)
	if err != nil {
		return nil, err
	}
	v, _ := url.ParseQuery(strings.TrimPrefix(conf.AuthCodeURL(tx.State, opts...), "?"))
	return v, nil
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
	// The claims parameter is a JSON object (OIDC Core 5.5), in a request
	// object as one: SPID and CIE providers read it there.
	if c, ok := claims["claims"].(string); ok {
		var obj map[string]any
		if json.Unmarshal([]byte(c), &obj) == nil {
			claims["claims"] = obj
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
		return "", endpointError(status, body, "pushed authorization request", "the provider refused the pushed authorization request", s.clientSecret)
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
	params, err := s.authRequestParams(ctx, d, tx)
	if err != nil {
		return "", err
	}
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
// the JWT methods, and with a DPoP proof of the key DPoP-bound tokens
// carry. Tokens another issuer issued, or that do not say which,
// are refused before any request, as TokenSource refuses them. A provider
// answers 200 also for a token it does not know, so revoking twice is no
// error.
func (s *OIDC) RevokeTokens(ctx context.Context, t Tokens) error {
	// Before any request, unless an Entra ID tenant's issuer needs the
	// discovery document to be told from another's.
	if s.entra == nil {
		if err := issuedBy(t, s.issuer); err != nil {
			return err
		}
	}
	d, err := s.provider(ctx)
	if err != nil {
		return err
	}
	if err := s.ownTokens(d, t); err != nil {
		return err
	}
	if d.revocationURL == "" {
		return NewError(CodeMisconfigured, "the provider cannot revoke tokens",
			fmt.Errorf("%w: discovery names no revocation_endpoint", ErrNoRevocation))
	}
	if t.RefreshToken == "" && t.AccessToken == "" {
		return NewError(CodeMisconfigured, "there is no token to revoke", errors.New("revocation: no token"))
	}
	key, err := tokensDPoPKey(t)
	if err != nil {
		return err
	}
	ctx = withDPoP(ctx, key)
	// Each token is revoked on its own: a provider that refuses one
	// (Keycloak refuses a confidential client's DPoP-bound refresh token)
	// still revokes the other, and the refusal is the answer.
	var refused error
	for _, tok := range []struct{ value, hint string }{{t.RefreshToken, "refresh_token"}, {t.AccessToken, "access_token"}} {
		if tok.value == "" {
			continue
		}
		form := url.Values{"token": {tok.value}, "token_type_hint": {tok.hint}}
		status, body, err := s.postForm(telemetry.WithEndpoint(ctx, telemetry.EndpointLogout), d, d.revocationURL, form, "revocation")
		if err != nil {
			return err
		}
		if status != http.StatusOK && refused == nil {
			refused = endpointError(status, body, "revocation", "the provider refused to revoke the tokens", s.clientSecret, tok.value)
		}
	}
	return refused
}
