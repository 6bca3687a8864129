package extauth

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/extauth/extauth/internal/redact"
	"github.com/extauth/extauth/providers"
	"github.com/extauth/extauth/samlsp"
)

// Config is the typed form of the secrets file: the sixteen settings of the
// specification, grouped by provider, plus the documented extensions (the
// *_site endpoint overrides). A provider whose settings are all empty is not
// configured; LoadConfig and ParseConfig reject one that is half filled.
type Config struct {
	// Microblog: microblog_key, microblog_secret and the extension
	// microblog_site (API base, default https://api.twitter.com).
	Microblog OAuthProvider
	// Socialnet: socialnet_key, socialnet_secret and the extension
	// socialnet_site (one base for the dialog and Graph paths).
	Socialnet OAuthProvider
	// SearchOAuth2: search_oauth2_key, search_oauth2_secret and the extension
	// search_oauth2_site (issuer, default https://accounts.google.com).
	SearchOAuth2 OAuthProvider
	// BlogOAuth2: blog_oauth2_key, blog_oauth2_secret and blog_oauth2_site
	// (the WordPress site running WP OAuth Server).
	BlogOAuth2 OAuthProvider
	// SAML: saml_sp_entity_id, saml_idp_metadata_url,
	// saml_idp_sso_service_url and saml_additional_settings.
	SAML SAMLConfig
	// OIDC: oidc_client_id, oidc_client_secret, oidc_issuer and
	// oidc_additional_settings.
	OIDC OIDCConfig

	// Warnings lists what loading noticed and tolerated, such as a key that
	// looks like a misspelling of one of ours ("twiter_key"), in the order
	// found. Warnings never contain values. Most are slog.LevelWarn; a few
	// are notes that need no action, such as twitter_key being read as
	// microblog_key: WarningLevel tells them apart and LogWarnings logs each
	// at its level. The warnings of tenants are included, each prefixed with
	// "tenants.<name>: ".
	Warnings []string

	// Environment is the environment section that was read ("production"),
	// or "" for a flat file, which has no sections.
	Environment string
	// EnvironmentSource says why Environment was chosen: "Env option",
	// "EXTAUTH_ENV", "RAILS_ENV" or "APP_ENV" when it came from that option
	// or variable, "default" when none was given and it is development; ""
	// for a flat file.
	EnvironmentSource string

	// Tenant is the name of the tenant this configuration is for, "" for
	// an environment's own configuration.
	Tenant string
	// Tenants maps each tenant of the file's tenants: section to its full
	// effective configuration: the environment's settings with the
	// tenant's own entries replacing them key by key (see ParseConfig).
	// Each value has Tenant set and no Tenants of its own; its Warnings are
	// those about its own entries. Nil when the file has no tenants.
	// Options.TenantOf says which tenant a request is for.
	Tenants map[string]*Config

	// levels holds the level of each of Warnings when the loader set them.
	levels []slog.Level
}

// WarningLevel returns the level of Warnings[i]: slog.LevelInfo for a note
// that needs no action, slog.LevelWarn for the rest (and for warnings a host
// added to the slice itself).
func (c *Config) WarningLevel(i int) slog.Level {
	if i >= 0 && i < len(c.levels) && i < len(c.Warnings) {
		return c.levels[i]
	}
	return slog.LevelWarn
}

// LogWarnings logs each of Warnings to logger at its level, with the message
// "extauth: config" and the text as the attribute "warning".
func (c *Config) LogWarnings(ctx context.Context, logger *slog.Logger) {
	for i, w := range c.Warnings {
		logger.Log(ctx, c.WarningLevel(i), "extauth: config", "warning", w)
	}
}

// Format prints the configuration for every verb as %v (or %+v, %#v) does,
// with its secrets redacted. Without it, a verb that does not apply to a
// pointer (%q of the Tenants map) would make fmt print each tenant's
// configuration raw, its secrets included.
func (c Config) Format(f fmt.State, verb rune) { redact.Format(f, verb, c) }

// TenantNames returns the names of Tenants, sorted.
func (c *Config) TenantNames() []string {
	return slices.Sorted(maps.Keys(c.Tenants))
}

