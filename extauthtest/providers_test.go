package extauthtest_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	stdhtml "html"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest"
)

// newAppWithProviders serves an application configured for a fresh set of
// fake providers, and waits until it is ready.
func newAppWithProviders(t *testing.T, o extauthtest.ProvidersOptions, edit func(*extauth.Options)) (*app, *extauthtest.Providers) {
	t.Helper()
	var fakes *extauthtest.Providers
	a := newApp(t, func(base string) *extauth.Config {
		fakes = extauthtest.NewProviders(t, base, o)
		return fakes.Config()
	}, edit)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	return a, fakes
}

// Each fake signs its default user in through the real protocol, and the
// hook receives what a mocked sign-in gives it: the same account and
// normalized fields, raw data of the same shape, the same kinds of tokens.
// So DefaultIdentity is what the real provider sends, and a host test can
// move between the two without its assertions changing.
func TestProvidersSignInAsDefaultIdentity(t *testing.T) {
	a, _ := newAppWithProviders(t, extauthtest.ProvidersOptions{}, nil)
	for i, p := range extauth.BuiltinProviders() {
		page := extauthtest.NewBrowser(t).Post(a.URL+"/users/auth/"+string(p), url.Values{"return_to": {"/after"}})
		if page.URL.Path != "/after" {
			t.Fatalf("%s: ended at %s (%d): %s, failure %v", p, page.URL, page.StatusCode, page.Body, a.lastFailure())
		}
		ids := a.identities()
		if len(ids) != i+1 {
			t.Fatalf("%s: hook called %d times", p, len(ids))
		}
		compareIdentity(t, p, ids[i], extauthtest.DefaultIdentity(p))
	}
}

func compareIdentity(t *testing.T, p extauth.Provider, got *extauth.Identity, want extauth.Identity) {
	t.Helper()
	norm := func(id *extauth.Identity) []any {
		return []any{id.UID, id.Email, id.EmailVerified, id.Name, id.FirstName, id.LastName, id.NickName,
			id.Description, id.Location, id.Image, id.SessionID != "", id.SAML != nil}
	}
	if g, w := norm(got), norm(&want); !reflect.DeepEqual(g, w) {
		t.Errorf("%s: normalized fields\n got %v\nwant %v", p, g, w)
	}
	tokens := func(tk extauth.Tokens) []bool {
		return []bool{tk.AccessToken != "", tk.RefreshToken != "", tk.TokenType != "", tk.Secret != "", !tk.Expiry.IsZero(), tk.IDToken != ""}
	}
	if g, w := tokens(got.Tokens), tokens(want.Tokens); !slices.Equal(g, w) {
		t.Errorf("%s: tokens set (access, refresh, type, secret, expiry, id token): got %v, want %v", p, g, w)
	}
	if g, w := shape(got.Raw), shape(want.Raw); !slices.Equal(g, w) {
		t.Errorf("%s: raw data\n got %v\nwant %v", p, g, w)
	}
	if got.SAML != nil && want.SAML != nil {
		if got.SAML.NameID != want.SAML.NameID || got.SAML.NameIDFormat != want.SAML.NameIDFormat ||
			!reflect.DeepEqual(got.SAML.Attributes, want.SAML.Attributes) {
			t.Errorf("%s: SAML info\n got %+v\nwant %+v", p, got.SAML, want.SAML)
		}
	}
}

// shape lists the paths of a decoded JSON value with the Go type of each
// leaf, sorted.
func shape(v any) []string {
	var out []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				walk(path+"."+k, e)
			}
		case map[string][]string:
			for k, e := range v {
				walk(path+"."+k, e)
			}
		default:
			out = append(out, fmt.Sprintf("%s:%T", path, v))
		}
	}
	walk("", v)
	sort.Strings(out)
	return out
}

