package providers

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// errNotEncrypted is the cause of refusing a plain token where the client
// registered encryption: a provider that is tricked, or an attacker who
// injects a token, must not get around the encryption by leaving it off.
var errNotEncrypted = errors.New("is not encrypted, but the client registered encryption for it")

// isJWE reports whether a compact serialization is a JWE (five parts)
// rather than a JWS (three).
func isJWE(raw string) bool { return strings.Count(raw, ".") == 4 }

// decrypt opens a compact JWE encrypted to one of the client's keys with
// exactly the registered algorithms (enc), and returns its plaintext: the
// signed token inside an ID token, or UserInfo's claims. The key is the
// one the header's kid names (an entry of its encryption half,
// encEntries), else each of the client's keys in turn, so a
// provider that encrypts to NextPrivateKey (it read the set from an instance
// that promoted it) or still to OldPrivateKey is understood.
func (s *OIDC) decrypt(raw string, enc OIDCEncryption) ([]byte, error) {
	if !enc.enabled() {
		return nil, errors.New("is encrypted, but the client registered no encryption for it")
	}
	if len(s.keys) == 0 {
		return nil, errors.New("is encrypted, but the client has no private key")
	}
	jwe, err := jose.ParseEncryptedCompact(raw, []jose.KeyAlgorithm{jose.KeyAlgorithm(enc.Alg)},
		[]jose.ContentEncryption{jose.ContentEncryption(enc.Enc)})
	if err != nil {
		// go-jose names the algorithms it refused, which is what an
		// operator needs; it never quotes key material.
		return nil, fmt.Errorf("encrypted with other algorithms than registered (%s, %s): %w", enc.Alg, enc.Enc, err)
	}
	kid := jwe.Header.KeyID
	named := func(k *clientKey) bool {
		return kid == k.encKid || strings.HasPrefix(kid, k.encKid+"-")
	}
	known := slices.ContainsFunc(s.keys, named)
	for _, k := range s.keys {
		if known && !named(k) {
			continue
		}
		if pt, err := jwe.Decrypt(k.priv); err == nil {
			if k == s.oldKey {
				s.noteRetiringUsed()
			}
			return pt, nil
		}
	}
	// One fixed cause whichever step failed: a decryption failure says
	// nothing about the plaintext.
	return nil, errors.New("does not decrypt with the client's keys")
}

// retiringLogEvery is how often the strategy says that the provider still
// encrypts to the retiring key: often enough to see when it stops, seldom
// enough for every sign-in not to log it.
const retiringLogEvery = time.Hour

// noteRetiringUsed logs, at most once per retiringLogEvery, that the
// provider encrypted to private_key_old: it has not read the JWKS since
// the promotion, so the key must stay.
func (s *OIDC) noteRetiringUsed() {
	now := s.now()
	last := s.oldUsed.Load()
	if last != 0 && now.Sub(time.Unix(0, last)) < retiringLogEvery || !s.oldUsed.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	s.log.Info(s.name+": the provider encrypted to the retiring key ("+settingPrivateKeyOld+"): it has not read the JWKS "+
		"since the promotion; keep private_key_old until this stops (logged at most hourly)", "kid", s.oldKey.encKid)
}

// openIDToken returns the signed token of an ID token: the decrypted
// content of an encrypted one, which must then be encrypted as registered,
// or the token itself.
func (s *OIDC) openIDToken(raw string) (string, error) {
	enc := s.opts.IDTokenEncryption
	if !isJWE(raw) {
		if enc.enabled() {
			return "", errNotEncrypted
		}
		return raw, nil
	}
	pt, err := s.decrypt(raw, enc)
	if err != nil {
		return "", err
	}
	return string(pt), nil
}

// signedIDToken returns the signed ID token inside raw when raw is one of
// our encrypted ID tokens, else raw: a provider takes the signed token as
// id_token_hint (RP-Initiated Logout 1.0, 2), and its claims name the
// sign-in's issuer and subject.
func (s *OIDC) signedIDToken(raw string) string {
	if !isJWE(raw) {
		return raw
	}
	if jws, err := s.openIDToken(raw); err == nil {
		return jws
	}
	return raw
}
