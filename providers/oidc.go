package providers

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
	"golang.org/x/oauth2"

	"github.com/extauth/extauth/internal/outbound"
	"github.com/extauth/extauth/internal/telemetry"
)

// Client authentication methods at the token endpoint (OIDC Core 9).
const (
	// AuthMethodBasic sends the client ID and secret in the Authorization
	// header, each form-urlencoded first (RFC 6749 2.3.1).
	AuthMethodBasic = "client_secret_basic"
	// AuthMethodPost sends them as client_id and client_secret form fields.
	AuthMethodPost = "client_secret_post"
)

// Defaults of OIDCOptions.
const (
	DefaultOIDCClockSkew          = 60 * time.Second
	DefaultOIDCDiscoveryRetryMin  = time.Second
	DefaultOIDCDiscoveryRetryMax  = time.Minute
	DefaultOIDCKeyRefreshInterval = 10 * time.Second
	DefaultOIDCLogoutTokenMaxAge  = 5 * time.Minute
)

// Bounds of the discovery document's lifetime: the provider's Cache-Control
// max-age (or Expires) within them, MaxOIDCDiscoveryRefresh when it names
// none. A provider that forbids caching is still read at most hourly: each
// sign-in refetching discovery would be a request per sign-in.
const (
	MinOIDCDiscoveryRefresh = time.Hour
	MaxOIDCDiscoveryRefresh = 24 * time.Hour
)

// asymmetricAlgs is the algorithm allow-list ID tokens may be signed with.
// "none" and the HMAC algorithms are never accepted: an HS256 token keyed
// with the provider's public key would otherwise verify.
var asymmetricAlgs = []string{
	oidc.RS256, oidc.RS384, oidc.RS512,
	oidc.PS256, oidc.PS384, oidc.PS512,
	oidc.ES256, oidc.ES384, oidc.ES512,
	oidc.EdDSA,
}

// reservedAuthParams are the authorization request parameters extauth sets
// itself; AuthParams may not override them. response_mode is among them
// because form_post returns cross-site, without the SameSite=Lax cookie.
var reservedAuthParams = []string{
	"response_type", "client_id", "redirect_uri", "scope", "state", "nonce",
	"code_challenge", "code_challenge_method", "response_mode", "request", "request_uri",
}

// OIDCOptions tunes the OpenID Connect strategies (oidc, and search_oauth2,
// which runs on the same code). The zero value is ready to use.
type OIDCOptions struct {
	// Scopes requested; default "openid email profile". "openid" is added
	// when missing.
	Scopes []string
	// AuthMethod is how the client authenticates at the token endpoint
	// (and at the pushed authorization request and revocation endpoints):
	// AuthMethodBasic, AuthMethodPost, AuthMethodSecretJWT or
	// AuthMethodPrivateKeyJWT. Empty chooses from discovery:
	// client_secret_basic unless the provider supports only
	// client_secret_post. A method set here must be one the provider lists
	// in token_endpoint_auth_methods_supported, when it publishes the list.
	AuthMethod string
	// AssertionAudience is the aud of client assertions (the JWT methods):
	// OIDCAudienceIssuer (the default) or OIDCAudienceTokenEndpoint, only
	// for a provider that accepts nothing else (see its risk there).
	AssertionAudience string
	// AssertionSigningAlg signs client assertions
	// (token_endpoint_auth_signing_alg): PS256, RS256 or ES256 with the
	// private key, HS256, HS384 or HS512 with the secret. Empty picks the
	// first the provider advertises: PS256 then RS256 for an RSA key,
	// ES256 for an EC key, HS256 for the secret.
	AssertionSigningAlg string
	// PushedAuthorization sends each authorization request to the
	// provider's pushed authorization request endpoint first (RFC 9126)
	// and the browser with only its request_uri. It is on by itself when
	// discovery says require_pushed_authorization_requests.
	PushedAuthorization bool
	// RequestObject sends the authorization request as a request object
	// signed with the private key (RFC 9101): pushed with
	// PushedAuthorization, else by value in the authorization URL.
	RequestObject bool
	// RequestObjectSigningAlg signs request objects
	// (request_object_signing_alg); empty picks as AssertionSigningAlg
	// does for the key.
	RequestObjectSigningAlg string
	// IDTokenEncryption is the encryption registered for ID tokens
	// (id_token_encrypted_response_alg and _enc). When set, ID tokens
	// (and logout tokens, which may be) are decrypted with the private key
	// and then verified as ever, and an ID token that is not encrypted is
	// refused.
	IDTokenEncryption OIDCEncryption
	// UserInfoEncryption is the encryption registered for UserInfo
	// (userinfo_encrypted_response_alg and _enc); an answer that is not
	// encrypted is then refused.
	UserInfoEncryption OIDCEncryption
	// DPoP binds the tokens to a key made for each sign-in (RFC 9449):
	// the pushed authorization request, the token, UserInfo and
	// revocation requests each carry a proof signed with it, and the
	// provider must answer with token_type DPoP. The key is handed over
	// with the tokens (Tokens.DPoPKey) for renewals and API calls.
	DPoP bool
	// DPoPSigningAlg signs the proofs (dpop_signing_alg): ES256 (the
	// default), PS256 or EdDSA. It must be one the provider lists in
	// dpop_signing_alg_values_supported, when it publishes the list.
	DPoPSigningAlg string
	// ResponseMode ResponseModeJWT (response_mode: jwt) asks for
	// JWT-secured authorization responses (JARM): the callback's response
	// JWT is verified (signature with the provider's keys, iss, aud, exp,
	// state) before its code is used, and a response that is not one is
	// refused.
	ResponseMode string
	// Profile enforces a security profile's client rules (profile):
	// OIDCProfileFAPI2 or OIDCProfileFAPI2MessageSigning, whose doc
	// comments say what each implies and requires. NewOIDC and
	// CheckOIDCConfig refuse settings the profile forbids.
	Profile string
	// SigningAlgs is the ID token algorithm allow-list. Empty means every
	// asymmetric algorithm the provider advertises; none and HS* are
	// refused whatever is set here.
	SigningAlgs []string
	// TrustedAudiences are other clients an ID token may also be issued to.
	// A token with several audiences must then name us as its authorized
	// party (azp). Any audience not listed here is refused (OIDC Core
	// 3.1.3.7 step 3).
	TrustedAudiences []string
	// Prompt is sent as the prompt parameter (none, login, consent,
	// select_account) when set.
	Prompt string
	// AuthParams are extra authorization request parameters (acr_values,
	// max_age, ui_locales, login_hint...). The protocol's own parameters
	// cannot be overridden. With acr_values, the ID token's acr must be
	// one of the values asked for; with max_age (whole seconds), its
	// auth_time must be at most that old (OIDC Core 3.1.3.7 steps 12 and
	// 13): otherwise the sign-in fails with
	// CodeInsufficientAuthentication.
	AuthParams map[string]string
	// RequestOptions are the per-request sign-in options the start route
	// takes for this provider, of OIDCRequestOptions(); none when empty.
	// oidc_additional_settings.request_options sets it. A per-request
	// acr_values (or level) must lie within a configured acr_values; the
	// smaller of two max_age wins; the others replace the configured ones.
	RequestOptions []string
	// AssuranceLevels maps each of the host's assurance levels to the acr
	// values that meet it (oidc_additional_settings.assurance_levels):
	// what the level option asks for, and Auth.Assure checks.
	AssuranceLevels map[string][]string
	// ClockSkew is tolerated on exp and iat; default 60 s.
	ClockSkew time.Duration
	// DiscoveryRetryMin and DiscoveryRetryMax bound the back-off between
	// discovery attempts while the provider cannot be reached (or, once a
	// copy is held, while refreshing it fails): the wait doubles from the
	// first to the second. Defaults 1 s and 1 min.
	DiscoveryRetryMin time.Duration
	DiscoveryRetryMax time.Duration
	// KeyRefreshInterval is the least time between two fetches of the key
	// set, which happen when a token names a key we do not hold; default
	// 10 s.
	KeyRefreshInterval time.Duration
	// LogoutTokenMaxAge is how old (by its iat) a back-channel logout
	// token may be, beyond ClockSkew; default 5 min. Its jti is remembered
	// for that long, so a replay inside the window is refused too.
	LogoutTokenMaxAge time.Duration

	// Preset shapes the client for one provider as organisations deploy
	// it (preset): OIDCPresetEntra, OIDCPresetOkta, OIDCPresetAuth0 or
	// OIDCPresetGoogleWorkspace, whose doc comments say what each
	// implies; OIDCConfig.PresetRules lists it.
	Preset string
	// Tenants are the Entra ID tenants whose users may sign in through a
	// multi-tenant authority, common or organizations (tenants): their
	// tenant IDs, "consumers" for personal Microsoft accounts (common
	// only), or OIDCAnyTenant alone for every tenant. Required for those
	// authorities; a one-tenant authority admits its own tenant only.
	Tenants []string
	// HostedDomain is the Google Workspace domain whose users may sign in
	// (hosted_domain), or "*" for any Workspace domain: sent as hd and
	// checked in the ID token's hd claim. Required by
	// OIDCPresetGoogleWorkspace.
	HostedDomain string
	// GroupsClaim and RolesClaim name the ID token claims read into
	// Identity.Directory's Groups and Roles (groups_claim, roles_claim):
	// groups and roles with OIDCPresetEntra, groups with OIDCPresetOkta,
	// a namespaced claim of your Auth0 Action with OIDCPresetAuth0.
	GroupsClaim string
	RolesClaim  string
	// GroupsOverage says what an Entra ID groups overage becomes
	// (groups_overage): GroupsOverageGraph (the default),
	// GroupsOverageGraphTransitive or GroupsOverageReport.
	GroupsOverage string
	// GraphURL is Microsoft Graph's base URL (graph_url); the discovery
	// document's msgraph_host (https://graph.microsoft.com in the public
	// cloud) when empty. Only the access token's own resource should be
	// named: the token is sent there.
	GraphURL string
	// GraphTimeout bounds the resolution of a groups overage, all its
	// pages together; default DefaultGraphTimeout.
	GraphTimeout time.Duration
}

