package providers

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
)

const (
	tidA = "aaaaaaaa-1111-4111-8111-aaaaaaaaaaaa"
	tidB = "bbbbbbbb-2222-4222-8222-bbbbbbbbbbbb"
)

func policy(t *testing.T, issuer string, tenants ...string) (*entraPolicy, *url.URL) {
	t.Helper()
	p, err := newEntraPolicy(issuer, OIDCOptions{Tenants: tenants})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(issuer)
	return p, u
}

// The discovery document's issuer is taken only in the shapes Entra ID
// gives it for the configured authority: a template where, and only where,
// the authority is multi-tenant, on the authority's own host for v2.0.
func TestEntraAcceptIssuer(t *testing.T) {
	const login = "https://login.microsoftonline.com/"
	for _, tc := range []struct {
		authority, doc string
		tenants        []string
		ok             bool
	}{
		{login + "organizations/v2.0", login + "{tenantid}/v2.0", []string{"any"}, true},
		{login + "common/v2.0", login + "{tenantid}/v2.0", []string{"any"}, true},
		{login + "consumers/v2.0", login + EntraConsumersTenant + "/v2.0", nil, true},
		{login + "contoso.example/v2.0", login + tidA + "/v2.0", nil, true},
		{login + "contoso.example/v2.0", login + tidB + "/v2.0", []string{tidA}, false}, // a domain of another tenant than tenants names
		{login + "common", "https://sts.windows.net/{tenantid}/", []string{"any"}, true},
		{login + tidA, "https://sts.windows.net/" + tidA + "/", nil, true},
		// A template where the authority is one tenant's would admit them all.
		{login + tidA + "/v2.0", login + "{tenantid}/v2.0", nil, false},
		{login + "consumers/v2.0", login + "{tenantid}/v2.0", nil, false},
		{login + "contoso.example/v2.0", login + "{tenantid}/v2.0", nil, false},
		// Another tenant's, another host's, another shape.
		{login + tidA, "https://sts.windows.net/" + tidB + "/", nil, false},
		{login + "organizations/v2.0", "https://evil.example/{tenantid}/v2.0", []string{"any"}, false},
		{login + "organizations/v2.0", login + "{tenantid}/v2.0/extra", []string{"any"}, false},
		{login + "organizations/v2.0", login + "{tenantid}", []string{"any"}, false},
		{login + "organizations/v2.0", "http://login.microsoftonline.com/{tenantid}/v2.0", []string{"any"}, false},
		{login + "common", "http://sts.windows.net/{tenantid}/", []string{"any"}, false},
		{login + "common", "https://sts.windows.net/{tenantid}/?x=1", []string{"any"}, false},
		{login + "organizations/v2.0", login + "{tenantid}{tenantid}/v2.0", []string{"any"}, false},
	} {
		p, u := policy(t, tc.authority, tc.tenants...)
		_, err := p.acceptIssuer(tc.doc, u)
		if (err == nil) != tc.ok {
			t.Errorf("%s with document issuer %s: %v, want ok=%v", tc.authority, tc.doc, err, tc.ok)
		}
	}
}

// A token's iss must be its own tid's issuer: a tenant cannot pass its
// tokens off as another's, nor smuggle a path into the template.
func TestEntraTokenIssuer(t *testing.T) {
	template := &entraIssuer{issuer: "https://login.microsoftonline.com/{tenantid}/v2.0", tenant: tenantPlaceholder, v2: true}
	one := &entraIssuer{issuer: "https://login.microsoftonline.com/" + tidA + "/v2.0", tenant: tidA, v2: true}
	iss := func(tid string) string { return "https://login.microsoftonline.com/" + tid + "/v2.0" }
	for _, tc := range []struct {
		name   string
		e      *entraIssuer
		claims map[string]any
		why    string
	}{
		{"its own tenant", template, map[string]any{"iss": iss(tidA), "tid": tidA, "ver": "2.0"}, ""},
		{"tid of another tenant", template, map[string]any{"iss": iss(tidB), "tid": tidA}, "is not the issuer of the token's tenant"},
		{"no tid", template, map[string]any{"iss": iss(tidA)}, "no tenant ID"},
		{"tid in capitals", template, map[string]any{"iss": iss(strings.ToUpper(tidA)), "tid": strings.ToUpper(tidA)}, "no tenant ID"},
		{"tid with a path", template, map[string]any{"iss": iss("x/../" + tidA), "tid": "x/../" + tidA}, "no tenant ID"},
		{"a number for tid", template, map[string]any{"iss": iss(tidA), "tid": json.Number("1")}, "no tenant ID"},
		{"v1 at v2.0", template, map[string]any{"iss": iss(tidA), "tid": tidA, "ver": "1.0"}, "version"},
		{"one tenant's issuer, its tid", one, map[string]any{"iss": iss(tidA), "tid": tidA}, ""},
		{"one tenant's issuer, another tid", one, map[string]any{"iss": iss(tidA), "tid": tidB}, "is not the issuer's"},
	} {
		c := &tokenClaims{raw: tc.claims}
		c.issuer, _ = tc.claims["iss"].(string)
		err := tc.e.check(c)
		if tc.why == "" && err != nil || tc.why != "" && (err == nil || !strings.Contains(err.Error(), tc.why)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.why)
		}
	}
	for iss, ok := range map[string]bool{
		iss(tidA): true, iss(tidA) + "/": false, iss("common"): false, iss(tidA + "/x"): false,
		"https://login.microsoftonline.com/" + tidA + "/v2.0x": false, "https://login.microsoftonline.com.evil/" + tidA + "/v2.0": false,
	} {
		if template.matches(iss) != ok {
			t.Errorf("template matches %q: %v", iss, !ok)
		}
	}
}

