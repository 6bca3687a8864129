// Package oidcop is a fake OpenID Connect provider (extauth's oidc, and with
// GoogleClaims its search_oauth2), for the tests and the development of
// applications that sign in with extauth, and for extauth's own. It speaks
// the real protocol (discovery, JWKS with rotation, authorization code with
// PKCE S256, client_secret_basic, client_secret_post, client_secret_jwt or
// private_key_jwt, pushed authorization requests, request objects, ID
// tokens and UserInfo encrypted to the client, acr and auth_time, UserInfo,
// RFC 9207's iss parameter, revocation, RP-initiated, back-channel and
// front-channel logout) and checks what a real provider checks. Faults make it misbehave in each way
// an ID token can be wrong (the checks extauth's security model lists), in
// a few ways a network can, and as a user who refuses.
// extauthtest.StartProviders starts one registered for an application's
// callback and logout URLs.
//
// An *OP is an http.Handler serving the paths under its issuer's path, so it
// works on its own httptest server and mounted on another mux alike.
package oidcop

import (
	"cmp"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"html/template"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/extauth/extauth/extauthtest/internal/endpoint"
	"github.com/extauth/extauth/extauthtest/internal/expiring"
	"github.com/extauth/extauth/internal/devpage"
	"github.com/extauth/extauth/internal/oidfed"
)

// Fault is one way the provider misbehaves.
type Fault string

// The faults. The first group breaks the ID token as SECURITY.md lists; the
// rest break the authorization response or the provider's availability.
const (
	// BadSignature corrupts the ID token's signature.
	BadSignature Fault = "bad_signature"
	// AlgNone sends an unsigned ID token with alg "none".
	AlgNone Fault = "alg_none"
	// HS256PublicKey signs the ID token with HMAC-SHA256 keyed with the
	// PEM of the provider's public key (the algorithm confusion attack).
	HS256PublicKey Fault = "hs256_public_key"
	// WrongIssuer puts another issuer in iss.
	WrongIssuer Fault = "wrong_issuer"
	// WrongAudience issues the token to another client.
	WrongAudience Fault = "wrong_audience"
	// ExtraAudience adds an untrusted audience and no azp.
	ExtraAudience Fault = "extra_audience"
	// ExtraAudienceWithAzp adds an extra audience and azp = the client.
	ExtraAudienceWithAzp Fault = "extra_audience_with_azp"
	// MissingSub leaves sub out.
	MissingSub Fault = "missing_sub"
	// MissingIAT leaves iat out.
	MissingIAT Fault = "missing_iat"
	// BadNonce sends a nonce other than the request's.
	BadNonce Fault = "bad_nonce"
	// BadAtHash sends an at_hash of another access token.
	BadAtHash Fault = "bad_at_hash"
	// NoKid leaves kid out of the header (the key set may hold several).
	NoKid Fault = "no_kid"
	// UnknownKid signs with a key the key set does not publish.
	UnknownKid Fault = "unknown_kid"
	// Expired sends a token that expired an hour ago.
	Expired Fault = "expired"
	// UserInfoSubMismatch answers UserInfo for another subject; the ID
	// token then carries no profile claims, so clients ask UserInfo.
	UserInfoSubMismatch Fault = "userinfo_sub_mismatch"

	// IssParamWrong puts another issuer in the authorization response.
	IssParamWrong Fault = "iss_param_wrong"
	// IssParamMissing leaves iss out of the authorization response while
	// discovery still advertises it.
	IssParamMissing Fault = "iss_param_missing"

	// Deny answers every authorization request as a user who clicks Deny
	// on the consent page does: error=access_denied.
	Deny Fault = "deny"

	// DiscoveryDown answers 503 to discovery.
	DiscoveryDown Fault = "discovery_down"
	// JWKSDown answers 503 to the key set.
	JWKSDown Fault = "jwks_down"
	// TokenServerError answers 500 at the token endpoint.
	TokenServerError Fault = "token_server_error"
	// TokenRefused refuses every grant at the token endpoint with 400
	// invalid_request and an error_description in a provider's words that
	// echoes what it was sent (the code or refresh token) and carries a
	// line break, as a client's log must not keep them.
	TokenRefused Fault = "token_refused"
	// TokenHang never answers the token endpoint; the handler returns
	// when the request's context ends.
	TokenHang Fault = "token_hang"
	// TokenHugeBody answers the token endpoint with a 4 MiB body.
	TokenHugeBody Fault = "token_huge_body"
	// RefreshWrongSub answers a refresh with an ID token for another
	// subject (OIDC Core 12.2 requires the same).
	RefreshWrongSub Fault = "refresh_wrong_sub"
)

// User is an account of the fake provider.
type User struct {
	// ID tells apart accounts whose Sub is the same (Entra ID's tenants
	// each issue what they like): the consent page's choice; Sub when
	// empty.
	ID                string
	Sub               string
	Email             string
	EmailVerified     bool
	Name              string
	GivenName         string
	FamilyName        string
	PreferredUsername string
	Picture           string
	// HostedDomain is Google's hd claim, sent when set.
	HostedDomain string
}

// key is the account's ID, or its Sub.
func (u User) key() string {
	if u.ID != "" {
		return u.ID
	}
	return u.Sub
}

// DemoUsers are the accounts of an OP configured without users.
func DemoUsers() []User {
	return []User{
		{Sub: "248289761001", Email: "alice@example.org", EmailVerified: true, Name: "Alice Example",
			GivenName: "Alice", FamilyName: "Example", PreferredUsername: "alice", Picture: "https://example.org/alice.png"},
		{Sub: "248289761002", Email: "bob@example.org", EmailVerified: false, Name: "Bob Unverified",
			GivenName: "Bob", FamilyName: "Unverified", PreferredUsername: "bob"},
	}
}

