#!/usr/bin/env python3
"""pysaml2's side of BENCHMARKS.md's "SAML federations" rows.

Loads the aggregate that samlsp's BenchmarkFederationAggregate generates
(8 000 entities, about 67 MB, signed RSA-SHA256) with pysaml2's metadata
loader, its signature verified against the federation's pinned certificate
by xmlsec1, as a pysaml2 SP does, then looks entities up by entityID. Prints
one JSON line: CPU time (user + system of this process and of its children,
xmlsec1 included), wall time, peak RSS of this process (before the load:
the interpreter and pysaml2; and over it, the document included), the
entities and IdPs indexed, and the time of a look-up. xmlsec1's own peak RSS
is not in it (a child's ru_maxrss counts the parent's pages it was forked
with): BENCHMARKS.md measures it apart with /usr/bin/time.

Set up (Debian's xmlsec1; pysaml2 and its dependencies pinned):

    apt-get install xmlsec1
    python3 -m venv /tmp/pysaml2-venv
    /tmp/pysaml2-venv/bin/pip install -r bench/pysaml2-requirements.txt

Run (the Go benchmark writes the aggregate and its certificate):

    go test ./samlsp/ -run XXX -bench 'FederationAggregate$' -benchtime 1x -rounds 1 -aggregate.out /tmp/agg
    /tmp/pysaml2-venv/bin/python bench/pysaml2_aggregate.py /tmp/agg

--check instead proves that the signature is verified: the aggregate with one
byte of one entity changed must be refused (exit status 1 if it is not), and
it reports whether pysaml2 takes the aggregate with its Signature removed.

The load is what a `remote` metadata entry with a `cert` does after its HTTP
GET (MetaDataExtern.load: parse_and_check_signature with the store's
security context), read from the file instead so that no HTTP server's work
is counted: a `local` entry never verifies a signature (MetaDataFile gets no
cert), so an SP that pins a federation's certificate uses `remote`.
"""

import argparse
import json
import logging
import os
import resource
import sys
import tempfile
import time

from saml2.config import SPConfig
from saml2.md import EntitiesDescriptor
from saml2.mdstore import MetadataStore, MetaDataFile
from saml2.sigver import SignatureError, get_xmlsec_binary


AGGREGATE = f"{EntitiesDescriptor.c_namespace}:{EntitiesDescriptor.c_tag}"


def new_store():
    conf = SPConfig()
    conf.load({"entityid": "https://sp.example.org/", "xmlsec_binary": get_xmlsec_binary()})
    return MetadataStore(conf.attribute_converters, conf)


def load(store, aggregate, cert):
    md = MetaDataFile(store.attrc, aggregate, cert=cert, security=store.security)
    md.load()
    store.metadata[aggregate] = md


def rusage():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime, c.ru_utime + c.ru_stime, s.ru_maxrss, c.ru_maxrss


def measure(aggregate, cert):
    store = new_store()
    self0, child0, rss0, _ = rusage()
    wall0 = time.perf_counter()
    load(store, aggregate, cert)
    wall = time.perf_counter() - wall0
    self1, child1, rss, _ = rusage()
    ids = list(store.keys())
    idps = [e for e in ids if "idpsso_descriptor" in store[e]]
    n = 100_000
    t0 = time.perf_counter()
    for i in range(n):
        if store.single_sign_on_service(idps[i % len(idps)]) is None:
            sys.exit("no SSO service for " + idps[i % len(idps)])
    lookup = (time.perf_counter() - t0) / n
    print(json.dumps({
        "side": "pysaml2",
        "cpu_s": round(self1 - self0 + child1 - child0, 3),
        "cpu_self_s": round(self1 - self0, 3),
        "cpu_children_s": round(child1 - child0, 3),
        "wall_s": round(wall, 3),
        "rss_before_mb": round(rss0 * 1024 / 1e6, 1),
        "rss_mb": round(rss * 1024 / 1e6, 1),
        "entities": len(ids),
        "idps": len(idps),
        "lookup_us": round(lookup * 1e6, 2),
    }))


def check(aggregate, cert):
    # pysaml2 logs each failed xmlsec1 run whole; the first cause is enough.
    logging.getLogger("saml2").setLevel(logging.CRITICAL)
    with open(aggregate, "rb") as f:
        doc = f.read()
    # One byte of one entity's display name, far past the signature.
    at = doc.index(b"Organisation 4711 (en)")
    tampered = doc[:at] + b"o" + doc[at + 1:]
    # The Signature element removed, the rest unchanged.
    start, end = doc.index(b"<ds:Signature "), doc.index(b"</ds:Signature>") + len(b"</ds:Signature>")
    unsigned = doc[:start] + doc[end:]
    refused = True
    for name, body in (("one byte changed", tampered), ("signature removed", unsigned)):
        with tempfile.NamedTemporaryFile(suffix=".xml") as f:
            f.write(body)
            f.flush()
            store = new_store()
            try:
                load(store, f.name, cert)
            except SignatureError as e:
                print(f"{name}: refused: SignatureError {e}")
                # parse_and_check_signature drops xmlsec1's reason: ask again.
                try:
                    store.security.verify_signature(body, cert_file=cert, node_name=AGGREGATE)
                except SignatureError as e:
                    why = [l for l in str(e.__cause__).splitlines() if l.startswith("error=")]
                    print(f"  xmlsec1: {why[0] if why else e.__cause__}")
                continue
            print(f"{name}: ACCEPTED, {len(store.keys())} entities")
            if name == "one byte changed":
                refused = False
    store = new_store()
    load(store, aggregate, cert)
    print(f"untouched: accepted, {len(store.keys())} entities")
    sys.exit(0 if refused else 1)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir", help="where -aggregate.out wrote aggregate.xml and federation.pem")
    p.add_argument("--check", action="store_true", help="prove the signature is verified instead of measuring")
    a = p.parse_args()
    aggregate, cert = os.path.join(a.dir, "aggregate.xml"), os.path.join(a.dir, "federation.pem")
    (check if a.check else measure)(aggregate, cert)


if __name__ == "__main__":
    main()
