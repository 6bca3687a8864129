package extauth

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/markbates/goth"

	"github.com/extauth/extauth/internal/redact"
	"github.com/extauth/extauth/providers"
)

// Identity is the verified, normalized user a callback hook receives. It
// mirrors OmniAuth's auth hash: the same fields whatever the protocol.
//
// The pair (Provider, UID) identifies the account. Email is an address the
// provider reported; trust it for account linking only when EmailVerified is
// true, since two providers may report the same address for different people.
type Identity struct {
	// Provider is the slug of the provider that signed the user in.
	Provider string `json:"provider"`
	// Tenant is the tenant the user signed in at, "" for the
	// application's own providers. The account is (Tenant, Provider, UID).
	Tenant string `json:"tenant,omitempty"`
	// Unsolicited is true when no sign-in of ours started this one: an
	// IdP-initiated SAML sign-in (Options.SAML.AllowIDPInitiated). Nothing
	// binds it to the browser, so a host may want to treat it apart.
	Unsolicited bool `json:"unsolicited,omitempty"`
	// UID is the user's stable identifier at the provider: the OpenID
	// Connect sub, the SAML NameID (or Options.SAML.UIDAttribute), the
	// OAuth provider's user ID.
	UID string `json:"uid"`
	// Email is the address the provider reported, possibly unverified.
	Email string `json:"email,omitempty"`
	// EmailVerified is true only when the provider vouches for Email (the
	// OpenID Connect email_verified claim, for instance). SAML has no
	// standard way to say so: it is always false there.
	EmailVerified bool   `json:"email_verified"`
	Name          string `json:"name,omitempty"`
	FirstName     string `json:"first_name,omitempty"`
	LastName      string `json:"last_name,omitempty"`
	NickName      string `json:"nickname,omitempty"`
	Description   string `json:"description,omitempty"`
	Location      string `json:"location,omitempty"`
	// Image is the URL of the user's picture.
	Image string `json:"image,omitempty"`
	// Tokens are the credentials the provider issued. They redact themselves
	// when printed, logged or marshalled.
	Tokens Tokens `json:"credentials"`
	// Raw is the provider's profile or claims as received, for fields the
	// normalized ones do not cover.
	Raw map[string]any `json:"extra,omitempty"`
	// SessionID names the provider's session of the sign-in, when the
	// provider names it: the OpenID Connect sid claim, the SAML
	// SessionIndex. A provider's logout (LogoutEvent.Session) names the
	// same session, so hosts that honour the provider's logouts index
	// their sessions by (Provider, SessionID).
	SessionID string `json:"sid,omitempty"`
	// SAML is set for SAML sign-ins: what single logout and attribute
	// mapping need.
	SAML *SAMLInfo `json:"saml,omitempty"`

	// ACR says how strongly the user authenticated, in the provider's
	// words: the OpenID Connect acr claim, the SAML AuthnContextClassRef;
	// "" when the provider does not say (the OAuth providers never do).
	// Options.AssuranceLevels and the providers' assurance_levels map the
	// host's levels to these values (Auth.Satisfies).
	ACR string `json:"acr,omitempty"`
	// AMR lists the authentication methods (the OpenID Connect amr
	// claim: "pwd", "otp", "hwk"...), when the provider sends them.
	AMR []string `json:"amr,omitempty"`
	// AuthTime is when the user authenticated: the OpenID Connect
	// auth_time claim, the SAML AuthnInstant. Providers that cannot say
	// (OAuth 1.0a and 2, goth) get the time of the sign-in; an OpenID
	// Connect provider that sends no auth_time leaves it zero, which no
	// max_age is met by.
	AuthTime time.Time `json:"auth_time,omitzero"`
	// Directory is what the organisation's directory says of the user,
	// for an OpenID Connect provider that says it (preset, groups_claim,
	// roles_claim): the tenant, groups and roles. Nil for other providers.
	Directory *Directory `json:"directory,omitempty"`
}

