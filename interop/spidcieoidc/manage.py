#!/usr/bin/env python3
"""Runs fedproj, the trust anchor and OpenID provider of extauth's
OpenID Federation interop tests, built from spid-cie-oidc's Django apps."""
import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fedproj.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
