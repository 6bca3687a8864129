package extauth_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/oidcop"
	"github.com/extauth/extauth/internal/harness"
)

// mtlsApp is an application against a provider served over TLS that
// requests client certificates.
type mtlsApp struct {
	URL  string
	Auth *extauth.Auth
	OP   *oidcop.OP
	// TrustingClient trusts the provider's server certificate and
	// presents no client certificate.
	TrustingClient *http.Client
	Logs           *lockedLog
	signIns
}

// newMTLSApp starts a provider over TLS (client certificates requested)
// configured by op, and an application whose oidc_additional_settings add
// sets, with the provider's server certificate trusted.
func newMTLSApp(t *testing.T, op func(*oidcop.Config), add extauth.OIDCAdditionalSettings) *mtlsApp {
	t.Helper()
	return newMTLSAppServing(t, op, add, nil)
}

// newMTLSAppServing is newMTLSApp with the provider served through wrap,
// when not nil.
func newMTLSAppServing(t *testing.T, op func(*oidcop.Config), add extauth.OIDCAdditionalSettings, wrap func(http.Handler) http.Handler) *mtlsApp {
	t.Helper()
	a := &mtlsApp{Logs: &lockedLog{}}
	var p atomic.Pointer[oidcop.OP]
	var opHandler http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { p.Load().ServeHTTP(w, r) })
	if wrap != nil {
		opHandler = wrap(opHandler)
	}
	opSrv := httptest.NewUnstartedServer(opHandler)
	opSrv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	// The browser and the clients hang up on kept-alive connections.
	opSrv.Config.ErrorLog = log.New(io.Discard, "", 0)
	opSrv.StartTLS()
	t.Cleanup(opSrv.Close)
	a.TrustingClient = opSrv.Client()
	srv := harness.Serve(t, func(base string) http.Handler {
		oc := oidcop.Config{Issuer: opSrv.URL + "/op", ClientID: oidcClientID, RedirectURIs: []string{base + "/users/auth/oidc/callback"},
			AutoApprove: true, Keys: opKeys()["ES256"][:1], Alg: "ES256", MTLS: true, SparseIDToken: true,
			ClientJWKSURI: base + "/users/auth/oidc/jwks"}
		op(&oc)
		o, err := oidcop.New(oc)
		if err != nil {
			t.Fatal(err)
		}
		p.Store(o)
		a.OP = o
		add.Scope = "openid email profile offline_access"
		cfg := &extauth.Config{OIDC: extauth.OIDCConfig{ClientID: oidcClientID, Issuer: oc.Issuer, Additional: add}}
		auth, err := extauth.New(cfg, extauth.Options{
			BaseURL: base, CookieKey: testKey, HTTPClient: opSrv.Client(),
			Logger:    slog.New(slog.NewTextHandler(a.Logs, nil)),
			OnSuccess: a.onSuccess,
		})
		if err != nil {
			t.Fatal(err)
		}
		a.Auth = auth
		t.Cleanup(func() { auth.Close() })
		mux := http.NewServeMux()
		auth.Mount(mux)
		return mux
	})
	a.URL = srv.URL
	return a
}

// signIn signs in with a browser that trusts the provider's server
// certificate.
func (a *mtlsApp) signIn(t *testing.T) *harness.Response {
	t.Helper()
	b := harness.NewBrowser(t)
	b.Client.Transport = a.TrustingClient.Transport
	return b.Get(a.URL + "/users/auth/oidc")
}

// mtlsPKI is a test CA and a client certificate it issued.
func mtlsPKI(t *testing.T) (ca, client *harness.Cert) {
	ca = harness.NewCert(t, "extauth test CA", nil, harness.CA)
	return ca, harness.NewCert(t, "extauth-client", ca, harness.TLSClient)
}

