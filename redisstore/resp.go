package redisstore

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// The store sends four commands and expects short answers: a status, a nil,
// an error message. These bounds keep a confused or hostile peer from making
// it allocate or wait for more.
const (
	// maxLine bounds a status, error or length line, terminator included;
	// it is also the read buffer's size.
	maxLine = 4096
	// maxBulk bounds a bulk string reply. None of our commands asks for one,
	// but a well-formed one is read whole so the connection stays in step.
	maxBulk = 64 << 10
)

// reply is one RESP2 reply of the kinds our commands can draw.
type reply struct {
	kind byte   // '+' status, '-' error, ':' integer, '$' bulk string
	str  string // status text, error message or bulk string
	n    int64  // integer
	null bool   // the nil bulk string, $-1
}

// errProtocol marks replies that break RESP2 or the bounds above; the
// connection they came on is out of step and must not be reused.
var errProtocol = errors.New("redis protocol error")

func protocolErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errProtocol, fmt.Sprintf(format, args...))
}

// readReply reads one reply. Arrays are refused: none of our commands
// answers with one.
func readReply(br *bufio.Reader) (reply, error) {
	line, err := readLine(br)
	if err != nil {
		return reply{}, err
	}
	if len(line) == 0 {
		return reply{}, protocolErr("empty reply line")
	}
	kind, body := line[0], line[1:]
	switch kind {
	case '+', '-':
		return reply{kind: kind, str: string(body)}, nil
	case ':':
		n, err := parseInt(body)
		if err != nil {
			return reply{}, err
		}
		return reply{kind: kind, n: n}, nil
	case '$':
		n, err := parseInt(body)
		if err != nil {
			return reply{}, err
		}
		switch {
		case n == -1:
			return reply{kind: kind, null: true}, nil
		case n < 0:
			return reply{}, protocolErr("bulk length %d", n)
		case n > maxBulk:
			return reply{}, protocolErr("bulk reply of %d bytes exceeds %d", n, maxBulk)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(br, buf); err != nil {
			return reply{}, unexpectedEOF(err)
		}
		if buf[n] != '\r' || buf[n+1] != '\n' {
			return reply{}, protocolErr("bulk reply not terminated by CRLF")
		}
		return reply{kind: kind, str: string(buf[:n])}, nil
	case '*':
		return reply{}, protocolErr("unexpected array reply")
	}
	return reply{}, protocolErr("unknown reply type %q", kind)
}

// readLine returns one CRLF-terminated line without its terminator.
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return nil, protocolErr("reply line longer than %d bytes", maxLine)
	case err != nil && len(line) > 0:
		return nil, unexpectedEOF(err)
	case err != nil:
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, protocolErr("reply line not terminated by CRLF")
	}
	return line[:len(line)-2], nil
}

// unexpectedEOF reports a reply cut short as io.ErrUnexpectedEOF, so it is
// told apart from a connection that closed between replies.
func unexpectedEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// parseInt accepts what Redis writes: an optional minus and decimal digits.
func parseInt(b []byte) (int64, error) {
	if len(b) == 0 || len(b) > 20 {
		return 0, protocolErr("bad number")
	}
	for i, c := range b {
		if (c < '0' || c > '9') && (c != '-' || i != 0) {
			return 0, protocolErr("bad number")
		}
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0, protocolErr("bad number")
	}
	return n, nil
}

// appendCommand encodes a command as RESP2 bulk strings, which carry any
// byte, so keys need no escaping.
func appendCommand(dst []byte, args ...string) []byte {
	dst = append(dst, '*')
	dst = strconv.AppendInt(dst, int64(len(args)), 10)
	dst = append(dst, '\r', '\n')
	for _, a := range args {
		dst = append(dst, '$')
		dst = strconv.AppendInt(dst, int64(len(a)), 10)
		dst = append(dst, '\r', '\n')
		dst = append(dst, a...)
		dst = append(dst, '\r', '\n')
	}
	return dst
}

// describe names a reply for an error message without quoting much of it.
func (r reply) describe() string {
	switch r.kind {
	case '+':
		return "status " + clip(r.str)
	case '-':
		return "error " + clip(r.str)
	case ':':
		return "integer " + strconv.FormatInt(r.n, 10)
	case '$':
		if r.null {
			return "nil"
		}
		return fmt.Sprintf("bulk string of %d bytes", len(r.str))
	}
	return "nothing"
}

func clip(s string) string {
	const max = 64
	if len(s) > max {
		s = s[:max] + "..."
	}
	return strconv.Quote(s)
}
