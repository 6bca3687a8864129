package enterprise

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"golang.org/x/oauth2"
)

// A tenant's v2.0 document as Entra ID served it (recorded 2023-01-09 for
// the tenant 12345678-1234-1234-1234-123456789012): the derivation from
// common's must give it byte for byte.
const recordedTenantV2 = `{"token_endpoint":"https://login.microsoftonline.com/12345678-1234-1234-1234-123456789012/oauth2/v2.0/token","token_endpoint_auth_methods_supported":["client_secret_post","private_key_jwt","client_secret_basic"],"jwks_uri":"https://login.microsoftonline.com/12345678-1234-1234-1234-123456789012/discovery/v2.0/keys","response_modes_supported":["query","fragment","form_post"],"subject_types_supported":["pairwise"],"id_token_signing_alg_values_supported":["RS256"],"response_types_supported":["code","id_token","code id_token","id_token token"],"scopes_supported":["openid","profile","email","offline_access"],"issuer":"https://login.microsoftonline.com/12345678-1234-1234-1234-123456789012/v2.0","request_uri_parameter_supported":false,"userinfo_endpoint":"https://graph.microsoft.com/oidc/userinfo","authorization_endpoint":"https://login.microsoftonline.com/12345678-1234-1234-1234-123456789012/oauth2/v2.0/authorize","device_authorization_endpoint":"https://login.microsoftonline.com/12345678-1234-1234-1234-123456789012/oauth2/v2.0/devicecode","http_logout_supported":true,"frontchannel_logout_supported":true,"end_session_endpoint":"https://login.microsoftonline.com/12345678-1234-1234-1234-123456789012/oauth2/v2.0/logout","claims_supported":["sub","iss","cloud_instance_name","cloud_instance_host_name","cloud_graph_host_name","msgraph_host","aud","exp","iat","auth_time","acr","nonce","preferred_username","name","tid","ver","at_hash","c_hash","email"],"kerberos_endpoint":"https://login.microsoftonline.com/12345678-1234-1234-1234-123456789012/kerberos","tenant_region_scope":"WW","cloud_instance_name":"microsoftonline.com","cloud_graph_host_name":"graph.windows.net","msgraph_host":"graph.microsoft.com","rbac_url":"https://pas.windows.net"}`

func TestEntraDocuments(t *testing.T) {
	const login, graph = "https://login.microsoftonline.com", "https://graph.microsoft.com"
	if got := string(entraDocument(false, "12345678-1234-1234-1234-123456789012", "12345678-1234-1234-1234-123456789012", "WW", login, graph, "graph.microsoft.com")); got != recordedTenantV2 {
		t.Errorf("tenant document:\n got %s\nwant %s", got, recordedTenantV2)
	}
	// common's, on the real hosts, is the constant itself.
	if got := string(entraDocument(false, "common", "", "", login, graph, "graph.microsoft.com")); got != entraV2Common {
		t.Errorf("common document changed by the derivation:\n%s", got)
	}
	if got := string(entraDocument(true, "common", "", "", login, graph, "graph.microsoft.com")); got != entraV1Common {
		t.Errorf("v1 common document changed by the derivation:\n%s", got)
	}

	// Served by the fake: the bytes with the fake's hosts, Entra ID's
	// caching, each authority its own.
	_, loginURL, graphURL := startEntra(t)
	for _, tc := range []struct{ path, issuer string }{
		{"/common/v2.0/.well-known/openid-configuration", loginURL + "/{tenantid}/v2.0"},
		{"/organizations/v2.0/.well-known/openid-configuration", loginURL + "/{tenantid}/v2.0"},
		{"/consumers/v2.0/.well-known/openid-configuration", loginURL + "/" + ConsumersTenant + "/v2.0"},
		{"/" + tenant + "/v2.0/.well-known/openid-configuration", loginURL + "/" + tenant + "/v2.0"},
		{"/contoso.example/v2.0/.well-known/openid-configuration", loginURL + "/" + tenant + "/v2.0"},
		{"/common/.well-known/openid-configuration", "https://sts.windows.net/{tenantid}/"},
		{"/" + tenant + "/.well-known/openid-configuration", "https://sts.windows.net/" + tenant + "/"},
	} {
		resp, body := get(t, loginURL+tc.path, "")
		var doc struct {
			Issuer, AuthorizationEndpoint, UserInfoEndpoint string
			MSGraphHost                                     string `json:"msgraph_host"`
		}
		if err := json.Unmarshal(body, &doc); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", tc.path, resp.StatusCode, body)
		}
		if doc.Issuer != tc.issuer || resp.Header.Get("Cache-Control") != "max-age=86400, private" ||
			strings.Contains(string(body), "login.microsoftonline.com") || !strings.Contains(string(body), `"msgraph_host":"`+strings.TrimPrefix(graphURL, "http://")+`"`) {
			t.Errorf("%s: issuer %q, %v\n%s", tc.path, doc.Issuer, resp.Header, body)
		}
	}
	if resp, _ := get(t, loginURL+"/nosuchtenant/v2.0/.well-known/openid-configuration", ""); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("an unknown tenant: %d", resp.StatusCode)
	}
}

