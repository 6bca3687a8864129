package extauthtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/oidcop"
	"github.com/extauth/extauth/internal/oidfed"
	"github.com/extauth/extauth/providers"
)

// Federation is a fake OpenID Federation 1.0 federation for an application
// whose oidc provider is a federation relying party
// (oidc_additional_settings.federation), served on 127.0.0.1: a trust
// anchor, an intermediate under it, and an OpenID provider (the oidcop
// fake as a federation OP) under the intermediate, with the application
// registered at the intermediate under its entity identifier and
// federation key. The anchor issues a trust mark to the OP
// (TrustMarkOP), which Config requires, and one to the application
// (TrustMarkRP), which Config publishes. The OP registers the application
// automatically: it resolves its trust chain from the entity configuration
// the application serves. Config is the application's configuration for
// it: the OP's entity identifier as oidc_issuer, a client key and a
// federation key made for it, the anchor pinned, no client ID or secret.
type Federation struct {
	// TrustAnchor and Intermediate are the authorities' entity
	// identifiers; OP is the provider, whose Issuer is its entity
	// identifier.
	TrustAnchor, Intermediate string
	OP                        *oidcop.OP

	anchor, intermediate *oidfed.Authority
	srv                  *http.Server
	ln                   net.Listener
	cfg                  *extauth.Config
}

// The trust mark types the fake anchor issues.
const (
	TrustMarkOP = "https://trust-anchor.extauthtest.invalid/openid_provider/public"
	TrustMarkRP = "https://trust-anchor.extauthtest.invalid/openid_relying_party/public"
)

// FederationOptions configure StartFederation.
type FederationOptions struct {
	// PathPrefix is the application's extauth.Options.PathPrefix: its
	// entity identifier is under it.
	PathPrefix string
	// Interactive shows the OP's consent page; without it the OP signs its
	// first user in at once.
	Interactive bool
	// Users are the OP's; its demo users when empty.
	Users []oidcop.User
	// HTTPClient is how the federation's OP reaches the application (to
	// read its entity configuration); as ProvidersOptions.HTTPClient.
	HTTPClient *http.Client
}

// StartFederation starts the federation for the application served at
// baseURL. Close stops it.
func StartFederation(baseURL string, o FederationOptions) (*Federation, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	base := "http://" + ln.Addr().String()
	prefix := o.PathPrefix
	if prefix == "" {
		prefix = "/users/auth/"
	}
	rp := strings.TrimSuffix(baseURL, "/") + "/" + strings.Trim(prefix, "/") + "/oidc"
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 5 * time.Second, Transport: (&Browser{}).transport()}
	}
	f := &Federation{TrustAnchor: base + "/anchor", Intermediate: base + "/intermediate", ln: ln}
	keys := make([]oidfed.Key, 3)
	var fedKeyPEM string
	for i := range keys {
		priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		if keys[i], err = oidfed.NewKey(priv); err != nil {
			return nil, err
		}
		if i == 2 {
			if fedKeyPEM, err = pkcs8PEM(priv); err != nil {
				return nil, err
			}
		}
	}
	f.anchor = oidfed.NewAuthority(&oidfed.Entity{ID: f.TrustAnchor, Keys: keys[:1],
		TrustMarkIssuers: map[string][]string{TrustMarkOP: {f.TrustAnchor}, TrustMarkRP: {f.TrustAnchor}},
		Metadata:         map[string]map[string]any{oidfed.TypeFederationEntity: {"organization_name": "extauthtest trust anchor"}}})
	f.intermediate = oidfed.NewAuthority(&oidfed.Entity{ID: f.Intermediate, Keys: keys[1:2], AuthorityHints: []string{f.TrustAnchor},
		Metadata: map[string]map[string]any{oidfed.TypeFederationEntity: {"organization_name": "extauthtest intermediate"}}})
	opMark, err := f.anchor.IssueTrustMark(TrustMarkOP, base+"/op", 0)
	if err != nil {
		return nil, err
	}
	rpMark, err := f.anchor.IssueTrustMark(TrustMarkRP, rp, 0)
	if err != nil {
		return nil, err
	}
	anchorKeys := *oidfed.JWKS(keys[0])
	f.OP, err = oidcop.New(oidcop.Config{Issuer: base + "/op", ClientID: rp, Alg: "ES256", AutoApprove: !o.Interactive,
		Users: o.Users, HTTPClient: o.HTTPClient, Federation: &oidcop.Federation{
			AuthorityHints:   []string{f.Intermediate},
			TrustAnchors:     []oidcop.TrustAnchor{{EntityID: f.TrustAnchor, JWKS: anchorKeys}},
			TrustMarks:       []oidcop.TrustMark{{Type: TrustMarkOP, TrustMark: opMark.TrustMark}},
			OrganizationName: "extauthtest OP",
		}})
	if err != nil {
		return nil, err
	}
	opKeys := f.OP.FederationJWKS()
	f.anchor.Add(f.Intermediate, oidfed.Subordinate{JWKS: oidfed.JWKS(keys[1]), Intermediate: true,
		EntityTypes: []string{oidfed.TypeFederationEntity}})
	f.intermediate.Add(f.OP.Issuer(), oidfed.Subordinate{JWKS: &opKeys, EntityTypes: []string{oidfed.TypeOpenIDProvider}})
	f.intermediate.Add(rp, oidfed.Subordinate{JWKS: oidfed.JWKS(keys[2]), EntityTypes: []string{oidfed.TypeRelyingParty}})
	clientKey, err := newECClientKey()
	if err != nil {
		return nil, err
	}
	jwks, err := json.Marshal(anchorKeys)
	if err != nil {
		return nil, err
	}
	f.cfg = &extauth.Config{OIDC: extauth.OIDCConfig{Issuer: f.OP.Issuer(), Additional: extauth.OIDCAdditionalSettings{
		PrivateKey: extauth.NewSecret(clientKey),
		Federation: &extauth.OIDCFederationSettings{
			FederationKey:      extauth.NewSecret(fedKeyPEM),
			AuthorityHints:     []string{f.Intermediate},
			TrustAnchors:       []providers.OIDCTrustAnchor{{EntityID: f.TrustAnchor, JWKS: string(jwks)}},
			TrustMarks:         []providers.OIDCTrustMark{{Type: TrustMarkRP, TrustMark: rpMark.TrustMark}},
			RequiredTrustMarks: []string{TrustMarkOP},
			OrganizationName:   "extauthtest application",
		},
	}}}
	mux := http.NewServeMux()
	mux.Handle("/anchor/", http.StripPrefix("/anchor", f.anchor))
	mux.Handle("/intermediate/", http.StripPrefix("/intermediate", f.intermediate))
	mux.Handle("/op/", f.OP)
	f.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go f.srv.Serve(ln)
	return f, nil
}

