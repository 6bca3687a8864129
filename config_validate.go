package extauth

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/extauth/extauth/internal/pemdiag"
	"github.com/extauth/extauth/samlsp"
)

// The classes of configuration problems, for errors.Is on a Problem or on
// any error that wraps a *ValidationError. ErrTemplate is another.
var (
	// ErrMissingSetting: a provider has some of its required settings but
	// not all, or one half of the SAML key pair is missing.
	ErrMissingSetting = errors.New("missing setting")
	// ErrInvalidSetting: a value of the wrong shape (a list where a string
	// belongs, a relative URL, a malformed boolean) or given twice.
	ErrInvalidSetting = errors.New("invalid setting")
	// ErrInvalidKeyPair: the SAML certificate or private key does not parse,
	// is not RSA, is shorter than 2048 bits, or the two do not match.
	ErrInvalidKeyPair = errors.New("invalid SAML key pair")
)

// minRSABits is the key size the specification asks for; shorter keys no
// longer resist factoring with a safe margin (NIST SP 800-131A).
const minRSABits = 2048

// Problem is one thing wrong with a configuration. It names the setting and
// never holds its value, so it is safe to log.
type Problem struct {
	// Tenant is the tenant whose configuration has the problem, empty for
	// the environment's own.
	Tenant string
	// Provider is the provider the setting belongs to, empty for none.
	Provider Provider
	// Key is the setting, like "blog_oauth2_site", with a dotted path below
	// saml_additional_settings ("saml_additional_settings.private_key").
	Key string
	// Reason says what is wrong, to follow the key in a sentence.
	Reason string
	// Err is the class of the problem: ErrMissingSetting, ErrInvalidSetting,
	// ErrInvalidKeyPair or ErrTemplate.
	Err error
}

// Error reads like "blog_oauth2: blog_oauth2_site is missing", or for a
// tenant "tenants.city_a: oidc: oidc_client_id is missing".
func (p Problem) Error() string {
	msg := p.Reason
	if p.Key != "" {
		msg = p.Key + " " + p.Reason
	}
	if p.Provider != "" {
		msg = string(p.Provider) + ": " + msg
	}
	if p.Tenant != "" {
		msg = "tenants." + p.Tenant + ": " + msg
	}
	return msg
}

// Unwrap returns the class of the problem.
func (p Problem) Unwrap() error { return p.Err }

// ValidationError lists every problem of a configuration, so that an
// operator can fix a file in one pass rather than one error per start.
type ValidationError struct {
	// Problems are in the order found: unreadable values in file order,
	// then the checks of Validate in the order of the specification.
	Problems []Problem
}

// Error joins the problems with "; ".
func (e *ValidationError) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.Error()
	}
	if len(msgs) == 1 {
		return msgs[0]
	}
	return fmt.Sprintf("%d problems: %s", len(msgs), strings.Join(msgs, "; "))
}

// Unwrap returns the problems, so errors.Is finds their classes.
func (e *ValidationError) Unwrap() []error {
	errs := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		errs[i] = p
	}
	return errs
}

// field is one string setting of Config, for the loader and Validate to walk
// in the order of the specification.
type field struct {
	key      string
	provider Provider
	required bool
	// check returns why a non-empty value is invalid, or "".
	check func(string) string
	str   *string
	sec   *Secret
}

func (f field) get() string {
	if f.sec != nil {
		return f.sec.Value()
	}
	return *f.str
}

func (f field) set(v string) {
	if f.sec != nil {
		*f.sec = NewSecret(v)
		return
	}
	*f.str = v
}

func (c *Config) fields() []field {
	fs := make([]field, 0, numFields)
	oauth := func(p Provider, o *OAuthProvider, siteRequired bool) {
		k := oauthKeys[p]
		fs = append(fs,
			field{key: k[0], provider: p, required: true, str: &o.Key},
			field{key: k[1], provider: p, required: true, sec: &o.Secret},
			field{key: k[2], provider: p, required: siteRequired, check: checkHTTPURL, str: &o.Site},
		)
	}
	oauth(Microblog, &c.Microblog, false)
	oauth(Socialnet, &c.Socialnet, false)
	oauth(SearchOAuth2, &c.SearchOAuth2, false)
	oauth(BlogOAuth2, &c.BlogOAuth2, true)
	return append(fs,
		field{key: "saml_sp_entity_id", provider: SAML, required: true, check: checkEntityID, str: &c.SAML.SPEntityID},
		field{key: "saml_idp_metadata_url", provider: SAML, required: true, check: checkMetadataURL, str: &c.SAML.IdPMetadataURL},
		field{key: "saml_idp_sso_service_url", provider: SAML, check: checkHTTPURL, str: &c.SAML.IdPSSOServiceURL},
		field{key: "oidc_client_id", provider: OIDC, required: true, str: &c.OIDC.ClientID},
		field{key: "oidc_client_secret", provider: OIDC, required: true, sec: &c.OIDC.ClientSecret},
		field{key: "oidc_issuer", provider: OIDC, required: true, check: checkIssuer, str: &c.OIDC.Issuer},
	)
}

