package samlsp

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/beevik/etree"
	"github.com/crewjam/saml"

	"github.com/extauth/extauth/internal/outbound"
	"github.com/extauth/extauth/internal/telemetry"
	"github.com/extauth/extauth/providers"
)

// The HTTP-Artifact binding (SAML Bindings 3.6): the browser carries only
// an artifact, a reference to the IdP's message; the SP resolves it with an
// ArtifactResolve over SOAP, back-channel, and the IdP answers with an
// ArtifactResponse that holds the message. The message then goes through
// exactly the checks of the binding it would otherwise have come by: a
// Response through check, a logout message through the logout checks.

// The values of Config.ResponseBinding
// (saml_additional_settings.response_binding).
const (
	// ResponsePOST asks the IdP to post its Response through the browser
	// (the HTTP-POST binding): the default.
	ResponsePOST = "post"
	// ResponseArtifact asks the IdP to send an artifact instead, which the
	// SP resolves at the IdP's ArtifactResolutionService (the HTTP-Artifact
	// binding), for IdPs that publish one.
	ResponseArtifact = "artifact"
)

// BindingArtifact is the HTTP-Artifact binding's URI, which AuthnRequests
// name as their ProtocolBinding when Config.ResponseBinding is
// ResponseArtifact.
const BindingArtifact = saml.HTTPArtifactBinding

// ArtifactConfig is the back-channel of the HTTP-Artifact binding
// (saml_additional_settings.artifact).
type ArtifactConfig struct {
	// TLSCertificatePEM and TLSPrivateKeyPEM (artifact.tls_certificate,
	// artifact.tls_private_key) are the TLS client certificate presented to
	// the IdP's ArtifactResolutionService, and its key (RSA of 2048 bits or
	// more, or ECDSA), when it is not the SP key pair (certificate,
	// private_key), which is presented otherwise. The SP metadata
	// publishes it as a signing certificate, where IdPs that authenticate
	// the back-channel by the SP's metadata look for it.
	TLSCertificatePEM string
	TLSPrivateKeyPEM  string
	// TLSCertificateNewPEM and TLSPrivateKeyNewPEM (…_new) are the next TLS
	// pair during a rotation: published in the SP metadata, not presented
	// until it becomes TLSCertificatePEM.
	TLSCertificateNewPEM string
	TLSPrivateKeyNewPEM  string
	// IdPTLSCertificatePEM (artifact.idp_tls_certificate) is one or more
	// PEM certificates that the IdP's TLS server certificate must be, or
	// be issued by (its host name then checked), instead of a certificate
	// the system's roots (or Options.HTTPClient's) trust.
	IdPTLSCertificatePEM string
	// WantResponseSigned (artifact.want_response_signed) refuses an
	// ArtifactResponse that the IdP did not sign itself. Without it, the
	// message inside must be signed as it would have to be on the browser
	// binding, or the ArtifactResponse around it.
	WantResponseSigned bool
}

func (c ArtifactConfig) isZero() bool { return c == ArtifactConfig{} }

// Bounds of the artifact binding.
const (
	// maxArtifactChars bounds the SAMLart value before it is decoded: a
	// type 0x0004 artifact is 60 characters of base64.
	maxArtifactChars = 128
	// artifactRemembered is how long a resolved artifact is remembered,
	// to refuse it again: longer than any IdP keeps one (SimpleSAMLphp,
	// 15 minutes; the SAML Bindings advise minutes).
	artifactRemembered = 30 * time.Minute
	// maxSOAPOverhead is what an ArtifactResponse may add to the message
	// it carries (the envelope, the response, its signature).
	maxSOAPOverhead = 32 << 10
	// soapAction is the SOAPAction the SAML SOAP binding names (3.2.2.2).
	soapAction = `"http://www.oasis-open.org/committees/security"`
	nsSOAP11   = "http://schemas.xmlsoap.org/soap/envelope/"
)

// The results of artifact resolutions, as ArtifactStats counts them.
const (
	// ArtifactResolved: the IdP answered with a message that was then
	// handed to the checks of its kind.
	ArtifactResolved = "resolved"
	// ArtifactReplayed: an artifact seen before, never sent to the IdP.
	ArtifactReplayed = "replayed"
	// ArtifactUnknownSource: no IdP of ours has the artifact's source ID,
	// or it is not the IdP the sign-in was started at.
	ArtifactUnknownSource = "unknown_source"
	// ArtifactMalformed: not a type 0x0004 artifact.
	ArtifactMalformed = "malformed"
	// ArtifactEmpty: the IdP answered without a message (it knows no such
	// artifact: expired, or resolved before).
	ArtifactEmpty = "empty"
	// ArtifactFailed: no answer (the connection, its TLS, a time-out, an
	// answer too large, an HTTP or SOAP error).
	ArtifactFailed = "failed"
	// ArtifactInvalid: the ArtifactResponse failed its checks.
	ArtifactInvalid = "invalid"
)