// OAuthProvider is the registration of an OAuth provider: the key and secret
// it issued, and the site it runs on.
type OAuthProvider struct {
	Key    string
	Secret Secret
	// Site is the provider's base URL. Required for blog_oauth2; an optional
	// override of the real host for the others.
	Site string
}

// Configured reports whether the provider has its credentials.
func (p OAuthProvider) Configured() bool { return p.Key != "" && !p.Secret.IsZero() }

// SAMLConfig is the SAML service-provider registration.
type SAMLConfig struct {
	// SPEntityID is the entity ID of this application as service provider.
	SPEntityID string
	// IdPMetadataURL is where the IdP publishes its metadata.
	IdPMetadataURL string
	// IdPSSOServiceURL overrides the single sign-on location of the metadata.
	IdPSSOServiceURL string
	// Additional is saml_additional_settings.
	Additional SAMLAdditionalSettings
}

// Configured reports whether SAML has its required settings: the entity
// ID, and the IdP's metadata URL or a federation's.
func (c SAMLConfig) Configured() bool {
	f := c.Additional.Federation
	return c.SPEntityID != "" && (c.IdPMetadataURL != "" || f.MetadataURL != "" || f.MDQURL != "")
}

// SAMLAdditionalSettings is the saml_additional_settings mapping.
type SAMLAdditionalSettings struct {
	// RelayState is the page to go to after sign-in (relative or same-origin).
	RelayState string
	// AuthnContext is the requested authentication context class (a
	// URN), or several, space-separated: the assertion's class must be
	// one of them.
	AuthnContext string
	// Certificate is the service provider's PEM certificate.
	Certificate string
	// PrivateKey is the service provider's PEM private key.
	PrivateKey Secret
	// CertificateNew and PrivateKeyNew (certificate_new, private_key_new)
	// are the next key pair during a key rotation: the SP metadata
	// publishes its certificate for signing, assertions encrypted to it are
	// decrypted, and requests are still signed with the current key.
	// CertificateOld and PrivateKeyOld (certificate_old, private_key_old)
	// are the retiring pair once the next one is promoted: it decrypts
	// what the IdP still encrypts to it and never signs. See docs/saml.md,
	// "Rotating the SP key pair".
	CertificateNew string
	PrivateKeyNew  Secret
	CertificateOld string
	PrivateKeyOld  Secret
	// MetadataValidFor (metadata_valid_for) puts a validUntil that far
	// after the time it is served on the SP metadata; zero, the default,
	// puts none. MetadataCacheDuration (metadata_cache_duration) is its
	// cacheDuration, none when zero. The secrets file gives them as
	// xs:durations (P30D, PT12H) or Go durations (720h).
	MetadataValidFor      time.Duration
	MetadataCacheDuration time.Duration
	// IdPMetadataCertificate (idp_metadata_certificate), a PEM certificate,
	// makes the IdP metadata trusted only when signed with its key:
	// unsigned or badly signed metadata is refused.
	IdPMetadataCertificate string
	// Security is the security mapping.
	Security SAMLSecurity
	// Federation (federation) signs users in through the IdPs of a
	// federation instead of one IdP: see docs/saml.md, "Federations".
	Federation SAMLFederation
	// ResponseBinding (response_binding) is how the IdP is asked to send
	// its Response: post (the default) through the browser, or artifact
	// (the HTTP-Artifact binding), resolved back-channel with Artifact's
	// settings: see docs/saml.md, "Artifact binding".
	ResponseBinding string
	// Artifact (artifact) is the back-channel of the artifact binding.
	Artifact SAMLArtifact
	// SPMetadata (sp_metadata) is what the SP metadata says of the
	// application besides its endpoints and keys, as federations ask for
	// it: see docs/saml.md, "What a federation asks of our metadata".
	SPMetadata SAMLSPMetadata
	// RequestOptions (request_options) are the per-request sign-in
	// options the start route takes (ForceAuthn, IsPassive,
	// authn_context, max_age, level); they replace
	// Options.SAML.RequestOptions.
	RequestOptions []string
	// AssuranceLevels (assurance_levels) maps the host's assurance levels
	// to the authentication context classes that meet each; it replaces
	// Options.SAML.AssuranceLevels.
	AssuranceLevels map[string][]string
	// Custom holds every other entry, in file order, sent to the IdP as
	// query parameters of the sign-in request (e.g. organization).
	Custom []Param
}

