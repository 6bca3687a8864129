package extauth

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/crewjam/saml"
	"gopkg.in/yaml.v3"
)

// ConfigOption adjusts how LoadConfig and ParseConfig read a secrets file.
type ConfigOption func(*loadOptions)

type loadOptions struct {
	env    string
	lookup func(string) (string, bool)
}

// Env selects the environment section (development, production, ...) of a
// sectioned, Rails-style file. Without it the section is named by the first
// of the variables EXTAUTH_ENV, RAILS_ENV and APP_ENV that is set and not
// empty, else it is development; Config.Environment and
// Config.EnvironmentSource say which and why. A flat file has no sections,
// so the option does not apply to it.
func Env(name string) ConfigOption {
	return func(o *loadOptions) { o.env = name }
}

// LookupEnv replaces os.LookupEnv for EXTAUTH_ENV, RAILS_ENV, APP_ENV and
// for the ${VAR} and <%= ENV[...] %> look-ups, so that tests and hosts with
// their own secret store never have to touch the process environment. A nil
// f behaves as if no variable were set.
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
// deeply), the environment's own values winning. A top-level mapping that
// carries an anchor and is merged elsewhere, or holds no extauth setting
// (default, maps and apis in Consul Democracy's file), is taken for shared
// values, not an environment, in the messages about environments.
//
// The providers' real names are read as aliases of extauth's slugs, as
// Consul Democracy's file names them: twitter_key, twitter_secret and
// twitter_site for microblog_*, facebook_* for socialnet_*, google_oauth2_*
// for search_oauth2_* and wordpress_oauth2_* for blog_oauth2_*. Config.Warnings
// notes, once per provider and at slog.LevelInfo, which names were read as
// which. A setting given under both names in one mapping with different,
// non-empty values is an error naming both keys.
//
// Rails runs the file through ERB before YAML, and so does ParseConfig, with
// only these tags: <%= ENV["VAR"] %> (or single quotes),
// <%= ENV["VAR"] || "default" %>, <%= ENV.fetch("VAR", "default") %>,
// <%= ENV.fetch("VAR") { "default" } %> and ENV.fetch("VAR"), comments
// (<%# ... %>) and <%% for a literal <%. A tag may be anywhere, also inside
// a quoted string or a key, and is replaced by the variable's value verbatim
// once the YAML is parsed, so that no value can change the structure of the
// file. ${VAR} is looked up in values too, and $${ stands for a literal ${.
// An unset variable without a default reads as empty and adds a warning,
// except in ENV.fetch("VAR"), which fails as it would in Ruby. ERB code
// (<% if %>) is an error wherever it is, naming its line; any other <%= %>
// expression is an error in a setting extauth reads, and is ignored with a
// warning elsewhere.
//
// An environment may hold a tenants: mapping from tenant names (see
// ValidTenantName) to settings that override the environment's for that
// tenant, key by key as Consul Democracy merges them: a key the tenant gives
// replaces the environment's value whole (saml_additional_settings
// included), and an empty value clears it. A tenant may so add providers the
// environment lacks, and switches one off by emptying all of its required
// settings (the key and secret, and blog_oauth2_site; saml_sp_entity_id and
// saml_idp_metadata_url; the three oidc settings): its other settings are
// then dropped too. Config.Tenants holds each tenant's resulting
// configuration; its problems name the tenant.
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
// then.
//
// A configuration may be given to New when all its problems are its
// tenants' (Problem.Tenant is set): the application starts, and each broken
// tenant fails its own sign-ins (CodeMisconfigured) from its first request.
// One with a problem of the environment's own settings must not be: New
// does not validate it, and would leave out a provider that lacks a
// required setting without a word.
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
	env, source := chooseEnvironment(o)

	text, tags := renderERB(data)
	var doc yaml.Node
	if err := yaml.Unmarshal(text, &doc); err != nil {
		if bad := tags.firstBad(); bad != nil {
			return nil, nil, fmt.Errorf("parse YAML: %w; line %d has ERB that extauth does not support, which may be why (%w)", err, bad.line, ErrTemplate)
		}
		return nil, nil, fmt.Errorf("parse YAML: %w", err)
	}
	l := &loader{
		lookup: o.lookup,
		// Work proportional to the file is legitimate (10,000 tenants
		// each merging a shared anchor); only expansion beyond it is not.
		budget: maxMergeWork + 8*len(data),
		erb:    tags,
	}
	l.scope = &scope{}
	sel, err := l.selectSettings(&doc, env, source)
	if err != nil {
		return nil, nil, err
	}

	cfg := &Config{}
	if !sel.flat {
		cfg.Environment, cfg.EnvironmentSource = env, source
	}
	var tenants *entry
	fs := cfg.fields()
	read := l.apply(cfg, fs, sel.settings)
	for i, e := range sel.settings {
		if e.key == keyTenants {
			tenants = &sel.settings[i]
		}
	}
	if len(read) == 0 && tenants == nil {
		l.warn(sel.where + " has no extauth settings; no provider is configured")
	}
	for _, f := range fs {
		if f.check != nil && f.key != "saml_sp_entity_id" && plainHTTP(f.get()) {
			l.warn(f.key + " uses plain http outside localhost; use https")
		}
	}
	problems := l.scope.finish(cfg.problems(nil))
	if tenants != nil {
		problems = append(problems, l.tenants(cfg, tenants.val)...)
	}
	l.sweep()
	l.aliasNotes()
	cfg.Warnings, cfg.levels = l.warnings, l.levels
	return cfg, append(problems, l.general...), nil
}

