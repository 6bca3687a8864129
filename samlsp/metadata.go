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

// parseMetadata reads an EntityDescriptor or an EntitiesDescriptor (nested
// to any depth) and picks the IdP: the one named entityID, or the only one.
func parseMetadata(body []byte, entityID string, now time.Time, defaultRefresh time.Duration) (*idpMetadata, error) {
	if err := checkXML(body); err != nil {
		return nil, fmt.Errorf("saml metadata: %w", err)
	}
	if err := xrv.Validate(bytes.NewReader(body)); err != nil {
		return nil, fmt.Errorf("saml metadata: %w", err)
	}
	var root struct{ XMLName xml.Name }
	if err := xml.Unmarshal(body, &root); err != nil {
		return nil, fmt.Errorf("saml metadata: %w", err)
	}
	const nsMD = "urn:oasis:names:tc:SAML:2.0:metadata"
	var candidates []*saml.EntityDescriptor
	// Expiry and cache hints of the enclosing EntitiesDescriptors apply to
	// every entity inside them; the earliest one wins.
	var validUntil time.Time
	var cacheDuration time.Duration
	note := func(vu *time.Time, cd *time.Duration) {
		if vu != nil && !vu.IsZero() && (validUntil.IsZero() || vu.Before(validUntil)) {
			validUntil = *vu
		}
		if cd != nil && *cd > 0 && (cacheDuration == 0 || *cd < cacheDuration) {
			cacheDuration = *cd
		}
	}
	switch {
	case root.XMLName.Space == nsMD && root.XMLName.Local == "EntityDescriptor":
		var ed saml.EntityDescriptor
		if err := xml.Unmarshal(body, &ed); err != nil {
			return nil, fmt.Errorf("saml metadata: %w", err)
		}
		candidates = append(candidates, &ed)
	case root.XMLName.Space == nsMD && root.XMLName.Local == "EntitiesDescriptor":
		var eds saml.EntitiesDescriptor
		if err := xml.Unmarshal(body, &eds); err != nil {
			return nil, fmt.Errorf("saml metadata: %w", err)
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
		return nil, errors.New("saml metadata: root is neither EntityDescriptor nor EntitiesDescriptor")
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
		return nil, fmt.Errorf("saml metadata: no IdP with entity ID %q", entityID)
	case len(idps) == 0:
		return nil, errors.New("saml metadata: no IDPSSODescriptor")
	case len(idps) > 1:
		return nil, fmt.Errorf("saml metadata: %d IdPs; choose one with the IdP entity ID option", len(idps))
	}
	ed := idps[0]
	if ed.EntityID == "" {
		return nil, errors.New("saml metadata: the IdP has no entityID")
	}
	vu := ed.ValidUntil
	note(&vu, &ed.CacheDuration)
	if !validUntil.IsZero() && !validUntil.After(now) {
		return nil, fmt.Errorf("saml metadata: expired at %s", validUntil.UTC().Format(time.RFC3339))
	}

	md := &idpMetadata{entity: ed, fetched: now}
	for _, d := range ed.IDPSSODescriptors {
		for _, kd := range d.KeyDescriptors {
			if kd.Use != "" && kd.Use != "signing" {
				continue
			}
			for _, xc := range kd.KeyInfo.X509Data.X509Certificates {
				cert, err := parseBase64Cert(xc.Data)
				if err != nil {
					return nil, fmt.Errorf("saml metadata: signing certificate: %w", err)
				}
				md.certs = append(md.certs, cert)
			}
		}
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
	if len(md.certs) == 0 {
		return nil, errors.New("saml metadata: the IdP publishes no signing certificate")
	}

	refresh := defaultRefresh
	if cacheDuration > 0 && cacheDuration < refresh {
		refresh = cacheDuration
	}
	md.refreshAt = now.Add(refresh)
	if !validUntil.IsZero() {
		// Refresh well before the copy expires, so that one failed attempt
		// does not leave us with expired metadata.
		if early := now.Add(validUntil.Sub(now) / 2); early.Before(md.refreshAt) {
			md.refreshAt = early
		}
	}
	return md, nil
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
