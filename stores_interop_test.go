//go:build interop

package extauth_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/wpoauth"
	"github.com/extauth/extauth/internal/harness"
	"github.com/extauth/extauth/internal/pgtest"
	"github.com/extauth/extauth/internal/redistest"
	"github.com/extauth/extauth/pgstore"
	"github.com/extauth/extauth/redisstore"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
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

// pgPool opens a pgx pool on srv, closed when the test ends.
func pgPool(t testing.TB, srv *pgtest.Server) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// twoPGStores are two instances' stores, each on its own pool, on one
// PostgreSQL started with settings; the first migrates.
func twoPGStores(t testing.TB, settings ...string) (*pgxpool.Pool, extauth.Store, extauth.Store) {
	t.Helper()
	srv := pgtest.Start(t, sharedPGPassword, settings...)
	var first *pgxpool.Pool
	open := func() extauth.Store {
		pool := pgPool(t, srv)
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

// pair is two instances of one application behind a load balancer: the same
// BaseURL and CookieKey, each its own *extauth.Auth and store, served on
// their own addresses, with blog_oauth2 against one fake provider.
type pair struct {
	base     string    // the BaseURL both have (the first one's address)
	urls     [2]string // where each instance is served
	fake     *wpoauth.Server
	client   *http.Client
	accepted [2]atomic.Int64 // success hooks run on each instance
}

func newPair(t testing.TB, stores [2]extauth.Store) *pair {
	t.Helper()
	p := &pair{}
	p.fake = wpoauth.New(blogKey, blogSecret, "")
	p.fake.AutoApprove = true
	fakeSrv := httptest.NewServer(p.fake)
	t.Cleanup(fakeSrv.Close)
	var handlers [2]atomic.Pointer[extauth.Auth]
	var srvs [2]*httptest.Server
	for i := range srvs {
		srvs[i] = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			handlers[i].Load().ServeHTTP(w, r)
		}))
		t.Cleanup(srvs[i].Close)
		p.urls[i] = srvs[i].URL
	}
	p.base = p.urls[0]
	p.fake.RedirectURI = p.base + "/users/auth/blog_oauth2/callback"
	for i := range handlers {
		a, err := extauth.New(&extauth.Config{BlogOAuth2: extauth.OAuthProvider{Key: blogKey, Secret: extauth.NewSecret(blogSecret), Site: fakeSrv.URL}},
			extauth.Options{BaseURL: p.base, CookieKey: testKey, Store: stores[i], Logger: slog.New(slog.DiscardHandler),
				OnSuccess: func(w http.ResponseWriter, _ *http.Request, id *extauth.Identity) {
					p.accepted[i].Add(1)
					io.WriteString(w, "signed in as "+id.UID)
				}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		handlers[i].Store(a)
	}
	p.client = &http.Client{
		Timeout:       30 * time.Second,
		Transport:     &http.Transport{MaxIdleConnsPerHost: 64},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	t.Cleanup(p.client.CloseIdleConnections)
	return p
}

// callback is a sign-in's callback as the browser would send it: the
// path and query, and the transaction cookie.
type callback struct {
	uri     string
	cookies []*http.Cookie
}

// begin starts a sign-in on instance i and has the provider approve it.
func (p *pair) begin(ctx context.Context, i int) (*callback, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.urls[i]+"/users/auth/blog_oauth2", nil)
	req.Header.Set("Sec-Fetch-Site", "same-origin") // a browser's, for the app's own login button
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		return nil, fmt.Errorf("authorize: %d", resp.StatusCode)
	}
	cb := &callback{cookies: resp.Cookies()}
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, resp.Header.Get("Location"), nil)
	if resp, err = p.client.Do(req); err != nil {
		return nil, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	u, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusFound || err != nil {
		return nil, fmt.Errorf("provider authorize: %d %v", resp.StatusCode, err)
	}
	cb.uri = u.RequestURI()
	return cb, nil
}