var artifactResults = []string{ArtifactResolved, ArtifactReplayed, ArtifactUnknownSource, ArtifactMalformed, ArtifactEmpty,
	ArtifactFailed, ArtifactInvalid}

// artifactClient resolves artifacts: the back-channel client with its TLS
// settings, and the counts ArtifactStats reports.
type artifactClient struct {
	client *http.Client
	// tls is the pair presented; tlsCert and tlsNext are the separate TLS
	// certificates, published in the SP metadata (nil when the SP key pair
	// is presented).
	tls              *tls.Certificate
	tlsCert, tlsNext *x509.Certificate
	pins             []*x509.Certificate
	counts           [7]atomic.Int64
}

func (c *artifactClient) count(result string) {
	for i, r := range artifactResults {
		if r == result {
			c.counts[i].Add(1)
		}
	}
}

// ArtifactStats counts the artifacts the SP received since it started, by
// result: ArtifactResolved, ArtifactReplayed, ArtifactUnknownSource,
// ArtifactMalformed, ArtifactEmpty, ArtifactFailed, ArtifactInvalid. Nil
// unless Config.ResponseBinding is ResponseArtifact.
func (sp *SP) ArtifactStats() map[string]int64 {
	if sp.art == nil {
		return nil
	}
	out := make(map[string]int64, len(artifactResults))
	for i, r := range artifactResults {
		out[r] = sp.art.counts[i].Load()
	}
	return out
}

// newArtifactClient checks the artifact settings and builds the
// back-channel client: it presents the TLS pair (or the SP key pair), and
// trusts the pinned IdP certificates when there are some.
func (sp *SP) newArtifactClient(problems []error) []error {
	const pre = "saml_additional_settings.artifact."
	cfg := sp.cfg.Artifact
	c := &artifactClient{}
	if cfg.TLSCertificatePEM != "" || cfg.TLSPrivateKeyPEM != "" {
		pair, err := parseTLSClientPair(cfg.TLSCertificatePEM, cfg.TLSPrivateKeyPEM, pre+"tls_certificate", pre+"tls_private_key")
		if err != nil {
			problems = append(problems, err)
		} else {
			c.tls, c.tlsCert = pair, pair.Leaf
		}
	}
	if cfg.TLSCertificateNewPEM != "" || cfg.TLSPrivateKeyNewPEM != "" {
		pair, err := parseTLSClientPair(cfg.TLSCertificateNewPEM, cfg.TLSPrivateKeyNewPEM, pre+"tls_certificate_new", pre+"tls_private_key_new")
		switch {
		case err != nil:
			problems = append(problems, err)
		case cfg.TLSCertificatePEM == "":
			problems = append(problems, errors.New(pre+"tls_certificate_new: the next TLS pair needs a current one (tls_certificate and tls_private_key): "+
				"without one, configure the new pair as tls_certificate and tls_private_key"))
		default:
			c.tlsNext = pair.Leaf
		}
	}
	if c.tls == nil && sp.key != nil {
		c.tls = &tls.Certificate{Certificate: [][]byte{sp.cert.Raw}, PrivateKey: sp.key, Leaf: sp.cert}
	}
	if c.tls == nil && cfg.TLSCertificatePEM == "" {
		problems = append(problems, errors.New("saml_additional_settings.response_binding: artifact needs a key pair to authenticate the ArtifactResolve with: "+
			"the SP key pair (certificate and private_key), which signs it and is the TLS client certificate, or artifact.tls_certificate and artifact.tls_private_key"))
	}
	if cfg.IdPTLSCertificatePEM != "" {
		pins, err := parseCertificates(cfg.IdPTLSCertificatePEM)
		if err != nil {
			problems = append(problems, fmt.Errorf("%sidp_tls_certificate: %w", pre, err))
		}
		c.pins = pins
	}
	if c.tls == nil || sp.env.HTTPClient == nil {
		return problems
	}
	client, err := outbound.WithTLS(sp.env.HTTPClient, func(tc *tls.Config) {
		pair := c.tls
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return pair, nil }
		if len(c.pins) > 0 {
			// The pins replace the roots: VerifyConnection below is the
			// only check of the server's certificate.
			tc.InsecureSkipVerify = true
			tc.VerifyConnection = func(cs tls.ConnectionState) error { return verifyPinned(cs, c.pins, sp.env.Now()) }
		}
	})
	if err != nil {
		return append(problems, fmt.Errorf("saml_additional_settings.response_binding: artifact: %w", err))
	}
	c.client = outbound.WithBounds(client, outbound.Timeout(sp.env.HTTPClient), sp.opts.MaxResponseBytes+maxSOAPOverhead)
	sp.art = c
	return problems
}

