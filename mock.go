package extauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/extauth/extauth/internal/mock"
	"github.com/extauth/extauth/providers"
)

// UseMocks switches a into the mock mode of package extauthtest, for a
// host's tests: extauthtest.Mock(a) calls it, and nothing else can make its
// argument. In mock mode a provider with a queued result signs in through
// the real routes, cookie and hooks without its provider, whether or not it
// is configured; providers without one work as usual. It returns the set a
// uses: s, or the one an earlier call gave, so that every
// extauthtest.Mock(a) of one test queues into the same set.
func (a *Auth) UseMocks(s *mock.Set) *mock.Set {
	if a.mocks.CompareAndSwap(nil, s) {
		return s
	}
	return a.mocks.Load()
}

// mockMount is the mount of a mocked sign-in of provider name on st, or
// false when a is not in mock mode or nothing is queued or started for it.
func (a *Auth) mockMount(r *http.Request, st *site, name string, callback bool) (mount, bool) {
	set := a.mocks.Load()
	if set == nil {
		return mount{}, false
	}
	key := a.mockKey(set, name)
	if callback && r.URL.Query().Get(mockParam) == "" || !callback && key == "" {
		return mount{}, false
	}
	hooks := st.callbacks
	if _, ok := hooks[name]; !ok {
		// A provider the test environment does not configure.
		hook := a.opts.Callbacks[Provider(name)]
		if hook == nil && key != "" {
			hook = a.opts.Callbacks[Provider(key)]
		}
		if hook == nil {
			hook = a.opts.OnSuccess
		}
		if hook == nil {
			hook = func(w http.ResponseWriter, r *http.Request, _ *Identity) {
				a.failOn(st, w, r, Format(r), &Error{Code: CodeMisconfigured, Provider: name,
					Message: "sign-in is not configured correctly for this site",
					Err:     fmt.Errorf("extauthtest: a sign-in with %s was mocked, but Options has no hook for it (Callbacks or OnSuccess)", name)})
			}
		}
		hooks = map[string]CallbackFunc{name: hook}
	}
	mst := *st
	mst.callbacks = hooks
	return mount{site: &mst, name: name, s: &mockStrategy{set: set, key: key, name: name, callback: st.url(st.callbackPath(name))}}, true
}

// mockKey is the name a result for the provider mounted under slug name is
// queued under: the slug itself, or the provider's own name when
// Options.Slugs renamed it (a test queues extauth.Microblog, its route is
// /users/auth/twitter). It is "" when nothing is queued under either.
func (a *Auth) mockKey(set *mock.Set, name string) string {
	if set.Pending(name) {
		return name
	}
	for p, s := range a.slugs {
		if s == name && set.Pending(p) {
			return p
		}
	}
	return ""
}

// mockParam marks the callback of a mocked sign-in; outside mock mode it
// means nothing.
const mockParam = "extauth_mock"

// mockStrategy plays a provider that answers at once with the queued result.
type mockStrategy struct {
	set *mock.Set
	// key is what the result is queued under (mockKey), name the slug the
	// routes serve.
	key      string
	name     string
	callback string
}

func (s *mockStrategy) Name() string { return s.name }

func (s *mockStrategy) Begin(_ context.Context, tx *providers.Transaction) (string, error) {
	if !s.set.Start(s.key, tx.ID) {
		return "", errors.New("extauthtest: no sign-in queued")
	}
	return s.callback + "?" + url.Values{"state": {tx.State}, mockParam: {"1"}}.Encode(), nil
}

func (s *mockStrategy) Binding(r *http.Request) string { return r.URL.Query().Get("state") }

func (s *mockStrategy) Complete(_ context.Context, _ *http.Request, tx *providers.Transaction) (*providers.Identity, error) {
	res, ok := s.set.Finish(tx.ID)
	switch {
	case !ok:
		return nil, providers.NewError(providers.CodeInvalidState, "this sign-in is not valid any more; please start again",
			errors.New("extauthtest: no mocked sign-in for this transaction"))
	case res.Failure != nil:
		f := *res.Failure
		return nil, &f
	}
	if h, ok := res.HostIdentity.(*Identity); ok {
		return h.strategyIdentity(), nil
	}
	id := *res.Identity
	return &id, nil
}
