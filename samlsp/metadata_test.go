package samlsp

import (
	"bytes"
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/extauth/extauth/extauthtest/samlidp"
	"github.com/extauth/extauth/internal/outbound"
	"github.com/extauth/extauth/internal/store"
	"github.com/extauth/extauth/providers"
)

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The application starts while the IdP is down; sign-ins answer 503
// provider_unavailable until a first copy of the metadata arrives, then work
// without a restart.
func TestStartsWhileIdPIsDown(t *testing.T) {
	f := newFixture(t, noWait, withOptions(func(o *Options) { o.MetadataRetry = time.Hour }),
		withIdP(func(p *samlidp.IdP) {
			p.Set(func(k *samlidp.Knobs) { k.MetadataStatus = http.StatusInternalServerError })
		}))
	eventually(t, "a first fetch", func() bool { return f.idp.MetadataHits() >= 1 })
	_, err := f.sp.Begin(context.Background(), newTx())
	if code(err) != providers.CodeProviderUnavailable || code(err).HTTPStatus() != http.StatusServiceUnavailable {
		t.Fatalf("Begin: err = %v, want provider_unavailable (503)", err)
	}
	if _, err := post(f.sp, newTx(), responseForm([]byte("<x/>"), "")); code(err) != providers.CodeProviderUnavailable {
		t.Fatalf("Complete: err = %v", err)
	}
	// The IdP comes back. The retry timer is an hour away: the first
	// sign-in after recovery asks for a fetch, waits for it, and succeeds.
	// It waits a minute here, not metadataWait's 2 s, which a loaded
	// machine's fetch may take: the hour is what it must not wait for.
	f.idp.Set(func(k *samlidp.Knobs) { k.MetadataStatus = 0 })
	f.sp.md.wait = time.Minute
	start := time.Now()
	tx, redirect := f.begin(f.sp)
	if d := time.Since(start); d > f.sp.md.wait {
		t.Fatalf("the first sign-in after recovery took %s", d)
	}
	if _, err := post(f.sp, tx, f.idpForm(redirect)); err != nil {
		t.Fatal(err)
	}
}

func TestLastGoodMetadataKeptWhenRefreshFails(t *testing.T) {
	f := newFixture(t, withIdP(func(p *samlidp.IdP) {
		p.Set(func(k *samlidp.Knobs) { k.CacheDuration = 20 * time.Millisecond })
	}))
	f.idp.Set(func(k *samlidp.Knobs) { k.MetadataStatus = http.StatusBadGateway })
	hits := f.idp.MetadataHits()
	eventually(t, "two failed refreshes", func() bool { return f.idp.MetadataHits() >= hits+2 })
	if !f.sp.Ready() || f.sp.md.err() == nil {
		t.Fatalf("ready = %v, err = %v; want the old copy kept and the failure recorded", f.sp.Ready(), f.sp.md.err())
	}
	tx, redirect := f.begin(f.sp)
	if _, err := post(f.sp, tx, f.idpForm(redirect)); err != nil {
		t.Fatalf("sign-in with the kept copy: %v", err)
	}
}

// A refresh picks up a new signing certificate without a restart.
func TestRefreshPicksUpNewCertificate(t *testing.T) {
	f := newFixture(t, withIdP(func(p *samlidp.IdP) {
		p.Set(func(k *samlidp.Knobs) { k.CacheDuration = 20 * time.Millisecond })
	}))
	_, c := testKey(t, 2)
	f.idp.Set(func(k *samlidp.Knobs) { k.ExtraCerts = append(k.ExtraCerts, c) })
	eventually(t, "the new certificate", func() bool { return len(f.sp.md.current().certs) == 2 })
}

