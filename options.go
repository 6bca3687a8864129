package extauth

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/extauth/extauth/providers"
	"github.com/extauth/extauth/samlsp"
)

// SignInOptions are the per-request options of one sign-in, for StartForm:
// what the provider is asked beyond its configuration. Each must be allowed
// for the provider (request_options in the secrets file, or the
// RequestOptions of Options.OIDC, Options.SearchOAuth2 and Options.SAML);
// docs/after-sign-in.md has the table of what each protocol takes.
type SignInOptions struct {
	// ReturnTo is the path to return to after sign-in.
	ReturnTo string
	// LoginHint suggests the account (OpenID Connect login_hint).
	LoginHint string
	// Prompt is OpenID Connect's prompt: none, login, consent,
	// select_account.
	Prompt string
	// Level is one of the host's assurance levels, which the provider's
	// assurance_levels maps to its acr values or SAML classes.
	Level string
	// ACRValues are the provider's own acr values (SAML: authentication
	// context classes), of which one must be met.
	ACRValues []string
	// MaxAge is how long ago the user may have authenticated: zero for
	// any time, negative for now (max_age=0, SAML ForceAuthn). Providers
	// that cannot say when the user authenticated (OAuth) take no
	// max_age: a new sign-in's time is its AuthTime.
	MaxAge time.Duration
	// UILocales are the user's preferred languages, BCP 47 tags.
	UILocales []string
	// DomainHint names the user's organisation (Entra ID's domain_hint).
	DomainHint string
	// ForceAuthn and IsPassive are SAML's.
	ForceAuthn, IsPassive bool
	// IdP is the entity ID of the IdP to sign in at, for a provider whose
	// users choose one (a SAML federation): the sign-in starts there, not
	// at the discovery page. Other providers take none.
	IdP string
	// Account, when set, is the account the sign-in must come back as:
	// a step-up of this user's session, not a sign-in of whoever the
	// provider's session holds. The account is its tenant, provider and
	// UID, and who asserted it: in a federation the IdP
	// (Account.SAML.IdP, or an OpenID Federation provider's
	// Account.Tokens.Issuer, which is then required and becomes IdP), the
	// issuer where Account.Tokens names one. Another account, or the same
	// UID from another IdP or issuer, is refused with access_denied. It
	// needs no option to be allowed.
	Account *Identity
}

// Form fields of a start request that are not sign-in options.
const (
	// accountField carries the sealed account a step-up must return.
	accountField = "extauth_account"
	// accountKey holds that account's UID in the transaction, and
	// partyKey who must assert it (assertingParty).
	accountKey = "extauth.account"
	partyKey   = "extauth.party"
)

// startFields are the fields of a start request that a page in between
// (the interstitial, the discovery page, the round trip to an external
// discovery service) carries on to the start, each as the request gave it
// (the start checks them), empty ones left out. A request that the start
// rules would take (vouched) has all of them carried: return_to, the IdP,
// the sealed account of a step-up and every sign-in option. Of one that
// they would not, only what can make the sign-in no weaker than a plain
// one: return_to, the IdP, the account, a level, acr values, max_age and
// ForceAuthn. A link from another site must not get its prompt=none (to
// learn whether the visitor has a session at the provider), login_hint or
// IsPassive through a page of ours, whose own form the start rules trust.
func startFields(form url.Values, vouched bool) url.Values {
	out := url.Values{}
	if rt := safeReturnField(form.Get("return_to")); rt != "" {
		out.Set("return_to", rt)
	}
	names := []string{"idp", accountField, providers.OptionLevel, providers.OptionACRValues, providers.OptionAuthnContext,
		providers.OptionMaxAge, providers.OptionForceAuthn}
	if vouched {
		names = append([]string{"idp", accountField}, optionNames...)
	}
	for _, name := range names {
		for _, v := range form[name] {
			if v != "" {
				out.Add(name, v)
			}
		}
	}
	return out
}

// StartForm returns what starts a sign-in with provider p and the options
// o, for a form in a page of the host's that r requested: the form's
// action (a path) and its hidden fields. Post it, with method="post", from
// a page of the site (the start rules, docs/security.md, refuse it from
// another). An option the provider does not allow, or not valid, is an
// error naming it, so that a form that would be refused or ignored is
// never served.
func (a *Auth) StartForm(r *http.Request, p Provider, o SignInOptions) (action string, fields url.Values, err error) {
	st, err := a.siteFor(r)
	if err != nil {
		return "", nil, err
	}
	return a.startForm(st, a.slug(string(p)), o)
}

