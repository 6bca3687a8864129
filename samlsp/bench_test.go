package samlsp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/crewjam/saml"

	"github.com/extauth/extauth/providers"
)

// alwaysFresh is a store that never remembers, so that one response can be
// replayed b.N times through the full callback path, store call included.
type alwaysFresh struct{}

func (alwaysFresh) Consume(context.Context, string, time.Time) (bool, error) { return true, nil }

// BenchmarkCallback compares our callback path with crewjam's bare
// ParseResponse on the same signed response, in the same run.
func BenchmarkCallback(b *testing.B) {
	f := newFixture(b)
	sp, err := New(f.cfg, f.env(alwaysFresh{}), f.opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sp.Close() })
	f.waitReady(sp)
	tx, _ := f.begin(sp)
	xml, err := f.idp.Forge(f.idp.DefaultSpec(testEntityID, testACS, tx.RequestID))
	if err != nil {
		b.Fatal(err)
	}
	body := responseForm(xml, tx.Binding).Encode()
	newReq := func() *http.Request {
		r := httptest.NewRequest(http.MethodPost, testACS, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		return r
	}

	b.Run("saml", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r := newReq()
			if sp.Binding(r) != tx.Binding {
				b.Fatal("binding")
			}
			if _, err := sp.Complete(context.Background(), r, tx); err != nil {
				b.Fatal(err)
			}
		}
	})

	acs, _ := url.Parse(testACS)
	bare := &saml.ServiceProvider{EntityID: testEntityID, AcsURL: *acs, IDPMetadata: sp.md.current().entity}
	b.Run("crewjam_bare", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r := newReq()
			if err := r.ParseForm(); err != nil {
				b.Fatal(err)
			}
			if _, err := bare.ParseResponse(r, []string{tx.RequestID}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

var _ providers.Store = alwaysFresh{}
