package extauthtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crewjam/saml"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/graph"
	"github.com/extauth/extauth/extauthtest/internal/endpoint"
	"github.com/extauth/extauth/extauthtest/oauth1"
	"github.com/extauth/extauth/extauthtest/oidcop"
	"github.com/extauth/extauth/extauthtest/samlidp"
	"github.com/extauth/extauth/extauthtest/wpoauth"
)

// Providers is a set of fake providers that speak the real protocols, one
// per built-in provider, each on its own server on 127.0.0.1, registered
// for one application's callback URLs. Config gives the application's
// configuration for them: with it, the application signs in against them
// exactly as against the real ones, offline, through every step of each
// protocol (signatures, PKCE, ID tokens, signed and encrypted SAML
// assertions).
//
// The fields are the fakes themselves, for their own knobs and counters
// (nil for a provider that ProvidersOptions.Only leaves out); SetFault
// plays the common failures on any of them.
type Providers struct {
	// Microblog is a Twitter-style OAuth 1.0a provider.
	Microblog *oauth1.Server
	// Socialnet is a Graph-API-style OAuth 2 provider.
	Socialnet *graph.Server
	// SearchOAuth2 is an OpenID provider standing in for Google: client
	// secret in the body, no RP-initiated logout.
	SearchOAuth2 *oidcop.OP
	// BlogOAuth2 is a WordPress site running WP OAuth Server.
	BlogOAuth2 *wpoauth.Server
	// SAML is a SAML 2.0 identity provider. It reads the application's
	// SP metadata from its metadata route the first time it is asked to
	// sign someone in.
	SAML *samlidp.IdP
	// OIDC is an OpenID provider, with RP-initiated, back-channel and
	// front-channel logout registered for the application's logout routes.
	OIDC *oidcop.OP

	// sites are the base URLs of the fakes; stops stop serving them.
	sites map[extauth.Provider]string
	stops []func()
	cfg   *extauth.Config
}

// ProvidersOptions configure StartProviders.
type ProvidersOptions struct {
	// PathPrefix and Slugs are those of the application's extauth.Options:
	// they say where its callback URLs are.
	PathPrefix string
	Slugs      map[extauth.Provider]string
	// Only lists the providers to start; all six when empty.
	Only []extauth.Provider
	// Interactive shows each provider's login or consent page, with a
	// choice of users, for a person at a browser (an application run in
	// development). Without it each provider signs its first user in at
	// once, as a test wants.
	Interactive bool
	// The users of each provider, the first signed in unless Interactive;
	// each fake's demo users when empty.
	MicroblogUsers    []oauth1.User
	SocialnetUsers    []graph.User
	SearchOAuth2Users []oidcop.User
	BlogOAuth2User    *wpoauth.User
	SAMLUser          *samlidp.User
	OIDCUsers         []oidcop.User
	// OIDCHighAssurance makes the OpenID provider a high-assurance one, as
	// national eIDs and FAPI 2.0 providers are: it takes private_key_jwt
	// only, reading the application's keys from its JWKS route; requires
	// pushed authorization requests and signed request objects; and
	// encrypts ID tokens (RSA-OAEP-256 + A256GCM). Config then registers
	// the application with a private key and no secret, as
	// oidc_additional_settings does. Making the RSA key takes a moment.
	OIDCHighAssurance bool
	// OIDCFAPI2 makes the OpenID provider a FAPI 2.0 one shaped as
	// Singpass's: it enforces the FAPI 2.0 Security Profile (pushed
	// requests, PKCE, private_key_jwt with the issuer as audience, PS256,
	// ES256 or EdDSA), requires DPoP with nonces, and encrypts ID tokens
	// (ECDH-ES+A256KW + A256GCM). Config then registers the application
	// with profile: fapi2, dpop: true and an EC P-256 key, no secret. It
	// wins over OIDCHighAssurance.
	OIDCFAPI2 bool
	// SAMLKeyPair gives the application a SAML service-provider key pair
	// (saml_additional_settings' certificate and private_key, with
	// logout_requests_signed): it signs its requests, and the IdP
	// encrypts its assertions to it. Making the RSA key takes a moment.
	SAMLKeyPair bool
	// AppName is the application's name, as the OpenID providers'
	// consent pages (oidc, search_oauth2) show it, in place of the client
	// ID; the other providers' pages say "the application".
	AppName string
	// HTTPClient is how the fakes call the application: the SAML IdP reads
	// its SP metadata, the OpenID provider posts back-channel logouts. A
	// test serving the application over HTTPS passes a client that trusts
	// its certificate. Default: a client with a 5 s time-out that, like
	// Browser, reaches every name under .localhost at 127.0.0.1.
	HTTPClient *http.Client
}

