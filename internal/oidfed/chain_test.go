package oidfed

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func newKey(t testing.TB) Key {
	t.Helper()
	pk, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := NewKey(pk)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// testFed is a federation served by one test server: a trust anchor at
// /ta, an intermediate at /ia and an OP at /op, the OP under the
// intermediate under the anchor; entities added later are served too.
type testFed struct {
	t       testing.TB
	srv     *httptest.Server
	mu      sync.Mutex
	routes  map[string]http.Handler
	hits    map[string]*atomic.Int64
	now     time.Time
	ta, ia  *Authority
	op      *Entity
	taKey   Key
	opMeta  map[string]any
	resolve *Resolver
}

func newTestFed(t testing.TB) *testFed {
	f := &testFed{t: t, routes: map[string]http.Handler{}, hits: map[string]*atomic.Int64{}, now: time.Unix(1_800_000_000, 0)}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		for prefix, h := range f.routes {
			if strings.HasPrefix(r.URL.Path, prefix+"/") {
				f.hits[prefix].Add(1)
				http.StripPrefix(prefix, h).ServeHTTP(w, r)
				return
			}
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(f.srv.Close)
	f.taKey = newKey(t)
	f.ta = f.authority("/ta", f.taKey)
	f.ia = f.authority("/ia", newKey(t))
	f.ia.AuthorityHints = []string{f.id("/ta")}
	f.opMeta = map[string]any{
		"issuer": f.id("/op"), "authorization_endpoint": f.id("/op") + "/authorize", "token_endpoint": f.id("/op") + "/token",
		"id_token_signing_alg_values_supported": []any{"RS256", "ES256"}, "client_registration_types_supported": []any{"automatic"},
	}
	f.op = f.entity("/op", newKey(t))
	f.op.AuthorityHints = []string{f.id("/ia")}
	f.op.Metadata = map[string]map[string]any{TypeOpenIDProvider: f.opMeta}
	f.ta.Add(f.id("/ia"), Subordinate{JWKS: JWKS(f.ia.Keys...), Intermediate: true})
	f.ia.Add(f.id("/op"), Subordinate{JWKS: JWKS(f.op.Keys...), EntityTypes: []string{TypeOpenIDProvider}})
	f.resolve = &Resolver{Client: f.srv.Client(), Anchors: []Anchor{{EntityID: f.id("/ta"), JWKS: *JWKS(f.taKey)}}, Now: func() time.Time { return f.now }}
	return f
}

func (f *testFed) id(path string) string { return f.srv.URL + path }

func (f *testFed) entity(path string, k Key) *Entity {
	e := &Entity{ID: f.id(path), Keys: []Key{k}, Now: func() time.Time { return f.now }}
	f.serve(path, http.HandlerFunc(e.ServeConfiguration), true)
	return e
}

func (f *testFed) authority(path string, k Key) *Authority {
	a := NewAuthority(&Entity{ID: f.id(path), Keys: []Key{k}, Now: func() time.Time { return f.now }})
	f.serve(path, a, false)
	return a
}

// serve routes path's prefix to h (an entity's configuration alone, with
// only, or an authority).
func (f *testFed) serve(path string, h http.Handler, only bool) {
	if only {
		inner := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != WellKnownPath {
				http.NotFound(w, r)
				return
			}
			inner.ServeHTTP(w, r)
		})
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.routes[path] = h
	if f.hits[path] == nil {
		f.hits[path] = &atomic.Int64{}
	}
}

func (f *testFed) resolveOP(t testing.TB) (*Chain, error) {
	t.Helper()
	return f.resolve.Resolve(context.Background(), f.id("/op"), TypeOpenIDProvider)
}

// wantRefused resolves the OP and wants a failure whose message holds
// each of parts.
func (f *testFed) wantRefused(t *testing.T, parts ...string) {
	t.Helper()
	c, err := f.resolveOP(t)
	if err == nil {
		t.Fatalf("resolved a chain of %d statements to %s, want a refusal", len(c.Statements), c.Anchor)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not say %q", err, p)
		}
	}
}

