package telemetry

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/extauth/extauth/internal/store"
)

// Store is the single-use store's one method (extauth.Store,
// providers.Store).
type Store interface {
	Consume(ctx context.Context, key string, until time.Time) (bool, error)
}

// Results of a store call.
const (
	storeNew      = iota // the key was new: accepted
	storeUsed            // the key was seen before: a replay
	storeError           // the store failed
	storeFull            // the memory store is at its bound and refused the key
	storeReleased        // a failed callback's key was given back
	numStoreResults
)

var storeResultNames = [numStoreResults]string{"new", "used", "error", "full", "released"}

// Consume calls s.Consume and records it: its duration and result, and,
// with Config.StoreSpans, a span "extauth.store.consume". The key is never
// an attribute.
func (p *Provider) Consume(ctx context.Context, s Store, key string, until time.Time) (bool, error) {
	ctx, c := p.beginStore(ctx, "extauth.store.consume")
	fresh, err := s.Consume(ctx, key, until)
	res := storeNew
	switch {
	case errors.Is(err, store.ErrFull):
		res = storeFull
	case err != nil:
		res = storeError
	case !fresh:
		res = storeUsed
	}
	p.endStore(c, res, err)
	return fresh, err
}

// Release calls release, which gives back the key of a callback that
// failed verification, and records it as Consume records its calls, with
// the result "released" (or "error"), in a span "extauth.store.release"
// with Config.StoreSpans.
func (p *Provider) Release(ctx context.Context, release func(context.Context) error) error {
	ctx, c := p.beginStore(ctx, "extauth.store.release")
	err := release(ctx)
	res := storeReleased
	if err != nil {
		res = storeError
	}
	p.endStore(c, res, err)
	return err
}

// storeCall is a store call being recorded: its span, when one records,
// its start, when the duration is recorded, and the context of that
// measurement (see measureContext).
type storeCall struct {
	span  trace.Span
	start monotonic
	mctx  context.Context
}

func (p *Provider) beginStore(ctx context.Context, name string) (context.Context, storeCall) {
	var c storeCall
	if p.t.storeSpans && p.t.recording(ctx) {
		ctx, c.span = p.t.tracer.Start(ctx, name, internalSpan...)
	}
	// The clock is read only for an instrument that records.
	if p.t.storeDur.Enabled(ctx) {
		c.mctx = measureContext(ctx, c.span)
		c.start = readClock()
	}
	return ctx, c
}

func (p *Provider) endStore(c storeCall, res int, err error) {
	if d := p.t.storeDur; c.start != 0 && d.Enabled(c.mctx) {
		d.Record(c.mctx, c.start.seconds(), p.storeSet(res).rec...)
	}
	if c.span != nil {
		if c.span.IsRecording() {
			c.span.SetAttributes(p.storeSet(res).kv...)
			if err != nil {
				c.span.SetStatus(codes.Error, storeResultNames[res])
			}
		}
		c.span.End()
	}
}

func (p *Provider) storeSet(res int) *optSet {
	if s := p.store[res].Load(); s != nil {
		return s
	}
	s := newOptSet(append(append(make([]attribute.KeyValue, 0, 3), p.base...), KeyResult.String(storeResultNames[res]))...)
	p.store[res].Store(s)
	return s
}

// Store returns s with every call recorded as Consume records it, for the
// strategies of p (SAML assertion IDs, OpenID Connect logout tokens).
func (p *Provider) Store(s Store) Store {
	if s == nil {
		return nil
	}
	return observedStore{s, p}
}

type observedStore struct {
	s Store
	p *Provider
}

func (o observedStore) Consume(ctx context.Context, key string, until time.Time) (bool, error) {
	return o.p.Consume(ctx, o.s, key, until)
}
