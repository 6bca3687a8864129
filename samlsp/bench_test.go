package samlsp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/extauth/extauth/providers"
)

// alwaysFresh is a store that never remembers, so that one response can be
// replayed b.N times through the full callback path, store call included.
type alwaysFresh struct{}

func (alwaysFresh) Consume(context.Context, string, time.Time) (bool, error) { return true, nil }

var _ providers.Store = alwaysFresh{}

// The strategy's own hot paths, for profiling; bench/ compares them with
// crewjam through the routes.

func BenchmarkBegin(b *testing.B) {
	for _, signed := range []bool{false, true} {
		mods := []fixtureOption{}
		name := "unsigned"
		if signed {
			mods, name = append(mods, withKeyPair), "signed"
		}
		f := newFixture(b, mods...)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := f.sp.Begin(context.Background(), newTx()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkComplete(b *testing.B) {
	for _, encrypted := range []bool{false, true} {
		f := newFixture(b, withKeyPair)
		sp, err := New(f.cfg, f.env(alwaysFresh{}), f.opts)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { sp.Close() })
		f.waitReady(sp)
		tx, _ := f.begin(sp)
		s := f.idp.DefaultSpec(testEntityID, testACS, tx.RequestID)
		s.SignResponse = true
		name := "signed_response_and_assertion"
		if encrypted {
			_, s.EncryptTo = testKey(b, 1)
			name = "encrypted_assertion"
		}
		x, err := f.idp.Forge(s)
		if err != nil {
			b.Fatal(err)
		}
		body := responseForm(x, tx.Binding).Encode()
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, testACS, strings.NewReader(body))
				r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				if _, err := sp.Complete(context.Background(), r, tx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
