package samlsp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/extauth/extauth/extauthtest/samlidp"
	"github.com/extauth/extauth/internal/outbound"
	"github.com/extauth/extauth/internal/store"
	"github.com/extauth/extauth/providers"
)

// mdqSP is an SP asking the MDQ server at srv, allowed ids, its clock
// frozen at now.
func mdqSP(t *testing.T, srv *httptest.Server, k fedKeys, now time.Time, ids ...string) *SP {
	t.Helper()
	sp, err := New(Config{SPEntityID: testEntityID, Federation: FederationConfig{MDQURL: srv.URL + "/mdq", SigningCertificatePEM: pemCert(k.cert),
		EntityIDs: ids}}, providers.Env{CallbackURL: testACS, HTTPClient: outbound.NewClient(nil, 2*time.Second, 0),
		Store: store.NewMemory(nil, 0), Now: func() time.Time { return now }}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	return sp
}

// Fetches of entities not in the cache are rate-limited: a burst of
// sign-ins naming entities the server does not know reaches it a bounded
// number of times.
func TestMDQRateLimit(t *testing.T) {
	var asked atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		http.NotFound(w, r)
	}))
	defer srv.Close()
	var ids []string
	for i := range 3 * mdqBurst {
		ids = append(ids, fmt.Sprintf("https://idp%d.example.org/idp", i))
	}
	sp := mdqSP(t, srv, newFedKeys(t), time.Now(), ids...)
	limited := 0
	for _, id := range ids {
		_, err := sp.idpFor(context.Background(), id)
		if code(err) == providers.CodeProviderUnavailable {
			limited++
		}
	}
	if n := asked.Load(); n != mdqBurst || limited != 2*mdqBurst {
		t.Fatalf("the server was asked %d times and %d look-ups limited; want %d and %d", n, limited, mdqBurst, 2*mdqBurst)
	}
	if st := sp.MDQStats(); st[MDQUnknown] != mdqBurst || st[MDQLimited] != 2*mdqBurst {
		t.Fatalf("stats %v", st)
	}
}

// An MDQ answer is used only when the federation's key signed it, and only
// while it is valid.
func TestMDQAnswersVerified(t *testing.T) {
	k, other := newFedKeys(t), newFedKeys(t)
	idp, entity := testIdPEntity(t, "https://idp-a.example.org/idp", samlidp.Entity{})
	for _, tc := range []struct {
		name   string
		signer fedKeys
		now    time.Time
		want   string
	}{
		{"signed by the federation", k, time.Now(), ""},
		{"signed by another key", other, time.Now(), "does not verify"},
		{"expired", k, time.Now().Add(72 * time.Hour), "expired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			signed, err := samlidp.SignMetadata(entity, tc.signer.signer())
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(signed) }))
			defer srv.Close()
			sp := mdqSP(t, srv, k, tc.now, idp.EntityID())
			md, perr := sp.idpFor(context.Background(), idp.EntityID())
			switch {
			case tc.want == "" && perr != nil:
				t.Fatal(perr)
			case tc.want == "" && !md.certs[0].Equal(idp.Certificate()):
				t.Fatal("not the IdP's certificate")
			case tc.want != "" && (perr == nil || !strings.Contains(fmt.Sprint(perr.Err), tc.want)):
				t.Fatalf("err = %v, want it to say %q", perr, tc.want)
			}
		})
	}
}

