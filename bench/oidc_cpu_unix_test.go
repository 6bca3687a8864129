//go:build unix

package bench

import (
	"syscall"
	"time"
)

// oidcCPUTime is the CPU time the process has used, all threads, user and
// system: unlike the wall clock, it does not grow while other processes
// hold the machine's cores, and it still counts the garbage collector.
func oidcCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
