// Package samlsp is extauth's SAML 2.0 service provider: the "saml" strategy
// behind the extauth routes, its SP metadata document and single logout.
//
// It takes crewjam/saml's types for metadata and for the messages it sends
// (never its samlsp middleware: the routes, transactions and sessions are
// extauth's), and verifies what it receives itself, in one pass:
// one bounded parse, each signature verified once by goxmldsig under one
// algorithm policy (SHA-256 and stronger unless Options.AllowSHA1 or
// security.allow_sha1), an encrypted assertion decrypted once by its own XML
// Encryption code, and every check read from the verified tree: an audience
// that must be present, a bearer SubjectConfirmation that must be present
// and checked, one assertion only, signatures only where they belong, a
// replay store, bounded inputs, and panics turned into errors.
//
// Every time check runs against Env.Now with Options.ClockSkew; nothing is
// read from or written to crewjam's package-level clock and tolerances.
package samlsp

import (
	"context"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crewjam/saml"
	dsig "github.com/russellhaering/goxmldsig"

	"github.com/extauth/extauth/internal/docfetch"
	"github.com/extauth/extauth/internal/outbound"
	"github.com/extauth/extauth/internal/safepath"
	"github.com/extauth/extauth/providers"
)

// Name is the provider slug.
const Name = "saml"

// settingsKey is the secrets file's mapping of the SAML settings beyond the
// three URLs.
const settingsKey = "saml_additional_settings"

// Defaults of Options.
const (
	DefaultClockSkew        = 60 * time.Second
	DefaultMaxResponseBytes = 512 << 10
	DefaultMetadataRefresh  = 24 * time.Hour
	DefaultMetadataMaxBytes = 1 << 20
	// maxClockSkew bounds Options.ClockSkew: a larger tolerance would
	// stretch every validity window, the replay store's included, and hides
	// a clock that needs fixing.
	maxClockSkew = 180 * time.Second
)

// Bounds of Config.MetadataValidFor and Config.MetadataCacheDuration (the
// error messages spell them out). A validity under an hour expires before
// most IdPs fetch the metadata again; one over ten years outlives any
// certificate in it.
const (
	MinMetadataValidFor      = time.Hour
	MaxMetadataValidFor      = 3650 * 24 * time.Hour
	MinMetadataCacheDuration = time.Minute
)

// Common NameID formats for Options.NameIDFormat.
const (
	NameIDUnspecified = "urn:oasis:names:tc:SAML:1.1:nameid-format:unspecified"
	NameIDEmail       = "urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress"
	NameIDPersistent  = "urn:oasis:names:tc:SAML:2.0:nameid-format:persistent"
	NameIDTransient   = "urn:oasis:names:tc:SAML:2.0:nameid-format:transient"
)

