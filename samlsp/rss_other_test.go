//go:build !linux

package samlsp

// rssPeak runs f; the process's peak RSS is not measured on this system.
func rssPeak(f func()) uint64 { f(); return 0 }
