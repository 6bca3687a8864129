package samlsp

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/extauth/extauth/internal/fakes/samlidp"
	"github.com/extauth/extauth/providers"
)

func TestSignInWithSignedAssertion(t *testing.T) {
	f := newFixture(t)
	tx, redirect := f.begin(f.sp)
	form := f.idpForm(redirect)
	if form.Get("RelayState") != tx.Binding {
		t.Fatalf("IdP returned RelayState %q, want the handle %q", form.Get("RelayState"), tx.Binding)
	}
	id, err := post(f.sp, tx, form)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if id.Provider != "saml" || id.UID != "ada@example.org" || id.Email != "ada@example.org" {
		t.Errorf("identity = %+v", id)
	}
	if id.FirstName != "Ada" || id.LastName != "Lovelace" || id.Name != "Ada Lovelace" || id.NickName != "ada" {
		t.Errorf("names = %q %q %q %q", id.FirstName, id.LastName, id.Name, id.NickName)
	}
	if id.EmailVerified {
		t.Error("SAML cannot vouch for the email; EmailVerified must be false")
	}
	if id.SAML == nil || id.SAML.NameID != "ada@example.org" || id.SAML.SessionIndex == "" ||
		len(id.SAML.Attributes["urn:oid:0.9.2342.19200300.100.1.3"]) != 1 {
		t.Errorf("SAML info = %+v", id.SAML)
	}
	if id.Raw["session_index"] != id.SAML.SessionIndex || id.Raw["attributes"] == nil {
		t.Errorf("raw = %v", id.Raw)
	}

	// The same POST again is a replay.
	if _, err := post(f.sp, tx, form); code(err) != providers.CodeReplayed {
		t.Fatalf("replayed response: err = %v, want replayed", err)
	}
}

func TestSignInWithEncryptedAssertion(t *testing.T) {
	f := newFixture(t, withKeyPair)
	tx, redirect := f.begin(f.sp)
	form := f.idpForm(redirect)
	raw, _ := base64.StdEncoding.DecodeString(form.Get("SAMLResponse"))
	if !strings.Contains(string(raw), "EncryptedAssertion") || strings.Contains(string(raw), "ada@example.org") {
		t.Fatal("the IdP did not encrypt the assertion")
	}
	id, err := post(f.sp, tx, form)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if id.UID != "ada@example.org" || id.Email != "ada@example.org" {
		t.Errorf("identity = %+v", id)
	}
}

// TestTamperedResponses runs every SAML tamper row of SECURITY.md against
// the strategy. The same table runs through the real callback route in the
// extauth package.
func TestTamperedResponses(t *testing.T) {
	f := newFixture(t)
	ak, ac := testKey(t, 2)
	for _, tc := range f.idp.Tampers(samlidp.Target{EntityID: testEntityID, ACS: testACS, AttackerKey: ak, AttackerCert: ac}) {
		t.Run(tc.Name, func(t *testing.T) {
			tx, _ := f.begin(f.sp)
			xml, err := tc.Build(tx.RequestID)
			if err != nil {
				t.Fatal(err)
			}
			id, err := post(f.sp, tx, responseForm(xml, tx.Binding))
			if tc.Want == "" {
				if err != nil {
					t.Fatalf("rejected a valid response: %v", err)
				}
				if id.UID != tc.WantUID {
					t.Fatalf("uid = %q, want %q", id.UID, tc.WantUID)
				}
				return
			}
			t.Logf("rejected: %v", err)
			if code(err) != tc.Want {
				t.Fatalf("err = %v, want %s", err, tc.Want)
			}
			if id != nil {
				t.Fatal("identity returned with an error")
			}
		})
	}
}

// TestOurChecksStandAlone runs the tamper table against our own checks
// without crewjam's in front of them: each row must be refused by our layer
// by itself, so that none of our checks is dead code hidden behind crewjam's
// and a crewjam regression cannot open a hole.
func TestOurChecksStandAlone(t *testing.T) {
	f := newFixture(t)
	ak, ac := testKey(t, 2)
	md := f.sp.md.current()
	for _, tc := range f.idp.Tampers(samlidp.Target{EntityID: testEntityID, ACS: testACS, AttackerKey: ak, AttackerCert: ac}) {
		t.Run(tc.Name, func(t *testing.T) {
			xml, err := tc.Build("id-request")
			if err != nil {
				t.Fatal(err)
			}
			var a *Assertion
			root, perr := f.sp.preflight(xml)
			if perr == nil {
				func() {
					defer func() {
						if p := recover(); p != nil {
							t.Fatalf("our checks panicked: %v", p)
						}
					}()
					a, err = f.sp.verifyTree(root, "id-request", md, time.Now())
				}()
			} else {
				err = perr
			}
			if tc.Want == "" {
				if err != nil || a.NameID != tc.WantUID {
					t.Fatalf("our checks refused a valid response: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("our checks accepted it (NameID %q)", a.NameID)
			}
		})
	}
}