// finish sends the callback to instance i: its status and body.
func (p *pair) finish(ctx context.Context, i int, cb *callback) (int, string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.urls[i]+cb.uri, nil)
	for _, c := range cb.cookies {
		req.AddCookie(c)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

func (p *pair) tokenCalls() int {
	p.fake.Lock()
	defer p.fake.Unlock()
	return p.fake.TokenCalls
}

// refusedAsUsed is the answer to a replay the store caught.
func refusedAsUsed(status int, body string) bool {
	return status == http.StatusBadRequest && strings.Contains(body, "invalid_state")
}

// loadResult is what a run of sign-ins saw.
type loadResult struct {
	signIns, replays, replaysAccepted int
	failures                          map[string]int
	latencies                         []time.Duration // of each accepted sign-in, start to callback answered
	elapsed                           time.Duration
}

func (r *loadResult) percentile(q float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	s := slices.Clone(r.latencies)
	slices.Sort(s)
	return s[int(math.Ceil(q*float64(len(s))))-1]
}

func (r *loadResult) String() string {
	return fmt.Sprintf("%d sign-ins in %v: %.0f sign-ins/s, p50 %v, p99 %v; %d replays, %d accepted; failures %v",
		r.signIns, r.elapsed.Round(time.Millisecond), float64(r.signIns)/r.elapsed.Seconds(),
		r.percentile(0.50).Round(10*time.Microsecond), r.percentile(0.99).Round(10*time.Microsecond),
		r.replays, r.replaysAccepted, r.failures)
}

// load runs n sign-ins, conc at a time, alternating between the
// instances; every other one's callback is then replayed, with its
// cookie, to the other instance.
func (p *pair) load(n, conc int) *loadResult {
	res := &loadResult{failures: map[string]int{}}
	var mu sync.Mutex
	fail := func(what string) {
		mu.Lock()
		res.failures[what]++
		mu.Unlock()
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Go(func() {
			ctx := context.Background()
			for {
				k := int(next.Add(1)) - 1
				if k >= n {
					return
				}
				i := k % 2
				began := time.Now()
				cb, err := p.begin(ctx, i)
				if err != nil {
					fail("begin: " + err.Error())
					continue
				}
				status, body, err := p.finish(ctx, i, cb)
				if err != nil || status != http.StatusOK {
					fail(fmt.Sprintf("callback: %d %v", status, err))
					continue
				}
				took := time.Since(began)
				replayed, accepted := false, false
				if k%4 < 2 { // half of the sign-ins, on both instances
					replayed = true
					status, body, err = p.finish(ctx, 1-i, cb)
					accepted = err == nil && !refusedAsUsed(status, body)
				}
				mu.Lock()
				res.signIns++
				res.latencies = append(res.latencies, took)
				if replayed {
					res.replays++
				}
				if accepted {
					res.replaysAccepted++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	return res
}

// Two instances, 1000 sign-ins 16 at a time, half of the callbacks replayed
// to the other instance: not one replay accepted, with each shared store
// (PostgreSQL with its durable defaults), and with one memory store that
// both instances share in this process (the baseline: what the routes and
// the fake provider cost without a network store). Throughput and latency
// are logged for BENCHMARKS.md.
func TestTwoInstanceLoad(t *testing.T) {
	const n, conc = 1000, 16
	for _, c := range []struct {
		name   string
		stores func(t testing.TB) (extauth.Store, extauth.Store)
	}{
		{"memory store shared in-process (baseline)", func(testing.TB) (extauth.Store, extauth.Store) {
			m := extauth.NewMemoryStore(extauth.MemoryStoreOptions{})
			return m, m
		}},
		{"Redis standalone", func(t testing.TB) (extauth.Store, extauth.Store) {
			_, a, b := twoRedisStores(t)
			return a, b
		}},
		{"PostgreSQL", func(t testing.TB) (extauth.Store, extauth.Store) {
			_, a, b := twoPGStores(t, pgtest.Durable...)
			return a, b
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			one, two := c.stores(t)
			p := newPair(t, [2]extauth.Store{one, two})
			res := p.load(n, conc)
			t.Logf("%s: %v", c.name, res)
			if res.signIns != n || len(res.failures) != 0 {
				t.Errorf("%d of %d sign-ins; failures %v", res.signIns, n, res.failures)
			}
			if res.replays != n/2 {
				t.Errorf("%d replays, want %d", res.replays, n/2)
			}
			if res.replaysAccepted != 0 {
				t.Errorf("%d replays accepted", res.replaysAccepted)
			}
			if got := p.accepted[0].Load() + p.accepted[1].Load(); got != int64(n) {
				t.Errorf("success hooks ran %d times for %d sign-ins", got, n)
			}
			if p.tokenCalls() != n {
				t.Errorf("%d token requests for %d sign-ins: a replay reached the provider", p.tokenCalls(), n)
			}
		})
	}
}

// A Sentinel failover during a stream of sign-ins on two instances: no
// callback is accepted twice, not during the failover, not after it (every
// callback accepted before, during or after is replayed once the new
// primary serves), and sign-ins resume on the new primary. The stores use
// WaitReplicas 1, the number of replicas: a key is accepted only once the
// replica holds it, so the promoted replica knows every accepted key. (With
// two replicas and WaitReplicas 1 this test fails: Sentinel may promote the
// replica that did not acknowledge a key.)
func TestSentinelFailoverDuringSignIns(t *testing.T) {
	primary := redistest.Start(t, redistest.Config{Password: sharedRedisPassword})
	replica := redistest.Start(t, redistest.Config{Password: sharedRedisPassword, ReplicaOf: primary})
	primary.WaitOnline(t, 1)
	sentinels := redistest.StartSentinels(t, primary, "extauth-primary", 3, 1)
	var stores [2]extauth.Store
	for i := range stores {
		c := redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: sentinels.MasterName, SentinelAddrs: sentinels.Addrs(), Password: sharedRedisPassword,
			ReadTimeout: 5 * time.Second, ContextTimeoutEnabled: true,
		})
		t.Cleanup(func() { c.Close() })
		s, err := redisstore.New(c, redisstore.Options{WaitReplicas: 1, WaitTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		stores[i] = s
	}
	p := newPair(t, stores)

	var (
		mu               sync.Mutex
		accepted         []*callback
		acceptedAfter    int
		replayAccepted   int
		failures         = map[string]int{}
		failedOver       atomic.Bool
		firstDown, endAt time.Time // the first and last refusal
		firstAfter       time.Time // the first acceptance after the promotion
	)
	// Workers finish the sign-in in hand when told to stop, so that every
	// success hook that ran is one the test counted.
	var stopping atomic.Bool
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for k := w; !stopping.Load(); k += 8 {
				i := k % 2
				cb, err := p.begin(ctx, i)
				if err != nil {
					continue
				}
				status, body, err := p.finish(ctx, i, cb)
				if err != nil {
					continue
				}
				after := failedOver.Load()
				if status != http.StatusOK {
					mu.Lock()
					failures[fmt.Sprintf("%d %s", status, errorCode(body))]++
					if firstDown.IsZero() {
						firstDown = time.Now()
					}
					endAt = time.Now()
					mu.Unlock()
					continue
				}
				rs, rb, rerr := p.finish(ctx, 1-i, cb)
				mu.Lock()
				accepted = append(accepted, cb)
				if after {
					acceptedAfter++
					if firstAfter.IsZero() {
						firstAfter = time.Now()
					}
				}
				if rerr == nil && rs == http.StatusOK {
					replayAccepted++
				} else if rerr == nil && !refusedAsUsed(rs, rb) {
					failures[fmt.Sprintf("replay %d %s", rs, errorCode(rb))]++
				}
				mu.Unlock()
			}
		})
	}
	acceptedCount := func() int { mu.Lock(); defer mu.Unlock(); return len(accepted) }
	redistest.WaitFor(t, 2*time.Minute, "50 sign-ins before the failover", func() bool { return acceptedCount() >= 50 })
	sentinels.Servers[0].CLI(t, "SENTINEL", "FAILOVER", sentinels.MasterName)
	failoverStart := time.Now()
	redistest.WaitFor(t, 2*time.Minute, "the Sentinels to promote the replica", func() bool { return sentinels.Primary(t) == replica.Addr })
	failedOver.Store(true)
	promoted := time.Since(failoverStart)
	redistest.WaitFor(t, 2*time.Minute, "100 sign-ins on the new primary", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return acceptedAfter >= 100
	})
	stopping.Store(true)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	since := func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return t.Sub(failoverStart).Round(time.Millisecond).String()
	}
	t.Logf("SENTINEL FAILOVER at 0s; replica promoted by %v; first sign-in accepted on it at %v; "+
		"%d sign-ins accepted, %d after the promotion; refused: %v, the first at %v, the last at %v",
		promoted.Round(time.Millisecond), since(firstAfter), len(accepted), acceptedAfter, failures, since(firstDown), since(endAt))
	if replayAccepted != 0 {
		t.Errorf("%d replays accepted during the stream", replayAccepted)
	}
	for what := range failures {
		if strings.HasPrefix(what, "replay") {
			t.Errorf("a replay was not refused as used: %s", what)
		}
	}
	if primary.Info(t, "replication", "role") != "slave" {
		t.Errorf("the old primary is not a replica of the new one")
	}
	// Every callback ever accepted, once more, on both instances.
	for _, cb := range accepted {
		for i := range 2 {
			status, body, err := p.finish(context.Background(), i, cb)
			if err != nil || !refusedAsUsed(status, body) {
				t.Fatalf("a callback accepted before was answered %d %s (%v) after the failover", status, errorCode(body), err)
			}
		}
	}
	if got := p.accepted[0].Load() + p.accepted[1].Load(); got != int64(len(accepted)) {
		t.Errorf("success hooks ran %d times for %d sign-ins", got, len(accepted))
	}
}

// errorCode is the error code a failure page shows.
func errorCode(body string) string {
	_, after, ok := strings.Cut(body, "<code>")
	if !ok {
		return strconv.Quote(body)
	}
	code, _, _ := strings.Cut(after, "</code>")
	return code
}

// BenchmarkConsume compares the stores in one process: one Consume of a new
// key at a time, so ns/op is a round trip for Redis and PostgreSQL (both on
// this machine; PostgreSQL with its durable defaults, fsync and synchronous
// commit on), and allocs/op what the client library spends (building the
// key costs one allocation in each). The stores take turns, five rounds
// of each; the testing package names the repeats memory#01, memory#02...
func BenchmarkConsume(b *testing.B) {
	_, redisStore, _ := twoRedisStores(b)
	_, pgStore, _ := twoPGStores(b, pgtest.Durable...)
	stores := []struct {
		name string
		s    extauth.Store
	}{
		{"memory", extauth.NewMemoryStore(extauth.MemoryStoreOptions{MaxEntries: math.MaxInt})},
		{"redis", redisStore},
		{"postgres", pgStore},
	}
	run := 0
	for range 5 {
		for _, st := range stores {
			run++
			b.Run(st.name, func(b *testing.B) {
				b.ReportAllocs()
				ctx := context.Background()
				until := time.Now().Add(10 * time.Minute)
				prefix := fmt.Sprintf("tx:%d-", run)
				i := 0
				for b.Loop() {
					i++
					ok, err := st.s.Consume(ctx, prefix+strconv.Itoa(i), until)
					if !ok || err != nil {
						b.Fatal(ok, err)
					}
				}
			})
		}
	}
}

// A hung store (every Redis or PostgreSQL process stopped: connections
// open, nothing answers) fails callbacks with provider_unavailable within
// Options.Timeout, not when the browser gives up; when it comes back,
// sign-ins work again.
func TestHungStoreFailsPromptly(t *testing.T) {
	for _, c := range []struct {
		name  string
		store func(t *testing.T) (extauth.Store, func())
	}{
		{"Redis", func(t *testing.T) (extauth.Store, func()) {
			srv, s, _ := twoRedisStores(t)
			return s, srv.Freeze
		}},
		{"PostgreSQL", func(t *testing.T) (extauth.Store, func()) {
			srv := pgtest.Start(t, sharedPGPassword)
			s, err := pgstore.New(pgPool(t, srv), pgstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			if err := s.Migrate(context.Background()); err != nil {
				t.Fatal(err)
			}
			return s, srv.Freeze
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, freeze := c.store(t)
			const timeout = time.Second
			a := newApp(t, func(o *extauth.Options) { o.Store, o.Timeout = st, timeout })
			signIn := func() (*harness.Browser, string) {
				b := harness.NewBrowser(t).NoFollow()
				return b, a.approve(b, a.start(b, nil))
			}
			if b, cb := signIn(); b.Get(cb).StatusCode != http.StatusOK {
				t.Fatal("no sign-in before the store hung")
			}
			const n = 8
			browsers, callbacks := make([]*harness.Browser, n), make([]string, n)
			for i := range n {
				browsers[i], callbacks[i] = signIn()
			}
			freeze()
			start := time.Now()
			var wg sync.WaitGroup
			answers := make([]*harness.Response, n)
			for i := range n {
				wg.Go(func() { answers[i] = browsers[i].Get(callbacks[i]) })
			}
			wg.Wait()
			elapsed := time.Since(start)
			for i, resp := range answers {
				if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(resp.Body, "provider_unavailable") {
					t.Errorf("callback %d with the store hung: %d %s", i, resp.StatusCode, resp.Body)
				}
			}
			// Timeout, and the driver's own grace after a deadline (pgx
			// waits up to a second for the server to take a cancel): well
			// before the browser would give up (30 s), however loaded the
			// machine.
			if elapsed > 15*time.Second {
				t.Errorf("callbacks with the store hung took %v; Options.Timeout is %v", elapsed, timeout)
			}
			if !strings.Contains(a.Logs.String(), "deadline exceeded") {
				t.Errorf("the log does not say the store ran out of time:\n%s", a.Logs)
			}
		})
	}
}

// Junk callbacks, each to a sign-in of the sender's own, leave no key in a
// shared Redis or row in a shared PostgreSQL; a verified sign-in leaves
// one, which refuses its replay.
func TestJunkCallbacksLeaveNothingInSharedStores(t *testing.T) {
	for _, c := range []struct {
		name  string
		store func(t *testing.T) (extauth.Store, func() int)
	}{
		{"Redis", func(t *testing.T) (extauth.Store, func() int) {
			srv, s, _ := twoRedisStores(t)
			return s, func() int {
				n, err := strconv.Atoi(strings.TrimSpace(srv.CLI(t, "-a", sharedRedisPassword, "--no-auth-warning", "DBSIZE")))
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
		}},
		{"PostgreSQL", func(t *testing.T) (extauth.Store, func() int) {
			pool, s, _ := twoPGStores(t)
			return s, func() int {
				var n int
				if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+pgstore.DefaultTable).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, held := c.store(t)
			a := newApp(t, func(o *extauth.Options) { o.Store = st })
			for range 20 {
				b := harness.NewBrowser(t).NoFollow()
				state := a.start(b, nil).Query().Get("state")
				wantCode(t, b.Get(a.URL+"/users/auth/blog_oauth2/callback.json?code=junk&state="+url.QueryEscape(state)),
					http.StatusBadRequest, "invalid_response")
			}
			if n := held(); n != 0 {
				t.Errorf("20 junk callbacks left %d entries", n)
			}
			b := harness.NewBrowser(t).NoFollow()
			cb := a.approve(b, a.start(b, nil))
			cookies := b.Jar.Cookies(mustURL(a.URL))
			if resp := b.Get(cb); resp.StatusCode != http.StatusOK {
				t.Fatalf("sign-in: %d %s", resp.StatusCode, resp.Body)
			}
			if n := held(); n != 1 {
				t.Errorf("a sign-in left %d entries, want 1", n)
			}
			replay := harness.NewBrowser(t).NoFollow()
			replay.Jar.SetCookies(mustURL(a.URL), cookies)
			wantCode(t, replay.Get(cb), http.StatusBadRequest, "invalid_state")
		})
	}
}