// OIDCConfig registers extauth as a client of an OpenID Connect provider
// (oidc_client_id, oidc_client_secret, oidc_issuer, and the keys of
// oidc_additional_settings).
type OIDCConfig struct {
	ClientID string
	// ClientSecret is required but with AuthMethodPrivateKeyJWT.
	ClientSecret string `redact:"secret"`
	// Issuer is the provider's issuer identifier. Discovery is read from
	// Issuer + "/.well-known/openid-configuration" and must name exactly
	// this issuer.
	Issuer string
	// PrivateKey is the client's private key, PEM (see
	// ParseOIDCPrivateKey: RSA of 2048 bits or more, or EC P-256). It
	// signs client assertions (AuthMethodPrivateKeyJWT) and request
	// objects, and decrypts encrypted ID tokens and UserInfo. Its public
	// half is served at the JWKS route.
	PrivateKey string `redact:"secret"`
	// NextPrivateKey is a key being rotated in: published at the JWKS
	// route beside PrivateKey for signing only, so that the provider
	// knows it before it signs anything, and used to decrypt, never to
	// sign. Once the provider has read it, it becomes PrivateKey, and
	// PrivateKey becomes OldPrivateKey.
	NextPrivateKey string `redact:"secret"`
	// OldPrivateKey is the retiring key after a promotion: it decrypts
	// what a provider that has not read the JWKS since still encrypts to
	// it, never signs, and is published for signing only (what it signed
	// before the promotion still verifies), so that a provider that reads
	// the set encrypts to PrivateKey. Remove it once the provider has.
	OldPrivateKey string `redact:"secret"`
	// TLSCertificate and TLSKey are the client's TLS certificate and its
	// private key, PEM (mutual TLS, RFC 8705): presented to the provider
	// and to the resource servers the API client calls, so that the
	// provider can authenticate the client by it (AuthMethodTLS,
	// AuthMethodSelfSignedTLS) and bind the access tokens to it.
	TLSCertificate string
	TLSKey         string `redact:"secret"`
	// NextTLSCertificate and NextTLSKey are a certificate being rotated
	// in: published at the JWKS route beside TLSCertificate (for
	// self_signed_tls_client_auth), not yet presented. Once the provider
	// has read it, it becomes TLSCertificate.
	NextTLSCertificate string
	NextTLSKey         string `redact:"secret"`
	// Federation, when set, makes the client a relying party of an
	// OpenID Federation: Issuer is then the provider's entity identifier,
	// whose trust chain replaces its discovery document (see
	// OIDCFederation).
	Federation *OIDCFederation
	Options    OIDCOptions
}

// OIDC signs users in with an OpenID Connect provider: discovery, the
// authorization code flow with state, PKCE S256 and nonce, a verified ID
// token and, when it lacks the email or name, the UserInfo endpoint.
//
// Discovery and the provider's keys are fetched on first use and cached, so
// the application starts while the provider is down; until discovery
// succeeds Begin and Complete fail with CodeProviderUnavailable, and attempts
// are spaced by a back-off rather than made on every request. Once held,
// the discovery document is refreshed in the background when its lifetime
// (Cache-Control, between MinOIDCDiscoveryRefresh and
// MaxOIDCDiscoveryRefresh) ends, so endpoints and a jwks_uri the provider
// moves are followed; a refresh that fails keeps the last good copy. Close
// stops the refresh timer.
type OIDC struct {
	name         string
	clientID     string
	clientSecret string
	issuer       string
	callbackURL  string
	client       *http.Client
	now          func() time.Time
	log          *slog.Logger
	// store makes logout tokens single use.
	store     Store
	rsaKeygen keygenGate
	opts      OIDCOptions
	scopes    []string
	audiences map[string]bool
	// authParams are added to every authorization request.
	authParams []oauth2.AuthCodeOption
	// check runs after the standard ID token checks (search_oauth2's hd).
	check func(claims *idClaims) error
	// entra is an Entra ID client's authority and the tenants it admits,
	// nil without preset entra.
	entra *entraPolicy
	// keys are the client's private keys, each of which decrypts: the one
	// that signs (private_key) first, then the next and the retiring ones
	// of a rotation.
	keys []*clientKey
	// tls are the client's TLS certificates, the one presented first.
	tls []*tlsPair
	// oldKey is the retiring key of a rotation (private_key_old), nil
	// when there is none; oldUsed rate-limits the log line that says the
	// provider still encrypts to it: the Unix nanoseconds of the last.
	oldKey  *clientKey
	oldUsed atomic.Int64
	// jwks is the public key set the JWKS route serves; routes maps the
	// route to its handler (oidc only).
	jwks   []byte
	routes map[string]http.Handler
	// nonces are the DPoP nonces of the provider's and resource servers'
	// origins.
	nonces nonceCache
	// acrValues and maxAge are what the authorization request asks of the
	// authentication (OIDC Core 3.1.2.1); maxAge < 0 when it asks nothing.
	acrValues []string
	maxAge    time.Duration
	// userInfoClaims: the claims parameter asks for UserInfo claims (OIDC
	// Core 5.5), which only UserInfo answers, as SPID and CIE providers
	// release attributes.
	userInfoClaims bool

	// fed is the federation state, nil without one.
	fed *federation

	disc atomic.Pointer[discovered]

	mu          sync.Mutex
	inflight    chan struct{}
	failures    int
	nextAttempt time.Time
	lastErr     *Error
	// fetched and failedAt are when discovery last succeeded and failed
	// (DiscoveryStatus).
	fetched, failedAt time.Time
	// timer refreshes a held copy when it is due, even with no sign-in to
	// notice; closed stops it for good.
	timer  *time.Timer
	closed bool
}

// discovered is what discovery yields, immutable once built.
type discovered struct {
	// issuer is the discovery document's: the configured one, but for
	// an Entra ID authority (entra).
	issuer string
	// entra is an Entra ID discovery document's issuer, whose tenant
	// each token's tid names; nil for other providers.
	entra *entraIssuer
	// graphHost is the discovery document's msgraph_host (Entra ID), ""
	// when it names none.
	graphHost   string
	oauth       oauth2.Config
	keys        *keySet
	userInfoURL string
	// issRequired: the provider advertises RFC 9207's iss parameter, so an
	// authorization response without it is refused.
	issRequired bool
	// endSession is the end_session_endpoint, "" when there is none.
	endSession string
	// refreshAt is when the copy is due for a refresh.
	refreshAt time.Time

	// method is the client authentication method.
	method string
	// tokenClient makes the requests to the token, pushed authorization
	// request, revocation and UserInfo endpoints: the bounded client,
	// which with a JWT method adds a client assertion to each but
	// UserInfo's, and under a DPoP key (withDPoP) a proof to each.
	tokenClient *http.Client
	// assertionSigner signs client assertions (JWT methods only),
	// requestSigner request objects (nil: none are sent).
	assertionSigner jose.Signer
	requestSigner   jose.Signer
	// par sends authorization requests to parURL first.
	par    bool
	parURL string
	// jarmAlgs are the algorithms a JWT-secured authorization response
	// may be signed with.
	jarmAlgs []jose.SignatureAlgorithm
	// revocationURL is the revocation_endpoint, "" when there is none.
	revocationURL string
}

