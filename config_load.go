package extauth

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// ConfigOption adjusts how LoadConfig and ParseConfig read a secrets file.
type ConfigOption func(*loadOptions)

type loadOptions struct {
	env    string
	lookup func(string) (string, bool)
}

// Env selects the environment section (development, production, ...) of a
// sectioned, Rails-style file. Without it the section named by the EXTAUTH_ENV
// variable is read, else development. A flat file has no sections, so the
// option does not apply to it.
func Env(name string) ConfigOption {
	return func(o *loadOptions) { o.env = name }
}

// LookupEnv replaces os.LookupEnv for EXTAUTH_ENV and for the ${VAR} and
// <%= ENV[...] %> look-ups in values, so that tests and hosts with their own
// secret store never have to touch the process environment. A nil f behaves
// as if no variable were set.
func LookupEnv(f func(string) (string, bool)) ConfigOption {
	return func(o *loadOptions) {
		if f == nil {
			f = func(string) (string, bool) { return "", false }
		}
		o.lookup = f
	}
}

// ErrUnknownEnvironment is wrapped by the error of a sectioned file that has
// no section for the selected environment.
var ErrUnknownEnvironment = errors.New("environment not found")

// LoadConfig reads the secrets file at path and returns its validated
// configuration; see ParseConfig for the formats it accepts. The error of a
// file that loads but does not validate wraps a *ValidationError.
func LoadConfig(path string, opts ...ConfigOption) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("extauth: config: %w", err)
	}
	cfg, err := parseConfig(data, opts)
	if err != nil {
		return nil, fmt.Errorf("extauth: config %s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig decodes and validates a secrets file.
//
// The file is YAML in one of two shapes. A flat file holds the settings at the
// top level. A sectioned file, recognised by having none of the settings at
// the top level, holds one mapping per environment, as Rails' secrets.yml
// does, usually sharing values through an anchor and << merges:
//
//	default: &default
//	  oidc_issuer: https://id.example.org
//	production:
//	  <<: *default
//	  oidc_client_id: <%= ENV["OIDC_CLIENT_ID"] %>
//
// Only the selected environment is read (see Env); it must exist. A shared
// section, as Rails' config_for knows it, is merged under it key by key (not
// deeply), the environment's own values winning.
//
// String values may look variables up after YAML parsing, so that no
// variable can change the structure of the file: ${VAR}, <%= ENV["VAR"] %>
// (or single quotes), <%= ENV["VAR"] || "default" %>,
// <%= ENV.fetch("VAR", "default") %> and <%= ENV.fetch("VAR") { "default" } %>.
// An unset variable without a default reads as empty and adds a warning,
// except in ENV.fetch("VAR"), which fails as it would in Ruby. $${ stands
// for a literal ${ and <%% for a literal <%; any other ${ or ERB is an error.
//
// Numbers and booleans are read as the text written in the file, null as an
// empty string. Keys that are not settings are ignored; those that look like
// a misspelt setting are reported in Config.Warnings.
//
// Every problem found is reported at once in a *ValidationError (find it with
// errors.As), naming settings and never their values.
func ParseConfig(data []byte, opts ...ConfigOption) (*Config, error) {
	cfg, err := parseConfig(data, opts)
	if err != nil {
		return nil, fmt.Errorf("extauth: config: %w", err)
	}
	return cfg, nil
}

// InspectConfig reads the secrets file at path as LoadConfig does, but keeps
// the configuration when it does not validate, for tools that report on a
// file provider by provider (extauth check). problems lists every problem
// LoadConfig would report; err is set only when the file cannot be read at
// all (missing file, malformed YAML, unknown environment), and cfg is nil
// then. A configuration with problems must not be given to New.
func InspectConfig(path string, opts ...ConfigOption) (cfg *Config, problems []Problem, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("extauth: config: %w", err)
	}
	cfg, problems, err = inspectConfig(data, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("extauth: config %s: %w", path, err)
	}
	return cfg, problems, nil
}

func parseConfig(data []byte, opts []ConfigOption) (*Config, error) {
	cfg, problems, err := inspectConfig(data, opts)
	if err != nil {
		return nil, err
	}
	if len(problems) > 0 {
		return nil, &ValidationError{Problems: problems}
	}
	return cfg, nil
}

func inspectConfig(data []byte, opts []ConfigOption) (*Config, []Problem, error) {
	o := loadOptions{lookup: os.LookupEnv}
	for _, opt := range opts {
		opt(&o)
	}
	if o.env == "" {
		if v, ok := o.lookup("EXTAUTH_ENV"); ok && v != "" {
			o.env = v
		} else {
			o.env = "development"
		}
	}

	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, nil, fmt.Errorf("parse YAML: %w", err)
	}
	l := &loader{lookup: o.lookup, budget: maxMergeWork, hints: map[string][]string{}}
	settings, where, err := l.selectSettings(&doc, o.env)
	if err != nil {
		return nil, nil, err
	}
	cfg := l.decode(settings, where)
	cfg.Warnings = l.warnings

	problems := l.problems
	if err := cfg.Validate(); err != nil {
		var ve *ValidationError
		errors.As(err, &ve)
		for _, p := range ve.Problems {
			// A value that could not be read already has its problem;
			// saying it is also missing or malformed would be noise.
			if l.failed(p.Key) {
				continue
			}
			if h := l.hints[p.Key]; len(h) > 0 && errors.Is(p.Err, ErrMissingSetting) {
				p.Reason += " (" + strings.Join(h, "; ") + ")"
			}
			problems = append(problems, p)
		}
	}
	return cfg, problems, nil
}

