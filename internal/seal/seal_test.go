package seal

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func key(b byte) []byte { return bytes.Repeat([]byte{b}, KeySize) }

func TestSealOpen(t *testing.T) {
	s, err := New(key(1))
	if err != nil {
		t.Fatal(err)
	}
	v := s.Seal("c", []byte("hello"))
	if strings.Contains(v, "hello") {
		t.Fatalf("sealed value shows plaintext: %s", v)
	}
	got, err := s.Open("c", v)
	if err != nil || string(got) != "hello" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if v2 := s.Seal("c", []byte("hello")); v2 == v {
		t.Fatal("two seals of the same value are equal: nonce reused")
	}
}

func TestOpenRejects(t *testing.T) {
	s, _ := New(key(1))
	other, _ := New(key(2))
	v := s.Seal("c", []byte("hello"))
	raw := []byte(v)
	raw[len(raw)/2] ^= 1
	cases := map[string]struct{ name, value string }{
		"tampered":    {"c", string(raw)},
		"other name":  {"d", v},
		"truncated":   {"c", v[:10]},
		"empty":       {"c", ""},
		"not base64":  {"c", "!!!"},
		"foreign key": {"c", other.Seal("c", []byte("hello"))},
	}
	for name, c := range cases {
		if _, err := s.Open(c.name, c.value); !errors.Is(err, ErrOpen) {
			t.Errorf("%s: err = %v, want ErrOpen", name, err)
		}
	}
}

func TestRotation(t *testing.T) {
	old, _ := New(key(1))
	rotated, _ := New(key(2), key(1))
	v := old.Seal("c", []byte("x"))
	if _, err := rotated.Open("c", v); err != nil {
		t.Fatalf("value sealed with the previous key: %v", err)
	}
	if _, err := old.Open("c", rotated.Seal("c", []byte("x"))); err == nil {
		t.Fatal("rotated sealer still seals with the old key")
	}
}

func TestKeyLength(t *testing.T) {
	if _, err := New(); err == nil {
		t.Error("no key accepted")
	}
	if _, err := New(make([]byte, 16)); err == nil {
		t.Error("16-byte key accepted")
	}
}
