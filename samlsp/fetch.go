package samlsp

import (
	"net/http"
	"time"

	"github.com/extauth/extauth/internal/docfetch"
	"github.com/extauth/extauth/internal/telemetry"
)

// The SAML documents the SP fetches, each kind under one set of limits
// and errors (docfetch): one entity's metadata (the IdP's own, or an MDQ
// server's answer for one IdP), and a federation's aggregate.
const (
	// metadataAccept asks for SAML metadata by its media type (RFC 7303's
	// XML types after it, for servers that know no other): what an MDQ
	// server negotiates on.
	metadataAccept = "application/samlmetadata+xml, application/xml;q=0.9, text/xml;q=0.8"
	// aggregateTimeout bounds the fetch of an aggregate, body included.
	aggregateTimeout = 5 * time.Minute
)

// entityDocuments is the Fetcher of one entity's metadata: an IdP's, or an
// MDQ server's answer, under the client's time-out (10 s by default).
func entityDocuments(c *http.Client) *docfetch.Fetcher {
	return docfetch.New(c, docfetch.Kind{What: "SAML metadata", Accept: metadataAccept, Endpoint: telemetry.EndpointMetadata,
		MaxBytes: DefaultMetadataMaxBytes, HTML: ErrHTMLMetadata})
}

// aggregateDocuments is the Fetcher of a federation's aggregate, of at
// most maxBytes.
func aggregateDocuments(c *http.Client, maxBytes int64) *docfetch.Fetcher {
	return docfetch.New(c, docfetch.Kind{What: "federation metadata", Accept: metadataAccept, Endpoint: telemetry.EndpointMetadata,
		Timeout: aggregateTimeout, MaxBytes: maxBytes, HTML: ErrHTMLMetadata})
}
