#!/usr/bin/env bash
# Loom's benchmark (issue 8; README, "Benchmark"). Builds release binaries,
# starts the ceiling (loom-ceiling) and `loom serve` on SQLite (and on
# PostgreSQL, in a fresh database, when LOOM_TEST_DATABASE_URL is set, after
# measuring what PostgreSQL alone serves there: bench/pg_floor.py), with
# auth, audit, the ledger and rate limits on as shipped (limits raised so
# they never refuse), pre-fills BENCH_MEMORIES memories by a batched insert
# (bench/prefill.py), drives each workload with wrk for BENCH_DURATION at
# BENCH_CONNECTIONS connections and writes bench/RESULTS.md.
#
#   BENCH_DURATION=20s BENCH_CONNECTIONS=32 BENCH_MEMORIES=100000 bench/run.sh
#
# BENCH_WORKLOADS picks the workloads (default "get set search http"; the
# ceiling always runs, as the ratios need it), e.g. BENCH_WORKLOADS=search;
# "create" (sets of keys not written before) runs only when named.
# BENCH_RESULTS is the file written (default bench/RESULTS.md), so a partial
# run need not go on top of the full ones. The runs the file held follow
# the new one, under "An earlier run" headings.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. bench/lib.sh

duration="${BENCH_DURATION:-20s}"
conns="${BENCH_CONNECTIONS:-32}"
memories="${BENCH_MEMORIES:-100000}"
workloads="${BENCH_WORKLOADS:-get set search http}"
threads="$(nproc)"
results="${BENCH_RESULTS:-bench/RESULTS.md}"

need wrk wrk

echo "== cargo build --release (loom, loom-ceiling)"
cargo build --release --quiet --bin loom --bin loom-ceiling
loom="${CARGO_TARGET_DIR:-$PWD/target}/release/loom"
ceiling="${CARGO_TARGET_DIR:-$PWD/target}/release/loom-ceiling"

work="$(mktemp -d)"
pids=()
pg_db=""
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -n "$pg_db" ]; then psql "$LOOM_TEST_DATABASE_URL" -qc "DROP DATABASE IF EXISTS $pg_db" >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

bench_env "$memories"

now_ms() { date +%s%3N; }
rss_kb() { awk -v f="$2" '$1 == f":" {print $2}' "/proc/$1/status"; }

declare -a rows=()
ceiling_rps=""

declare -a thread_rows=() machine_rows=()

# db_ticks: the CPU time so far (user and system, in clock ticks) of this
# machine's PostgreSQL processes (named postgres: the server and its
# backends), or nothing when none runs here or the store measured is not
# PostgreSQL (measure_db unset). A backend that ended meanwhile is not
# counted; Loom's pools keep theirs.
measure_db=""
db_ticks() {
  [ -n "$measure_db" ] || return 0
  local pids
  pids="$(pgrep -x postgres 2>/dev/null | tr '\n' ' ' || true)"
  [ -n "$pids" ] || return 0
  # shellcheck disable=SC2086
  (cd /proc && cat $(printf '%s/stat ' $pids) 2>/dev/null || true) | awk '
    { rest = $0; sub(/^.*\) /, "", rest); split(rest, f, " "); t += f[12] + f[13] }
    END { print t + 0 }'
}

# machine_row LABEL BEFORE AFTER DB_BEFORE DB_AFTER REQUESTS: a row of the
# machine's shares over a workload (machine_ticks before and after) and
# PostgreSQL's CPU µs a call ("-" where it did not run here).
machine_row() {
  awk -v label="$1" -v a="$2" -v b="$3" -v da="$4" -v db="$5" -v n="$6" -v hz="$(getconf CLK_TCK)" 'BEGIN {
    split(a, x, " "); split(b, y, " "); total = 0
    for (i = 1; i <= 4; i++) { d[i] = y[i] - x[i]; total += d[i] }
    if (total <= 0) total = 1
    pg = (da == "" || db == "" || n <= 0) ? "-" : sprintf("%.1f", (db - da) / hz * 1e6 / n)
    printf "| %s | %d | %d | %d | %d | %s |\n", label, 100 * d[1] / total, 100 * d[2] / total,
      100 * d[3] / total, 100 * d[4] / total, pg
  }'
}

