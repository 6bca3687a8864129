package samlsp

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/language"
	"golang.org/x/text/runes"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"

	"github.com/extauth/extauth/providers"
)

var _ providers.IdPChooser = (*SP)(nil)

// ChoosesIdP reports whether users choose their IdP: in a federation.
func (sp *SP) ChoosesIdP() bool { return sp.fed != nil }

// Bounds of the discovery page.
const (
	// maxDiscoveryResults is how many IdPs a page lists; a search narrows
	// the rest down. A federation small enough is listed whole.
	maxDiscoveryResults = 50
	maxQueryRunes       = 100
	// maxLogoDataURL bounds a data: logo the page inlines.
	maxLogoDataURL = 64 << 10
)

// Discover answers a sign-in start that names no IdP with the list of IdPs
// to choose from, which d.Render shows: names in the browser's language
// where the metadata has them (Accept-Language), logos, a search by name
// in any language (accents and case aside, at most 100 characters), and
// the browser's last choice first. IdPs the host's restrictions leave
// out, and those of the hide-from-discovery entity category, are not
// listed (a link that names a hidden one still starts its sign-in). A
// logo is offered only from an https URL or as a data: image.
//
// With FederationConfig.DiscoveryURL, the browser goes to that discovery
// service instead (the SAML IdP Discovery Protocol: entityID, return,
// returnIDParam=idp), which sends it back to the authorize route with its
// choice. When it comes back without one (d.Return is then nil), the page
// lists the IdPs of the aggregate or of entity_ids instead; with neither,
// the answer is an error, never the service again, which a passive
// service would answer the same way in a loop.
func (sp *SP) Discover(w http.ResponseWriter, r *http.Request, d providers.Discovery) error {
	if ds := sp.cfg.Federation.DiscoveryURL; ds != "" && d.Return != nil {
		q := url.Values{"entityID": {sp.cfg.SPEntityID}, "return": {d.Return()}, "returnIDParam": {"idp"}}
		sep := "?"
		if strings.Contains(ds, "?") {
			sep = "&"
		}
		if d.JSON {
			body, err := json.Marshal(map[string]string{"redirect_to": ds + sep + q.Encode()})
			if err != nil {
				return err
			}
			w.Header().Set("Content-Type", "application/json")
			w.Write(append(body, '\n'))
			return nil
		}
		w.Header().Set("Location", ds+sep+q.Encode())
		w.WriteHeader(http.StatusSeeOther)
		return nil
	}
	if sp.cfg.Federation.DiscoveryURL != "" && sp.fed.mdq != nil && len(sp.cfg.Federation.EntityIDs) == 0 {
		// Back from the discovery service without a choice, and no list
		// of our own to offer instead.
		return invalid("the discovery service did not say which identity provider to use",
			errors.New("the external discovery service (federation.discovery_url) sent the browser back without an idp, "+
				"and with an MDQ server and no federation.entity_ids there is no list of IdPs to offer instead"))
	}
	refs, perr := sp.discoverable(r.Context())
	if perr != nil {
		return perr
	}
	q := strings.TrimSpace(r.Form.Get("q"))
	if utf8.RuneCountInString(q) > maxQueryRunes {
		q = string([]rune(q)[:maxQueryRunes])
	}
	prefs, _, _ := language.ParseAcceptLanguage(r.Header.Get("Accept-Language"))
	folded := fold(q)
	list := providers.DiscoveryList{Query: q}
	for _, ref := range refs {
		agg, e := ref.agg, ref.e
		if !sp.fed.allows(e) {
			continue
		}
		if d.LastChoice != "" && e.entityID == d.LastChoice {
			v := showIdP(agg, e, prefs)
			list.Last = &v
		}
		if slices.Contains(e.categories, CategoryHideFromDiscovery) {
			continue
		}
		list.Listed++
		if q != "" && !matches(e, folded) {
			continue
		}
		if len(list.Choices) < maxDiscoveryResults+1 {
			list.Choices = append(list.Choices, showIdP(agg, e, prefs))
		}
	}
	if list.More = len(list.Choices) > maxDiscoveryResults; list.More {
		list.Choices = list.Choices[:maxDiscoveryResults]
	}
	if q == "" && list.Listed > maxDiscoveryResults {
		// Too many to list: the page asks for a name instead.
		list.Choices = nil
	}
	slices.SortStableFunc(list.Choices, func(a, b providers.DiscoveryChoice) int {
		return cmp.Compare(fold(a.Name), fold(b.Name))
	})
	return d.Render(list)
}

