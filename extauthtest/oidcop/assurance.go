package oidcop

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/extauth/extauth/extauthtest/internal/endpoint"
)

// What the provider does for high-assurance clients: client assertions
// (private_key_jwt, client_secret_jwt) verified against the client's key
// set, pushed authorization requests (RFC 9126), request objects (RFC
// 9101), ID tokens, logout tokens and UserInfo encrypted to the client's
// key, acr and auth_time, and token revocation (RFC 7009).

// Encryption is how the provider encrypts a token to the client: the key
// management algorithm (RSA-OAEP, RSA-OAEP-256, ECDH-ES, ECDH-ES+A128KW,
// ...) and the content encryption (A128CBC-HS256 when empty).
type Encryption struct {
	Alg string
	Enc string
}

// Faults of the high-assurance side.
const (
	// WeakACR asserts an acr other than every one the client asked for.
	WeakACR Fault = "weak_acr"
	// OldAuthTime dates the authentication (auth_time) two hours back.
	OldAuthTime Fault = "old_auth_time"
	// FutureAuthTime dates the authentication a day ahead, asked for or
	// not: a date to come would pass any max_age.
	FutureAuthTime Fault = "future_auth_time"
)

// LogoutNoExp leaves exp out of a logout token, as providers that
// implement an earlier draft of Back-Channel Logout do.
const LogoutNoExp LogoutFault = "no_exp"

// WeakACRValue is the acr the provider asserts under WeakACR.
const WeakACRValue = "urn:extauthtest:acr:password"

const (
	jwtBearer = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
	// maxAssertionLifetime is the longest exp - iat the provider takes
	// from a client assertion: it is for one request.
	maxAssertionLifetime = 5 * time.Minute
	// pushedTTL is how long a request_uri stays usable.
	pushedTTL = time.Minute
	// requestURIPrefix is RFC 9126 2.2's.
	requestURIPrefix = "urn:ietf:params:oauth:request_uri:"
)

// Assertion is a client assertion the provider accepted, for tests of
// what the client sent.
type Assertion struct {
	// Endpoint is where it was sent: Token, PAR or Revocation.
	Endpoint Endpoint
	Header   map[string]any
	Claims   map[string]any
}

// Assertions returns the client assertions the provider accepted, in
// order: the most recent 1 000.
func (op *OP) Assertions() []Assertion {
	op.mu.Lock()
	defer op.mu.Unlock()
	return recorded(op.assertions)
}

// LastRequestParams returns the parameters of the last authorization
// request the provider accepted, once taken out of a request object or a
// pushed request.
func (op *OP) LastRequestParams() url.Values {
	op.mu.Lock()
	defer op.mu.Unlock()
	return op.lastParams
}

// jwtMethod reports whether the client authenticates with an assertion.
func (op *OP) jwtMethod() bool {
	return op.cfg.AuthMethod == "private_key_jwt" || op.cfg.AuthMethod == "client_secret_jwt"
}

// clientKeys returns the client's registered key set: ClientJWKS, or what
// ClientJWKSURI serves. Without CacheClientJWKS the provider reads it on
// each use, so a key the client rotates in is seen at once; with it, the
// set read first, until RefreshClientJWKS.
func (op *OP) clientKeys() (*jose.JSONWebKeySet, error) {
	if op.fed != nil {
		return op.fed.clientKeys(op.cfg.ClientID)
	}
	if op.cfg.ClientJWKS != nil {
		return op.cfg.ClientJWKS, nil
	}
	if op.cfg.CacheClientJWKS {
		op.mu.Lock()
		set := op.clientSet
		op.mu.Unlock()
		if set != nil {
			return set, nil
		}
	}
	return op.readClientKeys()
}

// RefreshClientJWKS reads the client's jwks_uri again now, as a provider
// that caches it does when its copy is due: with CacheClientJWKS, what it
// verifies with and encrypts to from now on.
func (op *OP) RefreshClientJWKS() error {
	_, err := op.readClientKeys()
	return err
}

