// A SAML identity provider built on samlify, for extauth's interop tests
// (Go build tag "interop"). It is an independent, non-Go implementation:
// it verifies our signed AuthnRequests itself, and signs (and, on request,
// encrypts) its responses with xml-crypto and xml-encryption.
//
// Usage: node idp.js <idp-key.pem> <idp-cert.pem>
// It listens on 127.0.0.1 on a free port and prints "listening <base-url>".
//
//   GET  /metadata            the IdP metadata
//   POST /register?encrypt=1  body: the SP metadata XML; encrypt=1 makes
//                             every later response carry an
//                             EncryptedAssertion for that SP
//   GET  /sso                 HTTP-Redirect AuthnRequest in, HTTP-POST
//                             Response out (an auto-submitting form)
'use strict';

const http = require('http');
const fs = require('fs');
const samlify = require('samlify');
const validator = require('@authenio/samlify-node-xmllint');

samlify.setSchemaValidator(validator);

const [keyPath, certPath] = process.argv.slice(2);
const privateKey = fs.readFileSync(keyPath, 'utf8');
const signingCert = fs.readFileSync(certPath, 'utf8');

const user = {
  email: 'grace@example.org',
  givenName: 'Grace',
  surname: 'Hopper',
  displayName: 'Grace Hopper',
};

// samlify's default template has no AuthnStatement, which the Web Browser
// SSO profile requires (Profiles 4.1.4.2) and extauth enforces; this one adds
// it and the user's attributes.
const template = '<samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" ID="{ID}" Version="2.0" IssueInstant="{IssueInstant}" Destination="{Destination}" InResponseTo="{InResponseTo}">' +
  '<saml:Issuer>{Issuer}</saml:Issuer><samlp:Status><samlp:StatusCode Value="urn:oasis:names:tc:SAML:2.0:status:Success"/></samlp:Status>' +
  '<saml:Assertion xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns:xs="http://www.w3.org/2001/XMLSchema" ID="{AssertionID}" Version="2.0" IssueInstant="{IssueInstant}">' +
  '<saml:Issuer>{Issuer}</saml:Issuer>' +
  '<saml:Subject><saml:NameID Format="urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress">{NameID}</saml:NameID>' +
  '<saml:SubjectConfirmation Method="urn:oasis:names:tc:SAML:2.0:cm:bearer"><saml:SubjectConfirmationData NotOnOrAfter="{NotOnOrAfter}" Recipient="{Destination}" InResponseTo="{InResponseTo}"/></saml:SubjectConfirmation></saml:Subject>' +
  '<saml:Conditions NotBefore="{IssueInstant}" NotOnOrAfter="{NotOnOrAfter}"><saml:AudienceRestriction><saml:Audience>{Audience}</saml:Audience></saml:AudienceRestriction></saml:Conditions>' +
  '<saml:AuthnStatement AuthnInstant="{IssueInstant}" SessionIndex="{SessionIndex}"><saml:AuthnContext><saml:AuthnContextClassRef>urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport</saml:AuthnContextClassRef></saml:AuthnContext></saml:AuthnStatement>' +
  '<saml:AttributeStatement>' +
  '<saml:Attribute Name="email" NameFormat="urn:oasis:names:tc:SAML:2.0:attrname-format:basic"><saml:AttributeValue xsi:type="xs:string">{Email}</saml:AttributeValue></saml:Attribute>' +
  '<saml:Attribute Name="http://schemas.xmlsoap.org/ws/2005/05/identity/claims/givenname"><saml:AttributeValue xsi:type="xs:string">{GivenName}</saml:AttributeValue></saml:Attribute>' +
  '<saml:Attribute Name="http://schemas.xmlsoap.org/ws/2005/05/identity/claims/surname"><saml:AttributeValue xsi:type="xs:string">{Surname}</saml:AttributeValue></saml:Attribute>' +
  '<saml:Attribute Name="displayName"><saml:AttributeValue xsi:type="xs:string">{DisplayName}</saml:AttributeValue></saml:Attribute>' +
  '</saml:AttributeStatement></saml:Assertion></samlp:Response>';