// finish returns the problems of scope s: those found while reading its
// values, then those of validation, less the ones a value that could not be
// read already explains, with the reasons a setting came out empty.
func (s *scope) finish(validation []Problem) []Problem {
	out := s.problems
	for _, p := range validation {
		// A value that could not be read already has its problem; saying
		// it is also missing or malformed would be noise.
		if s.failed(p.Key) {
			continue
		}
		if h := s.hints[p.Key]; len(h) > 0 && errors.Is(p.Err, ErrMissingSetting) {
			p.Reason += " (" + strings.Join(h, "; ") + ")"
		}
		if src, ok := s.pems[p.Key]; ok && !errors.Is(p.Err, ErrMissingSetting) {
			p.Reason += src.note(p.Key)
		}
		out = append(out, p)
	}
	for i := range out {
		out[i].Tenant = s.tenant
		out[i].Reason += s.aliasNote(out[i])
	}
	return out
}

// maxMergeWork bounds the mapping entries visited while resolving aliases and
// << merges, beyond a share proportional to the file: yaml.v3 hands nodes
// over unexpanded, so a small file could otherwise make us walk an
// exponential number of them.
const maxMergeWork = 100_000

// maxMergeDepth bounds nested merges, and so cycles (an anchor merged into
// itself).
const maxMergeDepth = 32

type loader struct {
	lookup func(string) (string, bool)
	budget int
	erb    *erbTags
	// scope is the configuration being read: the environment's, or one
	// tenant's.
	*scope
	// warnings are every warning of the file, tenants' included, with
	// their levels.
	warnings []string
	levels   []slog.Level
	// general are problems that belong to no setting, such as ERB code
	// outside any value extauth reads.
	general []Problem
	// aliases lists, per provider, the other names the file used for its
	// settings, for one note each.
	aliases map[Provider][]string
}

// scope is what the loader knows of one configuration while reading it.
type scope struct {
	tenant string
	// env is the environment's scope, for a tenant's.
	env      *scope
	problems []Problem
	// warnings and levels are a tenant's own.
	warnings []string
	levels   []slog.Level
	// hints explains why a setting came out empty, for its missing-setting
	// problem: unset variables, likely misspellings.
	hints map[string][]string
	// written maps each setting the scope gives to the name it gives it
	// under (twitter_key for microblog_key).
	written map[string]string
	// pems says where each PEM setting the scope gives was written.
	pems map[string]pemSource
}

// pemSource is where the value of a PEM setting (a certificate or a key)
// was written, so that its problems can name the line and, when the value
// is on one line, say how YAML lost its line breaks.
type pemSource struct {
	line int
	// style is the YAML style of the value as written.
	style yaml.Style
	// variable is set when the value came from an environment variable,
	// where YAML never saw its line breaks.
	variable bool
	// folded is set when the block is on one line.
	folded bool
}

// note is what a problem with the setting adds to its reason.
func (p pemSource) note(key string) string {
	name := key[strings.LastIndexByte(key, '.')+1:]
	switch {
	case p.variable && p.folded:
		return fmt.Sprintf(" (line %d: the environment variable holds the block without its line breaks)", p.line)
	case p.variable:
		return fmt.Sprintf(" (line %d, from an environment variable)", p.line)
	case p.folded && p.style == yaml.FoldedStyle:
		return fmt.Sprintf(" (line %d: written with >, which folds the block's lines into one; write %s: | instead)", p.line, name)
	case p.folded:
		return fmt.Sprintf(" (line %d: YAML folds the lines of a value that is not a literal block into one; write %s: | and the block on the lines below it, indented)", p.line, name)
	}
	return fmt.Sprintf(" (line %d)", p.line)
}

