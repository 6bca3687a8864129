package providers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/extauth/extauth/internal/outbound"
)

// maxProviderBody bounds every provider answer the social strategies read,
// whatever bound the client has: tokens and profiles are a few kilobytes.
const maxProviderBody = 1 << 20

// providerCall sends req and reads the whole bounded answer. Transport
// failures come back as an *Error with the right code (see TransportError).
func providerCall(client *http.Client, req *http.Request, what string) (*http.Response, []byte, *Error) {
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, TransportError(err, what)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxProviderBody+1))
	if err == nil && len(body) > maxProviderBody {
		err = outbound.ErrBodyTooLarge
	}
	if err != nil {
		return nil, nil, TransportError(err, what)
	}
	return resp, body, nil
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
