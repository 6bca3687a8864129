package main

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/crewjam/saml"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/internal/outbound"
	"github.com/extauth/extauth/providers"
	"github.com/extauth/extauth/samlsp"
)

// prober fetches what the SAML and OIDC providers publish and reports on it,
// applying the rules the strategies apply when the application starts.
type prober struct {
	client  *http.Client
	timeout time.Duration
	r       *checkReport
}

// fetch GETs a provider document as the application does: following up to
// three redirects that stay on https, bounded in time and size. A document
// that moved is reported with its final URL, which is better configured
// directly: each redirect is one more request, and one more host to trust.
func (pr *prober) fetch(ctx context.Context, what, rawURL, accept string) ([]byte, error) {
	req, err := http.NewRequestWithContext(outbound.Document(ctx), http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, errors.New("not a URL that can be fetched")
	}
	req.Header.Set("Accept", accept)
	resp, err := pr.client.Do(req)
	if errors.Is(err, outbound.ErrRedirect) {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%v; configure the document's final https URL", err)
	}
	if err != nil {
		return nil, pr.transportError(err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return nil, fmt.Errorf("answers HTTP %d, a redirect to %s that extauth does not follow; configure the final URL",
			resp.StatusCode, redactURL(resp.Header.Get("Location")))
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("answers HTTP %d", resp.StatusCode)
	}
	if final := resp.Request.URL.String(); final != rawURL {
		pr.r.warn("%s moved: %s redirects to %s; configure that URL directly", what, redactURL(rawURL), redactURL(final))
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, pr.transportError(err)
	}
	return body, nil
}

func (pr *prober) transportError(err error) error {
	switch {
	case outbound.IsTooLarge(err):
		return fmt.Errorf("the answer is larger than %d bytes", maxDocumentBytes)
	case outbound.IsTimeout(err):
		return fmt.Errorf("no answer within %s", pr.timeout)
	case errors.Is(err, context.Canceled):
		return errors.New("interrupted")
	}
	// The URL is already in the report, redacted; the transport's own
	// message would repeat it with its query.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err
}

// saml fetches and reads the IdP metadata.
func (pr *prober) saml(ctx context.Context, cfg extauth.SAMLConfig) {
	s := pr.r.section("SAML")
	s.add("IdP metadata", redactURL(cfg.IdPMetadataURL))
	body, err := pr.fetch(ctx, "SAML IdP metadata", cfg.IdPMetadataURL, "application/samlmetadata+xml, application/xml, text/xml")
	if err != nil {
		pr.r.fail(extauth.SAML, "IdP metadata: "+err.Error())
		return
	}
	// The strategy's own reading, so that check accepts and refuses what
	// the application will. The host's IdPEntityID option is not in the
	// configuration file; like the default, check wants a single IdP.
	now := pr.r.now
	rules := samlsp.MetadataRules{Now: now, AllowSHA1: cfg.Additional.Security.AllowSHA1}
	if c := cfg.Additional.IdPMetadataCertificate; c != "" {
		// Validate has said what is wrong with one that does not parse.
		rules.Certificate, _ = samlsp.ParseCertificatePEM(c)
	}
	md, err := samlsp.ParseIdPMetadata(body, rules)
	if err != nil {
		pr.r.fail(extauth.SAML, "IdP metadata: "+clean(err.Error()))
		return
	}
	s.add("IdP entity ID", clean(md.Entity.EntityID))
	switch {
	case md.Signed:
		s.add("metadata signature", shortAlg(md.SignatureMethod)+", verified with idp_metadata_certificate")
	case md.SignatureMethod != "":
		s.add("metadata signature", shortAlg(md.SignatureMethod)+", not verified (no idp_metadata_certificate)")
	}
	for _, use := range md.SHA1Use() {
		if rules.AllowSHA1 {
			pr.r.warn("saml: the IdP uses SHA-1 (%s); accepted, as saml_additional_settings.security.allow_sha1 is set", clean(use))
			continue
		}
		pr.r.warn("saml: the IdP uses SHA-1 (%s); extauth refuses SHA-1 signatures and digests unless the application sets "+
			"extauth.Options.SAML.AllowSHA1 or saml_additional_settings.security.allow_sha1", clean(use))
	}
	if !md.ValidUntil.IsZero() {
		s.add("metadata valid until", md.ValidUntil.UTC().Format(time.RFC3339))
	}

	redirect, post := "", ""
	var wantSigned bool
	for _, d := range md.Entity.IDPSSODescriptors {
		for _, sso := range d.SingleSignOnServices {
			s.add("SSO ("+shortBinding(sso.Binding)+")", clean(sso.Location))
			if sso.Binding == saml.HTTPRedirectBinding && redirect == "" {
				redirect = sso.Location
			}
			if sso.Binding == saml.HTTPPostBinding && post == "" {
				post = sso.Location
			}
		}
		if d.WantAuthnRequestsSigned != nil && *d.WantAuthnRequestsSigned {
			wantSigned = true
		}
	}
	switch {
	case cfg.IdPSSOServiceURL != "":
		s.add("SSO used", redactURL(cfg.IdPSSOServiceURL)+" (saml_idp_sso_service_url)")
	case redirect != "":
		s.add("SSO used", clean(redirect))
	case post != "":
		s.add("SSO used", clean(post)+" (HTTP-POST: sign-ins start with a form the browser posts)")
	default:
		pr.r.fail(extauth.SAML, "IdP metadata: no HTTP-Redirect or HTTP-POST single sign-on endpoint; set saml_idp_sso_service_url")
	}

	valid := 0
	for _, cert := range md.SigningCerts {
		certRows(s, "IdP signing certificate", cert, now, "")
		if msg := expiryProblem(cert, now); msg != "" {
			pr.r.warn("saml: the IdP signing certificate %s %s", clean(cert.Subject.String()), msg)
		}
		if !now.Before(cert.NotBefore) && !now.After(cert.NotAfter) {
			valid++
		}
	}
	switch {
	case valid > 0:
	case cfg.Additional.Security.EnforceIdPCertificateDates:
		pr.r.fail(extauth.SAML, "IdP metadata: no signing certificate is valid now, and security.enforce_idp_certificate_dates is set, so every response would be refused")
	default:
		// The metadata vouches for the key, not the certificate's dates.
		pr.r.warn("saml: no IdP signing certificate is valid now; extauth verifies with their keys all the same, as the IdP's metadata " +
			"vouches for them (SAML V2.0 Metadata Interoperability Profile); with saml_additional_settings.security." +
			"enforce_idp_certificate_dates every response would be refused")
	}
	if wantSigned && !cfg.Additional.HasKeyPair() {
		pr.r.warn("saml: the IdP wants signed authentication requests (WantAuthnRequestsSigned), but saml_additional_settings has no certificate and private_key; make them with extauth keygen")
	}
	if cfg.Additional.ResponseBinding == samlsp.ResponseArtifact {
		pr.artifact(ctx, s, cfg, md)
	}
}

// artifact connects to the IdP's ArtifactResolutionService as the
// strategy will resolve artifacts there: its TLS server certificate
// checked against the roots or artifact.idp_tls_certificate, the TLS
// client certificate presented.
func (pr *prober) artifact(ctx context.Context, s *section, cfg extauth.SAMLConfig, md *samlsp.IdPMetadata) {
	ars := md.ArtifactResolutionServices()
	if len(ars) == 0 {
		pr.r.fail(extauth.SAML, "response_binding: artifact, but the IdP metadata lists no ArtifactResolutionService with the SOAP binding: "+
			"the IdP would be asked for the HTTP-POST binding")
		return
	}
	s.add("artifact resolution", clean(ars[0]))
	a := cfg.Additional
	res, err := samlsp.CheckArtifactTLS(ctx, pr.client, samlsp.Config{CertificatePEM: a.Certificate, PrivateKeyPEM: a.PrivateKey.Value(),
		ResponseBinding: a.ResponseBinding, Artifact: a.Artifact.Strategy()}, ars[0])
	if err != nil {
		pr.r.fail(extauth.SAML, "artifact resolution service: "+clean(err.Error()))
		return
	}
	trust := "the system's roots"
	if res.Pinned {
		trust = "artifact.idp_tls_certificate"
	}
	if res.Server != nil {
		certRows(s, "its TLS certificate", res.Server, pr.r.now, "trusted by "+trust)
	}
	if res.Client != nil {
		certRows(s, "TLS client certificate", res.Client, pr.r.now, fmt.Sprintf("presented; the service answered HTTP %d to a GET", res.Status))
	}
}

// shortAlg names an XML-DSig algorithm by its fragment (rsa-sha256).
func shortAlg(uri string) string {
	if i := strings.LastIndexByte(uri, '#'); i >= 0 {
		return clean(uri[i+1:])
	}
	return clean(uri)
}

func shortBinding(b string) string {
	return clean(strings.TrimPrefix(b, "urn:oasis:names:tc:SAML:2.0:bindings:"))
}

// discovery is the part of the OpenID Provider metadata check reports on:
// what the strategy reads, and whether PKCE S256 is advertised (RFC 8414).
type discovery struct {
	providers.OIDCDiscovery
	CodeChallengeMethods []string `json:"code_challenge_methods_supported"`
}

// oidc fetches the discovery document and checks what the OIDC strategy
// will check when it reads it, the client registration c included.
func (pr *prober) oidc(ctx context.Context, c extauth.OIDCConfig) {
	issuer := c.Issuer
	s := pr.r.section("OIDC")
	wellKnown := strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration"
	s.add("discovery", redactURL(wellKnown))
	fail := func(format string, args ...any) {
		pr.r.fail(extauth.OIDC, "discovery: "+fmt.Sprintf(format, args...))
	}
	body, err := pr.fetch(ctx, "OpenID Connect discovery", wellKnown, "application/json")
	if err != nil {
		fail("%v", err)
		return
	}
	var doc discovery
	if err := json.Unmarshal(body, &doc); err != nil {
		fail("the document is not the JSON object discovery defines")
		return
	}
	s.add("issuer", clean(doc.Issuer))
	// A preset's provider may name another issuer than oidc_issuer
	// (Entra ID's tenant issuers, Auth0's trailing slash): CheckIssuer
	// knows which.
	if err := c.CheckIssuer(doc.Issuer); err != nil {
		if c.Additional.Preset == providers.OIDCPresetEntra {
			fail("the document names issuer %s, %s", clean(strconv.Quote(doc.Issuer)), clean(err.Error()))
		} else {
			hint := ""
			if strings.TrimSuffix(doc.Issuer, "/") == strings.TrimSuffix(issuer, "/") {
				hint = " (they differ only by a trailing slash)"
			}
			fail("the document names issuer %s but oidc_issuer is %s; they must match exactly%s", clean(strconv.Quote(doc.Issuer)), strconv.Quote(issuer), hint)
		}
	}
	for _, ep := range []struct {
		name, url string
		required  bool
	}{
		{"authorization_endpoint", doc.AuthorizationEndpoint, true},
		{"token_endpoint", doc.TokenEndpoint, true},
		{"userinfo_endpoint", doc.UserInfoEndpoint, false},
		{"jwks_uri", doc.JWKSURI, true},
	} {
		switch {
		case ep.url == "" && ep.required:
			fail("%s is missing", ep.name)
		case ep.url == "":
			s.add(ep.name, "(none)")
		default:
			s.add(ep.name, clean(ep.url))
			if err := providers.CheckOIDCEndpoint(ep.url, issuer); err != nil {
				fail("%s %v", ep.name, err)
			}
		}
	}

	if len(doc.SigningAlgs) == 0 {
		s.add("id_token_signing_alg_values_supported", "(not advertised; RS256 assumed)")
		pr.r.warn("oidc: the discovery document lacks id_token_signing_alg_values_supported, which it must have; extauth assumes RS256")
	} else {
		s.add("id_token_signing_alg_values_supported", clean(strings.Join(doc.SigningAlgs, ", ")))
	}
	// The host's OIDCOptions.SigningAlgs is not in the configuration
	// file; check applies the default allow-list.
	// authOK: no failure above that CheckDiscovery would say again.
	authOK := true
	if usable := providers.OIDCAcceptedAlgs(doc.SigningAlgs, nil); len(usable) == 0 {
		fail("the provider signs ID tokens with none of the algorithms extauth accepts (%s)", strings.Join(providers.OIDCSigningAlgs(), ", "))
		authOK = false
	} else {
		s.add("accepted by extauth", strings.Join(usable, ", "))
	}

	if len(doc.TokenAuthMethods) > 0 {
		s.add("token_endpoint_auth_methods_supported", clean(strings.Join(doc.TokenAuthMethods, ", ")))
		// A profile implies its own method; CheckDiscovery checks it.
		if _, ok := providers.OIDCAuthMethod(doc.TokenAuthMethods); !ok && c.Additional.ClientAuthMethod == "" && c.Additional.Profile == "" {
			fail("the token endpoint supports neither %s nor %s", providers.AuthMethodBasic, providers.AuthMethodPost)
			authOK = false
		}
	}
	// What oidc_additional_settings asks of the provider: the method, the
	// algorithms, the encryption, pushed and signed requests.
	if c.Additional.ClientAuthMethod != "" {
		s.add("client authentication", clean(c.Additional.ClientAuthMethod))
	}
	if doc.RequirePAR {
		s.add("pushed authorization requests", "required by the provider (sent)")
	}
	if o := c.Applied(); o.DPoP {
		algs := "(not advertised; " + o.DPoPSigningAlg + " is sent)"
		if len(doc.DPoPSigningAlgs) > 0 {
			algs = clean(strings.Join(doc.DPoPSigningAlgs, ", "))
		}
		// CheckDiscovery refuses a dpop_signing_alg the list lacks.
		s.add("dpop_signing_alg_values_supported", algs)
	}
	if err := c.CheckDiscovery(&doc.OIDCDiscovery); err != nil && authOK {
		var e *providers.Error
		if errors.As(err, &e) && e.Err != nil {
			err = e.Err
		}
		fail("%s", clean(strings.TrimPrefix(err.Error(), "discovery: ")))
	}
	if len(doc.CodeChallengeMethods) > 0 {
		s.add("code_challenge_methods_supported", clean(strings.Join(doc.CodeChallengeMethods, ", ")))
		if !slices.Contains(doc.CodeChallengeMethods, "S256") {
			pr.r.warn("oidc: the provider does not advertise PKCE S256 (code_challenge_methods_supported)")
		}
	}
	iss := "no"
	if doc.IssParameterSupported {
		iss = "yes (required on every callback)"
	}
	s.add("iss in authorization responses", iss)
}

// redactURL shows a URL without user information, query or fragment, which
// may carry credentials, and marks what was left out.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(a malformed URL)"
	}
	s := outbound.Redact(u)
	if u.RawQuery != "" || u.ForceQuery {
		s += "?…"
	}
	return clean(s)
}