// Config sets the provider up.
type Config struct {
	// Issuer is the absolute issuer URL; its path is where the OP serves.
	Issuer       string
	ClientID     string
	ClientSecret string
	// ClientName is the application's name, as the consent page shows it
	// (a real provider shows the name the client registered); ClientID
	// when empty.
	ClientName string
	// RedirectURIs are the registered callback URLs, matched exactly.
	RedirectURIs []string
	// AuthMethod is the one client authentication method the token
	// endpoint (and the PAR and revocation endpoints) accept, and the only
	// one discovery lists: "client_secret_basic" (default),
	// "client_secret_post", "client_secret_jwt" or "private_key_jwt".
	// ClientSecret is not needed with private_key_jwt.
	AuthMethod string
	// ClientJWKSURI is the client's jwks_uri (extauth's JWKS route): the
	// provider reads the client's public keys there, on each use, to
	// verify its assertions and request objects and to encrypt to it.
	ClientJWKSURI string
	// ClientJWKS, when set, is the client's key set registered by value;
	// it wins over ClientJWKSURI.
	ClientJWKS *jose.JSONWebKeySet
	// CacheClientJWKS keeps the set read from ClientJWKSURI, as providers
	// that cache a client's jwks_uri do, until RefreshClientJWKS, or with
	// RefetchUnknownKid until a client JWT names a kid it does not hold.
	// The provider encrypts to the key of the set it holds, however old.
	CacheClientJWKS bool
	// RefetchUnknownKid reads ClientJWKSURI again, once, for a client JWT
	// whose kid the cached set lacks (oidc-provider does).
	RefetchUnknownKid bool
	// RequirePAR makes discovery say require_pushed_authorization_requests
	// and the authorization endpoint take pushed requests only.
	RequirePAR bool
	// RequireRequestObject makes every authorization request have to be a
	// request object signed with the client's key
	// (require_signed_request_object).
	RequireRequestObject bool
	// EncryptionKeyByAlg picks the client's encryption key as Keycloak
	// does: among the keys published with use "enc", the first whose
	// alg is the encryption's algorithm, a key without alg counting as
	// a signing key of its type (RS256 for RSA, ES256 for EC P-256), so
	// that one is never picked. Otherwise the provider takes the last
	// key of the right type not published for signing, alg or none.
	EncryptionKeyByAlg bool
	// IDTokenEncryption, when its Alg is set, encrypts ID tokens and
	// logout tokens to the client's key (nested: signed, then encrypted);
	// UserInfoEncryption encrypts UserInfo's claims.
	IDTokenEncryption  Encryption
	UserInfoEncryption Encryption
	// Alg is the signing algorithm: RS256 (default), PS256 or ES256.
	Alg string
	// Keys are signing keys to start with (generated when empty), the last
	// one active. They must suit Alg.
	Keys []crypto.Signer
	// DPoP makes the provider require DPoP (RFC 9449) of the client: a
	// proof with every request to the token endpoint (and checked on any
	// other request that carries one), access and refresh tokens bound to
	// its key, token_type DPoP, and UserInfo taking bound tokens only with
	// the DPoP scheme and a proof of their key.
	DPoP bool
	// DPoPNonce makes the provider demand its nonce in every proof
	// (RotateDPoPNonce changes it).
	DPoPNonce bool
	// ClientCAs, with AuthMethod tls_client_auth, are the CAs the
	// client's TLS certificate must chain to, and TLSClientSubjectDN the
	// subject it registered (tls_client_auth_subject_dn, as
	// x509.Certificate.Subject.String() prints it).
	ClientCAs          *x509.CertPool
	TLSClientSubjectDN string
	// MTLS binds access tokens to the TLS certificate the token request
	// presented (RFC 8705 3), takes them at UserInfo only over a
	// connection that presents it, and lists mtls_endpoint_aliases. The
	// provider must then be served over TLS with client certificates
	// requested.
	MTLS bool
	// Profile makes the provider enforce a FAPI 2.0 profile on the
	// client; it implies RequirePAR and DPoP, RequireRequestObject with
	// FAPI2MessageSigning, and an Alg of PS256 unless set.
	Profile Profile
	// AutoApprove signs the first user in without a consent page.
	AutoApprove bool
	// NoIssParameter stops advertising and sending RFC 9207's iss.
	NoIssParameter bool
	// SparseIDToken keeps the profile claims (email, name...) out of the
	// ID token, as some providers do; clients then read them from UserInfo.
	SparseIDToken bool
	// Users are the accounts; DemoUsers when empty.
	Users []User
	// DiscoveryCacheControl is the discovery document's Cache-Control;
	// "public, max-age=3600" (as Google sends) when empty.
	DiscoveryCacheControl string

	// NoEndSession leaves end_session_endpoint out of discovery, as
	// providers without RP-initiated logout (Google) do.
	NoEndSession bool
	// GoogleClaims shapes ID tokens as Google's: azp (the client ID)
	// always, sid never.
	GoogleClaims bool
	// PostLogoutRedirectURIs are the registered post_logout_redirect_uri
	// values, matched exactly.
	PostLogoutRedirectURIs []string
	// BackchannelLogoutURI, when set, receives a logout token whenever a
	// session of the client ends here.
	BackchannelLogoutURI string
	// FrontchannelLogoutURI is the client's registered front-channel
	// logout URI, for FrontchannelLogoutURL.
	FrontchannelLogoutURI string
	// HTTPClient posts back-channel logouts; a client with a 5 s time-out
	// when nil.
	HTTPClient *http.Client
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	// What shapes the provider as another: the paths, documents and
	// claims of a provider whose endpoints and tokens are not this
	// one's own (extauthtest/enterprise builds Entra ID, Okta, Auth0
	// and Google Workspace on them).

	// Routes are the absolute paths the provider serves endpoints at, on
	// its issuer's host, in place of the paths under the issuer's path;
	// an endpoint they leave out keeps its own. Discovery names what
	// Document says when it is set, and these paths otherwise.
	Routes map[Endpoint]string
	// Document, when set, is the discovery document served as it is,
	// byte for byte.
	Document []byte
	// IssuerFor is the issuer of user u's tokens, where it is not Issuer:
	// Entra ID's multi-tenant authorities issue each user's tokens as the
	// user's tenant.
	IssuerFor func(u User) string
	// Claims edits the claims of user u's ID tokens for scope: the
	// provider's own (a tenant ID, groups, a version), after the
	// standard and profile claims and before any fault.
	Claims func(u User, scope string, claims map[string]any)
	// Federation, when set, makes the provider an OpenID Federation OP
	// that registers its client automatically (see Federation): ClientID
	// is then the client's entity identifier, and RedirectURIs and the
	// client's keys come from its trust chain.
	Federation *Federation
}

// Endpoint names one of the provider's endpoints, for Hits.
type Endpoint string

// The endpoints counted by Hits.
const (
	Discovery  Endpoint = "discovery"
	JWKS       Endpoint = "jwks"
	Authorize  Endpoint = "authorize"
	Token      Endpoint = "token"
	UserInfo   Endpoint = "userinfo"
	EndSession Endpoint = "end_session"
	// PAR is the pushed authorization request endpoint.
	PAR Endpoint = "par"
	// Revocation is the token revocation endpoint.
	Revocation Endpoint = "revocation"
)

// OP is the fake provider.
type OP struct {
	cfg    Config
	prefix string
	now    func() time.Time
	hits   map[Endpoint]*atomic.Int64

	mu      sync.Mutex
	keys    []*signingKey
	active  int
	faults  map[Fault]bool
	pending *expiring.Map[*authRequest] // consent page interactions
	codes   *expiring.Map[*grant]
	tokens  *expiring.Map[*grant]
	// refresh maps each live refresh token to its grant; a refresh
	// rotates it.
	refresh *expiring.Map[*grant]
	// sessions are the provider's own sessions, by sid; a browser's
	// cookie names its session.
	sessions *expiring.Map[*session]
	// logouts are the pending end-session confirmations.
	logouts  *expiring.Map[*endSession]
	lastAuth url.Values
	// tokenPath and jwksPath are where the token endpoint and key set are
	// served (under the issuer's path); RotateEndpoints moves them.
	tokenPath, jwksPath string
	rotations           int
	// pushed are the pushed authorization requests, by request_uri.
	pushed *expiring.Map[*pushedRequest]
	// seenJTIs are the client assertions' jti, until they expire.
	seenJTIs   *expiring.Map[struct{}]
	assertions []Assertion
	lastParams url.Values
	revoked    int
	// nonce is the DPoP nonce demanded; proofs are the proofs accepted,
	// proofJTIs their jti until they could pass for fresh.
	nonce     string
	proofs    []Proof
	proofJTIs *expiring.Map[struct{}]
	// clientSet is the cached client key set (CacheClientJWKS).
	clientSet       *jose.JSONWebKeySet
	clientJWKSReads atomic.Int64
	// answer is the authentication AnswerAt chose.
	answer Authentication
	// fed is the provider's federation, nil without one.
	fed *opFederation
}

type signingKey struct {
	kid  string
	alg  string
	priv crypto.Signer
}

// authRequest is a validated authorization request.
type authRequest struct {
	redirectURI string
	state       string
	nonce       string
	challenge   string
	scope       string
	accessType  string
	acrValues   []string
	maxAge      int64 // -1: none asked
	// login: prompt=login asked for a new authentication.
	login bool
	// dpopJKT binds the code to a DPoP key: the request's dpop_jkt, or
	// the key of its pushed request's proof.
	dpopJKT string
	// mode is the response mode asked for.
	mode string
}

