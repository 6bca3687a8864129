package providers

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/extauth/extauth/internal/challenge"
)

// DPoP (RFC 9449) binds a sign-in's tokens to a key pair the client holds:
// each request to the provider, and each call to a resource server with
// the access token, carries a proof signed with the key, so a token that
// leaks is of no use without it.
//
// The key is made per sign-in, not per instance. A key per instance would
// have to be shared by every instance behind a load balancer, would bind
// every user's tokens to one secret (one leak exposes every token stolen
// with it), and could never be rotated without breaking every stored
// token. A key per sign-in is born in Begin, travels to the callback in
// the sealed transaction cookie (any instance can finish the sign-in), and
// is handed to the host with the tokens (Tokens.DPoPKey), so a refresh or
// an API call months later, on any instance, uses the key the tokens are
// bound to. Its leak exposes that sign-in's tokens only.

// DPoP signing algorithms (dpop_signing_alg); ES256 is the default, the
// one every DPoP server must take.
var dpopSigningAlgs = []string{"ES256", "PS256", "EdDSA"}

// DefaultDPoPSigningAlg signs DPoP proofs when OIDCOptions.DPoPSigningAlg
// is empty.
const DefaultDPoPSigningAlg = "ES256"

const (
	// dpopExtra is where a sign-in's DPoP key waits in the transaction,
	// between Begin and Complete.
	dpopExtra = "dpop"
	// maxDPoPOrigins bounds the nonces kept: one per origin of the
	// provider and of the resource servers called.
	maxDPoPOrigins = 256
	// maxDPoPNonce bounds a nonce taken from a server, cached or sent
	// back (serverNonce).
	maxDPoPNonce = 1024
	// maxDPoPErrorBody bounds what is read of an error answer to see
	// whether it asks for a nonce.
	maxDPoPErrorBody = 16 << 10
)

// tokenTypeDPoP is the token_type of a DPoP-bound access token and the
// scheme it is sent with.
const tokenTypeDPoP = "DPoP"

// dpopKey is the key a sign-in's tokens are bound to.
type dpopKey struct {
	priv   crypto.Signer
	alg    string
	signer jose.Signer
	// jkt is the JWK SHA-256 thumbprint of the public key (RFC 7638), as
	// dpop_jkt and the token's cnf claim name it.
	jkt string
}

// keygenGate lets one sign-in start at a time make an RSA DPoP key. An
// RSA key takes tens of milliseconds of CPU and the start route answers
// anyone, so a flood of starts could otherwise take every core; through
// the gate it takes one, and a start that cannot get its turn before its
// request ends fails as unavailable. EC and Ed25519 keys (tens of
// microseconds) pass freely. The zero value is an open gate.
type keygenGate struct {
	turn chan struct{}
}

func newKeygenGate(alg string) keygenGate {
	if alg != "PS256" {
		return keygenGate{}
	}
	return keygenGate{turn: make(chan struct{}, 1)}
}

// acquire waits for the gate's turn for a key of alg, or for ctx's end.
func (g keygenGate) acquire(ctx context.Context, alg string) (release func(), err error) {
	if g.turn == nil || alg != "PS256" {
		return func() {}, nil
	}
	release = func() { <-g.turn }
	select {
	case g.turn <- struct{}{}:
		return release, nil
	default:
	}
	select {
	case g.turn <- struct{}{}:
		return release, nil
	case <-ctx.Done():
		return nil, NewError(CodeProviderUnavailable, "too many sign-ins are starting at once; try again",
			fmt.Errorf("DPoP key: waiting for an RSA key generation: %w", context.Cause(ctx)))
	}
}

// newDPoPKey makes a fresh key for alg.
func newDPoPKey(alg string) (*dpopKey, error) {
	var priv crypto.Signer
	var err error
	switch alg {
	case "ES256":
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "PS256":
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	case "EdDSA":
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	default:
		err = fmt.Errorf("DPoP signing algorithm %.16q", alg)
	}
	if err != nil {
		return nil, err
	}
	return dpopKeyOf(priv, alg)
}

func dpopKeyOf(priv crypto.Signer, alg string) (*dpopKey, error) {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(alg), Key: priv},
		(&jose.SignerOptions{EmbedJWK: true}).WithType("dpop+jwt"))
	if err != nil {
		return nil, err
	}
	sum, err := (&jose.JSONWebKey{Key: priv.Public()}).Thumbprint(crypto.SHA256)
	if err != nil {
		return nil, err
	}
	return &dpopKey{priv: priv, alg: alg, signer: signer, jkt: base64.RawURLEncoding.EncodeToString(sum)}, nil
}

// errDPoPKey is the one cause of a stored key that cannot be used; it
// never quotes the key.
var errDPoPKey = errors.New("Tokens.DPoPKey is not a DPoP key extauth made (a private JWK with alg ES256, PS256 or EdDSA)")

