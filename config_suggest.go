package extauth

import (
	"maps"
	"slices"
	"strings"

	"github.com/extauth/extauth/internal/spelling"
)

// settingKeys are the keys of the secrets file that extauth reads, in the
// order of the specification, and settingIndex their positions, which are
// also those of Config.fields. Both are fixed when the package loads.
var settingKeys, settingIndex = func() ([]string, map[string]int) {
	var keys []string
	index := map[string]int{}
	for i, f := range (&Config{}).fields() {
		keys = append(keys, f.key)
		index[f.key] = i
		switch f.key {
		case "saml_idp_sso_service_url":
			keys = append(keys, keyAdditional)
		case "oidc_issuer":
			keys = append(keys, keyOIDCAdditional)
		}
	}
	return keys, index
}()

func isSettingKey(k string) bool { return slices.Contains(settingKeys, k) }

// providerOf returns the provider whose prefix key carries, or "".
func providerOf(key string) Provider {
	for _, p := range BuiltinProviders() {
		if strings.HasPrefix(key, string(p)+"_") {
			return p
		}
	}
	return ""
}

// providerAliases are the providers' real names, under which files written
// for other software, Consul Democracy's among them, give their settings
// (twitter_key for microblog_key).
var providerAliases = map[Provider]string{
	Microblog:    "twitter",
	Socialnet:    "facebook",
	SearchOAuth2: "google_oauth2",
	BlogOAuth2:   "wordpress_oauth2",
}

// settingAliases maps each setting's other name to the setting, and
// aliasKeys lists the other names in the order of the settings.
var settingAliases, aliasKeys = func() (map[string]string, []string) {
	out := map[string]string{}
	var keys []string
	for _, k := range settingKeys {
		p := providerOf(k)
		if name, ok := providerAliases[p]; ok {
			alias := name + strings.TrimPrefix(k, string(p))
			out[alias] = k
			keys = append(keys, alias)
		}
	}
	return out, keys
}()

// canonicalKey returns the setting key stands for: itself, or for another
// name of a setting the setting.
func canonicalKey(key string) string {
	if k, ok := settingAliases[key]; ok {
		return k
	}
	return key
}

// aliasFor returns the other name of setting key, or key when it has none.
func aliasFor(key string) string {
	p := providerOf(key)
	if name, ok := providerAliases[p]; ok {
		return name + strings.TrimPrefix(key, string(p))
	}
	return key
}

// suggestSetting warns about an unknown key that looks meant for extauth: a
// near-miss of one of our keys or of their other names (the suggestion is
// the name the file is closest to: twiter_key, did you mean twitter_key?), or
// a key with one of our provider prefixes. Other keys of the host's file,
// like secret_key_base, are left alone.
func (l *loader) suggestSetting(name string) {
	if near := suggest(name, slices.Concat(settingKeys, aliasKeys), nil); near != "" {
		l.warn(name + " is not an extauth setting and is ignored; did you mean " + near + "?")
		l.hint(canonicalKey(near), "the file has "+name)
		return
	}
	if providerOf(name) != "" {
		l.warn(name + " is not an extauth setting and is ignored")
	}
}

// maxSuggestDistance is the edit distance under which a key is taken for a
// misspelling. Our keys are at least 11 characters long and differ from each
// other by more, so two edits catch typos without matching unrelated keys.
const maxSuggestDistance = 2

// suggest returns the key of keys, or the target of an alias, that name is a
// likely misspelling of, or "". Case is ignored.
func suggest(name string, keys []string, aliases map[string]string) string {
	if len(name) < 6 {
		return ""
	}
	lower := strings.ToLower(name)
	best, bestD := "", maxSuggestDistance+1
	try := func(cand, target string) {
		if d := spelling.Distance(lower, strings.ToLower(cand), bestD); d < bestD {
			best, bestD = target, d
		}
	}
	for _, k := range keys {
		try(k, k)
	}
	for _, a := range slices.Sorted(maps.Keys(aliases)) {
		try(a, aliases[a])
	}
	return best
}

// unsupported warns that the entry at key, named name in its mapping, is
// not one of entries and is ignored, suggesting the entry it is closest to.
func (l *loader) unsupported(key, name string, entries []string) {
	hint := ""
	if near := suggest(name, entries, nil); near != "" {
		hint = "; did you mean " + near + "?"
	}
	l.warn(key + " is not supported and is ignored" + hint)
}
