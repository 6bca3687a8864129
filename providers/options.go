package providers

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// The per-request sign-in options: form fields of a start request that the
// routes take, when the provider's configuration allows them, validate, seal
// into the transaction and hand to Begin (docs/after-sign-in.md).
const (
	// OptionLoginHint suggests the account to sign in (OpenID Connect).
	OptionLoginHint = "login_hint"
	// OptionPrompt is OpenID Connect's prompt: none, login, consent,
	// select_account.
	OptionPrompt = "prompt"
	// OptionMaxAge is how long ago, in whole seconds, the user may have
	// authenticated: OpenID Connect's max_age; for SAML, ForceAuthn and a
	// check of the AuthnInstant.
	OptionMaxAge = "max_age"
	// OptionACRValues are the acr values asked for, most preferred first.
	OptionACRValues = "acr_values"
	// OptionUILocales are the user's preferred languages (BCP 47 tags).
	OptionUILocales = "ui_locales"
	// OptionDomainHint names the user's organisation's domain (Entra ID).
	OptionDomainHint = "domain_hint"
	// OptionLevel is one of the host's assurance levels, which the
	// provider's configuration maps to its acr values or SAML classes.
	OptionLevel = "level"
	// OptionForceAuthn asks a SAML IdP to authenticate the user again.
	OptionForceAuthn = "ForceAuthn"
	// OptionIsPassive asks a SAML IdP not to interact with the user.
	OptionIsPassive = "IsPassive"
	// OptionAuthnContext are the SAML authentication context classes asked
	// for (RequestedAuthnContext), space-separated.
	OptionAuthnContext = "authn_context"
)

// OIDCRequestOptions returns the per-request options the OpenID Connect
// strategies take.
func OIDCRequestOptions() []string {
	return []string{OptionLoginHint, OptionPrompt, OptionMaxAge, OptionACRValues, OptionUILocales, OptionDomainHint, OptionLevel}
}

// SAMLRequestOptions returns the per-request options the SAML strategy
// takes.
func SAMLRequestOptions() []string {
	return []string{OptionForceAuthn, OptionIsPassive, OptionAuthnContext, OptionMaxAge, OptionLevel}
}

