package samlsp

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/extauth/extauth/internal/docfetch"
	"github.com/extauth/extauth/providers"
)

// An MDQ server (draft-young-md-query) answers
// GET {mdq_url}entities/{url-encoded entity ID} with that one entity's
// metadata, signed by the federation: the SP asks for an IdP when a sign-in
// needs it instead of holding the whole aggregate. Each answer is verified
// with the pinned certificate by the rules of an aggregate (one signature,
// first child, exclusive C14N, a validUntil within max_validity), kept
// until its cacheDuration or validUntil, then revalidated with its ETag.
// An entity the server does not know is remembered as unknown for a while,
// and fetches of entities not in the cache are rate-limited, so that
// sign-ins naming junk entity IDs cannot make the SP hammer the server.

// Bounds of an MDQ client.
const (
	// mdqCacheSize bounds the entities kept; mdqUnknownSize the entity IDs
	// remembered as unknown.
	mdqCacheSize   = 1024
	mdqUnknownSize = 4096
	// mdqUnknownFor is how long an unknown entity ID stays unknown.
	mdqUnknownFor = 10 * time.Minute
	// mdqDefaultCache is how long an answer without a cacheDuration is
	// used before it is revalidated.
	mdqDefaultCache = time.Hour
	// mdqRate and mdqBurst bound the fetches of entities not in the
	// cache: per second, and at once.
	mdqRate  = 5
	mdqBurst = 20
)

// The results of MDQ look-ups, as MDQStats counts them.
const (
	MDQHit       = "hit"
	MDQFetched   = "fetched"
	MDQUnknown   = "unknown"
	MDQError     = "error"
	MDQLimited   = "limited"
	MDQNotListed = "not_listed"
)

var mdqResults = []string{MDQHit, MDQFetched, MDQUnknown, MDQError, MDQLimited, MDQNotListed}

// mdqClient is an SP's MDQ client and cache.
type mdqClient struct {
	sp   *SP
	base *url.URL
	sha1 bool

	cache   *lru[string, *mdqEntry]
	unknown *lru[string, time.Time]

	mu     sync.Mutex
	flight map[string]*mdqCall
	// tokens and refilled are the rate limiter of fetches.
	tokens   float64
	refilled time.Time

	counts [6]atomic.Int64
}

type mdqEntry struct {
	agg     *aggregate
	e       *fedIdP
	md      *idpMetadata
	expires time.Time
	etag    string
}

type mdqCall struct {
	done  chan struct{}
	entry *mdqEntry
	err   *providers.Error
}

func newMDQClient(sp *SP, base *url.URL) *mdqClient {
	return &mdqClient{sp: sp, base: base, sha1: sp.cfg.Federation.MDQSHA1, cache: newLRU[string, *mdqEntry](mdqCacheSize),
		unknown: newLRU[string, time.Time](mdqUnknownSize), flight: map[string]*mdqCall{}, tokens: mdqBurst}
}

func (c *mdqClient) count(result string) {
	for i, r := range mdqResults {
		if r == result {
			c.counts[i].Add(1)
		}
	}
}

// MDQStats counts the SP's MDQ look-ups by result since it started: MDQHit
// (the cache answered), MDQFetched (the server did), MDQUnknown (the server,
// or the negative cache, does not know the entity), MDQError, MDQLimited
// (refused by the rate limit), MDQNotListed (not in entity_ids, never
// asked). Nil without an MDQ server.
func (sp *SP) MDQStats() map[string]int64 {
	if sp.fed == nil || sp.fed.mdq == nil {
		return nil
	}
	out := make(map[string]int64, len(mdqResults))
	for i, r := range mdqResults {
		out[r] = sp.fed.mdq.counts[i].Load()
	}
	return out
}

// lookup returns the entity's entry: from the cache while it is fresh,
// else from the server (one request per entity at a time).
func (c *mdqClient) lookup(ctx context.Context, entityID string) (*mdqEntry, *providers.Error) {
	now := c.sp.env.Now()
	if len(entityID) > maxEntityIDLen {
		c.count(MDQNotListed)
		return nil, invalid("the identity provider is not one this application accepts", errUnknownIdP)
	}
	if f := c.sp.fed; f.entityIDs != nil && !f.entityIDs[entityID] {
		c.count(MDQNotListed)
		return nil, invalid("the identity provider is not one this application accepts", fmt.Errorf("%.200q: %w", entityID, errUnknownIdP))
	}
	old, ok := c.cache.get(entityID)
	if ok && now.Before(old.expires) {
		c.count(MDQHit)
		return old, nil
	}
	if until, ok := c.unknown.get(entityID); ok && now.Before(until) {
		c.count(MDQUnknown)
		return nil, invalid("the identity provider is not one this application accepts",
			fmt.Errorf("%.200q: the MDQ server does not know it: %w", entityID, errUnknownIdP))
	}
	c.mu.Lock()
	if call, ok := c.flight[entityID]; ok {
		c.mu.Unlock()
		select {
		case <-call.done:
			return call.entry, call.err
		case <-ctx.Done():
			return nil, &providers.Error{Code: providers.CodeTimeout, Provider: Name, Message: "the MDQ server did not answer in time", Err: ctx.Err()}
		}
	}
	if !c.allow(now) {
		c.mu.Unlock()
		c.count(MDQLimited)
		if old != nil && now.Before(old.agg.validUntil) {
			// Stale but still valid: better than nothing while limited.
			return old, nil
		}
		return nil, &providers.Error{Code: providers.CodeProviderUnavailable, Provider: Name,
			Message: "too many identity provider look-ups; please try again shortly", Err: errors.New("MDQ fetches are rate-limited")}
	}
	call := &mdqCall{done: make(chan struct{})}
	c.flight[entityID] = call
	c.mu.Unlock()
	call.entry, call.err = c.fetch(ctx, entityID, old)
	c.mu.Lock()
	delete(c.flight, entityID)
	c.mu.Unlock()
	close(call.done)
	return call.entry, call.err
}

