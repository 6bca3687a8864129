package samlsp

import (
	"encoding/base64"
	"strings"
	"testing"

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
