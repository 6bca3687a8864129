//go:build interop

package interop

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/internal/harness"
)

// pysaml2Python is Debian's interpreter, under which python3-pysaml2 is
// installed (a python3 earlier on PATH, such as a pyenv one, lacks it).
const pysaml2Python = "/usr/bin/python3"

// pysaml2IdP is interop/pysaml2/idp.py running: pysaml2 as an IdP that
// answers by artifact, behind a TLS front.
type pysaml2IdP struct {
	front    *tlsFront
	dir      string
	settings map[string]any
}

// MetadataURL is where the IdP publishes its metadata; its entity ID too.
func (p *pysaml2IdP) MetadataURL() string { return p.front.URL + "/metadata" }

func startPysaml2(t *testing.T, idpKeys pair) *pysaml2IdP {
	t.Helper()
	if out, err := exec.Command(pysaml2Python, "-c", "import saml2").CombinedOutput(); err != nil {
		t.Fatalf("pysaml2 is not installed (apt-get install python3-pysaml2): %v\n%s", err, out)
	}
	pf := &pysaml2IdP{front: newTLSFront(t, "/ars"), dir: t.TempDir()}
	pf.settings = map[string]any{"base": pf.front.URL, "key": idpKeys.keyPath, "cert": idpKeys.certPath,
		"sp_metadata": filepath.Join(pf.dir, "sp.xml")}
	pf.write(t)
	cmd := exec.Command(pysaml2Python, "pysaml2/idp.py", filepath.Join(pf.dir, "settings.json"))
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("pysaml2 IdP output:\n%s", stderr)
		}
	})
	port := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		port <- strings.TrimSpace(strings.TrimPrefix(line, "listening on "))
	}()
	select {
	case p := <-port:
		if p == "" {
			t.Fatalf("the pysaml2 IdP did not start:\n%s", stderr)
		}
		pf.front.forward("http://127.0.0.1:" + p)
	case err := <-exited:
		t.Fatalf("the pysaml2 IdP exited: %v\n%s", err, stderr)
	case <-time.After(time.Minute):
		t.Fatalf("the pysaml2 IdP did not start within a minute:\n%s", stderr)
	}
	return pf
}

func (p *pysaml2IdP) write(t *testing.T) {
	t.Helper()
	b, err := json.Marshal(p.settings)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(p.dir, "settings.json.new")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(p.dir, "settings.json")); err != nil {
		t.Fatal(err)
	}
}

// set changes a setting the script reads on every request.
func (p *pysaml2IdP) set(t *testing.T, key string, v any) {
	t.Helper()
	p.settings[key] = v
	p.write(t)
}

