package redistest

import (
	"os/exec"
	"syscall"
)

// dieWithParent kills redis-server should the test binary die without
// running its clean-ups (a -timeout panic, a kill).
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
