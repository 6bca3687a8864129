"""spid-cie-oidc's side of bench/oidfed_test.go's OIDFedChain benchmarks:
resolves the OP's trust chain N times as spid-cie-oidc does and prints its
time per resolution as JSON ({"WallNS": ..., "CPUNS": ...}).

    spid_chain.py cold|cached N SUBJECT TRUST_ANCHOR

cold: the anchor's entity configuration fetched, then TrustChainBuilder
(what spid-cie-oidc's OP runs for a client it holds no chain of, without
its database writes); cached: get_or_create_trust_chain on a chain it holds
(its database look-up, what its OP runs on each later request). Django is
set up with fedproj's settings (PYTHONPATH, DJANGO_SETTINGS_MODULE,
SPID_BASE and SPID_DB set by the benchmark) before any timing; one
resolution warms up first."""
import json
import logging
import os
import sys
import time

import django

django.setup()
if not os.environ.get("SPID_CHAIN_DEBUG"):
    logging.disable(logging.CRITICAL)

from django.core.management import call_command  # noqa: E402

from spid_cie_oidc.entity.statements import (  # noqa: E402
    EntityConfiguration,
    get_entity_configurations,
)
from spid_cie_oidc.entity.trust_chain import TrustChainBuilder  # noqa: E402
from spid_cie_oidc.entity.trust_chain_operations import get_or_create_trust_chain  # noqa: E402

HTTPC = {"connection": {"ssl": False}}


def cold(subject, anchor):
    ta = EntityConfiguration(get_entity_configurations([anchor], HTTPC)[0], httpc_params=HTTPC)
    tc = TrustChainBuilder(subject, trust_anchor=ta, httpc_params=HTTPC, metadata_type="openid_provider")
    tc.start()
    if not tc.is_valid or not tc.final_metadata.get("openid_provider", {}).get("subject_types_supported"):
        raise SystemExit(f"the chain of {subject} did not resolve: {tc.tree_of_trust}")


def cached(subject, anchor):
    tc = get_or_create_trust_chain(subject=subject, trust_anchor=anchor, httpc_params=HTTPC)
    if not tc or not tc.metadata.get("openid_provider"):
        raise SystemExit(f"no chain of {subject}")


def main():
    mode, n, subject, anchor = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    if mode == "cached":
        call_command("migrate", verbosity=0)
    run = {"cold": cold, "cached": cached}[mode]
    run(subject, anchor)
    wall, cpu = time.perf_counter_ns(), time.process_time_ns()
    for _ in range(n):
        run(subject, anchor)
    wall, cpu = time.perf_counter_ns() - wall, time.process_time_ns() - cpu
    json.dump({"WallNS": wall / n, "CPUNS": cpu / n}, sys.stdout)


main()
