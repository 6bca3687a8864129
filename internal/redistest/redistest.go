// Package redistest runs a throwaway redis-server (the Debian package) for
// the interop tests: on 127.0.0.1 at a free port, without persistence, in a
// temporary directory, stopped when the test ends.
package redistest

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Server is one running redis-server.
type Server struct {
	// Addr is "127.0.0.1:<port>".
	Addr string
	// Password is what requirepass was set to, "" for none.
	Password string
}

// Config holds the settings of a server beyond the fixed ones.
type Config struct {
	// Password sets requirepass.
	Password string
	// Lines are more redis.conf directives, e.g. an ACL "user ..." line.
	Lines []string
}

// Start runs redis-server and waits until it answers. The configuration
// goes in a file in the temporary directory, so that no password shows in
// the process list.
func Start(t testing.TB, c Config) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server is not installed: apt-get install redis-server")
	}
	var lastErr error
	// A free port can be taken between our probe and redis-server's bind;
	// try a few.
	for range 3 {
		s, err := start(t, bin, c)
		if err == nil {
			return s
		}
		lastErr = err
	}
	t.Fatal(lastErr)
	return nil
}

func start(t testing.TB, bin string, c Config) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir := t.TempDir()
	conf := []string{
		"bind 127.0.0.1",
		"port " + strconv.Itoa(port),
		"save \"\"",
		"appendonly no",
		"dir " + dir,
		"daemonize no",
		"logfile \"\"",
		"databases 16",
	}
	if c.Password != "" {
		conf = append(conf, "requirepass "+c.Password)
	}
	conf = append(conf, c.Lines...)
	path := filepath.Join(dir, "redis.conf")
	if err := os.WriteFile(path, []byte(strings.Join(conf, "\n")+"\n"), 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, path)
	cmd.Dir = dir
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		cmd.Process.Kill()
		<-exited
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Password: c.Password}
	deadline := time.Now().Add(10 * time.Second)
	for !s.answers() {
		select {
		case err := <-exited:
			exited <- err
			stop()
			return nil, fmt.Errorf("redis-server exited (%v):\n%s", err, out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("redis-server did not answer within 10s:\n%s", out.String())
		}
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("redis-server log:\n%s", out.String())
		}
	})
	return s, nil
}

// answers sends an inline PING: PONG, or NOAUTH when a password is
// required, both mean the server is up.
func (s *Server) answers() bool {
	nc, err := net.DialTimeout("tcp", s.Addr, time.Second)
	if err != nil {
		return false
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(time.Second))
	if _, err := nc.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(nc).ReadString('\n')
	return err == nil && (strings.HasPrefix(line, "+PONG") || strings.HasPrefix(line, "-NOAUTH"))
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// CLI runs redis-cli against the server (raw output, one reply element a
// line) and returns its output; the password goes through the environment.
func (s *Server) CLI(t testing.TB, args ...string) string {
	t.Helper()
	host, port, _ := net.SplitHostPort(s.Addr)
	cmd := exec.Command("redis-cli", append([]string{"-h", host, "-p", port, "--raw"}, args...)...)
	cmd.Env = os.Environ()
	if s.Password != "" {
		cmd.Env = append(cmd.Env, "REDISCLI_AUTH="+s.Password)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("redis-cli %s: %v\n%s", args[0], err, stderr.String())
	}
	return strings.TrimRight(string(out), "\n")
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
