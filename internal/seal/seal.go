// Package seal encrypts and authenticates small values for cookies with
// AES-256-GCM, with key rotation: seal with the first key, open with any.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
)

// KeySize is the length every key must have.
const KeySize = 32

// ErrOpen is returned for anything that does not open: tampered, truncated,
// sealed under another key or bound to another name.
var ErrOpen = errors.New("seal: value does not open")

// Sealer seals with its first key and opens with any of them.
type Sealer struct {
	aeads []cipher.AEAD
}

// New returns a Sealer. keys[0] seals; all of them open, so a key can be
// rotated without breaking sign-ins under way.
func New(keys ...[]byte) (*Sealer, error) {
	if len(keys) == 0 {
		return nil, errors.New("seal: no key")
	}
	s := &Sealer{}
	for i, k := range keys {
		if len(k) != KeySize {
			return nil, fmt.Errorf("seal: key %d is %d bytes, want %d", i, len(k), KeySize)
		}
		block, err := aes.NewCipher(k)
		if err != nil {
			return nil, fmt.Errorf("seal: key %d: %w", i, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("seal: key %d: %w", i, err)
		}
		s.aeads = append(s.aeads, aead)
	}
	return s, nil
}

// Seal encrypts plaintext bound to name (the cookie name, as associated data,
// so a value cannot be replayed under another name) and returns base64url.
func (s *Sealer) Seal(name string, plaintext []byte) string {
	aead := s.aeads[0]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plaintext)+aead.Overhead())
	rand.Read(nonce)
	out := aead.Seal(nonce, nonce, plaintext, []byte(name))
	return base64.RawURLEncoding.EncodeToString(out)
}

// Open reverses Seal for the same name under any of the keys.
func (s *Sealer) Open(name, value string) ([]byte, error) {
	raw, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil {
		return nil, ErrOpen
	}
	for _, aead := range s.aeads {
		ns := aead.NonceSize()
		if len(raw) < ns+aead.Overhead() {
			return nil, ErrOpen
		}
		if pt, err := aead.Open(nil, raw[:ns], raw[ns:], []byte(name)); err == nil {
			return pt, nil
		}
	}
	return nil, ErrOpen
}
