package samlsp_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/extauth/extauth/providers"
	"github.com/extauth/extauth/samlsp"
)

// ExampleSP_CertificateExpiries reads the not-after times of the
// certificates an SP depends on, as a monitoring job or an expiry gauge
// does. Before its first copy of the IdP metadata the SP knows only its
// own.
func ExampleSP_CertificateExpiries() {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		log.Fatal(err)
	}
	notAfter := time.Date(2036, 1, 31, 0, 0, 0, 0, time.UTC)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "My App"},
		NotBefore: notAfter.AddDate(-10, 0, 0), NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		log.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		log.Fatal(err)
	}
	sp, err := samlsp.New(samlsp.Config{
		SPEntityID:     "https://app.example.org/saml",
		IdPMetadataURL: "https://idp.example.org/metadata",
		CertificatePEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		PrivateKeyPEM:  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})),
	}, providers.Env{
		CallbackURL: "https://app.example.org/users/auth/saml/callback",
		// No network here: the IdP metadata never comes.
		HTTPClient: &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, errors.New("offline") })},
		Store:      &oneInstanceStore{seen: map[string]time.Time{}},
	}, samlsp.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer sp.Close()
	for _, c := range sp.CertificateExpiries() {
		fmt.Println(c.Kind, c.Use, c.Subject, c.NotAfter.Format(time.DateOnly))
	}
	// Output:
	// sp sign+decrypt CN=My App 2036-01-31
}

// oneInstanceStore remembers single-use IDs in one process. A host passes
// extauth's Options.Store (extauth.NewMemoryStore, or a store that its
// instances share) and never builds one. These examples do not import
// extauth: it imports this package, so go test would compile it again for
// this package's tests.
type oneInstanceStore struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

func (s *oneInstanceStore) Consume(_ context.Context, key string, until time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u, ok := s.seen[key]; ok && time.Now().Before(u) {
		return false, nil
	}
	s.seen[key] = until
	return true, nil
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// ExampleMDQEntityURL is where a federation's MDQ server answers for an
// IdP, as the entity ID itself or as its {sha1} transform.
func ExampleMDQEntityURL() {
	base, _ := url.Parse("https://mdq.example.org/")
	fmt.Println(samlsp.MDQEntityURL(base, "https://idp.example.ac.uk/idp/shibboleth", false))
	fmt.Println(samlsp.MDQEntityURL(base, "https://idp.example.ac.uk/idp/shibboleth", true))
	// Output:
	// https://mdq.example.org/entities/https%3A%2F%2Fidp.example.ac.uk%2Fidp%2Fshibboleth
	// https://mdq.example.org/entities/%7Bsha1%7De9b14179427f2152cec24988fdd7be04abaf13fd
}

// ExampleParseFederationMetadata verifies a federation's aggregate as the
// SAML strategy will, before it is deployed: signed with the pinned
// certificate, valid, and what it holds.
func ExampleParseFederationMetadata() {
	body, err := os.ReadFile("federation-metadata.xml")
	if err != nil {
		log.Fatal(err)
	}
	pemCert, err := os.ReadFile("federation-signer.pem")
	if err != nil {
		log.Fatal(err)
	}
	cert, err := samlsp.ParseCertificatePEM(string(pemCert))
	if err != nil {
		log.Fatal(err)
	}
	md, err := samlsp.ParseFederationMetadata(body, samlsp.FederationRules{Certificate: cert, Now: time.Now(),
		EntityCategories: []string{"http://refeds.org/category/research-and-scholarship"}})
	if err != nil {
		log.Fatalf("the application would refuse this aggregate: %v", err)
	}
	fmt.Printf("%d entities, %d IdPs, %d of them allowed, valid until %s\n", md.Entities, md.IdPs, md.Allowed, md.ValidUntil.Format(time.RFC3339))
}
