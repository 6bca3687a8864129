package samlsp

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/beevik/etree"
	"github.com/crewjam/saml"

	"github.com/extauth/extauth/internal/docfetch"
	"github.com/extauth/extauth/internal/outbound"
	"github.com/extauth/extauth/providers"
)

// idpMetadata is one good copy of the IdP's metadata, reduced to what we use.
type idpMetadata struct {
	entity *saml.EntityDescriptor
	// certs are every signing certificate the IdP publishes: during a key
	// rotation it lists the old and the new one, and either may sign.
	certs       []*x509.Certificate
	sloRedirect string
	// authn are the AuthnRequest templates for the HTTP-Redirect [0] and
	// HTTP-POST [1] single sign-on services, nil where there is none.
	authn [2]*authnTemplate
	// sso are the metadata's HTTP-Redirect [0] and HTTP-POST [1] single
	// sign-on locations.
	sso [2]string
	// ars are the IdP's ArtifactResolutionServices with the SOAP binding.
	ars []saml.IndexedEndpoint
	// signed is true when the metadata's signature was verified with
	// idp_metadata_certificate; sha1 lists where the IdP uses SHA-1.
	signed  bool
	sha1    []string
	fetched time.Time
	// refreshAt is when the copy should be fetched again, from
	// cacheDuration, validUntil or the default period.
	refreshAt time.Time
}

// metadataCache holds the last good copy and refreshes it in the
// background. Readers never block: they see the last copy or nil.
type metadataCache struct {
	refresher
	sp  *SP
	cur atomic.Pointer[idpMetadata]
}

func newMetadataCache(sp *SP) *metadataCache {
	c := &metadataCache{sp: sp}
	c.init()
	return c
}

func (c *metadataCache) current() *idpMetadata { return c.cur.Load() }

// metadataWait bounds how long a sign-in that finds no metadata waits for
// a fetch: long enough for an IdP that is back to answer, short enough to
// answer 503 promptly while it is not.
const metadataWait = 2 * time.Second

// metadata returns the current IdP metadata. When there is none yet (the
// IdP was down), it asks for a fetch at once and waits for it, up to
// metadataWait, so that the first sign-in after the IdP comes back
// succeeds instead of getting 503 while the refetch runs.
func (sp *SP) metadata(ctx context.Context) (*idpMetadata, *providers.Error) {
	if md := waitFor(ctx, &sp.md.refresher, sp.md.current); md != nil {
		return md, nil
	}
	return nil, unavailable(sp.md.err())
}

// minKickSpacing stops a burst of sign-ins against a dead IdP from turning
// into a burst of metadata fetches.
const minKickSpacing = time.Second

func (c *metadataCache) run(ctx context.Context) {
	sp := c.sp
	c.loop(ctx, refreshLoop{
		now: sp.env.Now, retry: sp.opts.MetadataRetry, maxRetry: sp.opts.MetadataRefresh,
		have: func() bool { return c.current() != nil },
		fetch: func(ctx context.Context) (time.Duration, error) {
			md, err := c.fetch(ctx)
			if err != nil {
				if ctx.Err() == nil {
					sp.log.Warn("saml: IdP metadata fetch failed; keeping the last good copy",
						"url", outbound.Redact(sp.idpMeta), "have_copy", c.current() != nil, "err", err)
				}
				return 0, err
			}
			c.cur.Store(md)
			wait := max(md.refreshAt.Sub(sp.env.Now()), sp.opts.MetadataRetry)
			sp.log.Info("saml: IdP metadata loaded", "entity_id", md.entity.EntityID,
				"signing_certs", len(md.certs), "signed", md.signed, "next_refresh", wait.Round(time.Second).String())
			for _, f := range md.sha1 {
				sp.log.Warn("saml: the IdP uses SHA-1", "finding", f, "accepted", sp.policy.allowSHA1)
			}
			return wait, nil
		},
		// At start-up and after every refresh, failed or not: the IdP's
		// certificates are those of the copy we hold.
		after: sp.checkExpiry,
	})
}

