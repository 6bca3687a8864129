// Package samlidp is a fake SAML 2.0 identity provider, for the tests and
// the development of applications that sign in with extauth, and for
// extauth's own, built on crewjam/saml's IdentityProvider: it publishes metadata,
// answers HTTP-Redirect AuthnRequests with signed (and, when the SP
// publishes an encryption certificate, encrypted) HTTP-POST responses,
// starts unsolicited sign-ins, and answers single logout. A small login page
// with a demo user stands in for a real sign-in; AutoApprove skips it.
//
// Knobs make it misbehave for the bad-case tests (a user who refuses, a
// signature no SP can verify, an assertion an SP must refuse) and encrypt
// as a test chooses (Encryption: the block cipher and key transport;
// EncryptTo: the SP certificate; EncryptNameID: an EncryptedID Subject;
// UnsignedResponse), and Forge (forge.go) builds hand-made responses for
// the tamper tests. Its single logout endpoint reads an EncryptedID with
// crewjam's xmlenc, and EncryptNameID encrypts the NameID of a message a
// test sends as the IdP. The encryptor (encrypt.go) is its own, written
// from the specifications, so that an SP's decryption is tested against
// code that shares nothing with it.
// extauthtest.StartProviders starts one that reads an application's SP
// metadata from its metadata route.
package samlidp

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"html/template"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/beevik/etree"
	"github.com/crewjam/saml"
	"github.com/crewjam/saml/logger"
	dsig "github.com/russellhaering/goxmldsig"

	"github.com/extauth/extauth/extauthtest/internal/endpoint"
	"github.com/extauth/extauth/extauthtest/internal/expiring"
	"github.com/extauth/extauth/internal/devpage"
)

// User is the demo account the IdP signs in.
type User struct {
	NameID string
	// NameIDFormat is the Format of the NameID, left out when empty.
	NameIDFormat string
	Email        string
	GivenName    string
	Surname      string
	DisplayName  string
	UserName     string
	// NameQualifier, SPNameQualifier and SPProvidedID are the attributes
	// of the NameID the IdP issues, left out when empty: most IdPs send
	// none with an emailAddress NameID, some qualify a persistent one with
	// their own and the SP's entity IDs.
	NameQualifier   string
	SPNameQualifier string
	SPProvidedID    string
	// Extra attributes, sent with the basic name format.
	Extra map[string][]string
}

// DemoUser is the default user.
var DemoUser = User{
	NameID:       "ada@example.org",
	NameIDFormat: "urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress",
	Email:        "ada@example.org",
	GivenName:    "Ada",
	Surname:      "Lovelace",
	DisplayName:  "Ada Lovelace",
	UserName:     "ada",
}

// Knobs make the IdP misbehave. Change them with IdP.Set.
type Knobs struct {
	// MetadataStatus, when not 0 or 200, is the status of every metadata
	// request.
	MetadataStatus int
	// MetadataHang makes metadata requests block until the client gives up.
	MetadataHang bool
	// MetadataBody replaces the metadata document.
	MetadataBody []byte
	// ValidUntil and CacheDuration go into the metadata when set.
	ValidUntil    time.Time
	CacheDuration time.Duration
	// ExtraCerts are published as further signing certificates (rotation).
	ExtraCerts []*x509.Certificate
	// NoEncrypt sends plain assertions even when the SP has a certificate.
	NoEncrypt bool
	// Encryption, when set, encrypts assertions with the IdP's own
	// encryptor (encrypt.go) as it says, block cipher and key transport,
	// to the SP's encryption certificate, instead of crewjam's choice (since
	// v0.6 the first AES cipher the SP's metadata lists: AES-256-GCM for
	// extauth; AES-128-CBC before).
	Encryption *Encryption
	// EncryptNameID sends the Subject's NameID as an EncryptedID,
	// encrypted to the SP's encryption certificate (as Encryption says,
	// AES-128-CBC by default), as eID and federation profiles require.
	// With NoEncrypt, the assertion goes in clear around it.
	EncryptNameID bool
	// UnsignedResponse signs the assertion only, not the Response around
	// it: the set-up of many IdPs, in which the ciphertext of an encrypted
	// assertion is covered by no signature the SP can check first.
	UnsignedResponse bool
	// EncryptTo, when set, is the certificate assertions are encrypted
	// to, whatever the SP's metadata publishes: an IdP that still holds the
	// SP's old certificate, or was given its new one by hand. Without it
	// the IdP encrypts to the first encryption certificate of the SP's
	// metadata, as crewjam's does.
	EncryptTo *x509.Certificate
	// EncryptToCert is how the IdP picks the SP's encryption certificate
	// from the SP metadata it holds, when EncryptTo does not say: the
	// first (FirstCert, crewjam's way and the default), the last
	// (LastCert: an IdP that takes the certificate an SP adds at once), or
	// the one it picked when it first registered the SP, for as long as
	// the SP metadata it holds lists it (PinnedCert: an IdP that keeps
	// encrypting to the certificate it was first given).
	EncryptToCert CertChoice
	// StrictLogout makes the single logout endpoint match the
	// LogoutRequest's NameID exactly against those the IdP issued (value,
	// Format, NameQualifier, SPNameQualifier and SPProvidedID, each present
	// or absent alike), and the SessionIndex, when there is one, against
	// the session it named, as Lasso-based IdPs do. A request that matches
	// nothing is answered with a Requester/UnknownPrincipal status.
	StrictLogout bool
	// Mutate, when set, edits each assertion before it is signed.
	Mutate func(*saml.Assertion)
	// SSOBindings, when set, are the only single sign-on bindings the
	// metadata lists (an IdP that takes AuthnRequests by POST only).
	SSOBindings []string
	// NoSLO leaves single logout out of the metadata, as IdPs without it do.
	NoSLO bool
	// RequireSignedRequests refuses AuthnRequests without a valid
	// signature from the SP's registered signing certificate: the query
	// signature of the redirect binding, the XML signature of the POST one.
	// (The metadata does not say so: crewjam's IdP would then check the
	// signatures too, and refuse an unsigned request with its own error.)
	RequireSignedRequests bool
	// IgnoreRequestSignatures never verifies the signature of an
	// AuthnRequest, as IdPs that do not ask for signed requests often do:
	// a signing key the IdP does not know yet goes unnoticed.
	IgnoreRequestSignatures bool
	// MetadataSigner, when set, signs the metadata document (enveloped,
	// as federations sign theirs).
	MetadataSigner *MetadataSigner
	// Deny answers every sign-in as a user who clicks Deny does: a signed
	// Response with a failure status and no assertion.
	Deny bool
	// UnpublishedKey signs responses with a key pair that the metadata
	// does not publish, so that no SP can verify them.
	UnpublishedKey bool
	// AuthnContextClassRef, when set, is the class the assertion says the
	// user authenticated with, whatever the request asked. By default the
	// IdP asserts the first class a RequestedAuthnContext names, and
	// PasswordProtectedTransport without one.
	AuthnContextClassRef string
	// AuthnInstant, when set, dates the authentication (an IdP that kept
	// an old session, ForceAuthn or not); by default it is the sign-in's
	// time.
	AuthnInstant time.Time
	// Artifact shapes the HTTP-Artifact binding (artifact.go).
	Artifact ArtifactKnobs
}

