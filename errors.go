package extauth

import (
	"errors"

	"github.com/extauth/extauth/providers"
)

// Code is the stable, machine-readable reason why a sign-in failed. Codes are
// part of the API: hosts may switch on them and show them to users.
type Code string

// The codes an *Error carries.
const (
	// CodeAccessDenied: the user refused consent, or the provider refused
	// the user.
	CodeAccessDenied Code = "access_denied"
	// CodeCSRFDetected: a sign-in was started from another site (login
	// CSRF).
	CodeCSRFDetected Code = "csrf_detected"
	// CodeInvalidState: the callback does not belong to a live transaction
	// of this browser (missing, tampered, expired or replayed cookie, wrong
	// state).
	CodeInvalidState Code = "invalid_state"
	// CodeInvalidResponse: the provider's answer is malformed,
	// unverifiable or oversized.
	CodeInvalidResponse Code = "invalid_response"
	// CodeInvalidCredentials: the provider rejected our client credentials.
	CodeInvalidCredentials Code = "invalid_credentials"
	// CodeReplayed: a code, state or assertion was presented twice.
	CodeReplayed Code = "replayed"
	// CodeProviderUnavailable: the provider could not be reached, answered
	// with a server error, or a store this sign-in needs is down.
	CodeProviderUnavailable Code = "provider_unavailable"
	// CodeMisconfigured: the provider's configuration cannot work.
	CodeMisconfigured Code = "misconfigured"
	// CodeTimeout: the provider did not answer in time.
	CodeTimeout Code = "timeout"
	// CodeInsufficientAuthentication: the provider authenticated the user
	// less strongly than the sign-in asked: an acr other than those
	// acr_values named, or an auth_time older than max_age (OIDC Core
	// 3.1.3.7). The name is RFC 9470's.
	CodeInsufficientAuthentication Code = "insufficient_user_authentication"
)

// HTTPStatus returns the status code the default failure page answers with:
// 403 for access_denied, csrf_detected and insufficient_user_authentication,
// 400 for invalid_state,
// invalid_response and replayed, 502 for invalid_credentials, 503 for
// provider_unavailable, 504 for timeout, 500 otherwise.
func (c Code) HTTPStatus() int { return providers.Code(c).HTTPStatus() }

// Error is the one error type a failed sign-in produces; OnFailure receives
// it.
//
// Message is short, fixed text written by extauth, safe to show to a user; it
// never contains provider input, secrets or tokens. Err is the cause, for
// logs; it is matched with errors.Is and errors.As through Unwrap.
type Error struct {
	Code     Code
	Provider string
	Message  string
	Err      error
}

// Error formats the error as "extauth: <provider>: <code>: <message>: <cause>".
func (e *Error) Error() string { return e.strategyError().Error() }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error with the same Code and, when target
// names one, the same Provider, so that
//
//	errors.Is(err, &extauth.Error{Code: extauth.CodeTimeout})
//
// matches any time-out.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && (t.Provider == "" || t.Provider == e.Provider)
}

func (e *Error) strategyError() *providers.Error {
	return &providers.Error{Code: providers.Code(e.Code), Provider: e.Provider, Message: e.Message, Err: e.Err}
}

// asError returns err as an *Error for provider: a strategy's
// *providers.Error keeps its code, anything else is wrapped under fallback.
func asError(err error, provider string, fallback Code) *Error {
	var e *Error
	if errors.As(err, &e) {
		out := *e
		if out.Provider == "" {
			out.Provider = provider
		}
		return &out
	}
	pe := providers.AsError(err, provider, providers.Code(fallback))
	return &Error{Code: Code(pe.Code), Provider: pe.Provider, Message: pe.Message, Err: pe.Err}
}
