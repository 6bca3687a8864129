package extauth

import (
	"maps"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/extauth/extauth/internal/spelling"
	"github.com/extauth/extauth/providers"
)

// keyOIDCAdditional is the oidc provider's mapping of further settings.
const keyOIDCAdditional = providers.OIDCSettingsKey

// OIDCAdditionalSettings is the oidc_additional_settings mapping: what a
// high-assurance OpenID Connect provider needs beyond a client ID, secret
// and issuer. It is optional and empty by default; each entry overrides
// the field of Options.OIDC it names. docs/oidc.md shows a worked example.
type OIDCAdditionalSettings struct {
	// ClientAuthMethod (client_auth_method) is how the client
	// authenticates at the token, pushed authorization request and
	// revocation endpoints: client_secret_basic (the default),
	// client_secret_post, client_secret_jwt or private_key_jwt. With
	// private_key_jwt, oidc_client_secret is not needed.
	ClientAuthMethod string
	// PrivateKey (private_key) is the client's private key, a PEM block
	// (RSA of 2048 bits or more, or EC P-256): it signs client assertions
	// and request objects and decrypts encrypted ID tokens and UserInfo.
	// Its public half is served at /users/auth/oidc/jwks.
	PrivateKey Secret
	// PrivateKeyNew (private_key_new) is the key being rotated in:
	// published beside PrivateKey for signing only and used to decrypt,
	// not yet to sign. PrivateKeyOld (private_key_old) is the key it
	// replaced once promoted: it decrypts what a provider that has not
	// read the JWKS since still encrypts to it, and never signs. See
	// docs/oidc.md, "Keys, the JWKS route and rotation".
	PrivateKeyNew Secret
	PrivateKeyOld Secret
	// ClientAssertionAudience (client_assertion_audience) is the aud of
	// client assertions: issuer (the default) or token_endpoint, only for
	// a provider that accepts nothing else; it is warned about.
	ClientAssertionAudience string
	// TokenEndpointAuthSigningAlg (token_endpoint_auth_signing_alg) signs
	// client assertions; empty picks from the key and discovery.
	TokenEndpointAuthSigningAlg string
	// PushedAuthorizationRequests (pushed_authorization_requests) sends
	// authorization requests by RFC 9126; on by itself when discovery says
	// require_pushed_authorization_requests.
	PushedAuthorizationRequests bool
	// RequestObject (request_object) sends the authorization request as a
	// signed request object (RFC 9101), pushed or by value.
	RequestObject bool
	// RequestObjectSigningAlg (request_object_signing_alg) signs request
	// objects; empty picks from the key and discovery.
	RequestObjectSigningAlg string
	// IDTokenEncryptedResponseAlg and IDTokenEncryptedResponseEnc
	// (id_token_encrypted_response_alg and _enc) are the encryption
	// registered for ID tokens: then an ID token that is not encrypted is
	// refused.
	IDTokenEncryptedResponseAlg string
	IDTokenEncryptedResponseEnc string
	// UserInfoEncryptedResponseAlg and UserInfoEncryptedResponseEnc
	// (userinfo_encrypted_response_alg and _enc) are UserInfo's.
	UserInfoEncryptedResponseAlg string
	UserInfoEncryptedResponseEnc string
	// TLSClientCertificate and TLSClientKey (tls_client_certificate,
	// tls_client_key) are the client's TLS certificate and its private
	// key, PEM, for mutual TLS (RFC 8705): presented to the provider and
	// to its resource servers, so that it authenticates the client
	// (client_auth_method tls_client_auth, self_signed_tls_client_auth)
	// and binds the tokens to the certificate.
	TLSClientCertificate string
	TLSClientKey         Secret
	// TLSClientCertificateNew and TLSClientKeyNew (…_new) are a
	// certificate being rotated in: published, not yet presented.
	TLSClientCertificateNew string
	TLSClientKeyNew         Secret
	// DPoP (dpop) binds the tokens to a key made for each sign-in (RFC
	// 9449): every request to the provider carries a proof of it, and the
	// key comes with the tokens (Tokens.DPoPKey) for renewals and API
	// calls (Auth.Client).
	DPoP bool
	// DPoPSigningAlg (dpop_signing_alg) signs the proofs: ES256 (the
	// default), PS256 or EdDSA.
	DPoPSigningAlg string
	// ResponseMode (response_mode) jwt asks for JWT-secured
	// authorization responses (JARM), verified before their code is used.
	ResponseMode string
	// Profile (profile) enforces a security profile's client rules:
	// fapi2 (FAPI 2.0 Security Profile) or fapi2-message-signing (with
	// signed requests and JARM). docs/oidc.md lists what each requires.
	Profile string
	// Scope (scope) replaces the requested scopes, space-separated;
	// openid is always sent.
	Scope string
	// Prompt (prompt) is sent as the prompt parameter.
	Prompt string
	// ACRValues (acr_values) asks for authentication levels, most
	// preferred first: the ID token's acr must be one of them.
	ACRValues string
	// MaxAge (max_age), whole seconds, is how long ago the user may have
	// authenticated: the ID token's auth_time must say so.
	MaxAge string
	// RequestOptions (request_options) are the per-request sign-in
	// options the start route takes (login_hint, prompt, max_age,
	// acr_values, ui_locales, domain_hint, level); they replace
	// Options.OIDC.RequestOptions.
	RequestOptions []string
	// AssuranceLevels (assurance_levels) maps the host's assurance levels
	// to the acr values that meet each; it replaces
	// Options.OIDC.AssuranceLevels.
	AssuranceLevels map[string][]string
	// Preset (preset) shapes the client for one provider as
	// organisations deploy it: entra, okta, auth0 or google-workspace.
	// docs/oidc.md, "Presets", says what each implies and what to set up
	// at the provider; extauth check lists it.
	Preset string
	// Tenants (tenants), with preset entra and a multi-tenant authority
	// (common, organizations), are the Entra ID tenant IDs whose users
	// may sign in, consumers for personal Microsoft accounts, or any
	// alone for every tenant.
	Tenants []string
	// HostedDomain (hosted_domain), with preset google-workspace, is the
	// Workspace domain whose users may sign in, or * for any.
	HostedDomain string
	// GroupsClaim and RolesClaim (groups_claim, roles_claim) name the ID
	// token claims read into Identity.Directory's Groups and Roles; a
	// preset names its provider's.
	GroupsClaim string
	RolesClaim  string
	// GroupsOverage (groups_overage), with preset entra: graph (the
	// default), graph_transitive or report.
	GroupsOverage string
	// GraphURL (graph_url), with preset entra, is Microsoft Graph's base
	// URL when the discovery document's msgraph_host is not the one.
	GraphURL string
	// Federation (federation) makes the client a relying party of an
	// OpenID Federation; nil without one.
	Federation *OIDCFederationSettings
	// Custom holds every other entry, in file order, sent as a parameter
	// of the authorization request (login_hint, ui_locales, ...).
	Custom []Param
}

