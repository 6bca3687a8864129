#!/bin/sh
# Installs pyFF, the SAML metadata aggregator and MDQ server that
# SeamlessAccess and many national federations run, into a virtual
# environment of its own (venv/), every package at the version
# requirements.txt pins: the interop suite runs its pyffd as the MDQ server
# of TestFederationPyFFMDQ. Idempotent: a venv made from the same
# requirements.txt is kept.
set -eu
cd "$(dirname "$0")"
command -v python3 >/dev/null || { echo "python3 is missing: the pyFF interop test needs Python 3 with venv"; exit 1; }
want=$(sha256sum requirements.txt | cut -d' ' -f1)
if [ -x venv/bin/pyffd ] && [ "$(cat venv/.requirements 2>/dev/null)" = "$want" ]; then
	echo "pyFF $(venv/bin/python -c 'import importlib.metadata as m; print(m.version("pyFF"))') already installed"
	exit 0
fi
rm -rf venv
python3 -m venv venv
venv/bin/pip install --quiet --disable-pip-version-check --no-input -r requirements.txt
echo "$want" > venv/.requirements
echo "pyFF $(venv/bin/python -c 'import importlib.metadata as m; print(m.version("pyFF"))') installed"
