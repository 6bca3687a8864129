#!/bin/sh
# Installs spid-cie-oidc, Italy's reference OpenID Federation implementation
# (SPID and CIE OpenID Connect), from PyPI into .venv, exactly as
# requirements.txt pins it. The interop tests (go test -tags interop
# ./interop/...) run its trust anchor and OpenID provider from fedproj.
set -eu
cd "$(dirname "$0")"
if [ ! -x .venv/bin/python ]; then
	python3 -m venv .venv
fi
.venv/bin/pip install --quiet --disable-pip-version-check -r requirements.txt
.venv/bin/python -c 'import spid_cie_oidc, django; print("spid-cie-oidc", spid_cie_oidc.__version__, "django", django.__version__)'