// Config is the SAML registration as the secrets file gives it
// (saml_sp_entity_id, saml_idp_metadata_url, saml_idp_sso_service_url and
// saml_additional_settings). It is a plain struct so that this package does
// not import the root package, which imports it.
type Config struct {
	// SPEntityID is our entity ID; it is also the audience we require.
	SPEntityID string
	// IdPMetadataURL is where the IdP publishes its metadata. HTTPS is
	// required unless the host is a loopback address.
	IdPMetadataURL string
	// IdPSSOServiceURL, when set, overrides the metadata's SSO location.
	IdPSSOServiceURL string
	// RelayState is the page to go to after sign-in, relative or same-origin.
	RelayState string
	// AuthnContext is the requested authentication context class
	// reference, or several, space-separated: the assertion's
	// AuthnContextClassRef must be one of them.
	AuthnContext string
	// CertificatePEM and PrivateKeyPEM are the optional SP key pair.
	CertificatePEM string
	PrivateKeyPEM  string
	// CertificateNewPEM and PrivateKeyNewPEM are the next SP key pair
	// during a rotation (saml_additional_settings.certificate_new and
	// private_key_new, as ruby-saml names them). While they are set, the SP
	// metadata publishes the next certificate for signing only, so that
	// the IdP learns it before any request is signed with it but encrypts
	// to the current one still, which every instance of a rolling
	// deployment can decrypt; an assertion encrypted to either key is
	// decrypted all the same, and requests are signed with the current
	// key. Promoting the pair is a configuration change: it becomes
	// CertificatePEM and PrivateKeyPEM, and the pair it replaces becomes
	// CertificateOldPEM and PrivateKeyOldPEM.
	CertificateNewPEM string
	PrivateKeyNewPEM  string
	// CertificateOldPEM and PrivateKeyOldPEM are the retiring SP key pair
	// after a promotion (saml_additional_settings.certificate_old and
	// private_key_old). It signs nothing, ever; it decrypts what an IdP
	// that has not re-read the SP metadata since the promotion still
	// encrypts to it, and the metadata publishes it for signing only
	// (requests signed with it before the promotion still verify), never
	// for encryption, so that an IdP that reads the metadata moves to the
	// current certificate. The operator removes it once the IdP has.
	CertificateOldPEM string
	PrivateKeyOldPEM  string
	// MetadataValidFor, when positive, puts a validUntil of the time the
	// SP metadata is built plus MetadataValidFor on it
	// (saml_additional_settings.metadata_valid_for). By default the
	// metadata carries none, as Shibboleth SP, SimpleSAMLphp and ruby-saml
	// publish theirs: an IdP that enforces validUntil would stop trusting
	// a copy uploaded once when it passed.
	MetadataValidFor time.Duration
	// MetadataCacheDuration, when positive, is the SP metadata's
	// cacheDuration: how long an IdP that fetches it from the metadata URL
	// may keep a copy (saml_additional_settings.metadata_cache_duration).
	MetadataCacheDuration time.Duration
	// LogoutRequestsSigned signs our LogoutRequests.
	LogoutRequestsSigned bool
	// IdPMetadataCertificatePEM, when set, is the certificate that must
	// have signed the IdP metadata (saml_additional_settings.
	// idp_metadata_certificate): unsigned or badly signed metadata is then
	// refused, so that whoever can alter it on its way cannot choose the
	// keys we trust.
	IdPMetadataCertificatePEM string
	// RefuseCBCEncryption (saml_additional_settings.security.
	// refuse_cbc_encryption) refuses encrypted assertions and NameIDs whose
	// block cipher is CBC (AES-CBC, 3DES), and leaves CBC out of the SP
	// metadata: for an IdP that encrypts with AES-GCM, it removes what is
	// left of the CBC decryption oracle (docs/security.md).
	RefuseCBCEncryption bool
	// AllowSHA1 (saml_additional_settings.security.allow_sha1) is
	// Options.AllowSHA1 set from the secrets file: either one accepts SHA-1,
	// of the IdP of IdPMetadataURL only (New refuses it with a
	// federation).
	AllowSHA1 bool
	// NameIDEncrypted (saml_additional_settings.security.name_id_encrypted)
	// sends the NameID of every LogoutRequest as an EncryptedID, to the
	// IdP's encryption certificate; without it, only the NameIDs the IdP
	// itself sent encrypted go back encrypted (LogoutSession.NameIDEncrypted).
	NameIDEncrypted bool
	// EnforceIdPCertificateDates (saml_additional_settings.security.
	// enforce_idp_certificate_dates) refuses signatures made with an IdP
	// signing certificate outside its validity dates. By default, as the
	// SAML V2.0 Metadata Interoperability Profile says and Shibboleth,
	// SimpleSAMLphp and pysaml2 do, a certificate in the IdP's metadata is
	// only the carrier of a key: the metadata that was verified (its
	// signature, its validUntil, the HTTPS fetch) vouches for the key,
	// whatever the certificate's dates say. It applies to the one IdP's
	// metadata and to every IdP of a federation alike; never to the
	// federation's own signing certificate, which is pinned here.
	EnforceIdPCertificateDates bool
	// Custom entries are sent to the IdP as query parameters of the sign-in
	// redirect, in order.
	Custom []Param
	// Federation, when enabled, signs users in through the IdPs of a
	// federation's signed aggregate (saml_additional_settings.federation)
	// instead of IdPMetadataURL's one IdP; IdPMetadataURL,
	// IdPSSOServiceURL and IdPMetadataCertificatePEM are then empty.
	Federation FederationConfig
	// ResponseBinding (saml_additional_settings.response_binding) is how
	// the IdP is asked to send its Response: ResponsePOST (or empty)
	// through the browser, ResponseArtifact as an artifact the SP resolves
	// back-channel (the HTTP-Artifact binding; in a federation, of the IdPs
	// that publish an ArtifactResolutionService). With ResponseArtifact,
	// artifacts are also accepted at the single logout URL.
	ResponseBinding string
	// Artifact is the back-channel of the HTTP-Artifact binding
	// (saml_additional_settings.artifact).
	Artifact ArtifactConfig
	// Info is what the SP metadata says of the application besides its
	// endpoints and keys (saml_additional_settings.sp_metadata).
	Info SPInfo
}

// Param is one custom name/value entry of saml_additional_settings.
type Param struct {
	Name  string
	Value string
}

