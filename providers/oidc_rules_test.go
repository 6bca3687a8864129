package providers_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/extauth/extauth/providers"
)

// The discovery rules are exported for extauth check; these pin them down
// apart from a sign-in.

func TestCheckOIDCEndpoint(t *testing.T) {
	for _, tc := range []struct {
		url, issuer string
		ok          bool
	}{
		{"https://op.example/token", "https://op.example", true},
		{"http://op.example/token", "https://op.example", false},
		{"http://127.0.0.1:8080/token", "https://op.example", false},
		{"http://127.0.0.1:8080/token", "http://127.0.0.1:8080", true},
		{"http://localhost/token", "http://localhost", true},
		{"http://a.localhost:3000/dev/oidc/token", "http://a.localhost:3000/dev/oidc", true},
		{"http://a.localhost.evil.example/token", "http://a.localhost:3000", false},
		{"http://op.example/token", "http://127.0.0.1", false},
		{"/token", "https://op.example", false},
		{"https://user@op.example/token", "https://op.example", false},
		{"https://op.example/token#x", "https://op.example", false},
	} {
		if err := providers.CheckOIDCEndpoint(tc.url, tc.issuer); (err == nil) != tc.ok {
			t.Errorf("CheckOIDCEndpoint(%q, %q) = %v, want ok %v", tc.url, tc.issuer, err, tc.ok)
		}
	}
}

func TestOIDCAcceptedAlgs(t *testing.T) {
	for _, tc := range []struct {
		advertised, allow, want []string
	}{
		{nil, nil, []string{"RS256"}},
		{[]string{"HS256", "none", "ES256", "RS256"}, nil, []string{"RS256", "ES256"}},
		{[]string{"HS256", "none"}, nil, nil},
		{[]string{"RS256", "ES256"}, []string{"ES256"}, []string{"ES256"}},
		{[]string{"RS256"}, []string{"ES256"}, nil},
	} {
		if got := providers.OIDCAcceptedAlgs(tc.advertised, tc.allow); !slices.Equal(got, tc.want) {
			t.Errorf("OIDCAcceptedAlgs(%q, %q) = %q, want %q", tc.advertised, tc.allow, got, tc.want)
		}
	}
	algs := providers.OIDCSigningAlgs()
	if slices.Contains(algs, "none") || slices.Contains(algs, "HS256") || !slices.Contains(algs, "RS256") {
		t.Errorf("OIDCSigningAlgs() = %q", algs)
	}
	algs[0] = "none"
	if slices.Contains(providers.OIDCSigningAlgs(), "none") {
		t.Error("OIDCSigningAlgs hands out the allow-list itself")
	}
}

func TestOIDCAuthMethod(t *testing.T) {
	for _, tc := range []struct {
		supported []string
		want      string
		ok        bool
	}{
		{nil, providers.AuthMethodBasic, true},
		{[]string{"private_key_jwt", providers.AuthMethodPost, providers.AuthMethodBasic}, providers.AuthMethodBasic, true},
		{[]string{providers.AuthMethodPost}, providers.AuthMethodPost, true},
		{[]string{"private_key_jwt", "tls_client_auth"}, "", false},
	} {
		if got, ok := providers.OIDCAuthMethod(tc.supported); got != tc.want || ok != tc.ok {
			t.Errorf("OIDCAuthMethod(%q) = %q, %v; want %q, %v", tc.supported, got, ok, tc.want, tc.ok)
		}
	}
}

func TestOIDCDiscoveryLifetime(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	date := now.Format(http.TimeFormat)
	for _, tc := range []struct {
		name   string
		header http.Header
		want   time.Duration
	}{
		{"nothing said", http.Header{}, 24 * time.Hour},
		{"max-age within bounds", http.Header{"Cache-Control": {"public, max-age=7200"}}, 2 * time.Hour},
		{"max-age below the minimum", http.Header{"Cache-Control": {"max-age=60"}}, time.Hour},
		{"max-age above the maximum", http.Header{"Cache-Control": {"max-age=604800"}}, 24 * time.Hour},
		{"huge max-age", http.Header{"Cache-Control": {"max-age=99999999999999999"}}, 24 * time.Hour},
		{"Age is deducted", http.Header{"Cache-Control": {"max-age=18000"}, "Age": {"7200"}}, 3 * time.Hour},
		{"no-store", http.Header{"Cache-Control": {"no-store"}}, time.Hour},
		{"no-cache beside max-age", http.Header{"Cache-Control": {"max-age=7200", "no-cache"}}, time.Hour},
		{"upper-case directive", http.Header{"Cache-Control": {"Max-Age=10800"}}, 3 * time.Hour},
		{"garbage max-age", http.Header{"Cache-Control": {"max-age=soon"}}, 24 * time.Hour},
		{"Expires less Date", http.Header{"Expires": {now.Add(5 * time.Hour).Format(http.TimeFormat)}, "Date": {date}}, 5 * time.Hour},
		{"Expires in the past", http.Header{"Expires": {now.Add(-time.Hour).Format(http.TimeFormat)}}, time.Hour},
		{"max-age wins over Expires", http.Header{"Cache-Control": {"max-age=7200"}, "Expires": {now.Add(9 * time.Hour).Format(http.TimeFormat)}}, 2 * time.Hour},
	} {
		if got := providers.OIDCDiscoveryLifetime(tc.header, now); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
