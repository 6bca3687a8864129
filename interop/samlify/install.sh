#!/bin/sh
# Installs the samlify identity provider used by the interop tests
# (go test -tags interop ./interop/...), exactly as package-lock.json pins it.
set -eu
cd "$(dirname "$0")"
npm ci --no-audit --no-fund
