package samlsp

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/crewjam/saml"
	xrv "github.com/mattermost/xml-roundtrip-validator"

	"github.com/extauth/extauth/internal/outbound"
	"github.com/extauth/extauth/providers"
)

// idpMetadata is one good copy of the IdP's metadata, reduced to what we use.
type idpMetadata struct {
	entity *saml.EntityDescriptor
	// certs are every signing certificate the IdP publishes: during a key
	// rotation it lists the old and the new one, and either may sign.
	certs       []*x509.Certificate
	ssoRedirect string
	ssoPost     string
	sloRedirect string
	fetched     time.Time
	// refreshAt is when the copy should be fetched again, from
	// cacheDuration, validUntil or the default period.
	refreshAt time.Time
}

// metadataCache holds the last good copy and refreshes it in the
// background. Readers never block: they see the last copy or nil.
type metadataCache struct {
	sp      *SP
	cur     atomic.Pointer[idpMetadata]
	lastErr atomic.Pointer[error]
	kicks   chan struct{}
	// fetches counts attempts, for tests and logs.
	fetches atomic.Int64
}

func newMetadataCache(sp *SP) *metadataCache {
	return &metadataCache{sp: sp, kicks: make(chan struct{}, 1)}
}

func (c *metadataCache) current() *idpMetadata { return c.cur.Load() }

// kick asks the refresh loop for an early attempt; it is how a sign-in that
// found no metadata makes the next one succeed as soon as the IdP is back.
func (c *metadataCache) kick() {
	select {
	case c.kicks <- struct{}{}:
	default:
	}
}

// err returns the last fetch error, nil after a success.
func (c *metadataCache) err() error {
	if p := c.lastErr.Load(); p != nil {
		return *p
	}
	return nil
}

// minKickSpacing stops a burst of sign-ins against a dead IdP from turning
// into a burst of metadata fetches.
const minKickSpacing = time.Second

func (c *metadataCache) run(ctx context.Context) {
	opts := c.sp.opts
	retry := opts.MetadataRetry
	for {
		started := time.Now()
		md, err := c.fetch(ctx)
		if ctx.Err() != nil {
			return
		}
		var wait time.Duration
		if err != nil {
			c.lastErr.Store(&err)
			c.sp.log.Warn("saml: IdP metadata fetch failed; keeping the last good copy",
				"url", outbound.Redact(c.sp.idpMeta), "have_copy", c.current() != nil, "err", err)
			wait = retry
			retry = min(retry*2, opts.MetadataRefresh)
		} else {
			c.cur.Store(md)
			c.lastErr.Store(nil)
			retry = opts.MetadataRetry
			wait = max(md.refreshAt.Sub(c.sp.env.Now()), opts.MetadataRetry)
			c.sp.log.Info("saml: IdP metadata loaded", "entity_id", md.entity.EntityID,
				"signing_certs", len(md.certs), "next_refresh", wait.Round(time.Second).String())
		}
		timer := time.NewTimer(wait)
	waiting:
		for {
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-timer.C:
				break waiting
			case <-c.kicks:
				// A kick only matters while there is no copy at all; a
				// working copy is refreshed on its own schedule.
				if c.current() == nil && time.Since(started) >= minKickSpacing {
					timer.Stop()
					break waiting
				}
			}
		}
	}
}