// StartProviders starts a fake of each built-in provider (or of those
// o.Only lists) for the application served at baseURL, each on its own
// 127.0.0.1 server, registered for the application's routes: its callback
// URLs, its SAML metadata and logout routes, its OpenID Connect logout
// routes. Close stops them.
//
// For a tenant (Options.TenantOf), pass the tenant's base URL: the
// providers are the tenant's own, and Config is the tenant's configuration.
func StartProviders(baseURL string, o ProvidersOptions) (*Providers, error) {
	return startProviders(baseURL, o, func(extauth.Provider) (string, func(http.Handler), func()) {
		// The listener exists before the fake, which needs its own URL;
		// the handler is set before the server starts.
		srv := httptest.NewUnstartedServer(nil)
		started := false
		return "http://" + srv.Listener.Addr().String(), func(h http.Handler) {
				srv.Config.Handler = h
				srv.Start()
				started = true
			}, func() {
				if !started {
					srv.Listener.Close()
					return
				}
				// End the requests a Hang holds, then wait for the rest.
				srv.CloseClientConnections()
				srv.Close()
			}
	})
}

// MountProviders is StartProviders with the fakes served by the
// application itself, on mux under prefix ("/dev/"): the fake of provider
// p at baseURL + prefix + p, such as http://127.0.0.1:3000/dev/saml. It
// suits an application served on one port only (a container), or over
// HTTPS with a certificate of its own, which then covers the fakes too.
// Register the application's own routes on mux as usual.
func MountProviders(mux *http.ServeMux, baseURL, prefix string, o ProvidersOptions) (*Providers, error) {
	if !strings.HasPrefix(prefix, "/") || !strings.HasSuffix(prefix, "/") {
		return nil, fmt.Errorf("extauthtest: prefix %q must start and end with /", prefix)
	}
	base := strings.TrimSuffix(baseURL, "/")
	return startProviders(baseURL, o, func(prov extauth.Provider) (string, func(http.Handler), func()) {
		path := prefix + string(prov)
		return base + path, func(h http.Handler) { mux.Handle(path+"/", h) }, func() {}
	})
}

// startProviders builds the fakes; serve returns where the fake of a
// provider is served, a function that serves its handler there, and one
// that stops serving it.
func startProviders(baseURL string, o ProvidersOptions, serve func(extauth.Provider) (string, func(http.Handler), func())) (*Providers, error) {
	ops := extauth.Options{BaseURL: baseURL, PathPrefix: o.PathPrefix, Slugs: o.Slugs}
	which := o.Only
	if len(which) == 0 {
		which = extauth.BuiltinProviders()
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 5 * time.Second, Transport: (&Browser{}).transport()}
	}
	p := &Providers{sites: map[extauth.Provider]string{}, cfg: &extauth.Config{}}
	for _, prov := range which {
		if !slices.Contains(extauth.BuiltinProviders(), prov) {
			p.Close()
			return nil, fmt.Errorf("extauthtest: %q is not a built-in provider", prov)
		}
		if _, dup := p.sites[prov]; dup {
			continue
		}
		routes, err := ops.Routes(prov)
		if err != nil {
			p.Close()
			return nil, err
		}
		urls := map[string]string{}
		for _, rt := range routes {
			urls[rt.Purpose] = rt.URL
		}
		site, handle, stop := serve(prov)
		p.sites[prov] = site
		p.stops = append(p.stops, stop)
		h, err := p.start(prov, site, urls, o)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("extauthtest: %s: %w", prov, err)
		}
		handle(h)
	}
	return p, nil
}

