package oidcop

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/extauth/extauth/extauthtest/internal/endpoint"
)

// LogoutFault breaks a logout token in one of the ways Back-Channel Logout
// 1.0, 2.6 says a client must refuse.
type LogoutFault string

// The logout token faults.
const (
	// LogoutUnsigned sends the token with alg none and no signature.
	LogoutUnsigned LogoutFault = "unsigned"
	// LogoutWrongKey signs with a key the provider does not publish,
	// under the active key's kid.
	LogoutWrongKey LogoutFault = "wrong_key"
	// LogoutWrongAudience issues the token to another client.
	LogoutWrongAudience LogoutFault = "wrong_audience"
	// LogoutWithNonce adds a nonce, as an ID token has.
	LogoutWithNonce LogoutFault = "with_nonce"
	// LogoutNoEvents leaves the events claim out.
	LogoutNoEvents LogoutFault = "no_events"
	// LogoutWrongEvent has events name another event.
	LogoutWrongEvent LogoutFault = "wrong_event"
	// LogoutNoSubNoSid leaves out both sub and sid.
	LogoutNoSubNoSid LogoutFault = "no_sub_no_sid"
	// LogoutOldIAT dates the token an hour back (its exp still ahead).
	LogoutOldIAT LogoutFault = "old_iat"
	// LogoutNoJTI leaves jti out.
	LogoutNoJTI LogoutFault = "no_jti"
	// LogoutIDTokenType types the token as another kind of JWT.
	LogoutIDTokenType LogoutFault = "at_jwt_type"
	// LogoutFarExp sets exp ten years ahead: a valid token, whose jti a
	// client must still not keep for ten years.
	LogoutFarExp LogoutFault = "far_exp"
)

// backchannelEvent is the events member of a logout token.
const backchannelEvent = "http://schemas.openid.net/event/backchannel-logout"

// LogoutToken returns a logout token for the user sub and the session sid
// (either may be empty), signed like the provider's ID tokens (and
// encrypted like them under IDTokenEncryption), broken by faults.
func (op *OP) LogoutToken(sub, sid string, faults ...LogoutFault) (string, error) {
	now := op.now()
	claims := map[string]any{
		"iss":    op.cfg.Issuer,
		"aud":    op.cfg.ClientID,
		"iat":    now.Unix(),
		"exp":    now.Add(2 * time.Minute).Unix(),
		"jti":    endpoint.Random(16),
		"events": map[string]any{backchannelEvent: map[string]any{}},
	}
	if sub != "" {
		claims["sub"] = sub
	}
	if sid != "" {
		claims["sid"] = sid
	}
	header := map[string]any{"typ": "logout+jwt"}
	has := func(f LogoutFault) bool { return slices.Contains(faults, f) }
	if has(LogoutNoExp) {
		delete(claims, "exp")
	}
	if has(LogoutFarExp) {
		claims["exp"] = now.AddDate(10, 0, 0).Unix()
	}
	switch {
	case has(LogoutWrongAudience):
		claims["aud"] = "someone-else"
	case has(LogoutWithNonce):
		claims["nonce"] = endpoint.Random(8)
	case has(LogoutNoEvents):
		delete(claims, "events")
	case has(LogoutWrongEvent):
		claims["events"] = map[string]any{"https://schemas.openid.net/secevent/risc/event-type/account-disabled": map[string]any{}}
	case has(LogoutNoSubNoSid):
		delete(claims, "sub")
		delete(claims, "sid")
	case has(LogoutOldIAT):
		claims["iat"] = now.Add(-time.Hour).Unix()
	case has(LogoutNoJTI):
		delete(claims, "jti")
	case has(LogoutIDTokenType):
		header["typ"] = "at+jwt"
	}
	switch {
	case has(LogoutUnsigned):
		h, err := encodeParts(map[string]any{"alg": "none", "typ": "logout+jwt"}, claims)
		return h + ".", err
	case has(LogoutWrongKey):
		op.mu.Lock()
		key := *op.keys[op.active]
		op.mu.Unlock()
		var err error
		if key.priv, err = GenerateKey(key.alg); err != nil {
			return "", err
		}
		header["alg"], header["kid"] = key.alg, key.kid
		input, err := encodeParts(header, claims)
		if err != nil {
			return "", err
		}
		sig, err := sign(&key, input)
		if err != nil {
			return "", err
		}
		return input + "." + base64.RawURLEncoding.EncodeToString(sig), nil
	}
	signed, err := op.SignJWT(header, claims)
	if err != nil {
		return "", err
	}
	// Like oidc-provider, a provider that encrypts ID tokens encrypts its
	// logout tokens the same way.
	return op.encryptIDToken(signed)
}

