// Package telemetry is extauth's OpenTelemetry instrumentation: the metrics
// and spans of sign-ins, outbound requests, store calls, tenants, provider
// documents and certificates, in one place so that the routes, the
// outbound client and the tenant cache each carry a one-line hook.
//
// It speaks the OpenTelemetry API only: whether anything is recorded, and
// where it goes, is the host's MeterProvider and TracerProvider. With no
// SDK installed a measurement costs an atomic load: the instruments are
// made once, by New, and each attribute set once per provider and tenant,
// on its first use by an enabled instrument, never per request.
//
// Attribute values are bounded: provider names are the mounted ones, tenant
// names those of built tenants (anything else is Unknown), outcomes, codes,
// endpoints and results are fixed lists. Nothing secret is ever an
// attribute: no token, code, state, user, e-mail address or URL query.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of extauth's meter and tracer.
const ScopeName = "github.com/extauth/extauth"

// Unknown stands for a tenant that is not built, or a provider that is not
// mounted, in attribute values: what a request names there is anyone's
// choice, so it never becomes a value of its own. No tenant or provider can
// be named so.
const Unknown = "(unknown)"

// The attribute keys.
const (
	KeyProvider = attribute.Key("provider")
	KeyTenant   = attribute.Key("tenant")
	KeyOutcome  = attribute.Key("outcome")
	KeyCode     = attribute.Key("code")
	KeyEndpoint = attribute.Key("endpoint")
	KeyResult   = attribute.Key("result")
	KeyDocument = attribute.Key("document")
	KeyRole     = attribute.Key("role")
	KeyUse      = attribute.Key("use")
	KeySHA256   = attribute.Key("sha256")
	KeyReason   = attribute.Key("reason")
)

// Outcomes of a sign-in.
const (
	OutcomeSuccess = "success"
	OutcomeFailure = "failure"
)

// failureCodes are the failure codes a sign-in can end with (extauth.Code's
// values); any other code a strategy makes up is counted as CodeOther.
var failureCodes = [...]string{"access_denied", "csrf_detected", "invalid_state", "invalid_response",
	"invalid_credentials", "replayed", "provider_unavailable", "misconfigured", "timeout",
	"insufficient_user_authentication"}

// Codes lists the failure codes that are attribute values of their own.
var Codes = failureCodes[:]

// CodeOther is the code attribute of a failure whose code is not in Codes.
const CodeOther = "other"

func codeIndex(code string) int {
	if i := slices.Index(Codes, code); i >= 0 {
		return i
	}
	return len(Codes)
}

func codeName(i int) string {
	if i < len(Codes) {
		return Codes[i]
	}
	return CodeOther
}

// Config configures New.
type Config struct {
	// MeterProvider and TracerProvider default to the global ones, which
	// record nothing until the host installs an SDK.
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider
	// Propagator writes the trace context into outbound requests
	// (default: the global one).
	Propagator propagation.TextMapPropagator
	// Now is the clock of sign-in durations, document ages and
	// certificate expiries: the one transactions, metadata and discovery
	// are stamped with (default time.Now).
	Now func() time.Time
	// Providers are the provider names that may be attributes of a
	// failure outside any built site (a tenant that could not be built):
	// every other name there is Unknown.
	Providers []string
	// StoreSpans makes a span of each store call (extauth.store.consume,
	// extauth.store.release) within a recorded sign-in. Without it store
	// calls are measured by the store duration histogram only.
	StoreSpans bool
}