// fetch downloads and parses the metadata. The metadata may have moved
// (http to https, a CDN): its fetch follows up to three safe redirects.
func (c *metadataCache) fetch(ctx context.Context) (*idpMetadata, error) {
	doc, err := c.sp.entityDocs.Get(ctx, c.sp.idpMeta.String(), docfetch.Validators{})
	if err != nil {
		return nil, err
	}
	return c.sp.parseMetadata(doc.Body)
}

// parseMetadata reads the metadata with ParseIdPMetadata, under the SP's
// rules, and schedules its next refresh.
func (sp *SP) parseMetadata(body []byte) (*idpMetadata, error) {
	now := sp.env.Now()
	pm, err := ParseIdPMetadata(body, MetadataRules{EntityID: sp.opts.IdPEntityID, Now: now,
		Certificate: sp.mdCert, AllowSHA1: sp.policy.allowSHA1})
	if err != nil {
		return nil, fmt.Errorf("saml metadata: %w", err)
	}
	md := sp.newIdPMetadata(pm, now)
	return md, sp.prepare(md)
}

// newIdPMetadata reduces pm to what the SP uses, and schedules its next
// refresh.
func (sp *SP) newIdPMetadata(pm *IdPMetadata, now time.Time) *idpMetadata {
	md := &idpMetadata{entity: pm.Entity, certs: pm.SigningCerts, fetched: now, signed: pm.Signed, sha1: pm.SHA1Use()}
	for _, d := range pm.Entity.IDPSSODescriptors {
		for _, s := range d.SingleSignOnServices {
			if s.Binding == saml.HTTPRedirectBinding && md.sso[0] == "" {
				md.sso[0] = s.Location
			}
			if s.Binding == saml.HTTPPostBinding && md.sso[1] == "" {
				md.sso[1] = s.Location
			}
		}
		for _, s := range d.SingleLogoutServices {
			if s.Binding == saml.HTTPRedirectBinding && md.sloRedirect == "" {
				md.sloRedirect = s.Location
			}
		}
	}

	md.ars = soapARS(pm.Entity)

	refresh := sp.opts.MetadataRefresh
	if pm.CacheDuration > 0 && pm.CacheDuration < refresh {
		refresh = pm.CacheDuration
	}
	md.refreshAt = now.Add(refresh)
	if !pm.ValidUntil.IsZero() {
		// Refresh well before the copy expires, so that one failed attempt
		// does not leave us with expired metadata.
		if early := now.Add(pm.ValidUntil.Sub(now) / 2); early.Before(md.refreshAt) {
			md.refreshAt = early
		}
	}
	return md
}

// prepare builds md's AuthnRequest templates, once per copy of the
// metadata: saml_idp_sso_service_url, when set, is the endpoint of both
// bindings.
func (sp *SP) prepare(md *idpMetadata) error {
	for i, loc := range md.sso {
		if sp.cfg.IdPSSOServiceURL != "" {
			loc = sp.cfg.IdPSSOServiceURL
		}
		if loc == "" {
			continue
		}
		t, err := sp.newAuthnTemplate(loc, sp.responseBinding(md))
		if err != nil {
			return fmt.Errorf("saml metadata: %w", err)
		}
		md.authn[i] = t
	}
	return nil
}

// responseBinding is the binding AuthnRequests to md's IdP ask the
// Response to come by: HTTP-Artifact when the configuration asks for it
// and the IdP has an ArtifactResolutionService, HTTP-POST otherwise.
func (sp *SP) responseBinding(md *idpMetadata) string {
	if sp.art != nil && len(md.ars) > 0 {
		return BindingArtifact
	}
	return saml.HTTPPostBinding
}