// CertChoice is how an IdP picks the SP's encryption certificate
// (Knobs.EncryptToCert).
type CertChoice int

// The CertChoice values.
const (
	FirstCert CertChoice = iota
	LastCert
	PinnedCert
)

// MetadataSigner is the key that signs the IdP metadata, and how.
type MetadataSigner struct {
	Key  *rsa.PrivateKey
	Cert *x509.Certificate
	Sign SignOptions
}

// AuthnRecord is an AuthnRequest the IdP received.
type AuthnRecord struct {
	Binding string
	// Signed is true when the request carried a signature, which the IdP
	// verified with the SP's certificate.
	Signed bool
	Raw    []byte
	// ForceAuthn, IsPassive and RequestedAuthnContext (its classes, in
	// order) are what the request asked of the authentication.
	ForceAuthn, IsPassive bool
	RequestedAuthnContext []string
}

// readAuthnOptions fills what the request rec.Raw asks of the
// authentication into rec.
func readAuthnOptions(rec *AuthnRecord) {
	root, err := Parse(rec.Raw)
	if err != nil {
		return
	}
	rec.ForceAuthn = root.SelectAttrValue("ForceAuthn", "") == "true"
	rec.IsPassive = root.SelectAttrValue("IsPassive", "") == "true"
	rec.RequestedAuthnContext = requestedClasses(root)
}

// requestedClasses are the classes of an AuthnRequest's
// RequestedAuthnContext.
func requestedClasses(root *etree.Element) []string {
	var out []string
	for _, el := range root.FindElements("./RequestedAuthnContext/AuthnContextClassRef") {
		out = append(out, strings.TrimSpace(el.Text()))
	}
	return out
}

// Options configure a new IdP.
type Options struct {
	// BaseURL is where the IdP's handler is reachable, path prefix
	// included (e.g. http://127.0.0.1:1234/idp).
	BaseURL string
	// Key and Certificate sign responses; generated when nil.
	Key         *rsa.PrivateKey
	Certificate *x509.Certificate
	// AutoApprove signs in User without showing the login page.
	AutoApprove bool
	// User is the account signed in (DemoUser when zero).
	User User
	// SPMetadataURL, when set, is fetched the first time an unknown SP
	// asks to sign in, instead of registering it with RegisterSP.
	SPMetadataURL string
	// HTTPClient fetches SPMetadataURL (default: a client with a 5 s
	// time-out); a test serving the SP over HTTPS passes one that trusts
	// its certificate.
	HTTPClient *http.Client
	// ArtifactResolutionURL is where the ArtifactResolutionService is
	// reachable, which the metadata lists (default BaseURL + "/ars"): a
	// test that resolves artifacts over TLS with client certificates
	// serves the IdP's handler at a second, TLS, server too, with the same
	// path prefix, and names its URL here.
	ArtifactResolutionURL string
}

