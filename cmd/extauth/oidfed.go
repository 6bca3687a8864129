package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/extauth/extauth"
	"github.com/extauth/extauth/internal/oidfed"
)

// trustMarkWarning is how long before one of our trust marks expires
// check warns: the federation issues a new one, which takes a request.
// (Our entity configuration needs no warning: the application signs it
// anew.)
const trustMarkWarning = 30 * 24 * time.Hour

// oidcFederation resolves the provider's trust chain as the application
// at baseURL would, and prints it: each statement and its expiry, the
// anchor, the trust marks (and why any did not verify), what the
// federation's policies changed of the provider's metadata; and our own
// entity configuration's statements and trust marks, with a warning
// before any of them expires.
func (pr *prober) oidcFederation(ctx context.Context, c extauth.OIDCConfig, baseURL string) {
	if f := c.Additional.Federation; c.Issuer == "" && f != nil {
		// Users choose among the federation's providers: each configured
		// one is checked; those the anchors list are not known here.
		if f.ListProviders {
			pr.r.notes = append(pr.r.notes, "oidc: list_providers: the providers the trust anchors list are checked when users choose them, not here")
		}
		for i, op := range f.Providers {
			if i == maxCheckedProviders {
				pr.r.notes = append(pr.r.notes, fmt.Sprintf("oidc: %d more providers are not checked", len(f.Providers)-i))
				break
			}
			one := c
			one.Issuer = op
			pr.oidcFederationAt(ctx, one, baseURL, "OIDC federation: "+clean(op))
		}
		return
	}
	pr.oidcFederationAt(ctx, c, baseURL, "OIDC federation")
}

// maxCheckedProviders bounds the providers of a federation check resolves.
const maxCheckedProviders = 10

func (pr *prober) oidcFederationAt(ctx context.Context, c extauth.OIDCConfig, baseURL, title string) {
	s := pr.r.section(title)
	chain, ec, err := c.TrustChain(ctx, baseURL, pr.client)
	if ec != "" {
		pr.ours(s, ec)
	}
	if err != nil {
		pr.r.fail(extauth.OIDC, "trust chain: "+clean(err.Error()))
		return
	}
	s.add("provider", clean(chain.Statements[0].Subject))
	for i, st := range chain.Statements {
		what := "subordinate statement"
		if st.Issuer == st.Subject {
			what = "entity configuration"
		}
		s.add(fmt.Sprintf("chain[%d]", i), fmt.Sprintf("%s of %s about %s, expires %s", what, clean(st.Issuer), clean(st.Subject), st.Expires.UTC().Format(time.RFC3339)))
	}
	s.add("trust anchor", clean(chain.Anchor))
	s.add("chain expires", fmt.Sprintf("%s (in %s)", chain.Expires.UTC().Format(time.RFC3339), chain.Expires.Sub(pr.r.now).Round(time.Minute)))
	for _, tm := range chain.TrustMarks {
		exp := "never expires"
		if !tm.Expires.IsZero() {
			exp = "expires " + tm.Expires.UTC().Format(time.RFC3339)
		}
		s.add("trust mark", fmt.Sprintf("%s by %s, %s", clean(tm.Type), clean(tm.Issuer), exp))
	}
	for _, why := range chain.Rejected {
		pr.r.warn("oidc: a trust mark of the provider does not verify: %s", clean(why))
	}
	for _, ch := range chain.Changed {
		s.add("metadata "+clean(ch.Parameter), fmt.Sprintf("published %s, resolved %s", clean(jsonText(ch.Published)), clean(jsonText(ch.Resolved))))
	}
	for _, name := range []string{"issuer", "authorization_endpoint", "token_endpoint", "userinfo_endpoint"} {
		if v, ok := chain.Metadata[name].(string); ok {
			s.add(name, clean(v))
		}
	}
}

// ours prints our entity configuration and warns about what of it
// expires soon: the statement itself and the trust marks it carries.
func (pr *prober) ours(s *section, ec string) {
	st, err := oidfed.Parse(ec)
	if err != nil {
		pr.r.fail(extauth.OIDC, "our entity configuration: "+clean(err.Error()))
		return
	}
	s.add("entity identifier", clean(st.Subject))
	s.add("our configuration expires", st.ExpiresAt().UTC().Format(time.RFC3339))
	for _, ref := range st.TrustMarks {
		exp := trustMarkExpiry(ref.TrustMark)
		if exp.IsZero() {
			s.add("our trust mark", clean(ref.TypeID())+", never expires")
			continue
		}
		s.add("our trust mark", fmt.Sprintf("%s, expires %s", clean(ref.TypeID()), exp.UTC().Format(time.RFC3339)))
		switch left := exp.Sub(pr.r.now); {
		case left <= 0:
			pr.r.fail(extauth.OIDC, fmt.Sprintf("our trust mark %s expired on %s: ask the federation for a new one (oidc_additional_settings.federation.trust_marks)", clean(ref.TypeID()), day(exp)))
		case left < trustMarkWarning:
			pr.r.warn("oidc: our trust mark %s expires in %s: ask the federation for a new one", clean(ref.TypeID()), days(left))
		}
	}
}

// trustMarkExpiry reads a trust mark's exp unverified: it is ours, and
// only its date is shown.
func trustMarkExpiry(raw string) time.Time {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return time.Time{}
	}
	var c struct {
		Exp int64 `json:"exp"`
	}
	if b, err := base64.RawURLEncoding.DecodeString(parts[1]); err == nil && json.Unmarshal(b, &c) == nil && c.Exp > 0 {
		return time.Unix(c.Exp, 0)
	}
	return time.Time{}
}

func jsonText(v any) string {
	if v == nil {
		return "(absent)"
	}
	b, _ := json.Marshal(v)
	return string(b)
}