// clean makes text from a provider or a file safe for a terminal: bounded,
// and quoted when it holds anything but printable characters, so that no
// escape sequence reaches the operator's screen.
func clean(s string) string {
	const max = 200
	if !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
		s = strconv.QuoteToASCII(s)
	}
	if utf8.RuneCountInString(s) > max {
		s = string([]rune(s)[:max]) + "…"
	}
	return s
}

// federation fetches a federation's aggregate, verifies it with the
// pinned certificate and reports what the application would use of it.
func (pr *prober) federation(ctx context.Context, cfg extauth.SAMLConfig) {
	f := cfg.Additional.Federation
	s := pr.r.section("SAML")
	s.add("federation metadata", redactURL(f.MetadataURL))
	// An aggregate is far larger than any other document.
	big := *pr
	big.client = outbound.WithBounds(pr.client, max(pr.timeout, time.Minute), samlsp.DefaultMaxAggregateBytes)
	body, err := big.fetch(ctx, "SAML federation metadata", f.MetadataURL, "application/samlmetadata+xml, application/xml, text/xml")
	if err != nil {
		pr.r.fail(extauth.SAML, "federation metadata: "+err.Error())
		return
	}
	now := pr.r.now
	// Validate has said what is wrong with one that does not parse.
	cert, _ := samlsp.ParseCertificatePEM(f.SigningCertificate)
	if cert == nil {
		return
	}
	pr.federationCertificate(s, cert)
	md, err := samlsp.ParseFederationMetadata(body, samlsp.FederationRules{Certificate: cert, Now: now, MaxValidity: f.MaxValidity,
		AllowSHA1: cfg.Additional.Security.AllowSHA1, EntityIDs: f.EntityIDs, RegistrationAuthorities: f.RegistrationAuthorities,
		EntityCategories: f.EntityCategories})
	if err != nil {
		pr.r.fail(extauth.SAML, "federation metadata: "+clean(err.Error()))
		return
	}
	s.add("signature", shortAlg(md.SignatureMethod)+" ("+shortAlg(md.DigestMethod)+"), verified with federation.signing_certificate")
	s.add("entities", strconv.Itoa(md.Entities))
	idps := strconv.Itoa(md.IdPs)
	if md.ExpiredIdPs > 0 {
		idps += fmt.Sprintf(" (and %d left out: their validUntil has passed)", md.ExpiredIdPs)
	}
	s.add("IdPs", idps)
	if len(f.EntityIDs)+len(f.RegistrationAuthorities)+len(f.EntityCategories) > 0 {
		s.add("IdPs users may choose", strconv.Itoa(md.Allowed)+" (entity_ids, registration_authorities, entity_categories)")
		if md.Allowed == 0 {
			pr.r.fail(extauth.SAML, "federation metadata: no IdP of the aggregate passes entity_ids, registration_authorities and entity_categories")
		}
	}
	for _, id := range md.Missing {
		pr.r.warn("saml: saml_additional_settings.federation.entity_ids names %s, which the aggregate does not list as an IdP", clean(id))
	}
	if md.Unusable > 0 {
		pr.r.warn("saml: %d IdPs of the federation cannot be used for sign-in (no SAML 2.0 single sign-on endpoint with the HTTP-Redirect "+
			"or HTTP-POST binding, or no signing key): the discovery page leaves them out", md.Unusable)
	}
	pr.certificateDates(cfg, md.OutOfDate, "IdPs of the federation sign")
	s.add("valid until", md.ValidUntil.UTC().Format(time.RFC3339))
	if md.CacheDuration > 0 {
		s.add("cache duration", md.CacheDuration.String())
	}
	if f.BackingFile != "" {
		if st, err := os.Stat(filepath.Dir(f.BackingFile)); err != nil || !st.IsDir() {
			pr.r.warn("saml: the directory of saml_additional_settings.federation.backing_file does not exist here; the application cannot keep its copy of the aggregate")
		}
	}
}

