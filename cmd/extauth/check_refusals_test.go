package main

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"go/ast"
	"go/parser"
	"go/token"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/extauth/extauth"
)

// refusal is one way extauth.New can refuse a configuration: a message of
// the code that builds the providers, and either a secrets file that makes
// New refuse with it, or why no secrets file can.
type refusal struct {
	// msg is the message as the code writes it: the literal of errors.New,
	// fmt.Errorf or providers.NewError.
	msg string
	// file is a flat secrets file that New refuses with msg.
	file string
	// key is the setting check must name when it reports the file.
	key string
	// baseURL, when set, is the base URL under which New refuses the file:
	// the refusal depends on it, and check can only see it with -base-url.
	baseURL string
	// none says why no secrets file makes New refuse with msg.
	none string
}

// Reasons no file can make New refuse with a message.
const (
	byNew       = "New always gives the strategies a callback URL, an HTTP client and a store"
	byProviders = "Config.Providers lists a provider only with its required settings, so New never builds one without them"
	byOptions   = "set by the application's Options, not by the secrets file"
	wrapper     = "wraps the messages of other rows, whose files cover it"
	byValidate  = "Config.Validate's problem, which LoadConfig refuses and so does a tenant's first build; check lists every problem InspectConfig returns, from the same code"
)

// refusals lists every message TestEveryRefusalOfNewIsListed finds in the
// code New builds the providers with. A new refusal there fails that test
// until it has a row here: a secrets file that makes New refuse with it,
// which TestCheckReportsEveryRefusalOfNew then feeds to extauth check, or
// the reason no file can.
func refusals(t *testing.T) []refusal {
	small := mustPair(generateKeyPair("small", 1024, 365, testNow.Add(-24*time.Hour)))
	ecCert, ecKey := ecPair(t)
	pair := func(cert, key string) string {
		return "saml_sp_entity_id: https://app.example.org/saml\nsaml_idp_metadata_url: https://idp.example.invalid/metadata\n" +
			"saml_additional_settings:\n  certificate: |\n" + block(cert) + "  private_key: |\n" + block(key)
	}
	samlWith := func(extra string) string {
		return "saml_sp_entity_id: https://app.example.org/saml\nsaml_idp_metadata_url: https://idp.example.invalid/metadata\n" + extra
	}
	// oidcAt is a client of issuer with the entries of
	// oidc_additional_settings.
	oidcAt := func(issuer, entries string) string {
		return "oidc_client_id: app\noidc_client_secret: SECRET-oidc-c8e1\noidc_issuer: " + issuer + "\noidc_additional_settings:\n" + entries
	}
	const entraAuthority, tenantID = "https://login.microsoftonline.com/", "aaaaaaaa-1111-4111-8111-aaaaaaaaaaaa"
	oidcIssuer := func(issuer string) string {
		return "oidc_client_id: app\noidc_client_secret: SECRET-oidc-c8e1\noidc_issuer: " + issuer + "\n"
	}
	const notACertificate = "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n"
	cert, key := string(spPair().certPEM), string(spPair().keyPEM)
	// oidcFederation is a federation relying party with extra entries of
	// oidc_additional_settings.federation.
	_, clientKey := ecPair(t)
	_, fedKey := ecPair(t)
	oidcFederation := func(extra string) string {
		return "oidc_issuer: https://op.example.invalid\noidc_additional_settings:\n  private_key: |\n" + block(clientKey) +
			"  federation:\n    federation_key: |\n" + indented(fedKey, "      ") + "    authority_hints: [https://ta.example.invalid]\n" +
			"    trust_anchors:\n      https://ta.example.invalid: '{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\",\"kid\":\"k\"," +
			"\"x\":\"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU\",\"y\":\"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0\"}]}'\n" + extra
	}
	// oidcWith is a client with the entries of oidc_additional_settings.
	oidcWith := func(entries string) string {
		return "oidc_client_id: app\noidc_client_secret: SECRET-oidc-c8e1\noidc_issuer: https://id.example.invalid\noidc_additional_settings:\n" + entries
	}
	tlsWith := func(certPEM, keyPEM, entries string) string {
		return oidcWith("  tls_client_certificate: |\n" + block(certPEM) + "  tls_client_key: |\n" + block(keyPEM) + entries)
	}
	keyed := func(pemKey, entries string) string {
		return oidcWith("  client_auth_method: private_key_jwt\n  private_key: |\n" + block(pemKey) + entries)
	}
	junk := func(typ string) string {
		return "-----BEGIN " + typ + "-----\nbm90IGEga2V5\n-----END " + typ + "-----\n"
	}
	// federation is saml_additional_settings with a federation at
	// metadataURL signed with certPEM, and extra lines after it.
	federation := func(metadataURL, certPEM, extra string) string {
		return "saml_additional_settings:\n  federation:\n    metadata_url: " + metadataURL + "\n    signing_certificate: |\n" +
			indent(strings.TrimSuffix(certPEM, "\n")+"\n", "      ") + extra
	}
	mdqFederation := func(mdqURL, certPEM, extra string) string {
		return "saml_additional_settings:\n  federation:\n    mdq_url: " + mdqURL + "\n    signing_certificate: |\n" +
			indent(strings.TrimSuffix(certPEM, "\n")+"\n", "      ") + extra
	}
	fedOnly := func(settings string) string { return "saml_sp_entity_id: https://app.example.org/saml\n" + settings }
	p384, ed := otherKeys(t)
	return []refusal{
		// New itself, and the site and tenant builders.
		{msg: "extauth: %s: %w", none: wrapper},
		{msg: "provider %q is not available in this build", none: "Config.Providers lists the built-in providers only"},
		{msg: "extauth: CookieKey: %w", none: byOptions},
		{msg: "seal: no key", none: byOptions + " (CookieKey)"},
		{msg: "seal: key %d is %d bytes, want %d", none: byOptions + " (CookieKey, OldCookieKeys)"},
		{msg: "seal: key %d: %w", none: byOptions + " (CookieKey, OldCookieKeys)"},
		{msg: "extauth: Options.UnsolicitedReturnTo must be a path on this site", none: byOptions},
		{msg: "extauth: Options.BaseURL is required", none: byOptions},
		{msg: "extauth: Options.BaseURL: %w", none: byOptions},
		{msg: "extauth: Options.BaseURL must be an absolute http(s) URL without user, query or fragment", none: byOptions},
		{msg: "extauth: Options.TrustedOrigins: %q is not an origin (lowercase scheme://host[:port])", none: byOptions},
		{msg: "extauth: Options.PathPrefix %q must be a clean path that starts and ends with /", none: byOptions},
		{msg: "Options.Pages.Messages: %s", none: byOptions},
		{msg: "Options.Pages.Stylesheet: a stylesheet cannot contain </style", none: byOptions},
		{msg: "extauth: Options.Slugs[%q] = %q is not a lowercase slug", none: byOptions},
		{msg: "extauth: Options.Slugs gives %q and %q the same slug %q", none: byOptions},
		{msg: "extauth: provider %q is mounted twice", none: byOptions + " (Slugs, Extra)"},
		{msg: "extauth: Options.Extra holds a nil strategy", none: byOptions},
		{msg: "extauth: provider name %q is not a lowercase slug", none: byOptions + " (Extra)"},
		{msg: "extauth: %s: no hook: set Options.Callbacks[%q] or Options.OnSuccess", none: byOptions},
		{msg: "extauth: tenants are configured but Options.TenantOf is nil: nothing says which tenant a request is for",
			none: "the file's tenants are refused by an application without Options.TenantOf, which check cannot see; it lists the tenants"},
		{msg: "tenant lookup: %w", none: "Options.Tenants failing at run time"},
		{msg: "extauth: %w", none: byOptions + " (MeterProvider, TracerProvider: an instrument the host's SDK refuses)"},
		{msg: "telemetry: %w", none: byOptions + " (MeterProvider: an instrument the host's SDK refuses)"},
		{msg: "tenant source has no %q: %w", none: "Options.Tenants at run time"},
		{msg: "no tenant %q: %w", none: "a request for a tenant nobody knows"},
		{msg: "base URL: %w", none: byOptions + " (TenantBaseURL)"},

		// providers/microblog.go
		{msg: "microblog needs microblog_key and microblog_secret", none: byProviders},
		{msg: "microblog_site must be an absolute http(s) URL", key: "microblog_site",
			file: "microblog_key: k\nmicroblog_secret: SECRET-microblog-4f1c\nmicroblog_site: https://api.microblog.example.invalid/?v=1\n"},
		{msg: "microblog needs a callback URL", none: byNew},
		{msg: "microblog needs an HTTP client", none: byNew},

		// providers/socialnet.go
		{msg: "socialnet needs socialnet_key and socialnet_secret", none: byProviders},
		{msg: `socialnet Graph API version must look like "v21.0"`, none: byOptions + " (Options.Socialnet.GraphVersion)"},
		{msg: "socialnet_site must be an absolute http(s) URL", key: "socialnet_site",
			file: "socialnet_key: k\nsocialnet_secret: SECRET-socialnet-9a2e\nsocialnet_site: https://graph.socialnet.example.invalid/?v=1\n"},
		{msg: "not an absolute http(s) URL", none: "NewSocialnet refuses with socialnet_site's message instead, the row above"},
		{msg: "socialnet needs a callback URL", none: byNew},
		{msg: "socialnet needs an HTTP client", none: byNew},

		// providers/blog_oauth2.go
		{msg: "blog_oauth2_key and blog_oauth2_secret are required", none: byProviders},
		{msg: "blog_oauth2_site: %w", key: "blog_oauth2_site",
			file: "blog_oauth2_key: k\nblog_oauth2_secret: SECRET-blog-b3c5\nblog_oauth2_site: https://blog.example.invalid/?p=1\n"},
		{msg: "must be an absolute http(s) URL without query, fragment or user", key: "blog_oauth2_site",
			file: "blog_oauth2_key: k\nblog_oauth2_secret: SECRET-blog-b3c5\nblog_oauth2_site: https://blog.example.invalid/?p=1\n"},

		// providers/oidc.go and search_oauth2.go
		{msg: "%s and %s are required", none: byProviders},
		{msg: "%s %q: %w", key: "oidc_issuer", file: oidcIssuer("http://id.example.invalid")},
		{msg: "must be https (plain http only on a loopback host)", key: "oidc_issuer", file: oidcIssuer("http://id.example.invalid")},
		{msg: "must be https (plain http only on a loopback host)", key: "search_oauth2_site",
			file: "search_oauth2_key: k\nsearch_oauth2_secret: SECRET-search-77d0\nsearch_oauth2_site: http://accounts.example.invalid\n"},
		{msg: "must be an absolute URL without query, fragment or user", key: "oidc_issuer", file: oidcIssuer("https://id.example.invalid/?tenant=1")},
		{msg: "the environment needs a callback URL and an HTTP client", none: byNew},
		{msg: "signing algorithm %q is not allowed: ID tokens must be signed with an asymmetric algorithm", none: byOptions + " (Options.OIDC.SigningAlgs)"},
		{msg: "authorization parameter %q is set by extauth", none: byOptions + " (Options.OIDC.AuthParams)"},
		{msg: "access type %q is not online or offline", none: byOptions + " (Options.SearchOAuth2.AccessType)"},
		{msg: "authorization parameter %q has its own field in SearchOAuth2Options", none: byOptions + " (Options.SearchOAuth2.AuthParams)"},

		// samlsp/samlsp.go
		{msg: "SAML configuration is invalid", none: wrapper},
		{msg: "saml_sp_entity_id is required", none: byProviders},
		{msg: "is required", none: byProviders + " (saml_idp_metadata_url)"},
		{msg: "callback URL is required", none: byNew},
		{msg: "callback URL is not absolute", none: byNew},
		{msg: "an HTTP client is required", none: byNew},
		{msg: "a replay store is required", none: byNew},
		{msg: "saml_idp_metadata_url: %w", none: wrapper},
		{msg: "not an absolute URL", key: "saml_idp_metadata_url",
			file: "saml_sp_entity_id: https://app.example.org/saml\nsaml_idp_metadata_url: /metadata\n"},
		{msg: "must use https (plain http only for loopback addresses)", key: "saml_idp_metadata_url",
			file: "saml_sp_entity_id: https://app.example.org/saml\nsaml_idp_metadata_url: http://idp.example.invalid/metadata\n"},
		{msg: "must use https", key: "saml_idp_metadata_url",
			file: "saml_sp_entity_id: https://app.example.org/saml\nsaml_idp_metadata_url: ftp://idp.example.invalid/metadata\n"},
		{msg: "saml_idp_sso_service_url: not an absolute http(s) URL", key: "saml_idp_sso_service_url",
			file: samlWith("saml_idp_sso_service_url: /sso\n")},
		{msg: "clock skew must be between 0 and %s", none: byOptions + " (Options.SAML.ClockSkew)"},
		{msg: "%s is not absolute", none: byOptions + " (Options.SAML.SLOURL, MetadataURL)"},
		{msg: "saml_additional_settings.RelayState: must be a relative path or a URL of this site", key: "RelayState",
			file: samlWith("saml_additional_settings:\n  RelayState: https://elsewhere.example.invalid/welcome\n"), baseURL: "https://app.example.org"},
		{msg: "saml_additional_settings.idp_metadata_certificate: %w", key: "idp_metadata_certificate",
			file: samlWith("saml_additional_settings:\n  idp_metadata_certificate: not a certificate\n")},
		{msg: "saml_additional_settings.security.logout_requests_signed needs certificate and private_key", key: "logout_requests_signed",
			file: samlWith("saml_additional_settings:\n  security:\n    logout_requests_signed: true\n")},
		{msg: "saml_additional_settings: custom entry %q cannot be sent as a query parameter", key: "SigAlg",
			file: samlWith("saml_additional_settings:\n  SigAlg: rsa-sha1\n")},
		{msg: "saml_additional_settings.artifact: applies to response_binding: artifact only", key: "artifact",
			file: samlWith("saml_additional_settings:\n  artifact:\n    want_response_signed: true\n")},
		{msg: "saml_additional_settings.response_binding: %.40q is neither post nor artifact", key: "response_binding",
			file: samlWith("saml_additional_settings:\n  response_binding: redirect\n")},
		// config_artifact.go
		{msg: "applies to response_binding: artifact only", none: byValidate},
		{msg: "must be post or artifact", none: byValidate},
		{msg: "artifact needs a key pair to authenticate the ArtifactResolve with: the SP key pair (certificate and private_key), " +
			"or artifact.tls_certificate and artifact.tls_private_key", none: byValidate},
		{msg: "and artifact.%s must be set together", none: byValidate},
		{msg: "is not a PEM private key that matches artifact.%s", none: byValidate},
		{msg: "is the next TLS pair of a rotation, but there is no current one (artifact.tls_certificate)", none: byValidate},
		{msg: "must hold one or more PEM certificates and nothing else", none: byValidate},
		{msg: "AuthnRequestBinding %q is neither the HTTP-Redirect nor the HTTP-POST binding", none: byOptions + " (Options.SAML.AuthnRequestBinding)"},
		{msg: "not a PEM certificate", key: "idp_metadata_certificate",
			file: samlWith("saml_additional_settings:\n  idp_metadata_certificate: not a certificate\n")},
		{msg: "more than one PEM block", key: "idp_metadata_certificate",
			file: samlWith("saml_additional_settings:\n  idp_metadata_certificate: |\n" + block(cert+cert))},
		{msg: "the certificate does not parse", key: "idp_metadata_certificate",
			file: samlWith("saml_additional_settings:\n  idp_metadata_certificate: |\n" + block(notACertificate))},
		{msg: "saml_additional_settings: %s and %s must be set together", key: "private_key",
			file: samlWith("saml_additional_settings:\n  certificate: |\n" + block(cert))},
		{msg: "%s: not a PEM certificate", key: "certificate", file: pair("not a certificate", key)},
		{msg: "%s%s: %w", key: "certificate", file: pair(notACertificate, key)},
		{msg: "%s: not a PEM private key", key: "private_key", file: pair(cert, "not a key")},
		{msg: "%s: does not match the certificate", key: "private_key", file: pair(cert, string(spPairSoon().keyPEM))},
		{msg: "%s: does not match %s", key: "private_key_new",
			file: pair(cert, key) + "  certificate_new: |\n" + block(string(spPairSoon().certPEM)) + "  private_key_new: |\n" + block(key)},
		{msg: "%s: must be an RSA key", key: "private_key", file: pair(ecCert, ecKey)},
		{msg: "%s: RSA key must have at least 2048 bits", key: "private_key", file: pair(string(small.certPEM), string(small.keyPEM))},
		{msg: "saml_additional_settings.certificate_new: the next key pair needs the current one (certificate and private_key): without a current pair, configure the new one as certificate and private_key",
			key: "certificate_new", file: samlWith("saml_additional_settings:\n  certificate_new: |\n" + block(cert) + "  private_key_new: |\n" + block(key))},
		{msg: "saml_additional_settings.certificate_old: the retiring key pair needs a current one (certificate and private_key) that replaced it",
			key: "certificate_old", file: samlWith("saml_additional_settings:\n  certificate_old: |\n" + block(cert) + "  private_key_old: |\n" + block(key))},
		{msg: "saml_additional_settings.certificate_old: holds the key pair of certificate_new: a pair cannot be retiring and next at once",
			key: "certificate_old", file: pair(cert, key) + "  certificate_new: |\n" + block(string(spPairSoon().certPEM)) + "  private_key_new: |\n" + block(string(spPairSoon().keyPEM)) +
				"  certificate_old: |\n" + block(string(spPairSoon().certPEM)) + "  private_key_old: |\n" + block(string(spPairSoon().keyPEM))},
		{msg: "saml_additional_settings.metadata_valid_for: must be between 1 hour and 3650 days", key: "metadata_valid_for",
			file: samlWith("saml_additional_settings:\n  metadata_valid_for: 30m\n")},
		{msg: "saml_additional_settings.metadata_cache_duration: must be between 1 minute and 3650 days", key: "metadata_cache_duration",
			file: samlWith("saml_additional_settings:\n  metadata_cache_duration: 10s\n")},
		{msg: "saml_additional_settings.metadata_cache_duration: must not exceed metadata_valid_for (an IdP would keep a copy past its validUntil)",
			key: "metadata_cache_duration", file: samlWith("saml_additional_settings:\n  metadata_valid_for: 2h\n  metadata_cache_duration: 3h\n")},

		// oidc_additional_settings (providers/oidc_settings.go and
		// oidc_client.go), which Validate checks with the same code.
		{msg: "%s: client assertions, private keys, pushed and signed requests, encryption and DPoP are for the oidc provider only",
			none: byOptions + " (Options.SearchOAuth2): oidc_additional_settings is the oidc provider's"},
		{msg: "must be a PEM block of type PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY", key: "private_key", file: keyed("not a key", "")},
		{msg: "is encrypted; give the key unencrypted", key: "private_key", file: keyed(junk("ENCRYPTED PRIVATE KEY"), "")},
		{msg: "holds a %s, not a private key", key: "private_key", file: keyed(cert, "")},
		{msg: "does not parse as a PKCS #8 private key", key: "private_key", file: keyed(junk("PRIVATE KEY"), "")},
		{msg: "does not parse as a PKCS #1 RSA private key", key: "private_key", file: keyed(junk("RSA PRIVATE KEY"), "")},
		{msg: "does not parse as an EC private key", key: "private_key", file: keyed(junk("EC PRIVATE KEY"), "")},
		{msg: "is a %d-bit RSA key; at least %d bits are required", key: "private_key", file: keyed(string(small.keyPEM), "")},
		{msg: "is an EC key on %s; only P-256 is accepted", key: "private_key", file: keyed(p384, "")},
		{msg: "must be an RSA or EC P-256 key", key: "private_key", file: keyed(ed, "")},
		{msg: "has no JWK thumbprint", none: "every key that parses has one"},
		{msg: "must be a PEM block of type PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY%s", key: "private_key", file: keyed("not a key", "")},
		{msg: "is missing (%s)", key: "private_key", file: oidcWith("  private_key_new: |\n" + block(ecKey))},
		{msg: "holds the key of private_key_new: a key cannot be retiring and next at once", key: "private_key_old",
			file: keyed(key, "  private_key_new: |\n"+block(ecKey)+"  private_key_old: |\n"+block(ecKey))},
		{msg: "is not a method extauth knows (did you mean %s?)", key: "client_auth_method", file: oidcWith("  client_auth_method: private_key_jwk\n")},
		{msg: "client_auth_method private_key_jwt", key: "private_key", file: oidcWith("  client_auth_method: private_key_jwt\n")},
		{msg: "applies only to %s and %s", key: "token_endpoint_auth_signing_alg", file: oidcWith("  token_endpoint_auth_signing_alg: RS256\n")},
		{msg: "must be one of %s with %s", key: "token_endpoint_auth_signing_alg",
			file: oidcWith("  client_auth_method: client_secret_jwt\n  token_endpoint_auth_signing_alg: RS256\n")},
		{msg: "is too short for %s: %s needs a secret of at least %d bytes", key: "oidc_client_secret",
			file: oidcWith("  client_auth_method: client_secret_jwt\n")},
		{msg: "must be one of %s for the %s private_key%s%s", key: "token_endpoint_auth_signing_alg",
			file: keyed(ecKey, "  token_endpoint_auth_signing_alg: es256\n")},
		{msg: "must be one of %s, %s, %s, %s, %s, %s", key: "client_auth_method", file: oidcWith("  client_auth_method: magic\n")},
		{msg: "must be %s or %s", key: "client_assertion_audience",
			file: keyed(ecKey, "  client_assertion_audience: everyone\n")},
		{msg: "applies only with request_object: true", key: "request_object_signing_alg", file: oidcWith("  request_object_signing_alg: PS256\n")},
		{msg: "needs %s", key: "id_token_encrypted_response_enc", file: oidcWith("  id_token_encrypted_response_enc: A256GCM\n")},
		{msg: "must be one of %s", key: "id_token_encrypted_response_enc",
			file: keyed(key, "  id_token_encrypted_response_alg: RSA-OAEP-256\n  id_token_encrypted_response_enc: A1GCM\n")},
		{msg: "RSA1_5 is refused (its padding is a decryption oracle); use RSA-OAEP-256", key: "id_token_encrypted_response_alg",
			file: keyed(key, "  id_token_encrypted_response_alg: RSA1_5\n")},
		{msg: "must be one of %s (RSA key) or %s (EC key)%s", key: "userinfo_encrypted_response_alg",
			file: keyed(key, "  userinfo_encrypted_response_alg: magic\n")},
		{msg: "does not suit the %s %s: use %s", key: "id_token_encrypted_response_alg",
			file: keyed(ecKey, "  id_token_encrypted_response_alg: RSA-OAEP-256\n")},
		{msg: "has an authorization parameter with an empty name", key: "oidc_additional_settings", file: oidcWith("  \"\": x\n")},
		{msg: "is a parameter extauth sets itself", key: "state", file: oidcWith("  state: fixed\n")},
		{msg: "holds a PEM block, but other entries are sent to the provider as authorization request parameters; the key belongs in private_key",
			key: "privte_key", file: oidcWith("  privte_key: |\n" + block(ecKey))},
		{msg: "must be a number of seconds from 0 to 31622400 (a year), in digits alone", key: "max_age", file: oidcWith("  max_age: -5\n")},
		{msg: "applies only with dpop: true", key: "dpop_signing_alg", file: oidcWith("  dpop_signing_alg: ES256\n")},
		{msg: "must be one of %s%s", key: "dpop_signing_alg", file: oidcWith("  dpop: true\n  dpop_signing_alg: es256\n")},
		{msg: "must be jwt or query.jwt (JARM); the other modes are chosen by extauth", key: "response_mode", file: oidcWith("  response_mode: form_post\n")},
		{msg: "must be %s or %s", key: "profile", file: oidcWith("  profile: fapi1\n")},
		{msg: "cannot be %s under profile %s: FAPI 2.0 authenticates clients with private_key_jwt or mTLS, never with a shared secret",
			key: "client_auth_method", file: oidcWith("  profile: fapi2\n  dpop: true\n  client_auth_method: client_secret_basic\n")},
		{msg: "must be issuer under profile %s: FAPI 2.0 requires the issuer as the client assertions' one audience",
			key: "client_assertion_audience", file: keyed(key, "  profile: fapi2\n  dpop: true\n  client_assertion_audience: token_endpoint\n")},
		{msg: "must be true under profile %s, or tls_client_certificate set: FAPI 2.0 requires sender-constrained tokens (DPoP, or mTLS)",
			key: "dpop", file: keyed(key, "  profile: fapi2\n")},
		{msg: "must be PS256, ES256 or EdDSA under profile %s: FAPI 2.0 allows no other algorithm",
			key: "token_endpoint_auth_signing_alg", file: oidcWith("  profile: fapi2\n  dpop: true\n  token_endpoint_auth_signing_alg: RS256\n")},
		{msg: "%s accepts ID tokens signed with PS256, ES256 or EdDSA only, but OIDCOptions.SigningAlgs allows %s", none: byOptions + " (Options.OIDC.SigningAlgs)"},
		{msg: "%s: %w", none: byOptions + " (HTTPClient, whose transport cannot present the TLS certificate tls_client_certificate names)"},
		{msg: "must be a PEM block of type CERTIFICATE", key: "tls_client_certificate", file: tlsWith("not a certificate", key, "")},
		{msg: "does not parse as an X.509 certificate", key: "tls_client_certificate", file: tlsWith(notACertificate, key, "")},
		{msg: "does not match tls_client_certificate", key: "tls_client_key", file: tlsWith(cert, ecKey, "")},
		{msg: "is missing (%s is set; the pair needs both)", key: "tls_client_key", file: oidcWith("  tls_client_certificate: |\n" + block(cert))},
		{msg: "is missing (tls_client_certificate_new is set: it is the certificate rotated in after tls_client_certificate)", key: "tls_client_certificate",
			file: oidcWith("  tls_client_certificate_new: |\n" + block(cert) + "  tls_client_key_new: |\n" + block(key))},
		{msg: "is missing (client_auth_method %s needs it)", key: "tls_client_certificate", file: oidcWith("  client_auth_method: tls_client_auth\n")},

		// The presets (providers/oidc_preset.go, oidc_entra.go).
		{msg: "%s: presets are for the oidc provider only", none: byOptions + " (Options.SearchOAuth2.Preset): oidc_additional_settings is the oidc provider's"},
		{msg: "names something that is not a tenant ID (a GUID, as the portal's Overview shows it), consumers or any", key: "tenants",
			file: oidcAt(entraAuthority+"organizations/v2.0", "  preset: entra\n  tenants: [contoso.com]\n")},
		{msg: "lists tenants beside any: write any alone, or the tenants alone", key: "tenants",
			file: oidcAt(entraAuthority+"organizations/v2.0", "  preset: entra\n  tenants: [any, "+tenantID+"]\n")},
		{msg: "is missing: the authority %s signs in the users of any Entra ID tenant, so list the tenant IDs whose users may sign in, or write any to admit every tenant",
			key: "tenants", file: oidcAt(entraAuthority+"organizations/v2.0", "  preset: entra\n")},
		{msg: "names the personal-account tenant (consumers), which the organizations authority never signs in: use common", key: "tenants",
			file: oidcAt(entraAuthority+"organizations/v2.0", "  preset: entra\n  tenants: consumers\n")},
		{msg: "cannot be any: the authority %s signs in one tenant's users only (common or organizations admit others)", key: "tenants",
			file: oidcAt(entraAuthority+tenantID+"/v2.0", "  preset: entra\n  tenants: any\n")},
		{msg: "can only name consumers: the consumers authority signs in personal Microsoft accounts only", key: "tenants",
			file: oidcAt(entraAuthority+"consumers/v2.0", "  preset: entra\n  tenants: "+tenantID+"\n")},
		{msg: "can only name the authority's own tenant %s (common or organizations admit others)", key: "tenants",
			file: oidcAt(entraAuthority+tenantID+"/v2.0", "  preset: entra\n  tenants: consumers\n")},
		{msg: "can name one tenant only, the one of the domain %s (common or organizations admit others)", key: "tenants",
			file: oidcAt(entraAuthority+"contoso.example/v2.0", "  preset: entra\n  tenants: [consumers, "+tenantID+"]\n")},
		{msg: "applies only with preset: %s", key: "tenants", file: oidcWith("  tenants: any\n")},
		{msg: "has spaces around the claim name", key: "groups_claim", file: oidcWith("  groups_claim: \" groups\"\n")},
		{msg: "is the path of the org authorization server's endpoints, not an issuer: the org authorization server's issuer is https://<your Okta domain> alone",
			key: "oidc_issuer", file: oidcAt("https://dev-1.okta.example/oauth2/v1", "  preset: okta\n")},
		{msg: "is not an Okta issuer: it is https://<your Okta domain> for the org authorization server, or https://<your Okta domain>/oauth2/<authorization server ID> (such as /oauth2/default) for a custom one, with nothing after it (discovery adds /.well-known/openid-configuration itself)",
			key: "oidc_issuer", file: oidcAt("https://dev-1.okta.example/oauth2/default/v1/authorize", "  preset: okta\n")},
		{msg: "is not an Auth0 issuer: it is https://<your tenant or custom domain>/ with no path (discovery adds /.well-known/openid-configuration itself)",
			key: "oidc_issuer", file: oidcAt("https://dev-1.auth0.example/authorize", "  preset: auth0\n")},
		{msg: "is set by hosted_domain under preset %s: remove it", key: "oidc_additional_settings.hd",
			file: oidcWith("  preset: google-workspace\n  hosted_domain: example.com\n  hd: example.org\n")},
		{msg: "is missing (preset %s signs in the users of one Workspace domain: name it, or * for any Workspace domain)", key: "hosted_domain",
			file: oidcWith("  preset: google-workspace\n")},
		{msg: "must be a domain name, such as example.com, or *", key: "hosted_domain", file: oidcWith("  preset: google-workspace\n  hosted_domain: example\n")},
		{msg: "must be %s, %s or %s", key: "groups_overage",
			file: oidcAt(entraAuthority+"common/v2.0", "  preset: entra\n  tenants: any\n  groups_overage: always\n")},
		{msg: "must be Microsoft Graph's base URL, without a path (such as https://graph.microsoft.com)", key: "graph_url",
			file: oidcAt(entraAuthority+"common/v2.0", "  preset: entra\n  tenants: any\n  graph_url: https://graph.microsoft.com/v1.0\n")},

		// providers/options.go: the per-request options and assurance
		// levels of oidc_additional_settings and saml_additional_settings.
		{msg: "names %q, which is not an option this provider takes (%s)", key: "oidc_additional_settings.request_options",
			file: oidcWith("  request_options: [login_hint, ForceAuthn]\n")},
		{msg: "has a level name that is not a token of visible ASCII characters", key: "oidc_additional_settings.assurance_levels",
			file: oidcWith("  assurance_levels:\n    \"very high\": urn:loa:3\n")},
		{msg: "names a value that %s.%s does not list: a sign-in at this level could not be accepted", key: "oidc_additional_settings.assurance_levels.high",
			file: oidcWith("  acr_values: urn:loa:2\n  assurance_levels:\n    high: urn:loa:3\n")},

		// samlsp/samlsp.go: a federation instead of one IdP.
		{msg: "saml_idp_metadata_url: a federation (saml_additional_settings.federation) lists the IdPs; set one or the other",
			key: "saml_idp_metadata_url", file: samlWith(federation("https://fed.example.invalid/aggregate.xml", cert, ""))},
		{msg: "saml_idp_sso_service_url: the IdPs of a federation each have their own; leave it empty", key: "saml_idp_sso_service_url",
			file: "saml_idp_sso_service_url: https://idp.example.invalid/sso\n" + fedOnly(federation("https://fed.example.invalid/aggregate.xml", cert, ""))},
		{msg: "saml_additional_settings.idp_metadata_certificate: a federation's aggregate is verified with federation.signing_certificate; leave it empty",
			key: "idp_metadata_certificate", file: fedOnly(federation("https://fed.example.invalid/aggregate.xml", cert, "  idp_metadata_certificate: |\n"+block(cert)))},
		{msg: "%smetadata_url: %w", key: "metadata_url", file: fedOnly(federation("http://fed.example.invalid/aggregate.xml", cert, ""))},
		{msg: "%ssigning_certificate is required: nothing of the aggregate is used unless its signature verifies with it", key: "signing_certificate",
			file: fedOnly("saml_additional_settings:\n  federation:\n    metadata_url: https://fed.example.invalid/aggregate.xml\n")},
		{msg: "%ssigning_certificate: %w", key: "signing_certificate", file: fedOnly(federation("https://fed.example.invalid/aggregate.xml", notACertificate, ""))},
		{msg: "saml_additional_settings.security.allow_sha1: does not apply to a federation, " +
			"where it would accept SHA-1 from every IdP of the aggregate and on the aggregate's own signature; leave it off",
			key: "allow_sha1", file: fedOnly(federation("https://fed.example.invalid/aggregate.xml", cert, "  security:\n    allow_sha1: true\n"))},
		{msg: "Options.SAML.AllowSHA1 does not apply to a federation, where it would accept SHA-1 from every IdP of the aggregate and on the aggregate's own signature",
			none: byOptions},
		{msg: "%smax_validity: must be positive", key: "max_validity",
			file: fedOnly(federation("https://fed.example.invalid/aggregate.xml", cert, "    max_validity: -24h\n"))},
		{msg: "%sbacking_file: must be an absolute path", key: "backing_file",
			file: fedOnly(federation("https://fed.example.invalid/aggregate.xml", cert, "    backing_file: federation.xml\n"))},

		{msg: "%smdq_url: the aggregate (metadata_url) or an MDQ server: set one", key: "mdq_url",
			file: fedOnly(federation("https://fed.example.invalid/aggregate.xml", cert, "    mdq_url: https://mdq.example.invalid/\n    entity_ids: [https://idp.example.invalid/idp]\n"))},
		{msg: "%smdq_url: %w", key: "mdq_url", file: fedOnly(mdqFederation("http://mdq.example.invalid/", cert, "    entity_ids: [https://idp.example.invalid/idp]\n"))},
		{msg: "%sentity_ids: with an MDQ server, list the IdPs users may choose, or set discovery_url", key: "entity_ids",
			file: fedOnly(mdqFederation("https://mdq.example.invalid/", cert, ""))},
		{msg: "%sbacking_file: applies to an aggregate (metadata_url), not to an MDQ server", key: "backing_file",
			file: fedOnly(mdqFederation("https://mdq.example.invalid/", cert, "    entity_ids: [https://idp.example.invalid/idp]\n    backing_file: /tmp/x.xml\n"))},

		{msg: "%sdiscovery_url: %w", key: "discovery_url",
			file: fedOnly(federation("https://fed.example.invalid/aggregate.xml", cert, "    discovery_url: http://ds.example.invalid/ds\n"))},
		{msg: "must be an absolute https URL (plain http only on a loopback host)", key: "discovery_url",
			file: fedOnly(federation("https://fed.example.invalid/aggregate.xml", cert, "    discovery_url: http://ds.example.invalid/ds\n"))},
		{msg: "must be an absolute https URL without a fragment", key: "discovery_url",
			file: fedOnly(federation("https://fed.example.invalid/aggregate.xml", cert, "    discovery_url: https://ds.example.invalid/ds#x\n"))},

		// Config.Validate, which the tenant builder runs.
		{msg: "must be an absolute https URL", none: byValidate},
		{msg: "needs its width and height in pixels", none: byValidate},
		{msg: "must be an e-mail address", none: byValidate},
		{msg: "is missing", none: byValidate},
		{msg: "must be a relative path (/...) or an absolute http or https URL", none: byValidate},
		{msg: "must be a URN or an absolute URI", none: byValidate},
		{msg: "is a parameter of the SAML binding and cannot be a custom entry", none: byValidate},
		{msg: "holds a PEM block, but custom entries are sent to the IdP; keys belong in certificate and private_key", none: byValidate},
		{msg: "must be between 1 hour and 3650 days", none: byValidate},
		{msg: "must be between 1 minute and 3650 days", none: byValidate},
		{msg: "must not exceed metadata_valid_for (an IdP would keep a copy past its validUntil)", none: byValidate},
		{msg: "must hold an RSA public key", none: byValidate},
		{msg: "is missing (%s is set; the key pair needs both)", none: byValidate},
		{msg: "does not match the public key of %s", none: byValidate},
		// OpenID Federation (oidc_additional_settings.federation).
		{msg: "%s: a federation is for the oidc provider only", none: "only oidc_additional_settings has a federation"},
		{msg: "an RSA federation key must have 2048 bits or more", none: byFederationKey},
		{msg: "an EC federation key must be on P-256, P-384 or P-521", none: byFederationKey},
		{msg: "a federation key must be RSA, EC or Ed25519, not %T", none: byFederationKey},
		{msg: "%.200q is not an https URL without query or fragment", none: byValidate},
		{msg: "%.200q must be https", none: byValidate},
		{msg: "is missing (the federation needs a key to sign our entity configuration)", none: byValidate},
		{msg: "holds the client's private_key: the federation key must be another (OpenID Federation 1.0, 3.1)", none: byValidate},
		{msg: "is missing (our immediate superiors in the federation)", none: byValidate},
		{msg: "is missing (the trust anchors, each with its entity identifier and JWKS)", none: byValidate},
		{msg: "needs trust_mark_type (or id) and trust_mark", none: byValidate},
		{msg: "must be %s in a federation (there is no secret to register)", none: byValidate},
		{msg: "must be the entity identifier in a federation, or be left out", none: byValidate},
		{msg: "jwks must be a JSON Web Key Set ({\"keys\": [...]})", none: byValidate},
		{msg: "jwks has no key", none: byValidate},
		{msg: "jwks must hold public keys, each with a kid", none: byValidate},
		{msg: "%s.%s: %w", none: byValidate + " (trust_anchors' keys, checked before they are parsed again)"},
		{msg: "a chooser of providers needs a federation and no oidc_issuer", none: "New builds the chooser only for a federation without oidc_issuer"},
		{msg: "%s or %s is needed without oidc_issuer: the providers users may choose", none: "New builds the chooser only when providers or list_providers is set"},
		{msg: "%s: %w", none: byValidate + " (each of providers is an entity identifier)"},
		{msg: "%s %q: extauth serves the entity configuration under the oidc routes, so the entity identifier must be %s (or left out)",
			file: oidcFederation("    entity_id: https://elsewhere.example.org/rp\n"), key: "oidc_additional_settings.federation.entity_id",
			baseURL: "https://app.example.org"},
	}
}

