//go:build interop

package extauth_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/internal/harness"
	"github.com/extauth/extauth/internal/pgtest"
	"github.com/extauth/extauth/internal/redistest"
	"github.com/extauth/extauth/pgstore"
	"github.com/extauth/extauth/redisstore"
)

// The shared stores, driven through the real routes: what one instance of an
// application accepted, another instance sharing the store refuses.

const (
	sharedRedisPassword = "shared-redis-3e9a61"
	sharedPGPassword    = "shared-pg-9c04d2"
)

// twoRedisStores are what two instances of an application hold: each its
// own client and Store, to the one Redis.
func twoRedisStores(t testing.TB) (*redistest.Server, extauth.Store, extauth.Store) {
	t.Helper()
	srv := redistest.Start(t, redistest.Config{Password: sharedRedisPassword})
	open := func() extauth.Store {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr, Password: sharedRedisPassword, ContextTimeoutEnabled: true})
		t.Cleanup(func() { c.Close() })
		s, err := redisstore.New(c, redisstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	return srv, open(), open()
}

// twoClusterStores are two instances' stores on a Redis Cluster of three
// primaries.
func twoClusterStores(t testing.TB) (*redistest.Cluster, extauth.Store, extauth.Store) {
	t.Helper()
	cl := redistest.StartCluster(t, 3, redistest.Config{Password: sharedRedisPassword})
	open := func() extauth.Store {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), Password: sharedRedisPassword, ContextTimeoutEnabled: true})
		t.Cleanup(func() { c.Close() })
		s, err := redisstore.New(c, redisstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	return cl, open(), open()
}

