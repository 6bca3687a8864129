package extauth

import (
	"crypto/sha256"
	"encoding/base64"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// autoSubmit is the only script extauth ever serves. The page's
// Content-Security-Policy allows it by its hash and nothing else.
const autoSubmit = `document.forms[0].submit()`

var autoSubmitCSP = func() string {
	sum := sha256.Sum256([]byte(autoSubmit))
	return "default-src 'none'; script-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) +
		"'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'"
}()

var postPage = template.Must(template.New("post").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<meta name="referrer" content="no-referrer"></head>
<body><form method="post" action="{{.Action}}">
{{range .Fields}}<input type="hidden" name="{{.Name}}" value="{{.Value}}">
{{end}}{{if .Auto}}<noscript>{{end}}<p>{{.Prompt}}</p><button type="submit">{{.Button}}</button>{{if .Auto}}</noscript>{{end}}
</form>{{if .Auto}}<script>` + autoSubmit + `</script>{{end}}</body></html>
`))

type formField struct{ Name, Value string }

// postForm is a page whose one form POSTs fields to action.
type postForm struct {
	Title, Prompt, Button string
	Action                string
	Fields                []formField
	// Auto submits the form by script; without it the user must click,
	// which is the point of the login-CSRF interstitial.
	Auto bool
}

func fieldsOf(v url.Values) []formField {
	var out []formField
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range v {
			if !yield(k) {
				return
			}
		}
	}) {
		for _, val := range v[k] {
			out = append(out, formField{k, val})
		}
	}
	return out
}

// writePostForm answers with p. It must never be framed (clickjacking would
// turn the interstitial's click into the attacker's) and runs no script but
// its own.
func writePostForm(w http.ResponseWriter, status int, p postForm) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", autoSubmitCSP)
	h.Set("X-Frame-Options", "DENY")
	w.WriteHeader(status)
	var b strings.Builder
	postPage.Execute(&b, p)
	w.Write([]byte(b.String()))
}