const tenant = "aaaaaaaa-1111-4111-8111-aaaaaaaaaaaa"

// startEntra serves a fake with one tenant whose user is in groups,
// directory roles and app roles, and a personal account.
func startEntra(t *testing.T) (*Entra, string, string) {
	t.Helper()
	login := httptest.NewServer(nil)
	graph := httptest.NewServer(nil)
	t.Cleanup(login.Close)
	t.Cleanup(graph.Close)
	e, err := NewEntra(EntraConfig{LoginURL: login.URL, GraphURL: graph.URL, ClientID: "app", ClientSecret: "secret",
		RedirectURIs: []string{"https://app.example/cb"}, GroupsClaim: true, AutoApprove: true,
		Tenants: []EntraTenant{
			{ID: tenant, Domain: "contoso.example", Users: []EntraUser{{ObjectID: "oid-1", Name: "Ada", PreferredUsername: "ada@contoso.example",
				Email: "ada@contoso.example", Groups: groups(3), NestedGroups: []string{"nested"}, Roles: []string{"Reader"},
				WIDs: []string{"wid-1"}}}},
			{ID: ConsumersTenant, Users: []EntraUser{{ObjectID: "oid-msa", Name: "Dan", Email: "dan@outlook.example"}}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	login.Config.Handler, graph.Config.Handler = e.Login(), e.Graph()
	t.Cleanup(e.Graph().Close)
	return e, login.URL, graph.URL
}

func groups(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("group-%04d", i)
	}
	return out
}

func get(t *testing.T, u, bearer string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

// signIn runs the code flow at an authority of the fake and returns the
// token response and the ID token's claims.
func signIn(t *testing.T, loginURL, authority, scope string, v1 bool) (*oauth2.Token, map[string]any) {
	t.Helper()
	p := "/oauth2/v2.0/"
	if v1 {
		p = "/oauth2/"
	}
	conf := oauth2.Config{ClientID: "app", ClientSecret: "secret", RedirectURL: "https://app.example/cb", Scopes: strings.Fields(scope),
		Endpoint: oauth2.Endpoint{AuthURL: loginURL + "/" + authority + p + "authorize", TokenURL: loginURL + "/" + authority + p + "token",
			AuthStyle: oauth2.AuthStyleInHeader}}
	verifier := oauth2.GenerateVerifier()
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(conf.AuthCodeURL("state", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("nonce", "n")))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || loc.Query().Get("code") == "" {
		t.Fatalf("authorize: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	tok, err := conf.Exchange(context.Background(), loc.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := tok.Extra("id_token").(string)
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		t.Fatalf("id token %q", raw)
	}
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	return tok, claims
}

// ID tokens are shaped as Entra ID's: the user's tenant's issuer, tid,
// oid, a pairwise sub, ver, no email_verified; groups or, past the limit,
// an overage; v1 tokens with upn and the security token service's issuer.
func TestEntraTokens(t *testing.T) {
	_, loginURL, _ := startEntra(t)
	_, c := signIn(t, loginURL, "organizations", "openid profile email", false)
	sum := sha256.Sum256([]byte(tenant + "\x00oid-1\x00app"))
	if c["iss"] != loginURL+"/"+tenant+"/v2.0" || c["tid"] != tenant || c["oid"] != "oid-1" || c["ver"] != "2.0" ||
		c["sub"] != base64.RawURLEncoding.EncodeToString(sum[:])[:43] || c["email_verified"] != nil || c["nbf"] == nil ||
		len(c["groups"].([]any)) != 4 || c["roles"] == nil || c["wids"] == nil {
		t.Errorf("v2.0 claims %v", c)
	}
	_, c = signIn(t, loginURL, tenant, "openid", true)
	if c["iss"] != "https://sts.windows.net/"+tenant+"/" || c["ver"] != "1.0" || c["upn"] != "ada@contoso.example" || c["preferred_username"] != nil {
		t.Errorf("v1 claims %v", c)
	}
	_, c = signIn(t, loginURL, "consumers", "openid", false)
	if c["tid"] != ConsumersTenant || c["groups"] != nil {
		t.Errorf("personal account claims %v", c)
	}

	// Past GroupsLimit: an overage instead of the groups.
	login := httptest.NewServer(nil)
	defer login.Close()
	e, err := NewEntra(EntraConfig{LoginURL: login.URL, GraphURL: "https://graph.example", ClientID: "app", ClientSecret: "secret",
		RedirectURIs: []string{"https://app.example/cb"}, GroupsClaim: true, AutoApprove: true,
		Tenants: []EntraTenant{{ID: tenant, Users: []EntraUser{{ObjectID: "oid-2", Groups: groups(GroupsLimit + 1)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	login.Config.Handler = e.Login()
	_, c = signIn(t, login.URL, tenant, "openid", false)
	names, _ := c["_claim_names"].(map[string]any)
	sources, _ := c["_claim_sources"].(map[string]any)
	src, _ := sources["src1"].(map[string]any)
	if c["groups"] != nil || names["groups"] != "src1" || src["endpoint"] != "https://graph.windows.net/"+tenant+"/users/oid-2/getMemberObjects" {
		t.Errorf("overage claims %v", c)
	}
}

// Graph lists memberships page by page for a token whose scopes allow
// it, and refuses the others as Graph does.
func TestGraphMemberships(t *testing.T) {
	_, loginURL, graphURL := startEntra(t)
	tok, _ := signIn(t, loginURL, tenant, "openid profile GroupMember.Read.All", false)
	var got []string
	next := graphURL + "/v1.0/me/memberOf?$select=id&$top=2"
	for pages := 0; next != ""; pages++ {
		if pages > 5 {
			t.Fatal("no end to the pages")
		}
		resp, body := get(t, next, tok.AccessToken)
		var page struct {
			Value []struct {
				Type string `json:"@odata.type"`
				ID   string `json:"id"`
			} `json:"value"`
			Next string `json:"@odata.nextLink"`
		}
		if err := json.Unmarshal(body, &page); err != nil || resp.StatusCode != http.StatusOK || len(page.Value) > 2 {
			t.Fatalf("page: %d %s", resp.StatusCode, body)
		}
		for _, v := range page.Value {
			got = append(got, v.Type)
		}
		next = page.Next
	}
	// Three groups and a directory role; the nested group only
	// transitively.
	if len(got) != 4 || slices.Index(got, "#microsoft.graph.directoryRole") != 3 {
		t.Errorf("memberships %v", got)
	}
	if resp, body := get(t, graphURL+"/v1.0/me/transitiveMemberOf?$top=999", tok.AccessToken); !strings.Contains(string(body), `"nested"`) || resp.StatusCode != http.StatusOK {
		t.Errorf("transitive: %d %s", resp.StatusCode, body)
	}
	for _, tc := range []struct {
		name, bearer, path string
		status             int
		code               string
	}{
		{"no token", "", "/v1.0/me/memberOf", http.StatusUnauthorized, "InvalidAuthenticationToken"},
		{"an unknown token", "not-a-token", "/v1.0/me/memberOf", http.StatusUnauthorized, "InvalidAuthenticationToken"},
		{"a page too large", tok.AccessToken, "/v1.0/me/memberOf?$top=1000", http.StatusBadRequest, "Request_UnsupportedQuery"},
		{"an unknown path", tok.AccessToken, "/v1.0/me/photo", http.StatusBadRequest, "BadRequest"},
	} {
		resp, body := get(t, graphURL+tc.path, tc.bearer)
		if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.code) {
			t.Errorf("%s: %d %s", tc.name, resp.StatusCode, body)
		}
	}
	narrow, _ := signIn(t, loginURL, tenant, "openid profile", false)
	if resp, body := get(t, graphURL+"/v1.0/me/memberOf", narrow.AccessToken); resp.StatusCode != http.StatusForbidden ||
		!strings.Contains(string(body), "Authorization_RequestDenied") {
		t.Errorf("without GroupMember.Read.All: %d %s", resp.StatusCode, body)
	}
	if resp, body := get(t, graphURL+"/oidc/userinfo", narrow.AccessToken); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"name":"Ada"`) {
		t.Errorf("userinfo: %d %s", resp.StatusCode, body)
	}
}

// Okta's logout takes id_token_hint; Auth0's /v2/logout takes a returnTo
// of the Allowed Logout URLs, compared without its query, and the
// application's client_id.
func TestLogoutEndpoints(t *testing.T) {
	srv := httptest.NewServer(nil)
	defer srv.Close()
	okta, err := NewOkta(OktaConfig{URL: srv.URL, ClientID: "app", ClientSecret: "s", RedirectURIs: []string{"https://app.example/cb"}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = okta
	if resp, body := get(t, srv.URL+"/oauth2/default/v1/logout?post_logout_redirect_uri=x", ""); resp.StatusCode != http.StatusBadRequest ||
		!strings.Contains(string(body), "id_token_hint") {
		t.Errorf("Okta logout without id_token_hint: %d %s", resp.StatusCode, body)
	}
	for _, path := range []string{"/.well-known/openid-configuration", "/oauth2/default/.well-known/openid-configuration"} {
		if resp, body := get(t, srv.URL+path, ""); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"issuer":"`+srv.URL) {
			t.Errorf("%s: %d %s", path, resp.StatusCode, body)
		}
	}

	a0, err := NewAuth0(Auth0Config{URL: srv.URL, ClientID: "app", ClientSecret: "s", RedirectURIs: []string{"https://app.example/cb"},
		AllowedLogoutURLs: []string{"https://app.example/bye"}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = a0
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range []struct {
		query  url.Values
		status int
	}{
		{url.Values{"client_id": {"app"}, "returnTo": {"https://app.example/bye?state=xyz"}}, http.StatusFound},
		{url.Values{"client_id": {"app"}, "returnTo": {"https://evil.example/bye"}}, http.StatusBadRequest},
		{url.Values{"client_id": {"other"}, "returnTo": {"https://app.example/bye"}}, http.StatusBadRequest},
	} {
		resp, err := noFollow.Get(srv.URL + "/v2/logout?" + tc.query.Encode())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status || tc.status == http.StatusFound && resp.Header.Get("Location") != tc.query.Get("returnTo") {
			t.Errorf("%v: %d %s", tc.query, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	if a0.Logouts() != 1 {
		t.Errorf("%d sign-outs", a0.Logouts())
	}
	_, body := get(t, srv.URL+"/.well-known/openid-configuration", "")
	if strings.Contains(string(body), "end_session_endpoint") || !strings.HasPrefix(string(body), `{"issuer":"`+srv.URL+`/",`) {
		t.Errorf("Auth0 document without end session discovery: %s", body)
	}
}