// TestOIDCMTLS signs in with mutual TLS (RFC 8705) under profile fapi2:
// the client authenticates by its certificate (tls_client_auth, chained to
// the provider's CA, with the registered subject; or
// self_signed_tls_client_auth, the certificate published at the JWKS
// route), at the provider's mtls_endpoint_aliases, and the access token is
// bound to the certificate: Auth.Client, which presents it, reads
// UserInfo; a client without it cannot, with the same token.
func TestOIDCMTLS(t *testing.T) {
	ca, client := mtlsPKI(t)
	self := harness.NewCert(t, "extauth-self-signed", nil, harness.TLSClient)
	next := harness.NewCert(t, "extauth-next", nil, harness.TLSClient)
	for _, tc := range []struct {
		name   string
		op     func(*oidcop.Config)
		add    extauth.OIDCAdditionalSettings
		jwks   int // certificates the JWKS route publishes
		method string
	}{
		{"tls_client_auth", func(c *oidcop.Config) {
			c.AuthMethod, c.Profile = "tls_client_auth", oidcop.FAPI2
			c.ClientCAs = x509.NewCertPool()
			c.ClientCAs.AddCert(ca.Cert)
			c.TLSClientSubjectDN = client.Cert.Subject.String()
		}, extauth.OIDCAdditionalSettings{Profile: "fapi2", ClientAuthMethod: "tls_client_auth",
			TLSClientCertificate: client.CertPEM, TLSClientKey: extauth.NewSecret(client.KeyPEM)}, 0, "tls_client_auth"},
		{"self_signed_tls_client_auth, a certificate rotated in", func(c *oidcop.Config) {
			c.AuthMethod, c.Profile = "self_signed_tls_client_auth", oidcop.FAPI2
		}, extauth.OIDCAdditionalSettings{Profile: "fapi2", ClientAuthMethod: "self_signed_tls_client_auth",
			TLSClientCertificate: self.CertPEM, TLSClientKey: extauth.NewSecret(self.KeyPEM),
			TLSClientCertificateNew: next.CertPEM, TLSClientKeyNew: extauth.NewSecret(next.KeyPEM)}, 2, "self_signed_tls_client_auth"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newMTLSApp(t, tc.op, tc.add)
			if resp := a.signIn(t); resp.StatusCode != http.StatusOK {
				t.Fatalf("got %d %q\n%s", resp.StatusCode, resp.Body, a.Logs)
			}
			id := a.identities()[0]
			if id.Tokens.TokenType != "Bearer" || id.Tokens.DPoPKey != "" || id.Email == "" {
				t.Errorf("identity %+v", id)
			}
			// PAR, token and UserInfo went to the aliases.
			if n := a.OP.Hits(oidcop.MTLS); n != a.OP.Hits(oidcop.PAR)+a.OP.Hits(oidcop.Token)+a.OP.Hits(oidcop.UserInfo) || n < 3 {
				t.Errorf("%d requests at the mTLS aliases; PAR %d, token %d, UserInfo %d", n,
					a.OP.Hits(oidcop.PAR), a.OP.Hits(oidcop.Token), a.OP.Hits(oidcop.UserInfo))
			}
			var set struct {
				Keys []struct {
					X5C []string `json:"x5c"`
				} `json:"keys"`
			}
			resp, err := http.Get(a.URL + "/users/auth/oidc/jwks")
			if err != nil {
				t.Fatal(err)
			}
			json.NewDecoder(resp.Body).Decode(&set)
			resp.Body.Close()
			published := 0
			for _, k := range set.Keys {
				published += len(k.X5C)
			}
			if published != tc.jwks {
				t.Errorf("the JWKS route publishes %d certificates, want %d", published, tc.jwks)
			}

			userinfo := a.OP.Issuer() + "/mtls/userinfo"
			ctx := context.Background()
			hc, err := a.Auth.Client(ctx, id, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err = hc.Get(userinfo)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), id.UID) {
				t.Errorf("UserInfo through Auth.Client: %d %s", resp.StatusCode, body)
			}
			// The token alone, without the certificate, reads nothing.
			req, _ := http.NewRequest(http.MethodGet, userinfo, nil)
			req.Header.Set("Authorization", "Bearer "+id.Tokens.AccessToken)
			resp, err = a.TrustingClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("the bound token without its certificate: %d", resp.StatusCode)
			}
			// Renewal and revocation authenticate by the certificate too.
			stale := *id
			stale.Tokens.Expiry = time.Now().Add(-time.Minute)
			ts, err := a.Auth.TokenSource(ctx, &stale)
			if err != nil {
				t.Fatal(err)
			}
			tok, err := ts.Token()
			if err != nil {
				t.Fatalf("refresh: %v\n%s", err, a.Logs)
			}
			stale.Tokens.AccessToken, stale.Tokens.RefreshToken = tok.AccessToken, tok.RefreshToken
			if err := a.Auth.RevokeTokens(ctx, &stale); err != nil {
				t.Fatalf("revoke: %v\n%s", err, a.Logs)
			}
			if strings.Contains(a.Logs.String(), "BEGIN") {
				t.Error("a PEM block reached the log")
			}
		})
	}
}