// parseTLSClientPair reads a TLS certificate and its key, PEM: RSA of
// 2048 bits or more, or ECDSA. Errors name the settings, never the values.
func parseTLSClientPair(certPEM, keyPEM, certName, keyName string) (*tls.Certificate, error) {
	if certPEM == "" || keyPEM == "" {
		return nil, fmt.Errorf("%s and %s must be set together", certName, keyName)
	}
	if b, _ := pem.Decode([]byte(certPEM)); b == nil || b.Type != "CERTIFICATE" {
		return nil, errors.New(certName + ": not a PEM certificate")
	}
	pair, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM))
	if err != nil {
		if b, _ := pem.Decode([]byte(keyPEM)); b == nil || !strings.HasSuffix(b.Type, "PRIVATE KEY") {
			return nil, errors.New(keyName + ": not a PEM private key")
		}
		return nil, errors.New(keyName + ": does not match " + certName)
	}
	switch k := pair.Leaf.PublicKey.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() < 2048 {
			return nil, errors.New(keyName + ": RSA key must have at least 2048 bits")
		}
	case *ecdsa.PublicKey:
	default:
		return nil, errors.New(keyName + ": must be an RSA or ECDSA key")
	}
	return &pair, nil
}

// parseCertificates reads one or more PEM certificates.
func parseCertificates(s string) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	rest := []byte(s)
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("a PEM block of type %.40q, not CERTIFICATE", b.Type)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, errors.New("a certificate does not parse")
		}
		out = append(out, c)
	}
	if len(out) == 0 || strings.TrimSpace(string(rest)) != "" {
		return nil, errors.New("not PEM certificates")
	}
	return out, nil
}

// errNotPinned is the cause of a back-channel connection whose server
// certificate is none of the pinned ones and not issued by one.
var errNotPinned = errors.New("the IdP's TLS server certificate is not artifact.idp_tls_certificate, nor issued by it")

// verifyPinned checks the server's certificate against the pins: one of
// them exactly, within its dates, or issued by one of them (a CA) for the
// host name dialled.
func verifyPinned(cs tls.ConnectionState, pins []*x509.Certificate, now time.Time) error {
	if len(cs.PeerCertificates) == 0 {
		return errNotPinned
	}
	leaf := cs.PeerCertificates[0]
	for _, p := range pins {
		if bytes.Equal(p.Raw, leaf.Raw) {
			if now.Before(leaf.NotBefore) || now.After(leaf.NotAfter) {
				return fmt.Errorf("the pinned IdP TLS certificate is outside its validity (%s to %s)",
					leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339))
			}
			return nil
		}
	}
	roots := x509.NewCertPool()
	for _, p := range pins {
		roots.AddCert(p)
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: cs.ServerName, CurrentTime: now}); err != nil {
		return fmt.Errorf("%w: %v", errNotPinned, err)
	}
	return nil
}

// samlArtifact is a decoded type 0x0004 artifact (SAML Bindings 3.6.4):
// the index of the IdP's ArtifactResolutionService, its source ID (the
// SHA-1 of its entity ID) and a handle of the IdP's choosing. value is the
// SAMLart as received, which the ArtifactResolve carries.
type samlArtifact struct {
	index  uint16
	source [20]byte
	value  string
}

// parseArtifact decodes a SAMLart value. Errors never quote it: the
// artifact stands for the user's assertion until it is resolved.
func parseArtifact(s string) (*samlArtifact, error) {
	if len(s) > maxArtifactChars {
		return nil, fmt.Errorf("%d characters, longer than a SAML 2.0 artifact", len(s))
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, errors.New("not base64")
	}
	if len(raw) < 2 || binary.BigEndian.Uint16(raw) != 4 {
		return nil, errors.New("not a type 0x0004 artifact")
	}
	if len(raw) != 44 {
		return nil, fmt.Errorf("a type 0x0004 artifact of %d bytes, not 44", len(raw))
	}
	a := &samlArtifact{index: binary.BigEndian.Uint16(raw[2:]), value: s}
	copy(a.source[:], raw[4:24])
	return a, nil
}

// sourceID is the source ID an IdP puts in its artifacts.
func sourceID(entityID string) [20]byte { return sha1.Sum([]byte(entityID)) }

// artifactParam returns the SAMLart of r and whether it has one; r's form
// is parsed. The HTTP-Artifact binding sends it in the query (a redirect)
// or in a form (a POST).
func artifactParam(r *http.Request) (string, bool, error) {
	var vals []string
	if r.Method == http.MethodPost {
		vals = r.PostForm["SAMLart"]
	} else {
		vals = r.Form["SAMLart"]
	}
	switch {
	case len(vals) == 0:
		return "", false, nil
	case len(vals) > 1:
		return "", true, errors.New("SAMLart given twice")
	case vals[0] == "":
		return "", true, errors.New("SAMLart is empty")
	}
	return vals[0], true, nil
}