func TestMetadataFetchTimesOutAndCloseIsPrompt(t *testing.T) {
	f := newFixture(t, noWait, withIdP(func(p *samlidp.IdP) {
		p.Set(func(k *samlidp.Knobs) { k.MetadataHang = true })
	}))
	f.sp.Close()
	sp, err := New(f.cfg, providers.Env{
		CallbackURL: testACS, HTTPClient: outbound.NewClient(nil, 100*time.Millisecond, 0),
		Store: store.NewMemory(nil, 0),
	}, Options{MetadataRetry: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the fetch to time out", func() bool { return sp.md.err() != nil })
	var pe *providers.Error
	if !errors.As(sp.md.err(), &pe) || pe.Code != providers.CodeTimeout {
		t.Fatalf("err = %v, want a timeout", sp.md.err())
	}
	// Close does not wait for the next attempt, an hour away.
	start := time.Now()
	sp.Close()
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("Close took %s", d)
	}
}

func TestMetadataBounds(t *testing.T) {
	for _, tc := range []struct {
		name string
		body func(p *samlidp.IdP) []byte
		want string
	}{
		{"over 1 MiB", func(p *samlidp.IdP) []byte {
			md := p.Metadata()
			pad := bytes.Repeat([]byte(" "), DefaultMetadataMaxBytes)
			return append(md, pad...)
		}, "too large"},
		{"DOCTYPE", func(p *samlidp.IdP) []byte {
			return append([]byte(`<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>`), p.Metadata()...)
		}, "directives"},
		{"expired validUntil", func(p *samlidp.IdP) []byte {
			return bytes.Replace(p.Metadata(), []byte(`validUntil="`), []byte(`validUntil="2001-01-01T00:00:00Z" x="`), 1)
		}, "expired"},
		{"no signing certificate", func(p *samlidp.IdP) []byte {
			return bytes.ReplaceAll(p.Metadata(), []byte(`use="signing"`), []byte(`use="encryption"`))
		}, "no signing certificate"},
		{"not metadata", func(*samlidp.IdP) []byte { return []byte(`<feed xmlns="http://www.w3.org/2005/Atom"/>`) }, "neither"},
		// A login or error page answered with status 200: said plainly,
		// not as a DOCTYPE refusal.
		{"HTML page", func(*samlidp.IdP) []byte {
			return []byte("\n<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body>Error</body></html>")
		}, "the answer is HTML, not SAML metadata"},
		{"XHTML page", func(*samlidp.IdP) []byte { return []byte(`<html xmlns="http://www.w3.org/1999/xhtml"><body/></html>`) },
			"the answer is HTML, not SAML metadata"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, noWait, withIdP(func(p *samlidp.IdP) {
				b := tc.body(p)
				p.Set(func(k *samlidp.Knobs) { k.MetadataBody = b })
			}))
			eventually(t, "the fetch to fail", func() bool { return f.sp.md.err() != nil })
			if f.sp.Ready() || !strings.Contains(f.sp.md.err().Error(), tc.want) {
				t.Fatalf("ready = %v, err = %v, want %q", f.sp.Ready(), f.sp.md.err(), tc.want)
			}
		})
	}
}

func TestEntitiesDescriptor(t *testing.T) {
	idpMD := func(p *samlidp.IdP) string {
		s := string(p.Metadata())
		return s[strings.Index(s, "<EntityDescriptor"):]
	}
	spMD := `<EntityDescriptor xmlns="urn:oasis:names:tc:SAML:2.0:metadata" entityID="https://sp.example/"><SPSSODescriptor protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol"/></EntityDescriptor>`
	wrap := func(inner ...string) []byte {
		return []byte(`<EntitiesDescriptor xmlns="urn:oasis:names:tc:SAML:2.0:metadata" cacheDuration="PT2H">` +
			`<EntitiesDescriptor>` + strings.Join(inner, "") + `</EntitiesDescriptor></EntitiesDescriptor>`)
	}
	t.Run("one IdP among other entities", func(t *testing.T) {
		f := newFixture(t, withIdP(func(p *samlidp.IdP) {
			b := wrap(spMD, idpMD(p))
			p.Set(func(k *samlidp.Knobs) { k.MetadataBody = b })
		}))
		md := f.sp.md.current()
		if md.entity.EntityID != f.idp.EntityID() {
			t.Fatalf("entity = %q", md.entity.EntityID)
		}
		if d := md.refreshAt.Sub(md.fetched); d != 2*time.Hour {
			t.Fatalf("refresh in %s, want the enclosing cacheDuration of 2h", d)
		}
	})
	t.Run("two IdPs need the entity ID option", func(t *testing.T) {
		var other string
		f := newFixture(t, noWait, withIdP(func(p *samlidp.IdP) {
			other = strings.Replace(idpMD(p), `entityID="`, `entityID="urn:other:`, 1)
			b := wrap(idpMD(p), other)
			p.Set(func(k *samlidp.Knobs) { k.MetadataBody = b })
		}))
		eventually(t, "the fetch to fail", func() bool { return f.sp.md.err() != nil })
		if !strings.Contains(f.sp.md.err().Error(), "2 IdPs") {
			t.Fatalf("err = %v", f.sp.md.err())
		}
		g := newFixture(t, withIdP(func(p *samlidp.IdP) {
			b := wrap(idpMD(p), other)
			p.Set(func(k *samlidp.Knobs) { k.MetadataBody = b })
		}), func(f *fixture) { f.opts.IdPEntityID = f.idp.EntityID() })
		if got := g.sp.md.current().entity.EntityID; got != g.idp.EntityID() {
			t.Fatalf("picked %q", got)
		}
	})
}

