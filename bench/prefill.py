"""Pre-fills a migrated Loom store with N memories for bench/run.sh.

The fast path: one batched insert straight into the store's tables (rows in
`memories` and their first row in `memory_versions`, both as `memory.set`
would write them; SQLite's triggers queue them for the FTS index, which
Loom fills when it next opens the store, as `loom migrate` does;
PostgreSQL's search column is generated). Agent `bench`, namespace
`default`, org `default`, keys `bench-0` .. `bench-{N-1}`, content of 12 to
24 words drawn from bench/words.txt.

  prefill.py sqlite PATH N     inserts into the SQLite database at PATH
  prefill.py tsv    OUT N      writes OUT.memories.tsv and OUT.versions.tsv for psql \\copy
"""

import hashlib
import os
import random
import sqlite3
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def rows(n):
    words = open(os.path.join(HERE, "words.txt")).read().split()
    rng = random.Random(8)
    now = int(time.time() * 1000)
    for i in range(n):
        content = " ".join(rng.choice(words) for _ in range(rng.randint(12, 24)))
        digest = hashlib.sha256(content.encode()).hexdigest()
        yield (f"bench-{i}", content, digest, now)


MEMORY = (
    "INSERT INTO memories (org, namespace, agent, memory_key, content, kind, labels, source,"
    " content_hash, version, created_ms, updated_ms)"
    " VALUES ('default', 'default', 'bench', ?, ?, 'fact', '[]', '', ?, 1, ?, ?)"
)
VERSION = (
    "INSERT INTO memory_versions (org, namespace, agent, memory_key, version, change, content, kind,"
    " labels, source, content_hash, pinned, locked, deleted, subject, changed_by, request_id, at_ms)"
    " VALUES ('default', 'default', 'bench', ?, 1, 'create', ?, 'fact', '[]', '', ?, 0, 0, 0,"
    " 'bench', 'bench', 'prefill', ?)"
)


def main():
    mode, target, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if mode == "sqlite":
        db = sqlite3.connect(target)
        db.execute("PRAGMA journal_mode=WAL")
        data = list(rows(n))
        with db:
            db.executemany(MEMORY, [(k, c, h, t, t) for k, c, h, t in data])
            db.executemany(VERSION, [(k, c, h, t) for k, c, h, t in data])
        db.close()
    elif mode == "tsv":
        with open(target + ".memories.tsv", "w") as m, open(target + ".versions.tsv", "w") as v:
            for k, c, h, t in rows(n):
                m.write(f"default\tdefault\tbench\t{k}\t{c}\tfact\t[]\t\t{h}\t1\t{t}\t{t}\n")
                v.write(
                    f"default\tdefault\tbench\t{k}\t1\tcreate\t{c}\tfact\t[]\t\t{h}\t0\t0\t0\t"
                    f"bench\tbench\tprefill\t{t}\n"
                )
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
