package samlsp

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/extauth/extauth/internal/docfetch"
	"github.com/extauth/extauth/internal/outbound"
	"github.com/extauth/extauth/providers"
)

// FederationConfig is saml_additional_settings.federation: the SP signs
// users in through any IdP of a federation, whose signed aggregate lists
// them, instead of one IdP's metadata.
type FederationConfig struct {
	// MetadataURL is the federation's signed aggregate: an
	// md:EntitiesDescriptor signed with the key of SigningCertificatePEM.
	MetadataURL string
	// MDQURL, instead, is the federation's MDQ server
	// (draft-young-md-query): each IdP's metadata is asked for when a
	// sign-in needs it, signed with the key of SigningCertificatePEM.
	// EntityIDs then lists the IdPs users may choose.
	MDQURL string
	// MDQSHA1 asks the MDQ server for {sha1}<hex SHA-1 of the entity ID>
	// instead of the entity ID itself.
	MDQSHA1 bool
	// SigningCertificatePEM is the federation's metadata signing
	// certificate, pinned: nothing of an aggregate is used unless its
	// signature verifies with it.
	SigningCertificatePEM string
	// BackingFile, when set, keeps a copy of the last aggregate that
	// verified, so that a restart while the federation's server is down
	// still signs users in (it is verified again when read).
	BackingFile string
	// MaxValidity refuses an aggregate whose validUntil lies further ahead
	// (default DefaultMaxValidity): one signed for years would stay usable
	// for years after a key or an IdP was withdrawn.
	MaxValidity time.Duration
	// EntityIDs, RegistrationAuthorities and EntityCategories, when set,
	// restrict the IdPs users may choose: to those entity IDs, to IdPs
	// registered by those authorities (mdrpi:RegistrationInfo), to IdPs
	// with one of those entity categories. Each list given restricts; an
	// IdP must pass all of them.
	EntityIDs               []string
	RegistrationAuthorities []string
	EntityCategories        []string
	// DiscoveryURL, when set, is an external discovery service (the SAML
	// IdP Discovery Protocol, such as SeamlessAccess's) that users choose
	// their IdP at, instead of the SP's own page.
	DiscoveryURL string
}

// Enabled reports whether the configuration names a federation.
func (f FederationConfig) Enabled() bool { return f.MetadataURL != "" || f.MDQURL != "" }

// maxValidity is MaxValidity, or its default.
func (f FederationConfig) maxValidity() time.Duration {
	if f.MaxValidity <= 0 {
		return DefaultMaxValidity
	}
	return f.MaxValidity
}

// Defaults of a federation.
const (
	// DefaultMaxValidity is the longest validity accepted by default: the
	// federations' own are days to a few weeks (eduGAIN, InCommon, the UK
	// federation).
	DefaultMaxValidity = 28 * 24 * time.Hour
	// DefaultMaxAggregateBytes bounds an aggregate (the largest are
	// around 100 MB).
	DefaultMaxAggregateBytes = 256 << 20
	// DefaultIdPCacheSize bounds the IdPs whose parsed metadata an SP
	// keeps.
	DefaultIdPCacheSize = 512
)

// Federations shares federation aggregates between the SPs that use the
// same one (the tenants of one application): each is fetched, verified and
// kept in memory once, while any SP uses it. extauth.New makes one per
// Auth. Its zero value is ready to use.
type Federations struct {
	mu      sync.Mutex
	sources map[string]*aggregateSource
}

// aggregateSource is one federation's aggregate, fetched and refreshed in
// the background for every SP that uses it.
type aggregateSource struct {
	refresher
	set  *Federations
	key  string
	refs int // under set.mu

	url         *url.URL
	cert        *x509.Certificate
	backing     string
	maxValidity time.Duration
	maxBytes    int64
	refresh     time.Duration
	retry       time.Duration
	allowSHA1   bool
	docs        *docfetch.Fetcher
	now         func() time.Time
	log         *slog.Logger

	cur atomic.Pointer[aggCopy]
	// validators validate the copy in use (loop only).
	validators docfetch.Validators

	stop context.CancelFunc
	done chan struct{}
}

// aggCopy is a verified aggregate in use.
type aggCopy struct {
	agg       *aggregate
	fetched   time.Time
	refreshAt time.Time
	// fromFile is set for a copy read from the backing file.
	fromFile bool
}

