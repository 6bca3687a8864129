package extauth_test

import (
	"context"
	"crypto/sha1"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/beevik/etree"
	"github.com/crewjam/saml"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/samlidp"
	"github.com/extauth/extauth/internal/harness"
	"github.com/extauth/extauth/internal/testkeys"
	"github.com/extauth/extauth/samlsp"
)

// federation is a signed aggregate of two fake IdPs, served with an ETag,
// and an application that signs in through it.
type federation struct {
	t      *testing.T
	A, B   *samlidp.IdP
	signer *samlidp.MetadataSigner
	// hits counts aggregate fetches; full counts those answered in whole.
	hits, full atomic.Int64
	mu         sync.Mutex
	doc        []byte
	down       bool
	URL        string
	app        *samlApp
}

func newFederation(t *testing.T) *federation {
	t.Helper()
	k, c := testkeys.LendPair(t, "Test Federation", time.Now().Add(-time.Hour))
	f := &federation{t: t, A: newSAMLIdP(t), B: newSAMLIdP(t), signer: &samlidp.MetadataSigner{Key: k, Cert: c}}
	f.publish(time.Now().Add(7 * 24 * time.Hour))
	srv := harness.Serve(t, func(string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f.hits.Add(1)
			f.mu.Lock()
			doc, down := f.doc, f.down
			f.mu.Unlock()
			if down {
				http.Error(w, "down", http.StatusServiceUnavailable)
				return
			}
			etag := `"` + base64.RawURLEncoding.EncodeToString([]byte(time.Now().Format(time.DateOnly)+string(rune(len(doc))))) + `"`
			w.Header().Set("ETag", etag)
			if r.Header.Get("If-None-Match") == etag {
				w.WriteHeader(http.StatusNotModified)
				return
			}
			f.full.Add(1)
			w.Header().Set("Content-Type", "application/samlmetadata+xml")
			w.Write(doc)
		})
	})
	f.URL = srv.URL + "/aggregate.xml"
	return f
}

// publish signs a new aggregate of A and B valid until validUntil.
func (f *federation) publish(validUntil time.Time) {
	f.t.Helper()
	ea, err := samlidp.Decorate(f.A.Metadata(), samlidp.Entity{
		DisplayNames: map[string]string{"en": "University of Aa", "de": "Universität Aa"},
		Logos:        []samlidp.Logo{{URL: "https://aa.example.org/logo.png", Width: 64, Height: 32}},
	})
	if err != nil {
		f.t.Fatal(err)
	}
	eb, err := samlidp.Decorate(f.B.Metadata(), samlidp.Entity{
		DisplayNames: map[string]string{"en": "Bee College"},
		Logos:        []samlidp.Logo{{URL: "javascript:alert(1)"}},
	})
	if err != nil {
		f.t.Fatal(err)
	}
	doc, err := samlidp.Aggregate([][]byte{ea, eb}, samlidp.AggregateOptions{Signer: f.signer, ValidUntil: validUntil})
	if err != nil {
		f.t.Fatal(err)
	}
	f.mu.Lock()
	f.doc = doc
	f.mu.Unlock()
}

func (f *federation) certPEM() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.signer.Cert.Raw}))
}

// start mounts an application that signs in through the federation and
// registers its SP metadata with both IdPs.
func (f *federation) start(edit func(*extauth.Config, *extauth.Options)) *samlApp {
	f.t.Helper()
	return f.startMounted(edit, nil)
}

// startMounted is start with mount, when not nil, adding the host's own
// routes beside extauth's.
func (f *federation) startMounted(edit func(*extauth.Config, *extauth.Options), mount func(*http.ServeMux, *extauth.Auth)) *samlApp {
	f.t.Helper()
	a := &samlApp{t: f.t, IdP: f.A, store: extauth.NewMemoryStore(extauth.MemoryStoreOptions{})}
	srv := harness.Serve(f.t, func(base string) http.Handler {
		cfg := &extauth.Config{SAML: extauth.SAMLConfig{SPEntityID: samlEntityID, Additional: extauth.SAMLAdditionalSettings{
			Federation: extauth.SAMLFederation{MetadataURL: f.URL, SigningCertificate: f.certPEM()}}}}
		o := extauth.Options{BaseURL: base, CookieKey: testKey, Store: a.store, Logger: slog.New(slog.DiscardHandler), OnSuccess: a.onSuccess}
		if edit != nil {
			edit(cfg, &o)
		}
		auth, err := extauth.New(cfg, o)
		if err != nil {
			f.t.Fatal(err)
		}
		f.t.Cleanup(func() { auth.Close() })
		a.Auth = auth
		mux := http.NewServeMux()
		auth.Mount(mux)
		if mount != nil {
			mount(mux, auth)
		}
		return mux
	})
	a.URL = srv.URL
	a.register()
	a.IdP = f.B
	a.register()
	a.IdP = f.A
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Auth.Ready(ctx); err != nil {
		f.t.Fatal(err)
	}
	f.app = a
	return a
}

