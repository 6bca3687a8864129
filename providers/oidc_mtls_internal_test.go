package providers

import "testing"

// An mTLS alias may be on the issuer's host (any port), or on a host of
// the same registrable domain as the issuer or as the endpoint it stands
// for, by the public suffix list; nothing else.
func TestMTLSAliasSite(t *testing.T) {
	for _, tc := range []struct {
		alias, issuer, endpoint string
		ok                      bool
	}{
		// Keycloak, PingFederate: the same host, another port.
		{"https://op.example.com/realms/r/protocol/openid-connect/token", "https://op.example.com/realms/r", "", true},
		{"https://op.example.com:8443/as/token.oauth2", "https://op.example.com", "https://op.example.com/as/token.oauth2", true},
		// Auth0: a subdomain of the issuer's host.
		{"https://mtls.auth.bank.example.com/oauth/token", "https://auth.bank.example.com/", "https://auth.bank.example.com/oauth/token", true},
		// A sibling host of the endpoint it stands for, which discovery
		// places on another site than the issuer.
		{"https://oauth2.mtls.example-apis.com/token", "https://accounts.example.com", "https://oauth2.example-apis.com/token", true},
		{"https://OP.Example.COM./token", "https://op.example.com", "", true},
		{"https://mtls.op.example.co.uk/token", "https://op.example.co.uk", "", true},
		{"http://127.0.0.1:9000/mtls/token", "http://127.0.0.1:8080/op", "", true},

		// Another site than both.
		{"https://mtls.elsewhere.example/token", "https://op.example.com", "https://op.example.com/token", false},
		{"https://oauth2.mtls.example-apis.com/token", "https://accounts.example.com", "", false},
		// Hosts under a suffix the list names (googleapis.com is one) are
		// sites of their own.
		{"https://oauth2.mtls.googleapis.com/token", "https://accounts.google.com", "https://oauth2.googleapis.com/token", false},
		{"https://other.co.uk/token", "https://op.example.co.uk", "https://op.example.co.uk/token", false},
		// A public suffix is no registrable domain: two tenants of one
		// hosting suffix are two sites.
		{"https://evil.github.io/token", "https://op.github.io", "https://op.github.io/token", false},
		{"https://co.uk/token", "https://op.co.uk", "", false},
		// An address or a name without a registrable domain matches only
		// itself.
		{"https://127.0.0.2/token", "https://127.0.0.1", "https://127.0.0.1/token", false},
		{"https://localhost/token", "https://127.0.0.1", "", false},
		{"https://a.localhost/token", "https://localhost", "", false},
		{"https://[::1]/token", "https://127.0.0.1", "", false},
		{"https:///token", "https://op.example.com", "", false},
	} {
		if got := aliasSite(tc.alias, tc.issuer, tc.endpoint); got != tc.ok {
			t.Errorf("aliasSite(%q, %q, %q) = %v, want %v", tc.alias, tc.issuer, tc.endpoint, got, tc.ok)
		}
	}
}
