package samlsp

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"encoding/xml"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/beevik/etree"
	"github.com/crewjam/saml"
	dsig "github.com/russellhaering/goxmldsig"

	"github.com/extauth/extauth/internal/testkeys"
)

// A federation aggregate of n entities, about 8.7 KB each as the UK
// federation's are (8 000 entities, 70 MB), generated in exclusive
// canonical form so that its digest is that of its own bytes: signing it
// needs no canonicalizer, ours or any other, and no tree of it.
// TestGeneratedAggregateVerifiesWithGoxmldsig holds a small one to
// goxmldsig's verification.
func generateAggregate(tb testing.TB, n int, k fedKeys, validUntil time.Time) []byte {
	tb.Helper()
	certs := make([]string, 4)
	for i := range certs {
		_, c := testkeys.LendPair(tb, fmt.Sprintf("IdP signing key %d", i), time.Now().Add(-time.Hour))
		certs[i] = base64.StdEncoding.EncodeToString(c.Raw)
	}
	rng := mrand.New(mrand.NewPCG(1, 2))
	logo := make([]byte, 2400)
	for i := range logo {
		logo[i] = byte(rng.IntN(256))
	}
	logoData := "data:image/png;base64," + base64.StdEncoding.EncodeToString(logo)
	const (
		mdNS   = `xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata"`
		dsNS   = `xmlns:ds="http://www.w3.org/2000/09/xmldsig#"`
		uiNS   = `xmlns:mdui="urn:oasis:names:tc:SAML:metadata:ui"`
		rpiNS  = `xmlns:mdrpi="urn:oasis:names:tc:SAML:metadata:rpi"`
		attrNS = `xmlns:mdattr="urn:oasis:names:tc:SAML:metadata:attribute"`
		samlNS = `xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion"`
	)
	var b bytes.Buffer
	b.Grow(n * 9000)
	fmt.Fprintf(&b, `<md:EntitiesDescriptor %s ID="_aggregate" Name="urn:example:federation" validUntil="%s">`, mdNS, validUntil.UTC().Format(time.RFC3339))
	b.WriteString("\n")
	for i := range n {
		host := fmt.Sprintf("org%05d.example.ac.uk", i)
		idp := i%4 != 3
		fmt.Fprintf(&b, `<md:EntityDescriptor entityID="https://%s/idp/shibboleth">`, host)
		fmt.Fprintf(&b, "\n"+`<md:Extensions><mdrpi:RegistrationInfo %s registrationAuthority="http://ukfederation.org.uk" registrationInstant="2014-01-01T00:00:00Z"><mdrpi:RegistrationPolicy xml:lang="en">http://ukfederation.org.uk/doc/mdrps-20130902</mdrpi:RegistrationPolicy></mdrpi:RegistrationInfo>`, rpiNS)
		fmt.Fprintf(&b, `<mdattr:EntityAttributes %s><saml:Attribute %s Name="http://macedir.org/entity-category" NameFormat="urn:oasis:names:tc:SAML:2.0:attrname-format:uri"><saml:AttributeValue>http://refeds.org/category/research-and-scholarship</saml:AttributeValue>`, attrNS, samlNS)
		if i%50 == 7 {
			b.WriteString(`<saml:AttributeValue>http://refeds.org/category/hide-from-discovery</saml:AttributeValue>`)
		}
		b.WriteString(`</saml:Attribute></mdattr:EntityAttributes></md:Extensions>` + "\n")
		role := "SPSSODescriptor"
		if idp {
			role = "IDPSSODescriptor"
		}
		fmt.Fprintf(&b, `<md:%s protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">`, role)
		fmt.Fprintf(&b, "\n"+`<md:Extensions><mdui:UIInfo %s>`, uiNS)
		for _, l := range []string{"en", "cy", "de", "fr"} {
			fmt.Fprintf(&b, `<mdui:DisplayName xml:lang="%s">Organisation %d (%s) &amp; Partners</mdui:DisplayName>`, l, i, l)
		}
		for _, l := range []string{"en", "cy", "de"} {
			fmt.Fprintf(&b, `<mdui:Description xml:lang="%s">The identity provider of Organisation %d, for its staff, students and visitors; it releases the attributes of the Research and Scholarship category.</mdui:Description>`, l, i)
		}
		fmt.Fprintf(&b, `<mdui:InformationURL xml:lang="en">https://%s/about</mdui:InformationURL><mdui:PrivacyStatementURL xml:lang="en">https://%s/privacy</mdui:PrivacyStatementURL>`, host, host)
		if i%3 == 0 {
			fmt.Fprintf(&b, `<mdui:Logo height="60" width="80">%s</mdui:Logo>`, logoData)
		} else {
			fmt.Fprintf(&b, `<mdui:Logo height="60" width="80">https://%s/logo.png</mdui:Logo>`, host)
		}
		b.WriteString(`</mdui:UIInfo></md:Extensions>` + "\n")
		for j, use := range []string{"signing", "encryption"} {
			fmt.Fprintf(&b, `<md:KeyDescriptor use="%s"><ds:KeyInfo %s><ds:X509Data><ds:X509Certificate>%s</ds:X509Certificate></ds:X509Data></ds:KeyInfo></md:KeyDescriptor>`+"\n", use, dsNS, certs[(i+j)%len(certs)])
		}
		if idp {
			fmt.Fprintf(&b, `<md:NameIDFormat>urn:oasis:names:tc:SAML:2.0:nameid-format:transient</md:NameIDFormat><md:SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect" Location="https://%s/idp/profile/SAML2/Redirect/SSO"></md:SingleSignOnService><md:SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST" Location="https://%s/idp/profile/SAML2/POST/SSO"></md:SingleSignOnService>`, host, host)
		} else {
			fmt.Fprintf(&b, `<md:AssertionConsumerService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST" Location="https://%s/Shibboleth.sso/SAML2/POST" index="1"></md:AssertionConsumerService>`, host)
		}
		if !idp {
			b.WriteString(`<md:AttributeConsumingService index="1"><md:ServiceName xml:lang="en">Service</md:ServiceName>`)
			for _, at := range []string{"eduPersonPrincipalName", "eduPersonScopedAffiliation", "mail", "displayName", "eduPersonTargetedID", "givenName", "sn"} {
				fmt.Fprintf(&b, `<md:RequestedAttribute FriendlyName="%s" Name="urn:oid:1.3.6.1.4.1.5923.1.1.1.%d" NameFormat="urn:oasis:names:tc:SAML:2.0:attrname-format:uri" isRequired="true"></md:RequestedAttribute>`, at, len(at))
			}
			b.WriteString(`</md:AttributeConsumingService>`)
		}
		fmt.Fprintf(&b, "\n</md:%s>\n", role)
		if idp {
			fmt.Fprintf(&b, `<md:AttributeAuthorityDescriptor protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol"><md:KeyDescriptor use="signing"><ds:KeyInfo %s><ds:X509Data><ds:X509Certificate>%s</ds:X509Certificate></ds:X509Data></ds:KeyInfo></md:KeyDescriptor><md:AttributeService Binding="urn:oasis:names:tc:SAML:2.0:bindings:SOAP" Location="https://%s:8443/idp/profile/SAML2/SOAP/AttributeQuery"></md:AttributeService></md:AttributeAuthorityDescriptor>`+"\n", dsNS, certs[(i+2)%len(certs)], host)
		}
		fmt.Fprintf(&b, `<md:Organization><md:OrganizationName xml:lang="en">Organisation %d</md:OrganizationName><md:OrganizationDisplayName xml:lang="en">Organisation %d</md:OrganizationDisplayName><md:OrganizationURL xml:lang="en">https://%s/</md:OrganizationURL></md:Organization>`+"\n", i, i, host)
		for _, t := range []string{"technical", "support", "administrative"} {
			fmt.Fprintf(&b, `<md:ContactPerson contactType="%s"><md:GivenName>Computing Service</md:GivenName><md:EmailAddress>mailto:%s-help@%s</md:EmailAddress></md:ContactPerson>`+"\n", t, t, host)
		}
		b.WriteString("</md:EntityDescriptor>\n")
	}
	b.WriteString("</md:EntitiesDescriptor>")
	doc := b.Bytes()
	digest := sha256.Sum256(doc)
	signedInfo := `<ds:SignedInfo ` + dsNS + `><ds:CanonicalizationMethod Algorithm="http://www.w3.org/2001/10/xml-exc-c14n#"></ds:CanonicalizationMethod>` +
		`<ds:SignatureMethod Algorithm="http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"></ds:SignatureMethod><ds:Reference URI="#_aggregate"><ds:Transforms>` +
		`<ds:Transform Algorithm="http://www.w3.org/2000/09/xmldsig#enveloped-signature"></ds:Transform><ds:Transform Algorithm="http://www.w3.org/2001/10/xml-exc-c14n#"></ds:Transform>` +
		`</ds:Transforms><ds:DigestMethod Algorithm="http://www.w3.org/2001/04/xmlenc#sha256"></ds:DigestMethod><ds:DigestValue>` +
		base64.StdEncoding.EncodeToString(digest[:]) + `</ds:DigestValue></ds:Reference></ds:SignedInfo>`
	sum := sha256.Sum256([]byte(signedInfo))
	value, err := rsa.SignPKCS1v15(rand.Reader, k.key, crypto.SHA256, sum[:])
	if err != nil {
		tb.Fatal(err)
	}
	sig := `<ds:Signature ` + dsNS + `>` + strings.Replace(signedInfo, " "+dsNS, "", 1) + `<ds:SignatureValue>` +
		base64.StdEncoding.EncodeToString(value) + `</ds:SignatureValue></ds:Signature>`
	at := bytes.IndexByte(doc, '>') + 1
	out := make([]byte, 0, len(doc)+len(sig))
	out = append(append(append(out, doc[:at]...), sig...), doc[at:]...)
	return out
}