// acquire returns the source for sp's federation, starting it when no SP
// uses it yet.
func (fs *Federations) acquire(sp *SP, cert *x509.Certificate, u *url.URL) *aggregateSource {
	f := sp.cfg.Federation
	maxValidity := f.maxValidity()
	maxBytes := sp.opts.MaxAggregateBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxAggregateBytes
	}
	sum := sha256.Sum256(cert.Raw)
	allowSHA1 := sp.policy.allowSHA1
	key := strings.Join([]string{f.MetadataURL, hex.EncodeToString(sum[:]), f.BackingFile, maxValidity.String(),
		fmt.Sprint(maxBytes, allowSHA1)}, "\x00")
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if s := fs.sources[key]; s != nil {
		s.refs++
		return s
	}
	s := &aggregateSource{set: fs, key: key, refs: 1, url: u, cert: cert, backing: f.BackingFile,
		maxValidity: maxValidity, maxBytes: maxBytes, refresh: sp.opts.MetadataRefresh, retry: sp.opts.MetadataRetry,
		allowSHA1: allowSHA1, docs: aggregateDocuments(sp.env.HTTPClient, maxBytes),
		now: sp.env.Now, log: sp.log, done: make(chan struct{})}
	s.init()
	if fs.sources == nil {
		fs.sources = map[string]*aggregateSource{}
	}
	fs.sources[key] = s
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	go func() {
		defer close(s.done)
		s.run(ctx)
	}()
	return s
}

// release drops one SP's use of s, stopping it after the last.
func (s *aggregateSource) release() {
	fs := s.set
	fs.mu.Lock()
	s.refs--
	last := s.refs == 0
	if last {
		delete(fs.sources, s.key)
	}
	fs.mu.Unlock()
	if last {
		s.stop()
		<-s.done
	}
}

func (s *aggregateSource) current() *aggCopy { return s.cur.Load() }

func (s *aggregateSource) rules() aggregateRules {
	return aggregateRules{cert: s.cert, now: s.now(), policy: algPolicy{allowSHA1: s.allowSHA1}, maxValidity: s.maxValidity}
}

// aggRules are the rules every signed document of sp's federation is read
// by: an aggregate, an MDQ answer.
func (sp *SP) aggRules() aggregateRules {
	return aggregateRules{cert: sp.fedCert, now: sp.env.Now(), policy: sp.policy, maxValidity: sp.cfg.Federation.maxValidity()}
}

func (s *aggregateSource) run(ctx context.Context) {
	if s.backing != "" {
		if err := s.loadBackingFile(); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("saml: the federation's backing file cannot be used", "file", s.backing, "err", err)
		}
	}
	s.loop(ctx, refreshLoop{
		now: s.now, retry: s.retry, maxRetry: s.refresh,
		have: func() bool { return s.current() != nil },
		fetch: func(ctx context.Context) (time.Duration, error) {
			c, err := s.fetch(ctx)
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("saml: federation metadata fetch failed; keeping the last good copy",
						"url", outbound.Redact(s.url), "have_copy", s.current() != nil, "err", err)
				}
				return 0, err
			}
			return c.refreshAt.Sub(s.now()), nil
		},
	})
}

// loadBackingFile reads and verifies the backing file, as it would a fetched
// aggregate.
func (s *aggregateSource) loadBackingFile() error {
	buf, err := os.ReadFile(s.backing)
	if err != nil {
		return err
	}
	agg, err := scanAggregate(buf, s.rules())
	if err != nil {
		return err
	}
	s.keep(agg, s.now(), time.Time{}, true)
	s.log.Info("saml: federation metadata loaded from the backing file", "file", s.backing,
		"entities", agg.entities, "idps", len(agg.idps), "valid_until", agg.validUntil.UTC().Format(time.RFC3339))
	return nil
}

// keep makes agg the copy in use, fetched at fetched (now for a zero
// one), fromFile when the backing file gave it.
func (s *aggregateSource) keep(agg *aggregate, now, fetched time.Time, fromFile bool) *aggCopy {
	refresh := s.refresh
	if agg.cacheDuration > 0 && agg.cacheDuration < refresh {
		refresh = agg.cacheDuration
	}
	if fetched.IsZero() {
		fetched = now
	}
	c := &aggCopy{agg: agg, fetched: fetched, refreshAt: now.Add(refresh), fromFile: fromFile}
	// Refresh well before the copy expires, so that one failed attempt
	// does not leave us without one.
	if early := now.Add(agg.validUntil.Sub(now) / 2); early.Before(c.refreshAt) {
		c.refreshAt = early
	}
	s.cur.Store(c)
	return c
}

