//! SQLite's version history along each memory's chain (migration 0018):
//! a store whose versions were kept under their key is chained when it
//! is opened, and history, reads as of a time, inspection and provenance
//! answer from the chains as they did, for versions written before and
//! after, by Loom or by another program.

mod common;

use common::{AGENT, NS, ORG};
use serde_json::{Value, json};

/// A memory row and its versions 1..=n (content "{key} v{i}", at
/// `1_000_000 × i` ms), written as a build before 0018 wrote them.
async fn old_memory(pool: &sqlx::SqlitePool, agent: &str, key: &str, n: i64) {
    sqlx::query(
        "INSERT INTO memories (org, namespace, agent, memory_key, content, kind, labels, source, \
         content_hash, version, created_ms, updated_ms) \
         VALUES ($1, $2, $3, $4, $5, 'fact', '[]', '', 'h', $6, 1000000, $7)",
    )
    .bind(ORG)
    .bind(NS)
    .bind(agent)
    .bind(key)
    .bind(format!("{key} v{n}"))
    .bind(n)
    .bind(1_000_000 * n)
    .execute(pool)
    .await
    .unwrap();
}

async fn old_version(pool: &sqlx::SqlitePool, agent: &str, key: &str, v: i64) {
    sqlx::query(
        "INSERT INTO memory_versions (org, namespace, agent, memory_key, version, change, content, \
         kind, labels, source, content_hash, pinned, locked, deleted, subject, changed_by, \
         request_id, at_ms) \
         VALUES ($1, $2, $3, $4, $5, 'set', $6, 'fact', '[]', '', 'h', 0, 0, 0, 's', $3, 'r', $7)",
    )
    .bind(ORG)
    .bind(NS)
    .bind(agent)
    .bind(key)
    .bind(v)
    .bind(format!("{key} v{v}"))
    .bind(1_000_000 * v)
    .execute(pool)
    .await
    .unwrap();
}

fn versions(page: &Value) -> Vec<i64> {
    page["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_i64().unwrap())
        .collect()
}

#[tokio::test]
async fn versions_kept_under_their_key_are_chained_and_read_as_before() {
    let (url, dir, pool) = common::sqlite_migrated_before("0018").await;
    // Three memories whose versions were written interleaved: alice's
    // "a" (5 versions) and "b" (3), bob's "a" (2).
    old_memory(&pool, AGENT, "a", 5).await;
    old_memory(&pool, AGENT, "b", 3).await;
    old_memory(&pool, "bob", "a", 2).await;
    for v in 1..=5 {
        old_version(&pool, AGENT, "a", v).await;
        if v <= 3 {
            old_version(&pool, AGENT, "b", v).await;
        }
        if v <= 2 {
            old_version(&pool, "bob", "a", v).await;
        }
    }
    pool.close().await;

    let h = common::Harness::seeded(loom_ops::store::testing::sqlite_at(url, dir).await).await;
    // The primary key is gone; runs have an index of their own.
    assert_eq!(
        h.count("SELECT count(*) FROM sqlite_master WHERE tbl_name = 'memory_versions' AND type = 'index'")
            .await,
        1
    );
    let page = h
        .call("memory.history", json!({"memory_key": "a"}))
        .await
        .unwrap();
    assert_eq!(versions(&page), [5, 4, 3, 2, 1]);
    assert_eq!(page["versions"][2]["content"], "a v3");
    // Pages of two, each from the last one's cursor.
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut args = json!({"memory_key": "a", "limit": 2});
        if let Some(c) = &cursor {
            args["cursor"] = json!(c);
        }
        let page = h.call("memory.history", args).await.unwrap();
        seen.extend(versions(&page));
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen, [5, 4, 3, 2, 1]);
    let bobs = h
        .call("memory.history", json!({"memory_key": "a", "agent": "bob"}))
        .await
        .unwrap();
    assert_eq!(versions(&bobs), [2, 1]);

    // As of a time: the newest version written at or before it.
    let then = h
        .call(
            "memory.get",
            json!({"memory_key": "b", "as_of": loom_ops::store::rfc3339(2_500_000)}),
        )
        .await
        .unwrap();
    assert_eq!(then["content"], "b v2", "{then}");
    let inspected = h
        .call("memory.inspect", json!({"memory_key": "a"}))
        .await
        .unwrap();
    assert_eq!(inspected["versions"], 5);
    let steps = h
        .call("memory.provenance", json!({"memory_key": "b"}))
        .await
        .unwrap();
    let step_versions: Vec<i64> = steps["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["version"].as_i64().unwrap())
        .collect();
    assert_eq!(step_versions, [1, 2, 3]);

    // A version Loom writes now goes on the chain's head.
    h.call("memory.set", json!({"memory_key": "a", "content": "a v6"}))
        .await
        .unwrap();
    let page = h
        .call("memory.history", json!({"memory_key": "a", "limit": 3}))
        .await
        .unwrap();
    assert_eq!(versions(&page), [6, 5, 4]);
    assert_eq!(page["versions"][0]["content"], "a v6");

    // So does one another program inserts, naming no version before it.
    sqlx::query(
        "UPDATE memories SET version = 4, content = 'b v4' \
         WHERE org = $1 AND namespace = $2 AND agent = $3 AND memory_key = 'b'",
    )
    .bind(ORG)
    .bind(NS)
    .bind(AGENT)
    .execute(h.store().writer())
    .await
    .unwrap();
    let pool = h.store().writer();
    sqlx::query(
        "INSERT INTO memory_versions (org, namespace, agent, memory_key, version, change, content, \
         kind, labels, source, content_hash, pinned, locked, deleted, subject, changed_by, \
         request_id, at_ms) \
         VALUES ($1, $2, $3, 'b', 4, 'set', 'b v4', 'fact', '[]', '', 'h', 0, 0, 0, 's', $3, 'r', 4000000)",
    )
    .bind(ORG)
    .bind(NS)
    .bind(AGENT)
    .execute(pool)
    .await
    .unwrap();
    let page = h
        .call("memory.history", json!({"memory_key": "b"}))
        .await
        .unwrap();
    assert_eq!(versions(&page), [4, 3, 2, 1]);
    let inspected = h
        .call("memory.inspect", json!({"memory_key": "b"}))
        .await
        .unwrap();
    assert_eq!(inspected["versions"], 4);

    // A link that does not go back (written wrong by another program)
    // ends the walk there: the read answers, with what comes before it.
    sqlx::query(
        "UPDATE memory_versions SET prev = rowid WHERE memory_key = 'b' AND version = 2 AND agent = $1",
    )
    .bind(AGENT)
    .execute(h.store().writer())
    .await
    .unwrap();
    let page = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        h.call("memory.history", json!({"memory_key": "b"})),
    )
    .await
    .expect("a history read ends")
    .unwrap();
    assert_eq!(versions(&page), [4, 3, 2]);
    let inspected = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        h.call("memory.inspect", json!({"memory_key": "b"})),
    )
    .await
    .expect("a walk of the whole chain ends")
    .unwrap();
    assert_eq!(inspected["versions"], 3);
}