// IdPMetadata is an IdP's metadata as the SAML strategy reads it.
type IdPMetadata struct {
	// Entity is the IdP's EntityDescriptor.
	Entity *saml.EntityDescriptor
	// SigningCerts are every signing certificate the IdP publishes: during
	// a key rotation it lists the old and the new one, and either may sign.
	SigningCerts []*x509.Certificate
	// ValidUntil is the earliest validUntil that bounds the IdP's entry,
	// its own or an enclosing EntitiesDescriptor's; zero when there is none.
	ValidUntil time.Time
	// CacheDuration is the shortest cacheDuration that applies likewise;
	// zero when there is none.
	CacheDuration time.Duration
	// Signed is true when the document's signature was verified with
	// MetadataRules.Certificate.
	Signed bool
	// SignatureMethod and DigestMethod are the algorithms of the document's
	// own signature, when it has one (verified or not).
	SignatureMethod, DigestMethod string
	// SigningMethods and DigestMethods are what the IdP says it signs with
	// (the alg:SigningMethod and alg:DigestMethod extensions of SAML
	// Metadata Profile for Algorithm Support), in its order.
	SigningMethods, DigestMethods []string
}

// MetadataRules are the rules ParseIdPMetadata applies, the strategy's.
type MetadataRules struct {
	// EntityID names the IdP when the document describes several
	// (Options.IdPEntityID).
	EntityID string
	// Now is the time validUntil is checked against.
	Now time.Time
	// Certificate, when set (saml_additional_settings.idp_metadata_certificate),
	// must have signed the document: unsigned or badly signed metadata is
	// refused.
	Certificate *x509.Certificate
	// AllowSHA1 applies Options.AllowSHA1 to the metadata's signature.
	AllowSHA1 bool
}

// ErrHTMLMetadata is the error for a metadata URL that answers a web page,
// typically a login or error page served with status 200.
var ErrHTMLMetadata = errors.New("the answer is HTML, not SAML metadata")

// SHA1Use lists, in words, where the IdP's metadata shows that it uses
// SHA-1: its own signature, or signing and digest methods that are all
// SHA-1. Responses signed so are refused unless Options.AllowSHA1.
func (m *IdPMetadata) SHA1Use() []string {
	var out []string
	if a, ok := signatureAlgorithms[m.SignatureMethod]; ok && a.sha1 {
		out = append(out, "the metadata is signed with "+m.SignatureMethod)
	}
	if digestAlgorithms[m.DigestMethod] == crypto.SHA1 {
		out = append(out, "the metadata signature uses the digest "+m.DigestMethod)
	}
	onlySHA1 := func(ms []string, isSHA1 func(string) bool) bool {
		for _, x := range ms {
			if !isSHA1(x) {
				return false
			}
		}
		return len(ms) > 0
	}
	if onlySHA1(m.SigningMethods, func(x string) bool { return signatureAlgorithms[x].sha1 }) {
		out = append(out, "the IdP lists only SHA-1 signing methods (alg:SigningMethod): "+strings.Join(m.SigningMethods, ", "))
	}
	if onlySHA1(m.DigestMethods, func(x string) bool { return digestAlgorithms[x] == crypto.SHA1 }) {
		out = append(out, "the IdP lists only SHA-1 digest methods (alg:DigestMethod): "+strings.Join(m.DigestMethods, ", "))
	}
	return out
}

// nsAlgSupport is the namespace of SAML Metadata Profile for Algorithm
// Support.
const nsAlgSupport = "urn:oasis:names:tc:SAML:metadata:algsupport"

