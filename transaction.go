package extauth

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/extauth/extauth/providers"
)

// txVersion starts every sealed transaction. Transactions sealed as JSON by
// earlier releases start with '{' and still open, so a rolling upgrade does
// not break the sign-ins in flight.
const txVersion = 1

// encodeTransaction is the compact encoding sealed into transaction
// cookies: a version byte, then each string field as a uvarint length and
// its bytes, the expiry in Unix milliseconds, and Extra sorted by key. It is
// smaller and several times cheaper than JSON, and it keeps the secrets out
// of Transaction's JSON form, which redacts them.
//
// The IdP of a federation's sign-in travels as an entry of Extra under
// txIdPKey, so that the encoding, and the instances of a rolling upgrade,
// stay as they were for every other sign-in.
func encodeTransaction(tx *providers.Transaction) []byte {
	if tx.IdP != "" {
		c := *tx
		c.Extra = make(map[string]string, len(tx.Extra)+1)
		maps.Copy(c.Extra, tx.Extra)
		c.Extra[txIdPKey] = tx.IdP
		tx = &c
	}
	n := 1 + binary.MaxVarintLen64*2
	for _, s := range txStrings(tx) {
		n += binary.MaxVarintLen64 + len(*s)
	}
	for k, v := range tx.Extra {
		n += 2*binary.MaxVarintLen64 + len(k) + len(v)
	}
	b := make([]byte, 1, n)
	b[0] = txVersion
	for _, s := range txStrings(tx) {
		b = appendString(b, *s)
	}
	b = binary.AppendVarint(b, tx.Expires.UnixMilli())
	b = binary.AppendUvarint(b, uint64(len(tx.Extra)))
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range tx.Extra {
			if !yield(k) {
				return
			}
		}
	}) {
		b = appendString(appendString(b, k), tx.Extra[k])
	}
	return b
}

// txStrings lists the string fields in their encoded order. Appending to
// this list needs a new txVersion.
func txStrings(tx *providers.Transaction) []*string {
	return []*string{&tx.ID, &tx.Provider, &tx.State, &tx.Verifier, &tx.Nonce, &tx.Binding,
		&tx.RequestID, &tx.TokenSecret, &tx.ReturnTo, &tx.Suffix, &tx.Tenant}
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

var errBadTransaction = errors.New("transaction cookie is malformed")

// txIdPKey is the Extra entry that carries Transaction.IdP: no strategy's
// key starts with a NUL.
const txIdPKey = "\x00idp"

// decodeTransaction reverses encodeTransaction. Its input has been opened
// by the sealer, so it was written by us; the bounds checks are for keys
// shared with an older or broken instance, never for an attacker.
func decodeTransaction(b []byte) (*providers.Transaction, error) {
	tx := &providers.Transaction{}
	if len(b) > 0 && b[0] == '{' {
		if err := json.Unmarshal(b, tx); err != nil {
			return nil, errBadTransaction
		}
		return tx, nil
	}
	if len(b) == 0 || b[0] != txVersion {
		return nil, errBadTransaction
	}
	d := txDecoder{b: b[1:]}
	for _, s := range txStrings(tx) {
		*s = d.string()
	}
	ms := d.varint()
	if n := d.uvarint(); n > 0 && d.err == nil {
		if n > uint64(len(d.b)) {
			return nil, errBadTransaction
		}
		tx.Extra = make(map[string]string, n)
		prev := ""
		for i := range n {
			k := d.string()
			if i > 0 && k <= prev {
				return nil, errBadTransaction
			}
			tx.Extra[k], prev = d.string(), k
		}
	}
	if d.err != nil || len(d.b) != 0 {
		return nil, errBadTransaction
	}
	if idp, ok := tx.Extra[txIdPKey]; ok {
		tx.IdP = idp
		delete(tx.Extra, txIdPKey)
		if len(tx.Extra) == 0 {
			tx.Extra = nil
		}
	}
	tx.Expires = time.UnixMilli(ms)
	return tx, nil
}

type txDecoder struct {
	b   []byte
	err error
}

func (d *txDecoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errBadTransaction
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *txDecoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errBadTransaction
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *txDecoder) string() string {
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)) {
		d.err = errBadTransaction
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}
