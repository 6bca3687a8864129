package extauth_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/internal/harness"
)

// fleet is one application on several instances behind one URL, sharing
// the cookie key and the store as a deployment does: each deploy restarts
// one instance with a new secrets file, and the key rotation tests count
// every sign-in across the deployments. route says which instance answers
// the next request; jwksRoute which one answers reads of the OpenID
// Connect JWKS route, a provider's rather than a browser's.
type fleet struct {
	t         *testing.T
	URL       string
	store     extauth.Store
	instances []atomic.Pointer[http.Handler]
	route     atomic.Int32
	jwksRoute atomic.Int32
	logs      *lockedLog
	signIns
	mu       sync.Mutex
	attempts int
	failures []string
}

// newFleet serves n instances, none deployed yet; setup, when set, runs
// with the fleet's URL before it serves (to start a provider that must
// know it).
func newFleet(t *testing.T, n int, setup func(base string)) *fleet {
	t.Helper()
	f := &fleet{t: t, store: extauth.NewMemoryStore(extauth.MemoryStoreOptions{}),
		instances: make([]atomic.Pointer[http.Handler], n), logs: &lockedLog{}}
	srv := harness.Serve(t, func(base string) http.Handler {
		if setup != nil {
			setup(base)
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			i := f.route.Load()
			if strings.HasSuffix(r.URL.Path, "/jwks") {
				i = f.jwksRoute.Load()
			}
			if h := f.instances[i].Load(); h != nil {
				(*h).ServeHTTP(w, r)
				return
			}
			http.Error(w, "not deployed", http.StatusServiceUnavailable)
		})
	})
	f.URL = srv.URL
	return f
}

// deploy restarts instance i with cfg, once it is ready.
func (f *fleet) deploy(i int, cfg *extauth.Config) {
	f.t.Helper()
	if err := cfg.Validate(); err != nil {
		f.t.Fatal(err)
	}
	auth, err := extauth.New(cfg, extauth.Options{BaseURL: f.URL, CookieKey: testKey, Store: f.store,
		Logger: slog.New(slog.NewTextHandler(f.logs, nil)), OnSuccess: f.onSuccess,
		OnFailure: func(w http.ResponseWriter, _ *http.Request, err *extauth.Error) {
			http.Error(w, string(err.Code)+": "+err.Message, err.Code.HTTPStatus())
		}})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { auth.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := auth.Ready(ctx); err != nil {
		f.t.Fatal(err)
	}
	mux := http.NewServeMux()
	auth.Mount(mux)
	var h http.Handler = mux
	f.instances[i].Store(&h)
}

// count counts a sign-in of step, failed for the reason why unless it is
// empty.
func (f *fleet) count(step, why string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attempts++
	if why != "" {
		f.failures = append(f.failures, step+": "+why)
	}
}

// rollOut runs deploy on each instance in turn, with a sign-in in flight
// across each restart (begun before it, ended after it by finish) and a
// round of sign-ins while the instances differ.
func (f *fleet) rollOut(step string, deploy func(i int), inFlight func(i int) (finish func(step string)), round func(step string)) {
	f.t.Helper()
	for i := range f.instances {
		finish := inFlight(i)
		deploy(i)
		finish(fmt.Sprintf("%s, in flight across the restart of instance %d", step, i))
		round(fmt.Sprintf("%s, %d of %d instances deployed", step, i+1, len(f.instances)))
	}
}

// noFailures fails the test unless every sign-in, at least min of them,
// succeeded and reached the hook.
func (f *fleet) noFailures(min int) {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.failures) != 0 || f.attempts < min {
		f.t.Fatalf("%d of %d sign-ins failed:\n%s\n%s", len(f.failures), f.attempts, strings.Join(f.failures, "\n"), f.logs)
	}
	if n := len(f.identities()); n != f.attempts {
		f.t.Fatalf("%d sign-ins reached the hook, %d were made", n, f.attempts)
	}
	f.t.Logf("%d sign-ins, none failed", f.attempts)
}
