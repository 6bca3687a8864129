package bench

// Whole OpenID Connect sign-ins over loopback, extauth beside oauth2-proxy,
// against the same provider, each relying party a process of its own:
//
//	GOBIN=/tmp/o2p go install github.com/oauth2-proxy/oauth2-proxy/v7@v7.15.6
//	go test -run '^$' -bench SignInThroughput -benchtime 1x ./bench/ -signin.oauth2proxy /tmp/o2p/oauth2-proxy
//
// oauth2-proxy is built outside the repository, none of its code here.
// Without -signin.oauth2proxy, extauth's side runs alone.
//
// The provider is the fake OP (extauthtest/oidcop, RS256, approving at
// once) in a process of its own; the clients are this process, each a
// browser with its own cookies that follows the redirects hop by hop, with
// the Sec-Fetch-Site a browser sends. A sign-in is four requests: the
// start (extauth: the form POST to /users/auth/oidc; oauth2-proxy: GET
// /oauth2/start), the provider's authorize, the callback (code exchange,
// ID token verification, the session set), and the application's page
// with the session, which must answer 200.
//
// Each round drives -signin.n sign-ins through one relying party with
// -signin.clients clients at once, then as many through the other, the
// order flipping each round. It reports, as medians of the per-round
// ratios extauth/oauth2-proxy, the sign-ins per second (wall clock: the
// load on the whole machine is what it is for both) and the relying
// party's CPU time per sign-in (its process's, from /proc: what other
// processes do not inflate), with the provider's and the clients' CPU
// per sign-in for each side.

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/extauthtest/oidcop"
	"github.com/extauth/extauth/internal/loadtest"
)

var (
	signinProxy   = flag.String("signin.oauth2proxy", "", "the oauth2-proxy binary to run beside extauth in BenchmarkSignInThroughput")
	signinRounds  = flag.Int("signin.rounds", 7, "rounds of BenchmarkSignInThroughput")
	signinN       = flag.Int("signin.n", 400, "sign-ins per relying party per round of BenchmarkSignInThroughput")
	signinClients = flag.String("signin.clients", "8,32", "the clients at once of BenchmarkSignInThroughput, comma-separated")
	signinProfile = flag.String("signin.cpuprofile", "", "write the CPU profile of extauth's process in BenchmarkSignInThroughput to `file`")
)

// The roles a child process of this test binary takes (signinRoleEnv).
const (
	signinRoleEnv = "EXTAUTH_BENCH_SIGNIN_ROLE"
	roleOP        = "op"
	roleExtauth   = "extauth"
	signinClient  = "throughput-client"
	signinSecret  = "throughput-secret-0123456789"
)

func TestMain(m *testing.M) {
	switch os.Getenv(signinRoleEnv) {
	case roleOP:
		serveSignInOP()
	case roleExtauth:
		serveSignInExtauth()
	default:
		os.Exit(m.Run())
	}
}

// listenAnnounce listens on addr and tells the parent where, on stdout.
func listenAnnounce(addr string) net.Listener {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("listening %s\n", l.Addr())
	return l
}

// serveSignInOP is the provider's process: the fake OP at the address
// the parent gives, approving at once, the relying parties' callbacks
// registered.
func serveSignInOP() {
	l := listenAnnounce(os.Getenv("SIGNIN_ADDR"))
	op, err := oidcop.New(oidcop.Config{
		Issuer: "http://" + l.Addr().String(), ClientID: signinClient, ClientSecret: signinSecret,
		RedirectURIs: strings.Fields(os.Getenv("SIGNIN_REDIRECTS")), AutoApprove: true,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, http.Serve(l, op))
	os.Exit(1)
}

// serveSignInExtauth is extauth's process: an application that mounts
// the routes for the provider and, at a sign-in, sets a session cookie of
// its own (an HMAC of the user's ID) and redirects to its page, which
// answers 200 to that cookie.
func serveSignInExtauth() {
	if path := os.Getenv("SIGNIN_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM)
		go func() {
			<-stop
			pprof.StopCPUProfile()
			f.Close()
			os.Exit(0)
		}()
	}
	l := listenAnnounce(os.Getenv("SIGNIN_ADDR"))
	base := "http://" + l.Addr().String()
	key := make([]byte, 32)
	rand.Read(key)
	mac := func(sub string) string {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(sub))
		return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
	}
	cfg := &extauth.Config{OIDC: extauth.OIDCConfig{ClientID: signinClient, ClientSecret: extauth.NewSecret(signinSecret), Issuer: os.Getenv("SIGNIN_ISSUER")}}
	a, err := extauth.New(cfg, extauth.Options{
		BaseURL: base, CookieKey: key,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		OnSuccess: func(w http.ResponseWriter, r *http.Request, id *extauth.Identity) {
			http.SetCookie(w, &http.Cookie{Name: "app_session", Value: id.UID + "." + mac(id.UID), Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
			http.Redirect(w, r, "/", http.StatusSeeOther)
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	mux := http.NewServeMux()
	a.Mount(mux)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie("app_session")
		if err != nil {
			http.Error(w, "not signed in", http.StatusUnauthorized)
			return
		}
		sub, sum, ok := strings.Cut(c.Value, ".")
		if !ok || !hmac.Equal([]byte(sum), []byte(mac(sub))) {
			http.Error(w, "not signed in", http.StatusUnauthorized)
			return
		}
		io.WriteString(w, "signed in\n")
	})
	fmt.Fprintln(os.Stderr, http.Serve(l, mux))
	os.Exit(1)
}

// proc is a child process: a relying party or the provider.
type proc struct {
	name string
	cmd  *exec.Cmd
	addr string
	log  *syncLog
}

type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b.Len() < 1<<20 {
		s.b.Write(p)
	}
	return len(p), nil
}

func (s *syncLog) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startChild runs this test binary in role, and waits for the address it
// listens at.
func startChild(tb testing.TB, role string, env ...string) *proc {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), append(env, signinRoleEnv+"="+role)...)
	p := &proc{name: role, cmd: cmd, log: &syncLog{}}
	cmd.Stderr = p.log
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		// SIGTERM first, for a profile to be written.
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		tb.Fatalf("%s did not start: %v %q\n%s", role, err, line, p.log)
	}
	go io.Copy(io.Discard, out)
	p.addr = addr
	return p
}

