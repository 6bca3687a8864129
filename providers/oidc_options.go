package providers

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

var _ OptionTaker = (*OIDC)(nil)

// RequestOptions lists the per-request options the configuration allows.
func (s *OIDC) RequestOptions() []string { return slices.Clone(s.opts.RequestOptions) }

// AssuranceLevel returns the acr values that meet the host's level.
func (s *OIDC) AssuranceLevel(level string) ([]string, bool) {
	v, ok := s.opts.AssuranceLevels[level]
	return slices.Clone(v), ok
}

// ClockSkew is the leeway allowed on the provider's times.
func (s *OIDC) ClockSkew() time.Duration { return s.opts.ClockSkew }

// withRequestOptions appends the sign-in's own options to opts, the
// request's other parameters, so that they win over the configured ones:
// the one place per-request options enter an authorization request.
func (s *OIDC) withRequestOptions(opts []oauth2.AuthCodeOption, tx *Transaction) ([]oauth2.AuthCodeOption, error) {
	if !tx.HasOptions() {
		return opts, nil
	}
	want, err := s.asked(tx)
	if err != nil {
		return nil, err
	}
	if len(want.Values) > 0 {
		opts = append(opts, oauth2.SetAuthURLParam(OptionACRValues, strings.Join(want.Values, " ")))
	}
	if want.MaxAge >= 0 {
		opts = append(opts, oauth2.SetAuthURLParam(OptionMaxAge, strconv.FormatInt(int64(want.MaxAge/time.Second), 10)))
	}
	for _, name := range []string{OptionLoginHint, OptionPrompt, OptionUILocales, OptionDomainHint} {
		if v := tx.Option(name); v != "" {
			opts = append(opts, oauth2.SetAuthURLParam(name, v))
		}
	}
	return opts, nil
}

// asked is what the sign-in tx asks of the user's authentication: the
// configured acr_values and max_age, narrowed by its options. Complete
// checks the ID token against it, so a provider that ignores what a
// sign-in asked cannot pass it off.
func (s *OIDC) asked(tx *Transaction) (Asked, error) {
	configured := Asked{Values: s.acrValues, MaxAge: s.maxAge}
	if tx == nil || !tx.HasOptions() {
		return configured, nil
	}
	return Narrow(tx, configured, OptionACRValues, s.opts.AssuranceLevels)
}

// authentication reads how the ID token says the user authenticated: acr,
// amr and auth_time, each left empty when absent or malformed.
func authentication(claims map[string]any) (acr string, amr []string, at time.Time) {
	acr, _ = claims["acr"].(string)
	if list, ok := claims["amr"].([]any); ok {
		for _, v := range list {
			if m, ok := v.(string); ok {
				amr = append(amr, m)
			}
		}
	}
	if v, ok := claims["auth_time"]; ok {
		if t, err := numericDate(v); err == nil {
			at = t
		}
	}
	return acr, amr, at
}

// checkOptionConfig returns the problems of o's request options and
// assurance levels, naming the entries of oidc_additional_settings.
func checkOptionConfig(o *OIDCOptions) []*OIDCSettingError {
	return CheckRequestOptionConfig(OIDCSettingsKey, o.RequestOptions, OIDCRequestOptions(), o.AssuranceLevels,
		OptionACRValues, strings.Fields(o.AuthParams["acr_values"]))
}
