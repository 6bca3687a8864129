package extauth

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/extauth/extauth/internal/mock"
	"github.com/extauth/extauth/providers"
)

// UseMocks switches a into the mock mode of package extauthtest, for a
// host's tests: extauthtest.Mock(a) calls it, and nothing else can make its
// argument. In mock mode a provider with a queued result signs in through
// the real routes, cookie and hooks without its provider, whether or not it
// is configured; providers without one work as usual.
func (a *Auth) UseMocks(s *mock.Set) { a.mocks.Store(s) }

// mockMount is the mount of a mocked sign-in of provider name on st, or
// false when a is not in mock mode or nothing is queued or started for it.
func (a *Auth) mockMount(r *http.Request, st *site, name string, callback bool) (mount, bool) {
	set := a.mocks.Load()
	if set == nil {
		return mount{}, false
	}
	if callback && r.URL.Query().Get(mockParam) == "" || !callback && !set.Pending(name) {
		return mount{}, false
	}
	hooks := st.callbacks
	if _, ok := hooks[name]; !ok {
		// A provider the test environment does not configure.
		hooks = map[string]CallbackFunc{name: a.opts.Callbacks[Provider(name)]}
		if hooks[name] == nil {
			hooks[name] = a.opts.OnSuccess
		}
	}
	mst := *st
	mst.callbacks = hooks
	return mount{site: &mst, name: name, s: &mockStrategy{set: set, name: name, callback: st.url(st.callbackPath(name))}}, true
}

// mockParam marks the callback of a mocked sign-in; outside mock mode it
// means nothing.
const mockParam = "extauth_mock"

// mockStrategy plays a provider that answers at once with the queued result.
type mockStrategy struct {
	set      *mock.Set
	name     string
	callback string
}

func (s *mockStrategy) Name() string { return s.name }

func (s *mockStrategy) Begin(_ context.Context, tx *providers.Transaction) (string, error) {
	if !s.set.Start(s.name, tx.ID) {
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
	id := *res.Identity
	return &id, nil
}