// IdP is the fake identity provider. It is an http.Handler.
type IdP struct {
	idp     *saml.IdentityProvider
	base    *url.URL
	key     *rsa.PrivateKey
	cert    *x509.Certificate
	auto    bool
	user    User
	spMDURL string
	client  *http.Client
	mu      sync.Mutex
	knobs   Knobs
	sps     map[string]*saml.EntityDescriptor
	// pinned is the encryption certificate each SP was first registered
	// with, by entity ID, for PinnedCert.
	pinned map[string][]byte
	// spFetches counts the SP metadata documents registered.
	spFetches atomic.Int64
	idx       atomic.Int64
	mdHits    atomic.Int64
	lastLog   atomic.Pointer[LogoutRecord]
	lastReq   atomic.Pointer[AuthnRecord]
	// now is crewjam's clock (saml.TimeNow), read at each call.
	now func() time.Time
	// issued holds the NameID of every assertion the IdP issued, by the
	// SessionIndex of its AuthnStatement, for the session's lifetime,
	// under mu.
	issued *expiring.Map[nameID]
	// refusedLogouts counts LogoutRequests StrictLogout refused.
	refusedLogouts atomic.Int64
	// arsURL is the ArtifactResolutionService; artifacts holds the
	// messages issued by artifact, arsLog the ArtifactResolves answered,
	// both under mu.
	arsURL    string
	artifacts map[string]storedArtifact
	arsLog    []ArtifactRecord
	// other signs with a key pair the metadata never publishes, made on
	// first use (Knobs.UnpublishedKey).
	other     *saml.IdentityProvider
	otherErr  error
	otherOnce sync.Once
}

// sessionLifetime is how long a session at the IdP lasts, and how long the
// IdP remembers the NameID it issued for it.
const sessionLifetime = time.Hour

// New returns an IdP serving at opts.BaseURL.
func New(opts Options) (*IdP, error) {
	base, err := url.Parse(strings.TrimSuffix(opts.BaseURL, "/"))
	if err != nil || !base.IsAbs() {
		return nil, errors.New("samlidp: BaseURL must be absolute")
	}
	key, cert := opts.Key, opts.Certificate
	if key == nil || cert == nil {
		if key, cert, err = NewKeyPair("Fake SAML IdP", time.Now()); err != nil {
			return nil, err
		}
	}
	u := opts.User
	if u.NameID == "" {
		u = DemoUser
	}
	client := opts.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Second}
	}
	p := &IdP{base: base, key: key, cert: cert, auto: opts.AutoApprove, user: u, spMDURL: opts.SPMetadataURL,
		client: client, sps: map[string]*saml.EntityDescriptor{}, pinned: map[string][]byte{}, artifacts: map[string]storedArtifact{},
		now: func() time.Time { return saml.TimeNow() }}
	p.issued = expiring.New[nameID](0, func() time.Time { return p.now() })
	sub := func(path string) url.URL { c := *base; c.Path += path; return c }
	p.arsURL = opts.ArtifactResolutionURL
	if p.arsURL == "" {
		u := sub("/ars")
		p.arsURL = u.String()
	}
	p.idp = &saml.IdentityProvider{
		Key:                     key,
		Certificate:             cert,
		Logger:                  logger.DefaultLogger,
		MetadataURL:             sub("/metadata"),
		SSOURL:                  sub("/sso"),
		LogoutURL:               sub("/slo"),
		SignatureMethod:         dsig.RSASHA256SignatureMethod,
		ServiceProviderProvider: spProvider{p},
		SessionProvider:         sessionProvider{p},
		AssertionMaker:          assertionMaker{p},
		ResponseWriter:          responseWriter{p},
	}
	p.idp.Logger = quietLogger{}
	return p, nil
}

// NewKeyPair makes an RSA-2048 key and a self-signed certificate valid for
// ten years from now, as the specification's key generation guidance says.
func NewKeyPair(cn string, now time.Time) (*rsa.PrivateKey, *x509.Certificate, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return key, cert, err
}

// EntityID is the IdP's entity ID (its metadata URL, as crewjam has it).
func (p *IdP) EntityID() string { return p.idp.MetadataURL.String() }

// MetadataURL is where the metadata is served.
func (p *IdP) MetadataURL() string { return p.idp.MetadataURL.String() }

// SSOURL is the single sign-on endpoint.
func (p *IdP) SSOURL() string { return p.idp.SSOURL.String() }

// SLOURL is the single logout endpoint.
func (p *IdP) SLOURL() string { return p.idp.LogoutURL.String() }

// Key returns the signing key, for forging responses in tests.
func (p *IdP) Key() *rsa.PrivateKey { return p.key }

// Certificate returns the signing certificate.
func (p *IdP) Certificate() *x509.Certificate { return p.cert }

// MetadataHits counts metadata requests.
func (p *IdP) MetadataHits() int64 { return p.mdHits.Load() }

// LogoutRecord is a LogoutRequest the IdP accepted.
type LogoutRecord struct {
	// Request is the request as the IdP read it: an EncryptedID already
	// replaced by the NameID it held.
	Request *saml.LogoutRequest
	Signed  bool
	// EncryptedID is true when the NameID came encrypted.
	EncryptedID bool
}

// LastLogout returns the last LogoutRequest the IdP accepted, or nil.
func (p *IdP) LastLogout() *LogoutRecord { return p.lastLog.Load() }

// RefusedLogouts counts the LogoutRequests that StrictLogout refused.
func (p *IdP) RefusedLogouts() int64 { return p.refusedLogouts.Load() }

// Set changes the knobs under the IdP's lock.
func (p *IdP) Set(f func(*Knobs)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(&p.knobs)
}

func (p *IdP) knobsCopy() Knobs {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.knobs
}

// unpublished returns the IdP signing with a key of its own.
func (p *IdP) unpublished() (*saml.IdentityProvider, error) {
	p.otherOnce.Do(func() {
		key, cert, err := NewKeyPair("Unpublished key", time.Now())
		if err != nil {
			p.otherErr = err
			return
		}
		c := *p.idp
		c.Key, c.Certificate = key, cert
		p.other = &c
	})
	return p.other, p.otherErr
}