// Directory is what an organisation's directory says of a user, from the
// ID token of a provider that carries it.
type Directory struct {
	// TenantID is the Entra ID tenant (directory) the user signed in
	// from, the tid claim: EntraConsumersTenant for a personal Microsoft
	// account. Key users of a multi-tenant application by TenantID and
	// UID, and keep which tenants may use what.
	TenantID string `json:"tenant_id,omitempty"`
	// Domain is the user's Google Workspace domain (the hd claim).
	Domain string `json:"domain,omitempty"`
	// Groups are the groups the user is a member of, as the provider
	// names them (Entra ID: object IDs, unless the app registration emits
	// names). Ask InGroup rather than searching the list: an Entra ID
	// groups overage that could not be resolved leaves it empty
	// (GroupsSource GroupsUnresolved), and InGroup then says so.
	Groups []string `json:"groups,omitempty"`
	// GroupsSource is where Groups come from: GroupsFromToken,
	// GroupsFromGraph (an overage resolved at Microsoft Graph), or
	// GroupsUnresolved (an overage not resolved, GroupsProblem saying
	// why); "" when the ID token has no groups claim (the provider sends
	// none, or the user is in no group).
	GroupsSource string `json:"groups_source,omitempty"`
	// GroupsProblem says why an overage was not resolved, "" otherwise.
	GroupsProblem string `json:"groups_problem,omitempty"`
	// Roles are the user's roles in the application: Entra ID's app
	// roles, the roles_claim of an Okta or Auth0 client.
	Roles []string `json:"roles,omitempty"`
	// WIDs are the user's Entra ID directory roles, by role template ID
	// (the wids claim).
	WIDs []string `json:"wids,omitempty"`
}

// The values of Directory.GroupsSource.
const (
	// GroupsFromToken: Groups is the ID token's groups claim.
	GroupsFromToken = providers.GroupsFromToken
	// GroupsFromGraph: the token said the user is in more groups than it
	// holds (an Entra ID groups overage), and Groups was read at
	// Microsoft Graph.
	GroupsFromGraph = providers.GroupsFromGraph
	// GroupsUnresolved: an overage that could not be resolved; Groups
	// is empty and means nothing.
	GroupsUnresolved = providers.GroupsUnresolved
)

// EntraConsumersTenant is the Entra ID tenant of personal Microsoft
// accounts: their Directory.TenantID.
const EntraConsumersTenant = providers.EntraConsumersTenant

// ErrGroupsUnresolved is wrapped by Directory.InGroup's error when the
// user's groups are not known: an Entra ID groups overage that could not
// be resolved (Directory.GroupsProblem says why).
var ErrGroupsUnresolved = errors.New("the user's groups are not known: the provider listed more than a token holds and they could not be read")

// InGroup reports whether the user is a member of group. When the
// provider said the user is in more groups than a token holds and they
// could not be read, it returns an error wrapping ErrGroupsUnresolved
// rather than false: "not a member" would be a guess. A nil Directory is
// in no group.
func (d *Directory) InGroup(group string) (bool, error) {
	if d == nil {
		return false, nil
	}
	if d.GroupsSource == GroupsUnresolved {
		return false, fmt.Errorf("%w (%s)", ErrGroupsUnresolved, d.GroupsProblem)
	}
	return slices.Contains(d.Groups, group), nil
}

// HasRole reports whether the user has role in the application.
func (d *Directory) HasRole(role string) bool { return d != nil && slices.Contains(d.Roles, role) }

// SAMLInfo is what a SAML assertion says beyond the normalized fields.
type SAMLInfo struct {
	// NameID, NameIDFormat and SessionIndex name the IdP session; keep them
	// with the host's session to log out through the IdP later.
	NameID       string `json:"name_id"`
	NameIDFormat string `json:"name_id_format,omitempty"`
	// NameQualifier, SPNameQualifier and SPProvidedID are the NameID's
	// other attributes as the IdP sent them, "" when it sent none: single
	// logout sends the NameID back as received (SAML Core 3.7.1), with
	// these attributes where the IdP had them and nowhere else, since
	// IdPs that match NameIDs exactly need that.
	NameQualifier   string `json:"name_qualifier,omitempty"`
	SPNameQualifier string `json:"sp_name_qualifier,omitempty"`
	SPProvidedID    string `json:"sp_provided_id,omitempty"`
	// NameIDEncrypted is true when the IdP sent the NameID as an
	// EncryptedID: single logout then sends it back encrypted too.
	NameIDEncrypted bool   `json:"name_id_encrypted,omitempty"`
	SessionIndex    string `json:"session_index,omitempty"`
	// Attributes maps each attribute Name (a URI or OID as the IdP sends
	// it) to its values, in document order.
	Attributes map[string][]string `json:"attributes,omitempty"`
	// IdP is the entity ID of the IdP that asserted the identity. In a
	// SAML federation it tells apart the users of its IdPs (a NameID, like
	// an eduPersonPrincipalName, is unique per IdP only): key users by
	// IdP and UID. Identity.LogoutSession keeps it, so that a logout goes
	// to the same IdP.
	IdP string `json:"idp,omitempty"`
}

