package main

import (
	"maps"
	"slices"
	"strings"

	"github.com/extauth/extauth"
)

// signInOptions is what a provider's secrets take per request: the options
// its start route takes, and the host's assurance levels. Options set in
// code (Options.OIDC, Options.SAML) are not in the file: check cannot see
// them.
type signInOptions struct {
	Provider string              `json:"provider"`
	Options  []string            `json:"options,omitempty"`
	Levels   map[string][]string `json:"assurance_levels,omitempty"`
}

// fileSignInOptions lists the sign-in options of cfg's providers that
// take any.
func fileSignInOptions(cfg *extauth.Config) []signInOptions {
	var out []signInOptions
	if cfg == nil {
		return nil
	}
	for _, p := range cfg.Providers() {
		var s signInOptions
		switch p {
		case extauth.OIDC:
			s = signInOptions{string(p), cfg.OIDC.Additional.RequestOptions, cfg.OIDC.Additional.AssuranceLevels}
		case extauth.SAML:
			s = signInOptions{string(p), cfg.SAML.Additional.RequestOptions, cfg.SAML.Additional.AssuranceLevels}
		}
		if len(s.Options) > 0 || len(s.Levels) > 0 {
			out = append(out, s)
		}
	}
	return out
}

// signInOptions adds to the report what each provider takes per request,
// and warns about assurance levels that Auth.Assure cannot ask for.
func (r *checkReport) signInOptions(cfg *extauth.Config) {
	for _, s := range fileSignInOptions(cfg) {
		if len(r.broken[extauth.Provider(s.Provider)]) > 0 {
			continue
		}
		sec := r.section("Sign-in options (per request; docs/after-sign-in.md)")
		if len(s.Options) > 0 {
			sec.add(s.Provider+" takes", strings.Join(s.Options, ", "))
		} else {
			sec.add(s.Provider+" takes", "no option per request")
		}
		levels := slices.Sorted(maps.Keys(s.Levels))
		for _, l := range levels {
			sec.add(s.Provider+" level "+l, strings.Join(s.Levels[l], " "))
		}
		if len(levels) > 0 && !slices.Contains(s.Options, "level") {
			r.warn("%s: assurance_levels is set but request_options does not allow level: Auth.Assure and RequireAssurance cannot step up to a level", s.Provider)
		}
	}
}