// byFederationKey: federation keys are parsed as the client's are
// (ParseOIDCPrivateKey), which refuses these first, naming the entry.
const byFederationKey = "ParseOIDCPrivateKey refuses such a federation_key first (RSA of 2048 bits or more, EC P-256), a problem Config.Validate reports"

// Every message with which the code that builds the providers can refuse
// a configuration has a row in refusals, and every row a message that is
// still there: the list is read from the code itself.
func TestEveryRefusalOfNewIsListed(t *testing.T) {
	found := refusalsInCode(t)
	if len(found) < 20 {
		t.Fatalf("found only %d messages in the code; the scan is broken: %v", len(found), found)
	}
	listed := map[string]bool{}
	for _, r := range refusals(t) {
		listed[r.msg] = true
		if _, ok := found[r.msg]; !ok {
			t.Errorf("refusals lists %q, which the code no longer says: delete its row", r.msg)
		}
		if (r.file == "") == (r.none == "") {
			t.Errorf("%q: a row has either a file or the reason it has none", r.msg)
		}
	}
	var missing []string
	for msg, at := range found {
		if !listed[msg] {
			missing = append(missing, at+": "+strconv.Quote(msg))
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("New can refuse a configuration with %s, which refusals does not list: add a secrets file that makes it, for extauth check to report, or the reason no file can", m)
	}
}

// Whatever New refuses, check reports as an error, with or without flags:
// for the environment's providers, and for a tenant's, which the
// application builds, and refuses, on the tenant's first request.
func TestCheckReportsEveryRefusalOfNew(t *testing.T) {
	for _, r := range refusals(t) {
		if r.file == "" {
			continue
		}
		t.Run(r.msg, func(t *testing.T) {
			path := writeRaw(t, "secrets.yml", r.file)
			base := r.baseURL
			if base == "" {
				base = "https://app.example.org"
			}
			cfg, _, err := extauth.InspectConfig(path, extauth.LookupEnv(nil))
			if err != nil {
				t.Fatal(err)
			}
			_, err = extauth.New(cfg, appOptions(base))
			if err == nil || !matchesFormat(err.Error(), r.msg) {
				t.Fatalf("New: %v, want a refusal with %q", err, r.msg)
			}
			variants := [][]string{{"-base-url", base}, {"-offline", "-base-url", base}}
			if r.baseURL == "" {
				variants = append(variants, nil, []string{"-offline"})
			}
			for _, flags := range variants {
				out := runAt(t, testNow, append([]string{"check", "-config", path}, flags...)...)
				if out.code != exitFail || !strings.Contains(brokenReasons(out.stdout), r.key) {
					t.Errorf("check %v: exit %d, want %d with a broken provider naming %s:\n%s%s", flags, out.code, exitFail, r.key, out.stdout, out.stderr)
				}
				assertNoSecret(t, "check", out.stdout+out.stderr)
			}

			// The same settings as a tenant's: the application starts,
			// and the tenant fails its sign-ins.
			tpath := writeRaw(t, "tenants.yml", "tenants:\n  city-a:\n"+block(r.file))
			tcfg, _, err := extauth.InspectConfig(tpath, extauth.LookupEnv(nil))
			if err != nil {
				t.Fatal(err)
			}
			o := appOptions(base)
			o.TenantOf = extauth.SubdomainTenants("app.example.org")
			var failed extauth.Code
			o.OnFailure = func(w http.ResponseWriter, _ *http.Request, err *extauth.Error) {
				failed = err.Code
				w.WriteHeader(http.StatusInternalServerError)
			}
			a, err := extauth.New(tcfg, o)
			if err != nil {
				t.Fatalf("New with the settings in a tenant: %v", err)
			}
			defer a.Close()
			provider := tcfg.Tenants["city-a"].Providers()[0]
			req := httptest.NewRequest(http.MethodPost, baseURLFor(base, "city-a")+"/users/auth/"+string(provider), nil)
			req.Header.Set("Sec-Fetch-Site", "same-origin")
			a.ServeHTTP(httptest.NewRecorder(), req)
			if failed != extauth.CodeMisconfigured {
				t.Errorf("the tenant's sign-in failed with %q, want %q", failed, extauth.CodeMisconfigured)
			}
			variants = [][]string{{"-base-url", base}, {"-tenant", "city-a", "-base-url", base}, {"-all-tenants", "-base-url", base}}
			if r.baseURL == "" {
				variants = append(variants, nil, []string{"-offline"}, []string{"-tenant", "city-a"}, []string{"-all-tenants", "-offline"})
			}
			for _, flags := range variants {
				out := runAt(t, testNow, append([]string{"check", "-config", tpath}, flags...)...)
				if out.code != exitFail || !strings.Contains(brokenReasons(out.stdout)+errorLines(out.stdout), r.key) {
					t.Errorf("check %v on the tenant: exit %d, want %d with an error naming %s:\n%s%s", flags, out.code, exitFail, r.key, out.stdout, out.stderr)
				}
			}
		})
	}
}

// appOptions are an application's Options at base, for New.
func appOptions(base string) extauth.Options {
	return extauth.Options{
		BaseURL:    base,
		CookieKey:  make([]byte, 32),
		HTTPClient: &http.Client{Transport: noNetwork()},
		OnSuccess:  func(http.ResponseWriter, *http.Request, *extauth.Identity) {},
	}
}

// brokenReasons returns the reasons of the providers a report lists as
// broken.
func brokenReasons(report string) string {
	var out []string
	for _, p := range extauth.BuiltinProviders() {
		if line := providerLine(report, string(p)); strings.HasPrefix(line, "broken: ") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// errorLines returns the Errors section of a report.
func errorLines(report string) string {
	_, errs, _ := strings.Cut(report, "\nErrors:\n")
	return errs
}

// matchesFormat reports whether s holds the fixed text of format, its verbs
// standing for anything.
func matchesFormat(s, format string) bool {
	parts := regexp.MustCompile(`%[-+# 0-9.]*[a-zA-Z]`).Split(format, -1)
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile(strings.Join(parts, ".*")).MatchString(s)
}

// block indents s as a YAML block scalar's content under a two-level key.
func block(s string) string {
	return indent(strings.TrimSuffix(s, "\n")+"\n", "    ")
}

// otherKeys are PKCS #8 keys no client may have: EC on P-384, Ed25519.
func otherKeys(t *testing.T) (p384, ed string) {
	t.Helper()
	ec, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var out [2]string
	for i, k := range []any{ec, edKey} {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	}
	return out[0], out[1]
}

// ecPair is a matching ECDSA certificate and PKCS #8 key: a pair that
// parses, with a key that is not RSA.
func ecPair(t *testing.T) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ec"},
		NotBefore: testNow.Add(-time.Hour), NotAfter: testNow.Add(365 * 24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk}))
}

