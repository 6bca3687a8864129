// Starts the certified oidc-provider on 127.0.0.1 for extauth's interop
// tests. Configuration comes from the environment:
//
//   SIGNING_KEYS  JSON array of the provider's private signing keys, as
//                 JWKs with kid, use and alg (required)
//   CLIENTS       JSON array of client metadata: client_id, client_secret,
//                 redirect_uris, token_endpoint_auth_method, and for logout
//                 post_logout_redirect_uris, backchannel_logout_uri,
//                 backchannel_logout_session_required
//   AUTH_METHODS  comma-separated token endpoint auth methods to support
//                 (default: oidc-provider's own list)
//   ACR_VALUES    space-separated acr values the provider supports: a login
//                 is asserted at the first of the client's acr_values
//                 among them, as a provider that honours acr_values does,
//                 and at none when it asked for none of them
//   HIGH_ASSURANCE when set, a high-assurance provider: private_key_jwt
//                 the only client authentication, pushed authorization
//                 requests (RFC 9126) and signed request objects (RFC
//                 9101) required, encryption of ID tokens and UserInfo
//                 enabled (the client metadata chooses its algorithms)
//   FAPI2         when set, a FAPI 2.0 Security Profile provider
//                 (features.fapi profile '2.0'): pushed authorization
//                 requests required, private_key_jwt with the issuer as
//                 the assertions' audience, PKCE, DPoP with server nonces
//                 required on every request (the client metadata sets
//                 dpop_bound_access_tokens), and JWT-secured authorization
//                 responses (JARM) for clients that ask for them
//   MTLS          when set, served over https with TLS_CERT and TLS_KEY
//                 (PEM), asking every client for a certificate, which
//                 must chain to TLS_CA for tls_client_auth: mutual TLS
//                 (RFC 8705) client authentication (tls_client_auth,
//                 self_signed_tls_client_auth) and certificate-bound
//                 access tokens
//
// When it listens, it prints one JSON line {"issuer": "..."} to stdout. It
// exits when stdin closes, so it never outlives the test that started it.
import { randomBytes, X509Certificate } from 'node:crypto';
import { createServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import Provider from 'oidc-provider';

const clients = JSON.parse(process.env.CLIENTS || '[]').map((c) => ({
  grant_types: ['authorization_code', 'refresh_token'],
  response_types: ['code'],
  ...c,
}));

// The signing keys, private JWKs with kid, use and alg (two, so that an
// ID token must name its key), come from the test. Node 20's crypto
// deadlocks now and then when a generated key pair is exported as a JWK
// while a collection finalizes the generation's job (the main thread
// waits on a mutex it holds: KeyGenJob's destructor inside
// ExportJWKRsaKey), which hung one start in twenty-five here; a process
// that generates no key has no such job.
const keys = JSON.parse(process.env.SIGNING_KEYS || '[]');
if (keys.length === 0) {
  process.stderr.write('SIGNING_KEYS: no signing key\n');
  process.exit(2);
}

const users = {
  alice: {
    email: 'alice@example.org', email_verified: true, name: 'Alice Example',
    given_name: 'Alice', family_name: 'Example', preferred_username: 'alice',
    picture: 'https://example.org/alice.png',
  },
};

const configuration = {
  clients,
  jwks: { keys },
  cookies: { keys: [randomBytes(32).toString('hex')] },
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name', 'given_name', 'family_name', 'preferred_username', 'picture'],
  },
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: true },
    rpInitiatedLogout: { enabled: true },
    backchannelLogout: { enabled: true },
    revocation: { enabled: true },
  },
  // The provider refuses outbound requests to special-use addresses such
  // as loopback, where the tests serve the client's back-channel logout
  // URI; lift that for them only.
  fetch: (url, options) => {
    const { dispatcher, ...rest } = options;
    return globalThis.fetch(url, rest);
  },
  async findAccount(_ctx, id) {
    return {
      accountId: id,
      async claims() {
        return { sub: id, ...(users[id] || { email: `${id}@example.org`, email_verified: false, name: id }) };
      },
    };
  },
};
if (process.env.AUTH_METHODS) {
  configuration.clientAuthMethods = process.env.AUTH_METHODS.split(',');
}
if (process.env.HIGH_ASSURANCE) {
  configuration.clientAuthMethods = ['private_key_jwt'];
  configuration.features.pushedAuthorizationRequests = {
    enabled: true,
    requirePushedAuthorizationRequests: true,
  };
  configuration.features.requestObjects = {
    enabled: true,
    requireSignedRequestObject: true,
  };
  configuration.features.encryption = { enabled: true };
}

