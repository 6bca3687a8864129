package redisstore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeRedis is a tiny RESP2 server: AUTH (with or without a user), SELECT,
// PING and SET key value NX PX ms, on any net.Listener. Behave lets a test
// answer a command itself, to hang, drop the connection or talk nonsense.
type fakeRedis struct {
	ln       net.Listener
	password string
	username string // with password: the one ACL user AUTH accepts
	now      func() time.Time
	// behave, when it returns true, has answered cmd itself.
	behave func(c *fakeConn, cmd []string) bool

	mu       sync.Mutex
	keys     map[string]time.Time // "<db>/<key>" -> expiry
	cmds     []fakeCmd
	accepted int
	open     map[*fakeConn]bool
	peak     int
	wg       sync.WaitGroup
}

type fakeCmd struct {
	conn int
	args []string
}

// fakeConn is one client connection as the server sees it.
type fakeConn struct {
	f      *fakeRedis
	n      int // 1-based, in order of acceptance
	nc     net.Conn
	authed bool
	db     int
}

// newFakeRedis serves on ln until the test ends; then it closes ln and
// every connection, and waits for its goroutines.
func newFakeRedis(t testing.TB, ln net.Listener) *fakeRedis {
	f := &fakeRedis{ln: ln, now: time.Now, keys: map[string]time.Time{}, open: map[*fakeConn]bool{}}
	f.wg.Add(1)
	go f.acceptLoop()
	t.Cleanup(f.stop)
	return f
}

// newTCPFake listens on 127.0.0.1 at a free port.
func newTCPFake(t testing.TB) *fakeRedis {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return newFakeRedis(t, ln)
}

func (f *fakeRedis) addr() string { return f.ln.Addr().String() }