// ParseIdPMetadata reads IdP metadata by the rules the SAML strategy
// applies to every copy it fetches, so that a tool (extauth check) can
// tell whether the strategy would accept it. The body is an
// EntityDescriptor, or an EntitiesDescriptor nested to any depth, and the
// IdP is the one named rules.EntityID, or the only one. It refuses a web
// page (ErrHTMLMetadata), XML the strategy never accepts (see parseXML),
// metadata that has expired at rules.Now, metadata not signed by
// rules.Certificate when it is set, an IdP without an entityID, a signing
// certificate that does not parse, and an IdP that publishes none.
func ParseIdPMetadata(body []byte, rules MetadataRules) (*IdPMetadata, error) {
	if looksLikeHTML(body) {
		return nil, ErrHTMLMetadata
	}
	root, err := parseXML(body)
	if err != nil {
		return nil, err
	}
	pm := &IdPMetadata{}
	if sig, _ := onlyChild(root, nsDSig, "Signature"); sig != nil {
		pm.SignatureMethod, pm.DigestMethod = signatureMethods(sig)
	}
	if rules.Certificate != nil {
		v := &verifier{certs: []*x509.Certificate{rules.Certificate}, now: func() time.Time { return rules.Now },
			policy: algPolicy{allowSHA1: rules.AllowSHA1}, wholeDocument: true}
		verified, err := v.verify(root)
		if errors.Is(err, errNotSigned) {
			return nil, errors.New("the metadata is not signed, and idp_metadata_certificate requires a signature")
		}
		if err != nil {
			return nil, fmt.Errorf("the metadata signature is invalid: %w", err)
		}
		// Read only what the signature covers.
		doc := etree.NewDocument()
		doc.SetRoot(verified)
		if body, err = doc.WriteToBytes(); err != nil {
			return nil, err
		}
		if root, err = parseXML(body); err != nil {
			return nil, err
		}
		pm.Signed = true
	}
	var candidates []*saml.EntityDescriptor
	var candidateEls []*etree.Element
	// Expiry and cache hints of the enclosing EntitiesDescriptors apply to
	// every entity inside them; the earliest one wins.
	note := func(vu *time.Time, cd *time.Duration) {
		if vu != nil && !vu.IsZero() && (pm.ValidUntil.IsZero() || vu.Before(pm.ValidUntil)) {
			pm.ValidUntil = *vu
		}
		if cd != nil && *cd > 0 && (pm.CacheDuration == 0 || *cd < pm.CacheDuration) {
			pm.CacheDuration = *cd
		}
	}
	switch {
	case is(root, nsMetadata, "EntityDescriptor"):
		var ed saml.EntityDescriptor
		if err := xml.Unmarshal(body, &ed); err != nil {
			return nil, err
		}
		candidates = append(candidates, &ed)
		candidateEls = append(candidateEls, root)
	case is(root, nsMetadata, "EntitiesDescriptor"):
		var eds saml.EntitiesDescriptor
		if err := xml.Unmarshal(body, &eds); err != nil {
			return nil, err
		}
		var walkDesc func(e *saml.EntitiesDescriptor, el *etree.Element, depth int)
		walkDesc = func(e *saml.EntitiesDescriptor, el *etree.Element, depth int) {
			if depth > 8 {
				return
			}
			note(e.ValidUntil, e.CacheDuration)
			kids := children(el, nsMetadata, "EntityDescriptor")
			for i := range e.EntityDescriptors {
				candidates = append(candidates, &e.EntityDescriptors[i])
				var kid *etree.Element
				if i < len(kids) {
					kid = kids[i]
				}
				candidateEls = append(candidateEls, kid)
			}
			nested := children(el, nsMetadata, "EntitiesDescriptor")
			for i := range e.EntitiesDescriptors {
				if i < len(nested) {
					walkDesc(&e.EntitiesDescriptors[i], nested[i], depth+1)
				}
			}
		}
		walkDesc(&eds, root, 0)
	default:
		return nil, errors.New("the root element is neither md:EntityDescriptor nor md:EntitiesDescriptor")
	}

	var idps []int
	for i, ed := range candidates {
		if len(ed.IDPSSODescriptors) == 0 {
			continue
		}
		if rules.EntityID == "" || ed.EntityID == rules.EntityID {
			idps = append(idps, i)
		}
	}
	switch {
	case len(idps) == 0 && rules.EntityID != "":
		return nil, fmt.Errorf("describes no IdP with entity ID %q", rules.EntityID)
	case len(idps) == 0:
		return nil, errors.New("describes no IdP (no IDPSSODescriptor)")
	case len(idps) > 1:
		return nil, fmt.Errorf("describes %d IdPs; use the URL of one IdP's metadata, or name the IdP with the IdPEntityID option", len(idps))
	}
	ed := candidates[idps[0]]
	if ed.EntityID == "" {
		return nil, errors.New("the IdP has no entityID")
	}
	pm.Entity = ed
	vu := ed.ValidUntil
	note(&vu, &ed.CacheDuration)
	if !pm.ValidUntil.IsZero() && !pm.ValidUntil.After(rules.Now) {
		return nil, fmt.Errorf("expired on %s (validUntil)", pm.ValidUntil.UTC().Format(time.RFC3339))
	}
	if el := candidateEls[idps[0]]; el != nil {
		pm.SigningMethods, pm.DigestMethods = algSupport(el)
	}

	for _, d := range ed.IDPSSODescriptors {
		for _, kd := range d.KeyDescriptors {
			if kd.Use != "" && kd.Use != "signing" {
				continue
			}
			for _, xc := range kd.KeyInfo.X509Data.X509Certificates {
				cert, err := parseBase64Cert(xc.Data)
				if err != nil {
					return nil, fmt.Errorf("a signing certificate does not parse: %w", err)
				}
				pm.SigningCerts = append(pm.SigningCerts, cert)
			}
		}
	}
	if len(pm.SigningCerts) == 0 {
		return nil, errors.New("no signing certificate, so no response could be verified")
	}
	return pm, nil
}