// HasKeyPair reports whether both halves of the SP key pair are set.
// The next and retiring pairs of a rotation (CertificateNew,
// CertificateOld) do not count.
func (s SAMLAdditionalSettings) HasKeyPair() bool {
	return s.Certificate != "" && !s.PrivateKey.IsZero()
}

// SAMLSecurity is saml_additional_settings.security.
type SAMLSecurity struct {
	// LogoutRequestsSigned signs single-logout requests.
	LogoutRequestsSigned bool
	// RefuseCBCEncryption (refuse_cbc_encryption) refuses assertions and
	// NameIDs encrypted with a CBC block cipher (AES-CBC, 3DES) and
	// publishes only AES-GCM in the SP metadata.
	RefuseCBCEncryption bool
	// AllowSHA1 (allow_sha1) accepts SHA-1 signatures and digests from the
	// IdP, as Options.SAML.AllowSHA1 does, with the same start-up warning:
	// of this configuration's IdP only, so never with a federation.
	AllowSHA1 bool
	// NameIDEncrypted (name_id_encrypted) sends the NameID of single
	// logout requests encrypted to the IdP's encryption certificate.
	NameIDEncrypted bool
	// EnforceIdPCertificateDates (enforce_idp_certificate_dates) refuses
	// responses signed with an IdP certificate outside its validity
	// dates. By default its dates do not decide: the metadata that
	// carries the key does (SAML V2.0 Metadata Interoperability Profile).
	EnforceIdPCertificateDates bool
}

// SAMLFederation is saml_additional_settings.federation: a federation's
// signed aggregate of IdPs, which users choose from on a discovery page.
type SAMLFederation struct {
	// MetadataURL (metadata_url) is the federation's signed aggregate.
	// saml_idp_metadata_url is then left empty.
	MetadataURL string
	// MDQURL (mdq_url), instead of MetadataURL, is the federation's MDQ
	// server, asked for each IdP's metadata when a sign-in needs it;
	// EntityIDs then lists the IdPs users may choose. MDQSHA1 (mdq_sha1)
	// asks for {sha1}<hex> identifiers instead of the entity IDs.
	MDQURL  string
	MDQSHA1 bool
	// SigningCertificate (signing_certificate) is the federation's
	// metadata signing certificate (PEM), pinned: an aggregate is used
	// only when its signature verifies with it.
	SigningCertificate string
	// BackingFile (backing_file), an absolute path, keeps the last
	// aggregate that verified, for a restart while the federation's
	// server is down.
	BackingFile string
	// MaxValidity (max_validity) refuses an aggregate valid for longer
	// (default 28 days).
	MaxValidity time.Duration
	// EntityIDs (entity_ids), RegistrationAuthorities
	// (registration_authorities) and EntityCategories (entity_categories)
	// restrict the IdPs users may choose; each list given restricts.
	EntityIDs               []string
	RegistrationAuthorities []string
	EntityCategories        []string
	// DiscoveryURL (discovery_url) is an external discovery service (the
	// SAML IdP Discovery Protocol) users choose their IdP at, instead of
	// the discovery page.
	DiscoveryURL string
}

// SAMLSPMetadata is saml_additional_settings.sp_metadata.
type SAMLSPMetadata struct {
	// DisplayName and Description (display_name, description) map an
	// xml:lang to the text; a single value in the file is English.
	DisplayName, Description map[string]string
	// Logo (logo: url, width, height) is an https URL.
	Logo                  string
	LogoWidth, LogoHeight int
	// InformationURL and PrivacyStatementURL (information_url,
	// privacy_statement_url).
	InformationURL, PrivacyStatementURL string
	// Organization (organization: name, display_name, url).
	OrganizationName, OrganizationDisplayName, OrganizationURL string
	// Contacts (contacts: a list of type, name, email); type is one of
	// technical, support, administrative, billing, other, security (the
	// REFEDS security contact Sirtfi asks for).
	Contacts []SAMLContact
	// EntityCategories (entity_categories) and AssuranceCertifications
	// (assurance_certifications, e.g. https://refeds.org/sirtfi).
	EntityCategories, AssuranceCertifications []string
	// RequestedAttributes (requested_attributes: a list of name,
	// friendly_name, required).
	RequestedAttributes []SAMLRequestedAttribute
}

