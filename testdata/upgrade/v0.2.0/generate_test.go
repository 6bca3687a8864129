// Package upgradegen writes what an application kept from extauth v0.2.0:
// the tokens of finished sign-ins, field by field, as that release's
// docs/after-sign-in.md said to keep them, and the transaction cookies of
// sign-ins, one finished and one still at the provider, with the store
// keys the finished one spent. It runs in a tree of v0.2.0 (commit
// 189bb35), where this file is upgradegen/generate_test.go:
//
//	git archive 189bb35 | tar -x -C /tmp/v0.2.0
//	mkdir /tmp/v0.2.0/upgradegen
//	cp testdata/upgrade/v0.2.0/generate_test.go /tmp/v0.2.0/upgradegen/
//	(cd /tmp/v0.2.0 && UPGRADE_OUT=$PWD/../out go test -count=1 ./upgradegen)
//
// The secrets file it writes is the one the application read.
package upgradegen

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/oidcop"
	"github.com/extauth/extauth/extauthtest/wpoauth"
	"github.com/extauth/extauth/providers"
)

// secrets is the application's secrets file; the providers' URLs are
// variables, since the providers listen where they can.
const secrets = `production:
  oidc_client_id: legacy-client
  oidc_client_secret: legacy-client-secret
  oidc_issuer: ${OIDC_ISSUER}
  blog_oauth2_key: legacy-blog-client
  blog_oauth2_secret: legacy-blog-secret
  blog_oauth2_site: ${BLOG_SITE}
  tenants:
    city-a:
      oidc_client_id: legacy-city-a
      oidc_client_secret: legacy-city-a-secret
      oidc_issuer: ${CITY_A_OIDC_ISSUER}
`

// User is the one user of every provider.
var User = oidcop.User{Sub: "legacy-ada", Email: "ada@legacy.example", EmailVerified: true, Name: "Ada Lovelace", GivenName: "Ada", FamilyName: "Lovelace"}

// Record is what an application kept of a sign-in, v0.2.0's Tokens field
// by field (they marshal redacted): the provider, the tenant, the user and
// the tokens.
type Record struct {
	Provider     string    `json:"provider"`
	Tenant       string    `json:"tenant,omitempty"`
	UID          string    `json:"uid"`
	AccessToken  string    `json:"access_token"`
	RefreshToken string    `json:"refresh_token"`
	TokenType    string    `json:"token_type"`
	Expiry       time.Time `json:"expiry"`
	IDToken      string    `json:"id_token,omitempty"`
}

// Cookie is a transaction cookie as the application set it.
type Cookie struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	Path  string `json:"path"`
}

// Transactions are the cookies of two OpenID Connect sign-ins at the
// application's own site: Finished went through its callback, spending
// StoreKeys; InFlight was still at the provider when the instance that
// started it was replaced.
type Transactions struct {
	CookieKey   string    `json:"cookie_key"`
	BaseURL     string    `json:"base_url"`
	GeneratedAt time.Time `json:"generated_at"`
	Finished    struct {
		Cookie      Cookie   `json:"cookie"`
		CallbackURL string   `json:"callback_url"`
		StoreKeys   []string `json:"store_keys"`
	} `json:"finished"`
	InFlight struct {
		Cookie       Cookie `json:"cookie"`
		AuthorizeURL string `json:"authorize_url"`
	} `json:"in_flight"`
}

// recordingStore is the memory store, and the keys consumed.
type recordingStore struct {
	extauth.Store
	mu   sync.Mutex
	keys []string
}

func (s *recordingStore) Consume(ctx context.Context, key string, until time.Time) (bool, error) {
	s.mu.Lock()
	s.keys = append(s.keys, key)
	s.mu.Unlock()
	return s.Store.Consume(ctx, key, until)
}

