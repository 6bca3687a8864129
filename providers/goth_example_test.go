package providers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/markbates/goth/providers/gitlab"

	"github.com/extauth/extauth/providers"
)

// A host mounts any of goth's providers next to the built-in ones: build it
// with extauth's callback URL for its name, adapt it, and pass it in
// extauth.Options.Extra. extauth then serves /users/auth/gitlab and
// /users/auth/gitlab/callback with its own state, cookie, hooks and errors.
func ExampleGoth() {
	const base = "https://app.example.org"
	gl := gitlab.New("client-id", "client-secret", base+"/users/auth/gitlab/callback", "read_user")
	strategy := providers.Goth(gl)
	// extauth.New calls SetEnv for the strategies in Options.Extra; here it
	// is done by hand to show what the strategy does on its own.
	strategy.SetEnv(providers.Env{
		CallbackURL: base + "/users/auth/gitlab/callback",
		HTTPClient:  &http.Client{Timeout: 10 * time.Second},
	})

	tx := &providers.Transaction{State: "state-from-the-sealed-transaction"}
	authorize, err := strategy.Begin(context.Background(), tx)
	if err != nil {
		fmt.Println(err)
		return
	}
	u, _ := url.Parse(authorize)
	fmt.Println(strategy.Name())
	fmt.Println(u.Host + u.Path)
	fmt.Println(u.Query().Get("state") == tx.State)
	fmt.Println(gl.HTTPClient != nil)
	// Output:
	// gitlab
	// gitlab.com/oauth/authorize
	// true
	// true
}