// fetch downloads, bounds and parses the metadata.
func (c *metadataCache) fetch(ctx context.Context) (*idpMetadata, error) {
	c.fetches.Add(1)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.sp.idpMeta.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("metadata request: %w", err)
	}
	req.Header.Set("Accept", "application/samlmetadata+xml, application/xml;q=0.9, text/xml;q=0.8")
	resp, err := c.sp.env.HTTPClient.Do(req)
	if err != nil {
		return nil, providers.TransportError(err, "saml metadata")
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("saml metadata: HTTP status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, DefaultMetadataMaxBytes+1))
	if err != nil {
		return nil, providers.TransportError(err, "saml metadata")
	}
	if len(body) > DefaultMetadataMaxBytes {
		return nil, fmt.Errorf("saml metadata: too large (over %d bytes)", DefaultMetadataMaxBytes)
	}
	return parseMetadata(body, c.sp.opts.IdPEntityID, c.sp.env.Now(), c.sp.opts.MetadataRefresh)
}

// parseMetadata reads the metadata with ParseIdPMetadata and schedules its
// next refresh.
func parseMetadata(body []byte, entityID string, now time.Time, defaultRefresh time.Duration) (*idpMetadata, error) {
	pm, err := ParseIdPMetadata(body, entityID, now)
	if err != nil {
		return nil, fmt.Errorf("saml metadata: %w", err)
	}
	md := &idpMetadata{entity: pm.Entity, certs: pm.SigningCerts, fetched: now}
	for _, d := range pm.Entity.IDPSSODescriptors {
		for _, s := range d.SingleSignOnServices {
			if s.Binding == saml.HTTPRedirectBinding && md.ssoRedirect == "" {
				md.ssoRedirect = s.Location
			}
			if s.Binding == saml.HTTPPostBinding && md.ssoPost == "" {
				md.ssoPost = s.Location
			}
		}
		for _, s := range d.SingleLogoutServices {
			if s.Binding == saml.HTTPRedirectBinding && md.sloRedirect == "" {
				md.sloRedirect = s.Location
			}
		}
	}

	refresh := defaultRefresh
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
	return md, nil
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
}

// ParseIdPMetadata reads IdP metadata by the rules the SAML strategy
// applies to every copy it fetches, so that a tool (extauth check) can
// tell whether the strategy would accept it. The body is an
// EntityDescriptor, or an EntitiesDescriptor nested to any depth, and the
// IdP is the one named entityID (Options.IdPEntityID), or the only one. It
// refuses XML the strategy never accepts (a DOCTYPE or any directive, XML
// that does not survive a round trip), metadata that has expired at now,
// an IdP without an entityID, a signing certificate that does not parse,
// and an IdP that publishes none.
func ParseIdPMetadata(body []byte, entityID string, now time.Time) (*IdPMetadata, error) {
	if err := checkXML(body); err != nil {
		return nil, err
	}
	if err := xrv.Validate(bytes.NewReader(body)); err != nil {
		return nil, err
	}
	var root struct{ XMLName xml.Name }
	if err := xml.Unmarshal(body, &root); err != nil {
		return nil, err
	}
	const nsMD = "urn:oasis:names:tc:SAML:2.0:metadata"
	var candidates []*saml.EntityDescriptor
	// Expiry and cache hints of the enclosing EntitiesDescriptors apply to
	// every entity inside them; the earliest one wins.
	pm := &IdPMetadata{}
	note := func(vu *time.Time, cd *time.Duration) {
		if vu != nil && !vu.IsZero() && (pm.ValidUntil.IsZero() || vu.Before(pm.ValidUntil)) {
			pm.ValidUntil = *vu
		}
		if cd != nil && *cd > 0 && (pm.CacheDuration == 0 || *cd < pm.CacheDuration) {
			pm.CacheDuration = *cd
		}
	}
	switch {
	case root.XMLName.Space == nsMD && root.XMLName.Local == "EntityDescriptor":
		var ed saml.EntityDescriptor
		if err := xml.Unmarshal(body, &ed); err != nil {
			return nil, err
		}
		candidates = append(candidates, &ed)
	case root.XMLName.Space == nsMD && root.XMLName.Local == "EntitiesDescriptor":
		var eds saml.EntitiesDescriptor
		if err := xml.Unmarshal(body, &eds); err != nil {
			return nil, err
		}
		var walk func(e *saml.EntitiesDescriptor, depth int)
		walk = func(e *saml.EntitiesDescriptor, depth int) {
			if depth > 8 {
				return
			}
			note(e.ValidUntil, e.CacheDuration)
			for i := range e.EntityDescriptors {
				candidates = append(candidates, &e.EntityDescriptors[i])
			}
			for i := range e.EntitiesDescriptors {
				walk(&e.EntitiesDescriptors[i], depth+1)
			}
		}
		walk(&eds, 0)
	default:
		return nil, errors.New("the root element is neither md:EntityDescriptor nor md:EntitiesDescriptor")
	}

	var idps []*saml.EntityDescriptor
	for _, ed := range candidates {
		if len(ed.IDPSSODescriptors) == 0 {
			continue
		}
		if entityID == "" || ed.EntityID == entityID {
			idps = append(idps, ed)
		}
	}
	switch {
	case len(idps) == 0 && entityID != "":
		return nil, fmt.Errorf("describes no IdP with entity ID %q", entityID)
	case len(idps) == 0:
		return nil, errors.New("describes no IdP (no IDPSSODescriptor)")
	case len(idps) > 1:
		return nil, fmt.Errorf("describes %d IdPs; use the URL of one IdP's metadata, or name the IdP with the IdPEntityID option", len(idps))
	}
	ed := idps[0]
	if ed.EntityID == "" {
		return nil, errors.New("the IdP has no entityID")
	}
	pm.Entity = ed
	vu := ed.ValidUntil
	note(&vu, &ed.CacheDuration)
	if !pm.ValidUntil.IsZero() && !pm.ValidUntil.After(now) {
		return nil, fmt.Errorf("expired on %s (validUntil)", pm.ValidUntil.UTC().Format(time.RFC3339))
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
