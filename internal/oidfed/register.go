package oidfed

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/extauth/extauth/internal/outbound"
)

// Registration is what an OP's explicit registration answer says
// (12.2.3): the client it registered, until Expires.
type Registration struct {
	ClientID string
	Metadata map[string]any
	Anchor   string
	Expires  time.Time
}

// Register sends our entity configuration to an OP's
// federation_registration_endpoint (12.2.1) and verifies its answer: an
// explicit-registration-response+jwt signed with the OP's federation keys
// (opKeys, from its trust chain), iss the OP, sub and aud us, a
// trust_anchor among ours, not expired, with openid_relying_party
// metadata naming the client_id.
func (r *Resolver) Register(ctx context.Context, endpoint, op, us, configuration string, opKeys *jose.JSONWebKeySet) (*Registration, error) {
	what := "the explicit registration answer of " + op
	if err := checkEndpoint(endpoint, op); err != nil {
		return nil, &Error{Statement: "the entity configuration of " + op, Rule: "has an unusable federation_registration_endpoint", Err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(configuration))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", ContentTypeEntityStatement)
	req.Header.Set("Accept", "application/"+TypExplicitRegistration)
	resp, err := r.Client.Do(req)
	if err != nil {
		return nil, &Error{Statement: what, Rule: "could not be fetched", Err: outbound.Scrub(err)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxStatementBytes+1))
	if err != nil || len(body) > maxStatementBytes {
		return nil, &Error{Statement: what, Rule: "could not be read", Err: outbound.Scrub(err)}
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &Error{Statement: what, Rule: "is a refusal", Err: fmt.Errorf("HTTP %d: %.300s", resp.StatusCode, body)}
	}
	st, err := parseTyped(string(body), TypExplicitRegistration)
	if err != nil {
		return nil, err
	}
	switch {
	case st.Issuer != op:
		return nil, &Error{Statement: what, Rule: "must be issued by the OP", Err: fmt.Errorf("iss %.200q", st.Issuer)}
	case st.Subject != us || st.Audience != us:
		return nil, &Error{Statement: what, Rule: "must be about and for us (sub, aud)", Err: fmt.Errorf("sub %.200q, aud %.200q", st.Subject, st.Audience)}
	case r.anchor(st.TrustAnchor) == nil:
		return nil, &Error{Statement: what, Rule: "names a trust_anchor that is not ours", Err: fmt.Errorf("%.200q", st.TrustAnchor)}
	}
	now, skew := r.now(), r.skew()
	if st.IssuedAt == 0 || time.Unix(st.IssuedAt, 0).After(now.Add(skew)) || !time.Unix(st.Expires, 0).After(now.Add(-skew)) {
		return nil, &Error{Statement: what, Rule: "is outside its validity (iat, exp)", Err: ErrExpired}
	}
	if err := st.Verify(opKeys); err != nil {
		return nil, err
	}
	md := st.Metadata[TypeRelyingParty]
	id, _ := md["client_id"].(string)
	if id == "" {
		return nil, &Error{Statement: what, Rule: "must name the registered client_id in its openid_relying_party metadata"}
	}
	return &Registration{ClientID: id, Metadata: md, Anchor: st.TrustAnchor, Expires: st.ExpiresAt()}, nil
}
