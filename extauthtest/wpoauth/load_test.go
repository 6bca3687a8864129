//go:build load

package wpoauth

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"testing"

	"github.com/extauth/extauth/extauthtest/internal/expiring"
	"github.com/extauth/extauth/internal/loadtest"
)

// A million sign-ins: every code exchanged 500 sign-ins after its issue,
// at the same cost at the end as at the start, the tokens held within the
// bound.
func TestMillionSignIns(t *testing.T) {
	c := loadtest.NewClock()
	s := New("client", "secret", "https://app.example/callback")
	s.now = c.Now
	const verifier = "a-verifier-of-the-pkce-kind-long-enough-for-it"
	sum := sha256.Sum256([]byte(verifier))
	g := grant{redirectURI: s.RedirectURI, challenge: base64.RawURLEncoding.EncodeToString(sum[:])}
	loadtest.Run{
		Clock: c,
		Issue: func(int) string {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.issueCode(g)
		},
		Redeem: func(code string) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			if _, _, ok := s.redeemCode(code, g.redirectURI, verifier); !ok {
				return errors.New("the code was not redeemed")
			}
			return nil
		},
	}.Do(t)
	if s.tokens.Len() != expiring.DefaultMax || s.refresh.Len() != expiring.DefaultMax {
		t.Errorf("%d tokens, %d refresh tokens held", s.tokens.Len(), s.refresh.Len())
	}
}
