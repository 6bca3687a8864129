//go:build load

package oidcop

import (
	"errors"
	"testing"

	"github.com/extauth/extauth/extauthtest/internal/endpoint"
	"github.com/extauth/extauth/extauthtest/internal/expiring"
	"github.com/extauth/extauth/internal/loadtest"
)

// A million sign-ins, each in a new session, with offline access: every
// code is redeemed, 500 sign-ins after its issue, and the last sign-ins
// cost what the first did, though the sessions, tokens and refresh tokens
// have filled their maps to the bound long before.
func TestMillionSignIns(t *testing.T) {
	c := loadtest.NewClock()
	op, err := New(Config{Issuer: "https://op.example", ClientID: "client", ClientSecret: "secret",
		RedirectURIs: []string{"https://app.example/callback"}, Alg: "ES256", Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	req := &authRequest{redirectURI: "https://app.example/callback", scope: "openid offline_access", maxAge: -1}
	user := op.cfg.Users[0]
	loadtest.Run{
		Clock: c,
		Issue: func(int) string {
			code, _ := op.issueCode(req, user, "")
			return code
		},
		Redeem: func(code string) error {
			g, ok := op.redeemCode(code)
			if !ok {
				return errors.New("the code was not redeemed")
			}
			op.recordTokens(g, endpoint.Random(32), c.Now(), "", "")
			return nil
		},
	}.Do(t)
	if op.codes.Len() > expiring.DefaultMax || op.sessions.Len() != expiring.DefaultMax || op.tokens.Len() != expiring.DefaultMax {
		t.Errorf("%d codes, %d sessions, %d tokens held", op.codes.Len(), op.sessions.Len(), op.tokens.Len())
	}
}
