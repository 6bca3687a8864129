package extauth_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/oidcop"
	"github.com/extauth/extauth/extauthtest/wpoauth"
)

// What applications kept from earlier releases, as those releases wrote
// it (testdata/upgrade/README.md says how): testdata/upgrade/v0.2.0 holds
// the secrets file a v0.2.0 application read, the tokens of three finished
// sign-ins (its own OpenID provider, a tenant's, and blog_oauth2's), field
// by field as its docs said to keep them, and the transaction cookies of a
// finished sign-in and of one still at the provider; v0.1.0 the secrets
// file and the transaction cookies, which v0.1.0 sealed as JSON.

// legacyRecord is a record of tokens.json.
type legacyRecord struct {
	Provider     string    `json:"provider"`
	Tenant       string    `json:"tenant"`
	UID          string    `json:"uid"`
	AccessToken  string    `json:"access_token"`
	RefreshToken string    `json:"refresh_token"`
	TokenType    string    `json:"token_type"`
	Expiry       time.Time `json:"expiry"`
	IDToken      string    `json:"id_token"`
}

// identity is the Identity an application rebuilds from the record to
// renew its tokens, as v0.2.0's docs/after-sign-in.md showed.
func (r legacyRecord) identity() *extauth.Identity {
	return &extauth.Identity{Provider: r.Provider, Tenant: r.Tenant, UID: r.UID, Tokens: extauth.Tokens{
		AccessToken: r.AccessToken, RefreshToken: r.RefreshToken, TokenType: r.TokenType, Expiry: r.Expiry, IDToken: r.IDToken,
	}}
}