// NewOIDC returns the oidc strategy. It makes no request: discovery happens
// on the first sign-in (or Discover).
func NewOIDC(c OIDCConfig, env Env) (*OIDC, error) {
	return newOIDC("oidc", c, env)
}

// settingNames are the secrets file keys behind a strategy's OIDCConfig,
// for error messages.
type settingNames struct{ id, secret, issuer string }

func settingsOf(name string) settingNames {
	if name == "search_oauth2" {
		return settingNames{"search_oauth2_key", "search_oauth2_secret", "search_oauth2_site"}
	}
	return settingNames{"oidc_client_id", "oidc_client_secret", "oidc_issuer"}
}

func newOIDC(name string, c OIDCConfig, env Env) (*OIDC, error) {
	keys := settingsOf(name)
	if name != "oidc" && c.Options.Preset != "" {
		return nil, fmt.Errorf("%s: presets are for the oidc provider only", name)
	}
	c.Issuer = presetIssuer(c)
	if c.Federation != nil {
		if name != "oidc" {
			return nil, fmt.Errorf("%s: a federation is for the oidc provider only", name)
		}
		f := *c.Federation
		c.Federation = &f
		if err := federationDefaults(&c, &c.Options, strings.TrimSuffix(env.CallbackURL, "/callback")); err != nil {
			return nil, err
		}
	}
	o := c.profileOptions()
	if name != "oidc" && (o.hasHighAssurance() || c.PrivateKey != "" || c.NextPrivateKey != "" || c.OldPrivateKey != "" || c.TLSCertificate != "" || c.TLSKey != "") {
		return nil, fmt.Errorf("%s: client assertions, private keys, pushed and signed requests, encryption and DPoP are for the oidc provider only", name)
	}
	if c.ClientID == "" || (c.ClientSecret == "" && o.AuthMethod != AuthMethodPrivateKeyJWT && !tlsMethod(o.AuthMethod)) {
		return nil, fmt.Errorf("%s and %s are required", keys.id, keys.secret)
	}
	if err := checkIssuer(c.Issuer); err != nil {
		return nil, fmt.Errorf("%s %q: %w", keys.issuer, c.Issuer, err)
	}
	if env.CallbackURL == "" || env.HTTPClient == nil {
		return nil, errors.New("the environment needs a callback URL and an HTTP client")
	}
	if ps := CheckOIDCConfig(c); len(ps) > 0 {
		errs := make([]error, len(ps))
		for i, p := range ps {
			errs[i] = p
		}
		return nil, errors.Join(errs...)
	}
	for _, a := range o.SigningAlgs {
		if !slices.Contains(asymmetricAlgs, a) {
			return nil, fmt.Errorf("signing algorithm %q is not allowed: ID tokens must be signed with an asymmetric algorithm", a)
		}
	}
	if o.ClockSkew <= 0 {
		o.ClockSkew = DefaultOIDCClockSkew
	}
	if o.DiscoveryRetryMin <= 0 {
		o.DiscoveryRetryMin = DefaultOIDCDiscoveryRetryMin
	}
	if o.DiscoveryRetryMax < o.DiscoveryRetryMin {
		o.DiscoveryRetryMax = max(DefaultOIDCDiscoveryRetryMax, o.DiscoveryRetryMin)
	}
	if o.KeyRefreshInterval <= 0 {
		o.KeyRefreshInterval = DefaultOIDCKeyRefreshInterval
	}
	if o.LogoutTokenMaxAge <= 0 {
		o.LogoutTokenMaxAge = DefaultOIDCLogoutTokenMaxAge
	}
	if o.DPoP && o.DPoPSigningAlg == "" {
		o.DPoPSigningAlg = DefaultDPoPSigningAlg
	}
	o.IDTokenEncryption = o.IDTokenEncryption.withDefault()
	o.UserInfoEncryption = o.UserInfoEncryption.withDefault()
	scopes := o.Scopes
	if len(scopes) == 0 {
		scopes = []string{oidc.ScopeOpenID, oidc.ScopeEmail, oidc.ScopeProfile}
	} else if !slices.Contains(scopes, oidc.ScopeOpenID) {
		scopes = append([]string{oidc.ScopeOpenID}, scopes...)
	}
	s := &OIDC{
		name:         name,
		clientID:     c.ClientID,
		clientSecret: c.ClientSecret,
		issuer:       c.Issuer,
		callbackURL:  env.CallbackURL,
		client:       env.HTTPClient,
		store:        env.Store,
		now:          env.Now,
		log:          env.Logger,
		opts:         o,
		scopes:       scopes,
		audiences:    map[string]bool{c.ClientID: true},
		maxAge:       -1,
		rsaKeygen:    newKeygenGate(o.DPoPSigningAlg),
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	for _, pair := range [][2]string{{c.TLSCertificate, c.TLSKey}, {c.NextTLSCertificate, c.NextTLSKey}} {
		if pair[0] != "" {
			p, certErr, keyErr := parseTLSPair(pair[0], pair[1])
			if err := errors.Join(certErr, keyErr); err != nil {
				return nil, err
			}
			s.tls = append(s.tls, p)
		}
	}
	if len(s.tls) > 0 {
		client, err := outbound.WithClientCertificate(s.client, s.clientCertificate)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", settingTLSCert, err)
		}
		s.client = client
	}
	ckeys, keyWarnings, err := clientKeys(c)
	if err != nil {
		return nil, err
	}
	// The logger names the provider (and the tenant) already. The
	// warnings name entries of oidc_additional_settings: search_oauth2
	// has none (its parameters come from the host's code).
	if name == "oidc" {
		keyWarnings = append(startupWarnings(c, o), keyWarnings...)
	}
	for _, w := range keyWarnings {
		s.log.Warn("extauth: " + w)
	}
	for _, k := range ckeys {
		s.keys = append(s.keys, k.key)
		if k.setting == settingPrivateKeyOld {
			s.oldKey = k.key
		}
	}
	if s.jwks, err = jwks(ckeys, s.tlsJWKs(), encAlgs(o)); err != nil {
		return nil, err
	}
	if name == "oidc" {
		s.routes = map[string]http.Handler{PurposeJWKS: http.HandlerFunc(s.serveJWKS)}
	}
	if c.Federation != nil {
		if s.fed, err = newFederation(s, c.Federation); err != nil {
			return nil, err
		}
		s.routes[PurposeFederation] = http.HandlerFunc(s.serveEntityConfiguration)
	}
	for _, a := range o.TrustedAudiences {
		s.audiences[a] = true
	}
	if o.Prompt != "" {
		s.authParams = append(s.authParams, oauth2.SetAuthURLParam("prompt", o.Prompt))
	}
	for _, k := range sortedKeys(o.AuthParams) {
		if slices.Contains(reservedAuthParams, k) || k == "prompt" && o.Prompt != "" {
			return nil, fmt.Errorf("authorization parameter %q is set by extauth", k)
		}
		s.authParams = append(s.authParams, oauth2.SetAuthURLParam(k, o.AuthParams[k]))
	}
	if err := s.applyPreset(); err != nil {
		return nil, err
	}
	s.acrValues = strings.Fields(o.AuthParams["acr_values"])
	var claims map[string]json.RawMessage
	s.userInfoClaims = json.Unmarshal([]byte(o.AuthParams["claims"]), &claims) == nil && claims["userinfo"] != nil
	if ma, ok := o.AuthParams["max_age"]; ok {
		s.maxAge, _ = maxAge(ma) // CheckOIDCConfig has held it to the rule
	}
	return s, nil
}

// OIDCAudienceTokenWarning is the warning, at start-up and in extauth
// check, about client assertions with the token endpoint as audience.
const OIDCAudienceTokenWarning = "client assertions name the token endpoint as their audience (client_assertion_audience: token_endpoint), " +
	"which only a provider that refuses its issuer identifier needs: an assertion is valid wherever that URL is accepted, " +
	"so a provider whose discovery names another server's token endpoint can collect assertions for it " +
	"(audience injection); remove the setting unless the provider requires it"

// PurposeJWKS is the Route.Purpose of the oidc strategy's JWKS route,
// /users/auth/oidc/jwks.
const PurposeJWKS = "jwks"

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// checkIssuer accepts an https URL without query or fragment (OIDC
// Discovery 2), or plain http on a loopback host for development.
func checkIssuer(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return errors.New("must be an absolute URL without query, fragment or user")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if outbound.IsLoopback(u.Hostname()) {
			return nil
		}
	}
	return errors.New("must be https (plain http only on a loopback host)")
}

// Name returns the provider slug, "oidc" (or "search_oauth2").
func (s *OIDC) Name() string { return s.name }