// certificateDates says what happens to n IdPs that sign (what says how
// they are named) with no certificate within its validity dates.
func (pr *prober) certificateDates(cfg extauth.SAMLConfig, n int, what string) {
	switch {
	case n == 0:
	case cfg.Additional.Security.EnforceIdPCertificateDates:
		pr.r.warn("saml: %d %s only with certificates outside their validity dates: with "+
			"saml_additional_settings.security.enforce_idp_certificate_dates set, their responses are refused", n, what)
	default:
		pr.r.warn("saml: %d %s only with certificates outside their validity dates; extauth verifies with their keys all the same, "+
			"as the federation's signed metadata vouches for them (SAML V2.0 Metadata Interoperability Profile)", n, what)
	}
}

// federationCertificate reports the federation's pinned signing
// certificate, which verifies the aggregate or the MDQ answers alike, and
// warns when it expires within 30 days: the federation publishes the next
// one ahead of its key rollover, to be pinned before.
func (pr *prober) federationCertificate(s *section, cert *x509.Certificate) {
	s.add("federation signing certificate", describeCert(cert, pr.r.now))
	if msg := expiryProblem(cert, pr.r.now); msg != "" {
		pr.r.warn("saml: the federation's signing certificate %s %s; pin the next one the federation publishes (saml_additional_settings.federation.signing_certificate)",
			clean(cert.Subject.String()), msg)
	}
}