// grant is what a code, then an access token, stands for.
type grant struct {
	req  *authRequest
	user User
	sid  string
	used bool
	// authTime is when the user authenticated (the session's start).
	authTime time.Time
	// jkt is the DPoP key a token is bound to, "" for a bearer token;
	// x5t the TLS certificate it is bound to.
	jkt string
	x5t string
}

// session is a user's session at the provider, shared by the sign-ins of
// one browser.
type session struct {
	sid  string
	user User
	// authTime is when the user authenticated.
	authTime time.Time
}

const (
	codeTTL    = time.Minute
	tokenTTL   = time.Hour
	sessionTTL = 24 * time.Hour
	// interactionTTL is how long a consent or logout page waits.
	interactionTTL = 10 * time.Minute
	// sessionCookie names the browser's session at the provider.
	sessionCookie = "oidcop_session"
)

// New returns a provider for cfg. It generates a key when cfg.Keys is empty.
func New(cfg Config) (*OP, error) {
	u, err := url.Parse(cfg.Issuer)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("oidcop: issuer %q is not an absolute URL", cfg.Issuer)
	}
	if cfg.AuthMethod == "" {
		cfg.AuthMethod = "client_secret_basic"
	}
	secretless := cfg.AuthMethod == "private_key_jwt" || cfg.AuthMethod == "tls_client_auth" || cfg.AuthMethod == "self_signed_tls_client_auth"
	if cfg.Federation != nil {
		// Clients register automatically: their redirect URIs and keys
		// come from their trust chains.
		cfg.AuthMethod, cfg.RequireRequestObject, secretless = "private_key_jwt", true, true
	}
	if cfg.ClientID == "" || (cfg.ClientSecret == "" && !secretless) || len(cfg.RedirectURIs) == 0 && cfg.Federation == nil {
		return nil, fmt.Errorf("oidcop: client ID, secret and redirect URIs are required")
	}
	switch cfg.AuthMethod {
	case "client_secret_basic", "client_secret_post", "client_secret_jwt", "private_key_jwt", "tls_client_auth", "self_signed_tls_client_auth":
	default:
		return nil, fmt.Errorf("oidcop: auth method %q", cfg.AuthMethod)
	}
	if err := cfg.checkProfile(); err != nil {
		return nil, err
	}
	if cfg.Alg == "" {
		cfg.Alg = "RS256"
	}
	if len(cfg.Users) == 0 {
		cfg.Users = DemoUsers()
	}
	if cfg.DiscoveryCacheControl == "" {
		cfg.DiscoveryCacheControl = "public, max-age=3600"
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 5 * time.Second}
	}
	op := &OP{
		cfg:    cfg,
		prefix: strings.TrimSuffix(u.Path, "/"),
		now:    cfg.Now,
		hits:   map[Endpoint]*atomic.Int64{},
		faults: map[Fault]bool{},
		nonce:  endpoint.Random(16),

		tokenPath: "/token",
		jwksPath:  "/jwks",
	}
	if op.now == nil {
		op.now = time.Now
	}
	op.pending = expiring.New[*authRequest](0, op.now)
	op.codes = expiring.New[*grant](0, op.now)
	op.tokens = expiring.New[*grant](0, op.now)
	op.refresh = expiring.New[*grant](0, op.now)
	op.sessions = expiring.New[*session](0, op.now)
	op.logouts = expiring.New[*endSession](0, op.now)
	op.pushed = expiring.New[*pushedRequest](0, op.now)
	op.seenJTIs = expiring.New[struct{}](0, op.now)
	op.proofJTIs = expiring.New[struct{}](0, op.now)
	if cfg.Federation != nil {
		if op.fed, err = newOPFederation(op, cfg.Federation); err != nil {
			return nil, err
		}
	}
	for _, e := range []Endpoint{Discovery, JWKS, Authorize, Token, UserInfo, EndSession, PAR, Revocation, MTLS, EntityConfiguration} {
		op.hits[e] = new(atomic.Int64)
	}
	for _, k := range cfg.Keys {
		if err := op.addKey(k); err != nil {
			return nil, err
		}
	}
	if len(op.keys) == 0 {
		if _, err := op.RotateKey(); err != nil {
			return nil, err
		}
	}
	return op, nil
}

