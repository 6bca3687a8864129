//go:build !unix

package samlsp

import "time"

var cpuStart = time.Now()

// cpuTime is the wall time since the start, where the process's CPU time
// cannot be read.
func cpuTime() time.Duration { return time.Since(cpuStart) }
