// Package pages renders the pages extauth serves itself: the start
// interstitial, the step-up page, the discovery page, the page that posts
// a sign-in to a provider, and the failure and sign-out pages. One layout,
// one stylesheet, their words in the browser's language (Accept-Language,
// English when none matches), and the headers that keep them safe: no
// framing, no script but the one that submits a form, a referrer policy
// under which a browser sends the real Origin with a form that posts back
// to the site.
package pages

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/text/language"

	"github.com/extauth/extauth/internal/spelling"
)

// Referrer policies of the pages.
const (
	// SameOrigin is the policy of a page whose forms post back to the
	// site: a browser sends the page's origin with such a POST, and
	// nothing to another origin. Under no-referrer it would send
	// "Origin: null" (Fetch, "append a request Origin header"), which the
	// start rules cannot tell from a sandboxed frame's.
	SameOrigin = "same-origin"
	// NoReferrer is the policy of a page that leaves the site (a form
	// posted to a provider) or whose URL carries what no other request
	// may repeat (a callback's code and state).
	NoReferrer = "no-referrer"
)

// Page is one page to render. Texts are in the language of the Printer
// that made them.
type Page struct {
	// Kind names the page for its body's class and for tests:
	// "confirm", "logout_confirm", "redirect", "step_up", "discovery",
	// "failure", "logout_failure", "signed_out".
	Kind   string
	Status int
	Title  string
	// Lead says what the page is for; Notes say why the user sees it.
	Lead  string
	Notes []string
	Form  *Form
	// Retry starts the sign-in again, nil for none; Back is the way back
	// to the site, nil for none.
	Retry, Back *Link
	// Discovery is the discovery page's list, nil elsewhere.
	Discovery *Discovery
	// Code and Details are a failure page's: the error code, and the
	// detail of what failed, in English (extauth's Error.Message); the
	// labels are in the page's language.
	Code, CodeLabel, Details, DetailsLabel string
	// Referrer is the page's referrer policy: SameOrigin or NoReferrer.
	Referrer string
}

// Form is a page's form, posted to Action.
type Form struct {
	Action string
	Fields []Field
	Button string
	// Auto submits the form by script, which the page's
	// Content-Security-Policy allows by its hash and nothing else. The
	// button shows all the same: for a browser without script, and for
	// the moment it takes.
	Auto bool
}

// Field is a hidden field of a form.
type Field struct{ Name, Value string }

// Link is a link of a page.
type Link struct{ URL, Label string }

// Discovery is what the discovery page lists.
type Discovery struct {
	Action string
	// Fields are the start request's fields, which every form of the
	// page carries on to the start of the sign-in.
	Fields []Field
	Query  string
	Status string
	Last   *Choice
	// Choices are the IdPs listed.
	Choices []Choice
	// Labels of the page's parts.
	LastHeading, SearchLabel, SearchButton, ListLabel string
}

// Choice is an IdP on the discovery page.
type Choice struct {
	EntityID, Name, Lang string
	// Logo is an https URL or a data: image, checked by the strategy.
	Logo          template.URL
	Width, Height int
}

// autoSubmit is the only script the pages run.
const autoSubmit = `document.forms[0].submit()`

var autoSubmitHash = hash(autoSubmit)

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// Set renders pages with the words of its languages and its stylesheets.
// It is built once (New) and safe for concurrent use.
type Set struct {
	tags    []language.Tag
	msgs    []map[string]string
	matcher language.Matcher
	// styles are the page's stylesheets: extauth's, then the host's.
	styles []template.CSS
	csp    string
}

// New returns the Set of the built-in languages, with the host's messages
// (by language tag, then key) added and the host's stylesheet after
// extauth's. A message for a key extauth does not have, a tag that is not
// BCP 47, or a text that names a placeholder its key does not fill, is an
// error naming it.
func New(messages map[string]map[string]string, stylesheet string) (*Set, error) {
	s := &Set{}
	index := map[language.Tag]int{}
	for _, l := range builtin {
		tag := language.MustParse(l.tag)
		index[tag] = len(s.tags)
		s.tags = append(s.tags, tag)
		s.msgs = append(s.msgs, maps.Clone(l.msgs))
	}
	var errs []string
	for _, lang := range slices.Sorted(maps.Keys(messages)) {
		tag, err := language.Parse(lang)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%q is not a BCP 47 language tag", lang))
			continue
		}
		i, ok := index[tag]
		if !ok {
			i = len(s.tags)
			index[tag] = i
			s.tags = append(s.tags, tag)
			s.msgs = append(s.msgs, map[string]string{})
		}
		for _, key := range slices.Sorted(maps.Keys(messages[lang])) {
			text := messages[lang][key]
			en, known := english[key]
			switch {
			case !known:
				errs = append(errs, fmt.Sprintf("%s: %q is no message of extauth's pages%s", lang, key, suggest(key)))
			case strings.TrimSpace(text) == "":
				errs = append(errs, fmt.Sprintf("%s: %q is empty", lang, key))
			default:
				if p := unknownPlaceholder(text, en); p != "" {
					errs = append(errs, fmt.Sprintf("%s: %q names {%s}, which this message does not fill (it fills %s)", lang, key, p, placeholdersOf(en)))
					continue
				}
				s.msgs[i][key] = text
			}
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("Options.Pages.Messages: %s", strings.Join(errs, "; "))
	}
	s.matcher = language.NewMatcher(s.tags)
	s.styles = []template.CSS{template.CSS(style)}
	styleSrc := hash(style)
	if stylesheet != "" {
		if strings.Contains(strings.ToLower(stylesheet), "</style") {
			return nil, fmt.Errorf("Options.Pages.Stylesheet: a stylesheet cannot contain </style")
		}
		s.styles = append(s.styles, template.CSS(stylesheet))
		styleSrc += " " + hash(stylesheet)
	}
	s.csp = "default-src 'none'; style-src " + styleSrc + "; frame-ancestors 'none'; base-uri 'none'"
	return s, nil
}