// oidcStrings are the string entries of oidc_additional_settings and the
// fields they fill.
func (s *OIDCAdditionalSettings) oidcStrings() map[string]*string {
	return map[string]*string{
		"client_auth_method":              &s.ClientAuthMethod,
		"client_assertion_audience":       &s.ClientAssertionAudience,
		"token_endpoint_auth_signing_alg": &s.TokenEndpointAuthSigningAlg,
		"request_object_signing_alg":      &s.RequestObjectSigningAlg,
		"dpop_signing_alg":                &s.DPoPSigningAlg,
		"response_mode":                   &s.ResponseMode,
		"profile":                         &s.Profile,
		"id_token_encrypted_response_alg": &s.IDTokenEncryptedResponseAlg,
		"id_token_encrypted_response_enc": &s.IDTokenEncryptedResponseEnc,
		"userinfo_encrypted_response_alg": &s.UserInfoEncryptedResponseAlg,
		"userinfo_encrypted_response_enc": &s.UserInfoEncryptedResponseEnc,
		"scope":                           &s.Scope,
		"prompt":                          &s.Prompt,
		"acr_values":                      &s.ACRValues,
		"max_age":                         &s.MaxAge,
		"preset":                          &s.Preset,
		"hosted_domain":                   &s.HostedDomain,
		"groups_claim":                    &s.GroupsClaim,
		"roles_claim":                     &s.RolesClaim,
		"groups_overage":                  &s.GroupsOverage,
		"graph_url":                       &s.GraphURL,
	}
}

