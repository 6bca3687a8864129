//go:build interop && !linux

package interop

import "os/exec"

// dieWithParent does nothing where the kernel cannot tie a child's life to
// its parent's; the test's cleanup still kills it.
func dieWithParent(*exec.Cmd) {}