// NewProviders is StartProviders for a test: it fails t on an error and
// closes the providers when the test ends.
func NewProviders(t testing.TB, baseURL string, o ProvidersOptions) *Providers {
	t.Helper()
	p, err := StartProviders(baseURL, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// Client credentials the fakes register the application with.
const clientID = "extauthtest-client"

// start builds the fake of prov served at site for the application whose
// routes are urls (by purpose), and records its configuration.
func (p *Providers) start(prov extauth.Provider, site string, urls map[string]string, o ProvidersOptions) (http.Handler, error) {
	secret := extauth.NewSecret(endpoint.Random(24))
	auto := !o.Interactive
	su, err := url.Parse(site)
	if err != nil {
		return nil, err
	}
	// path is where the fake is mounted on a larger mux, "" on a server
	// of its own. The OAuth 1 and Graph fakes serve their paths from
	// the root, and link their pages under it.
	path := su.Path
	under := func(h http.Handler) http.Handler {
		if path == "" {
			return h
		}
		return http.StripPrefix(path, h)
	}
	switch prov {
	case extauth.Microblog:
		p.Microblog = oauth1.New(oauth1.Options{ConsumerKey: clientID, ConsumerSecret: secret.Value(), Prefix: path,
			CallbackURLs: []string{urls["callback"]}, Users: o.MicroblogUsers, AutoApprove: auto})
		p.cfg.Microblog = extauth.OAuthProvider{Key: clientID, Secret: secret, Site: site}
		return under(p.Microblog), nil
	case extauth.Socialnet:
		p.Socialnet = graph.New(graph.Options{AppID: clientID, AppSecret: secret.Value(), Prefix: path,
			RedirectURIs: []string{urls["callback"]}, Users: o.SocialnetUsers, AutoApprove: auto})
		p.cfg.Socialnet = extauth.OAuthProvider{Key: clientID, Secret: secret, Site: site}
		return under(p.Socialnet), nil
	case extauth.BlogOAuth2:
		p.BlogOAuth2 = wpoauth.New(clientID, secret.Value(), urls["callback"])
		p.BlogOAuth2.Prefix = path
		p.BlogOAuth2.AutoApprove = auto
		if o.BlogOAuth2User != nil {
			p.BlogOAuth2.User = *o.BlogOAuth2User
		}
		p.cfg.BlogOAuth2 = extauth.OAuthProvider{Key: clientID, Secret: secret, Site: site}
		return p.BlogOAuth2, nil
	case extauth.SearchOAuth2:
		op, err := oidcop.New(oidcop.Config{Issuer: site, ClientID: clientID, ClientSecret: secret.Value(), ClientName: o.AppName,
			RedirectURIs: []string{urls["callback"]}, Alg: "ES256", AuthMethod: "client_secret_post",
			NoEndSession: true, GoogleClaims: true, AutoApprove: auto, Users: o.SearchOAuth2Users, HTTPClient: o.HTTPClient})
		if err != nil {
			return nil, err
		}
		p.SearchOAuth2 = op
		p.cfg.SearchOAuth2 = extauth.OAuthProvider{Key: clientID, Secret: secret, Site: op.Issuer()}
		return op, nil
	case extauth.OIDC:
		oc := oidcop.Config{Issuer: site, ClientID: clientID, ClientSecret: secret.Value(), ClientName: o.AppName,
			RedirectURIs: []string{urls["callback"]}, Alg: "ES256", AutoApprove: auto, Users: o.OIDCUsers,
			PostLogoutRedirectURIs: []string{urls["post_logout"]},
			BackchannelLogoutURI:   urls["backchannel_logout"],
			FrontchannelLogoutURI:  urls["frontchannel_logout"],
			HTTPClient:             o.HTTPClient}
		var add extauth.OIDCAdditionalSettings
		switch {
		case o.OIDCFAPI2:
			keyPEM, err := newECClientKey()
			if err != nil {
				return nil, err
			}
			enc := oidcop.Encryption{Alg: "ECDH-ES+A256KW", Enc: "A256GCM"}
			oc.AuthMethod, oc.ClientSecret, oc.ClientJWKSURI = "private_key_jwt", "", urls["jwks"]
			oc.Profile, oc.DPoPNonce, oc.IDTokenEncryption = oidcop.FAPI2, true, enc
			secret = extauth.Secret{}
			add = extauth.OIDCAdditionalSettings{
				Profile: "fapi2", DPoP: true, PrivateKey: extauth.NewSecret(keyPEM),
				IDTokenEncryptedResponseAlg: enc.Alg, IDTokenEncryptedResponseEnc: enc.Enc,
			}
		case o.OIDCHighAssurance:
			keyPEM, err := newClientKey()
			if err != nil {
				return nil, err
			}
			enc := oidcop.Encryption{Alg: "RSA-OAEP-256", Enc: "A256GCM"}
			oc.AuthMethod, oc.ClientSecret, oc.ClientJWKSURI = "private_key_jwt", "", urls["jwks"]
			oc.RequirePAR, oc.RequireRequestObject, oc.IDTokenEncryption = true, true, enc
			secret = extauth.Secret{}
			add = extauth.OIDCAdditionalSettings{
				ClientAuthMethod: "private_key_jwt", PrivateKey: extauth.NewSecret(keyPEM),
				PushedAuthorizationRequests: true, RequestObject: true,
				IDTokenEncryptedResponseAlg: enc.Alg, IDTokenEncryptedResponseEnc: enc.Enc,
			}
		}
		op, err := oidcop.New(oc)
		if err != nil {
			return nil, err
		}
		p.OIDC = op
		p.cfg.OIDC = extauth.OIDCConfig{ClientID: clientID, ClientSecret: secret, Issuer: op.Issuer(), Additional: add}
		return op, nil
	case extauth.SAML:
		so := samlidp.Options{BaseURL: site, AutoApprove: auto, SPMetadataURL: urls["metadata"], HTTPClient: o.HTTPClient}
		if o.SAMLUser != nil {
			so.User = *o.SAMLUser
		}
		idp, err := samlidp.New(so)
		if err != nil {
			return nil, err
		}
		p.SAML = idp
		// The SP's entity ID is its metadata URL, as is usual.
		p.cfg.SAML = extauth.SAMLConfig{SPEntityID: urls["metadata"], IdPMetadataURL: idp.MetadataURL()}
		if o.SAMLKeyPair {
			key, cert, err := samlidp.NewKeyPair("extauthtest service provider", time.Now())
			if err != nil {
				return nil, err
			}
			der, err := x509.MarshalPKCS8PrivateKey(key)
			if err != nil {
				return nil, err
			}
			p.cfg.SAML.Additional.Certificate = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}))
			p.cfg.SAML.Additional.PrivateKey = extauth.NewSecret(string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})))
			p.cfg.SAML.Additional.Security.LogoutRequestsSigned = true
		}
		return idp, nil
	}
	return nil, errors.New("not a built-in provider")
}