// The generator signs what goxmldsig verifies: its canonical form is right.
func TestGeneratedAggregateVerifiesWithGoxmldsig(t *testing.T) {
	k := newFedKeys(t)
	doc := generateAggregate(t, 12, k, time.Now().Add(24*time.Hour))
	root, err := parseXML(doc)
	if err != nil {
		t.Fatal(err)
	}
	vc := dsig.NewDefaultValidationContext(&dsig.MemoryX509CertificateStore{Roots: []*x509.Certificate{k.cert}})
	vc.IdAttribute = "ID"
	if _, err := vc.Validate(root); err != nil {
		t.Fatalf("goxmldsig: %v", err)
	}
	agg, err := scanAggregate(doc, rulesFor(k))
	if err != nil {
		t.Fatal(err)
	}
	if agg.entities != 12 || len(agg.idps) != 9 {
		t.Fatalf("%d entities, %d IdPs", agg.entities, len(agg.idps))
	}
}

var (
	benchRounds  = flag.Int("rounds", 1, "how many times BenchmarkFederationAggregate runs its sides, alternating")
	aggregateOut = flag.String("aggregate.out", "", "a directory where BenchmarkFederationAggregate writes its aggregate (aggregate.xml) and the federation's signing certificate (federation.pem), for bench/pysaml2_aggregate.py")
)

