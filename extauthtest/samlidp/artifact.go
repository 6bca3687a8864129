package samlidp

import (
	"bytes"
	"crypto/sha1"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/beevik/etree"
	"github.com/crewjam/saml"

	"github.com/extauth/extauth/extauthtest/internal/endpoint"
)

// The HTTP-Artifact binding (SAML Bindings 3.6), as an IdP plays it: the
// browser gets a type 0x0004 artifact instead of the message, and the SP
// fetches the message from the ArtifactResolutionService with an
// ArtifactResolve over SOAP 1.1. The IdP answers by artifact when the
// AuthnRequest's ProtocolBinding asks for it, or always with
// Knobs.ArtifactResponses; its metadata lists the service at
// Options.ArtifactResolutionURL.

// ArtifactKnobs make the IdP's artifact binding misbehave (Knobs.Artifact).
type ArtifactKnobs struct {
	// Always answers every sign-in by artifact, whatever the AuthnRequest
	// asked, and sends LogoutResponses by artifact too.
	Always bool
	// Reusable answers an artifact as often as it is resolved, as an IdP
	// that never forgets one: the SP alone keeps it single-use.
	Reusable bool
	// Unsigned leaves the ArtifactResponse unsigned.
	Unsigned bool
	// Hang makes the ArtifactResolutionService answer nothing until the
	// client gives up.
	Hang bool
	// Huge pads the answer with this many bytes of SOAP header.
	Huge int
	// Mutate edits each ArtifactResponse before it is signed.
	Mutate func(ar *etree.Element)
	// RequireClientCertificate refuses an ArtifactResolve whose TLS
	// connection presented no client certificate the SP's metadata lists.
	RequireClientCertificate bool
	// RequireSigned refuses an ArtifactResolve without a valid signature
	// from the SP's signing certificate.
	RequireSigned bool
}

// ArtifactRecord is an ArtifactResolve the IdP answered.
type ArtifactRecord struct {
	// Issuer is the SP that asked.
	Issuer string
	// Signed is true when the request carried an XML signature, which
	// the IdP verified with the SP's signing certificate.
	Signed bool
	// ClientCertificate is the TLS client certificate the SP presented,
	// nil without one (or over plain http).
	ClientCertificate *x509.Certificate
	// Found is false when the IdP knew no such artifact.
	Found bool
}

// artifactLifetime is how long an issued artifact can be resolved.
const artifactLifetime = 5 * time.Minute

type storedArtifact struct {
	message []byte
	expires time.Time
}

// ArtifactResolutionURL is where the IdP's ArtifactResolutionService is.
func (p *IdP) ArtifactResolutionURL() string { return p.arsURL }

// ArtifactResolves returns the ArtifactResolves the IdP answered, in
// order.
func (p *IdP) ArtifactResolves() []ArtifactRecord {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]ArtifactRecord(nil), p.arsLog...)
}

// IssueArtifact keeps message for the ArtifactResolutionService and
// returns the artifact that names it (SAMLart): a type 0x0004 artifact
// with endpoint index 0 and the IdP's source ID, the SHA-1 of its entity
// ID. A test delivers it to an SP's callback as the IdP would, in the
// query of a redirect or a form.
func (p *IdP) IssueArtifact(message []byte) string {
	var raw [44]byte
	binary.BigEndian.PutUint16(raw[0:], 4)
	src := sha1.Sum([]byte(p.EntityID()))
	copy(raw[4:], src[:])
	copy(raw[24:], randomID())
	a := base64.StdEncoding.EncodeToString(raw[:])
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	for k, v := range p.artifacts {
		if now.After(v.expires) {
			delete(p.artifacts, k)
		}
	}
	p.artifacts[a] = storedArtifact{message: message, expires: now.Add(artifactLifetime)}
	return a
}

// ArtifactURL is the URL that takes the browser to dest with artifact and
// relayState in the query, as the HTTP-Artifact binding's redirect does.
func ArtifactURL(dest, artifact, relayState string) string {
	q := url.Values{"SAMLart": {artifact}}
	if relayState != "" {
		q.Set("RelayState", relayState)
	}
	sep := "?"
	if strings.Contains(dest, "?") {
		sep = "&"
	}
	return dest + sep + q.Encode()
}

