package loadtest

import (
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

const clockThreadCPUTime = 3 // CLOCK_THREAD_CPUTIME_ID

func lockThread() func() {
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}

// ThreadCPU is the CPU time of the calling thread: a Run locks its
// goroutine to one.
func ThreadCPU() time.Duration {
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		panic("loadtest: clock_gettime: " + errno.Error())
	}
	return time.Duration(ts.Nano())
}

// ProcessCPU is the CPU time of the whole process, for a run whose work
// spreads over goroutines (a server and its clients).
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic("loadtest: getrusage: " + err.Error())
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