// fetch gets the aggregate, conditionally on the copy in use, verifies and
// indexes it, and keeps it (and writes the backing file).
func (s *aggregateSource) fetch(ctx context.Context) (*aggCopy, error) {
	var v docfetch.Validators
	cur := s.current()
	if cur != nil && !cur.fromFile {
		v = s.validators
	}
	doc, err := s.docs.Get(ctx, s.url.String(), v)
	if err != nil {
		return nil, err
	}
	now := s.now()
	if doc.NotModified {
		// Still the copy we have: it is used on its own terms, validUntil
		// first.
		if !cur.agg.validUntil.After(now) {
			return nil, fmt.Errorf("federation metadata: not modified, but our copy expired on %s", cur.agg.validUntil.UTC().Format(time.RFC3339))
		}
		return s.keep(cur.agg, now, cur.fetched, cur.fromFile), nil
	}
	agg, err := scanAggregate(doc.Body, s.rules())
	if err != nil {
		return nil, fmt.Errorf("federation metadata: %w", err)
	}
	c := s.keep(agg, now, time.Time{}, false)
	s.validators = doc.Validators
	s.log.Info("saml: federation metadata loaded", "url", outbound.Redact(s.url), "entities", agg.entities, "idps", len(agg.idps),
		"expired_idps", agg.expired, "valid_until", agg.validUntil.UTC().Format(time.RFC3339),
		"next_refresh", c.refreshAt.Sub(now).Round(time.Second).String())
	if s.backing != "" {
		if err := writeFileAtomic(s.backing, doc.Body); err != nil {
			s.log.Warn("saml: cannot write the federation's backing file", "file", s.backing, "err", err)
		}
	}
	return c, nil
}

// writeFileAtomic replaces path with data, so that a reader (a restart)
// never sees half a file.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// federation is an SP's view of its federation: the shared aggregate, the
// host's restrictions, and the IdPs it has parsed.
type federation struct {
	// src is the aggregate; mdq, instead, the MDQ client.
	src *aggregateSource
	mdq *mdqClient
	idpFilter
	cache *lru[string, *fedEntry]
}

// idpFilter is the host's restrictions on the IdPs users may choose; a nil
// set does not restrict.
type idpFilter struct {
	entityIDs  map[string]bool
	authority  map[string]bool
	categories map[string]bool
}

func newIDPFilter(f FederationConfig) idpFilter {
	set := func(xs []string) map[string]bool {
		if len(xs) == 0 {
			return nil
		}
		m := make(map[string]bool, len(xs))
		for _, x := range xs {
			m[x] = true
		}
		return m
	}
	return idpFilter{entityIDs: set(f.EntityIDs), authority: set(f.RegistrationAuthorities), categories: set(f.EntityCategories)}
}

// fedEntry is an IdP's parsed metadata, for the aggregate it came from:
// weakly, so that an entry not looked up since a refresh does not keep the
// old aggregate, tens of MB, alive.
type fedEntry struct {
	agg weak.Pointer[aggregate]
	md  *idpMetadata
}

func newFederation(sp *SP, src *aggregateSource) *federation {
	size := sp.opts.IdPCacheSize
	if size <= 0 {
		size = DefaultIdPCacheSize
	}
	return &federation{src: src, idpFilter: newIDPFilter(sp.cfg.Federation), cache: newLRU[string, *fedEntry](size)}
}

// allows reports whether the host's restrictions let users choose e.
func (f *idpFilter) allows(e *fedIdP) bool {
	if f.entityIDs != nil && !f.entityIDs[e.entityID] {
		return false
	}
	if f.authority != nil && !f.authority[e.registrationAuthority] {
		return false
	}
	// An IdP declares the categories whose rules it follows (Research and
	// Scholarship, CoCo) as ones it supports; those it belongs to count
	// too.
	in := func(c string) bool { return f.categories[c] }
	if f.categories != nil && !slices.ContainsFunc(e.supports, in) && !slices.ContainsFunc(e.categories, in) {
		return false
	}
	return true
}

// errUnusableIdP is the cause of a sign-in for an IdP of the federation
// that no sign-in can start at (fedIdP.unusable).
var errUnusableIdP = errors.New("the identity provider cannot be used")

// usable refuses a sign-in at e when none can start there, or when its
// validUntil has passed since its aggregate was read.
func (sp *SP) usable(e *fedIdP) *providers.Error {
	if why := e.unusable(); why != "" {
		return &providers.Error{Code: providers.CodeInvalidResponse, Provider: Name,
			Message: "the identity provider cannot be used for sign-in here",
			Err:     fmt.Errorf("%.200q: %s: %w", e.entityID, why, errUnusableIdP)}
	}
	if !e.validUntil.IsZero() && !sp.env.Now().Before(e.validUntil) {
		return invalid("the identity provider is not one this application accepts",
			fmt.Errorf("%.200q: its metadata expired on %s (validUntil): %w", e.entityID, e.validUntil.UTC().Format(time.RFC3339), errUnknownIdP))
	}
	return nil
}