// maxMDQProbes bounds the entity_ids check asks an MDQ server for.
const maxMDQProbes = 20

// mdq asks the federation's MDQ server for the IdPs of entity_ids (the
// first maxMDQProbes) and verifies each answer as the application will.
func (pr *prober) mdq(ctx context.Context, cfg extauth.SAMLConfig) {
	f := cfg.Additional.Federation
	s := pr.r.section("SAML")
	s.add("MDQ server", redactURL(f.MDQURL))
	base, err := url.Parse(f.MDQURL)
	cert, _ := samlsp.ParseCertificatePEM(f.SigningCertificate)
	if err != nil || cert == nil {
		// Validate has said what is wrong.
		return
	}
	now := pr.r.now
	pr.federationCertificate(s, cert)
	answered := 0
	for i, id := range f.EntityIDs {
		if i == maxMDQProbes {
			s.add("not asked", fmt.Sprintf("%d more entity_ids", len(f.EntityIDs)-maxMDQProbes))
			break
		}
		body, err := pr.fetch(ctx, "the MDQ answer for "+clean(id), samlsp.MDQEntityURL(base, id, f.MDQSHA1), "application/samlmetadata+xml")
		if err != nil {
			pr.r.warn("saml: the MDQ server has no usable answer for %s: %s", clean(id), clean(err.Error()))
			continue
		}
		md, err := samlsp.ParseFederationMetadata(body, samlsp.FederationRules{Certificate: cert, Now: now, MaxValidity: f.MaxValidity,
			AllowSHA1: cfg.Additional.Security.AllowSHA1, EntityIDs: []string{id}, RegistrationAuthorities: f.RegistrationAuthorities,
			EntityCategories: f.EntityCategories})
		if err != nil {
			pr.r.warn("saml: the MDQ answer for %s is refused: %s", clean(id), clean(err.Error()))
			continue
		}
		if len(md.Missing) > 0 || md.Allowed == 0 {
			pr.r.warn("saml: the MDQ answer for %s does not describe it as an IdP users may choose", clean(id))
			continue
		}
		answered++
		s.add("IdP", clean(id)+", valid until "+md.ValidUntil.UTC().Format(time.RFC3339))
		pr.certificateDates(cfg, md.OutOfDate, "IdP ("+clean(id)+") signs")
	}
	if answered == 0 {
		pr.r.fail(extauth.SAML, "federation MDQ server: no IdP of entity_ids has a verified answer")
	}
}
