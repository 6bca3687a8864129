package samlsp

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the run if any metadata refresh goroutine outlives the
// tests: every SP a test makes is closed in its cleanup, and Close must stop
// the goroutine.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		deadline := time.Now().Add(30 * time.Second)
		for {
			buf := make([]byte, 1<<20)
			stacks := string(buf[:runtime.Stack(buf, true)])
			if !strings.Contains(stacks, "(*refresher).loop") {
				break
			}
			if time.Now().After(deadline) {
				fmt.Fprintln(os.Stderr, "leaked metadata refresh goroutines:\n"+stacks)
				code = 1
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	os.Exit(code)
}