// IdPName is the name of the federation's IdP entityID in the language
// lang where its metadata has one, "" for an IdP the federation does not
// know or lets no user sign in with.
func (sp *SP) IdPName(ctx context.Context, entityID, lang string) string {
	if sp.fed == nil {
		return ""
	}
	ref, ok := sp.fedIdP(ctx, entityID)
	if !ok || !sp.fed.allows(ref.e) {
		return ""
	}
	prefs, _, _ := language.ParseAcceptLanguage(lang)
	if n, ok := pickName(ref.e.names, prefs); ok {
		return n.text
	}
	return ""
}

// fedIdP returns the federation's IdP entityID: from the aggregate, or
// from the MDQ server (its cache first).
func (sp *SP) fedIdP(ctx context.Context, entityID string) (idpRef, bool) {
	if sp.fed.mdq != nil {
		e, perr := sp.fed.mdq.lookup(ctx, entityID)
		if perr != nil {
			return idpRef{}, false
		}
		return idpRef{e.agg, e.e}, true
	}
	agg, perr := sp.aggregate(ctx)
	if perr != nil || agg.byID[entityID] == nil {
		return idpRef{}, false
	}
	return idpRef{agg, agg.byID[entityID]}, true
}

// idpRef is an IdP of the index and the document it lies in.
type idpRef struct {
	agg *aggregate
	e   *fedIdP
}

// discoverable returns the IdPs a discovery page may list: the
// aggregate's, or with an MDQ server those of entity_ids that it knows.
func (sp *SP) discoverable(ctx context.Context) ([]idpRef, *providers.Error) {
	var refs []idpRef
	if sp.fed.mdq != nil {
		for _, id := range sp.cfg.Federation.EntityIDs {
			if e, perr := sp.fed.mdq.lookup(ctx, id); perr == nil && sp.usable(e.e) == nil {
				refs = append(refs, idpRef{e.agg, e.e})
			}
		}
		return refs, nil
	}
	agg, perr := sp.aggregate(ctx)
	if perr != nil {
		return nil, perr
	}
	for _, e := range agg.idps {
		if sp.usable(e) == nil {
			refs = append(refs, idpRef{agg, e})
		}
	}
	return refs, nil
}

// showIdP is what the page shows of e for the languages prefs.
func showIdP(agg *aggregate, e *fedIdP, prefs []language.Tag) providers.DiscoveryChoice {
	v := providers.DiscoveryChoice{EntityID: e.entityID}
	if n, ok := pickName(e.names, prefs); ok {
		v.Name, v.Lang = n.text, n.lang
	} else {
		v.Name = e.entityID
	}
	for _, l := range orderByLang(e.logos, prefs) {
		if u, ok := logoURL(agg.buf[l.start:l.end]); ok {
			v.Logo, v.LogoWidth, v.LogoHeight = u, l.width, l.height
			break
		}
	}
	return v
}

// pickName chooses among an IdP's names the one in the most preferred
// language the metadata has, else in English, else the first: in each
// language its mdui:DisplayName before its OrganizationDisplayName, so
// that an IdP named in Finnish and Swedish by mdui and in English by its
// organisation shows the English name to a browser that prefers English.
func pickName(names []langText, prefs []language.Tag) (langText, bool) {
	if len(names) == 0 {
		return langText{}, false
	}
	return orderNames(names, prefs)[0], true
}

