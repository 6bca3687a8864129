// Package pgtest runs a throwaway PostgreSQL server for the interop tests,
// from the Debian package postgresql: initdb in a temporary directory, then
// postgres on 127.0.0.1 at a free port, as an unprivileged user (nobody
// when the tests run as root, which PostgreSQL refuses to be), stopped and
// its directory removed when the test ends.
//
// postgres runs as the test's child rather than daemonised by pg_ctl, so
// that it dies with the test binary should that be killed (a -timeout
// panic) instead of outliving it.
package pgtest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Server is one running PostgreSQL.
type Server struct {
	// Addr is "127.0.0.1:<port>".
	Addr string
	// User is the superuser initdb made; Password its password.
	User, Password string

	t        testing.TB
	bin      string // the directory of initdb and postgres
	isready  string // pg_isready
	data     string
	settings []string
	cred     *syscall.Credential
	mu       sync.Mutex
	proc     *exec.Cmd
	done     chan error
	logMu    sync.Mutex
	log      strings.Builder
}

// Durable are the settings under which a commit survives a power cut,
// PostgreSQL's defaults, for measurements: Start otherwise turns fsync and
// synchronous commits off, which a test server can do without.
var Durable = []string{"fsync=on", "full_page_writes=on", "synchronous_commit=on"}

// Start runs initdb and postgres and waits until it accepts connections.
// settings are more "name=value" server settings, which win over the
// fixed ones.
func Start(t testing.TB, password string, settings ...string) *Server {
	t.Helper()
	bin, err := binDir()
	if err != nil {
		t.Fatal(err)
	}
	base, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{User: "extauth", Password: password, t: t, bin: bin, data: filepath.Join(base, "data"), settings: settings}
	if s.isready, err = isReady(bin); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("postgres %s log:\n%s", s.Addr, s.Log())
		}
		os.RemoveAll(base)
	})
	if os.Geteuid() == 0 {
		s.cred, err = nobody()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(base, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	pwfile := filepath.Join(base, "pw")
	if err := os.WriteFile(pwfile, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if s.cred != nil {
		if err := os.Chown(pwfile, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	initdb := s.command("initdb", "-D", s.data, "-U", s.User, "--pwfile="+pwfile, "--auth=scram-sha-256",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	os.Remove(pwfile)
	var lastErr error
	// A free port can be taken between our probe and postgres's bind; try
	// a few.
	for range 3 {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if lastErr = s.run(); lastErr == nil {
			return s
		}
	}
	t.Fatal(lastErr)
	return nil
}

// binDir finds initdb and postgres: on PATH, or where Debian puts them
// (/usr/lib/postgresql/<version>/bin, the newest version).
func binDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if dir := filepath.Dir(p); fileExists(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Dir(real), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return version(a) - version(b) })
	for i := len(dirs) - 1; i >= 0; i-- {
		if fileExists(filepath.Join(dirs[i], "initdb")) {
			return dirs[i], nil
		}
	}
	return "", fmt.Errorf("PostgreSQL is not installed: apt-get install postgresql")
}

// isReady finds pg_isready: beside initdb (where binDir found it, or where
// its symbolic link points), or on PATH.
func isReady(binDir string) (string, error) {
	dirs := []string{binDir}
	if real, err := filepath.EvalSymlinks(filepath.Join(binDir, "initdb")); err == nil {
		dirs = append(dirs, filepath.Dir(real))
	}
	for _, d := range dirs {
		if p := filepath.Join(d, "pg_isready"); fileExists(p) {
			return p, nil
		}
	}
	if p, err := exec.LookPath("pg_isready"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("pg_isready is not installed beside initdb (%s) nor on PATH: apt-get install postgresql", binDir)
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func nobody() (*syscall.Credential, error) {
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL will not run as root, and there is no user nobody to run it as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.Dir = filepath.Dir(s.data)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGKILL}
	return cmd
}

func (s *Server) run() error {
	_, port, _ := net.SplitHostPort(s.Addr)
	args := []string{"-D", s.data, "-p", port,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=",
		// A test server: nothing here must survive a power cut.
		"-c", "fsync=off", "-c", "full_page_writes=off", "-c", "synchronous_commit=off",
		"-c", "max_connections=200"}
	for _, kv := range s.settings {
		args = append(args, "-c", kv)
	}
	cmd := s.command("postgres", args...)
	cmd.Stdout, cmd.Stderr = (*logWriter)(s), (*logWriter)(s)
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	s.mu.Lock()
	s.proc, s.done = cmd, done
	s.mu.Unlock()
	// pg_isready (beside initdb) asks the server whether it accepts
	// connections, so that this package needs no PostgreSQL driver: the
	// root module's tests build without pgx, which only the pgstore
	// module requires.
	host, _, _ := net.SplitHostPort(s.Addr)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ready := exec.Command(s.isready, "-q", "-h", host, "-p", port, "-t", "1")
		err := ready.Run()
		if err == nil {
			return nil
		}
		select {
		case werr := <-done:
			done <- werr
			return fmt.Errorf("postgres exited (%v):\n%s", werr, s.Log())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("postgres did not accept connections within 30s (pg_isready: %v):\n%s", err, s.Log())
		}
	}
}

// URL is a connection string for the server's postgres database.
func (s *Server) URL() string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(s.User, s.Password), Host: s.Addr, Path: "/postgres", RawQuery: "sslmode=disable"}
	return u.String()
}

// Stop shuts the server down (fast shutdown: open sessions are ended) and
// waits for it to exit. It does nothing to a stopped server.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.proc, s.done
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case err := <-done:
		done <- err
		return
	default:
	}
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-done:
		done <- err
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		done <- <-done
	}
}

// Freeze stops postgres and every process it forked (SIGSTOP), as a hung
// machine or a stuck disk would: connections stay open, new ones are
// accepted by the kernel, and nothing answers. Thaw resumes them; the
// test's clean-up does too, before the server is stopped.
func (s *Server) Freeze() {
	s.t.Helper()
	s.signalAll(syscall.SIGSTOP)
	s.t.Cleanup(s.Thaw)
}

// Thaw resumes a frozen server.
func (s *Server) Thaw() { s.signalAll(syscall.SIGCONT) }

// signalAll signals postgres and its descendants. Each backend is a
// process group of its own (postgres calls setsid in its children), so
// they are found by their parent, in /proc.
func (s *Server) signalAll(sig syscall.Signal) {
	s.mu.Lock()
	cmd := s.proc
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	for _, pid := range descendants(cmd.Process.Pid) {
		if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			s.t.Errorf("pgtest: signal %v to %d: %v", sig, pid, err)
		}
	}
}

// descendants is root and every process below it, parents first.
func descendants(root int) []int {
	parent := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		rest := stat[bytes.LastIndexByte(stat, ')')+1:]
		if f := strings.Fields(string(rest)); len(f) > 1 {
			if ppid, err := strconv.Atoi(f[1]); err == nil {
				parent[pid] = ppid
			}
		}
	}
	out := []int{root}
	for i := 0; i < len(out); i++ {
		for pid, ppid := range parent {
			if ppid == out[i] {
				out = append(out, pid)
			}
		}
	}
	return out
}

// Restart starts a stopped server again on the same port.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	if err := s.run(); err != nil {
		s.t.Fatal(err)
	}
}

// Log is what postgres wrote, across restarts.
func (s *Server) Log() string {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	return s.log.String()
}

type logWriter Server

func (w *logWriter) Write(p []byte) (int, error) {
	w.logMu.Lock()
	defer w.logMu.Unlock()
	return w.log.Write(p)
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
