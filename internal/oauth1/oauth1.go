// Package oauth1 signs OAuth 1.0a requests with HMAC-SHA1 (RFC 5849).
//
// It is deliberately small: the consumer side of the three-legged flow
// needs a signature base string, a key and an Authorization header, and
// nothing here hides which parameters go into the signature. It takes no
// HTTP client of its own, so every request goes through the caller's
// bounded client.
package oauth1

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// SignatureMethod is the only method we speak. PLAINTEXT sends the secrets
// themselves, and RSA-SHA1 needs a key pair no Twitter-style provider uses.
const SignatureMethod = "HMAC-SHA1"

// Encode percent-encodes s as RFC 5849 section 3.6 requires: every byte of
// its UTF-8 form except the unreserved characters ALPHA, DIGIT, "-", ".",
// "_" and "~" becomes %XX with upper-case hex digits. It differs from
// url.QueryEscape in encoding the space as %20, never "+".
func Encode(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if unreserved(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0x0f])
	}
	return b.String()
}

func unreserved(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// BaseURI returns the base string URI of RFC 5849 section 3.4.1.2: scheme
// and host in lower case, the port only when it is not the scheme's
// default, the path, and no query or fragment.
func BaseURI(u *url.URL) (string, error) {
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", fmt.Errorf("oauth1: base string URI needs http or https, not %q", u.Scheme)
	}
	if u.Host == "" {
		return "", errors.New("oauth1: base string URI needs a host")
	}
	host := strings.ToLower(u.Hostname())
	if strings.Contains(host, ":") { // IPv6 literal
		host = "[" + host + "]"
	}
	if port := u.Port(); port != "" && !(scheme == "http" && port == "80") && !(scheme == "https" && port == "443") {
		host += ":" + port
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	return scheme + "://" + host + path, nil
}

// NormalizeParameters returns the normalized request parameters of RFC
// 5849 section 3.4.1.3.2: every name and value encoded, sorted by name and
// then by value, joined with "=" and "&". oauth_signature and realm never
// take part; the caller passes decoded values.
func NormalizeParameters(params url.Values) string {
	type pair struct{ k, v string }
	pairs := make([]pair, 0, len(params))
	for k, vs := range params {
		if k == "oauth_signature" || k == "realm" {
			continue
		}
		ek := Encode(k)
		for _, v := range vs {
			pairs = append(pairs, pair{ek, Encode(v)})
		}
	}
	// Sorting the encoded forms, not the decoded ones, is what the RFC
	// asks: byte order of the encoded strings.
	sort.Slice(pairs, func(i, j int) bool {
		if pairs[i].k != pairs[j].k {
			return pairs[i].k < pairs[j].k
		}
		return pairs[i].v < pairs[j].v
	})
	var b strings.Builder
	for i, p := range pairs {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.k)
		b.WriteByte('=')
		b.WriteString(p.v)
	}
	return b.String()
}

// BaseString returns the signature base string of RFC 5849 section 3.4.1:
// the upper-case method, the base string URI and the normalized parameters,
// each encoded and joined with "&". params must hold the query parameters
// of u, the form body parameters when the body is form-encoded, and the
// protocol parameters; the query of u itself is ignored.
func BaseString(method string, u *url.URL, params url.Values) (string, error) {
	uri, err := BaseURI(u)
	if err != nil {
		return "", err
	}
	return Encode(strings.ToUpper(method)) + "&" + Encode(uri) + "&" + Encode(NormalizeParameters(params)), nil
}

// Sign returns the HMAC-SHA1 signature of base (RFC 5849 section 3.4.2),
// base64-encoded, keyed with the encoded consumer secret and token secret.
func Sign(base, consumerSecret, tokenSecret string) string {
	mac := hmac.New(sha1.New, []byte(Encode(consumerSecret)+"&"+Encode(tokenSecret)))
	mac.Write([]byte(base))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// Nonce returns 128 random bits from crypto/rand, base64url-encoded
// without padding (22 characters). A predictable nonce would let a captured
// request be replayed against a provider that trusts nonces for freshness.
func Nonce() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("oauth1: reading random nonce: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// Consumer holds a client's credentials and clock.
type Consumer struct {
	Key    string
	Secret string
	// Now is the clock for oauth_timestamp; time.Now when nil.
	Now func() time.Time
	// Nonce makes nonces; the package's Nonce when nil. Tests replace it
	// to reproduce fixed examples.
	Nonce func() (string, error)
}

// Request describes what one signed request carries besides the consumer:
// the token (empty for the request-token step), its secret, and extra
// protocol parameters such as oauth_callback or oauth_verifier.
type Request struct {
	Method      string
	URL         *url.URL
	Form        url.Values // form-encoded body parameters, if any
	Token       string
	TokenSecret string
	OAuth       map[string]string // extra oauth_* parameters
}

// Authorization returns the value of the Authorization header that signs
// req (RFC 5849 section 3.5.1). Every parameter of the query, the form body
// and the protocol goes into the signature.
func (c *Consumer) Authorization(req Request) (string, error) {
	if c.Key == "" {
		return "", errors.New("oauth1: consumer key is empty")
	}
	nonceFn := c.Nonce
	if nonceFn == nil {
		nonceFn = Nonce
	}
	nonce, err := nonceFn()
	if err != nil {
		return "", err
	}
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	oauth := map[string]string{
		"oauth_consumer_key":     c.Key,
		"oauth_nonce":            nonce,
		"oauth_signature_method": SignatureMethod,
		"oauth_timestamp":        strconv.FormatInt(now().Unix(), 10),
		"oauth_version":          "1.0",
	}
	if req.Token != "" {
		oauth["oauth_token"] = req.Token
	}
	for k, v := range req.OAuth {
		if !strings.HasPrefix(k, "oauth_") || k == "oauth_signature" {
			return "", fmt.Errorf("oauth1: %q is not a protocol parameter we may set", k)
		}
		oauth[k] = v
	}

	params := url.Values{}
	for k, vs := range req.URL.Query() {
		params[k] = append(params[k], vs...)
	}
	for k, vs := range req.Form {
		params[k] = append(params[k], vs...)
	}
	for k, v := range oauth {
		params.Add(k, v)
	}
	base, err := BaseString(req.Method, req.URL, params)
	if err != nil {
		return "", err
	}
	oauth["oauth_signature"] = Sign(base, c.Secret, req.TokenSecret)
	return header(oauth), nil
}

// header writes the protocol parameters as an OAuth Authorization header,
// in a stable order so that requests are reproducible in tests.
func header(oauth map[string]string) string {
	keys := make([]string, 0, len(oauth))
	for k := range oauth {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("OAuth ")
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(Encode(k))
		b.WriteString(`="`)
		b.WriteString(Encode(oauth[k]))
		b.WriteByte('"')
	}
	return b.String()
}
