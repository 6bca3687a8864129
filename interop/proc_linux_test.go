//go:build interop

package interop

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill cmd when the test binary dies, so that
// a test killed by its -timeout (which runs no cleanup) leaves no server
// behind holding a port.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
