package providers

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
)

// Code is a stable, machine-readable reason why a sign-in failed. Codes are
// part of the API: hosts may switch on them and show them to users.
type Code string

// The codes an *Error carries.
const (
	// CodeAccessDenied: the user refused consent, or the provider refused the user.
	CodeAccessDenied Code = "access_denied"
	// CodeCSRFDetected: a sign-in was started cross-site (login CSRF).
	CodeCSRFDetected Code = "csrf_detected"
	// CodeInvalidState: the callback does not belong to a live transaction of
	// this browser (missing, tampered, expired or replayed cookie, wrong state).
	CodeInvalidState Code = "invalid_state"
	// CodeInvalidResponse: the provider's answer is malformed, unverifiable
	// or oversized.
	CodeInvalidResponse Code = "invalid_response"
	// CodeInvalidCredentials: the provider rejected our client credentials.
	CodeInvalidCredentials Code = "invalid_credentials"
	// CodeReplayed: a code, verifier or assertion was presented twice.
	CodeReplayed Code = "replayed"
	// CodeProviderUnavailable: the provider could not be reached or answered
	// with a server error.
	CodeProviderUnavailable Code = "provider_unavailable"
	// CodeMisconfigured: the provider's configuration cannot work.
	CodeMisconfigured Code = "misconfigured"
	// CodeTimeout: the provider did not answer in time.
	CodeTimeout Code = "timeout"
	// CodeInsufficientAuthentication: the provider authenticated the user
	// less strongly than the sign-in asked (another acr than acr_values
	// named, or an auth_time older than max_age). The name is RFC 9470's.
	CodeInsufficientAuthentication Code = "insufficient_user_authentication"
)

// HTTPStatus returns the status code the default failure page answers with.
func (c Code) HTTPStatus() int {
	switch c {
	case CodeAccessDenied, CodeCSRFDetected, CodeInsufficientAuthentication:
		return http.StatusForbidden
	case CodeInvalidState, CodeInvalidResponse, CodeReplayed:
		return http.StatusBadRequest
	case CodeProviderUnavailable:
		return http.StatusServiceUnavailable
	case CodeTimeout:
		return http.StatusGatewayTimeout
	case CodeInvalidCredentials:
		return http.StatusBadGateway
	default:
		return http.StatusInternalServerError
	}
}

// Error is the one error type a failed sign-in produces.
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

// NewError returns an *Error with the given code, message and cause.
func NewError(code Code, message string, cause error) *Error {
	return &Error{Code: code, Message: message, Err: cause}
}

// Error formats the error as "extauth: <provider>: <code>: <message>: <cause>".
func (e *Error) Error() string {
	s := "extauth: "
	if e.Provider != "" {
		s += e.Provider + ": "
	}
	s += string(e.Code)
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error with the same Code and, when target
// names one, the same Provider, so that
//
//	errors.Is(err, &providers.Error{Code: providers.CodeTimeout})
//
// matches any time-out.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok {
		return false
	}
	return t.Code == e.Code && (t.Provider == "" || t.Provider == e.Provider)
}

// AsError returns err as an *Error for provider, wrapping anything that is
// not one already under fallback.
func AsError(err error, provider string, fallback Code) *Error {
	var e *Error
	if errors.As(err, &e) {
		out := *e
		if out.Provider == "" {
			out.Provider = provider
		}
		return &out
	}
	return &Error{Code: fallback, Provider: provider, Message: "sign-in failed", Err: err}
}

// Errorf is NewError with a formatted cause.
func Errorf(code Code, message, format string, args ...any) *Error {
	return &Error{Code: code, Message: message, Err: fmt.Errorf(format, args...)}
}

// maxDescription bounds what an error's cause keeps of a provider's
// error_description.
const maxDescription = 200

// tokenLike finds runs of characters that could be a code, a token, a key
// or a session ID, which a provider's error_description may echo.
var tokenLike = regexp.MustCompile(`[A-Za-z0-9._~+/=-]{20,}`)

// describe returns a provider's error_description as an error's cause may
// keep it, for the log (never for the user's page, which shows Message
// alone): each value of sent (what the request carried: secrets, codes,
// tokens) and each run of 20 or more characters with a digit that could
// be one replaced by [redacted], each character outside printable ASCII
// by '?', and cut to maxDescription bytes.
func describe(desc string, sent ...string) string {
	for _, v := range sent {
		if len(v) >= 4 {
			desc = strings.ReplaceAll(desc, v, "[redacted]")
		}
	}
	desc = tokenLike.ReplaceAllStringFunc(desc, func(run string) string {
		if strings.ContainsAny(run, "0123456789") {
			return "[redacted]"
		}
		return run
	})
	var b strings.Builder
	for _, r := range desc {
		if b.Len() >= maxDescription {
			b.WriteString("...")
			break
		}
		if r < 0x20 || r > 0x7e {
			r = '?'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// providerAnswer formats what a provider answered an endpoint's request
// with, for an error's cause: step, the status (0: none, a redirect), the
// OAuth error code and, when there is one, the error_description through
// describe.
func providerAnswer(step string, status int, code, desc string, sent ...string) error {
	var b strings.Builder
	b.WriteString(step)
	b.WriteString(":")
	if status != 0 {
		fmt.Fprintf(&b, " HTTP %d", status)
	}
	fmt.Fprintf(&b, " error=%.64q", code)
	if desc != "" {
		fmt.Fprintf(&b, " error_description=%q", describe(desc, sent...))
	}
	return errors.New(b.String())
}