// artifactIdP finds the IdP that sent a: the IdP the sign-in was started
// at (want; every IdP but that one is refused), else the one IdP, else the
// federation's IdP whose source ID it carries.
func (sp *SP) artifactIdP(ctx context.Context, a *samlArtifact, want string) (*idpMetadata, *providers.Error) {
	unknown := func(err error) *providers.Error {
		sp.art.count(ArtifactUnknownSource)
		return invalid("the SAML artifact does not come from the identity provider of this sign-in", err)
	}
	if sp.fed != nil && want == "" {
		entityID, ok, perr := sp.entityBySourceID(ctx, a.source)
		if perr != nil {
			return nil, perr
		}
		if !ok {
			return nil, unknown(fmt.Errorf("source ID %x is none of the federation's IdPs that this application accepts", a.source))
		}
		want = entityID
	}
	md, perr := sp.idpFor(ctx, want)
	if perr != nil {
		return nil, perr
	}
	if s := sourceID(md.entity.EntityID); subtle.ConstantTimeCompare(s[:], a.source[:]) != 1 {
		return nil, unknown(fmt.Errorf("source ID %x is not the SHA-1 of %.200q", a.source, md.entity.EntityID))
	}
	return md, nil
}

// entityBySourceID finds the IdP of the federation whose entity ID has the
// source ID: among the aggregate's IdPs, or with an MDQ server among
// entity_ids, the IdPs users may choose.
func (sp *SP) entityBySourceID(ctx context.Context, source [20]byte) (string, bool, *providers.Error) {
	if sp.fed.mdq != nil {
		for _, id := range sp.cfg.Federation.EntityIDs {
			if sourceID(id) == source {
				return id, true, nil
			}
		}
		return "", false, nil
	}
	agg, perr := sp.aggregate(ctx)
	if perr != nil {
		return "", false, perr
	}
	e := agg.bySource()[source]
	if e == nil || !sp.fed.allows(e) {
		return "", false, nil
	}
	return e.entityID, true, nil
}

// bySource indexes the aggregate's IdPs by source ID, once.
func (agg *aggregate) bySource() map[[20]byte]*fedIdP {
	agg.sourceOnce.Do(func() {
		agg.sources = make(map[[20]byte]*fedIdP, len(agg.idps))
		for _, e := range agg.idps {
			agg.sources[sourceID(e.entityID)] = e
		}
	})
	return agg.sources
}

// arsLocation is the IdP's SOAP ArtifactResolutionService that a names by
// its index, else the IdP's default one.
func arsLocation(md *idpMetadata, a *samlArtifact) (string, error) {
	if len(md.ars) == 0 {
		return "", errors.New("the IdP metadata lists no ArtifactResolutionService with the SOAP binding")
	}
	for _, e := range md.ars {
		if e.Index == int(a.index) {
			return e.Location, nil
		}
	}
	return defaultARS(md.ars), nil
}

// defaultARS is the default of the endpoints ars, which is not empty
// (SAML Metadata 2.2.3).
func defaultARS(ars []saml.IndexedEndpoint) string {
	for _, e := range ars {
		if e.IsDefault != nil && *e.IsDefault {
			return e.Location
		}
	}
	return ars[0].Location
}

// soapARS are the ArtifactResolutionServices of an IdP's metadata with the
// SOAP binding, the only one extauth resolves artifacts with.
func soapARS(ed *saml.EntityDescriptor) []saml.IndexedEndpoint {
	var out []saml.IndexedEndpoint
	for _, d := range ed.IDPSSODescriptors {
		for _, s := range d.SSODescriptor.ArtifactResolutionServices {
			if s.Binding == saml.SOAPBinding {
				out = append(out, s)
			}
		}
	}
	return out
}

// checkARSLocation requires https for an ArtifactResolutionService, or
// plain http on a loopback host: the answer carries the assertion.
func checkARSLocation(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil || !u.IsAbs() || u.Host == "":
		return errors.New("the ArtifactResolutionService location is not an absolute URL")
	case u.Scheme == "https", u.Scheme == "http" && outbound.IsLoopback(u.Hostname()):
		return nil
	}
	return fmt.Errorf("the ArtifactResolutionService %s does not use https", outbound.Redact(u))
}

