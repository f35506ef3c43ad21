# What bench/run.sh and bench/instructions.sh share; sourced, not run.

# need COMMAND PACKAGE: installs Debian's PACKAGE when COMMAND is missing.
need() {
  command -v "$1" >/dev/null && return 0
  echo "== installing $2 (Debian)"
  local sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get install -y "$2" >/dev/null
}

# bench_env KEYS: the servers' settings for a run (a fresh signing secret,
# every rate limit raised so none refuses the load, quiet logs) and what
# the load's scripts read (the words, KEYS pre-filled keys).
bench_env() {
  LOOM_JWT_SECRET="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  export LOOM_JWT_SECRET LOOM_LOG=warn
  local limit
  for limit in READ WRITE HEAVY ORG_READ ORG_WRITE ORG_HEAVY; do
    export "LOOM_RATE_LIMIT_${limit}_PER_MIN=100000000"
  done
  export BENCH_WORDS="$PWD/bench/words.txt" BENCH_KEYS="$1"
}

# wait_ready URL SECONDS [PID]: polls URL every 5 ms until it answers 200;
# fails after SECONDS, or as soon as the server PID has exited.
wait_ready() {
  local tries=$(( $2 * 200 ))
  for _ in $(seq "$tries"); do
    curl -fs -o /dev/null "$1" 2>/dev/null && return 0
    if [ -n "${3:-}" ] && ! kill -0 "$3" 2>/dev/null; then break; fi
    sleep 0.005
  done
  echo "not ready: $1" >&2
  return 1
}

# sqlite_prefill LOOM PATH N: a SQLite store at PATH, migrated by the
# `loom` binary LOOM and pre-filled with N memories by one batched insert
# (bench/prefill.py). The insert's triggers queue its rows for the
# full-text index; opening the store again (loom migrate) indexes them, as
# it would after any other program's writes, so a server starts on an
# indexed store.
sqlite_prefill() {
  LOOM_DATABASE_URL="sqlite://$2" "$1" migrate >/dev/null
  python3 bench/prefill.py sqlite "$2" "$3"
  LOOM_DATABASE_URL="sqlite://$2" "$1" migrate >/dev/null
}

# pg_prefill URL N DIR: pre-fills the migrated PostgreSQL store at URL with
# N memories (bench/prefill.py's rows, through psql's \copy, files in DIR),
# then vacuums and analyzes it and checkpoints, as a store that has settled
# would be: without the CHECKPOINT, PostgreSQL's own checkpoint of the
# pre-fill's writes, which its WAL's size starts, spreads its writes over
# the first workloads measured.
pg_prefill() {
  python3 bench/prefill.py tsv "$3/pg" "$2"
  psql "$1" -q \
    -c "\\copy memories (org, namespace, agent, memory_key, content, kind, labels, source, content_hash, version, created_ms, updated_ms) from '$3/pg.memories.tsv'" \
    -c "\\copy memory_versions (org, namespace, agent, memory_key, version, change, content, kind, labels, source, content_hash, pinned, locked, deleted, subject, changed_by, request_id, at_ms) from '$3/pg.versions.tsv'" \
    -c "VACUUM ANALYZE"
  # CHECKPOINT needs a superuser or pg_checkpoint: without either, the run
  # goes on, with the pre-fill's writes still to be checkpointed.
  psql "$1" -qc "CHECKPOINT" 2>/dev/null || echo "   (not checkpointed: the role may not CHECKPOINT)"
}

# cpu_ticks PID: the process's user and system time so far, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# thread_ticks PID: the server's CPU time so far (user and system, in clock
# ticks) by kind of thread, as "serving writer checkpoint sqlx other": the
# runtime's threads that parse, check and answer calls; SQLite's direct
# writer and checkpoint threads (store::direct, store::checkpoint); sqlx's
# SQLite connection threads; the rest. A thread that ended meanwhile is
# not counted (the process's total, in the first table, is).
thread_ticks() {
  cat /proc/"$1"/task/*/stat 2>/dev/null | awk '
    {
      comm = $0; sub(/^[0-9]+ \(/, "", comm); sub(/\) .*$/, "", comm)
      rest = $0; sub(/^.*\) /, "", rest); split(rest, f, " ")
      t = f[12] + f[13]   # stat fields 14 and 15 (utime, stime), counted after the name
      if (comm ~ /^tokio/) s += t
      else if (comm ~ /^loom-sqlite-wri/) w += t
      else if (comm ~ /^loom-sqlite-che/) c += t
      else if (comm ~ /^sqlx/) q += t
      else o += t
    }
    END { print s + 0, w + 0, c + 0, q + 0, o + 0 }'
}

# machine_ticks: the machine's CPU time so far (/proc/stat's first line,
# in clock ticks), as "user system idle iowait": user with nice, system
# with interrupts, idle, waiting on I/O.
machine_ticks() {
  awk '$1 == "cpu" { print $2 + $3, $4 + $7 + $8, $5, $6; exit }' /proc/stat
}