// Options are the SAML tunables that are not part of the secrets file.
type Options struct {
	// ClockSkew is the tolerance for the IdP's clock (default 60 s, at most
	// 180 s).
	ClockSkew time.Duration
	// NameIDFormat is requested in the AuthnRequest's NameIDPolicy
	// (default unspecified).
	NameIDFormat string
	// UIDAttribute, when set, names the attribute whose first value is the
	// uid instead of the NameID (for transient NameIDs).
	UIDAttribute string
	// IdPEntityID picks the IdP when the metadata URL serves an
	// EntitiesDescriptor with several IdPs.
	IdPEntityID string
	// AllowIDPInitiated accepts unsolicited responses (no AuthnRequest of
	// ours) on the callback route, which then ends at "/" whatever the
	// posted RelayState says. Off by default: nothing binds such a response
	// to the browser, so any site can sign a visitor in to the attacker's
	// account (login CSRF); each assertion is still accepted once only.
	AllowIDPInitiated bool
	// MaxResponseBytes bounds the decoded SAMLResponse (default 512 KiB).
	MaxResponseBytes int64
	// MaxDecryptedBytes bounds the plaintext of an encrypted assertion, and
	// with it the ciphertext accepted, checked before any decryption
	// (default 128 KiB, and never more than MaxResponseBytes). It is what a
	// forged ciphertext can make the SP decrypt and parse: raise it only for
	// an IdP whose assertions are larger.
	MaxDecryptedBytes int64
	// MetadataRefresh is the refresh period when the metadata names no
	// cacheDuration or validUntil (default 24 h).
	MetadataRefresh time.Duration
	// MetadataRetry is the first wait after a failed metadata fetch; it
	// doubles up to MetadataRefresh (default 5 s).
	MetadataRetry time.Duration
	// MetadataURL and SLOURL override the URLs of our metadata and single
	// logout endpoints, which default to the callback URL with /callback
	// replaced by /metadata and /logout.
	MetadataURL string
	SLOURL      string
	// Logout holds the single-logout hooks.
	Logout LogoutHooks

	// AuthnRequestBinding is how AuthnRequests travel to the IdP:
	// BindingRedirect (a redirect with the request, and its signature, in
	// the query) or BindingPOST (an auto-submitting form with the request,
	// signed inside the XML), for IdPs that verify only XML signatures.
	// Empty picks BindingRedirect, unless the IdP metadata lists only an
	// HTTP-POST single sign-on service.
	AuthnRequestBinding string

	// AllowSHA1 accepts RSA-SHA1 (and ECDSA-SHA1) signatures and SHA-1
	// digests, which some older IdPs still use, on every inbound message:
	// responses, assertions, logout messages and signed metadata. Off by
	// default, and New logs a warning when it is on: SHA-1 collisions are
	// practical, so a signature over SHA-1 no longer binds the IdP to what
	// it signed. It is for the one IdP of Config.IdPMetadataURL: New
	// refuses it with a federation, where it would hold for every IdP of
	// the aggregate and for the aggregate's own signature.
	AllowSHA1 bool
	// Federations shares federation aggregates between SPs (extauth.New
	// sets one per Auth, for its tenants); nil gives the SP its own.
	Federations *Federations
	// MaxAggregateBytes bounds a federation's aggregate (default
	// DefaultMaxAggregateBytes).
	MaxAggregateBytes int64
	// IdPCacheSize bounds how many of a federation's IdPs the SP keeps
	// parsed (default DefaultIdPCacheSize); others are parsed again from
	// the aggregate when a sign-in needs them.
	IdPCacheSize int

	// AllowRSA15KeyTransport accepts encrypted assertions whose key is
	// wrapped with RSAES-PKCS1-v1_5 (xmlenc#rsa-1_5) instead of RSA-OAEP.
	// Off by default, and New logs a warning when it is on: that padding is
	// open to Bleichenbacher's attack, which can recover the content key.
	AllowRSA15KeyTransport bool

	// RequestOptions are the per-request sign-in options the start route
	// takes for SAML, of providers.SAMLRequestOptions(); none when empty.
	// saml_additional_settings.request_options sets it.
	RequestOptions []string
	// AssuranceLevels maps each of the host's assurance levels to the
	// authentication context classes that meet it
	// (saml_additional_settings.assurance_levels).
	AssuranceLevels map[string][]string
}

// SP is the SAML service provider. It is safe for concurrent use. Close stops
// its background metadata refresh.
type SP struct {
	cfg  Config
	opts Options
	env  providers.Env
	log  *slog.Logger

	acs      *url.URL
	slo      *url.URL
	metaURL  *url.URL
	idpMeta  *url.URL
	origin   string
	relayDst string

	key  *rsa.PrivateKey
	cert *x509.Certificate
	// keyNew and certNew are the next key pair during a rotation: published
	// for signing and decrypted with, never signed with.
	keyNew  *rsa.PrivateKey
	certNew *x509.Certificate
	// keyOld and certOld are the retiring key pair after a promotion:
	// decrypted with, published for signing only, never signed with.
	keyOld  *rsa.PrivateKey
	certOld *x509.Certificate
	// decKeys are the keys an encrypted assertion may be for: the
	// current one, the next, the retiring one.
	decKeys []*rsa.PrivateKey
	// retiringUsed rate-limits the log line that says the IdP still
	// encrypts to the retiring key: the Unix nanoseconds of the last one.
	retiringUsed atomic.Int64
	// mdCert must have signed the IdP metadata, when set.
	mdCert *x509.Certificate

	// policy is the signature and digest policy of every inbound message.
	policy algPolicy

	// customQuery is Config.Custom, encoded once.
	customQuery string

	// entityDocs fetches one entity's metadata: the one IdP's, or an MDQ
	// server's answers.
	entityDocs *docfetch.Fetcher
	// md is the one IdP's metadata; fed, instead, a federation's IdPs.
	md  *metadataCache
	fed *federation
	// fedCert is the federation's signing certificate.
	fedCert *x509.Certificate
	// art resolves artifacts; nil unless Config.ResponseBinding is
	// ResponseArtifact.
	art *artifactClient
	// expiry rate-limits the log lines about certificates that expire.
	expiry   expiryWatch
	stop     context.CancelFunc
	done     chan struct{}
	closeOne sync.Once
}

var (
	_ providers.Strategy            = (*SP)(nil)
	_ providers.CrossSiteCallback   = (*SP)(nil)
	_ providers.BodyLimiter         = (*SP)(nil)
	_ providers.UnsolicitedCallback = (*SP)(nil)
)

