#!/usr/bin/env bash
# Creates the virtualenv the Python-driven end-to-end tests use, at
# target/python-venv (or $LOOM_TEST_PYTHON_VENV), from requirements.txt.
# Idempotent: a venv whose requirements are unchanged is kept.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${LOOM_TEST_PYTHON_VENV:-$root/target/python-venv}"
stamp="$venv/.requirements"
if [ -x "$venv/bin/python" ] && cmp -s "$here/requirements.txt" "$stamp"; then
  exit 0
fi
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt"
cp "$here/requirements.txt" "$stamp"
echo "python test clients installed in $venv"