// ClientJWKSReads counts the reads of the client's jwks_uri.
func (op *OP) ClientJWKSReads() int64 { return op.clientJWKSReads.Load() }

// readClientKeys reads ClientJWKSURI, and caches what it read.
func (op *OP) readClientKeys() (*jose.JSONWebKeySet, error) {
	if op.cfg.ClientJWKSURI == "" {
		return nil, errors.New("the client registered no keys")
	}
	op.clientJWKSReads.Add(1)
	resp, err := op.cfg.HTTPClient.Get(op.cfg.ClientJWKSURI)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("jwks_uri: HTTP %d", resp.StatusCode)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("jwks_uri: %w", err)
	}
	for _, k := range set.Keys {
		if !k.IsPublic() {
			return nil, errors.New("jwks_uri: the client publishes a private key")
		}
	}
	op.mu.Lock()
	op.clientSet = &set
	op.mu.Unlock()
	return &set, nil
}

// clientSigningKey returns the client's public key that kid names (the
// only signing key when kid is empty).
func (op *OP) clientSigningKey(kid string) (any, error) {
	set, err := op.clientKeys()
	if err != nil {
		return nil, err
	}
	found := signingKeys(set, kid)
	if len(found) == 0 && kid != "" && op.cfg.CacheClientJWKS && op.cfg.RefetchUnknownKid {
		if set, err = op.readClientKeys(); err != nil {
			return nil, err
		}
		found = signingKeys(set, kid)
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("no single signing key of the client's for kid %q", kid)
	}
	return found[0].Key, nil
}

// signingKeys returns the signing keys of set that kid names (every one
// when kid is empty).
func signingKeys(set *jose.JSONWebKeySet, kid string) []jose.JSONWebKey {
	var found []jose.JSONWebKey
	for _, k := range set.Keys {
		if (k.Use == "" || k.Use == "sig") && (kid == "" || k.KeyID == kid) {
			found = append(found, k)
		}
	}
	return found
}

// verifyClientJWT verifies a JWT the client signed (an assertion or a
// request object) with its key, or with its secret under
// client_secret_jwt, and returns its header and claims.
func (op *OP) verifyClientJWT(raw string, secretOK bool) (map[string]any, map[string]any, error) {
	algs := op.clientAlgs()
	if secretOK {
		algs = []jose.SignatureAlgorithm{jose.HS256, jose.HS384, jose.HS512}
	}
	jws, err := jose.ParseSignedCompact(raw, algs)
	if err != nil {
		return nil, nil, err
	}
	if len(jws.Signatures) != 1 {
		return nil, nil, errors.New("one signature expected")
	}
	hdr := jws.Signatures[0].Protected
	var key any = []byte(op.cfg.ClientSecret)
	if !secretOK {
		if key, err = op.clientSigningKey(hdr.KeyID); err != nil {
			return nil, nil, err
		}
	}
	payload, err := jws.Verify(key)
	if err != nil {
		return nil, nil, err
	}
	var claims map[string]any
	dec := json.NewDecoder(strings.NewReader(string(payload)))
	dec.UseNumber()
	if err := dec.Decode(&claims); err != nil {
		return nil, nil, err
	}
	header := map[string]any{"alg": hdr.Algorithm, "kid": hdr.KeyID}
	for k, v := range hdr.ExtraHeaders {
		header[string(k)] = v
	}
	return header, claims, nil
}

func claimTime(claims map[string]any, name string) (time.Time, bool) {
	n, ok := claims[name].(json.Number)
	if !ok {
		return time.Time{}, false
	}
	i, err := n.Int64()
	return time.Unix(i, 0), err == nil
}

func audienceHas(aud any, accepted ...string) bool {
	switch a := aud.(type) {
	case string:
		return slices.Contains(accepted, a)
	case []any:
		for _, v := range a {
			if s, ok := v.(string); ok && slices.Contains(accepted, s) {
				return true
			}
		}
	}
	return false
}

