package enterprise_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/extauth/extauth/extauthtest/enterprise"
)

// A fake Entra ID with its Microsoft Graph, for an application served at
// appURL: the organizations authority's discovery document names the
// {tenantid} template, as Entra ID's does.
func ExampleNewEntra() {
	const tenantID, oid = "aaaaaaaa-1111-4111-8111-aaaaaaaaaaaa", "0a0a0a0a-0000-4000-8000-00000000000a"
	appURL := "https://app.example"
	login, graph := httptest.NewServer(nil), httptest.NewServer(nil)
	entra, _ := enterprise.NewEntra(enterprise.EntraConfig{
		LoginURL: login.URL, GraphURL: graph.URL, ClientID: "app", ClientSecret: "secret",
		RedirectURIs: []string{appURL + "/users/auth/oidc/callback"}, AutoApprove: true, GroupsClaim: true,
		Tenants: []enterprise.EntraTenant{{ID: tenantID, Users: []enterprise.EntraUser{{ObjectID: oid, Name: "Ada"}}}},
	})
	login.Config.Handler, graph.Config.Handler = entra.Login(), entra.Graph()
	// oidc_issuer: entra.Issuer("organizations"); graph_url: graph.URL
	defer login.Close()
	defer graph.Close()

	resp, err := http.Get(entra.Issuer("organizations") + "/.well-known/openid-configuration")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	var doc struct{ Issuer string }
	json.NewDecoder(resp.Body).Decode(&doc)
	fmt.Println(strings.TrimPrefix(doc.Issuer, login.URL))
	// Output: /{tenantid}/v2.0
}