// RequestOptionNames lists every per-request option name, whatever the
// protocol: a start request's form field with one of these names is an
// option, taken or ignored; other fields are not options at all.
func RequestOptionNames() []string {
	out := OIDCRequestOptions()
	for _, n := range SAMLRequestOptions() {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// Bounds of option values: a start request is small, and what it asks
// travels in a URL and a cookie.
const (
	maxOptionValue = 256
	maxOptionWords = 8
	maxLevelName   = 64
)

// OptionTaker is implemented by strategies that take per-request sign-in
// options and say how the user authenticated (OpenID Connect, SAML): the
// routes ask it which options the configuration allows and what the
// host's assurance levels mean to the provider; Begin applies the options
// sealed in the transaction (Transaction.Option) and Complete checks what
// they asked for, as it does what the configuration asks.
type OptionTaker interface {
	// RequestOptions lists the options the configuration allows per
	// request, nil for none.
	RequestOptions() []string
	// AssuranceLevel returns the acr values (SAML: authentication context
	// classes) that meet the host's assurance level, and false when the
	// configuration maps no such level.
	AssuranceLevel(level string) ([]string, bool)
	// ClockSkew is the leeway the strategy allows on the provider's times.
	ClockSkew() time.Duration
}

// optionPrefix keeps the options apart from the strategy-specific values
// of Transaction.Extra, so that the cookie's encoding does not change.
const optionPrefix = "opt."

// Option returns the per-request option name the sign-in asked for, "" for
// none. The routes validated it before sealing it.
func (tx *Transaction) Option(name string) string { return tx.Extra[optionPrefix+name] }

// SetOption records a validated per-request option in the transaction.
func (tx *Transaction) SetOption(name, value string) {
	if tx.Extra == nil {
		tx.Extra = map[string]string{}
	}
	tx.Extra[optionPrefix+name] = value
}

// HasOptions reports whether the sign-in carries any per-request option.
func (tx *Transaction) HasOptions() bool {
	for k := range tx.Extra {
		if strings.HasPrefix(k, optionPrefix) {
			return true
		}
	}
	return false
}

// CheckRequestOption reports why value is not a valid value of the option
// name, nil when it is: bounded, printable, and of the option's syntax (the
// prompt words of OIDC Core 3.1.2.1, a non-negative whole max_age, acr
// values as space-separated tokens, BCP 47-like language tags, a domain
// name, true or false, absolute URIs). The error holds no part of value.
func CheckRequestOption(name, value string) error {
	if why := optionProblem(name, value); why != "" {
		return errors.New(why)
	}
	return nil
}

// optionProblem is CheckRequestOption's reason, "" for a valid value.
func optionProblem(name, value string) string {
	if value == "" {
		return "is empty"
	}
	if len(value) > maxOptionValue || !utf8.ValidString(value) {
		return "is longer than " + strconv.Itoa(maxOptionValue) + " bytes or not UTF-8"
	}
	for _, r := range value {
		if !unicode.IsPrint(r) {
			return "holds a character that is not printable"
		}
	}
	words := strings.Fields(value)
	if strings.Join(words, " ") != value && name != OptionLoginHint {
		return "must be words separated by single spaces"
	}
	if len(words) > maxOptionWords {
		return "holds more than " + strconv.Itoa(maxOptionWords) + " values"
	}
	switch name {
	case OptionLoginHint:
		if strings.TrimSpace(value) != value {
			return "starts or ends with a space"
		}
	case OptionPrompt:
		return promptProblem(words)
	case OptionMaxAge:
		if _, ok := maxAge(value); !ok {
			return errMaxAge
		}
	case OptionACRValues:
		for _, w := range words {
			if !isToken(w) {
				return "must be tokens of visible ASCII characters"
			}
		}
	case OptionUILocales:
		for _, w := range words {
			if !isLanguageTag(w) {
				return "must be language tags (en, fr-CA)"
			}
		}
	case OptionDomainHint:
		if len(words) != 1 || !isDomain(value) {
			return "must be one domain name"
		}
	case OptionLevel:
		if len(words) != 1 || len(value) > maxLevelName || !isToken(value) {
			return "must be one level name"
		}
	case OptionForceAuthn, OptionIsPassive:
		if value != "true" && value != "false" {
			return "must be true or false"
		}
	case OptionAuthnContext:
		for _, w := range words {
			if u, err := url.Parse(w); err != nil || u.Scheme == "" || !isToken(w) {
				return "must be an absolute URI, or several separated by spaces (an authentication context class, such as https://refeds.org/profile/mfa)"
			}
		}
	default:
		return "is not a sign-in option"
	}
	return ""
}

// promptProblem holds prompt to OIDC Core 3.1.2.1: its four words, none
// alone, each once.
func promptProblem(words []string) string {
	for i, w := range words {
		if !slices.Contains(prompts, w) {
			return "must be none, login, consent or select_account, or several of the last three"
		}
		if slices.Contains(words[:i], w) {
			return "repeats a value"
		}
	}
	if slices.Contains(words, "none") && len(words) > 1 {
		return "cannot combine none with other values"
	}
	return ""
}

const errMaxAge = "must be a number of seconds from 0 to 31622400 (a year), in digits alone"

// ParseMaxAge reads a max_age: whole seconds, not negative, at most a year
// of them (a larger one asks nothing a year does not).
func ParseMaxAge(s string) (time.Duration, error) {
	d, ok := maxAge(s)
	if !ok {
		return 0, errors.New(errMaxAge)
	}
	return d, nil
}

func maxAge(s string) (time.Duration, bool) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n > 366*24*3600 || s != strconv.FormatUint(n, 10) {
		return 0, false
	}
	return time.Duration(n) * time.Second, true
}

func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f || s[i] == '"' || s[i] == '\\' {
			return false
		}
	}
	return true
}