// Config returns the application's configuration for the providers: the
// keys, secrets and sites of the OAuth ones (with the *_site extensions
// pointing at the fakes), the SAML entity ID and IdP metadata URL, the
// OpenID Connect client and issuer. Each call returns a new copy.
func (p *Providers) Config() *extauth.Config {
	c := *p.cfg
	return &c
}

// URL returns the base URL of prov's fake (its OpenID issuer, its SAML
// IdP's base), "" when it was not started.
func (p *Providers) URL(prov extauth.Provider) string { return p.sites[prov] }

// Close stops every fake, ending the requests they still hold (a Hang).
// Mounted ones (MountProviders) stay on their mux but hang no more.
func (p *Providers) Close() {
	if p.Microblog != nil {
		p.Microblog.Close()
	}
	if p.Socialnet != nil {
		p.Socialnet.Close()
	}
	for _, stop := range p.stops {
		stop()
	}
}

// SecretsYAML returns the configuration as a secrets file (the flat form
// LoadConfig and ParseConfig read, with the *_site extensions), for an
// application that reads its configuration from a file: write it where
// the application looks in development. It holds the fakes' client
// secrets in clear.
func (p *Providers) SecretsYAML() []byte {
	c := p.cfg
	var b strings.Builder
	b.WriteString("# Fake providers started by extauthtest.StartProviders: for development only.\n")
	kv := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, "%s: %q\n", k, v)
		}
	}
	oauth := func(name string, op extauth.OAuthProvider) {
		if op.Configured() {
			kv(name+"_key", op.Key)
			kv(name+"_secret", op.Secret.Value())
			kv(name+"_site", op.Site)
		}
	}
	oauth("microblog", c.Microblog)
	oauth("socialnet", c.Socialnet)
	oauth("search_oauth2", c.SearchOAuth2)
	oauth("blog_oauth2", c.BlogOAuth2)
	if c.SAML.Configured() {
		kv("saml_sp_entity_id", c.SAML.SPEntityID)
		kv("saml_idp_metadata_url", c.SAML.IdPMetadataURL)
		if add := c.SAML.Additional; add.HasKeyPair() {
			b.WriteString("saml_additional_settings:\n")
			fmt.Fprintf(&b, "  certificate: |\n%s", indent(add.Certificate))
			fmt.Fprintf(&b, "  private_key: |\n%s", indent(add.PrivateKey.Value()))
			if add.Security.LogoutRequestsSigned {
				b.WriteString("  security:\n    logout_requests_signed: true\n")
			}
		}
	}
	if c.OIDC.Configured() {
		kv("oidc_client_id", c.OIDC.ClientID)
		kv("oidc_client_secret", c.OIDC.ClientSecret.Value())
		kv("oidc_issuer", c.OIDC.Issuer)
		oidcAdditional(&b, c.OIDC.Additional)
	}
	return []byte(b.String())
}

