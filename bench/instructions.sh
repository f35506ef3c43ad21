#!/usr/bin/env bash
# Instructions per call (README, "Benchmark"): `loom serve` on a pre-filled
# SQLite store under valgrind's callgrind, a fixed number of calls per
# workload sent one after another (bench/drive.py, seeded: the same calls
# every run), and the instructions the server ran for them (every thread,
# user space, the batched writes they left included) divided by the calls.
# Two runs of one binary differ by 1-3%, where requests/s on a shared
# machine move by 20%: a figure for judging a change to the request path.
#
#   INSTR_CALLS=500 BENCH_MEMORIES=100000 BENCH_WORKLOADS="get http set create" bench/instructions.sh
#
# INSTR_LOOM=PATH measures that `loom` binary instead of building one (a
# build of another commit, to compare). `search` is a workload too, but its
# figure is not the served one: valgrind runs the server ~50 times slower,
# so every search overruns the time it may take on the serving thread and
# runs again on sqlx's threads (memory::rank's INLINE_BUDGET).
#
# INSTR_OUT=DIR keeps each workload's callgrind dump there
# (DIR/callgrind.WORKLOAD, for callgrind_annotate).
#
# Calls arrive one at a time, so the batched bookkeeping commits a few rows
# at a time instead of hundreds: its share is larger here than under load.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. bench/lib.sh

calls="${INSTR_CALLS:-500}"
memories="${BENCH_MEMORIES:-100000}"
workloads="${BENCH_WORKLOADS:-get http set create}"
port="${INSTR_PORT:-18992}"

need callgrind_control valgrind

loom="${INSTR_LOOM:-}"
if [ -z "$loom" ]; then
  echo "== cargo build --release (loom)"
  cargo build --release --quiet --bin loom
  loom="${CARGO_TARGET_DIR:-$PWD/target}/release/loom"
fi

work="$(mktemp -d)"
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

bench_env "$memories"
# The full-text index's merge once it is quiet (LOOM_FTS_MERGE_IDLE_SECS)
# would land in the pause after a workload's writes and be counted with
# them: a merge of the whole index, 80% of the set workload's count.
# It is off here.
export LOOM_PORT="$port" LOOM_DATABASE_URL="sqlite://$work/loom.db" LOOM_FTS_MERGE_IDLE_SECS=0

echo "== migrate and pre-fill $memories memories"
sqlite_prefill "$loom" "$work/loom.db" "$memories"
BENCH_TOKEN="$("$loom" token mint --org default --subject bench --role writer)"
export BENCH_TOKEN

# Instrumentation starts off: start-up and the warm-up calls are not counted.
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$work/callgrind.out" \
  "$loom" serve >"$work/serve.log" 2>&1 &
pid=$!
wait_ready "http://127.0.0.1:$port/readyz" 60 "$pid" || { cat "$work/serve.log" >&2; exit 1; }

echo "| workload | calls | instructions per call |"
echo "| --- | ---: | ---: |"
dumps=0
for w in $workloads; do
  python3 bench/drive.py "$w" 20 "$port"
  callgrind_control -z "$pid" >/dev/null 2>&1
  callgrind_control -i on "$pid" >/dev/null 2>&1
  python3 bench/drive.py "$w" "$calls" "$port"
  # What the calls queued (ledger rows, exposures, counts held for five
  # seconds: loom-ops' store::fold::FOLD) is written within about six
  # seconds, under valgrind's pace too: count it with the calls.
  sleep 7
  callgrind_control -i off "$pid" >/dev/null 2>&1
  callgrind_control -d "$w" "$pid" >/dev/null 2>&1
  dumps=$((dumps + 1))
  dump="$work/callgrind.out.$dumps"   # callgrind numbers its dumps from 1
  total="$(awk '/^totals:/ {print $2; exit}' "$dump")"
  echo "| $w | $calls | $(( total / calls )) |"
  if [ -n "${INSTR_OUT:-}" ]; then mkdir -p "$INSTR_OUT"; cp "$dump" "$INSTR_OUT/callgrind.$w"; fi
done
