package samlsp

import (
	"strings"

	"github.com/extauth/extauth/providers"
)

// Attribute names IdPs commonly use, as SAML Names (URIs, OIDs) or
// FriendlyNames, in order of preference: LDAP/eduPerson OIDs, their short
// names, and the WS-Federation claim URIs of AD FS and Entra ID.
var (
	emailAttrs = []string{
		"urn:oid:0.9.2342.19200300.100.1.3", "mail", "email", "emailAddress", "Email",
		"http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress",
		"http://schemas.xmlsoap.org/claims/EmailAddress",
	}
	firstNameAttrs = []string{
		"urn:oid:2.5.4.42", "givenName", "firstName", "first_name",
		"http://schemas.xmlsoap.org/ws/2005/05/identity/claims/givenname",
	}
	lastNameAttrs = []string{
		"urn:oid:2.5.4.4", "sn", "surname", "lastName", "last_name",
		"http://schemas.xmlsoap.org/ws/2005/05/identity/claims/surname",
	}
	nameAttrs = []string{
		"urn:oid:2.16.840.1.113730.3.1.241", "displayName",
		"http://schemas.microsoft.com/identity/claims/displayname",
		"urn:oid:2.5.4.3", "cn", "name",
		"http://schemas.xmlsoap.org/ws/2005/05/identity/claims/name",
	}
	nickAttrs = []string{
		"urn:oid:0.9.2342.19200300.100.1.1", "uid", "username",
	}
)

// first returns the first non-empty value of the first attribute of names
// that the assertion carries, matched by Name or FriendlyName, ignoring case.
func (a *Assertion) first(names ...string) string {
	for _, n := range names {
		if v := a.values(n); len(v) > 0 && v[0] != "" {
			return v[0]
		}
	}
	return ""
}

func (a *Assertion) values(name string) []string {
	if v, ok := a.Attributes[name]; ok {
		return v
	}
	if full, ok := a.FriendlyNames[name]; ok {
		return a.Attributes[full]
	}
	for k, v := range a.Attributes {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	for fn, full := range a.FriendlyNames {
		if strings.EqualFold(fn, name) {
			return a.Attributes[full]
		}
	}
	return nil
}

// identity maps a verified assertion to the normalized identity.
func (sp *SP) identity(a *Assertion) *providers.Identity {
	uid := a.NameID
	if sp.opts.UIDAttribute != "" {
		if v := a.first(sp.opts.UIDAttribute); v != "" {
			uid = v
		}
	}
	id := &providers.Identity{
		Provider:  Name,
		UID:       uid,
		Email:     a.first(emailAttrs...),
		FirstName: a.first(firstNameAttrs...),
		LastName:  a.first(lastNameAttrs...),
		Name:      a.first(nameAttrs...),
		NickName:  a.first(nickAttrs...),
		// SAML has no standard claim that the IdP verified the address.
		EmailVerified: false,
		SessionID:     a.SessionIndex,
		ACR:           a.AuthnContext,
		AuthTime:      a.AuthnInstant,
		SAML: &providers.SAMLInfo{
			NameID:          a.NameID,
			NameIDFormat:    a.NameIDFormat,
			NameQualifier:   a.NameQualifier,
			SPNameQualifier: a.SPNameQualifier,
			SPProvidedID:    a.SPProvidedID,
			NameIDEncrypted: a.NameIDEncrypted,
			SessionIndex:    a.SessionIndex,
			Attributes:      a.Attributes,
			IdP:             a.Issuer,
		},
	}
	if id.Email == "" && a.NameIDFormat == NameIDEmail {
		id.Email = a.NameID
	}
	if id.Name == "" {
		id.Name = strings.TrimSpace(id.FirstName + " " + id.LastName)
	}
	attrs := make(map[string]any, len(a.Attributes))
	for k, v := range a.Attributes {
		attrs[k] = v
	}
	id.Raw = map[string]any{
		"issuer":         a.Issuer,
		"assertion_id":   a.ID,
		"name_id":        a.NameID,
		"name_id_format": a.NameIDFormat,
		"session_index":  a.SessionIndex,
		"authn_context":  a.AuthnContext,
		"attributes":     attrs,
	}
	return id
}
