package oidfed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/extauth/extauth/internal/outbound"
)

// Defaults of Resolver.
const (
	DefaultMaxPathLength = 4
	DefaultMaxFetches    = 32
	DefaultTimeout       = 30 * time.Second
	DefaultSkew          = time.Minute
	// DefaultMaxCache bounds how long a chain is kept, whatever its
	// statements' exp say: a revoked subordinate is noticed within it.
	DefaultMaxCache = 24 * time.Hour
)

// Anchor is a trust anchor the deployment trusts: its entity identifier
// and its federation keys, pinned in the configuration.
type Anchor struct {
	EntityID string
	JWKS     jose.JSONWebKeySet
}

// Resolver resolves trust chains (10) from subjects to the configured
// anchors, bounded in path length, number of fetches, size of each
// statement and time, and caches each chain until its earliest exp.
type Resolver struct {
	// Client fetches the statements; its bounds apply to each fetch.
	Client  *http.Client
	Anchors []Anchor
	// RequiredTrustMarks are the trust mark types the subject must hold,
	// each valid (8.3), for its chain to be accepted.
	RequiredTrustMarks []string
	// CheckTrustMarkStatus asks each trust mark's issuer, at its
	// federation_trust_mark_status_endpoint where it publishes one,
	// whether the mark is still active.
	CheckTrustMarkStatus bool
	MaxPathLength        int
	MaxFetches           int
	Timeout              time.Duration
	Skew                 time.Duration
	MaxCache             time.Duration
	Now                  func() time.Time

	mu       sync.Mutex
	cache    map[string]*Chain
	inflight map[string]*call
}

type call struct {
	done  chan struct{}
	chain *Chain
	err   error
}

// Chain is a valid trust chain and what it resolves to.
type Chain struct {
	// Statements are the chain from the subject's entity configuration
	// to the anchor's.
	Statements []*Statement
	Subject    string
	Anchor     string
	// Expires is the earliest exp of the statements (10.4).
	Expires time.Time
	// Metadata is the subject's resolved metadata, by entity type: its
	// own, its immediate superior's metadata over it, the merged policy
	// applied.
	Metadata map[string]map[string]any
	// Policy is the merged metadata policy of the chain.
	Policy Policy
	// TrustMarks are the subject's trust marks that verified.
	TrustMarks []TrustMark
	// Rejected are the subject's trust marks that did not, and why.
	Rejected []error
	// cachedUntil is when the resolver resolves the subject again.
	cachedUntil time.Time
}

func (r *Resolver) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Resolver) skew() time.Duration {
	if r.Skew > 0 {
		return r.Skew
	}
	return DefaultSkew
}

func (r *Resolver) anchor(id string) *Anchor {
	for i := range r.Anchors {
		if r.Anchors[i].EntityID == id {
			return &r.Anchors[i]
		}
	}
	return nil
}

// Cached returns the held chain of subject while it is valid, nil
// otherwise; it makes no request.
func (r *Resolver) Cached(subject string) *Chain {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.cache[subject]; c != nil && r.now().Before(c.cachedUntil) {
		return c
	}
	return nil
}

// Forget drops the held chain of subject, so that the next Resolve
// fetches it again.
func (r *Resolver) Forget(subject string) {
	r.mu.Lock()
	delete(r.cache, subject)
	r.mu.Unlock()
}