// wantsArtifact reports whether the answer to the AuthnRequest req goes by
// artifact.
func (p *IdP) wantsArtifact(req *saml.IdpAuthnRequest) bool {
	return p.knobsCopy().Artifact.Always || (req.Request.ProtocolBinding == saml.HTTPArtifactBinding)
}

// deliver sends the SP the response to req: by artifact when it asked for
// one, else with the POST form.
func (p *IdP) deliver(w http.ResponseWriter, r *http.Request, req *saml.IdpAuthnRequest, response []byte) {
	if p.wantsArtifact(req) {
		http.Redirect(w, r, ArtifactURL(req.ACSEndpoint.Location, p.IssueArtifact(response), req.RelayState), http.StatusFound)
		return
	}
	WritePostForm(w, req.ACSEndpoint.Location, response, req.RelayState)
}

// responseWriter is crewjam's ResponseWriter with the artifact binding.
type responseWriter struct{ p *IdP }

func (rw responseWriter) WriteResponse(w http.ResponseWriter, req *saml.IdpAuthnRequest) error {
	if !rw.p.wantsArtifact(req) {
		return req.WriteResponse(w)
	}
	if req.ResponseEl == nil {
		if err := req.MakeResponse(); err != nil {
			return err
		}
	}
	out, err := Serialize(req.ResponseEl)
	if err != nil {
		return err
	}
	http.Redirect(w, req.HTTPRequest, ArtifactURL(req.ACSEndpoint.Location, rw.p.IssueArtifact(out), req.RelayState), http.StatusFound)
	return nil
}

