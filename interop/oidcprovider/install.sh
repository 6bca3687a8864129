#!/bin/sh
# Installs the interop OpenID provider (oidc-provider) exactly as locked.
set -eu
cd "$(dirname "$0")"
npm ci --no-audit --no-fund