// T holds the instruments of one extauth.Auth. Its methods are safe for
// concurrent use.
type T struct {
	meter  metric.Meter
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	// tp is the TracerProvider; quiet says it made no span of its own
	// when New tried, and global that it is otel's global provider, which
	// the host may still replace (see tracing).
	tp     trace.TracerProvider
	quiet  bool
	global bool
	// storeSpans is Config.StoreSpans.
	storeSpans bool
	now        func() time.Time
	known      map[string]bool

	started     metric.Int64Counter
	completed   metric.Int64Counter
	signInDur   metric.Float64Histogram
	callbackDur metric.Float64Histogram
	outboundDur metric.Float64Histogram
	storeDur    metric.Float64Histogram

	tenantBuilds    metric.Int64Counter
	tenantEvictions metric.Int64Counter
	tenantsCached   metric.Int64ObservableGauge
	docAge          metric.Float64ObservableGauge
	docNext         metric.Float64ObservableGauge
	docFailure      metric.Float64ObservableGauge
	certExpiry      metric.Float64ObservableGauge
	chainExpiry     metric.Float64ObservableGauge
	fedEntities     metric.Int64ObservableGauge
	fedIdPs         metric.Int64ObservableGauge
	fedMDQ          metric.Int64ObservableCounter
	artifacts       metric.Int64ObservableCounter

	buildSets [numBuilds]*optSet
	evictSets [numEvictions]*optSet

	// unrouted holds the handles of failures outside any built site, by
	// tenant ("" or Unknown) and provider (a known one or Unknown).
	unroutedMu sync.Mutex
	unrouted   map[[2]string]*Provider

	regMu sync.Mutex
	reg   metric.Registration
}

// Bucket boundaries, in seconds. A sign-in spans a person at the
// provider's login page; a callback and an outbound request are server
// work, OpenTelemetry's HTTP duration buckets.
var (
	signInBuckets = []float64{1, 2, 5, 10, 20, 30, 60, 120, 300, 600}
	serverBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
	storeBuckets  = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}
)

// New makes the instruments and the tracer.
func New(c Config) (*T, error) {
	mp, tp, prop := c.MeterProvider, c.TracerProvider, c.Propagator
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if prop == nil {
		prop = otel.GetTextMapPropagator()
	}
	t := &T{
		meter:      mp.Meter(ScopeName),
		tracer:     tp.Tracer(ScopeName),
		tp:         tp,
		global:     c.TracerProvider == nil,
		prop:       prop,
		storeSpans: c.StoreSpans,
		now:        c.Now,
		known:      make(map[string]bool, len(c.Providers)),
		unrouted:   make(map[[2]string]*Provider),
	}
	if t.now == nil {
		t.now = time.Now
	}
	for _, p := range c.Providers {
		t.known[p] = true
	}
	t.quiet = quiet(t.tracer, tp, t.global)
	m := t.meter
	var errs []error
	check := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var err error
	t.started, err = m.Int64Counter("extauth.signin.started", metric.WithUnit("{sign_in}"),
		metric.WithDescription("Sign-ins sent to their provider by the authorize route."))
	check(err)
	t.completed, err = m.Int64Counter("extauth.signin.completed", metric.WithUnit("{sign_in}"),
		metric.WithDescription("Sign-ins that ended: at the callback, or at the authorize route when they could not start. A failure carries its code."))
	check(err)
	t.signInDur, err = m.Float64Histogram("extauth.signin.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from the authorize route to the callback of a sign-in."),
		metric.WithExplicitBucketBoundaries(signInBuckets...))
	check(err)
	t.callbackDur, err = m.Float64Histogram("extauth.callback.duration", metric.WithUnit("s"),
		metric.WithDescription("Server time of a callback, its outbound requests and the host's hook included."),
		metric.WithExplicitBucketBoundaries(serverBuckets...))
	check(err)
	t.outboundDur, err = m.Float64Histogram("extauth.outbound.duration", metric.WithUnit("s"),
		metric.WithDescription("Outbound requests to providers, by endpoint and result, until their answer is read."),
		metric.WithExplicitBucketBoundaries(serverBuckets...))
	check(err)
	t.storeDur, err = m.Float64Histogram("extauth.store.duration", metric.WithUnit("s"),
		metric.WithDescription("Calls to the single-use store, by result (new, used, error, full)."),
		metric.WithExplicitBucketBoundaries(storeBuckets...))
	check(err)
	t.tenantBuilds, err = m.Int64Counter("extauth.tenant.builds", metric.WithUnit("{tenant}"),
		metric.WithDescription("Tenants built on first use, by outcome (success, failure, unknown)."))
	check(err)
	t.tenantEvictions, err = m.Int64Counter("extauth.tenant.evictions", metric.WithUnit("{tenant}"),
		metric.WithDescription("Built tenants dropped from memory, by reason (capacity, idle, invalidated)."))
	check(err)
	t.tenantsCached, err = m.Int64ObservableGauge("extauth.tenant.cached", metric.WithUnit("{tenant}"),
		metric.WithDescription("Tenants built and held in memory."))
	check(err)
	t.docAge, err = m.Float64ObservableGauge("extauth.document.age", metric.WithUnit("s"),
		metric.WithDescription("Age of the SAML metadata or OpenID Connect discovery document in use."))
	check(err)
	t.docNext, err = m.Float64ObservableGauge("extauth.document.next_refresh", metric.WithUnit("s"),
		metric.WithDescription("Time until the next fetch of the SAML metadata or discovery document; negative when overdue."))
	check(err)
	t.docFailure, err = m.Float64ObservableGauge("extauth.document.last_failure_time", metric.WithUnit("s"),
		metric.WithDescription("When a fetch of the SAML metadata or discovery document last failed, in Unix seconds; absent when none has."))
	check(err)
	t.certExpiry, err = m.Float64ObservableGauge("extauth.certificate.expiry", metric.WithUnit("s"),
		metric.WithDescription("Time until a certificate's notAfter (the SAML SP's own, the IdP's signing ones); negative once expired."))
	check(err)
	t.chainExpiry, err = m.Float64ObservableGauge("extauth.trust_chain.expiry", metric.WithUnit("s"),
		metric.WithDescription("Time until the earliest exp of an OpenID provider's trust chain in use (OpenID Federation); negative once expired."))
	check(err)
	t.fedEntities, err = m.Int64ObservableGauge("extauth.federation.entities", metric.WithUnit("{entity}"),
		metric.WithDescription("Entities of the SAML federation aggregate in use, service providers included."))
	check(err)
	t.fedIdPs, err = m.Int64ObservableGauge("extauth.federation.idps", metric.WithUnit("{idp}"),
		metric.WithDescription("IdPs of the SAML federation aggregate in use that users may choose."))
	check(err)
	t.fedMDQ, err = m.Int64ObservableCounter("extauth.federation.mdq.lookups", metric.WithUnit("{lookup}"),
		metric.WithDescription("Look-ups of IdPs at a SAML federation's MDQ server, by result: hit (the cache), fetched, unknown, error, limited, not_listed."))
	check(err)
	t.artifacts, err = m.Int64ObservableCounter("extauth.saml.artifacts", metric.WithUnit("{artifact}"),
		metric.WithDescription("SAML artifacts received (the HTTP-Artifact binding), by result: resolved, replayed, unknown_source, malformed, empty, failed, invalid."))
	check(err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	for i := range t.buildSets {
		t.buildSets[i] = newOptSet(KeyOutcome.String(buildNames[i]))
	}
	for i := range t.evictSets {
		t.evictSets[i] = newOptSet(KeyReason.String(evictionNames[i]))
	}
	return t, nil
}