// assertionAuthenticated checks a client assertion sent to endpoint at
// url (RFC 7523 3): signed by the client, iss and sub the client ID, aud
// the issuer, the token endpoint or url, an exp in the future and not far
// off, and a jti never seen before. Nothing else may authenticate the
// client in the same request.
func (op *OP) assertionAuthenticated(r *http.Request, e Endpoint, url string) error {
	f := r.PostForm
	if _, _, basic := r.BasicAuth(); basic || f.Has("client_secret") {
		return errors.New("more than one authentication method")
	}
	if f.Get("client_assertion_type") != jwtBearer {
		return errors.New("no client assertion")
	}
	header, claims, err := op.verifyClientJWT(f.Get("client_assertion"), op.cfg.AuthMethod == "client_secret_jwt")
	if err != nil {
		return fmt.Errorf("client assertion: %w", err)
	}
	now := op.now()
	exp, okExp := claimTime(claims, "exp")
	iat, okIat := claimTime(claims, "iat")
	jti, _ := claims["jti"].(string)
	token, _ := op.paths()
	switch {
	case claims["iss"] != op.cfg.ClientID || claims["sub"] != op.cfg.ClientID:
		return errors.New("client assertion: iss and sub must be the client ID")
	case f.Has("client_id") && f.Get("client_id") != op.cfg.ClientID:
		return errors.New("client assertion: another client_id in the form")
	case !audienceHas(claims["aud"], op.cfg.Issuer, strings.TrimSuffix(op.cfg.Issuer, "/")+token, url):
		return errors.New("client assertion: aud names neither the issuer nor this endpoint")
	case op.cfg.Profile != "" && claims["aud"] != op.cfg.Issuer:
		// FAPI 2.0 Security Profile 5.3.2.1: the issuer, as a string.
		return errors.New("client assertion: aud must be the issuer alone")
	case !okExp || !now.Before(exp):
		return errors.New("client assertion: expired or without exp")
	case !okIat || exp.Sub(iat) > maxAssertionLifetime:
		return errors.New("client assertion: valid for too long")
	case jti == "":
		return errors.New("client assertion: no jti")
	}
	op.mu.Lock()
	defer op.mu.Unlock()
	if _, seen := op.seenJTIs.Get(jti); seen {
		return errors.New("client assertion: jti replayed")
	}
	op.seenJTIs.Put(jti, struct{}{}, exp)
	op.assertions = record(op.assertions, Assertion{Endpoint: e, Header: header, Claims: claims})
	return nil
}

// requestObjectParams verifies a request object (RFC 9101 6.1): signed by
// the client's key, iss the client, aud the issuer, not expired; and
// returns its claims as authorization request parameters.
func (op *OP) requestObjectParams(raw string) (url.Values, error) {
	_, claims, err := op.verifyClientJWT(raw, false)
	if err != nil {
		return nil, fmt.Errorf("request object: %w", err)
	}
	exp, ok := claimTime(claims, "exp")
	nbf, okNbf := claimTime(claims, "nbf")
	switch {
	case op.cfg.Profile == FAPI2MessageSigning && (!okNbf || exp.Sub(nbf) > time.Hour || nbf.After(op.now().Add(time.Minute))):
		// FAPI 2.0 Message Signing 5.3.1: nbf, and exp at most 60
		// minutes after it.
		return nil, errors.New("request object: nbf missing, in the future, or more than an hour before exp")
	case claims["iss"] != op.cfg.ClientID:
		return nil, errors.New("request object: iss is not the client")
	case op.fed != nil && (claims["sub"] != nil || claims["jti"] == nil):
		// OpenID Federation 1.0 12.1.1.1: a jti, and no sub, so that the
		// object cannot pass for a client assertion.
		return nil, errors.New("request object: a federation's has a jti and no sub")
	case !audienceHas(claims["aud"], op.cfg.Issuer):
		return nil, errors.New("request object: aud is not the issuer")
	case !ok || !op.now().Before(exp):
		return nil, errors.New("request object: expired or without exp")
	}
	q := url.Values{}
	for k, v := range claims {
		switch k {
		case "iss", "aud", "exp", "iat", "nbf", "jti":
			continue
		}
		switch v := v.(type) {
		case string:
			q.Set(k, v)
		case json.Number:
			q.Set(k, v.String())
		default:
			b, _ := json.Marshal(v)
			q.Set(k, string(b))
		}
	}
	return q, nil
}