func TestRefreshSchedule(t *testing.T) {
	key, cert := testKey(t, 0)
	p, err := samlidp.New(samlidp.Options{BaseURL: "https://idp.example", Key: key, Certificate: cert})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	sp := offlineSP(t, Config{}, Options{}, now)
	for _, tc := range []struct {
		name  string
		knobs samlidp.Knobs
		want  time.Duration
	}{
		{"default", samlidp.Knobs{ValidUntil: now.Add(1000 * time.Hour)}, 24 * time.Hour},
		{"cacheDuration", samlidp.Knobs{ValidUntil: now.Add(1000 * time.Hour), CacheDuration: time.Hour}, time.Hour},
		{"validUntil soon", samlidp.Knobs{ValidUntil: now.Add(10 * time.Hour)}, 5 * time.Hour},
	} {
		p.Set(func(k *samlidp.Knobs) { *k = tc.knobs })
		md, err := sp.parseMetadata(p.Metadata())
		if err != nil {
			t.Fatal(err)
		}
		if got := md.refreshAt.Sub(now); got != tc.want {
			t.Errorf("%s: refresh in %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestMetadataURLMustBeHTTPS(t *testing.T) {
	for u, ok := range map[string]bool{
		"https://idp.example.org/metadata": true,
		"http://127.0.0.1:8080/metadata":   true,
		"http://[::1]/metadata":            true,
		"http://localhost/metadata":        true,
		"http://a.localhost:3000/metadata": true,
		"http://localhost.example.org/md":  false,
		"http://idp.example.org/metadata":  false,
		"ftp://idp.example.org/metadata":   false,
		"/metadata":                        false,
		"":                                 false,
	} {
		sp, err := New(Config{SPEntityID: testEntityID, IdPMetadataURL: u}, providers.Env{
			CallbackURL: testACS, HTTPClient: &http.Client{Transport: refuse{}}, Store: store.NewMemory(nil, 0),
		}, Options{})
		if sp != nil {
			sp.Close()
		}
		if (err == nil) != ok {
			t.Errorf("%q: err = %v", u, err)
		}
		if err != nil && code(err) != providers.CodeMisconfigured {
			t.Errorf("%q: code = %s", u, code(err))
		}
	}
}

type refuse struct{}

func (refuse) RoundTrip(*http.Request) (*http.Response, error) { return nil, errors.New("offline") }

// TestSignedMetadata: with idp_metadata_certificate, the metadata must
// carry a valid signature by that certificate's key, under the same
// algorithm policy as everything else; without it, a signature is not
// needed.
func TestSignedMetadata(t *testing.T) {
	mdKey, mdCert := testKey(t, 2)
	otherKey, otherCert := testKey(t, 1)
	certPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: mdCert.Raw}))
	signer := func(k *rsa.PrivateKey, c *x509.Certificate, o samlidp.SignOptions) func(*samlidp.Knobs) {
		return func(kn *samlidp.Knobs) { kn.MetadataSigner = &samlidp.MetadataSigner{Key: k, Cert: c, Sign: o} }
	}
	sha1 := samlidp.SignOptions{SignatureMethod: samlidp.RSASHA1, DigestMethod: samlidp.DigestSHA1}
	for _, tc := range []struct {
		name      string
		pinned    bool
		allowSHA1 bool
		knobs     func(*samlidp.Knobs)
		alter     bool
		want      string // "" for accepted
	}{
		{"signed, pinned", true, false, signer(mdKey, mdCert, samlidp.SignOptions{}), false, ""},
		{"unsigned, pinned", true, false, func(*samlidp.Knobs) {}, false, "not signed"},
		{"signed by another key, pinned", true, false, signer(otherKey, otherCert, samlidp.SignOptions{}), false, "signature is invalid"},
		{"signed then altered, pinned", true, false, signer(mdKey, mdCert, samlidp.SignOptions{}), true, "signature is invalid"},
		{"signed with SHA-1, pinned", true, false, signer(mdKey, mdCert, sha1), false, "AllowSHA1"},
		{"signed with SHA-1, pinned, allowed", true, true, signer(mdKey, mdCert, sha1), false, ""},
		{"unsigned, not pinned", false, false, func(*samlidp.Knobs) {}, false, ""},
		{"signed by anyone, not pinned", false, false, signer(otherKey, otherCert, samlidp.SignOptions{}), false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, noWait, withOptions(func(o *Options) { o.AllowSHA1 = tc.allowSHA1 }),
				withConfig(func(c *Config) {
					if tc.pinned {
						c.IdPMetadataCertificatePEM = certPEM
					}
				}),
				withIdP(func(p *samlidp.IdP) {
					p.Set(tc.knobs)
					if tc.alter {
						// A man in the middle adds his own signing key.
						_, evil := testKey(t, 0)
						body := p.Metadata()
						der := base64.StdEncoding.EncodeToString(evil.Raw)
						altered := bytes.Replace(body, []byte("<KeyDescriptor "), []byte(`<KeyDescriptor use="signing"><KeyInfo xmlns="http://www.w3.org/2000/09/xmldsig#"><X509Data><X509Certificate>`+der+`</X509Certificate></X509Data></KeyInfo></KeyDescriptor><KeyDescriptor `), 1)
						if bytes.Equal(altered, body) {
							t.Fatal("the alteration did not apply")
						}
						body = altered
						p.Set(func(k *samlidp.Knobs) { k.MetadataBody = body })
					}
				}))
			eventually(t, "a fetch", func() bool { return f.sp.Ready() || f.sp.md.err() != nil })
			if tc.want == "" {
				if !f.sp.Ready() {
					t.Fatalf("refused: %v", f.sp.md.err())
				}
				if got := f.sp.md.current().signed; got != tc.pinned {
					t.Fatalf("signed = %v", got)
				}
				tx, redirect := f.begin(f.sp)
				if _, err := post(f.sp, tx, f.idpForm(redirect)); err != nil {
					t.Fatal(err)
				}
				return
			}
			if f.sp.Ready() || !strings.Contains(f.sp.md.err().Error(), tc.want) {
				t.Fatalf("ready %v, err %v, want %q", f.sp.Ready(), f.sp.md.err(), tc.want)
			}
		})
	}
	if _, err := New(Config{SPEntityID: testEntityID, IdPMetadataURL: "https://idp.example/md", IdPMetadataCertificatePEM: "not a cert"},
		providers.Env{CallbackURL: testACS, HTTPClient: refusingClient(), Store: alwaysFresh{}}, Options{}); code(err) != providers.CodeMisconfigured ||
		!strings.Contains(err.Error(), "idp_metadata_certificate") {
		t.Fatalf("a bad certificate: %v", err)
	}
}
