package extauth

import (
	"fmt"
	"maps"
	"strings"

	"gopkg.in/yaml.v3"

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
	// published beside PrivateKey and used to decrypt, not yet to sign.
	PrivateKeyNew Secret
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
		"id_token_encrypted_response_alg": &s.IDTokenEncryptedResponseAlg,
		"id_token_encrypted_response_enc": &s.IDTokenEncryptedResponseEnc,
		"userinfo_encrypted_response_alg": &s.UserInfoEncryptedResponseAlg,
		"userinfo_encrypted_response_enc": &s.UserInfoEncryptedResponseEnc,
		"scope":                           &s.Scope,
		"prompt":                          &s.Prompt,
		"acr_values":                      &s.ACRValues,
		"max_age":                         &s.MaxAge,
	}
}

// oidcEntries are the entries of oidc_additional_settings that are not
// custom, for suggestions.
var oidcEntries = func() []string {
	out := []string{"private_key", "private_key_new", "pushed_authorization_requests", "request_object"}
	for k := range (&OIDCAdditionalSettings{}).oidcStrings() {
		out = append(out, k)
	}
	return out
}()

func (s OIDCAdditionalSettings) isZero() bool {
	for _, v := range s.oidcStrings() {
		if *v != "" {
			return false
		}
	}
	return s.PrivateKey.IsZero() && s.PrivateKeyNew.IsZero() && !s.PushedAuthorizationRequests && !s.RequestObject && len(s.Custom) == 0
}

// oidcAdditional reads oidc_additional_settings.
func (l *loader) oidcAdditional(n *yaml.Node) OIDCAdditionalSettings {
	var s OIDCAdditionalSettings
	strs := s.oidcStrings()
	for _, e := range l.mapping(OIDC, keyOIDCAdditional, n) {
		key := keyOIDCAdditional + "." + e.key
		if dst, ok := strs[e.key]; ok {
			*dst, _ = l.scalar(OIDC, key, e.val)
			if e.key == "client_assertion_audience" && *dst == providers.OIDCAudienceTokenEndpoint {
				l.warn(key + ": " + providers.OIDCAudienceTokenWarning)
			}
			continue
		}
		switch e.key {
		case "private_key", "private_key_new":
			v, _ := l.scalar(OIDC, key, e.val)
			if e.key == "private_key" {
				s.PrivateKey = NewSecret(v)
			} else {
				s.PrivateKeyNew = NewSecret(v)
			}
			l.notePEM(key, e.val, v)
		case "pushed_authorization_requests":
			s.PushedAuthorizationRequests = l.boolean(OIDC, key, e.val)
		case "request_object":
			s.RequestObject = l.boolean(OIDC, key, e.val)
		default:
			if near := suggest(e.key, oidcEntries, nil); near != "" {
				l.warn(fmt.Sprintf("%s is sent to the provider as an authorization request parameter; did you mean %s.%s?", key, keyOIDCAdditional, near))
			}
			if v, ok := l.scalar(OIDC, key, e.val); ok {
				s.Custom = append(s.Custom, Param{Name: e.key, Value: v})
			}
		}
	}
	return s
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
	set(&o.Prompt, a.Prompt)
	o.PushedAuthorization = o.PushedAuthorization || a.PushedAuthorizationRequests
	o.RequestObject = o.RequestObject || a.RequestObject
	if a.IDTokenEncryptedResponseAlg != "" || a.IDTokenEncryptedResponseEnc != "" {
		o.IDTokenEncryption = providers.OIDCEncryption{Alg: a.IDTokenEncryptedResponseAlg, Enc: a.IDTokenEncryptedResponseEnc}
	}
	if a.UserInfoEncryptedResponseAlg != "" || a.UserInfoEncryptedResponseEnc != "" {
		o.UserInfoEncryption = providers.OIDCEncryption{Alg: a.UserInfoEncryptedResponseAlg, Enc: a.UserInfoEncryptedResponseEnc}
	}
	if a.Scope != "" {
		o.Scopes = strings.Fields(a.Scope)
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
		ClientID:       c.ClientID,
		ClientSecret:   c.ClientSecret.Value(),
		Issuer:         c.Issuer,
		PrivateKey:     a.PrivateKey.Value(),
		NextPrivateKey: a.PrivateKeyNew.Value(),
		Options:        o,
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

// CheckDiscovery returns why this client registration cannot work with a
// provider whose discovery document is doc: a client_auth_method,
// algorithm or encryption of oidc_additional_settings the provider does
// not advertise, pushed or by-value requests it does not take. The error
// names the entry. It makes no request: extauth check runs it on the
// document it fetched, as the strategy does on its first sign-in.
func (c OIDCConfig) CheckDiscovery(doc *providers.OIDCDiscovery) error {
	return providers.CheckOIDCDiscovery(c.strategyConfig(providers.OIDCOptions{}), doc)
}