// RegisterSP trusts a service provider from its metadata document, or
// reads a new copy of it: until the next, the IdP verifies the SP's
// requests with the signing certificates of this copy, and encrypts to one
// of its encryption certificates (Knobs.EncryptToCert).
func (p *IdP) RegisterSP(metadata []byte) error {
	var ed saml.EntityDescriptor
	if err := xml.Unmarshal(metadata, &ed); err != nil {
		return fmt.Errorf("samlidp: SP metadata: %w", err)
	}
	p.spFetches.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sps[ed.EntityID] = &ed
	encCerts := spEncryptionCerts(&ed)
	if pin, ok := p.pinned[ed.EntityID]; !ok || !slices.ContainsFunc(encCerts, func(c []byte) bool { return bytes.Equal(c, pin) }) {
		if len(encCerts) > 0 {
			p.pinned[ed.EntityID] = encCerts[0]
		} else {
			delete(p.pinned, ed.EntityID)
		}
	}
	return nil
}

// SPMetadataReads counts the SP metadata documents the IdP registered,
// by RegisterSP or from Options.SPMetadataURL.
func (p *IdP) SPMetadataReads() int64 { return p.spFetches.Load() }

// spEncryptionCerts returns the DER of the SP's encryption certificates in
// the order crewjam's IdP looks at them: those of KeyDescriptors for
// encryption, then of those for no use in particular, each in metadata
// order.
func spEncryptionCerts(ed *saml.EntityDescriptor) [][]byte {
	var out [][]byte
	for _, use := range []string{"encryption", ""} {
		for _, d := range ed.SPSSODescriptors {
			out = append(out, keyDescriptorCerts(d.KeyDescriptors, use)...)
		}
	}
	return out
}

// keyDescriptorCerts returns the DER of the certificates of the
// KeyDescriptors for use.
func keyDescriptorCerts(kds []saml.KeyDescriptor, use string) [][]byte {
	var out [][]byte
	for _, kd := range kds {
		if kd.Use != use {
			continue
		}
		for _, c := range kd.KeyInfo.X509Data.X509Certificates {
			if der, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(c.Data), "")); err == nil {
				out = append(out, der)
			}
		}
	}
	return out
}

// Metadata returns the IdP metadata document as the knobs shape it.
func (p *IdP) Metadata() []byte {
	k := p.knobsCopy()
	if k.MetadataBody != nil {
		return k.MetadataBody
	}
	ed := p.idp.Metadata()
	if !k.ValidUntil.IsZero() {
		ed.ValidUntil = k.ValidUntil
	}
	ed.CacheDuration = k.CacheDuration
	if k.SSOBindings != nil {
		d := &ed.IDPSSODescriptors[0]
		var kept []saml.Endpoint
		for _, e := range d.SingleSignOnServices {
			for _, b := range k.SSOBindings {
				if e.Binding == b {
					kept = append(kept, e)
				}
			}
		}
		d.SingleSignOnServices = kept
	}
	if k.NoSLO {
		ed.IDPSSODescriptors[0].SingleLogoutServices = nil
	}
	yes := true
	ed.IDPSSODescriptors[0].SSODescriptor.ArtifactResolutionServices = []saml.IndexedEndpoint{
		{Binding: saml.SOAPBinding, Location: p.arsURL, Index: 0, IsDefault: &yes}}
	for _, c := range k.ExtraCerts {
		d := &ed.IDPSSODescriptors[0]
		d.KeyDescriptors = append(d.KeyDescriptors, saml.KeyDescriptor{
			Use: "signing",
			KeyInfo: saml.KeyInfo{X509Data: saml.X509Data{X509Certificates: []saml.X509Certificate{
				{Data: base64.StdEncoding.EncodeToString(c.Raw)},
			}}},
		})
	}
	buf, _ := xml.MarshalIndent(ed, "", "  ")
	if k.MetadataSigner != nil {
		signed, err := SignMetadata(buf, k.MetadataSigner)
		if err != nil {
			panic(err)
		}
		buf = signed
	}
	return buf
}

// SignMetadata signs a metadata document with an ID-referenced enveloped
// signature, first child of the root as the schema wants it.
func SignMetadata(doc []byte, s *MetadataSigner) ([]byte, error) {
	root, err := Parse(doc)
	if err != nil {
		return nil, err
	}
	if root.SelectAttr("ID") == nil {
		root.CreateAttr("ID", "_metadata-1")
	}
	sig, err := signEnveloped(root, s.Key, s.Cert, s.Sign)
	if err != nil {
		return nil, err
	}
	root.InsertChildAt(0, sig)
	return Serialize(root)
}

// LastAuthnRequest returns the last AuthnRequest the IdP accepted, or nil.
func (p *IdP) LastAuthnRequest() *AuthnRecord { return p.lastReq.Load() }