func (f *fakeRedis) stop() {
	f.ln.Close()
	f.mu.Lock()
	for c := range f.open {
		c.nc.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

func (f *fakeRedis) acceptLoop() {
	defer f.wg.Done()
	for {
		nc, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		f.accepted++
		c := &fakeConn{f: f, n: f.accepted, nc: nc, authed: f.password == ""}
		f.open[c] = true
		f.peak = max(f.peak, len(f.open))
		f.mu.Unlock()
		f.wg.Add(1)
		go c.serve()
	}
}

func (c *fakeConn) serve() {
	defer c.f.wg.Done()
	defer c.close()
	br := bufio.NewReader(c.nc)
	for {
		cmd, err := readCommand(br)
		if err != nil {
			return
		}
		c.f.mu.Lock()
		c.f.cmds = append(c.f.cmds, fakeCmd{conn: c.n, args: cmd})
		behave := c.f.behave
		c.f.mu.Unlock()
		if behave != nil && behave(c, cmd) {
			continue
		}
		if _, err := io.WriteString(c.nc, c.answer(cmd)); err != nil {
			return
		}
	}
}

func (c *fakeConn) close() {
	c.nc.Close()
	c.f.mu.Lock()
	delete(c.f.open, c)
	c.f.mu.Unlock()
}

// write sends raw bytes.
func (c *fakeConn) write(s string) { io.WriteString(c.nc, s) }

// hang answers nothing until the client (or the end of the test) closes
// the connection.
func (c *fakeConn) hang() { io.Copy(io.Discard, c.nc) }

// answer runs cmd as Redis would and returns the encoded reply.
func (c *fakeConn) answer(cmd []string) string {
	f := c.f
	f.mu.Lock()
	password, username := f.password, f.username
	f.mu.Unlock()
	name := strings.ToUpper(cmd[0])
	if !c.authed && name != "AUTH" {
		return "-NOAUTH Authentication required.\r\n"
	}
	switch {
	case name == "AUTH" && (len(cmd) == 2 || len(cmd) == 3):
		if password == "" {
			return "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n"
		}
		user := "default"
		if len(cmd) == 3 {
			user = cmd[1]
		}
		wantUser := username
		if wantUser == "" {
			wantUser = "default"
		}
		if user != wantUser || cmd[len(cmd)-1] != password {
			return "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
		}
		c.authed = true
		return "+OK\r\n"
	case name == "SELECT" && len(cmd) == 2:
		db, err := strconv.Atoi(cmd[1])
		if err != nil || db < 0 || db > 15 {
			return "-ERR DB index is out of range\r\n"
		}
		c.db = db
		return "+OK\r\n"
	case name == "PING" && len(cmd) == 1:
		return "+PONG\r\n"
	case name == "SET" && len(cmd) == 6 && strings.EqualFold(cmd[3], "NX") && strings.EqualFold(cmd[4], "PX"):
		ms, err := strconv.ParseInt(cmd[5], 10, 64)
		if err != nil || ms <= 0 {
			return "-ERR invalid expire time in 'set' command\r\n"
		}
		k := strconv.Itoa(c.db) + "/" + cmd[1]
		f.mu.Lock()
		defer f.mu.Unlock()
		now := f.now()
		if exp, ok := f.keys[k]; ok && now.Before(exp) {
			return "$-1\r\n"
		}
		f.keys[k] = now.Add(time.Duration(ms) * time.Millisecond)
		return "+OK\r\n"
	}
	return fmt.Sprintf("-ERR unknown command '%s'\r\n", cmd[0])
}

// readCommand reads one RESP array of bulk strings, bounded.
func readCommand(br *bufio.Reader) ([]string, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(line, "*") || !strings.HasSuffix(line, "\r\n") {
		return nil, fmt.Errorf("not an array: %q", line)
	}
	n, err := strconv.Atoi(line[1 : len(line)-2])
	if err != nil || n < 1 || n > 16 {
		return nil, fmt.Errorf("bad array length %q", line)
	}
	args := make([]string, n)
	for i := range args {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, err
		}
		if !strings.HasPrefix(line, "$") || !strings.HasSuffix(line, "\r\n") {
			return nil, fmt.Errorf("not a bulk string: %q", line)
		}
		l, err := strconv.Atoi(line[1 : len(line)-2])
		if err != nil || l < 0 || l > 1<<16 {
			return nil, fmt.Errorf("bad bulk length %q", line)
		}
		buf := make([]byte, l+2)
		if _, err := io.ReadFull(br, buf); err != nil {
			return nil, err
		}
		if string(buf[l:]) != "\r\n" {
			return nil, errors.New("bulk string not terminated")
		}
		args[i] = string(buf[:l])
	}
	return args, nil
}

// setAuth makes the server require password, for username if not empty.
func (f *fakeRedis) setAuth(username, password string) {
	f.mu.Lock()
	f.username, f.password = username, password
	f.mu.Unlock()
}

func (f *fakeRedis) setClock(now func() time.Time) {
	f.mu.Lock()
	f.now = now
	f.mu.Unlock()
}

func (f *fakeRedis) setBehave(b func(c *fakeConn, cmd []string) bool) {
	f.mu.Lock()
	f.behave = b
	f.mu.Unlock()
}

// commands returns what the server received, each as "conn: ARGS...".
func (f *fakeRedis) commands() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, len(f.cmds))
	for i, c := range f.cmds {
		out[i] = strconv.Itoa(c.conn) + ": " + strings.Join(c.args, " ")
	}
	return out
}

// counts returns how many connections were accepted, are open now, and
// were open at most at once.
func (f *fakeRedis) counts() (accepted, open, peak int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.accepted, len(f.open), f.peak
}

// waitOpen waits until n connections are open, as seen by the server.
func (f *fakeRedis) waitOpen(t testing.TB, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, open, _ := f.counts(); open == n {
			return
		}
		if time.Now().After(deadline) {
			_, open, _ := f.counts()
			t.Fatalf("%d connections open on the server, want %d", open, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// pipeListener is a net.Listener over net.Pipe, for tests in a synctest
// bubble, where time is fake and goroutines left behind fail the test.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

// Dial is an Options.Dial that connects to the listener.
func (l *pipeListener) Dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.closed:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }
