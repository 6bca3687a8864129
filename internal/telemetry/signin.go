package telemetry

import (
	"context"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Site is the instrumentation of one site: the application's own providers
// (tenant "") or one tenant's.
type Site struct {
	t      *T
	tenant string
	// providers is filled while the site is built, by Provider, and only
	// read once the site serves requests.
	providers map[string]*Provider
	// other stands for a provider the site does not mount (a mocked
	// sign-in of extauthtest's).
	other *Provider
}

// Site returns the instrumentation of tenant's site, "" for the
// application's own. Call it only for a tenant that is built: its name
// becomes an attribute value.
func (t *T) Site(tenant string) *Site {
	return &Site{t: t, tenant: tenant, providers: map[string]*Provider{}, other: t.newProvider(Unknown, tenant)}
}

// Provider returns the instrumentation of the provider mounted as name,
// making it on first call. Call it while the site is being built only.
func (s *Site) Provider(name string) *Provider {
	p := s.providers[name]
	if p == nil {
		p = s.t.newProvider(name, s.tenant)
		s.providers[name] = p
	}
	return p
}

// Lookup returns the instrumentation of the provider mounted as name, or
// the site's stand-in for providers it does not mount. It is what requests
// use.
func (s *Site) Lookup(name string) *Provider {
	if p := s.providers[name]; p != nil {
		return p
	}
	return s.other
}

// Provider is the instrumentation of one provider of one site. Its
// attribute sets are made on first use and kept.
type Provider struct {
	t      *T
	name   string
	tenant string
	base   []attribute.KeyValue
	// strategy and certificates are what the asynchronous instruments
	// read (documents, certificates); set by Watch while the site is
	// built.
	strategy     any
	certificates func() []Certificate

	signIn   [numSignInSlots]atomic.Pointer[optSet]
	store    [numStoreResults]atomic.Pointer[optSet]
	outbound atomic.Pointer[[numOutboundSlots]atomic.Pointer[optSet]]
	// requests holds the span attributes of the last outbound request
	// to each endpoint kind (see requestAttrs).
	requests [numEndpoints]atomic.Pointer[reqAttrs]
}

func (t *T) newProvider(name, tenant string) *Provider {
	base := []attribute.KeyValue{KeyProvider.String(name), KeyTenant.String(tenant)}
	return &Provider{t: t, name: name, tenant: tenant, base: base}
}

// Watch names the strategy serving the provider, for the asynchronous
// instruments: its SAML metadata or OpenID Connect discovery (their age,
// next refresh and last failure), and certificates, when not nil, lists
// the certificates whose expiry it reports.
func (p *Provider) Watch(strategy any, certificates func() []Certificate) {
	p.strategy, p.certificates = strategy, certificates
}

// Slots of Provider.signIn: started, the two outcomes, then one per code
// and CodeOther.
const (
	slotStarted = iota
	slotSuccess
	slotFailure
	slotCode0
	numSignInSlots = slotCode0 + len(failureCodes) + 1
)

// internalSpan and clientSpan are the start options of extauth's spans:
// their kind only. Samplers see a span's name, kind and parent; its
// attributes are set once, when it ends and only if it records, so that a
// span sampled out costs no attribute and a recorded one a single copy.
var (
	internalSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)}
	clientSpan   = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}
)

// signInSet returns the attribute set of a sign-in slot: provider and
// tenant, the outcome for slotSuccess and on, and the code past slotCode0.
func (p *Provider) signInSet(slot int) *optSet {
	if s := p.signIn[slot].Load(); s != nil {
		return s
	}
	kv := append(make([]attribute.KeyValue, 0, 4), p.base...)
	switch {
	case slot == slotSuccess:
		kv = append(kv, KeyOutcome.String(OutcomeSuccess))
	case slot >= slotFailure:
		kv = append(kv, KeyOutcome.String(OutcomeFailure))
	}
	if slot >= slotCode0 {
		kv = append(kv, KeyCode.String(codeName(slot-slotCode0)))
	}
	s := newOptSet(kv...)
	p.signIn[slot].Store(s)
	return s
}

// Op is one authorize or callback request in progress: its span and what
// its metrics need. From Start on it is the request's context, so that
// the outbound requests and store calls it makes are its spans' children,
// and Failed finds it.
type Op struct {
	context.Context
	p    *Provider
	span trace.Span
	// mctx is the context the op's measurements are made with: the op
	// itself while its span records or the request is part of a sampled
	// trace, so that an exemplar names the trace; otherwise
	// context.Background(), so that the SDK's trace-based exemplar filter
	// does not walk the request's long chain of contexts at each one.
	mctx     context.Context
	start    monotonic
	began    time.Time
	code     int
	callback bool
	started  bool
}

type opKey struct{}

// Value returns the Op itself for its own key.
func (o *Op) Value(key any) any {
	if key == (opKey{}) {
		return o
	}
	return o.Context.Value(key)
}

// FromContext returns the Op of an authorize or callback request whose
// context ctx is or derives from, nil for any other.
func FromContext(ctx context.Context) *Op {
	o, _ := ctx.Value(opKey{}).(*Op)
	return o
}