// numFields is the number of fields, for fields to allocate once: it runs
// for every tenant of a file, and there may be many.
const numFields = 4*3 + 6

// oauthKeys are the keys of each OAuth provider's settings, made once.
var oauthKeys = func() map[Provider][3]string {
	out := map[Provider][3]string{}
	for _, p := range []Provider{Microblog, Socialnet, SearchOAuth2, BlogOAuth2} {
		out[p] = [3]string{string(p) + "_key", string(p) + "_secret", string(p) + "_site"}
	}
	return out
}()

// Validate reports every problem of the configuration at once as a
// *ValidationError, or nil. LoadConfig and ParseConfig call it; hosts that
// build or change a Config in code should call it too.
//
// A provider whose settings are all empty is not configured and not an
// error; one with some but not all of its required settings is. URLs must be
// absolute http or https (saml_sp_entity_id may also be a URN), and a SAML
// key pair must be a parsing, matching RSA pair of at least 2048 bits.
//
// Tenants are validated too, each problem naming its tenant: the names (see
// ValidTenantName), and each tenant's configuration. A tenant's provider
// whose settings are the environment's has the environment's problems,
// which are reported once, for the environment.
func (c *Config) Validate() error {
	if c == nil {
		return &ValidationError{Problems: []Problem{{Key: "config", Reason: "is nil", Err: ErrMissingSetting}}}
	}
	ps := c.problems(nil)
	for _, name := range c.TenantNames() {
		ps = append(ps, c.tenantProblems(name, c.Tenants[name])...)
	}
	if len(ps) == 0 {
		return nil
	}
	return &ValidationError{Problems: ps}
}

// problems returns the problems of c's own settings. With a base, the
// configuration c is a tenant of, providers whose settings equal base's are
// skipped: their problems are base's.
func (c *Config) problems(base *Config) []Problem {
	var ps []Problem
	fs := c.fields()
	for _, p := range BuiltinProviders() {
		if base != nil && c.sameProvider(base, p) {
			continue
		}
		used := p == SAML && !c.SAML.Additional.isZero() || p == OIDC && !c.OIDC.Additional.isZero()
		for _, f := range fs {
			used = used || (f.provider == p && f.get() != "")
		}
		for _, f := range fs {
			if f.provider != p {
				continue
			}
			v := f.get()
			switch {
			case v == "" && f.required && used && !(f.sec == &c.OIDC.ClientSecret && c.OIDC.Additional.secretNotNeeded()) &&
				!(f.str == &c.OIDC.ClientID && c.OIDC.Additional.Federation != nil) &&
				!(f.str == &c.OIDC.Issuer && c.OIDC.choosesProvider()) &&
				!(f.str == &c.SAML.IdPMetadataURL && !c.SAML.Additional.Federation.isZero()):
				if f.sec == &c.OIDC.ClientSecret {
					if typo := c.OIDC.Additional.misspeltSecretless(); typo != nil {
						// The entry that would have made the secret
						// unneeded is the problem to fix, not the secret.
						ps = append(ps, *typo)
						continue
					}
				}
				ps = append(ps, Problem{Provider: p, Key: f.key, Reason: "is missing", Err: ErrMissingSetting})
			case v != "" && f.check != nil:
				if reason := f.check(v); reason != "" {
					ps = append(ps, Problem{Provider: p, Key: f.key, Reason: reason, Err: ErrInvalidSetting})
				}
			}
		}
	}
	if base == nil || !c.sameProvider(base, SAML) {
		ps = append(ps, c.SAML.Additional.problems()...)
		ps = append(ps, c.SAML.federationProblems()...)
		ps = append(ps, c.SAML.Additional.SPMetadata.problems()...)
	}
	if base == nil || !c.sameProvider(base, OIDC) {
		ps = append(ps, c.OIDC.additionalProblems()...)
	}
	return ps
}

