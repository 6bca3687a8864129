package extauth_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"

	"github.com/extauth/extauth"
)

// The pages extauth serves itself, in the host's words: the providers'
// names, a language of its own, and a stylesheet. A link to the sign-in
// followed in a browser that says nothing of where it comes from gets the
// page that asks for a click, in the browser's language.
func ExamplePages() {
	cfg := &extauth.Config{OIDC: extauth.OIDCConfig{ClientID: "app", ClientSecret: extauth.NewSecret("s3cret"), Issuer: "https://id.example.org"}}
	o := extauth.Options{BaseURL: "https://app.example.org", CookieKey: make([]byte, 32),
		OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {}}
	o.Pages = extauth.Pages{
		ProviderNames: map[extauth.Provider]string{
			extauth.OIDC: "Example Corp account",
			extauth.SAML: "Research Federation",
		},
		Messages: map[string]map[string]string{
			// A language of its own: Spanish, for the keys it changes.
			"es": {
				"confirm.title":  "Iniciar sesión con {provider}",
				"confirm.button": "Continuar",
			},
			// Words of extauth's changed.
			"en": {"discovery.title": "Sign in with your university"},
		},
		Stylesheet: "main{border-color:#0b5}.primary{background:#0b5;border-color:#0b5}",
	}
	a, err := extauth.New(cfg, o)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()
	mux := http.NewServeMux()
	a.Mount(mux)
	for _, lang := range []string{"es-MX", "de", "ja"} {
		r := httptest.NewRequest(http.MethodGet, "https://app.example.org/users/auth/oidc", nil)
		r.Header.Set("Accept-Language", lang)
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		title := regexp.MustCompile(`<title>(.*)</title>`).FindStringSubmatch(w.Body.String())
		button := regexp.MustCompile(`<button type="submit" class="primary">(.*)</button>`).FindStringSubmatch(w.Body.String())
		fmt.Println(w.Header().Get("Content-Language"), title[1], "·", button[1])
	}
	// Output:
	// es Iniciar sesión con Example Corp account · Continuar
	// de Anmelden mit Example Corp account · Weiter
	// en Sign in with Example Corp account · Continue
}
