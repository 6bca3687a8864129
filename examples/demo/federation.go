package main

import (
	"encoding/pem"
	"net/http"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/samlidp"
	"github.com/extauth/extauth/internal/outbound"
)

// The demo's development federation: several SAML IdPs, each with its own
// people, listed in one signed aggregate, as a research and education
// federation publishes them. A tenant signs in through it, with the
// discovery page to choose an IdP. Everything is served on the tenant's
// host, under /dev/: the IdPs, the aggregate, and the SP's metadata they
// read.

// federationTenant is the tenant that signs in through the federation.
const federationTenant = "f"

// federationName is what the demo calls the federation.
const federationName = "Research Federation"

// devFederationIdPs are the federation's IdPs: a path under /dev/idp/, the
// names its metadata gives in each language, and the one person it signs
// in.
var devFederationIdPs = []struct {
	slug  string
	names map[string]string
	user  samlidp.User
}{
	{"ada", map[string]string{"en": "Ada Lovelace University"}, samlidp.User{
		NameID: "ada@lovelace.example", NameIDFormat: "urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress",
		Email: "ada@lovelace.example", GivenName: "Ada", Surname: "Lovelace", DisplayName: "Ada Lovelace", UserName: "ada"}},
	{"lichtenberg", map[string]string{"en": "University of Lichtenberg", "de": "Universität Lichtenberg"}, samlidp.User{
		NameID: "emmy@lichtenberg.example", NameIDFormat: "urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress",
		Email: "emmy@lichtenberg.example", GivenName: "Emmy", Surname: "Noether", DisplayName: "Emmy Noether", UserName: "emmy"}},
	{"bellevue", map[string]string{"en": "University of Bellevue", "fr": "Université de Bellevue"}, samlidp.User{
		NameID: "marie@bellevue.example", NameIDFormat: "urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress",
		Email: "marie@bellevue.example", GivenName: "Marie", Surname: "Curie", DisplayName: "Marie Curie", UserName: "marie"}},
}

// mountDevFederation serves the federation's IdPs and its aggregate on mux
// (the tenant's host) for an SP at base, and returns the tenant's
// configuration (SAML through the federation) and the IdPs.
func mountDevFederation(mux *http.ServeMux, base string, client *http.Client) (*extauth.Config, []*samlidp.IdP, error) {
	spMetadata := base + "/users/auth/saml/metadata"
	if client == nil {
		// The IdPs read the SP's metadata at the tenant's host, a name
		// under .localhost: extauth's own client dials those at
		// 127.0.0.1, as browsers do.
		client = outbound.NewClient(nil, 5*time.Second, 0)
	}
	var idps []*samlidp.IdP
	var entities [][]byte
	for _, d := range devFederationIdPs {
		prefix := "/dev/idp/" + d.slug
		idp, err := samlidp.New(samlidp.Options{BaseURL: base + prefix, User: d.user, SPMetadataURL: spMetadata, HTTPClient: client})
		if err != nil {
			return nil, nil, err
		}
		mux.Handle(prefix+"/", idp)
		idps = append(idps, idp)
		entity, err := samlidp.Decorate(idp.Metadata(), samlidp.Entity{DisplayNames: d.names, RegistrationAuthority: base + "/dev/federation"})
		if err != nil {
			return nil, nil, err
		}
		entities = append(entities, entity)
	}
	key, cert, err := samlidp.NewKeyPair(federationName, time.Now().Add(-time.Hour))
	if err != nil {
		return nil, nil, err
	}
	// The demo runs for a while: the aggregate is good for a week, and
	// the SP reads it again at its cacheDuration.
	aggregate, err := samlidp.Aggregate(entities, samlidp.AggregateOptions{Signer: &samlidp.MetadataSigner{Key: key, Cert: cert},
		ValidUntil: time.Now().Add(7 * 24 * time.Hour), CacheDuration: time.Hour, Name: base + "/dev/federation"})
	if err != nil {
		return nil, nil, err
	}
	mux.HandleFunc("GET /dev/federation.xml", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/samlmetadata+xml")
		w.Write(aggregate)
	})
	cfg := &extauth.Config{SAML: extauth.SAMLConfig{SPEntityID: spMetadata, Additional: extauth.SAMLAdditionalSettings{
		Federation: extauth.SAMLFederation{MetadataURL: base + "/dev/federation.xml",
			SigningCertificate: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}))}}}}
	allowStepUp(cfg)
	return cfg, idps, nil
}
