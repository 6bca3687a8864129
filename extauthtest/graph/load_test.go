//go:build load

package graph

import (
	"errors"
	"testing"

	"github.com/extauth/extauth/extauthtest/internal/expiring"
	"github.com/extauth/extauth/internal/loadtest"
)

// A million sign-ins: every code exchanged 500 sign-ins after its issue,
// at the same cost at the end as at the start, the codes and tokens held
// within the bound.
func TestMillionSignIns(t *testing.T) {
	c := loadtest.NewClock()
	s := New(Options{AppID: "app", AppSecret: "secret", Now: c.Now})
	dr := dialogRequest{redirectURI: "https://app.example/callback", state: "state"}
	loadtest.Run{
		Clock: c,
		Issue: func(int) string { return s.issueCode(dr, DemoUser) },
		Redeem: func(code string) error {
			if _, fail := s.redeemCode(code, dr.redirectURI, ""); fail != nil {
				return errors.New(fail.message)
			}
			return nil
		},
	}.Do(t)
	if s.codes.Len() > expiring.DefaultMax || s.tokens.Len() != expiring.DefaultMax {
		t.Errorf("%d codes, %d tokens held", s.codes.Len(), s.tokens.Len())
	}
}