// SPs that share a Federations (the tenants of one Auth) and a federation
// share one copy of its aggregate: fetched once, stopped with the last.
func TestFederationsShareAggregates(t *testing.T) {
	k := newFedKeys(t)
	_, ea := testIdPEntity(t, "https://idp-a.example.org/idp", samlidp.Entity{})
	doc := testAggregate(t, k, time.Now().Add(time.Hour), ea)
	var fetched atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		w.Write(doc)
	}))
	defer srv.Close()
	fs := &Federations{}
	newSP := func(entityID string) *SP {
		sp, err := New(Config{SPEntityID: entityID, Federation: FederationConfig{MetadataURL: srv.URL + "/agg", SigningCertificatePEM: pemCert(k.cert)}},
			providers.Env{CallbackURL: testACS, HTTPClient: outbound.NewClient(nil, 2*time.Second, 0), Store: store.NewMemory(nil, 0), Now: time.Now},
			Options{Federations: fs})
		if err != nil {
			t.Fatal(err)
		}
		return sp
	}
	a, b := newSP("https://a.example.org/saml"), newSP("https://b.example.org/saml")
	deadline := time.Now().Add(5 * time.Second)
	for !a.Ready() || !b.Ready() {
		if time.Now().After(deadline) {
			t.Fatal("not ready")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if a.fed.src != b.fed.src || fetched.Load() != 1 {
		t.Fatalf("two copies (%v), %d fetches", a.fed.src != b.fed.src, fetched.Load())
	}
	a.Close()
	if _, err := b.idpFor(context.Background(), "https://idp-a.example.org/idp/metadata"); err != nil {
		t.Fatalf("the other SP lost the aggregate: %v", err)
	}
	b.Close()
	fs.mu.Lock()
	n := len(fs.sources)
	fs.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d sources after the last SP closed", n)
	}
}

// A sign-in start looks its IdP up once: one MDQ request, counted once,
// whichever binding the IdP takes.
func TestMDQOneLookupPerStart(t *testing.T) {
	k := newFedKeys(t)
	idp, entity := testIdPEntity(t, "https://idp-a.example.org/idp", samlidp.Entity{})
	signed, err := samlidp.SignMetadata(entity, k.signer())
	if err != nil {
		t.Fatal(err)
	}
	var asked atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		w.Write(signed)
	}))
	defer srv.Close()
	sp := mdqSP(t, srv, k, time.Now(), idp.EntityID())
	tx := newTx()
	tx.IdP = idp.EntityID()
	if _, _, err := sp.BeginAt(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	if st := sp.MDQStats(); asked.Load() != 1 || st[MDQFetched] != 1 || st[MDQHit] != 0 {
		t.Fatalf("one start: %d requests, look-ups %v; want 1 request, 1 look-up", asked.Load(), st)
	}
}

// pyFF answers an entity it does not know with 200 and a signed, empty
// EntitiesDescriptor: an unknown entity, refused with a 4xx, remembered,
// counted as unknown; an answer that does not verify stays a failure.
func TestMDQUnknownAsPyFFAnswers(t *testing.T) {
	k := newFedKeys(t)
	empty, err := samlidp.Aggregate(nil, samlidp.AggregateOptions{Signer: k.signer(), ValidUntil: time.Now().Add(96 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	var asked atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		w.Header().Set("Content-Type", "application/samlmetadata+xml")
		w.Write(empty)
	}))
	defer srv.Close()
	const id = "https://unknown.example.org/idp"
	sp := mdqSP(t, srv, k, time.Now(), id)
	for range 3 {
		_, perr := sp.idpFor(context.Background(), id)
		if perr == nil || perr.Code.HTTPStatus() != http.StatusBadRequest || !errors.Is(perr, errUnknownIdP) {
			t.Fatalf("an entity answered with an empty aggregate: %v", perr)
		}
	}
	if st := sp.MDQStats(); asked.Load() != 1 || st[MDQUnknown] != 3 || st[MDQError] != 0 {
		t.Fatalf("%d requests, stats %v; want 1 request and 3 unknown", asked.Load(), st)
	}

	// Signed by another key: not a verified answer, so not "unknown".
	other := newFedKeys(t)
	sp = mdqSP(t, srv, other, time.Now(), id)
	if _, perr := sp.idpFor(context.Background(), id); perr == nil || perr.Code != providers.CodeProviderUnavailable {
		t.Fatalf("an empty answer that does not verify: %v", perr)
	}
	if st := sp.MDQStats(); st[MDQError] != 1 || st[MDQUnknown] != 0 {
		t.Fatalf("stats %v", st)
	}
}