// New checks cfg, builds the service provider and starts fetching the IdP
// metadata in the background. It does not wait for the IdP: until a first
// copy of its metadata arrives, Begin and Complete fail with
// provider_unavailable. Call Close when done with it.
func New(cfg Config, env providers.Env, opts Options) (*SP, error) {
	var problems []error
	if cfg.SPEntityID == "" {
		problems = append(problems, errors.New("saml_sp_entity_id is required"))
	}
	if env.CallbackURL == "" {
		problems = append(problems, errors.New("callback URL is required"))
	}
	if env.HTTPClient == nil {
		problems = append(problems, errors.New("an HTTP client is required"))
	}
	if env.Store == nil {
		problems = append(problems, errors.New("a replay store is required"))
	}
	var idpMeta, fedURL, mdqURL *url.URL
	var fedCert *x509.Certificate
	if cfg.Federation.Enabled() {
		fedURL, mdqURL, fedCert, problems = checkFederation(cfg, problems)
		if opts.AllowSHA1 {
			problems = append(problems, errors.New("Options.SAML.AllowSHA1 does not apply to a federation, "+
				"where it would accept SHA-1 from every IdP of the aggregate and on the aggregate's own signature"))
		}
	} else {
		var err error
		if idpMeta, err = checkMetadataURL(cfg.IdPMetadataURL); err != nil {
			problems = append(problems, fmt.Errorf("saml_idp_metadata_url: %w", err))
		}
	}
	if cfg.IdPSSOServiceURL != "" {
		if u, err := url.Parse(cfg.IdPSSOServiceURL); err != nil || !u.IsAbs() || (u.Scheme != "https" && u.Scheme != "http") {
			problems = append(problems, errors.New("saml_idp_sso_service_url: not an absolute http(s) URL"))
		}
	}
	if opts.ClockSkew == 0 {
		opts.ClockSkew = DefaultClockSkew
	}
	if opts.ClockSkew < 0 || opts.ClockSkew > maxClockSkew {
		problems = append(problems, fmt.Errorf("clock skew must be between 0 and %s", maxClockSkew))
	}
	if opts.NameIDFormat == "" {
		opts.NameIDFormat = NameIDUnspecified
	}
	if opts.MaxResponseBytes <= 0 {
		opts.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if opts.MaxDecryptedBytes <= 0 {
		opts.MaxDecryptedBytes = DefaultMaxDecryptedBytes
	}
	if opts.MetadataRefresh <= 0 {
		opts.MetadataRefresh = DefaultMetadataRefresh
	}
	if opts.MetadataRetry <= 0 {
		opts.MetadataRetry = 5 * time.Second
	}

	sp := &SP{cfg: cfg, opts: opts, env: env, log: env.Logger, idpMeta: idpMeta, fedCert: fedCert, policy: algPolicy{allowSHA1: opts.AllowSHA1 || cfg.AllowSHA1}}
	if sp.log == nil {
		sp.log = slog.New(slog.DiscardHandler)
	}
	if sp.env.Now == nil {
		sp.env.Now = time.Now
	}

	if env.CallbackURL != "" {
		acs, err := url.Parse(env.CallbackURL)
		if err != nil || !acs.IsAbs() {
			problems = append(problems, errors.New("callback URL is not absolute"))
		} else {
			sp.acs = acs
			sp.origin = acs.Scheme + "://" + acs.Host
			base := strings.TrimSuffix(acs.String(), "/callback")
			sp.slo, problems = derivedURL(opts.SLOURL, base+"/logout", "SLO URL", problems)
			sp.metaURL, problems = derivedURL(opts.MetadataURL, base+"/metadata", "metadata URL", problems)
			if cfg.RelayState != "" {
				dst, ok := SafeReturnPath(cfg.RelayState, sp.origin)
				if !ok {
					problems = append(problems, errors.New("saml_additional_settings.RelayState: must be a relative path or a URL of this site"))
				}
				sp.relayDst = dst
			}
		}
	}

	if cfg.CertificatePEM != "" || cfg.PrivateKeyPEM != "" {
		key, cert, err := ParseKeyPair(cfg.CertificatePEM, cfg.PrivateKeyPEM)
		if err != nil {
			problems = append(problems, err)
		}
		sp.key, sp.cert = key, cert
	}
	if cfg.CertificateNewPEM != "" || cfg.PrivateKeyNewPEM != "" {
		key, cert, err := parseKeyPair(cfg.CertificateNewPEM, cfg.PrivateKeyNewPEM, "certificate_new", "private_key_new")
		switch {
		case err != nil:
			problems = append(problems, err)
		case cfg.CertificatePEM == "" || cfg.PrivateKeyPEM == "":
			problems = append(problems, errors.New("saml_additional_settings.certificate_new: the next key pair needs the current one (certificate and private_key): "+
				"without a current pair, configure the new one as certificate and private_key"))
		default:
			sp.keyNew, sp.certNew = key, cert
		}
	}
	if cfg.CertificateOldPEM != "" || cfg.PrivateKeyOldPEM != "" {
		key, cert, err := parseKeyPair(cfg.CertificateOldPEM, cfg.PrivateKeyOldPEM, "certificate_old", "private_key_old")
		switch {
		case err != nil:
			problems = append(problems, err)
		case cfg.CertificatePEM == "" || cfg.PrivateKeyPEM == "":
			problems = append(problems, errors.New("saml_additional_settings.certificate_old: the retiring key pair needs a current one (certificate and private_key) that replaced it"))
		case sp.keyNew != nil && sp.keyNew.PublicKey.Equal(&key.PublicKey):
			problems = append(problems, errors.New("saml_additional_settings.certificate_old: holds the key pair of certificate_new: a pair cannot be retiring and next at once"))
		default:
			sp.keyOld, sp.certOld = key, cert
		}
	}
	if v := cfg.MetadataValidFor; v != 0 && (v < MinMetadataValidFor || v > MaxMetadataValidFor) {
		problems = append(problems, errors.New("saml_additional_settings.metadata_valid_for: must be between 1 hour and 3650 days"))
	}
	if v := cfg.MetadataCacheDuration; v != 0 && (v < MinMetadataCacheDuration || v > MaxMetadataValidFor) {
		problems = append(problems, errors.New("saml_additional_settings.metadata_cache_duration: must be between 1 minute and 3650 days"))
	} else if v > 0 && cfg.MetadataValidFor > 0 && v > cfg.MetadataValidFor {
		problems = append(problems, errors.New("saml_additional_settings.metadata_cache_duration: must not exceed metadata_valid_for (an IdP would keep a copy past its validUntil)"))
	}
	if cfg.IdPMetadataCertificatePEM != "" {
		c, err := ParseCertificatePEM(cfg.IdPMetadataCertificatePEM)
		if err != nil {
			problems = append(problems, fmt.Errorf("saml_additional_settings.idp_metadata_certificate: %w", err))
		}
		sp.mdCert = c
	}
	if cfg.LogoutRequestsSigned && sp.key == nil {
		problems = append(problems, errors.New("saml_additional_settings.security.logout_requests_signed needs certificate and private_key"))
	}
	switch cfg.ResponseBinding {
	case "", ResponsePOST:
		if !cfg.Artifact.isZero() {
			problems = append(problems, errors.New("saml_additional_settings.artifact: applies to response_binding: artifact only"))
		}
	case ResponseArtifact:
		problems = sp.newArtifactClient(problems)
	default:
		problems = append(problems, fmt.Errorf("saml_additional_settings.response_binding: %.40q is neither post nor artifact", cfg.ResponseBinding))
	}
	for _, p := range cfg.Custom {
		if p.Name == "" || reservedParam(p.Name) {
			problems = append(problems, fmt.Errorf("saml_additional_settings: custom entry %q cannot be sent as a query parameter", p.Name))
		}
	}
	sp.customQuery = encodeCustom(cfg.Custom)
	for _, p := range providers.CheckRequestOptionConfig(settingsKey, opts.RequestOptions, providers.SAMLRequestOptions(),
		opts.AssuranceLevels, providers.OptionAuthnContext, strings.Fields(cfg.AuthnContext)) {
		problems = append(problems, p)
	}
	switch opts.AuthnRequestBinding {
	case "", BindingRedirect, BindingPOST:
	default:
		problems = append(problems, fmt.Errorf("AuthnRequestBinding %q is neither the HTTP-Redirect nor the HTTP-POST binding", opts.AuthnRequestBinding))
	}
	if len(problems) > 0 {
		return nil, providers.NewError(providers.CodeMisconfigured, "SAML configuration is invalid", errors.Join(problems...))
	}

	if sp.keyNew != nil && sp.key.PublicKey.Equal(&sp.keyNew.PublicKey) {
		// Harmless, and what a promotion that forgot to empty the new
		// pair leaves behind: nothing to publish twice.
		sp.log.Warn("saml: saml_additional_settings.certificate_new holds the current key pair; " +
			"remove certificate_new and private_key_new, there is nothing to rotate")
		sp.keyNew, sp.certNew = nil, nil
	}
	if sp.keyOld != nil && sp.key.PublicKey.Equal(&sp.keyOld.PublicKey) {
		// What a promotion that copied certificate to certificate_old but
		// not certificate_new to certificate leaves behind.
		sp.log.Warn("saml: saml_additional_settings.certificate_old holds the current key pair; nothing retires. " +
			"To promote the next pair, it becomes certificate and private_key; otherwise remove certificate_old and private_key_old")
		sp.keyOld, sp.certOld = nil, nil
	}
	for _, k := range []*rsa.PrivateKey{sp.key, sp.keyNew, sp.keyOld} {
		if k != nil {
			sp.decKeys = append(sp.decKeys, k)
		}
	}
	if sp.policy.allowSHA1 {
		var by []string
		if opts.AllowSHA1 {
			by = append(by, "extauth.Options.SAML.AllowSHA1")
		}
		if cfg.AllowSHA1 {
			by = append(by, "saml_additional_settings.security.allow_sha1")
		}
		sp.log.Warn("saml: SHA-1 signatures and digests are accepted ("+strings.Join(by, " and ")+"): "+
			"a SHA-1 signature no longer proves what the IdP signed; move the IdP to RSA-SHA256", "setting", strings.Join(by, ", "))
	}
	if opts.AllowRSA15KeyTransport {
		sp.log.Warn("saml: rsa-1_5 key transport is accepted (extauth.Options.SAML.AllowRSA15KeyTransport): " +
			"it is open to Bleichenbacher's attack; move the IdP to RSA-OAEP")
	}
	sp.entityDocs = entityDocuments(env.HTTPClient)
	switch {
	case mdqURL != nil:
		sp.fed = newFederation(sp, nil)
		sp.fed.mdq = newMDQClient(sp, mdqURL)
		sp.checkExpiry()
		return sp, nil
	case fedURL != nil:
		fs := opts.Federations
		if fs == nil {
			fs = &Federations{}
		}
		sp.fed = newFederation(sp, fs.acquire(sp, fedCert, fedURL))
		sp.checkExpiry()
		return sp, nil
	}
	sp.md = newMetadataCache(sp)
	sp.checkExpiry()
	ctx, cancel := context.WithCancel(context.Background())
	sp.stop = cancel
	sp.done = make(chan struct{})
	go func() {
		defer close(sp.done)
		sp.md.run(ctx)
	}()
	return sp, nil
}

// checkFederation checks the federation settings of cfg.
func checkFederation(cfg Config, problems []error) (aggregate, mdq *url.URL, cert *x509.Certificate, _ []error) {
	const pre = "saml_additional_settings.federation."
	f := cfg.Federation
	if cfg.IdPMetadataURL != "" {
		problems = append(problems, errors.New("saml_idp_metadata_url: a federation (saml_additional_settings.federation) lists the IdPs; set one or the other"))
	}
	if cfg.IdPSSOServiceURL != "" {
		problems = append(problems, errors.New("saml_idp_sso_service_url: the IdPs of a federation each have their own; leave it empty"))
	}
	if cfg.IdPMetadataCertificatePEM != "" {
		problems = append(problems, errors.New("saml_additional_settings.idp_metadata_certificate: a federation's aggregate is verified with federation.signing_certificate; leave it empty"))
	}
	// SHA-1 is accepted of one IdP, by a setting that names it; in a
	// federation it would be of every IdP, and of the aggregate's
	// signature, which vouches for every IdP's keys.
	if cfg.AllowSHA1 {
		problems = append(problems, errors.New("saml_additional_settings.security.allow_sha1: does not apply to a federation, "+
			"where it would accept SHA-1 from every IdP of the aggregate and on the aggregate's own signature; leave it off"))
	}
	var err error
	switch {
	case f.MetadataURL != "" && f.MDQURL != "":
		problems = append(problems, errors.New(pre+"mdq_url: the aggregate (metadata_url) or an MDQ server: set one"))
	case f.MDQURL != "":
		if mdq, err = checkMetadataURL(f.MDQURL); err != nil {
			problems = append(problems, fmt.Errorf("%smdq_url: %w", pre, err))
		}
		if len(f.EntityIDs) == 0 && f.DiscoveryURL == "" {
			problems = append(problems, errors.New(pre+"entity_ids: with an MDQ server, list the IdPs users may choose, or set discovery_url"))
		}
		if f.BackingFile != "" {
			problems = append(problems, errors.New(pre+"backing_file: applies to an aggregate (metadata_url), not to an MDQ server"))
		}
	default:
		if aggregate, err = checkMetadataURL(f.MetadataURL); err != nil {
			problems = append(problems, fmt.Errorf("%smetadata_url: %w", pre, err))
		}
	}
	if f.SigningCertificatePEM == "" {
		problems = append(problems, errors.New(pre+"signing_certificate is required: nothing of the aggregate is used unless its signature verifies with it"))
	} else if cert, err = ParseCertificatePEM(f.SigningCertificatePEM); err != nil {
		problems = append(problems, fmt.Errorf("%ssigning_certificate: %w", pre, err))
	}
	if f.DiscoveryURL != "" {
		if err := CheckDiscoveryURL(f.DiscoveryURL); err != nil {
			problems = append(problems, fmt.Errorf("%sdiscovery_url: %w", pre, err))
		}
	}
	if f.MaxValidity < 0 {
		problems = append(problems, errors.New(pre+"max_validity: must be positive"))
	}
	if f.BackingFile != "" && !filepath.IsAbs(f.BackingFile) {
		problems = append(problems, errors.New(pre+"backing_file: must be an absolute path"))
	}
	return aggregate, mdq, cert, problems
}

// Close stops the background metadata refresh and waits for it to end.
func (sp *SP) Close() error {
	sp.closeOne.Do(func() {
		if sp.fed != nil {
			if sp.fed.src != nil {
				sp.fed.src.release()
			}
			return
		}
		sp.stop()
		<-sp.done
	})
	return nil
}

// Name returns "saml".
func (sp *SP) Name() string { return Name }

// DisplayName is what people call the IdP: its organisation's display name
// from the metadata (English first), else the host name of its entity ID;
// "" in a federation, whose IdPs each have their own (IdPName), and before
// the first metadata arrives.
func (sp *SP) DisplayName() string {
	if sp.fed != nil || sp.md == nil {
		return ""
	}
	md := sp.md.current()
	if md == nil || md.entity == nil {
		return ""
	}
	if o := md.entity.Organization; o != nil {
		names := o.OrganizationDisplayNames
		for _, n := range names {
			if strings.HasPrefix(strings.ToLower(n.Lang), "en") && strings.TrimSpace(n.Value) != "" {
				return strings.TrimSpace(n.Value)
			}
		}
		if len(names) > 0 && strings.TrimSpace(names[0].Value) != "" {
			return strings.TrimSpace(names[0].Value)
		}
	}
	if u, err := url.Parse(md.entity.EntityID); err == nil && u.Hostname() != "" {
		return u.Hostname()
	}
	return ""
}

// CrossSiteCallback is true: the IdP returns the browser with a cross-site
// POST, so the transaction cookie must be SameSite=None on the callback path.
func (sp *SP) CrossSiteCallback() bool { return true }

// AcceptsUnsolicited reports Options.AllowIDPInitiated: whether the routes
// may pass a callback without a transaction to Complete.
func (sp *SP) AcceptsUnsolicited() bool { return sp.opts.AllowIDPInitiated }

// MaxCallbackBytes bounds the callback body: the base64 of the largest
// response we accept, plus room for RelayState and form encoding.
func (sp *SP) MaxCallbackBytes() int64 {
	return sp.maxEncodedResponse()*3/2 + 4096
}

// maxEncodedResponse is the longest SAMLResponse form value whose base64
// decodes to at most MaxResponseBytes.
func (sp *SP) maxEncodedResponse() int64 {
	// Base64 grows 4/3; IdPs often wrap lines every 64 or 76 characters.
	return (sp.opts.MaxResponseBytes+2)/3*4*78/76 + 4
}

// EntityID returns our entity ID.
func (sp *SP) EntityID() string { return sp.cfg.SPEntityID }

// ACSURL returns the assertion consumer service URL (the callback URL).
func (sp *SP) ACSURL() string { return sp.acs.String() }

// SLOURL returns the single logout URL.
func (sp *SP) SLOURL() string { return sp.slo.String() }

// MetadataURL returns the URL at which our metadata is to be served.
func (sp *SP) MetadataURL() string { return sp.metaURL.String() }

// Ready reports whether the SP can sign users in: ReadyError is nil.
func (sp *SP) Ready() bool { return sp.ReadyError() == nil }

func derivedURL(override, def, what string, problems []error) (*url.URL, []error) {
	s := def
	if override != "" {
		s = override
	}
	u, err := url.Parse(s)
	if err != nil || !u.IsAbs() {
		return nil, append(problems, fmt.Errorf("%s is not absolute", what))
	}
	return u, problems
}

// reservedParam reports whether name is one of the parameters the
// HTTP-Redirect binding defines; a custom entry must not shadow them.
func reservedParam(name string) bool {
	for _, p := range bindingParams {
		if strings.EqualFold(name, p) {
			return true
		}
	}
	return false
}

// CheckDiscoveryURL reports what is wrong with an external discovery
// service's URL (federation.discovery_url): it must be absolute, without a
// fragment, and https; plain http only on a loopback host, for a discovery
// service run beside the application in development.
func CheckDiscoveryURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || !u.IsAbs() || u.Host == "" || u.Fragment != "":
		return errors.New("must be an absolute https URL without a fragment")
	case u.Scheme == "https", u.Scheme == "http" && outbound.IsLoopback(u.Hostname()):
		return nil
	}
	return errors.New("must be an absolute https URL (plain http only on a loopback host)")
}

