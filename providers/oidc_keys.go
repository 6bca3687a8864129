package providers

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/extauth/extauth/internal/outbound"
	"github.com/extauth/extauth/internal/telemetry"
	jose "github.com/go-jose/go-jose/v4"
)

// errUnknownKey is returned when no published key matches a token's kid,
// even after the key set was refetched (or could not be, being fresh).
var errUnknownKey = errors.New("no key of the provider's key set matches the token")

// minRSABits is the smallest RSA key a provider may sign with.
const minRSABits = 2048

// keySet is the provider's JWKS, fetched lazily and refetched when a token
// names a key it does not hold.
//
// We do not use go-oidc's RemoteKeySet for three reasons: it verifies a token
// without a kid against every key in the set (OIDC Core 10.1 requires a kid
// when the set has several keys), it refetches on every token with an unknown
// kid (a misbehaving provider turns each sign-in into a JWKS request), and a
// failed fetch loses its cause to %v formatting, so a time-out cannot be told
// from a bad signature.
type keySet struct {
	url    string
	client *http.Client
	now    func() time.Time
	// minInterval is the least time between two fetches after the first.
	minInterval time.Duration
	algs        []jose.SignatureAlgorithm

	mu       sync.Mutex
	keys     []jose.JSONWebKey
	loaded   bool
	fetched  time.Time // when the last fetch started
	lastErr  error     // how the last fetch ended
	inflight *keyFetch
}

// keyFetch is one JWKS request that concurrent callers share.
type keyFetch struct {
	done chan struct{}
	err  error
}

func newKeySet(url string, client *http.Client, now func() time.Time, minInterval time.Duration, algs []string) *keySet {
	ja := make([]jose.SignatureAlgorithm, len(algs))
	for i, a := range algs {
		ja[i] = jose.SignatureAlgorithm(a)
	}
	return &keySet{url: url, client: client, now: now, minInterval: minInterval, algs: ja}
}

// ensure loads the key set once, so that a provider that cannot be reached
// is reported as such (with its time-out or transport cause) rather than as
// a signature failure from inside go-oidc, which flattens the cause.
func (k *keySet) ensure(ctx context.Context) error { return k.refresh(ctx, false) }

// refresh fetches the key set: when force is false only if none is loaded
// yet, when true (a kid we do not know) in any case. Either way no fetch
// starts less than minInterval after the previous one, so neither a provider
// that is down nor tokens naming bogus keys turn sign-ins into a stream of
// JWKS requests. At most one fetch is in flight; other callers wait for it.
func (k *keySet) refresh(ctx context.Context, force bool) error {
	k.mu.Lock()
	if k.loaded && !force {
		k.mu.Unlock()
		return nil
	}
	if k.inflight == nil {
		if !k.fetched.IsZero() && k.now().Sub(k.fetched) < k.minInterval {
			err := k.lastErr
			k.mu.Unlock()
			if err == nil {
				err = errUnknownKey
			}
			return err
		}
		f := &keyFetch{done: make(chan struct{})}
		k.inflight = f
		k.fetched = k.now()
		// The fetch outlives a caller that gives up: the others still
		// wait for it, and the client's time-out bounds it.
		go k.fetch(context.WithoutCancel(ctx), f)
	}
	f := k.inflight
	k.mu.Unlock()
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return TransportError(ctx.Err(), "key set")
	}
}

func (k *keySet) fetch(ctx context.Context, f *keyFetch) {
	keys, err := k.get(ctx)
	k.mu.Lock()
	if err == nil {
		k.keys = keys
		k.loaded = true
	}
	k.lastErr = err
	k.inflight = nil
	k.mu.Unlock()
	f.err = err
	close(f.done)
}

func (k *keySet) get(ctx context.Context) ([]jose.JSONWebKey, error) {
	if k.url == "" {
		// A set given by value (a federation's metadata) has nothing to
		// fetch: a kid it lacks is unknown.
		return nil, errUnknownKey
	}
	_, body, err := fetchDocument(telemetry.WithEndpoint(ctx, telemetry.EndpointJWKS), k.client, k.url, "key set")
	if err != nil {
		return nil, err
	}
	return parseKeySet(body)
}

// newStaticKeySet is a key set given by value, never fetched.
func newStaticKeySet(keys []jose.JSONWebKey, algs []string) *keySet {
	k := newKeySet("", nil, time.Now, time.Hour, algs)
	k.keys, k.loaded = keys, true
	return k
}

