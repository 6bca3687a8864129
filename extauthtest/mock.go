package extauthtest

import (
	"errors"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/internal/mock"
	"github.com/extauth/extauth/providers"
)

// Mocks is the mock mode of one *extauth.Auth: what the next sign-ins with
// each provider yield. Mocks of one Auth never reach another, so parallel
// tests, each with its own Auth, do not see each other's.
//
// A mocked sign-in goes through the real routes: the authorize route seals
// its transaction cookie and redirects straight to the provider's callback,
// which checks the cookie as it always does and then calls the host's hook
// (Options.Callbacks or OnSuccess) with the queued identity, or OnFailure
// with the queued failure. Only the provider is left out. A provider
// without anything queued works as usual, and one that the test's
// configuration does not even have can be mocked too: its routes exist
// while something is queued for it.
type Mocks struct {
	set *mock.Set
}

// Mock switches a into mock mode and returns its Mocks. Every call for the
// same a returns the same queues. Mock mode exists only for an Auth that a
// test handed to Mock: nothing else, in particular no configuration or
// environment variable, can switch it on.
func Mock(a *extauth.Auth) *Mocks {
	return &Mocks{set: a.UseMocks(mock.NewSet())}
}

// SignIn queues a successful sign-in with provider p: the next sign-in with
// p yields id, or DefaultIdentity(p) when no id is given. With several ids,
// the next sign-ins yield one each, in order. The identity is handed over
// as given (Provider and Tenant are set by the routes, as for a real
// sign-in): start from DefaultIdentity(p) and change what the test is
// about, so that fields a hook reads, such as SAML for single logout, are
// there.
func (m *Mocks) SignIn(p extauth.Provider, id ...extauth.Identity) *Mocks {
	if len(id) == 0 {
		id = []extauth.Identity{DefaultIdentity(p)}
	}
	for _, v := range id {
		m.set.Push(string(p), mock.Result{HostIdentity: &v})
	}
	return m
}

// Fail queues a failed sign-in with provider p: the next sign-in with p
// reaches Options.OnFailure with an *extauth.Error of that code, for p, with
// the message extauth shows for it.
func (m *Mocks) Fail(p extauth.Provider, code extauth.Code) *Mocks {
	m.set.Push(string(p), mock.Result{Failure: providers.NewError(providers.Code(code), failureMessage(code),
		errors.New("extauthtest: mocked failure"))})
	return m
}

// Pending reports whether a result queued for p has not been used by a
// sign-in yet: a test can check that its sign-in went where it meant.
func (m *Mocks) Pending(p extauth.Provider) bool { return m.set.Pending(string(p)) }

// failureMessage is the message a real sign-in failing with code shows.
func failureMessage(code extauth.Code) string {
	switch code {
	case extauth.CodeAccessDenied:
		return "you did not allow the sign-in"
	case extauth.CodeCSRFDetected:
		return "sign-in must start from this site"
	case extauth.CodeInvalidState:
		return "this sign-in is not valid any more; please start again"
	case extauth.CodeInvalidResponse:
		return "the provider's answer is not valid"
	case extauth.CodeInvalidCredentials:
		return "the provider rejected this application's credentials"
	case extauth.CodeReplayed:
		return "this sign-in was already used"
	case extauth.CodeProviderUnavailable:
		return "sign-in is unavailable; please try again shortly"
	case extauth.CodeMisconfigured:
		return "sign-in is not configured correctly for this site"
	case extauth.CodeTimeout:
		return "the provider did not answer in time"
	}
	return "sign-in failed"
}
