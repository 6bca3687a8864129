package extauthtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/mail"
	"net/url"
	"strings"
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
}

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
	o.Extra = append(o.Extra, &developer{name: string(d.Name), allowNonLoopback: d.AllowNonLoopback})
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
}

func (d *developer) Name() string { return d.name }

// SetEnv receives the callback URL; the form is served beside it.
func (d *developer) SetEnv(env providers.Env) {
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
	return d.form + "?" + url.Values{"state": {tx.State}}.Encode(), nil
}

func (d *developer) Binding(r *http.Request) string { return r.PostFormValue("state") }

func (d *developer) Complete(_ context.Context, r *http.Request, _ *providers.Transaction) (*providers.Identity, error) {
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
	return &providers.Identity{
		UID:   email,
		Email: email,
		Name:  name,
		Raw:   map[string]any{"name": name, "email": email},
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
<label class="field">Email <input name="email" id="email" type="email" autocomplete="email" required></label>
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
	developerForm.Execute(w, map[string]string{"Action": d.callback, "State": state})
}