// Format prints the identity with its tokens redacted, for every verb.
// Tokens redact themselves, but fmt prints a *Identity met inside a map or
// slice with a verb it cannot apply to a pointer (%s, %q) by reflection,
// calling none of their methods; a Format of Identity's own is called
// first.
func (id Identity) Format(f fmt.State, verb rune) { redact.Format(f, verb, id) }

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
	// OAuth 2 token endpoint. TokenSource sends them to that issuer only:
	// keep it with them.
	Issuer string
	// Tenant is the tenant whose provider issued them ("" for the
	// application's own). TokenSource refuses them for another tenant.
	Tenant string
	// DPoPKey is the private key, a JWK, that the tokens are bound to when
	// the provider uses DPoP (RFC 9449; dpop: true): a key made for this
	// sign-in alone. Renewal (TokenSource), revocation and API calls
	// (Client) sign their proofs with it, so keep it with the tokens, as
	// secret as the refresh token: encrypted at rest, never in a cookie,
	// a URL or a log. Tokens without it cannot be used once they are
	// DPoP-bound.
	DPoPKey string
}

// String describes the tokens with every value redacted.
func (t Tokens) String() string { return providers.Tokens(t).String() }

// Format makes every fmt verb, %#v included, print the redacted String.
func (t Tokens) Format(f fmt.State, verb rune) { fmt.Fprint(f, t.String()) }

// LogValue makes slog print the redacted tokens.
func (t Tokens) LogValue() slog.Value { return slog.StringValue(t.String()) }

// MarshalJSON writes the tokens with every value redacted.
func (t Tokens) MarshalJSON() ([]byte, error) { return providers.Tokens(t).MarshalJSON() }

// MarshalYAML writes the tokens with every value redacted.
func (t Tokens) MarshalYAML() (any, error) { return providers.Tokens(t).MarshalYAML() }

// GothUser converts the identity to a goth.User, for hosts moving from goth.
func (id *Identity) GothUser() goth.User { return id.strategyIdentity().GothUser() }

// identityFrom is the one place a strategy's identity becomes the host's.
// TestIdentityConversionKeepsEveryField holds it to providers.Identity's
// fields.
func identityFrom(p *providers.Identity) *Identity {
	return &Identity{
		Provider:      p.Provider,
		UID:           p.UID,
		Email:         p.Email,
		EmailVerified: p.EmailVerified,
		Name:          p.Name,
		FirstName:     p.FirstName,
		LastName:      p.LastName,
		NickName:      p.NickName,
		Description:   p.Description,
		Location:      p.Location,
		Image:         p.Image,
		Tokens:        Tokens(p.Tokens),
		Raw:           p.Raw,
		SessionID:     p.SessionID,
		SAML:          (*SAMLInfo)(p.SAML),
		ACR:           p.ACR,
		AMR:           p.AMR,
		AuthTime:      p.AuthTime,
		Directory:     (*Directory)(p.Directory),
	}
}

// strategyIdentity is identityFrom's inverse.
func (id *Identity) strategyIdentity() *providers.Identity {
	return &providers.Identity{
		Provider:      id.Provider,
		UID:           id.UID,
		Email:         id.Email,
		EmailVerified: id.EmailVerified,
		Name:          id.Name,
		FirstName:     id.FirstName,
		LastName:      id.LastName,
		NickName:      id.NickName,
		Description:   id.Description,
		Location:      id.Location,
		Image:         id.Image,
		Tokens:        providers.Tokens(id.Tokens),
		Raw:           id.Raw,
		SessionID:     id.SessionID,
		SAML:          (*providers.SAMLInfo)(id.SAML),
		ACR:           id.ACR,
		AMR:           id.AMR,
		AuthTime:      id.AuthTime,
		Directory:     (*providers.Directory)(id.Directory),
	}
}
