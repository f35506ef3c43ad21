#!/usr/bin/env bash
# Paired runs (README, "Benchmark"): one workload driven against each
# `loom` binary given, in turn, each on a fresh copy of one pre-filled
# SQLite store. On a shared host requests/s drift by a tenth within the
# hour (bench/RESULTS.md), more than most changes move them, so a change
# is judged by builds run side by side, A B A B, not by two runs of
# bench/run.sh hours apart.
#
#   bench/pair.sh WORKLOAD SECONDS LOOM [LOOM ...]
#   bench/pair.sh set 10 /tmp/loom-before /tmp/loom-after /tmp/loom-before /tmp/loom-after
#
# WORKLOAD is one of bench/run.sh's (get, set, create, search, http).
# Prints a line per run: requests/s, p50 and p99 ms, errors, the server's
# CPU µs a call (its threads' user and system time over the calls wrk
# counted), that time on the serving threads, SQLite's writer thread and
# its checkpoint thread (bench/lib.sh's thread_ticks: a change to one
# thread's work shows there when the host's noise hides it in requests/s),
# and the machine's idle share, I/O wait included; fails when a run's
# calls did. Needs wrk (installed when missing) and python3.
#
# BENCH_CONNECTIONS (default 32) and BENCH_MEMORIES (default 100000) as
# for bench/run.sh. PAIR_LOG is the servers' LOOM_LOG (default warn), e.g.
# warn,loom_ops::store::writer_phases=debug for the writer's sums; each
# server's log is kept as PAIR_DIR/N.log (PAIR_DIR: a temporary folder,
# removed at the end, unless set). The servers listen on PAIR_PORT
# (default 18993).
set -euo pipefail
if [ "$#" -lt 3 ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi
workload="$1" seconds="$2"; shift 2
# The binaries as named from where the script was called, before it moves
# to the repository's root.
bins=()
for bin in "$@"; do
  [ -x "$bin" ] || { echo "not an executable: $bin" >&2; exit 2; }
  bins+=("$(realpath "$bin")")
done
set -- "${bins[@]}"
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. bench/lib.sh

conns="${BENCH_CONNECTIONS:-32}"
memories="${BENCH_MEMORIES:-100000}"
port="${PAIR_PORT:-18993}"

need wrk wrk

keep="${PAIR_DIR:+1}"
dir="${PAIR_DIR:-$(mktemp -d)}"
mkdir -p "$dir"
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$dir/base" "$dir/run"
  if [ -z "$keep" ]; then rm -rf "$dir"; fi
}
trap cleanup EXIT

bench_env "$memories"
export LOOM_LOG="${PAIR_LOG:-warn}"

echo "== pre-filling $memories memories (once, copied for each run)"
mkdir -p "$dir/base"
sqlite_prefill "$1" "$dir/base/loom.db" "$memories"
BENCH_TOKEN="$(LOOM_DATABASE_URL="sqlite://$dir/base/loom.db" "$1" token mint --org default --subject bench --role writer)"
export BENCH_TOKEN

run=0
for bin in "$@"; do
  run=$((run + 1))
  rm -rf "$dir/run"; mkdir -p "$dir/run"; cp "$dir/base/"loom.db* "$dir/run/"
  LOOM_DATABASE_URL="sqlite://$dir/run/loom.db" LOOM_PORT="$port" "$bin" serve >"$dir/$run.log" 2>&1 &
  pid=$!
  wait_ready "http://127.0.0.1:$port/readyz" 10 "$pid"
  cpu0="$(cpu_ticks "$pid")"; threads0="$(thread_ticks "$pid")"; machine0="$(machine_ticks)"
  out="$(BENCH_WORKLOAD="$workload" wrk -t"$(nproc)" -c"$conns" -d"${seconds}s" --timeout 10s \
    -s bench/wrk.lua "http://127.0.0.1:$port" 2>"$dir/wrk.err" | grep '^RESULT' || true)"
  cpu1="$(cpu_ticks "$pid")"; threads1="$(thread_ticks "$pid")"; machine1="$(machine_ticks)"
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
  if [ -z "$out" ]; then
    echo "run $run ($bin): wrk gave no result" >&2; cat "$dir/wrk.err" >&2; exit 1
  fi
  read -r _ rps p50 p99 _ errs reqs <<<"$out"
  awk -v run="$run" -v bin="$bin" -v w="$workload" -v rps="$rps" -v p50="$p50" -v p99="$p99" \
    -v errs="$errs" -v n="$reqs" -v t="$((cpu1 - cpu0))" -v hz="$(getconf CLK_TCK)" \
    -v a="$machine0" -v b="$machine1" -v ta="$threads0" -v tb="$threads1" 'BEGIN {
      split(a, x, " "); split(b, y, " "); total = 0
      for (i = 1; i <= 4; i++) total += y[i] - x[i]
      split(ta, p, " "); split(tb, q, " ")
      for (i = 1; i <= 3; i++) per[i] = (n > 0 ? (q[i] - p[i]) / hz * 1e6 / n : 0)
      printf "%d %s %s: %s/s p50 %s ms p99 %s ms errors %s/%s, server CPU %.1f us/call " \
        "(serving %.1f, writer %.1f, checkpoint %.1f), idle %d%%\n",
        run, bin, w, rps, p50, p99, errs, n, (n > 0 ? t / hz * 1e6 / n : 0), per[1], per[2], per[3],
        100 * (y[3] - x[3] + y[4] - x[4]) / (total > 0 ? total : 1)
    }'
  # Figures of a run whose calls failed measure the failures.
  if [ "$errs" != 0 ]; then echo "run $run ($bin): $errs of $reqs calls failed" >&2; exit 1; fi
done
