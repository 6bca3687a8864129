package providers

import "slices"

// The security profiles OIDCOptions.Profile (profile) enforces.
const (
	// OIDCProfileFAPI2 is the FAPI 2.0 Security Profile's client (final,
	// February 2025). It implies pushed authorization requests, PKCE
	// S256, the issuer as the client assertions' audience, the iss
	// response parameter, and only PS256, ES256 and EdDSA (RSA keys of
	// 2048 bits or more) for what the client signs and what it accepts;
	// it requires private_key_jwt (or mTLS) and sender-constrained tokens
	// (DPoP, or mTLS), and refuses settings that contradict them.
	OIDCProfileFAPI2 = "fapi2"
	// OIDCProfileFAPI2MessageSigning adds FAPI 2.0 Message Signing (final,
	// September 2025): signed request objects (with nbf, and an exp at most
	// 60 minutes later) and JWT-secured authorization responses (JARM).
	OIDCProfileFAPI2MessageSigning = "fapi2-message-signing"
)

// fapiAlgs are the signing algorithms FAPI 2.0 allows (Security Profile
// 5.4.1): PS256, ES256 and EdDSA.
var fapiAlgs = []string{"PS256", "ES256", "EdDSA"}

// profileOptions is c.Options with what their profile implies where they
// leave it open: private_key_jwt (tls_client_auth for a client with a TLS
// certificate and no private key), the issuer
// as the assertions' audience, pushed requests, FAPI's algorithms for ID
// tokens, and with message signing request objects and JARM. Settings o
// makes itself stay, for CheckOIDCConfig to refuse when the profile
// forbids them.
func (c OIDCConfig) profileOptions() OIDCOptions {
	o := presetOptions(c.Options)
	if o.Profile == "" {
		return o
	}
	if o.AuthMethod == "" {
		o.AuthMethod = AuthMethodPrivateKeyJWT
		if c.PrivateKey == "" && c.TLSCertificate != "" {
			o.AuthMethod = AuthMethodTLS
		}
	}
	if o.AssertionAudience == "" {
		o.AssertionAudience = OIDCAudienceIssuer
	}
	o.PushedAuthorization = true
	if len(o.SigningAlgs) == 0 {
		o.SigningAlgs = slices.Clone(fapiAlgs)
	}
	if o.Profile == OIDCProfileFAPI2MessageSigning {
		o.RequestObject = true
		if o.ResponseMode == "" {
			o.ResponseMode = ResponseModeJWT
		}
	}
	return o
}

// Applied returns the options the oidc strategy runs with for c: c.Options
// with what the profile implies where they leave it open (the method, the
// assertions' audience, pushed requests, the algorithms accepted, and with
// Message Signing request objects and JARM) and DPoP's default algorithm.
// extauth check prints the profile's rules from it, as applied.
func (c OIDCConfig) Applied() OIDCOptions {
	o := c.profileOptions()
	if o.DPoP && o.DPoPSigningAlg == "" {
		o.DPoPSigningAlg = DefaultDPoPSigningAlg
	}
	return o
}

// profileAlgs is algs less what the profile forbids.
func (o *OIDCOptions) profileAlgs(algs []string) []string {
	if o.Profile == "" {
		return algs
	}
	var out []string
	for _, a := range algs {
		if slices.Contains(fapiAlgs, a) {
			out = append(out, a)
		}
	}
	return out
}