func TestGenerate(t *testing.T) {
	out := os.Getenv("UPGRADE_OUT")
	if out == "" {
		t.Fatal("set UPGRADE_OUT to the directory to write")
	}
	// The clock runs two hours behind, as if the application had run then:
	// its transactions and ID tokens are dated so. (Tokens.Expiry is
	// x/oauth2's, by the real clock: an hour after the run.)
	start, began := time.Now().Add(-2*time.Hour).Truncate(time.Second), time.Now()
	now := func() time.Time { return start.Add(time.Since(began)) }

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	base, cityA := "http://localhost:"+port, "http://city-a.localhost:"+port
	const cb = "/users/auth/oidc/callback"

	op := startOP(t, oidcop.Config{ClientID: "legacy-client", ClientSecret: "legacy-client-secret",
		RedirectURIs: []string{base + cb}, AutoApprove: true, Users: []oidcop.User{User}, Now: now})
	opA := startOP(t, oidcop.Config{ClientID: "legacy-city-a", ClientSecret: "legacy-city-a-secret",
		RedirectURIs: []string{cityA + cb}, AutoApprove: true, Users: []oidcop.User{User}, Now: now})
	blog := wpoauth.New("legacy-blog-client", "legacy-blog-secret", base+"/users/auth/blog_oauth2/callback")
	blog.AutoApprove = true
	blog.User = wpoauth.User{ID: 7, Login: "ada", Email: "ada@legacy.example", DisplayName: "Ada Lovelace"}
	blogSrv := httptest.NewServer(blog)
	t.Cleanup(blogSrv.Close)

	vars := map[string]string{"OIDC_ISSUER": op.Issuer(), "CITY_A_OIDC_ISSUER": opA.Issuer(), "BLOG_SITE": blogSrv.URL}
	cfg, err := extauth.ParseConfig([]byte(secrets), extauth.Env("production"),
		extauth.LookupEnv(func(k string) (string, bool) { v, ok := vars[k]; return v, ok }))
	if err != nil {
		t.Fatal(err)
	}
	key := sha256.Sum256([]byte("extauth upgrade golden files"))
	store := &recordingStore{Store: extauth.NewMemoryStore(extauth.MemoryStoreOptions{Now: now})}
	var mu sync.Mutex
	var ids []*extauth.Identity
	a, err := extauth.New(cfg, extauth.Options{
		BaseURL: base, CookieKey: key[:], Store: store, Now: now,
		TenantOf: extauth.SubdomainTenants("localhost"),
		OIDC:     providers.OIDCOptions{Scopes: []string{"openid", "email", "profile", "offline_access"}},
		OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
			mu.Lock()
			ids = append(ids, id)
			mu.Unlock()
			fmt.Fprint(w, "signed in")
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	mux := http.NewServeMux()
	a.Mount(mux)
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)

	tx := Transactions{CookieKey: hex.EncodeToString(key[:]), BaseURL: base, GeneratedAt: now()}
	b := newBrowser(t, port)
	cookie, authorize := b.start(base, "oidc")
	callback := b.redirect(authorize)
	store.mu.Lock()
	store.keys = nil
	store.mu.Unlock()
	if resp := b.get(callback); resp.StatusCode != http.StatusOK {
		t.Fatalf("oidc callback: %d", resp.StatusCode)
	}
	tx.Finished.Cookie, tx.Finished.CallbackURL, tx.Finished.StoreKeys = cookie, callback, store.keys
	b.signIn(cityA, "oidc")
	b.signIn(base, "blog_oauth2")
	tx.InFlight.Cookie, tx.InFlight.AuthorizeURL = newBrowser(t, port).start(base, "oidc")

	var records []Record
	for _, id := range ids {
		records = append(records, Record{Provider: id.Provider, Tenant: id.Tenant, UID: id.UID,
			AccessToken: id.Tokens.AccessToken, RefreshToken: id.Tokens.RefreshToken, TokenType: id.Tokens.TokenType,
			Expiry: id.Tokens.Expiry, IDToken: id.Tokens.IDToken})
	}
	if len(records) != 3 {
		t.Fatalf("%d sign-ins", len(records))
	}
	writeJSON(t, filepath.Join(out, "tokens.json"), records)
	writeJSON(t, filepath.Join(out, "transactions.json"), tx)
	if err := os.WriteFile(filepath.Join(out, "secrets.yml"), []byte(secrets), 0o644); err != nil {
		t.Fatal(err)
	}
}

func startOP(t *testing.T, c oidcop.Config) *oidcop.OP {
	var h http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	c.Issuer = srv.URL + "/op"
	op, err := oidcop.New(c)
	if err != nil {
		t.Fatal(err)
	}
	h = op
	return op
}

// browser keeps cookies, follows no redirect, and reaches every
// *.localhost host at the application.
type browser struct {
	t *testing.T
	c *http.Client
}

func newBrowser(t *testing.T, port string) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, c: &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if host, _, _ := net.SplitHostPort(addr); strings.HasSuffix(host, "localhost") {
				addr = "127.0.0.1:" + port
			}
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}},
	}}
}

func (b *browser) get(u string) *http.Response {
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// start starts a sign-in with provider at site and returns the
// transaction cookie and the provider's authorization URL.
func (b *browser) start(site, provider string) (Cookie, string) {
	resp := b.get(site + "/users/auth/" + provider)
	if resp.StatusCode != http.StatusFound && resp.StatusCode != http.StatusSeeOther {
		b.t.Fatalf("start %s at %s: %d", provider, site, resp.StatusCode)
	}
	var c Cookie
	for _, sc := range resp.Cookies() {
		if strings.Contains(sc.Name, provider) {
			c = Cookie{Name: sc.Name, Value: sc.Value, Path: sc.Path}
		}
	}
	if c.Name == "" {
		b.t.Fatalf("start %s: no transaction cookie", provider)
	}
	return c, resp.Header.Get("Location")
}

// redirect follows u at the provider to where it sends the browser back.
func (b *browser) redirect(u string) string {
	resp := b.get(u)
	loc := resp.Header.Get("Location")
	if _, err := url.Parse(loc); err != nil || loc == "" {
		b.t.Fatalf("%s: %d, no redirect", u, resp.StatusCode)
	}
	return loc
}

func (b *browser) signIn(site, provider string) {
	_, authorize := b.start(site, provider)
	if resp := b.get(b.redirect(authorize)); resp.StatusCode != http.StatusOK {
		b.t.Fatalf("%s callback at %s: %d", provider, site, resp.StatusCode)
	}
}

func writeJSON(t *testing.T, path string, v any) {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}