// Providers lists the configured providers in the order of the
// specification.
func (c *Config) Providers() []Provider {
	var out []Provider
	for _, p := range BuiltinProviders() {
		if c.configured(p) {
			out = append(out, p)
		}
	}
	return out
}

func (c *Config) configured(p Provider) bool {
	switch p {
	case Microblog:
		return c.Microblog.Configured()
	case Socialnet:
		return c.Socialnet.Configured()
	case SearchOAuth2:
		return c.SearchOAuth2.Configured()
	case BlogOAuth2:
		// Unlike the other OAuth providers, blog_oauth2 has no default host.
		return c.BlogOAuth2.Configured() && c.BlogOAuth2.Site != ""
	case SAML:
		return c.SAML.Configured()
	case OIDC:
		return c.OIDC.Configured()
	}
	return false
}

func (s SAMLAdditionalSettings) isZero() bool {
	return s.RelayState == "" && s.AuthnContext == "" && s.Certificate == "" && s.IdPMetadataCertificate == "" &&
		s.PrivateKey.IsZero() && s.CertificateNew == "" && s.PrivateKeyNew.IsZero() && s.CertificateOld == "" && s.PrivateKeyOld.IsZero() &&
		s.MetadataValidFor == 0 && s.MetadataCacheDuration == 0 && s.Security == SAMLSecurity{} && len(s.Custom) == 0 &&
		len(s.RequestOptions) == 0 && len(s.AssuranceLevels) == 0 &&
		s.Federation.isZero() && s.SPMetadata.isZero() && s.ResponseBinding == "" && s.Artifact.isZero()
}

func (s SAMLAdditionalSettings) problems() []Problem {
	const pre = keyAdditional + "."
	var ps []Problem
	bad := func(key, reason string, err error) {
		ps = append(ps, Problem{Provider: SAML, Key: pre + key, Reason: reason, Err: err})
	}
	if s.RelayState != "" && !isRelativePath(s.RelayState) && checkHTTPURL(s.RelayState) != "" {
		bad("RelayState", "must be a relative path (/...) or an absolute http or https URL", ErrInvalidSetting)
	}
	for _, c := range strings.Fields(s.AuthnContext) {
		if u, err := url.Parse(c); err != nil || u.Scheme == "" {
			bad("authn_context", "must be a URN or an absolute URI", ErrInvalidSetting)
			break
		}
	}
	ps = append(ps, s.optionProblems()...)
	// The query parameters of the SAML HTTP-Redirect binding: a custom entry
	// by one of these names would corrupt the signed request.
	reserved := []string{"SAMLRequest", "SAMLResponse", "RelayState", "SigAlg", "Signature"}
	for _, p := range s.Custom {
		switch {
		case p.Name == "":
			ps = append(ps, Problem{Provider: SAML, Key: keyAdditional, Reason: "has a custom entry with an empty name", Err: ErrInvalidSetting})
		case containsFold(reserved, p.Name):
			bad(p.Name, "is a parameter of the SAML binding and cannot be a custom entry", ErrInvalidSetting)
		case strings.Contains(p.Value, "-----BEGIN"):
			// Custom entries go to the IdP in the URL: a misspelt
			// private_key would publish the key.
			bad(p.Name, "holds a PEM block, but custom entries are sent to the IdP; keys belong in certificate and private_key", ErrInvalidSetting)
		}
	}
	ps = append(ps, s.keyPairProblems()...)
	ps = append(ps, s.nextKeyPairProblems()...)
	ps = append(ps, s.oldKeyPairProblems()...)
	ps = append(ps, s.artifactProblems()...)
	if v := s.MetadataValidFor; v != 0 && (v < samlsp.MinMetadataValidFor || v > samlsp.MaxMetadataValidFor) {
		bad("metadata_valid_for", "must be between 1 hour and 3650 days", ErrInvalidSetting)
	}
	switch v := s.MetadataCacheDuration; {
	case v != 0 && (v < samlsp.MinMetadataCacheDuration || v > samlsp.MaxMetadataValidFor):
		bad("metadata_cache_duration", "must be between 1 minute and 3650 days", ErrInvalidSetting)
	case v > 0 && s.MetadataValidFor > 0 && v > s.MetadataValidFor:
		bad("metadata_cache_duration", "must not exceed metadata_valid_for (an IdP would keep a copy past its validUntil)", ErrInvalidSetting)
	}
	if s.IdPMetadataCertificate != "" {
		if reason := checkLoneCertificate(s.IdPMetadataCertificate); reason != "" {
			bad("idp_metadata_certificate", reason, ErrInvalidSetting)
		}
	}
	return ps
}

