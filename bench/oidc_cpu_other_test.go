//go:build !unix

package bench

import "time"

var oidcStart = time.Now()

// oidcCPUTime falls back to the wall clock where getrusage is missing.
func oidcCPUTime() time.Duration { return time.Since(oidcStart) }
