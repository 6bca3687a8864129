package providers

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/markbates/goth"

	"github.com/extauth/extauth/internal/redact"
)

// Identity is the verified, normalized user a callback hook receives. It
// mirrors OmniAuth's auth hash: the same fields whatever the protocol.
//
// The pair (Provider, UID) identifies the account; Email is an address the
// provider reported, trustworthy only when EmailVerified is true.
type Identity struct {
	Provider      string `json:"provider"`
	UID           string `json:"uid"`
	Email         string `json:"email,omitempty"`
	EmailVerified bool   `json:"email_verified"`
	Name          string `json:"name,omitempty"`
	FirstName     string `json:"first_name,omitempty"`
	LastName      string `json:"last_name,omitempty"`
	NickName      string `json:"nickname,omitempty"`
	Description   string `json:"description,omitempty"`
	Location      string `json:"location,omitempty"`
	Image         string `json:"image,omitempty"`
	// Tokens are the credentials the provider issued. They redact themselves
	// when printed, logged or marshalled.
	Tokens Tokens `json:"credentials"`
	// Raw is the provider's profile or claims as received, for fields the
	// normalized ones do not cover.
	Raw map[string]any `json:"extra,omitempty"`
	// SessionID names the provider's session of the sign-in: the OpenID
	// Connect sid claim, the SAML SessionIndex. LogoutEvent.Session
	// carries the same value.
	SessionID string `json:"sid,omitempty"`
	// SAML is set for SAML sign-ins.
	SAML *SAMLInfo `json:"saml,omitempty"`
	// ACR, AMR and AuthTime say how and when the user authenticated: the
	// OpenID Connect acr, amr and auth_time claims, the SAML
	// AuthnContextClassRef and AuthnInstant; for providers that cannot
	// say, AuthTime is the time of the sign-in, set by the routes.
	ACR      string    `json:"acr,omitempty"`
	AMR      []string  `json:"amr,omitempty"`
	AuthTime time.Time `json:"auth_time,omitzero"`
	// Directory is what the organisation's directory says of the user
	// (tenant, groups, roles), for providers that say it.
	Directory *Directory `json:"directory,omitempty"`
}

// SAMLInfo is what a SAML assertion says beyond the normalized fields, kept
// for single logout and attribute mapping.
type SAMLInfo struct {
	NameID       string `json:"name_id"`
	NameIDFormat string `json:"name_id_format,omitempty"`
	// NameQualifier, SPNameQualifier and SPProvidedID are the NameID's
	// attributes as the IdP sent them, "" when it sent none.
	NameQualifier   string              `json:"name_qualifier,omitempty"`
	SPNameQualifier string              `json:"sp_name_qualifier,omitempty"`
	SPProvidedID    string              `json:"sp_provided_id,omitempty"`
	NameIDEncrypted bool                `json:"name_id_encrypted,omitempty"`
	SessionIndex    string              `json:"session_index,omitempty"`
	Attributes      map[string][]string `json:"attributes,omitempty"`
	// IdP is the entity ID of the IdP that asserted the identity: the
	// one IdP, or in a federation the one the user chose, so that the
	// host can tell users of two IdPs apart (a NameID is unique per IdP
	// only).
	IdP string `json:"idp,omitempty"`
}

// Tokens are the credentials of a sign-in. Their String, Format, LogValue and
// MarshalJSON methods never reveal a token: read the fields to use them.
type Tokens struct {
	AccessToken  string
	RefreshToken string
	TokenType    string
	// Secret is the OAuth 1.0a access token secret.
	Secret  string
	Expiry  time.Time
	IDToken string
	// Issuer says who issued the tokens: the OpenID Connect issuer, or the
	// OAuth 2 token endpoint. Renewal refuses tokens of another issuer.
	Issuer string
	// Tenant is the tenant whose provider issued them, set by the routes.
	Tenant string
	// DPoPKey is the private key the tokens are bound to (DPoP, RFC
	// 9449), a JWK; empty for tokens that are not.
	DPoPKey string
}

const redacted = "[REDACTED]"

func mark(s string) string {
	if s == "" {
		return ""
	}
	return redacted
}

type tokensView struct {
	AccessToken  string    `json:"token,omitempty"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	TokenType    string    `json:"token_type,omitempty"`
	Secret       string    `json:"secret,omitempty"`
	Expiry       time.Time `json:"expires_at,omitzero"`
	IDToken      string    `json:"id_token,omitempty"`
	Issuer       string    `json:"issuer,omitempty"`
	Tenant       string    `json:"tenant,omitempty"`
	DPoPKey      string    `json:"dpop_key,omitempty"`
}

// Format prints the identity with its tokens redacted, for every verb.
// Tokens redact themselves, but fmt prints a *Identity met inside a map or
// slice with a verb it cannot apply to a pointer (%s, %q) by reflection,
// calling none of their methods; a Format of Identity's own is called
// first.
func (id Identity) Format(f fmt.State, verb rune) { redact.Format(f, verb, id) }

func (t Tokens) view() tokensView {
	return tokensView{
		AccessToken:  mark(t.AccessToken),
		RefreshToken: mark(t.RefreshToken),
		TokenType:    t.TokenType,
		Secret:       mark(t.Secret),
		Expiry:       t.Expiry,
		IDToken:      mark(t.IDToken),
		Issuer:       t.Issuer,
		Tenant:       t.Tenant,
		DPoPKey:      mark(t.DPoPKey),
	}
}

// String describes the tokens with every value redacted.
func (t Tokens) String() string {
	v := t.view()
	return fmt.Sprintf("{AccessToken:%s RefreshToken:%s TokenType:%s Secret:%s Expiry:%s IDToken:%s Issuer:%s Tenant:%s DPoPKey:%s}",
		v.AccessToken, v.RefreshToken, v.TokenType, v.Secret, v.Expiry.Format(time.RFC3339), v.IDToken, v.Issuer, v.Tenant, v.DPoPKey)
}

// Format makes every fmt verb, %#v included, print the redacted String.
func (t Tokens) Format(f fmt.State, verb rune) { fmt.Fprint(f, t.String()) }

// LogValue makes slog print the redacted tokens.
func (t Tokens) LogValue() slog.Value { return slog.StringValue(t.String()) }

// MarshalJSON writes the tokens with every value redacted.
func (t Tokens) MarshalJSON() ([]byte, error) { return json.Marshal(t.view()) }

// MarshalYAML writes the tokens with every value redacted.
func (t Tokens) MarshalYAML() (any, error) { return t.view(), nil }

// GothUser converts the identity to a goth.User, for hosts moving from goth.
func (id *Identity) GothUser() goth.User {
	return goth.User{
		RawData:           id.Raw,
		Provider:          id.Provider,
		Email:             id.Email,
		Name:              id.Name,
		FirstName:         id.FirstName,
		LastName:          id.LastName,
		NickName:          id.NickName,
		Description:       id.Description,
		UserID:            id.UID,
		AvatarURL:         id.Image,
		Location:          id.Location,
		AccessToken:       id.Tokens.AccessToken,
		AccessTokenSecret: id.Tokens.Secret,
		RefreshToken:      id.Tokens.RefreshToken,
		ExpiresAt:         id.Tokens.Expiry,
		IDToken:           id.Tokens.IDToken,
	}
}