// federationProblems checks saml_additional_settings.federation, and that
// it does not meet the settings of a single IdP.
func (c SAMLConfig) federationProblems() []Problem {
	f := c.Additional.Federation
	if f.isZero() {
		return nil
	}
	const pre = keyAdditional + ".federation."
	var ps []Problem
	bad := func(key, reason string, err error) {
		ps = append(ps, Problem{Provider: SAML, Key: key, Reason: reason, Err: err})
	}
	switch {
	case f.MetadataURL == "" && f.MDQURL == "":
		bad(pre+"metadata_url", "is missing (or mdq_url, for an MDQ server)", ErrMissingSetting)
	case f.MetadataURL != "" && f.MDQURL != "":
		bad(pre+"mdq_url", "and metadata_url are both given: an aggregate or an MDQ server; keep one", ErrInvalidSetting)
	case f.MDQURL != "":
		if reason := checkMetadataURL(f.MDQURL); reason != "" {
			bad(pre+"mdq_url", reason, ErrInvalidSetting)
		}
		if len(f.EntityIDs) == 0 && f.DiscoveryURL == "" {
			bad(pre+"entity_ids", "is missing: with an MDQ server, list the IdPs users may choose, or set discovery_url", ErrMissingSetting)
		}
		if f.BackingFile != "" {
			bad(pre+"backing_file", "applies to an aggregate (metadata_url), not to an MDQ server", ErrInvalidSetting)
		}
	default:
		if reason := checkMetadataURL(f.MetadataURL); reason != "" {
			bad(pre+"metadata_url", reason, ErrInvalidSetting)
		}
	}
	switch {
	case f.SigningCertificate == "":
		bad(pre+"signing_certificate", "is missing: the aggregate is used only when its signature verifies with it", ErrMissingSetting)
	default:
		if reason := checkLoneCertificate(f.SigningCertificate); reason != "" {
			bad(pre+"signing_certificate", reason, ErrInvalidSetting)
		}
	}
	if f.DiscoveryURL != "" {
		if err := samlsp.CheckDiscoveryURL(f.DiscoveryURL); err != nil {
			bad(pre+"discovery_url", err.Error(), ErrInvalidSetting)
		}
	}
	if f.BackingFile != "" && !filepath.IsAbs(f.BackingFile) {
		bad(pre+"backing_file", "must be an absolute path", ErrInvalidSetting)
	}
	if v := f.MaxValidity; v != 0 && (v < time.Hour || v > samlsp.MaxMetadataValidFor) {
		bad(pre+"max_validity", "must be between 1 hour and 3650 days", ErrInvalidSetting)
	}
	if c.IdPMetadataURL != "" {
		bad("saml_idp_metadata_url", "and saml_additional_settings.federation are both given: a federation lists the IdPs; keep one", ErrInvalidSetting)
	}
	if c.IdPSSOServiceURL != "" {
		bad("saml_idp_sso_service_url", "does not apply to a federation, whose IdPs each have their own; leave it empty", ErrInvalidSetting)
	}
	if c.Additional.IdPMetadataCertificate != "" {
		bad(keyAdditional+".idp_metadata_certificate", "does not apply to a federation, whose aggregate is verified with federation.signing_certificate; leave it empty", ErrInvalidSetting)
	}
	if c.Additional.Security.AllowSHA1 {
		bad(keyAdditional+".security.allow_sha1", "does not apply to a federation: it accepts SHA-1 from one IdP, and here it would from every IdP "+
			"of the aggregate and on the aggregate's own signature, which vouches for all their keys; leave it off", ErrInvalidSetting)
	}
	return ps
}