// serveARS answers an ArtifactResolve over SOAP 1.1 with an
// ArtifactResponse holding the message the artifact names, once (unless
// Reusable), signed with the IdP's key (unless Unsigned).
func (p *IdP) serveARS(w http.ResponseWriter, r *http.Request) {
	k := p.knobsCopy().Artifact
	if k.Hang {
		endpoint.Hold(r, nil)
		return
	}
	if r.Method != http.MethodPost {
		http.Error(w, "ArtifactResolve must be POSTed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil {
		soapFault(w, "cannot read the request")
		return
	}
	env, err := Parse(body)
	if err != nil || env.Tag != "Envelope" || env.FindElement("./Body/ArtifactResolve") == nil {
		soapFault(w, "not an ArtifactResolve in a SOAP envelope")
		return
	}
	ar := env.FindElement("./Body/ArtifactResolve")
	rec := ArtifactRecord{}
	if iss := ar.FindElement("./Issuer"); iss != nil {
		rec.Issuer = strings.TrimSpace(iss.Text())
	}
	p.mu.Lock()
	sp := p.sps[rec.Issuer]
	p.mu.Unlock()
	if sp == nil {
		soapFault(w, "unknown SP")
		return
	}
	certs := spSigningCerts(sp)
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		rec.ClientCertificate = r.TLS.PeerCertificates[0]
	}
	if k.RequireClientCertificate && (rec.ClientCertificate == nil || !containsCert(certs, rec.ClientCertificate)) {
		soapFault(w, "the SP presented no TLS client certificate of its metadata")
		return
	}
	if ar.FindElement("./Signature") != nil {
		detached := ar.Copy()
		for _, a := range env.Attr {
			if a.Space == "xmlns" && detached.SelectAttr("xmlns:"+a.Key) == nil {
				detached.CreateAttr("xmlns:"+a.Key, a.Value)
			}
		}
		if err := verifyEnveloped(detached, certs); err != nil {
			soapFault(w, "bad signature: "+err.Error())
			return
		}
		rec.Signed = true
	} else if k.RequireSigned {
		soapFault(w, "unsigned ArtifactResolve")
		return
	}
	artifact := ""
	if a := ar.FindElement("./Artifact"); a != nil {
		artifact = strings.TrimSpace(a.Text())
	}
	p.mu.Lock()
	stored, found := p.artifacts[artifact]
	if found && p.now().After(stored.expires) {
		found = false
	}
	if found && !k.Reusable {
		delete(p.artifacts, artifact)
	}
	rec.Found = found
	p.arsLog = append(p.arsLog, rec)
	p.mu.Unlock()

	resp := etree.NewElement("samlp:ArtifactResponse")
	resp.CreateAttr("xmlns:samlp", "urn:oasis:names:tc:SAML:2.0:protocol")
	resp.CreateAttr("xmlns:saml", "urn:oasis:names:tc:SAML:2.0:assertion")
	resp.CreateAttr("ID", fmt.Sprintf("id-%x", randomID()))
	resp.CreateAttr("InResponseTo", ar.SelectAttrValue("ID", ""))
	resp.CreateAttr("Version", "2.0")
	resp.CreateAttr("IssueInstant", p.now().UTC().Format("2006-01-02T15:04:05.000Z"))
	resp.CreateElement("saml:Issuer").SetText(p.EntityID())
	resp.CreateElement("samlp:Status").CreateElement("samlp:StatusCode").CreateAttr("Value", saml.StatusSuccess)
	if found {
		msg, err := Parse(stored.message)
		if err != nil {
			soapFault(w, "the stored message does not parse")
			return
		}
		resp.AddChild(msg)
	}
	if k.Mutate != nil {
		k.Mutate(resp)
	}
	if !k.Unsigned {
		sig, err := signEnveloped(resp, p.key, p.cert, SignOptions{})
		if err != nil {
			soapFault(w, "cannot sign")
			return
		}
		resp.InsertChildAt(indexAfterIssuer(resp), sig)
	}
	out := etree.NewDocument()
	envOut := out.CreateElement("soap11:Envelope")
	envOut.CreateAttr("xmlns:soap11", "http://schemas.xmlsoap.org/soap/envelope/")
	if k.Huge > 0 {
		h := envOut.CreateElement("soap11:Header").CreateElement("Padding")
		h.SetText(strings.Repeat("x", k.Huge))
	}
	envOut.CreateElement("soap11:Body").AddChild(resp)
	buf, err := out.WriteToBytes()
	if err != nil {
		soapFault(w, "cannot write")
		return
	}
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	w.Write(buf)
}

func containsCert(certs []*x509.Certificate, c *x509.Certificate) bool {
	for _, x := range certs {
		if bytes.Equal(x.Raw, c.Raw) {
			return true
		}
	}
	return false
}

// soapFault answers a SOAP 1.1 fault, status 500.
func soapFault(w http.ResponseWriter, reason string) {
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	w.WriteHeader(http.StatusInternalServerError)
	doc := etree.NewDocument()
	env := doc.CreateElement("soap11:Envelope")
	env.CreateAttr("xmlns:soap11", "http://schemas.xmlsoap.org/soap/envelope/")
	f := env.CreateElement("soap11:Body").CreateElement("soap11:Fault")
	f.CreateElement("faultcode").SetText("soap11:Client")
	f.CreateElement("faultstring").SetText(reason)
	doc.WriteTo(w)
}

// errNoArtifactSLO is the error of a logout answer by artifact to an SP
// without an HTTP-Redirect single logout service.
var errNoArtifactSLO = errors.New("samlidp: the SP has no single logout service")

// logoutArtifactURL is the URL that takes the browser to the SP's single
// logout service with the LogoutResponse resp by artifact.
func (p *IdP) logoutArtifactURL(slo string, resp *saml.LogoutResponse, relayState string) (string, error) {
	if slo == "" {
		return "", errNoArtifactSLO
	}
	el := resp.Element()
	sig, err := signEnveloped(el, p.key, p.cert, SignOptions{})
	if err != nil {
		return "", err
	}
	el.InsertChildAt(indexAfterIssuer(el), sig)
	out, err := Serialize(el)
	if err != nil {
		return "", err
	}
	return ArtifactURL(slo, p.IssueArtifact(out), relayState), nil
}