// refusalsInCode returns the messages of every error that the code New
// builds providers with can return, each with where it is: the literals of
// errors.New, fmt.Errorf and providers.NewError in New, the methods that
// build a site and a tenant, and every function they call, transitively,
// in the module's packages. Function literals are left out: the
// strategies run them later, on sign-ins, not when they are built.
func refusalsInCode(t *testing.T) map[string]string {
	t.Helper()
	const module = "github.com/extauth/extauth"
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	type fn struct {
		pkg  string // directory, relative to root, "" for the root
		decl *ast.FuncDecl
		file *ast.File
	}
	funcs := map[string][]fn{}    // "dir.Name", methods too
	consts := map[string]string{} // "dir.Name": the string constants, messages shared by two checks
	dirs := []string{""}          // the root package is ""
	for _, top := range []string{"providers", "samlsp", "internal"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				rel, _ := filepath.Rel(root, p)
				dirs = append(dirs, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range dirs {
		files, _ := filepath.Glob(filepath.Join(root, d, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, decl := range af.Decls {
				switch decl := decl.(type) {
				case *ast.FuncDecl:
					funcs[d+"."+decl.Name.Name] = append(funcs[d+"."+decl.Name.Name], fn{d, decl, af})
				case *ast.GenDecl:
					if decl.Tok != token.CONST {
						continue
					}
					for _, spec := range decl.Specs {
						vs := spec.(*ast.ValueSpec)
						for i, v := range vs.Values {
							if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING && i < len(vs.Names) {
								consts[d+"."+vs.Names[i].Name], _ = strconv.Unquote(lit.Value)
							}
						}
					}
				}
			}
		}
	}
	// importedDir is the directory of a package of the module that file
	// imports under name.
	importedDir := func(file *ast.File, name string) (string, bool) {
		for _, im := range file.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			local := p[strings.LastIndex(p, "/")+1:]
			if im.Name != nil {
				local = im.Name.Name
			}
			if local == name && (p == module || strings.HasPrefix(p, module+"/")) {
				return strings.TrimPrefix(strings.TrimPrefix(p, module), "/"), true
			}
		}
		return "", false
	}
	found := map[string]string{}
	// text is the message an expression spells: a literal, or a
	// concatenation whose other operands stand as %s, or a string constant
	// of the package being read (pkg).
	pkg := ""
	var text func(e ast.Expr) (string, bool)
	text = func(e ast.Expr) (string, bool) {
		switch e := e.(type) {
		case *ast.Ident:
			c, ok := consts[pkg+"."+e.Name]
			return c, ok
		case *ast.BasicLit:
			if e.Kind != token.STRING {
				return "", false
			}
			s, err := strconv.Unquote(e.Value)
			return s, err == nil
		case *ast.BinaryExpr:
			if e.Op != token.ADD {
				return "", false
			}
			x, okx := text(e.X)
			y, oky := text(e.Y)
			if !okx && !oky {
				return "", false
			}
			if !okx {
				x = "%s"
			}
			if !oky {
				y = "%s"
			}
			return x + y, true
		case *ast.ParenExpr:
			return text(e.X)
		}
		return "", false
	}
	record := func(arg ast.Expr) {
		if s, ok := text(arg); ok {
			pos := fset.Position(arg.Pos())
			rel, _ := filepath.Rel(root, pos.Filename)
			found[s] = filepath.ToSlash(rel) + ":" + strconv.Itoa(pos.Line)
		}
	}
	roots := []string{".New", ".buildSite", ".buildTenant"}
	seen := map[string]bool{}
	for queue := roots; len(queue) > 0; {
		name := queue[0]
		queue = queue[1:]
		if seen[name] {
			continue
		}
		seen[name] = true
		if slices.Contains(roots, name) && len(funcs[name]) == 0 {
			t.Fatalf("no %s in the root package", name[1:])
		}
		for _, f := range funcs[name] {
			pkg = f.pkg
			helpers := map[string]bool{}
			var visit func(n ast.Node) bool
			visit = func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.FuncLit:
					return false
				case *ast.AssignStmt:
					// add := func(...) {...} is a helper of the
					// function, called while it runs.
					for i, rhs := range n.Rhs {
						if lit, ok := rhs.(*ast.FuncLit); ok && i < len(n.Lhs) {
							if id, local := n.Lhs[i].(*ast.Ident); local {
								helpers[id.Name] = true
								ast.Inspect(lit.Body, visit)
							}
						}
					}
					return true
				case *ast.CallExpr:
					callee := ""
					switch fun := n.Fun.(type) {
					case *ast.Ident:
						callee = f.pkg + "." + fun.Name
						if helpers[fun.Name] {
							// bad(setting, "is missing (...)"): a
							// helper that makes the problem from
							// its arguments; the sentences among
							// them are messages.
							for _, arg := range n.Args {
								if s, ok := text(arg); ok && strings.Contains(s, " ") {
									record(arg)
								}
							}
						}
					case *ast.SelectorExpr:
						x, ok := fun.X.(*ast.Ident)
						if !ok {
							break
						}
						if dir, ok := importedDir(f.file, x.Name); ok {
							callee = dir + "." + fun.Sel.Name
						} else if (x.Name == "errors" && fun.Sel.Name == "New" || x.Name == "fmt" && fun.Sel.Name == "Errorf") && len(n.Args) > 0 {
							record(n.Args[0])
						} else if f.pkg == "" {
							// A method of the root package, such as
							// a.buildSite: followed by its name.
							callee = "." + fun.Sel.Name
						}
					}
					if callee == "providers.NewError" && len(n.Args) > 1 {
						record(n.Args[1])
					}
					if _, ok := funcs[callee]; ok && !seen[callee] {
						queue = append(queue, callee)
					}
				}
				return true
			}
			ast.Inspect(f.decl.Body, visit)
		}
	}
	return found
}