// GenerateKey returns a new private key for alg (RS256, PS256, ES256).
func GenerateKey(alg string) (crypto.Signer, error) {
	switch alg {
	case "RS256", "PS256":
		return rsa.GenerateKey(rand.Reader, 2048)
	case "ES256":
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	return nil, fmt.Errorf("oidcop: algorithm %q", alg)
}

func (op *OP) addKey(k crypto.Signer) error {
	switch k.(type) {
	case *rsa.PrivateKey:
		if op.cfg.Alg == "ES256" {
			return fmt.Errorf("oidcop: an RSA key cannot sign %s", op.cfg.Alg)
		}
	case *ecdsa.PrivateKey:
		if op.cfg.Alg != "ES256" {
			return fmt.Errorf("oidcop: an EC key cannot sign %s", op.cfg.Alg)
		}
	default:
		return fmt.Errorf("oidcop: key type %T", k)
	}
	op.mu.Lock()
	defer op.mu.Unlock()
	op.keys = append(op.keys, &signingKey{kid: endpoint.Random(8), alg: op.cfg.Alg, priv: k})
	op.active = len(op.keys) - 1
	return nil
}

// RotateKey publishes a new key and signs with it from now on; the old keys
// stay published. It returns the new key's kid.
func (op *OP) RotateKey() (string, error) {
	k, err := GenerateKey(op.cfg.Alg)
	if err != nil {
		return "", err
	}
	if err := op.addKey(k); err != nil {
		return "", err
	}
	return op.ActiveKid(), nil
}

// AddKey publishes k and signs with it from now on, like RotateKey with a
// key the caller already has.
func (op *OP) AddKey(k crypto.Signer) (string, error) {
	if err := op.addKey(k); err != nil {
		return "", err
	}
	return op.ActiveKid(), nil
}

// RetireKeys stops publishing every key but the active one.
func (op *OP) RetireKeys() {
	op.mu.Lock()
	defer op.mu.Unlock()
	op.keys = []*signingKey{op.keys[op.active]}
	op.active = 0
}

// ActiveKid returns the kid of the key that signs.
func (op *OP) ActiveKid() string {
	op.mu.Lock()
	defer op.mu.Unlock()
	return op.keys[op.active].kid
}

// RotateEndpoints moves the token endpoint and the key set to new paths,
// which discovery lists from now on; the old paths answer 404, as after a
// provider's migration. It returns the new token endpoint's URL.
func (op *OP) RotateEndpoints() string {
	op.mu.Lock()
	defer op.mu.Unlock()
	op.rotations++
	v := fmt.Sprintf("/v%d", op.rotations+1)
	op.tokenPath, op.jwksPath = v+"/token", v+"/jwks"
	return strings.TrimSuffix(op.cfg.Issuer, "/") + op.tokenPath
}

func (op *OP) paths() (token, jwks string) {
	op.mu.Lock()
	defer op.mu.Unlock()
	return op.tokenPath, op.jwksPath
}

// SetFaults replaces the active faults; no argument clears them.
func (op *OP) SetFaults(faults ...Fault) {
	op.mu.Lock()
	defer op.mu.Unlock()
	op.faults = map[Fault]bool{}
	for _, f := range faults {
		op.faults[f] = true
	}
}

func (op *OP) fault(f Fault) bool {
	op.mu.Lock()
	defer op.mu.Unlock()
	return op.faults[f]
}

// Hits returns how many requests an endpoint has had.
func (op *OP) Hits(e Endpoint) int64 { return op.hits[e].Load() }

// LastAuthorizeQuery returns the parameters of the last authorization
// request, for tests of what the client sent.
func (op *OP) LastAuthorizeQuery() url.Values {
	op.mu.Lock()
	defer op.mu.Unlock()
	return op.lastAuth
}

// Issuer returns the issuer identifier.
func (op *OP) Issuer() string { return op.cfg.Issuer }

// ServeHTTP routes the paths under the issuer's path.
func (op *OP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	for e, route := range op.cfg.Routes {
		if r.URL.Path == route {
			op.serve(w, r, e)
			return
		}
	}
	path, ok := strings.CutPrefix(r.URL.Path, op.prefix)
	if !ok {
		http.NotFound(w, r)
		return
	}
	tokenPath, jwksPath := op.paths()
	if alias, ok := strings.CutPrefix(path, mtlsPrefix); ok && op.cfg.MTLS {
		op.hits[MTLS].Add(1)
		path = alias
	}
	var e Endpoint
	switch path {
	case "/.well-known/openid-configuration":
		e = Discovery
	case oidfed.WellKnownPath:
		if op.fed == nil {
			http.NotFound(w, r)
			return
		}
		op.hits[EntityConfiguration].Add(1)
		op.serveFederation(w, r)
		return
	case jwksPath:
		e = JWKS
	case "/authorize":
		e = Authorize
	case "/authorize/decision":
		op.decision(w, r)
		return
	case tokenPath:
		e = Token
	case "/userinfo":
		e = UserInfo
	case "/end_session":
		e = EndSession
	case "/end_session/decision":
		op.endSessionDecision(w, r)
		return
	case "/par":
		e = PAR
	case "/revoke":
		e = Revocation
	case "/account":
		op.account(w, r)
		return
	default:
		http.NotFound(w, r)
		return
	}
	if _, moved := op.cfg.Routes[e]; moved {
		http.NotFound(w, r)
		return
	}
	op.serve(w, r, e)
}

// serve counts a request to endpoint e and answers it.
func (op *OP) serve(w http.ResponseWriter, r *http.Request, e Endpoint) {
	op.hits[e].Add(1)
	switch e {
	case Discovery:
		op.discovery(w, r)
	case JWKS:
		op.jwks(w, r)
	case Authorize:
		op.authorize(w, r)
	case Token:
		op.token(w, r)
	case UserInfo:
		op.userinfo(w, r)
	case EndSession:
		op.endSession(w, r)
	case PAR:
		op.par(w, r)
	case Revocation:
		op.revoke(w, r)
	default:
		http.NotFound(w, r)
	}
}

// endpointURL is the URL of endpoint e: at its route, or at path under
// the issuer's.
func (op *OP) endpointURL(e Endpoint, path string) string {
	u, _ := url.Parse(op.cfg.Issuer)
	if route, ok := op.cfg.Routes[e]; ok {
		return u.Scheme + "://" + u.Host + route
	}
	return strings.TrimSuffix(op.cfg.Issuer, "/") + path
}

// issuerOf is the issuer of u's tokens.
func (op *OP) issuerOf(u User) string {
	if op.cfg.IssuerFor != nil {
		return op.cfg.IssuerFor(u)
	}
	return op.cfg.Issuer
}

// Introspect says whose a live access token is and for what scope, as a
// resource server of the provider's (Microsoft Graph for Entra ID) asks.
func (op *OP) Introspect(accessToken string) (u User, scope string, ok bool) {
	op.mu.Lock()
	defer op.mu.Unlock()
	g, ok := op.tokens.Get(accessToken)
	if !ok {
		return User{}, "", false
	}
	return g.user, g.req.scope, true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (op *OP) discovery(w http.ResponseWriter, r *http.Request) {
	if op.fault(DiscoveryDown) {
		http.Error(w, "discovery is down", http.StatusServiceUnavailable)
		return
	}
	if op.cfg.Document != nil {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Set("Cache-Control", op.cfg.DiscoveryCacheControl)
		w.Write(op.cfg.Document)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", op.cfg.DiscoveryCacheControl)
	_ = json.NewEncoder(w).Encode(op.discoveryDocument())
}

// discoveryDocument is the provider's metadata: its discovery document,
// and in a federation its openid_provider metadata.
func (op *OP) discoveryDocument() map[string]any {
	iss := op.cfg.Issuer
	base := strings.TrimSuffix(iss, "/")
	tokenPath, jwksPath := op.paths()
	doc := map[string]any{
		"issuer":                                iss,
		"authorization_endpoint":                op.endpointURL(Authorize, "/authorize"),
		"token_endpoint":                        op.endpointURL(Token, tokenPath),
		"userinfo_endpoint":                     op.endpointURL(UserInfo, "/userinfo"),
		"jwks_uri":                              op.endpointURL(JWKS, jwksPath),
		"response_types_supported":              []string{"code"},
		"response_modes_supported":              []string{"query", "jwt", "query.jwt"},
		"grant_types_supported":                 []string{"authorization_code", "refresh_token"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{op.cfg.Alg},
		"token_endpoint_auth_methods_supported": []string{op.cfg.AuthMethod},
		"code_challenge_methods_supported":      []string{"S256"},
		"scopes_supported":                      []string{"openid", "email", "profile", "offline_access"},
		"claims_supported": []string{"sub", "iss", "aud", "exp", "iat", "nonce", "at_hash", "azp", "sid",
			"email", "email_verified", "name", "given_name", "family_name", "preferred_username", "picture", "hd"},
	}
	if !op.cfg.NoIssParameter {
		doc["authorization_response_iss_parameter_supported"] = true
	}
	if !op.cfg.NoEndSession {
		doc["end_session_endpoint"] = op.endpointURL(EndSession, "/end_session")
	}
	algs := op.clientAlgNames()
	doc["pushed_authorization_request_endpoint"] = base + "/par"
	doc["require_pushed_authorization_requests"] = op.cfg.RequirePAR
	doc["request_parameter_supported"] = true
	doc["request_uri_parameter_supported"] = false
	doc["request_object_signing_alg_values_supported"] = algs
	doc["require_signed_request_object"] = op.cfg.RequireRequestObject
	if op.cfg.AuthMethod == "client_secret_jwt" {
		doc["token_endpoint_auth_signing_alg_values_supported"] = []string{"HS256", "HS384", "HS512"}
	} else {
		doc["token_endpoint_auth_signing_alg_values_supported"] = algs
	}
	keyAlgs := []string{"RSA-OAEP", "RSA-OAEP-256", "ECDH-ES", "ECDH-ES+A128KW", "ECDH-ES+A256KW"}
	encs := []string{"A128GCM", "A256GCM", "A128CBC-HS256", "A256CBC-HS512"}
	doc["id_token_encryption_alg_values_supported"] = keyAlgs
	doc["id_token_encryption_enc_values_supported"] = encs
	doc["userinfo_encryption_alg_values_supported"] = keyAlgs
	doc["userinfo_encryption_enc_values_supported"] = encs
	doc["revocation_endpoint"] = op.endpointURL(Revocation, "/revoke")
	doc["dpop_signing_alg_values_supported"] = DPoPSigningAlgs
	if op.cfg.MTLS {
		doc["mtls_endpoint_aliases"] = op.mtlsAliases()
		doc["tls_client_certificate_bound_access_tokens"] = true
	}
	doc["authorization_signing_alg_values_supported"] = []string{op.cfg.Alg}
	doc["claims_supported"] = append(doc["claims_supported"].([]string), "acr", "auth_time")
	doc["backchannel_logout_supported"] = true
	doc["backchannel_logout_session_supported"] = true
	doc["frontchannel_logout_supported"] = true
	doc["frontchannel_logout_session_supported"] = true
	return doc
}

func (op *OP) jwks(w http.ResponseWriter, r *http.Request) {
	if op.fault(JWKSDown) {
		http.Error(w, "keys are down", http.StatusServiceUnavailable)
		return
	}
	op.mu.Lock()
	keys := make([]jose.JSONWebKey, 0, len(op.keys))
	for _, k := range op.keys {
		keys = append(keys, jose.JSONWebKey{Key: k.priv.Public(), KeyID: k.kid, Algorithm: k.alg, Use: "sig"})
	}
	op.mu.Unlock()
	writeJSON(w, http.StatusOK, jose.JSONWebKeySet{Keys: keys})
}

// authorizeError sends an error back to the client's redirect URI, in
// the response mode asked for.
func (op *OP) authorizeError(w http.ResponseWriter, r *http.Request, redirectURI, state, mode, code string) {
	q := url.Values{"error": {code}}
	if state != "" {
		q.Set("state", state)
	}
	op.respond(w, r, redirectURI, mode, q)
}

// respond sends the browser back to the client's redirect URI with the
// authorization response q and the issuer: as query parameters, or with
// response_mode jwt as a signed JWT (JARM).
func (op *OP) respond(w http.ResponseWriter, r *http.Request, redirectURI, mode string, q url.Values) {
	op.addIss(q)
	if mode == "jwt" || mode == "query.jwt" {
		jwt, err := op.jarm(q)
		if err != nil {
			http.Error(w, "cannot sign the response", http.StatusInternalServerError)
			return
		}
		q = url.Values{"response": {jwt}}
	}
	http.Redirect(w, r, redirectURI+"?"+q.Encode(), http.StatusFound)
}

func (op *OP) addIss(q url.Values) {
	switch {
	case op.cfg.NoIssParameter || op.fault(IssParamMissing):
	case op.fault(IssParamWrong):
		q.Set("iss", "https://evil.example")
	default:
		q.Set("iss", op.cfg.Issuer)
	}
}

// requestError is why an authorization request is refused: with a
// redirect URI the client registered, sent back there as code; without,
// answered to the browser as plain.
type requestError struct {
	redirectURI, state, mode, code string
	plain                          string
}

func (e *requestError) answer(op *OP, w http.ResponseWriter, r *http.Request) {
	if e.redirectURI == "" {
		http.Error(w, e.plain, http.StatusBadRequest)
		return
	}
	op.authorizeError(w, r, e.redirectURI, e.state, e.mode, e.code)
}

// checkRequest validates an authorization request's parameters, as the
// authorization and the pushed authorization request endpoints both do.
func (op *OP) checkRequest(q url.Values) (*authRequest, *requestError) {
	// Without a known client and its registered redirect URI there is
	// nowhere safe to send an error (RFC 6749 4.1.2.1).
	if q.Get("client_id") != op.cfg.ClientID {
		return nil, &requestError{code: "invalid_client", plain: "unknown client"}
	}
	redirectURI := q.Get("redirect_uri")
	registered := op.cfg.RedirectURIs
	if op.fed != nil {
		md, err := op.fed.client(context.Background(), op.cfg.ClientID)
		if err != nil {
			return nil, &requestError{code: "invalid_client", plain: "the client has no valid trust chain: " + err.Error()}
		}
		registered = stringList(md["redirect_uris"])
	}
	if !slices.Contains(registered, redirectURI) {
		return nil, &requestError{code: "invalid_request", plain: "redirect_uri is not registered for this client"}
	}
	state := q.Get("state")
	mode := q.Get("response_mode")
	fail := func(code string) (*authRequest, *requestError) {
		return nil, &requestError{redirectURI: redirectURI, state: state, mode: mode, code: code}
	}
	switch {
	case q.Get("response_type") != "code":
		return fail("unsupported_response_type")
	case !slices.Contains(strings.Fields(q.Get("scope")), "openid"):
		return fail("invalid_scope")
	case q.Get("code_challenge") == "" || q.Get("code_challenge_method") != "S256":
		return fail("invalid_request")
	case mode != "" && mode != "query" && mode != "jwt" && mode != "query.jwt":
		return fail("unsupported_response_mode")
	case op.cfg.Profile == FAPI2MessageSigning && mode != "jwt" && mode != "query.jwt":
		// FAPI 2.0 Message Signing 5.4: signed responses only.
		return fail("invalid_request")
	case op.cfg.Profile != "" && len(q.Get("nonce")) > 64:
		return fail("invalid_request")
	}
	return &authRequest{
		redirectURI: redirectURI,
		state:       state,
		nonce:       q.Get("nonce"),
		challenge:   q.Get("code_challenge"),
		scope:       q.Get("scope"),
		accessType:  q.Get("access_type"),
		acrValues:   strings.Fields(q.Get("acr_values")),
		maxAge:      maxAge(q),
		login:       slices.Contains(strings.Fields(q.Get("prompt")), "login"),
		dpopJKT:     q.Get("dpop_jkt"),
		mode:        mode,
	}, nil
}

func (op *OP) authorize(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "malformed request", http.StatusBadRequest)
		return
	}
	op.mu.Lock()
	op.lastAuth = r.Form
	op.mu.Unlock()
	if r.Form.Get("client_id") != op.cfg.ClientID {
		http.Error(w, "unknown client", http.StatusBadRequest)
		return
	}
	q, pushed, err := op.resolveRequest(r.Form)
	switch {
	case err != nil:
		http.Error(w, "invalid request: "+err.Error(), http.StatusBadRequest)
		return
	case op.cfg.RequirePAR && !pushed:
		http.Error(w, "pushed authorization requests are required", http.StatusBadRequest)
		return
	}
	req, rerr := op.checkRequest(q)
	if rerr != nil {
		rerr.answer(op, w, r)
		return
	}
	op.mu.Lock()
	op.lastParams = q
	op.mu.Unlock()
	redirectURI, state := req.redirectURI, req.state
	if op.fault(Deny) {
		op.authorizeError(w, r, redirectURI, state, req.mode, "access_denied")
		return
	}
	if op.cfg.AutoApprove {
		op.approve(w, r, req, op.cfg.Users[0])
		return
	}
	if q.Get("prompt") == "none" {
		op.authorizeError(w, r, redirectURI, state, req.mode, "login_required")
		return
	}
	id := endpoint.Random(16)
	op.mu.Lock()
	op.pending.Put(id, req, op.now().Add(interactionTTL))
	op.mu.Unlock()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_ = op.page(consentPages).Execute(w, map[string]any{
		"Action":      op.prefix + "/authorize/decision",
		"Interaction": id,
		"Client":      cmp.Or(op.cfg.ClientName, op.cfg.ClientID),
		"Scope":       req.scope,
		"Users":       op.cfg.Users,
	})
}

// Brands of the OP's pages: an OP shaped as Google's (GoogleClaims) is
// the stand-in of a Google account.
const (
	brandOP     = "OpenID Provider"
	brandGoogle = "Google account"
)

// pages is one page of the OP in each brand.
type pages map[string]*template.Template

func newPages(name, body string) pages {
	return pages{brandOP: devpage.Provider(name, brandOP, body), brandGoogle: devpage.Provider(name, brandGoogle, body)}
}

// page is the OP's version of p.
func (op *OP) page(p pages) *template.Template {
	if op.cfg.GoogleClaims {
		return p[brandGoogle]
	}
	return p[brandOP]
}

var consentPages = newPages("consent", `{{define "title"}}Sign in{{end}}
{{define "main"}}<div class="card">
<h1>Sign in to continue</h1>
<p><strong>{{.Client}}</strong> asks to sign you in and to see: <code>{{.Scope}}</code></p>
<form method="post" action="{{.Action}}">
<input type="hidden" name="interaction" value="{{.Interaction}}">
<fieldset class="choices"><legend>Sign in as</legend>
{{range $i, $u := .Users}}<label><input type="radio" name="user" value="{{if $u.ID}}{{$u.ID}}{{else}}{{$u.Sub}}{{end}}"{{if eq $i 0}} checked{{end}}> {{$u.Name}} <span class="muted">&lt;{{$u.Email}}&gt;</span></label>
{{end}}</fieldset>
<div class="actions">
<button type="submit" name="decision" value="approve" class="primary">Approve</button>
<button type="submit" name="decision" value="deny">Deny</button>
</div>
</form>
</div>{{end}}`)

// takeInteraction reads the POST of one of the OP's pages and takes its
// interaction out of pending, once. It answers the browser itself, and
// reports false, for anything else: another method, a malformed form, an
// interaction unknown or expired.
func takeInteraction[T any](op *OP, w http.ResponseWriter, r *http.Request, pending *expiring.Map[T]) (T, bool) {
	var zero T
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return zero, false
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, "malformed request", http.StatusBadRequest)
		return zero, false
	}
	id := r.PostForm.Get("interaction")
	op.mu.Lock()
	v, ok := pending.Take(id)
	op.mu.Unlock()
	if !ok {
		http.Error(w, "unknown or expired interaction", http.StatusBadRequest)
		return zero, false
	}
	return v, true
}