// checkMetadataURL requires an absolute URL, HTTPS unless the host is a
// loopback address: the metadata carries the keys we trust, so fetching it
// in clear text would let anyone on the path choose them.
func checkMetadataURL(s string) (*url.URL, error) {
	if s == "" {
		return nil, errors.New("is required")
	}
	u, err := url.Parse(s)
	if err != nil || !u.IsAbs() || u.Host == "" {
		return nil, errors.New("not an absolute URL")
	}
	switch u.Scheme {
	case "https":
		return u, nil
	case "http":
		if outbound.IsLoopback(u.Hostname()) {
			return u, nil
		}
		return nil, errors.New("must use https (plain http only for loopback addresses)")
	default:
		return nil, errors.New("must use https")
	}
}

// ParseCertificatePEM parses one PEM certificate. Errors never quote it.
func ParseCertificatePEM(s string) (*x509.Certificate, error) {
	b, rest := pem.Decode([]byte(s))
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, errors.New("not a PEM certificate")
	}
	if len(strings.TrimSpace(string(rest))) != 0 {
		return nil, errors.New("more than one PEM block")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil, errors.New("the certificate does not parse")
	}
	return c, nil
}

// ParseKeyPair parses the SP certificate and private key and checks that
// they belong together and that the key is RSA of at least 2048 bits. Errors
// name the setting, never its value.
func ParseKeyPair(certPEM, keyPEM string) (*rsa.PrivateKey, *x509.Certificate, error) {
	return parseKeyPair(certPEM, keyPEM, "certificate", "private_key")
}

