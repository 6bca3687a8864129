package providers

import (
	"crypto/ecdsa"
	"crypto/rsa"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/oauth2"

	"github.com/extauth/extauth/internal/outbound"
	"github.com/extauth/extauth/internal/spelling"
)

// OIDCSettingsKey is the secrets file's mapping of the OpenID Connect
// client's further settings; OIDCSettingError names its entries below it.
const OIDCSettingsKey = "oidc_additional_settings"

// OIDCSettingError is one problem of an OpenID Connect client's
// configuration that shows before the provider is asked: Setting names
// the entry as the secrets file does ("oidc_additional_settings.private_key",
// "oidc_client_secret"), whether it came from the file or from
// OIDCOptions; Reason follows it in a sentence. Neither holds a value.
type OIDCSettingError struct {
	Setting string
	Reason  string
}

func (e *OIDCSettingError) Error() string { return e.Setting + " " + e.Reason }

// The entries of oidc_additional_settings and the OIDCConfig and
// OIDCOptions fields they set.
const (
	settingAuthMethod    = OIDCSettingsKey + ".client_auth_method"        // AuthMethod
	settingPrivateKey    = OIDCSettingsKey + ".private_key"               // PrivateKey
	settingPrivateKeyNew = OIDCSettingsKey + ".private_key_new"           // NextPrivateKey
	settingPrivateKeyOld = OIDCSettingsKey + ".private_key_old"           // OldPrivateKey
	settingAudience      = OIDCSettingsKey + ".client_assertion_audience" // AssertionAudience
	settingAssertionAlg  = OIDCSettingsKey + ".token_endpoint_auth_signing_alg"
	settingPAR           = OIDCSettingsKey + ".pushed_authorization_requests"
	settingRequestObject = OIDCSettingsKey + ".request_object"
	settingRequestAlg    = OIDCSettingsKey + ".request_object_signing_alg"
	settingIDTokenAlg    = OIDCSettingsKey + ".id_token_encrypted_response_alg"
	settingIDTokenEnc    = OIDCSettingsKey + ".id_token_encrypted_response_enc"
	settingUserInfoAlg   = OIDCSettingsKey + ".userinfo_encrypted_response_alg"
	settingUserInfoEnc   = OIDCSettingsKey + ".userinfo_encrypted_response_enc"
	settingMaxAge        = OIDCSettingsKey + ".max_age"
	settingPrompt        = OIDCSettingsKey + ".prompt"
	settingDPoP          = OIDCSettingsKey + ".dpop"             // DPoP
	settingDPoPAlg       = OIDCSettingsKey + ".dpop_signing_alg" // DPoPSigningAlg
	settingResponseMode  = OIDCSettingsKey + ".response_mode"    // ResponseMode
	settingProfile       = OIDCSettingsKey + ".profile"          // Profile
	settingTLSCert       = OIDCSettingsKey + ".tls_client_certificate"
	settingTLSKey        = OIDCSettingsKey + ".tls_client_key"
	settingTLSCertNew    = OIDCSettingsKey + ".tls_client_certificate_new"
	settingTLSKeyNew     = OIDCSettingsKey + ".tls_client_key_new"
	settingClientSecret  = "oidc_client_secret"
)

// OIDCAuthMethods returns the values of client_auth_method
// (OIDCOptions.AuthMethod).
func OIDCAuthMethods() []string {
	return []string{AuthMethodBasic, AuthMethodPost, AuthMethodSecretJWT, AuthMethodPrivateKeyJWT, AuthMethodTLS, AuthMethodSelfSignedTLS}
}

// prompts are the values of the prompt parameter (OIDC Core 3.1.2.1).
var prompts = []string{"none", "login", "consent", "select_account"}