// startAt starts a sign-in at idp through the .json route, as the
// discovery page's button would, and returns the IdP redirect.
func (a *samlApp) startAt(b *harness.Browser, idp string) string {
	a.t.Helper()
	resp := b.PostForm(a.URL+"/users/auth/saml.json", url.Values{"idp": {idp}})
	var out struct {
		RedirectTo string `json:"redirect_to"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(resp.Body), &out) != nil {
		a.t.Fatalf("authorize at %s: %d %s", idp, resp.StatusCode, resp.Body)
	}
	return out.RedirectTo
}

func TestSAMLFederationSignInThroughRoutes(t *testing.T) {
	f := newFederation(t)
	a := f.start(nil)
	for _, idp := range []*samlidp.IdP{f.A, f.B} {
		b := harness.NewBrowser(t)
		redirect := a.startAt(b, idp.EntityID())
		if !strings.HasPrefix(redirect, idp.SSOURL()) {
			t.Fatalf("redirect %s, want %s's SSO", redirect, idp.EntityID())
		}
		resp := a.callback(b, idpForm(t, b, redirect))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("callback: %d %s", resp.StatusCode, resp.Body)
		}
		ids := a.identities()
		id := ids[len(ids)-1]
		if id == nil || id.SAML == nil || id.SAML.IdP != idp.EntityID() {
			t.Fatalf("identity %+v, want one asserted by %s", id, idp.EntityID())
		}
		if ls := id.LogoutSession(); ls.IdP != idp.EntityID() {
			t.Fatalf("logout session names IdP %q", ls.IdP)
		}
	}
}

// An IdP of the federation cannot answer for another: a sign-in started at
// A accepts only A's answer, signed with A's key and issued by A, whatever
// B (a member too, with keys the federation vouches for) sends back.
func TestSAMLFederationIdPCannotAssertForAnother(t *testing.T) {
	f := newFederation(t)
	a := f.start(nil)
	b := harness.NewBrowser(t)
	redirect := a.startAt(b, f.A.EntityID())
	form := idpForm(t, b, redirect)
	raw, _ := base64.StdEncoding.DecodeString(form.Get("SAMLResponse"))
	root, err := samlidp.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	requestID := root.SelectAttrValue("InResponseTo", "")
	// B answers the same request, with its own key and its own name.
	forged, err := f.B.Forge(f.B.DefaultSpec(samlEntityID, a.URL+"/users/auth/saml/callback", requestID))
	if err != nil {
		t.Fatal(err)
	}
	form.Set("SAMLResponse", base64.StdEncoding.EncodeToString(forged))
	resp := a.callback(b, form)
	if resp.StatusCode == http.StatusOK || len(a.identities()) != 0 || !strings.Contains(resp.Body, string(extauth.CodeInvalidResponse)) {
		t.Fatalf("B's answer to a sign-in at A was accepted: %d %s", resp.StatusCode, resp.Body)
	}
}

func TestSAMLFederationDiscoveryPage(t *testing.T) {
	f := newFederation(t)
	a := f.start(nil)
	b := harness.NewBrowser(t)
	page := b.Get(a.URL + "/users/auth/saml?return_to=/after")
	if page.StatusCode != http.StatusOK || !strings.HasPrefix(page.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("discovery: %d %s", page.StatusCode, page.Body)
	}
	for _, want := range []string{"University of Aa", "Bee College", `name="idp" value="` + f.A.EntityID() + `"`,
		`src="https://aa.example.org/logo.png"`, `name="return_to" value="/after"`, `method="get"`, `name="q"`} {
		if !strings.Contains(page.Body, want) {
			t.Errorf("the page lacks %s:\n%s", want, page.Body)
		}
	}
	if strings.Contains(page.Body, "javascript:") {
		t.Errorf("a javascript: logo was shown:\n%s", page.Body)
	}
	if csp := page.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") {
		t.Errorf("Content-Security-Policy %q", csp)
	}

	// The browser's language.
	de := harness.NewBrowser(t)
	de.Header.Set("Accept-Language", "de-CH, de;q=0.9, en;q=0.5")
	if p := de.Get(a.URL + "/users/auth/saml"); !strings.Contains(p.Body, "Universität Aa") {
		t.Errorf("German page:\n%s", p.Body)
	}
	// A search without JavaScript, accents aside.
	if p := b.Get(a.URL + "/users/auth/saml?q=universitat"); !strings.Contains(p.Body, "University of Aa") || strings.Contains(p.Body, "Bee College") {
		t.Errorf("search:\n%s", p.Body)
	}
	// The page's choice starts the sign-in, and is remembered.
	resp := b.NoFollow().PostForm(a.URL+"/users/auth/saml", url.Values{"idp": {f.B.EntityID()}, "return_to": {"/after"}})
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), f.B.SSOURL()) {
		t.Fatalf("choice: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	// A second start (which prunes the transaction cookies) keeps it.
	b.NoFollow().PostForm(a.URL+"/users/auth/saml", url.Values{"idp": {f.B.EntityID()}})
	again := b.Get(a.URL + "/users/auth/saml")
	last := strings.Index(again.Body, "Your last choice")
	if last < 0 || !strings.Contains(again.Body[last:], f.B.EntityID()) {
		t.Errorf("the last choice is not shown first:\n%s", again.Body)
	}
	// The JSON list.
	j := b.Get(a.URL + "/users/auth/saml.json?q=bee")
	var list struct {
		IdPs []struct {
			EntityID string `json:"entity_id"`
			Name     string `json:"name"`
		} `json:"idps"`
	}
	if err := json.Unmarshal([]byte(j.Body), &list); err != nil || len(list.IdPs) != 1 || list.IdPs[0].EntityID != f.B.EntityID() {
		t.Errorf("JSON list: %s", j.Body)
	}
	// An IdP the federation does not list starts nothing.
	if resp := b.PostForm(a.URL+"/users/auth/saml.json", url.Values{"idp": {"https://evil.example.org/idp"}}); resp.StatusCode == http.StatusOK {
		t.Errorf("an unknown IdP: %d %s", resp.StatusCode, resp.Body)
	}
}

// The host restricts the federation to some of its IdPs.
func TestSAMLFederationAllowList(t *testing.T) {
	f := newFederation(t)
	a := f.start(func(c *extauth.Config, _ *extauth.Options) {
		c.SAML.Additional.Federation.EntityIDs = []string{f.A.EntityID()}
	})
	b := harness.NewBrowser(t)
	if p := b.Get(a.URL + "/users/auth/saml"); !strings.Contains(p.Body, "University of Aa") || strings.Contains(p.Body, "Bee College") {
		t.Errorf("page:\n%s", p.Body)
	}
	if resp := b.PostForm(a.URL+"/users/auth/saml.json", url.Values{"idp": {f.B.EntityID()}}); resp.StatusCode == http.StatusOK {
		t.Errorf("an IdP left out: %d %s", resp.StatusCode, resp.Body)
	}
}

// A start that names two IdPs (twice in the form, or once in the query
// and once in the body) is refused, whichever comes first: taking the first
// would start at an IdP the other field did not name.
func TestSAMLFederationIdPGivenTwice(t *testing.T) {
	f := newFederation(t)
	a := f.start(nil)
	b := harness.NewBrowser(t)
	for name, do := range map[string]func() *harness.Response{
		"twice in the form": func() *harness.Response {
			return b.PostForm(a.URL+"/users/auth/saml.json", url.Values{"idp": {f.A.EntityID(), f.B.EntityID()}})
		},
		"the query and the form": func() *harness.Response {
			return b.PostForm(a.URL+"/users/auth/saml.json?idp="+url.QueryEscape(f.B.EntityID()), url.Values{"idp": {f.A.EntityID()}})
		},
	} {
		resp := do()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.Body, "invalid_response") ||
			!strings.Contains(resp.Body, "the identity provider is named more than once") || strings.Contains(resp.Body, "redirect_to") {
			t.Errorf("%s: %d %s", name, resp.StatusCode, resp.Body)
		}
	}
	// One IdP still starts.
	if to := a.startAt(b, f.B.EntityID()); !strings.HasPrefix(to, f.B.SSOURL()) {
		t.Errorf("a start at B redirects to %s", to)
	}
}

// The aggregate is fetched again conditionally; a restart while the
// federation's server is down signs in from the backing file; an aggregate
// whose signature does not verify is never used.
func TestSAMLFederationRefreshAndBackingFile(t *testing.T) {
	f := newFederation(t)
	backing := filepath.Join(t.TempDir(), "federation.xml")
	a := f.start(func(c *extauth.Config, o *extauth.Options) {
		c.SAML.Additional.Federation.BackingFile = backing
		o.SAML.MetadataRefresh = 50 * time.Millisecond
		o.SAML.MetadataRetry = 20 * time.Millisecond
	})
	deadline := time.Now().Add(10 * time.Second)
	for f.hits.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatal("no refresh")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if full := f.full.Load(); full != 1 {
		t.Errorf("%d full fetches of an aggregate that did not change, want 1 (then 304s)", full)
	}
	if _, err := os.Stat(backing); err != nil {
		t.Fatalf("backing file: %v", err)
	}
	a.Auth.Close()

	// The federation's server is down: a new instance starts from the file.
	f.mu.Lock()
	f.down = true
	f.mu.Unlock()
	again := f.start(func(c *extauth.Config, _ *extauth.Options) { c.SAML.Additional.Federation.BackingFile = backing })
	b := harness.NewBrowser(t)
	redirect := again.startAt(b, f.A.EntityID())
	if resp := again.callback(b, idpForm(t, b, redirect)); resp.StatusCode != http.StatusOK {
		t.Fatalf("sign-in from the backing file: %d %s", resp.StatusCode, resp.Body)
	}

	// A backing file altered on disk is refused like a bad download.
	data, _ := os.ReadFile(backing)
	os.WriteFile(backing, []byte(strings.Replace(string(data), "Bee College", "Evil College", 1)), 0o600)
	bad := &samlApp{t: t}
	srv := harness.Serve(t, func(base string) http.Handler {
		auth, err := extauth.New(&extauth.Config{SAML: extauth.SAMLConfig{SPEntityID: samlEntityID, Additional: extauth.SAMLAdditionalSettings{
			Federation: extauth.SAMLFederation{MetadataURL: f.URL, SigningCertificate: f.certPEM(), BackingFile: backing}}}},
			extauth.Options{BaseURL: base, CookieKey: testKey, Logger: slog.New(slog.DiscardHandler), OnSuccess: bad.onSuccess})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { auth.Close() })
		bad.Auth = auth
		return http.NotFoundHandler()
	})
	_ = srv
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := bad.Auth.Ready(ctx); err == nil || !strings.Contains(err.Error(), "federation") {
		t.Fatalf("Ready with an altered backing file and the server down: %v", err)
	}
}

// An expired aggregate is never used: Ready says why.
func TestSAMLFederationExpiredAggregate(t *testing.T) {
	f := newFederation(t)
	f.publish(time.Now().Add(-time.Minute))
	bad := &samlApp{t: t}
	harness.Serve(t, func(base string) http.Handler {
		auth, err := extauth.New(&extauth.Config{SAML: extauth.SAMLConfig{SPEntityID: samlEntityID, Additional: extauth.SAMLAdditionalSettings{
			Federation: extauth.SAMLFederation{MetadataURL: f.URL, SigningCertificate: f.certPEM()}}}},
			extauth.Options{BaseURL: base, CookieKey: testKey, Logger: slog.New(slog.DiscardHandler), OnSuccess: bad.onSuccess})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { auth.Close() })
		bad.Auth = auth
		return http.NotFoundHandler()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := bad.Auth.Ready(ctx); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("Ready: %v", err)
	}
	_ = io.Discard
}

// federationCertPEM is a federation signing certificate, for tests of the
// configuration.
func federationCertPEM(t *testing.T) string {
	t.Helper()
	_, c := testkeys.LendPair(t, "Test Federation", time.Now())
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}))
}

// mdqServer answers MDQ requests (draft-young-md-query) with each entity's
// metadata signed by the federation's key, revalidates with ETags, and
// counts what it is asked, by entity path.
type mdqServer struct {
	URL  string
	mu   sync.Mutex
	docs map[string][]byte // by the path's identifier, decoded
	hits map[string]int
	// unknown, when set, answers an entity it does not know as pyFF does:
	// 200 and this signed, empty EntitiesDescriptor, instead of 404.
	unknown []byte
}

func newMDQServer(t *testing.T, signer *samlidp.MetadataSigner, sha1IDs bool, entities ...[]byte) *mdqServer {
	t.Helper()
	s := &mdqServer{docs: map[string][]byte{}, hits: map[string]int{}}
	for _, e := range entities {
		root, err := samlidp.Parse(e)
		if err != nil {
			t.Fatal(err)
		}
		id := root.SelectAttrValue("entityID", "")
		if sha1IDs {
			sum := sha1.Sum([]byte(id))
			id = "{sha1}" + hex.EncodeToString(sum[:])
		}
		signed, err := samlidp.SignMetadata(e, signer)
		if err != nil {
			t.Fatal(err)
		}
		s.docs[id] = signed
	}
	srv := harness.Serve(t, func(string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id, ok := strings.CutPrefix(r.URL.Path, "/mdq/entities/")
			s.mu.Lock()
			s.hits[id]++
			doc := s.docs[id]
			if doc == nil && ok {
				doc = s.unknown
			}
			s.mu.Unlock()
			if !ok || doc == nil {
				http.NotFound(w, r)
				return
			}
			etag := `"v1"`
			w.Header().Set("ETag", etag)
			if r.Header.Get("If-None-Match") == etag {
				w.WriteHeader(http.StatusNotModified)
				return
			}
			w.Header().Set("Content-Type", "application/samlmetadata+xml")
			w.Write(doc)
		})
	})
	s.URL = srv.URL + "/mdq/"
	return s
}

func (s *mdqServer) asked(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[id]
}

// Signing in through an MDQ server: each IdP's metadata fetched when a
// sign-in needs it and kept; an entity the server does not know refused and
// remembered as unknown; one outside entity_ids never asked for.
//
// An entity the server does not know is answered 404, or, as pyFF
// answers it, with 200 and a signed EntitiesDescriptor that lists nothing:
// either way one request, then the negative cache.
func TestSAMLFederationMDQ(t *testing.T) {
	for _, c := range []struct {
		name          string
		sha1IDs, pyff bool
	}{{"entity IDs", false, false}, {"{sha1} identifiers", true, false}, {"unknown entities answered as pyFF does", false, true}} {
		sha1IDs := c.sha1IDs
		t.Run(c.name, func(t *testing.T) {
			f := newFederation(t)
			ea, _ := samlidp.Decorate(f.A.Metadata(), samlidp.Entity{DisplayNames: map[string]string{"en": "University of Aa"}})
			eb, _ := samlidp.Decorate(f.B.Metadata(), samlidp.Entity{DisplayNames: map[string]string{"en": "Bee College"}})
			mdq := newMDQServer(t, f.signer, sha1IDs, ea, eb)
			if c.pyff {
				empty, err := samlidp.Aggregate(nil, samlidp.AggregateOptions{Signer: f.signer, ValidUntil: time.Now().Add(96 * time.Hour),
					CacheDuration: time.Hour})
				if err != nil {
					t.Fatal(err)
				}
				mdq.unknown = empty
			}
			const gone = "https://gone.example.org/idp"
			a := f.start(func(c *extauth.Config, _ *extauth.Options) {
				c.SAML.Additional.Federation = extauth.SAMLFederation{MDQURL: mdq.URL, MDQSHA1: sha1IDs, SigningCertificate: f.certPEM(),
					EntityIDs: []string{f.A.EntityID(), f.B.EntityID(), gone}}
			})
			pathID := func(id string) string {
				if !sha1IDs {
					return id
				}
				sum := sha1.Sum([]byte(id))
				return "{sha1}" + hex.EncodeToString(sum[:])
			}
			b := harness.NewBrowser(t)
			page := b.Get(a.URL + "/users/auth/saml")
			if !strings.Contains(page.Body, "University of Aa") || !strings.Contains(page.Body, "Bee College") || strings.Contains(page.Body, gone) {
				t.Fatalf("discovery page:\n%s", page.Body)
			}
			for range 2 {
				for _, idp := range []*samlidp.IdP{f.A, f.B} {
					redirect := a.startAt(b, idp.EntityID())
					if resp := a.callback(b, idpForm(t, b, redirect)); resp.StatusCode != http.StatusOK {
						t.Fatalf("sign-in at %s: %d %s", idp.EntityID(), resp.StatusCode, resp.Body)
					}
				}
			}
			if n := mdq.asked(pathID(f.A.EntityID())); n != 1 {
				t.Errorf("A asked for %d times; the cache should have answered after the first", n)
			}
			// Unknown to the server: refused, then not asked again.
			for range 3 {
				if resp := b.PostForm(a.URL+"/users/auth/saml.json", url.Values{"idp": {gone}}); resp.StatusCode == http.StatusOK {
					t.Fatalf("an entity the MDQ server does not know: %d %s", resp.StatusCode, resp.Body)
				}
			}
			if n := mdq.asked(pathID(gone)); n != 1 {
				t.Errorf("the unknown entity asked for %d times, want 1 (then the negative cache)", n)
			}
			// Not in entity_ids: never asked.
			junk := "https://junk.example.org/" + strings.Repeat("x", 10)
			if resp := b.PostForm(a.URL+"/users/auth/saml.json", url.Values{"idp": {junk}}); resp.StatusCode == http.StatusOK {
				t.Fatalf("a junk entity: %d", resp.StatusCode)
			}
			if n := mdq.asked(pathID(junk)); n != 0 {
				t.Errorf("a junk entity ID reached the MDQ server %d times", n)
			}
		})
	}
}

// With discovery_url, users choose at an external discovery service (the
// SAML IdP Discovery Protocol): the start goes there with our entity ID and
// a return URL, and the service's cross-site return starts the sign-in at
// the IdP chosen, for the browser that went there only.
func TestSAMLFederationExternalDiscovery(t *testing.T) {
	f := newFederation(t)
	var seen atomic.Pointer[url.Values]
	ds := harness.Serve(t, func(string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			q := r.URL.Query()
			seen.Store(&q)
			back, err := url.Parse(q.Get("return"))
			if err != nil {
				http.Error(w, "bad return", http.StatusBadRequest)
				return
			}
			bq := back.Query()
			bq.Set(q.Get("returnIDParam"), f.B.EntityID())
			back.RawQuery = bq.Encode()
			http.Redirect(w, r, back.String(), http.StatusFound)
		})
	})
	a := f.start(func(c *extauth.Config, _ *extauth.Options) {
		c.SAML.Additional.Federation.DiscoveryURL = strings.Replace(ds.URL, "http://", "https://", 1) + "/ds"
	})
	// The test's discovery service is served over http: rewrite the
	// scheme that the configuration had to give as https.
	b := harness.NewBrowser(t).NoFollow()
	toDS := b.Get(a.URL + "/users/auth/saml?return_to=/after")
	loc := strings.Replace(toDS.Header.Get("Location"), "https://", "http://", 1)
	if toDS.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, ds.URL+"/ds?") {
		t.Fatalf("to the discovery service: %d %s", toDS.StatusCode, loc)
	}
	back := b.Get(loc)
	if q := seen.Load(); q == nil || q.Get("entityID") != samlEntityID || q.Get("returnIDParam") != "idp" ||
		!strings.HasPrefix(q.Get("return"), a.URL+"/users/auth/saml?") {
		t.Fatalf("the discovery service was asked %v", seen.Load())
	}
	ret := back.Header.Get("Location")
	// The return is a navigation from the service's site.
	cross := func(b *harness.Browser) *harness.Response {
		saved := b.Header.Get("Sec-Fetch-Site")
		defer b.Header.Set("Sec-Fetch-Site", saved)
		b.Header.Set("Sec-Fetch-Site", "cross-site")
		return b.Get(ret)
	}
	// Another browser, without the round trip's cookie: a cross-site start,
	// refused.
	if r := cross(harness.NewBrowser(t).NoFollow()); r.StatusCode == http.StatusFound || r.StatusCode == http.StatusSeeOther {
		t.Fatalf("a return without the cookie started a sign-in: %s", r.Header.Get("Location"))
	}
	// The browser that went there: the sign-in starts at the IdP chosen.
	start := cross(b)
	if start.StatusCode != http.StatusFound || !strings.HasPrefix(start.Header.Get("Location"), f.B.SSOURL()) {
		t.Fatalf("the return: %d %s %s", start.StatusCode, start.Header.Get("Location"), start.Body)
	}
	// Once only.
	if r := cross(b); r.StatusCode == http.StatusFound || r.StatusCode == http.StatusSeeOther {
		t.Fatalf("the return started a second sign-in: %s %v", r.Header.Get("Location"), r.Header["Set-Cookie"])
	}
	redirect := start.Header.Get("Location")
	if resp := a.callback(b, idpForm(t, b, redirect)); resp.StatusCode != http.StatusOK {
		t.Fatalf("callback: %d %s", resp.StatusCode, resp.Body)
	}
	if ret := a.signIns.Ret; ret[len(ret)-1] != "/after" {
		t.Errorf("return_to %q", ret[len(ret)-1])
	}
	// The SP metadata names the return for the service.
	md := harness.NewBrowser(t).Get(a.URL + "/users/auth/saml/metadata")
	if !strings.Contains(md.Body, `<idpdisc:DiscoveryResponse xmlns:idpdisc="urn:oasis:names:tc:SAML:profiles:SSO:idp-discovery-protocol" Binding="urn:oasis:names:tc:SAML:profiles:SSO:idp-discovery-protocol" Location="`+a.URL+`/users/auth/saml" index="0"/>`) {
		t.Errorf("metadata:\n%s", md.Body)
	}
}

// A passive discovery service that knows no choice sends the browser back
// without an idp: the return shows our own page, never the service again
// (a loop); with an MDQ server and no entity_ids, there is no list to
// show, and the answer is an error. A discovery service on a loopback
// host may be plain http, for development.
func TestSAMLFederationDiscoveryServiceWithoutChoice(t *testing.T) {
	f := newFederation(t)
	var asked atomic.Int64
	ds := harness.Serve(t, func(string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			asked.Add(1)
			http.Redirect(w, r, r.URL.Query().Get("return"), http.StatusFound)
		})
	})
	mdq := newMDQServer(t, f.signer, false, f.A.Metadata())
	for _, c := range []struct {
		name string
		fed  extauth.SAMLFederation
		want int
	}{
		{"aggregate", extauth.SAMLFederation{MetadataURL: f.URL}, http.StatusOK},
		{"MDQ without entity_ids", extauth.SAMLFederation{MDQURL: mdq.URL}, http.StatusBadRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := f.start(func(cfg *extauth.Config, _ *extauth.Options) {
				c.fed.SigningCertificate, c.fed.DiscoveryURL = f.certPEM(), ds.URL+"/ds"
				cfg.SAML.Additional.Federation = c.fed
			})
			b := harness.NewBrowser(t)
			before := asked.Load()
			page := b.Get(a.URL + "/users/auth/saml?return_to=/after")
			if n := asked.Load() - before; n != 1 || page.StatusCode != c.want {
				t.Fatalf("the service was asked %d times; the page answered %d, want 1 and %d:\n%s", n, page.StatusCode, c.want, page.Body)
			}
			if c.want == http.StatusOK && (!strings.Contains(page.Body, "University of Aa") || !strings.Contains(page.Body, `name="return_to" value="/after"`)) {
				t.Errorf("our own page:\n%s", page.Body)
			}
		})
	}
}

// IdP-initiated sign-in, where enabled, is checked against the entry of the
// IdP that asserts: B's unsolicited response is accepted as B's, and one
// that names A as its Issuer but is signed with B's key is refused.
func TestSAMLFederationUnsolicited(t *testing.T) {
	f := newFederation(t)
	a := f.start(allowIDPInitiated)
	a.IdP = f.B
	resp := a.callback(harness.NewBrowser(t), unsolicitedForm(t, a, ""))
	ids := a.identities()
	if resp.StatusCode != http.StatusOK || len(ids) != 1 || ids[0].SAML.IdP != f.B.EntityID() || !ids[0].Unsolicited {
		t.Fatalf("B's unsolicited response: %d %s", resp.StatusCode, resp.Body)
	}
	spec := f.B.DefaultSpec(samlEntityID, a.URL+"/users/auth/saml/callback", "")
	spec.ResponseIssuer = f.A.EntityID()
	spec.Assertion.Issuer.Value = f.A.EntityID()
	forged, err := f.B.Forge(spec)
	if err != nil {
		t.Fatal(err)
	}
	resp = a.callback(harness.NewBrowser(t), url.Values{"SAMLResponse": {base64.StdEncoding.EncodeToString(forged)}})
	if resp.StatusCode == http.StatusOK || len(a.identities()) != 1 {
		t.Fatalf("B's response naming A was accepted: %d %s", resp.StatusCode, resp.Body)
	}
}

// TestSAMLIdPLogoutEncryptedIDAttacks: an IdP-initiated LogoutRequest that
// names its user by an EncryptedID, through the logout route, in a
// federation of two IdPs, A and B. The EncryptedID is decrypted by the
// rules of a sign-in's, after the signature around it is verified, so:
//   - one encrypted to another key than the SP's is refused, and ends no
//     session;
//   - a request used once is refused the second time, whether replayed as
//     it was or with its EncryptedID encrypted anew under the same ID;
//   - A's EncryptedID, lifted from A's answer to a sign-in, in a request
//     B signs, is B's word: the logout names B as its IdP (LogoutEvent.IdP),
//     never A, so a host that keys accounts on (IdP, UID), as federations
//     must, ends none of A's sessions; and a request that names A as its
//     issuer but carries B's signature is refused.
//
// The control, A's own request with an EncryptedID of Ada, ends her
// session at A.
func TestSAMLIdPLogoutEncryptedIDAttacks(t *testing.T) {
	certPEM, keyPEM := spKeyPair(t)
	spCert, err := samlsp.ParseCertificatePEM(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	otherPEM, _ := spKeyPair(t)
	otherCert, err := samlsp.ParseCertificatePEM(otherPEM)
	if err != nil {
		t.Fatal(err)
	}
	f := newFederation(t)
	var mu sync.Mutex
	var ended []extauth.LogoutEvent
	a := f.start(func(c *extauth.Config, o *extauth.Options) {
		c.SAML.Additional.Certificate, c.SAML.Additional.PrivateKey = certPEM, extauth.NewSecret(keyPEM)
		o.Logout.OnProviderLogout = func(_ context.Context, e extauth.LogoutEvent) error {
			mu.Lock()
			ended = append(ended, e)
			mu.Unlock()
			return nil
		}
	})
	events := func() []extauth.LogoutEvent {
		mu.Lock()
		defer mu.Unlock()
		return append([]extauth.LogoutEvent(nil), ended...)
	}
	slo := a.URL + "/users/auth/saml/logout"

	// Ada signs in at A, which sends her NameID encrypted.
	f.A.Set(func(k *samlidp.Knobs) {
		k.EncryptNameID, k.NoEncrypt, k.Encryption = true, true, &samlidp.Encryption{Cipher: samlidp.AES128GCM}
	})
	b := harness.NewBrowser(t)
	form := idpForm(t, b, a.startAt(b, f.A.EntityID()))
	raw, _ := base64.StdEncoding.DecodeString(form.Get("SAMLResponse"))
	root, err := samlidp.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	lifted := root.FindElement("//Subject/EncryptedID")
	if lifted == nil || root.FindElement("//Subject/NameID") != nil {
		t.Fatal("A did not name Ada by an EncryptedID alone")
	}
	if resp := a.callback(b, form); resp.StatusCode != http.StatusOK {
		t.Fatalf("sign-in: %d %s", resp.StatusCode, resp.Body)
	}

	// request is a LogoutRequest from issuer, ID id, naming Ada by an
	// EncryptedID: lifted's when given, else one encrypted to cert.
	request := func(issuer *samlidp.IdP, id string, cert *x509.Certificate, lifted *etree.Element) *etree.Element {
		t.Helper()
		lr := (&saml.LogoutRequest{ID: id, Version: "2.0", IssueInstant: time.Now(), Destination: slo,
			Issuer: &saml.Issuer{Value: issuer.EntityID()}, NameID: &saml.NameID{Value: "ada@example.org", Format: samlsp.NameIDEmail}}).Element()
		if lifted == nil {
			if err := samlidp.EncryptNameID(lr, cert, samlidp.Encryption{Cipher: samlidp.AES256CBC}); err != nil {
				t.Fatal(err)
			}
			return lr
		}
		n := lr.FindElement("NameID")
		lr.InsertChildAt(n.Index(), lifted.Copy())
		lr.RemoveChild(n)
		return lr
	}
	send := func(signer *samlidp.IdP, lr *etree.Element) *harness.Response {
		t.Helper()
		m, err := signer.RedirectMessage(slo, "SAMLRequest", lr, "")
		if err != nil {
			t.Fatal(err)
		}
		return harness.NewBrowser(t).NoFollow().Get(m)
	}
	// refused checks that resp refused a request for why, and that no
	// session ended beyond the first before.
	refused := func(what string, resp *harness.Response, before int, why string) {
		t.Helper()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.Body, why) || len(events()) != before {
			t.Errorf("%s: %d %q, sessions ended %+v; want 400 with %q", what, resp.StatusCode, resp.Body, events()[before:], why)
		}
	}

	// The control: A logs Ada out by her EncryptedID.
	control := request(f.A, "id-a-1", spCert, nil)
	m, err := f.A.RedirectMessage(slo, "SAMLRequest", control, "")
	if err != nil {
		t.Fatal(err)
	}
	resp := harness.NewBrowser(t).NoFollow().Get(m)
	if ev := events(); resp.StatusCode != http.StatusSeeOther || len(ev) != 1 || ev[0].Subject != "ada@example.org" || ev[0].IdP != f.A.EntityID() {
		t.Fatalf("A's logout of Ada: %d %s, ended %+v", resp.StatusCode, resp.Body, ev)
	}

	// A replay, as sent and with the EncryptedID encrypted anew.
	refused("the request replayed", harness.NewBrowser(t).NoFollow().Get(m), 1, "already used")
	refused("its ID again, encrypted anew", send(f.A, request(f.A, "id-a-1", spCert, nil)), 1, "already used")

	// Encrypted to another key than the SP's.
	refused("an EncryptedID to another key", send(f.A, request(f.A, "id-a-2", otherCert, nil)), 1, "names no subject")

	// A's EncryptedID in B's request names a user of B's.
	resp = send(f.B, request(f.B, "id-b-1", nil, lifted))
	if ev := events(); resp.StatusCode != http.StatusSeeOther || len(ev) != 2 || ev[1].Subject != "ada@example.org" || ev[1].IdP != f.B.EntityID() {
		t.Fatalf("B's request with A's EncryptedID: %d %s, ended %+v", resp.StatusCode, resp.Body, ev)
	}
	// B cannot speak as A.
	refused("A as issuer, B's signature", send(f.B, request(f.A, "id-a-3", nil, lifted)), 2, "signature is invalid")
}