# drive LABEL WORKLOAD PORT PID: one wrk run against the server PID; appends
# a row, with the server's CPU time per call (user and system, over the
# calls wrk counted): its own work per call, whatever share of the cores
# wrk or other tenants of the host took; and a row of that time by kind of
# thread (thread_ticks), which says which part a change must cut.
drive() {
  local label="$1" workload="$2" port="$3" pid="$4" out before threads_before machine_before db_before
  before="$(cpu_ticks "$pid")"
  threads_before="$(thread_ticks "$pid")"
  machine_before="$(machine_ticks)"
  db_before="$(db_ticks)"
  out="$(BENCH_WORKLOAD="$workload" wrk -t"$threads" -c"$conns" -d"$duration" --timeout 10s \
    -s bench/wrk.lua "http://127.0.0.1:$port" 2>"$work/wrk.err" | grep '^RESULT' || true)"
  if [ -s "$work/wrk.err" ]; then sed 's/^/    /' "$work/wrk.err" >&2; fi
  local machine_after db_after
  machine_after="$(machine_ticks)"
  db_after="$(db_ticks)"
  read -r _ rps p50 p99 max errs reqs <<<"$out"
  machine_rows+=("$(machine_row "$label" "$machine_before" "$machine_after" "$db_before" "$db_after" "$reqs")")
  local cpu hz
  hz="$(getconf CLK_TCK)"
  cpu="$(awk -v t="$(( $(cpu_ticks "$pid") - before ))" -v hz="$hz" -v n="$reqs" \
    'BEGIN { if (n > 0) printf "%.1f", t / hz * 1e6 / n; else print "-" }')"
  thread_rows+=("$(awk -v a="$threads_before" -v b="$(thread_ticks "$pid")" -v hz="$hz" -v n="$reqs" \
    -v label="$label" 'BEGIN {
      split(a, x, " "); split(b, y, " "); row = "| " label
      for (i = 1; i <= 5; i++) row = row sprintf(" | %s", n > 0 ? sprintf("%.1f", (y[i] - x[i]) / hz * 1e6 / n) : "-")
      print row " |"
    }')")
  if [ "$workload" = ceiling ]; then ceiling_rps="$rps"; fi
  add_row "$label" "$rps" "$p50" "$p99" "$max" "$errs" "$reqs" "$cpu"
}

# add_row LABEL RPS P50 P99 MAX ERRORS REQUESTS CPU: a row of the table,
# with its ratio to the ceiling.
add_row() {
  local ratio
  ratio="$(awk -v a="$2" -v b="${ceiling_rps:-$2}" 'BEGIN { printf "%.2f", a / b }')"
  local row="| $1 | $2 | $3 | $4 | $5 | $6 / $7 | $ratio | $8 |"
  echo "$row"
  rows+=("$row")
}

# seconds_of DURATION: wrk's duration (20s, 2m, 1h or a bare number of
# seconds) in seconds, for pgbench.
seconds_of() {
  case "$1" in
    *h) echo $(( ${1%h} * 3600 )) ;;
    *m) echo $(( ${1%m} * 60 )) ;;
    *s) echo "${1%s}" ;;
    *) echo "$1" ;;
  esac
}

# pg_floor LABEL WORKLOAD URL: PostgreSQL alone (bench/pg_floor.py, pgbench
# at the same connections) on the store just filled; a row with no CPU
# figure (the database's, not a Loom's).
pg_floor() {
  local out machine_before
  machine_before="$(machine_ticks)"
  if ! out="$(python3 bench/pg_floor.py "$3" "$2" "$(seconds_of "$duration")" "$conns" "$threads" "$memories")"; then
    echo "   $1: pgbench failed, not measured"
    return 0
  fi
  read -r _ rps p50 p99 max errs reqs <<<"$out"
  # No PostgreSQL CPU figure: pgbench's backends have ended by now, and
  # their time with them.
  machine_rows+=("$(machine_row "$1" "$machine_before" "$(machine_ticks)" "" "" "$reqs")")
  add_row "$1" "$rps" "$p50" "$p99" "$max" "$errs" "$reqs" "-"
}

header="| workload | requests/s | p50 ms | p99 ms | max ms | errors / requests | × ceiling | server CPU µs/call |
| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"

# One token for every server: the same LOOM_JWT_SECRET signs and checks it.
LOOM_DATABASE_URL="sqlite://$work/loom.db" "$loom" migrate >/dev/null
BENCH_TOKEN="$(LOOM_DATABASE_URL="sqlite://$work/loom.db" "$loom" token mint --org default --subject bench --role writer)"
export BENCH_TOKEN

echo "== ceiling"
LOOM_PORT=18990 "$ceiling" & pids+=($!)
wait_ready "http://127.0.0.1:18990/readyz" 10 "${pids[-1]}"
echo "$header"
drive "ceiling (tools/call, bearer, fixed answer)" ceiling 18990 "${pids[-1]}"
kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true

declare -a servers=()