// oidcPEMs are the PEM entries of oidc_additional_settings (keys, kept
// as secrets, and certificates) and what sets each.
func (s *OIDCAdditionalSettings) oidcPEMs() map[string]func(string) {
	return map[string]func(string){
		"private_key":                func(v string) { s.PrivateKey = NewSecret(v) },
		"private_key_new":            func(v string) { s.PrivateKeyNew = NewSecret(v) },
		"private_key_old":            func(v string) { s.PrivateKeyOld = NewSecret(v) },
		"tls_client_key":             func(v string) { s.TLSClientKey = NewSecret(v) },
		"tls_client_key_new":         func(v string) { s.TLSClientKeyNew = NewSecret(v) },
		"tls_client_certificate":     func(v string) { s.TLSClientCertificate = v },
		"tls_client_certificate_new": func(v string) { s.TLSClientCertificateNew = v },
	}
}

func (s OIDCAdditionalSettings) isZero() bool {
	for _, v := range s.oidcStrings() {
		if *v != "" {
			return false
		}
	}
	return s.PrivateKey.IsZero() && s.PrivateKeyNew.IsZero() && s.PrivateKeyOld.IsZero() && !s.PushedAuthorizationRequests && !s.RequestObject && !s.DPoP && len(s.Custom) == 0 &&
		s.TLSClientCertificate == "" && s.TLSClientKey.IsZero() && s.TLSClientCertificateNew == "" && s.TLSClientKeyNew.IsZero() &&
		len(s.RequestOptions) == 0 && len(s.AssuranceLevels) == 0 && len(s.Tenants) == 0 && s.Federation == nil
}

// oidcAdditional reads oidc_additional_settings.
func (l *loader) oidcAdditional(n *yaml.Node) OIDCAdditionalSettings {
	var s OIDCAdditionalSettings
	strs, pems := s.oidcStrings(), s.oidcPEMs()
	// off are the entries written false, which a profile may forbid.
	var off []string
	for _, e := range l.mapping(OIDC, keyOIDCAdditional, n) {
		key := keyOIDCAdditional + "." + e.key
		if dst, ok := strs[e.key]; ok {
			*dst, _ = l.scalar(OIDC, key, e.val)
			continue
		}
		if dst, ok := pems[e.key]; ok {
			v, _ := l.scalar(OIDC, key, e.val)
			dst(v)
			l.notePEM(key, e.val, v)
			continue
		}
		switch e.key {
		case "pushed_authorization_requests":
			s.PushedAuthorizationRequests = l.boolean(OIDC, key, e.val)
			if strings.EqualFold(e.val.Value, "false") {
				off = append(off, e.key)
			}
		case "request_object":
			s.RequestObject = l.boolean(OIDC, key, e.val)
			if strings.EqualFold(e.val.Value, "false") {
				off = append(off, e.key)
			}
		case "request_options":
			s.RequestOptions = l.words(OIDC, key, e.val)
		case "tenants":
			s.Tenants = l.words(OIDC, key, e.val)
		case "assurance_levels":
			s.AssuranceLevels = l.assuranceLevels(OIDC, key, e.val)
		case "dpop":
			s.DPoP = l.boolean(OIDC, key, e.val)
		case "federation":
			s.Federation = l.oidcFederation(e.val)
		default:
			// Warned about, with a suggestion when it looks like a
			// setting, by the strategy at start-up and by extauth check.
			if v, ok := l.scalar(OIDC, key, e.val); ok {
				s.Custom = append(s.Custom, Param{Name: e.key, Value: v})
			}
		}
	}
	for _, k := range off {
		if reason := profileForbidsOff(s.Profile, k); reason != "" {
			l.problem(OIDC, keyOIDCAdditional+"."+k, reason, ErrInvalidSetting)
		}
	}
	return s
}