// isLanguageTag accepts the shape of BCP 47 tags: letters, then subtags of
// letters and digits, one to eight each, joined by hyphens.
func isLanguageTag(s string) bool {
	for i, sub := range strings.Split(s, "-") {
		if len(sub) == 0 || len(sub) > 8 {
			return false
		}
		for _, c := range sub {
			letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
			if !letter && (i == 0 || c < '0' || c > '9') {
				return false
			}
		}
	}
	return true
}

func isDomain(s string) bool {
	if len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// CheckRequestOptionConfig returns the problems of a strategy's allowlist
// and assurance levels, as setting names them: an option the protocol
// does not take (takes lists those it does), a level name or value that is
// not valid (value checks each as the option valueOption), and a level
// whose values configured does not hold when it is set. Strategies refuse
// a configuration with any.
func CheckRequestOptionConfig(setting string, allowed, takes []string, levels map[string][]string, valueOption string, configured []string) []*OIDCSettingError {
	var out []*OIDCSettingError
	bad := func(key, format string, args ...any) {
		out = append(out, &OIDCSettingError{Setting: key, Reason: fmt.Sprintf(format, args...)})
	}
	for _, name := range allowed {
		if !slices.Contains(takes, name) {
			bad(setting+".request_options", "names %q, which is not an option this provider takes (%s)", name, strings.Join(takes, ", "))
		}
	}
	for _, level := range sortedLevels(levels) {
		key := setting + ".assurance_levels"
		values := levels[level]
		if optionProblem(OptionLevel, level) != "" {
			bad(key, "has a level name that is not a token of visible ASCII characters")
			continue
		}
		if why := optionProblem(valueOption, strings.Join(values, " ")); why != "" {
			bad(key+"."+level, "%s", why)
			continue
		}
		if len(configured) > 0 {
			for _, v := range values {
				if !slices.Contains(configured, v) {
					bad(key+"."+level, "names a value that %s.%s does not list: a sign-in at this level could not be accepted", setting, valueOption)
					break
				}
			}
		}
	}
	return out
}

func sortedLevels(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Asked is what one sign-in asks of the user's authentication: what the
// configuration asks of every sign-in, narrowed by the sign-in's own
// options. Complete checks it.
type Asked struct {
	// Values are the acr values (SAML: classes) of which the provider
	// must assert one; empty asks none.
	Values []string
	// MaxAge is how long ago the user may have authenticated; negative
	// asks nothing.
	MaxAge time.Duration
}

// Narrow returns what a sign-in asks: configured (the configuration's
// values and max_age) with the sign-in's options applied. A per-request
// value list (or level, mapped by levels) replaces the configured one but
// must lie within it when the configuration names any; the smaller
// max_age wins. A value or level the configuration does not allow is
// refused with an *Error (invalid_response, as a malformed start is).
func Narrow(tx *Transaction, configured Asked, valueOption string, levels map[string][]string) (Asked, error) {
	out := configured
	values := strings.Fields(tx.Option(valueOption))
	if level := tx.Option(OptionLevel); level != "" {
		lv, ok := levels[level]
		if !ok {
			return out, NewError(CodeInvalidResponse, "the sign-in asks for an assurance level this provider does not have",
				errors.New("option level names no level of assurance_levels"))
		}
		values = lv
	}
	if len(values) > 0 {
		for _, v := range values {
			if len(configured.Values) > 0 && !slices.Contains(configured.Values, v) {
				return out, NewError(CodeInvalidResponse, "the sign-in asks for an authentication this provider is not configured to accept",
					fmt.Errorf("option %s names a value outside the configured %s", valueOption, valueOption))
			}
		}
		out.Values = values
	}
	if s := tx.Option(OptionMaxAge); s != "" {
		d, ok := maxAge(s)
		if !ok {
			return out, NewError(CodeInvalidResponse, "the sign-in option max_age is not valid", errors.New("option max_age "+errMaxAge))
		}
		if out.MaxAge < 0 || d < out.MaxAge {
			out.MaxAge = d
		}
	}
	return out, nil
}
