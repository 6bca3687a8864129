package bench

// OpenID Federation trust chain resolution, extauth beside spid-cie-oidc
// (Italy's reference implementation, the interop suite's peer), both
// resolving one chain served by this process: an OP under an intermediate
// under a trust anchor, RSA-2048 keys and RS256 as SPID's, the anchor's
// metadata policy for OPs as spid-cie-oidc's default. Cold resolves from
// nothing (five fetches, five signatures, the policy); cached returns the
// held chain.
//
//	interop/spidcieoidc/install.sh
//	go test -run '^$' -bench 'OIDFedChain' -benchmem ./bench/ -rounds 5 \
//	  -spid.python $PWD/interop/spidcieoidc/.venv/bin/python | go run ./internal/benchratio
//
// Without -spid.python only extauth's side runs. The Python side runs in a
// process of its own (bench/spid_chain.py, 200 cold or 5000 cached after a warm-up
// one, Django set up outside the timing) and reports its own time per
// operation as ns/op, and its CPU time as cpu-ns/op; extauth's side reports
// both too.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/extauth/extauth/internal/loadtest"
	"github.com/extauth/extauth/internal/oidfed"
	"github.com/extauth/extauth/internal/outbound"
)

var spidPython = flag.String("spid.python", "", "the Python of a venv with spid-cie-oidc (interop/spidcieoidc/install.sh), for the peer's side of the OIDFedChain benchmarks")

// benchFed is the federation the chain benchmarks resolve.
type benchFed struct {
	srv    *httptest.Server
	ta, op string
	anchor oidfed.Anchor
}

var rsaKeys = sync.OnceValue(func() []*rsa.PrivateKey {
	var out []*rsa.PrivateKey
	for range 3 {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		out = append(out, k)
	}
	return out
})

// newBenchFed signs the federation's five statements once and serves them
// as they are, so that what either side's time holds of the server is the
// HTTP exchange, not signing.
func newBenchFed(b *testing.B) *benchFed {
	docs := map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.URL.Path
		if sub := r.URL.Query().Get("sub"); sub != "" {
			key += "?sub=" + sub
		}
		doc, ok := docs[key]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", oidfed.ContentTypeEntityStatement)
		w.Write([]byte(doc))
	}))
	b.Cleanup(srv.Close)
	keys := make([]oidfed.Key, 3)
	for i, k := range rsaKeys() {
		key, err := oidfed.NewKey(k)
		if err != nil {
			b.Fatal(err)
		}
		keys[i] = key
	}
	f := &benchFed{srv: srv, ta: srv.URL + "/ta", op: srv.URL + "/op"}
	ta := oidfed.NewAuthority(&oidfed.Entity{ID: f.ta, Keys: keys[:1]})
	ia := oidfed.NewAuthority(&oidfed.Entity{ID: srv.URL + "/ia", Keys: keys[1:2], AuthorityHints: []string{f.ta}})
	op := &oidfed.Entity{ID: f.op, Keys: keys[2:], AuthorityHints: []string{ia.ID}, Metadata: map[string]map[string]any{
		oidfed.TypeOpenIDProvider: {
			"issuer": f.op, "authorization_endpoint": f.op + "/authorization", "token_endpoint": f.op + "/token",
			"userinfo_endpoint": f.op + "/userinfo", "jwks": oidfed.JWKS(keys[2]),
			"id_token_signing_alg_values_supported":    []string{"RS256", "ES256"},
			"token_endpoint_auth_methods_supported":    []string{"private_key_jwt"},
			"userinfo_encryption_alg_values_supported": []string{"RSA-OAEP", "RSA-OAEP-256"},
			"subject_types_supported":                  []string{"pairwise", "public"},
			"client_registration_types_supported":      []string{"automatic"},
			"scopes_supported":                         []string{"openid", "offline_access"},
		},
		oidfed.TypeFederationEntity: {"organization_name": "bench OP"},
	}}
	algs := []any{"RS256", "RS384", "RS512", "ES256", "ES384", "ES512"}
	ta.Add(ia.ID, oidfed.Subordinate{JWKS: oidfed.JWKS(keys[1]), MetadataPolicy: oidfed.Policy{oidfed.TypeOpenIDProvider: {
		"subject_types_supported":                  {"value": []any{"pairwise"}},
		"id_token_signing_alg_values_supported":    {"subset_of": algs},
		"token_endpoint_auth_methods_supported":    {"value": []any{"private_key_jwt"}},
		"userinfo_encryption_alg_values_supported": {"subset_of": []any{"RSA-OAEP", "RSA-OAEP-256", "ECDH-ES"}},
	}}})
	ia.Add(f.op, oidfed.Subordinate{JWKS: oidfed.JWKS(keys[2])})
	for path, e := range map[string]*oidfed.Entity{"/ia": ia.Entity, "/op": op} {
		raw, err := e.Configuration()
		if err != nil {
			b.Fatal(err)
		}
		docs[path+oidfed.WellKnownPath] = raw
	}
	// spid-cie-oidc takes the path length it allows from the anchor's own
	// configuration (an intermediate needs 1), which extauth ignores there.
	now := time.Now()
	raw, err := oidfed.Sign(keys[0], oidfed.TypEntityStatement, map[string]any{"iss": f.ta, "sub": f.ta, "iat": now.Unix(),
		"exp": now.Add(24 * time.Hour).Unix(), "jwks": oidfed.JWKS(keys[0]), "metadata": ta.Metadata,
		"constraints": map[string]any{"max_path_length": 1}})
	if err != nil {
		b.Fatal(err)
	}
	docs["/ta"+oidfed.WellKnownPath] = raw
	for _, s := range []struct {
		a        *oidfed.Authority
		path, id string
	}{{ta, "/ta", ia.ID}, {ia, "/ia", f.op}} {
		raw, _, err := s.a.Statement(s.id)
		if err != nil {
			b.Fatal(err)
		}
		// Both sides ask for sub alone (the final specification's fetch).
		docs[s.path+"/fetch?sub="+s.id] = raw
	}
	f.anchor = oidfed.Anchor{EntityID: f.ta, JWKS: *oidfed.JWKS(keys[0])}
	return f
}