func TestResolveChain(t *testing.T) {
	f := newTestFed(t)
	f.ta.Add(f.id("/ia"), Subordinate{JWKS: JWKS(f.ia.Keys...), Intermediate: true, MetadataPolicy: Policy{
		TypeOpenIDProvider: {"id_token_signing_alg_values_supported": {"subset_of": []any{"RS256", "PS256"}}},
	}})
	f.ia.Add(f.id("/op"), Subordinate{JWKS: JWKS(f.op.Keys...), Metadata: map[string]map[string]any{
		TypeOpenIDProvider: {"organization_name": "OP of IA"}, TypeRelyingParty: {"ignored": "the OP is no RP"},
	}})
	c, err := f.resolveOP(t)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Statements) != 4 || c.Anchor != f.id("/ta") || c.Subject != f.id("/op") {
		t.Fatalf("chain of %d statements to %s about %s", len(c.Statements), c.Anchor, c.Subject)
	}
	op := c.Metadata[TypeOpenIDProvider]
	if algs := op["id_token_signing_alg_values_supported"].([]any); len(algs) != 1 || algs[0] != "RS256" {
		t.Fatalf("the anchor's subset_of was not applied: %v", algs)
	}
	if op["organization_name"] != "OP of IA" || c.Metadata[TypeRelyingParty] != nil {
		t.Fatalf("the intermediate's metadata was not applied to the OP's types only: %v", c.Metadata)
	}
	if want := f.now.Add(DefaultLifetime); !c.Expires.Equal(want) {
		t.Fatalf("expires %v, want %v", c.Expires, want)
	}

	// Cached: no fetch until the earliest exp.
	before := f.hits["/op"].Load() + f.hits["/ia"].Load() + f.hits["/ta"].Load()
	if _, err := f.resolveOP(t); err != nil {
		t.Fatal(err)
	}
	if after := f.hits["/op"].Load() + f.hits["/ia"].Load() + f.hits["/ta"].Load(); after != before {
		t.Fatalf("a cached chain made %d fetches", after-before)
	}
	f.now = f.now.Add(DefaultLifetime + time.Second)
	if _, err := f.resolveOP(t); err != nil {
		t.Fatal(err)
	}
	if f.hits["/op"].Load() < 2 {
		t.Fatal("an expired chain was not resolved again")
	}
	if _, err := f.resolve.Resolve(context.Background(), f.id("/op"), TypeRelyingParty); err == nil || !strings.Contains(err.Error(), "has no openid_relying_party metadata") {
		t.Fatalf("err = %v, want a refusal of the wrong entity type", err)
	}
}

// Of several valid chains, the shortest; an invalid short one does not
// hide a valid long one.
func TestResolveShortestChain(t *testing.T) {
	f := newTestFed(t)
	f.op.AuthorityHints = []string{f.id("/ia"), f.id("/ta")}
	f.ta.Add(f.id("/op"), Subordinate{JWKS: JWKS(f.op.Keys...)})
	c, err := f.resolveOP(t)
	if err != nil || len(c.Statements) != 3 {
		t.Fatalf("want the chain of 3 statements through the anchor alone: %v", err)
	}
	// The direct statement now names another key: only the long chain holds.
	f2 := newTestFed(t)
	f2.op.AuthorityHints = []string{f2.id("/ta"), f2.id("/ia")}
	f2.ta.Add(f2.id("/op"), Subordinate{JWKS: JWKS(newKey(t))})
	c, err = f2.resolveOP(t)
	if err != nil || len(c.Statements) != 4 {
		t.Fatalf("want the valid chain of 4 statements: %v", err)
	}
}