// probeParent is the parent of the span with which New tells a
// TracerProvider that makes spans from one that does not: remote and not
// sampled, so that an SDK's usual parent-based sampler records nothing.
var probeParent = trace.NewSpanContext(trace.SpanContextConfig{
	TraceID: trace.TraceID{0x65, 0x78, 0x74, 0x61, 0x75, 0x74, 0x68, 1},
	SpanID:  trace.SpanID{0x65, 0x78, 0x74, 0x61, 0x75, 0x74, 0x68, 1},
	Remote:  true,
})

// quiet reports whether tracer's provider tp makes no spans: the API's
// no-op provider, or the global one before the host installs an SDK. Such
// a provider's Start hands back its parent's span context; an SDK's gives a
// span of its own, which is not ended, so that nothing exports it. A global
// provider also needs a comparable type, for tracing to see it replaced.
func quiet(tracer trace.Tracer, tp trace.TracerProvider, global bool) bool {
	if global && !reflect.TypeOf(tp).Comparable() {
		return false
	}
	_, span := tracer.Start(trace.ContextWithRemoteSpanContext(context.Background(), probeParent), "extauth.probe")
	return !span.IsRecording() && span.SpanContext().Equal(probeParent)
}

// tracing reports whether spans are worth starting: the TracerProvider
// makes them, or it is the global one and the host has installed another
// since New (the global one then hands our tracer's spans to it).
func (t *T) tracing() bool {
	return !t.quiet || t.global && otel.GetTracerProvider() != t.tp
}