// CheckOIDCConfig returns the problems of an oidc client configuration
// that show without asking the provider: an unknown authentication method,
// a method without its secret or key, a key that does not parse or is too
// weak, algorithms that do not suit the key, a max_age that is not a
// number. NewOIDC refuses a configuration with any; LoadConfig reports
// them naming the entries of oidc_additional_settings. What the provider
// must support in turn is checked against its discovery document.
func CheckOIDCConfig(c OIDCConfig) []*OIDCSettingError {
	var ps []*OIDCSettingError
	bad := func(setting, format string, args ...any) {
		ps = append(ps, &OIDCSettingError{Setting: setting, Reason: fmt.Sprintf(format, args...)})
	}
	o := c.profileOptions()
	parse := func(setting, text string) *clientKey {
		if text == "" {
			return nil
		}
		k, err := newClientKey(text)
		if err != nil {
			bad(setting, "%s", err.Error())
		}
		return k
	}
	signing, next, old := parse(settingPrivateKey, c.PrivateKey), parse(settingPrivateKeyNew, c.NextPrivateKey), parse(settingPrivateKeyOld, c.OldPrivateKey)
	// needKey notes what needs private_key, for one problem that names
	// them all when it is missing.
	var needers []string
	if c.NextPrivateKey != "" {
		needers = append(needers, "the rotation's private_key_new")
	}
	if c.OldPrivateKey != "" {
		needers = append(needers, "the rotation's private_key_old")
	}
	needKey := func(by string) { needers = append(needers, by) }
	if old != nil && next != nil && old.kid == next.kid {
		bad(settingPrivateKeyOld, "holds the key of private_key_new: a key cannot be retiring and next at once")
	}
	pair := func(certSetting, keySetting, cert, key string) {
		switch {
		case cert == "" && key == "":
		case cert == "":
			bad(certSetting, "is missing (%s is set; the pair needs both)", strings.TrimPrefix(keySetting, OIDCSettingsKey+"."))
		case key == "":
			bad(keySetting, "is missing (%s is set; the pair needs both)", strings.TrimPrefix(certSetting, OIDCSettingsKey+"."))
		default:
			if _, certErr, keyErr := parseTLSPair(cert, key); certErr != nil {
				bad(certSetting, "%s", certErr.Error())
			} else if keyErr != nil {
				bad(keySetting, "%s", keyErr.Error())
			}
		}
	}
	pair(settingTLSCert, settingTLSKey, c.TLSCertificate, c.TLSKey)
	pair(settingTLSCertNew, settingTLSKeyNew, c.NextTLSCertificate, c.NextTLSKey)
	if c.TLSCertificate == "" && c.NextTLSCertificate != "" {
		bad(settingTLSCert, "is missing (tls_client_certificate_new is set: it is the certificate rotated in after tls_client_certificate)")
	}
	switch o.AuthMethod {
	case AuthMethodTLS, AuthMethodSelfSignedTLS:
		if c.TLSCertificate == "" {
			bad(settingTLSCert, "is missing (client_auth_method %s needs it)", o.AuthMethod)
		}
		if o.AssertionSigningAlg != "" {
			bad(settingAssertionAlg, "applies only to %s and %s", AuthMethodSecretJWT, AuthMethodPrivateKeyJWT)
		}
	case "", AuthMethodBasic, AuthMethodPost:
		if o.AssertionSigningAlg != "" {
			bad(settingAssertionAlg, "applies only to %s and %s", AuthMethodSecretJWT, AuthMethodPrivateKeyJWT)
		}
	case AuthMethodSecretJWT:
		alg := o.AssertionSigningAlg
		if alg == "" {
			alg = "HS256"
		}
		if !slices.Contains(hmacSigningAlgs, alg) {
			bad(settingAssertionAlg, "must be one of %s with %s", strings.Join(hmacSigningAlgs, ", "), AuthMethodSecretJWT)
		} else if n, _ := strconv.Atoi(alg[2:]); c.ClientSecret != "" && len(c.ClientSecret)*8 < n {
			bad(settingClientSecret, "is too short for %s: %s needs a secret of at least %d bytes", AuthMethodSecretJWT, alg, n/8)
		}
	case AuthMethodPrivateKeyJWT:
		needKey("client_auth_method " + AuthMethodPrivateKeyJWT)
		if algs := o.profileAlgs(keyAlgs(signing)); signing != nil && o.AssertionSigningAlg != "" && !slices.Contains(algs, o.AssertionSigningAlg) {
			bad(settingAssertionAlg, "must be one of %s for the %s private_key%s%s", strings.Join(algs, ", "), keyKind(signing), underProfile(o), caseHint(o.AssertionSigningAlg, algs))
		}
	default:
		if near := spelling.Nearest(o.AuthMethod, OIDCAuthMethods(), 2); near != "" {
			bad(settingAuthMethod, "is not a method extauth knows (did you mean %s?)", near)
		} else {
			bad(settingAuthMethod, "must be one of %s, %s, %s, %s, %s, %s", AuthMethodBasic, AuthMethodPost, AuthMethodSecretJWT, AuthMethodPrivateKeyJWT,
				AuthMethodTLS, AuthMethodSelfSignedTLS)
		}
	}
	switch o.AssertionAudience {
	case "", OIDCAudienceTokenEndpoint, OIDCAudienceIssuer:
	default:
		bad(settingAudience, "must be %s or %s", OIDCAudienceTokenEndpoint, OIDCAudienceIssuer)
	}
	if o.RequestObject {
		needKey("request_object")
		if algs := o.profileAlgs(keyAlgs(signing)); signing != nil && o.RequestObjectSigningAlg != "" && !slices.Contains(algs, o.RequestObjectSigningAlg) {
			bad(settingRequestAlg, "must be one of %s for the %s private_key%s%s", strings.Join(algs, ", "), keyKind(signing), underProfile(o), caseHint(o.RequestObjectSigningAlg, algs))
		}
	} else if o.RequestObjectSigningAlg != "" {
		bad(settingRequestAlg, "applies only with request_object: true")
	}
	for _, e := range []struct {
		enc           OIDCEncryption
		alg, encEntry string
	}{{o.IDTokenEncryption, settingIDTokenAlg, settingIDTokenEnc}, {o.UserInfoEncryption, settingUserInfoAlg, settingUserInfoEnc}} {
		switch {
		case e.enc.Alg == "" && e.enc.Enc != "":
			bad(e.encEntry, "needs %s", strings.TrimPrefix(e.alg, OIDCSettingsKey+"."))
			continue
		case e.enc.Alg == "":
			continue
		}
		needKey(strings.TrimPrefix(e.alg, OIDCSettingsKey+"."))
		if e.enc.Enc != "" && !slices.Contains(contentEncs, e.enc.Enc) {
			bad(e.encEntry, "must be one of %s%s", strings.Join(contentEncs, ", "), caseHint(e.enc.Enc, contentEncs))
		}
		switch {
		case e.enc.Alg == "RSA1_5":
			bad(e.alg, "RSA1_5 is refused (its padding is a decryption oracle); use RSA-OAEP-256")
			continue
		case !slices.Contains(rsaKeyAlgs, e.enc.Alg) && !slices.Contains(ecKeyAlgs, e.enc.Alg):
			bad(e.alg, "must be one of %s (RSA key) or %s (EC key)%s", strings.Join(rsaKeyAlgs, ", "), strings.Join(ecKeyAlgs, ", "),
				caseHint(e.enc.Alg, append(slices.Clone(rsaKeyAlgs), ecKeyAlgs...)))
			continue
		}
		for i, k := range []*clientKey{signing, next, old} {
			if k != nil && slices.Contains(rsaKeyAlgs, e.enc.Alg) != k.isRSA() {
				bad(e.alg, "does not suit the %s %s: use %s", keyKind(k), []string{"private_key", "private_key_new", "private_key_old"}[i], strings.Join(encAlgsFor(k), ", "))
			}
		}
	}
	if o.DPoPSigningAlg != "" {
		if !o.DPoP {
			bad(settingDPoPAlg, "applies only with dpop: true")
		} else if !slices.Contains(dpopSigningAlgs, o.DPoPSigningAlg) {
			bad(settingDPoPAlg, "must be one of %s%s", strings.Join(dpopSigningAlgs, ", "), caseHint(o.DPoPSigningAlg, dpopSigningAlgs))
		}
	}
	if o.ResponseMode != "" && !slices.Contains(responseModes, o.ResponseMode) {
		bad(settingResponseMode, "must be jwt or query.jwt (JARM); the other modes are chosen by extauth")
	}
	switch o.Profile {
	case "":
	case OIDCProfileFAPI2, OIDCProfileFAPI2MessageSigning:
		// The FAPI 2.0 Security Profile's client rules (5.3.2, 5.4);
		// what it implies, profileOptions has set.
		if o.AuthMethod != AuthMethodPrivateKeyJWT && !tlsMethod(o.AuthMethod) {
			bad(settingAuthMethod, "cannot be %s under profile %s: FAPI 2.0 authenticates clients with private_key_jwt or mTLS, never with a shared secret", o.AuthMethod, o.Profile)
		}
		if o.AssertionAudience != OIDCAudienceIssuer {
			bad(settingAudience, "must be issuer under profile %s: FAPI 2.0 requires the issuer as the client assertions' one audience", o.Profile)
		}
		if !o.DPoP && c.TLSCertificate == "" {
			bad(settingDPoP, "must be true under profile %s, or tls_client_certificate set: FAPI 2.0 requires sender-constrained tokens (DPoP, or mTLS)", o.Profile)
		}
		for _, a := range []struct{ setting, alg string }{
			{settingAssertionAlg, o.AssertionSigningAlg}, {settingRequestAlg, o.RequestObjectSigningAlg}, {settingDPoPAlg, o.DPoPSigningAlg},
		} {
			// An algorithm refused above already has its problem, which
			// names the allowed ones: one rule is stated once.
			reported := slices.ContainsFunc(ps, func(p *OIDCSettingError) bool { return p.Setting == a.setting })
			if a.alg != "" && !reported && !slices.Contains(fapiAlgs, a.alg) {
				bad(a.setting, "must be PS256, ES256 or EdDSA under profile %s: FAPI 2.0 allows no other algorithm", o.Profile)
			}
		}
		for _, a := range o.SigningAlgs {
			if !slices.Contains(fapiAlgs, a) {
				bad(settingProfile, "%s accepts ID tokens signed with PS256, ES256 or EdDSA only, but OIDCOptions.SigningAlgs allows %s", o.Profile, a)
				break
			}
		}
	default:
		bad(settingProfile, "must be %s or %s", OIDCProfileFAPI2, OIDCProfileFAPI2MessageSigning)
	}
	for _, k := range sortedKeys(o.AuthParams) {
		switch {
		case k == "":
			bad(OIDCSettingsKey, "has an authorization parameter with an empty name")
		case slices.Contains(reservedAuthParams, k) || k == "prompt" && o.Prompt != "":
			bad(OIDCSettingsKey+"."+k, "is a parameter extauth sets itself")
		case strings.Contains(o.AuthParams[k], "-----BEGIN"):
			// Parameters travel in the authorization URL: a misspelt
			// private_key would publish the key.
			bad(OIDCSettingsKey+"."+k, "holds a PEM block, but other entries are sent to the provider as authorization request parameters; the key belongs in private_key")
		}
	}
	if ma, ok := o.AuthParams["max_age"]; ok {
		if _, ok := maxAge(ma); !ok {
			bad(settingMaxAge, errMaxAge)
		}
	}
	if c.Federation != nil {
		needKey("federation")
	}
	if c.PrivateKey == "" && len(needers) > 0 {
		bad(settingPrivateKey, "is missing (%s)", needs(needers))
	}
	if o.Prompt != "" {
		// One rule for the configured prompt and the per-request one.
		if why := promptProblem(strings.Fields(o.Prompt)); why != "" {
			bad(settingPrompt, "%s", why)
		}
	}
	ps = append(ps, checkPreset(c, o)...)
	ps = append(ps, checkFederation(c)...)
	return append(ps, checkOptionConfig(&o)...)
}

