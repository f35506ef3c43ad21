#!/usr/bin/env bash
# Installs what the headless-browser test of the sign-in pages needs:
# Debian's chromium (apt) and playwright-core (npm, pinned by
# package-lock.json, into tests/browser/node_modules). Idempotent: what is
# already there is kept. Exits 0 with a note when something cannot be
# installed here; exits 0 after printing "browser test ready" on success.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if ! command -v chromium >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null 2>&1 || true
    apt-get install -y -qq chromium >/dev/null 2>&1 || true
  fi
fi
if ! command -v chromium >/dev/null 2>&1; then
  echo "browser test: chromium is not installed and could not be installed here"
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "browser test: npm is not installed"
  exit 0
fi
want="$(node -p "require('$here/package.json').dependencies['playwright-core']")"
have="$(node -p "require('$here/node_modules/playwright-core/package.json').version" 2>/dev/null || true)"
if [ "$want" != "$have" ]; then
  (cd "$here" && npm ci --no-audit --no-fund --silent) || {
    echo "browser test: npm ci failed"
    exit 0
  }
fi
echo "browser test ready: $(chromium --version 2>/dev/null | head -1), playwright-core $(node -p "require('$here/node_modules/playwright-core/package.json').version")"