func (op *OP) decision(w http.ResponseWriter, r *http.Request) {
	req, ok := takeInteraction(op, w, r, op.pending)
	if !ok {
		return
	}
	if r.PostForm.Get("decision") != "approve" {
		op.authorizeError(w, r, req.redirectURI, req.state, req.mode, "access_denied")
		return
	}
	for _, u := range op.cfg.Users {
		if u.key() == r.PostForm.Get("user") {
			op.approve(w, r, req, u)
			return
		}
	}
	http.Error(w, "unknown user", http.StatusBadRequest)
}

// approve issues a code and sends the browser back to the client. The
// browser's session at the provider (its cookie) is kept when it is the
// same user's, and started otherwise.
func (op *OP) approve(w http.ResponseWriter, r *http.Request, req *authRequest, u User) {
	var sid string
	if c, err := r.Cookie(sessionCookie); err == nil {
		sid = c.Value
	}
	code, sess := op.issueCode(req, u, sid)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: sess.sid, Path: op.prefix + "/", HttpOnly: true,
		Secure: strings.HasPrefix(op.cfg.Issuer, "https:"), SameSite: http.SameSiteLaxMode})
	q := url.Values{"code": {code}}
	if req.state != "" {
		q.Set("state", req.state)
	}
	op.respond(w, r, req.redirectURI, req.mode, q)
}

