// Package redistest runs throwaway Redis deployments for the interop tests,
// from the Debian packages redis-server, redis-sentinel and redis-tools: a
// standalone server, a replica, Sentinels, a Cluster. Every process listens
// on 127.0.0.1 at a free port, keeps nothing on disk past the test (its
// directory is a t.TempDir), and is stopped when the test ends, or killed
// with the test binary should that die first.
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
	"syscall"
	"testing"
	"time"

	"github.com/extauth/extauth/internal/harness"
)

// Server is one running redis-server or redis-sentinel.
type Server struct {
	// Addr is "127.0.0.1:<port>".
	Addr string
	// Password is what requirepass was set to, "" for none.
	Password string

	bin, conf, dir string
	t              testing.TB
	mu             sync.Mutex
	proc           *process
}

// Config holds the settings of a server beyond the fixed ones.
type Config struct {
	// Password sets requirepass, and masterauth for a replica.
	Password string
	// ReplicaOf makes the server a replica of that one.
	ReplicaOf *Server
	// Lines are more redis.conf directives, e.g. an ACL "user ..." line.
	Lines []string
}

// Start runs redis-server and waits until it answers. The configuration
// goes in a file in the temporary directory, so that no password shows in
// the process list.
func Start(t testing.TB, c Config) *Server {
	t.Helper()
	var lines []string
	if c.Password != "" {
		lines = append(lines, "requirepass "+c.Password, "masterauth "+c.Password)
	}
	if c.ReplicaOf != nil {
		host, port, _ := net.SplitHostPort(c.ReplicaOf.Addr)
		lines = append(lines, "replicaof "+host+" "+port)
	}
	lines = append(lines, c.Lines...)
	return startWith(t, "redis-server", c.Password, func(port int) []string { return lines })
}

func startWith(t testing.TB, binName, password string, extra func(port int) []string) *Server {
	t.Helper()
	bin, err := exec.LookPath(binName)
	if err != nil {
		t.Fatalf("%s is not installed: apt-get install redis-server redis-sentinel redis-tools", binName)
	}
	var lastErr error
	// A free port can be taken between our probe and the server's bind;
	// try a few.
	for range 3 {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		conf := []string{
			"bind 127.0.0.1",
			"port " + strconv.Itoa(port),
			"dir " + dir,
			"daemonize no",
			`logfile ""`,
		}
		if binName == "redis-server" {
			conf = append(conf, `save ""`, "appendonly no", "databases 16", "repl-diskless-sync-delay 0")
		}
		conf = append(conf, extra(port)...)
		path := filepath.Join(dir, "redis.conf")
		if err := os.WriteFile(path, []byte(strings.Join(conf, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Password: password, bin: bin, conf: path, dir: dir, t: t}
		if lastErr = s.run(); lastErr == nil {
			t.Cleanup(func() {
				s.Stop()
				if t.Failed() {
					t.Logf("%s %s log:\n%s", binName, s.Addr, s.Log())
				}
			})
			return s
		}
	}
	t.Fatal(lastErr)
	return nil
}

// process is one run of a server: stopped servers keep their logs.
type process struct {
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan error
}

func (s *Server) run() error {
	cmd := exec.Command(s.bin, s.conf)
	cmd.Dir = s.dir
	out := &syncBuffer{}
	if s.proc != nil {
		out.Write([]byte(s.proc.out.String() + "--- restarted ---\n"))
	}
	cmd.Stdout, cmd.Stderr = out, out
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	p := &process{cmd: cmd, out: out, exited: make(chan error, 1)}
	go func() { p.exited <- cmd.Wait() }()
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	deadline := time.Now().Add(60 * time.Second)
	for !s.answers() {
		select {
		case err := <-p.exited:
			p.exited <- err
			return fmt.Errorf("%s exited (%v):\n%s", filepath.Base(s.bin), err, out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("%s did not answer within 60s:\n%s", filepath.Base(s.bin), out.String())
		}
	}
	return nil
}

// Stop kills the server, as a crash or a lost machine would, and waits for
// it to exit. It does nothing to a stopped server.
func (s *Server) Stop() {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		return
	}
	select {
	case err := <-p.exited:
		p.exited <- err
		return
	default:
	}
	p.cmd.Process.Kill()
	err := <-p.exited
	p.exited <- err
}

// Freeze stops the server (SIGSTOP), as a hung machine would: connections
// stay open, new ones are accepted by the kernel, and nothing answers.
// Thaw resumes it; the test's clean-up does too.
func (s *Server) Freeze() {
	s.t.Helper()
	s.signal(syscall.SIGSTOP)
	s.t.Cleanup(s.Thaw)
}

// Thaw resumes a frozen server.
func (s *Server) Thaw() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		return
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		s.t.Errorf("redistest: signal %v: %v", sig, err)
	}
}

// Restart starts a stopped server again, on the same port with the same
// configuration (which a Sentinel or Cluster node may have rewritten).
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	if err := s.run(); err != nil {
		s.t.Fatal(err)
	}
}

// Log is what the server wrote to its standard output.
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return ""
	}
	return s.proc.out.String()
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
	out, err := s.TryCLI(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TryCLI is CLI returning its error, for servers that may be down.
func (s *Server) TryCLI(args ...string) (string, error) {
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
		return "", fmt.Errorf("redis-cli %s: %v\n%s", args[0], err, stderr.String())
	}
	return strings.TrimRight(string(out), "\n"), nil
}

// Info returns one field of INFO, "" when absent.
func (s *Server) Info(t testing.TB, section, field string) string {
	t.Helper()
	for _, line := range strings.Split(s.CLI(t, "INFO", section), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// WaitOnline waits until n replicas acknowledge s's writes: a SET and a
// WAIT on one connection see them all. (A replica reported online may still
// take a moment to acknowledge after its first sync.)
func (s *Server) WaitOnline(t testing.TB, n int) {
	t.Helper()
	WaitFor(t, 30*time.Second, fmt.Sprintf("%d replicas acknowledge writes to %s", n, s.Addr), func() bool {
		return s.acknowledged(n)
	})
}

func (s *Server) acknowledged(n int) bool {
	nc, err := net.DialTimeout("tcp", s.Addr, time.Second)
	if err != nil {
		return false
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(2 * time.Second))
	var cmds []string
	if s.Password != "" {
		cmds = append(cmds, "AUTH "+s.Password)
	}
	cmds = append(cmds, "SET redistest:probe 1", fmt.Sprintf("WAIT %d 200", n))
	if _, err := nc.Write([]byte(strings.Join(cmds, "\r\n") + "\r\n")); err != nil {
		return false
	}
	r := bufio.NewReader(nc)
	var line string
	for range cmds {
		if line, err = r.ReadString('\n'); err != nil {
			return false
		}
	}
	return strings.TrimSpace(line) == ":"+strconv.Itoa(n)
}

// WaitFor polls cond every 50ms until it holds or timeout passes.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type syncBuffer = harness.SyncBuffer
