package samlsp

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/extauth/extauth/providers"
)

var _ providers.OptionTaker = (*SP)(nil)

// forcedAtKey holds, in a transaction whose AuthnRequest forced a new
// authentication, when that request was issued (Unix milliseconds).
const forcedAtKey = "saml.forced_at"

// RequestOptions lists the per-request options the configuration allows.
func (sp *SP) RequestOptions() []string { return slices.Clone(sp.opts.RequestOptions) }

// AssuranceLevel returns the authentication context classes that meet the
// host's level.
func (sp *SP) AssuranceLevel(level string) ([]string, bool) {
	v, ok := sp.opts.AssuranceLevels[level]
	return slices.Clone(v), ok
}

// ClockSkew is the leeway allowed on the IdP's times.
func (sp *SP) ClockSkew() time.Duration { return sp.opts.ClockSkew }

// authnOptions is what a sign-in's options change in its AuthnRequest.
type authnOptions struct {
	forceAuthn, isPassive bool
	// context replaces the configured RequestedAuthnContext when set.
	context string
}

// authnOptions reads the sign-in's options, nil when it has none: the one
// place they enter the AuthnRequest. A max_age forces a new
// authentication, since an AuthnRequest cannot say how old one may be.
func (sp *SP) authnOptions(tx *providers.Transaction) (*authnOptions, error) {
	if !tx.HasOptions() {
		return nil, nil
	}
	want, err := sp.asked(tx)
	if err != nil {
		return nil, err
	}
	o := &authnOptions{
		forceAuthn: tx.Option(providers.OptionForceAuthn) == "true" || want.MaxAge >= 0,
		isPassive:  tx.Option(providers.OptionIsPassive) == "true",
	}
	if o.forceAuthn && o.isPassive {
		return nil, providers.NewError(providers.CodeInvalidResponse, "the sign-in option IsPassive is not valid with ForceAuthn or max_age",
			fmt.Errorf("IsPassive cannot be combined with ForceAuthn or max_age"))
	}
	if tx.Option(providers.OptionAuthnContext) != "" || tx.Option(providers.OptionLevel) != "" {
		o.context = requestedAuthnContext(want.Values)
	}
	return o, nil
}

// asked is what the sign-in tx asks of the user's authentication: the
// configured classes, narrowed by its options.
func (sp *SP) asked(tx *providers.Transaction) (providers.Asked, error) {
	configured := providers.Asked{Values: strings.Fields(sp.cfg.AuthnContext), MaxAge: -1}
	if tx == nil || !tx.HasOptions() {
		return configured, nil
	}
	return providers.Narrow(tx, configured, providers.OptionAuthnContext, sp.opts.AssuranceLevels)
}

// checkAuthentication checks the assertion against what its request asked
// (SAML Core 3.3.2.2.1, 3.4.1): with a RequestedAuthnContext, the
// AuthnContextClassRef must be one of the classes (the comparison is
// exact); with ForceAuthn, the AuthnInstant must fall after the request
// was issued; with max_age, it must be at most that old. Each with the
// clock skew. An unsolicited response answers no request, so nothing was
// asked of it.
func (sp *SP) checkAuthentication(a *Assertion, tx *providers.Transaction, now time.Time) error {
	if tx == nil || tx.RequestID == "" {
		return nil
	}
	want, err := sp.asked(tx)
	if err != nil {
		return err
	}
	insufficient := func(msg string, format string, args ...any) error {
		return providers.NewError(providers.CodeInsufficientAuthentication, msg, fmt.Errorf(format, args...))
	}
	if len(want.Values) > 0 && !slices.Contains(want.Values, a.AuthnContext) {
		return insufficient("the identity provider authenticated you less strongly than required",
			"assertion AuthnContextClassRef %.200q is not one of the requested %q", a.AuthnContext, want.Values)
	}
	skew := sp.opts.ClockSkew
	forcedAt, forced := tx.Extra[forcedAtKey]
	if !forced && want.MaxAge < 0 {
		return nil
	}
	instant := a.AuthnInstant.UTC().Format(time.RFC3339)
	if a.AuthnInstant.After(now.Add(skew)) {
		return insufficient("the identity provider's authentication of you is dated in the future",
			"assertion AuthnInstant %s is in the future", instant)
	}
	if forced {
		ms, _ := strconv.ParseInt(forcedAt, 10, 64)
		if a.AuthnInstant.Before(time.UnixMilli(ms).Add(-skew)) {
			return insufficient("the identity provider did not authenticate you again",
				"assertion AuthnInstant %s is before the AuthnRequest that asked for ForceAuthn", instant)
		}
	}
	if want.MaxAge >= 0 && now.Sub(a.AuthnInstant) > want.MaxAge+skew {
		return insufficient("the identity provider's authentication of you is older than allowed",
			"assertion AuthnInstant %s is more than max_age %s ago", instant, want.MaxAge)
	}
	return nil
}