// maxRecorded is how many client assertions and DPoP proofs the provider
// keeps for Assertions and DPoPProofs: a long-running demo's keep no more.
const maxRecorded = 1000

// record appends v to the record rs, keeping its most recent maxRecorded
// entries; it copies them out once it holds twice as many, so that each
// call costs a constant amortized.
func record[T any](rs []T, v T) []T {
	if len(rs) >= 2*maxRecorded {
		rs = append([]T(nil), rs[len(rs)-maxRecorded+1:]...)
	}
	return append(rs, v)
}

// recorded is the most recent maxRecorded entries of rs, copied.
func recorded[T any](rs []T) []T {
	return slices.Clone(rs[max(len(rs)-maxRecorded, 0):])
}

// issueCode issues a code for u's sign-in of req, in the browser's
// session sid when that is u's and young enough, else in a new session.
func (op *OP) issueCode(req *authRequest, u User, sid string) (string, *session) {
	code := endpoint.Random(32)
	now := op.now()
	op.mu.Lock()
	defer op.mu.Unlock()
	// A session older than max_age, or prompt=login, means authenticating
	// again: a new session (OIDC Core 3.1.2.1).
	sess, ok := op.sessions.Get(sid)
	if !ok || sess.user.key() != u.key() || req.login || (req.maxAge >= 0 && now.Sub(sess.authTime) > time.Duration(req.maxAge)*time.Second) {
		sess = &session{sid: endpoint.Random(16), user: u, authTime: now}
		op.sessions.Put(sess.sid, sess, now.Add(sessionTTL))
	}
	op.codes.Put(code, &grant{req: req, user: u, sid: sess.sid, authTime: sess.authTime}, now.Add(codeTTL))
	return code, sess
}

// peekCode returns the grant of a live code, spent or not.
func (op *OP) peekCode(code string) (*grant, bool) {
	op.mu.Lock()
	defer op.mu.Unlock()
	return op.codes.Get(code)
}

// redeemCode spends code: its grant, or false when the code is unknown,
// expired or spent already. A spent code stays known until its expiry, so
// that its reuse is told from an unknown code.
func (op *OP) redeemCode(code string) (*grant, bool) {
	op.mu.Lock()
	defer op.mu.Unlock()
	g, ok := op.codes.Get(code)
	if !ok || g.used {
		return nil, false
	}
	g.used = true
	return g, true
}

// clientRequest reads a client's POST to endpoint e (token, PAR,
// revocation) and authenticates the client, answering the error itself
// when it cannot: false then.
func (op *OP) clientRequest(w http.ResponseWriter, r *http.Request, e Endpoint) bool {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		tokenError(w, http.StatusMethodNotAllowed, "invalid_request")
		return false
	}
	if err := r.ParseForm(); err != nil {
		tokenError(w, http.StatusBadRequest, "invalid_request")
		return false
	}
	if !op.clientAuthenticated(r, e) {
		tokenError(w, http.StatusUnauthorized, "invalid_client")
		return false
	}
	return true
}