// resolveRequest returns the authorization request's parameters: those of
// the pushed request request_uri names (once), of the request object, or
// the query's; pushed says which.
func (op *OP) resolveRequest(q url.Values) (params url.Values, pushed bool, err error) {
	if uri := q.Get("request_uri"); uri != "" {
		op.mu.Lock()
		p, ok := op.pushed.Take(uri)
		op.mu.Unlock()
		if !ok {
			return nil, false, errors.New("unknown or expired request_uri")
		}
		return p.params, true, nil
	}
	if ro := q.Get("request"); ro != "" {
		params, err := op.requestObjectParams(ro)
		if err != nil {
			return nil, false, err
		}
		// OIDC Core 6.1: what is repeated outside must match.
		for _, k := range []string{"client_id", "response_type"} {
			if q.Has(k) && q.Get(k) != params.Get(k) {
				return nil, false, fmt.Errorf("request object: %s differs from the query's", k)
			}
		}
		return params, false, nil
	}
	if op.cfg.RequireRequestObject {
		return nil, false, errors.New("a signed request object is required")
	}
	return q, false, nil
}

// pushedRequest is an authorization request the client pushed.
type pushedRequest struct {
	params url.Values
}

// par is the pushed authorization request endpoint (RFC 9126 2): it
// authenticates the client, checks the request as the authorization
// endpoint would, and answers with the request_uri that stands for it.
func (op *OP) par(w http.ResponseWriter, r *http.Request) {
	if !op.clientRequest(w, r, PAR) {
		return
	}
	form := url.Values{}
	for k, v := range r.PostForm {
		switch k {
		case "client_secret", "client_assertion", "client_assertion_type":
		default:
			form[k] = v
		}
	}
	if form.Has("request_uri") {
		tokenError(w, http.StatusBadRequest, "invalid_request")
		return
	}
	// A proof binds the code to its key (RFC 9449 10.1).
	jkt, perr := op.checkProof(r, PAR, op.requestURL(r), "")
	if perr == nil && jkt == "" && op.cfg.DPoP {
		perr = errNoProof
	}
	if perr != nil {
		op.asProofError(w, perr)
		return
	}
	params, _, err := op.resolveRequest(form)
	if err != nil {
		tokenError(w, http.StatusBadRequest, "invalid_request_object")
		return
	}
	if jkt != "" {
		if params.Has("dpop_jkt") && params.Get("dpop_jkt") != jkt {
			tokenError(w, http.StatusBadRequest, "invalid_dpop_proof")
			return
		}
		params = maps.Clone(params)
		params.Set("dpop_jkt", jkt)
	}
	if _, aerr := op.checkRequest(params); aerr != nil {
		tokenError(w, http.StatusBadRequest, aerr.code)
		return
	}
	uri := requestURIPrefix + endpoint.Random(24)
	op.mu.Lock()
	op.pushed.Put(uri, &pushedRequest{params: params}, op.now().Add(pushedTTL))
	op.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]any{"request_uri": uri, "expires_in": int(pushedTTL.Seconds())})
}