// oidcAdditional writes the oidc_additional_settings section of add: what
// a high-assurance or FAPI 2.0 provider registers the application with
// (its key instead of a secret, pushed and signed requests, encrypted ID
// tokens, the profile and DPoP).
func oidcAdditional(b *strings.Builder, add extauth.OIDCAdditionalSettings) {
	var lines strings.Builder
	for _, kv := range [][2]string{
		{"client_auth_method", add.ClientAuthMethod},
		{"profile", add.Profile},
		{"id_token_encrypted_response_alg", add.IDTokenEncryptedResponseAlg},
		{"id_token_encrypted_response_enc", add.IDTokenEncryptedResponseEnc},
	} {
		if kv[1] != "" {
			fmt.Fprintf(&lines, "  %s: %q\n", kv[0], kv[1])
		}
	}
	if add.PushedAuthorizationRequests {
		lines.WriteString("  pushed_authorization_requests: true\n")
	}
	if add.RequestObject {
		lines.WriteString("  request_object: true\n")
	}
	if add.DPoP {
		lines.WriteString("  dpop: true\n")
	}
	if add.PrivateKey.Value() != "" {
		fmt.Fprintf(&lines, "  private_key: |\n%s", indent(add.PrivateKey.Value()))
	}
	if lines.Len() > 0 {
		b.WriteString("oidc_additional_settings:\n")
		b.WriteString(lines.String())
	}
}

// indent indents each line of a PEM block for a YAML block scalar.
func indent(pemBlock string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(strings.TrimSuffix(pemBlock, "\n"), "\n") {
		b.WriteString("    " + l)
	}
	return b.String() + "\n"
}

// Fault is a way a fake provider misbehaves, for tests of the
// application's failure page: the code each yields in an *extauth.Error is
// in the table of SetFault.
type Fault string

// The faults SetFault plays.
const (
	// NoFault: the provider behaves.
	NoFault Fault = ""
	// Deny: the user refuses to sign in, at the consent page or the IdP.
	Deny Fault = "deny"
	// ServerError: the provider's token endpoint answers 500.
	ServerError Fault = "server_error"
	// Hang: the provider's token endpoint never answers.
	Hang Fault = "hang"
	// HugeBody: the provider's token endpoint answers a body of several
	// megabytes.
	HugeBody Fault = "huge_body"
	// BadSignature: the ID token or SAML assertion does not verify.
	BadSignature Fault = "bad_signature"
	// WrongIssuer: the ID token or SAML assertion names another issuer.
	WrongIssuer Fault = "wrong_issuer"
	// Expired: the ID token or SAML assertion has expired.
	Expired Fault = "expired"
)

