//go:build load

package expiring_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/extauth/extauth/extauthtest/internal/expiring"
	"github.com/extauth/extauth/internal/loadtest"
)

// A million codes put and taken 500 puts later: none lost, the map within
// its bound, and the last puts cost what the first did. The old maps of
// the fakes dropped entries at random once full, after a scan of the whole
// map at each put.
func TestMillionPuts(t *testing.T) {
	c := loadtest.NewClock()
	codes := expiring.New[int](0, c.Now)
	tokens := expiring.New[int](0, c.Now)
	loadtest.Run{
		Clock: c,
		Issue: func(i int) string {
			code := fmt.Sprintf("code-%d", i)
			codes.Put(code, i, c.Now().Add(time.Minute))
			return code
		},
		Redeem: func(code string) error {
			i, ok := codes.Take(code)
			if !ok {
				return fmt.Errorf("%s unknown", code)
			}
			tokens.Put(fmt.Sprintf("token-%d", i), i, c.Now().Add(time.Hour))
			return nil
		},
	}.Do(t)
	if codes.Len() > expiring.DefaultMax || tokens.Len() != expiring.DefaultMax || codes.Evicted() != 0 {
		t.Errorf("codes held %d (%d evicted), tokens %d", codes.Len(), codes.Evicted(), tokens.Len())
	}
}
