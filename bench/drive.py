"""A fixed number of calls, one after another on one keep-alive connection,
for bench/instructions.sh: the same requests as bench/wrk.lua, with keys
and words drawn from a seeded generator, so two runs send the same calls.

  drive.py WORKLOAD CALLS PORT     (BENCH_TOKEN, BENCH_WORDS, BENCH_KEYS)

Exits 1 when a call failed (a non-200 answer, a JSON-RPC error or an
isError result), after printing the first failure.
"""

import http.client
import json
import os
import random
import sys


def main():
    workload, calls, port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    keys = int(os.environ.get("BENCH_KEYS", "100000"))
    words = open(os.environ["BENCH_WORDS"]).read().split()
    rng = random.Random(f"{workload}-{os.environ.get('BENCH_SEED', '8')}")
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Authorization": "Bearer " + os.environ["BENCH_TOKEN"],
    }

    def tool(name, arguments):
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": name, "arguments": arguments}}
        return "/mcp", call

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    failed = 0
    for n in range(calls):
        key = f"bench-{rng.randrange(keys)}"
        if workload == "get":
            path, body = tool("loom_memory_get", {"memory_key": key, "agent": "bench"})
        elif workload == "set":
            content = " ".join(rng.choice(words) for _ in range(16))
            path, body = tool("loom_memory_set", {"memory_key": key, "agent": "bench",
                                                  "content": f"{content} {rng.randrange(10**9)}"})
        elif workload == "create":
            # A key no run of this many calls wrote before (a warm-up's
            # calls are fewer): each call creates a memory.
            content = " ".join(rng.choice(words) for _ in range(16))
            path, body = tool("loom_memory_set", {"memory_key": f"new-{calls}-{n}", "agent": "bench",
                                                  "content": f"{content} {rng.randrange(10**9)}"})
        elif workload == "search":
            path, body = tool("loom_search", {"query": " ".join(rng.sample(words, rng.randint(2, 3)))})
        elif workload == "http":
            path, body = "/v1/memory.get", {"memory_key": key, "agent": "bench"}
        else:
            sys.exit(f"unknown workload {workload} (get, set, create, search, http)")
        conn.request("POST", path, json.dumps(body), headers)
        answer = conn.getresponse()
        data = answer.read()
        if answer.status != 200 or b'"isError":true' in data or b'"error":{"code"' in data:
            if failed == 0:
                print(f"first failure ({answer.status}): {data[:300]!r}", file=sys.stderr)
            failed += 1
    if failed:
        sys.exit(f"{failed} of {calls} calls failed")


if __name__ == "__main__":
    main()
