//go:build load

package samlidp

import (
	"errors"
	"strconv"
	"testing"

	"github.com/crewjam/saml"

	"github.com/extauth/extauth/extauthtest/internal/expiring"
	"github.com/extauth/extauth/internal/loadtest"
)

// A million sign-ins, each session ended by a LogoutRequest with its
// SessionIndex 500 sign-ins later (StrictLogout's check), beside a million
// sessions never ended: none missed, at the same cost at the end as at the
// start, the sessions held within the bound.
func TestMillionSignIns(t *testing.T) {
	c := loadtest.NewClock()
	p, err := New(Options{BaseURL: "https://idp.example"})
	if err != nil {
		t.Fatal(err)
	}
	p.now = c.Now
	nid := &saml.NameID{Format: "urn:oasis:names:tc:SAML:2.0:nameid-format:persistent", Value: "ada"}
	want := readNameID(nid.Element())
	loadtest.Run{
		Clock: c,
		Issue: func(i int) string {
			issue := func(index string) {
				p.recordIssued(&saml.Assertion{Subject: &saml.Subject{NameID: nid}, AuthnStatements: []saml.AuthnStatement{{SessionIndex: index}}})
			}
			issue("never-ended-" + strconv.Itoa(i))
			index := "idx-" + strconv.Itoa(i)
			issue(index)
			return index
		},
		Redeem: func(index string) error {
			if !p.endIndexed(index, want) {
				return errors.New("the session was not found")
			}
			return nil
		},
	}.Do(t)
	if n := p.issued.Len(); n > expiring.DefaultMax {
		t.Errorf("%d sessions held", n)
	}
}