// Tags returns the languages of the Set, English first.
func (s *Set) Tags() []language.Tag { return slices.Clone(s.tags) }

// Printer is a Set's words in one language.
type Printer struct {
	set  *Set
	i    int
	Lang string
}

// For returns the Printer of the language r's Accept-Language prefers
// among the Set's, English when none matches.
func (s *Set) For(r *http.Request) *Printer {
	i := 0
	if r != nil {
		if prefs, _, err := language.ParseAcceptLanguage(r.Header.Get("Accept-Language")); err == nil && len(prefs) > 0 {
			if _, m, c := s.matcher.Match(prefs...); c != language.No {
				i = m
			}
		}
	}
	return &Printer{set: s, i: i, Lang: s.tags[i].String()}
}

// T returns the message key in p's language (English where p's language
// has none), with each placeholder {name} of args (name, value pairs)
// filled.
func (p *Printer) T(key string, args ...string) string {
	text, ok := p.set.msgs[p.i][key]
	if !ok {
		text = english[key]
	}
	if len(args) == 0 {
		return text
	}
	pairs := make([]string, 0, len(args))
	for i := 0; i+1 < len(args); i += 2 {
		pairs = append(pairs, "{"+args[i]+"}", args[i+1])
	}
	return strings.NewReplacer(pairs...).Replace(text)
}

// Count is T for a message about n things: key+".one" when n is 1, else
// key, with {count} filled.
func (p *Printer) Count(key string, n int) string {
	if n == 1 {
		key += ".one"
	}
	return p.T(key, "count", strconv.Itoa(n))
}

// Write answers w with pg in p's language: no caching, no framing, no
// script but the auto-submit, the page's referrer policy in the header and
// in the page.
func (p *Printer) Write(w http.ResponseWriter, pg Page) {
	if pg.Referrer == "" {
		pg.Referrer = NoReferrer
	}
	var b bytes.Buffer
	if err := layout.Execute(&b, view{Page: pg, Lang: p.Lang, Styles: p.set.styles}); err != nil {
		// The templates are fixed and their data plain strings: an error
		// here is a bug, not an input.
		panic("extauth: page template: " + err.Error())
	}
	h := w.Header()
	csp := p.set.csp
	if pg.Discovery != nil {
		csp += "; img-src https: data:"
	}
	if pg.Form != nil && pg.Form.Auto {
		csp += "; script-src " + autoSubmitHash
	}
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", pg.Referrer)
	if pg.Discovery != nil {
		// The last choice comes from a cookie.
		h.Set("Vary", "Accept-Language, Cookie")
	} else {
		h.Set("Vary", "Accept-Language")
	}
	h.Set("Content-Language", p.Lang)
	status := pg.Status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

type view struct {
	Page
	Lang   string
	Styles []template.CSS
}

// placeholder matches a {name} of a message.
var placeholder = regexp.MustCompile(`\{([a-z_]+)\}`)

func placeholdersOf(text string) string {
	var names []string
	for _, m := range placeholder.FindAllStringSubmatch(text, -1) {
		if !slices.Contains(names, "{"+m[1]+"}") {
			names = append(names, "{"+m[1]+"}")
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// unknownPlaceholder returns the first placeholder of text that en, the
// English text of its key, does not have.
func unknownPlaceholder(text, en string) string {
	for _, m := range placeholder.FindAllStringSubmatch(text, -1) {
		if !strings.Contains(en, m[0]) {
			return m[1]
		}
	}
	return ""
}

// suggest names the closest key to key, for a misspelt one.
func suggest(key string) string {
	if near := spelling.Nearest(key, slices.Sorted(maps.Keys(english)), 3); near != "" {
		return fmt.Sprintf(" (did you mean %q?)", near)
	}
	return ""
}

// Messages returns the built-in messages of lang (a BCP 47 tag of a
// built-in language, "en" for English), nil for a language extauth does
// not ship: the keys a host translates, with extauth's words.
func Messages(lang string) map[string]string {
	tag, err := language.Parse(lang)
	if err != nil {
		return nil
	}
	for _, l := range builtin {
		if language.MustParse(l.tag) == tag {
			return maps.Clone(l.msgs)
		}
	}
	return nil
}
