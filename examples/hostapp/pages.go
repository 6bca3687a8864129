package main

import (
	"bytes"
	"html/template"
	"net/http"

	"github.com/extauth/extauth"
)

// providerNames are what the pages call each provider.
var providerNames = map[extauth.Provider]string{
	extauth.Microblog:    "Microblog",
	extauth.Socialnet:    "Socialnet",
	extauth.SearchOAuth2: "Google",
	extauth.BlogOAuth2:   "your WordPress blog",
	extauth.SAML:         "your organization (SSO)",
	extauth.OIDC:         "your OpenID provider",
	developerProvider:    "a name and an email (development)",
}

func providerName(p extauth.Provider) string {
	if n, ok := providerNames[p]; ok {
		return n
	}
	return string(p)
}

// failureReason says what went wrong, for each code, in words a user
// understands.
func failureReason(c extauth.Code) string {
	switch c {
	case extauth.CodeAccessDenied:
		return "The sign-in was cancelled, or the provider did not let you in."
	case extauth.CodeCSRFDetected:
		return "This sign-in did not start from our site. Use the buttons below to sign in."
	case extauth.CodeInvalidState:
		return "This sign-in took too long or was already used. Please try again."
	case extauth.CodeInvalidResponse, extauth.CodeReplayed:
		return "We could not verify the provider's answer. Please try again."
	case extauth.CodeProviderUnavailable, extauth.CodeTimeout:
		return "The provider did not answer. Please try again in a moment."
	}
	return "Signing in with this provider is not set up correctly. Please let us know."
}

type button struct{ Provider, Label string }

type homeData struct {
	User      *user
	Via       string
	Buttons   []button
	SignedOut bool
}

type failureData struct{ Provider, Reason, Code string }

func via(u *user) string {
	if u == nil {
		return ""
	}
	return providerName(extauth.Provider(u.Provider))
}

var layout = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{block "title" .}}Host app{{end}}</title>
<style>body{font-family:sans-serif;max-width:36em;margin:2em auto;line-height:1.4}form.signin button{display:block;width:100%;margin:.4em 0;padding:.6em}</style>
</head><body><header><a href="/">Host app</a></header><main>{{template "main" .}}</main></body></html>`

func page(body string) *template.Template {
	return template.Must(template.Must(template.New("layout").Parse(layout)).Parse(body))
}

var homePage = page(`{{define "main"}}
{{if .User}}
<p id="signed-in">Signed in as <b id="name">{{.User.Name}}</b> with {{.Via}}.</p>
<p><a href="/account">Your account</a></p>
<form method="post" action="/signout"><button>Sign out</button></form>
{{else}}
{{if .SignedOut}}<p id="signed-out">You are signed out.</p>{{end}}
<h1>Sign in</h1>
{{range .Buttons}}<form class="signin" method="post" action="/users/auth/{{.Provider}}">
<input type="hidden" name="return_to" value="/account"><button>{{.Label}}</button></form>
{{else}}<p>No sign-in provider is configured.</p>{{end}}
{{end}}{{end}}`)

var accountPage = page(`{{define "title"}}Your account{{end}}{{define "main"}}
<h1>Your account</h1>
<dl>
<dt>Name</dt><dd id="name">{{.User.Name}}</dd>
<dt>Signed in with</dt><dd id="via">{{.Via}}</dd>
<dt>Email</dt><dd id="email">{{.User.Email}}{{if .User.Email}} ({{if .User.EmailVerified}}verified by the provider{{else}}not verified{{end}}){{end}}</dd>
<dt>Account at the provider</dt><dd id="uid">{{.User.UID}}</dd>
<dt>Sign-ins</dt><dd id="sign-ins">{{.User.SignIns}}</dd>
</dl>
<form method="post" action="/signout"><button>Sign out</button></form>
{{end}}`)

var failurePage = page(`{{define "title"}}Sign-in failed{{end}}{{define "main"}}
<h1>Sign-in failed</h1>
<p id="reason">{{.Reason}}</p>
<p>Provider: {{.Provider}}. Reference: <code id="failure-code">{{.Code}}</code></p>
<p><a href="/">Try again</a></p>
{{end}}`)

var signedOutPage = page(`{{define "title"}}Signed out{{end}}{{define "main"}}
<h1>Signed out here</h1>
<p>You are signed out of this site, but the provider did not confirm that it signed you out too.
Close the browser to be sure. Reference: <code id="failure-code">{{.Code}}</code></p>
<p><a href="/">Home</a></p>
{{end}}`)

// render writes a page whole, so a template error is a 500, not half a
// page.
func (a *app) render(w http.ResponseWriter, status int, t *template.Template, data any) {
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		a.serverError(w, "rendering a page", err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}
