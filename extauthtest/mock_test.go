package extauthtest_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest"
)

// app is a host application under test: extauth's routes, a hook that
// records each identity and lands on ReturnTo, and a failure page that
// records each code.
type app struct {
	*extauth.Auth
	URL string

	mu       sync.Mutex
	signedIn []*extauth.Identity
	failures []*extauth.Error
}

func (a *app) identities() []*extauth.Identity {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*extauth.Identity(nil), a.signedIn...)
}

func (a *app) lastFailure() *extauth.Error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.failures) == 0 {
		return nil
	}
	return a.failures[len(a.failures)-1]
}

// newApp serves an application with cfg (built once its URL is known).
func newApp(t *testing.T, cfg func(base string) *extauth.Config, edit func(*extauth.Options)) *app {
	t.Helper()
	a := &app{}
	srv := extauthtest.Serve(t, func(base string) http.Handler {
		o := extauth.Options{
			BaseURL:   base,
			CookieKey: make([]byte, 32),
			Logger:    slog.New(slog.DiscardHandler),
			Timeout:   time.Minute,
			OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
				a.mu.Lock()
				a.signedIn = append(a.signedIn, id)
				a.mu.Unlock()
				http.Redirect(w, r, extauth.ReturnTo(r), http.StatusSeeOther)
			},
			OnFailure: func(w http.ResponseWriter, r *http.Request, err *extauth.Error) {
				a.mu.Lock()
				a.failures = append(a.failures, err)
				a.mu.Unlock()
				http.Error(w, "sign-in failed: "+string(err.Code), err.Code.HTTPStatus())
			},
		}
		if edit != nil {
			edit(&o)
		}
		c := &extauth.Config{}
		if cfg != nil {
			c = cfg(base)
		}
		auth, err := extauth.New(c, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { auth.Close() })
		a.Auth = auth
		mux := http.NewServeMux()
		auth.Mount(mux)
		mux.HandleFunc("GET /after", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "landed") })
		return mux
	})
	a.URL = srv.URL
	return a
}

// A mocked sign-in with each built-in provider, none of them configured,
// goes through the routes to the hook with the provider's default identity,
// and lands where the browser asked.
func TestMockSignInEveryProvider(t *testing.T) {
	a := newApp(t, nil, nil)
	m := extauthtest.Mock(a.Auth)
	for i, p := range extauth.BuiltinProviders() {
		m.SignIn(p)
		page := extauthtest.NewBrowser(t).Post(a.URL+"/users/auth/"+string(p), url.Values{"return_to": {"/after"}})
		if page.StatusCode != http.StatusOK || page.URL.Path != "/after" {
			t.Fatalf("%s: ended at %s with %d %s", p, page.URL, page.StatusCode, page.Body)
		}
		ids := a.identities()
		if len(ids) != i+1 {
			t.Fatalf("%s: hook called %d times", p, len(ids))
		}
		want := extauthtest.DefaultIdentity(p)
		got := ids[i]
		if got.Provider != string(p) || got.UID != want.UID || got.Email != want.Email || got.Name != want.Name || got.UID == "" {
			t.Errorf("%s: hook saw %s %q %q %q, want %q %q %q", p, got.Provider, got.UID, got.Email, got.Name, want.UID, want.Email, want.Name)
		}
		if m.Pending(p) {
			t.Errorf("%s: still pending after the sign-in", p)
		}
	}
	// Nothing queued any more: the providers are not configured.
	if page := extauthtest.NewBrowser(t).Post(a.URL+"/users/auth/saml", nil); page.StatusCode != http.StatusNotFound {
		t.Errorf("saml with nothing queued: %d", page.StatusCode)
	}
}

// Fail reaches OnFailure with the chosen code, for a provider configured or
// not, and the failure page answers with the code's status.
func TestMockFail(t *testing.T) {
	a := newApp(t, nil, nil)
	for _, code := range []extauth.Code{extauth.CodeAccessDenied, extauth.CodeTimeout, extauth.CodeInvalidResponse} {
		extauthtest.Mock(a.Auth).Fail(extauth.OIDC, code)
		page := extauthtest.NewBrowser(t).Post(a.URL+"/users/auth/oidc", nil)
		e := a.lastFailure()
		if e == nil || e.Code != code || e.Provider != "oidc" || e.Message == "" || page.StatusCode != code.HTTPStatus() {
			t.Fatalf("%s: OnFailure saw %+v, page %d", code, e, page.StatusCode)
		}
	}
	if len(a.identities()) != 0 {
		t.Fatal("a failed sign-in called the hook")
	}
}

// Several identities queue several sign-ins, in order, and every Mock(a)
// of one Auth queues into the same place.
func TestMockQueuesInOrder(t *testing.T) {
	a := newApp(t, nil, nil)
	grace, ada := extauthtest.DefaultIdentity(extauth.SAML), extauthtest.DefaultIdentity(extauth.SAML)
	grace.UID, ada.UID = "grace", "ada"
	extauthtest.Mock(a.Auth).SignIn(extauth.SAML, grace)
	extauthtest.Mock(a.Auth).SignIn(extauth.SAML, ada).Fail(extauth.SAML, extauth.CodeReplayed)
	b := extauthtest.NewBrowser(t)
	b.Post(a.URL+"/users/auth/saml", nil)
	b.Post(a.URL+"/users/auth/saml", nil)
	b.Post(a.URL+"/users/auth/saml", nil)
	ids := a.identities()
	if len(ids) != 2 || ids[0].UID != "grace" || ids[1].UID != "ada" {
		t.Fatalf("sign-ins: %v", ids)
	}
	if e := a.lastFailure(); e == nil || e.Code != extauth.CodeReplayed {
		t.Fatalf("third sign-in: %v", e)
	}
}