// resolveArtifact makes a single-use, sends the ArtifactResolve and checks
// the ArtifactResponse, returning the message it carries, detached from
// it, and whether the IdP signed the ArtifactResponse. at is the URL the
// artifact arrived at (our ACS or SLO URL).
func (sp *SP) resolveArtifact(ctx context.Context, a *samlArtifact, md *idpMetadata, at string) (*etree.Element, bool, *providers.Error) {
	dest, err := arsLocation(md, a)
	if err == nil {
		err = checkARSLocation(dest)
	}
	if err != nil {
		sp.art.count(ArtifactFailed)
		return nil, false, &providers.Error{Code: providers.CodeMisconfigured, Provider: Name,
			Message: "the SAML artifact cannot be resolved", Err: fmt.Errorf("%.200q: %w", md.entity.EntityID, err)}
	}
	// Resolved once, whatever the IdP does: a second use is refused here,
	// before anything goes to the IdP.
	fresh, err := sp.env.Store.Consume(ctx, storeKey("saml:artifact:", md.entity.EntityID, a.value), sp.env.Now().Add(artifactRemembered))
	if err != nil {
		return nil, false, &providers.Error{Code: providers.CodeProviderUnavailable, Provider: Name, Message: "the replay store is unavailable", Err: err}
	}
	if !fresh {
		sp.art.count(ArtifactReplayed)
		return nil, false, &providers.Error{Code: providers.CodeReplayed, Provider: Name, Message: "this SAML artifact was already used"}
	}
	id, _, err := newIDs()
	if err != nil {
		return nil, false, &providers.Error{Code: providers.CodeProviderUnavailable, Provider: Name, Message: "cannot make a request ID", Err: err}
	}
	body, err := sp.artifactResolve(id, dest, a.value, sp.env.Now())
	if err != nil {
		sp.art.count(ArtifactFailed)
		return nil, false, &providers.Error{Code: providers.CodeMisconfigured, Provider: Name, Message: "cannot sign the ArtifactResolve", Err: err}
	}
	raw, perr := sp.postSOAP(ctx, dest, body)
	if perr != nil {
		sp.art.count(ArtifactFailed)
		return nil, false, perr
	}
	msg, signed, perr := sp.checkArtifactResponse(raw, id, md, at)
	if perr != nil {
		return nil, false, perr
	}
	sp.art.count(ArtifactResolved)
	return msg, signed, nil
}

// artifactResolve writes the ArtifactResolve for artifact, signed with
// the SP key when there is one (enveloped, RSA-SHA256, after the Issuer),
// in a SOAP 1.1 envelope.
func (sp *SP) artifactResolve(id, dest, artifact string, now time.Time) ([]byte, error) {
	var b strings.Builder
	b.WriteString(`<samlp:ArtifactResolve xmlns:samlp="` + nsProtocol + `" xmlns:saml="` + nsAssertion + `" ID="` + id +
		`" Version="2.0" IssueInstant="` + now.UTC().Format("2006-01-02T15:04:05.000Z") + `" Destination="`)
	escapeXML(&b, dest)
	b.WriteString(`"><saml:Issuer>`)
	escapeXML(&b, sp.cfg.SPEntityID)
	b.WriteString(`</saml:Issuer><samlp:Artifact>`)
	escapeXML(&b, artifact)
	b.WriteString(`</samlp:Artifact></samlp:ArtifactResolve>`)
	x := []byte(b.String())
	if sp.key != nil {
		var err error
		if x, err = sp.signEnveloped(x); err != nil {
			return nil, err
		}
	}
	out := make([]byte, 0, len(x)+160)
	out = append(out, `<soap11:Envelope xmlns:soap11="`+nsSOAP11+`"><soap11:Body>`...)
	out = append(out, x...)
	return append(out, `</soap11:Body></soap11:Envelope>`...), nil
}