func orderNames(names []langText, prefs []language.Tag) []langText {
	out := slices.Clone(names)
	rank := langRank(prefs)
	slices.SortStableFunc(out, func(a, b langText) int {
		if r := cmp.Compare(rank(a.lang), rank(b.lang)); r != 0 {
			return r
		}
		switch {
		case a.org == b.org:
			return 0
		case a.org:
			return 1
		}
		return -1
	})
	return out
}

func orderByLang(logos []logoRef, prefs []language.Tag) []logoRef {
	out := slices.Clone(logos)
	rank := langRank(prefs)
	slices.SortStableFunc(out, func(a, b logoRef) int {
		// A logo without a language suits every one.
		ra, rb := rank(a.lang), rank(b.lang)
		if a.lang == "" {
			ra = 0
		}
		if b.lang == "" {
			rb = 0
		}
		return cmp.Compare(ra, rb)
	})
	return out
}

// langRank ranks an xml:lang by the browser's preferences: an exact match
// of a preferred tag, then of its base language, in the order of
// preference; English after them; anything else last.
func langRank(prefs []language.Tag) func(string) int {
	return func(lang string) int {
		lang = strings.ToLower(lang)
		base, _, _ := strings.Cut(lang, "-")
		for i, p := range prefs {
			ps := strings.ToLower(p.String())
			pb, _, _ := strings.Cut(ps, "-")
			switch {
			case lang == ps:
				return 2 * i
			case base == pb:
				return 2*i + 1
			}
		}
		if base == "en" {
			return 2 * len(prefs)
		}
		return 2*len(prefs) + 1
	}
}

// matches reports whether any name of e contains the folded query.
func matches(e *fedIdP, q string) bool {
	for _, n := range e.names {
		if strings.Contains(fold(n.text), q) {
			return true
		}
	}
	return strings.Contains(strings.ToLower(e.entityID), q)
}

// fold lowercases s and strips its accents, for a search that finds
// "Universität" by "universitat".
func fold(s string) string {
	// A search runs it on every name of the aggregate: most are ASCII,
	// which has no accents to strip, and a transform chain is costly.
	if isASCII(s) {
		return strings.ToLower(s)
	}
	t := transform.Chain(norm.NFD, runes.Remove(runes.In(unicode.Mn)), norm.NFC)
	out, _, err := transform.String(t, s)
	if err != nil {
		out = s
	}
	return strings.ToLower(out)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// logoURL reads an mdui:Logo's content (raw XML text) and returns it when
// it is safe to show: an https URL, or a data: URL of a raster or SVG
// image (an img element runs no script of an SVG), of bounded size. A logo
// is the metadata's to choose, and whoever registered the IdP chose it:
// anything else (javascript:, http:, a data: page) is left out.
func logoURL(raw []byte) (string, bool) {
	if len(raw) > maxLogoDataURL*2 {
		return "", false
	}
	var b strings.Builder
	d := newDecoder(append(append([]byte("<x>"), raw...), "</x>"...))
	for {
		tok, err := d.RawToken()
		if err != nil {
			break
		}
		if cd, ok := tok.(xml.CharData); ok {
			b.Write(cd)
		}
	}
	s := strings.TrimSpace(b.String())
	if s == "" || len(s) > maxLogoDataURL || strings.ContainsFunc(s, unicode.IsSpace) {
		return "", false
	}
	if strings.HasPrefix(s, "data:") {
		meta, data, ok := strings.Cut(s[len("data:"):], ",")
		if !ok || data == "" {
			return "", false
		}
		mt, enc, _ := strings.Cut(meta, ";")
		switch strings.ToLower(mt) {
		case "image/png", "image/jpeg", "image/gif", "image/webp", "image/svg+xml":
		default:
			return "", false
		}
		if enc != "" && enc != "base64" {
			return "", false
		}
		if enc == "base64" {
			if _, err := base64.StdEncoding.DecodeString(data); err != nil {
				return "", false
			}
		}
		return s, true
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
		return "", false
	}
	return u.String(), true
}