// Each fault of SetFault's table reaches OnFailure with its code, and
// NoFault restores the provider. Hang is played against an application
// whose time-out is short, every other fault against one whose time-out no
// loaded machine reaches, so that a slow answer is never taken for a hang.
func TestProvidersFaults(t *testing.T) {
	a, fakes := newAppWithProviders(t, extauthtest.ProvidersOptions{}, func(o *extauth.Options) { o.Timeout = time.Minute })
	hung, hangs := newAppWithProviders(t, extauthtest.ProvidersOptions{}, func(o *extauth.Options) { o.Timeout = 300 * time.Millisecond })
	want := map[extauthtest.Fault]extauth.Code{
		extauthtest.Deny:         extauth.CodeAccessDenied,
		extauthtest.ServerError:  extauth.CodeProviderUnavailable,
		extauthtest.Hang:         extauth.CodeTimeout,
		extauthtest.HugeBody:     extauth.CodeInvalidResponse,
		extauthtest.BadSignature: extauth.CodeInvalidResponse,
		extauthtest.WrongIssuer:  extauth.CodeInvalidResponse,
		extauthtest.Expired:      extauth.CodeInvalidResponse,
	}
	faults := []extauthtest.Fault{extauthtest.Deny, extauthtest.ServerError, extauthtest.Hang, extauthtest.HugeBody,
		extauthtest.BadSignature, extauthtest.WrongIssuer, extauthtest.Expired}
	played := 0
	for _, p := range extauth.BuiltinProviders() {
		for _, f := range faults {
			a, fakes := a, fakes
			if f == extauthtest.Hang {
				a, fakes = hung, hangs
			}
			if err := fakes.SetFault(p, f); err != nil {
				if !strings.Contains(err.Error(), "cannot play") {
					t.Errorf("%s %s: %v", p, f, err)
				}
				continue
			}
			played++
			page := extauthtest.NewBrowser(t).Post(a.URL+"/users/auth/"+string(p), nil)
			if e := a.lastFailure(); page.StatusCode != want[f].HTTPStatus() || e == nil || e.Code != want[f] || e.Provider != string(p) {
				t.Errorf("%s %s: page %d, OnFailure saw %v; want %s", p, f, page.StatusCode, e, want[f])
			}
		}
		if err := fakes.SetFault(p, extauthtest.NoFault); err != nil {
			t.Fatal(err)
		}
		n := len(a.identities())
		if page := extauthtest.NewBrowser(t).Post(a.URL+"/users/auth/"+string(p), url.Values{"return_to": {"/after"}}); page.URL.Path != "/after" || len(a.identities()) != n+1 {
			t.Errorf("%s after NoFault: ended at %s (%d), failure %v", p, page.URL, page.StatusCode, a.lastFailure())
		}
	}
	// Every provider denies; the five with a token endpoint play
	// ServerError, Hang and HugeBody; the two OpenID ones and SAML the
	// three faults of a signed ID token or assertion.
	if want := 6 + 5*3 + 2*3 + 3; played != want {
		t.Errorf("played %d faults, want %d", played, want)
	}
	if err := fakes.SetFault(extauth.Microblog, extauthtest.Expired); err == nil {
		t.Error("microblog played Expired")
	}
}

// Started interactively, each fake shows its login or consent page, and a
// person's clicks sign in (or refuse).
func TestProvidersInteractive(t *testing.T) {
	a, _ := newAppWithProviders(t, extauthtest.ProvidersOptions{Interactive: true}, nil)
	for _, p := range extauth.BuiltinProviders() {
		b := extauthtest.NewBrowser(t)
		consent := b.Post(a.URL+"/users/auth/"+string(p), url.Values{"return_to": {"/after"}})
		if consent.URL.Host == strings.TrimPrefix(a.URL, "http://") {
			t.Fatalf("%s: no consent page, ended at %s", p, consent.URL)
		}
		if page := b.Click(consent, interactiveApprove[p]); page.URL.Path != "/after" {
			t.Errorf("%s: after %q ended at %s (%d) %v", p, interactiveApprove[p], page.URL, page.StatusCode, a.lastFailure())
		}
	}
	if n := len(a.identities()); n != 6 {
		t.Errorf("%d sign-ins, want 6", n)
	}
}