// Every field of the identity a test queues reaches the hook as given,
// except those the routes own (Provider, Tenant, Unsolicited, and the
// tenant the tokens were issued at).
func TestMockKeepsEveryField(t *testing.T) {
	a := newApp(t, nil, nil)
	var want extauth.Identity
	v := reflect.ValueOf(&want).Elem()
	for i := 0; i < v.NumField(); i++ {
		f, name := v.Field(i), v.Type().Field(i).Name
		switch name {
		case "Provider", "Tenant", "Unsolicited":
			continue
		}
		fill(t, name, f)
	}
	extauthtest.Mock(a.Auth).SignIn("corp", want)
	extauthtest.NewBrowser(t).Post(a.URL+"/users/auth/corp", nil)
	ids := a.identities()
	if len(ids) != 1 {
		t.Fatalf("hook called %d times", len(ids))
	}
	want.Provider, want.Tokens.Tenant = "corp", ""
	if got := *ids[0]; !reflect.DeepEqual(got, want) {
		t.Fatalf("hook saw\n%#v\nwant\n%#v", got, want)
	}
}

// fill sets v, and every field of a struct v, to a value that is not the
// zero one.
func fill(t *testing.T, name string, v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("x-" + name)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			v.Set(reflect.ValueOf(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)))
			return
		}
		for i := 0; i < v.NumField(); i++ {
			fill(t, name+"."+v.Type().Field(i).Name, v.Field(i))
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, name, v.Elem())
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		val := reflect.New(v.Type().Elem()).Elem()
		if val.Kind() == reflect.Interface {
			val.Set(reflect.ValueOf("x-" + name))
		} else {
			fill(t, name, val)
		}
		m.SetMapIndex(reflect.ValueOf("k-"+name), val)
		v.Set(m)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(t, name, s.Index(0))
		v.Set(s)
	default:
		t.Fatalf("field %s: cannot fill a %s", name, v.Kind())
	}
}

// Mocks of one Auth never reach another, even in parallel tests.
func TestMockParallelAuthsAreApart(t *testing.T) {
	for i := range 4 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			mine, other := newApp(t, nil, nil), newApp(t, nil, nil)
			id := extauthtest.DefaultIdentity(extauth.OIDC)
			id.UID = fmt.Sprint("user-", i)
			extauthtest.Mock(mine.Auth).SignIn(extauth.OIDC, id)
			if page := extauthtest.NewBrowser(t).Post(other.URL+"/users/auth/oidc", nil); page.StatusCode != http.StatusNotFound {
				t.Fatalf("another Auth saw the mock: %d", page.StatusCode)
			}
			extauthtest.NewBrowser(t).Post(mine.URL+"/users/auth/oidc", nil)
			if ids := mine.identities(); len(ids) != 1 || ids[0].UID != id.UID {
				t.Fatalf("signed in as %v, want %s", ids, id.UID)
			}
		})
	}
}

// A provider renamed with Options.Slugs is mocked under its own name.
func TestMockSlugs(t *testing.T) {
	a := newApp(t, nil, func(o *extauth.Options) { o.Slugs = map[extauth.Provider]string{extauth.Microblog: "twitter"} })
	extauthtest.Mock(a.Auth).SignIn(extauth.Microblog)
	page := extauthtest.NewBrowser(t).Post(a.URL+"/users/auth/twitter", url.Values{"return_to": {"/after"}})
	if ids := a.identities(); page.URL.Path != "/after" || len(ids) != 1 || ids[0].Provider != "twitter" {
		t.Fatalf("ended at %s (%d), hook saw %v", page.URL, page.StatusCode, ids)
	}
}

// A mocked sign-in is still a sign-in: a cross-site start is refused and
// its queued result stays for the next, proper one.
func TestMockKeepsCSRFDefence(t *testing.T) {
	a := newApp(t, nil, nil)
	m := extauthtest.Mock(a.Auth).SignIn(extauth.SAML)
	page := extauthtest.NewBrowser(t).PostFrom("https://evil.example/", a.URL+"/users/auth/saml", nil)
	if e := a.lastFailure(); page.StatusCode != http.StatusForbidden || e == nil || e.Code != extauth.CodeCSRFDetected {
		t.Fatalf("cross-site start: %d, %v", page.StatusCode, e)
	}
	if !m.Pending(extauth.SAML) || len(a.identities()) != 0 {
		t.Fatal("the refused start used the mock")
	}
	if !strings.Contains(extauthtest.NewBrowser(t).Post(a.URL+"/users/auth/saml", url.Values{"return_to": {"/after"}}).Body, "landed") {
		t.Fatal("the proper start did not sign in")
	}
}