// parseKeySet reads a JWKS document, keeping the usable public signing
// keys.
func parseKeySet(body []byte) ([]jose.JSONWebKey, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, NewError(CodeInvalidResponse, "the provider's key set is malformed", fmt.Errorf("key set: %w", err))
	}
	keys := make([]jose.JSONWebKey, 0, len(doc.Keys))
	for _, raw := range doc.Keys {
		var jwk jose.JSONWebKey
		// RFC 7517 5: keys we do not understand are skipped, not fatal.
		if err := jwk.UnmarshalJSON(raw); err != nil {
			continue
		}
		if usable(&jwk) {
			keys = append(keys, jwk)
		}
	}
	if len(keys) == 0 {
		return nil, NewError(CodeInvalidResponse, "the provider's key set has no usable signing key", errors.New("key set: no usable public signing key"))
	}
	return keys, nil
}

// usable keeps public signature keys only: a symmetric ("oct") key in a
// published set would let anyone who reads the set forge tokens.
func usable(k *jose.JSONWebKey) bool {
	if !k.Valid() || (k.Use != "" && k.Use != "sig") {
		return false
	}
	switch pub := k.Key.(type) {
	case *rsa.PublicKey:
		return pub.N.BitLen() >= minRSABits
	case *ecdsa.PublicKey, ed25519.PublicKey:
		return true
	default:
		return false
	}
}

// VerifySignature verifies a compact JWS against the key its header names
// and returns the payload.
func (k *keySet) VerifySignature(ctx context.Context, token string) ([]byte, error) {
	jws, err := jose.ParseSignedCompact(token, k.algs)
	if err != nil {
		return nil, fmt.Errorf("parsing the token: %w", err)
	}
	return k.verify(ctx, jws)
}

// verify checks the signature of a parsed JWS with the key its header names,
// refetching the set once for a kid it does not hold, and returns the
// payload.
func (k *keySet) verify(ctx context.Context, jws *jose.JSONWebSignature) ([]byte, error) {
	if len(jws.Signatures) != 1 {
		return nil, errors.New("the token must carry exactly one signature")
	}
	hdr := jws.Signatures[0].Protected
	if err := k.ensure(ctx); err != nil {
		return nil, err
	}
	payload, err := k.verifyCached(jws, hdr)
	if !errors.Is(err, errUnknownKey) || hdr.KeyID == "" {
		return payload, err
	}
	// A kid we have not seen: the provider may have rotated its keys
	// (OIDC Core 10.1.1). refresh holds back fetches that come too often.
	if err := k.refresh(ctx, true); err != nil {
		if errors.Is(err, errUnknownKey) {
			return nil, fmt.Errorf("kid %.64q: %w", hdr.KeyID, err)
		}
		return nil, err
	}
	return k.verifyCached(jws, hdr)
}

func (k *keySet) verifyCached(jws *jose.JSONWebSignature, hdr jose.Header) ([]byte, error) {
	k.mu.Lock()
	keys := k.keys
	k.mu.Unlock()
	var key *jose.JSONWebKey
	if hdr.KeyID == "" {
		// OIDC Core 10.1: with several keys in the set, the token must say
		// which one signed it; trying each would widen what a forger can
		// aim at.
		if len(keys) != 1 {
			return nil, fmt.Errorf("the token names no key (kid) but the provider publishes %d keys", len(keys))
		}
		key = &keys[0]
	} else {
		for i := range keys {
			if keys[i].KeyID == hdr.KeyID {
				key = &keys[i]
				break
			}
		}
		if key == nil {
			return nil, errUnknownKey
		}
	}
	if key.Algorithm != "" && key.Algorithm != hdr.Algorithm {
		return nil, fmt.Errorf("the token's algorithm %.16q is not its key's %.16q", hdr.Algorithm, key.Algorithm)
	}
	payload, err := jws.Verify(key)
	if err != nil {
		return nil, fmt.Errorf("signature: %w", err)
	}
	return payload, nil
}

// fetchDocument GETs a provider document (discovery, key set) through the
// bounded client and returns the answer and its body, classifying every
// failure.
func fetchDocument(ctx context.Context, client *http.Client, url, what string) (*http.Response, []byte, error) {
	// A document may have moved (http to https, a CDN): its fetch follows
	// up to three safe redirects; no other request does.
	resp, body, err := get(outbound.Document(ctx), client, url, "", "application/json", what)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		code := CodeInvalidResponse
		if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
			code = CodeProviderUnavailable
		}
		return nil, nil, NewError(code, what+": the provider answered with an error", fmt.Errorf("%s: HTTP %d", what, resp.StatusCode))
	}
	return resp, body, nil
}