// looksLikeHTML reports whether body is a web page rather than XML
// metadata: what a login or error page answered with status 200 looks like.
func looksLikeHTML(body []byte) bool {
	b := bytes.TrimLeft(bytes.TrimPrefix(body, []byte("\xef\xbb\xbf")), " \t\r\n")
	if len(b) > 64 {
		b = b[:64]
	}
	low := bytes.ToLower(b)
	return bytes.HasPrefix(low, []byte("<!doctype html")) || bytes.HasPrefix(low, []byte("<html"))
}

// signatureMethods returns the SignatureMethod and first DigestMethod
// algorithms of a ds:Signature, whatever its shape.
func signatureMethods(sig *etree.Element) (sm, dm string) {
	si, _ := onlyChild(sig, nsDSig, "SignedInfo")
	if si == nil {
		return "", ""
	}
	if m, _ := onlyChild(si, nsDSig, "SignatureMethod"); m != nil {
		sm = attr(m, "Algorithm")
	}
	for _, ref := range children(si, nsDSig, "Reference") {
		if m, _ := onlyChild(ref, nsDSig, "DigestMethod"); m != nil {
			return sm, attr(m, "Algorithm")
		}
	}
	return sm, ""
}

// algSupport returns the alg:SigningMethod and alg:DigestMethod algorithms
// in the Extensions of the entity and of its IDPSSODescriptors.
func algSupport(ed *etree.Element) (signing, digest []string) {
	scan := func(parent *etree.Element) {
		for _, ext := range children(parent, nsMetadata, "Extensions") {
			for _, m := range children(ext, nsAlgSupport, "SigningMethod") {
				signing = append(signing, attr(m, "Algorithm"))
			}
			for _, m := range children(ext, nsAlgSupport, "DigestMethod") {
				digest = append(digest, attr(m, "Algorithm"))
			}
		}
	}
	scan(ed)
	for _, d := range children(ed, nsMetadata, "IDPSSODescriptor") {
		scan(d)
	}
	return signing, digest
}

func parseBase64Cert(s string) (*x509.Certificate, error) {
	s = strings.Map(func(r rune) rune {
		switch r {
		case ' ', '\t', '\r', '\n':
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