// Attacks on chain resolution, each refused with the statement and the
// rule it breaks.
func TestResolveAttacks(t *testing.T) {
	t.Run("leaf signed by a key its superior does not vouch for", func(t *testing.T) {
		f := newTestFed(t)
		f.ia.Add(f.id("/op"), Subordinate{JWKS: JWKS(newKey(t))})
		f.wantRefused(t, "the entity configuration of "+f.id("/op"), "is signed by a key its issuer's keys do not hold")
	})
	t.Run("intermediate's statement signed by a key the anchor does not vouch for", func(t *testing.T) {
		f := newTestFed(t)
		f.ta.Add(f.id("/ia"), Subordinate{JWKS: JWKS(newKey(t))})
		f.wantRefused(t, "the subordinate statement of "+f.id("/ia")+" about "+f.id("/op"), "is signed by a key")
	})
	t.Run("anchor not signed by its pinned keys", func(t *testing.T) {
		f := newTestFed(t)
		f.resolve.Anchors[0].JWKS = *JWKS(newKey(t))
		f.wantRefused(t, "the entity configuration of "+f.id("/ta"), "is not signed by the anchor's pinned keys")
	})
	t.Run("loop in authority hints", func(t *testing.T) {
		f := newTestFed(t)
		ib := f.authority("/ib", newKey(t))
		ib.AuthorityHints = []string{f.id("/ia")}
		f.ia.AuthorityHints = []string{f.id("/ib")}
		ib.Add(f.id("/ia"), Subordinate{JWKS: JWKS(f.ia.Keys...)})
		f.ia.Add(f.id("/ib"), Subordinate{JWKS: JWKS(ib.Keys...)})
		f.wantRefused(t, "has an authority hint that loops", ErrNoChain.Error())
	})
	t.Run("chain past the anchor", func(t *testing.T) {
		// The anchor names a superior of its own: the chain ends at the
		// configured anchor, and nothing above it is fetched.
		f := newTestFed(t)
		evil := f.authority("/evil", newKey(t))
		evil.Add(f.id("/ta"), Subordinate{JWKS: JWKS(f.taKey)})
		f.ta.AuthorityHints = []string{f.id("/evil")}
		c, err := f.resolveOP(t)
		if err != nil {
			t.Fatal(err)
		}
		if c.Anchor != f.id("/ta") || len(c.Statements) != 4 || f.hits["/evil"].Load() != 0 {
			t.Fatalf("the chain went past the anchor: %d statements to %s, %d fetches above it", len(c.Statements), c.Anchor, f.hits["/evil"].Load())
		}
	})
	t.Run("intermediate posing as the anchor", func(t *testing.T) {
		// An entity whose hints lead nowhere configured has no chain, however
		// it signs its own statements.
		f := newTestFed(t)
		f.ia.AuthorityHints = []string{f.id("/fake")}
		fake := f.authority("/fake", newKey(t))
		fake.Add(f.id("/ia"), Subordinate{JWKS: JWKS(f.ia.Keys...)})
		f.wantRefused(t, "the entity configuration of "+f.id("/fake"), "names no authority hints and is no configured trust anchor")
	})
	t.Run("OP configuration naming another subject", func(t *testing.T) {
		f := newTestFed(t)
		f.op.ID = f.id("/other")
		f.wantRefused(t, "the entity configuration of "+f.id("/op"), "must have iss and sub its own entity identifier")
	})
	t.Run("subordinate statement about another entity", func(t *testing.T) {
		f := newTestFed(t)
		f.ia.Add(f.id("/x"), Subordinate{JWKS: JWKS(f.op.Keys...)})
		other, _, err := f.ia.Statement(f.id("/x"))
		if err != nil {
			t.Fatal(err)
		}
		f.serve("/ia", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/fetch" {
				writeStatement(w, other, 0)
				return
			}
			f.ia.ServeHTTP(w, r)
		}), false)
		f.wantRefused(t, "the subordinate statement of "+f.id("/ia")+" about "+f.id("/op"), "must be issued by the superior about the subordinate")
	})
	t.Run("expired statement", func(t *testing.T) {
		f := newTestFed(t)
		f.op.Lifetime = time.Hour
		if _, err := f.op.Configuration(); err != nil {
			t.Fatal(err)
		}
		f.now = f.now.Add(2 * time.Hour)
		f.op.Now = func() time.Time { return f.now.Add(-2 * time.Hour) }
		f.op.signed = ""
		f.wantRefused(t, "the entity configuration of "+f.id("/op"), "has expired (exp)")
	})
	t.Run("policy that widens a superior's", func(t *testing.T) {
		f := newTestFed(t)
		f.ta.Add(f.id("/ia"), Subordinate{JWKS: JWKS(f.ia.Keys...), MetadataPolicy: Policy{
			TypeOpenIDProvider: {"id_token_signing_alg_values_supported": {"subset_of": []any{"RS256"}}},
		}})
		f.ia.Add(f.id("/op"), Subordinate{JWKS: JWKS(f.op.Keys...), MetadataPolicy: Policy{
			TypeOpenIDProvider: {"id_token_signing_alg_values_supported": {"value": []any{"RS256", "HS256"}}},
		}})
		f.wantRefused(t, "the subordinate statement of "+f.id("/ia")+" about "+f.id("/op"), "has a metadata_policy that conflicts with its superiors'",
			"openid_provider.id_token_signing_alg_values_supported")
	})
	t.Run("metadata the policy refuses", func(t *testing.T) {
		f := newTestFed(t)
		f.ta.Add(f.id("/ia"), Subordinate{JWKS: JWKS(f.ia.Keys...), MetadataPolicy: Policy{
			TypeOpenIDProvider: {"client_registration_types_supported": {"superset_of": []any{"explicit"}}},
		}})
		f.wantRefused(t, "has metadata the federation's policy refuses", "client_registration_types_supported")
	})
	t.Run("deep chain", func(t *testing.T) {
		f := newTestFed(t)
		prev := f.ia
		for i := range 6 {
			path := "/deep" + string(rune('a'+i))
			a := f.authority(path, newKey(t))
			a.Add(prev.ID, Subordinate{JWKS: JWKS(prev.Keys...)})
			prev.AuthorityHints = []string{a.ID}
			prev = a
		}
		prev.AuthorityHints = []string{f.id("/ta")}
		f.ta.Add(prev.ID, Subordinate{JWKS: JWKS(prev.Keys...)})
		f.wantRefused(t, "intermediates from an anchor")
	})
	t.Run("wide fan-out", func(t *testing.T) {
		f := newTestFed(t)
		var hints []string
		for i := range 40 {
			path := "/wide" + string(rune('A'+i))
			f.authority(path, newKey(t))
			hints = append(hints, f.id(path))
		}
		f.op.AuthorityHints = hints
		f.wantRefused(t, ErrFetchLimit.Error())
		var n int64
		for _, h := range f.hits {
			n += h.Load()
		}
		if n > DefaultMaxFetches {
			t.Fatalf("%d fetches, at most %d allowed", n, DefaultMaxFetches)
		}
	})
	t.Run("huge statement", func(t *testing.T) {
		f := newTestFed(t)
		f.opMeta["padding"] = strings.Repeat("x", maxStatementBytes)
		f.wantRefused(t, "could not be fetched", "body exceeds the size bound")
	})
	t.Run("max_path_length", func(t *testing.T) {
		f := newTestFed(t)
		zero := 0
		f.ta.Add(f.id("/ia"), Subordinate{JWKS: JWKS(f.ia.Keys...), Constraints: &Constraints{MaxPathLength: &zero}})
		f.wantRefused(t, "allows at most 0 intermediates below it (max_path_length)")
	})
	t.Run("naming_constraints", func(t *testing.T) {
		f := newTestFed(t)
		f.ta.Add(f.id("/ia"), Subordinate{JWKS: JWKS(f.ia.Keys...), Constraints: &Constraints{NamingConstraints: &NamingConstraints{Excluded: []string{"127.0.0.1"}}}})
		f.wantRefused(t, "naming_constraints", "127.0.0.1 is excluded")
	})
	t.Run("allowed_entity_types", func(t *testing.T) {
		f := newTestFed(t)
		f.ta.Add(f.id("/ia"), Subordinate{JWKS: JWKS(f.ia.Keys...), Constraints: &Constraints{AllowedEntityTypes: []string{TypeRelyingParty}}})
		f.wantRefused(t, "has no openid_provider metadata")
	})
	t.Run("hint to this machine from a remote entity", func(t *testing.T) {
		// An https entity naming a plain-http loopback superior: not
		// followed, so that a statement cannot make us fetch from here.
		f := newTestFed(t)
		f.resolve.Anchors = append(f.resolve.Anchors, Anchor{EntityID: "https://op.example", JWKS: *JWKS(f.op.Keys...)})
		raw, err := Sign(f.op.Keys[0], TypEntityStatement, map[string]any{"iss": "https://op.example", "sub": "https://op.example",
			"iat": f.now.Unix(), "exp": f.now.Add(time.Hour).Unix(), "jwks": JWKS(f.op.Keys...), "authority_hints": []string{f.id("/ia")}})
		if err != nil {
			t.Fatal(err)
		}
		w := &walker{r: f.resolve, ctx: context.Background(), ecs: map[string]*Statement{}}
		ec, err := Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if up := w.up(ec, []string{ec.Subject}); len(up) != 0 || len(w.errs) != 1 || !strings.Contains(w.errs[0].Error(), "has an unusable authority hint") {
			t.Fatalf("chains %d, errors %v", len(up), w.errs)
		}
		if f.hits["/ia"].Load() != 0 {
			t.Fatal("the loopback superior was fetched")
		}
	})
	t.Run("unknown critical claim", func(t *testing.T) {
		f := newTestFed(t)
		raw, err := Sign(f.op.Keys[0], TypEntityStatement, map[string]any{"iss": f.id("/op"), "sub": f.id("/op"), "iat": f.now.Unix(),
			"exp": f.now.Add(time.Hour).Unix(), "jwks": JWKS(f.op.Keys...), "authority_hints": []string{f.id("/ia")}, "crit": []string{"jti"}, "jti": "x"})
		if err != nil {
			t.Fatal(err)
		}
		f.serve("/op", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { writeStatement(w, raw, 0) }), true)
		f.wantRefused(t, "names a critical claim extauth does not understand (crit)")
	})
	t.Run("wrong typ", func(t *testing.T) {
		f := newTestFed(t)
		raw, err := Sign(f.op.Keys[0], "JWT", map[string]any{"iss": f.id("/op"), "sub": f.id("/op"), "iat": f.now.Unix(), "exp": f.now.Add(time.Hour).Unix(), "jwks": JWKS(f.op.Keys...)})
		if err != nil {
			t.Fatal(err)
		}
		f.serve("/op", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { writeStatement(w, raw, 0) }), true)
		f.wantRefused(t, "must have typ entity-statement+jwt")
	})
}