// With the SP's key pair, the SAML IdP's login page sends the signed
// AuthnRequest back as it came (the HTTP-Redirect binding's query), and
// crewjam's IdP, which refuses an unsigned request from an SP whose
// metadata says it signs them, verifies its signature again: approving
// signs in, refusing reaches OnFailure, and a page whose request was
// altered on the way is refused by the IdP.
func TestProvidersInteractiveSignedSAML(t *testing.T) {
	a, _ := newAppWithProviders(t, extauthtest.ProvidersOptions{Only: []extauth.Provider{extauth.SAML}, Interactive: true, SAMLKeyPair: true}, nil)
	login := func() (*extauthtest.Browser, *extauthtest.Page) {
		b := extauthtest.NewBrowser(t)
		page := b.Post(a.URL+"/users/auth/saml", url.Values{"return_to": {"/after"}})
		if !strings.Contains(page.Body, `name="RedirectQuery"`) || !strings.Contains(page.Body, "Signature=") {
			t.Fatalf("login page at %s (%d) without the signed query: %s", page.URL, page.StatusCode, page.Body)
		}
		return b, page
	}
	b, page := login()
	if page = b.Click(page, "Approve"); page.URL.Path != "/after" || len(a.identities()) != 1 {
		t.Fatalf("approve: ended at %s (%d), failure %v", page.URL, page.StatusCode, a.lastFailure())
	}
	b, page = login()
	if page = b.Click(page, "Deny"); page.StatusCode != extauth.CodeAccessDenied.HTTPStatus() ||
		a.lastFailure() == nil || a.lastFailure().Code != extauth.CodeAccessDenied {
		t.Fatalf("deny: ended at %s (%d), failure %v", page.URL, page.StatusCode, a.lastFailure())
	}
	for name, edit := range map[string]func(string) string{
		"RelayState changed": func(q string) string {
			v, _ := url.ParseQuery(q)
			return strings.Replace(q, "RelayState="+url.QueryEscape(v.Get("RelayState")), "RelayState=other", 1)
		},
		"signature dropped": func(q string) string { return q[:strings.Index(q, "&Signature=")] },
	} {
		b, page = login()
		q := regexp.MustCompile(`name="RedirectQuery" value="([^"]*)"`).FindStringSubmatch(page.Body)
		if q == nil {
			t.Fatalf("%s: no query in %s", name, page.Body)
		}
		query := stdhtml.UnescapeString(q[1])
		altered := edit(query)
		if altered == query {
			t.Fatalf("%s: the edit changed nothing in %s", name, query)
		}
		page = b.Submit(page, "Approve", url.Values{"RedirectQuery": {altered}})
		if page.StatusCode != http.StatusBadRequest || len(a.identities()) != 1 {
			t.Errorf("%s: ended at %s (%d), %d sign-ins: %s", name, page.URL, page.StatusCode, len(a.identities()), page.Body)
		}
	}
}

// providersModes are the ways StartProviders can be set up that change the
// application's configuration.
var providersModes = map[string]extauthtest.ProvidersOptions{
	"default":                     {},
	"SAML key pair":               {SAMLKeyPair: true},
	"OIDC high assurance":         {OIDCHighAssurance: true},
	"high assurance, SAML keys":   {OIDCHighAssurance: true, SAMLKeyPair: true},
	"only OIDC, high assurance":   {Only: []extauth.Provider{extauth.OIDC}, OIDCHighAssurance: true},
	"only OIDC, FAPI 2.0":         {Only: []extauth.Provider{extauth.OIDC}, OIDCFAPI2: true},
	"path prefix and slugs":       {PathPrefix: "/auth/", Slugs: map[extauth.Provider]string{extauth.Microblog: "twitter"}},
	"interactive, high assurance": {Interactive: true, OIDCHighAssurance: true, SAMLKeyPair: true},
}

// In every mode SecretsYAML is the configuration Config returns, as a
// secrets file, and an application that reads it signs in with each
// provider. (cmd/extauth's TestCheckProvidersSecretsYAML runs extauth
// check on the same files.)
func TestProvidersSecretsYAML(t *testing.T) {
	for name, o := range providersModes {
		t.Run(name, func(t *testing.T) {
			var fakes *extauthtest.Providers
			a := newApp(t, func(base string) *extauth.Config {
				fakes = extauthtest.NewProviders(t, base, o)
				cfg, err := extauth.ParseConfig(fakes.SecretsYAML())
				if err != nil {
					t.Fatalf("%v\n%s", err, fakes.SecretsYAML())
				}
				want := fakes.Config()
				cfg.Warnings, want.Warnings = nil, nil
				if !reflect.DeepEqual(cfg, want) {
					g, _ := json.Marshal(secretsOf(cfg))
					w, _ := json.Marshal(secretsOf(want))
					t.Fatalf("parsed\n%s\nwant\n%s\nfrom\n%s", g, w, fakes.SecretsYAML())
				}
				return cfg
			}, func(opts *extauth.Options) { opts.PathPrefix, opts.Slugs = o.PathPrefix, o.Slugs })
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := a.Ready(ctx); err != nil {
				t.Fatal(err)
			}
			prefix := cmp.Or(o.PathPrefix, "/users/auth/")
			for _, p := range fakes.Config().Providers() {
				slug := cmp.Or(o.Slugs[p], string(p))
				b := extauthtest.NewBrowser(t)
				page := b.Post(a.URL+prefix+slug, url.Values{"return_to": {"/after"}})
				if o.Interactive {
					page = b.Click(page, interactiveApprove[p])
				}
				if page.URL.Path != "/after" {
					t.Errorf("%s: ended at %s (%d), failure %v", p, page.URL, page.StatusCode, a.lastFailure())
				}
			}
		})
	}
}