// parseKeyPair is ParseKeyPair for the pair whose settings are named
// certName and keyName under saml_additional_settings.
func parseKeyPair(certPEM, keyPEM, certName, keyName string) (*rsa.PrivateKey, *x509.Certificate, error) {
	const pre = "saml_additional_settings."
	if certPEM == "" || keyPEM == "" {
		return nil, nil, fmt.Errorf("saml_additional_settings: %s and %s must be set together", certName, keyName)
	}
	cb, _ := pem.Decode([]byte(certPEM))
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, nil, errors.New(pre + certName + ": not a PEM certificate")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%s%s: %w", pre, certName, err)
	}
	pair, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM))
	if err != nil {
		// The tls error can quote neither value, but it does not say which
		// half is wrong either: tell the two cases apart ourselves.
		if kb, _ := pem.Decode([]byte(keyPEM)); kb == nil || !strings.HasSuffix(kb.Type, "PRIVATE KEY") {
			return nil, nil, errors.New(pre + keyName + ": not a PEM private key")
		}
		if certName == "certificate" {
			return nil, nil, errors.New(pre + keyName + ": does not match the certificate")
		}
		return nil, nil, errors.New(pre + keyName + ": does not match " + certName)
	}
	key, ok := pair.PrivateKey.(*rsa.PrivateKey)
	if !ok {
		return nil, nil, errors.New(pre + keyName + ": must be an RSA key")
	}
	if key.N.BitLen() < 2048 {
		return nil, nil, errors.New(pre + keyName + ": RSA key must have at least 2048 bits")
	}
	return key, cert, nil
}