// maxMergeWork bounds the mapping entries visited while resolving aliases and
// << merges: yaml.v3 hands nodes over unexpanded, so a small file could
// otherwise make us walk an exponential number of them.
const maxMergeWork = 100_000

// maxMergeDepth bounds nested merges, and so cycles (an anchor merged into
// itself).
const maxMergeDepth = 32

type loader struct {
	lookup   func(string) (string, bool)
	budget   int
	problems []Problem
	warnings []string
	// hints explains why a setting came out empty, for its missing-setting
	// problem: unset variables, likely misspellings.
	hints map[string][]string
}

func (l *loader) problem(p Provider, key, reason string, err error) {
	l.problems = append(l.problems, Problem{Provider: p, Key: key, Reason: reason, Err: err})
}

func (l *loader) warn(format string, args ...any) {
	l.warnings = append(l.warnings, fmt.Sprintf(format, args...))
}

func (l *loader) failed(key string) bool {
	return slices.ContainsFunc(l.problems, func(p Problem) bool { return p.Key == key })
}

// selectSettings finds the mapping that holds the settings: the top level of
// a flat file, or the selected environment of a sectioned one. where names it
// for warnings.
func (l *loader) selectSettings(doc *yaml.Node, env string) (settings []entry, where string, err error) {
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, "the file", nil
	}
	root, err := deref(doc.Content[0])
	if err != nil {
		return nil, "", err
	}
	if isNull(root) {
		return nil, "the file", nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, "", errors.New("the top level must be a mapping of settings or of environments")
	}
	top, dups, err := l.entries(root, 0)
	if err != nil {
		return nil, "", err
	}
	if slices.ContainsFunc(top, func(e entry) bool { return isSettingKey(e.key) }) {
		l.duplicates(dups, "")
		return top, "the file", nil
	}
	if slices.Contains(dups, env) {
		return nil, "", fmt.Errorf("environment %s is given more than once", env)
	}

	var sections []string
	var selected, shared *yaml.Node
	for _, e := range top {
		v, err := deref(e.val)
		if err != nil {
			return nil, "", err
		}
		if v.Kind != yaml.MappingNode && !isNull(v) {
			continue
		}
		sections = append(sections, e.key)
		switch e.key {
		case env:
			selected = v
		case "shared":
			shared = v
		}
	}
	if selected == nil {
		if len(sections) == 0 {
			return nil, "", fmt.Errorf("%w: %q (the file has neither settings at the top level nor environment sections)",
				ErrUnknownEnvironment, env)
		}
		return nil, "", fmt.Errorf("%w: %q (the file has sections %s)", ErrUnknownEnvironment, env, strings.Join(sections, ", "))
	}
	where = "environment " + env
	own, dups, err := l.sectionEntries(selected)
	if err != nil {
		return nil, "", fmt.Errorf("environment %s: %w", env, err)
	}
	l.duplicates(dups, "")
	if shared == nil || env == "shared" {
		return own, where, nil
	}
	base, dups, err := l.sectionEntries(shared)
	if err != nil {
		return nil, "", fmt.Errorf("section shared: %w", err)
	}
	l.duplicates(dups, "")
	return overlay(base, own), where, nil
}

func (l *loader) sectionEntries(n *yaml.Node) ([]entry, []string, error) {
	if isNull(n) {
		return nil, nil, nil
	}
	return l.entries(n, 0)
}

