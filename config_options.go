package extauth

import (
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/extauth/extauth/providers"
)

// words reads a setting that holds a list: a YAML sequence of values, as
// list reads it, or one value whose words are separated by spaces or
// commas.
func (l *loader) words(p Provider, key string, n *yaml.Node) []string {
	if d, err := deref(n); err == nil && d.Kind != yaml.SequenceNode {
		v, _ := l.scalar(p, key, d)
		return strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' || r == '\n' })
	}
	return l.list(p, key, n)
}

// assuranceLevels reads assurance_levels: a mapping of the host's level names to
// the provider's values that meet each, as words reads them.
func (l *loader) assuranceLevels(p Provider, key string, n *yaml.Node) map[string][]string {
	entries := l.mapping(p, key, n)
	if len(entries) == 0 {
		return nil
	}
	out := make(map[string][]string, len(entries))
	for _, e := range entries {
		out[e.key] = l.words(p, key+"."+e.key, e.val)
	}
	return out
}

// optionProblems are the problems of saml_additional_settings'
// request_options and assurance_levels, as samlsp.New finds them.
func (s SAMLAdditionalSettings) optionProblems() []Problem {
	var ps []Problem
	for _, p := range providers.CheckRequestOptionConfig(keyAdditional, s.RequestOptions, providers.SAMLRequestOptions(),
		s.AssuranceLevels, providers.OptionAuthnContext, strings.Fields(s.AuthnContext)) {
		ps = append(ps, Problem{Provider: SAML, Key: p.Setting, Reason: p.Reason, Err: ErrInvalidSetting})
	}
	return ps
}
