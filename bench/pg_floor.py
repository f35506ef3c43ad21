"""PostgreSQL on its own, for bench/run.sh: the statements at the heart of
Loom's get and search, driven by pgbench (PostgreSQL's own load generator,
in C) straight at the database, with no Loom, no HTTP and no JSON in the
way. What it serves is the most a Loom that asks that database on every
call can serve on the same machine, whatever else Loom does: the bound
over its PostgreSQL figures.

  pg_floor.py URL WORKLOAD SECONDS CONNECTIONS THREADS KEYS

WORKLOAD:
  get     the memory's row read by its primary key (org, namespace, agent,
          key), a random key of the KEYS pre-filled ones (bench/prefill.py),
          as a prepared statement: less than Loom's get reads (it looks the
          key up across agents and reads the row's run)
  search  the every-word pass of Loom's search on PostgreSQL
          (loom-ops memory::rank, pass_sql): the newest 50 live rows
          holding every word of a 2-3 word query from bench/words.txt, as
          the server runs it (planned with its words), without the
          any-word pass, the ranking or the page's rows that Loom adds

Prints one line as bench/wrk.lua does:
  RESULT requests/s p50_ms p99_ms max_ms errors requests
"""

import glob
import os
import random
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

COLUMNS = (
    "org, namespace, agent, memory_key, content, kind, labels, source, content_hash, version, "
    "pinned, locked, deleted, expires_ms, recall_count, last_recall_ms, created_ms, updated_ms"
)

GET = f"""\\set k random(0, {{keys}} - 1)
SELECT {COLUMNS} FROM memories
WHERE org = 'default' AND namespace = 'default' AND agent = 'bench' AND memory_key = 'bench-' || :k;
"""

# Loom's every-word pass (memory::rank::pass_sql, PostgreSQL), its
# parameters written in: the org, the namespace, now (when the run began),
# any agent, any kind.
SEARCH = """SELECT m.id, m.agent, m.memory_key, m.pinned, m.recall_count, m.updated_ms,
  CAST(10 * ts_rank(m.fts, websearch_to_tsquery('english', '{any}')) AS DOUBLE PRECISION) AS raw
FROM memories m WHERE m.fts @@ websearch_to_tsquery('english', '{all}')
  AND m.org = 'default' AND m.namespace = 'default' AND m.deleted = 0
  AND (m.expires_ms IS NULL OR m.expires_ms > {now})
ORDER BY m.updated_ms DESC LIMIT 50;
"""

# How many search scripts: pgbench picks one at random per query, and a
# script's query is fixed, so this many different queries.
QUERIES = 100


def scripts(workload, keys, folder):
    """The pgbench scripts for WORKLOAD, written into FOLDER."""
    if workload == "get":
        path = os.path.join(folder, "get.sql")
        with open(path, "w") as f:
            f.write(GET.format(keys=keys))
        return [path]
    words = open(os.path.join(HERE, "words.txt")).read().split()
    rng = random.Random(8)
    now = int(time.time() * 1000)
    paths = []
    for i in range(QUERIES):
        terms = [rng.choice(words) for _ in range(rng.randint(2, 3))]
        path = os.path.join(folder, f"search{i}.sql")
        with open(path, "w") as f:
            f.write(SEARCH.format(any=" or ".join(terms), all=" ".join(terms), now=now))
        paths.append(path)
    return paths


def percentile(sorted_us, p):
    """The p quantile of sorted latencies in µs, in ms (0 when there are none)."""
    if not sorted_us:
        return 0.0
    return sorted_us[min(len(sorted_us) - 1, int(len(sorted_us) * p))] / 1000.0


def main():
    url, workload, seconds, conns, threads, keys = sys.argv[1:7]
    if workload not in ("get", "search"):
        sys.exit(f"unknown workload {workload} (get, search)")
    with tempfile.TemporaryDirectory() as folder:
        args = ["pgbench", "-n", "-T", seconds, "-c", conns, "-j", threads]
        args += ["-l", "--log-prefix", os.path.join(folder, "log")]
        # The get's statement is the same every time: prepared, as Loom's
        # are. Each search is planned with its words, as Loom's are.
        if workload == "get":
            args += ["-M", "prepared"]
        for path in scripts(workload, keys, folder):
            args += ["-f", path]
        done = subprocess.run(args + [url], capture_output=True, text=True)
        if done.returncode != 0:
            sys.stderr.write(done.stderr[-2000:])
            sys.exit(done.returncode)
        # Per-query log lines: client, query number, latency in µs (or
        # "failed"), script, epoch seconds, µs.
        latencies, failed = [], 0
        for log in glob.glob(os.path.join(folder, "log.*")):
            for line in open(log):
                fields = line.split()
                if len(fields) < 3:
                    continue
                if fields[2].isdigit():
                    latencies.append(int(fields[2]))
                else:
                    failed += 1
    tps = re.search(r"^tps = ([0-9.]+)", done.stdout, re.M)
    latencies.sort()
    print(
        "RESULT %.1f %.2f %.2f %.2f %d %d"
        % (
            float(tps.group(1)) if tps else 0.0,
            percentile(latencies, 0.50),
            percentile(latencies, 0.99),
            latencies[-1] / 1000.0 if latencies else 0.0,
            failed,
            len(latencies) + failed,
        )
    )


if __name__ == "__main__":
    main()
