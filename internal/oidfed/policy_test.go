package oidfed

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%v in %s", err, s)
	}
	return v
}

// jsonEqual compares as JSON, arrays as sets where the specification
// leaves the order of a merge undefined.
func jsonEqual(a, b any) bool {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		if len(am) != len(bm) {
			return false
		}
		for k, v := range am {
			if !jsonEqual(v, bm[k]) {
				return false
			}
		}
		return true
	}
	return equal(a, b)
}

func toAny(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return decode[any](t, string(b))
}

// The example of 6.1.5: a trust anchor's and an intermediate's RP
// policies merged, the intermediate's metadata and the merged policy
// applied to the leaf's RP metadata.
func TestPolicySpecExample(t *testing.T) {
	ta := decode[Policy](t, `{"openid_relying_party": {
		"grant_types": {"default": ["authorization_code"], "subset_of": ["authorization_code", "refresh_token"], "superset_of": ["authorization_code"]},
		"token_endpoint_auth_method": {"one_of": ["private_key_jwt", "self_signed_tls_client_auth"], "essential": true},
		"token_endpoint_auth_signing_alg": {"one_of": ["PS256", "ES256"]},
		"subject_type": {"value": "pairwise"},
		"contacts": {"add": ["helpdesk@federation.example.org"]}}}`)
	in := decode[Policy](t, `{"openid_relying_party": {
		"grant_types": {"subset_of": ["authorization_code"]},
		"token_endpoint_auth_method": {"one_of": ["self_signed_tls_client_auth"]},
		"contacts": {"add": ["helpdesk@org.example.org"]}}}`)
	wantMerged := decode[any](t, `{
		"grant_types": {"default": ["authorization_code"], "superset_of": ["authorization_code"], "subset_of": ["authorization_code"]},
		"token_endpoint_auth_method": {"one_of": ["self_signed_tls_client_auth"], "essential": true},
		"token_endpoint_auth_signing_alg": {"one_of": ["PS256", "ES256"]},
		"subject_type": {"value": "pairwise"},
		"contacts": {"add": ["helpdesk@federation.example.org", "helpdesk@org.example.org"]}}`)
	if err := ta.validate(nil); err != nil {
		t.Fatal(err)
	}
	merged, err := Merge(ta, in)
	if err != nil {
		t.Fatal(err)
	}
	if got := toAny(t, merged["openid_relying_party"]); !jsonEqual(got, wantMerged) {
		t.Fatalf("merged policy:\n got %v\nwant %v", got, wantMerged)
	}
	leaf := decode[map[string]any](t, `{"redirect_uris": ["https://rp.example.org/callback"], "response_types": ["code"],
		"token_endpoint_auth_method": "self_signed_tls_client_auth", "contacts": ["rp_admins@rp.example.org"]}`)
	leaf["sector_identifier_uri"] = "https://org.example.org/sector-ids.json"
	leaf["policy_uri"] = "https://org.example.org/policy.html"
	got, err := merged.Apply("openid_relying_party", leaf)
	if err != nil {
		t.Fatal(err)
	}
	want := decode[any](t, `{"redirect_uris": ["https://rp.example.org/callback"], "grant_types": ["authorization_code"],
		"response_types": ["code"], "token_endpoint_auth_method": "self_signed_tls_client_auth", "subject_type": "pairwise",
		"sector_identifier_uri": "https://org.example.org/sector-ids.json", "policy_uri": "https://org.example.org/policy.html",
		"contacts": ["rp_admins@rp.example.org", "helpdesk@federation.example.org", "helpdesk@org.example.org"]}`)
	if !jsonEqual(toAny(t, got), want) {
		t.Fatalf("resolved metadata:\n got %v\nwant %v", got, want)
	}
	if _, ok := leaf["subject_type"]; ok {
		t.Fatal("Apply modified its input")
	}
}

