package samlsp

// LandingPage is the configured RelayState of saml_additional_settings, as a
// path on this site, or "" when none is configured: where the routes end an
// IdP-initiated sign-in unless Options.UnsolicitedReturnTo says otherwise.
func (sp *SP) LandingPage() string { return sp.relayDst }