// interactiveApprove is the button that signs the first user in on each
// provider's consent or login page.
var interactiveApprove = map[extauth.Provider]string{
	extauth.Microblog:    "Sign in as @demo_user (Demo User)",
	extauth.Socialnet:    "Continue as Demo Person",
	extauth.SearchOAuth2: "Approve",
	extauth.BlogOAuth2:   "Approve",
	extauth.SAML:         "Approve",
	extauth.OIDC:         "Approve",
}

// secretsOf is cfg with its secrets in clear, to compare.
func secretsOf(c *extauth.Config) map[string]any {
	oauth := func(p extauth.OAuthProvider) []string { return []string{p.Key, p.Secret.Value(), p.Site} }
	add := c.OIDC.Additional
	return map[string]any{
		"microblog": oauth(c.Microblog), "socialnet": oauth(c.Socialnet), "search_oauth2": oauth(c.SearchOAuth2),
		"blog_oauth2": oauth(c.BlogOAuth2),
		"saml": []any{c.SAML.SPEntityID, c.SAML.IdPMetadataURL, c.SAML.Additional.Certificate,
			c.SAML.Additional.PrivateKey.Value(), c.SAML.Additional.Security.LogoutRequestsSigned},
		"oidc": []any{c.OIDC.ClientID, c.OIDC.ClientSecret.Value(), c.OIDC.Issuer, add.ClientAuthMethod,
			add.PrivateKey.Value(), add.PushedAuthorizationRequests, add.RequestObject,
			add.IDTokenEncryptedResponseAlg, add.IDTokenEncryptedResponseEnc},
	}
}

// The fakes are registered for the application's own routes, and refuse
// any other: a test cannot pass against a fake that accepts anything.
func TestProvidersRegisterTheHostsCallbacks(t *testing.T) {
	a, _ := newAppWithProviders(t, extauthtest.ProvidersOptions{PathPrefix: "/auth/"}, nil)
	// The application serves /users/auth/, the fakes expect /auth/.
	page := extauthtest.NewBrowser(t).Post(a.URL+"/users/auth/oidc", nil)
	if page.StatusCode != http.StatusBadRequest || !strings.Contains(page.Body, "redirect_uri") || len(a.identities()) != 0 {
		t.Fatalf("a callback URL the fake does not know: ended at %s (%d) %s", page.URL, page.StatusCode, page.Body)
	}
}