func pemCert(c *x509.Certificate) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}))
}

// heapPeak runs f and returns the most heap it held at once beyond what was
// live before (sampled every 200 µs) and what stays live after it.
func heapPeak(f func()) (peak, retained uint64) {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	base := read()
	var max atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(200 * time.Microsecond)
		defer t.Stop()
		for {
			if v := read(); v > max.Load() {
				max.Store(v)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	f()
	close(stop)
	<-done
	if v := read(); v > max.Load() {
		max.Store(v)
	}
	runtime.GC()
	return max.Load() - base, read() - base
}

// BenchmarkFederationAggregate verifies and indexes a generated 8 000-entity
// aggregate (about 70 MB), beside what a Go user would otherwise run:
// crewjam/saml's types unmarshalled from the same bytes (no signature
// verified). peak-MB is the most heap held at once beyond the document
// itself, x-file that over the document's size; retained-MB what stays;
// rss-MB the process's peak resident set while it ran, the document and
// the runtime included (Linux only). -aggregate.out DIR writes the
// aggregate and its certificate for another implementation to load.
//
//	go test ./samlsp/ -run XXX -bench 'FederationAggregate$' -benchtime 1x -rounds 5
func BenchmarkFederationAggregate(b *testing.B) {
	k := newFedKeys(b)
	n := 8000
	doc := generateAggregate(b, n, k, time.Now().Add(7*24*time.Hour))
	b.Logf("aggregate: %d entities, %.1f MB", n, float64(len(doc))/1e6)
	if dir := *aggregateOut; dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "aggregate.xml"), doc, 0o644); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "federation.pem"), []byte(pemCert(k.cert)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	report := func(b *testing.B, peak, retained, rss uint64, cpu time.Duration) {
		b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
		b.ReportMetric(float64(peak)/1e6, "peak-MB")
		b.ReportMetric(float64(peak)/float64(len(doc)), "x-file")
		b.ReportMetric(float64(retained)/1e6, "retained-MB")
		if rss != 0 {
			b.ReportMetric(float64(rss)/1e6, "rss-MB")
		}
	}
	for range *benchRounds {
		b.Run("extauth", func(b *testing.B) {
			var peak, retained, rss uint64
			var agg *aggregate
			start := cpuTime()
			for b.Loop() {
				rss = rssPeak(func() {
					peak, retained = heapPeak(func() {
						var err error
						if agg, err = scanAggregate(doc, rulesFor(k)); err != nil {
							b.Fatal(err)
						}
					})
				})
			}
			report(b, peak, retained, rss, cpuTime()-start)
			b.ReportMetric(float64(len(agg.idps)), "IdPs")
		})
		b.Run("crewjam", func(b *testing.B) {
			var peak, retained, rss uint64
			var eds *saml.EntitiesDescriptor
			start := cpuTime()
			for b.Loop() {
				rss = rssPeak(func() {
					peak, retained = heapPeak(func() {
						eds = &saml.EntitiesDescriptor{}
						if err := xml.Unmarshal(doc, eds); err != nil {
							b.Fatal(err)
						}
					})
				})
			}
			report(b, peak, retained, rss, cpuTime()-start)
			runtime.KeepAlive(eds)
		})
	}
}