// Start begins the operation of an authorize (callback false) or callback
// request with ctx, and its span, "extauth.authorize" or
// "extauth.callback"; End ends it. It returns the request's context from
// then on, and the operation, or nil when the request needs none: no span
// made, or one that records nothing and is not sampled (the common set-up
// of a parent-based sampler that keeps few traces), and, for a callback,
// no sign-in instrument enabled. The context then carries that span, so
// that the requests and store calls made under it make no span either and
// the trace's decision still reaches the provider, without the
// operation's allocation, nor the request's copy that would carry it. An
// authorize request without an operation has its metrics recorded at
// once, by Provider.Started and Provider.Failed: its one measurement
// needs no state across the request, and the operation and the copy cost
// it several times what the measurement does.
func (p *Provider) Start(ctx context.Context, callback bool) (context.Context, *Op) {
	t := p.t
	var span trace.Span
	sctx := ctx
	if t.tracing() {
		name := "extauth.authorize"
		if callback {
			name = "extauth.callback"
		}
		sctx, span = t.tracer.Start(ctx, name, internalSpan...)
		if !span.IsRecording() && !span.SpanContext().IsSampled() && (!callback || !t.metered(ctx)) {
			span.End()
			return sctx, nil
		}
	} else if !callback || !t.metered(ctx) {
		return ctx, nil
	}
	o := &Op{Context: sctx, p: p, span: span, code: -1, callback: callback}
	o.mctx = measureContext(o, o.span)
	if callback && t.callbackDur.Enabled(ctx) {
		o.start = readClock()
	}
	return o, o
}

// metered reports whether an instrument of a callback operation records:
// asked only where the answer decides whether to make the operation, not
// on a span that records anyway.
func (t *T) metered(ctx context.Context) bool {
	return t.completed.Enabled(ctx) || t.callbackDur.Enabled(ctx) || t.signInDur.Enabled(ctx)
}

// Started records that the authorize request whose context is ctx sent
// the browser to the provider: the sign-in started. With an operation
// (Start), its End counts it; without one, it is counted now.
func (p *Provider) Started(ctx context.Context) {
	if o := FromContext(ctx); o != nil && !o.callback {
		o.started = true
		return
	}
	if t := p.t; t.started.Enabled(ctx) {
		t.started.Add(measureContext(ctx, nil), 1, p.signInSet(slotStarted).add...)
	}
}

// Failed records that the authorize or callback request whose context is
// ctx failed with code: its operation ends as failed, or, for a request
// without one (an authorize request, see Start), the failure is counted
// now, at this provider.
func (p *Provider) Failed(ctx context.Context, code string) {
	if o := FromContext(ctx); o != nil {
		o.fail(code)
		return
	}
	if t := p.t; t.completed.Enabled(ctx) {
		t.completed.Add(measureContext(ctx, nil), 1, p.signInSet(slotCode0+codeIndex(code)).add...)
	}
}

// Began records when the callback's sign-in started (its transaction was
// made), for the sign-in duration.
func (o *Op) Began(t time.Time) {
	if o != nil {
		o.began = t
	}
}

func (o *Op) fail(code string) {
	if o.code < 0 {
		o.code = codeIndex(code)
	}
}

// End records the operation: a started sign-in (authorize), or a
// completed one with its outcome (callback, and an authorize that
// failed), the callback's server time and the sign-in's duration; and
// ends the span, its status the failure code.
func (o *Op) End() {
	p, t, ctx := o.p, o.p.t, o.mctx
	failed := o.code >= 0
	// slot is the attribute set of the outcome: a failure's code, a
	// success, or the provider and tenant alone for an authorize request
	// that ended without sending the browser on.
	slot := slotStarted
	switch {
	case failed:
		slot = slotCode0 + o.code
		if t.completed.Enabled(ctx) {
			t.completed.Add(ctx, 1, p.signInSet(slot).add...)
		}
	case o.callback:
		slot = slotSuccess
		if t.completed.Enabled(ctx) {
			t.completed.Add(ctx, 1, p.signInSet(slot).add...)
		}
	case o.started:
		slot = slotSuccess
		if t.started.Enabled(ctx) {
			t.started.Add(ctx, 1, p.signInSet(slotStarted).add...)
		}
	}
	if o.callback {
		outcome := slotSuccess
		if failed {
			outcome = slotFailure
		}
		if o.start != 0 && t.callbackDur.Enabled(ctx) {
			t.callbackDur.Record(ctx, o.start.seconds(), p.signInSet(outcome).rec...)
		}
		if !o.began.IsZero() && t.signInDur.Enabled(ctx) {
			t.signInDur.Record(ctx, t.now().Sub(o.began).Seconds(), p.signInSet(outcome).rec...)
		}
	}
	if o.span == nil {
		return
	}
	if o.span.IsRecording() {
		o.span.SetAttributes(p.signInSet(slot).kv...)
		if failed {
			o.span.SetStatus(codes.Error, codeName(o.code))
		}
	}
	o.span.End()
}

// measureContext is the context to make measurements with under ctx, whose
// own span, if any, is span: ctx when span records or ctx is part of a
// sampled trace (a span the host started), so that an exemplar can name
// the trace, and context.Background() otherwise. The SDK's default
// exemplar filter looks for a sampled span in the context of every
// measurement: in a request's context, a walk down a long chain of values
// that finds none.
func measureContext(ctx context.Context, span trace.Span) context.Context {
	switch {
	case span != nil && (span.IsRecording() || span.SpanContext().IsSampled()):
		return ctx
	case span != nil:
		return context.Background()
	}
	if o := FromContext(ctx); o != nil && o.mctx != nil {
		return o.mctx
	}
	if trace.SpanContextFromContext(ctx).IsSampled() {
		return ctx
	}
	return context.Background()
}

// recording reports whether spans made under ctx are worth making: when
// spans are made at all, within an Op only while its span records, and
// outside one (a background fetch, or a request whose span Start left
// without an Op) unless ctx carries a span that records nothing, so that
// requests traced by nobody cost no span. Under a parent-based sampler
// such a span's children would record nothing either.
func (t *T) recording(ctx context.Context) bool {
	if !t.tracing() {
		return false
	}
	if o := FromContext(ctx); o != nil {
		return o.span != nil && o.span.IsRecording()
	}
	span := trace.SpanFromContext(ctx)
	return !span.SpanContext().IsValid() || span.IsRecording()
}
