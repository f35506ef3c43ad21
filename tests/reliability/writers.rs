//! Concurrent writers on hot keys, and retries with idempotency keys.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use loom_core::Role;
use loom_tests::{TestServer, servers};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use tokio::task::JoinSet;

use crate::wire::{Caller, Reply, Wire};

const WRITERS: usize = 64;
const CONNECTIONS: usize = 8;
const OPS_PER_WRITER: usize = 10;
const HOT_KEYS: usize = 4;
const AGENT: &str = "hive";

fn generous(c: &mut loom_server::Config) {
    loom_tests::generous(c);
    c.database_max_connections = Some(8);
}

/// Every version of `key` (agent `hive`) as (version, change, content), oldest first.
pub async fn history(who: &Caller, key: &str) -> Vec<(i64, String, String)> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut args = json!({"memory_key": key, "agent": AGENT, "limit": 100});
        if let Some(c) = &cursor {
            args["cursor"] = json!(c);
        }
        let Reply::Answered(200, page) = Wire::Http
            .call(who, "memory.history", &args, None, None)
            .await
        else {
            panic!("memory.history {key} failed");
        };
        for v in page["versions"].as_array().expect("versions") {
            out.push((
                v["version"].as_i64().expect("version"),
                v["change"].as_str().unwrap_or("").to_owned(),
                v["content"].as_str().unwrap_or("").to_owned(),
            ));
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    out.reverse();
    out
}

#[derive(Default)]
struct Tally {
    /// (key, version) → content, for every acknowledged change.
    acked: Vec<(String, i64, String)>,
    conflicts: usize,
    noops: usize,
    failures: Vec<String>,
}

async fn writer(wire: Wire, who: Caller, id: usize) -> Tally {
    let mut rng = StdRng::seed_from_u64(id as u64);
    let mut tally = Tally::default();
    for j in 0..OPS_PER_WRITER {
        let key = format!("hot-{}", rng.random_range(0..HOT_KEYS));
        let content = format!("w{id}-op{j}");
        let (op, args) = if rng.random_bool(0.5) {
            let got = wire
                .call(
                    &who,
                    "memory.get",
                    &json!({"memory_key": key, "agent": AGENT}),
                    None,
                    None,
                )
                .await;
            let Reply::Answered(200, got) = got else {
                tally.failures.push(format!("memory.get {key}: {got:?}"));
                continue;
            };
            let v = got["version"].as_i64().expect("a version");
            (
                "memory.update",
                json!({"memory_key": key, "agent": AGENT, "if_version": v, "content": content}),
            )
        } else {
            (
                "memory.set",
                json!({"memory_key": key, "agent": AGENT, "content": content}),
            )
        };
        match wire.call(&who, op, &args, None, None).await {
            Reply::Answered(200, b) if b["changed"] == true => {
                tally
                    .acked
                    .push((key, b["version"].as_i64().expect("version"), content));
            }
            Reply::Answered(200, _) => tally.noops += 1,
            Reply::Answered(409, b)
                if b["error"]["code"] == "VERSION_CONFLICT" && op == "memory.update" =>
            {
                tally.conflicts += 1;
            }
            other => tally.failures.push(format!("{op} {key}: {other:?}")),
        }
    }
    tally
}