// profileForbidsOff says why entry (pushed_authorization_requests or
// request_object) cannot be written false under profile, "" when it can.
// The profile turns each on by itself: false would be overridden without
// a word, so it is refused, as every setting that contradicts a rule of
// the profile is (docs/oidc.md, "The profile's rules").
func profileForbidsOff(profile, entry string) string {
	switch {
	case entry == "pushed_authorization_requests" && (profile == providers.OIDCProfileFAPI2 || profile == providers.OIDCProfileFAPI2MessageSigning):
		return "cannot be false under profile " + profile + ": FAPI 2.0 sends every authorization request by PAR; remove the entry"
	case entry == "request_object" && profile == providers.OIDCProfileFAPI2MessageSigning:
		return "cannot be false under profile " + profile + ": Message Signing signs every authorization request; remove the entry"
	}
	return ""
}

// secretNotNeeded reports whether the client's method needs no
// oidc_client_secret: private_key_jwt (which a profile implies), mutual
// TLS, or a misspelling of private_key_jwt, whose problem says so rather
// than a missing secret.
func (a OIDCAdditionalSettings) secretNotNeeded() bool {
	m, known := a.ClientAuthMethod, providers.OIDCAuthMethods()
	return a.secretless() || a.Federation != nil ||
		!slices.Contains(known, m) && spelling.Nearest(m, known, 2) == providers.AuthMethodPrivateKeyJWT
}

// misspeltSecretless is the problem of an entry of oidc_additional_settings
// that looks like profile or client_auth_method misspelt, when the
// client has no secret: written right, the entry would have made the
// secret unneeded, so it is the one to report, with the suggestion. Nil
// when there is none.
func (a OIDCAdditionalSettings) misspeltSecretless() *Problem {
	for _, p := range a.Custom {
		near := spelling.Nearest(p.Name, []string{"profile", "client_auth_method"}, 2)
		if near == "" || near == "client_auth_method" && !slices.Contains(providers.OIDCAuthMethods(), p.Value) {
			continue
		}
		return &Problem{Provider: OIDC, Key: keyOIDCAdditional + "." + p.Name, Err: ErrInvalidSetting,
			Reason: "is not a setting: did you mean " + near + "? As written it is sent to the provider as an authorization " +
				"request parameter, and the client, without " + near + ", needs oidc_client_secret, which is missing"}
	}
	return nil
}

// strategyConfig is the oidc strategy's configuration: the registration,
// with o (Options.OIDC) under the entries of oidc_additional_settings,
// which win where they are set.
func (c OIDCConfig) strategyConfig(o providers.OIDCOptions) providers.OIDCConfig {
	a := c.Additional
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&o.AuthMethod, a.ClientAuthMethod)
	set(&o.AssertionAudience, a.ClientAssertionAudience)
	set(&o.AssertionSigningAlg, a.TokenEndpointAuthSigningAlg)
	set(&o.RequestObjectSigningAlg, a.RequestObjectSigningAlg)
	set(&o.DPoPSigningAlg, a.DPoPSigningAlg)
	set(&o.ResponseMode, a.ResponseMode)
	set(&o.Profile, a.Profile)
	set(&o.Prompt, a.Prompt)
	set(&o.Preset, a.Preset)
	set(&o.HostedDomain, a.HostedDomain)
	set(&o.GroupsClaim, a.GroupsClaim)
	set(&o.RolesClaim, a.RolesClaim)
	set(&o.GroupsOverage, a.GroupsOverage)
	set(&o.GraphURL, a.GraphURL)
	if a.Tenants != nil {
		o.Tenants = a.Tenants
	}
	o.PushedAuthorization = o.PushedAuthorization || a.PushedAuthorizationRequests
	o.RequestObject = o.RequestObject || a.RequestObject
	o.DPoP = o.DPoP || a.DPoP
	if a.IDTokenEncryptedResponseAlg != "" || a.IDTokenEncryptedResponseEnc != "" {
		o.IDTokenEncryption = providers.OIDCEncryption{Alg: a.IDTokenEncryptedResponseAlg, Enc: a.IDTokenEncryptedResponseEnc}
	}
	if a.UserInfoEncryptedResponseAlg != "" || a.UserInfoEncryptedResponseEnc != "" {
		o.UserInfoEncryption = providers.OIDCEncryption{Alg: a.UserInfoEncryptedResponseAlg, Enc: a.UserInfoEncryptedResponseEnc}
	}
	if a.Scope != "" {
		o.Scopes = strings.Fields(a.Scope)
	}
	if a.RequestOptions != nil {
		o.RequestOptions = a.RequestOptions
	}
	if a.AssuranceLevels != nil {
		o.AssuranceLevels = a.AssuranceLevels
	}
	if a.ACRValues != "" || a.MaxAge != "" || len(a.Custom) > 0 {
		params := maps.Clone(o.AuthParams)
		if params == nil {
			params = map[string]string{}
		}
		if a.ACRValues != "" {
			params["acr_values"] = a.ACRValues
		}
		if a.MaxAge != "" {
			params["max_age"] = a.MaxAge
		}
		for _, p := range a.Custom {
			params[p.Name] = p.Value
		}
		o.AuthParams = params
	}
	return providers.OIDCConfig{
		ClientID:           c.ClientID,
		ClientSecret:       c.ClientSecret.Value(),
		Issuer:             c.Issuer,
		PrivateKey:         a.PrivateKey.Value(),
		NextPrivateKey:     a.PrivateKeyNew.Value(),
		OldPrivateKey:      a.PrivateKeyOld.Value(),
		TLSCertificate:     a.TLSClientCertificate,
		TLSKey:             a.TLSClientKey.Value(),
		NextTLSCertificate: a.TLSClientCertificateNew,
		NextTLSKey:         a.TLSClientKeyNew.Value(),
		Federation:         a.Federation.strategy(),
		Options:            o,
	}
}