// trustSP gives the IdP our SP metadata, which it reads on its first
// sign-in.
func (p *pysaml2IdP) trustSP(t *testing.T, mdURL string) {
	t.Helper()
	md := harness.NewBrowser(t).Get(mdURL)
	if md.StatusCode != http.StatusOK {
		t.Fatalf("SP metadata: %d %s", md.StatusCode, md.Body)
	}
	if err := os.WriteFile(p.settings["sp_metadata"].(string), []byte(md.Body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestPysaml2Artifact signs in through pysaml2 answering by artifact, its
// ArtifactResolutionService behind a TLS front that requires the SP's
// certificate:
//   - pysaml2 leaves its ArtifactResponse unsigned and signs the
//     assertion: accepted, the assertion's signature verified as on the
//     POST binding, and refused with want_response_signed;
//   - pysaml2 signing the ArtifactResponse (Server.sign) around an
//     encrypted assertion: accepted with want_response_signed, the
//     assertion decrypted, and the signature verified by xmlsec1 as well;
//   - the same signed ArtifactResponse written by pysaml2 7.0's own SOAP
//     binding, which breaks the signature (xmlsec1 refuses it): refused;
//   - pysaml2 keeps every artifact it issued and would resolve it again:
//     the browser's artifact replayed into a new sign-in is refused by our
//     SP without asking the IdP.
func TestPysaml2Artifact(t *testing.T) {
	idpKeys, spKeys := newPair(t, "idp"), newPair(t, "sp")
	p := startPysaml2(t, idpKeys)
	p.front.require(spKeys.cert)
	// One application, deployed again with each secrets file: the IdP
	// reads its metadata once.
	a := serveSSPApp(t)
	a.metadataURL, a.client = p.MetadataURL(), p.front.client()
	start := func(t *testing.T, wantSigned bool) *sspApp {
		a.t = t
		a.edit = func(c *extauth.Config) {
			c.SAML.Additional.ResponseBinding = "artifact"
			c.SAML.Additional.Artifact.WantResponseSigned = wantSigned
		}
		a.configure(&spKeys, nil, nil, false)
		a.mu.Lock()
		a.failures, a.identities = nil, nil
		a.mu.Unlock()
		return a
	}
	start(t, false)
	p.trustSP(t, a.URL+"/users/auth/saml/metadata")
	signIn := func(t *testing.T, a *sspApp) (*harness.Response, *url.URL) {
		b := p.front.browser(t)
		resp := b.PostForm(a.URL+"/users/auth/saml", nil)
		return resp, hop(b, a.URL+"/users/auth/saml/callback")
	}
	checkAlan := func(t *testing.T, a *sspApp) {
		id := a.last()
		if id == nil || id.UID != "alan@example.org" || id.Email != "alan@example.org" || id.SAML == nil || id.SAML.SessionIndex == "" {
			t.Fatalf("identity %+v", id)
		}
	}

	t.Run("unsigned ArtifactResponse, signed assertion", func(t *testing.T) {
		a := start(t, false)
		before := len(p.front.backChannelCerts())
		resp, back := signIn(t, a)
		if resp.StatusCode != http.StatusOK || resp.Body != "signed in as alan@example.org" {
			t.Fatalf("sign-in: %d %s (failures %v)", resp.StatusCode, resp.Body, errorTexts(a.failureList()))
		}
		if back == nil || back.Query().Get("SAMLart") == "" {
			t.Fatalf("pysaml2 did not send an artifact: %v", back)
		}
		certs := p.front.backChannelCerts()[before:]
		if len(certs) != 1 || certs[0] == nil || !certs[0].Equal(spKeys.cert) {
			t.Fatalf("back-channel client certificates %v", certs)
		}
		answers := p.front.backChannelAnswers()
		if a := answers[len(answers)-1]; !strings.Contains(string(a), "ArtifactResponse") || strings.Contains(string(a), `ArtifactResponse"><ds:Signature`) {
			t.Fatalf("pysaml2's answer:\n%s", a)
		}
		checkAlan(t, a)

		// The same artifact in a sign-in of another browser: pysaml2 would
		// answer it again; our SP refuses it unresolved.
		served := len(p.front.backChannelAnswers())
		b := p.front.browser(t)
		start := b.NoFollow().PostForm(a.URL+"/users/auth/saml", nil)
		loc, _ := url.Parse(start.Header.Get("Location"))
		q := back.Query()
		q.Set("RelayState", loc.Query().Get("RelayState"))
		replay := *back
		replay.RawQuery = q.Encode()
		b.Client.CheckRedirect = nil
		if r := b.Get(replay.String()); r.StatusCode == http.StatusOK || len(p.front.backChannelAnswers()) != served {
			t.Fatalf("the artifact replayed: %d %s, %d resolutions", r.StatusCode, r.Body, len(p.front.backChannelAnswers())-served)
		}
		if fs := a.failureList(); len(fs) != 1 || fs[0].Code != extauth.CodeReplayed {
			t.Fatalf("failures %v", errorTexts(fs))
		}
	})
	t.Run("want_response_signed refuses pysaml2's unsigned ArtifactResponse", func(t *testing.T) {
		a := start(t, true)
		resp, _ := signIn(t, a)
		fs := errorTexts(a.failureList())
		if resp.StatusCode != http.StatusBadRequest || len(fs) != 1 || !strings.Contains(fs[0], "the ArtifactResponse is not signed") {
			t.Fatalf("unsigned ArtifactResponse: %d %s, failures %v", resp.StatusCode, resp.Body, fs)
		}
	})
	t.Run("signed ArtifactResponse, encrypted assertion", func(t *testing.T) {
		p.set(t, "sign_artifact_response", true)
		p.set(t, "encrypt", true)
		defer p.set(t, "encrypt", false)
		defer p.set(t, "sign_artifact_response", false)
		a := start(t, true)
		resp, _ := signIn(t, a)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("sign-in: %d %s (failures %v)", resp.StatusCode, resp.Body, errorTexts(a.failureList()))
		}
		answers := p.front.backChannelAnswers()
		if a := string(answers[len(answers)-1]); !strings.Contains(a, "EncryptedAssertion") || !strings.Contains(a, "SignatureValue") {
			t.Fatalf("pysaml2's answer is not a signed ArtifactResponse around an encrypted assertion:\n%s", a)
		}
		checkAlan(t, a)
		if ok, out := xmlsec1Verifies(t, answers[len(answers)-1], idpKeys); !ok {
			t.Errorf("xmlsec1 does not verify the ArtifactResponse we accepted:\n%s", out)
		}
	})
	t.Run("signature broken by pysaml2's SOAP binding", func(t *testing.T) {
		p.set(t, "sign_artifact_response", true)
		p.set(t, "pysaml2_envelope", true)
		defer p.set(t, "pysaml2_envelope", false)
		defer p.set(t, "sign_artifact_response", false)
		a := start(t, false)
		resp, _ := signIn(t, a)
		answers := p.front.backChannelAnswers()
		if ok, out := xmlsec1Verifies(t, answers[len(answers)-1], idpKeys); ok {
			t.Fatalf("xmlsec1 verifies what pysaml2's SOAP binding wrote: the case tests nothing:\n%s", out)
		}
		fs := errorTexts(a.failureList())
		if resp.StatusCode != http.StatusBadRequest || len(fs) != 1 || !strings.Contains(fs[0], "the ArtifactResponse signature is invalid") {
			t.Fatalf("a broken ArtifactResponse signature: %d %s, failures %v", resp.StatusCode, resp.Body, fs)
		}
	})
}