// checkAuthnRequest verifies the signature of an AuthnRequest when it
// has one (and requires one with RequireSignedRequests), with the signing
// certificate of the SP named by its Issuer, and records it.
func (p *IdP) checkAuthnRequest(r *http.Request) error {
	rec := &AuthnRecord{Binding: saml.HTTPRedirectBinding}
	var sigErr error
	var certs []*x509.Certificate
	lookup := func(x []byte) {
		var req saml.AuthnRequest
		if xml.Unmarshal(x, &req) == nil && req.Issuer != nil {
			// An SP that Options.SPMetadataURL names is registered on its
			// first request, before its signature can be checked.
			if sp, err := (spProvider{p}).GetServiceProvider(r, req.Issuer.Value); err == nil {
				certs = spSigningCerts(sp)
			}
		}
	}
	if r.Method == http.MethodPost {
		rec.Binding = saml.HTTPPostBinding
		x, err := base64.StdEncoding.DecodeString(r.PostForm.Get("SAMLRequest"))
		if err != nil {
			return err
		}
		rec.Raw = x
		lookup(x)
		root, err := Parse(x)
		if err != nil {
			return err
		}
		if root.FindElement("./Signature") != nil {
			rec.Signed = true
			sigErr = verifyEnveloped(root, certs)
		}
	} else {
		q := r.URL.Query()
		raw, err := base64.StdEncoding.DecodeString(q.Get("SAMLRequest"))
		if err != nil {
			return err
		}
		x, err := io.ReadAll(io.LimitReader(flate.NewReader(bytes.NewReader(raw)), 64<<10))
		if err != nil {
			return err
		}
		rec.Raw = x
		lookup(x)
		if q.Get("Signature") != "" {
			rec.Signed = true
			sigErr = verifyRedirect(r.URL.RawQuery, "SAMLRequest", certs)
		}
	}
	switch k := p.knobsCopy(); {
	case k.IgnoreRequestSignatures:
	case sigErr != nil:
		return fmt.Errorf("signature: %w", sigErr)
	case !rec.Signed && k.RequireSignedRequests:
		return errors.New("unsigned, and this IdP requires signed requests")
	}
	readAuthnOptions(rec)
	p.lastReq.Store(rec)
	return nil
}

