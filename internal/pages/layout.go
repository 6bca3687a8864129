package pages

import "html/template"

// style is the look of every page: a card in the middle of a wide screen,
// the whole width of a phone's; text and controls at contrast 7:1 or more
// (WCAG AAA for text), a focus ring that shows on every control, and
// targets of 44 px.
const style = `:root{color-scheme:light}
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%}
body{margin:0;background:#f5f7fa;color:#1b2330;font:16px/1.55 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue","DejaVu Sans",Arial,sans-serif}
main{max-width:34rem;margin:3rem auto;padding:1.75rem 1.75rem 1.25rem;background:#fff;border:1px solid #d5dbe5;border-radius:12px}
h1{font-size:1.5rem;line-height:1.25;margin:0 0 .75rem}
h2{font-size:1rem;margin:1.25rem 0 .5rem}
p{margin:0 0 1rem}
.lead{font-size:1.1rem}
.note,.status,.back{color:#47505e}
a{color:#2d44b8;text-underline-offset:2px}
a:hover{color:#1f3190}
button,a.button{display:inline-block;text-decoration:none;font:inherit;min-height:2.75rem;padding:.55rem 1.1rem;border-radius:8px;border:1px solid #6b7485;background:#fff;color:#1b2330;cursor:pointer}
button:hover{background:#eef1fb}
.primary,a.primary{background:#2d44b8;border-color:#2d44b8;color:#fff;font-weight:600}
.primary:hover,a.primary:hover{background:#1f3190;color:#fff}
:focus-visible{outline:3px solid #b35c00;outline-offset:2px}
code{font-family:ui-monospace,"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:.9em;background:#eef1f5;border-radius:4px;padding:.05em .35em}
label{display:block;font-weight:600;margin-bottom:.35rem}
input[type=search]{font:inherit;min-height:2.75rem;padding:.5rem .7rem;flex:1;min-width:0;border:1px solid #6b7485;border-radius:8px}
.search{display:flex;gap:.5rem;margin-bottom:.75rem}
ul{list-style:none;margin:0;padding:0}
li{margin:.45rem 0}
.idp{display:flex;align-items:center;gap:.75rem;width:100%;text-align:left}
.idp img{max-height:2.5rem;max-width:5rem;object-fit:contain}
.details{font-size:.9rem;color:#47505e}
.back{margin:1.5rem 0 0}
@media (max-width:36rem){main{margin:0;border:0;border-radius:0;min-height:100vh;padding:1.25rem 1rem}.primary{width:100%;text-align:center}}`

var layout = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="{{.Lang}}"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="{{.Referrer}}">
<title>{{.Title}}</title>
{{range .Styles}}<style>{{.}}</style>
{{end}}</head>
<body class="{{.Kind}}"><main>
<h1>{{.Title}}</h1>
{{- with .Lead}}
<p class="lead">{{.}}</p>
{{- end}}
{{- range .Notes}}
<p class="note">{{.}}</p>
{{- end}}
{{- with .Form}}
<form method="post" action="{{.Action}}">
{{- template "fields" .Fields}}
<button type="submit" class="primary">{{.Button}}</button>
</form>
{{- end}}
{{- with .Discovery}}{{template "discovery" .}}{{end}}
{{- if .Code}}
<p class="details">{{.CodeLabel}}: <code>{{.Code}}</code>{{if .Details}}<br>{{.DetailsLabel}}: <span lang="en">{{.Details}}</span>{{end}}</p>
{{- end}}
{{- with .Retry}}
<p><a class="button primary" href="{{.URL}}">{{.Label}}</a></p>
{{- end}}
{{- with .Back}}
<p class="back"><a href="{{.URL}}">{{.Label}}</a></p>
{{- end}}
</main>
{{- if .Form}}{{if .Form.Auto}}<script>document.forms[0].submit()</script>{{end}}{{end}}
</body></html>
{{define "fields"}}{{range .}}
<input type="hidden" name="{{.Name}}" value="{{.Value}}">{{end}}{{end}}
{{define "idp"}}<button type="submit" class="idp" name="idp" value="{{.EntityID}}">
{{- if .Logo}}<img src="{{.Logo}}" alt=""{{if .Width}} width="{{.Width}}"{{end}}{{if .Height}} height="{{.Height}}"{{end}} loading="lazy" referrerpolicy="no-referrer">{{end -}}
<span{{if .Lang}} lang="{{.Lang}}"{{end}}>{{.Name}}</span></button>{{end}}
{{define "discovery"}}
{{- if .Last}}
<form method="post" action="{{.Action}}">
{{- template "fields" .Fields}}
<h2>{{.LastHeading}}</h2>
{{template "idp" .Last}}
</form>
{{- end}}
<form method="get" action="{{.Action}}" role="search">
{{- template "fields" .Fields}}
<label for="q">{{.SearchLabel}}</label>
<div class="search"><input id="q" name="q" type="search" value="{{.Query}}" autocomplete="off" aria-describedby="status"><button type="submit">{{.SearchButton}}</button></div>
</form>
<p id="status" class="status" role="status">{{.Status}}</p>
{{- if .Choices}}
<form method="post" action="{{.Action}}">
{{- template "fields" .Fields}}
<ul aria-label="{{.ListLabel}}">
{{- range .Choices}}
<li>{{template "idp" .}}</li>
{{- end}}
</ul>
</form>
{{- end}}
{{end}}`))