// startForm is StartForm on site st for the provider mounted as name.
func (a *Auth) startForm(st *site, name string, o SignInOptions) (action string, fields url.Values, err error) {
	s, ok := st.strategies[name]
	if !ok {
		return "", nil, fmt.Errorf("extauth: %s is %w", name, ErrNotConfigured)
	}
	fields = o.fields(s)
	if err := checkOptions(s, fields); err != nil {
		return "", nil, fmt.Errorf("extauth: %s: %w", name, err)
	}
	if o.ReturnTo != "" {
		fields.Set("return_to", SafeReturnTo(o.ReturnTo))
	}
	chooses := choosesIdP(s)
	idp := o.IdP
	if o.Account != nil {
		acct := identityIdP(o.Account.SAML)
		party := assertingParty(acct, o.Account.Tokens.Issuer)
		if chooses {
			if acct == "" {
				// An OpenID Federation's provider is its issuer.
				acct = o.Account.Tokens.Issuer
			}
			switch {
			case acct == "":
				return "", nil, fmt.Errorf("extauth: %s: %w", name, &optionError{"IdP", "cannot be the account's: it does not say which provider of the federation asserted it (Identity.SAML.IdP, or Identity.Tokens.Issuer); keep the whole Identity with the session"})
			case idp != "" && idp != acct:
				return "", nil, fmt.Errorf("extauth: %s: %w", name, &optionError{"IdP", "is not the IdP that asserted the account"})
			}
			idp = acct
		}
		fields.Set(accountField, a.sealAccount(st.tenant, name, party, o.Account.UID))
	}
	if idp != "" {
		if !chooses {
			return "", nil, fmt.Errorf("extauth: %s: %w", name, &optionError{"IdP", "is only for a provider whose users choose their IdP (a SAML federation)"})
		}
		fields.Set("idp", idp)
	}
	return st.base.Path + st.authorizePath(name), fields, nil
}

// choosesIdP reports whether the users of s choose their IdP.
func choosesIdP(s providers.Strategy) bool {
	c, ok := s.(providers.IdPChooser)
	return ok && c.ChoosesIdP()
}

// assertingParty is who asserted an account at its provider, as a sealed
// step-up account binds it: its SAML IdP, else the issuer of its tokens;
// "" when the identity says neither, which a provider of one issuer does
// not need (its tenant and provider say it).
func assertingParty(idp, issuer string) string {
	switch {
	case idp != "":
		return "idp " + idp
	case issuer != "":
		return "iss " + issuer
	}
	return ""
}

// identityIdP is the IdP of a SAML identity, "" for any other.
func identityIdP(saml *SAMLInfo) string {
	if saml == nil {
		return ""
	}
	return saml.IdP
}

// fields writes o as the start form's fields for strategy s.
func (o SignInOptions) fields(s providers.Strategy) url.Values {
	v := url.Values{}
	set := func(name, value string) {
		if value != "" {
			v.Set(name, value)
		}
	}
	set(providers.OptionLoginHint, o.LoginHint)
	set(providers.OptionPrompt, o.Prompt)
	set(providers.OptionLevel, o.Level)
	set(providers.OptionUILocales, strings.Join(o.UILocales, " "))
	set(providers.OptionDomainHint, o.DomainHint)
	if s.Name() == samlsp.Name {
		set(providers.OptionAuthnContext, strings.Join(o.ACRValues, " "))
	} else {
		set(providers.OptionACRValues, strings.Join(o.ACRValues, " "))
	}
	// A provider that cannot say when the user authenticated gets the
	// sign-in's time: a new sign-in is as recent as it gets.
	if _, says := s.(providers.OptionTaker); says && o.MaxAge != 0 {
		set(providers.OptionMaxAge, strconv.FormatInt(int64(max(o.MaxAge, 0)/time.Second), 10))
	}
	if o.ForceAuthn {
		set(providers.OptionForceAuthn, "true")
	}
	if o.IsPassive {
		set(providers.OptionIsPassive, "true")
	}
	return v
}

// checkOptions refuses the options of form that s does not allow or that
// are not valid: StartForm's check, stricter than the start route's,
// which ignores the options it does not allow.
func checkOptions(s providers.Strategy, form url.Values) error {
	ignored, err := takeOptions(s, form, nil)
	switch {
	case err != nil:
		return err
	case len(ignored) > 0:
		return &optionError{ignored[0], "is not allowed for this provider (request_options)"}
	}
	return nil
}

// optionNames are the form fields of a start request that are sign-in
// options, read once.
var optionNames = providers.RequestOptionNames()

// optionError is the error of a start whose option name does not
// validate: why says how, naming no part of the value, and name comes
// from optionNames, so the user may be shown it.
type optionError struct{ name, why string }

func (e *optionError) Error() string { return "sign-in option " + e.name + " " + e.why }

// message is what the user is shown.
func (e *optionError) message() string { return "the sign-in option " + e.name + " is not valid" }

