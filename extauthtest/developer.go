package extauthtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/mail"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/internal/devpage"
	"github.com/extauth/extauth/providers"
)

// Developer is the name the developer provider is mounted under unless
// DeveloperOptions.Name says otherwise: /users/auth/developer.
const Developer extauth.Provider = "developer"

// DeveloperOptions configure the developer provider.
type DeveloperOptions struct {
	// Name is the provider's slug, Developer when empty.
	Name extauth.Provider
	// AllowNonLoopback lets the provider run at a BaseURL whose host is
	// not a loopback address or localhost: a development machine reached
	// by name (a container, a virtual machine). The developer provider
	// signs anyone in as anyone: never set it for an application that
	// anyone else can reach.
	AllowNonLoopback bool
	// RequestOptions are the per-request sign-in options the provider
	// takes: login_hint fills in the form's email, acr_values or level
	// (mapped by AssuranceLevels) offer the asked levels to choose from,
	// and max_age and prompt are met by the form itself, which always
	// authenticates anew. None when empty.
	RequestOptions []string
	// AssuranceLevels maps the host's levels to the acr values the form
	// offers for each.
	AssuranceLevels map[string][]string
}

// developerOptions are the options the developer provider takes.
var developerOptions = []string{providers.OptionLoginHint, providers.OptionPrompt, providers.OptionMaxAge, providers.OptionACRValues, providers.OptionLevel}

// AddDeveloper mounts the developer provider on o, the Options of a host's
// development server: a form that asks for a name and an email address and
// signs in whoever submits it as that, with no provider and no protocol,
// like OmniAuth's :developer strategy. It is the quickest start for local
// work: the host's hooks, session and pages run as they will with a real
// provider. The Identity has UID and Email set to the address (lowercased),
// Name to the name, EmailVerified false, and Raw {"name", "email"}.
//
// Since it signs anyone in, it refuses to run in production: AddDeveloper
// returns an error, and the provider refuses every sign-in, unless
// o.BaseURL's host is a loopback address (127.0.0.0/8, ::1) or localhost
// (or a name under .localhost), or d.AllowNonLoopback is set. It is never
// mounted by configuration: only a call in the host's own code adds it.
func AddDeveloper(o *extauth.Options, d DeveloperOptions) error {
	if d.Name == "" {
		d.Name = Developer
	}
	if !d.AllowNonLoopback {
		u, err := url.Parse(o.BaseURL)
		if err != nil || !isLoopback(u.Hostname()) {
			return fmt.Errorf("extauthtest: the developer provider signs anyone in and runs only at a loopback BaseURL, not %q (DeveloperOptions.AllowNonLoopback overrides this, for a development machine only)", o.BaseURL)
		}
	}
	if ps := providers.CheckRequestOptionConfig("DeveloperOptions", d.RequestOptions, developerOptions, d.AssuranceLevels, providers.OptionACRValues, nil); len(ps) > 0 {
		return fmt.Errorf("extauthtest: %w", ps[0])
	}
	o.Extra = append(o.Extra, &developer{name: string(d.Name), allowNonLoopback: d.AllowNonLoopback,
		options: slices.Clone(d.RequestOptions), levels: maps.Clone(d.AssuranceLevels)})
	return nil
}

