package enterprise

import "strings"

// The discovery documents the fakes serve, as each provider serves its
// own: the bytes of a live response, keys in the provider's order,
// compact or indented as it writes them, with only the tenant's host
// (and Okta's authorization server ID) standing for the fake's. Each
// fake swaps the provider's hosts for its own and nothing else.

// entraV2Common is https://login.microsoftonline.com/common/v2.0/.well-known/openid-configuration.
const entraV2Common = `{"token_endpoint":"https://login.microsoftonline.com/common/oauth2/v2.0/token","token_endpoint_auth_methods_supported":["client_secret_post","private_key_jwt","client_secret_basic"],"jwks_uri":"https://login.microsoftonline.com/common/discovery/v2.0/keys","response_modes_supported":["query","fragment","form_post"],"subject_types_supported":["pairwise"],"id_token_signing_alg_values_supported":["RS256"],"response_types_supported":["code","id_token","code id_token","id_token token"],"scopes_supported":["openid","profile","email","offline_access"],"issuer":"https://login.microsoftonline.com/{tenantid}/v2.0","request_uri_parameter_supported":false,"userinfo_endpoint":"https://graph.microsoft.com/oidc/userinfo","authorization_endpoint":"https://login.microsoftonline.com/common/oauth2/v2.0/authorize","device_authorization_endpoint":"https://login.microsoftonline.com/common/oauth2/v2.0/devicecode","http_logout_supported":true,"frontchannel_logout_supported":true,"end_session_endpoint":"https://login.microsoftonline.com/common/oauth2/v2.0/logout","claims_supported":["sub","iss","cloud_instance_name","cloud_instance_host_name","cloud_graph_host_name","msgraph_host","aud","exp","iat","auth_time","acr","nonce","preferred_username","name","tid","ver","at_hash","c_hash","email"],"kerberos_endpoint":"https://login.microsoftonline.com/common/kerberos","tenant_region_scope":null,"cloud_instance_name":"microsoftonline.com","cloud_graph_host_name":"graph.windows.net","msgraph_host":"graph.microsoft.com","rbac_url":"https://pas.windows.net"}`

// entraV1Common is https://login.microsoftonline.com/common/.well-known/openid-configuration:
// the v1 endpoint's, whose issuer is its security token service's.
const entraV1Common = `{"token_endpoint":"https://login.microsoftonline.com/common/oauth2/token","token_endpoint_auth_methods_supported":["client_secret_post","private_key_jwt","client_secret_basic"],"jwks_uri":"https://login.microsoftonline.com/common/discovery/keys","response_modes_supported":["query","fragment","form_post"],"subject_types_supported":["pairwise"],"id_token_signing_alg_values_supported":["RS256"],"response_types_supported":["code","id_token","code id_token","token id_token","token"],"scopes_supported":["openid"],"issuer":"https://sts.windows.net/{tenantid}/","microsoft_multi_refresh_token":true,"authorization_endpoint":"https://login.microsoftonline.com/common/oauth2/authorize","device_authorization_endpoint":"https://login.microsoftonline.com/common/oauth2/devicecode","http_logout_supported":true,"frontchannel_logout_supported":true,"end_session_endpoint":"https://login.microsoftonline.com/common/oauth2/logout","claims_supported":["sub","iss","cloud_instance_name","cloud_instance_host_name","cloud_graph_host_name","msgraph_host","aud","exp","iat","auth_time","acr","amr","nonce","email","given_name","family_name","nickname"],"check_session_iframe":"https://login.microsoftonline.com/common/oauth2/checksession","userinfo_endpoint":"https://login.microsoftonline.com/common/openid/userinfo","kerberos_endpoint":"https://login.microsoftonline.com/common/kerberos","tenant_region_scope":null,"cloud_instance_name":"microsoftonline.com","cloud_graph_host_name":"graph.windows.net","msgraph_host":"graph.microsoft.com","rbac_url":"https://pas.windows.net"}`

// entraDocument is the discovery document of an Entra ID authority:
// common's with the authority in its paths, and for one tenant (tenant,
// a tenant ID, else "") its issuer and region; the hosts are the
// fake's.
func entraDocument(v1 bool, authority, tenant, region, login, graph, graphHost string) []byte {
	doc := entraV2Common
	if v1 {
		doc = entraV1Common
	}
	doc = strings.ReplaceAll(doc, "https://login.microsoftonline.com/common/", "https://login.microsoftonline.com/"+authority+"/")
	if tenant != "" {
		doc = strings.Replace(doc, "{tenantid}", tenant, 1)
		doc = strings.Replace(doc, `"tenant_region_scope":null`, `"tenant_region_scope":"`+region+`"`, 1)
	}
	doc = strings.ReplaceAll(doc, "https://login.microsoftonline.com", login)
	doc = strings.ReplaceAll(doc, "https://graph.microsoft.com", graph)
	doc = strings.Replace(doc, `"msgraph_host":"graph.microsoft.com"`, `"msgraph_host":"`+graphHost+`"`, 1)
	return []byte(doc)
}

