package oidcop

import (
	"crypto"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/extauth/extauth/extauthtest/internal/endpoint"
)

// What the provider does for DPoP (RFC 9449) with Config.DPoP: it checks
// a proof on every request to the pushed authorization request, token,
// UserInfo and revocation endpoints (as an authorization server would,
// section 4.3, and UserInfo as a resource server, section 7), binds codes
// (dpop_jkt, or the proof of a pushed request), access tokens and refresh
// tokens to the proof's key, answers token_type DPoP, and with
// Config.DPoPNonce demands its nonce (sections 8 and 9).

// Faults of DPoP.
const (
	// DPoPBearer answers the token endpoint with token_type Bearer (and
	// unbound tokens) although the request carried a proof.
	DPoPBearer Fault = "dpop_bearer"
	// DPoPNonceLoop refuses every proof for its nonce and names a new
	// one each time, as a server that never honours its own nonce.
	DPoPNonceLoop Fault = "dpop_nonce_loop"
)

// DPoPProofLeeway is how far a proof's iat may be from the provider's
// clock: an older proof is stale, and refused.
const DPoPProofLeeway = time.Minute

// DPoPSigningAlgs are the algorithms of the proofs the provider takes.
var DPoPSigningAlgs = []string{"ES256", "PS256", "EdDSA"}

// Proof is a DPoP proof the provider accepted, for tests of what the
// client sent.
type Proof struct {
	// Endpoint is where it was sent.
	Endpoint Endpoint
	Header   map[string]any
	Claims   map[string]any
	// JKT is the thumbprint (RFC 7638) of the key that signed it.
	JKT string
}

// DPoPProofs returns the proofs the provider accepted, in order: the most
// recent 1 000.
func (op *OP) DPoPProofs() []Proof {
	op.mu.Lock()
	defer op.mu.Unlock()
	return recorded(op.proofs)
}

// DPoPNonce returns the nonce the provider demands now.
func (op *OP) DPoPNonce() string {
	op.mu.Lock()
	defer op.mu.Unlock()
	return op.nonce
}

// RotateDPoPNonce makes the provider demand a new nonce, as servers do
// from time to time; proofs with the old one are answered use_dpop_nonce.
func (op *OP) RotateDPoPNonce() string {
	op.mu.Lock()
	defer op.mu.Unlock()
	op.nonce = endpoint.Random(16)
	return op.nonce
}

// proofError is why a request's DPoP proof is refused: code is the error
// the answer names.
type proofError struct {
	code string
	why  string
}

func (e *proofError) Error() string { return e.code + ": " + e.why }

func badProof(format string, args ...any) *proofError {
	return &proofError{code: "invalid_dpop_proof", why: fmt.Sprintf(format, args...)}
}