// Issuer returns the configured issuer identifier.
func (s *OIDC) Issuer() string { return s.issuer }

// DisplayName is what people call the provider: Google for Google's
// issuer, else the host name of the issuer.
func (s *OIDC) DisplayName() string {
	switch {
	case s.issuer == GoogleIssuer || s.opts.Preset == OIDCPresetGoogleWorkspace:
		return "Google"
	case s.opts.Preset == OIDCPresetEntra:
		return "Microsoft"
	}
	return hostName(s.issuer)
}

// Discover fetches the discovery document now if it is not cached yet, for
// hosts that want to warm up or report readiness. It obeys the back-off like
// a sign-in would.
func (s *OIDC) Discover(ctx context.Context) error {
	_, err := s.provider(ctx)
	return err
}

// Close stops the background refresh of the discovery document. The
// strategy keeps working on the copy it holds.
func (s *OIDC) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
	}
	return nil
}

// provider returns the discovered provider, fetching discovery if it is not
// cached yet. At most one attempt is in flight; after a failure the next one
// waits for a doubling back-off, and callers in between get the last error.
// A copy past its lifetime is returned at once while a refresh starts in
// the background.
func (s *OIDC) provider(ctx context.Context) (*discovered, error) {
	if d := s.disc.Load(); d != nil {
		if !s.now().Before(d.refreshAt) {
			s.refresh()
		}
		return d, nil
	}
	s.mu.Lock()
	if d := s.disc.Load(); d != nil {
		s.mu.Unlock()
		return d, nil
	}
	if s.inflight == nil {
		if s.lastErr != nil && s.now().Before(s.nextAttempt) {
			err := s.lastErr
			s.mu.Unlock()
			return nil, err
		}
		s.inflight = make(chan struct{})
		// The attempt outlives a caller that gives up, so the callers
		// waiting with it still get its result; the client's time-out
		// bounds it.
		go s.discover(context.WithoutCancel(ctx), s.inflight)
	}
	done := s.inflight
	s.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return nil, s.providerError(TransportError(ctx.Err(), "discovery"))
	}
	if d := s.disc.Load(); d != nil {
		return d, nil
	}
	s.mu.Lock()
	err := s.lastErr
	s.mu.Unlock()
	return nil, err
}

// refresh starts a background refresh of the held copy unless one is under
// way, the strategy is closed, or the last one failed too recently.
func (s *OIDC) refresh() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight != nil || s.closed || s.now().Before(s.nextAttempt) {
		return
	}
	s.inflight = make(chan struct{})
	go s.discover(context.Background(), s.inflight)
}

func (s *OIDC) discover(ctx context.Context, done chan struct{}) {
	old := s.disc.Load()
	d, err := s.fetchDiscovery(ctx, old)
	s.mu.Lock()
	var wait time.Duration
	if err == nil {
		s.disc.Store(d)
		s.lastErr, s.failures, s.nextAttempt = nil, 0, time.Time{}
		s.fetched = s.now()
		wait = d.refreshAt.Sub(s.now())
		switch {
		case old == nil:
			s.log.Info("extauth: OpenID Connect discovery done", "issuer", s.issuer, "next_refresh", wait.Round(time.Second).String())
		case d.changedFrom(old):
			s.log.Info("extauth: OpenID Connect discovery refreshed: the provider's endpoints changed", "issuer", s.issuer, "next_refresh", wait.Round(time.Second).String())
		default:
			s.log.Debug("extauth: OpenID Connect discovery refreshed", "next_refresh", wait.Round(time.Second).String())
		}
	} else {
		s.lastErr = s.providerError(err)
		s.failures++
		s.failedAt = s.now()
		wait = s.opts.DiscoveryRetryMin << min(s.failures-1, 30)
		if wait <= 0 || wait > s.opts.DiscoveryRetryMax {
			wait = s.opts.DiscoveryRetryMax
		}
		s.nextAttempt = s.now().Add(wait)
		if old == nil {
			s.log.Warn("extauth: OpenID Connect discovery failed", "issuer", s.issuer,
				"err", s.lastErr, "failures", s.failures, "retry_in", wait)
		} else {
			s.log.Warn("extauth: OpenID Connect discovery refresh failed; keeping the last good copy",
				"issuer", s.issuer, "err", s.lastErr, "failures", s.failures, "retry_in", wait)
		}
	}
	// Only a held copy is refreshed by the timer: a provider never reached
	// is retried when a sign-in asks, as before.
	if s.disc.Load() != nil && !s.closed {
		if s.timer != nil {
			s.timer.Stop()
		}
		s.timer = time.AfterFunc(max(wait, time.Second), s.refresh)
	}
	s.inflight = nil
	s.mu.Unlock()
	close(done)
}

// changedFrom reports whether a refreshed copy moved an endpoint.
func (d *discovered) changedFrom(old *discovered) bool {
	return d.oauth.Endpoint != old.oauth.Endpoint || d.keys != old.keys || d.userInfoURL != old.userInfoURL ||
		d.endSession != old.endSession || d.issRequired != old.issRequired || d.parURL != old.parURL ||
		d.par != old.par || d.revocationURL != old.revocationURL
}

// providerError makes every discovery failure but a misconfiguration read
// as provider_unavailable: whatever the cause, the routes answer 503 until
// the provider can be used.
func (s *OIDC) providerError(err error) *Error {
	e := AsError(err, s.name, CodeProviderUnavailable)
	if e.Code != CodeMisconfigured && e.Code != CodeProviderUnavailable {
		e.Code = CodeProviderUnavailable
		e.Message = "the provider's configuration cannot be read yet"
	}
	return e
}

// OIDCDiscovery is the part of an OpenID Provider's discovery document
// the OIDC strategy reads (OIDC Discovery 3, RFC 9207 3).
type OIDCDiscovery struct {
	Issuer                string   `json:"issuer"`
	AuthorizationEndpoint string   `json:"authorization_endpoint"`
	TokenEndpoint         string   `json:"token_endpoint"`
	UserInfoEndpoint      string   `json:"userinfo_endpoint"`
	JWKSURI               string   `json:"jwks_uri"`
	SigningAlgs           []string `json:"id_token_signing_alg_values_supported"`
	TokenAuthMethods      []string `json:"token_endpoint_auth_methods_supported"`
	IssParameterSupported bool     `json:"authorization_response_iss_parameter_supported"`
	// EndSessionEndpoint is where RP-initiated logout sends the browser
	// (OpenID Connect RP-Initiated Logout 1.0); empty when the provider
	// has none.
	EndSessionEndpoint string `json:"end_session_endpoint"`

	// TokenAuthSigningAlgs are the algorithms of client assertions the
	// token endpoint accepts.
	TokenAuthSigningAlgs []string `json:"token_endpoint_auth_signing_alg_values_supported"`
	// PAREndpoint is the pushed authorization request endpoint (RFC 9126
	// 5), and RequirePAR says every authorization request must use it.
	PAREndpoint string `json:"pushed_authorization_request_endpoint"`
	RequirePAR  bool   `json:"require_pushed_authorization_requests"`
	// RequestParameterSupported says request objects may be sent by value
	// (OIDC Discovery 3: false when absent); RequestObjectSigningAlgs are
	// the algorithms they may be signed with.
	RequestParameterSupported bool     `json:"request_parameter_supported"`
	RequestObjectSigningAlgs  []string `json:"request_object_signing_alg_values_supported"`
	// The encryption of ID tokens and UserInfo the provider supports.
	IDTokenEncryptionAlgs  []string `json:"id_token_encryption_alg_values_supported"`
	IDTokenEncryptionEncs  []string `json:"id_token_encryption_enc_values_supported"`
	UserInfoEncryptionAlgs []string `json:"userinfo_encryption_alg_values_supported"`
	UserInfoEncryptionEncs []string `json:"userinfo_encryption_enc_values_supported"`
	// RevocationEndpoint revokes tokens (RFC 7009); empty when there is
	// none.
	RevocationEndpoint string `json:"revocation_endpoint"`
	// DPoPSigningAlgs are the algorithms of DPoP proofs the provider
	// takes (RFC 9449 5.1).
	DPoPSigningAlgs []string `json:"dpop_signing_alg_values_supported"`
	// MTLSEndpointAliases are the endpoints a client that presents a
	// TLS certificate uses (RFC 8705 5); TLSBoundTokens says the
	// provider binds access tokens to the certificate (RFC 8705 3.3).
	MTLSEndpointAliases *mtlsAliases `json:"mtls_endpoint_aliases"`
	TLSBoundTokens      bool         `json:"tls_client_certificate_bound_access_tokens"`
	// ResponseModes are the response modes the provider supports;
	// AuthorizationSigningAlgs the algorithms it signs JWT-secured
	// authorization responses with (JARM 3).
	ResponseModes            []string `json:"response_modes_supported"`
	AuthorizationSigningAlgs []string `json:"authorization_signing_alg_values_supported"`
	// MSGraphHost is Entra ID's Microsoft Graph host for the cloud the
	// authority is in (graph.microsoft.com in the public cloud), where a
	// groups overage is resolved.
	MSGraphHost string `json:"msgraph_host"`
}