// The tenants a client admits: its list, any, never a personal account
// through organizations.
func TestEntraAllows(t *testing.T) {
	for _, tc := range []struct {
		authority string
		tenants   []string
		tid       string
		ok        bool
	}{
		{"organizations/v2.0", []string{tidA}, tidA, true},
		{"organizations/v2.0", []string{tidA}, tidB, false},
		{"organizations/v2.0", []string{"any"}, tidB, true},
		{"organizations/v2.0", []string{"any"}, EntraConsumersTenant, false},
		{"common/v2.0", []string{"consumers"}, EntraConsumersTenant, true},
		{"common/v2.0", []string{strings.ToUpper(tidA)}, tidA, true},
		{"common/v2.0", []string{tidA}, EntraConsumersTenant, false},
	} {
		p, _ := policy(t, "https://login.microsoftonline.com/"+tc.authority, tc.tenants...)
		if err := p.allows(tc.tid); (err == nil) != tc.ok {
			t.Errorf("%s %v admits %s: %v, want %v", tc.authority, tc.tenants, tc.tid, err, tc.ok)
		}
	}
}

// Entra ID vouches for the email claim only with xms_edov; the groups
// overage reads from _claim_names or hasgroups; Graph's scopes read with
// or without Graph's URL.
func TestEntraClaims(t *testing.T) {
	for v, want := range map[any]bool{true: true, "1": true, "true": true, json.Number("1"): true, false: false, json.Number("0"): false, nil: false} {
		if got := entraEmailVerified(map[string]any{"xms_edov": v}); got != want {
			t.Errorf("xms_edov %#v: %v", v, got)
		}
	}
	for _, tc := range []struct {
		claims map[string]any
		want   bool
	}{
		{map[string]any{"_claim_names": map[string]any{"groups": "src1"}}, true},
		{map[string]any{"hasgroups": true}, true},
		{map[string]any{"groups": []any{"a"}}, false},
		{map[string]any{"_claim_names": map[string]any{"roles": "src1"}}, false},
		{map[string]any{"_claim_names": "groups"}, false},
	} {
		if got := groupsOverage(tc.claims); got != tc.want {
			t.Errorf("overage %v: %v", tc.claims, got)
		}
	}
	for _, tc := range []struct {
		scopes []string
		want   bool
	}{
		{[]string{"openid", "GroupMember.Read.All"}, true},
		{[]string{"https://graph.microsoft.com/groupmember.read.all"}, true},
		{[]string{"https://graph.example/Directory.Read.All"}, true},
		{[]string{"https://evil.example/GroupMember.Read.All"}, false},
		{[]string{"User.Read", "openid", "profile"}, false},
		{nil, false},
	} {
		if got := graphScopeAllows(tc.scopes, "https://graph.example"); got != tc.want {
			t.Errorf("scopes %q allow Graph: %v", tc.scopes, got)
		}
	}
	if got, ok := claimStrings([]any{"a", json.Number("2"), "b"}); !ok || strings.Join(got, ",") != "a,b" {
		t.Errorf("claimStrings: %v %v", got, ok)
	}
	if _, ok := claimStrings(map[string]any{}); ok {
		t.Errorf("claimStrings of an object")
	}
}