// SendBackchannelLogout posts a logout token to the client's
// BackchannelLogoutURI, as the provider does when a session ends, and
// returns the client's status and body.
func (op *OP) SendBackchannelLogout(ctx context.Context, logoutToken string) (int, string, error) {
	if op.cfg.BackchannelLogoutURI == "" {
		return 0, "", fmt.Errorf("oidcop: no BackchannelLogoutURI configured")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, op.cfg.BackchannelLogoutURI,
		strings.NewReader(url.Values{"logout_token": {logoutToken}}.Encode()))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := op.cfg.HTTPClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(body), err
}

// FrontchannelLogoutURL is the URL the provider has the browser load (in a
// frame) to end session sid at the client: its FrontchannelLogoutURI with
// iss and sid.
func (op *OP) FrontchannelLogoutURL(sid string) string {
	q := url.Values{"iss": {op.cfg.Issuer}, "sid": {sid}}
	sep := "?"
	if strings.Contains(op.cfg.FrontchannelLogoutURI, "?") {
		sep = "&"
	}
	return op.cfg.FrontchannelLogoutURI + sep + q.Encode()
}

// issuedTo reports whether iss is the issuer of the tokens of an account
// whose sub is sub.
func (op *OP) issuedTo(iss any, sub string) bool {
	for _, u := range op.cfg.Users {
		if u.Sub == sub && iss == op.issuerOf(u) {
			return true
		}
	}
	return false
}

// Sessions lists the sids of the live sessions of user sub.
func (op *OP) Sessions(sub string) []string {
	op.mu.Lock()
	defer op.mu.Unlock()
	var out []string
	for sid, s := range op.sessions.All() {
		if s.user.Sub == sub {
			out = append(out, sid)
		}
	}
	slices.Sort(out)
	return out
}

// endOPSession ends session sid here and tells the client over the
// back channel, as a provider does. It returns the client's status, 0 when
// no back-channel URI is registered.
func (op *OP) endOPSession(ctx context.Context, sid string) (int, error) {
	op.mu.Lock()
	s, ok := op.sessions.Take(sid)
	op.mu.Unlock()
	if !ok || op.cfg.BackchannelLogoutURI == "" {
		return 0, nil
	}
	tok, err := op.LogoutToken(s.user.Sub, s.sid)
	if err != nil {
		return 0, err
	}
	status, _, err := op.SendBackchannelLogout(ctx, tok)
	return status, err
}

// EndBrowserSession ends the session the browser of r has at the
// provider (its cookie), tells the client over the back channel as a
// logout does, and clears the cookie: for a provider's own logout
// endpoint built on the OP (Auth0's /v2/logout). It reports whether there
// was a session.
func (op *OP) EndBrowserSession(w http.ResponseWriter, r *http.Request) (bool, error) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return false, nil
	}
	op.mu.Lock()
	_, ok := op.sessions.Get(c.Value)
	op.mu.Unlock()
	if _, err := op.endOPSession(r.Context(), c.Value); err != nil {
		return ok, err
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Path: op.prefix + "/", MaxAge: -1})
	return ok, nil
}

// endSession is a pending RP-initiated logout, waiting for the user to
// confirm on the provider's page.
type endSession struct {
	sid         string
	redirectURI string
	state       string
}

// endSession serves the end_session_endpoint (RP-Initiated Logout 1.0, 2
// and 3): it checks the client, the registered post_logout_redirect_uri
// and the id_token_hint (its own, for this client), then asks the user,
// or with AutoApprove signs them out at once.
func (op *OP) endSession(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "malformed request", http.StatusBadRequest)
		return
	}
	f := r.Form
	if id := f.Get("client_id"); id != "" && id != op.cfg.ClientID {
		http.Error(w, "unknown client", http.StatusBadRequest)
		return
	}
	redirectURI := f.Get("post_logout_redirect_uri")
	if redirectURI != "" && !slices.Contains(op.cfg.PostLogoutRedirectURIs, redirectURI) {
		http.Error(w, "post_logout_redirect_uri is not registered", http.StatusBadRequest)
		return
	}
	sid := ""
	if hint := f.Get("id_token_hint"); hint != "" {
		claims, err := op.verifyOwn(hint)
		if err != nil {
			http.Error(w, "id_token_hint is not valid: "+err.Error(), http.StatusBadRequest)
			return
		}
		sid, _ = claims["sid"].(string)
	} else if c, err := r.Cookie(sessionCookie); err == nil {
		sid = c.Value
	}
	es := &endSession{sid: sid, redirectURI: redirectURI, state: f.Get("state")}
	if op.cfg.AutoApprove {
		op.finishEndSession(w, r, es)
		return
	}
	id := endpoint.Random(16)
	op.mu.Lock()
	op.logouts.Put(id, es, op.now().Add(interactionTTL))
	op.mu.Unlock()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_ = op.page(logoutPages).Execute(w, map[string]any{"Action": op.prefix + "/end_session/decision", "Interaction": id, "Client": op.cfg.ClientID})
}