// BenchmarkFederationLookup is a sign-in's look-up of its IdP in the
// 8 000-entity aggregate: cached (the IdP signed someone in lately), and
// not (its entry parsed from the aggregate).
func BenchmarkFederationLookup(b *testing.B) {
	k := newFedKeys(b)
	doc := generateAggregate(b, 8000, k, time.Now().Add(7*24*time.Hour))
	agg, err := scanAggregate(doc, rulesFor(k))
	if err != nil {
		b.Fatal(err)
	}
	sp := offlineSP(b, Config{IdPMetadataURL: "-", Federation: FederationConfig{MetadataURL: "http://127.0.0.1:1/agg",
		SigningCertificatePEM: pemCert(k.cert)}}, Options{}, time.Now())
	sp.fed.src.keep(agg, time.Now(), time.Time{}, false)
	ctx := b.Context()
	b.Run("cached", func(b *testing.B) {
		id := agg.idps[17].entityID
		for b.Loop() {
			if _, perr := sp.idpFor(ctx, id); perr != nil {
				b.Fatal(perr)
			}
		}
	})
	b.Run("parsed", func(b *testing.B) {
		i := 0
		for b.Loop() {
			e := agg.idps[i%len(agg.idps)]
			i++
			if _, err := sp.parseEntity(agg, e); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkFederationVerifyDOM verifies a 2 000-entity aggregate (about
// 17 MB) beside what verifying it with goxmldsig takes: an etree tree of the
// document, then Validate, which copies and canonicalizes it. (At 8 000
// entities that is several hundred MB on a shared machine: the smaller one
// shows the ratio.)
//
//	go test ./samlsp/ -run XXX -bench FederationVerifyDOM -benchtime 1x -rounds 3
func BenchmarkFederationVerifyDOM(b *testing.B) {
	k := newFedKeys(b)
	doc := generateAggregate(b, 2000, k, time.Now().Add(7*24*time.Hour))
	measure := func(b *testing.B, f func()) {
		var peak uint64
		start := cpuTime()
		for b.Loop() {
			peak, _ = heapPeak(f)
		}
		b.ReportMetric((cpuTime()-start).Seconds()/float64(b.N), "cpu-s/op")
		b.ReportMetric(float64(peak)/1e6, "peak-MB")
		b.ReportMetric(float64(peak)/float64(len(doc)), "x-file")
	}
	for range *benchRounds {
		b.Run("extauth", func(b *testing.B) {
			measure(b, func() {
				if _, err := scanAggregate(doc, rulesFor(k)); err != nil {
					b.Fatal(err)
				}
			})
		})
		b.Run("goxmldsig", func(b *testing.B) {
			measure(b, func() {
				d := etree.NewDocument()
				if err := d.ReadFromBytes(doc); err != nil {
					b.Fatal(err)
				}
				vc := dsig.NewDefaultValidationContext(&dsig.MemoryX509CertificateStore{Roots: []*x509.Certificate{k.cert}})
				vc.IdAttribute = "ID"
				if _, err := vc.Validate(d.Root()); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}
