#!/usr/bin/env bash
# Crash safety: `loom serve` (release build) on SQLite, killed with SIGKILL
# at random moments while concurrent writers run memory.set; after each
# restart every acknowledged write must read back with its content and
# version. Then the same on PostgreSQL when LOOM_TEST_DATABASE_URL is set.
#
#   bench/crash.sh [KILLS=20] [WRITERS=8]
#
# Prints, per backend, `acknowledged N, lost L` and restart-to-ready times;
# exits non-zero when anything was lost. Needs only the Rust toolchain.
# Takes about 1 minute per backend for 20 kills after the build.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

kills="${1:-20}"
writers="${2:-8}"

cargo build --release -q -p loom-server --bin loom
cargo build -q -p loom-tests --bin loom-crash
target_dir="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
loom="$target_dir/release/loom"
driver="$target_dir/debug/loom-crash"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "== SQLite"
"$driver" "$loom" "sqlite://$work/loom.db" "$kills" "$writers"

if [ -n "${LOOM_TEST_DATABASE_URL:-}" ]; then
  echo "== PostgreSQL"
  "$driver" "$loom" "$LOOM_TEST_DATABASE_URL" "$kills" "$writers"
else
  echo "== PostgreSQL skipped (set LOOM_TEST_DATABASE_URL)"
fi
