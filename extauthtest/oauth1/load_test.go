//go:build load

package oauth1

import (
	"errors"
	"testing"

	"github.com/extauth/extauth/extauthtest/internal/expiring"
	"github.com/extauth/extauth/internal/loadtest"
)

// A million sign-ins, each a request token approved at once and exchanged
// 500 sign-ins later, with the nonces of its three signed requests spent:
// none lost, at the same cost at the end as at the start, the access
// tokens held within the bound.
func TestMillionSignIns(t *testing.T) {
	c := loadtest.NewClock()
	s := New(Options{ConsumerKey: "ck", ConsumerSecret: "cs", Now: c.Now})
	nonce := func(token, n string) error {
		if !s.spendNonce("ck\x00"+token+"\x00"+n, c.Now()) {
			return errors.New("a new nonce was refused")
		}
		return nil
	}
	var verifiers = map[string]string{}
	loadtest.Run{
		Clock: c,
		Issue: func(int) string {
			token, _ := s.issueRequestToken("https://app.example/callback")
			if err := nonce("", token); err != nil {
				t.Fatal(err)
			}
			_, verifiers[token] = s.approve(token, &DemoUser)
			return token
		},
		Redeem: func(token string) error {
			rt := s.lookupRequest(token)
			if rt == nil {
				return errors.New("the request token was lost")
			}
			at, _, refusal := s.exchange(token, rt, verifiers[token])
			delete(verifiers, token)
			if refusal != "" {
				return errors.New(refusal)
			}
			if err := nonce(token, "exchange"); err != nil {
				return err
			}
			return nonce(at, "verify")
		},
	}.Do(t)
	if s.accessTokens.Len() != expiring.DefaultMax || s.nonces.Len() != expiring.DefaultMax {
		t.Errorf("%d access tokens, %d nonces held", s.accessTokens.Len(), s.nonces.Len())
	}
}