// freeAddr returns an address on host that nothing listens at now.
func freeAddr(tb testing.TB, host string) string {
	l, err := net.Listen("tcp", host+":0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// cpu is the CPU time p has used, from the scheduler's account of each of
// its threads (nanoseconds, where /proc/PID/stat counts ticks of 10 ms).
func (p *proc) cpu(tb testing.TB) time.Duration {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", p.cmd.Process.Pid))
	if err != nil || len(tasks) == 0 {
		tb.Fatalf("%s: no threads in /proc: %v", p.name, err)
	}
	var total time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // a thread that has just exited
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			tb.Fatal(err)
		}
		total += time.Duration(ns)
	}
	return total
}

// rp is one relying party under load: how a sign-in starts there.
type rp struct {
	name  string
	proc  *proc
	start func() *http.Request
}

// signIn makes one whole sign-in as a browser with its own cookies: the
// start, then each redirect followed hop by hop, until the application's
// page answers 200; anything else is an error.
func signIn(client *http.Client, r *rp) error {
	req := r.start()
	origin := req.URL.Host
	for hop := 0; ; hop++ {
		if hop == 4 {
			return fmt.Errorf("%s: more than four requests to sign in", r.name)
		}
		site := "cross-site"
		if req.URL.Host == origin {
			site = "same-origin"
		}
		req.Header.Set("Sec-Fetch-Site", site)
		req.Header.Set("Sec-Fetch-Mode", "navigate")
		req.Header.Set("Accept", "text/html")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusOK && hop == 3:
			return nil
		case resp.StatusCode/100 != 3:
			return fmt.Errorf("%s: %s answered %d at request %d: %.300s", r.name, req.URL.Path, resp.StatusCode, hop+1, body)
		}
		next, err := req.URL.Parse(resp.Header.Get("Location"))
		if err != nil {
			return err
		}
		origin = req.URL.Host
		req, _ = http.NewRequest(http.MethodGet, next.String(), nil)
	}
}

// drive makes n sign-ins through r with clients browsers at once, and
// returns the wall time they took.
func drive(tb testing.TB, transport http.RoundTripper, r *rp, n, clients int) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				jar, _ := cookiejar.New(nil)
				client := &http.Client{Transport: transport, Jar: jar, Timeout: time.Minute,
					CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
				if err := signIn(client, r); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		tb.Fatalf("%v\n%s's log:\n%.4000s", err, r.name, r.proc.log)
	}
	return took
}