// underProfile is " under profile fapi2" when a profile narrows the
// algorithms a key may sign with, "" otherwise.
func underProfile(o OIDCOptions) string {
	if o.Profile == "" {
		return ""
	}
	return " under profile " + o.Profile
}

// needs says what needs a setting: "request_object needs it", "a and b
// need it".
func needs(by []string) string {
	switch len(by) {
	case 1:
		return by[0] + " needs it"
	case 2:
		return by[0] + " and " + by[1] + " need it"
	}
	return strings.Join(by[:len(by)-1], ", ") + " and " + by[len(by)-1] + " need it"
}

// hasHighAssurance reports whether o sets any of the options beyond the
// client secret methods, which only the oidc strategy offers.
func (o *OIDCOptions) hasHighAssurance() bool {
	return o.AuthMethod == AuthMethodSecretJWT || o.AuthMethod == AuthMethodPrivateKeyJWT || o.AssertionAudience != "" ||
		o.AssertionSigningAlg != "" || o.PushedAuthorization || o.RequestObject || o.RequestObjectSigningAlg != "" ||
		o.IDTokenEncryption != (OIDCEncryption{}) || o.UserInfoEncryption != (OIDCEncryption{}) || o.DPoP || o.DPoPSigningAlg != "" ||
		o.ResponseMode != "" || o.Profile != ""
}

