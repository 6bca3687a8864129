package samlsp

import (
	"bytes"
	"os"
	"runtime/debug"
	"strconv"
)

// rssPeak runs f and returns the process's peak resident set size while it
// ran (VmHWM, reset beforehand through clear_refs), what pysaml2's
// ru_maxrss is beside it; 0 where the kernel does not allow the reset.
func rssPeak(f func()) uint64 {
	debug.FreeOSMemory()
	if os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) != nil {
		f()
		return 0
	}
	f()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	_, line, ok := bytes.Cut(status, []byte("VmHWM:"))
	if !ok {
		return 0
	}
	line, _, _ = bytes.Cut(line, []byte("\n"))
	kb, err := strconv.ParseUint(string(bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(line), []byte("kB")))), 10, 64)
	if err != nil {
		return 0
	}
	return kb << 10
}