// revoke is the revocation endpoint (RFC 7009): it authenticates the
// client and forgets the access or refresh token.
func (op *OP) revoke(w http.ResponseWriter, r *http.Request) {
	if !op.clientRequest(w, r, Revocation) {
		return
	}
	if r.PostForm.Get("token") == "" {
		tokenError(w, http.StatusBadRequest, "invalid_request")
		return
	}
	if _, perr := op.checkProof(r, Revocation, op.requestURL(r), ""); perr != nil {
		op.asProofError(w, perr)
		return
	}
	token := r.PostForm.Get("token")
	op.mu.Lock()
	op.tokens.Delete(token)
	op.refresh.Delete(token)
	op.revoked++
	op.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// Revoked returns how many tokens the revocation endpoint took.
func (op *OP) Revoked() int {
	op.mu.Lock()
	defer op.mu.Unlock()
	return op.revoked
}

// encryptToClient encrypts payload to the client's encryption key as e
// says: the last key of the client's set that suits e.Alg (a client that
// rotates keys publishes the new one after the old), or with
// EncryptionKeyByAlg the one Keycloak would pick. cty "JWT" marks a
// nested signed token.
func (op *OP) encryptToClient(payload []byte, e Encryption, cty string) (string, error) {
	set, err := op.clientKeys()
	if err != nil {
		return "", err
	}
	var key *jose.JSONWebKey
	if op.cfg.EncryptionKeyByAlg {
		if key, err = keyByAlg(set, e.Alg); err != nil {
			return "", err
		}
	} else {
		wantRSA := strings.HasPrefix(e.Alg, "RSA")
		for i, k := range set.Keys {
			if k.Use != "" && k.Use != "enc" {
				continue
			}
			if _, isRSA := k.Key.(*rsa.PublicKey); isRSA == wantRSA {
				key = &set.Keys[i]
			}
		}
		if key == nil {
			return "", fmt.Errorf("the client publishes no encryption key for %s", e.Alg)
		}
	}
	enc := e.Enc
	if enc == "" {
		enc = "A128CBC-HS256"
	}
	opts := &jose.EncrypterOptions{}
	if cty != "" {
		opts = opts.WithContentType(jose.ContentType(cty))
	}
	encrypter, err := jose.NewEncrypter(jose.ContentEncryption(enc),
		jose.Recipient{Algorithm: jose.KeyAlgorithm(e.Alg), Key: key.Key, KeyID: key.KeyID}, opts)
	if err != nil {
		return "", err
	}
	obj, err := encrypter.Encrypt(payload)
	if err != nil {
		return "", err
	}
	return obj.CompactSerialize()
}

// keyByAlg picks the client's encryption key for alg as Keycloak does
// (Config.EncryptionKeyByAlg): the first key published with use "enc"
// whose algorithm, or its type's default signing algorithm when it has
// none, is alg. The error says what Keycloak says, with the kids it had.
func keyByAlg(set *jose.JSONWebKeySet, alg string) (*jose.JSONWebKey, error) {
	var kids []string
	for i, k := range set.Keys {
		if k.Use != "enc" {
			continue
		}
		kids = append(kids, k.KeyID)
		if algOrDefault(k) == alg {
			return &set.Keys[i], nil
		}
	}
	return nil, fmt.Errorf("PublicKey wasn't found in the storage. Requested kid: 'null' . Available kids: '%v'. "+
		"(no key published with use enc has alg %s; one without alg counts as its type's signing algorithm)", kids, alg)
}

// algOrDefault is a key's alg, or the signing algorithm Keycloak takes
// for a key of its type without one.
func algOrDefault(k jose.JSONWebKey) string {
	if k.Algorithm != "" {
		return k.Algorithm
	}
	switch pub := k.Key.(type) {
	case *rsa.PublicKey:
		return "RS256"
	case *ecdsa.PublicKey:
		return map[int]string{256: "ES256", 384: "ES384", 521: "ES512"}[pub.Curve.Params().BitSize]
	case ed25519.PublicKey:
		return "EdDSA"
	}
	return ""
}

// maxAge reads the max_age parameter; -1 when there is none.
func maxAge(q url.Values) int64 {
	n, err := strconv.ParseInt(q.Get("max_age"), 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}
