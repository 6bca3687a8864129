package extauth

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/extauth/extauth/providers"
)

func fullTransaction() *providers.Transaction {
	tx := &providers.Transaction{Expires: time.UnixMilli(1_800_000_000_123), Extra: map[string]string{"b": "2", "a": "1", "": "empty key"}}
	for i, s := range txStrings(tx) {
		*s = "value-" + string(rune('a'+i)) + "\x00é"
	}
	return tx
}

func TestTransactionEncodingRoundTrip(t *testing.T) {
	for _, tx := range []*providers.Transaction{fullTransaction(), {Expires: time.UnixMilli(0)}} {
		got, err := decodeTransaction(encodeTransaction(tx))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, tx) {
			t.Errorf("round trip:\n got %#v\nwant %#v", got, tx)
		}
	}
	// Every field, Extra included, must take part.
	var p providers.Transaction
	fillNonZero(t, reflect.ValueOf(&p).Elem())
	p.Expires = p.Expires.Round(time.Millisecond)
	got, err := decodeTransaction(encodeTransaction(&p))
	if err != nil || !reflect.DeepEqual(got, &p) {
		t.Errorf("a field is not encoded: got %#v, want %#v (%v)", got, &p, err)
	}
}

// Cookies sealed as JSON before the binary encoding still open, so a rolling
// upgrade does not fail the sign-ins in flight.
func TestTransactionDecodesLegacyJSON(t *testing.T) {
	legacy := `{"i":"id1","p":"oidc","s":"st","v":"ver","n":"no","b":"bind","u":"/x","f":"json","e":"2027-01-02T03:04:05Z","x":{"k":"v"}}`
	tx, err := decodeTransaction([]byte(legacy))
	if err != nil {
		t.Fatal(err)
	}
	if tx.ID != "id1" || tx.State != "st" || tx.Verifier != "ver" || tx.Binding != "bind" || tx.Suffix != "json" || tx.Extra["k"] != "v" || tx.Expires.Year() != 2027 {
		t.Errorf("legacy transaction read as %#v", tx)
	}
}

func TestTransactionDecodeRefusesMalformed(t *testing.T) {
	good := encodeTransaction(fullTransaction())
	bad := [][]byte{nil, {}, {2}, {'{'}, good[:len(good)-1], append(good[:len(good):len(good)], 0), {txVersion, 0xff}}
	for i := 1; i < len(good); i += 7 {
		bad = append(bad, good[:i])
	}
	for _, b := range bad {
		if tx, err := decodeTransaction(b); err == nil {
			t.Errorf("decodeTransaction(%q) = %#v, want an error", b, tx)
		}
	}
}

func FuzzDecodeTransaction(f *testing.F) {
	f.Add(encodeTransaction(fullTransaction()))
	f.Add([]byte(`{"i":"x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		tx, err := decodeTransaction(b)
		if err != nil || b[0] == '{' {
			return
		}
		again, err := decodeTransaction(encodeTransaction(tx))
		if err != nil || !reflect.DeepEqual(again, tx) {
			t.Errorf("%q decodes to %#v, which re-encodes to %#v (%v)", b, tx, again, err)
		}
	})
}

// The JSON form of a Transaction is for humans and logs: it must not carry
// the values that would let its reader finish the sign-in.
func TestTransactionJSONIsRedacted(t *testing.T) {
	b, err := json.Marshal(fullTransaction())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"value-c", "value-d", "value-e", "value-f", "value-h"} {
		if json.Valid(b) && contains(string(b), f) {
			t.Errorf("JSON shows %s: %s", f, b)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
