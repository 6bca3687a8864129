package redisstore

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
)

// appendReply encodes r as Redis would.
func appendReply(dst []byte, r reply) []byte {
	dst = append(dst, r.kind)
	switch r.kind {
	case '+', '-':
		dst = append(dst, r.str...)
	case ':':
		dst = strconv.AppendInt(dst, r.n, 10)
	case '$':
		if r.null {
			return append(dst, "-1\r\n"...)
		}
		dst = strconv.AppendInt(dst, int64(len(r.str)), 10)
		dst = append(dst, '\r', '\n')
		dst = append(dst, r.str...)
	}
	return append(dst, '\r', '\n')
}

func parse(b []byte) (reply, int, error) {
	cr := &countingReader{r: bytes.NewReader(b)}
	br := bufio.NewReaderSize(cr, maxLine)
	r, err := readReply(br)
	return r, cr.n - br.Buffered(), err
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestReadReply(t *testing.T) {
	for _, c := range []struct {
		in   string
		want reply
	}{
		{"+OK\r\n", reply{kind: '+', str: "OK"}},
		{"+\r\n", reply{kind: '+'}},
		{"-ERR no\r\n", reply{kind: '-', str: "ERR no"}},
		{":0\r\n", reply{kind: ':'}},
		{":-9223372036854775808\r\n", reply{kind: ':', n: -1 << 63}},
		{"$-1\r\n", reply{kind: '$', null: true}},
		{"$0\r\n\r\n", reply{kind: '$'}},
		{"$4\r\na\r\nb\r\n", reply{kind: '$', str: "a\r\nb"}},
		{"+" + strings.Repeat("x", maxLine-3) + "\r\n", reply{kind: '+', str: strings.Repeat("x", maxLine-3)}},
	} {
		got, n, err := parse([]byte(c.in))
		if err != nil || got != c.want || n != len(c.in) {
			t.Errorf("%q: %+v, %d bytes, %v", c.in, got, n, err)
		}
		if enc := string(appendReply(nil, got)); enc != c.in {
			t.Errorf("%q encodes back as %q", c.in, enc)
		}
	}
	for _, in := range []string{"", "+OK", "+OK\r", "$3\r\nab", ":1"} {
		if _, _, err := parse([]byte(in)); err == nil || errors.Is(err, errProtocol) {
			t.Errorf("%q: %v, want an EOF", in, err)
		}
	}
	if _, _, err := parse(nil); err != io.EOF {
		t.Errorf("no bytes: %v, want io.EOF (closed between replies)", err)
	}
	if _, _, err := parse([]byte("+OK")); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("cut short: %v, want io.ErrUnexpectedEOF", err)
	}
}

func TestAppendCommand(t *testing.T) {
	got := string(appendCommand(nil, "SET", "k\r\n", "", "é"))
	if want := "*4\r\n$3\r\nSET\r\n$3\r\nk\r\n\r\n$0\r\n\r\n$2\r\né\r\n"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
}

// FuzzReadReply: any input gives a reply or an error, never a panic;
// reads stay within the bounds; what parses encodes back to bytes that
// parse to the same reply.
func FuzzReadReply(f *testing.F) {
	for _, s := range []string{"+OK\r\n", "$-1\r\n", "-ERR x\r\n", ":42\r\n", "$3\r\nabc\r\n", "*1\r\n$1\r\na\r\n",
		"$99999999\r\n", "$-2\r\n", "+OK\n", "_\r\n", "\r\n", "$2\r\nabcd", ":-\r\n", "$1-\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r, n, err := parse(in)
		if n > maxLine+maxBulk+2 {
			t.Fatalf("read %d bytes", n)
		}
		if err != nil {
			return
		}
		switch r.kind {
		case '+', '-', ':', '$':
		default:
			t.Fatalf("kind %q", r.kind)
		}
		if len(r.str) > maxBulk || (r.kind != '$' && strings.ContainsAny(r.str, "\n")) {
			t.Fatalf("reply %+v", r)
		}
		enc := appendReply(nil, r)
		again, m, err := parse(enc)
		if err != nil || again != r || m != len(enc) {
			t.Fatalf("%q -> %+v -> %q -> %+v, %v", in, r, enc, again, err)
		}
	})
}
