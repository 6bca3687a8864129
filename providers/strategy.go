// Package providers holds the sign-in strategies that extauth mounts, one per
// file, and the small contract they share with the routes in package extauth.
//
// A Strategy speaks one protocol to one identity provider. The routes own
// everything that is the same for every protocol: the sealed transaction
// cookie, binding the callback to it, single use, method and origin checks,
// hooks and error pages. A strategy only starts a sign-in (Begin) and turns the
// provider's answer into a verified Identity (Complete).
package providers

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Strategy is one identity provider behind the extauth routes.
//
// The routes call Begin from the shared authorize handler and Binding and
// Complete from the provider's callback handler. Implementations must be safe
// for concurrent use and must honour ctx for every outbound request.
type Strategy interface {
	// Name returns the provider slug used in route paths and configuration,
	// for example "blog_oauth2".
	Name() string

	// Begin starts a sign-in. It may record what the callback needs in tx
	// (an OAuth 1.0a request token secret, a SAML request ID, the binding)
	// and returns the URL the browser is sent to. tx arrives with ID, State,
	// Verifier and Nonce already filled from crypto/rand.
	Begin(ctx context.Context, tx *Transaction) (redirectURL string, err error)

	// Binding returns the value of the callback request that names its
	// transaction: the OAuth 2 state, the OAuth 1.0a oauth_token, the SAML
	// RelayState handle. The routes compare it in constant time with
	// tx.Binding before Complete is called; an empty result means the
	// request carries none and is refused as invalid_state.
	Binding(r *http.Request) string

	// Complete finishes the sign-in from the provider's callback request and
	// returns the verified identity, or an error (preferably an *Error with
	// a stable Code).
	Complete(ctx context.Context, r *http.Request, tx *Transaction) (*Identity, error)
}

// CrossSiteCallback is implemented by strategies whose provider returns the
// browser with a cross-site POST (SAML's HTTP-POST binding). Their transaction
// cookie is then sent SameSite=None; Secure and scoped to the callback path.
type CrossSiteCallback interface {
	CrossSiteCallback() bool
}

// UnsolicitedCallback is implemented by strategies whose provider may send
// the browser to the callback without a sign-in of ours having started, as a
// SAML IdP does for IdP-initiated sign-on. When AcceptsUnsolicited reports
// true, a callback whose binding names no transaction cookie of this
// browser's is handed to Complete with a fresh transaction that carries
// nothing from the request: no RequestID, no Binding, ReturnTo "/". Complete
// must then verify the answer as unsolicited. Otherwise, and for every other
// strategy, such a callback is refused as invalid_state.
//
// Unsolicited sign-ins cannot be bound to the browser, so they allow login
// CSRF: enable them only where the provider requires it.
type UnsolicitedCallback interface {
	AcceptsUnsolicited() bool
}

// BodyLimiter is implemented by strategies that accept callback bodies larger
// than the routes' default bound of 64 KiB (SAML responses).
type BodyLimiter interface {
	MaxCallbackBytes() int64
}

// PostStarter is implemented by strategies that start some sign-ins with a
// browser POST to the provider instead of a redirect, as SAML's HTTP-POST
// binding does. When StartsWithPost reports true, the authorize route calls
// BeginPost instead of Begin, seals tx as usual, and answers with a page whose
// form the browser posts to action: at once by a script, or at a click where
// scripts are off.
type PostStarter interface {
	StartsWithPost() bool
	BeginPost(ctx context.Context, tx *Transaction) (action string, form url.Values, err error)
}

// IdPChooser is implemented by strategies that sign users in through one
// of many identity providers, which the user picks: a SAML SP in a
// federation. When ChoosesIdP reports true, the authorize route takes the
// IdP from the request's idp field (query or form) into Transaction.IdP,
// under the usual start rules, and the strategy starts the sign-in there
// (BeginAt, instead of Begin or BeginPost);
// a request that names no IdP is answered by Discover, a page to choose
// one, which is no sign-in start and so needs none of the start rules.
type IdPChooser interface {
	ChoosesIdP() bool
	// Discover writes the discovery page (or, with d.JSON, the list of
	// IdPs) for r; an error, written nothing, is the routes' to answer.
	Discover(w http.ResponseWriter, r *http.Request, d Discovery) error
	// BeginAt starts the sign-in at the IdP tx names, as Begin does, with
	// the binding that IdP takes: it returns the URL to redirect the
	// browser to and a nil form, or the URL and the form the browser
	// posts there (as PostStarter.BeginPost). One call, so that the IdP is
	// looked up once per sign-in.
	BeginAt(ctx context.Context, tx *Transaction) (action string, form url.Values, err error)
}

