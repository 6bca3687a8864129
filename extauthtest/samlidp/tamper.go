package samlidp

import (
	"bytes"
	"crypto/rsa"
	"crypto/x509"
	"fmt"
	"time"

	"github.com/crewjam/saml"

	"github.com/extauth/extauth/providers"
)

// Target is the SP the tamper cases attack.
type Target struct {
	EntityID string
	ACS      string
	// AttackerKey and AttackerCert sign the forged cases that need a key
	// the IdP never published.
	AttackerKey  *rsa.PrivateKey
	AttackerCert *x509.Certificate
}

// Tamper is one forged or altered response and what a strict SP must do
// with it: refuse it with Want, or (Want empty) accept it as WantUID.
type Tamper struct {
	Name    string
	Build   func(requestID string) ([]byte, error)
	Want    providers.Code
	WantUID string
}

// Tampers lists the SAML rows of SECURITY.md as concrete responses, plus
// positive controls that show the forger's baseline is itself acceptable.
func (p *IdP) Tampers(tg Target) []Tamper {
	const invalid = providers.CodeInvalidResponse
	spec := func(rid string, mod func(*Spec)) func() ([]byte, error) {
		return func() ([]byte, error) {
			s := p.DefaultSpec(tg.EntityID, tg.ACS, rid)
			mod(&s)
			return p.Forge(s)
		}
	}
	forge := func(mod func(*Spec)) func(string) ([]byte, error) {
		return func(rid string) ([]byte, error) { return spec(rid, mod)() }
	}
	sc := func(s *Spec) *saml.SubjectConfirmationData {
		return s.Assertion.Subject.SubjectConfirmations[0].SubjectConfirmationData
	}
	now := saml.TimeNow()
	cases := []Tamper{
		{Name: "control: signed assertion", Build: forge(func(*Spec) {}), WantUID: p.user.NameID},
		{Name: "control: signed response, unsigned assertion", Build: forge(func(s *Spec) {
			s.SignAssertion, s.SignResponse = false, true
		}), WantUID: p.user.NameID},
		{Name: "control: signed response and assertion", Build: forge(func(s *Spec) { s.SignResponse = true }), WantUID: p.user.NameID},

		{Name: "unsigned response and assertion", Build: forge(func(s *Spec) { s.SignAssertion = false }), Want: invalid},
		{Name: "assertion re-signed with an attacker key in KeyInfo", Build: forge(func(s *Spec) {
			s.Key, s.Cert = tg.AttackerKey, tg.AttackerCert
		}), Want: invalid},
		{Name: "response re-signed with an attacker key in KeyInfo", Build: forge(func(s *Spec) {
			s.Key, s.Cert = tg.AttackerKey, tg.AttackerCert
			s.SignAssertion, s.SignResponse = false, true
		}), Want: invalid},
		{Name: "two assertions, both signed by the IdP (CVE-2022-41912 shape)", Build: func(rid string) ([]byte, error) {
			return twoAssertions(p, tg, rid, true)
		}, Want: invalid},
		{Name: "two assertions, the second unsigned", Build: func(rid string) ([]byte, error) {
			return twoAssertions(p, tg, rid, false)
		}, Want: invalid},

		{Name: "no SubjectConfirmation", Build: forge(func(s *Spec) { s.Assertion.Subject.SubjectConfirmations = nil }), Want: invalid},
		{Name: "SubjectConfirmation not bearer", Build: forge(func(s *Spec) {
			s.Assertion.Subject.SubjectConfirmations[0].Method = "urn:oasis:names:tc:SAML:2.0:cm:holder-of-key"
		}), Want: invalid},
		{Name: "no SubjectConfirmationData", Build: forge(func(s *Spec) {
			s.Assertion.Subject.SubjectConfirmations[0].SubjectConfirmationData = nil
		}), Want: invalid},
		{Name: "Recipient removed", Build: forge(func(s *Spec) { sc(s).Recipient = "" }), Want: invalid},
		{Name: "Recipient changed", Build: forge(func(s *Spec) { sc(s).Recipient = "https://other.example/acs" }), Want: invalid},
		{Name: "NotOnOrAfter removed", Build: forge(func(s *Spec) { sc(s).NotOnOrAfter = time.Time{} }), Want: invalid},
		{Name: "NotOnOrAfter past the skew (within crewjam's 180 s)", Build: forge(func(s *Spec) {
			sc(s).NotOnOrAfter = now.Add(-100 * time.Second)
		}), Want: invalid},
		{Name: "SubjectConfirmation InResponseTo removed", Build: forge(func(s *Spec) { sc(s).InResponseTo = "" }), Want: invalid},
		{Name: "SubjectConfirmation InResponseTo changed", Build: forge(func(s *Spec) { sc(s).InResponseTo = "id-other" }), Want: invalid},

		{Name: "AudienceRestriction removed", Build: forge(func(s *Spec) { s.Assertion.Conditions.AudienceRestrictions = nil }), Want: invalid},
		{Name: "Audience changed", Build: forge(func(s *Spec) {
			s.Assertion.Conditions.AudienceRestrictions[0].Audience.Value = "https://other.example/sp"
		}), Want: invalid},
		{Name: "second AudienceRestriction without us", Build: forge(func(s *Spec) {
			c := s.Assertion.Conditions
			c.AudienceRestrictions = append(c.AudienceRestrictions, saml.AudienceRestriction{Audience: saml.Audience{Value: "https://other.example/sp"}})
		}), Want: invalid},
		{Name: "Conditions removed", Build: forge(func(s *Spec) { s.Assertion.Conditions = nil }), Want: invalid},
		{Name: "Conditions expired", Build: forge(func(s *Spec) {
			s.Assertion.Conditions.NotOnOrAfter = now.Add(-100 * time.Second)
		}), Want: invalid},
		{Name: "Conditions not yet valid", Build: forge(func(s *Spec) {
			s.Assertion.Conditions.NotBefore = now.Add(100 * time.Second)
		}), Want: invalid},
		{Name: "Subject removed (GO-2026-6909 panic shape)", Build: forge(func(s *Spec) { s.Assertion.Subject = nil }), Want: invalid},

		{Name: "Destination changed", Build: forge(func(s *Spec) { s.Destination = "https://other.example/acs" }), Want: invalid},
		{Name: "Destination removed", Build: forge(func(s *Spec) { s.Destination = "" }), Want: invalid},
		{Name: "response Issuer changed", Build: forge(func(s *Spec) { s.ResponseIssuer = "https://evil.example/idp" }), Want: invalid},
		{Name: "assertion Issuer changed", Build: forge(func(s *Spec) { s.Assertion.Issuer.Value = "https://evil.example/idp" }), Want: invalid},
		{Name: "Status not Success", Build: forge(func(s *Spec) {
			s.Status = "urn:oasis:names:tc:SAML:2.0:status:Requester"
			s.SignResponse = true
		}), Want: providers.CodeAccessDenied},
		{Name: "AuthnStatement removed", Build: forge(func(s *Spec) { s.Assertion.AuthnStatements = nil }), Want: invalid},
		{Name: "response InResponseTo changed", Build: forge(func(s *Spec) { s.InResponseTo = "id-other" }), Want: invalid},
		{Name: "response InResponseTo removed", Build: forge(func(s *Spec) { s.InResponseTo = "" }), Want: invalid},
		{Name: "assertion issued in the future", Build: forge(func(s *Spec) { s.Assertion.IssueInstant = now.Add(10 * time.Minute) }), Want: invalid},

		{Name: "DOCTYPE with an entity", Build: func(rid string) ([]byte, error) {
			b, err := spec(rid, func(*Spec) {})()
			if err != nil {
				return nil, err
			}
			return append([]byte(`<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x "y">]>`), b...), nil
		}, Want: invalid},
		{Name: "comment injected into the NameID", Build: func(rid string) ([]byte, error) {
			b, err := spec(rid, func(s *Spec) { s.Assertion.Subject.NameID.Value = "user@a.com.evil.com" })()
			if err != nil {
				return nil, err
			}
			out := bytes.Replace(b, []byte("user@a.com.evil.com"), []byte("user@a.com<!---->.evil.com"), 1)
			if bytes.Equal(out, b) {
				return nil, fmt.Errorf("NameID not found")
			}
			return out, nil
		}, WantUID: "user@a.com.evil.com"},
	}
	for n := 1; n <= 8; n++ {
		cases = append(cases, Tamper{Name: fmt.Sprintf("XSW%d", n), Build: func(rid string) ([]byte, error) {
			signed, err := spec(rid, func(s *Spec) {
				if n <= 2 {
					s.SignAssertion, s.SignResponse = false, true
				}
			})()
			if err != nil {
				return nil, err
			}
			return XSW(n, signed, "evil@attacker.example")
		}, Want: invalid})
	}
	return cases
}

// twoAssertions puts a second assertion, for another user, after the
// legitimate one.
func twoAssertions(p *IdP, tg Target, rid string, signSecond bool) ([]byte, error) {
	s := p.DefaultSpec(tg.EntityID, tg.ACS, rid)
	root, err := p.ForgeElement(s)
	if err != nil {
		return nil, err
	}
	s2 := p.DefaultSpec(tg.EntityID, tg.ACS, rid)
	s2.Assertion.Subject.NameID.Value = "evil@attacker.example"
	s2.SignAssertion = signSecond
	other, err := p.ForgeElement(s2)
	if err != nil {
		return nil, err
	}
	for _, c := range other.ChildElements() {
		if c.Tag == "Assertion" {
			root.AddChild(c.Copy())
		}
	}
	return Serialize(root)
}
