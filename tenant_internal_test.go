package extauth

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// The failures of made-up tenants take bounded memory: past the bound a
// new failure is not remembered (it is looked up again), while the live
// ones stay until they expire and make room.
func TestFailureCacheBound(t *testing.T) {
	var f failureCache
	f.init(8)
	err := errors.New("unknown")
	live := time.Now().Add(time.Hour)
	for i := range 100 {
		f.put(fmt.Sprint("junk", i), err, live)
	}
	if len(f.m) != 8 {
		t.Fatalf("%d failures held, bound 8", len(f.m))
	}
	if f.get("junk0") == nil || f.get("junk99") != nil {
		t.Errorf("held: junk0 %v, junk99 %v; want the first eight kept", f.get("junk0"), f.get("junk99"))
	}
	for k := range f.m {
		f.m[k] = failure{err, time.Now().Add(-time.Second)}
	}
	f.put("next", err, live)
	if len(f.m) != 1 || f.get("next") == nil {
		t.Errorf("expired failures were not reclaimed: %d held", len(f.m))
	}
}