// Discovery is what the routes tell an IdPChooser's discovery page.
type Discovery struct {
	// Action is the path of the authorize route, where the page's forms
	// go: a search by GET, a choice (the idp field) by POST.
	Action string
	// ReturnTo is the start request's return_to, validated, for the
	// forms to carry on ("" for none).
	ReturnTo string
	// LastChoice is the IdP this browser chose last (a cookie the routes
	// set when a sign-in starts), "" for none; the page shows it first.
	LastChoice string
	// JSON asks for the list of IdPs as JSON (the .json route).
	JSON bool
	// Return, for a strategy that sends the browser to an external
	// discovery service instead (the SAML IdP Discovery Protocol), returns
	// the URL the service sends the browser back to with its choice in the
	// idp field, and arms the cookie that lets that cross-site return
	// start the sign-in: a return without it is refused like any
	// cross-site start. It is nil when the browser has just come back
	// from that service without a choice: sending it there again would
	// loop.
	Return func() string
	// Render answers the request with the page of list (or, with JSON,
	// the list): the routes' page, in the browser's language, whose
	// forms carry every field of the start request on to the sign-in.
	Render func(list DiscoveryList) error
}

// DiscoveryList is what an IdPChooser found for a discovery page, which
// Discovery.Render shows.
type DiscoveryList struct {
	// Query is the search the page was asked for, as it shows it back.
	Query string
	// Last is the IdP this browser chose last, nil when there is none or
	// it is not one the page may offer.
	Last *DiscoveryChoice
	// Choices are the IdPs that match Query, at most a page's worth; none
	// when Query is empty and there are too many to list.
	Choices []DiscoveryChoice
	// Listed is how many IdPs the page could list, whatever the search;
	// More reports that more IdPs match Query than Choices holds.
	Listed int
	More   bool
}

// DiscoveryChoice is an IdP of a DiscoveryList.
type DiscoveryChoice struct {
	EntityID string
	// Name is the IdP's name in the browser's language where its
	// metadata has one, and Lang that language.
	Name, Lang string
	// Logo is an https URL or a data: image, which the chooser checked;
	// "" for none. LogoWidth and LogoHeight are its size, 0 when unknown.
	Logo                  string
	LogoWidth, LogoHeight int
}

// DisplayNamer is implemented by strategies that know what people call
// their provider ("Google", an IdP's name from its metadata): the pages
// that extauth serves show it.
type DisplayNamer interface {
	DisplayName() string
}

// IdPNamer is implemented by IdPChoosers: the name of one of their IdPs,
// in the language lang (a BCP 47 tag) where its metadata has one, "" for an
// IdP they do not know.
type IdPNamer interface {
	IdPName(ctx context.Context, entityID, lang string) string
}

// MetadataPublisher is implemented by strategies that publish a metadata
// document of their own for the provider to read, as a SAML service provider
// does; extauth.Auth.SAMLMetadata returns it for the saml strategy.
type MetadataPublisher interface {
	Metadata() ([]byte, error)
}

// Transaction is the state of one sign-in between authorize and callback. The
// routes seal it into a short-lived cookie; it never lives on the server and
// is never read from the authorize request.
type Transaction struct {
	// ID names the transaction for single use; random, 128 bits or more.
	ID string `json:"i"`
	// Provider is the slug the transaction was started for.
	Provider string `json:"p"`
	// Tenant is the tenant the transaction was started for, "" for none.
	Tenant string `json:"tn,omitempty"`
	// State is the OAuth 2 state parameter: 256 random bits, base64url.
	State string `json:"s,omitempty" redact:"secret"`
	// Verifier is the PKCE code verifier (RFC 7636, 43 characters).
	Verifier string `json:"v,omitempty" redact:"secret"`
	// Nonce is the OpenID Connect nonce.
	Nonce string `json:"n,omitempty" redact:"secret"`
	// Binding is what Strategy.Binding must return at the callback. Begin
	// sets it when it is not the State (the default).
	Binding string `json:"b,omitempty" redact:"secret"`
	// RequestID is the ID of a SAML AuthnRequest (checked as InResponseTo).
	RequestID string `json:"r,omitempty"`
	// TokenSecret is the OAuth 1.0a request token secret.
	TokenSecret string `json:"t,omitempty" redact:"secret"`
	// ReturnTo is the validated relative path to go to after sign-in.
	ReturnTo string `json:"u,omitempty"`
	// Suffix is the route's format suffix ("json"), empty for none.
	Suffix string `json:"f,omitempty"`
	// Expires is when the transaction stops being accepted.
	Expires time.Time `json:"e"`
	// Extra holds strategy-specific values (a goth session, for example).
	Extra map[string]string `json:"x,omitempty" redact:"secret"`
	// IdP is the identity provider the sign-in started at, for a strategy
	// that signs in through one of many (an IdPChooser: a SAML
	// federation's entity ID). Sealed with the rest, it is the only one
	// whose answer the callback accepts.
	IdP string `json:"d,omitempty"`
}

// hostName is the host name of rawURL, "" when it has none.
func hostName(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return u.Hostname()
}