// fetchDiscovery reads the discovery document and builds a copy from it.
// The key set of old carries over when the jwks_uri and algorithms are the
// same, so a refresh does not refetch the keys.
func (s *OIDC) fetchDiscovery(ctx context.Context, old *discovered) (*discovered, error) {
	if s.fed != nil {
		return s.fetchFederation(ctx, old)
	}
	wellKnown := strings.TrimSuffix(s.issuer, "/") + "/.well-known/openid-configuration"
	resp, body, err := fetchDocument(telemetry.WithEndpoint(ctx, telemetry.EndpointDiscovery), s.client, wellKnown, "discovery")
	if err != nil {
		return nil, err
	}
	lifetime := OIDCDiscoveryLifetime(resp.Header, s.now())
	var doc OIDCDiscovery
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, NewError(CodeProviderUnavailable, "the provider's discovery document is malformed", fmt.Errorf("discovery: %w", err))
	}
	entra, err := discoveryIssuer(s.issuer, s.entra, doc.Issuer)
	if err != nil {
		return nil, NewError(CodeMisconfigured, "the provider's issuer differs from the configured one",
			fmt.Errorf("discovery at %s names issuer %.200q, %w", wellKnown, doc.Issuer, err))
	}
	d, err := s.discoveredFrom(&doc, lifetime, nil, old)
	if err != nil {
		return nil, err
	}
	d.entra = entra
	return d, nil
}

// discoveredFrom builds a copy from the provider's metadata, fresh for
// lifetime: its discovery document, or its resolved metadata in a
// federation, which may give its keys by value (keys; nil reads
// jwks_uri).
func (s *OIDC) discoveredFrom(doc *OIDCDiscovery, lifetime time.Duration, keys *keySet, old *discovered) (*discovered, error) {
	for _, ep := range []struct{ name, url string }{
		{"authorization_endpoint", doc.AuthorizationEndpoint},
		{"token_endpoint", doc.TokenEndpoint},
		{"jwks_uri", doc.JWKSURI},
		{"userinfo_endpoint", doc.UserInfoEndpoint},
		{"end_session_endpoint", doc.EndSessionEndpoint},
		{"pushed_authorization_request_endpoint", doc.PAREndpoint},
		{"revocation_endpoint", doc.RevocationEndpoint},
	} {
		if ep.url == "" && (ep.name != "authorization_endpoint" && ep.name != "token_endpoint" && ep.name != "jwks_uri" || ep.name == "jwks_uri" && keys != nil) {
			continue
		}
		if err := CheckOIDCEndpoint(ep.url, s.issuer); err != nil {
			return nil, NewError(CodeMisconfigured, "the provider's discovery document has an unusable endpoint",
				fmt.Errorf("discovery: %s %.200q: %w", ep.name, ep.url, err))
		}
	}
	// None accepted: register refuses the provider.
	algs := OIDCAcceptedAlgs(doc.SigningAlgs, s.opts.SigningAlgs)
	method, style, err := s.authStyle(doc.TokenAuthMethods)
	if err != nil {
		return nil, err
	}
	if keys == nil {
		keys = newKeySet(doc.JWKSURI, s.client, s.now, s.opts.KeyRefreshInterval, algs)
		if old != nil && old.keys.url == keys.url && slices.Equal(old.keys.algs, keys.algs) {
			keys = old.keys
		}
	}
	d := &discovered{
		issuer:    doc.Issuer,
		graphHost: graphHost(doc.MSGraphHost),
		oauth: oauth2.Config{
			ClientID:     s.clientID,
			ClientSecret: s.clientSecret,
			Endpoint: oauth2.Endpoint{
				AuthURL:   doc.AuthorizationEndpoint,
				TokenURL:  doc.TokenEndpoint,
				AuthStyle: style,
			},
			RedirectURL: s.callbackURL,
			Scopes:      s.scopes,
		},
		keys:          keys,
		userInfoURL:   doc.UserInfoEndpoint,
		issRequired:   doc.IssParameterSupported,
		endSession:    doc.EndSessionEndpoint,
		refreshAt:     s.now().Add(lifetime),
		method:        method,
		tokenClient:   s.client,
		parURL:        doc.PAREndpoint,
		revocationURL: doc.RevocationEndpoint,
	}
	if err := s.register(d, doc); err != nil {
		return nil, err
	}
	return d, nil
}

// OIDCDiscoveryLifetime returns how long a discovery document fetched at now
// with header h stays fresh: Cache-Control's max-age less Age, else
// Expires less Date, bounded by MinOIDCDiscoveryRefresh and
// MaxOIDCDiscoveryRefresh; no-store and no-cache give the minimum, no
// information the maximum.
func OIDCDiscoveryLifetime(h http.Header, now time.Time) time.Duration {
	life, known := time.Duration(0), false
	for _, v := range h.Values("Cache-Control") {
		for _, d := range strings.Split(v, ",") {
			name, arg, _ := strings.Cut(strings.TrimSpace(d), "=")
			switch strings.ToLower(name) {
			case "no-store", "no-cache":
				return MinOIDCDiscoveryRefresh
			case "max-age":
				if n, err := strconv.ParseInt(strings.Trim(arg, `"`), 10, 64); err == nil && n >= 0 {
					life, known = time.Duration(min(n, int64(MaxOIDCDiscoveryRefresh/time.Second)))*time.Second, true
				}
			}
		}
	}
	if known {
		if age, err := strconv.ParseInt(h.Get("Age"), 10, 64); err == nil && age > 0 {
			life -= time.Duration(min(age, int64(MaxOIDCDiscoveryRefresh/time.Second))) * time.Second
		}
	} else if exp, err := http.ParseTime(h.Get("Expires")); err == nil {
		date, err := http.ParseTime(h.Get("Date"))
		if err != nil {
			date = now
		}
		life, known = exp.Sub(date), true
	}
	if !known {
		return MaxOIDCDiscoveryRefresh
	}
	return min(max(life, MinOIDCDiscoveryRefresh), MaxOIDCDiscoveryRefresh)
}

// CheckOIDCEndpoint applies the OIDC strategy's rule to an endpoint from
// the discovery document of issuer: an absolute URL, https unless the
// issuer itself is plain http (which the strategy allows only on a
// loopback host) and the endpoint is on a loopback host too. Anything else
// could send the client secret or a code in the clear.
func CheckOIDCEndpoint(raw, issuer string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Fragment != "" || u.User != nil {
		return errors.New("is not an absolute URL")
	}
	if u.Scheme == "https" || (u.Scheme == "http" && strings.HasPrefix(issuer, "http:") && outbound.IsLoopback(u.Hostname())) {
		return nil
	}
	return errors.New("must be https")
}

// OIDCSigningAlgs returns the algorithms the OIDC strategy accepts ID
// tokens signed with when OIDCOptions.SigningAlgs is empty: the asymmetric
// ones. "none" and the HMAC algorithms never are.
func OIDCSigningAlgs() []string { return slices.Clone(asymmetricAlgs) }

// OIDCAcceptedAlgs returns the algorithms the OIDC strategy accepts ID
// tokens signed with from a provider that advertises advertised
// (id_token_signing_alg_values_supported; RS256, the one algorithm OIDC
// requires, when empty): those of allow (OIDCOptions.SigningAlgs, or
// OIDCSigningAlgs when empty) the provider advertises, in allow's order.
// None means no sign-in can succeed.
func OIDCAcceptedAlgs(advertised, allow []string) []string {
	if len(advertised) == 0 {
		advertised = []string{oidc.RS256}
	}
	if len(allow) == 0 {
		allow = asymmetricAlgs
	}
	var out []string
	for _, a := range allow {
		if slices.Contains(advertised, a) {
			out = append(out, a)
		}
	}
	return out
}

func (s *OIDC) allowList() []string {
	if len(s.opts.SigningAlgs) > 0 {
		return s.opts.SigningAlgs
	}
	return asymmetricAlgs
}