// additionalProblems are the problems of oidc_additional_settings, as the
// strategy would find them, naming the entries.
func (c OIDCConfig) additionalProblems() []Problem {
	var ps []Problem
	for _, p := range providers.CheckOIDCConfig(c.strategyConfig(providers.OIDCOptions{})) {
		err := ErrInvalidSetting
		if strings.HasPrefix(p.Reason, "is missing") {
			err = ErrMissingSetting
		}
		ps = append(ps, Problem{Provider: OIDC, Key: p.Setting, Reason: p.Reason, Err: err})
	}
	return ps
}

// ClientKeys describes the client's keys (private_key, private_key_new,
// private_key_old) as the oidc strategy uses them, with the warnings it
// logs about them at start-up: extauth check shows them. The error is the
// first problem of oidc_additional_settings, which Validate reports too.
func (c OIDCConfig) ClientKeys() ([]providers.OIDCKey, []string, error) {
	return providers.OIDCKeys(c.strategyConfig(providers.OIDCOptions{}))
}

// Applied returns the options the oidc strategy runs with for this
// registration under a host's default Options.OIDC: the entries of
// oidc_additional_settings, and what their profile implies (see
// providers.OIDCConfig.Applied). extauth check shows the profile's rules
// from it.
func (c OIDCConfig) Applied() providers.OIDCOptions {
	return c.strategyConfig(providers.OIDCOptions{}).Applied()
}

// PresetRules says what the client's preset implies, as the oidc
// strategy applies it, one sentence a line (providers.OIDCConfig.PresetRules);
// extauth check prints them. Nil without a preset.
func (c OIDCConfig) PresetRules() []string {
	return c.strategyConfig(providers.OIDCOptions{}).PresetRules()
}

// CheckIssuer returns why the issuer a discovery document names is not one
// the oidc strategy accepts for this registration (see
// providers.CheckOIDCIssuer): oidc_issuer exactly, but for the presets
// whose providers name another (Entra ID's tenant issuers, Auth0's
// trailing slash). extauth check runs it on the document it fetched.
func (c OIDCConfig) CheckIssuer(issuer string) error {
	return providers.CheckOIDCIssuer(c.strategyConfig(providers.OIDCOptions{}), issuer)
}

// CheckDiscovery returns why this client registration cannot work with a
// provider whose discovery document is doc: a client_auth_method,
// algorithm or encryption of oidc_additional_settings the provider does
// not advertise, pushed or by-value requests it does not take. The error
// names the entry. It makes no request: extauth check runs it on the
// document it fetched, as the strategy does on its first sign-in.
func (c OIDCConfig) CheckDiscovery(doc *providers.OIDCDiscovery) error {
	return providers.CheckOIDCDiscovery(c.strategyConfig(providers.OIDCOptions{}), doc)
}
