#!/usr/bin/env bash
# Creates the Python environment the OAuth interoperability test runs in:
# a venv at target/python-venv (or $LOOM_TEST_VENV) with requirements.txt.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${LOOM_TEST_VENV:-$here/../../target/python-venv}"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"
echo "python test environment ready: $venv"