/// Runs the concurrent writers against one server; returns (acknowledged, conflicts).
pub async fn hammer(t: &TestServer, wire: Wire) -> (usize, usize) {
    let n = t.name();
    let base = t.url();
    let tokens: Vec<String> = (0..4)
        .map(|i| t.token("default", &format!("writer-{i}"), Role::Writer, &[]))
        .collect();
    let clients: Vec<reqwest::Client> = (0..CONNECTIONS).map(|_| reqwest::Client::new()).collect();
    let seeder = Caller {
        base: base.clone(),
        http: clients[0].clone(),
        token: tokens[0].clone(),
    };
    for k in 0..HOT_KEYS {
        let r = wire
            .call(
                &seeder,
                "memory.set",
                &json!({"memory_key": format!("hot-{k}"), "agent": AGENT, "content": "seed"}),
                None,
                None,
            )
            .await;
        assert!(matches!(r, Reply::Answered(200, _)), "{n}: seed: {r:?}");
    }
    let mut set = JoinSet::new();
    for id in 0..WRITERS {
        let who = Caller {
            base: base.clone(),
            http: clients[id % CONNECTIONS].clone(),
            token: tokens[id % tokens.len()].clone(),
        };
        set.spawn(writer(wire, who, id));
    }
    let mut all = Tally::default();
    while let Some(t) = set.join_next().await {
        let t = t.expect("a writer panicked");
        all.acked.extend(t.acked);
        all.conflicts += t.conflicts;
        all.noops += t.noops;
        all.failures.extend(t.failures);
    }
    assert!(
        all.failures.is_empty(),
        "{n}: {} calls failed, e.g. {:?}",
        all.failures.len(),
        &all.failures[..all.failures.len().min(5)]
    );

    // Every acknowledged version is in history exactly once, with its content.
    let mut acked_by_key: BTreeMap<String, HashMap<i64, String>> = BTreeMap::new();
    for (key, version, content) in &all.acked {
        let prev = acked_by_key
            .entry(key.clone())
            .or_default()
            .insert(*version, content.clone());
        assert!(
            prev.is_none(),
            "{n}: {key} v{version} was acknowledged twice"
        );
    }
    for k in 0..HOT_KEYS {
        let key = format!("hot-{k}");
        let h = history(&seeder, &key).await;
        let versions: Vec<i64> = h.iter().map(|(v, _, _)| *v).collect();
        let expected: Vec<i64> = (1..=h.len() as i64).collect();
        assert_eq!(
            versions, expected,
            "{n}: {key}: versions are not 1..N exactly once"
        );
        let acked = acked_by_key.remove(&key).unwrap_or_default();
        // No lost and no phantom write: every change after the seed was acknowledged.
        assert_eq!(
            acked.len(),
            h.len() - 1,
            "{n}: {key}: acknowledged {} changes, history holds {}",
            acked.len(),
            h.len() - 1
        );
        for (v, change, content) in h.iter().skip(1) {
            assert_eq!(acked.get(v), Some(content), "{n}: {key} v{v} ({change})");
        }
    }
    let dup = t
        .count("SELECT COUNT(*) FROM (SELECT org, namespace, agent, memory_key, version FROM memory_versions \
                GROUP BY org, namespace, agent, memory_key, version HAVING COUNT(*) > 1) d")
        .await;
    assert_eq!(dup, 0, "{n}: doubled history rows");
    eprintln!(
        "{n}: {WRITERS} writers, {} acknowledged changes, {} VERSION_CONFLICT, {} no-ops, 0 other errors",
        all.acked.len(),
        all.conflicts,
        all.noops
    );
    (all.acked.len(), all.conflicts)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_lose_nothing_and_conflict_only_with_version_conflict() {
    for t in servers(generous).await {
        let (acked, _conflicts) = hammer(&t, Wire::Http).await;
        assert!(acked > WRITERS, "{}: too few writes went through", t.name());
        t.server.shutdown().await;
    }
}

/// One client's logical writes, each retried with its key until answered.
async fn retrier(
    wire: Wire,
    who: Caller,
    id: usize,
    writes: usize,
) -> (usize, usize, usize, Vec<String>) {
    let mut rng = StdRng::seed_from_u64(1000 + id as u64);
    let key = format!("retry-{id}");
    let (mut gave_up, mut in_flight, mut sets) = (0, 0, 0);
    let mut failures = Vec::new();
    for j in 0..writes {
        let idem = format!("c{id}-w{j}");
        let content = format!("client {id} write {j}");
        let (op, args) = if j == 0 || rng.random_bool(0.5) {
            sets += 1;
            (
                "memory.set",
                json!({"memory_key": key, "agent": AGENT, "content": content}),
            )
        } else {
            (
                "memory.update",
                json!({"memory_key": key, "agent": AGENT, "content": content}),
            )
        };
        // 30% of the writes: a first attempt the client abandons after a
        // short, random wait (before, during or after the server's work).
        if rng.random_bool(0.3) {
            let wait = Duration::from_micros(rng.random_range(0..20_000));
            if let Reply::GaveUp = wire.call(&who, op, &args, Some(&idem), Some(wait)).await {
                gave_up += 1;
            }
        }
        let mut answered = false;
        for _ in 0..400 {
            match wire.call(&who, op, &args, Some(&idem), None).await {
                Reply::Answered(200, _) => {
                    answered = true;
                    break;
                }
                Reply::Answered(409, b) if b["error"]["code"] == "IDEMPOTENCY_KEY_IN_FLIGHT" => {
                    in_flight += 1;
                    // the abandoned attempt still runs: poll again shortly (bounded)
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                other => {
                    failures.push(format!("{op} {idem}: {other:?}"));
                    return (gave_up, in_flight, sets, failures);
                }
            }
        }
        if !answered {
            failures.push(format!("{idem}: still in flight after 400 polls"));
            return (gave_up, in_flight, sets, failures);
        }
    }
    (gave_up, in_flight, sets, failures)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn retried_writes_with_one_key_land_exactly_once() {
    retried_writes(Wire::Http).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn retried_mcp_calls_with_one_idempotency_key_land_exactly_once() {
    retried_writes(Wire::Mcp).await;
}

/// 16 clients, 12 logical writes each, 30% first sent with a timeout the
/// client itself causes, then retried with the same key until answered.
async fn retried_writes(wire: Wire) {
    const CLIENTS: usize = 16;
    const WRITES: usize = 12;
    for t in servers(generous).await {
        let n = format!("{} over {wire:?}", t.name());
        let base = t.url();
        let token = t.token("default", "retrier", Role::Writer, &[]);
        let mut set = JoinSet::new();
        for id in 0..CLIENTS {
            let who = Caller {
                base: base.clone(),
                http: reqwest::Client::new(),
                token: token.clone(),
            };
            set.spawn(retrier(wire, who, id, WRITES));
        }
        let (mut gave_up, mut in_flight, mut sets) = (0, 0, 0);
        while let Some(r) = set.join_next().await {
            let (g, i, s, failures) = r.expect("a client panicked");
            assert!(failures.is_empty(), "{n}: {failures:?}");
            gave_up += g;
            in_flight += i;
            sets += s;
        }
        // memory.set is audited: each run writes one ok (or noop) row, each replay a replayed row
        let ran = t
            .count("SELECT COUNT(*) FROM audit_log WHERE op = 'memory.set' AND outcome IN ('ok', 'noop')")
            .await;
        assert_eq!(
            ran, sets as i64,
            "{n}: memory.set ran more often than it was asked"
        );
        let reader = Caller {
            base: base.clone(),
            http: reqwest::Client::new(),
            token: token.clone(),
        };
        for id in 0..CLIENTS {
            let key = format!("retry-{id}");
            let h = history(&reader, &key).await;
            let contents: Vec<&str> = h.iter().map(|(_, _, c)| c.as_str()).collect();
            let expected: Vec<String> = (0..WRITES)
                .map(|j| format!("client {id} write {j}"))
                .collect();
            assert_eq!(
                contents, expected,
                "{n}: {key}: one history row per logical write, in order"
            );
        }
        let rows = t
            .count("SELECT COUNT(*) FROM memories WHERE memory_key LIKE 'retry-%'")
            .await;
        assert_eq!(rows, CLIENTS as i64, "{n}: one memory per client");
        let open = t
            .count("SELECT COUNT(*) FROM idempotency_keys WHERE state <> 'done'")
            .await;
        assert_eq!(open, 0, "{n}: a key was left in flight");
        eprintln!(
            "{n}: {} logical writes, {gave_up} attempts abandoned by the client, {in_flight} in-flight answers, 0 duplicates",
            CLIENTS * WRITES
        );
        t.server.shutdown().await;
    }
}