// problems checks sp_metadata: https URLs, known contact types with an
// address, attributes with a name.
func (m SAMLSPMetadata) problems() []Problem {
	const pre = keyAdditional + ".sp_metadata."
	var ps []Problem
	bad := func(key, reason string) {
		ps = append(ps, Problem{Provider: SAML, Key: pre + key, Reason: reason, Err: ErrInvalidSetting})
	}
	https := func(key, v string) {
		if u, err := url.Parse(v); v != "" && (err != nil || u.Scheme != "https" || u.Host == "") {
			bad(key, "must be an absolute https URL")
		}
	}
	https("information_url", m.InformationURL)
	https("privacy_statement_url", m.PrivacyStatementURL)
	https("organization.url", m.OrganizationURL)
	https("logo.url", m.Logo)
	if m.Logo != "" && (m.LogoWidth <= 0 || m.LogoHeight <= 0) {
		bad("logo", "needs its width and height in pixels")
	}
	for i, c := range m.Contacts {
		key := fmt.Sprintf("contacts[%d]", i)
		if !slices.Contains(samlsp.ContactTypes, c.Type) {
			bad(key+".type", "must be one of "+strings.Join(samlsp.ContactTypes, ", "))
		}
		if e := strings.TrimPrefix(c.Email, "mailto:"); !strings.Contains(e, "@") || strings.ContainsAny(e, " <>") {
			bad(key+".email", "must be an e-mail address")
		}
	}
	for i, a := range m.RequestedAttributes {
		if a.Name == "" {
			bad(fmt.Sprintf("requested_attributes[%d].name", i), "is missing")
		}
	}
	return ps
}

// checkLoneCertificate says what is wrong with a pinned certificate: one
// PEM certificate that parses, and nothing after it.
func checkLoneCertificate(v string) string {
	if _, reason := parseCertificatePEM(v); reason != "" {
		return reason
	}
	return pemRest(v)
}

// pemRest says what is wrong with anything after a PEM block that must be
// alone, without quoting it.
func pemRest(s string) string {
	_, rest := pem.Decode([]byte(s))
	if strings.TrimSpace(string(rest)) != "" {
		return "must hold one PEM certificate and nothing else"
	}
	return ""
}

// KeyPair parses the service-provider certificate and private key. Both are
// nil when neither is set; otherwise the error, a *ValidationError, says what
// is wrong with them, as Validate does.
func (s SAMLAdditionalSettings) KeyPair() (*x509.Certificate, *rsa.PrivateKey, error) {
	return parsedPair(s.Certificate, s.PrivateKey, s.keyPairProblems)
}

// NextKeyPair is KeyPair for the next key pair of a rotation,
// certificate_new and private_key_new.
func (s SAMLAdditionalSettings) NextKeyPair() (*x509.Certificate, *rsa.PrivateKey, error) {
	return parsedPair(s.CertificateNew, s.PrivateKeyNew, s.nextKeyPairProblems)
}

// OldKeyPair is KeyPair for the retiring key pair of a rotation,
// certificate_old and private_key_old.
func (s SAMLAdditionalSettings) OldKeyPair() (*x509.Certificate, *rsa.PrivateKey, error) {
	return parsedPair(s.CertificateOld, s.PrivateKeyOld, s.oldKeyPairProblems)
}

// parsedPair parses a certificate and key that problems finds sound.
func parsedPair(certificate string, privateKey Secret, problems func() []Problem) (*x509.Certificate, *rsa.PrivateKey, error) {
	if certificate == "" && privateKey.IsZero() {
		return nil, nil, nil
	}
	if ps := problems(); len(ps) > 0 {
		return nil, nil, &ValidationError{Problems: ps}
	}
	cert, _ := parseCertificatePEM(certificate)
	key, _ := parseRSAKeyPEM(privateKey.Value())
	return cert, key, nil
}

func (s SAMLAdditionalSettings) keyPairProblems() []Problem {
	return pairProblems(s.Certificate, s.PrivateKey, "certificate", "private_key")
}

// nextKeyPairProblems checks certificate_new and private_key_new as the
// current pair is checked, and that there is a current pair to replace.
func (s SAMLAdditionalSettings) nextKeyPairProblems() []Problem {
	if s.CertificateNew == "" && s.PrivateKeyNew.IsZero() {
		return nil
	}
	ps := pairProblems(s.CertificateNew, s.PrivateKeyNew, "certificate_new", "private_key_new")
	if !s.HasKeyPair() {
		ps = append(ps, Problem{Provider: SAML, Key: keyAdditional + ".certificate_new",
			Reason: "is the next key pair of a rotation, but there is no current one (certificate and private_key); configure a first pair as certificate and private_key",
			Err:    ErrMissingSetting})
	}
	return ps
}