// OIDCAuthMethod returns the client authentication method the OIDC
// strategy uses at a token endpoint that supports supported
// (token_endpoint_auth_methods_supported) when OIDCOptions.AuthMethod
// names none: client_secret_basic, the default of OIDC Discovery 3, unless
// the provider lists only client_secret_post. ok is false when it lists
// neither, and no sign-in can succeed.
func OIDCAuthMethod(supported []string) (method string, ok bool) {
	switch {
	case len(supported) == 0 || slices.Contains(supported, AuthMethodBasic):
		return AuthMethodBasic, true
	case slices.Contains(supported, AuthMethodPost):
		return AuthMethodPost, true
	}
	return "", false
}

// authStyle picks the client authentication method: the options', which
// the provider must list in supported when it publishes the list (a
// provider that omits it is taken at the operator's word), or
// OIDCAuthMethod's; and how x/oauth2 sends the credentials.
func (s *OIDC) authStyle(supported []string) (string, oauth2.AuthStyle, error) {
	method := s.opts.AuthMethod
	if method == "" {
		var ok bool
		if method, ok = OIDCAuthMethod(supported); !ok {
			return "", 0, NewError(CodeMisconfigured, "the provider supports no client authentication method extauth has",
				fmt.Errorf("discovery: token_endpoint_auth_methods_supported %q has neither %s nor %s", supported, AuthMethodBasic, AuthMethodPost))
		}
	} else if len(supported) > 0 && !slices.Contains(supported, method) {
		return "", 0, misconfigured(settingAuthMethod, "%s is not a method the provider lists in token_endpoint_auth_methods_supported %q", method, supported)
	}
	switch method {
	case AuthMethodBasic:
		// x/oauth2 form-urlencodes the ID and secret before base64 in
		// this style, as RFC 6749 2.3.1 requires.
		return method, oauth2.AuthStyleInHeader, nil
	case AuthMethodPost:
		return method, oauth2.AuthStyleInParams, nil
	}
	// With an assertion x/oauth2 sends the client_id alone in the form
	// (its ClientSecret is then empty); assertingTransport adds the rest.
	return method, oauth2.AuthStyleInParams, nil
}

// misconfigured is the error of a setting the provider's discovery
// document shows cannot work.
func misconfigured(setting, format string, args ...any) *Error {
	return NewError(CodeMisconfigured, "the provider does not support this client's settings",
		fmt.Errorf("discovery: %s: "+format, append([]any{setting}, args...)...))
}

// register checks the client's settings against what the provider
// advertises and prepares what they need: the signers of client
// assertions and request objects, the token endpoint's client, pushed
// requests. Each refusal names the setting and what the provider lists.
func (s *OIDC) register(d *discovered, doc *OIDCDiscovery) error {
	o := &s.opts
	if len(OIDCAcceptedAlgs(doc.SigningAlgs, o.SigningAlgs)) == 0 {
		return NewError(CodeMisconfigured, "the provider signs ID tokens with no algorithm extauth accepts",
			fmt.Errorf("discovery: id_token_signing_alg_values_supported %q has none of %q", doc.SigningAlgs, s.allowList()))
	}
	if err := s.useMTLSAliases(d, doc); err != nil {
		return err
	}
	if tlsMethod(d.method) {
		d.oauth.ClientSecret = ""
	}
	if o.Profile != "" && !o.DPoP && !doc.TLSBoundTokens {
		return misconfigured(settingTLSCert, "the provider does not bind access tokens to TLS certificates (tls_client_certificate_bound_access_tokens) and dpop is off: FAPI 2.0 requires sender-constrained tokens")
	}
	var signingKey *clientKey
	if len(s.keys) > 0 {
		signingKey = s.keys[0]
	}
	if d.method == AuthMethodSecretJWT || d.method == AuthMethodPrivateKeyJWT {
		candidates := hmacSigningAlgs
		if d.method == AuthMethodPrivateKeyJWT {
			candidates = o.profileAlgs(keyAlgs(signingKey))
		}
		alg, ok := signingAlg(o.AssertionSigningAlg, candidates, doc.TokenAuthSigningAlgs)
		if !ok {
			return misconfigured(settingAssertionAlg, "the provider accepts client assertions signed with %q only, none of %q",
				doc.TokenAuthSigningAlgs, pick(o.AssertionSigningAlg, candidates))
		}
		signer, err := s.newSigner(alg, "JWT")
		if err != nil {
			return NewError(CodeMisconfigured, "the client assertion cannot be signed", fmt.Errorf("client assertion: %w", err))
		}
		d.assertionSigner = signer
		d.oauth.ClientSecret = ""
	}
	d.par = o.PushedAuthorization || doc.RequirePAR
	if d.par && doc.PAREndpoint == "" {
		setting := settingPAR
		if !o.PushedAuthorization {
			setting = "require_pushed_authorization_requests"
		}
		return misconfigured(setting, "the provider has no pushed_authorization_request_endpoint")
	}
	if o.DPoP && len(doc.DPoPSigningAlgs) > 0 && !slices.Contains(doc.DPoPSigningAlgs, o.DPoPSigningAlg) {
		return misconfigured(settingDPoPAlg, "%s is not in the provider's dpop_signing_alg_values_supported %q", o.DPoPSigningAlg, doc.DPoPSigningAlgs)
	}
	if s.jarm() {
		if len(doc.ResponseModes) > 0 && !slices.ContainsFunc(responseModes, func(m string) bool { return slices.Contains(doc.ResponseModes, m) }) {
			return misconfigured(settingResponseMode, "%s is not in the provider's response_modes_supported %q", o.ResponseMode, doc.ResponseModes)
		}
		algs := OIDCAcceptedAlgs(doc.AuthorizationSigningAlgs, o.SigningAlgs)
		if len(algs) == 0 {
			return misconfigured(settingResponseMode, "the provider signs authorization responses with %q, none of %q", doc.AuthorizationSigningAlgs, s.allowList())
		}
		d.jarmAlgs = make([]jose.SignatureAlgorithm, len(algs))
		for i, a := range algs {
			d.jarmAlgs[i] = jose.SignatureAlgorithm(a)
		}
	}
	// The profile wants the iss response parameter (RFC 9207) whether or
	// not discovery advertises it; with JARM it is inside the JWT.
	d.issRequired = d.issRequired || o.Profile != "" && !s.jarm()
	d.tokenClient = s.endpointClient(d)
	if o.RequestObject {
		if !d.par && !doc.RequestParameterSupported {
			return misconfigured(settingRequestObject, "the provider does not take request objects by value (request_parameter_supported is not true): set pushed_authorization_requests too")
		}
		candidates := o.profileAlgs(keyAlgs(signingKey))
		alg, ok := signingAlg(o.RequestObjectSigningAlg, candidates, doc.RequestObjectSigningAlgs)
		if !ok {
			return misconfigured(settingRequestAlg, "the provider accepts request objects signed with %q only, none of %q",
				doc.RequestObjectSigningAlgs, pick(o.RequestObjectSigningAlg, candidates))
		}
		signer, err := s.newSigner(alg, "oauth-authz-req+jwt")
		if err != nil {
			return NewError(CodeMisconfigured, "the request object cannot be signed", fmt.Errorf("request object: %w", err))
		}
		d.requestSigner = signer
	}
	for _, e := range []struct {
		enc                  OIDCEncryption
		algs, encs           []string
		algSetting, encEntry string
		algList, encList     string
	}{
		{o.IDTokenEncryption, doc.IDTokenEncryptionAlgs, doc.IDTokenEncryptionEncs, settingIDTokenAlg, settingIDTokenEnc,
			"id_token_encryption_alg_values_supported", "id_token_encryption_enc_values_supported"},
		{o.UserInfoEncryption, doc.UserInfoEncryptionAlgs, doc.UserInfoEncryptionEncs, settingUserInfoAlg, settingUserInfoEnc,
			"userinfo_encryption_alg_values_supported", "userinfo_encryption_enc_values_supported"},
	} {
		if !e.enc.enabled() {
			continue
		}
		if !slices.Contains(e.algs, e.enc.Alg) {
			return misconfigured(e.algSetting, "%s is not in the provider's %s %q", e.enc.Alg, e.algList, e.algs)
		}
		if !slices.Contains(e.encs, e.enc.Enc) {
			return misconfigured(e.encEntry, "%s is not in the provider's %s %q", e.enc.Enc, e.encList, e.encs)
		}
	}
	return nil
}

// pick is want as a list when set, else candidates.
func pick(want string, candidates []string) []string {
	if want != "" {
		return []string{want}
	}
	return candidates
}