// overlay returns base with the entries of top replacing or following it.
func overlay(base, top []entry) []entry {
	out := slices.Clone(base)
	for _, e := range top {
		if i := slices.IndexFunc(out, func(b entry) bool { return b.key == e.key }); i >= 0 {
			out[i] = e
		} else {
			out = append(out, e)
		}
	}
	return out
}

// duplicates reports keys given twice in one mapping. Only our own keys
// matter: Ruby's YAML takes the last silently, which hides mistakes in
// secrets, but other keys of the host's file are none of our business.
func (l *loader) duplicates(keys []string, prefix string) {
	for _, k := range keys {
		if prefix == "" && !isSettingKey(k) {
			continue
		}
		l.problem(providerOf(prefix+k), prefix+k, "is given more than once", ErrInvalidSetting)
	}
}

// entry is one key of a mapping with merges resolved.
type entry struct {
	key string
	val *yaml.Node
}

// entries lists the keys of mapping n in file order with its << merges
// resolved: merged keys appear where the merge is, keys written in n win over
// merged ones, and earlier merges win over later ones, as yaml.v3 decodes
// them. A key written twice keeps its last value and is returned in dups.
// Keys that are not scalars cannot be settings and are left out.
func (l *loader) entries(n *yaml.Node, depth int) (out []entry, dups []string, err error) {
	if depth > maxMergeDepth {
		return nil, nil, errors.New("<< merges nest too deeply (is an anchor merged into itself?)")
	}
	l.budget -= len(n.Content)
	if l.budget < 0 {
		return nil, nil, errors.New("too many aliases and << merges")
	}
	explicit := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, ok := keyOf(n.Content[i])
		if !ok || isMergeKey(n.Content[i]) {
			continue
		}
		if explicit[k] {
			dups = append(dups, k)
		}
		explicit[k] = true
	}
	index := map[string]int{}
	add := func(e entry, fromMerge bool) {
		i, seen := index[e.key]
		switch {
		case seen && fromMerge:
		case seen:
			out[i] = e
		case fromMerge && explicit[e.key]:
		default:
			index[e.key] = len(out)
			out = append(out, e)
		}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		if !isMergeKey(kn) {
			if k, ok := keyOf(kn); ok {
				add(entry{key: k, val: vn}, false)
			}
			continue
		}
		sources, err := mergeSources(vn)
		if err != nil {
			return nil, nil, err
		}
		for _, src := range sources {
			merged, _, err := l.entries(src, depth+1)
			if err != nil {
				return nil, nil, err
			}
			for _, e := range merged {
				add(e, true)
			}
		}
	}
	return out, dups, nil
}

func mergeSources(v *yaml.Node) ([]*yaml.Node, error) {
	errBad := errors.New("<< must merge a mapping or a list of mappings")
	v, err := deref(v)
	if err != nil {
		return nil, err
	}
	switch v.Kind {
	case yaml.MappingNode:
		return []*yaml.Node{v}, nil
	case yaml.SequenceNode:
		out := make([]*yaml.Node, 0, len(v.Content))
		for _, item := range v.Content {
			m, err := deref(item)
			if err != nil {
				return nil, err
			}
			if m.Kind != yaml.MappingNode {
				return nil, errBad
			}
			out = append(out, m)
		}
		return out, nil
	}
	return nil, errBad
}

func isMergeKey(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Value == "<<" && n.ShortTag() == "!!merge"
}

func keyOf(n *yaml.Node) (string, bool) {
	n, err := deref(n)
	if err != nil || n.Kind != yaml.ScalarNode {
		return "", false
	}
	return n.Value, true
}

