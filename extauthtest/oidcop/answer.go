package oidcop

import (
	"slices"
	"time"
)

// Authentication is how the provider says the user authenticated, when a
// test or the demo chooses it with AnswerAt rather than letting the
// provider honour what the client asked.
type Authentication struct {
	// ACR is asserted as acr whatever the client asked; "" asserts the
	// first of the acr_values asked, as the provider does by default.
	ACR string
	// AMR is asserted as amr (pwd, otp, hwk...), none when empty.
	AMR []string
	// AuthTime is asserted as auth_time, whether or not max_age was
	// asked; zero asserts when the user's session at the provider began,
	// and only when max_age was asked.
	AuthTime time.Time
}

// AnswerAt makes the provider assert a as how the user authenticated in
// every ID token from now on, so that a test can answer at a chosen level
// or age, or ignore what the client asked. The zero value goes back to
// the default. LastRequestParams says what the client asked.
func (op *OP) AnswerAt(a Authentication) {
	op.mu.Lock()
	defer op.mu.Unlock()
	a.AMR = slices.Clone(a.AMR)
	op.answer = a
}

// answered applies the chosen authentication to an ID token's claims.
func (op *OP) answered(claims map[string]any) {
	op.mu.Lock()
	a := op.answer
	op.mu.Unlock()
	if a.ACR != "" {
		claims["acr"] = a.ACR
	}
	if len(a.AMR) > 0 {
		claims["amr"] = a.AMR
	}
	if !a.AuthTime.IsZero() {
		claims["auth_time"] = a.AuthTime.Unix()
	}
}