// SetFault makes prov's fake misbehave with f from its next sign-in on,
// until SetFault(prov, NoFault); a provider plays one fault at a time.
// The application's OnFailure then receives these codes:
//
//	fault         microblog  socialnet  search_oauth2/oidc  blog_oauth2  saml
//	Deny          access_denied in every provider
//	ServerError   provider_unavailable  provider_unavailable        -
//	Hang          timeout (after the application's Options.Timeout)  -
//	HugeBody      invalid_response                                   -
//	BadSignature  -          -          invalid_response    -            invalid_response
//	WrongIssuer   -          -          invalid_response    -            invalid_response
//	Expired       -          -          invalid_response    -            invalid_response
//
// It returns an error for a fault the provider cannot play (a "-"): a SAML
// IdP is not called back during a sign-in, and an OAuth provider signs
// nothing; or for a provider that was not started.
func (p *Providers) SetFault(prov extauth.Provider, f Fault) error {
	unsupported := fmt.Errorf("extauthtest: %s cannot play the fault %q", prov, f)
	switch {
	case prov == extauth.Microblog && p.Microblog != nil:
		s := p.Microblog
		s.SetFault(oauth1.Authenticate, oauth1.FaultNone)
		s.SetFault(oauth1.AccessToken, oauth1.FaultNone)
		switch f {
		case NoFault:
		case Deny:
			s.SetFault(oauth1.Authenticate, oauth1.FaultDeny)
		case ServerError:
			s.SetFault(oauth1.AccessToken, oauth1.FaultServerError)
		case Hang:
			s.SetFault(oauth1.AccessToken, oauth1.FaultHang)
		case HugeBody:
			s.SetFault(oauth1.AccessToken, oauth1.FaultHugeBody)
		default:
			return unsupported
		}
	case prov == extauth.Socialnet && p.Socialnet != nil:
		s := p.Socialnet
		s.SetFault(graph.Dialog, graph.FaultNone)
		s.SetFault(graph.AccessToken, graph.FaultNone)
		switch f {
		case NoFault:
		case Deny:
			s.SetFault(graph.Dialog, graph.FaultDeny)
		case ServerError:
			s.SetFault(graph.AccessToken, graph.FaultServerError)
		case Hang:
			s.SetFault(graph.AccessToken, graph.FaultHang)
		case HugeBody:
			s.SetFault(graph.AccessToken, graph.FaultHugeBody)
		default:
			return unsupported
		}
	case prov == extauth.BlogOAuth2 && p.BlogOAuth2 != nil:
		s := p.BlogOAuth2
		s.Lock()
		defer s.Unlock()
		s.Deny, s.TokenStatus, s.Hang, s.HugeToken = false, 0, false, 0
		switch f {
		case NoFault:
		case Deny:
			s.Deny = true
		case ServerError:
			s.TokenStatus = http.StatusInternalServerError
		case Hang:
			s.Hang = true
		case HugeBody:
			s.HugeToken = endpoint.HugeBodySize
		default:
			return unsupported
		}
	case prov == extauth.OIDC && p.OIDC != nil:
		return setOPFault(p.OIDC, f, unsupported)
	case prov == extauth.SearchOAuth2 && p.SearchOAuth2 != nil:
		return setOPFault(p.SearchOAuth2, f, unsupported)
	case prov == extauth.SAML && p.SAML != nil:
		return setIdPFault(p.SAML, f, unsupported)
	default:
		return fmt.Errorf("extauthtest: %s was not started", prov)
	}
	return nil
}

func setOPFault(op *oidcop.OP, f Fault, unsupported error) error {
	faults := map[Fault]oidcop.Fault{
		Deny: oidcop.Deny, ServerError: oidcop.TokenServerError, Hang: oidcop.TokenHang, HugeBody: oidcop.TokenHugeBody,
		BadSignature: oidcop.BadSignature, WrongIssuer: oidcop.WrongIssuer, Expired: oidcop.Expired,
	}
	if f == NoFault {
		op.SetFaults()
		return nil
	}
	of, ok := faults[f]
	if !ok {
		return unsupported
	}
	op.SetFaults(of)
	return nil
}

func setIdPFault(idp *samlidp.IdP, f Fault, unsupported error) error {
	var mutate func(*saml.Assertion)
	deny, unpublished := false, false
	switch f {
	case NoFault:
	case Deny:
		deny = true
	case BadSignature:
		unpublished = true
	case WrongIssuer:
		mutate = func(a *saml.Assertion) { a.Issuer.Value = "https://evil.example/metadata" }
	case Expired:
		mutate = func(a *saml.Assertion) {
			past := a.IssueInstant.Add(-time.Hour)
			if a.Conditions != nil {
				a.Conditions.NotOnOrAfter = past
			}
			if a.Subject != nil {
				for _, sc := range a.Subject.SubjectConfirmations {
					if sc.SubjectConfirmationData != nil {
						sc.SubjectConfirmationData.NotOnOrAfter = past
					}
				}
			}
		}
	default:
		return unsupported
	}
	idp.Set(func(k *samlidp.Knobs) { k.Mutate, k.Deny, k.UnpublishedKey = mutate, deny, unpublished })
	return nil
}

// newClientKey makes an OpenID Connect client's private key: RSA 2048, PEM.
func newClientKey() (string, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", err
	}
	return pkcs8PEM(key)
}

// newECClientKey is an EC P-256 client private key, PEM.
func newECClientKey() (string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	return pkcs8PEM(key)
}

func pkcs8PEM(key any) (string, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", err
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), nil
}