// aggregate returns the aggregate in use, waiting for a first one as a
// sign-in waits for IdP metadata.
func (sp *SP) aggregate(ctx context.Context) (*aggregate, *providers.Error) {
	src := sp.fed.src
	c := waitFor(ctx, &src.refresher, src.current)
	if c == nil {
		err := src.err()
		if err == nil {
			// The first fetch is under way: an aggregate takes seconds.
			err = errNotLoaded
		}
		return nil, &providers.Error{Code: providers.CodeProviderUnavailable, Provider: Name,
			Message: "the federation's metadata is not available yet", Err: err}
	}
	if !c.agg.validUntil.After(sp.env.Now()) {
		return nil, &providers.Error{Code: providers.CodeProviderUnavailable, Provider: Name,
			Message: "the federation's metadata has expired", Err: fmt.Errorf("validUntil %s; last refresh: %v",
				c.agg.validUntil.UTC().Format(time.RFC3339), src.err())}
	}
	return c.agg, nil
}

// currentMetadata is the one IdP's metadata in use, nil in a federation or
// before a first copy.
func (sp *SP) currentMetadata() *idpMetadata {
	if sp.md == nil {
		return nil
	}
	return sp.md.current()
}

// federationReadyError says why a federation cannot sign anyone in: no
// aggregate yet, or an expired one (with the last fetch error), or a
// signing certificate outside its validity, which no new aggregate can
// verify with.
func (sp *SP) federationReadyError() error {
	src := sp.fed.src
	now := sp.env.Now()
	if src == nil {
		if now.After(sp.fedCert.NotAfter) {
			return fmt.Errorf("the federation's signing certificate expired on %s", sp.fedCert.NotAfter.UTC().Format(time.RFC3339))
		}
		return nil
	}
	c := src.current()
	switch {
	case c == nil && src.err() != nil:
		return fmt.Errorf("no copy of the federation's metadata yet: %w", src.err())
	case c == nil:
		return errors.New("no copy of the federation's metadata yet")
	case !c.agg.validUntil.After(now):
		return fmt.Errorf("the federation's metadata expired on %s and no newer copy could be loaded: %v",
			c.agg.validUntil.UTC().Format(time.RFC3339), src.err())
	case now.After(sp.fedCert.NotAfter):
		return fmt.Errorf("the federation's signing certificate expired on %s", sp.fedCert.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}

// errNotLoaded is the cause of a sign-in that finds no aggregate while the
// first fetch of one is still under way.
var errNotLoaded = errors.New("federation metadata not loaded yet: the first fetch of the aggregate is under way")

// errUnknownIdP is the cause of a sign-in for an IdP the federation does
// not list, or the host's restrictions leave out.
var errUnknownIdP = errors.New("not an IdP of the federation that this application accepts")

// idpFor returns the metadata of the IdP entityID names: the one IdP's,
// or in a federation that IdP's entry, parsed on first use.
func (sp *SP) idpFor(ctx context.Context, entityID string) (*idpMetadata, *providers.Error) {
	if sp.fed == nil {
		return sp.metadata(ctx)
	}
	if entityID == "" {
		return nil, invalid("no identity provider was chosen", errUnknownIdP)
	}
	if sp.fed.mdq != nil {
		e, perr := sp.fed.mdq.lookup(ctx, entityID)
		if perr != nil {
			return nil, perr
		}
		if perr := sp.usable(e.e); perr != nil {
			return nil, perr
		}
		return e.md, nil
	}
	agg, perr := sp.aggregate(ctx)
	if perr != nil {
		return nil, perr
	}
	e := agg.byID[entityID]
	if e == nil || !sp.fed.allows(e) {
		return nil, invalid("the identity provider is not one this application accepts", fmt.Errorf("%.200q: %w", entityID, errUnknownIdP))
	}
	if perr := sp.usable(e); perr != nil {
		return nil, perr
	}
	if c, ok := sp.fed.cache.get(entityID); ok && c.agg.Value() == agg {
		return c.md, nil
	}
	md, err := sp.parseEntity(agg, e)
	if err != nil {
		return nil, &providers.Error{Code: providers.CodeProviderUnavailable, Provider: Name,
			Message: "the identity provider's metadata cannot be used", Err: err}
	}
	sp.fed.cache.put(entityID, &fedEntry{agg: weak.Make(agg), md: md})
	return md, nil
}

// parseEntity reads one IdP out of the aggregate, under the rules of an
// IdP's own metadata (the aggregate's signature covers it).
func (sp *SP) parseEntity(agg *aggregate, e *fedIdP) (*idpMetadata, error) {
	now := sp.env.Now()
	doc := standalone(agg.buf[e.start:e.end], e.qname, e.ns)
	pm, err := ParseIdPMetadata(doc, MetadataRules{EntityID: e.entityID, Now: now, AllowSHA1: sp.policy.allowSHA1})
	if err != nil {
		return nil, fmt.Errorf("%.200q: %w", e.entityID, err)
	}
	pm.Signed = true
	md := sp.newIdPMetadata(pm, now)
	return md, sp.prepare(md)
}

// FederationMetadata is what a federation's aggregate holds, as the SAML
// strategy reads it.
type FederationMetadata struct {
	// Entities counts its entities, service providers included; IdPs its
	// IdPs in use, and ExpiredIdPs those left out for their own
	// validUntil.
	Entities, IdPs, ExpiredIdPs int
	// Allowed counts the IdPs the rules' restrictions leave users; Missing
	// lists the rules' entity IDs the aggregate does not list as IdPs.
	Allowed int
	Missing []string
	// Unusable counts the allowed IdPs no sign-in can start at (no SAML
	// 2.0 single sign-on endpoint with the HTTP-Redirect or HTTP-POST
	// binding, no signing key, metadata that does not parse): the
	// discovery page leaves them out. Included in Allowed.
	Unusable int
	// OutOfDate counts the allowed, usable IdPs none of whose signing
	// certificates is within its validity dates now: their keys verify
	// all the same unless Config.EnforceIdPCertificateDates.
	OutOfDate int
	// ValidUntil and CacheDuration are the aggregate's own.
	ValidUntil    time.Time
	CacheDuration time.Duration
	// SignatureMethod and DigestMethod are those of its signature.
	SignatureMethod, DigestMethod string
}

// FederationRules are the rules ParseFederationMetadata applies, the
// strategy's.
type FederationRules struct {
	// Certificate is the federation's signing certificate.
	Certificate *x509.Certificate
	// Now is the time validUntil is checked against.
	Now time.Time
	// MaxValidity is FederationConfig.MaxValidity (default
	// DefaultMaxValidity).
	MaxValidity time.Duration
	// AllowSHA1 applies Options.AllowSHA1 to the aggregate's signature.
	AllowSHA1 bool
	// EntityIDs, RegistrationAuthorities and EntityCategories are the
	// restrictions of FederationConfig.
	EntityIDs, RegistrationAuthorities, EntityCategories []string
}

// ParseFederationMetadata verifies and reads a federation's aggregate by
// the rules the SAML strategy applies to every copy it fetches, so that a
// tool (extauth check) can tell whether the strategy would use it.
func ParseFederationMetadata(body []byte, rules FederationRules) (*FederationMetadata, error) {
	if rules.MaxValidity <= 0 {
		rules.MaxValidity = DefaultMaxValidity
	}
	agg, err := scanAggregate(body, aggregateRules{cert: rules.Certificate, now: rules.Now,
		policy: algPolicy{allowSHA1: rules.AllowSHA1}, maxValidity: rules.MaxValidity})
	if err != nil {
		return nil, err
	}
	f := newIDPFilter(FederationConfig{EntityIDs: rules.EntityIDs,
		RegistrationAuthorities: rules.RegistrationAuthorities, EntityCategories: rules.EntityCategories})
	out := &FederationMetadata{Entities: agg.entities, IdPs: len(agg.idps), ExpiredIdPs: agg.expired,
		ValidUntil: agg.validUntil, CacheDuration: agg.cacheDuration, SignatureMethod: agg.sigMethod, DigestMethod: agg.digestMethod}
	for _, e := range agg.idps {
		if !f.allows(e) {
			continue
		}
		out.Allowed++
		if e.unusable() != "" {
			out.Unusable++
			continue
		}
		pm, err := ParseIdPMetadata(standalone(agg.buf[e.start:e.end], e.qname, e.ns),
			MetadataRules{EntityID: e.entityID, Now: rules.Now, AllowSHA1: rules.AllowSHA1})
		if err != nil {
			out.Unusable++
			continue
		}
		if !slices.ContainsFunc(pm.SigningCerts, func(c *x509.Certificate) bool {
			return !rules.Now.Before(c.NotBefore) && !rules.Now.After(c.NotAfter)
		}) {
			out.OutOfDate++
		}
	}
	for _, id := range rules.EntityIDs {
		if agg.byID[id] == nil {
			out.Missing = append(out.Missing, id)
		}
	}
	return out, nil
}
