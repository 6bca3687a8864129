package extauthtest

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/graph"
	"github.com/extauth/extauth/extauthtest/oauth1"
	"github.com/extauth/extauth/extauthtest/oidcop"
	"github.com/extauth/extauth/extauthtest/samlidp"
	"github.com/extauth/extauth/extauthtest/wpoauth"
)

// DefaultIdentity returns the identity a mocked sign-in with p yields when
// the test gives none: the default user of p's fake provider (package
// documentation, "Fake providers"), with the normalized fields and the raw
// data shaped as the real provider sends them, so that a mocked sign-in and
// one against the fake give the hook the same account:
//
//   - microblog: Raw is Twitter's account/verify_credentials (id, id_str,
//     screen_name, name, email, profile_image_url_https, ...), numbers as
//     json.Number; EmailVerified, since the API sends verified addresses
//     only; Tokens holds an access token and its secret.
//   - socialnet: Raw is the Graph API's /me with the fields extauth asks for
//     (id, name, first_name, last_name, email, picture.data.url).
//   - search_oauth2: Raw is the claims of a Google ID token (iss, azp, aud,
//     sub, email, email_verified, at_hash, nonce, name, picture, given_name,
//     family_name, iat, exp).
//   - blog_oauth2: Raw is WP OAuth Server's /oauth/me (ID, user_login,
//     user_email, display_name).
//   - saml: SAML holds the NameID, its format, a session index and the
//     attributes by Name, as IdPs send them: OIDs (mail
//     urn:oid:0.9.2342.19200300.100.1.3, givenName urn:oid:2.5.4.42, sn
//     urn:oid:2.5.4.4, cn urn:oid:2.5.4.3, uid
//     urn:oid:0.9.2342.19200300.100.1.1, eduPersonPrincipalName
//     urn:oid:1.3.6.1.4.1.5923.1.1.1.6, displayName
//     urn:oid:2.16.840.1.113730.3.1.241); Raw has the issuer, assertion ID,
//     NameID, session index, authentication context and attributes;
//     SessionID is the session index.
//   - oidc: Raw is the claims of the OpenID provider's ID token (with the
//     session's sid, also in SessionID), Tokens an access token and an ID
//     token.
//
// Any other provider (an Options.Extra one) gets a plain identity with UID,
// email and name. Every call returns a new value: change it freely.
func DefaultIdentity(p extauth.Provider) extauth.Identity {
	now := time.Now()
	num := func(n int64) json.Number { return json.Number(strconv.FormatInt(n, 10)) }
	switch p {
	case extauth.Microblog:
		u := oauth1.DemoUser
		return extauth.Identity{
			UID: u.ID, NickName: u.ScreenName, Name: u.Name, Email: u.Email, EmailVerified: u.Email != "",
			Image: u.Image, Description: u.Description, Location: u.Location,
			Tokens: extauth.Tokens{AccessToken: "mock-microblog-access-token", Secret: "mock-microblog-token-secret"},
			Raw: map[string]any{
				"id": json.Number(u.ID), "id_str": u.ID, "screen_name": u.ScreenName, "name": u.Name,
				"location": u.Location, "description": u.Description, "profile_image_url_https": u.Image,
				"verified": false, "protected": false, "email": u.Email,
			},
		}
	case extauth.Socialnet:
		u := graph.DemoUser
		return extauth.Identity{
			UID: u.ID, Name: u.Name, FirstName: u.FirstName, LastName: u.LastName, Email: u.Email, Image: u.Picture,
			Tokens: extauth.Tokens{AccessToken: "mock-socialnet-access-token", TokenType: "bearer", Expiry: now.Add(60 * 24 * time.Hour)},
			Raw: map[string]any{
				"id": u.ID, "name": u.Name, "first_name": u.FirstName, "last_name": u.LastName, "email": u.Email,
				"picture": map[string]any{"data": map[string]any{
					"height": num(50), "width": num(50), "is_silhouette": u.Picture == "", "url": u.Picture,
				}},
			},
		}
	case extauth.SearchOAuth2:
		u := oidcop.DemoUsers()[0]
		const client = "mock-client-id.apps.googleusercontent.com"
		return oidcIdentity(u, "https://accounts.google.com", now, map[string]any{"azp": client, "aud": client}, "")
	case extauth.OIDC:
		u := oidcop.DemoUsers()[0]
		return oidcIdentity(u, "https://op.example.org", now, map[string]any{"aud": "mock-client-id"}, "mock-sid-1")
	case extauth.BlogOAuth2:
		u := wpoauth.DemoUser
		return extauth.Identity{
			UID: strconv.Itoa(u.ID), Email: u.Email, Name: u.DisplayName, NickName: u.Login,
			Tokens: extauth.Tokens{AccessToken: "mock-blog-access-token", RefreshToken: "mock-blog-refresh-token",
				TokenType: "Bearer", Expiry: now.Add(time.Hour)},
			Raw: map[string]any{"ID": num(int64(u.ID)), "user_login": u.Login, "user_email": u.Email, "display_name": u.DisplayName},
		}
	case extauth.SAML:
		return samlIdentity(samlidp.DemoUser, "https://idp.example.org/metadata")
	}
	return extauth.Identity{
		UID: "mock-uid-1", Email: "ada@example.org", Name: "Ada Lovelace", NickName: "ada",
		Raw: map[string]any{"id": "mock-uid-1", "email": "ada@example.org", "name": "Ada Lovelace"},
	}
}

