//go:build interop

package interop

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/internal/harness"
	"github.com/extauth/extauth/samlsp"
)

// pyffPipeline is the MDQ pipeline of pyFF's documentation: load the
// metadata directory; for each request, select the entity asked for,
// strip the EntitiesDescriptor around a single one, put a validUntil and a
// cacheDuration on it and sign it with the federation's key. An entity it
// does not know selects nothing, and pyFF answers that with 200 and a
// signed, empty EntitiesDescriptor.
const pyffPipeline = `- when update:
    - load:
        - %[1]s
- when request:
    - select
    - pipe:
        - when accept application/samlmetadata+xml application/xml:
             - first
             - finalize:
                cacheDuration: PT1H
                validUntil: P4D
             - sign:
                key: %[2]s
                cert: %[3]s
             - emit application/samlmetadata+xml
             - break
`

// pyffServer is pyffd serving dir's metadata as an MDQ server, behind a
// proxy that counts what it is asked, by path.
type pyffServer struct {
	URL  string
	mu   sync.Mutex
	hits map[string]int
}

func (s *pyffServer) asked(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

// startPyFF runs interop/pyff's pyffd on the metadata files of entities,
// signing with signer, and waits until it answers for known, an entity ID
// among them. It ends with the test.
func startPyFF(t *testing.T, signer pair, known string, entities ...[]byte) *pyffServer {
	t.Helper()
	pyffd, err := filepath.Abs(filepath.Join("pyff", "venv", "bin", "pyffd"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(pyffd); err != nil {
		t.Fatal("pyFF is not installed: run interop/pyff/install.sh")
	}
	dir := t.TempDir()
	md := filepath.Join(dir, "metadata")
	if err := os.MkdirAll(md, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, e := range entities {
		if err := os.WriteFile(filepath.Join(md, fmt.Sprintf("entity-%d.xml", i)), e, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pipeline := filepath.Join(dir, "mdq.fd")
	if err := os.WriteFile(pipeline, fmt.Appendf(nil, pyffPipeline, md, signer.keyPath, signer.certPath), 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "pyffd.log")
	var base string
	for attempt := 0; ; attempt++ {
		port := freePort(t)
		// A file, not a pipe: gunicorn's worker holds its output open.
		logFile, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(pyffd, "-f", "-H", "127.0.0.1", "-P", port, "-p", filepath.Join(dir, "pyffd.pid"),
			"--loglevel=INFO", "--local_copy_dir="+filepath.Join(dir, "backup"), "--frequency=600", "--threads=4", pipeline)
		cmd.Dir = dir
		cmd.Stdout, cmd.Stderr = logFile, logFile
		// Its own process group, so that gunicorn's worker goes with its
		// master; and killed with the test binary.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatalf("pyffd: %v", err)
		}
		logFile.Close()
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		stop := func() {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-exited
			}
		}
		base = "http://127.0.0.1:" + port
		err = waitPyFF(base, len(entities), known, exited)
		if err == nil {
			t.Cleanup(func() {
				stop()
				if t.Failed() {
					out, _ := os.ReadFile(logPath)
					t.Logf("pyffd output:\n%s", out)
				}
			})
			break
		}
		stop()
		if attempt == 2 {
			out, _ := os.ReadFile(logPath)
			t.Fatalf("pyffd did not start: %v\n%s", err, out)
		}
	}
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	s := &pyffServer{hits: map[string]int{}}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := harness.Serve(t, func(string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.mu.Lock()
			s.hits[r.URL.EscapedPath()]++
			s.mu.Unlock()
			proxy.ServeHTTP(w, r)
		})
	})
	s.URL = srv.URL + "/"
	return s
}

// waitPyFF waits until pyffd at base has loaded the n entities of its
// metadata directory (its status says so), then asks it for known, which
// must be answered as an EntityDescriptor. It does not ask for an entity
// sooner: pyFF would answer an empty EntitiesDescriptor before the load,
// and keep that answer in its cache for minutes.
func waitPyFF(base string, n int, known string, exited <-chan struct{}) error {
	deadline := time.Now().Add(60 * time.Second)
	want := fmt.Sprintf(`"store": {"size": %d}`, n)
	var last string
	for {
		if time.Now().After(deadline) {
			return fmt.Errorf("its status never said %s: %s", want, last)
		}
		select {
		case <-exited:
			return errors.New("pyffd exited")
		case <-time.After(200 * time.Millisecond):
		}
		resp, err := http.Get(base + "/api/status")
		if err != nil {
			last = err.Error()
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if last = string(body); strings.Contains(last, want) {
			break
		}
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/entities/"+url.PathEscape(known), nil)
	req.Header.Set("Accept", "application/samlmetadata+xml")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("IDPSSODescriptor")) {
		return fmt.Errorf("its answer for %s: %d %.300s", known, resp.StatusCode, body)
	}
	return nil
}

// TestFederationPyFFMDQ signs in through SimpleSAMLphp, whose metadata
// pyFF serves as an MDQ server and signs; an entity pyFF does not know,
// which it answers with 200 and a signed, empty EntitiesDescriptor, is
// refused with a 4xx after one request, and then remembered.
func TestFederationPyFFMDQ(t *testing.T) {
	fedKeys, spKeys := newPair(t, "federation"), newPair(t, "sp")
	ssp := startSimpleSAMLphp(t, newPair(t, "ssp"))
	r := harness.NewBrowser(t).Get(ssp.MetadataURL())
	if r.StatusCode != http.StatusOK {
		t.Fatalf("SimpleSAMLphp metadata: %d", r.StatusCode)
	}
	mdq := startPyFF(t, fedKeys, ssp.MetadataURL(), []byte(r.Body))
	const gone = "https://gone.example.org/idp"
	a := startFedAppWith(t, extauth.SAMLFederation{MDQURL: mdq.URL, SigningCertificate: fedKeys.certPEM,
		EntityIDs: []string{ssp.MetadataURL(), gone}}, spKeys)
	ssp.trustSP(t, a.URL+"/users/auth/saml/metadata", &spKeys, nil)

	// The discovery page: the IdP pyFF knows, by the name in its answer.
	b := harness.NewBrowser(t)
	if page := b.Get(a.URL + "/users/auth/saml"); page.StatusCode != http.StatusOK || !strings.Contains(page.Body, ssp.MetadataURL()) ||
		strings.Contains(page.Body, gone) {
		t.Fatalf("discovery page: %d\n%s", page.StatusCode, page.Body)
	}
	login := b.PostForm(a.URL+"/users/auth/saml", url.Values{"idp": {ssp.MetadataURL()}})
	if !isLoginForm(login) {
		t.Fatalf("expected SimpleSAMLphp's login form, got %s (%d):\n%s", login.URL, login.StatusCode, login.Body)
	}
	action, form := htmlForm(t, login)
	form.Set("username", sspUser)
	form.Set("password", sspPassword)
	action, form = htmlForm(t, b.PostForm(action, form))
	if cb := b.PostForm(action, form); cb.StatusCode != http.StatusOK {
		t.Fatalf("callback from SimpleSAMLphp: %d %s\n%s", cb.StatusCode, cb.Body, ssp.log())
	}
	checkGrace(t, a.last())
	if got := a.last().SAML.IdP; got != ssp.MetadataURL() {
		t.Fatalf("asserted by %q", got)
	}

	// Unknown to pyFF: a 4xx, one request for it in all (the page's
	// look-up), none for the starts that follow.
	goneURL, err := url.Parse(extauthMDQURL(mdq.URL, gone))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		resp := harness.NewBrowser(t).NoFollow().PostForm(a.URL+"/users/auth/saml", url.Values{"idp": {gone}})
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("an entity pyFF does not know: %d %s", resp.StatusCode, resp.Body)
		}
	}
	if n := mdq.asked(goneURL.EscapedPath()); n != 1 {
		t.Fatalf("pyFF was asked for the unknown entity %d times, want 1", n)
	}
	if n := mdq.asked(mustURL(t, extauthMDQURL(mdq.URL, ssp.MetadataURL())).EscapedPath()); n != 1 {
		t.Fatalf("pyFF was asked for SimpleSAMLphp %d times, want 1 (then the cache)", n)
	}
}

func extauthMDQURL(base, id string) string {
	u, _ := url.Parse(base)
	return samlsp.MDQEntityURL(u, id, false)
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