// parseDPoPKey reads a key as encode wrote it: a private JWK with its alg.
func parseDPoPKey(text string) (*dpopKey, error) {
	var jwk jose.JSONWebKey
	if err := jwk.UnmarshalJSON([]byte(text)); err != nil || jwk.IsPublic() || !jwk.Valid() {
		return nil, errDPoPKey
	}
	priv, ok := jwk.Key.(crypto.Signer)
	if !ok {
		return nil, errDPoPKey
	}
	switch k := priv.(type) {
	case *ecdsa.PrivateKey:
		ok = jwk.Algorithm == "ES256" && k.Curve == elliptic.P256()
	case *rsa.PrivateKey:
		ok = jwk.Algorithm == "PS256" && k.N.BitLen() >= minRSABits
	case ed25519.PrivateKey:
		ok = jwk.Algorithm == "EdDSA"
	default:
		ok = false
	}
	if !ok {
		return nil, errDPoPKey
	}
	return dpopKeyOf(priv, jwk.Algorithm)
}

// encode writes the key as a private JWK with its alg, the form
// Tokens.DPoPKey and the transaction hold.
func (k *dpopKey) encode() (string, error) {
	b, err := (&jose.JSONWebKey{Key: k.priv, Algorithm: k.alg}).MarshalJSON()
	return string(b), err
}

// proof signs a DPoP proof (RFC 9449 4.2) for a request of method to u:
// htm, htu without query and fragment, iat, a unique jti, the server's
// nonce when there is one and, with an access token, its hash (ath).
func (k *dpopKey) proof(s *OIDC, method string, u *url.URL, nonce, accessToken string) (string, error) {
	claims := struct {
		JTI   string `json:"jti"`
		HTM   string `json:"htm"`
		HTU   string `json:"htu"`
		IAT   int64  `json:"iat"`
		Nonce string `json:"nonce,omitempty"`
		ATH   string `json:"ath,omitempty"`
	}{JTI: randomID(), HTM: method, HTU: htu(u), IAT: s.now().Unix(), Nonce: nonce}
	if accessToken != "" {
		sum := sha256.Sum256([]byte(accessToken))
		claims.ATH = base64.RawURLEncoding.EncodeToString(sum[:])
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	jws, err := k.signer.Sign(payload)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}

// htu is RFC 9449 4.2's htu of u: the URI without query and fragment, its
// scheme and host in lower case (RFC 3986 6.2.2.1).
func htu(u *url.URL) string {
	c := url.URL{Scheme: strings.ToLower(u.Scheme), Host: strings.ToLower(u.Host), Path: u.Path, RawPath: u.RawPath}
	return c.String()
}

func origin(u *url.URL) string { return strings.ToLower(u.Scheme + "://" + u.Host) }

type dpopContextKey struct{}

// withDPoP makes every request to the provider under ctx carry a proof of
// k, and its access token, if any, travel as a DPoP token.
func withDPoP(ctx context.Context, k *dpopKey) context.Context {
	if k == nil {
		return ctx
	}
	return context.WithValue(ctx, dpopContextKey{}, k)
}

func dpopFrom(ctx context.Context) *dpopKey {
	k, _ := ctx.Value(dpopContextKey{}).(*dpopKey)
	return k
}

// authorization is the Authorization header of a request that sends
// accessToken under ctx: DPoP when ctx carries a DPoP key, else Bearer.
func authorization(ctx context.Context, accessToken string) string {
	if dpopFrom(ctx) != nil {
		return tokenTypeDPoP + " " + accessToken
	}
	return "Bearer " + accessToken
}

// nonceCache holds the last DPoP-Nonce of each origin (RFC 9449 8 and 9),
// bounded, so a proof carries the server's current nonce from the start
// and a retry is needed only when the server moves on.
type nonceCache struct {
	mu sync.Mutex
	m  map[string]string
}

func (c *nonceCache) get(origin string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[origin]
}

// put keeps nonce, which serverNonce has checked, as origin's.
func (c *nonceCache) put(origin, nonce string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]string{}
	}
	if _, ok := c.m[origin]; !ok && len(c.m) >= maxDPoPOrigins {
		// A forgotten nonce costs one retry.
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[origin] = nonce
}

// dpopTransport adds a fresh DPoP proof to each request whose context
// carries a key (withDPoP): to the pushed authorization request, token,
// UserInfo and revocation endpoints, and to resource servers. It keeps
// each origin's nonce and, when a server answers that it wants a new one
// (use_dpop_nonce: a JSON error at an authorization server, a
// WWW-Authenticate challenge at a resource server), sends the request
// again exactly once with it. Requests without a key pass through.
type dpopTransport struct {
	next http.RoundTripper
	s    *OIDC
}