const acrValues = (process.env.ACR_VALUES || '').split(' ').filter(Boolean);
if (acrValues.length) {
  configuration.acrValues = acrValues;
}

// honourACR finishes a devInteractions login itself, with the acr the
// client asked for when the provider supports it (devInteractions asserts
// none).
async function honourACR(provider, ctx, next) {
  if (!acrValues.length || ctx.method !== 'POST' || !/^\/interaction\/[^/]+$/.test(ctx.path)) {
    return next();
  }
  const chunks = [];
  for await (const chunk of ctx.req) {
    chunks.push(chunk);
  }
  const raw = Buffer.concat(chunks).toString();
  // devInteractions reads the body parsed already.
  ctx.req.body = raw;
  const body = new URLSearchParams(raw);
  if (body.get('prompt') !== 'login') {
    return next();
  }
  const { params } = await provider.interactionDetails(ctx.req, ctx.res);
  const acr = (params.acr_values || '').split(' ').find((v) => acrValues.includes(v));
  ctx.respond = false;
  await provider.interactionFinished(ctx.req, ctx.res, {
    login: { accountId: body.get('login'), acr },
  }, { mergeWithLastSubmission: false });
}

if (process.env.FAPI2) {
  configuration.clientAuthMethods = ['private_key_jwt'];
  configuration.features.fapi = { enabled: true, profile: '2.0' };
  configuration.features.pushedAuthorizationRequests = {
    enabled: true,
    requirePushedAuthorizationRequests: true,
  };
  configuration.features.dPoP = {
    enabled: true,
    nonceSecret: randomBytes(32),
    requireNonce: () => true,
  };
  configuration.features.jwtResponseModes = { enabled: true };
  configuration.features.requestObjects = { enabled: true };
  configuration.features.encryption = { enabled: true };
  configuration.enabledJWA = {
    dPoPSigningAlgValues: ['ES256', 'PS256', 'EdDSA'],
    clientAuthSigningAlgValues: ['PS256', 'ES256', 'EdDSA'],
    idTokenSigningAlgValues: ['PS256', 'ES256', 'EdDSA'],
    authorizationSigningAlgValues: ['PS256', 'ES256', 'EdDSA'],
    requestObjectSigningAlgValues: ['PS256', 'ES256', 'EdDSA'],
    userinfoSigningAlgValues: ['PS256', 'ES256', 'EdDSA'],
  };
}

// The client certificate the connection presented, if any. Its subject is
// compared as RFC 4514 (and Go's pkix.Name.String()) writes it: the
// attributes last to first.
function peerCertificate(ctx) {
  const peer = ctx.socket.getPeerCertificate();
  return peer && peer.raw ? new X509Certificate(peer.raw) : undefined;
}
if (process.env.MTLS) {
  configuration.clientAuthMethods = [
    ...(configuration.clientAuthMethods || ['private_key_jwt']),
    'tls_client_auth', 'self_signed_tls_client_auth',
  ];
  configuration.features.mTLS = {
    enabled: true,
    certificateBoundAccessTokens: true,
    tlsClientAuth: true,
    selfSignedTlsClientAuth: true,
    getCertificate: peerCertificate,
    certificateAuthorized: (ctx) => ctx.socket.authorized,
    certificateSubjectMatches: (ctx, property, expected) => property === 'tls_client_auth_subject_dn'
      && peerCertificate(ctx)?.subject.split('\n').reverse().join(',') === expected,
  };
}

const server = process.env.MTLS
  ? createHttpsServer({
    cert: process.env.TLS_CERT,
    key: process.env.TLS_KEY,
    ca: process.env.TLS_CA,
    requestCert: true,
    rejectUnauthorized: false,
  })
  : createServer();
server.listen(0, '127.0.0.1', () => {
  const scheme = process.env.MTLS ? 'https' : 'http';
  const issuer = `${scheme}://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, configuration);
  provider.use((ctx, next) => honourACR(provider, ctx, next));
  provider.on('backchannel.error', (_ctx, err, client) => {
    process.stderr.write(`backchannel.error ${client.clientId}: ${err.message}\n`);
  });
  // What the provider refused, and why, for the test's log when it fails.
  for (const event of ['pushed_authorization_request.error', 'authorization.error', 'grant.error',
    'userinfo.error', 'revocation.error', 'server_error']) {
    provider.on(event, (_ctx, err) => {
      process.stderr.write(`${event}: ${err.message} ${err.error_description || ''}\n`);
    });
  }
  server.on('request', provider.callback());
  process.stdout.write(`${JSON.stringify({ issuer })}\n`);
});

process.stdin.on('end', () => process.exit(0));
process.stdin.on('close', () => process.exit(0));
process.stdin.resume();