// Begin returns the authorization URL with state, nonce and the PKCE S256
// challenge, all from the transaction. With pushed authorization requests
// the request goes to the provider first and the URL carries its
// request_uri; with request objects the parameters travel signed.
func (s *OIDC) Begin(ctx context.Context, tx *Transaction) (string, error) {
	d, err := s.provider(ctx)
	if err != nil {
		return "", err
	}
	if tx.State == "" || tx.Verifier == "" || tx.Nonce == "" {
		return "", NewError(CodeMisconfigured, "the sign-in transaction is incomplete", errors.New("transaction without state, verifier or nonce"))
	}
	key, err := s.beginDPoP(ctx, tx)
	if err != nil {
		return "", err
	}
	ctx = withDPoP(ctx, key)
	if d.par || d.requestSigner != nil {
		return s.beginHighAssurance(ctx, d, tx)
	}
	opts, err := s.authCodeOptions(ctx, d, tx)
	if err != nil {
		return "", err
	}
	return d.oauth.AuthCodeURL(tx.State, opts...), nil
}

// authCodeOptions are the parameters of tx's authorization request
// beyond client_id, redirect_uri, response_type, scope and state: the
// PKCE challenge, the nonce, the DPoP key's thumbprint when the request
// is not pushed (a pushed one carries a proof of the key instead), the
// configured parameters, and the sign-in's own options over them
// (withRequestOptions). Whether the request travels in the URL, a
// request object or a pushed request, its parameters are these.
func (s *OIDC) authCodeOptions(ctx context.Context, d *discovered, tx *Transaction) ([]oauth2.AuthCodeOption, error) {
	opts := make([]oauth2.AuthCodeOption, 0, 9+len(s.authParams))
	opts = append(opts, oauth2.S256ChallengeOption(tx.Verifier), oidc.Nonce(tx.Nonce))
	if k := dpopFrom(ctx); k != nil && !d.par {
		// RFC 9449 10: the code is then bound to the key.
		opts = append(opts, oauth2.SetAuthURLParam("dpop_jkt", k.jkt))
	}
	if s.jarm() {
		opts = append(opts, oauth2.SetAuthURLParam("response_mode", s.opts.ResponseMode))
	}
	return s.withRequestOptions(append(opts, s.authParams...), tx)
}

// beginDPoP makes the sign-in's DPoP key, when the client uses DPoP, and
// keeps it in tx for the callback.
func (s *OIDC) beginDPoP(ctx context.Context, tx *Transaction) (*dpopKey, error) {
	if !s.opts.DPoP {
		return nil, nil
	}
	release, err := s.rsaKeygen.acquire(ctx, s.opts.DPoPSigningAlg)
	if err != nil {
		return nil, err
	}
	k, err := newDPoPKey(s.opts.DPoPSigningAlg)
	release()
	if err != nil {
		return nil, NewError(CodeMisconfigured, "the DPoP key cannot be made", fmt.Errorf("DPoP key: %w", err))
	}
	enc, err := k.encode()
	if err != nil {
		return nil, NewError(CodeMisconfigured, "the DPoP key cannot be made", fmt.Errorf("DPoP key: %w", err))
	}
	if tx.Extra == nil {
		tx.Extra = map[string]string{}
	}
	tx.Extra[dpopExtra] = enc
	return k, nil
}

// completeDPoP is the DPoP key the sign-in of tx began with, nil when it
// began without one.
func (s *OIDC) completeDPoP(tx *Transaction) (*dpopKey, error) {
	enc := tx.Extra[dpopExtra]
	if enc == "" {
		if s.opts.DPoP {
			return nil, NewError(CodeInvalidState, "the sign-in started without a DPoP key: sign in again",
				errors.New("transaction without a DPoP key, which this client's configuration requires"))
		}
		return nil, nil
	}
	k, err := parseDPoPKey(enc)
	if err != nil {
		return nil, NewError(CodeInvalidState, "the sign-in's DPoP key is unreadable: sign in again", err)
	}
	return k, nil
}

// Binding returns the state parameter.
// With JARM it is the state inside the response JWT, read unverified:
// Complete verifies the JWT, and the state, before it uses them.
func (s *OIDC) Binding(r *http.Request) string {
	if s.jarm() {
		return jarmState(r.FormValue(jarmParam))
	}
	return r.FormValue("state")
}

// Complete checks the authorization response (RFC 9207 iss, error), trades
// the code for tokens with the PKCE verifier from the transaction, verifies
// the ID token and returns the identity.
func (s *OIDC) Complete(ctx context.Context, r *http.Request, tx *Transaction) (*Identity, error) {
	d, err := s.provider(ctx)
	if err != nil {
		return nil, err
	}
	if err := r.ParseForm(); err != nil {
		return nil, NewError(CodeInvalidResponse, "the callback request is malformed", err)
	}
	resp := r.Form
	if s.jarm() {
		// JARM: the response's parameters are those of the verified JWT,
		// its iss among them.
		if resp, err = s.jarmResponse(ctx, d, r, tx.State); err != nil {
			return nil, err
		}
	}
	// RFC 9207 2.4: the iss parameter is checked before anything else of
	// the response, error responses included, so a mix-up never reaches
	// our token endpoint call.
	issParam := ""
	if iss, ok := resp["iss"]; ok {
		if len(iss) != 1 || !d.issuerMatches(iss[0]) {
			return nil, NewError(CodeInvalidResponse, "the authorization response comes from a different issuer",
				fmt.Errorf("iss parameter %.200q, expected %q", iss, d.issuer))
		}
		issParam = iss[0]
	} else if d.issRequired {
		return nil, NewError(CodeInvalidResponse, "the authorization response does not name its issuer",
			errors.New("iss parameter missing although the provider advertises authorization_response_iss_parameter_supported"))
	}
	if err := responseError(resp); err != nil {
		return nil, err
	}
	code := resp.Get("code")
	if code == "" {
		return nil, NewError(CodeInvalidResponse, "the provider sent no authorization code", errors.New("callback without code"))
	}
	key, err := s.completeDPoP(tx)
	if err != nil {
		return nil, err
	}
	ctx = withDPoP(ctx, key)
	tok, err := exchange(ctx, &d.oauth, d.tokenClient, code, tx.Verifier)
	if err != nil {
		return nil, err
	}
	if err := checkTokenType(key, tok.TokenType); err != nil {
		return nil, err
	}
	rawID, _ := tok.Extra("id_token").(string)
	if rawID == "" {
		return nil, NewError(CodeInvalidResponse, "the provider sent no ID token", errors.New("token response without id_token"))
	}
	claims, err := s.verify(ctx, d, rawID, tok.AccessToken, tx.Nonce)
	if err != nil {
		return nil, err
	}
	if issParam != "" && claims.Issuer != issParam {
		// A multi-tenant issuer: the response named one tenant, the
		// token another.
		return nil, idError("issuer %.200q is not the authorization response's (iss %.200q)", claims.Issuer, issParam)
	}
	want, err := s.asked(tx)
	if err != nil {
		return nil, err
	}
	if err := s.checkAuthentication(claims.raw, want); err != nil {
		return nil, err
	}
	var info map[string]any
	if s.needUserInfo(claims) && d.userInfoURL != "" {
		if info, err = s.userInfo(ctx, d, tok.AccessToken, claims.Subject); err != nil {
			return nil, err
		}
	}
	id := s.identity(claims, info, tok)
	id.Directory = s.directory(ctx, d, claims.raw, tok)
	if key != nil {
		id.Tokens.DPoPKey = tx.Extra[dpopExtra]
	}
	return id, nil
}

// needUserInfo reports whether the ID token lacks a claim that a requested
// scope should have brought: some providers put those in UserInfo only.
func (s *OIDC) needUserInfo(c *idClaims) bool {
	return s.userInfoClaims || (c.Email == "" && slices.Contains(s.scopes, oidc.ScopeEmail)) ||
		(c.Name == "" && slices.Contains(s.scopes, oidc.ScopeProfile))
}

// idClaims are the claims of a verified ID token that the identity maps,
// read from the one decoding of its payload.
type idClaims struct {
	// Issuer is the token's iss: the provider's issuer, or with Entra
	// ID's multi-tenant authorities the issuer of the user's tenant.
	Issuer            string
	Subject           string
	SessionID         string
	Email             string
	EmailVerified     bool
	Name              string
	GivenName         string
	FamilyName        string
	PreferredUsername string
	Nickname          string
	Picture           string
	HostedDomain      string

	raw map[string]any
	// signed is the signed ID token: the token itself, or what an
	// encrypted one held.
	signed string
}

func newIDClaims(t *tokenClaims) *idClaims {
	m := t.raw
	return &idClaims{
		Issuer:    t.issuer,
		Subject:   t.subject,
		SessionID: t.sid,
		Email:     str(m, "email"),
		// Some providers send email_verified as a string; an address is
		// only ever trusted when the provider plainly says so, and an odd
		// value reads as false rather than refusing the sign-in.
		EmailVerified:     isTrue(m["email_verified"]),
		Name:              str(m, "name"),
		GivenName:         str(m, "given_name"),
		FamilyName:        str(m, "family_name"),
		PreferredUsername: str(m, "preferred_username"),
		Nickname:          str(m, "nickname"),
		Picture:           str(m, "picture"),
		HostedDomain:      str(m, "hd"),
		raw:               m,
	}
}