// checkProof verifies the DPoP proof of r, a request to endpoint e at the
// URL htu, presenting accessToken ("" when none): one DPoP header, a JWS
// of type dpop+jwt signed with an asymmetric algorithm by the public key
// its header carries, htm r's method, htu the endpoint's URL, an iat
// within DPoPProofLeeway, a jti never seen, the provider's nonce when it
// demands one, and ath the hash of the access token. It returns the key's
// thumbprint, "" when r has no proof.
func (op *OP) checkProof(r *http.Request, e Endpoint, htu, accessToken string) (string, *proofError) {
	values := r.Header.Values("DPoP")
	switch len(values) {
	case 0:
		return "", nil
	case 1:
	default:
		return "", badProof("more than one DPoP header")
	}
	jws, err := jose.ParseSignedCompact(values[0], signatureAlgs(DPoPSigningAlgs))
	if err != nil {
		return "", badProof("%v", err)
	}
	if len(jws.Signatures) != 1 {
		return "", badProof("one signature expected")
	}
	hdr := jws.Signatures[0].Protected
	if typ, _ := hdr.ExtraHeaders[jose.HeaderType].(string); typ != "dpop+jwt" {
		return "", badProof("typ %q, want dpop+jwt", typ)
	}
	if hdr.JSONWebKey == nil || !hdr.JSONWebKey.IsPublic() || !hdr.JSONWebKey.Valid() {
		return "", badProof("no public jwk in the header")
	}
	payload, err := jws.Verify(hdr.JSONWebKey)
	if err != nil {
		return "", badProof("signature: %v", err)
	}
	var claims map[string]any
	dec := json.NewDecoder(strings.NewReader(string(payload)))
	dec.UseNumber()
	if err := dec.Decode(&claims); err != nil {
		return "", badProof("claims: %v", err)
	}
	now := op.now()
	iat, okIat := claimTime(claims, "iat")
	jti, _ := claims["jti"].(string)
	nonce, _ := claims["nonce"].(string)
	switch {
	case claims["htm"] != r.Method:
		return "", badProof("htm %v, want %s", claims["htm"], r.Method)
	case claims["htu"] != htu:
		return "", badProof("htu %v, want %s", claims["htu"], htu)
	case !okIat || iat.Before(now.Add(-DPoPProofLeeway)) || iat.After(now.Add(DPoPProofLeeway)):
		return "", badProof("iat is missing or not within %s of now", DPoPProofLeeway)
	case jti == "":
		return "", badProof("no jti")
	}
	if accessToken != "" {
		sum := sha256.Sum256([]byte(accessToken))
		ath, _ := claims["ath"].(string)
		if subtle.ConstantTimeCompare([]byte(ath), []byte(base64.RawURLEncoding.EncodeToString(sum[:]))) != 1 {
			return "", badProof("ath is not the access token's hash")
		}
	}
	sum, err := hdr.JSONWebKey.Thumbprint(crypto.SHA256)
	if err != nil {
		return "", badProof("thumbprint: %v", err)
	}
	jkt := base64.RawURLEncoding.EncodeToString(sum)
	op.mu.Lock()
	defer op.mu.Unlock()
	if op.cfg.DPoPNonce || op.faults[DPoPNonceLoop] {
		if op.faults[DPoPNonceLoop] {
			op.nonce = endpoint.Random(16)
		}
		if subtle.ConstantTimeCompare([]byte(nonce), []byte(op.nonce)) != 1 {
			return "", &proofError{code: "use_dpop_nonce", why: "the proof does not carry the current nonce"}
		}
	}
	// A replayed proof is refused; the jti is kept for as long as the
	// proof could pass for fresh.
	if _, seen := op.proofJTIs.Get(jti); seen {
		return "", badProof("jti replayed")
	}
	op.proofJTIs.Put(jti, struct{}{}, iat.Add(2*DPoPProofLeeway))
	header := map[string]any{"alg": hdr.Algorithm, "typ": "dpop+jwt", "jwk": hdr.JSONWebKey}
	op.proofs = record(op.proofs, Proof{Endpoint: e, Header: header, Claims: claims, JKT: jkt})
	return jkt, nil
}

// asProofError answers a refused proof as an authorization server does
// (RFC 9449 5 and 8): 400 with the error, and the nonce to use.
func (op *OP) asProofError(w http.ResponseWriter, e *proofError) {
	if e.code == "use_dpop_nonce" {
		w.Header().Set("DPoP-Nonce", op.DPoPNonce())
	}
	writeJSON(w, http.StatusBadRequest, map[string]string{"error": e.code})
}

// rsProofError answers a refused proof or token as a resource server does
// (RFC 9449 7.1 and 9): 401 with a DPoP challenge, and the nonce to use.
func (op *OP) rsProofError(w http.ResponseWriter, code string) {
	if code == "use_dpop_nonce" {
		w.Header().Set("DPoP-Nonce", op.DPoPNonce())
	}
	w.Header().Set("WWW-Authenticate", fmt.Sprintf(`DPoP error=%q, algs="%s"`, code, strings.Join(DPoPSigningAlgs, " ")))
	writeJSON(w, http.StatusUnauthorized, map[string]string{"error": code})
}

// requestURL is the URL r was sent to (the endpoint, or its mTLS alias),
// without query, as a proof's htu names it.
func (op *OP) requestURL(r *http.Request) string {
	u, _ := url.Parse(op.cfg.Issuer)
	return u.Scheme + "://" + u.Host + r.URL.Path
}

// errNoProof is the refusal of a request without a proof where the
// provider requires DPoP.
var errNoProof = badProof("a DPoP proof is required")

// tokenProof checks the proof of a request to the token endpoint:
// required with Config.DPoP, and for a code or refresh token bound to a
// key (boundTo), of that key.
func (op *OP) tokenProof(r *http.Request, boundTo string) (string, *proofError) {
	jkt, perr := op.checkProof(r, Token, op.requestURL(r), "")
	switch {
	case perr != nil:
		return "", perr
	case jkt == "" && (op.cfg.DPoP || boundTo != ""):
		return "", errNoProof
	case boundTo != "" && jkt != boundTo:
		return "", &proofError{code: "invalid_grant", why: "the grant is bound to another DPoP key"}
	}
	return jkt, nil
}
