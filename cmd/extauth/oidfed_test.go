package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/extauth/extauth/extauthtest/oidcop"
	"github.com/extauth/extauth/internal/oidfed"
)

func ecPEM(t *testing.T) (*ecdsa.PrivateKey, string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return k, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

func indented(s, pad string) string {
	return pad + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n"+pad) + "\n"
}

// extauth check resolves the provider's trust chain and prints it, with
// what the federation's policy changed of its metadata, its trust marks,
// and ours with their expiry.
func TestCheckOIDCFederation(t *testing.T) {
	var ta *oidfed.Authority
	var op *oidcop.OP
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, ok := strings.CutPrefix(r.URL.Path, "/ta"); ok {
			r.URL.Path = p
			ta.ServeHTTP(w, r)
			return
		}
		op.ServeHTTP(w, r)
	}))
	defer srv.Close()
	taPriv, _ := ecPEM(t)
	taKey, err := oidfed.NewKey(taPriv)
	if err != nil {
		t.Fatal(err)
	}
	const mark = "https://registry.example.it/openid_provider/public"
	ta = oidfed.NewAuthority(&oidfed.Entity{ID: srv.URL + "/ta", Keys: []oidfed.Key{taKey}, TrustMarkIssuers: map[string][]string{mark: {}}})
	tm, err := ta.IssueTrustMark(mark, srv.URL+"/op", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	op, err = oidcop.New(oidcop.Config{Issuer: srv.URL + "/op", ClientID: "https://rp.example", Federation: &oidcop.Federation{
		AuthorityHints: []string{ta.ID}, TrustAnchors: []oidcop.TrustAnchor{{EntityID: ta.ID, JWKS: *oidfed.JWKS(taKey)}},
		TrustMarks: []oidcop.TrustMark{{Type: mark, TrustMark: tm.TrustMark}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	opKeys := op.FederationJWKS()
	ta.Add(op.Issuer(), oidfed.Subordinate{JWKS: &opKeys, MetadataPolicy: oidfed.Policy{
		oidfed.TypeOpenIDProvider: {"scopes_supported": {"subset_of": []any{"openid", "offline_access"}}},
	}})
	_, clientPEM := ecPEM(t)
	_, fedPEM := ecPEM(t)
	jwks, _ := json.Marshal(oidfed.JWKS(taKey))
	rpMark, err := ta.IssueTrustMark("https://registry.example.it/openid_relying_party/public", "https://app.example.org/users/auth/oidc", 10*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`production:
  oidc_issuer: %s/op
  oidc_additional_settings:
    private_key: |
%s    federation:
      federation_key: |
%s      authority_hints: [%s]
      trust_anchors:
        %s: '%s'
      required_trust_marks: [%s]
      trust_marks:
        - id: https://registry.example.it/openid_relying_party/public
          trust_mark: %s
`, srv.URL, indented(clientPEM, "      "), indented(fedPEM, "        "), ta.ID, ta.ID, jwks, mark, rpMark.TrustMark)
	path := filepath.Join(t.TempDir(), "secrets.yml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runAt(t, time.Now(), "check", "-config", path, "-env", "production", "-base-url", "https://app.example.org")
	for _, want := range []string{
		"oidc           enabled",
		"entity identifier          https://app.example.org/users/auth/oidc",
		"chain[0]                   entity configuration of " + srv.URL + "/op about " + srv.URL + "/op",
		"chain[1]                   subordinate statement of " + ta.ID + " about " + srv.URL + "/op",
		"chain[2]                   entity configuration of " + ta.ID + " about " + ta.ID,
		"trust anchor               " + ta.ID,
		"trust mark                 " + mark + " by " + ta.ID,
		`metadata scopes_supported  published ["openid","email","profile","offline_access"], resolved ["openid","offline_access"]`,
		"our trust mark             https://registry.example.it/openid_relying_party/public, expires",
		"oidc: our trust mark https://registry.example.it/openid_relying_party/public expires in 9 days: ask the federation for a new one",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if r.code != exitOK || t.Failed() {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	assertNoSecret(t, "check", r.stdout)

	// An anchor that vouches for another key of the provider's: broken,
	// naming the statement and the rule.
	ta.Add(op.Issuer(), oidfed.Subordinate{JWKS: oidfed.JWKS(taKey)})
	r = runAt(t, time.Now(), "check", "-config", path, "-env", "production", "-base-url", "https://app.example.org")
	if r.code != exitFail || !strings.Contains(r.stdout, "broken: trust chain: "+srv.URL+"/op: no valid trust chain") ||
		!strings.Contains(r.stdout, "is signed by a key its issuer's keys do not hold") {
		t.Fatalf("exit %d\n%s", r.code, r.stdout)
	}
}
