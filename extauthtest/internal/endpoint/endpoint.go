// Package endpoint holds what the fake providers' endpoints share: faults
// set per endpoint and played on entry (a server error, a hang that ends
// with the client, an oversized or malformed body), call counts, random
// tokens and redirect queries.
//
// Each fake keeps its own endpoint names and error shapes; a Faults value
// only needs to know how that fake answers each fault.
package endpoint

import (
	"crypto/rand"
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// Fault is a way for an endpoint to misbehave.
type Fault int

// The faults.
const (
	// None: behave.
	None Fault = iota
	// ServerError answers 500.
	ServerError
	// Hang answers nothing until the client gives up or the fake is closed.
	Hang
	// HugeBody answers 200 with a body of HugeBodySize filler bytes.
	HugeBody
	// Malformed answers 200 with a body that is not what the endpoint
	// should send.
	Malformed
	// Deny, on an endpoint where a user decides, answers as when the user
	// refuses: Enter lets the handler go on, and the handler asks Get.
	Deny
)

// HugeBodySize is the filler in a HugeBody answer: past any sane bound.
const HugeBodySize = 8 << 20

// Faults holds the faults set on a fake's endpoints, named by E, and counts
// the calls each endpoint has had. The zero value is ready; set the answer
// fields before the fake serves.
type Faults[E comparable] struct {
	// ServerError writes the ServerError answer; http.Error's plain 500
	// when nil.
	ServerError func(http.ResponseWriter)
	// Huge frames the HugeBody answer.
	Huge Huge
	// Malformed is the Malformed answer.
	Malformed Body

	mu     sync.Mutex
	faults map[E]Fault
	calls  map[E]int
	done   chan struct{}
	closed bool
}

// Set makes endpoint e misbehave with f; None restores it.
func (fs *Faults[E]) Set(e E, f Fault) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.faults == nil {
		fs.faults = map[E]Fault{}
	}
	fs.faults[e] = f
}

// Get returns the fault set on e.
func (fs *Faults[E]) Get(e E) Fault {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.faults[e]
}

// Calls reports how many requests reached e, failed ones included.
func (fs *Faults[E]) Calls(e E) int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.calls[e]
}

// Close ends every hanging request, and any that hangs later. The fake
// stays usable otherwise.
func (fs *Faults[E]) Close() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if !fs.closed {
		close(fs.doneLocked())
		fs.closed = true
	}
}

func (fs *Faults[E]) doneLocked() chan struct{} {
	if fs.done == nil {
		fs.done = make(chan struct{})
	}
	return fs.done
}

// Enter counts a call to e and plays its fault. It reports whether the
// handler should go on; false means the fault has answered.
func (fs *Faults[E]) Enter(w http.ResponseWriter, r *http.Request, e E) bool {
	fs.mu.Lock()
	if fs.calls == nil {
		fs.calls = map[E]int{}
	}
	fs.calls[e]++
	f := fs.faults[e]
	done := fs.doneLocked()
	fs.mu.Unlock()
	switch f {
	case ServerError:
		if fs.ServerError != nil {
			fs.ServerError(w)
		} else {
			http.Error(w, "Internal Server Error", http.StatusInternalServerError)
		}
	case Hang:
		Hold(r, done)
	case HugeBody:
		fs.Huge.Write(w, HugeBodySize)
	case Malformed:
		fs.Malformed.Write(w)
	default:
		return true
	}
	return false
}

// Hold answers nothing until the client gives up on r or stop is closed
// (a nil stop never is). It drains the request body first: net/http
// watches for the client leaving only once the body has been read, so
// until then r's context would never end and the handler would leak.
func Hold(r *http.Request, stop <-chan struct{}) {
	_, _ = io.Copy(io.Discard, r.Body)
	select {
	case <-r.Context().Done():
	case <-stop:
	}
}

// Huge frames an oversized body: Prefix, then filler, then Suffix, so that
// a client sees the start of a plausible answer that never fits its bound.
type Huge struct {
	ContentType string
	Prefix      string
	Fill        byte
	Suffix      string
}

// Write answers 200 with n filler bytes inside the frame. It writes in
// chunks and stops when the client has gone.
func (h Huge) Write(w http.ResponseWriter, n int) {
	w.Header().Set("Content-Type", h.ContentType)
	io.WriteString(w, h.Prefix)
	chunk := []byte(strings.Repeat(string(h.Fill), min(n, 64<<10)))
	for n > 0 {
		c := chunk[:min(n, len(chunk))]
		if _, err := w.Write(c); err != nil {
			return
		}
		n -= len(c)
	}
	io.WriteString(w, h.Suffix)
}

// Body is a fixed answer.
type Body struct {
	ContentType string
	Text        string
}

// Write answers 200 with b.
func (b Body) Write(w http.ResponseWriter) {
	w.Header().Set("Content-Type", b.ContentType)
	io.WriteString(w, b.Text)
}

// Random returns n random bytes, base64url-encoded: codes, tokens, secrets
// and interaction handles no one can guess.
func Random(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails: crypto/rand crashes the program instead
	return base64.RawURLEncoding.EncodeToString(b)
}

// AppendQuery returns the URL base with q's parameters set in its query,
// replacing those of the same name and keeping the others; base itself
// when it does not parse.
func AppendQuery(base string, q url.Values) string {
	u, err := url.Parse(base)
	if err != nil {
		return base
	}
	old := u.Query()
	for k, vs := range q {
		old[k] = vs
	}
	u.RawQuery = old.Encode()
	return u.String()
}
