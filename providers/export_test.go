package providers

// GothErrorForTest exposes the goth error classification to the external
// test package.
func GothErrorForTest(err error) *Error { return gothError(err, "token") }