var logoutPages = newPages("logout", `{{define "title"}}Sign out{{end}}
{{define "main"}}<div class="card">
<h1>Sign out of the provider too?</h1>
<p><strong>{{.Client}}</strong> signed you out and asks to end your session here as well. Staying signed in here lets you sign in again without a password.</p>
<form method="post" action="{{.Action}}" class="actions">
<input type="hidden" name="interaction" value="{{.Interaction}}">
<button type="submit" name="decision" value="logout" id="op-logout" class="primary">Sign out</button>
<button type="submit" name="decision" value="stay" id="op-stay">Stay signed in</button>
</form>
</div>{{end}}`)

func (op *OP) endSessionDecision(w http.ResponseWriter, r *http.Request) {
	es, ok := takeInteraction(op, w, r, op.logouts)
	if !ok {
		return
	}
	if r.PostForm.Get("decision") != "logout" {
		es.sid = ""
	}
	op.finishEndSession(w, r, es)
}

// finishEndSession ends the session (unless the user chose to stay), tells
// the client over the back channel, and returns the browser to the client
// with its state.
func (op *OP) finishEndSession(w http.ResponseWriter, r *http.Request, es *endSession) {
	if es.sid != "" {
		if _, err := op.endOPSession(r.Context(), es.sid); err != nil {
			http.Error(w, "back-channel logout failed: "+err.Error(), http.StatusBadGateway)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: sessionCookie, Path: op.prefix + "/", MaxAge: -1})
	}
	if es.redirectURI == "" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "You are signed out.")
		return
	}
	target := es.redirectURI
	if es.state != "" {
		sep := "?"
		if strings.Contains(target, "?") {
			sep = "&"
		}
		target += sep + url.Values{"state": {es.state}}.Encode()
	}
	http.Redirect(w, r, target, http.StatusFound)
}

// verifyOwn checks that token is one of this provider's ID tokens for the
// client (signature with a published key, iss, aud) and returns its
// claims; it may have expired, as an id_token_hint may.
func (op *OP) verifyOwn(token string) (map[string]any, error) {
	jws, err := jose.ParseSignedCompact(token, []jose.SignatureAlgorithm{jose.SignatureAlgorithm(op.cfg.Alg)})
	if err != nil {
		return nil, err
	}
	kid := jws.Signatures[0].Protected.KeyID
	op.mu.Lock()
	var pub any
	for _, k := range op.keys {
		if k.kid == kid {
			pub = k.priv.Public()
		}
	}
	op.mu.Unlock()
	if pub == nil {
		return nil, fmt.Errorf("unknown kid")
	}
	payload, err := jws.Verify(pub)
	if err != nil {
		return nil, err
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		return nil, err
	}
	sub, _ := claims["sub"].(string)
	if !op.issuedTo(claims["iss"], sub) || claims["aud"] != op.cfg.ClientID {
		return nil, fmt.Errorf("not issued by this provider to this client")
	}
	return claims, nil
}

var accountPages = newPages("account", `{{define "title"}}Your account{{end}}
{{define "main"}}<div class="card">
<h1>Your account</h1>
{{if .Session}}<p id="op-signed-in">Signed in as <strong>{{.Session.User.Name}}</strong> <span class="muted small">(session <code>{{.Session.SID}}</code>)</span>.</p>
<p class="muted">Signing out here ends your session at every application you signed in to with it: each is told over the back channel.</p>
<form method="post" class="actions"><button type="submit" id="op-logout-everywhere" class="primary">Sign out of every application</button></form>
{{else}}<p id="op-signed-out">Not signed in at the provider.</p>{{end}}
</div>{{end}}`)

// account is the provider's own page: it shows the browser's session and
// signs it out of every application, which the provider then tells over
// the back channel, as "sign out everywhere" does at a real provider.
func (op *OP) account(w http.ResponseWriter, r *http.Request) {
	var sess *session
	if c, err := r.Cookie(sessionCookie); err == nil {
		op.mu.Lock()
		sess, _ = op.sessions.Get(c.Value)
		op.mu.Unlock()
	}
	switch r.Method {
	case http.MethodGet:
	case http.MethodPost:
		if sess != nil {
			if _, err := op.endOPSession(r.Context(), sess.sid); err != nil {
				http.Error(w, "back-channel logout failed: "+err.Error(), http.StatusBadGateway)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: sessionCookie, Path: op.prefix + "/", MaxAge: -1})
		}
		http.Redirect(w, r, op.prefix+"/account", http.StatusSeeOther)
		return
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	var data struct {
		Session *struct {
			User User
			SID  string
		}
	}
	if sess != nil {
		data.Session = &struct {
			User User
			SID  string
		}{sess.user, sess.sid}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_ = op.page(accountPages).Execute(w, data)
}
