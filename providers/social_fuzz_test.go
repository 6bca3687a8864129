package providers

import (
	"testing"
	"time"
)

// The profile and token parsers take provider input: none may panic, and
// whatever they accept must have a user ID (or a token).

func FuzzMicroblogProfile(f *testing.F) {
	for _, s := range []string{`{"id_str":"1","screen_name":"a","email":null}`, `{"id_str":1}`, `[]`, `null`, `{"name":{"x":[1,2]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := microblogIdentity(b)
		if err == nil && (id == nil || id.UID == "") {
			t.Fatalf("accepted %q without a UID", b)
		}
		if err != nil && err.Code != CodeInvalidResponse {
			t.Fatalf("code %s", err.Code)
		}
	})
}

func FuzzSocialnetProfile(f *testing.F) {
	for _, s := range []string{`{"id":"1","picture":{"data":{"url":"u"}}}`, `{"id":1}`, `{"id":"1","picture":"x"}`, `{"picture":{"data":null}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := socialnetIdentity(b)
		if err == nil && (id == nil || id.UID == "") {
			t.Fatalf("accepted %q without a UID", b)
		}
	})
}

func FuzzGraphToken(f *testing.F) {
	for _, s := range []string{`{"access_token":"a","token_type":"bearer","expires_in":5183944}`, `{"access_token":"a","expires_in":1e999}`, `{"access_token":"a","expires_in":-1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tok, err := parseGraphToken(b, time.Unix(0, 0))
		if err == nil && tok.AccessToken == "" {
			t.Fatalf("accepted %q without a token", b)
		}
	})
}

func FuzzGraphError(f *testing.F) {
	f.Add(400, []byte(`{"error":{"code":1,"type":"OAuthException"}}`))
	f.Add(500, []byte(`{"error":"x"}`))
	f.Fuzz(func(t *testing.T, status int, b []byte) {
		if e := graphError(status, b, "token"); e == nil || e.Code == "" {
			t.Fatal("no error")
		}
	})
}