// TestOIDCMTLSRefusals: a certificate the provider does not take fails the
// sign-in with invalid_credentials; a provider that does not list the
// method, or does not bind tokens to certificates when the profile needs
// them to, fails it with misconfigured before anything is sent; a host
// HTTP client that cannot present a certificate is refused by New.
func TestOIDCMTLSRefusals(t *testing.T) {
	ca, client := mtlsPKI(t)
	other := harness.NewCert(t, "someone-else", ca, harness.TLSClient)
	pki := func(c *oidcop.Config) {
		c.AuthMethod, c.Profile = "tls_client_auth", oidcop.FAPI2
		c.ClientCAs = x509.NewCertPool()
		c.ClientCAs.AddCert(ca.Cert)
		c.TLSClientSubjectDN = client.Cert.Subject.String()
	}
	with := func(c *harness.Cert) extauth.OIDCAdditionalSettings {
		return extauth.OIDCAdditionalSettings{Profile: "fapi2", ClientAuthMethod: "tls_client_auth",
			TLSClientCertificate: c.CertPEM, TLSClientKey: extauth.NewSecret(c.KeyPEM)}
	}
	for _, tc := range []struct {
		name   string
		op     func(*oidcop.Config)
		add    extauth.OIDCAdditionalSettings
		status int
		code   string
		why    string
	}{
		{"a certificate of another subject", pki, with(other), http.StatusBadGateway, "invalid_credentials", "invalid_client"},
		{"a provider that does not list tls_client_auth", func(c *oidcop.Config) {
			c.AuthMethod, c.ClientSecret, c.Profile = "private_key_jwt", "", ""
		}, with(client), http.StatusInternalServerError, "misconfigured", "tls_client_auth is not a method the provider lists"},
		{"a provider that does not bind tokens to certificates", func(c *oidcop.Config) {
			pki(c)
			c.MTLS, c.Profile = false, ""
		}, with(client), http.StatusInternalServerError, "misconfigured", "does not bind access tokens to TLS certificates"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newMTLSApp(t, tc.op, tc.add)
			resp := a.signIn(t)
			if resp.StatusCode != tc.status || !strings.Contains(resp.Body, tc.code) {
				t.Fatalf("got %d %q, want %d %s\n%s", resp.StatusCode, resp.Body, tc.status, tc.code, a.Logs)
			}
			if len(a.identities()) != 0 || a.OP.Hits(oidcop.Token) != 0 {
				t.Fatalf("hook called %d times, token endpoint %d", len(a.identities()), a.OP.Hits(oidcop.Token))
			}
			if !strings.Contains(a.Logs.String(), tc.why) {
				t.Errorf("the log does not say why (%q):\n%s", tc.why, a.Logs)
			}
		})
	}
	cfg := &extauth.Config{OIDC: extauth.OIDCConfig{ClientID: oidcClientID, Issuer: "https://op.example", Additional: with(client)}}
	_, err := extauth.New(cfg, extauth.Options{BaseURL: "https://app.example", CookieKey: testKey,
		HTTPClient: &http.Client{Transport: roundTripperFunc(http.DefaultTransport.RoundTrip)},
		OnSuccess:  func(http.ResponseWriter, *http.Request, *extauth.Identity) {}})
	if err == nil || !strings.Contains(err.Error(), "tls_client_certificate") || !strings.Contains(err.Error(), "*http.Transport") {
		t.Errorf("New with a transport that cannot present a certificate: %v", err)
	}
}

