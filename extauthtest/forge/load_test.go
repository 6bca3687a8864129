//go:build load

package forge

import (
	"testing"

	"github.com/extauth/extauth/extauthtest/internal/expiring"
	"github.com/extauth/extauth/internal/loadtest"
)

// A million sign-ins: every code exchanged 500 sign-ins after its issue,
// at the same cost at the end as at the start, the tokens held within the
// bound.
func TestMillionSignIns(t *testing.T) {
	c := loadtest.NewClock()
	s := New(Options{ClientID: "client", ClientSecret: "secret"})
	s.now = c.Now
	g := grant{user: DemoUser, redirectURI: "https://app.example/callback"}
	loadtest.Run{
		Clock:  c,
		Issue:  func(int) string { return s.issueCode(g) },
		Redeem: func(code string) error { _, err := s.redeemCode(code, g.redirectURI); return err },
	}.Do(t)
	if s.tokens.Len() != expiring.DefaultMax {
		t.Errorf("%d tokens held", s.tokens.Len())
	}
}