// crewjamSP returns a fresh crewjam ServiceProvider that builds our SP
// metadata and the logout messages we send; callers may change their copy
// (its SignatureMethod) for one message. It never reads what we receive.
func (sp *SP) crewjamSP(md *idpMetadata) *saml.ServiceProvider {
	c := &saml.ServiceProvider{
		EntityID:          sp.cfg.SPEntityID,
		AcsURL:            *sp.acs,
		SloURL:            *sp.slo,
		MetadataURL:       *sp.metaURL,
		AuthnNameIDFormat: saml.NameIDFormat(sp.opts.NameIDFormat),
		LogoutBindings:    []string{saml.HTTPRedirectBinding, saml.HTTPPostBinding},
	}
	if md != nil {
		c.IDPMetadata = md.entity
	}
	if sp.key != nil {
		c.Key = sp.key
		c.Certificate = sp.cert
		c.SignatureMethod = dsig.RSASHA256SignatureMethod
	}
	return c
}

// unavailable is the error of every operation before the first metadata.
func unavailable(cause error) *providers.Error {
	if cause == nil {
		// No fetch has ended yet: the log must say so, not err=<nil>.
		cause = errors.New("IdP metadata not loaded yet: the first fetch is under way")
	}
	return &providers.Error{
		Code:     providers.CodeProviderUnavailable,
		Provider: Name,
		Message:  "the SAML identity provider's metadata is not available yet",
		Err:      cause,
	}
}

