package main

import (
	"embed"
	"encoding/json"
	"html/template"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/extauth/extauth"
)

//go:embed templates/*.html
var templateFiles embed.FS

// page parses a page: the layout and the page's "main".
func page(file string) *template.Template {
	return template.Must(template.ParseFS(templateFiles, "templates/layout.html", "templates/"+file))
}

var (
	adminPage    = page("admin.html")
	homePage     = page("home.html")
	failurePage  = page("failure.html")
	notFoundPage = page("notfound.html")
)

type pages struct {
	auth     *extauth.Auth
	sessions *sessions
	sites    *sites
	log      *slog.Logger
	// oidcMode is the development OpenID providers' mode, which the home
	// page states; nil for the ordinary one.
	oidcMode *oidcMode
}

// view is what every page shows: the site it is on, in the header, and
// the demo's other sites.
type view struct {
	Title string
	Site  siteView
	Sites []siteView
}

type siteView struct {
	Tenant, Name, Host, URL string
	Current                 bool
}

func (p *pages) view(s *site, title string) view {
	v := view{Title: title, Site: siteView{Tenant: s.tenant, Name: s.name, Host: s.host(), URL: s.base, Current: true}}
	for _, o := range p.sites.list {
		v.Sites = append(v.Sites, siteView{Tenant: o.tenant, Name: o.name, Host: o.host(), URL: o.base, Current: o == s})
	}
	return v
}

func (p *pages) render(w http.ResponseWriter, status int, t *template.Template, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := t.ExecuteTemplate(w, "layout", data); err != nil {
		p.log.Error("demo: rendering a page", "err", err)
	}
}

// site returns the site of r, or answers 404 for a host that is none.
func (p *pages) site(w http.ResponseWriter, r *http.Request) *site {
	if s := p.sites.of(r); s != nil {
		return s
	}
	main := p.sites.list[0]
	v := p.view(main, "No such site")
	v.Site.Current = false
	p.render(w, http.StatusNotFound, notFoundPage, struct {
		view
		Message string
	}{v, "This demo serves no tenant at " + r.Host + "."})
	return nil
}

// adminMaxAge is how recent a sign-in the admin area needs.
const adminMaxAge = 5 * time.Minute

// current is the identity of r's session at r's site, nil for none: what
// RequireAssurance asks of the host.
func (p *pages) current(r *http.Request) *extauth.Identity {
	s := p.sites.of(r)
	if s == nil {
		return nil
	}
	_, id := p.sessions.current(r, s.tenant)
	return id
}