// verifyEnveloped checks the XML signature of el with one of certs, the
// SP's signing certificates (two during its key rotation).
func verifyEnveloped(el *etree.Element, certs []*x509.Certificate) error {
	if len(certs) == 0 {
		return errors.New("signed by an SP without a signing certificate")
	}
	var errs []error
	for _, cert := range certs {
		vc := dsig.NewDefaultValidationContext(&dsig.MemoryX509CertificateStore{Roots: []*x509.Certificate{cert}})
		vc.IdAttribute = "ID"
		_, err := vc.Validate(el.Copy())
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// verifyRedirect checks an HTTP-Redirect query signature with one of
// certs, the SP's signing certificates.
func verifyRedirect(rawQuery, param string, certs []*x509.Certificate) error {
	if len(certs) == 0 {
		return errors.New("signed by an SP without a signing certificate")
	}
	var errs []error
	for _, cert := range certs {
		err := VerifyRedirectSignature(rawQuery, param, cert)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ServeHTTP routes the IdP's endpoints below its base path.
func (p *IdP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, p.base.Path)
	switch path {
	case "/metadata":
		p.serveMetadata(w, r)
	case "/sso":
		k := p.knobsCopy()
		r, decision := loginDecision(r)
		// The login page posts the request back with a decision; it was
		// checked when it first came.
		if decision == "" {
			if err := p.checkAuthnRequest(r); err != nil {
				http.Error(w, "bad AuthnRequest: "+err.Error(), http.StatusBadRequest)
				return
			}
		}
		if k.IgnoreRequestSignatures {
			r = withoutRequestSignature(r)
		}
		if k.Deny || decision == "deny" {
			p.deny(w, r)
			return
		}
		idp := p.idp
		if k.UnpublishedKey {
			var err error
			if idp, err = p.unpublished(); err != nil {
				http.Error(w, "cannot make a key", http.StatusInternalServerError)
				return
			}
		}
		p.serveSSO(idp, w, r)
	case "/unsolicited":
		// The login page is built for a solicited request; crewjam's
		// IdP-initiated flow has none to show it with.
		if !p.auto {
			http.Error(w, "unsolicited sign-in needs AutoApprove", http.StatusNotFound)
			return
		}
		sp := r.URL.Query().Get("sp")
		p.idp.ServeIDPInitiated(w, r, sp, r.URL.Query().Get("RelayState"))
	case "/slo":
		p.serveSLO(w, r)
	case "/ars":
		p.serveARS(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (p *IdP) serveMetadata(w http.ResponseWriter, r *http.Request) {
	p.mdHits.Add(1)
	k := p.knobsCopy()
	if k.MetadataHang {
		endpoint.Hold(r, nil)
		return
	}
	if k.MetadataStatus != 0 && k.MetadataStatus != http.StatusOK {
		http.Error(w, "metadata unavailable", k.MetadataStatus)
		return
	}
	w.Header().Set("Content-Type", "application/samlmetadata+xml")
	w.Write(p.Metadata())
}

type spProvider struct{ p *IdP }

func (s spProvider) GetServiceProvider(r *http.Request, id string) (*saml.EntityDescriptor, error) {
	s.p.mu.Lock()
	_, known := s.p.sps[id]
	s.p.mu.Unlock()
	if !known && s.p.spMDURL != "" {
		if err := s.p.fetchSP(r); err != nil {
			return nil, err
		}
	}
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	ed, ok := s.p.sps[id]
	if !ok {
		return nil, os.ErrNotExist
	}
	c := *ed
	var to []byte
	if s.p.knobs.EncryptTo != nil {
		to = s.p.knobs.EncryptTo.Raw
	} else if certs := spEncryptionCerts(ed); len(certs) > 0 {
		switch s.p.knobs.EncryptToCert {
		case LastCert:
			to = certs[len(certs)-1]
		case PinnedCert:
			to = s.p.pinned[id]
		}
	}
	if to != nil && !s.p.knobs.NoEncrypt {
		// The one encryption certificate this IdP holds for the SP.
		c.SPSSODescriptors = append([]saml.SPSSODescriptor(nil), ed.SPSSODescriptors...)
		for i := range c.SPSSODescriptors {
			kds := []saml.KeyDescriptor{{Use: "encryption", KeyInfo: saml.KeyInfo{X509Data: saml.X509Data{
				X509Certificates: []saml.X509Certificate{{Data: base64.StdEncoding.EncodeToString(to)}}}}}}
			for _, kd := range c.SPSSODescriptors[i].KeyDescriptors {
				if kd.Use != "encryption" {
					kds = append(kds, kd)
				}
			}
			c.SPSSODescriptors[i].KeyDescriptors = kds
		}
	}
	if s.p.knobs.IgnoreRequestSignatures {
		// crewjam's IdP refuses an unsigned request from an SP whose
		// metadata says it signs them; this IdP does not care.
		c.SPSSODescriptors = append([]saml.SPSSODescriptor(nil), c.SPSSODescriptors...)
		for i := range c.SPSSODescriptors {
			c.SPSSODescriptors[i].AuthnRequestsSigned = nil
		}
	}
	if s.p.knobs.NoEncrypt {
		c.SPSSODescriptors = append([]saml.SPSSODescriptor(nil), ed.SPSSODescriptors...)
		for i := range c.SPSSODescriptors {
			var kds []saml.KeyDescriptor
			for _, kd := range c.SPSSODescriptors[i].KeyDescriptors {
				if kd.Use != "encryption" {
					kds = append(kds, kd)
				}
			}
			c.SPSSODescriptors[i].KeyDescriptors = kds
		}
	}
	return &c, nil
}

// fetchSP registers the SP from Options.SPMetadataURL.
func (p *IdP) fetchSP(r *http.Request) error {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, p.spMDURL, nil)
	if err != nil {
		return err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("samlidp: SP metadata: HTTP %d", resp.StatusCode)
	}
	md, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	return p.RegisterSP(md)
}

type sessionProvider struct{ p *IdP }

var loginPage = devpage.Provider("login", "SAML identity provider", `{{define "title"}}Sign in{{end}}
{{define "main"}}<div class="card">
<h1>Sign in to continue</h1>
<p>The service provider <code>{{.SP}}</code> asks you to sign in as <strong>{{.User}}</strong>.</p>
<form method="post" action="{{.Action}}" class="actions">
<input type="hidden" name="SAMLRequest" value="{{.Request}}">
<input type="hidden" name="RelayState" value="{{.RelayState}}">
{{if .RedirectQuery}}<input type="hidden" name="RedirectQuery" value="{{.RedirectQuery}}">
{{end}}<button name="decision" value="approve" class="primary">Approve</button>
<button name="decision" value="deny">Deny</button>
</form>
</div>{{end}}`)

// decisionKey is the context key of the login page's decision.
type decisionKey struct{}

// loginDecision returns the login page's decision ("approve", "deny", or ""
// when r is not its post) and the request to answer: the one the page
// posts back. A request that came with the HTTP-Redirect binding goes back
// as that GET, its query (RedirectQuery) as the SP wrote it, since
// crewjam's IdP checks the query signature again and refuses an unsigned
// request from an SP whose metadata says it signs them; the page's
// SAMLRequest and RelayState serve a post without it.
func loginDecision(r *http.Request) (*http.Request, string) {
	if r.Method != http.MethodPost {
		return r, ""
	}
	r.ParseForm()
	decision := r.PostForm.Get("decision")
	if decision == "" {
		return r, ""
	}
	r = r.WithContext(context.WithValue(r.Context(), decisionKey{}, decision))
	if q := r.PostForm.Get("RedirectQuery"); q != "" {
		u := *r.URL
		u.RawQuery = q
		r.URL, r.Method, r.Body, r.Form, r.PostForm = &u, http.MethodGet, http.NoBody, nil, nil
		r.ContentLength = 0
	}
	return r, decision
}

// withoutRequestSignature returns r without the AuthnRequest's signature,
// for crewjam's IdP, which verifies every signed request since v0.6: the
// HTTP-Redirect binding's SigAlg and Signature, or the enveloped signature
// of a posted request.
func withoutRequestSignature(r *http.Request) *http.Request {
	if r.Method == http.MethodGet {
		var kept []string
		for _, kv := range strings.Split(r.URL.RawQuery, "&") {
			if k, _, _ := strings.Cut(kv, "="); k != "SigAlg" && k != "Signature" {
				kept = append(kept, kv)
			}
		}
		u := *r.URL
		u.RawQuery = strings.Join(kept, "&")
		r = r.Clone(r.Context())
		r.URL = &u
		return r
	}
	x, err := base64.StdEncoding.DecodeString(r.PostForm.Get("SAMLRequest"))
	if err != nil {
		return r
	}
	doc := etree.NewDocument()
	if doc.ReadFromBytes(x) != nil || doc.Root() == nil {
		return r
	}
	sig := doc.Root().FindElement("./Signature")
	if sig == nil {
		return r
	}
	doc.Root().RemoveChild(sig)
	if x, err = doc.WriteToBytes(); err != nil {
		return r
	}
	r = r.Clone(r.Context())
	r.PostForm.Set("SAMLRequest", base64.StdEncoding.EncodeToString(x))
	r.Form = r.PostForm
	return r
}

func (s sessionProvider) GetSession(w http.ResponseWriter, r *http.Request, req *saml.IdpAuthnRequest) *saml.Session {
	p := s.p
	approved := p.auto || r.Context().Value(decisionKey{}) == "approve"
	if !approved {
		page := map[string]string{
			"SP":         req.Request.Issuer.Value,
			"User":       p.user.DisplayName,
			"Action":     p.SSOURL(),
			"Request":    base64.StdEncoding.EncodeToString(req.RequestBuffer),
			"RelayState": req.RelayState,
		}
		if r.Method == http.MethodGet {
			page["RedirectQuery"] = r.URL.RawQuery
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		loginPage.Execute(w, page)
		return nil
	}
	now := saml.TimeNow()
	return &saml.Session{
		ID:             fmt.Sprintf("session-%d", p.idx.Add(1)),
		CreateTime:     now,
		ExpireTime:     now.Add(sessionLifetime),
		Index:          fmt.Sprintf("idx-%d", p.idx.Load()),
		NameID:         p.user.NameID,
		NameIDFormat:   p.user.NameIDFormat,
		UserName:       p.user.UserName,
		UserEmail:      p.user.Email,
		UserCommonName: p.user.DisplayName,
		UserGivenName:  p.user.GivenName,
		UserSurname:    p.user.Surname,
	}
}

// assertionMaker is crewjam's default assertion, plus displayName, the
// user's extra attributes and the Mutate knob.
type assertionMaker struct{ p *IdP }

func (m assertionMaker) MakeAssertion(req *saml.IdpAuthnRequest, session *saml.Session) error {
	if err := (saml.DefaultAssertionMaker{}).MakeAssertion(req, session); err != nil {
		return err
	}
	a := req.Assertion
	attrs := &a.AttributeStatements[0].Attributes
	add := func(name, friendly string, vals ...string) {
		at := saml.Attribute{Name: name, FriendlyName: friendly, NameFormat: "urn:oasis:names:tc:SAML:2.0:attrname-format:uri"}
		for _, v := range vals {
			at.Values = append(at.Values, saml.AttributeValue{Type: "xs:string", Value: v})
		}
		*attrs = append(*attrs, at)
	}
	if m.p.user.DisplayName != "" {
		add("urn:oid:2.16.840.1.113730.3.1.241", "displayName", m.p.user.DisplayName)
	}
	for k, v := range m.p.user.Extra {
		add(k, "", v...)
	}
	if n := a.Subject.NameID; n != nil {
		u := m.p.user
		n.Format, n.NameQualifier, n.SPNameQualifier, n.SPProvidedID = u.NameIDFormat, u.NameQualifier, u.SPNameQualifier, u.SPProvidedID
	}
	knobs := m.p.knobsCopy()
	if st := a.AuthnStatements; len(st) > 0 {
		class := knobs.AuthnContextClassRef
		if root, err := Parse(req.RequestBuffer); class == "" && err == nil {
			if classes := requestedClasses(root); len(classes) > 0 {
				class = classes[0]
			}
		}
		if class != "" {
			st[0].AuthnContext.AuthnContextClassRef = &saml.AuthnContextClassRef{Value: class}
		}
		if !knobs.AuthnInstant.IsZero() {
			st[0].AuthnInstant = knobs.AuthnInstant
		}
	}
	if f := knobs.Mutate; f != nil {
		f(a)
	}
	m.p.recordIssued(a)
	return nil
}

// deny answers with a signed Response whose status is AuthnFailed.
func (p *IdP) deny(w http.ResponseWriter, r *http.Request) {
	req, err := saml.NewIdpAuthnRequest(p.idp, r)
	if err == nil {
		err = req.Validate()
	}
	if err != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	spec := Spec{
		Destination:  req.ACSEndpoint.Location,
		InResponseTo: req.Request.ID,
		Status:       "urn:oasis:names:tc:SAML:2.0:status:Responder",
		NoAssertion:  true,
		SignResponse: true,
	}
	out, err := p.Forge(spec)
	if err != nil {
		http.Error(w, "cannot build response", http.StatusInternalServerError)
		return
	}
	p.deliver(w, r, req, out)
}

var postForm = template.Must(template.New("post").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Signing you in…</title></head>
<body onload="document.forms[0].submit()">
<form method="post" action="{{.URL}}">
<input type="hidden" name="SAMLResponse" value="{{.SAMLResponse}}">
<input type="hidden" name="RelayState" value="{{.RelayState}}">
<noscript><button>Continue</button></noscript>
</form></body></html>`))

// WritePostForm writes the HTTP-POST binding's auto-submitting form.
func WritePostForm(w http.ResponseWriter, acs string, response []byte, relayState string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	postForm.Execute(w, map[string]string{
		"URL":          acs,
		"SAMLResponse": base64.StdEncoding.EncodeToString(response),
		"RelayState":   relayState,
	})
}

// serveSLO accepts an SP's LogoutRequest over HTTP-Redirect (checking its
// query signature when the SP registered a signing certificate) and
// answers with a signed LogoutResponse over HTTP-Redirect.
func (p *IdP) serveSLO(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	raw, err := base64.StdEncoding.DecodeString(q.Get("SAMLRequest"))
	if err != nil {
		http.Error(w, "bad SAMLRequest", http.StatusBadRequest)
		return
	}
	xmlBuf, err := io.ReadAll(io.LimitReader(flate.NewReader(bytes.NewReader(raw)), 64<<10))
	if err != nil {
		http.Error(w, "bad SAMLRequest", http.StatusBadRequest)
		return
	}
	// An SP that encrypts the NameID (SAML Core 3.7.1) sends an
	// EncryptedID, which the IdP reads as the NameID it holds.
	xmlBuf, encryptedID, err := decryptLogoutNameID(xmlBuf, p.key)
	if err != nil {
		http.Error(w, "bad EncryptedID: "+err.Error(), http.StatusBadRequest)
		return
	}
	var lr saml.LogoutRequest
	if err := xml.Unmarshal(xmlBuf, &lr); err != nil || lr.Issuer == nil {
		http.Error(w, "bad LogoutRequest", http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	sp := p.sps[lr.Issuer.Value]
	p.mu.Unlock()
	if sp == nil {
		http.Error(w, "unknown SP", http.StatusBadRequest)
		return
	}
	// A signature, when present, must verify with the SP's published
	// signing certificate; whether one is required is the SP's setting.
	if q.Get("Signature") != "" {
		if err := verifyRedirect(r.URL.RawQuery, "SAMLRequest", spSigningCerts(sp)); err != nil {
			http.Error(w, "bad signature", http.StatusBadRequest)
			return
		}
	}
	status := saml.Status{StatusCode: saml.StatusCode{Value: saml.StatusSuccess}}
	if p.knobsCopy().StrictLogout && !p.endSession(xmlBuf) {
		// What Lasso answers when no session matches the NameID.
		p.refusedLogouts.Add(1)
		status = saml.Status{StatusCode: saml.StatusCode{Value: saml.StatusRequester,
			StatusCode: &saml.StatusCode{Value: "urn:oasis:names:tc:SAML:2.0:status:UnknownPrincipal"}}}
	} else {
		p.lastLog.Store(&LogoutRecord{Request: &lr, Signed: q.Get("Signature") != "", EncryptedID: encryptedID})
	}
	var slo string
	for _, d := range sp.SPSSODescriptors {
		for _, e := range d.SingleLogoutServices {
			if e.Binding == saml.HTTPRedirectBinding && slo == "" {
				slo = e.Location
			}
		}
	}
	resp := &saml.LogoutResponse{
		ID:           fmt.Sprintf("id-%x", randomID()),
		InResponseTo: lr.ID,
		Version:      "2.0",
		IssueInstant: saml.TimeNow(),
		Destination:  slo,
		Issuer:       &saml.Issuer{Value: p.EntityID()},
		Status:       status,
	}
	var u string
	if p.knobsCopy().Artifact.Always {
		u, err = p.logoutArtifactURL(slo, resp, q.Get("RelayState"))
	} else {
		u, err = p.RedirectMessage(slo, "SAMLResponse", resp.Element(), q.Get("RelayState"))
	}
	if err != nil {
		http.Error(w, "cannot answer", http.StatusInternalServerError)
		return
	}
	http.Redirect(w, r, u, http.StatusFound)
}

// spSigningCerts returns every signing certificate the SP publishes: up
// to three during its key rotation, any of which may have signed.
func spSigningCerts(sp *saml.EntityDescriptor) []*x509.Certificate {
	var out []*x509.Certificate
	for _, d := range sp.SPSSODescriptors {
		for _, der := range keyDescriptorCerts(d.KeyDescriptors, "signing") {
			if c, err := x509.ParseCertificate(der); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// VerifyRedirectSignature checks an HTTP-Redirect binding RSA-SHA256 query
// signature over param, RelayState and SigAlg, as they appear in rawQuery.
func VerifyRedirectSignature(rawQuery, param string, cert *x509.Certificate) error {
	vals := map[string]string{}
	for _, kv := range strings.Split(rawQuery, "&") {
		k, v, _ := strings.Cut(kv, "=")
		vals[k] = v
	}
	signed := param + "=" + vals[param]
	if rs, ok := vals["RelayState"]; ok {
		signed += "&RelayState=" + rs
	}
	signed += "&SigAlg=" + vals["SigAlg"]
	alg, _ := url.QueryUnescape(vals["SigAlg"])
	if alg != dsig.RSASHA256SignatureMethod {
		return fmt.Errorf("unexpected SigAlg %q", alg)
	}
	s, _ := url.QueryUnescape(vals["Signature"])
	sig, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return err
	}
	pub, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok {
		return errors.New("not an RSA certificate")
	}
	sum := sha256.Sum256([]byte(signed))
	return rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig)
}

func randomID() []byte {
	b := make([]byte, 20)
	rand.Read(b)
	return b
}

type quietLogger struct{}

func (quietLogger) Printf(string, ...interface{}) {}
func (quietLogger) Print(...interface{})          {}
func (quietLogger) Println(...interface{})        {}
func (quietLogger) Fatal(...interface{})          {}
func (quietLogger) Fatalf(string, ...interface{}) {}
func (quietLogger) Fatalln(...interface{})        {}
func (quietLogger) Panic(...interface{})          {}
func (quietLogger) Panicf(string, ...interface{}) {}
func (quietLogger) Panicln(...interface{})        {}