func invalid(message string, cause error) *providers.Error {
	return &providers.Error{Code: providers.CodeInvalidResponse, Provider: Name, Message: message, Err: cause}
}

// SafeReturnPath returns s as a relative path when it is one, or when it is
// an absolute URL of origin; ok is false for anything that could leave the
// site, however often it is decoded (//evil, /\evil, /%2F%2Fevil,
// /%09/evil.com, other schemes). It applies the same rules as
// extauth.SafeReturnTo.
func SafeReturnPath(s, origin string) (path string, ok bool) { return safepath.OnSite(s, origin) }

// redactedConfig is Config as it may be printed, the private keys reduced
// to whether it is set: Config's fields without its methods, so that
// printing it does not come back to Format. A secret field added to Config
// must be blanked in redacted too.
type redactedConfig Config

func (c Config) redacted() redactedConfig {
	r := redactedConfig(c)
	if r.PrivateKeyPEM != "" {
		r.PrivateKeyPEM = "[REDACTED]"
	}
	if r.PrivateKeyNewPEM != "" {
		r.PrivateKeyNewPEM = "[REDACTED]"
	}
	if r.PrivateKeyOldPEM != "" {
		r.PrivateKeyOldPEM = "[REDACTED]"
	}
	if r.Artifact.TLSPrivateKeyPEM != "" {
		r.Artifact.TLSPrivateKeyPEM = "[REDACTED]"
	}
	if r.Artifact.TLSPrivateKeyNewPEM != "" {
		r.Artifact.TLSPrivateKeyNewPEM = "[REDACTED]"
	}
	return r
}

// Format prints the configuration with the private key redacted, whatever
// the verb.
func (c Config) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('+') {
		fmt.Fprintf(f, "%+v", c.redacted())
		return
	}
	fmt.Fprintf(f, "%v", c.redacted())
}

// LogValue makes slog print the configuration with the key redacted.
func (c Config) LogValue() slog.Value { return slog.AnyValue(c.redacted()) }

// MarshalJSON writes the configuration with the key redacted.
func (c Config) MarshalJSON() ([]byte, error) { return json.Marshal(c.redacted()) }

// Format prints the SP as its entity ID: its fields hold the private key.
func (sp *SP) Format(f fmt.State, _ rune) { fmt.Fprintf(f, "samlsp.SP(%s)", sp.cfg.SPEntityID) }

// LogValue makes slog print the SP as its entity ID.
func (sp *SP) LogValue() slog.Value { return slog.StringValue("samlsp.SP(" + sp.cfg.SPEntityID + ")") }