func (s *scope) failed(key string) bool {
	return slices.ContainsFunc(s.problems, func(p Problem) bool { return p.Key == key })
}

// aliasNote returns " (twitter_secret in this file)" for a problem with a
// setting of a provider that the file names by its other name, so that the
// operator finds the line; "" otherwise.
func (s *scope) aliasNote(p Problem) string {
	for sc := s; sc != nil; sc = sc.env {
		if as, ok := sc.written[p.Key]; ok {
			if as == p.Key {
				return ""
			}
			return " (" + as + " in this file)"
		}
	}
	for sc := s; sc != nil; sc = sc.env {
		for key, as := range sc.written {
			if as != key && providerOf(key) == p.Provider && p.Provider != "" {
				return " (" + aliasFor(p.Key) + " in this file)"
			}
		}
	}
	return ""
}

func (l *loader) problem(p Provider, key, reason string, err error) {
	l.problems = append(l.problems, Problem{Provider: p, Key: key, Reason: reason, Err: err})
}

func (l *loader) warn(msg string) { l.warnAt(slog.LevelWarn, msg) }

// warnAt records a warning of the current scope: a tenant's is prefixed with
// its name and kept among its own as well.
func (l *loader) warnAt(level slog.Level, msg string) {
	if l.tenant != "" {
		msg = "tenants." + l.tenant + ": " + msg
		l.scope.warnings = append(l.scope.warnings, msg)
		l.scope.levels = append(l.scope.levels, level)
	}
	l.warnings = append(l.warnings, msg)
	l.levels = append(l.levels, level)
}

func (l *loader) hint(key, msg string) {
	if l.hints == nil {
		l.hints = map[string][]string{}
	}
	l.hints[key] = append(l.hints[key], msg)
}

// selection is the mapping that holds the settings and how to name it.
type selection struct {
	settings []entry
	where    string
	flat     bool
}

// selectSettings finds the mapping that holds the settings: the top level of
// a flat file, or the selected environment of a sectioned one.
func (l *loader) selectSettings(doc *yaml.Node, env, source string) (selection, error) {
	flat := selection{where: "the file", flat: true}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return flat, nil
	}
	root, err := deref(doc.Content[0])
	if err != nil {
		return selection{}, err
	}
	if isNull(root) {
		return flat, nil
	}
	if root.Kind != yaml.MappingNode {
		return selection{}, errors.New("the top level must be a mapping of settings or of environments")
	}
	top, dups, err := l.entries(root, 0, true)
	if err != nil {
		return selection{}, err
	}
	if slices.ContainsFunc(top, func(e entry) bool { return isSettingKey(e.key) || e.key == keyTenants }) {
		l.duplicates(dups, "")
		flat.settings = top
		return flat, nil
	}
	if slices.Contains(dups, env) {
		return selection{}, fmt.Errorf("environment %s is given more than once", env)
	}

	var envs, anchors []string
	var selected, shared *yaml.Node
	var targets map[*yaml.Node]bool
	for _, e := range top {
		v, err := deref(e.val)
		if err != nil {
			return selection{}, err
		}
		if v.Kind != yaml.MappingNode && !isNull(v) {
			continue
		}
		if e.key == env {
			selected = v
		}
		switch {
		case e.key == "shared":
			shared = v
		case e.val.Kind == yaml.MappingNode && e.val.Anchor != "":
			if targets == nil {
				targets = aliasTargets(doc)
			}
			if targets[e.val] || !l.holdsSettings(e.val) {
				anchors = append(anchors, e.key)
				continue
			}
			envs = append(envs, e.key)
		default:
			envs = append(envs, e.key)
		}
	}
	if selected == nil {
		return selection{}, unknownEnvironment(env, source, envs, anchors, shared != nil)
	}
	sel := selection{where: "environment " + env}
	own, dups, err := l.sectionEntries(selected)
	if err != nil {
		return selection{}, fmt.Errorf("environment %s: %w", env, err)
	}
	l.duplicates(dups, "")
	if shared == nil || env == "shared" {
		sel.settings = own
		return sel, nil
	}
	base, dups, err := l.sectionEntries(shared)
	if err != nil {
		return selection{}, fmt.Errorf("section shared: %w", err)
	}
	l.duplicates(dups, "")
	sel.settings = overlay(base, own)
	return sel, nil
}