func idError(format string, args ...any) *Error {
	return NewError(CodeInvalidResponse, "the provider's ID token is not valid", fmt.Errorf("id token: "+format, args...))
}

// verify checks an ID token from a sign-in: what verifyJWT checks, then
// sub, the nonce and at_hash (OIDC Core 3.1.3.7 and 3.1.3.8).
func (s *OIDC) verify(ctx context.Context, d *discovered, rawID, accessToken, nonce string) (*idClaims, error) {
	if nonce == "" {
		return nil, idError("the sign-in has no nonce")
	}
	return s.verifyID(ctx, d, rawID, accessToken, func(c *tokenClaims) error {
		if subtle.ConstantTimeCompare([]byte(c.nonce), []byte(nonce)) != 1 {
			return errors.New("nonce does not match the sign-in's")
		}
		return nil
	})
}

// verifyID checks an ID token: verifyJWT's checks, a subject, at_hash when
// the token carries one, extra (the nonce of a sign-in, the subject of a
// refresh) and the strategy's own check.
func (s *OIDC) verifyID(ctx context.Context, d *discovered, rawID, accessToken string, extra func(*tokenClaims) error) (*idClaims, error) {
	// Loading the keys first tells a provider that cannot be reached (its
	// time-out or transport cause) from a token that does not verify.
	if err := d.keys.ensure(ctx); err != nil {
		return nil, AsError(err, s.name, CodeProviderUnavailable)
	}
	// OIDC Core 3.1.3.7 step 1: an encrypted token is decrypted first,
	// then verified exactly as a signed one.
	signed, err := s.openIDToken(rawID)
	if err != nil {
		return nil, idError("%w", err)
	}
	t, err := s.verifyJWT(ctx, d, signed, idTokenRules(d))
	if err != nil {
		return nil, idError("%w", err)
	}
	if t.subject == "" {
		return nil, idError("no subject (sub)")
	}
	if err := extra(t); err != nil {
		return nil, idError("%w", err)
	}
	if t.atHash != "" {
		if err := checkAtHash(t.alg, t.atHash, accessToken); err != nil {
			return nil, idError("at_hash: %w", err)
		}
	}
	c := newIDClaims(t)
	c.signed = signed
	if s.check != nil {
		if err := s.check(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// VerifyIDToken verifies rawIDToken as a sign-in does (signature with the
// provider's keys and the algorithm allow-list, iss, aud, azp, exp, iat,
// sub, nonce, and at_hash against accessToken when the token carries one)
// and returns its claims. It serves hosts that receive an ID token another
// way, such as from a native app that signed in itself.
func (s *OIDC) VerifyIDToken(ctx context.Context, rawIDToken, accessToken, nonce string) (map[string]any, error) {
	d, err := s.provider(ctx)
	if err != nil {
		return nil, err
	}
	c, err := s.verify(ctx, d, rawIDToken, accessToken, nonce)
	if err != nil {
		return nil, err
	}
	return c.raw, nil
}

// userInfo reads the UserInfo endpoint (JSON, or a JWT signed with the
// provider's keys) and insists its sub is the ID token's (OIDC Core 5.3.4):
// otherwise its claims could describe someone else.
func (s *OIDC) userInfo(ctx context.Context, d *discovered, accessToken, sub string) (map[string]any, error) {
	resp, body, err := get(telemetry.WithEndpoint(ctx, telemetry.EndpointUserInfo), d.tokenClient, d.userInfoURL, accessToken, "application/json, application/jwt", "userinfo")
	if err != nil {
		return nil, err
	}
	switch {
	case resp.StatusCode >= 500:
		return nil, NewError(CodeProviderUnavailable, "userinfo: the provider is unavailable", fmt.Errorf("userinfo: HTTP %d", resp.StatusCode))
	case resp.StatusCode != http.StatusOK:
		return nil, NewError(CodeInvalidResponse, "userinfo: the provider refused the access token", fmt.Errorf("userinfo: HTTP %d", resp.StatusCode))
	}
	jwt := strings.HasPrefix(resp.Header.Get("Content-Type"), "application/jwt")
	if enc := s.opts.UserInfoEncryption; enc.enabled() || jwt && isJWE(strings.TrimSpace(string(body))) {
		// OIDC Core 5.3.2: an encrypted answer may hold a signed one or
		// the claims themselves.
		if !jwt || !isJWE(strings.TrimSpace(string(body))) {
			return nil, NewError(CodeInvalidResponse, "userinfo: the answer is not encrypted as registered", fmt.Errorf("userinfo: %w", errNotEncrypted))
		}
		pt, err := s.decrypt(strings.TrimSpace(string(body)), enc)
		if err != nil {
			return nil, NewError(CodeInvalidResponse, "userinfo: the encrypted answer does not decrypt", fmt.Errorf("userinfo: %w", err))
		}
		body, jwt = pt, strings.Count(string(pt), ".") == 2 && !strings.HasPrefix(strings.TrimSpace(string(pt)), "{")
	}
	if jwt {
		payload, err := d.keys.VerifySignature(ctx, strings.TrimSpace(string(body)))
		if err != nil {
			return nil, NewError(CodeInvalidResponse, "userinfo: the signed answer does not verify", fmt.Errorf("userinfo: %w", err))
		}
		body = payload
	}
	info, err := decodeObject(body)
	if err != nil {
		return nil, NewError(CodeInvalidResponse, "userinfo: malformed answer", fmt.Errorf("userinfo: %w", err))
	}
	got, _ := info["sub"].(string)
	if subtle.ConstantTimeCompare([]byte(got), []byte(sub)) != 1 {
		return nil, NewError(CodeInvalidResponse, "userinfo describes a different user than the ID token",
			fmt.Errorf("userinfo sub %.200q differs from the ID token's %q", got, sub))
	}
	return info, nil
}

// identity maps the verified claims, completed by UserInfo, to an Identity.
// The email and its verification come from the same source, so a verified
// flag is never paired with an address it was not given for.
func (s *OIDC) identity(c *idClaims, info map[string]any, tok *oauth2.Token) *Identity {
	raw := make(map[string]any, len(c.raw)+len(info))
	for k, v := range info {
		raw[k] = v
	}
	// The signed claims win over UserInfo's.
	for k, v := range c.raw {
		raw[k] = v
	}
	acr, amr, authTime := authentication(c.raw)
	id := &Identity{
		Provider:      s.name,
		UID:           c.Subject,
		ACR:           acr,
		AMR:           amr,
		AuthTime:      authTime,
		Email:         c.Email,
		EmailVerified: c.EmailVerified && c.Email != "",
		Name:          c.Name,
		FirstName:     c.GivenName,
		LastName:      c.FamilyName,
		NickName:      c.PreferredUsername,
		Image:         c.Picture,
		Raw:           raw,
		SessionID:     c.SessionID,
		Tokens: Tokens{
			AccessToken:  tok.AccessToken,
			RefreshToken: tok.RefreshToken,
			TokenType:    tok.TokenType,
			Expiry:       tok.Expiry,
			IDToken:      c.signed,
			// The token's own issuer, which renewal, step-up and
			// logout bind to: with Entra ID's multi-tenant authorities,
			// the user's tenant's.
			Issuer: c.Issuer,
		},
	}
	if id.Email == "" {
		id.Email = str(info, "email")
		id.EmailVerified = id.Email != "" && isTrue(info["email_verified"])
	}
	if s.opts.Preset == OIDCPresetEntra {
		// Entra ID sends no email_verified; its email claim is editable.
		id.EmailVerified = id.Email != "" && c.Email != "" && entraEmailVerified(c.raw)
		if id.NickName == "" {
			id.NickName = entraNickName(c.raw)
		}
	}
	fill := func(dst *string, keys ...string) {
		for _, k := range keys {
			if *dst != "" {
				return
			}
			*dst = str(info, k)
		}
	}
	fill(&id.Name, "name")
	fill(&id.FirstName, "given_name")
	fill(&id.LastName, "family_name")
	fill(&id.NickName, "preferred_username")
	if id.NickName == "" {
		id.NickName = c.Nickname
	}
	fill(&id.NickName, "nickname")
	fill(&id.Image, "picture")
	if id.Name == "" {
		id.Name = strings.TrimSpace(id.FirstName + " " + id.LastName)
	}
	return id
}

func isTrue(v any) bool {
	switch b := v.(type) {
	case bool:
		return b
	case string:
		return b == "true"
	}
	return false
}