// isLoopback reports whether host is a loopback IP address, localhost or
// a name under .localhost (RFC 6761: always the loopback interface).
func isLoopback(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// developer is the developer provider's strategy.
type developer struct {
	name             string
	allowNonLoopback bool
	callback         string
	form             string
	now              func() time.Time
	options          []string
	levels           map[string][]string
}

var _ providers.OptionTaker = (*developer)(nil)

func (d *developer) RequestOptions() []string { return slices.Clone(d.options) }

func (d *developer) AssuranceLevel(level string) ([]string, bool) {
	v, ok := d.levels[level]
	return slices.Clone(v), ok
}

func (d *developer) ClockSkew() time.Duration { return providers.DefaultOIDCClockSkew }

// asked is what the sign-in asks of the authentication: the acr values to
// offer, of which the one chosen must be.
func (d *developer) asked(tx *providers.Transaction) (providers.Asked, error) {
	return providers.Narrow(tx, providers.Asked{MaxAge: -1}, providers.OptionACRValues, d.levels)
}

func (d *developer) Name() string { return d.name }

// SetEnv receives the callback URL; the form is served beside it.
func (d *developer) SetEnv(env providers.Env) {
	d.now = env.Now
	d.callback = env.CallbackURL
	d.form = strings.TrimSuffix(env.CallbackURL, "/callback") + "/form"
}

// allowed re-checks the callback's host at each sign-in, whatever built
// the strategy.
func (d *developer) allowed() error {
	u, err := url.Parse(d.callback)
	if d.callback == "" || err != nil || !(d.allowNonLoopback || isLoopback(u.Hostname())) {
		return providers.NewError(providers.CodeMisconfigured, "sign-in is not configured correctly for this site",
			errors.New("extauthtest: the developer provider runs at a loopback address only"))
	}
	return nil
}

func (d *developer) Begin(_ context.Context, tx *providers.Transaction) (string, error) {
	if err := d.allowed(); err != nil {
		return "", err
	}
	q := url.Values{"state": {tx.State}}
	want, err := d.asked(tx)
	if err != nil {
		return "", err
	}
	if len(want.Values) > 0 {
		q.Set("acr", strings.Join(want.Values, " "))
	}
	if hint := tx.Option(providers.OptionLoginHint); hint != "" {
		q.Set("login_hint", hint)
	}
	return d.form + "?" + q.Encode(), nil
}

func (d *developer) Binding(r *http.Request) string { return r.PostFormValue("state") }

func (d *developer) Complete(_ context.Context, r *http.Request, tx *providers.Transaction) (*providers.Identity, error) {
	if err := d.allowed(); err != nil {
		return nil, err
	}
	name := strings.TrimSpace(r.PostFormValue("name"))
	email := strings.ToLower(strings.TrimSpace(r.PostFormValue("email")))
	addr, err := mail.ParseAddress(email)
	switch {
	case r.Method != http.MethodPost:
		return nil, providers.NewError(providers.CodeInvalidResponse, "the sign-in form must be posted", nil)
	case err != nil || addr.Address != email || len(email) > 254:
		return nil, providers.NewError(providers.CodeInvalidResponse, "enter an email address", err)
	case name == "" || utf8.RuneCountInString(name) > 200:
		return nil, providers.NewError(providers.CodeInvalidResponse, "enter a name", nil)
	}
	// The level chosen must be one asked for, as a provider's must.
	acr := r.PostFormValue("acr")
	want, err := d.asked(tx)
	if err != nil {
		return nil, err
	}
	if len(want.Values) > 0 && !slices.Contains(want.Values, acr) {
		return nil, providers.NewError(providers.CodeInsufficientAuthentication, "the level chosen is not one the sign-in asked for",
			errors.New("extauthtest: the developer form's acr is not one of the requested acr_values"))
	}
	now := time.Now
	if d.now != nil {
		now = d.now
	}
	return &providers.Identity{
		UID:   email,
		Email: email,
		Name:  name,
		Raw:   map[string]any{"name": name, "email": email},
		// The form authenticates anew every time.
		ACR:      acr,
		AuthTime: now(),
	}, nil
}

// ExtraRoutes serves the form at <prefix><name>/form.
func (d *developer) ExtraRoutes() map[string]http.Handler {
	return map[string]http.Handler{"form": http.HandlerFunc(d.serveForm)}
}

var developerForm = devpage.Provider("developer", "Developer sign-in", `{{define "title"}}Sign in{{end}}
{{define "main"}}<div class="notice warn"><strong>For development only:</strong> <p>no provider checks who you are. You are signed in as whoever you type.</p></div>
<div class="card">
<h1>Developer sign-in</h1>
<form method="post" action="{{.Action}}">
<input type="hidden" name="state" value="{{.State}}">
<label class="field">Name <input name="name" id="name" autocomplete="name" required></label>
<label class="field">Email <input name="email" id="email" type="email" autocomplete="email" value="{{.LoginHint}}" required></label>
{{with .Levels}}<label class="field">Authenticated at <select name="acr" id="acr">{{range .}}<option>{{.}}</option>
{{end}}<option value="">a weaker level</option></select></label>{{end}}
<div class="actions"><button type="submit" id="sign-in" class="primary">Sign in</button></div>
</form>
</div>{{end}}`)

func (d *developer) serveForm(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, http.StatusText(http.StatusMethodNotAllowed), http.StatusMethodNotAllowed)
		return
	}
	if err := d.allowed(); err != nil {
		http.NotFound(w, r)
		return
	}
	state := r.URL.Query().Get("state")
	if state == "" || len(state) > 128 {
		http.Error(w, "this sign-in is not valid any more; please start again", http.StatusBadRequest)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	q := r.URL.Query()
	var levels []string
	if acr := q.Get("acr"); providers.CheckRequestOption(providers.OptionACRValues, acr) == nil {
		levels = strings.Fields(acr)
	}
	hint := q.Get("login_hint")
	if providers.CheckRequestOption(providers.OptionLoginHint, hint) != nil {
		hint = ""
	}
	developerForm.Execute(w, map[string]any{"Action": d.callback, "State": state, "LoginHint": hint, "Levels": levels})
}