// unknownEnvironment says that env is not a section of the file, why env was
// chosen, and which environments there are, leaving out the sections that
// only hold shared values.
func unknownEnvironment(env, source string, envs, anchors []string, shared bool) error {
	if len(envs) == 0 && len(anchors) == 0 && !shared {
		return fmt.Errorf("%w: %q (%s; the file has neither settings at the top level nor environment sections)",
			ErrUnknownEnvironment, env, why(source))
	}
	msg := fmt.Sprintf("%q (%s); ", env, why(source))
	if len(envs) == 0 {
		msg += "the file has no environment sections"
	} else {
		msg += "the file's environments are " + strings.Join(envs, ", ")
		if near := suggest(env, envs, nil); near != "" {
			msg += "; did you mean " + near + "?"
		}
	}
	var others []string
	if len(anchors) > 0 {
		others = append(others, "anchors of shared values, not environments: "+strings.Join(anchors, ", "))
	}
	if shared {
		others = append(others, "shared applies to every environment")
	}
	if len(others) > 0 {
		msg += " (" + strings.Join(others, "; ") + ")"
	}
	return fmt.Errorf("%w: %s", ErrUnknownEnvironment, msg)
}

// aliasTargets returns the nodes that some alias of doc refers to: the
// anchors that are merged or repeated elsewhere.
func aliasTargets(doc *yaml.Node) map[*yaml.Node]bool {
	out := map[*yaml.Node]bool{}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.AliasNode && n.Alias != nil {
			out[n.Alias] = true
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(doc)
	return out
}

// holdsSettings reports whether mapping n, merges included, gives any
// extauth setting or tenants.
func (l *loader) holdsSettings(n *yaml.Node) bool {
	es, _, err := l.entries(n, 0, true)
	return err == nil && slices.ContainsFunc(es, func(e entry) bool { return isSettingKey(e.key) || e.key == keyTenants })
}

func (l *loader) sectionEntries(n *yaml.Node) ([]entry, []string, error) {
	if isNull(n) {
		return nil, nil, nil
	}
	return l.entries(n, 0, true)
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
		if prefix == "" && !isSettingKey(canonicalKey(k)) && k != keyTenants {
			continue
		}
		key := prefix + canonicalKey(k)
		l.problem(providerOf(key), key, "is given more than once", ErrInvalidSetting)
	}
}

// entry is one key of a mapping with merges resolved.
type entry struct {
	// key is the key, or for a setting given under a provider's other name
	// the setting it stands for (microblog_key for twitter_key).
	key string
	// as is the key as written.
	as  string
	val *yaml.Node
	// other is the same setting given in the same mapping under its other
	// name as well, for the loader to check that the two agree.
	other *entry
}

