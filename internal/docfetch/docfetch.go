// Package docfetch fetches the documents that providers publish for the
// parties that rely on them: a SAML IdP's metadata, a federation's
// aggregate, an MDQ server's answer for one entity, and what OpenID
// Federation's entity statements will be. Each kind had its fetch of its
// own, with its own size bound (or none), its own request set-up and its
// own texts for the same failures; a Fetcher is the one of them all: one
// request shape (a GET marked as a document fetch, which follows safe
// redirects, and as the telemetry endpoint of its kind), one bound on time
// and size applied by the client itself, conditional requests, and one set
// of errors a caller can tell apart with errors.Is.
//
// What a document means (its signature, its validity, its cache hints) is
// the caller's to read: a Fetcher returns bytes and validators.
package docfetch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/extauth/extauth/internal/outbound"
	"github.com/extauth/extauth/internal/telemetry"
	"github.com/extauth/extauth/providers"
)

// ErrNotFound is wrapped by the error of a fetch the server answered with
// 404 Not Found or 410 Gone: the document (an MDQ server's entity) does
// not exist, which a caller may remember, unlike a failure.
var ErrNotFound = errors.New("the server does not have it")

// ErrHTML is wrapped by the error of a fetch answered with a web page
// (Content-Type text/html), typically a login or error page served with
// status 200 where a document was expected, unless the Kind names an error
// of its own for it.
var ErrHTML = errors.New("the answer is an HTML page")

// Kind is a kind of document, and how it is fetched.
type Kind struct {
	// What names it in errors ("SAML metadata").
	What string
	// Accept is the Accept header of its requests.
	Accept string
	// Endpoint is the telemetry endpoint its requests are measured as.
	Endpoint telemetry.Endpoint
	// Timeout bounds a fetch, its redirects and the body included; zero
	// keeps the client's.
	Timeout time.Duration
	// MaxBytes bounds the body: a longer one fails the fetch.
	MaxBytes int64
	// HTML, when set, is wrapped instead of ErrHTML.
	HTML error
}

// Fetcher fetches documents of one Kind. Make one with New.
type Fetcher struct {
	client *http.Client
	kind   Kind
}

// New returns a Fetcher of documents of kind k, whose requests go through
// client under k's bounds (a client outbound.NewClient made keeps its
// transport and its observation).
func New(client *http.Client, k Kind) *Fetcher {
	if k.Timeout <= 0 {
		k.Timeout = outbound.Timeout(client)
	}
	if k.Timeout <= 0 {
		k.Timeout = outbound.DefaultTimeout
	}
	if k.MaxBytes <= 0 {
		k.MaxBytes = outbound.DefaultMaxBody
	}
	if k.HTML == nil {
		k.HTML = ErrHTML
	}
	return &Fetcher{client: outbound.WithBounds(client, k.Timeout, k.MaxBytes), kind: k}
}

// Validators are what a server said of the copy a caller holds, for a
// conditional fetch: its ETag and Last-Modified.
type Validators struct {
	ETag, LastModified string
}

// Document is a fetched document.
type Document struct {
	// Body is the document; nil when NotModified.
	Body []byte
	// NotModified is set when the server answered 304 to a conditional
	// fetch: the caller's copy is still current.
	NotModified bool
	// Validators are the answer's, for the next conditional fetch.
	Validators
}

// Get fetches the document at rawURL, conditionally on v when it has a
// validator. It fails on a status other than 200 and 304 (wrapping
// ErrNotFound for 404 and 410), on an HTML page (ErrHTML, or Kind.HTML), on a body past
// the size bound, and on a transport failure or time-out (a
// *providers.Error with the code of the failure). Error texts start with
// the document's name and never quote the URL's query.
func (f *Fetcher) Get(ctx context.Context, rawURL string, v Validators) (*Document, error) {
	ctx = telemetry.WithEndpoint(outbound.Document(ctx), f.kind.Endpoint)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.kind.What, outbound.Scrub(err))
	}
	req.Header.Set("Accept", f.kind.Accept)
	if v.ETag != "" {
		req.Header.Set("If-None-Match", v.ETag)
	}
	if v.LastModified != "" {
		req.Header.Set("If-Modified-Since", v.LastModified)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, f.transportError(err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotModified && (v.ETag != "" || v.LastModified != ""):
		drain(resp)
		return &Document{NotModified: true, Validators: v}, nil
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		drain(resp)
		return nil, fmt.Errorf("%s: HTTP status %d: %w", f.kind.What, resp.StatusCode, ErrNotFound)
	case resp.StatusCode != http.StatusOK:
		drain(resp)
		return nil, fmt.Errorf("%s: HTTP status %d", f.kind.What, resp.StatusCode)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/html" {
		drain(resp)
		return nil, fmt.Errorf("%s: %w", f.kind.What, f.kind.HTML)
	}
	body, err := f.read(resp)
	if err != nil {
		return nil, err
	}
	return &Document{Body: body, Validators: Validators{ETag: resp.Header.Get("ETag"), LastModified: resp.Header.Get("Last-Modified")}}, nil
}

// read reads the body into one buffer of the size it announces, so that a
// large document is not copied while it grows.
func (f *Fetcher) read(resp *http.Response) ([]byte, error) {
	size := int64(64 << 10)
	if resp.ContentLength > 0 && resp.ContentLength <= f.kind.MaxBytes {
		size = resp.ContentLength + 1
	}
	b := bytes.NewBuffer(make([]byte, 0, size))
	if _, err := b.ReadFrom(resp.Body); err != nil {
		return nil, f.transportError(err)
	}
	return b.Bytes(), nil
}

// transportError is the error of a fetch that got no whole answer: the
// size bound, said with the bound, or a transport failure or time-out,
// with the code of the failure.
func (f *Fetcher) transportError(err error) error {
	if outbound.IsTooLarge(err) {
		return providers.NewError(providers.CodeInvalidResponse, fmt.Sprintf("%s: too large (over %d bytes)", f.kind.What, f.kind.MaxBytes), outbound.Scrub(err))
	}
	return providers.TransportError(err, f.kind.What)
}

// drain reads a little of a body that is not used, so that its connection
// can be used again.
func drain(resp *http.Response) { io.Copy(io.Discard, io.LimitReader(resp.Body, 4096)) }
