#!/usr/bin/python3
"""pysaml2 as a SAML 2.0 IdP that answers by artifact, for extauth's
interop suite (interop/pysaml2_test.go).

It runs Debian's python3-pysaml2 with the standard library's WSGI server on
a free loopback port, which it prints as "listening on PORT", behind the
test's TLS front. Everything SAML is pysaml2's: the metadata, reading the
AuthnRequest, the signed (and, when asked, encrypted) Response, the type
0x0004 artifact (Server.use_artifact), the ArtifactResponse
(Server.create_artifact_response, signed with Server.sign when asked) and
the SOAP envelope (Server.apply_binding); the script only routes requests
and signs in one test user without a login page.

Usage: idp.py SETTINGS.json, where the test writes
  base            the URL the IdP is reached at (the front), its entity ID
                  is base + "/metadata"
  key, cert       the IdP's key pair (PEM files)
  sp_metadata     the SP's metadata file, read on the first sign-in
and, read again on every request, so that a test can change them:
  sign_artifact_response  sign the ArtifactResponse (pysaml2 leaves it
                          unsigned by default), and put it in a SOAP
                          envelope as signed
  pysaml2_envelope        with sign_artifact_response, let pysaml2's SOAP
                          binding write the envelope, which breaks the
                          signature
  encrypt                 encrypt the assertion to the SP's certificate
"""

import json
import sys
import threading
import traceback
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, make_server

from saml2 import BINDING_HTTP_ARTIFACT, BINDING_HTTP_REDIRECT, BINDING_SOAP
from saml2.config import IdPConfig
from saml2.metadata import entity_descriptor
from saml2.saml import NAMEID_FORMAT_EMAILADDRESS, NameID
from saml2.samlp import response_from_string
from saml2.server import Server

SETTINGS = sys.argv[1]
# pysaml2 7.0 signs with RSA-SHA1 and SHA-1 digests unless told otherwise
# at each call.
SIGN_ALG = "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"
DIGEST_ALG = "http://www.w3.org/2001/04/xmlenc#sha256"

USER = {
    "uid": ["alan"],
    "mail": ["alan@example.org"],
    "givenName": ["Alan"],
    "sn": ["Turing"],
    "displayName": ["Alan Turing"],
}


def settings():
    with open(SETTINGS) as f:
        return json.load(f)


def config(with_sp):
    s = settings()
    base = s["base"]
    c = {
        "entityid": base + "/metadata",
        "service": {
            "idp": {
                "endpoints": {
                    "single_sign_on_service": [(base + "/sso", BINDING_HTTP_REDIRECT)],
                    "artifact_resolution_service": [(base + "/ars", BINDING_SOAP, 0)],
                },
                "name_id_format": [NAMEID_FORMAT_EMAILADDRESS],
                "policy": {"default": {"lifetime": {"minutes": 15}, "attribute_restrictions": None,
                                       "name_form": "urn:oasis:names:tc:SAML:2.0:attrname-format:uri"}},
                "sign_response": False,
                "sign_assertion": True,
            }
        },
        "key_file": s["key"],
        "cert_file": s["cert"],
        "encryption_keypairs": [{"key_file": s["key"], "cert_file": s["cert"]}],
        "xmlsec_binary": "/usr/bin/xmlsec1",
    }
    if with_sp:
        c["metadata"] = {"local": [s["sp_metadata"]]}
    conf = IdPConfig()
    conf.load(c)
    return conf


lock = threading.Lock()
server = None


def idp():
    """The IdP, made on first use: the SP's metadata exists only once the
    test has configured the SP against this IdP's."""
    global server
    with lock:
        if server is None:
            server = Server(config=config(True))
        return server


def metadata(environ):
    return "200 OK", [("Content-Type", "application/samlmetadata+xml")], str(entity_descriptor(config(False))).encode()


def sso(environ):
    q = parse_qs(environ.get("QUERY_STRING", ""))
    s = settings()
    p = idp()
    req = p.parse_authn_request(q["SAMLRequest"][0], BINDING_HTTP_REDIRECT).message
    # The ACS of the binding the request asks for, from the SP's metadata.
    args = p.response_args(req, [req.protocol_binding or BINDING_HTTP_ARTIFACT])
    if args["binding"] != BINDING_HTTP_ARTIFACT:
        return "400 Bad Request", [("Content-Type", "text/plain")], b"this IdP answers by artifact only"
    resp = p.create_authn_response(
        USER,
        in_response_to=args["in_response_to"],
        destination=args["destination"],
        sp_entity_id=args["sp_entity_id"],
        name_id=NameID(format=NAMEID_FORMAT_EMAILADDRESS, text=USER["mail"][0]),
        authn={"class_ref": "urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport"},
        sign_assertion=True,
        sign_response=False,
        encrypt_assertion=bool(s.get("encrypt")),
        encrypt_cert_assertion=None,
        sign_alg=SIGN_ALG,
        digest_alg=DIGEST_ALG,
    )
    # The Response as an element, which create_artifact_response puts in
    # the ArtifactResponse.
    art = p.use_artifact(response_from_string(str(resp)), 0)
    info = p.apply_binding(BINDING_HTTP_ARTIFACT, art, args["destination"], q.get("RelayState", [""])[0], response=True)
    return "302 Found", [("Location", info["url"])], b""


def ars(environ):
    s = settings()
    p = idp()
    body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    req = p.parse_artifact_resolve(body.decode())
    resp = p.create_artifact_response(req, req.artifact.text, sign=False)
    if not s.get("sign_artifact_response"):
        info = p.apply_binding(BINDING_SOAP, str(resp), response=True)
        return "200 OK", [("Content-Type", "text/xml; charset=utf-8")], info["data"].encode()
    signed = p.sign(resp, resp.id, sign_alg=SIGN_ALG, digest_alg=DIGEST_ALG)
    if s.get("pysaml2_envelope"):
        # pysaml2 7.0's SOAP binding parses the signed message and writes
        # it again, which breaks its signature (xmlsec1 refuses it too).
        data = p.apply_binding(BINDING_SOAP, signed, response=True)["data"]
    else:
        # The signed message as pysaml2 wrote it, in an envelope.
        if signed.startswith("<?xml"):
            signed = signed[signed.index("?>") + 2:]
        data = ('<SOAP-ENV:Envelope xmlns:SOAP-ENV="http://schemas.xmlsoap.org/soap/envelope/"><SOAP-ENV:Body>' +
                signed + "</SOAP-ENV:Body></SOAP-ENV:Envelope>")
    return "200 OK", [("Content-Type", "text/xml; charset=utf-8")], data.encode()


ROUTES = {"/metadata": metadata, "/sso": sso, "/ars": ars}


def app(environ, start_response):
    route = ROUTES.get(environ.get("PATH_INFO", ""))
    if route is None:
        status, headers, body = "404 Not Found", [("Content-Type", "text/plain")], b"not found"
    else:
        try:
            status, headers, body = route(environ)
        except Exception:
            traceback.print_exc()
            status, headers, body = "500 Internal Server Error", [("Content-Type", "text/plain")], traceback.format_exc().encode()
    start_response(status, headers + [("Content-Length", str(len(body)))])
    return [body]


class Quiet(WSGIRequestHandler):
    def log_message(self, fmt, *args):
        sys.stderr.write("%s\n" % (fmt % args))


if __name__ == "__main__":
    httpd = make_server("127.0.0.1", 0, app, handler_class=Quiet)
    print("listening on %d" % httpd.server_port, flush=True)
    httpd.serve_forever()
