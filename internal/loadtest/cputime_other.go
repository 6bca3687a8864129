//go:build !linux

package loadtest

import "time"

// Elsewhere than Linux a cost is wall-clock time: the medians still hold
// on a quiet machine.

var epoch = time.Now()

func lockThread() func() { return func() {} }

// ThreadCPU is the time since the process started.
func ThreadCPU() time.Duration { return time.Since(epoch) }

// ProcessCPU is the time since the process started.
func ProcessCPU() time.Duration { return time.Since(epoch) }