// oldKeyPairProblems checks certificate_old and private_key_old as the
// current pair is checked, that there is a current pair that replaced
// them, and that they are not the next pair too.
func (s SAMLAdditionalSettings) oldKeyPairProblems() []Problem {
	if s.CertificateOld == "" && s.PrivateKeyOld.IsZero() {
		return nil
	}
	ps := pairProblems(s.CertificateOld, s.PrivateKeyOld, "certificate_old", "private_key_old")
	key := keyAdditional + ".certificate_old"
	if !s.HasKeyPair() {
		ps = append(ps, Problem{Provider: SAML, Key: key,
			Reason: "is the retiring key pair of a rotation, but there is no current one (certificate and private_key) that replaced it; " +
				"a pair that is still in use belongs in certificate and private_key",
			Err: ErrMissingSetting})
	}
	if len(ps) == 0 && s.CertificateNew != "" {
		old, _ := parseCertificatePEM(s.CertificateOld)
		if next, _ := parseCertificatePEM(s.CertificateNew); next != nil && old.PublicKey.(*rsa.PublicKey).Equal(next.PublicKey) {
			ps = append(ps, Problem{Provider: SAML, Key: key,
				Reason: "holds the key of certificate_new: a key pair cannot be retiring and next at once", Err: ErrInvalidKeyPair})
		}
	}
	return ps
}

// pairProblems checks a certificate and private key set under the names
// certName and privName of saml_additional_settings.
func pairProblems(certificate string, privateKey Secret, certName, privName string) []Problem {
	var (
		certKey = keyAdditional + "." + certName
		privKey = keyAdditional + "." + privName
	)
	var ps []Problem
	bad := func(key, reason string, err error) {
		ps = append(ps, Problem{Provider: SAML, Key: key, Reason: reason, Err: err})
	}
	var certPub *rsa.PublicKey
	switch {
	case certificate == "":
		if !privateKey.IsZero() {
			bad(certKey, "is missing ("+privName+" is set; the key pair needs both)", ErrMissingSetting)
		}
	default:
		cert, reason := parseCertificatePEM(certificate)
		if reason != "" {
			bad(certKey, reason, ErrInvalidKeyPair)
			break
		}
		var ok bool
		if certPub, ok = cert.PublicKey.(*rsa.PublicKey); !ok {
			bad(certKey, "must hold an RSA public key", ErrInvalidKeyPair)
		} else if n := certPub.N.BitLen(); n < minRSABits {
			bad(certKey, fmt.Sprintf("holds a %d-bit RSA key; at least %d bits are required", n, minRSABits), ErrInvalidKeyPair)
		}
	}
	switch {
	case privateKey.IsZero():
		if certificate != "" {
			bad(privKey, "is missing ("+certName+" is set; the key pair needs both)", ErrMissingSetting)
		}
	default:
		key, reason := parseRSAKeyPEM(privateKey.Value())
		if reason != "" {
			bad(privKey, reason, ErrInvalidKeyPair)
			break
		}
		if n := key.N.BitLen(); n < minRSABits {
			bad(privKey, fmt.Sprintf("is a %d-bit RSA key; at least %d bits are required", n, minRSABits), ErrInvalidKeyPair)
		}
		if certPub != nil && !certPub.Equal(&key.PublicKey) {
			bad(privKey, "does not match the public key of "+the(certName), ErrInvalidKeyPair)
		}
	}
	return ps
}

// the names a certificate setting in a reason: "the certificate" for the
// current pair, its key for the next.
func the(certName string) string {
	if certName == "certificate" {
		return "the certificate"
	}
	return certName
}

// parseCertificatePEM returns the certificate or why it does not parse. The
// reason is fixed text: parser errors may quote bytes of the input.
func parseCertificatePEM(s string) (*x509.Certificate, string) {
	block, _ := pem.Decode([]byte(s))
	switch {
	case block == nil && pemdiag.BodyProblem(s) != "":
		return nil, pemdiag.BodyProblem(s)
	case block == nil:
		return nil, "must be a PEM block of type CERTIFICATE" + pemdiag.Cause(s)
	case strings.HasSuffix(block.Type, "PRIVATE KEY"):
		return nil, "must be a PEM block of type CERTIFICATE, not a private key (are certificate and private_key swapped?)"
	case block.Type != "CERTIFICATE":
		return nil, "must be a PEM block of type CERTIFICATE"
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, "does not parse as an X.509 certificate"
	}
	return cert, ""
}

