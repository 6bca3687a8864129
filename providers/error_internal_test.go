package providers

import (
	"strings"
	"testing"
)

// TestDescribe: a provider's error_description reaches an error's cause
// (the log) in printable ASCII, at most maxDescription bytes, without
// what the request sent nor anything shaped like a code, a token or a
// key; a plain sentence is kept as it is.
func TestDescribe(t *testing.T) {
	jwt := "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl"
	for _, tc := range []struct {
		name, in string
		sent     []string
		want     string
	}{
		{"a plain sentence", "Missing parameter: code_verifier", nil, "Missing parameter: code_verifier"},
		{"Keycloak's code, a UUID chain", "Code not valid: b91137d6-dc93-9906-e23f-e49906725775.cwbFFcEPCMF", nil, "Code not valid: [redacted]"},
		{"a JWT", "bad assertion " + jwt, nil, "bad assertion [redacted]"},
		{"the secret sent", "client secret s3c:r+et %x/~ is wrong", []string{"s3c:r+et %x/~"}, "client secret [redacted] is wrong"},
		{"a long word without a digit", "org.keycloak.services.ErrorResponseException", nil, "org.keycloak.services.ErrorResponseException"},
		{"control characters and markup", "line\nbreak\x1b[31m <b>é</b>\u202e", nil, "line?break?[31m <b>?</b>?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := describe(tc.in, tc.sent...); got != tc.want {
				t.Errorf("describe(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
	long := describe(strings.Repeat("too long ", 100))
	if len(long) > maxDescription+len("...") || !strings.HasSuffix(long, "...") {
		t.Errorf("not bounded: %d bytes %q", len(long), long)
	}
}