// Each operator applied on its own, and the essential and subset_of table
// of 6.1.3.1.
func TestPolicyOperators(t *testing.T) {
	for _, tc := range []struct {
		name, ops, metadata, want, err string
	}{
		{"value sets", `{"value": "ES256"}`, `{"p": "RS256"}`, `{"p": "ES256"}`, ""},
		{"value null removes", `{"value": null}`, `{"p": "RS256"}`, `{}`, ""},
		{"value array", `{"value": ["a", "b"]}`, `{}`, `{"p": ["a", "b"]}`, ""},
		{"add to absent", `{"add": ["a"]}`, `{}`, `{"p": ["a"]}`, ""},
		{"add unions", `{"add": ["a", "b"]}`, `{"p": ["b", "c"]}`, `{"p": ["b", "c", "a"]}`, ""},
		{"add to a string", `{"add": ["a"]}`, `{"p": "b"}`, ``, "add needs an array"},
		{"default when absent", `{"default": "x"}`, `{}`, `{"p": "x"}`, ""},
		{"default when present", `{"default": "x"}`, `{"p": "y"}`, `{"p": "y"}`, ""},
		{"one_of holds", `{"one_of": ["a", "b"]}`, `{"p": "b"}`, `{"p": "b"}`, ""},
		{"one_of refuses", `{"one_of": ["a", "b"]}`, `{"p": "c"}`, ``, "not one of one_of"},
		{"one_of absent", `{"one_of": ["a"]}`, `{}`, `{}`, ""},
		{"subset_of narrows", `{"subset_of": ["a", "b"]}`, `{"p": ["b", "c"]}`, `{"p": ["b"]}`, ""},
		{"subset_of to empty", `{"subset_of": ["a"]}`, `{"p": ["c"]}`, `{"p": []}`, ""},
		{"superset_of holds", `{"superset_of": ["a"]}`, `{"p": ["a", "b"]}`, `{"p": ["a", "b"]}`, ""},
		{"superset_of refuses", `{"superset_of": ["a", "z"]}`, `{"p": ["a", "b"]}`, ``, "not a superset"},
		{"essential missing", `{"essential": true}`, `{}`, ``, "essential and missing"},
		{"essential false missing", `{"essential": false}`, `{}`, `{}`, ""},
		// 6.1.3.1's table of essential and subset_of.
		{"table 1", `{"essential": true, "subset_of": ["a", "b", "c"]}`, `{"p": ["a", "e"]}`, `{"p": ["a"]}`, ""},
		{"table 2", `{"essential": false, "subset_of": ["a", "b", "c"]}`, `{"p": ["a", "e"]}`, `{"p": ["a"]}`, ""},
		{"table 3", `{"essential": true, "subset_of": ["a", "b", "c"]}`, `{"p": ["d", "e"]}`, `{"p": []}`, ""},
		{"table 4", `{"essential": false, "subset_of": ["a", "b", "c"]}`, `{"p": ["d", "e"]}`, `{"p": []}`, ""},
		{"table 5", `{"essential": true, "subset_of": ["a", "b", "c"]}`, `{}`, ``, "essential and missing"},
		{"table 6", `{"essential": false, "subset_of": ["a", "b", "c"]}`, `{}`, `{}`, ""},
		// The order of application: value before add, default before one_of.
		{"value then add", `{"value": ["a", "b"], "add": ["a"]}`, `{"p": ["z"]}`, `{"p": ["a", "b"]}`, ""},
		{"default then one_of", `{"default": "a", "one_of": ["a", "b"]}`, `{}`, `{"p": "a"}`, ""},
		{"add then superset_of", `{"add": ["x"], "superset_of": ["x"]}`, `{"p": ["y"]}`, `{"p": ["y", "x"]}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Policy{"t": {"p": decode[map[string]any](t, tc.ops)}}
			if err := p.validate(nil); err != nil {
				t.Fatalf("a valid policy refused: %v", err)
			}
			got, err := p.Apply("t", decode[map[string]any](t, tc.metadata))
			if tc.err != "" {
				if err == nil || !errors.Is(err, ErrPolicy) || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "t.p") {
					t.Fatalf("err = %v, want a policy error naming t.p and saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := decode[any](t, tc.want); !reflect.DeepEqual(toAny(t, got), want) {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
	}
}

// The scope parameter is a space-separated string that the operators take
// as an array (6.1.3.1.8).
func TestPolicyScope(t *testing.T) {
	p := Policy{"openid_relying_party": {"scope": {"subset_of": []any{"openid", "profile"}, "superset_of": []any{"openid"}}}}
	got, err := p.Apply("openid_relying_party", map[string]any{"scope": "openid email profile"})
	if err != nil {
		t.Fatal(err)
	}
	if got["scope"] != "openid profile" {
		t.Fatalf("scope = %#v, want \"openid profile\"", got["scope"])
	}
	p = Policy{"openid_relying_party": {"scope": {"default": "openid offline_access"}}}
	if got, _ := p.Apply("openid_relying_party", nil); got["scope"] != "openid offline_access" {
		t.Fatalf("default scope = %#v", got["scope"])
	}
}

// Combinations the specification forbids, in one parameter policy.
func TestPolicyCombinations(t *testing.T) {
	for _, tc := range []struct{ ops, err string }{
		{`{"value": ["a"], "add": ["b"]}`, "add must be a subset of value"},
		{`{"value": "a", "add": ["a"]}`, "add must be a subset of value"},
		{`{"value": null, "default": "a"}`, "value null cannot be combined with default"},
		{`{"value": null, "essential": true}`, "value null cannot be combined with essential true"},
		{`{"value": "c", "one_of": ["a", "b"]}`, "value must be one of one_of"},
		{`{"value": ["a", "c"], "subset_of": ["a", "b"]}`, "subset of subset_of"},
		{`{"value": ["a"], "superset_of": ["a", "b"]}`, "superset of superset_of"},
		{`{"add": ["c"], "subset_of": ["a", "b"]}`, "add must be a subset of subset_of"},
		{`{"subset_of": ["a"], "superset_of": ["a", "b"]}`, "subset_of must be a superset of superset_of"},
		{`{"one_of": ["a"], "add": ["a"]}`, "one_of cannot be combined with add"},
		{`{"one_of": ["a"], "subset_of": ["a"]}`, "one_of cannot be combined with subset_of"},
		{`{"one_of": ["a"], "superset_of": ["a"]}`, "one_of cannot be combined with superset_of"},
		{`{"essential": "yes"}`, "essential must be true or false"},
		{`{"add": "a"}`, "add must be an array"},
		{`{"subset_of": {"a": 1}}`, "subset_of must be an array"},
		{`{"default": null}`, "default must not be null"},
	} {
		p := Policy{"t": {"p": decode[map[string]any](t, tc.ops)}}
		if err := p.validate(nil); err == nil || !errors.Is(err, ErrPolicy) || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: err = %v, want %q", tc.ops, err, tc.err)
		}
	}
	for _, ok := range []string{
		`{"value": ["a"], "add": ["a"], "subset_of": ["a", "b"], "superset_of": ["a"], "essential": true}`,
		`{"value": "a", "one_of": ["a", "b"], "default": "a"}`,
		`{"add": ["a"], "superset_of": ["z"]}`,
		`{"subset_of": ["a", "b"], "superset_of": ["a", "b"]}`,
		`{"value": null, "essential": false}`,
	} {
		if err := (Policy{"t": {"p": decode[map[string]any](t, ok)}}).validate(nil); err != nil {
			t.Errorf("%s: refused: %v", ok, err)
		}
	}
}

// Merging a subordinate's operators into its superior's (6.1.4.1): a
// subordinate narrows, never widens.
func TestPolicyMerge(t *testing.T) {
	for _, tc := range []struct {
		name, superior, sub, want, err string
	}{
		{"value equal", `{"value": "a"}`, `{"value": "a"}`, `{"value": "a"}`, ""},
		{"value differs", `{"value": "a"}`, `{"value": "b"}`, ``, "value differs"},
		{"value arrays as sets", `{"value": ["a", "b"]}`, `{"value": ["b", "a"]}`, `{"value": ["a", "b"]}`, ""},
		{"default differs", `{"default": "a"}`, `{"default": "b"}`, ``, "default differs"},
		{"add unions", `{"add": ["a"]}`, `{"add": ["b"]}`, `{"add": ["a", "b"]}`, ""},
		{"one_of intersects", `{"one_of": ["a", "b"]}`, `{"one_of": ["b", "c"]}`, `{"one_of": ["b"]}`, ""},
		{"one_of disjoint", `{"one_of": ["a"]}`, `{"one_of": ["c"]}`, ``, "shares no value"},
		{"subset_of intersects", `{"subset_of": ["a", "b"]}`, `{"subset_of": ["b", "c"]}`, `{"subset_of": ["b"]}`, ""},
		{"subset_of disjoint is empty", `{"subset_of": ["a"]}`, `{"subset_of": ["c"]}`, `{"subset_of": []}`, ""},
		{"superset_of unions", `{"superset_of": ["a"]}`, `{"superset_of": ["b"]}`, `{"superset_of": ["a", "b"]}`, ""},
		{"essential ors", `{"essential": true}`, `{"essential": false}`, `{"essential": true}`, ""},
		{"copied", `{"value": "a"}`, `{"essential": true}`, `{"value": "a", "essential": true}`, ""},
		// A subordinate that widens what its superior allows.
		{"value widens subset_of", `{"subset_of": ["RS256"]}`, `{"value": ["RS256", "HS256"]}`, ``, "subset of subset_of"},
		{"add widens subset_of", `{"subset_of": ["a"]}`, `{"add": ["b"]}`, ``, "add must be a subset of subset_of"},
		{"one_of meets subset_of", `{"subset_of": ["a"]}`, `{"one_of": ["a"]}`, ``, "one_of cannot be combined with subset_of"},
		{"value leaves one_of", `{"one_of": ["ES256"]}`, `{"value": "none"}`, ``, "value must be one of one_of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sup := Policy{"t": {"p": decode[map[string]any](t, tc.superior)}}
			sub := Policy{"t": {"p": decode[map[string]any](t, tc.sub)}}
			got, err := Merge(sup, sub)
			if tc.err != "" {
				if err == nil || !errors.Is(err, ErrPolicy) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := decode[any](t, tc.want); !jsonEqual(toAny(t, got["t"]["p"]), want) {
				t.Fatalf("got %v, want %v", got["t"]["p"], want)
			}
		})
	}
	// Types and parameters only one side has are copied; the superior's
	// policy is not modified.
	sup := Policy{"a": {"x": {"value": "1"}}}
	got, err := Merge(sup, Policy{"a": {"y": {"value": "2"}}, "b": {"z": {"essential": true}}})
	if err != nil {
		t.Fatal(err)
	}
	if got["a"]["x"]["value"] != "1" || got["a"]["y"]["value"] != "2" || got["b"]["z"]["essential"] != true || sup["a"]["y"] != nil {
		t.Fatalf("merge = %v, superior after = %v", got, sup)
	}
}

// Operators beyond the standard ones: ignored, unless critical.
func TestPolicyCriticalOperators(t *testing.T) {
	p := Policy{"t": {"p": {"regexp": "^a", "value": "b"}}}
	if err := p.validate(nil); err != nil {
		t.Fatalf("an unknown operator not marked critical must be ignored: %v", err)
	}
	merged, err := Merge(Policy{}, p)
	if err != nil {
		t.Fatal(err)
	}
	if _, kept := merged["t"]["p"]["regexp"]; kept {
		t.Fatal("an ignored operator was kept")
	}
	if err := p.validate([]string{"regexp"}); err == nil || !strings.Contains(err.Error(), `critical operator "regexp" is not understood`) {
		t.Fatalf("err = %v", err)
	}
	if err := p.validate([]string{"value"}); err == nil || !strings.Contains(err.Error(), "names the standard operator") {
		t.Fatalf("err = %v", err)
	}
}