// BenchmarkSignInThroughput: see the top of this file.
func BenchmarkSignInThroughput(b *testing.B) {
	extauthAddr := freeAddr(b, "127.0.0.1")
	proxyAddr := freeAddr(b, "127.0.0.1")
	// The provider on another loopback address, so that the browsers'
	// cookies for it and for the relying parties are kept apart.
	op := startChild(b, roleOP, "SIGNIN_ADDR=127.0.0.2:0",
		"SIGNIN_REDIRECTS=http://"+extauthAddr+"/users/auth/oidc/callback http://"+proxyAddr+"/oauth2/callback")
	issuer := "http://" + op.addr
	ext := startChild(b, roleExtauth, "SIGNIN_ADDR="+extauthAddr, "SIGNIN_ISSUER="+issuer, "SIGNIN_CPUPROFILE="+*signinProfile)
	rps := []*rp{{name: "extauth", proc: ext, start: func() *http.Request {
		req, _ := http.NewRequest(http.MethodPost, "http://"+ext.addr+"/users/auth/oidc", nil)
		req.Header.Set("Origin", "http://"+ext.addr)
		return req
	}}}
	if *signinProxy != "" {
		cookieSecret := make([]byte, 16)
		rand.Read(cookieSecret)
		cmd := exec.Command(*signinProxy,
			"--http-address="+proxyAddr, "--provider=oidc", "--oidc-issuer-url="+issuer,
			"--client-id="+signinClient, "--client-secret="+signinSecret,
			"--redirect-url=http://"+proxyAddr+"/oauth2/callback",
			"--cookie-secret="+fmt.Sprintf("%x", cookieSecret), "--cookie-secure=false",
			"--email-domain=*", "--upstream=static://200", "--skip-provider-button=true",
			"--code-challenge-method=S256",
			// extauth's side logs warnings only; so does this one.
			"--request-logging=false", "--auth-logging=false", "--standard-logging=false")
		p := &proc{name: "oauth2-proxy", cmd: cmd, addr: proxyAddr, log: &syncLog{}}
		cmd.Stdout, cmd.Stderr = p.log, p.log
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		deadline := time.Now().Add(time.Minute)
		for {
			resp, err := http.Get("http://" + proxyAddr + "/ping")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				b.Fatalf("oauth2-proxy did not start: %v\n%s", err, p.log)
			}
			time.Sleep(100 * time.Millisecond)
		}
		rps = append(rps, &rp{name: "oauth2-proxy", proc: p, start: func() *http.Request {
			req, _ := http.NewRequest(http.MethodGet, "http://"+proxyAddr+"/oauth2/start?rd=%2F", nil)
			return req
		}})
	} else {
		b.Log("no -signin.oauth2proxy: extauth's side alone")
	}
	transport := &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 512, IdleConnTimeout: time.Minute}
	defer transport.CloseIdleConnections()

	for _, c := range strings.Split(*signinClients, ",") {
		clients, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || clients < 1 {
			b.Fatalf("-signin.clients: %q", c)
		}
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			// Warm up: discovery and keys fetched, connections opened.
			for _, r := range rps {
				drive(b, transport, r, 2*clients, clients)
			}
			type sample struct{ perSec, rpCPU, opCPU, clientCPU float64 }
			got := map[string][]sample{}
			var rate, cpu []float64
			for round := range *signinRounds {
				order := rps
				if round%2 == 1 && len(rps) == 2 {
					order = []*rp{rps[1], rps[0]}
				}
				this := map[string]sample{}
				for _, r := range order {
					rp0, op0, cl0 := r.proc.cpu(b), op.cpu(b), loadtest.ProcessCPU()
					took := drive(b, transport, r, *signinN, clients)
					n := float64(*signinN)
					s := sample{
						perSec:    n / took.Seconds(),
						rpCPU:     float64(r.proc.cpu(b)-rp0) / n,
						opCPU:     float64(op.cpu(b)-op0) / n,
						clientCPU: float64(loadtest.ProcessCPU()-cl0) / n,
					}
					this[r.name] = s
					got[r.name] = append(got[r.name], s)
				}
				if len(rps) == 2 {
					e, o := this["extauth"], this["oauth2-proxy"]
					rate, cpu = append(rate, e.perSec/o.perSec), append(cpu, e.rpCPU/o.rpCPU)
				}
			}
			for _, r := range rps {
				var perSec, rpCPU, opCPU, clCPU []float64
				for _, s := range got[r.name] {
					perSec, rpCPU, opCPU, clCPU = append(perSec, s.perSec), append(rpCPU, s.rpCPU), append(opCPU, s.opCPU), append(clCPU, s.clientCPU)
				}
				b.Logf("%s: sign-ins/s %s; its CPU µs/sign-in %s; the provider's %s; the clients' %s", r.name,
					formatAll(perSec), formatMicro(rpCPU), formatMicro(opCPU), formatMicro(clCPU))
				b.ReportMetric(median(perSec), r.name+"-signins/s")
				b.ReportMetric(median(rpCPU)/1e3, r.name+"-cpu-µs/signin")
			}
			if len(rate) > 0 {
				b.Logf("per-round ratios extauth/oauth2-proxy: sign-ins/s %s; CPU per sign-in %s", formatAll(rate), formatAll(cpu))
				b.ReportMetric(median(rate), "rate-ratio")
				b.ReportMetric(median(cpu), "cpu-ratio")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

func formatMicro(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf("%.0f", x/1e3)
	}
	return strings.Join(parts, " ")
}