// issuedBy is r with its ID token's iss set to iss: the recording's
// OpenID providers listened on ports of their own, and the tests' start
// on others, so their issuers differ by the port alone. A real provider's
// issuer stays, and AdoptTokens compares it; the signature is the
// recording's, which nothing that reads the stored ID token checks.
func (r legacyRecord) issuedBy(t *testing.T, iss string) legacyRecord {
	t.Helper()
	parts := strings.Split(r.IDToken, ".")
	if len(parts) != 3 {
		return r
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(raw, &claims); err != nil {
		t.Fatal(err)
	}
	claims["iss"] = iss
	raw, _ = json.Marshal(claims)
	parts[1] = base64.RawURLEncoding.EncodeToString(raw)
	r.IDToken = strings.Join(parts, ".")
	return r
}

type legacyCookie struct{ Name, Value, Path string }

type legacyTransactions struct {
	CookieKey   string    `json:"cookie_key"`
	BaseURL     string    `json:"base_url"`
	GeneratedAt time.Time `json:"generated_at"`
	Finished    struct {
		Cookie      legacyCookie `json:"cookie"`
		CallbackURL string       `json:"callback_url"`
		StoreKeys   []string     `json:"store_keys"`
	} `json:"finished"`
	InFlight struct {
		Cookie       legacyCookie `json:"cookie"`
		AuthorizeURL string       `json:"authorize_url"`
	} `json:"in_flight"`
}

const legacyDir = "testdata/upgrade"

// legacyUser is the user of every provider of the generator.
var legacyUser = oidcop.User{Sub: "legacy-ada", Email: "ada@legacy.example", EmailVerified: true, Name: "Ada Lovelace", GivenName: "Ada", FamilyName: "Lovelace"}

// readLegacy reads the file name of release v.
func readLegacy(t *testing.T, v, name string, into any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(legacyDir, v, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, into); err != nil {
		t.Fatalf("%s/%s: %v", v, name, err)
	}
}

// legacyProviders are the providers of the generator, started afresh:
// they honour the refresh tokens of the records, as the generator's would
// have had they kept running.
type legacyProviders struct {
	op, cityA *oidcop.OP
	blog      *wpoauth.Server
	vars      map[string]string
}

func startLegacyProviders(t *testing.T, records []legacyRecord, redirect func(tenant, provider string) string, now func() time.Time) *legacyProviders {
	t.Helper()
	start := func(id, secret, tenant string) *oidcop.OP {
		srv, p := opServer(t)
		op, err := oidcop.New(oidcop.Config{Issuer: srv.URL + "/op", ClientID: id, ClientSecret: secret,
			RedirectURIs: []string{redirect(tenant, "oidc")}, AutoApprove: true, Users: []oidcop.User{legacyUser},
			Keys: opKeys()["RS256"][:1], Now: now})
		if err != nil {
			t.Fatal(err)
		}
		p.Store(op)
		return op
	}
	lp := &legacyProviders{op: start("legacy-client", "legacy-client-secret", ""), cityA: start("legacy-city-a", "legacy-city-a-secret", "city-a")}
	lp.blog = wpoauth.New("legacy-blog-client", "legacy-blog-secret", redirect("", "blog_oauth2"))
	blogSrv := httptest.NewServer(lp.blog)
	t.Cleanup(blogSrv.Close)
	for _, r := range records {
		switch {
		case r.Provider == "blog_oauth2":
			lp.blog.HonourRefreshToken(r.RefreshToken)
		case r.Tenant == "city-a":
			lp.cityA.HonourRefreshToken(r.RefreshToken, legacyUser, "openid email profile offline_access")
		default:
			lp.op.HonourRefreshToken(r.RefreshToken, legacyUser, "openid email profile offline_access")
		}
	}
	lp.vars = map[string]string{"OIDC_ISSUER": lp.op.Issuer(), "CITY_A_OIDC_ISSUER": lp.cityA.Issuer(), "BLOG_SITE": blogSrv.URL}
	return lp
}

// config reads the secrets file of v0.2.0 with the providers' URLs.
func (lp *legacyProviders) config(t *testing.T) *extauth.Config {
	t.Helper()
	cfg, err := extauth.LoadConfig(filepath.Join(legacyDir, "v0.2.0", "secrets.yml"), extauth.Env("production"),
		extauth.LookupEnv(func(k string) (string, bool) { v, ok := lp.vars[k]; return v, ok }))
	if err != nil {
		t.Fatalf("v0.2.0's secrets file: %v", err)
	}
	return cfg
}

// The secrets files of earlier releases load as they are.
func TestSecretsFilesOfEarlierReleases(t *testing.T) {
	for _, v := range []string{"v0.1.0", "v0.2.0"} {
		lookup := extauth.LookupEnv(func(k string) (string, bool) { return "http://127.0.0.1:9/" + strings.ToLower(k), true })
		cfg, err := extauth.LoadConfig(filepath.Join(legacyDir, v, "secrets.yml"), extauth.Env("production"), lookup)
		if err != nil || !slices.Contains(cfg.Providers(), extauth.OIDC) {
			t.Errorf("%s: %v", v, err)
		}
	}
}

func TestTokensStoredByV020Renew(t *testing.T) {
	var records []legacyRecord
	readLegacy(t, "v0.2.0", "tokens.json", &records)
	if len(records) != 3 {
		t.Fatalf("%d records", len(records))
	}
	for _, r := range records {
		if r.RefreshToken == "" || !r.Expiry.Before(time.Now()) {
			t.Fatalf("record %s %q: no refresh token, or not expired yet (%s)", r.Provider, r.Tenant, r.Expiry)
		}
	}
	appOIDC, cityA, blog := records[0], records[1], records[2]
	if appOIDC.Provider != "oidc" || appOIDC.Tenant != "" || cityA.Tenant != "city-a" || blog.Provider != "blog_oauth2" {
		t.Fatalf("records %+v", records)
	}
	ctx := context.Background()
	redirect := func(tenant, provider string) string {
		return "http://" + tenantHost(tenant) + "/users/auth/" + provider + "/callback"
	}
	newAuth := func(t *testing.T, cfg *extauth.Config, logs *lockedLog) *extauth.Auth {
		o := extauth.Options{BaseURL: "http://localhost", CookieKey: testKey,
			Logger:    slog.New(slog.NewTextHandler(logs, nil)),
			OnSuccess: func(http.ResponseWriter, *http.Request, *extauth.Identity) {}}
		if len(cfg.Tenants) > 0 {
			o.TenantOf = extauth.SubdomainTenants("localhost")
		}
		a, err := extauth.New(cfg, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		return a
	}
	// renew renews id's tokens through the documented path, and requires
	// the provider to have been asked.
	renew := func(t *testing.T, a *extauth.Auth, id *extauth.Identity, hits func() int64) string {
		t.Helper()
		before := hits()
		ts, err := a.TokenSource(ctx, id)
		if err != nil {
			t.Fatalf("%s at %q: %v", id.Provider, id.Tenant, err)
		}
		tok, err := ts.Token()
		if err != nil {
			t.Fatalf("%s at %q: renewal: %v", id.Provider, id.Tenant, err)
		}
		if tok.AccessToken == id.Tokens.AccessToken || hits() != before+1 {
			t.Fatalf("%s at %q: not renewed at the provider", id.Provider, id.Tenant)
		}
		return tok.RefreshToken
	}

	t.Run("one issuer: adopted", func(t *testing.T) {
		lp := startLegacyProviders(t, records, redirect, nil)
		appOIDC, cityA := appOIDC.issuedBy(t, lp.op.Issuer()), cityA.issuedBy(t, lp.cityA.Issuer())
		cfg := lp.config(t)
		cfg.Tenants = nil // the application without its tenant: one issuer per provider
		logs := &lockedLog{}
		a := newAuth(t, cfg, logs)
		opHits := func() int64 { return lp.op.Hits(oidcop.Token) }
		id := appOIDC.identity()
		rotated := renew(t, a, id, opHits)
		// As kept by a host that followed v0.2.0's docs to the letter: no
		// UID; the ID token names the user.
		again := appOIDC.identity()
		again.UID, again.Tokens.RefreshToken = "", rotated
		renew(t, a, again, opHits)
		blogCalls := func() int64 { lp.blog.Lock(); defer lp.blog.Unlock(); return int64(lp.blog.TokenCalls) }
		renew(t, a, blog.identity(), blogCalls)
		if n := strings.Count(logs.String(), "tokens stored before v0.3.0"); n != 2 {
			t.Errorf("%d log lines of adopted tokens, want one per provider:\n%s", n, logs)
		}
		// Another issuer's tokens (city-a's, whose ID token says so) are
		// not adopted as the application's on the way.
		stray := cityA.identity()
		stray.Tenant = ""
		if _, err := a.TokenSource(ctx, stray); !errors.Is(err, &extauth.Error{Code: extauth.CodeInvalidState}) {
			t.Errorf("another issuer's tokens adopted by TokenSource: %v", err)
		}
		// Revoking them is as renewing them.
		if err := a.RevokeTokens(ctx, appOIDC.identity()); err != nil || lp.op.Revoked() == 0 {
			t.Errorf("revoking tokens stored by v0.2.0: %v, %d revoked", err, lp.op.Revoked())
		}
	})

	t.Run("several issuers: AdoptTokens", func(t *testing.T) {
		lp := startLegacyProviders(t, records, redirect, nil)
		appOIDC, cityA := appOIDC.issuedBy(t, lp.op.Issuer()), cityA.issuedBy(t, lp.cityA.Issuer())
		a := newAuth(t, lp.config(t), &lockedLog{})
		for _, r := range []legacyRecord{appOIDC, cityA} {
			op := lp.op
			if r.Tenant == "city-a" {
				op = lp.cityA
			}
			hits := op.Hits(oidcop.Token)
			_, err := a.TokenSource(ctx, r.identity())
			if !errors.Is(err, &extauth.Error{Code: extauth.CodeInvalidState}) || !strings.Contains(err.Error(), "AdoptTokens") || op.Hits(oidcop.Token) != hits {
				t.Errorf("%q: the tokens of a provider with another issuer at another tenant: %v", r.Tenant, err)
			}
			id := r.identity()
			adopted, err := a.AdoptTokens(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if adopted.Issuer != op.Issuer() || adopted.Tenant != r.Tenant || adopted.RefreshToken != r.RefreshToken {
				t.Errorf("%q: adopted as issuer %q, tenant %q", r.Tenant, adopted.Issuer, adopted.Tenant)
			}
			if again, _ := a.AdoptTokens(ctx, &extauth.Identity{Provider: id.Provider, Tenant: id.Tenant, Tokens: adopted}); again != adopted {
				t.Errorf("%q: adopting adopted tokens changed them", r.Tenant)
			}
			id.Tokens = adopted
			renew(t, a, id, func() int64 { return op.Hits(oidcop.Token) })
		}
		// Every tenant keeps the application's blog_oauth2: one issuer.
		renew(t, a, blog.identity(), func() int64 { lp.blog.Lock(); defer lp.blog.Unlock(); return int64(lp.blog.TokenCalls) })
		// Tokens named for the wrong tenant: their ID token says which
		// issuer issued them, and AdoptTokens does not send them to
		// another (the refresh token would reach an issuer that never
		// issued it).
		for _, tc := range []struct {
			r      legacyRecord
			tenant string
			op     *oidcop.OP
		}{{cityA, "", lp.op}, {appOIDC, "city-a", lp.cityA}} {
			id := tc.r.identity()
			id.Tenant = tc.tenant
			hits := tc.op.Hits(oidcop.Token)
			if _, err := a.AdoptTokens(ctx, id); !errors.Is(err, &extauth.Error{Code: extauth.CodeInvalidState}) || !strings.Contains(err.Error(), "ID token was issued by") {
				t.Errorf("tokens of tenant %q adopted at %q: %v", tc.r.Tenant, tc.tenant, err)
			}
			if tc.op.Hits(oidcop.Token) != hits {
				t.Errorf("tokens of tenant %q were sent to the issuer of %q", tc.r.Tenant, tc.tenant)
			}
		}
		// AdoptTokens does not move tokens that say where they belong.
		moved := appOIDC.identity()
		moved.Tokens.Issuer, moved.Tenant = lp.op.Issuer(), "city-a"
		if got, err := a.AdoptTokens(ctx, moved); err != nil || got.Issuer != lp.op.Issuer() || got.Tenant != "" {
			t.Errorf("adopting tokens that name their issuer: %+v, %v", got, err)
		}
	})
}

// tenantHost is the host of tenant ("" for the application's own) in
// these tests, whose browser reaches every *.localhost host at the app.
func tenantHost(tenant string) string {
	if tenant == "" {
		return "localhost"
	}
	return tenant + ".localhost"
}

// A rolling upgrade: sign-ins that instances of an earlier release
// started finish on this release's, and those they finished are not taken
// again.
func TestTransactionsOfEarlierReleases(t *testing.T) {
	for _, v := range []string{"v0.1.0", "v0.2.0"} {
		t.Run(v, func(t *testing.T) { testTransactionsOf(t, v) })
	}
}

func testTransactionsOf(t *testing.T, v string) {
	var tx legacyTransactions
	readLegacy(t, v, "transactions.json", &tx)
	key, err := hex.DecodeString(tx.CookieKey)
	if err != nil {
		t.Fatal(err)
	}
	base, err := url.Parse(tx.BaseURL)
	if err != nil {
		t.Fatal(err)
	}
	authorize, err := url.Parse(tx.InFlight.AuthorizeURL)
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: tx.GeneratedAt.Add(time.Minute)}

	// app is an instance of this release at the earlier one's base URL,
	// its browser reaching it there, with the earlier one's cookie key.
	app := func(t *testing.T, store extauth.Store) (*http.Client, *oidcop.OP, *lockedLog, func() []*extauth.Identity) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv, p := opServer(t)
		op, err := oidcop.New(oidcop.Config{Issuer: srv.URL + "/op", ClientID: "legacy-client", ClientSecret: "legacy-client-secret",
			RedirectURIs: []string{authorize.Query().Get("redirect_uri")}, AutoApprove: true, Users: []oidcop.User{legacyUser},
			Keys: opKeys()["RS256"][:1], Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		p.Store(op)
		var mu sync.Mutex
		var ids []*extauth.Identity
		logs := &lockedLog{}
		a, err := extauth.New(&extauth.Config{OIDC: extauth.OIDCConfig{ClientID: "legacy-client",
			ClientSecret: extauth.NewSecret("legacy-client-secret"), Issuer: op.Issuer()}},
			extauth.Options{BaseURL: tx.BaseURL, CookieKey: key, Store: store, Now: clk.Now,
				Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
				OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
					mu.Lock()
					ids = append(ids, id)
					mu.Unlock()
				}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		s := httptest.NewUnstartedServer(a)
		s.Listener.Close()
		s.Listener = ln
		s.Start()
		t.Cleanup(s.Close)
		jar, _ := cookiejar.New(nil)
		client := &http.Client{Jar: jar, Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if host, _, _ := net.SplitHostPort(addr); host == base.Hostname() {
				addr = ln.Addr().String()
			}
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}}
		return client, op, logs, func() []*extauth.Identity { mu.Lock(); defer mu.Unlock(); return ids }
	}
	setCookie := func(c *http.Client, lc legacyCookie) {
		c.Jar.SetCookies(base, []*http.Cookie{{Name: lc.Name, Value: lc.Value, Path: lc.Path}})
	}

	t.Run("a sign-in it started finishes", func(t *testing.T) {
		client, op, logs, ids := app(t, nil)
		setCookie(client, tx.InFlight.Cookie)
		// The browser comes back from the provider: the same authorization
		// request, at this test's provider.
		at, _ := url.Parse(op.Issuer() + "/authorize")
		at.RawQuery = authorize.RawQuery
		resp, err := client.Get(at.String())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := ids(); resp.StatusCode != http.StatusOK || len(got) != 1 || got[0].UID != legacyUser.Sub {
			t.Fatalf("%s: %d, signed in %d\n%s", resp.Request.URL, resp.StatusCode, len(got), logs)
		}
	})

	t.Run("a sign-in it finished is not taken again", func(t *testing.T) {
		callback := func(store extauth.Store) (*lockedLog, int) {
			client, _, logs, _ := app(t, store)
			setCookie(client, tx.Finished.Cookie)
			resp, err := client.Get(tx.Finished.CallbackURL)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return logs, resp.StatusCode
		}
		// A store shared with the earlier instance holds the keys it spent.
		shared := extauth.NewMemoryStore(extauth.MemoryStoreOptions{Now: clk.Now})
		for _, k := range tx.Finished.StoreKeys {
			if fresh, err := shared.Consume(context.Background(), k, clk.Now().Add(time.Hour)); err != nil || !fresh {
				t.Fatal(k, err)
			}
		}
		if logs, status := callback(shared); status != http.StatusBadRequest || !strings.Contains(logs.String(), "transaction already used") {
			t.Errorf("the finished sign-in again: %d\n%s", status, logs)
		}
		// The control: with a store that does not hold them, the cookie
		// opens and the callback goes on to the provider's answer.
		if logs, _ := callback(nil); strings.Contains(logs.String(), "transaction") {
			t.Errorf("the control does not get past the transaction:\n%s", logs)
		}
	})
}