// allow takes a token of the rate limiter; c.mu is held.
func (c *mdqClient) allow(now time.Time) bool {
	if !c.refilled.IsZero() {
		c.tokens = min(mdqBurst, c.tokens+now.Sub(c.refilled).Seconds()*mdqRate)
	}
	c.refilled = now
	if c.tokens < 1 {
		return false
	}
	c.tokens--
	return true
}

// entityURL is the entity's MDQ request URL.
func (c *mdqClient) entityURL(entityID string) string { return MDQEntityURL(c.base, entityID, c.sha1) }

// MDQEntityURL is where the MDQ server at base answers for entityID:
// {base}entities/{the URL-encoded entity ID}, or with sha1 the
// {sha1}<hex SHA-1> transform of it (draft-young-md-query).
func MDQEntityURL(base *url.URL, entityID string, sha1IDs bool) string {
	id := entityID
	if sha1IDs {
		sum := sha1.Sum([]byte(entityID))
		id = "{sha1}" + hex.EncodeToString(sum[:])
	}
	b := base.String()
	if !strings.HasSuffix(b, "/") {
		b += "/"
	}
	return b + "entities/" + mdqEscape(id)
}

// mdqEscape percent-encodes every byte of s but RFC 3986's unreserved
// characters, as the protocol asks of an identifier in a path: a ':' or
// '/' left bare would mean something else to some servers.
func mdqEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		const hexd = "0123456789ABCDEF"
		b.WriteByte('%')
		b.WriteByte(hexd[c>>4])
		b.WriteByte(hexd[c&15])
	}
	return b.String()
}

// fetch asks the server for the entity, revalidating old when there is one.
//
// An entity the server does not know is answered 404 by some servers and,
// by pyFF (SeamlessAccess's and many federations'), with 200 and a signed,
// empty EntitiesDescriptor: either way, a verified answer that does not
// describe the entity is an unknown entity, remembered as one, not a
// failure of the server.
func (c *mdqClient) fetch(ctx context.Context, entityID string, old *mdqEntry) (*mdqEntry, *providers.Error) {
	sp := c.sp
	fail := func(err error) (*mdqEntry, *providers.Error) {
		c.count(MDQError)
		sp.log.Warn("saml: MDQ look-up failed", "entity_id", entityID, "err", err)
		if old != nil && sp.env.Now().Before(old.agg.validUntil) {
			return old, nil
		}
		return nil, &providers.Error{Code: providers.CodeProviderUnavailable, Provider: Name,
			Message: "the identity provider's metadata is not available", Err: err}
	}
	unknown := func(now time.Time, why string) (*mdqEntry, *providers.Error) {
		c.count(MDQUnknown)
		c.unknown.put(entityID, now.Add(mdqUnknownFor))
		sp.log.Info("saml: the MDQ server does not know the IdP; remembered as unknown", "entity_id", entityID,
			"for", mdqUnknownFor.String(), "answer", why)
		return nil, invalid("the identity provider is not one this application accepts",
			fmt.Errorf("%.200q: the MDQ server does not know it (%s): %w", entityID, why, errUnknownIdP))
	}
	var v docfetch.Validators
	if old != nil {
		v.ETag = old.etag
	}
	doc, err := sp.entityDocs.Get(ctx, c.entityURL(entityID), v)
	now := sp.env.Now()
	switch {
	case errors.Is(err, docfetch.ErrNotFound):
		return unknown(now, "not found")
	case err != nil:
		return fail(err)
	case doc.NotModified:
		if !now.Before(old.agg.validUntil) {
			return fail(errors.New("MDQ: not modified, but our copy has expired"))
		}
		e := *old
		e.expires = mdqExpiry(old.agg, now)
		c.cache.put(entityID, &e)
		c.count(MDQFetched)
		return &e, nil
	}
	agg, err := scanAggregate(doc.Body, sp.aggRules())
	if err != nil {
		return fail(fmt.Errorf("MDQ answer for %.200q: %w", entityID, err))
	}
	e := agg.byID[entityID]
	switch {
	case e == nil && agg.entities == 0:
		return unknown(now, "a signed answer listing no entity")
	case e == nil:
		// The server knows something, but not an IdP of that entity ID
		// that is valid now (a service provider, an expired IdP).
		c.count(MDQNotListed)
		return nil, invalid("the identity provider is not one this application accepts",
			fmt.Errorf("%.200q: the MDQ answer describes no IdP of that entity ID that is valid now: %w", entityID, errUnknownIdP))
	case !sp.fed.allows(e):
		c.count(MDQNotListed)
		return nil, invalid("the identity provider is not one this application accepts", fmt.Errorf("%.200q: %w", entityID, errUnknownIdP))
	}
	if perr := sp.usable(e); perr != nil {
		c.count(MDQNotListed)
		return nil, perr
	}
	md, err := sp.parseEntity(agg, e)
	if err != nil {
		return fail(err)
	}
	entry := &mdqEntry{agg: agg, e: e, md: md, expires: mdqExpiry(agg, now), etag: doc.ETag}
	c.cache.put(entityID, entry)
	c.count(MDQFetched)
	return entry, nil
}

// mdqExpiry is when an answer is to be revalidated: after its
// cacheDuration (an hour without one), and before its validUntil.
func mdqExpiry(agg *aggregate, now time.Time) time.Time {
	d := agg.cacheDuration
	if d <= 0 {
		d = mdqDefaultCache
	}
	return minTime(now.Add(d), agg.validUntil)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
