package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/crewjam/saml"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/internal/outbound"
)

// prober fetches what the SAML and OIDC providers publish and reports on it,
// applying the rules the strategies apply when the application starts.
type prober struct {
	client  *http.Client
	timeout time.Duration
	r       *checkReport
}

// fetch GETs a provider document. It follows no redirect, as the
// application does not, and bounds the time and the size.
func (pr *prober) fetch(ctx context.Context, rawURL, accept string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, errors.New("not a URL that can be fetched")
	}
	req.Header.Set("Accept", accept)
	resp, err := pr.client.Do(req)
	if err != nil {
		return nil, pr.transportError(err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return nil, fmt.Errorf("answers HTTP %d, a redirect to %s; configure the final URL (extauth follows no redirects)",
			resp.StatusCode, redactURL(resp.Header.Get("Location")))
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("answers HTTP %d", resp.StatusCode)
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
	body, err := pr.fetch(ctx, cfg.IdPMetadataURL, "application/samlmetadata+xml, application/xml, text/xml")
	if err != nil {
		pr.r.fail(extauth.SAML, "IdP metadata: "+err.Error())
		return
	}
	idp, validUntil, err := parseIdPMetadata(body)
	if err != nil {
		pr.r.fail(extauth.SAML, "IdP metadata: "+err.Error())
		return
	}
	now := pr.r.now
	s.add("IdP entity ID", clean(idp.EntityID))
	if !validUntil.IsZero() {
		if !validUntil.After(now) {
			pr.r.fail(extauth.SAML, "IdP metadata: expired on "+validUntil.UTC().Format(time.RFC3339)+" (validUntil)")
		} else {
			s.add("metadata valid until", validUntil.UTC().Format(time.RFC3339))
		}
	}

	redirect := ""
	var wantSigned bool
	var certs []*x509.Certificate
	for _, d := range idp.IDPSSODescriptors {
		for _, sso := range d.SingleSignOnServices {
			s.add("SSO ("+shortBinding(sso.Binding)+")", clean(sso.Location))
			if sso.Binding == saml.HTTPRedirectBinding && redirect == "" {
				redirect = sso.Location
			}
		}
		if d.WantAuthnRequestsSigned != nil && *d.WantAuthnRequestsSigned {
			wantSigned = true
		}
		for _, kd := range d.KeyDescriptors {
			if kd.Use != "" && kd.Use != "signing" {
				continue
			}
			for _, xc := range kd.KeyInfo.X509Data.X509Certificates {
				cert, err := parseBase64Cert(xc.Data)
				if err != nil {
					pr.r.fail(extauth.SAML, "IdP metadata: a signing certificate does not parse")
					continue
				}
				certs = append(certs, cert)
			}
		}
	}
	switch {
	case cfg.IdPSSOServiceURL != "":
		s.add("SSO used", redactURL(cfg.IdPSSOServiceURL)+" (saml_idp_sso_service_url)")
	case redirect != "":
		s.add("SSO used", clean(redirect))
	default:
		pr.r.fail(extauth.SAML, "IdP metadata: no HTTP-Redirect single sign-on endpoint; set saml_idp_sso_service_url")
	}

	valid := 0
	for _, cert := range certs {
		s.add("IdP signing certificate", describeCert(cert, now))
		if msg := expiryProblem(cert, now); msg != "" {
			pr.r.warn("saml: the IdP signing certificate %s %s", clean(cert.Subject.String()), msg)
		}
		if !now.Before(cert.NotBefore) && !now.After(cert.NotAfter) {
			valid++
		}
	}
	switch {
	case len(certs) == 0:
		pr.r.fail(extauth.SAML, "IdP metadata: no signing certificate, so no response could be verified")
	case valid == 0:
		pr.r.fail(extauth.SAML, "IdP metadata: no signing certificate is valid now, so every response would be refused")
	}
	if wantSigned && !cfg.Additional.HasKeyPair() {
		pr.r.warn("saml: the IdP wants signed authentication requests (WantAuthnRequestsSigned), but saml_additional_settings has no certificate and private_key; make them with extauth keygen")
	}
}

// parseIdPMetadata reads an EntityDescriptor, or an EntitiesDescriptor
// holding exactly one IdP, and returns it with the earliest validUntil that
// applies to it. Like the application, it refuses a DOCTYPE: the metadata
// comes from the network, and entity declarations are an attack surface,
// never a need.
func parseIdPMetadata(body []byte) (*saml.EntityDescriptor, time.Time, error) {
	var none time.Time
	root, err := rootElement(body)
	if err != nil {
		return nil, none, err
	}
	var validUntil time.Time
	note := func(t time.Time) {
		if !t.IsZero() && (validUntil.IsZero() || t.Before(validUntil)) {
			validUntil = t
		}
	}
	const nsMD = "urn:oasis:names:tc:SAML:2.0:metadata"
	var candidates []saml.EntityDescriptor
	switch {
	case root.Space == nsMD && root.Local == "EntityDescriptor":
		var ed saml.EntityDescriptor
		if err := xml.Unmarshal(body, &ed); err != nil {
			return nil, none, errors.New("the EntityDescriptor does not parse")
		}
		candidates = append(candidates, ed)
	case root.Space == nsMD && root.Local == "EntitiesDescriptor":
		var eds saml.EntitiesDescriptor
		if err := xml.Unmarshal(body, &eds); err != nil {
			return nil, none, errors.New("the EntitiesDescriptor does not parse")
		}
		// An enclosing EntitiesDescriptor's validUntil bounds everything
		// inside it.
		var walk func(e *saml.EntitiesDescriptor, depth int, bound time.Time)
		walk = func(e *saml.EntitiesDescriptor, depth int, bound time.Time) {
			if depth > 8 {
				return
			}
			if e.ValidUntil != nil && (bound.IsZero() || e.ValidUntil.Before(bound)) {
				bound = *e.ValidUntil
			}
			for _, ed := range e.EntityDescriptors {
				if len(ed.IDPSSODescriptors) > 0 {
					note(bound)
				}
				candidates = append(candidates, ed)
			}
			for i := range e.EntitiesDescriptors {
				walk(&e.EntitiesDescriptors[i], depth+1, bound)
			}
		}
		walk(&eds, 0, time.Time{})
	default:
		return nil, none, errors.New("the root element is neither md:EntityDescriptor nor md:EntitiesDescriptor")
	}
	var idps []saml.EntityDescriptor
	for _, ed := range candidates {
		if len(ed.IDPSSODescriptors) > 0 {
			idps = append(idps, ed)
		}
	}
	switch {
	case len(idps) == 0:
		return nil, none, errors.New("describes no IdP (no IDPSSODescriptor)")
	case len(idps) > 1:
		return nil, none, fmt.Errorf("describes %d IdPs; extauth needs the URL of one IdP's metadata", len(idps))
	case idps[0].EntityID == "":
		return nil, none, errors.New("the IdP has no entityID")
	}
	note(idps[0].ValidUntil)
	return &idps[0], validUntil, nil
}

// rootElement returns the name of the document's root element, refusing
// anything that is not well-formed XML and any directive (DOCTYPE).
func rootElement(body []byte) (xml.Name, error) {
	d := xml.NewDecoder(bytes.NewReader(body))
	var root xml.Name
	found := false
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return root, errors.New("not well-formed XML")
		}
		switch t := tok.(type) {
		case xml.Directive:
			return root, errors.New("has a DOCTYPE, which extauth refuses")
		case xml.StartElement:
			if !found {
				root, found = t.Name, true
			}
		}
	}
	if !found {
		return root, errors.New("not XML")
	}
	return root, nil
}

