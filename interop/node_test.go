//go:build interop

package interop

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/extauth/extauth/internal/harness"
)

// startNode runs `node args...` in dir (which must hold node_modules/pkg,
// put there by dir/install.sh) and returns what ready reads off the first
// stdout line it accepts. The process ends, by closing its stdin, when the
// test does; its stderr is logged if the test failed.
func startNode(t *testing.T, dir, pkg string, env []string, ready func(line string) (string, bool), args ...string) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg)); err != nil {
		t.Fatalf("%s is not installed: run interop/%s/install.sh", pkg, dir)
	}
	cmd := exec.Command("node", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan string, 1)
	exited := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if v, ok := ready(sc.Text()); ok {
				select {
				case found <- v:
				default:
				}
			}
		}
		// stdout ends when the process does: Wait may run now.
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("%s stderr:\n%s", pkg, stderr.String())
		}
	})
	// A process that exits fails at once; one that neither starts nor
	// exits is a hang. On a loaded 2-core machine a cold node loads
	// oidc-provider in well over a minute now and then, so the limit
	// only catches hangs, within CI's own.
	select {
	case v := <-found:
		return v
	case <-exited:
		t.Fatalf("%s exited before it started: %s", pkg, stderr.String())
	case <-time.After(5 * time.Minute):
		t.Fatalf("%s did not start in 5 minutes: %s", pkg, stderr.String())
	}
	return ""
}

// lockedBuffer is a bytes.Buffer that the process's stderr copier and the
// test may use at once.
type lockedBuffer = harness.SyncBuffer