// Observe registers what the asynchronous instruments read at each
// collection: sites lists the built sites (the application's own and its
// tenants'); tenants, when not nil, counts the built tenants.
func (t *T) Observe(sites func(yield func(*Site) bool), tenants func() int64) error {
	reg, err := t.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		if tenants != nil {
			o.ObserveInt64(t.tenantsCached, tenants())
		}
		now := t.now()
		for s := range sites {
			for _, p := range s.providers {
				p.observe(o, now)
			}
		}
		return nil
	}, t.tenantsCached, t.docAge, t.docNext, t.docFailure, t.certExpiry, t.chainExpiry, t.fedEntities, t.fedIdPs, t.fedMDQ, t.artifacts)
	if err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	t.regMu.Lock()
	t.reg = reg
	t.regMu.Unlock()
	return nil
}

// Close stops the observation Observe registered.
func (t *T) Close() error {
	t.regMu.Lock()
	defer t.regMu.Unlock()
	if t.reg == nil {
		return nil
	}
	err := t.reg.Unregister()
	t.reg = nil
	return err
}

// optSet is a precomputed attribute set as the options a measurement
// takes, so that recording one allocates nothing, and as the attributes
// of a span, which the SDK copies.
type optSet struct {
	add []metric.AddOption
	rec []metric.RecordOption
	kv  []attribute.KeyValue
}

func newOptSet(kv ...attribute.KeyValue) *optSet {
	o := metric.WithAttributeSet(attribute.NewSet(kv...))
	return &optSet{add: []metric.AddOption{o}, rec: []metric.RecordOption{o}, kv: slices.Clip(kv)}
}

// monotonic is a reading of the monotonic clock: the time since epoch,
// plus one nanosecond so that no reading is zero, which stands for none.
// Durations are measured so because time.Since reads the monotonic clock
// only, where time.Now reads the wall clock too: on some virtual machines
// that costs three times as much.
type monotonic time.Duration

var epoch = time.Now()

func readClock() monotonic { return monotonic(time.Since(epoch) + 1) }

// seconds is the time elapsed since m, in seconds.
func (m monotonic) seconds() float64 {
	return (time.Duration(readClock()) - time.Duration(m)).Seconds()
}

// Outcomes of a tenant build.
const (
	BuildSuccess = iota
	BuildFailure
	BuildUnknown
	numBuilds
)

var buildNames = [numBuilds]string{"success", "failure", "unknown"}

// Reasons a built tenant leaves the cache.
const (
	EvictCapacity = iota
	EvictIdle
	EvictInvalidated
	numEvictions
)

var evictionNames = [numEvictions]string{"capacity", "idle", "invalidated"}

// TenantBuilt counts a tenant's build: BuildSuccess, BuildFailure (its
// lookup or configuration failed), or BuildUnknown (no such tenant).
func (t *T) TenantBuilt(outcome int) {
	ctx := context.Background()
	if t.tenantBuilds.Enabled(ctx) {
		t.tenantBuilds.Add(ctx, 1, t.buildSets[outcome].add...)
	}
}

// TenantEvicted counts a built tenant dropped from the cache for reason
// (EvictCapacity, EvictIdle, EvictInvalidated).
func (t *T) TenantEvicted(reason int) {
	ctx := context.Background()
	if t.tenantEvictions.Enabled(ctx) {
		t.tenantEvictions.Add(ctx, 1, t.evictSets[reason].add...)
	}
}

// Failed records a sign-in failure with code at tenant's provider. Within
// an authorize or callback request (Provider.Start) it ends that request's
// operation as failed; otherwise the request never reached a built site
// (its tenant could not be built), and it is counted at once, with a
// tenant other than the application's own as Unknown and a provider name
// outside Config.Providers as Unknown.
func (t *T) Failed(ctx context.Context, tenant, provider, code string) {
	if o := FromContext(ctx); o != nil {
		o.fail(code)
		return
	}
	if !t.completed.Enabled(ctx) {
		return
	}
	if tenant != "" {
		tenant = Unknown
	}
	if !t.known[provider] {
		provider = Unknown
	}
	k := [2]string{tenant, provider}
	t.unroutedMu.Lock()
	p := t.unrouted[k]
	if p == nil {
		p = t.newProvider(provider, tenant)
		t.unrouted[k] = p
	}
	t.unroutedMu.Unlock()
	t.completed.Add(ctx, 1, p.signInSet(slotCode0+codeIndex(code)).add...)
}