func TestTrustMarks(t *testing.T) {
	const spid = "https://registry.example/openid_provider/public"
	setup := func(t *testing.T) *testFed {
		f := newTestFed(t)
		f.ta.TrustMarkIssuers = map[string][]string{spid: {f.id("/ta")}}
		f.resolve.RequiredTrustMarks = []string{spid}
		return f
	}
	mark := func(t *testing.T, f *testFed, issuer *Entity, subject string, life time.Duration) TrustMarkRef {
		ref, err := issuer.IssueTrustMark(spid, subject, life)
		if err != nil {
			t.Fatal(err)
		}
		return ref
	}
	t.Run("valid", func(t *testing.T) {
		f := setup(t)
		f.op.TrustMarks = []TrustMarkRef{mark(t, f, f.ta.Entity, f.id("/op"), time.Hour)}
		c, err := f.resolveOP(t)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.TrustMarks) != 1 || c.TrustMarks[0].Type != spid || c.TrustMarks[0].Issuer != f.id("/ta") {
			t.Fatalf("trust marks %+v", c.TrustMarks)
		}
		if !c.cachedUntil.Equal(f.now.Add(time.Hour)) {
			t.Fatalf("the chain is cached until %v, past its trust mark's exp", c.cachedUntil)
		}
	})
	t.Run("missing", func(t *testing.T) {
		f := setup(t)
		f.wantRefused(t, "lacks the required trust mark "+spid)
	})
	t.Run("expired", func(t *testing.T) {
		f := setup(t)
		f.op.TrustMarks = []TrustMarkRef{mark(t, f, f.ta.Entity, f.id("/op"), time.Hour)}
		f.now = f.now.Add(2 * time.Hour)
		f.wantRefused(t, "lacks the required trust mark", "has expired (exp)")
	})
	t.Run("about another entity", func(t *testing.T) {
		f := setup(t)
		f.op.TrustMarks = []TrustMarkRef{mark(t, f, f.ta.Entity, f.id("/ia"), time.Hour)}
		f.wantRefused(t, "is about another entity (sub)")
	})
	t.Run("self-issued", func(t *testing.T) {
		f := setup(t)
		f.op.TrustMarks = []TrustMarkRef{mark(t, f, f.op, f.id("/op"), time.Hour)}
		f.wantRefused(t, "is issued by an entity the trust anchor does not authorize for its type")
	})
	t.Run("issuer authorized, forged signature", func(t *testing.T) {
		f := setup(t)
		forger := &Entity{ID: f.id("/ta"), Keys: []Key{newKey(t)}, Now: func() time.Time { return f.now }}
		f.op.TrustMarks = []TrustMarkRef{mark(t, f, forger, f.id("/op"), time.Hour)}
		f.wantRefused(t, "is not signed by its issuer's keys")
	})
	t.Run("by an authorized issuer below the anchor", func(t *testing.T) {
		f := setup(t)
		f.ta.TrustMarkIssuers = map[string][]string{spid: {f.id("/ia")}}
		f.ta.Add(f.id("/ia"), Subordinate{JWKS: JWKS(f.ia.Keys...)})
		f.op.TrustMarks = []TrustMarkRef{mark(t, f, f.ia.Entity, f.id("/op"), 0)}
		c, err := f.resolveOP(t)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.TrustMarks) != 1 || !c.TrustMarks[0].Expires.IsZero() {
			t.Fatalf("trust marks %+v", c.TrustMarks)
		}
	})
	t.Run("status", func(t *testing.T) {
		f := setup(t)
		f.resolve.CheckTrustMarkStatus = true
		var active atomic.Bool
		f.ta.Metadata[TypeFederationEntity]["federation_trust_mark_status_endpoint"] = f.id("/status") + "/check"
		f.serve("/status", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost || r.PostFormValue("trust_mark") == "" {
				http.Error(w, "bad", http.StatusBadRequest)
				return
			}
			status := "revoked"
			if active.Load() {
				status = "active"
			}
			raw, _ := Sign(f.taKey, TypTrustMarkStatus, map[string]any{"iss": f.id("/ta"), "iat": f.now.Unix(), "trust_mark": r.PostFormValue("trust_mark"), "status": status})
			w.Header().Set("Content-Type", "application/trust-mark-status-response+jwt")
			w.Write([]byte(raw))
		}), false)
		f.op.TrustMarks = []TrustMarkRef{mark(t, f, f.ta.Entity, f.id("/op"), time.Hour)}
		f.wantRefused(t, "is not active at its issuer", `status "revoked"`)
		active.Store(true)
		if _, err := f.resolveOP(t); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("unknown type ignored unless required", func(t *testing.T) {
		f := setup(t)
		f.resolve.RequiredTrustMarks = nil
		ref, _ := f.ta.IssueTrustMark("https://other.example/mark", f.id("/op"), time.Hour)
		f.op.TrustMarks = []TrustMarkRef{ref}
		c, err := f.resolveOP(t)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.TrustMarks) != 1 || len(c.Rejected) != 0 {
			t.Fatalf("a mark the anchor itself issued should verify: %+v %v", c.TrustMarks, c.Rejected)
		}
	})
}

