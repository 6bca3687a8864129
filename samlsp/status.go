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
		if src == nil {
			return fetched, nextRefresh, lastFailure
		}
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

// FederationStatus reports on a federation's aggregate, for monitoring:
// how many entities it lists (service providers included), and how many of
// its IdPs users may choose (the host's restrictions applied); ok is false
// without a federation or before a first copy.
func (sp *SP) FederationStatus() (entities, idps int, ok bool) {
	if sp.fed == nil || sp.fed.src == nil {
		return 0, 0, false
	}
	c := sp.fed.src.current()
	if c == nil {
		return 0, 0, false
	}
	if sp.fed.entityIDs == nil && sp.fed.authority == nil && sp.fed.categories == nil {
		return c.agg.entities, len(c.agg.idps), true
	}
	for _, e := range c.agg.idps {
		if sp.fed.allows(e) {
			idps++
		}
	}
	return c.agg.entities, idps, true
}

func unixNano(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}
