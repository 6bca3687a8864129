package samlsp

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
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

// discoveryIdP is one IdP as the page shows it.
type discoveryIdP struct {
	EntityID string       `json:"entity_id"`
	Name     string       `json:"name"`
	Lang     string       `json:"-"`
	Logo     template.URL `json:"logo,omitempty"`
	LogoW    int          `json:"-"`
	LogoH    int          `json:"-"`
}

type discoveryPage struct {
	Action, ReturnTo, Query string
	Last                    *discoveryIdP
	Results                 []discoveryIdP
	Status                  string
}

// Discover answers a sign-in start that names no IdP: a page to choose one,
// in the browser's language where the metadata has it (Accept-Language),
// its logos, a search that works without JavaScript (a GET form with q, by
// name in any language, accents and case aside), and the browser's last
// choice first. IdPs the host's restrictions leave out, and those of the
// hide-from-discovery entity category, are not listed (a link that names a
// hidden one still starts its sign-in). Everything from the metadata is
// escaped, and a logo is shown only from an https URL or a data: image,
// under a Content-Security-Policy that lets the page load images and
// nothing else.
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
	page := discoveryPage{Action: d.Action, ReturnTo: d.ReturnTo, Query: q}
	listed := 0
	for _, ref := range refs {
		agg, e := ref.agg, ref.e
		if !sp.fed.allows(e) {
			continue
		}
		if d.LastChoice != "" && e.entityID == d.LastChoice {
			v := showIdP(agg, e, prefs)
			page.Last = &v
		}
		if slices.Contains(e.categories, CategoryHideFromDiscovery) {
			continue
		}
		listed++
		if q != "" && !matches(e, folded) {
			continue
		}
		if len(page.Results) < maxDiscoveryResults+1 {
			page.Results = append(page.Results, showIdP(agg, e, prefs))
		}
	}
	more := len(page.Results) > maxDiscoveryResults
	switch {
	case q == "" && listed > maxDiscoveryResults:
		page.Results = nil
		page.Status = "Type the name of your organisation to find it."
	case len(page.Results) == 0 && q != "":
		page.Status = "No organisation matches \u201c" + q + "\u201d."
	case len(page.Results) == 0:
		page.Status = "No organisation is available."
	case more:
		page.Results = page.Results[:maxDiscoveryResults]
		page.Status = "More than " + strconv.Itoa(maxDiscoveryResults) + " organisations match: type more of the name."
	default:
		page.Status = strconv.Itoa(len(page.Results)) + " organisations."
		if len(page.Results) == 1 {
			page.Status = "1 organisation."
		}
	}
	slices.SortStableFunc(page.Results, func(a, b discoveryIdP) int {
		return cmp.Compare(fold(a.Name), fold(b.Name))
	})
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Vary", "Accept-Language, Cookie")
	if d.JSON {
		body, err := json.Marshal(map[string]any{"idps": page.Results, "more": more})
		if err != nil {
			return err
		}
		h.Set("Content-Type", "application/json")
		w.Write(append(body, '\n'))
		return nil
	}
	var b bytes.Buffer
	if err := discoveryTemplate.Execute(&b, page); err != nil {
		return err
	}
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", discoveryCSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	w.Write(b.Bytes())
	return nil
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
func showIdP(agg *aggregate, e *fedIdP, prefs []language.Tag) discoveryIdP {
	v := discoveryIdP{EntityID: e.entityID}
	if n, ok := pickName(e.names, prefs); ok {
		v.Name, v.Lang = n.text, n.lang
	} else {
		v.Name = e.entityID
	}
	for _, l := range orderByLang(e.logos, prefs) {
		if u, ok := logoURL(agg.buf[l.start:l.end]); ok {
			v.Logo, v.LogoW, v.LogoH = u, l.width, l.height
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
func logoURL(raw []byte) (template.URL, bool) {
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
		return template.URL(s), true
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
		return "", false
	}
	return template.URL(u.String()), true
}

const discoveryStyle = `body{font-family:system-ui,sans-serif;margin:0;color:#111;background:#fff}
main{max-width:40rem;margin:0 auto;padding:1rem}
h1{font-size:1.4rem}
form{margin:0 0 1rem}
label{display:block;font-weight:600;margin-bottom:.3rem}
input[type=search]{font:inherit;padding:.5rem;width:100%;box-sizing:border-box;border:1px solid #555;border-radius:.3rem}
ul{list-style:none;margin:0;padding:0}
li{margin:.4rem 0}
button{font:inherit;display:flex;align-items:center;gap:.6rem;width:100%;min-height:2.8rem;padding:.4rem .6rem;text-align:left;background:#f4f4f4;border:1px solid #888;border-radius:.3rem;cursor:pointer}
button:hover,button:focus{background:#e4ecf7;outline:2px solid #1a4fa0}
.search{display:flex;gap:.5rem}.search button{width:auto}
img{max-height:2.5rem;max-width:5rem;object-fit:contain}
.status{color:#333}`

var (
	discoveryCSP = func() string {
		sum := sha256.Sum256([]byte(discoveryStyle))
		return "default-src 'none'; img-src https: data:; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) +
			"'; frame-ancestors 'none'; base-uri 'none'"
	}()
	discoveryTemplate = template.Must(template.New("discovery").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Sign in with your organisation</title><style>` + discoveryStyle + `</style></head>
<body><main>
<h1>Sign in with your organisation</h1>
{{- define "idp"}}<button type="submit" name="idp" value="{{.EntityID}}">
{{- if .Logo}}<img src="{{.Logo}}" alt=""{{if .LogoW}} width="{{.LogoW}}"{{end}}{{if .LogoH}} height="{{.LogoH}}"{{end}} loading="lazy" referrerpolicy="no-referrer">{{end -}}
<span{{if .Lang}} lang="{{.Lang}}"{{end}}>{{.Name}}</span></button>{{end}}
{{- if .Last}}
<form method="post" action="{{.Action}}">{{if .ReturnTo}}<input type="hidden" name="return_to" value="{{.ReturnTo}}">{{end}}
<h2>Your last choice</h2>
{{template "idp" .Last}}
</form>
{{- end}}
<form method="get" action="{{.Action}}" role="search">{{if .ReturnTo}}<input type="hidden" name="return_to" value="{{.ReturnTo}}">{{end}}
<label for="q">Find your organisation</label>
<div class="search"><input id="q" name="q" type="search" value="{{.Query}}" autocomplete="off" aria-describedby="status"><button type="submit">Search</button></div>
</form>
<p id="status" class="status" role="status">{{.Status}}</p>
{{- if .Results}}
<form method="post" action="{{.Action}}">{{if .ReturnTo}}<input type="hidden" name="return_to" value="{{.ReturnTo}}">{{end}}
<ul>
{{- range .Results}}
<li>{{template "idp" .}}</li>
{{- end}}
</ul>
</form>
{{- end}}
</main></body></html>
`))
)