// oidcIdentity is what an OpenID provider's sign-in of u yields: the
// verified claims, with extra ones such as aud and azp, and the session sid
// when the provider names sessions.
func oidcIdentity(u oidcop.User, issuer string, now time.Time, extra map[string]any, sid string) extauth.Identity {
	claims := map[string]any{
		"iss": issuer, "sub": u.Sub,
		"iat": json.Number(strconv.FormatInt(now.Unix(), 10)), "exp": json.Number(strconv.FormatInt(now.Add(time.Hour).Unix(), 10)),
		"at_hash": "mock-at-hash", "nonce": "mock-nonce",
		"email": u.Email, "email_verified": u.EmailVerified,
		"name": u.Name, "given_name": u.GivenName, "family_name": u.FamilyName,
		"preferred_username": u.PreferredUsername, "picture": u.Picture,
	}
	for k, v := range extra {
		claims[k] = v
	}
	if sid != "" {
		claims["sid"] = sid
	}
	return extauth.Identity{
		UID: u.Sub, Email: u.Email, EmailVerified: u.EmailVerified, Name: u.Name,
		FirstName: u.GivenName, LastName: u.FamilyName, NickName: u.PreferredUsername, Image: u.Picture,
		Tokens:    extauth.Tokens{AccessToken: "mock-access-token", TokenType: "Bearer", Expiry: now.Add(time.Hour), IDToken: "mock-id-token"},
		Raw:       claims,
		SessionID: sid,
	}
}

// The attribute Names (OIDs) of the default SAML identity.
const (
	oidUID         = "urn:oid:0.9.2342.19200300.100.1.1"
	oidMail        = "urn:oid:0.9.2342.19200300.100.1.3"
	oidEPPN        = "urn:oid:1.3.6.1.4.1.5923.1.1.1.6"
	oidSurname     = "urn:oid:2.5.4.4"
	oidGivenName   = "urn:oid:2.5.4.42"
	oidCommonName  = "urn:oid:2.5.4.3"
	oidDisplayName = "urn:oid:2.16.840.1.113730.3.1.241"
)

// samlIdentity is what a sign-in of u at the IdP issuer yields.
func samlIdentity(u samlidp.User, issuer string) extauth.Identity {
	attrs := map[string][]string{
		oidUID: {u.UserName}, oidMail: {u.Email}, oidEPPN: {u.Email}, oidSurname: {u.Surname},
		oidGivenName: {u.GivenName}, oidCommonName: {u.DisplayName}, oidDisplayName: {u.DisplayName},
	}
	raw := make(map[string]any, len(attrs))
	for k, v := range attrs {
		raw[k] = v
	}
	info := &extauth.SAMLInfo{NameID: u.NameID, NameIDFormat: u.NameIDFormat, SessionIndex: "mock-session-index-1", Attributes: attrs}
	return extauth.Identity{
		UID: u.NameID, Email: u.Email, FirstName: u.GivenName, LastName: u.Surname, Name: u.DisplayName, NickName: u.UserName,
		SAML: info, SessionID: info.SessionIndex,
		// AuthTime is the mocked sign-in's, which the routes set.
		ACR: "urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport",
		Raw: map[string]any{
			"issuer": issuer, "assertion_id": "mock-assertion-1", "name_id": u.NameID, "name_id_format": u.NameIDFormat,
			"session_index": info.SessionIndex, "authn_context": "urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport",
			"attributes": raw,
		},
	}
}