// Mounted on the application's own mux, the fakes share its origin, and
// their pages link under their prefix.
func TestMountProviders(t *testing.T) {
	var fakes *extauthtest.Providers
	var auth *extauth.Auth
	var mu sync.Mutex
	var signedIn []string
	srv := extauthtest.Serve(t, func(base string) http.Handler {
		mux := http.NewServeMux()
		var err error
		fakes, err = extauthtest.MountProviders(mux, base, "/dev/", extauthtest.ProvidersOptions{Interactive: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(fakes.Close)
		auth, err = extauth.New(fakes.Config(), extauth.Options{BaseURL: base, CookieKey: make([]byte, 32),
			Logger: slog.New(slog.DiscardHandler),
			OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
				mu.Lock()
				signedIn = append(signedIn, id.Provider)
				mu.Unlock()
				http.Redirect(w, r, "/done", http.StatusSeeOther)
			}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { auth.Close() })
		auth.Mount(mux)
		return mux
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := auth.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	clicks := map[extauth.Provider]string{
		extauth.Microblog: "Sign in as @demo_user (Demo User)", extauth.Socialnet: "Continue as Demo Person",
		extauth.SearchOAuth2: "Approve", extauth.BlogOAuth2: "Approve", extauth.SAML: "Approve", extauth.OIDC: "Approve",
	}
	for _, p := range extauth.BuiltinProviders() {
		if got, want := fakes.URL(p), srv.URL+"/dev/"+string(p); got != want {
			t.Errorf("%s at %s, want %s", p, got, want)
		}
		b := extauthtest.NewBrowser(t)
		consent := b.Post(srv.URL+"/users/auth/"+string(p), nil)
		if !strings.HasPrefix(consent.URL.Path, "/dev/"+string(p)+"/") {
			t.Fatalf("%s: consent page at %s", p, consent.URL)
		}
		if page := b.Click(consent, clicks[p]); page.URL.Path != "/done" {
			t.Errorf("%s: ended at %s (%d) %s", p, page.URL, page.StatusCode, page.Body)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(signedIn) != 6 {
		t.Fatalf("signed in with %v", signedIn)
	}
	if _, err := extauthtest.MountProviders(http.NewServeMux(), srv.URL, "dev", extauthtest.ProvidersOptions{}); err == nil {
		t.Error("a prefix without slashes")
	}
}

// TestProvidersOIDCHighAssurance: with OIDCHighAssurance, the OpenID
// provider takes private_key_jwt only, requires pushed and signed requests
// and encrypts its ID tokens, and Config registers the application with a
// key and no secret: the sign-in goes through all of that and gives the
// same identity as ever.
func TestProvidersOIDCHighAssurance(t *testing.T) {
	a, fakes := newAppWithProviders(t, extauthtest.ProvidersOptions{Only: []extauth.Provider{extauth.OIDC}, OIDCHighAssurance: true}, nil)
	cfg := fakes.Config().OIDC
	if !cfg.ClientSecret.IsZero() || cfg.Additional.ClientAuthMethod != "private_key_jwt" || cfg.Additional.PrivateKey.IsZero() {
		t.Fatalf("config %+v", cfg)
	}
	page := extauthtest.NewBrowser(t).Post(a.URL+"/users/auth/oidc", url.Values{"return_to": {"/after"}})
	if page.URL.Path != "/after" {
		t.Fatalf("ended at %s (%d): %s, failure %v", page.URL, page.StatusCode, page.Body, a.lastFailure())
	}
	compareIdentity(t, extauth.OIDC, a.identities()[0], extauthtest.DefaultIdentity(extauth.OIDC))
	if q := fakes.OIDC.LastAuthorizeQuery(); q.Get("request_uri") == "" || q.Has("state") {
		t.Errorf("the request was not pushed: %v", q)
	}
	if as := fakes.OIDC.Assertions(); len(as) != 2 || as[0].Endpoint != "par" || as[1].Endpoint != "token" {
		t.Errorf("client assertions %+v", as)
	}
}

// TestProvidersOIDCFAPI2: with OIDCFAPI2, the OpenID provider enforces the
// FAPI 2.0 Security Profile, requires DPoP with nonces and encrypts its ID
// tokens, and Config registers the application with profile: fapi2,
// dpop: true and an EC key: the sign-in gives the same identity as ever,
// with DPoP-bound tokens, which Auth.Client uses at UserInfo.
func TestProvidersOIDCFAPI2(t *testing.T) {
	a, fakes := newAppWithProviders(t, extauthtest.ProvidersOptions{Only: []extauth.Provider{extauth.OIDC}, OIDCFAPI2: true}, nil)
	cfg := fakes.Config().OIDC
	if !cfg.ClientSecret.IsZero() || cfg.Additional.Profile != "fapi2" || !cfg.Additional.DPoP || cfg.Additional.PrivateKey.IsZero() {
		t.Fatalf("config %+v", cfg)
	}
	page := extauthtest.NewBrowser(t).Post(a.URL+"/users/auth/oidc", url.Values{"return_to": {"/after"}})
	if page.URL.Path != "/after" {
		t.Fatalf("ended at %s (%d): %s, failure %v", page.URL, page.StatusCode, page.Body, a.lastFailure())
	}
	id := a.identities()[0]
	compareIdentity(t, extauth.OIDC, id, extauthtest.DefaultIdentity(extauth.OIDC))
	if id.Tokens.TokenType != "DPoP" || id.Tokens.DPoPKey == "" {
		t.Errorf("tokens %v", id.Tokens)
	}
	if ps := fakes.OIDC.DPoPProofs(); len(ps) < 2 || ps[0].Endpoint != "par" {
		t.Errorf("proofs %+v", ps)
	}
	hc, err := a.Client(context.Background(), id, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(fakes.OIDC.Issuer() + "/userinfo")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("UserInfo through Auth.Client: %d", resp.StatusCode)
	}
}