// oktaCustom is a custom authorization server's
// https://<domain>/oauth2/<id>/.well-known/openid-configuration, the
// server ID standing as {id}.
const oktaCustom = `{"issuer":"https://dev-example.okta.com/oauth2/{id}","authorization_endpoint":"https://dev-example.okta.com/oauth2/{id}/v1/authorize","token_endpoint":"https://dev-example.okta.com/oauth2/{id}/v1/token","userinfo_endpoint":"https://dev-example.okta.com/oauth2/{id}/v1/userinfo","registration_endpoint":"https://dev-example.okta.com/oauth2/v1/clients","jwks_uri":"https://dev-example.okta.com/oauth2/{id}/v1/keys","response_types_supported":["code","id_token","code id_token","code token","id_token token","code id_token token"],"response_modes_supported":["query","fragment","form_post","okta_post_message"],"grant_types_supported":["authorization_code","implicit","refresh_token","password","urn:ietf:params:oauth:grant-type:device_code","urn:openid:params:grant-type:ciba","urn:okta:params:oauth:grant-type:otp","http://auth0.com/oauth/grant-type/mfa-otp","urn:okta:params:oauth:grant-type:oob","http://auth0.com/oauth/grant-type/mfa-oob"],"subject_types_supported":["public"],"id_token_signing_alg_values_supported":["RS256"],"id_token_encryption_alg_values_supported":["RSA-OAEP-256","RSA-OAEP-384","RSA-OAEP-512"],"id_token_encryption_enc_values_supported":["A256GCM"],"scopes_supported":["openid","profile","email","address","phone","offline_access","device_sso","interclient_access"],"token_endpoint_auth_methods_supported":["client_secret_basic","client_secret_post","client_secret_jwt","private_key_jwt","none"],"claims_supported":["iss","ver","sub","aud","iat","exp","jti","auth_time","amr","idp","nonce","name","nickname","preferred_username","given_name","middle_name","family_name","email","email_verified","profile","zoneinfo","locale","address","phone_number","picture","website","gender","birthdate","updated_at","at_hash","c_hash"],"code_challenge_methods_supported":["S256"],"introspection_endpoint":"https://dev-example.okta.com/oauth2/{id}/v1/introspect","introspection_endpoint_auth_methods_supported":["client_secret_basic","client_secret_post","client_secret_jwt","private_key_jwt","none"],"revocation_endpoint":"https://dev-example.okta.com/oauth2/{id}/v1/revoke","revocation_endpoint_auth_methods_supported":["client_secret_basic","client_secret_post","client_secret_jwt","private_key_jwt","none"],"end_session_endpoint":"https://dev-example.okta.com/oauth2/{id}/v1/logout","request_parameter_supported":true,"request_object_signing_alg_values_supported":["HS256","HS384","HS512","RS256","RS384","RS512","ES256","ES384","ES512"],"device_authorization_endpoint":"https://dev-example.okta.com/oauth2/{id}/v1/device/authorize","pushed_authorization_request_endpoint":"https://dev-example.okta.com/oauth2/{id}/v1/par","backchannel_token_delivery_modes_supported":["poll"],"backchannel_authentication_request_signing_alg_values_supported":["HS256","HS384","HS512","RS256","RS384","RS512","ES256","ES384","ES512"],"dpop_signing_alg_values_supported":["RS256","RS384","RS512","ES256","ES384","ES512"]}`

// oktaDocument is the discovery document of the org authorization server
// (id "") or of the custom one id: the org's has the custom one's shape,
// its endpoints under /oauth2/v1 and its issuer the domain alone.
func oktaDocument(id, base string) []byte {
	doc := oktaCustom
	if id == "" {
		doc = strings.ReplaceAll(doc, "https://dev-example.okta.com/oauth2/{id}/v1/", "https://dev-example.okta.com/oauth2/v1/")
		doc = strings.Replace(doc, `"issuer":"https://dev-example.okta.com/oauth2/{id}"`, `"issuer":"https://dev-example.okta.com"`, 1)
	}
	doc = strings.ReplaceAll(doc, "{id}", id)
	return []byte(strings.ReplaceAll(doc, "https://dev-example.okta.com", base))
}

