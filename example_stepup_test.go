package extauth_test

import (
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/extauth/extauth"
)

// stepUpAuth is the Auth of the examples: an OpenID Connect provider whose
// secrets allow a login hint, a max_age, acr values (as an API's RFC 9470
// challenge names them) and a level per sign-in, and map
// the host's level "high" to the provider's acr value.
func stepUpAuth(onSuccess extauth.CallbackFunc) *extauth.Auth {
	cfg, err := extauth.ParseConfig([]byte(`
oidc_client_id: app
oidc_client_secret: s3cret
oidc_issuer: https://id.example.org
oidc_additional_settings:
  request_options: [login_hint, max_age, acr_values, level]
  assurance_levels:
    high: urn:example:loa:high
`))
	if err != nil {
		panic(err)
	}
	a, err := extauth.New(cfg, extauth.Options{
		BaseURL:   "https://app.example.org",
		CookieKey: make([]byte, 32), // in production: a random, secret key
		OnSuccess: onSuccess,
	})
	if err != nil {
		panic(err)
	}
	return a
}

// A host builds a sign-in's start from code: here a "Continue as" button
// that suggests the account the user typed on a previous page.
func ExampleAuth_StartForm() {
	a := stepUpAuth(func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {})
	defer a.Close()
	page := template.Must(template.New("").Parse(`<form method="post" action="{{.Action}}">
{{range $k, $v := .Fields}}<input type="hidden" name="{{$k}}" value="{{index $v 0}}">
{{end}}<button>Continue as {{.Email}}</button>
</form>
`))
	r := httptest.NewRequest(http.MethodGet, "https://app.example.org/login", nil)
	action, fields, err := a.StartForm(r, extauth.OIDC, extauth.SignInOptions{
		LoginHint: "ada@example.org",
		ReturnTo:  "/account",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	page.Execute(os.Stdout, map[string]any{"Action": action, "Fields": fields, "Email": "ada@example.org"})

	_, _, err = a.StartForm(r, extauth.OIDC, extauth.SignInOptions{Prompt: "select_account"})
	fmt.Println(err)
	// Output:
	// <form method="post" action="/users/auth/oidc">
	// <input type="hidden" name="login_hint" value="ada@example.org">
	// <input type="hidden" name="return_to" value="/account">
	// <button>Continue as ada@example.org</button>
	// </form>
	// extauth: oidc: sign-in option prompt is not allowed for this provider (request_options)
}

// A payment page needs the host's level "high", and a sign-in at most
// five minutes old. A session that does not meet it gets a page that signs
// the user in again at that level and comes back.
func ExampleAuth_RequireAssurance() {
	sessions := map[string]*extauth.Identity{}
	current := func(r *http.Request) *extauth.Identity {
		c, err := r.Cookie("app_session")
		if err != nil {
			return nil
		}
		return sessions[c.Value]
	}
	a := stepUpAuth(func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
		// A step-up comes back as the same account (extauth refuses
		// another): renew the session with the stronger sign-in.
		sessions["s2"] = id
		http.SetCookie(w, &http.Cookie{Name: "app_session", Value: "s2", Path: "/", HttpOnly: true, Secure: true})
		http.Redirect(w, r, extauth.ReturnTo(r), http.StatusSeeOther)
	})
	defer a.Close()
	mux := http.NewServeMux()
	a.Mount(mux)
	need := extauth.Assurance{Level: "high", MaxAge: 5 * time.Minute}
	mux.Handle("/pay", a.RequireAssurance(need, current)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "pay as", current(r).UID)
	})))

	// Signed in an hour ago, without saying how strongly.
	sessions["s1"] = &extauth.Identity{Provider: "oidc", UID: "ada", AuthTime: time.Now().Add(-time.Hour)}
	r := httptest.NewRequest(http.MethodGet, "https://app.example.org/pay", nil)
	r.AddCookie(&http.Cookie{Name: "app_session", Value: "s1"})
	r.Header.Set("Accept", "text/html")
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, r)
	fmt.Println(w.Code, w.Header().Get("WWW-Authenticate"))

	// Signed in a minute ago at the level.
	sessions["s1"] = &extauth.Identity{Provider: "oidc", UID: "ada", ACR: "urn:example:loa:high", AuthTime: time.Now().Add(-time.Minute)}
	w = httptest.NewRecorder()
	mux.ServeHTTP(w, r)
	fmt.Print(w.Code, " ", w.Body)
	// Output:
	// 401 Bearer error="insufficient_user_authentication", error_description="A stronger or more recent sign-in is needed", acr_values="urn:example:loa:high", max_age=300
	// 200 pay as ada
}

// In one handler, Assure is RequireAssurance's function form.
func ExampleAuth_Assure() {
	a := stepUpAuth(func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {})
	defer a.Close()
	changeEmail := func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
		if !a.Assure(w, r, id, extauth.Assurance{MaxAge: 10 * time.Minute}) {
			return // Assure answered: a new sign-in, then back here
		}
		fmt.Fprintln(w, "changing the e-mail of", id.UID)
	}
	for _, signedIn := range []time.Duration{time.Minute, time.Hour} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "https://app.example.org/email", nil)
		changeEmail(w, r, &extauth.Identity{Provider: "oidc", UID: "ada", AuthTime: time.Now().Add(-signedIn)})
		var answer struct {
			Error  string              `json:"error"`
			PostTo string              `json:"post_to"`
			Form   map[string][]string `json:"form"`
		}
		if w.Code == http.StatusOK {
			fmt.Print(w.Code, " ", w.Body)
		} else if json.Unmarshal(w.Body.Bytes(), &answer) == nil {
			fmt.Println(w.Code, answer.Error, answer.PostTo, answer.Form["max_age"])
		}
	}
	// Output:
	// 200 changing the e-mail of ada
	// 401 insufficient_user_authentication /users/auth/oidc [600]
}

// A host that proxies an API steps up when the API says so (RFC 9470).
func ExampleParseStepUpChallenge() {
	api := http.Header{}
	api.Set("WWW-Authenticate", `Bearer error="insufficient_user_authentication", `+
		`error_description="A different authentication level is required", acr_values="urn:example:loa:high", max_age=300`)
	need, ok := extauth.ParseStepUpChallenge(api)
	fmt.Println(ok, need.ACRValues, need.MaxAge)
	// Output:
	// true [urn:example:loa:high] 5m0s
}

// A host that proxies an API hands the API's step-up challenge to StepUp,
// which signs the user in again as the API asks and comes back.
func ExampleAuth_StepUp() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_user_authentication", acr_values="urn:example:loa:high"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer api.Close()
	a := stepUpAuth(func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {})
	defer a.Close()
	proxy := func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
		resp, err := http.Get(api.URL + "/transfers")
		if err != nil {
			http.Error(w, "the API is unavailable", http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		if need, ok := extauth.ParseStepUpChallenge(resp.Header); ok {
			a.StepUp(w, r, id, need)
			return
		}
		w.WriteHeader(resp.StatusCode)
	}
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, "https://app.example.org/transfers", nil)
	proxy(w, r, &extauth.Identity{Provider: "oidc", UID: "ada", ACR: "urn:example:loa:high"})
	fmt.Println(w.Code, w.Header().Get("WWW-Authenticate"))
	// Output:
	// 401 Bearer error="insufficient_user_authentication", error_description="A stronger or more recent sign-in is needed", acr_values="urn:example:loa:high"
}