// postSOAP sends the envelope to the IdP and reads the answer, under the
// client's time-out and size bound.
func (sp *SP) postSOAP(ctx context.Context, dest string, body []byte) ([]byte, *providers.Error) {
	const what = "saml artifact resolution"
	req, err := http.NewRequestWithContext(telemetry.WithEndpoint(ctx, telemetry.EndpointArtifact), http.MethodPost, dest, bytes.NewReader(body))
	if err != nil {
		return nil, &providers.Error{Code: providers.CodeMisconfigured, Provider: Name, Message: what + ": bad endpoint", Err: outbound.Scrub(err)}
	}
	req.Header.Set("Content-Type", "text/xml; charset=utf-8")
	req.Header.Set("Accept", "text/xml")
	req.Header.Set("SOAPAction", soapAction)
	resp, err := sp.art.client.Do(req)
	if err != nil {
		return nil, sp.transportError(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, sp.transportError(err)
	}
	if resp.StatusCode != http.StatusOK {
		// SOAP 1.1 answers a fault with status 500.
		if f := soapFault(raw); f != "" {
			return nil, &providers.Error{Code: providers.CodeProviderUnavailable, Provider: Name,
				Message: what + ": the identity provider answered with a SOAP fault", Err: fmt.Errorf("HTTP status %d, fault %.200q", resp.StatusCode, f)}
		}
		return nil, &providers.Error{Code: providers.CodeProviderUnavailable, Provider: Name,
			Message: what + ": the identity provider answered with an error", Err: fmt.Errorf("HTTP status %d", resp.StatusCode)}
	}
	return raw, nil
}

// transportError classifies a failed back-channel call; a TLS failure
// names the settings that decide it.
func (sp *SP) transportError(err error) *providers.Error {
	pe := providers.TransportError(err, "saml artifact resolution")
	var cv *tls.CertificateVerificationError
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	if errors.Is(err, errNotPinned) || errors.As(err, &cv) || errors.As(err, &unknown) || errors.As(err, &host) {
		pe.Message = "saml artifact resolution: the identity provider's TLS certificate is not trusted " +
			"(the system's roots, or saml_additional_settings.artifact.idp_tls_certificate)"
	}
	return pe
}

// soapFault returns the faultstring of a SOAP 1.1 fault, "" when raw is
// not one.
func soapFault(raw []byte) string {
	root, err := parseXML(raw)
	if err != nil || !is(root, nsSOAP11, "Envelope") {
		return ""
	}
	body, _ := onlyChild(root, nsSOAP11, "Body")
	if body == nil {
		return ""
	}
	f, _ := onlyChild(body, nsSOAP11, "Fault")
	if f == nil {
		return ""
	}
	if s := f.SelectElement("faultstring"); s != nil {
		return strings.TrimSpace(s.Text())
	}
	return "(no faultstring)"
}

// checkArtifactResponse reads the SOAP answer: one ArtifactResponse in the
// Body, signed by the IdP when it is (and always with
// artifact.want_response_signed), answering our ArtifactResolve, from the
// IdP, successful and fresh; and returns the one message it carries,
// detached, with whether the ArtifactResponse was signed. What it holds is
// read from the verified tree only.
func (sp *SP) checkArtifactResponse(raw []byte, resolveID string, md *idpMetadata, at string) (*etree.Element, bool, *providers.Error) {
	bad := func(msg string, err error) *providers.Error {
		sp.art.count(ArtifactInvalid)
		return invalid(msg, err)
	}
	env, err := parseXML(raw)
	if err != nil {
		return nil, false, bad("the ArtifactResponse is not acceptable XML", err)
	}
	ar, err := soapBody(env)
	if err != nil {
		return nil, false, bad("the ArtifactResponse has an unexpected structure", err)
	}
	if err := checkArtifactResponseShape(ar); err != nil {
		return nil, false, bad("the ArtifactResponse has an unexpected structure", err)
	}
	// Alone, with the namespaces it inherits from the envelope.
	declareInScope(ar)
	ar.Parent().RemoveChild(ar)
	signed := false
	switch v, err := sp.verifier(md).verify(ar); {
	case err == nil:
		ar, signed = v, true
	case !errors.Is(err, errNotSigned):
		return nil, false, bad("the ArtifactResponse signature is invalid", err)
	case sp.cfg.Artifact.WantResponseSigned:
		return nil, false, bad("the ArtifactResponse is not signed", errors.New("saml_additional_settings.artifact.want_response_signed requires the IdP's signature on it"))
	}
	if err := sp.checkArtifactFields(ar, resolveID, md, at); err != nil {
		return nil, false, bad("the ArtifactResponse was rejected", err)
	}
	var msg *etree.Element
	for _, c := range ar.ChildElements() {
		switch {
		case is(c, nsAssertion, "Issuer"), is(c, nsDSig, "Signature"), is(c, nsProtocol, "Extensions"), is(c, nsProtocol, "Status"):
		case msg != nil:
			return nil, false, bad("the ArtifactResponse has an unexpected structure", errors.New("more than one message"))
		default:
			msg = c
		}
	}
	if msg == nil {
		sp.art.count(ArtifactEmpty)
		return nil, false, invalid("the identity provider does not know the SAML artifact (expired, or already used)", nil)
	}
	declareInScope(msg)
	ar.RemoveChild(msg)
	return msg, signed, nil
}

// soapBody returns the one element of a SOAP 1.1 envelope's Body, which
// must be an ArtifactResponse; a fault is reported as such.
func soapBody(env *etree.Element) (*etree.Element, error) {
	if !is(env, nsSOAP11, "Envelope") {
		return nil, errors.New("not a SOAP 1.1 envelope")
	}
	var body *etree.Element
	for _, c := range env.ChildElements() {
		switch {
		case is(c, nsSOAP11, "Header"):
			for _, h := range c.ChildElements() {
				if v := attr(h, "mustUnderstand"); v == "1" || v == "true" {
					return nil, fmt.Errorf("a SOAP header %.100q that must be understood", h.Tag)
				}
			}
		case is(c, nsSOAP11, "Body") && body == nil:
			body = c
		default:
			return nil, fmt.Errorf("unexpected %.100q in the envelope", c.Tag)
		}
	}
	if body == nil {
		return nil, errors.New("no SOAP Body")
	}
	kids := body.ChildElements()
	if len(kids) != 1 {
		return nil, fmt.Errorf("%d elements in the SOAP Body", len(kids))
	}
	if is(kids[0], nsSOAP11, "Fault") {
		f := ""
		if s := kids[0].SelectElement("faultstring"); s != nil {
			f = strings.TrimSpace(s.Text())
		}
		return nil, fmt.Errorf("a SOAP fault: %.200q", f)
	}
	if !is(kids[0], nsProtocol, "ArtifactResponse") {
		return nil, fmt.Errorf("%.100q is not an ArtifactResponse", kids[0].Tag)
	}
	return kids[0], nil
}

// checkArtifactResponseShape allows a signature directly under the
// ArtifactResponse only (those of the message it carries are checked with
// it, by the rules of its kind) and no ID given to two elements in the
// whole answer.
func checkArtifactResponseShape(ar *etree.Element) error {
	ids := map[string]bool{}
	var err error
	walk(ar, func(el *etree.Element) bool {
		if reusedID(ids, el) {
			err = errors.New("two elements with one ID")
		}
		return err == nil
	})
	return err
}

// checkArtifactFields checks the ArtifactResponse's own fields: version,
// the request it answers, its issuer, status, destination and age.
func (sp *SP) checkArtifactFields(ar *etree.Element, resolveID string, md *idpMetadata, at string) error {
	if attr(ar, "Version") != "2.0" || attr(ar, "ID") == "" {
		return errors.New("ArtifactResponse Version or ID missing")
	}
	if attr(ar, "InResponseTo") != resolveID {
		return errors.New("ArtifactResponse InResponseTo does not match our ArtifactResolve")
	}
	iss, err := onlyChild(ar, nsAssertion, "Issuer")
	if err != nil {
		return err
	}
	if iss != nil && text(iss) != md.entity.EntityID {
		return errors.New("ArtifactResponse Issuer is not the IdP")
	}
	if d := attr(ar, "Destination"); d != "" && d != at {
		return fmt.Errorf("ArtifactResponse Destination %.200q is not where the artifact arrived", d)
	}
	status, err := oneChild(ar, nsProtocol, "Status")
	if err != nil {
		return err
	}
	code, err := oneChild(status, nsProtocol, "StatusCode")
	if err != nil {
		return err
	}
	if v := attr(code, "Value"); v != statusSuccess {
		return fmt.Errorf("ArtifactResponse status %.200q", v)
	}
	return sp.checkIssued(ar, sp.env.Now())
}

// completeArtifact is Complete for a response sent by artifact: the
// artifact resolved at its IdP, then the Response it carries through
// every check of the HTTP-POST binding.
func (sp *SP) completeArtifact(ctx context.Context, value, requestID, idp string) (*Assertion, *providers.Error) {
	if sp.art == nil {
		return nil, invalid("the SAML artifact binding is not configured here",
			errors.New("the IdP sent an artifact; set saml_additional_settings.response_binding: artifact to resolve them"))
	}
	a, err := parseArtifact(value)
	if err != nil {
		sp.art.count(ArtifactMalformed)
		return nil, invalid("the SAML artifact is malformed", err)
	}
	md, perr := sp.artifactIdP(ctx, a, idp)
	if perr != nil {
		return nil, perr
	}
	msg, envelopeSigned, perr := sp.resolveArtifact(ctx, a, md, sp.acs.String())
	if perr != nil {
		return nil, perr
	}
	return sp.checkTree(msg, requestID, md, sp.env.Now(), envelopeSigned)
}

// readLogoutArtifact resolves a logout message the IdP sent by artifact
// to the single logout URL; ok is false when r carries no artifact. The
// message is a LogoutRequest or a LogoutResponse, signed itself or by the
// ArtifactResponse around it, and then goes through the checks of one that
// came by the other bindings.
func (sp *SP) readLogoutArtifact(r *http.Request) (msg *logoutMessage, ok bool, perr *providers.Error) {
	if err := r.ParseForm(); err != nil {
		return nil, true, invalid("the logout message is too large or malformed", err)
	}
	value, ok, err := artifactParam(r)
	switch {
	case !ok:
		return nil, false, nil
	case err != nil:
		return nil, true, invalid("the SAML artifact is malformed", err)
	case sp.art == nil:
		return nil, true, invalid("the SAML artifact binding is not configured here",
			errors.New("the IdP sent a logout message by artifact; set saml_additional_settings.response_binding: artifact to resolve them"))
	case len(r.Form["SAMLRequest"])+len(r.Form["SAMLResponse"]) > 0 || len(r.Form["RelayState"]) > 1:
		return nil, true, invalid("the logout message is malformed", errors.New("an artifact beside a message, or RelayState given twice"))
	}
	a, err := parseArtifact(value)
	if err != nil {
		sp.art.count(ArtifactMalformed)
		return nil, true, invalid("the SAML artifact is malformed", err)
	}
	md, perr := sp.artifactIdP(r.Context(), a, "")
	if perr != nil {
		return nil, true, perr
	}
	root, envelopeSigned, perr := sp.resolveArtifact(r.Context(), a, md, sp.slo.String())
	if perr != nil {
		return nil, true, perr
	}
	isRequest := is(root, nsProtocol, "LogoutRequest")
	if !isRequest && !is(root, nsProtocol, "LogoutResponse") {
		return nil, true, invalid("unexpected logout message", fmt.Errorf("%.100q is not a LogoutRequest or LogoutResponse", root.Tag))
	}
	if err := checkLogoutShape(root); err != nil {
		return nil, true, invalid("the logout message has an unexpected structure", err)
	}
	switch v, err := sp.verifier(md).verify(root); {
	case err == nil:
		root = v
	case !errors.Is(err, errNotSigned):
		return nil, true, invalid("the logout message signature is invalid", err)
	case !envelopeSigned:
		return nil, true, invalid("the logout message is not signed", errors.New("neither the message nor the ArtifactResponse around it is signed"))
	}
	return &logoutMessage{isRequest: isRequest, root: root, relayState: r.Form.Get("RelayState"), md: md}, true, nil
}

// ArtifactTLS is what CheckArtifactTLS found of an IdP's
// ArtifactResolutionService.
type ArtifactTLS struct {
	// Server is the IdP's TLS server certificate.
	Server *x509.Certificate
	// Pinned is true when it was checked against the pins of
	// artifact.idp_tls_certificate rather than the roots.
	Pinned bool
	// Client is the client certificate extauth presents.
	Client *x509.Certificate
	// Version is the TLS version agreed (tls.VersionTLS13).
	Version uint16
	// Status is the HTTP status of the GET CheckArtifactTLS sent: any
	// status shows that the IdP accepted the connection, client
	// certificate included.
	Status int
}

// CheckArtifactTLS connects to an IdP's ArtifactResolutionService at
// location as the SP of cfg resolves artifacts there: over client (a
// client extauth's outbound package made, as extauth.New makes one from
// Options.HTTPClient), presenting the TLS client certificate of cfg and
// checking the IdP's server certificate against the roots or the pins. It
// sends a GET, which resolves nothing, so that an IdP that refuses the
// client certificate after the handshake (TLS 1.3) is seen to. Errors
// name the settings that decide.
func CheckArtifactTLS(ctx context.Context, client *http.Client, cfg Config, location string) (*ArtifactTLS, error) {
	if err := checkARSLocation(location); err != nil {
		return nil, err
	}
	u, _ := url.Parse(location)
	if u.Scheme != "https" {
		return nil, errors.New("plain http (loopback only): no TLS to check")
	}
	sp := &SP{cfg: cfg, env: providers.Env{HTTPClient: client, Now: time.Now}, opts: Options{MaxResponseBytes: DefaultMaxResponseBytes}}
	var problems []error
	if cfg.CertificatePEM != "" || cfg.PrivateKeyPEM != "" {
		key, cert, err := ParseKeyPair(cfg.CertificatePEM, cfg.PrivateKeyPEM)
		if err != nil {
			problems = append(problems, err)
		}
		sp.key, sp.cert = key, cert
	}
	if problems = sp.newArtifactClient(problems); len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	req, err := http.NewRequestWithContext(telemetry.WithEndpoint(ctx, telemetry.EndpointArtifact), http.MethodGet, location, nil)
	if err != nil {
		return nil, errors.New("not a URL that can be fetched")
	}
	resp, err := sp.art.client.Do(req)
	if err != nil {
		return nil, errors.New(sp.transportError(err).Message + ": " + outbound.Scrub(err).Error())
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	out := &ArtifactTLS{Pinned: len(sp.art.pins) > 0, Client: sp.art.tls.Leaf, Status: resp.StatusCode}
	if resp.TLS != nil {
		out.Version = resp.TLS.Version
		if len(resp.TLS.PeerCertificates) > 0 {
			out.Server = resp.TLS.PeerCertificates[0]
		}
	}
	return out, nil
}

// ArtifactResolutionServices returns the SOAP ArtifactResolutionServices
// of an IdP's metadata, the default first: where CheckArtifactTLS is
// pointed.
func (m *IdPMetadata) ArtifactResolutionServices() []string {
	ars := soapARS(m.Entity)
	if len(ars) == 0 {
		return nil
	}
	def := defaultARS(ars)
	out := []string{def}
	for _, e := range ars {
		if e.Location != def {
			out = append(out, e.Location)
		}
	}
	return out
}