// Concurrent resolutions of one subject share one set of fetches.
func TestResolveShared(t *testing.T) {
	f := newTestFed(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := f.resolveOP(t)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := f.hits["/op"].Load(); n != 1 {
		t.Fatalf("the OP's configuration was fetched %d times", n)
	}
}

// Italy's SPID and CIE anchors put their subordinates' trust marks in the
// statements about them: such a chain resolves, and those marks count for
// nothing (only the subject's own configuration's do).
func TestSubordinateTrustMarksIgnored(t *testing.T) {
	f := newTestFed(t)
	const mark = "https://registry.example/op"
	f.ta.TrustMarkIssuers = map[string][]string{mark: {f.id("/ta")}}
	f.resolve.RequiredTrustMarks = []string{mark}
	ref, err := f.ta.IssueTrustMark(mark, f.id("/ia"), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := Sign(f.taKey, TypEntityStatement, map[string]any{"iss": f.id("/ta"), "sub": f.id("/ia"), "iat": f.now.Unix(),
		"exp": f.now.Add(time.Hour).Unix(), "jwks": JWKS(f.ia.Keys...), "trust_marks": []TrustMarkRef{ref}})
	if err != nil {
		t.Fatal(err)
	}
	f.serve("/ta", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fetch" {
			writeStatement(w, raw, 0)
			return
		}
		f.ta.ServeHTTP(w, r)
	}), false)
	f.wantRefused(t, "lacks the required trust mark "+mark)
	f.resolve.RequiredTrustMarks = nil
	if _, err := f.resolveOP(t); err != nil {
		t.Fatal(err)
	}
}