// takeOptions reads the sign-in options of a start request's form: those
// the provider's configuration allows, validated, into tx (when not nil).
// It returns the names of options the form gives that are not allowed,
// which the caller ignores; a value that does not validate, an option
// given twice, a level the provider does not have, or a level beside the
// values it stands for, is an error naming the option, never its value.
func takeOptions(s providers.Strategy, form url.Values, tx *providers.Transaction) (ignored []string, err *optionError) {
	ot, _ := s.(providers.OptionTaker)
	var allowed []string
	asked := false
	for _, name := range optionNames {
		values, given := form[name]
		if !given {
			continue
		}
		if !asked && ot != nil {
			// Only a start with options pays for the allowlist's copy.
			allowed, asked = ot.RequestOptions(), true
		}
		if !slices.Contains(allowed, name) {
			ignored = append(ignored, name)
			continue
		}
		if len(values) != 1 {
			return ignored, &optionError{name, "is given more than once"}
		}
		if err := providers.CheckRequestOption(name, values[0]); err != nil {
			return ignored, &optionError{name, err.Error()}
		}
		if tx != nil {
			tx.SetOption(name, values[0])
		}
	}
	if level := form.Get(providers.OptionLevel); level != "" && slices.Contains(allowed, providers.OptionLevel) {
		if _, ok := ot.AssuranceLevel(level); !ok {
			return ignored, &optionError{providers.OptionLevel, "names no level of the provider's assurance_levels"}
		}
		for _, values := range []string{providers.OptionACRValues, providers.OptionAuthnContext} {
			if form.Get(values) != "" && slices.Contains(allowed, values) {
				return ignored, &optionError{providers.OptionLevel, "cannot be given with " + values + ", which it stands for"}
			}
		}
	}
	return ignored, nil
}

// ignoredOptions remembers which options a provider was sent without
// allowing them, so that each is logged once: the names come from a fixed
// list, so the set is bounded by it.
type ignoredOptions struct {
	mu   sync.Mutex
	seen map[string]bool
}

// first reports whether name has not been ignored for provider before.
func (i *ignoredOptions) first(provider, name string) bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.seen == nil {
		i.seen = map[string]bool{}
	}
	key := provider + "\x00" + name
	if i.seen[key] {
		return false
	}
	i.seen[key] = true
	return true
}

// startOptions takes the sign-in options of a start request into tx,
// logging the first start that gives each option the provider does not
// allow, and the account a step-up must return as.
func (a *Auth) startOptions(r *http.Request, m mount, tx *providers.Transaction) *Error {
	ignored, err := takeOptions(m.s, r.Form, tx)
	for _, name := range ignored {
		if m.ignored.first(m.name, name) {
			m.log.Warn("extauth: a sign-in option the provider's configuration does not allow was ignored (logged once per option)",
				"provider", m.name, "option", name)
		}
	}
	if err != nil {
		return &Error{Code: CodeInvalidResponse, Provider: m.name, Message: err.message(), Err: err}
	}
	if values := r.Form[accountField]; len(values) > 0 {
		party, uid, ok := a.openAccount(m.tenant, m.name, values[0])
		switch {
		case len(values) > 1:
			return &Error{Code: CodeInvalidResponse, Provider: m.name, Message: "this step-up is not valid; please start again",
				Err: errors.New("the step-up account field is given more than once")}
		case !ok:
			return &Error{Code: CodeInvalidResponse, Provider: m.name, Message: "this step-up is not valid; please start again",
				Err: errors.New("the step-up account field does not open for this provider")}
		case choosesIdP(m.s) && party != "idp "+tx.IdP && party != "iss "+tx.IdP:
			// In a federation the account is an IdP's: a step-up
			// started at another IdP, which the user may pick on the
			// discovery page, cannot be of it.
			return &Error{Code: CodeAccessDenied, Provider: m.name, Message: "sign in again at the organisation you signed in with",
				Err: errors.New("the step-up names another IdP of the federation than the one that asserted the account")}
		}
		if tx.Extra == nil {
			tx.Extra = map[string]string{}
		}
		tx.Extra[accountKey] = uid
		if party != "" {
			tx.Extra[partyKey] = party
		}
	}
	return nil
}

// sealAccount seals the account a step-up must return as, bound to the
// tenant and provider and to who asserted it (assertingParty): the
// browser carries it from the page to the start route, and can neither
// read nor change it.
func (a *Auth) sealAccount(tenant, provider, party, uid string) string {
	return a.sealer.Seal(accountField, []byte(tenant+"\x00"+provider+"\x00"+party+"\x00"+uid))
}

func (a *Auth) openAccount(tenant, provider, sealed string) (party, uid string, ok bool) {
	raw, err := a.sealer.Open(accountField, sealed)
	if err != nil {
		return "", "", false
	}
	parts := strings.SplitN(string(raw), "\x00", 4)
	if len(parts) != 4 || parts[0] != tenant || parts[1] != provider || parts[3] == "" {
		return "", "", false
	}
	return parts[2], parts[3], true
}

// checkAccount refuses a step-up that came back as another account than
// the one that started it: another UID, or the same UID asserted by
// another IdP or issuer.
func checkAccount(tx *providers.Transaction, id *providers.Identity) error {
	want, ok := tx.Extra[accountKey]
	if !ok {
		return nil
	}
	var why string
	switch party := tx.Extra[partyKey]; {
	case want != id.UID:
		why = "step-up returned another account than the session's"
	case party != "" && party != assertingParty(identityIdP((*SAMLInfo)(id.SAML)), id.Tokens.Issuer):
		why = "step-up returned the session's UID from another IdP or issuer than the one that asserted the session's account"
	default:
		return nil
	}
	return providers.NewError(providers.CodeAccessDenied, "you signed in as another account than the one that needed a stronger sign-in",
		errors.New(why))
}