/// A run's changes are read through the index of runs, never a walk of the
/// namespace's versions.
#[tokio::test]
async fn a_runs_changes_are_read_by_its_index() {
    let h = common::sqlite().await;
    let plan = h.t.query_plan(
        "SELECT memory_key, agent, version, change, at_ms FROM memory_versions \
         WHERE org = ?1 AND namespace = ?2 AND run_id = ?3 \
         ORDER BY at_ms, memory_key, version LIMIT 200",
        ["acme", "main", "r"],
    );
    assert!(
        plan.iter()
            .any(|s| s.contains("USING INDEX memory_versions_by_run")),
        "{plan:?}"
    );
}

/// Each (version, prev, rowid) of `key`'s versions, oldest first.
async fn links(h: &common::Harness, key: &str) -> Vec<(i64, Option<i64>, i64)> {
    sqlx::query_as(
        "SELECT version, prev, rowid FROM memory_versions WHERE memory_key = $1 ORDER BY rowid",
    )
    .bind(key)
    .fetch_all(h.store().reader())
    .await
    .unwrap()
}

/// Loom's changes of a memory (sets, pins, locks, a delete: each writes
/// the version first, then the row, migration 0019) link each version to
/// the one before and name the newest on the row, as the trigger did for
/// every version before; the trigger now links only versions inserted
/// without a link, and one inserted with a link is left as its writer
/// linked it.
#[tokio::test]
async fn loom_links_each_version_it_writes() {
    let h = common::sqlite().await;
    let k = |content: &str| json!({"memory_key": "k", "content": content});
    let just_k = || json!({"memory_key": "k"});
    let changes = [
        ("memory.set", k("one")),
        ("memory.set", k("two")),
        ("memory.set", k("three")),
        // Another key written between k's versions: not on k's chain.
        ("memory.set", json!({"memory_key": "other", "content": "x"})),
        ("memory.pin", just_k()),
        ("memory.lock", just_k()),
        ("memory.unlock", just_k()),
        ("memory.set", k("four")),
        ("memory.unpin", just_k()),
        ("memory.delete", just_k()),
    ];
    for (op, args) in changes {
        h.call(op, args).await.unwrap();
    }

    let chain = links(&h, "k").await;
    let numbers: Vec<i64> = chain.iter().map(|l| l.0).collect();
    assert_eq!(numbers, (1..=9).collect::<Vec<_>>(), "{chain:?}");
    assert_eq!(chain[0].1, None, "the first version has none before it");
    for pair in chain.windows(2) {
        assert_eq!(pair[1].1, Some(pair[0].2), "{chain:?}");
    }
    let head = h
        .count("SELECT history FROM memories WHERE memory_key = 'k'")
        .await;
    assert_eq!(head, chain[8].2);
    let page = h
        .call("memory.history", json!({"memory_key": "k", "limit": 3}))
        .await
        .unwrap();
    assert_eq!(versions(&page), [9, 8, 7]);

    // A version inserted with its link named is left as its writer linked
    // it: the memory's newest is not moved.
    sqlx::query(
        "INSERT INTO memory_versions (org, namespace, agent, memory_key, version, change, content, \
         kind, labels, source, content_hash, pinned, locked, deleted, subject, changed_by, \
         request_id, at_ms, prev) \
         VALUES ($1, $2, $3, 'k', 10, 'set', 'ten', 'fact', '[]', '', 'h', 0, 0, 0, 's', $3, 'r', 9, $4)",
    )
    .bind(ORG)
    .bind(NS)
    .bind(AGENT)
    .bind(head)
    .execute(h.store().writer())
    .await
    .unwrap();
    assert_eq!(
        h.count("SELECT history FROM memories WHERE memory_key = 'k'")
            .await,
        head
    );
}