// deref follows aliases. An alias can only name an anchor defined before it,
// so a chain is short, but the bound keeps a malformed tree from looping.
func deref(n *yaml.Node) (*yaml.Node, error) {
	for range maxMergeDepth {
		if n.Kind != yaml.AliasNode {
			return n, nil
		}
		if n.Alias == nil {
			break
		}
		n = n.Alias
	}
	return nil, errors.New("alias does not resolve")
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// decode turns the settings mapping into a Config, recording problems and
// warnings on l.
func (l *loader) decode(settings []entry, where string) *Config {
	cfg := &Config{}
	fields := map[string]field{}
	for _, f := range cfg.fields() {
		fields[f.key] = f
	}
	found := false
	for _, e := range settings {
		if e.key == keyAdditional {
			found = true
			cfg.SAML.Additional = l.additional(e.val)
			continue
		}
		f, ok := fields[e.key]
		if !ok {
			l.suggestSetting(e.key)
			continue
		}
		found = true
		if v, ok := l.scalar(f.provider, f.key, e.val); ok {
			f.set(v)
		}
	}
	if !found {
		l.warn("%s has no extauth settings; no provider is configured", where)
	}
	for _, f := range cfg.fields() {
		if f.check != nil && f.key != "saml_sp_entity_id" && plainHTTP(f.get()) {
			l.warn("%s uses plain http outside localhost; use https", f.key)
		}
	}
	return cfg
}

// scalar reads a string setting: numbers and booleans as written, null as
// "", with variables substituted.
func (l *loader) scalar(p Provider, key string, n *yaml.Node) (string, bool) {
	n, err := deref(n)
	if err != nil {
		l.problem(p, key, "is an alias that does not resolve", ErrInvalidSetting)
		return "", false
	}
	switch n.Kind {
	case yaml.MappingNode:
		l.problem(p, key, "must be a single value, not a mapping", ErrInvalidSetting)
		return "", false
	case yaml.SequenceNode:
		l.problem(p, key, "must be a single value, not a list", ErrInvalidSetting)
		return "", false
	}
	switch n.ShortTag() {
	case "!!null":
		return "", true
	case "!!int", "!!float", "!!bool", "!!timestamp":
		return n.Value, true
	case "!!str":
		return l.expand(p, key, n.Value)
	}
	l.problem(p, key, "has a YAML tag extauth does not read", ErrInvalidSetting)
	return "", false
}

const keyAdditional = "saml_additional_settings"

// mapping returns the entries of a nested mapping setting. Null, and the
// empty string a template may leave, read as an empty mapping.
func (l *loader) mapping(key string, n *yaml.Node) []entry {
	n, err := deref(n)
	if err != nil {
		l.problem(SAML, key, "is an alias that does not resolve", ErrInvalidSetting)
		return nil
	}
	if isNull(n) || (n.Kind == yaml.ScalarNode && n.Value == "") {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		l.problem(SAML, key, "must be a mapping", ErrInvalidSetting)
		return nil
	}
	entries, dups, err := l.entries(n, 0)
	if err != nil {
		l.problem(SAML, key, "cannot be read: "+err.Error(), ErrInvalidSetting)
		return nil
	}
	l.duplicates(dups, key+".")
	return entries
}

// additional reads saml_additional_settings.
func (l *loader) additional(n *yaml.Node) SAMLAdditionalSettings {
	var s SAMLAdditionalSettings
	entries := l.mapping(keyAdditional, n)
	for _, e := range entries {
		key := keyAdditional + "." + e.key
		switch e.key {
		case "RelayState":
			s.RelayState, _ = l.scalar(SAML, key, e.val)
		case "authn_context":
			s.AuthnContext, _ = l.scalar(SAML, key, e.val)
		case "certificate":
			s.Certificate, _ = l.scalar(SAML, key, e.val)
		case "idp_metadata_certificate":
			s.IdPMetadataCertificate, _ = l.scalar(SAML, key, e.val)
		case "private_key":
			v, _ := l.scalar(SAML, key, e.val)
			s.PrivateKey = NewSecret(v)
		case "security":
			s.Security = l.security(e.val)
		default:
			known := []string{"RelayState", "authn_context", "certificate", "private_key", "idp_metadata_certificate", "security"}
			if near := suggest(e.key, known, nil); near != "" {
				l.warn("%s is sent to the IdP as a custom entry; did you mean %s.%s?", key, keyAdditional, near)
			}
			v, ok := l.scalar(SAML, key, e.val)
			if ok {
				s.Custom = append(s.Custom, Param{Name: e.key, Value: v})
			}
		}
	}
	return s
}

// security reads saml_additional_settings.security.
func (l *loader) security(n *yaml.Node) SAMLSecurity {
	const key = keyAdditional + ".security"
	var s SAMLSecurity
	entries := l.mapping(key, n)
	for _, e := range entries {
		if e.key != "logout_requests_signed" {
			hint := ""
			if near := suggest(e.key, []string{"logout_requests_signed"}, nil); near != "" {
				hint = "; did you mean logout_requests_signed?"
			}
			l.warn("%s.%s is not supported and is ignored%s", key, e.key, hint)
			continue
		}
		s.LogoutRequestsSigned = l.boolean(key+"."+e.key, e.val)
	}
	return s
}

func (l *loader) boolean(key string, n *yaml.Node) bool {
	v, ok := l.scalar(SAML, key, n)
	if !ok {
		return false
	}
	switch strings.ToLower(v) {
	case "true":
		return true
	case "false", "":
		return false
	}
	l.problem(SAML, key, "must be true or false", ErrInvalidSetting)
	return false
}
