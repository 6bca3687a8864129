package wpoauth

import (
	"crypto/sha256"
	"encoding/base64"
	"testing"
	"time"
)

// A code is spent by its first exchange, even one that fails (a wrong
// verifier or redirect URI), and is worth nothing once its lifetime is
// over; the right exchange yields an access and a refresh token that the
// server then honours.
func TestCodeRedeemedOnce(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := New("client", "secret", "https://app.example/callback")
	s.now = func() time.Time { return now }
	const verifier = "a-verifier-of-the-pkce-kind-long-enough-for-it"
	sum := sha256.Sum256([]byte(verifier))
	g := grant{redirectURI: s.RedirectURI, challenge: base64.RawURLEncoding.EncodeToString(sum[:])}

	code := s.issueCode(g)
	access, refresh, ok := s.redeemCode(code, g.redirectURI, verifier)
	if !ok || access == "" || refresh == "" {
		t.Fatalf("the right exchange: %q %q %v", access, refresh, ok)
	}
	if _, ok := s.tokens.Get(access); !ok {
		t.Error("the access token issued is not honoured")
	}
	if _, _, ok := s.redeemCode(code, g.redirectURI, verifier); ok {
		t.Error("a code was exchanged twice")
	}
	for name, try := range map[string]func(string) bool{
		"wrong verifier": func(c string) bool { _, _, ok := s.redeemCode(c, g.redirectURI, verifier+"x"); return ok },
		"wrong redirect": func(c string) bool { _, _, ok := s.redeemCode(c, g.redirectURI+"/x", verifier); return ok },
	} {
		c := s.issueCode(g)
		if try(c) {
			t.Errorf("%s: exchanged", name)
		}
		if _, _, ok := s.redeemCode(c, g.redirectURI, verifier); ok {
			t.Errorf("%s: the code was still good after a failed exchange", name)
		}
	}
	c := s.issueCode(g)
	now = now.Add(codeLifetime + time.Second)
	if _, _, ok := s.redeemCode(c, g.redirectURI, verifier); ok {
		t.Error("an expired code was exchanged")
	}
}