function xmlEscape(s) {
  return String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function htmlEscape(s) {
  return xmlEscape(s).replace(/'/g, '&#39;');
}

let base = '';
let sp = null;
let encrypt = false;
let idp = null;
let counter = 0;

function makeIdP() {
  return samlify.IdentityProvider({
    entityID: base + '/metadata',
    privateKey,
    signingCert,
    encryptCert: signingCert,
    encPrivateKey: privateKey,
    wantAuthnRequestsSigned: true,
    isAssertionEncrypted: encrypt,
    dataEncryptionAlgorithm: 'http://www.w3.org/2001/04/xmlenc#aes256-cbc',
    keyEncryptionAlgorithm: 'http://www.w3.org/2001/04/xmlenc#rsa-oaep-mgf1p',
    requestSignatureAlgorithm: 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha256',
    singleSignOnService: [{ Binding: 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect', Location: base + '/sso' }],
    loginResponseTemplate: { context: template, attributes: [] },
  });
}

// octetString rebuilds what the HTTP-Redirect binding signs: the raw,
// still-encoded SAMLRequest, RelayState and SigAlg, in that order.
function octetString(rawQuery) {
  const raw = {};
  for (const kv of rawQuery.split('&')) {
    const i = kv.indexOf('=');
    raw[i < 0 ? kv : kv.slice(0, i)] = i < 0 ? '' : kv.slice(i + 1);
  }
  let s = 'SAMLRequest=' + raw.SAMLRequest;
  if (raw.RelayState !== undefined) s += '&RelayState=' + raw.RelayState;
  return s + '&SigAlg=' + raw.SigAlg;
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on('data', (c) => {
      size += c.length;
      if (size > 1 << 20) reject(new Error('body too large'));
      else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

async function handle(req, res) {
  const u = new URL(req.url, base);
  if (req.method === 'GET' && u.pathname === '/metadata') {
    res.writeHead(200, { 'Content-Type': 'application/samlmetadata+xml' });
    return res.end(idp.getMetadata());
  }
  if (req.method === 'POST' && u.pathname === '/register') {
    encrypt = u.searchParams.get('encrypt') === '1';
    sp = samlify.ServiceProvider({ metadata: await readBody(req) });
    idp = makeIdP();
    res.writeHead(204);
    return res.end();
  }
  if (req.method === 'GET' && u.pathname === '/sso') {
    if (!sp) throw new Error('no SP registered');
    const rawQuery = req.url.slice(req.url.indexOf('?') + 1);
    const query = Object.fromEntries(u.searchParams);
    // Throws unless the AuthnRequest signature verifies with the SP's
    // metadata certificate (wantAuthnRequestsSigned).
    const info = await idp.parseLoginRequest(sp, 'redirect', { query, octetString: octetString(rawQuery) });
    const acs = sp.entityMeta.getAssertionConsumerService('post');
    const now = new Date();
    const later = new Date(now.getTime() + 5 * 60 * 1000);
    counter += 1;
    const values = {
      ID: '_resp' + Date.now() + counter,
      AssertionID: '_assert' + Date.now() + counter,
      IssueInstant: now.toISOString(),
      NotOnOrAfter: later.toISOString(),
      Destination: acs,
      InResponseTo: info.extract.request.id,
      Issuer: base + '/metadata',
      Audience: sp.entityMeta.getEntityID(),
      NameID: user.email,
      SessionIndex: '_session' + counter,
      Email: user.email,
      GivenName: user.givenName,
      Surname: user.surname,
      DisplayName: user.displayName,
    };
    const out = await idp.createLoginResponse(sp, info, 'post', user, (tpl) => ({
      id: values.ID,
      context: tpl.replace(/\{(\w+)\}/g, (m, k) => (k in values ? xmlEscape(values[k]) : m)),
    }));
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
    return res.end('<!doctype html><html><body onload="document.forms[0].submit()">' +
      '<form method="post" action="' + htmlEscape(out.entityEndpoint) + '">' +
      '<input type="hidden" name="SAMLResponse" value="' + htmlEscape(out.context) + '">' +
      '<input type="hidden" name="RelayState" value="' + htmlEscape(query.RelayState || '') + '">' +
      '</form></body></html>');
  }
  res.writeHead(404);
  res.end('not found');
}

const server = http.createServer((req, res) => {
  handle(req, res).catch((err) => {
    console.error('samlify idp:', err && err.message ? err.message : err);
    if (!res.headersSent) res.writeHead(400, { 'Content-Type': 'text/plain' });
    res.end('bad request: ' + String(err && err.message ? err.message : err));
  });
});

server.listen(0, '127.0.0.1', () => {
  base = 'http://127.0.0.1:' + server.address().port;
  idp = makeIdP();
  console.log('listening ' + base);
});

// The test ends the process by closing its stdin.
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
