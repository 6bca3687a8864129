package oidcop

import "testing"

// The client assertions and DPoP proofs the provider records for tests
// are the most recent thousand, however many sign-ins it served.
func TestRecordIsBounded(t *testing.T) {
	var rs []int
	for i := range 5 * maxRecorded {
		rs = record(rs, i)
		if len(rs) > 2*maxRecorded {
			t.Fatalf("%d held after %d records", len(rs), i+1)
		}
		if got := recorded(rs); len(got) != min(i+1, maxRecorded) || got[len(got)-1] != i || got[0] != max(i+1-maxRecorded, 0) {
			t.Fatalf("after %d records: %d held, from %d to %d", i+1, len(got), got[0], got[len(got)-1])
		}
	}
}