// signedIn lets through the requests of a session at their site, and sends
// the others home: RequireAssurance, behind it, answers a session that is
// too weak or too old.
func (p *pages) signedIn(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.current(r) == nil {
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// admin is the page that needs a sign-in at level high made in the last
// adminMaxAge: RequireAssurance in front of it asks the provider for one
// first (the step-up page, extauth's own).
func (p *pages) admin(w http.ResponseWriter, r *http.Request) {
	s := p.site(w, r)
	if s == nil {
		return
	}
	id := p.current(r)
	v := identityFor(s, id)
	idp := ""
	if id.SAML != nil {
		idp = id.SAML.IdP
	}
	p.render(w, http.StatusOK, adminPage, struct {
		view
		Identity *identityView
		IdP      string
		Minutes  int
	}{p.view(s, "Admin area"), v, idp, int(adminMaxAge / time.Minute)})
}

type providerView struct{ Slug, Label string }

type noticeView struct{ ID, Class, Title, Text string }

type identityView struct {
	Display, Initial string
	Name, Email      string
	EmailVerified    bool
	Provider         providerView
	UID, Tenant      string
	SessionID        string
	Attributes       []attributeView
	JSON             string
	// ACR, AMR and AuthTime say how and when the provider authenticated
	// the user.
	ACR, AMR, AuthTime string
	// StepUp is the form of the step-up button, nil for a provider that
	// cannot be asked for the level.
	StepUp *stepUpView
	// IdP is the SAML IdP that asserted the identity.
	IdP string
}

// stepUpView is the form that starts a fresh sign-in at level high.
type stepUpView struct {
	Action string
	Fields []fieldView
}

type fieldView struct{ Name, Value string }

type attributeView struct {
	Friendly, Name string
	Values         []string
}

func (p *pages) home(w http.ResponseWriter, r *http.Request) {
	s := p.site(w, r)
	if s == nil {
		return
	}
	data := struct {
		view
		Notice    *noticeView
		OIDCMode  *oidcMode
		Identity  *identityView
		Providers []providerView
	}{view: p.view(s, "Sign in")}
	if slices.Contains(s.providers, extauth.OIDC) {
		data.OIDCMode = p.oidcMode
	}
	if n, ok := p.sessions.takeNotice(w, r); ok {
		data.Notice = noticeFor(s, n)
	}
	if _, id := p.sessions.current(r, s.tenant); id != nil {
		data.Identity = identityFor(s, id)
		data.Identity.StepUp = p.stepUp(r, id)
		data.Title = "Signed in"
	}
	for _, pr := range s.providers {
		data.Providers = append(data.Providers, providerView{Slug: string(pr), Label: s.label(pr)})
	}
	w.Header().Set("Cache-Control", "no-store")
	p.render(w, http.StatusOK, homePage, data)
}

func noticeFor(s *site, n notice) *noticeView {
	label := s.label(n.provider)
	switch n.kind {
	case noticeLocal:
		return &noticeView{ID: "local", Class: "warn", Title: "Signed out of this demo only",
			Text: "This demo cannot end your session at " + label + ": the provider offers applications no way to sign you out. You are still signed in there, and signing in with it again may not ask for your password."}
	case noticeProvider:
		return &noticeView{ID: "provider", Class: "ok", Title: "Signed out",
			Text: "You are signed out of this demo, and " + label + " was asked to end its session too."}
	default:
		return &noticeView{ID: "unreachable", Class: "warn", Title: "Signed out of this demo only",
			Text: "You are signed out of this demo, but " + label + " could not be reached to end its own session: you may still be signed in there."}
	}
}

// stepUp builds the step-up button's form: a new sign-in of the same
// account with the same provider, at level high and authenticated now. A
// provider that cannot be asked for it (an OAuth one, or one whose
// configuration does not allow the options) gets no button.
func (p *pages) stepUp(r *http.Request, id *extauth.Identity) *stepUpView {
	action, fields, err := p.auth.StartForm(r, extauth.Provider(id.Provider), extauth.SignInOptions{
		Level: levelHigh, MaxAge: -1, Account: id, ReturnTo: "/",
	})
	if err != nil {
		return nil
	}
	v := &stepUpView{Action: action}
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		v.Fields = append(v.Fields, fieldView{name, fields.Get(name)})
	}
	return v
}

func identityFor(s *site, id *extauth.Identity) *identityView {
	b, _ := json.MarshalIndent(id, "", "  ")
	v := &identityView{
		Display:       id.Name,
		Name:          id.Name,
		Email:         id.Email,
		EmailVerified: id.EmailVerified,
		Provider:      providerView{Slug: id.Provider, Label: s.label(extauth.Provider(id.Provider))},
		UID:           id.UID,
		Tenant:        id.Tenant,
		SessionID:     id.SessionID,
		JSON:          string(b),
		ACR:           id.ACR,
		AMR:           strings.Join(id.AMR, " "),
	}
	if !id.AuthTime.IsZero() {
		v.AuthTime = id.AuthTime.UTC().Format(time.RFC3339)
	}
	if v.Display == "" {
		v.Display = id.UID
	}
	if r, _ := utf8.DecodeRuneInString(v.Display); r != utf8.RuneError {
		v.Initial = string(unicode.ToUpper(r))
	}
	if id.SAML != nil {
		v.IdP = id.SAML.IdP
		names := make([]string, 0, len(id.SAML.Attributes))
		for name := range id.SAML.Attributes {
			names = append(names, name)
		}
		slices.SortFunc(names, func(a, b string) int { return strings.Compare(friendlyName(a)+a, friendlyName(b)+b) })
		for _, name := range names {
			v.Attributes = append(v.Attributes, attributeView{Friendly: friendlyName(name), Name: name, Values: id.SAML.Attributes[name]})
		}
	}
	return v
}

// samlAttributeNames are the friendly names of the attributes IdPs send
// under their OIDs (LDAP, eduPerson, SCHAC): the names people know them by.
var samlAttributeNames = map[string]string{
	"urn:oid:0.9.2342.19200300.100.1.1":  "uid",
	"urn:oid:0.9.2342.19200300.100.1.3":  "mail",
	"urn:oid:2.5.4.3":                    "cn",
	"urn:oid:2.5.4.4":                    "sn",
	"urn:oid:2.5.4.10":                   "o",
	"urn:oid:2.5.4.11":                   "ou",
	"urn:oid:2.5.4.12":                   "title",
	"urn:oid:2.5.4.20":                   "telephoneNumber",
	"urn:oid:2.5.4.42":                   "givenName",
	"urn:oid:2.16.840.1.113730.3.1.3":    "employeeNumber",
	"urn:oid:2.16.840.1.113730.3.1.241":  "displayName",
	"urn:oid:1.3.6.1.4.1.5923.1.1.1.1":   "eduPersonAffiliation",
	"urn:oid:1.3.6.1.4.1.5923.1.1.1.6":   "eduPersonPrincipalName",
	"urn:oid:1.3.6.1.4.1.5923.1.1.1.7":   "eduPersonEntitlement",
	"urn:oid:1.3.6.1.4.1.5923.1.1.1.9":   "eduPersonScopedAffiliation",
	"urn:oid:1.3.6.1.4.1.5923.1.1.1.10":  "eduPersonTargetedID",
	"urn:oid:1.3.6.1.4.1.5923.1.1.1.13":  "eduPersonUniqueId",
	"urn:oid:1.3.6.1.4.1.5923.1.5.1.1":   "isMemberOf",
	"urn:oid:1.3.6.1.4.1.25178.1.2.9":    "schacHomeOrganization",
	"urn:oid:1.3.6.1.4.1.25178.1.2.10":   "schacHomeOrganizationType",
	"urn:oid:0.9.2342.19200300.100.1.41": "mobile",
}

// friendlyName is the name people know a SAML attribute by: from the
// table above, the last part of a WS-Federation claim URI (AD FS, Entra
// ID), or the name itself when it is no URI. "" when there is none.
func friendlyName(name string) string {
	if f, ok := samlAttributeNames[name]; ok {
		return f
	}
	if strings.HasPrefix(name, "http://schemas.") {
		return name[strings.LastIndex(name, "/")+1:]
	}
	if !strings.Contains(name, ":") {
		return name
	}
	return ""
}

func (p *pages) me(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	s := p.sites.of(r)
	var id *extauth.Identity
	if s != nil {
		_, id = p.sessions.current(r, s.tenant)
	}
	if id == nil {
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"error":"not signed in"}` + "\n"))
		return
	}
	json.NewEncoder(w).Encode(id)
}

// logout ends the demo's session, then the provider's where it can: a
// SAML IdP's single logout, an OpenID provider's end_session_endpoint.
// The note on the next page says which it was.
func (p *pages) logout(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		http.Error(w, "cross-site sign-out refused", http.StatusForbidden)
		return
	}
	s := p.site(w, r)
	if s == nil {
		return
	}
	id := p.sessions.signOut(w, r, s.tenant)
	if id == nil {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	prov := extauth.Provider(id.Provider)
	// LogoutURL answers the provider's logout endpoint, or a path here
	// when the provider has none: the sign-out is then local only.
	u, err := p.auth.LogoutURL(w, r, prov, id.LogoutSession())
	switch {
	case err != nil:
		p.log.Warn("demo: cannot sign out at the provider", "provider", prov, "err", err)
		p.sessions.setNotice(w, notice{kind: noticeUnreachable, provider: prov})
		u = "/"
	case strings.HasPrefix(u, "/"):
		p.sessions.setNotice(w, notice{kind: noticeLocal, provider: prov})
	default:
		p.sessions.setNotice(w, notice{kind: noticeProvider, provider: prov})
	}
	http.Redirect(w, r, u, http.StatusSeeOther)
}

// logoutDone is Options.Logout.Done: the provider has answered a sign-out
// (the demo's session ended before the browser went there). A reply that
// does not verify changes nothing: anyone can send a browser to a logout
// route with a bad one, and that must not sign the user out.
func (p *pages) logoutDone(w http.ResponseWriter, r *http.Request, err *extauth.Error) {
	if err == nil {
		http.Redirect(w, r, extauth.ReturnTo(r), http.StatusSeeOther)
		return
	}
	p.failure(w, r, err, "slo-failed", "Sign-out could not be confirmed")
}

// onFailure is Options.OnFailure: the failure page, or JSON for a .json
// route.
func (p *pages) onFailure(w http.ResponseWriter, r *http.Request, err *extauth.Error) {
	if extauth.Format(r) == "json" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(err.Code.HTTPStatus())
		json.NewEncoder(w).Encode(map[string]string{"error": string(err.Code), "error_description": err.Message, "provider": err.Provider})
		return
	}
	p.failure(w, r, err, "failure", "Sign-in didn't complete")
}

func (p *pages) failure(w http.ResponseWriter, r *http.Request, err *extauth.Error, id, heading string) {
	s := p.sites.of(r)
	if s == nil {
		s = p.sites.list[0]
	}
	words := explain(err.Code)
	data := struct {
		view
		ID, Heading, Explanation, Advice, Message, Code string
		Status                                          int
		Provider                                        *providerView
	}{
		view: p.view(s, heading), ID: id, Heading: heading, Explanation: words.what, Advice: words.todo,
		Message: err.Message, Code: string(err.Code), Status: err.Code.HTTPStatus(),
	}
	data.Message = sentence(data.Message)
	if data.Message == "" {
		data.Message = "Sign-in failed."
	}
	if err.Provider != "" {
		data.Provider = &providerView{Slug: err.Provider, Label: s.label(extauth.Provider(err.Provider))}
	}
	w.Header().Set("Cache-Control", "no-store")
	p.render(w, err.Code.HTTPStatus(), failurePage, data)
}

// explanation says in plain words what an error code means, and what to
// do about it.
type explanation struct{ what, todo string }

// explanations cover every extauth.Code (TestDemoExplainsEveryCode).
var explanations = map[extauth.Code]explanation{
	extauth.CodeAccessDenied: {
		"The sign-in was refused at the provider: you (or the provider) said no, so it shared nothing about you.",
		"Sign in again and approve, or pick another provider."},
	extauth.CodeCSRFDetected: {
		"The sign-in was started from another site. extauth refuses that: a page elsewhere could otherwise sign you in to an account of its choosing.",
		"Start the sign-in from this demo's own page."},
	extauth.CodeInvalidState: {
		"The provider sent you back, but this browser has no sign-in under way that matches: it expired (after 10 minutes), was finished already, or was started at another site of this demo.",
		"Start again from the sign-in page."},
	extauth.CodeInvalidResponse: {
		"The provider refused a step of the sign-in (\"What happened\" says which), or its answer could not be trusted: it was malformed or too large, or its signature, issuer, audience or validity period did not check out.",
		"Try again. If it happens again, the provider's keys, clock or configuration need a look: the server log says which step failed and what the provider answered."},
	extauth.CodeInvalidCredentials: {
		"The provider refused this application's own credentials (its client ID or secret), so it would not say who you are.",
		"The operator must fix the client credentials in the secrets file."},
	extauth.CodeReplayed: {
		"Part of this sign-in (a code, a state or a SAML assertion) had been used before. Each works once only, so that a copy cannot sign anyone in.",
		"Start a new sign-in rather than going back into a finished one."},
	extauth.CodeProviderUnavailable: {
		"The provider could not be reached, or answered with an error of its own.",
		"Try again in a moment."},
	extauth.CodeMisconfigured: {
		"This provider's configuration cannot work: a setting is missing or wrong, or the provider's metadata lacks what extauth needs.",
		"The operator must fix the configuration: the server log says what is wrong."},
	extauth.CodeTimeout: {
		"The provider took too long to answer.",
		"Try again in a moment."},
	extauth.CodeInsufficientAuthentication: {
		"The provider signed you in less strongly than this application requires, or too long ago.",
		"Sign in again, with the stronger method the provider offers (a card reader, an app, a second factor)."},
}

// sentence makes extauth's message, a lowercase phrase meant to follow a
// colon, a sentence of its own.
func sentence(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	s = string(unicode.ToUpper(r)) + s[n:]
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

func explain(c extauth.Code) explanation {
	if e, ok := explanations[c]; ok {
		return e
	}
	return explanation{"The sign-in failed.", "Start again from the sign-in page."}
}