// NewFederation is StartFederation for a test: it fails t on an error
// and stops the federation when the test ends.
func NewFederation(t testing.TB, baseURL string, o FederationOptions) *Federation {
	t.Helper()
	f, err := StartFederation(baseURL, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

// Config returns the application's configuration for the federation's
// OP. Each call returns a new copy.
func (f *Federation) Config() *extauth.Config {
	c := *f.cfg
	fed := *c.OIDC.Additional.Federation
	c.OIDC.Additional.Federation = &fed
	return &c
}

// SecretsYAML returns Config as a secrets file, with the keys in clear:
// for development only.
func (f *Federation) SecretsYAML() []byte {
	a := f.cfg.OIDC.Additional
	fed := a.Federation
	var b strings.Builder
	b.WriteString("# A fake OpenID Federation started by extauthtest.StartFederation: for development only.\n")
	fmt.Fprintf(&b, "oidc_issuer: %q\noidc_additional_settings:\n", f.cfg.OIDC.Issuer)
	fmt.Fprintf(&b, "  private_key: |\n%s", indent(a.PrivateKey.Value()))
	b.WriteString("  federation:\n")
	fmt.Fprintf(&b, "    federation_key: |\n%s", indentBy(fed.FederationKey.Value(), "      "))
	fmt.Fprintf(&b, "    authority_hints: [%q]\n", fed.AuthorityHints[0])
	fmt.Fprintf(&b, "    trust_anchors:\n      %q: '%s'\n", fed.TrustAnchors[0].EntityID, fed.TrustAnchors[0].JWKS)
	fmt.Fprintf(&b, "    trust_marks:\n      - trust_mark_type: %q\n        trust_mark: %q\n", fed.TrustMarks[0].Type, fed.TrustMarks[0].TrustMark)
	fmt.Fprintf(&b, "    required_trust_marks: [%q]\n", fed.RequiredTrustMarks[0])
	fmt.Fprintf(&b, "    organization_name: %q\n", fed.OrganizationName)
	return []byte(b.String())
}

func indentBy(pemBlock, pad string) string {
	return pad + strings.ReplaceAll(strings.TrimSuffix(pemBlock, "\n"), "\n", "\n"+pad) + "\n"
}

// Close stops the federation.
func (f *Federation) Close() {
	f.srv.Close()
}