func (f *benchFed) resolver() *oidfed.Resolver {
	return &oidfed.Resolver{Client: outbound.NewClient(f.srv.Client(), 0, 0), Anchors: []oidfed.Anchor{f.anchor}}
}

// BenchmarkOIDFedChainCold resolves the OP's chain from nothing each time.
func BenchmarkOIDFedChainCold(b *testing.B) { benchChain(b, "cold") }

// BenchmarkOIDFedChainCached returns the held chain.
func BenchmarkOIDFedChainCached(b *testing.B) { benchChain(b, "cached") }

func benchChain(b *testing.B, mode string) {
	f := newBenchFed(b)
	ctx := context.Background()
	ours := func(b *testing.B) {
		r := f.resolver()
		if _, err := r.Resolve(ctx, f.op, oidfed.TypeOpenIDProvider); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		cpu0 := loadtest.ProcessCPU()
		b.ResetTimer()
		for b.Loop() {
			if mode == "cold" {
				r = f.resolver()
			}
			c, err := r.Resolve(ctx, f.op, oidfed.TypeOpenIDProvider)
			if err != nil || c.Metadata[oidfed.TypeOpenIDProvider]["subject_types_supported"] == nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(loadtest.ProcessCPU()-cpu0)/float64(b.N), "cpu-ns/op")
	}
	sides := []side{{"extauth", ours}}
	if *spidPython != "" {
		sides = append(sides, side{"spid-cie-oidc", func(b *testing.B) { spidSide(b, f, mode) }})
	}
	alternate(b, sides...)
}

// spidSide runs bench/spid_chain.py for a count of resolutions and
// reports its times per resolution as the benchmark's (its B/op and
// allocs/op are this process's, starting it: the peer's memory is not
// measured).
func spidSide(b *testing.B, f *benchFed, mode string) {
	py, err := filepath.Abs(*spidPython)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	script, _ := filepath.Abs("spid_chain.py")
	proj, _ := filepath.Abs(filepath.Join("..", "interop", "spidcieoidc"))
	// The peer's process starts Django, which takes seconds: it runs a
	// fixed count of its own rather than the b.N of a second's worth.
	n := map[string]int{"cold": 200, "cached": 5000}[mode]
	cmd := exec.Command(py, script, mode, fmt.Sprint(n), f.op, f.ta)
	cmd.Env = append(os.Environ(), "SPID_BASE="+f.srv.URL, "SPID_DB="+filepath.Join(dir, "db.sqlite3"),
		"PYTHONPATH="+proj, "DJANGO_SETTINGS_MODULE=fedproj.settings", "PYTHONDONTWRITEBYTECODE=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("spid_chain.py: %v\n%s", err, stderr.String())
	}
	var res struct {
		WallNS, CPUNS float64
	}
	if err := json.Unmarshal(out, &res); err != nil {
		b.Fatalf("spid_chain.py wrote %q: %v", out, err)
	}
	b.ReportMetric(res.WallNS, "ns/op")
	b.ReportMetric(res.CPUNS, "cpu-ns/op")
}