// Resolve returns the shortest valid trust chain from subject to one of
// the anchors, with the subject's metadata resolved; entityType, when not
// empty, must be among the resolved metadata's types. A chain is cached
// until its earliest exp (at most MaxCache); concurrent calls for one
// subject share one resolution. The error of a subject with no valid
// chain names, for each candidate, the statement and the rule it failed.
func (r *Resolver) Resolve(ctx context.Context, subject, entityType string) (*Chain, error) {
	if c := r.Cached(subject); c != nil {
		return c, checkType(c, entityType)
	}
	r.mu.Lock()
	if r.inflight == nil {
		r.inflight = map[string]*call{}
	}
	cl := r.inflight[subject]
	if cl == nil {
		cl = &call{done: make(chan struct{})}
		r.inflight[subject] = cl
		r.mu.Unlock()
		// The resolution outlives a caller that gives up, for the others
		// waiting on it; Timeout bounds it.
		go r.run(context.WithoutCancel(ctx), subject, cl)
	} else {
		r.mu.Unlock()
	}
	select {
	case <-cl.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if cl.err != nil {
		return nil, cl.err
	}
	return cl.chain, checkType(cl.chain, entityType)
}

func (r *Resolver) run(ctx context.Context, subject string, cl *call) {
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cl.chain, cl.err = r.resolve(ctx, subject, true)
	r.mu.Lock()
	if cl.err == nil {
		if r.cache == nil {
			r.cache = map[string]*Chain{}
		}
		r.cache[subject] = cl.chain
	}
	delete(r.inflight, subject)
	r.mu.Unlock()
	close(cl.done)
}

func checkType(c *Chain, entityType string) error {
	if entityType == "" || c.Metadata[entityType] != nil {
		return nil
	}
	return &Error{Statement: "the trust chain of " + c.Subject, Rule: "has no " + entityType + " metadata"}
}

// ErrNoChain is wrapped by the error of a subject with no valid chain to
// any configured anchor.
var ErrNoChain = errors.New("no valid trust chain to a configured trust anchor")

// resolve finds the candidate chains of subject and returns the shortest
// valid one; marks says whether its trust marks are checked (not for a
// trust mark issuer's own chain, which would recurse).
func (r *Resolver) resolve(ctx context.Context, subject string, marks bool) (*Chain, error) {
	if len(r.Anchors) == 0 {
		return nil, errors.New("no trust anchor is configured")
	}
	w := &walker{r: r, ctx: ctx, ecs: map[string]*Statement{}}
	leaf, err := w.configuration(subject)
	if err != nil {
		return nil, err
	}
	var candidates [][]*Statement
	if a := r.anchor(subject); a != nil {
		// The subject is itself an anchor: its chain is its configuration.
		candidates = [][]*Statement{{leaf}}
	} else {
		for _, up := range w.up(leaf, []string{subject}) {
			candidates = append(candidates, append([]*Statement{leaf}, up...))
		}
	}
	slices.SortStableFunc(candidates, func(a, b []*Statement) int { return len(a) - len(b) })
	errs := slices.Clone(w.errs)
	for _, c := range candidates {
		chain, err := r.validate(ctx, c, marks)
		if err == nil {
			return chain, nil
		}
		errs = append(errs, err)
	}
	// A bound that was reached says more than the paths it cut short.
	slices.SortStableFunc(errs, func(a, b error) int {
		return boolInt(!errors.Is(a, ErrFetchLimit)) - boolInt(!errors.Is(b, ErrFetchLimit))
	})
	if len(errs) == 0 {
		errs = append(errs, &Error{Statement: "the entity configuration of " + subject, Rule: "has no authority hints"})
	}
	if len(errs) > 6 {
		errs = append(errs[:6], fmt.Errorf("and %d more", len(errs)-6))
	}
	return nil, fmt.Errorf("%s: %w: %w", subject, ErrNoChain, errors.Join(errs...))
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// walker fetches the statements of one resolution, each entity
// configuration at most once (which breaks loops, 10.1), within the
// resolver's bounds.
type walker struct {
	r       *Resolver
	ctx     context.Context
	fetches int
	ecs     map[string]*Statement
	errs    []error
}

// up returns the chains above entity (whose configuration is ec): each
// the subordinate statement its superior made about it, and so on to an
// anchor's configuration. below are the entities under it, for loops and
// the path length.
func (w *walker) up(ec *Statement, below []string) [][]*Statement {
	maxPath := w.r.MaxPathLength
	if maxPath <= 0 {
		maxPath = DefaultMaxPathLength
	}
	var out [][]*Statement
	if len(ec.AuthorityHints) == 0 {
		w.errs = append(w.errs, &Error{Statement: ec.Describe(), Rule: "names no authority hints and is no configured trust anchor"})
	}
	for _, hint := range ec.AuthorityHints {
		if slices.Contains(below, hint) {
			w.errs = append(w.errs, &Error{Statement: ec.Describe(), Rule: "has an authority hint that loops", Err: fmt.Errorf("%s is already below it", hint)})
			continue
		}
		// A hint in plain http is followed only from an entity that is
		// itself on a loopback host over http (development): a remote
		// statement must not make us fetch from this machine.
		if err := checkEndpoint(ConfigurationURL(hint), ec.Subject); err != nil {
			w.errs = append(w.errs, &Error{Statement: ec.Describe(), Rule: "has an unusable authority hint", Err: err})
			continue
		}
		anchor := w.r.anchor(hint)
		// below holds the subject and each intermediate above it: a
		// superior that is no anchor adds one more intermediate.
		if anchor == nil && len(below) > maxPath {
			w.errs = append(w.errs, &Error{Statement: ec.Describe(), Rule: fmt.Sprintf("is more than %d intermediates from an anchor", maxPath), Err: fmt.Errorf("via %s", hint)})
			continue
		}
		sup, err := w.configuration(hint)
		if err != nil {
			w.errs = append(w.errs, err)
			continue
		}
		ss, err := w.subordinate(sup, ec.Subject)
		if err != nil {
			w.errs = append(w.errs, err)
			continue
		}
		if anchor != nil {
			out = append(out, []*Statement{ss, sup})
			continue
		}
		for _, rest := range w.up(sup, append(slices.Clone(below), hint)) {
			out = append(out, append([]*Statement{ss}, rest...))
		}
	}
	return out
}

// configuration fetches, checks and self-verifies the entity
// configuration of id.
func (w *walker) configuration(id string) (*Statement, error) {
	if ec, ok := w.ecs[id]; ok {
		if ec == nil {
			return nil, &Error{Statement: "the entity configuration of " + id, Rule: "could not be used (see above)"}
		}
		return ec, nil
	}
	w.ecs[id] = nil
	if err := CheckEntityID(id); err != nil {
		return nil, &Error{Statement: "the entity configuration of " + id, Rule: "names an invalid entity identifier", Err: err}
	}
	raw, err := w.get(ConfigurationURL(id), "the entity configuration of "+id)
	if err != nil {
		return nil, err
	}
	ec, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	if ec.Issuer != id || ec.Subject != id {
		return nil, &Error{Statement: "the entity configuration of " + id, Rule: "must have iss and sub its own entity identifier",
			Err: fmt.Errorf("iss %.200q, sub %.200q", ec.Issuer, ec.Subject)}
	}
	if err := ec.Check(w.r.now(), w.r.skew()); err != nil {
		return nil, err
	}
	if err := ec.Verify(ec.JWKS); err != nil {
		return nil, err
	}
	w.ecs[id] = ec
	return ec, nil
}

// subordinate fetches the statement sup makes about sub from sup's fetch
// endpoint.
func (w *walker) subordinate(sup *Statement, sub string) (*Statement, error) {
	what := "the subordinate statement of " + sup.Subject + " about " + sub
	endpoint := sup.FetchEndpoint()
	if endpoint == "" {
		return nil, &Error{Statement: sup.Describe(), Rule: "has no federation_fetch_endpoint"}
	}
	if err := checkEndpoint(endpoint, sup.Subject); err != nil {
		return nil, &Error{Statement: sup.Describe(), Rule: "has an unusable federation_fetch_endpoint", Err: err}
	}
	u, _ := url.Parse(endpoint)
	q := u.Query()
	q.Set("sub", sub)
	u.RawQuery = q.Encode()
	raw, err := w.get(u.String(), what)
	if err != nil {
		return nil, err
	}
	ss, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	if ss.Issuer != sup.Subject || ss.Subject != sub {
		return nil, &Error{Statement: what, Rule: "must be issued by the superior about the subordinate",
			Err: fmt.Errorf("iss %.200q, sub %.200q", ss.Issuer, ss.Subject)}
	}
	if err := ss.Check(w.r.now(), w.r.skew()); err != nil {
		return nil, err
	}
	return ss, nil
}

// checkEndpoint applies the rule of the oidc strategy's endpoints: https,
// or plain http on a loopback host when the entity is itself there.
func checkEndpoint(raw, entity string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil || u.Fragment != "" {
		return fmt.Errorf("%.200q is not an absolute URL", raw)
	}
	if u.Scheme == "https" || u.Scheme == "http" && strings.HasPrefix(entity, "http:") && outbound.IsLoopback(u.Hostname()) {
		return nil
	}
	return fmt.Errorf("%.200q must be https", raw)
}

// ErrFetchLimit is wrapped by the error of a resolution that would need
// more fetches than Resolver.MaxFetches.
var ErrFetchLimit = errors.New("too many fetches")

func (w *walker) get(u, what string) (string, error) {
	limit := w.r.MaxFetches
	if limit <= 0 {
		limit = DefaultMaxFetches
	}
	if w.fetches >= limit {
		return "", &Error{Statement: what, Rule: "was not fetched", Err: fmt.Errorf("%w: a resolution makes at most %d", ErrFetchLimit, limit)}
	}
	w.fetches++
	body, err := Get(w.ctx, w.r.Client, u, ContentTypeEntityStatement)
	if err != nil {
		return "", &Error{Statement: what, Rule: "could not be fetched", Err: err}
	}
	return body, nil
}

// Get fetches a federation document (a statement, a list) with client,
// bounded to maxStatementBytes whatever the client's own bound, and
// returns its body; anything but 200 is an error.
func Get(ctx context.Context, client *http.Client, u, accept string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", accept)
	resp, err := client.Do(req)
	if err != nil {
		return "", outbound.Scrub(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxStatementBytes+1))
	if err != nil {
		return "", outbound.Scrub(err)
	}
	if len(body) > maxStatementBytes {
		return "", fmt.Errorf("%w: more than %d bytes", outbound.ErrBodyTooLarge, maxStatementBytes)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("HTTP %d from %s", resp.StatusCode, outbound.Redact(req.URL))
	}
	return string(body), nil
}

// validate checks a candidate chain (10.2): times and claims of each
// statement, iss and sub linking each to the next, each signature by the
// keys the next statement gives its issuer, the anchor's configuration by
// its pinned keys; then the constraints, the metadata policy, and the
// subject's trust marks.
func (r *Resolver) validate(ctx context.Context, c []*Statement, marks bool) (*Chain, error) {
	last := c[len(c)-1]
	anchor := r.anchor(last.Subject)
	if anchor == nil || !last.IsConfiguration() {
		return nil, &Error{Statement: last.Describe(), Rule: "does not end at a configured trust anchor"}
	}
	if err := last.Verify(&anchor.JWKS); err != nil {
		return nil, &Error{Statement: last.Describe(), Rule: "is not signed by the anchor's pinned keys", Err: err}
	}
	expires := last.ExpiresAt()
	for j := 0; j < len(c)-1; j++ {
		if c[j].Issuer != c[j+1].Subject {
			return nil, &Error{Statement: c[j].Describe(), Rule: "is not followed by a statement about its issuer"}
		}
		if err := c[j].Verify(c[j+1].JWKS); err != nil {
			return nil, err
		}
		expires = earlier(expires, c[j].ExpiresAt())
	}
	leaf := c[0]
	chain := &Chain{Statements: c, Subject: leaf.Subject, Anchor: last.Subject, Expires: expires}
	if err := checkConstraints(c); err != nil {
		return nil, err
	}
	md, policy, err := resolveMetadata(c)
	if err != nil {
		return nil, err
	}
	chain.Metadata, chain.Policy = md, policy
	if marks {
		if err := r.checkTrustMarks(ctx, chain); err != nil {
			return nil, err
		}
	}
	chain.cachedUntil = earlier(r.now().Add(r.maxCache()), chain.Expires)
	for _, tm := range chain.TrustMarks {
		if !tm.Expires.IsZero() {
			chain.cachedUntil = earlier(chain.cachedUntil, tm.Expires)
		}
	}
	return chain, nil
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func (r *Resolver) maxCache() time.Duration {
	if r.MaxCache > 0 {
		return r.MaxCache
	}
	return DefaultMaxCache
}

// checkConstraints applies each subordinate statement's constraints
// (6.2): the intermediates between its issuer and the subject, the
// subordinates' entity identifiers, and the entity types.
func checkConstraints(c []*Statement) error {
	for j := 1; j < len(c)-1; j++ {
		cons := c[j].Constraints
		if cons == nil {
			continue
		}
		if cons.MaxPathLength != nil && j-1 > *cons.MaxPathLength {
			return &Error{Statement: c[j].Describe(), Rule: fmt.Sprintf("allows at most %d intermediates below it (max_path_length)", *cons.MaxPathLength),
				Err: fmt.Errorf("the chain has %d", j-1)}
		}
		if nc := cons.NamingConstraints; nc != nil {
			for k := 0; k <= j; k++ {
				if err := nc.allows(c[k].Subject); err != nil {
					return &Error{Statement: c[j].Describe(), Rule: "forbids a subordinate's entity identifier (naming_constraints)", Err: err}
				}
			}
		}
	}
	return nil
}

func (nc *NamingConstraints) allows(id string) error {
	u, err := url.Parse(id)
	if err != nil {
		return err
	}
	host := strings.ToLower(u.Hostname())
	match := func(name string) bool {
		name = strings.ToLower(name)
		if strings.HasPrefix(name, ".") {
			return strings.HasSuffix(host, name)
		}
		return host == name
	}
	if slices.ContainsFunc(nc.Excluded, match) {
		return fmt.Errorf("%s is excluded", host)
	}
	if len(nc.Permitted) > 0 && !slices.ContainsFunc(nc.Permitted, match) {
		return fmt.Errorf("%s is not permitted", host)
	}
	return nil
}

// resolveMetadata merges the chain's policies from the anchor's side
// down, applies the immediate superior's metadata to the subject's, then
// the merged policy, and removes the entity types allowed_entity_types
// leaves out (6.1.4, 6.2.3).
func resolveMetadata(c []*Statement) (map[string]map[string]any, Policy, error) {
	var merged Policy
	for j := len(c) - 2; j >= 1; j-- {
		if c[j].MetadataPolicy == nil {
			continue
		}
		if merged == nil {
			merged = Policy{}
		}
		m, err := Merge(merged, c[j].MetadataPolicy)
		if err != nil {
			return nil, nil, &Error{Statement: c[j].Describe(), Rule: "has a metadata_policy that conflicts with its superiors'", Err: err}
		}
		merged = m
	}
	leaf := c[0]
	out := map[string]map[string]any{}
	for typ, md := range leaf.Metadata {
		m := make(map[string]any, len(md))
		for k, v := range md {
			m[k] = v
		}
		if len(c) > 1 {
			// The superior's metadata only applies to types the subject has.
			for k, v := range c[1].Metadata[typ] {
				m[k] = v
			}
		}
		if merged != nil {
			resolved, err := merged.Apply(typ, m)
			if err != nil {
				return nil, nil, &Error{Statement: leaf.Describe(), Rule: "has metadata the federation's policy refuses", Err: err}
			}
			m = resolved
		}
		out[typ] = m
	}
	for j := 1; j < len(c)-1; j++ {
		cons := c[j].Constraints
		if cons == nil || cons.AllowedEntityTypes == nil {
			continue
		}
		for typ := range out {
			if typ != TypeFederationEntity && !slices.Contains(cons.AllowedEntityTypes, typ) {
				delete(out, typ)
			}
		}
	}
	return out, merged, nil
}
