package providers

import (
	"slices"
	"strings"

	"github.com/extauth/extauth/internal/spelling"
)

// oidcEntries are the entries of oidc_additional_settings: those the
// strategy names in its problems, and those extauth maps onto
// OIDCOptions (scope, acr_values, request_options, assurance_levels).
// An authorization parameter spelt like one of them is a likely typo.
var oidcEntries = []string{
	settingAuthMethod, settingPrivateKey, settingPrivateKeyNew, settingPrivateKeyOld, settingAudience, settingAssertionAlg,
	settingPAR, settingRequestObject, settingRequestAlg, settingIDTokenAlg, settingIDTokenEnc, settingUserInfoAlg,
	settingUserInfoEnc, settingMaxAge, settingPrompt, settingDPoP, settingDPoPAlg, settingResponseMode, settingProfile,
	settingTLSCert, settingTLSKey, settingTLSCertNew, settingTLSKeyNew,
	OIDCSettingsKey + ".scope", OIDCSettingsKey + ".acr_values", OIDCSettingsKey + ".request_options", OIDCSettingsKey + ".assurance_levels",
	settingPreset, settingTenants, settingHostedDomain, settingGroupsClaim, settingRolesClaim, settingGroupsOverage, settingGraphURL,
	settingFederation,
}

// authRequestParams are the authorization request parameters a provider
// knows by name beyond those extauth sets itself (reservedAuthParams):
// OpenID Connect Core 3.1.2.1 and 5.5, RFC 8707's resource, RFC 9396's
// authorization_details, and Microsoft's domain_hint, which the start
// route takes per request. Any other is sent as written, with a warning.
var authRequestParams = []string{
	"prompt", "max_age", "acr_values", "login_hint", "ui_locales", "claims_locales", "display", "id_token_hint",
	"claims", "registration", "resource", "authorization_details", OptionDomainHint,
}

// startupWarnings are what the oidc strategy warns of when it is built:
// settings it accepts that are likely mistakes. newOIDC logs each once,
// and OIDCKeys returns them for extauth check. o is c's options with the
// profile applied.
func startupWarnings(c OIDCConfig, o OIDCOptions) []string {
	var ws []string
	// Entra ID requires the token endpoint: preset entra says so itself.
	if o.AssertionAudience == OIDCAudienceTokenEndpoint && (c.Options.AssertionAudience != "" || o.Preset != OIDCPresetEntra) {
		ws = append(ws, settingAudience+": "+OIDCAudienceTokenWarning)
	}
	if c.ClientSecret != "" && (o.AuthMethod == AuthMethodPrivateKeyJWT || tlsMethod(o.AuthMethod)) {
		by := "client_auth_method " + o.AuthMethod
		if c.Options.AuthMethod == "" {
			by = "profile " + o.Profile + " (client_auth_method " + o.AuthMethod + ")"
		}
		with := "private_key"
		if o.AuthMethod != AuthMethodPrivateKeyJWT {
			with = "tls_client_certificate"
		}
		// A secret kept where it serves nothing is one more to leak, and
		// its presence suggests it still authenticates the client.
		ws = append(ws, settingClientSecret+" is set but unused: "+by+" authenticates with "+with+"; remove the secret")
	}
	for _, k := range sortedKeys(o.AuthParams) {
		if k == "" || slices.Contains(reservedAuthParams, k) || slices.Contains(authRequestParams, k) {
			continue // an empty or reserved name is a problem of CheckOIDCConfig
		}
		w := OIDCSettingsKey + "." + k + " is not a setting: it is sent to the provider as the authorization request parameter " + k
		if near := spelling.Nearest(OIDCSettingsKey+"."+k, oidcEntries, nearLimit(k)); near != "" {
			w += "; did you mean " + near + "?"
		} else if near := spelling.Nearest(k, authRequestParams, nearLimit(k)); near != "" {
			w += "; did you mean the parameter " + near + "?"
		}
		ws = append(ws, w)
	}
	return ws
}

// nearLimit is the edit distance under which name is taken for a
// misspelling: one for short names, where two would match unrelated ones.
func nearLimit(name string) int {
	if len(name) < 6 {
		return 1
	}
	return 2
}

// caseHint is " (did you mean ES256? algorithm names are case-sensitive)"
// when v is one of choices but for its case, "" otherwise.
func caseHint(v string, choices []string) string {
	for _, c := range choices {
		if c != v && strings.EqualFold(c, v) {
			return " (did you mean " + c + "? algorithm names are case-sensitive)"
		}
	}
	return ""
}
