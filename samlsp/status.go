package samlsp

import "time"

// MetadataStatus reports on the IdP metadata, for monitoring (extauth's
// metrics read it): when the copy in use was fetched (zero while there is
// none), when the next fetch is due (zero before the first attempt ends),
// and when a fetch last failed (zero if none has), by the SP's clock.
//
// In a federation it reports on the aggregate.
func (sp *SP) MetadataStatus() (fetched, nextRefresh, lastFailure time.Time) {
	if sp.fed != nil {
		src := sp.fed.src
		if c := src.current(); c != nil {
			fetched = c.fetched
		}
		return fetched, unixNano(src.nextAt.Load()), unixNano(src.failedAt.Load())
	}
	if md := sp.md.current(); md != nil {
		fetched = md.fetched
	}
	return fetched, unixNano(sp.md.nextAt.Load()), unixNano(sp.md.failedAt.Load())
}

func unixNano(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}