func keyKind(k *clientKey) string {
	switch k.priv.(type) {
	case *rsa.PrivateKey:
		return "RSA"
	case *ecdsa.PrivateKey:
		return "EC"
	}
	return "unknown"
}

func encAlgsFor(k *clientKey) []string {
	if k.isRSA() {
		return rsaKeyAlgs
	}
	return ecKeyAlgs
}

// CheckOIDCDiscovery returns why the client c cannot work with a provider
// whose discovery document is doc, as the strategy would find when it reads
// it: a client authentication method, signing algorithm or encryption the
// provider does not advertise, pushed or by-value requests it does not
// take. The error names the setting. It makes no request; extauth check
// runs it on the document it fetched.
func CheckOIDCDiscovery(c OIDCConfig, doc *OIDCDiscovery) error {
	s, err := newOIDC("oidc", c, Env{CallbackURL: "https://client.invalid/callback", HTTPClient: outbound.NewClient(nil, 0, 0)})
	if err != nil {
		return err
	}
	method, style, err := s.authStyle(doc.TokenAuthMethods)
	if err != nil {
		return err
	}
	d := &discovered{issuer: s.issuer, method: method, tokenClient: s.client}
	d.oauth.Endpoint = oauth2.Endpoint{AuthURL: doc.AuthorizationEndpoint, TokenURL: doc.TokenEndpoint, AuthStyle: style}
	return s.register(d, doc)
}