// TestOIDCMTLSAliasOnAnotherSite: an mtls_endpoint_alias must be on the
// site of the issuer or of the endpoint it stands for (the same host, any
// port, or a host of the same registrable domain): it gets the
// connections that present the client's certificate and the codes and
// tokens sent there. A discovery document that moves one to another site
// fails the sign-in with misconfigured, naming the alias, before anything
// is sent to it or to the provider's token endpoint. TestOIDCMTLS is the
// control: aliases on the issuer's host are used.
func TestOIDCMTLSAliasOnAnotherSite(t *testing.T) {
	_, client := mtlsPKI(t)
	for _, name := range []string{"token_endpoint", "pushed_authorization_request_endpoint", "userinfo_endpoint", "revocation_endpoint"} {
		for _, elsewhere := range []string{"https://mtls.elsewhere.example/op/mtls/x", "https://localhost/op/mtls/x"} {
			t.Run(name+" at "+elsewhere, func(t *testing.T) {
				var moved atomic.Bool
				a := newMTLSAppServing(t, func(c *oidcop.Config) {
					c.AuthMethod, c.Profile = "self_signed_tls_client_auth", oidcop.FAPI2
				}, extauth.OIDCAdditionalSettings{Profile: "fapi2", ClientAuthMethod: "self_signed_tls_client_auth",
					TLSClientCertificate: client.CertPEM, TLSClientKey: extauth.NewSecret(client.KeyPEM)},
					func(next http.Handler) http.Handler {
						return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
							if !strings.HasSuffix(r.URL.Path, "/.well-known/openid-configuration") {
								next.ServeHTTP(w, r)
								return
							}
							rec := httptest.NewRecorder()
							next.ServeHTTP(rec, r)
							var doc map[string]any
							if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
								t.Error(err)
							}
							if aliases, ok := doc["mtls_endpoint_aliases"].(map[string]any); ok && aliases[name] != nil {
								aliases[name] = elsewhere
								moved.Store(true)
							}
							w.Header().Set("Content-Type", "application/json")
							json.NewEncoder(w).Encode(doc)
						})
					})
				resp := a.signIn(t)
				if !moved.Load() {
					t.Fatal("the provider lists no such alias")
				}
				if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(resp.Body, "misconfigured") {
					t.Fatalf("got %d %q, want 500 misconfigured\n%s", resp.StatusCode, resp.Body, a.Logs)
				}
				if len(a.identities()) != 0 || a.OP.Hits(oidcop.Token)+a.OP.Hits(oidcop.PAR)+a.OP.Hits(oidcop.MTLS) != 0 {
					t.Fatalf("hook called %d times; token %d, PAR %d, aliases %d", len(a.identities()),
						a.OP.Hits(oidcop.Token), a.OP.Hits(oidcop.PAR), a.OP.Hits(oidcop.MTLS))
				}
				if why := "mtls_endpoint_aliases." + name; !strings.Contains(a.Logs.String(), why) || !strings.Contains(a.Logs.String(), "another site") {
					t.Errorf("the log does not say why (%q):\n%s", why, a.Logs)
				}
			})
		}
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