// auth0Tenant is https://<tenant>/.well-known/openid-configuration of a
// tenant whose "RP-Initiated Logout End Session Endpoint Discovery" is
// on; auth0EndSession is what that setting adds.
const (
	auth0Tenant     = `{"issuer":"https://dev-example.us.auth0.com/","authorization_endpoint":"https://dev-example.us.auth0.com/authorize","token_endpoint":"https://dev-example.us.auth0.com/oauth/token","device_authorization_endpoint":"https://dev-example.us.auth0.com/oauth/device/code","userinfo_endpoint":"https://dev-example.us.auth0.com/userinfo","mfa_challenge_endpoint":"https://dev-example.us.auth0.com/mfa/challenge","jwks_uri":"https://dev-example.us.auth0.com/.well-known/jwks.json","registration_endpoint":"https://dev-example.us.auth0.com/oidc/register","revocation_endpoint":"https://dev-example.us.auth0.com/oauth/revoke","scopes_supported":["openid","profile","offline_access","name","given_name","family_name","nickname","email","email_verified","picture","created_at","identities","phone","address"],"response_types_supported":["code","token","id_token","code token","code id_token","token id_token","code token id_token"],"code_challenge_methods_supported":["S256","plain"],"response_modes_supported":["query","fragment","form_post"],"subject_types_supported":["public"],"token_endpoint_auth_methods_supported":["client_secret_basic","client_secret_post","private_key_jwt"],"token_endpoint_auth_signing_alg_values_supported":["RS256","RS384","PS256"],"claims_supported":["aud","auth_time","created_at","email","email_verified","exp","family_name","given_name","iat","identities","iss","name","nickname","phone_number","picture","sub"],"request_uri_parameter_supported":false,"request_parameter_supported":false,"backchannel_authentication_endpoint":"https://dev-example.us.auth0.com/bc-authorize","backchannel_token_delivery_modes_supported":["poll"],"id_token_signing_alg_values_supported":["HS256","RS256","PS256"],"end_session_endpoint":"https://dev-example.us.auth0.com/oidc/logout","global_token_revocation_endpoint":"https://dev-example.us.auth0.com/oauth/global-token-revocation/connection/{connectionName}","global_token_revocation_endpoint_auth_methods_supported":["global-token-revocation+jwt"],"dpop_signing_alg_values_supported":["ES256"]}`
	auth0EndSession = `"end_session_endpoint":"https://dev-example.us.auth0.com/oidc/logout",`
)

// auth0Document is the tenant's discovery document at base, with or
// without the end_session_endpoint.
func auth0Document(base string, endSession bool) []byte {
	doc := auth0Tenant
	if !endSession {
		doc = strings.Replace(doc, auth0EndSession, "", 1)
	}
	return []byte(strings.ReplaceAll(doc, "https://dev-example.us.auth0.com", base))
}

// google is https://accounts.google.com/.well-known/openid-configuration,
// indented as Google serves it.
const google = `{
 "issuer": "https://accounts.google.com",
 "authorization_endpoint": "https://accounts.google.com/o/oauth2/v2/auth",
 "device_authorization_endpoint": "https://oauth2.googleapis.com/device/code",
 "token_endpoint": "https://oauth2.googleapis.com/token",
 "userinfo_endpoint": "https://openidconnect.googleapis.com/v1/userinfo",
 "revocation_endpoint": "https://oauth2.googleapis.com/revoke",
 "jwks_uri": "https://www.googleapis.com/oauth2/v3/certs",
 "response_types_supported": [
  "code",
  "token",
  "id_token",
  "code token",
  "code id_token",
  "token id_token",
  "code token id_token",
  "none"
 ],
 "subject_types_supported": [
  "public"
 ],
 "id_token_signing_alg_values_supported": [
  "RS256"
 ],
 "scopes_supported": [
  "openid",
  "email",
  "profile"
 ],
 "token_endpoint_auth_methods_supported": [
  "client_secret_post",
  "client_secret_basic"
 ],
 "claims_supported": [
  "aud",
  "email",
  "email_verified",
  "exp",
  "family_name",
  "given_name",
  "iat",
  "iss",
  "locale",
  "name",
  "picture",
  "sub"
 ],
 "code_challenge_methods_supported": [
  "plain",
  "S256"
 ],
 "grant_types_supported": [
  "authorization_code",
  "refresh_token",
  "urn:ietf:params:oauth:grant-type:device_code",
  "urn:ietf:params:oauth:grant-type:jwt-bearer"
 ]
}
`

// googleDocument is Google's discovery document with each of its hosts
// the fake's base.
func googleDocument(base string) []byte {
	doc := google
	for _, host := range []string{"https://accounts.google.com", "https://oauth2.googleapis.com", "https://openidconnect.googleapis.com", "https://www.googleapis.com"} {
		doc = strings.ReplaceAll(doc, host, base)
	}
	return []byte(doc)
}
