// Package devpage is the look of extauth's development pages: one
// stylesheet for the demo's pages and for every development provider's
// login, consent and logout page (extauthtest's fakes), and the layout of
// those provider pages.
package devpage

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"html/template"
	"net/http"
	"strings"
)

//go:embed style.css
var css string

// etag names this build's stylesheet, so a browser revalidates it cheaply.
var etag = func() string {
	sum := sha256.Sum256([]byte(css))
	return `"` + hex.EncodeToString(sum[:8]) + `"`
}()

// CSS returns the stylesheet, for a page that carries it inline (the
// providers' pages, served wherever a test puts them).
func CSS() template.CSS { return template.CSS(css) }

// Handler serves the stylesheet, for pages that link it.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/css; charset=utf-8")
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", etag)
		if strings.Contains(r.Header.Get("If-None-Match"), etag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Write([]byte(css))
	})
}

// layout is a provider page: a bar with the provider's name marked as a
// development provider, the page's "main" in a narrow column, and a footer
// saying that no real account is involved.
const layout = `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<title>{{template "title" .}} · {{brand}} (development)</title>
<style>{{css}}</style></head>
<body class="provider">
<header class="bar"><div class="wrap narrow"><span class="brand">{{brand}}</span><span class="spacer"></span><span class="pill">development provider</span></div></header>
<main class="wrap narrow">
{{template "main" .}}
</main>
<footer class="wrap narrow">A development stand-in that speaks the real protocol, served by extauthtest. No real account is involved.</footer>
</body></html>
`

// Provider returns the template of a development provider's page: body
// defines "title" (the page's subject, plain text) and "main" (its
// content), which the layout wraps with brand, the provider's name.
// Execute the returned template itself.
func Provider(name, brand, body string) *template.Template {
	t := template.New(name).Funcs(template.FuncMap{
		"css":   CSS,
		"brand": func() string { return brand },
	})
	template.Must(t.Parse(layout))
	// A text of definitions only leaves the layout as the root.
	return template.Must(t.Parse(body))
}