// parseRSAKeyPEM returns the RSA private key (PKCS #1 or PKCS #8) or why it
// does not parse, in fixed text so no byte of the key can reach a message.
func parseRSAKeyPEM(s string) (*rsa.PrivateKey, string) {
	block, _ := pem.Decode([]byte(s))
	if block == nil {
		if r := pemdiag.BodyProblem(s); r != "" {
			return nil, r
		}
		return nil, "must be a PEM block of type RSA PRIVATE KEY or PRIVATE KEY" + pemdiag.Cause(s)
	}
	if _, ok := block.Headers["Proc-Type"]; ok {
		return nil, "is encrypted; give the key unencrypted"
	}
	switch block.Type {
	case "RSA PRIVATE KEY":
		key, err := x509.ParsePKCS1PrivateKey(block.Bytes)
		if err != nil {
			return nil, "does not parse as a PKCS #1 RSA private key"
		}
		return key, ""
	case "PRIVATE KEY":
		key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, "does not parse as a PKCS #8 private key"
		}
		rsaKey, ok := key.(*rsa.PrivateKey)
		if !ok {
			return nil, "must be an RSA key"
		}
		return rsaKey, ""
	case "ENCRYPTED PRIVATE KEY":
		return nil, "is encrypted; give the key unencrypted"
	case "EC PRIVATE KEY":
		return nil, "must be an RSA key"
	case "CERTIFICATE":
		return nil, "holds a certificate, not a private key"
	}
	return nil, "must be a PEM block of type RSA PRIVATE KEY or PRIVATE KEY"
}

func checkHTTPURL(v string) string {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return "must be an absolute http or https URL"
	}
	if u.User != nil {
		return "must not contain a user name or password"
	}
	return ""
}

// checkMetadataURL requires https except on the local host: the metadata
// carries the keys every assertion is checked with, so fetching it in clear
// text would let anyone on the path choose them. samlsp enforces the same.
func checkMetadataURL(v string) string {
	if reason := checkHTTPURL(v); reason != "" {
		return reason
	}
	if plainHTTP(v) {
		return "must use https (plain http only for localhost)"
	}
	return ""
}

// checkIssuer applies OpenID Connect Core section 2: the issuer is compared
// verbatim with the iss claim and has no query or fragment.
func checkIssuer(v string) string {
	if reason := checkHTTPURL(v); reason != "" {
		return reason
	}
	if u, _ := url.Parse(v); u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(v, "#") {
		return "must not have a query or fragment"
	}
	return ""
}

// checkEntityID accepts what SAML IdPs are configured with in practice: an
// http(s) URL or a URN, at most 1024 characters (SAML Metadata 2.3.2).
func checkEntityID(v string) string {
	if len(v) > 1024 {
		return "must be at most 1024 characters"
	}
	if checkHTTPURL(v) == "" || isURN(v) {
		return ""
	}
	return "must be an absolute http or https URL or a URN"
}

// isURN checks the shape urn:<NID>:<NSS> of RFC 8141.
func isURN(v string) bool {
	if len(v) < 4 || !strings.EqualFold(v[:4], "urn:") {
		return false
	}
	nid, nss, ok := strings.Cut(v[4:], ":")
	if !ok || nss == "" || len(nid) < 2 || len(nid) > 32 || nid[0] == '-' || nid[len(nid)-1] == '-' {
		return false
	}
	for _, c := range []byte(nid) {
		if c != '-' && !(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z') && !(c >= '0' && c <= '9') {
			return false
		}
	}
	for _, c := range []byte(nss) {
		if c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

// isRelativePath accepts a path on this host only: "//host" and "/\host"
// are taken by browsers as another host.
func isRelativePath(v string) bool {
	if !strings.HasPrefix(v, "/") || strings.HasPrefix(v, "//") || strings.HasPrefix(v, "/\\") {
		return false
	}
	u, err := url.Parse(v)
	return err == nil && u.Scheme == "" && u.Host == ""
}

// plainHTTP reports an http URL to a host other than the local one, where
// secrets and tokens would travel unencrypted.
func plainHTTP(v string) bool {
	u, err := url.Parse(v)
	if err != nil || u.Scheme != "http" {
		return false
	}
	h := u.Hostname()
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return false
	}
	ip := net.ParseIP(h)
	return ip == nil || !ip.IsLoopback()
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}