func parseBase64Cert(s string) (*x509.Certificate, error) {
	s = strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
	der, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

func shortBinding(b string) string {
	return clean(strings.TrimPrefix(b, "urn:oasis:names:tc:SAML:2.0:bindings:"))
}

// discovery is the part of the OpenID Provider metadata check reports on
// (OpenID Connect Discovery 1.0 section 3, RFC 9207, RFC 8414).
type discovery struct {
	Issuer                string   `json:"issuer"`
	AuthorizationEndpoint string   `json:"authorization_endpoint"`
	TokenEndpoint         string   `json:"token_endpoint"`
	UserInfoEndpoint      string   `json:"userinfo_endpoint"`
	JWKSURI               string   `json:"jwks_uri"`
	SigningAlgs           []string `json:"id_token_signing_alg_values_supported"`
	TokenAuthMethods      []string `json:"token_endpoint_auth_methods_supported"`
	CodeChallengeMethods  []string `json:"code_challenge_methods_supported"`
	IssParameterSupported bool     `json:"authorization_response_iss_parameter_supported"`
}

// acceptedAlgs are the ID token algorithms the OIDC strategy accepts: the
// asymmetric ones. "none" and HMAC never are, since an HS256 token keyed
// with the provider's public key would otherwise verify.
var acceptedAlgs = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// oidc fetches the discovery document and checks what the OIDC strategy
// will check when it reads it.
func (pr *prober) oidc(ctx context.Context, issuer string) {
	s := pr.r.section("OIDC")
	wellKnown := strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration"
	s.add("discovery", redactURL(wellKnown))
	fail := func(format string, args ...any) {
		pr.r.fail(extauth.OIDC, "discovery: "+fmt.Sprintf(format, args...))
	}
	body, err := pr.fetch(ctx, wellKnown, "application/json")
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
	if doc.Issuer != issuer {
		hint := ""
		if strings.TrimSuffix(doc.Issuer, "/") == strings.TrimSuffix(issuer, "/") {
			hint = " (they differ only by a trailing slash)"
		}
		fail("the document names issuer %s but oidc_issuer is %s; they must match exactly%s", clean(strconv.Quote(doc.Issuer)), strconv.Quote(issuer), hint)
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
			if reason := checkEndpoint(ep.url, issuer); reason != "" {
				fail("%s %s", ep.name, reason)
			}
		}
	}

	algs := doc.SigningAlgs
	if len(algs) == 0 {
		s.add("id_token_signing_alg_values_supported", "(not advertised; RS256 assumed)")
		pr.r.warn("oidc: the discovery document lacks id_token_signing_alg_values_supported, which it must have; extauth assumes RS256")
		algs = []string{"RS256"}
	} else {
		s.add("id_token_signing_alg_values_supported", clean(strings.Join(doc.SigningAlgs, ", ")))
	}
	var usable []string
	for _, a := range acceptedAlgs {
		if slices.Contains(algs, a) {
			usable = append(usable, a)
		}
	}
	if len(usable) == 0 {
		fail("the provider signs ID tokens with none of the algorithms extauth accepts (%s)", strings.Join(acceptedAlgs, ", "))
	} else {
		s.add("accepted by extauth", strings.Join(usable, ", "))
	}

	if len(doc.TokenAuthMethods) > 0 {
		s.add("token_endpoint_auth_methods_supported", clean(strings.Join(doc.TokenAuthMethods, ", ")))
		if !slices.Contains(doc.TokenAuthMethods, "client_secret_basic") && !slices.Contains(doc.TokenAuthMethods, "client_secret_post") {
			fail("the token endpoint supports neither client_secret_basic nor client_secret_post")
		}
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

// checkEndpoint applies the strategy's rule: an absolute URL, https unless
// the issuer itself is plain http on a loopback address (development).
func checkEndpoint(raw, issuer string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Fragment != "" || u.User != nil {
		return "is not an absolute URL"
	}
	if u.Scheme == "https" || (u.Scheme == "http" && strings.HasPrefix(issuer, "http:") && isLoopback(u.Hostname())) {
		return ""
	}
	return "must be https"
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
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