// SAMLContact is one entry of sp_metadata.contacts.
type SAMLContact struct{ Type, Name, Email string }

// SAMLRequestedAttribute is one entry of sp_metadata.requested_attributes.
type SAMLRequestedAttribute struct {
	Name, FriendlyName string
	Required           bool
}

// isZero reports whether no sp_metadata setting is given.
func (m SAMLSPMetadata) isZero() bool {
	return len(m.DisplayName) == 0 && len(m.Description) == 0 && m.Logo == "" && m.InformationURL == "" && m.PrivacyStatementURL == "" &&
		m.OrganizationName == "" && m.OrganizationDisplayName == "" && m.OrganizationURL == "" && len(m.Contacts) == 0 &&
		len(m.EntityCategories) == 0 && len(m.AssuranceCertifications) == 0 && len(m.RequestedAttributes) == 0
}

// isZero reports whether no federation setting is given.
func (f SAMLFederation) isZero() bool {
	return f.MetadataURL == "" && f.MDQURL == "" && !f.MDQSHA1 && f.SigningCertificate == "" && f.BackingFile == "" && f.MaxValidity == 0 &&
		len(f.EntityIDs) == 0 && len(f.RegistrationAuthorities) == 0 && len(f.EntityCategories) == 0 && f.DiscoveryURL == ""
}

// Param is one custom name/value entry.
type Param struct {
	Name  string
	Value string
}

// OIDCConfig is the OpenID Connect client registration.
type OIDCConfig struct {
	ClientID string
	// ClientSecret is required but with client_auth_method
	// private_key_jwt.
	ClientSecret Secret
	// Issuer is the exact issuer identifier; discovery is read from
	// Issuer + "/.well-known/openid-configuration".
	Issuer string
	// Additional is oidc_additional_settings.
	Additional OIDCAdditionalSettings
}

// Configured reports whether OIDC has its required settings: the client
// ID, the issuer, and the secret, or private_key_jwt and its key; in a
// federation, the provider's entity identifier and the key.
func (c OIDCConfig) Configured() bool {
	if f := c.Additional.Federation; f != nil {
		// The client ID is our entity identifier, the key authenticates;
		// without an issuer, users choose among the federation's providers.
		return (c.Issuer != "" || c.choosesProvider()) && !c.Additional.PrivateKey.IsZero()
	}
	return c.ClientID != "" && c.Issuer != "" && (!c.ClientSecret.IsZero() || c.keyOnly())
}

// keyOnly reports whether the client authenticates with its private key
// or TLS certificate alone, needing no secret: by private_key_jwt (which
// a profile implies) or mutual TLS.
func (c OIDCConfig) keyOnly() bool {
	return c.Additional.secretless() && (!c.Additional.PrivateKey.IsZero() || c.Additional.TLSClientCertificate != "")
}

// secretless reports whether the settings authenticate the client
// without oidc_client_secret.
func (s OIDCAdditionalSettings) secretless() bool {
	switch s.ClientAuthMethod {
	case providers.AuthMethodPrivateKeyJWT, providers.AuthMethodTLS, providers.AuthMethodSelfSignedTLS:
		return true
	}
	return s.ClientAuthMethod == "" && s.Profile != ""
}

// info is the SP metadata's part of the samlsp configuration.
func (m SAMLSPMetadata) info() samlsp.SPInfo {
	i := samlsp.SPInfo{DisplayNames: m.DisplayName, Descriptions: m.Description, Logo: m.Logo, LogoWidth: m.LogoWidth,
		LogoHeight: m.LogoHeight, InformationURL: m.InformationURL, PrivacyStatementURL: m.PrivacyStatementURL,
		OrganizationName: m.OrganizationName, OrganizationDisplayName: m.OrganizationDisplayName, OrganizationURL: m.OrganizationURL,
		EntityCategories: m.EntityCategories, AssuranceCertifications: m.AssuranceCertifications}
	for _, c := range m.Contacts {
		i.Contacts = append(i.Contacts, samlsp.Contact{Type: c.Type, Name: c.Name, Email: c.Email})
	}
	for _, a := range m.RequestedAttributes {
		i.RequestedAttributes = append(i.RequestedAttributes, samlsp.RequestedAttribute{Name: a.Name, FriendlyName: a.FriendlyName, Required: a.Required})
	}
	return i
}