# bench_store NAME URL PREFILL_CMD...: migrate, pre-fill, serve, drive, measure.
bench_store() {
  local name="$1" url="$2"; shift 2
  export LOOM_DATABASE_URL="$url" LOOM_PORT=18991
  echo "== $name: migrate and pre-fill $memories memories"
  "$loom" migrate >/dev/null
  local t0; t0="$(now_ms)"
  "$@"
  echo "   pre-filled in $(( $(now_ms) - t0 )) ms"
  # What the store alone serves, before any Loom runs on it.
  if [ -n "${floor:-}" ]; then "$floor"; fi
  # Start to ready on the existing store (migrations already applied).
  t0="$(now_ms)"
  "$loom" serve 2>"$work/$name.log" & local pid=$!; pids+=("$pid")
  wait_ready "http://127.0.0.1:18991/readyz" 10 "$pid"
  local ready=$(( $(now_ms) - t0 ))
  sleep 2
  local idle; idle="$(rss_kb "$pid" VmRSS)"
  echo "   start to ready ${ready} ms, idle RSS $(( idle / 1024 )) MB"
  for w in $workloads; do
    case "$w" in
      get) drive "$name: MCP loom_memory_get" get 18991 "$pid" ;;
      set) drive "$name: MCP loom_memory_set" set 18991 "$pid" ;;
      create) drive "$name: MCP loom_memory_set, new keys" create 18991 "$pid" ;;
      search) drive "$name: MCP loom_search" search 18991 "$pid" ;;
      http) drive "$name: POST /v1/memory.get" http 18991 "$pid" ;;
      *) echo "unknown workload $w (get, set, create, search, http)" >&2; exit 2 ;;
    esac
  done
  local peak; peak="$(rss_kb "$pid" VmHWM)"
  echo "   peak RSS $(( peak / 1024 )) MB"
  servers+=("| $name | ${ready} | $(( idle / 1024 )) | $(( peak / 1024 )) |")
  kill "$pid"; wait "$pid" 2>/dev/null || true
  if grep -qiE 'error|panic' "$work/$name.log"; then
    echo "   server log:"; grep -iE 'error|panic' "$work/$name.log" | head -5 | sed 's/^/     /'
  fi
}

bench_store sqlite "sqlite://$work/loom.db" sqlite_prefill "$loom" "$work/loom.db" "$memories"

if [ -n "${LOOM_TEST_DATABASE_URL:-}" ]; then
  pg_db="loom_bench_$$"
  psql "$LOOM_TEST_DATABASE_URL" -qc "CREATE DATABASE $pg_db" >/dev/null
  pg_url="${LOOM_TEST_DATABASE_URL%/*}/$pg_db"
  # PostgreSQL alone first, on the same cores: the most a Loom that asks
  # it on every call can serve here (bench/pg_floor.py). Run when pgbench
  # is at hand (it comes with PostgreSQL's server).
  postgres_floor() {
    if ! command -v pgbench >/dev/null; then
      echo "   pgbench not found: PostgreSQL alone is not measured"
      return 0
    fi
    case " $workloads " in *" get "* | *" http "*)
      pg_floor "postgres alone: key read (pgbench, no Loom)" get "$pg_url" ;;
    esac
    case " $workloads " in *" search "*)
      pg_floor "postgres alone: search's every-word pass (pgbench, no Loom)" search "$pg_url" ;;
    esac
  }
  measure_db=1
  floor=postgres_floor bench_store postgres "$pg_url" pg_prefill "$pg_url" "$memories" "$work"
else
  echo "== PostgreSQL: LOOM_TEST_DATABASE_URL not set, not run"
fi

# earlier_runs FILE: the runs FILE holds, to follow the new one: its title
# dropped, its newest run under a heading of its own ("## An earlier run:
# COMMIT on DATE"), that run's own "## " headings a level down; the runs
# before it as they were.
earlier_runs() {
  awk '
    NR == 1 && /^# / { next }
    !seen && /^Written by `bench\/run.sh` on / {
      date = $0; sub(/^Written by `bench\/run.sh` on /, "", date); sub(/ \(commit.*/, "", date)
      commit = $0; sub(/.*\(commit /, "", commit); sub(/\).*/, "", commit)
      print "## An earlier run: " commit " on " date; print ""; seen = 1
    }
    !seen && /^$/ { next }
    /^## An earlier run/ { older = 1 }
    !older && /^## / { sub(/^## /, "### ") }
    { print }
  ' "$1"
}

cores="$(nproc)"
mem="$(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
cpu="$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
{
  echo "# Benchmark results"
  echo
  echo "Written by \`bench/run.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC') (commit $(git rev-parse --short HEAD))."
  echo "Machine: $cores cores ($cpu), $mem memory, $(uname -sr). wrk with $threads threads and $conns"
  echo "connections on the same machine, $duration per workload, $memories pre-filled memories."
  echo
  echo "$header"
  printf '%s\n' "${rows[@]}"
  echo
  echo "| server | start to ready ms | idle RSS MB | peak RSS MB |"
  echo "| --- | ---: | ---: | ---: |"
  printf '%s\n' "${servers[@]}"
  echo
  echo "The server's CPU µs a call by kind of thread (the last column of the first table, split):"
  echo
  echo "| workload | serving | SQLite writer | checkpoint | sqlx's SQLite | other |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: |"
  printf '%s\n' "${thread_rows[@]}"
  echo
  echo "The machine during each workload (/proc/stat: user, system with interrupts, idle and I/O wait,"
  echo "% of both cores) and PostgreSQL's own CPU µs a call (its processes on this machine):"
  echo
  echo "| workload | user % | system % | idle % | I/O wait % | PostgreSQL CPU µs/call |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: |"
  printf '%s\n' "${machine_rows[@]}"
} >"$results.new"
if [ -n "${BENCH_NOTES:-}" ] && [ -f "$BENCH_NOTES" ]; then cat "$BENCH_NOTES" >>"$results.new"; fi
if [ -f "$results" ]; then echo >>"$results.new"; earlier_runs "$results" >>"$results.new"; fi
mv "$results.new" "$results"
echo "== wrote $results"