// entries lists the keys of mapping n in file order with its << merges
// resolved: merged keys appear where the merge is, keys written in n win over
// merged ones, and earlier merges win over later ones, as yaml.v3 decodes
// them. A key written twice keeps its last value and is returned in dups.
// With settings, the keys are settings' (see entry.key), so that an alias
// and its setting override each other as one key does. Keys that are not
// scalars cannot be settings and are left out.
func (l *loader) entries(n *yaml.Node, depth int, settings bool) (out []entry, dups []string, err error) {
	if depth > maxMergeDepth {
		return nil, nil, errors.New("<< merges nest too deeply (is an anchor merged into itself?)")
	}
	l.budget -= len(n.Content)
	if l.budget < 0 {
		return nil, nil, errors.New("too many aliases and << merges")
	}
	name := func(kn *yaml.Node) (key, as string, ok bool) {
		as, ok = l.keyOf(kn)
		if !ok || !settings {
			return as, as, ok
		}
		return canonicalKey(as), as, true
	}
	explicit := map[string]bool{}
	written := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, as, ok := name(n.Content[i])
		if !ok || isMergeKey(n.Content[i]) {
			continue
		}
		if written[as] {
			dups = append(dups, as)
		}
		written[as] = true
		explicit[k] = true
	}
	index := map[string]int{}
	add := func(e entry, fromMerge bool) {
		i, seen := index[e.key]
		switch {
		case seen && fromMerge:
		case seen:
			if out[i].as != e.as {
				prev := out[i]
				e.other = &prev
			}
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
			if k, as, ok := name(kn); ok {
				add(entry{key: k, as: as, val: vn}, false)
			}
			continue
		}
		sources, err := mergeSources(vn)
		if err != nil {
			return nil, nil, err
		}
		for _, src := range sources {
			merged, _, err := l.entries(src, depth+1, settings)
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

func (l *loader) keyOf(n *yaml.Node) (string, bool) {
	n, err := deref(n)
	if err != nil || n.Kind != yaml.ScalarNode {
		return "", false
	}
	return l.expandKey(n.Value), true
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

// apply reads settings onto cfg, recording problems and warnings on l: the
// environment's onto an empty Config, a tenant's onto a copy of the
// environment's. It returns the settings it read, tenants aside.
// fs are cfg's fields.
func (l *loader) apply(cfg *Config, fs []field, settings []entry) (read []string) {
	for _, e := range settings {
		switch {
		case e.key == keyTenants:
			if l.tenant != "" {
				l.warn("tenants cannot be nested; this tenants: is ignored")
			}
			continue
		case e.key == keyAdditional:
			cfg.SAML.Additional = l.additional(e.val)
			read = append(read, e.key)
			continue
		case e.key == keyOIDCAdditional:
			cfg.OIDC.Additional = l.oidcAdditional(e.val)
			read = append(read, e.key)
			continue
		}
		i, ok := settingIndex[e.key]
		if !ok {
			l.suggestSetting(e.as)
			continue
		}
		f := fs[i]
		if v, ok := l.read(f, e); ok {
			f.set(v)
		}
		read = append(read, f.key)
	}
	return read
}

// read returns the value of setting f from e, and notes the name it was
// given under. A setting given under both its names must have one value.
func (l *loader) read(f field, e entry) (string, bool) {
	l.noteName(f.key, e.as)
	v, ok := l.scalar(f.provider, f.key, e.val)
	if e.other == nil {
		return v, ok
	}
	l.noteName(f.key, e.other.as)
	l.written[f.key] = f.key
	w, ok2 := l.scalar(f.provider, f.key, e.other.val)
	switch {
	case !ok || !ok2:
		return "", false
	case v == "":
		return w, true
	case w != "" && w != v:
		other := e.as
		if other == f.key {
			other = e.other.as
		}
		l.problem(f.provider, f.key, "and "+other+" are both given, with different values; keep one", ErrInvalidSetting)
		return "", false
	}
	return v, true
}

// noteName records that setting key was given as name, for the note on
// aliases and for messages.
func (l *loader) noteName(key, name string) {
	if l.written == nil {
		l.written = map[string]string{}
	}
	l.written[key] = name
	if name == key {
		return
	}
	if l.aliases == nil {
		l.aliases = map[Provider][]string{}
	}
	p := providerOf(key)
	if !slices.Contains(l.aliases[p], name) {
		l.aliases[p] = append(l.aliases[p], name)
	}
}

// aliasNotes adds one note per provider whose settings the file gave under
// the provider's real name.
func (l *loader) aliasNotes() {
	for _, p := range BuiltinProviders() {
		names := l.aliases[p]
		if len(names) == 0 {
			continue
		}
		slices.SortFunc(names, func(a, b string) int {
			return settingIndex[canonicalKey(a)] - settingIndex[canonicalKey(b)]
		})
		canon := make([]string, len(names))
		for i, n := range names {
			canon[i] = canonicalKey(n)
		}
		l.warnAt(slog.LevelInfo, fmt.Sprintf("%s read as %s (%s is extauth's name for %s)",
			strings.Join(names, ", "), strings.Join(canon, ", "), p, providerAliases[p]))
	}
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

// mapping returns the entries of a nested mapping setting of provider p.
// Null, and a string that is empty once its variables are substituted,
// read as an empty mapping.
func (l *loader) mapping(p Provider, key string, n *yaml.Node) []entry {
	n, err := deref(n)
	if err != nil {
		l.problem(p, key, "is an alias that does not resolve", ErrInvalidSetting)
		return nil
	}
	if isNull(n) {
		return nil
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		v, ok := l.expand(p, key, n.Value)
		if !ok || v == "" {
			return nil
		}
	}
	if n.Kind != yaml.MappingNode {
		l.problem(p, key, "must be a mapping", ErrInvalidSetting)
		return nil
	}
	entries, dups, err := l.entries(n, 0, false)
	if err != nil {
		l.problem(p, key, "cannot be read: "+err.Error(), ErrInvalidSetting)
		return nil
	}
	l.duplicates(dups, key+".")
	return entries
}

// additional reads saml_additional_settings.
func (l *loader) additional(n *yaml.Node) SAMLAdditionalSettings {
	var s SAMLAdditionalSettings
	entries := l.mapping(SAML, keyAdditional, n)
	for _, e := range entries {
		key := keyAdditional + "." + e.key
		switch e.key {
		case "RelayState":
			s.RelayState, _ = l.scalar(SAML, key, e.val)
		case "authn_context":
			s.AuthnContext, _ = l.scalar(SAML, key, e.val)
		case "certificate", "certificate_new", "certificate_old", "idp_metadata_certificate":
			dst := map[string]*string{"certificate": &s.Certificate, "certificate_new": &s.CertificateNew,
				"certificate_old": &s.CertificateOld, "idp_metadata_certificate": &s.IdPMetadataCertificate}[e.key]
			*dst, _ = l.scalar(SAML, key, e.val)
			l.notePEM(key, e.val, *dst)
		case "private_key", "private_key_new", "private_key_old":
			v, _ := l.scalar(SAML, key, e.val)
			*map[string]*Secret{"private_key": &s.PrivateKey, "private_key_new": &s.PrivateKeyNew, "private_key_old": &s.PrivateKeyOld}[e.key] = NewSecret(v)
			l.notePEM(key, e.val, v)
		case "metadata_valid_for":
			s.MetadataValidFor = l.duration(key, e.val, "must be between 1 hour and 3650 days")
		case "metadata_cache_duration":
			s.MetadataCacheDuration = l.duration(key, e.val, "must be between 1 minute and 3650 days")
		case "security":
			s.Security = l.security(e.val)
		case "federation":
			s.Federation = l.federation(e.val)
		case "sp_metadata":
			s.SPMetadata = l.spMetadata(e.val)
		case "response_binding":
			s.ResponseBinding, _ = l.scalar(SAML, key, e.val)
		case "artifact":
			s.Artifact = l.artifact(e.val)
		case "request_options":
			s.RequestOptions = l.words(SAML, key, e.val)
		case "assurance_levels":
			s.AssuranceLevels = l.assuranceLevels(SAML, key, e.val)
		default:
			known := []string{"RelayState", "authn_context", "certificate", "private_key", "certificate_new", "private_key_new",
				"certificate_old", "private_key_old", "idp_metadata_certificate", "metadata_valid_for", "metadata_cache_duration", "security",
				"request_options", "assurance_levels", "federation", "sp_metadata", "response_binding", "artifact"}
			if near := suggest(e.key, known, nil); near != "" {
				l.warn(fmt.Sprintf("%s is sent to the IdP as a custom entry; did you mean %s.%s?", key, keyAdditional, near))
			}
			v, ok := l.scalar(SAML, key, e.val)
			if ok {
				s.Custom = append(s.Custom, Param{Name: e.key, Value: v})
			}
		}
	}
	return s
}

// notePEM records where the PEM setting key, read as v from n, was written.
func (l *loader) notePEM(key string, n *yaml.Node, v string) {
	n, err := deref(n)
	if err != nil || v == "" {
		return
	}
	if l.pems == nil {
		l.pems = map[string]pemSource{}
	}
	l.pems[key] = pemSource{
		line:     n.Line,
		style:    n.Style,
		variable: v != n.Value,
		folded:   strings.Contains(v, "-----BEGIN ") && !strings.Contains(strings.TrimSpace(v), "\n") && !strings.Contains(v, `\n`),
	}
}

// security reads saml_additional_settings.security.
func (l *loader) security(n *yaml.Node) SAMLSecurity {
	const key = keyAdditional + ".security"
	var s SAMLSecurity
	entries := l.mapping(SAML, key, n)
	fields := map[string]*bool{
		"logout_requests_signed": &s.LogoutRequestsSigned,
		"refuse_cbc_encryption":  &s.RefuseCBCEncryption,
		"allow_sha1":             &s.AllowSHA1,
		"name_id_encrypted":      &s.NameIDEncrypted,

		"enforce_idp_certificate_dates": &s.EnforceIdPCertificateDates,
	}
	for _, e := range entries {
		f, ok := fields[e.key]
		if !ok {
			l.unsupported(key+"."+e.key, e.key, slices.Sorted(maps.Keys(fields)))
			continue
		}
		*f = l.boolean(SAML, key+"."+e.key, e.val)
	}
	return s
}

// federationEntries are the entries of saml_additional_settings.federation.
var federationEntries = []string{"metadata_url", "mdq_url", "mdq_sha1", "signing_certificate", "backing_file", "max_validity",
	"entity_ids", "registration_authorities", "entity_categories", "discovery_url"}

// federation reads saml_additional_settings.federation.
func (l *loader) federation(n *yaml.Node) SAMLFederation {
	const key = keyAdditional + ".federation"
	var f SAMLFederation
	for _, e := range l.mapping(SAML, key, n) {
		k := key + "." + e.key
		switch e.key {
		case "metadata_url":
			f.MetadataURL, _ = l.scalar(SAML, k, e.val)
		case "mdq_url":
			f.MDQURL, _ = l.scalar(SAML, k, e.val)
		case "mdq_sha1":
			f.MDQSHA1 = l.boolean(SAML, k, e.val)
		case "signing_certificate":
			f.SigningCertificate, _ = l.scalar(SAML, k, e.val)
			l.notePEM(k, e.val, f.SigningCertificate)
		case "backing_file":
			f.BackingFile, _ = l.scalar(SAML, k, e.val)
		case "max_validity":
			f.MaxValidity = l.duration(k, e.val, "must be between 1 hour and 3650 days")
		case "entity_ids":
			f.EntityIDs = l.list(SAML, k, e.val)
		case "registration_authorities":
			f.RegistrationAuthorities = l.list(SAML, k, e.val)
		case "entity_categories":
			f.EntityCategories = l.list(SAML, k, e.val)
		case "discovery_url":
			f.DiscoveryURL, _ = l.scalar(SAML, k, e.val)
		default:
			l.unsupported(k, e.key, federationEntries)
		}
	}
	return f
}

// spMetadataEntries are the entries of saml_additional_settings.sp_metadata.
var spMetadataEntries = []string{"display_name", "description", "logo", "information_url", "privacy_statement_url",
	"organization", "contacts", "entity_categories", "assurance_certifications", "requested_attributes"}

// spMetadata reads saml_additional_settings.sp_metadata.
func (l *loader) spMetadata(n *yaml.Node) SAMLSPMetadata {
	const key = keyAdditional + ".sp_metadata"
	var m SAMLSPMetadata
	for _, e := range l.mapping(SAML, key, n) {
		k := key + "." + e.key
		switch e.key {
		case "display_name":
			m.DisplayName = l.langMap(k, e.val)
		case "description":
			m.Description = l.langMap(k, e.val)
		case "logo":
			for _, f := range l.mapping(SAML, k, e.val) {
				switch f.key {
				case "url":
					m.Logo, _ = l.scalar(SAML, k+".url", f.val)
				case "width":
					m.LogoWidth = l.integer(k+".width", f.val)
				case "height":
					m.LogoHeight = l.integer(k+".height", f.val)
				default:
					l.warn(fmt.Sprintf("%s.%s is not supported and is ignored", k, f.key))
				}
			}
		case "information_url":
			m.InformationURL, _ = l.scalar(SAML, k, e.val)
		case "privacy_statement_url":
			m.PrivacyStatementURL, _ = l.scalar(SAML, k, e.val)
		case "organization":
			for _, f := range l.mapping(SAML, k, e.val) {
				v, _ := l.scalar(SAML, k+"."+f.key, f.val)
				switch f.key {
				case "name":
					m.OrganizationName = v
				case "display_name":
					m.OrganizationDisplayName = v
				case "url":
					m.OrganizationURL = v
				default:
					l.warn(fmt.Sprintf("%s.%s is not supported and is ignored", k, f.key))
				}
			}
		case "contacts":
			for i, item := range l.items(k, e.val) {
				var c SAMLContact
				for _, f := range l.mapping(SAML, fmt.Sprintf("%s[%d]", k, i), item) {
					v, _ := l.scalar(SAML, fmt.Sprintf("%s[%d].%s", k, i, f.key), f.val)
					switch f.key {
					case "type":
						c.Type = v
					case "name":
						c.Name = v
					case "email":
						c.Email = v
					default:
						l.warn(fmt.Sprintf("%s[%d].%s is not supported and is ignored", k, i, f.key))
					}
				}
				m.Contacts = append(m.Contacts, c)
			}
		case "entity_categories":
			m.EntityCategories = l.list(SAML, k, e.val)
		case "assurance_certifications":
			m.AssuranceCertifications = l.list(SAML, k, e.val)
		case "requested_attributes":
			for i, item := range l.items(k, e.val) {
				var a SAMLRequestedAttribute
				for _, f := range l.mapping(SAML, fmt.Sprintf("%s[%d]", k, i), item) {
					fk := fmt.Sprintf("%s[%d].%s", k, i, f.key)
					switch f.key {
					case "name":
						a.Name, _ = l.scalar(SAML, fk, f.val)
					case "friendly_name":
						a.FriendlyName, _ = l.scalar(SAML, fk, f.val)
					case "required":
						a.Required = l.boolean(SAML, fk, f.val)
					default:
						l.warn(fmt.Sprintf("%s is not supported and is ignored", fk))
					}
				}
				m.RequestedAttributes = append(m.RequestedAttributes, a)
			}
		default:
			l.unsupported(k, e.key, spMetadataEntries)
		}
	}
	return m
}

// langMap reads texts by language: a mapping of xml:lang to text, or one
// value, which is English.
func (l *loader) langMap(key string, n *yaml.Node) map[string]string {
	if d, err := deref(n); err == nil && d.Kind == yaml.MappingNode {
		out := map[string]string{}
		for _, e := range l.mapping(SAML, key, d) {
			if v, ok := l.scalar(SAML, key+"."+e.key, e.val); ok && v != "" {
				out[e.key] = v
			}
		}
		return out
	}
	if v, ok := l.scalar(SAML, key, n); ok && v != "" {
		return map[string]string{"en": v}
	}
	return nil
}

// items returns the entries of a list setting.
func (l *loader) items(key string, n *yaml.Node) []*yaml.Node {
	n, err := deref(n)
	if err != nil || n.Kind != yaml.SequenceNode {
		if err != nil || !isNull(n) {
			l.problem(SAML, key, "must be a list", ErrInvalidSetting)
		}
		return nil
	}
	return n.Content
}

// integer reads a whole number; empty is zero.
func (l *loader) integer(key string, n *yaml.Node) int {
	v, ok := l.scalar(SAML, key, n)
	if !ok || v == "" {
		return 0
	}
	i, err := strconv.Atoi(v)
	if err != nil || i < 0 {
		l.problem(SAML, key, "must be a whole number", ErrInvalidSetting)
		return 0
	}
	return i
}

// list reads a list of strings: a YAML sequence, or one value for a list
// of one. Empty entries are left out.
func (l *loader) list(p Provider, key string, n *yaml.Node) []string {
	n, err := deref(n)
	if err != nil {
		l.problem(p, key, "is an alias that does not resolve", ErrInvalidSetting)
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		if v, ok := l.scalar(p, key, n); ok && v != "" {
			return []string{v}
		}
		return nil
	}
	var out []string
	for _, item := range n.Content {
		if v, ok := l.scalar(p, key, item); ok && v != "" {
			out = append(out, v)
		}
	}
	return out
}

// duration reads a duration setting: an xs:duration as SAML metadata
// writes them (P30D, PT12H) or a Go duration (720h). Empty is zero, which
// leaves the setting unset; a duration of zero (P0D, 0s) is out of range,
// which outOfRange says: written, it asks for something, and unset is
// not it.
func (l *loader) duration(key string, n *yaml.Node, outOfRange string) time.Duration {
	v, ok := l.scalar(SAML, key, n)
	if !ok || v == "" {
		return 0
	}
	d, err := parseDuration(v)
	if err != nil {
		l.problem(SAML, key, "must be a duration such as P30D, PT12H or 720h", ErrInvalidSetting)
		return 0
	}
	if d == 0 {
		l.problem(SAML, key, outOfRange, ErrInvalidSetting)
	}
	return d
}

// parseDuration reads an xs:duration, with crewjam's reading of years and
// months (365 and 30 days), or a Go duration. Both refuse a value that
// does not fit in a time.Duration (crewjam's since v0.6).
func parseDuration(v string) (time.Duration, error) {
	if !strings.HasPrefix(v, "P") && !strings.HasPrefix(v, "-P") {
		return time.ParseDuration(v)
	}
	var d saml.Duration
	if err := d.UnmarshalText([]byte(v)); err != nil {
		return 0, err
	}
	return time.Duration(d), nil
}

func (l *loader) boolean(p Provider, key string, n *yaml.Node) bool {
	v, ok := l.scalar(p, key, n)
	if !ok {
		return false
	}
	switch strings.ToLower(v) {
	case "true":
		return true
	case "false", "":
		return false
	}
	l.problem(p, key, "must be true or false", ErrInvalidSetting)
	return false
}