func (t *dpopTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	k := dpopFrom(r.Context())
	if k == nil {
		return t.next.RoundTrip(r)
	}
	o := origin(r.URL)
	nonce := t.s.nonces.get(o)
	resp, err := t.send(r, k, nonce)
	if err != nil {
		return nil, err
	}
	fresh := serverNonce(resp.Header)
	if fresh != "" {
		t.s.nonces.put(o, fresh)
	}
	// A body that cannot be sent again ends it; so does a server that
	// asks for the nonce it was given.
	if fresh == "" || fresh == nonce || (r.Body != nil && r.Body != http.NoBody && r.GetBody == nil) {
		return resp, nil
	}
	resp, asks, err := asksForNonce(resp)
	if err != nil || !asks {
		return resp, err
	}
	resp.Body.Close()
	again := r.Clone(r.Context())
	if r.GetBody != nil {
		if again.Body, err = r.GetBody(); err != nil {
			return nil, err
		}
	}
	resp, err = t.send(again, k, fresh)
	if err == nil {
		if n := serverNonce(resp.Header); n != "" {
			t.s.nonces.put(o, n)
		}
	}
	return resp, err
}

// serverNonce is the nonce h gives (RFC 9449 8): its one DPoP-Nonce, when
// that is 1 to maxDPoPNonce characters of RFC 9449's NQCHAR (visible
// ASCII but the double quote and the backslash), else "". It is the one
// gate of every nonce the client takes, whether cached or sent back at
// once: a server's nonce goes into each proof to its origin, so one that
// is oversized, or could not be sent back as it came, is not taken.
func serverNonce(h http.Header) string {
	v := h.Values("DPoP-Nonce")
	if len(v) != 1 || v[0] == "" || len(v[0]) > maxDPoPNonce {
		return ""
	}
	for i := 0; i < len(v[0]); i++ {
		if c := v[0][i]; c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return ""
		}
	}
	return v[0]
}

// send sends r with a proof that carries nonce and, for a request that
// presents a DPoP access token, its hash.
func (t *dpopTransport) send(r *http.Request, k *dpopKey, nonce string) (*http.Response, error) {
	token := ""
	if scheme, value, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, tokenTypeDPoP) {
		token = value
	}
	proof, err := k.proof(t.s, r.Method, r.URL, nonce, token)
	if err != nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, fmt.Errorf("DPoP proof: %w", err)
	}
	req := r.Clone(r.Context())
	req.Header.Set("DPoP", proof)
	return t.next.RoundTrip(req)
}

// asksForNonce reports whether resp asks for a fresh DPoP nonce: a 400
// whose JSON error is use_dpop_nonce (RFC 9449 8) or a 401 whose DPoP
// challenge says so (RFC 9449 9), wherever it stands among the
// WWW-Authenticate challenges. An error answer's body is read, within a
// bound, and handed back unread.
func asksForNonce(resp *http.Response) (*http.Response, bool, error) {
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		cs, ok := challenge.Parse(resp.Header)
		if !ok {
			return resp, false, nil
		}
		for _, c := range cs {
			if c.Scheme == "dpop" && c.Params["error"] == "use_dpop_nonce" {
				return resp, true, nil
			}
		}
		return resp, false, nil
	case http.StatusBadRequest:
		head, err := io.ReadAll(io.LimitReader(resp.Body, maxDPoPErrorBody))
		if err != nil {
			resp.Body.Close()
			return nil, false, err
		}
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
		var e struct {
			Error string `json:"error"`
		}
		return resp, json.Unmarshal(head, &e) == nil && e.Error == "use_dpop_nonce", nil
	}
	return resp, false, nil
}

// checkTokenType refuses an access token the provider did not bind to the
// sign-in's key although the request carried a proof: a token it issued
// as Bearer (RFC 9449 5) would be used as one, unbound.
func checkTokenType(key *dpopKey, tokenType string) error {
	if key == nil || strings.EqualFold(tokenType, tokenTypeDPoP) {
		return nil
	}
	return NewError(CodeInvalidResponse, "the provider did not bind the tokens to this application's DPoP key",
		fmt.Errorf("token endpoint: token_type %.32q after a DPoP proof, want DPoP", tokenType))
}

// tokensDPoPKey is the DPoP key tokens t are bound to, nil for tokens
// that are not.
func tokensDPoPKey(t Tokens) (*dpopKey, error) {
	switch {
	case t.DPoPKey != "":
		k, err := parseDPoPKey(t.DPoPKey)
		if err != nil {
			return nil, NewError(CodeInvalidState, "the tokens' DPoP key is unreadable: sign in again", err)
		}
		return k, nil
	case strings.EqualFold(t.TokenType, tokenTypeDPoP):
		return nil, NewError(CodeInvalidState, "the tokens cannot be used without their DPoP key: sign in again",
			errors.New("Tokens.TokenType is DPoP but Tokens.DPoPKey is empty: keep the key with the tokens"))
	}
	return nil, nil
}
