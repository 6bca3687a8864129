package providers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
)

// maxProviderBody bounds every provider answer the social strategies read,
// whatever bound the client has: tokens and profiles are a few kilobytes.
const maxProviderBody = 1 << 20

// errProviderBodyTooLarge marks an answer past maxProviderBody.
var errProviderBodyTooLarge = errors.New("provider answer exceeds the size bound")

// providerCall sends req and reads the whole bounded answer. Transport
// failures come back as an *Error with the right code: timeout,
// invalid_response for an oversized body, provider_unavailable otherwise.
// The cause never carries the request's query.
func providerCall(client *http.Client, req *http.Request, what string) (*http.Response, []byte, *Error) {
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, transportError(err, what)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxProviderBody+1))
	if err == nil && len(body) > maxProviderBody {
		err = errProviderBodyTooLarge
	}
	if err != nil {
		return nil, nil, transportError(err, what)
	}
	return resp, body, nil
}

// transportError classifies a failed exchange with a provider.
func transportError(err error, what string) *Error {
	cause := scrubURLError(err)
	switch {
	case isTooLarge(err):
		return NewError(CodeInvalidResponse, what+": answer too large", cause)
	case isTimeout(err):
		return NewError(CodeTimeout, what+": provider did not answer in time", cause)
	default:
		return NewError(CodeProviderUnavailable, what+": provider unreachable", cause)
	}
}

// isTooLarge recognizes our own bound and the routes' client bound, which
// says so in its message (internal/outbound cannot be imported from here:
// it imports this package).
func isTooLarge(err error) bool {
	if errors.Is(err, errProviderBodyTooLarge) {
		return true
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		if e.Error() == "response body exceeds the size bound" {
			return true
		}
	}
	return false
}

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// scrubURLError drops the query of a *url.Error's URL: ours may carry an
// appsecret_proof or other values that do not belong in logs.
func scrubURLError(err error) error {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err
	}
	c := *ue
	if u, perr := url.Parse(ue.URL); perr == nil {
		u.RawQuery, u.Fragment, u.User = "", "", nil
		c.URL = u.String()
	} else {
		c.URL = "(unparseable URL)"
	}
	return &c
}

// statusError turns an unexpected provider status into an *Error: 5xx is
// an outage, anything else a response we cannot use.
func statusError(status int, what string) *Error {
	if status >= 500 {
		return Errorf(CodeProviderUnavailable, what+": provider failed", "HTTP %d", status)
	}
	return Errorf(CodeInvalidResponse, what+": unexpected answer", "HTTP %d", status)
}

// decodeObject parses a JSON object, keeping numbers exact (user IDs
// overflow float64).
func decodeObject(body []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("not a JSON object")
	}
	if dec.More() {
		return nil, errors.New("trailing data after the JSON object")
	}
	return m, nil
}

// profileFields reads typed fields out of a decoded profile, remembering
// the first field of the wrong type, so a strategy reads everything and
// checks once.
type profileFields struct {
	m    map[string]any
	path string
	err  *error
}

func newProfileFields(m map[string]any) *profileFields {
	return &profileFields{m: m, err: new(error)}
}

// Err is the first wrong-typed field met, or nil.
func (p *profileFields) Err() error { return *p.err }

func (p *profileFields) fail(key, want string, v any) {
	if *p.err == nil {
		*p.err = fmt.Errorf("profile field %q is a %s, not %s", p.path+key, jsonKind(v), want)
	}
}

// str returns the string field key: "" when absent or null; any other type
// is recorded as the error.
func (p *profileFields) str(key string) string {
	v, ok := p.m[key]
	if !ok || v == nil {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		p.fail(key, "a string", v)
	}
	return s
}

// obj returns the object field key, empty when absent or null.
func (p *profileFields) obj(key string) *profileFields {
	child := &profileFields{m: map[string]any{}, path: p.path + key + ".", err: p.err}
	v, ok := p.m[key]
	if !ok || v == nil {
		return child
	}
	m, ok := v.(map[string]any)
	if !ok {
		p.fail(key, "an object", v)
		return child
	}
	child.m = m
	return child
}

func jsonKind(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case json.Number, float64:
		return "number"
	case bool:
		return "boolean"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	default:
		return fmt.Sprintf("%T", v)
	}
}