func tokenError(w http.ResponseWriter, status int, code string) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="token"`)
	}
	writeJSON(w, status, map[string]string{"error": code})
}

// clientAuthenticated checks the client with the one method registered,
// refusing the others and refusing two at once (RFC 6749 2.3), on a
// request to endpoint e.
func (op *OP) clientAuthenticated(r *http.Request, e Endpoint) bool {
	if op.cfg.AuthMethod == "tls_client_auth" || op.cfg.AuthMethod == "self_signed_tls_client_auth" {
		return op.tlsAuthenticated(r) == nil
	}
	if op.jwtMethod() {
		path := map[Endpoint]string{PAR: "/par", Revocation: "/revoke"}[e]
		if e == Token {
			path, _ = op.paths()
		}
		return op.assertionAuthenticated(r, e, strings.TrimSuffix(op.cfg.Issuer, "/")+path) == nil
	}
	user, pass, hasBasic := r.BasicAuth()
	_, idInBody := r.PostForm["client_id"]
	_, secretInBody := r.PostForm["client_secret"]
	var id, secret string
	switch op.cfg.AuthMethod {
	case "client_secret_basic":
		if !hasBasic || secretInBody {
			return false
		}
		// RFC 6749 2.3.1: both halves are form-urlencoded before base64.
		var err1, err2 error
		id, err1 = url.QueryUnescape(user)
		secret, err2 = url.QueryUnescape(pass)
		if err1 != nil || err2 != nil {
			return false
		}
		if idInBody && r.PostForm.Get("client_id") != id {
			return false
		}
	case "client_secret_post":
		if hasBasic || !idInBody || !secretInBody {
			return false
		}
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	return subtle.ConstantTimeCompare([]byte(id), []byte(op.cfg.ClientID)) == 1 &&
		subtle.ConstantTimeCompare([]byte(secret), []byte(op.cfg.ClientSecret)) == 1
}

func (op *OP) token(w http.ResponseWriter, r *http.Request) {
	switch {
	case op.fault(TokenHang):
		endpoint.Hold(r, nil)
		return
	case op.fault(TokenServerError):
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	case op.fault(TokenHugeBody):
		endpoint.Huge{ContentType: "application/json", Prefix: `{"access_token":"x","token_type":"Bearer",`, Fill: ' ', Suffix: `"id_token":"x"}`}.Write(w, 4<<20)
		return
	}
	if !op.clientRequest(w, r, Token) {
		return
	}
	f := r.PostForm
	if op.fault(TokenRefused) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request",
			"error_description": "Invalid grant " + f.Get("code") + f.Get("refresh_token") + ":\nsee the provider's log"})
		return
	}
	switch f.Get("grant_type") {
	case "authorization_code":
	case "refresh_token":
		op.refreshGrant(w, r)
		return
	default:
		tokenError(w, http.StatusBadRequest, "unsupported_grant_type")
		return
	}
	now := op.now()
	bound := ""
	if g, ok := op.peekCode(f.Get("code")); ok {
		bound = g.req.dpopJKT
	}
	jkt, perr := op.tokenProof(r, bound)
	if perr != nil {
		op.asProofError(w, perr)
		return
	}
	g, ok := op.redeemCode(f.Get("code"))
	switch {
	case !ok:
		tokenError(w, http.StatusBadRequest, "invalid_grant")
		return
	case f.Get("redirect_uri") != g.req.redirectURI:
		tokenError(w, http.StatusBadRequest, "invalid_grant")
		return
	case !pkceMatches(f.Get("code_verifier"), g.req.challenge):
		tokenError(w, http.StatusBadRequest, "invalid_grant")
		return
	}
	op.issueTokens(w, g, now, true, jkt, op.certificateBound(r))
}

// issueTokens answers the token endpoint for grant g: a new access token,
// an ID token (with the request's nonce on a sign-in, without on a
// refresh), and a refresh token when offline access was asked for.
//
// With jkt, the key of the request's DPoP proof, the tokens are bound to
// it and their type is DPoP.
// With x5t, the thumbprint of the request's TLS certificate, the access
// token is bound to the certificate.
func (op *OP) issueTokens(w http.ResponseWriter, g *grant, now time.Time, signIn bool, jkt, x5t string) {
	access := endpoint.Random(32)
	idg := *g
	if !signIn {
		req := *g.req
		req.nonce = ""
		idg.req = &req
		if op.fault(RefreshWrongSub) {
			idg.user.Sub = "someone-else-" + g.user.Sub
		}
	}
	idToken, err := op.idToken(&idg, access, now)
	if err != nil {
		// As providers do, the answer says what went wrong, here why
		// the ID token could not be encrypted to the client.
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "server_error", "error_description": err.Error()})
		return
	}
	tokenType := "Bearer"
	if op.fault(DPoPBearer) {
		jkt = ""
	}
	if jkt != "" {
		tokenType = "DPoP"
	}
	resp := map[string]any{
		"access_token": access,
		"token_type":   tokenType,
		"expires_in":   int(tokenTTL.Seconds()),
		"id_token":     idToken,
		"scope":        g.req.scope,
	}
	if rt := op.recordTokens(g, access, now, jkt, x5t); rt != "" {
		resp["refresh_token"] = rt
	}
	writeJSON(w, http.StatusOK, resp)
}

// recordTokens holds access for grant g, bound to jkt and x5t as
// issueTokens says, and a new refresh token, which it returns, when
// offline access was asked for.
func (op *OP) recordTokens(g *grant, access string, now time.Time, jkt, x5t string) (refresh string) {
	op.mu.Lock()
	defer op.mu.Unlock()
	op.tokens.Put(access, &grant{req: g.req, user: g.user, sid: g.sid, authTime: g.authTime, jkt: jkt, x5t: x5t}, now.Add(tokenTTL))
	if g.req.accessType == "offline" || slices.Contains(strings.Fields(g.req.scope), "offline_access") {
		refresh = endpoint.Random(32)
		op.refresh.Put(refresh, &grant{req: g.req, user: g.user, sid: g.sid, authTime: g.authTime, jkt: jkt}, now.Add(sessionTTL))
	}
	return refresh
}

// refreshGrant trades a refresh token for new tokens and a new refresh
// token; the old one is spent (rotation), and a refresh token of a
// session that ended is refused. A refresh token bound to a DPoP key
// takes a proof of that key (RFC 9449 5 binds only public clients'; the
// provider binds every client's, so tests see the same key used months
// later).
func (op *OP) refreshGrant(w http.ResponseWriter, r *http.Request) {
	f := r.PostForm
	now := op.now()
	op.mu.Lock()
	g, ok := op.refresh.Get(f.Get("refresh_token"))
	op.mu.Unlock()
	bound := ""
	if ok {
		bound = g.jkt
	}
	jkt, perr := op.tokenProof(r, bound)
	if perr != nil {
		op.asProofError(w, perr)
		return
	}
	op.mu.Lock()
	g, ok = op.refresh.Take(f.Get("refresh_token"))
	_, live := op.sessions.Get(g.sidOrEmpty())
	op.mu.Unlock()
	if !ok || !live {
		tokenError(w, http.StatusBadRequest, "invalid_grant")
		return
	}
	op.issueTokens(w, g, now, false, jkt, op.certificateBound(r))
}

func (g *grant) sidOrEmpty() string {
	if g == nil {
		return ""
	}
	return g.sid
}

// pkceMatches checks RFC 7636 4.6 for S256.
func pkceMatches(verifier, challenge string) bool {
	if len(verifier) < 43 || len(verifier) > 128 {
		return false
	}
	sum := sha256.Sum256([]byte(verifier))
	return subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(sum[:])), []byte(challenge)) == 1
}

// profileClaims are the user's claims in the ID token or UserInfo.
func profileClaims(u User, scope string) map[string]any {
	c := map[string]any{}
	scopes := strings.Fields(scope)
	if slices.Contains(scopes, "email") && u.Email != "" {
		c["email"] = u.Email
		c["email_verified"] = u.EmailVerified
	}
	if slices.Contains(scopes, "profile") {
		for k, v := range map[string]string{
			"name": u.Name, "given_name": u.GivenName, "family_name": u.FamilyName,
			"preferred_username": u.PreferredUsername, "picture": u.Picture,
		} {
			if v != "" {
				c[k] = v
			}
		}
	}
	if u.HostedDomain != "" {
		c["hd"] = u.HostedDomain
	}
	return c
}

func (op *OP) idToken(g *grant, accessToken string, now time.Time) (string, error) {
	claims := map[string]any{
		"iss":     op.issuerOf(g.user),
		"sub":     g.user.Sub,
		"aud":     op.cfg.ClientID,
		"iat":     now.Unix(),
		"exp":     now.Add(tokenTTL).Unix(),
		"at_hash": atHash(accessToken),
	}
	if g.req.nonce != "" {
		claims["nonce"] = g.req.nonce
	}
	if g.sid != "" && !op.cfg.GoogleClaims {
		claims["sid"] = g.sid
	}
	if op.cfg.GoogleClaims {
		claims["azp"] = op.cfg.ClientID
	}
	// auth_time is sent when max_age asks for it (OIDC Core 3.1.2.1).
	if g.req.maxAge >= 0 && !g.authTime.IsZero() {
		claims["auth_time"] = g.authTime.Unix()
		if op.fault(OldAuthTime) {
			claims["auth_time"] = g.authTime.Add(-2 * time.Hour).Unix()
		}
	}
	if op.fault(FutureAuthTime) {
		claims["auth_time"] = now.Add(24 * time.Hour).Unix()
	}
	if len(g.req.acrValues) > 0 {
		// The provider can authenticate at any level asked for: it
		// asserts the one preferred.
		claims["acr"] = g.req.acrValues[0]
		if op.fault(WeakACR) {
			claims["acr"] = WeakACRValue
		}
	}
	op.answered(claims)
	if !op.cfg.SparseIDToken && !op.fault(UserInfoSubMismatch) {
		for k, v := range profileClaims(g.user, g.req.scope) {
			claims[k] = v
		}
	}
	if op.cfg.Claims != nil {
		op.cfg.Claims(g.user, g.req.scope, claims)
	}
	op.mu.Lock()
	faults := maps.Clone(op.faults)
	key := op.keys[op.active]
	op.mu.Unlock()
	switch {
	case faults[WrongIssuer]:
		claims["iss"] = "https://evil.example"
	case faults[WrongAudience]:
		claims["aud"] = "someone-else"
	case faults[ExtraAudience]:
		claims["aud"] = []string{op.cfg.ClientID, "untrusted-client"}
	case faults[ExtraAudienceWithAzp]:
		claims["aud"] = []string{op.cfg.ClientID, "untrusted-client"}
		claims["azp"] = op.cfg.ClientID
	case faults[MissingSub]:
		delete(claims, "sub")
	case faults[MissingIAT]:
		delete(claims, "iat")
	case faults[BadNonce]:
		claims["nonce"] = "not-" + g.req.nonce
	case faults[BadAtHash]:
		claims["at_hash"] = atHash("another access token")
	case faults[Expired]:
		claims["iat"] = now.Add(-2 * time.Hour).Unix()
		claims["exp"] = now.Add(-time.Hour).Unix()
	}
	header := map[string]any{"typ": "JWT", "alg": key.alg, "kid": key.kid}
	switch {
	case faults[NoKid]:
		delete(header, "kid")
	case faults[UnknownKid]:
		header["kid"] = "ghost-" + key.kid
	case faults[AlgNone]:
		header["alg"] = "none"
	case faults[HS256PublicKey]:
		header["alg"] = "HS256"
	}
	signingInput, err := encodeParts(header, claims)
	if err != nil {
		return "", err
	}
	var sig []byte
	switch {
	case faults[AlgNone]:
		sig = nil
	case faults[HS256PublicKey]:
		der, err := x509.MarshalPKIXPublicKey(key.priv.Public())
		if err != nil {
			return "", err
		}
		mac := hmac.New(sha256.New, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
		mac.Write([]byte(signingInput))
		sig = mac.Sum(nil)
	default:
		if sig, err = sign(key, signingInput); err != nil {
			return "", err
		}
	}
	if faults[BadSignature] {
		sig[len(sig)/2] ^= 0x5a
	}
	return op.encryptIDToken(signingInput + "." + base64.RawURLEncoding.EncodeToString(sig))
}

// encryptIDToken encrypts a signed ID token (or logout token) to the
// client when IDTokenEncryption says so.
func (op *OP) encryptIDToken(signed string) (string, error) {
	if op.cfg.IDTokenEncryption.Alg == "" {
		return signed, nil
	}
	return op.encryptToClient([]byte(signed), op.cfg.IDTokenEncryption, "JWT")
}

// SignJWT signs claims with the active key as the provider signs its
// tokens (typ JWT, its alg and kid), for tests that forge a token the
// provider never issued. Entries of header are added to the protected
// header; a nil value removes one.
func (op *OP) SignJWT(header, claims map[string]any) (string, error) {
	op.mu.Lock()
	key := op.keys[op.active]
	op.mu.Unlock()
	h := map[string]any{"typ": "JWT", "alg": key.alg, "kid": key.kid}
	for k, v := range header {
		if v == nil {
			delete(h, k)
		} else {
			h[k] = v
		}
	}
	input, err := encodeParts(h, claims)
	if err != nil {
		return "", err
	}
	sig, err := sign(key, input)
	if err != nil {
		return "", err
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

func encodeParts(header, claims map[string]any) (string, error) {
	h, err := json.Marshal(header)
	if err != nil {
		return "", err
	}
	c, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c), nil
}

func sign(k *signingKey, input string) ([]byte, error) {
	sum := sha256.Sum256([]byte(input))
	switch priv := k.priv.(type) {
	case *rsa.PrivateKey:
		if k.alg == "PS256" {
			return rsa.SignPSS(rand.Reader, priv, crypto.SHA256, sum[:], &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
		}
		return rsa.SignPKCS1v15(rand.Reader, priv, crypto.SHA256, sum[:])
	case *ecdsa.PrivateKey:
		r, s, err := ecdsa.Sign(rand.Reader, priv, sum[:])
		if err != nil {
			return nil, err
		}
		out := make([]byte, 64)
		r.FillBytes(out[:32])
		s.FillBytes(out[32:])
		return out, nil
	}
	return nil, fmt.Errorf("oidcop: key type %T", k.priv)
}

// atHash is OIDC Core 3.1.3.6's at_hash for the SHA-256 algorithms.
func atHash(accessToken string) string {
	sum := sha256.Sum256([]byte(accessToken))
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

func (op *OP) userinfo(w http.ResponseWriter, r *http.Request) {
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	op.mu.Lock()
	g, found := op.tokens.Get(token)
	op.mu.Unlock()
	if !found || !(strings.EqualFold(scheme, "Bearer") || strings.EqualFold(scheme, "DPoP")) {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_token"})
		return
	}
	// A certificate-bound token is taken only over a connection that
	// presents the certificate (RFC 8705 3).
	if g.x5t != "" && !presentsBound(r, g.x5t) {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_token"})
		return
	}
	// A DPoP-bound token is taken with the DPoP scheme and a proof of
	// its key only (RFC 9449 7.1); presented as Bearer it is refused.
	if g.jkt != "" || strings.EqualFold(scheme, "DPoP") {
		jkt, perr := op.checkProof(r, UserInfo, op.requestURL(r), token)
		switch {
		case perr != nil:
			op.rsProofError(w, perr.code)
			return
		case !strings.EqualFold(scheme, "DPoP") || jkt == "" || jkt != g.jkt:
			op.rsProofError(w, "invalid_token")
			return
		}
	}
	claims := profileClaims(g.user, g.req.scope)
	claims["sub"] = g.user.Sub
	if op.fault(UserInfoSubMismatch) {
		claims["sub"] = "someone-else-" + g.user.Sub
	}
	if op.cfg.UserInfoEncryption.Alg != "" {
		body, _ := json.Marshal(claims)
		jwe, err := op.encryptToClient(body, op.cfg.UserInfoEncryption, "")
		if err != nil {
			http.Error(w, "cannot encrypt to the client", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/jwt")
		w.Header().Set("Cache-Control", "no-store")
		io.WriteString(w, jwe)
		return
	}
	writeJSON(w, http.StatusOK, claims)
}