// twoPGStores are two instances' stores, each on its own pool, on one
// PostgreSQL started with settings; the first migrates.
func twoPGStores(t testing.TB, settings ...string) (*pgxpool.Pool, extauth.Store, extauth.Store) {
	t.Helper()
	srv := pgtest.Start(t, sharedPGPassword, settings...)
	var first *pgxpool.Pool
	open := func() extauth.Store {
		pool := srv.Pool(t)
		if first == nil {
			first = pool
		}
		s, err := pgstore.New(pool, pgstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if err := s.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		return s
	}
	return first, open(), open()
}

// samlReplayToSecond signs in on one instance, then replays the browser's
// POST with its copied cookies to a second instance, each with its own
// store, and returns the second instance's answer.
func samlReplayToSecond(t *testing.T, first, second extauth.Store) (*httptest.ResponseRecorder, bool) {
	t.Helper()
	idp := newSAMLIdP(t)
	a := newSAMLApp(t, idp, func(_ *extauth.Config, o *extauth.Options) { o.Store = first })
	accepted := false
	two, err := extauth.New(&extauth.Config{SAML: extauth.SAMLConfig{SPEntityID: samlEntityID, IdPMetadataURL: idp.MetadataURL()}},
		extauth.Options{BaseURL: a.URL, CookieKey: testKey, Store: second, Logger: slog.New(slog.DiscardHandler),
			OnSuccess: func(w http.ResponseWriter, _ *http.Request, id *extauth.Identity) {
				accepted = true
				w.Write([]byte("signed in as " + id.UID))
			}})
	if err != nil {
		t.Fatal(err)
	}
	defer two.Close()
	b := harness.NewBrowser(t)
	redirect, _, _ := a.authorize(b, nil)
	form := idpForm(t, b, redirect)
	thief := harness.NewBrowser(t)
	au := mustURL(a.URL)
	thief.Jar.SetCookies(au, b.Jar.Cookies(au))
	if resp := a.callback(b, form); resp.StatusCode != http.StatusOK {
		t.Fatalf("first: %d %s", resp.StatusCode, resp.Body)
	}
	// The second instance fetches the IdP metadata on its own.
	waitSAMLReady(t, two, a.URL)
	req := httptest.NewRequest(http.MethodPost, a.URL+"/users/auth/saml/callback", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, c := range thief.Jar.Cookies(au) {
		req.AddCookie(c)
	}
	rec := httptest.NewRecorder()
	two.ServeHTTP(rec, req)
	return rec, accepted
}

func waitSAMLReady(t *testing.T, a *extauth.Auth, base string) {
	t.Helper()
	(&samlApp{t: t, Auth: a, URL: base}).waitReady()
}

// SECURITY.md: the same SAML response to a second instance sharing Redis is
// rejected.
func TestSAMLReplayToSecondInstanceSharingRedis(t *testing.T) {
	srv, one, two := twoRedisStores(t)
	rec, accepted := samlReplayToSecond(t, one, two)
	if rec.Code != http.StatusBadRequest || accepted {
		t.Fatalf("replay on the second instance: %d %s", rec.Code, rec.Body)
	}
	// What the first instance left in Redis, each with a time-to-live.
	keys := strings.Fields(srv.CLI(t, "KEYS", "*"))
	slices.Sort(keys)
	shapes := []*regexp.Regexp{
		regexp.MustCompile(`^extauth:saml:assertion:[0-9a-f]{40}$`),
		regexp.MustCompile(`^extauth:saml:request:[0-9a-f]{40}$`),
		regexp.MustCompile(`^extauth:tx:[A-Za-z0-9_-]{16,}$`),
	}
	if len(keys) != len(shapes) {
		t.Fatalf("keys in Redis: %q", keys)
	}
	for i, k := range keys {
		if !shapes[i].MatchString(k) {
			t.Errorf("key %q does not match %s", k, shapes[i])
		}
		if ttl, err := strconv.Atoi(srv.CLI(t, "PTTL", k)); err != nil || ttl <= 0 || ttl > 11*60*1000 {
			t.Errorf("PTTL %s = %d (%v)", k, ttl, err)
		}
	}
}

// The same on Redis Cluster: the keys of one sign-in live in different
// slots, and each is one single-key command.
func TestSAMLReplayToSecondInstanceSharingRedisCluster(t *testing.T) {
	cl, one, two := twoClusterStores(t)
	rec, accepted := samlReplayToSecond(t, one, two)
	if rec.Code != http.StatusBadRequest || accepted {
		t.Fatalf("replay on the second instance: %d %s", rec.Code, rec.Body)
	}
	total := 0
	for _, node := range cl.Nodes {
		n, _ := strconv.Atoi(node.CLI(t, "DBSIZE"))
		total += n
	}
	if total != 3 {
		t.Errorf("%d keys in the cluster, want the transaction, request and assertion", total)
	}
}

// The same on PostgreSQL.
func TestSAMLReplayToSecondInstanceSharingPostgres(t *testing.T) {
	pool, one, two := twoPGStores(t)
	rec, accepted := samlReplayToSecond(t, one, two)
	if rec.Code != http.StatusBadRequest || accepted {
		t.Fatalf("replay on the second instance: %d %s", rec.Code, rec.Body)
	}
	rows, err := pool.Query(context.Background(), `SELECT key FROM extauth_single_use WHERE expires > now() ORDER BY key`)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for rows.Next() {
		var k string
		rows.Scan(&k)
		keys = append(keys, k)
	}
	if len(keys) != 3 || !strings.HasPrefix(keys[0], "saml:assertion:") || !strings.HasPrefix(keys[1], "saml:request:") || !strings.HasPrefix(keys[2], "tx:") {
		t.Errorf("rows: %q", keys)
	}
}

// Why the store must be shared: with one memory store per instance the
// same replay gets through. This keeps the test above honest.
func TestSAMLReplayToSecondInstanceSeparateMemoryStores(t *testing.T) {
	rec, accepted := samlReplayToSecond(t, extauth.NewMemoryStore(extauth.MemoryStoreOptions{}), extauth.NewMemoryStore(extauth.MemoryStoreOptions{}))
	if rec.Code != http.StatusOK || !accepted {
		t.Fatalf("without a shared store the replay was refused (%d %s): the shared-store tests prove nothing", rec.Code, rec.Body)
	}
}

// blog_oauth2: the callback URL and transaction cookie, replayed to the
// second instance after the first finished the sign-in, are refused there
// before the token endpoint is called, with Redis or PostgreSQL shared.
func TestBlogOAuth2ReplayToSecondInstanceSharingAStore(t *testing.T) {
	for _, c := range []struct {
		name       string
		stores     func(t testing.TB) (extauth.Store, extauth.Store)
		shared     bool
		wantStatus int
		wantTokens int
	}{
		{"shared Redis", func(t testing.TB) (extauth.Store, extauth.Store) {
			_, a, b := twoRedisStores(t)
			return a, b
		}, true, http.StatusBadRequest, 1},
		{"shared PostgreSQL", func(t testing.TB) (extauth.Store, extauth.Store) {
			_, a, b := twoPGStores(t)
			return a, b
		}, true, http.StatusBadRequest, 1},
		{"separate memory stores", func(testing.TB) (extauth.Store, extauth.Store) {
			return extauth.NewMemoryStore(extauth.MemoryStoreOptions{}), extauth.NewMemoryStore(extauth.MemoryStoreOptions{})
		}, false, 0, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			first, second := c.stores(t)
			one := newApp(t, func(o *extauth.Options) { o.Store = first })
			b := harness.NewBrowser(t).NoFollow()
			cb := mustURL(one.approve(b, one.start(b, nil)))
			u := mustURL(one.URL)
			stolen := b.Jar.Cookies(u)
			if resp := b.Get(cb.String()); resp.StatusCode != http.StatusOK {
				t.Fatalf("first use: %d %s", resp.StatusCode, resp.Body)
			}
			var accepted bool
			two, err := extauth.New(&extauth.Config{BlogOAuth2: extauth.OAuthProvider{Key: blogKey, Secret: extauth.NewSecret(blogSecret), Site: mustSite(one)}},
				extauth.Options{BaseURL: one.URL, CookieKey: testKey, Store: second, Logger: slog.New(slog.DiscardHandler),
					OnSuccess: func(w http.ResponseWriter, _ *http.Request, id *extauth.Identity) { accepted = true }})
			if err != nil {
				t.Fatal(err)
			}
			defer two.Close()
			req := httptest.NewRequest(http.MethodGet, one.URL+cb.RequestURI(), nil)
			for _, ck := range stolen {
				req.AddCookie(ck)
			}
			rec := httptest.NewRecorder()
			two.ServeHTTP(rec, req)
			if accepted {
				t.Fatal("the second instance signed the replay in")
			}
			if c.shared && (rec.Code != c.wantStatus || !strings.Contains(rec.Body.String(), "invalid_state")) {
				t.Fatalf("replay: %d %s, want %d invalid_state", rec.Code, rec.Body, c.wantStatus)
			}
			if one.Fake.TokenCalls != c.wantTokens {
				t.Errorf("token endpoint called %d times, want %d", one.Fake.TokenCalls, c.wantTokens)
			}
		})
	}
}
