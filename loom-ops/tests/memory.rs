//! The memory plane end to end, through the registry, on every backend.

mod common;

use common::{AGENT, Harness, NS, code};
use loom_ops::store::rfc3339;
use serde_json::{Value, json};

async fn content_of(h: &Harness, agent: &str, key: &str) -> Option<(String, i64, i64, i64, i64)> {
    sqlx::query_as(
        "SELECT content, version, deleted, pinned, locked FROM memories \
         WHERE org = 'acme' AND namespace = 'main' AND agent = $1 AND memory_key = $2",
    )
    .bind(agent)
    .bind(key)
    .fetch_optional(h.store().reader())
    .await
    .unwrap()
}

async fn versions(h: &Harness, key: &str) -> i64 {
    let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM memory_versions WHERE memory_key = $1")
        .bind(key)
        .fetch_one(h.store().reader())
        .await
        .unwrap();
    n
}

/// Asserts that `memory.get` of key `k` answers `run` (the field left out
/// without one), and that the row and its current version both hold it.
async fn expect_run(h: &Harness, run: Option<&str>) {
    let got = h
        .call("memory.get", json!({"memory_key": "k"}))
        .await
        .unwrap();
    let (row, version): (Option<String>, Option<String>) = sqlx::query_as(
        "SELECT m.run_id, v.run_id FROM memories m JOIN memory_versions v \
         ON v.org = m.org AND v.namespace = m.namespace AND v.agent = m.agent \
         AND v.memory_key = m.memory_key AND v.version = m.version WHERE m.memory_key = 'k'",
    )
    .fetch_one(h.store().reader())
    .await
    .unwrap();
    let n = h.name();
    assert_eq!(got.get("run_id").and_then(Value::as_str), run, "{n}");
    assert_eq!((row.as_deref(), version.as_deref()), (run, run), "{n}");
}

#[tokio::test]
async fn get_answers_the_run_of_the_current_version() {
    for h in common::all().await {
        let n = h.name();
        for (run, op, content) in [
            ("run-a", "memory.set", "one"),
            ("run-b", "memory.update", "two"),
        ] {
            h.call_in(
                AGENT,
                Some(run),
                op,
                json!({"memory_key": "k", "content": content}),
            )
            .await
            .unwrap();
            expect_run(&h, Some(run)).await;
        }
        // A change outside any run: the version has none, and neither has
        // the answer.
        h.call_in(AGENT, None, "memory.pin", json!({"memory_key": "k"}))
            .await
            .unwrap();
        expect_run(&h, None).await;

        // Each version keeps the run of its own change.
        let page = h
            .call("memory.history", json!({"memory_key": "k"}))
            .await
            .unwrap();
        let runs: Vec<&Value> = page["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| &v["run_id"])
            .collect();
        assert_eq!(
            runs,
            [&Value::Null, &json!("run-b"), &json!("run-a")],
            "{n}"
        );
    }
}

/// Migration 0012 copies each row's current version's run onto the row.
#[tokio::test]
async fn the_run_migration_copies_the_current_versions_run_onto_the_row() {
    const MIGRATION: &str = include_str!("../migrations/sqlite/0012_memory_run.sql");
    assert_eq!(
        MIGRATION,
        include_str!("../migrations/postgres/0012_memory_run.sql"),
        "one migration for both backends"
    );
    let backfill = &MIGRATION[MIGRATION.find("UPDATE").unwrap()..];
    for h in common::all().await {
        let n = h.name();
        for (run, key, content) in [
            ("run-a", "k", "one"),
            ("run-b", "k", "two"),
            ("run-c", "other", "x"),
        ] {
            h.call_in(
                AGENT,
                Some(run),
                "memory.set",
                json!({"memory_key": key, "content": content}),
            )
            .await
            .unwrap();
        }
        // As a store written before the column was there.
        sqlx::query("UPDATE memories SET run_id = NULL")
            .execute(h.store().writer())
            .await
            .unwrap();
        sqlx::query(backfill)
            .execute(h.store().writer())
            .await
            .unwrap();
        expect_run(&h, Some("run-b")).await;
        let (other,): (Option<String>,) =
            sqlx::query_as("SELECT run_id FROM memories WHERE memory_key = 'other'")
                .fetch_one(h.store().reader())
                .await
                .unwrap();
        assert_eq!(other.as_deref(), Some("run-c"), "{n}");
    }
}

#[tokio::test]
async fn set_stores_a_version_and_an_identical_set_writes_nothing() {
    for h in common::all().await {
        let n = h.name();
        let out = h
            .call("memory.set", json!({"memory_key": "deploy_window", "content": "Fridays 14:00", "kind": "decision", "labels": ["ops", "deploy"]}))
            .await
            .unwrap();
        assert_eq!(out["version"], 1, "{n}");
        assert_eq!(out["changed"], true, "{n}");
        assert_eq!(
            content_of(&h, AGENT, "deploy_window").await,
            Some(("Fridays 14:00".into(), 1, 0, 0, 0)),
            "{n}"
        );
        let (kind, labels): (String, String) =
            sqlx::query_as("SELECT kind, labels FROM memories WHERE memory_key = 'deploy_window'")
                .fetch_one(h.store().reader())
                .await
                .unwrap();
        assert_eq!(
            (kind.as_str(), labels.as_str()),
            ("decision", r#"["deploy","ops"]"#),
            "{n}"
        );
        let (run,): (Option<String>,) =
            sqlx::query_as("SELECT run_id FROM memory_versions WHERE memory_key = 'deploy_window'")
                .fetch_one(h.store().reader())
                .await
                .unwrap();
        assert_eq!(run.as_deref(), Some("run-1"), "{n}");

        let again = h
            .call(
                "memory.set",
                json!({"memory_key": "deploy_window", "content": "Fridays 14:00"}),
            )
            .await
            .unwrap();
        assert_eq!(again["changed"], false, "{n}");
        assert_eq!(again["version"], 1, "{n}");
        assert_eq!(versions(&h, "deploy_window").await, 1, "{n}");

        let changed = h
            .call(
                "memory.set",
                json!({"memory_key": "deploy_window", "content": "Thursdays 10:00"}),
            )
            .await
            .unwrap();
        assert_eq!(changed["version"], 2, "{n}");
        assert_eq!(
            content_of(&h, AGENT, "deploy_window").await.unwrap().0,
            "Thursdays 10:00",
            "{n}"
        );
        assert_eq!(versions(&h, "deploy_window").await, 2, "{n}");
        assert_eq!(h.audit("memory.set").await, ["ok", "noop", "ok"], "{n}");
    }
}

#[tokio::test]
async fn a_set_survives_a_restart_on_sqlite() {
    let mut h = common::sqlite().await;
    h.call(
        "memory.set",
        json!({"memory_key": "db", "content": "PostgreSQL 17"}),
    )
    .await
    .unwrap();
    h.restart().await;
    let got = h
        .call("memory.get", json!({"memory_key": "db"}))
        .await
        .unwrap();
    assert_eq!(got["content"], "PostgreSQL 17");
    assert_eq!(got["version"], 1);
}

/// Recalls and exposures are written off the request path, in batches, yet
/// what a caller reads next never misses what it was answered before: each
/// get's count is one more than the last, and the breakdown, inspect and
/// aggregate count every serving, with nothing flushed by the test.
#[tokio::test]
async fn every_recall_answered_before_a_read_is_in_what_it_reads() {
    for h in common::all().await {
        let n = h.name();
        h.call("memory.set", json!({"memory_key": "k", "content": "one"}))
            .await
            .unwrap();
        h.call(
            "memory.set",
            json!({"memory_key": "other", "content": "two"}),
        )
        .await
        .unwrap();
        for i in 1..=12 {
            let got = h
                .call("memory.get", json!({"memory_key": "k"}))
                .await
                .unwrap();
            assert_eq!(got["recall_count"], i, "{n}: get {i}");
            // a read of another row between two gets of this one
            h.call("memory.get", json!({"memory_key": "other"}))
                .await
                .unwrap();
        }
        // a list right after shows what the gets answered, written or not
        let listed = h
            .call("memory.list", json!({"key_prefix": "k"}))
            .await
            .unwrap();
        assert_eq!(listed["memories"][0]["recall_count"], 12, "{n}: {listed}");
        let got = h
            .call_as(
                "bob",
                "memory.get",
                // bob has no row "k": alice's is served
                json!({"memory_key": "k", "include_recall_breakdown": true}),
            )
            .await
            .unwrap();
        assert_eq!(got["recall_count"], 13, "{n}");
        assert_eq!(
            got["recall_breakdown"]["by_agent"],
            json!([{"agent": "alice", "count": 12}, {"agent": "bob", "count": 1}]),
            "{n}"
        );
        let inspected = h
            .call("memory.inspect", json!({"memory_key": "k"}))
            .await
            .unwrap();
        assert_eq!(
            (&inspected["exposures"], &inspected["served_agents"]),
            (&json!(13), &json!(2)),
            "{n}: {inspected}"
        );
        assert_eq!(inspected["memory"]["recall_count"], 13, "{n}");
    }
}

#[tokio::test]
async fn get_counts_recalls_records_exposures_and_falls_back_to_any_agent() {
    for h in common::all().await {
        let n = h.name();
        h.call_as(
            "bob",
            "memory.set",
            json!({"memory_key": "style", "content": "tabs, see [[lint]]"}),
        )
        .await
        .unwrap();
        h.call_as(
            "bob",
            "memory.set",
            json!({"memory_key": "lint", "content": "clippy -D warnings"}),
        )
        .await
        .unwrap();
        // alice has no row: bob's is served
        let got = h
            .call(
                "memory.get",
                json!({"memory_key": "style", "include_recall_breakdown": true, "follow": true}),
            )
            .await
            .unwrap();
        assert_eq!(got["agent"], "bob", "{n}");
        assert_eq!(got["recall_count"], 1, "{n}");
        assert_eq!(
            got["recall_breakdown"]["by_agent"],
            json!([{"agent": "alice", "count": 1}]),
            "{n}"
        );
        assert_eq!(got["followed"][0]["memory_key"], "lint", "{n}");
        h.flush_usage().await;
        let (recalls,): (i64,) =
            sqlx::query_as("SELECT recall_count FROM memories WHERE memory_key = 'style'")
                .fetch_one(h.store().reader())
                .await
                .unwrap();
        assert_eq!(recalls, 1, "{n}");
        // one exposure for the row, one for the followed link
        assert_eq!(h.rows("memory_exposures").await, 2, "{n}");

        let trimmed = h
            .call(
                "memory.get",
                json!({"memory_key": "style", "fields": ["content"]}),
            )
            .await
            .unwrap();
        assert_eq!(
            trimmed,
            json!({"memory_key": "style", "content": "tabs, see [[lint]]"}),
            "{n}"
        );
        // naming the agent narrows to its row
        assert_eq!(
            code(
                h.call(
                    "memory.get",
                    json!({"memory_key": "style", "agent": "carol"})
                )
                .await
            ),
            "RESOURCE_NOT_FOUND",
            "{n}"
        );
        assert_eq!(
            code(
                h.call(
                    "memory.get",
                    json!({"memory_key": "style", "if_version": 7})
                )
                .await
            ),
            "VERSION_CONFLICT",
            "{n}"
        );
        assert_eq!(
            code(
                h.call(
                    "memory.get",
                    json!({"memory_key": "style", "fields": ["colour"]})
                )
                .await
            ),
            "INVALID_ARGUMENTS",
            "{n}"
        );
    }
}

/// As without as_of: the caller's own row when it was live then, else
/// another agent's that was.
#[tokio::test]
async fn as_of_falls_back_to_another_agents_row_live_then() {
    for h in common::all().await {
        let n = h.name();
        for (agent, content) in [("bot", "the bot's"), (AGENT, "mine")] {
            h.call(
                "memory.set",
                json!({"memory_key": "owner", "content": content, "agent": agent}),
            )
            .await
            .unwrap();
        }
        h.call("memory.delete", json!({"memory_key": "owner"}))
            .await
            .unwrap();
        // bot's version 1 at 1,000 s; the caller's version 1 at 2,000 s,
        // deleted (version 2) at 3,000 s.
        for (agent, v, at) in [
            ("bot", 1, 1_000_000_i64),
            (AGENT, 1, 2_000_000),
            (AGENT, 2, 3_000_000),
        ] {
            sqlx::query(
                "UPDATE memory_versions SET at_ms = $1 WHERE memory_key = 'owner' AND agent = $2 AND version = $3",
            )
            .bind(at)
            .bind(agent)
            .bind(v)
            .execute(h.store().writer())
            .await
            .unwrap();
        }
        let at = |ms: i64| {
            h.call(
                "memory.get",
                json!({"memory_key": "owner", "as_of": rfc3339(ms)}),
            )
        };
        let mine = at(2_500_000).await.unwrap();
        assert_eq!(
            (&mine["content"], &mine["agent"]),
            (&json!("mine"), &json!(AGENT)),
            "{n}"
        );
        let after_delete = at(3_500_000).await.unwrap();
        assert_eq!(
            (&after_delete["content"], &after_delete["agent"]),
            (&json!("the bot's"), &json!("bot")),
            "{n}"
        );
        assert_eq!(code(at(500_000).await), "RESOURCE_NOT_FOUND", "{n}");
        // Named, the caller's row alone answers: deleted then.
        assert_eq!(
            code(
                h.call(
                    "memory.get",
                    json!({"memory_key": "owner", "as_of": rfc3339(3_500_000), "agent": AGENT})
                )
                .await
            ),
            "RESOURCE_NOT_FOUND",
            "{n}"
        );
    }
}

#[tokio::test]
async fn as_of_serves_the_version_current_then_and_history_lists_them() {
    for h in common::all().await {
        let n = h.name();
        h.call(
            "memory.set",
            json!({"memory_key": "owner", "content": "Ann"}),
        )
        .await
        .unwrap();
        h.call(
            "memory.set",
            json!({"memory_key": "owner", "content": "Ben"}),
        )
        .await
        .unwrap();
        // fix the version times so the test does not depend on the clock
        for (v, at) in [(1, 1_000_000_000_000_i64), (2, 1_000_000_100_000)] {
            sqlx::query(
                "UPDATE memory_versions SET at_ms = $1 WHERE memory_key = 'owner' AND version = $2",
            )
            .bind(at)
            .bind(v)
            .execute(h.store().writer())
            .await
            .unwrap();
        }
        let then = h
            .call(
                "memory.get",
                json!({"memory_key": "owner", "as_of": rfc3339(1_000_000_050_000)}),
            )
            .await
            .unwrap();
        assert_eq!(
            (then["content"].clone(), then["version"].clone()),
            (json!("Ann"), json!(1)),
            "{n}"
        );
        let now = h
            .call(
                "memory.get",
                json!({"memory_key": "owner", "as_of": rfc3339(1_000_000_200_000)}),
            )
            .await
            .unwrap();
        assert_eq!(now["content"], "Ben", "{n}");
        assert_eq!(
            code(
                h.call(
                    "memory.get",
                    json!({"memory_key": "owner", "as_of": rfc3339(1)})
                )
                .await
            ),
            "RESOURCE_NOT_FOUND",
            "{n}"
        );
        // if_version checks the current version, as_of reads another: not both
        assert_eq!(
            code(
                h.call(
                    "memory.get",
                    json!({"memory_key": "owner", "as_of": rfc3339(1_000_000_050_000), "if_version": 9})
                )
                .await
            ),
            "INVALID_ARGUMENTS",
            "{n}"
        );

        let page = h
            .call("memory.history", json!({"memory_key": "owner", "limit": 1}))
            .await
            .unwrap();
        assert_eq!(page["versions"].as_array().unwrap().len(), 1, "{n}");
        assert_eq!(page["versions"][0]["content"], "Ben", "{n}");
        assert_eq!(page["versions"][0]["run_id"], "run-1", "{n}");
        let older = h
            .call(
                "memory.history",
                json!({"memory_key": "owner", "cursor": page["next_cursor"]}),
            )
            .await
            .unwrap();
        assert_eq!(older["versions"][0]["content"], "Ann", "{n}");
        assert_eq!(older["versions"][0]["change"], "create", "{n}");
        assert!(older.get("next_cursor").is_none(), "{n}");
    }
}

#[tokio::test]
async fn update_changes_only_what_it_names_and_checks_if_version() {
    for h in common::all().await {
        let n = h.name();
        h.call(
            "memory.set",
            json!({"memory_key": "k", "content": "one", "labels": ["a"]}),
        )
        .await
        .unwrap();
        let out = h
            .call(
                "memory.update",
                json!({"memory_key": "k", "labels": ["b"], "if_version": 1}),
            )
            .await
            .unwrap();
        assert_eq!(out["version"], 2, "{n}");
        let (content, labels): (String, String) =
            sqlx::query_as("SELECT content, labels FROM memories WHERE memory_key = 'k'")
                .fetch_one(h.store().reader())
                .await
                .unwrap();
        assert_eq!(
            (content.as_str(), labels.as_str()),
            ("one", r#"["b"]"#),
            "{n}"
        );

        let stale = h
            .call(
                "memory.update",
                json!({"memory_key": "k", "content": "two", "if_version": 1}),
            )
            .await
            .unwrap_err();
        assert_eq!(stale.code().as_str(), "VERSION_CONFLICT", "{n}");
        assert_eq!(
            stale.body()["retryable"],
            false,
            "the same if_version never succeeds: {n}"
        );
        assert_eq!(stale.detail()["current_version"], 2, "{n}");
        assert_eq!(content_of(&h, AGENT, "k").await.unwrap().0, "one", "{n}");
        assert_eq!(versions(&h, "k").await, 2, "{n}");
        assert_eq!(
            code(h.call("memory.update", json!({"memory_key": "k"})).await),
            "INVALID_ARGUMENTS",
            "{n}"
        );
        assert_eq!(
            code(
                h.call(
                    "memory.update",
                    json!({"memory_key": "nope", "content": "x"})
                )
                .await
            ),
            "RESOURCE_NOT_FOUND",
            "{n}"
        );
        // Naming what the row already holds changes nothing.
        let same = h
            .call(
                "memory.update",
                json!({"memory_key": "k", "content": "one"}),
            )
            .await
            .unwrap();
        assert_eq!(
            (&same["changed"], &same["version"]),
            (&json!(false), &json!(2)),
            "{n}"
        );
        // An update changes content as a set does: its audit rows say so.
        assert_eq!(
            h.audit("memory.update").await,
            [
                "ok",
                "VERSION_CONFLICT",
                "INVALID_ARGUMENTS",
                "RESOURCE_NOT_FOUND",
                "noop"
            ],
            "{n}"
        );
    }
}

#[tokio::test]
async fn of_two_concurrent_updates_on_one_version_exactly_one_wins() {
    for h in common::all().await {
        let n = h.name();
        h.call(
            "memory.set",
            json!({"memory_key": "race", "content": "start"}),
        )
        .await
        .unwrap();
        let (a, b) = tokio::join!(
            h.call(
                "memory.update",
                json!({"memory_key": "race", "content": "from a", "if_version": 1})
            ),
            h.call(
                "memory.update",
                json!({"memory_key": "race", "content": "from b", "if_version": 1})
            ),
        );
        let (won, lost) = match (a, b) {
            (Ok(w), Err(l)) => (w, l),
            (Err(l), Ok(w)) => (w, l),
            other => panic!("{n}: expected one winner, got {other:?}"),
        };
        assert_eq!(won["version"], 2, "{n}");
        assert_eq!(lost.code().as_str(), "VERSION_CONFLICT", "{n}");
        assert_eq!(lost.detail()["current_version"], 2, "{n}");
        assert_eq!(versions(&h, "race").await, 2, "{n}");
        let stored = content_of(&h, AGENT, "race").await.unwrap();
        assert!(stored.0 == "from a" || stored.0 == "from b", "{n}");
        assert_eq!(stored.1, 2, "{n}");
    }
}

#[tokio::test]
async fn pins_refuse_delete_and_soft_delete_keeps_history() {
    for h in common::all().await {
        let n = h.name();
        h.call(
            "memory.set",
            json!({"memory_key": "keep", "content": "important"}),
        )
        .await
        .unwrap();
        assert_eq!(
            h.call("memory.pin", json!({"memory_key": "keep"}))
                .await
                .unwrap()["version"],
            2,
            "{n}"
        );
        assert_eq!(
            code(h.call("memory.delete", json!({"memory_key": "keep"})).await),
            "PINNED_CONFLICT",
            "{n}"
        );
        assert_eq!(
            content_of(&h, AGENT, "keep").await.unwrap(),
            ("important".into(), 2, 0, 1, 0),
            "{n}"
        );
        h.call("memory.unpin", json!({"memory_key": "keep"}))
            .await
            .unwrap();
        h.call("memory.delete", json!({"memory_key": "keep"}))
            .await
            .unwrap();
        assert_eq!(
            content_of(&h, AGENT, "keep").await.unwrap(),
            ("important".into(), 4, 1, 0, 0),
            "{n}"
        );
        assert_eq!(
            code(h.call("memory.get", json!({"memory_key": "keep"})).await),
            "RESOURCE_NOT_FOUND",
            "{n}"
        );
        let hist = h
            .call("memory.history", json!({"memory_key": "keep"}))
            .await
            .unwrap();
        let changes: Vec<&str> = hist["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["change"].as_str().unwrap())
            .collect();
        assert_eq!(changes, ["delete", "unpin", "pin", "create"], "{n}");
        assert_eq!(
            h.audit("memory.delete").await,
            ["PINNED_CONFLICT", "ok"],
            "{n}"
        );
        assert_eq!(h.audit("memory.pin").await, ["ok"], "{n}");
        assert_eq!(h.audit("memory.unpin").await, ["ok"], "{n}");
        // setting it again brings it back as a new version
        let back = h
            .call(
                "memory.set",
                json!({"memory_key": "keep", "content": "important"}),
            )
            .await
            .unwrap();
        assert_eq!(
            (back["version"].clone(), back["changed"].clone()),
            (json!(5), json!(true)),
            "{n}"
        );
    }
}

#[tokio::test]
async fn a_lock_refuses_every_change_until_unlocked() {
    for h in common::all().await {
        let n = h.name();
        h.call(
            "memory.set",
            json!({"memory_key": "frozen", "content": "v1"}),
        )
        .await
        .unwrap();
        h.call("memory.lock", json!({"memory_key": "frozen"}))
            .await
            .unwrap();
        assert_eq!(
            code(
                h.call(
                    "memory.set",
                    json!({"memory_key": "frozen", "content": "v2"})
                )
                .await
            ),
            "LOCKED",
            "{n}"
        );
        // the lock holds the key for every agent
        assert_eq!(
            code(
                h.call_as(
                    "bob",
                    "memory.set",
                    json!({"memory_key": "frozen", "content": "v2"})
                )
                .await
            ),
            "LOCKED",
            "{n}"
        );
        assert_eq!(
            code(
                h.call(
                    "memory.update",
                    json!({"memory_key": "frozen", "content": "v2"})
                )
                .await
            ),
            "LOCKED",
            "{n}"
        );
        assert_eq!(
            code(
                h.call("memory.delete", json!({"memory_key": "frozen"}))
                    .await
            ),
            "LOCKED",
            "{n}"
        );
        assert_eq!(
            code(h.call("memory.pin", json!({"memory_key": "frozen"})).await),
            "LOCKED",
            "{n}"
        );
        assert_eq!(
            content_of(&h, AGENT, "frozen").await.unwrap(),
            ("v1".into(), 2, 0, 0, 1),
            "{n}"
        );
        assert_eq!(content_of(&h, "bob", "frozen").await, None, "{n}");
        assert_eq!(
            h.audit("memory.set").await,
            ["ok", "LOCKED", "LOCKED"],
            "{n}"
        );
        // ... and bob's own row of the key, written before the lock, is held
        // too: no update, delete, pin or bulk change of it
        h.call_as(
            "bob",
            "memory.set",
            json!({"memory_key": "held", "content": "bob's"}),
        )
        .await
        .unwrap();
        h.call(
            "memory.set",
            json!({"memory_key": "held", "content": "mine"}),
        )
        .await
        .unwrap();
        h.call("memory.lock", json!({"memory_key": "held"}))
            .await
            .unwrap();
        for (op, args) in [
            (
                "memory.update",
                json!({"memory_key": "held", "content": "x"}),
            ),
            ("memory.delete", json!({"memory_key": "held"})),
            ("memory.pin", json!({"memory_key": "held"})),
        ] {
            assert_eq!(code(h.call_as("bob", op, args).await), "LOCKED", "{n} {op}");
        }
        let bulk = h
            .call_as(
                "bob",
                "memory.apply",
                json!({"action": "delete", "filter": {"key_prefix": "held"}, "agent": "bob"}),
            )
            .await
            .unwrap();
        assert_eq!(bulk["changed"], json!([]), "{n}: {bulk}");
        assert_eq!(bulk["skipped"][0]["reason"], "locked", "{n}: {bulk}");
        let swept = h
            .call_as(
                "bob",
                "blacklist.add",
                json!({"pattern": "bob's", "sweep": true}),
            )
            .await
            .unwrap();
        assert_eq!(swept["removed"], json!([]), "{n}: {swept}");
        assert_eq!(swept["kept"][0]["reason"], "locked", "{n}: {swept}");
        assert_eq!(
            content_of(&h, "bob", "held").await.unwrap().0,
            "bob's",
            "{n}"
        );
        h.call("memory.unlock", json!({"memory_key": "frozen"}))
            .await
            .unwrap();
        assert_eq!(
            h.call(
                "memory.set",
                json!({"memory_key": "frozen", "content": "v2"})
            )
            .await
            .unwrap()["version"],
            4,
            "{n}"
        );
    }
}

#[tokio::test]
async fn the_blacklist_refuses_matching_content_and_sweeps_existing_rows() {
    for h in common::all().await {
        let n = h.name();
        h.call(
            "memory.set",
            json!({"memory_key": "a", "content": "the API key is 123"}),
        )
        .await
        .unwrap();
        h.call(
            "memory.set",
            json!({"memory_key": "b", "content": "api-key rotation is monthly"}),
        )
        .await
        .unwrap();
        h.call(
            "memory.set",
            json!({"memory_key": "c", "content": "nothing secret"}),
        )
        .await
        .unwrap();
        h.call("memory.pin", json!({"memory_key": "b"}))
            .await
            .unwrap();
        let added = h
            .call(
                "blacklist.add",
                json!({"pattern": "*api?key*", "sweep": true}),
            )
            .await
            .unwrap();
        assert_eq!(added["added"], true, "{n}");
        assert_eq!(
            added["removed"],
            json!([{"memory_key": "a", "agent": "alice"}]),
            "{n}"
        );
        assert_eq!(
            added["kept"],
            json!([{"memory_key": "b", "agent": "alice", "reason": "pinned"}]),
            "{n}"
        );
        assert_eq!(content_of(&h, AGENT, "a").await.unwrap().2, 1, "{n}");
        assert_eq!(content_of(&h, AGENT, "c").await.unwrap().2, 0, "{n}");

        let before = h.rows("memory_versions").await;
        assert_eq!(
            code(
                h.call(
                    "memory.set",
                    json!({"memory_key": "d", "content": "my Api_Key: x"})
                )
                .await
            ),
            "BLACKLISTED",
            "{n}"
        );
        assert_eq!(
            code(
                h.call(
                    "memory.update",
                    json!({"memory_key": "c", "content": "API KEY here"})
                )
                .await
            ),
            "BLACKLISTED",
            "{n}"
        );
        assert_eq!(content_of(&h, AGENT, "d").await, None, "{n}");
        assert_eq!(h.rows("memory_versions").await, before, "{n}");
        // the same pattern again adds nothing, in any case
        for again in ["*api?key*", "*API?Key*"] {
            assert_eq!(
                h.call("blacklist.add", json!({"pattern": again}))
                    .await
                    .unwrap()["added"],
                false,
                "{n} {again}"
            );
        }
        assert_eq!(h.rows("blacklist").await, 1, "{n}");
        assert_eq!(
            code(h.call("blacklist.add", json!({"pattern": "**"})).await),
            "INVALID_ARGUMENTS",
            "{n}"
        );
        // `?` alone matches one-character content, not everything.
        assert_eq!(
            h.call("blacklist.add", json!({"pattern": "?"}))
                .await
                .unwrap()["added"],
            true,
            "{n}"
        );
        let listed = h.call("blacklist.list", json!({})).await.unwrap();
        let patterns: Vec<&str> = listed["patterns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["pattern"].as_str().unwrap())
            .collect();
        assert_eq!(patterns, ["*api?key*", "?"], "{n}");
        assert_eq!(listed["patterns"][0]["added_by"], "user:1", "{n}: {listed}");
        // Taken off the list (ignoring case, as it matches), the content it
        // refused may be stored again.
        let removed = h
            .call("blacklist.remove", json!({"pattern": "*API?KEY*"}))
            .await
            .unwrap();
        assert_eq!(removed["pattern"], "*api?key*", "{n}");
        h.call(
            "memory.set",
            json!({"memory_key": "d", "content": "my Api_Key: x"}),
        )
        .await
        .unwrap();
        assert_eq!(
            code(
                h.call("blacklist.remove", json!({"pattern": "*api?key*"}))
                    .await
            ),
            "RESOURCE_NOT_FOUND",
            "{n}"
        );
        // A pattern longer than any held is refused as add refuses it, its
        // refusal audited (it once failed compiling its case-blind match).
        let long = "b".repeat(200_000);
        assert_eq!(
            code(h.call("blacklist.remove", json!({ "pattern": long })).await),
            "INVALID_ARGUMENTS",
            "{n}"
        );
        assert_eq!(
            h.audit("blacklist.remove").await,
            ["ok", "RESOURCE_NOT_FOUND", "INVALID_ARGUMENTS"],
            "{n}"
        );
    }
}

#[tokio::test]
async fn apply_dry_run_reports_exactly_what_the_real_run_changes() {
    for h in common::all().await {
        let n = h.name();
        for (key, labels) in [
            ("t/1", json!(["old"])),
            ("t/2", json!(["old"])),
            ("t/3", json!(["old", "x"])),
            ("t/4", json!(["new"])),
            ("u/1", json!(["old"])),
        ] {
            h.call(
                "memory.set",
                json!({"memory_key": key, "content": format!("content {key}"), "labels": labels}),
            )
            .await
            .unwrap();
        }
        h.call_as(
            "bob",
            "memory.set",
            json!({"memory_key": "t/5", "content": "bob's", "labels": ["old"]}),
        )
        .await
        .unwrap();
        h.call("memory.pin", json!({"memory_key": "t/2"}))
            .await
            .unwrap();
        h.call("memory.lock", json!({"memory_key": "t/3"}))
            .await
            .unwrap();
        let args = json!({"action": "delete", "filter": {"labels": ["old"], "key_prefix": "t/"}, "dry_run": true});
        let before = h.rows("memory_versions").await;
        let dry = h.call("memory.apply", args.clone()).await.unwrap();
        assert_eq!(
            h.rows("memory_versions").await,
            before,
            "{n}: a dry run writes nothing"
        );
        assert_eq!(dry["memory_keys"], json!(["t/1", "t/5"]), "{n}");
        assert_eq!(
            dry["skipped"],
            json!([{"memory_key": "t/2", "agent": "alice", "reason": "pinned"}, {"memory_key": "t/3", "agent": "alice", "reason": "locked"}]),
            "{n}"
        );
        let mut real_args = args;
        real_args["dry_run"] = json!(false);
        let real = h.call("memory.apply", real_args).await.unwrap();
        assert_eq!(real["memory_keys"], dry["memory_keys"], "{n}");
        assert_eq!(real["changed"], dry["changed"], "{n}");
        let deleted: Vec<(String,)> =
            sqlx::query_as("SELECT memory_key FROM memories WHERE deleted = 1 ORDER BY memory_key")
                .fetch_all(h.store().reader())
                .await
                .unwrap();
        assert_eq!(deleted, [("t/1".to_owned(),), ("t/5".to_owned(),)], "{n}");
        assert_eq!(h.rows("memory_versions").await, before + 2, "{n}");
        assert_eq!(h.audit("memory.apply").await, ["dry_run", "ok"], "{n}");

        // label: only rows that lack the label change
        let label = h.call("memory.apply", json!({"action": "label", "labels": ["x"], "filter": {"kind": "fact"}, "dry_run": true})).await.unwrap();
        assert_eq!(label["memory_keys"], json!(["t/2", "t/4", "u/1"]), "{n}");
        let labelled = h
            .call(
                "memory.apply",
                json!({"action": "label", "labels": ["x"], "filter": {"kind": "fact"}}),
            )
            .await
            .unwrap();
        assert_eq!(labelled["changed"], label["changed"], "{n}");
        let (labels,): (String,) =
            sqlx::query_as("SELECT labels FROM memories WHERE memory_key = 'u/1'")
                .fetch_one(h.store().reader())
                .await
                .unwrap();
        assert_eq!(labels, r#"["old","x"]"#, "{n}");
        // A memory holds at most 32 labels: one the labels would take past
        // that is kept as it is, and said so.
        let full: Vec<String> = (0..31).map(|i| format!("l{i:02}")).collect();
        h.call(
            "memory.set",
            json!({"memory_key": "v/full", "content": "full", "labels": full}),
        )
        .await
        .unwrap();
        let more =
            json!({"action": "label", "labels": ["m1", "m2"], "filter": {"key_prefix": "v/"}});
        let kept = h.call("memory.apply", more).await.unwrap();
        assert_eq!(
            kept["skipped"],
            json!([{"memory_key": "v/full", "agent": "alice", "reason": "too many labels"}]),
            "{n}"
        );
        let one = json!({"action": "label", "labels": ["m1"], "filter": {"key_prefix": "v/"}});
        let took = h.call("memory.apply", one).await.unwrap();
        assert_eq!(took["memory_keys"], json!(["v/full"]), "{n}: 32 is allowed");

        assert_eq!(
            code(
                h.call("memory.apply", json!({"action": "delete", "filter": {}}))
                    .await
            ),
            "INVALID_ARGUMENTS",
            "{n}"
        );
        assert_eq!(
            code(
                h.call(
                    "memory.apply",
                    json!({"action": "label", "filter": {"kind": "fact"}})
                )
                .await
            ),
            "INVALID_ARGUMENTS",
            "{n}"
        );
        assert_eq!(
            code(
                h.call(
                    "memory.apply",
                    json!({"action": "delete", "filter": {"updated_before": "yesterday"}})
                )
                .await
            ),
            "INVALID_ARGUMENTS",
            "{n}"
        );
    }
}

/// An expiry is refused when UTC would carry it past year 9999 (answered
/// as RFC 3339 cannot write it); the latest one allowed is read back as
/// sent and may be sent again.
#[tokio::test]
async fn an_expiry_is_one_that_can_be_sent_back() {
    for h in common::all().await {
        let n = h.name();
        let far =
            json!({"memory_key": "far", "content": "c", "expires_at": "9999-12-31T23:59:59-05:00"});
        assert_eq!(
            code(h.call("memory.set", far).await),
            "INVALID_ARGUMENTS",
            "{n}"
        );
        let last = "9999-12-31T23:59:59.999Z";
        h.call(
            "memory.set",
            json!({"memory_key": "far", "content": "c", "expires_at": last}),
        )
        .await
        .unwrap();
        let got = h
            .call("memory.get", json!({"memory_key": "far"}))
            .await
            .unwrap();
        assert_eq!(got["expires_at"], last, "{n}");
        h.call(
            "memory.update",
            json!({"memory_key": "far", "content": "d", "expires_at": got["expires_at"]}),
        )
        .await
        .unwrap();
    }
}

/// A change naming no agent means the caller's own row; once that row is
/// deleted, a retry of the delete finds it gone rather than deleting the
/// next agent's row, until another agent's row changes after it.
#[tokio::test]
async fn a_retried_delete_does_not_reach_another_agents_row() {
    for h in common::all().await {
        let n = h.name();
        h.call(
            "memory.set",
            json!({"memory_key": "mix", "content": "alice's"}),
        )
        .await
        .unwrap();
        h.call_as(
            "bob",
            "memory.set",
            json!({"memory_key": "mix", "content": "bob's"}),
        )
        .await
        .unwrap();
        let first = h
            .call("memory.delete", json!({"memory_key": "mix"}))
            .await
            .unwrap();
        assert_eq!(first["agent"], AGENT, "{n}");
        for op in ["memory.delete", "memory.pin", "memory.lock"] {
            let again = h.call(op, json!({"memory_key": "mix"})).await;
            assert_eq!(code(again), "RESOURCE_NOT_FOUND", "{n} {op}");
        }
        let update = json!({"memory_key": "mix", "content": "changed"});
        assert_eq!(
            code(h.call("memory.update", update.clone()).await),
            "RESOURCE_NOT_FOUND",
            "{n}"
        );
        let bobs = h
            .call("memory.get", json!({"memory_key": "mix", "agent": "bob"}))
            .await
            .unwrap();
        assert_eq!(bobs["content"], "bob's", "{n}: bob's row is untouched");
        // Changed after the caller's delete, bob's row is the key's latest:
        // a change naming no agent reaches it, as before.
        h.call_as(
            "bob",
            "memory.update",
            json!({"memory_key": "mix", "content": "bob's again"}),
        )
        .await
        .unwrap();
        let reached = h.call("memory.update", update).await.unwrap();
        assert_eq!(reached["agent"], "bob", "{n}");
    }
}

/// An apply changes at most 1,000 memories a call, the first in key order,
/// and says there is more; the same call again goes on from there, for an
/// action whose rows leave the filter (delete) and for one whose rows stay
/// in it unchanged (label).
#[tokio::test]
async fn apply_changes_a_thousand_at_a_time_and_says_there_is_more() {
    for h in common::all().await {
        let n = h.name();
        for i in 0..1003 {
            h.call(
                "memory.set",
                json!({"memory_key": format!("bulk/{i:04}"), "content": format!("note {i}")}),
            )
            .await
            .unwrap();
        }
        h.call("memory.pin", json!({"memory_key": "bulk/0001"}))
            .await
            .unwrap();
        let keys = |a: &Value| -> Vec<String> {
            serde_json::from_value(a["memory_keys"].clone()).unwrap()
        };
        let label =
            json!({"action": "label", "labels": ["old"], "filter": {"key_prefix": "bulk/"}});
        let first = h.call("memory.apply", label.clone()).await.unwrap();
        let expect: Vec<String> = (0..1000).map(|i| format!("bulk/{i:04}")).collect();
        assert_eq!(
            (keys(&first), &first["more"]),
            (expect, &json!(true)),
            "{n}"
        );
        let rest = h.call("memory.apply", label.clone()).await.unwrap();
        assert_eq!(
            (keys(&rest), &rest["more"]),
            (
                vec![
                    "bulk/1000".to_owned(),
                    "bulk/1001".into(),
                    "bulk/1002".into()
                ],
                &json!(false)
            ),
            "{n}"
        );
        let again = h.call("memory.apply", label).await.unwrap();
        assert_eq!(
            (keys(&again).len(), &again["more"]),
            (0, &json!(false)),
            "{n}"
        );

        // The pinned memory is kept and reported, and does not count.
        let delete = json!({"action": "delete", "filter": {"labels": ["old"]}});
        let mut dry = delete.clone();
        dry["dry_run"] = json!(true);
        let planned = h.call("memory.apply", dry).await.unwrap();
        let first = h.call("memory.apply", delete.clone()).await.unwrap();
        assert_eq!(first["memory_keys"], planned["memory_keys"], "{n}");
        assert_eq!(
            (keys(&first).len(), &first["more"]),
            (1000, &json!(true)),
            "{n}"
        );
        assert_eq!(
            keys(&first).last().map(String::as_str),
            Some("bulk/1000"),
            "{n}"
        );
        assert_eq!(
            first["skipped"],
            json!([{"memory_key": "bulk/0001", "agent": "alice", "reason": "pinned"}]),
            "{n}"
        );
        let rest = h.call("memory.apply", delete).await.unwrap();
        assert_eq!(
            (keys(&rest), &rest["more"]),
            (
                vec!["bulk/1001".to_owned(), "bulk/1002".into()],
                &json!(false)
            ),
            "{n}"
        );
        let (live,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM memories WHERE memory_key LIKE 'bulk/%' AND deleted = 0",
        )
        .fetch_one(h.store().reader())
        .await
        .unwrap();
        assert_eq!(live, 1, "{n}: only the pinned memory is left");
    }
}

/// Patterns are one ignoring case by the folding they match with: `ς`
/// held, `Σ` adds nothing, and removing `σ` takes `ς` off, so content the
/// pattern matched is stored again.
#[tokio::test]
async fn blacklist_patterns_are_one_ignoring_case_as_they_match() {
    for h in common::all().await {
        let n = h.name();
        let first = h
            .call("blacklist.add", json!({"pattern": "ς"}))
            .await
            .unwrap();
        assert_eq!(first["added"], true, "{n}");
        let again = h
            .call("blacklist.add", json!({"pattern": "Σ"}))
            .await
            .unwrap();
        assert_eq!(again["added"], false, "{n}: {again}");
        let set = json!({"memory_key": "greek", "content": "ΣΣΣ"});
        assert_eq!(
            code(h.call("memory.set", set.clone()).await),
            "BLACKLISTED",
            "{n}"
        );
        let removed = h
            .call("blacklist.remove", json!({"pattern": "σ"}))
            .await
            .unwrap();
        assert_eq!(removed["pattern"], "ς", "{n}: {removed}");
        h.call("memory.set", set).await.unwrap();
    }
}

/// A blacklist's sweep deletes at most 1,000 memories a call too, and the
/// same call again, the pattern held already, sweeps on.
#[tokio::test]
async fn a_sweep_deletes_a_thousand_at_a_time_and_says_there_is_more() {
    for h in common::all().await {
        let n = h.name();
        for i in 0..1002 {
            h.call(
                "memory.set",
                json!({"memory_key": format!("s/{i:04}"), "content": format!("sweep me {i}")}),
            )
            .await
            .unwrap();
        }
        let add = json!({"pattern": "sweep me", "sweep": true});
        let first = h.call("blacklist.add", add.clone()).await.unwrap();
        let removed = first["removed"].as_array().unwrap();
        assert_eq!(
            (removed.len(), &first["more"], &first["added"]),
            (1000, &json!(true), &json!(true)),
            "{n}"
        );
        assert_eq!(removed[999]["memory_key"], "s/0999", "{n}");
        let rest = h.call("blacklist.add", add).await.unwrap();
        assert_eq!(
            (&rest["removed"], &rest["more"], &rest["added"]),
            (
                &json!([{"memory_key": "s/1000", "agent": "alice"}, {"memory_key": "s/1001", "agent": "alice"}]),
                &json!(false),
                &json!(false)
            ),
            "{n}"
        );
    }
}

#[tokio::test]
async fn list_reads_across_agents_in_key_order_with_paging() {
    for h in common::all().await {
        let n = h.name();
        for k in ["b", "a", "c"] {
            h.call("memory.set", json!({"memory_key": k, "content": k, "kind": if k == "c" { "procedure" } else { "fact" }})).await.unwrap();
        }
        h.call_as(
            "bob",
            "memory.set",
            json!({"memory_key": "a", "content": "bob's a"}),
        )
        .await
        .unwrap();
        h.call("memory.delete", json!({"memory_key": "b"}))
            .await
            .unwrap();
        let page = h.call("memory.list", json!({"limit": 2})).await.unwrap();
        let keys = |v: &Value| -> Vec<String> {
            v["memories"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| {
                    format!(
                        "{}@{}",
                        m["memory_key"].as_str().unwrap(),
                        m["agent"].as_str().unwrap()
                    )
                })
                .collect()
        };
        assert_eq!(keys(&page), ["a@alice", "a@bob"], "{n}");
        let rest = h
            .call(
                "memory.list",
                json!({"limit": 2, "cursor": page["next_cursor"]}),
            )
            .await
            .unwrap();
        assert_eq!(keys(&rest), ["c@alice"], "{n}");
        assert!(rest.get("next_cursor").is_none(), "{n}");
        assert_eq!(
            keys(
                &h.call("memory.list", json!({"agent": "bob"}))
                    .await
                    .unwrap()
            ),
            ["a@bob"],
            "{n}"
        );
        assert_eq!(
            keys(
                &h.call("memory.list", json!({"kind": "procedure"}))
                    .await
                    .unwrap()
            ),
            ["c@alice"],
            "{n}"
        );
        assert_eq!(
            code(h.call("memory.list", json!({"limit": -1})).await),
            "INVALID_ARGUMENTS",
            "{n}"
        );
    }
}

#[tokio::test]
async fn bad_input_is_refused_with_its_code_and_writes_nothing() {
    for h in common::all().await {
        let n = h.name();
        let long_key = "k".repeat(257);
        let big = "x".repeat(64 * 1024 + 1);
        let cases = [
            (
                "memory.set",
                json!({"memory_key": "", "content": "x"}),
                "INVALID_ARGUMENTS",
            ),
            (
                "memory.set",
                json!({"memory_key": long_key, "content": "x"}),
                "INVALID_ARGUMENTS",
            ),
            (
                "memory.set",
                json!({"memory_key": "has space", "content": "x"}),
                "INVALID_ARGUMENTS",
            ),
            (
                "memory.set",
                json!({"memory_key": "k", "content": "  "}),
                "INVALID_ARGUMENTS",
            ),
            (
                "memory.set",
                json!({"memory_key": "k", "content": big}),
                "INVALID_ARGUMENTS",
            ),
            (
                "memory.set",
                json!({"memory_key": "k", "content": "x", "kind": "Big Kind"}),
                "INVALID_ARGUMENTS",
            ),
            (
                "memory.set",
                json!({"memory_key": "k", "content": "x", "expires_at": "soon"}),
                "INVALID_ARGUMENTS",
            ),
            (
                "memory.set",
                json!({"memory_key": "k", "content": "x", "namespace": "nowhere"}),
                "RESOURCE_NOT_FOUND",
            ),
            (
                "memory.set",
                json!({"memory_key": "k"}),
                "INVALID_ARGUMENTS",
            ),
            (
                "memory.set",
                json!({"memory_key": "k", "contnet": "x"}),
                "UNKNOWN_ARGUMENT",
            ),
            (
                "memory.get",
                json!({"memory_key": "k", "as_of": "not a time"}),
                "INVALID_ARGUMENTS",
            ),
            (
                "memory.get",
                json!({"memory_key": "k", "namespace": "nowhere"}),
                "RESOURCE_NOT_FOUND",
            ),
            (
                "memory.history",
                json!({"memory_key": "k", "limit": -5}),
                "INVALID_ARGUMENTS",
            ),
            // versions start at 1: no write can be stale against 0 or less
            (
                "memory.update",
                json!({"memory_key": "k", "content": "x", "if_version": -1}),
                "INVALID_ARGUMENTS",
            ),
            (
                "memory.pin",
                json!({"memory_key": "k", "if_version": 0}),
                "INVALID_ARGUMENTS",
            ),
            (
                "memory.get",
                json!({"memory_key": "k", "if_version": 0}),
                "INVALID_ARGUMENTS",
            ),
            (
                "memory.delete",
                json!({"memory_key": "k"}),
                "RESOURCE_NOT_FOUND",
            ),
        ];
        for (op, args, expected) in cases {
            assert_eq!(
                code(h.call(op, args.clone()).await),
                expected,
                "{n}: {op} {args}"
            );
        }
        assert_eq!(h.rows("memories").await, 0, "{n}");
        assert_eq!(h.rows("memory_versions").await, 0, "{n}");
    }
}

#[tokio::test]
async fn namespaces_keep_memories_apart() {
    for h in common::all().await {
        let n = h.name();
        h.call(
            "memory.set",
            json!({"memory_key": "k", "content": "main's"}),
        )
        .await
        .unwrap();
        h.call(
            "memory.set",
            json!({"memory_key": "k", "content": "team's", "namespace": "team"}),
        )
        .await
        .unwrap();
        assert_eq!(
            h.call("memory.get", json!({"memory_key": "k"}))
                .await
                .unwrap()["content"],
            "main's",
            "{n}"
        );
        assert_eq!(
            h.call(
                "memory.get",
                json!({"memory_key": "k", "namespace": "team"})
            )
            .await
            .unwrap()["content"],
            "team's",
            "{n}"
        );
        assert_eq!(NS, "main");
    }
}

#[tokio::test]
async fn concurrent_sets_of_a_new_key_both_land_as_versions() {
    for h in common::all().await {
        let n = h.name();
        let (a, b) = tokio::join!(
            h.call(
                "memory.set",
                json!({"memory_key": "fresh", "content": "from a"})
            ),
            h.call(
                "memory.set",
                json!({"memory_key": "fresh", "content": "from b"})
            ),
        );
        let mut got = [
            a.unwrap()["version"].as_i64().unwrap(),
            b.unwrap()["version"].as_i64().unwrap(),
        ];
        got.sort();
        assert_eq!(got, [1, 2], "{n}");
        assert_eq!(versions(&h, "fresh").await, 2, "{n}");
        assert_eq!(content_of(&h, AGENT, "fresh").await.unwrap().1, 2, "{n}");
    }
}

/// Sets that race on one existing key: on SQLite each is planned on the
/// committed row and written in one step, so all but one of a group lose
/// the race and must land through the path that reads under the writer.
/// None is lost, each version holds the content of the set that got it, and
/// every change has exactly one audit row.
#[tokio::test]
async fn racing_sets_of_one_key_each_land_as_their_own_version() {
    for h in common::all().await {
        let n = h.name();
        h.call("memory.set", json!({"memory_key": "hot", "content": "v1"}))
            .await
            .unwrap();
        let sets = (0..16).map(|i| {
            h.call(
                "memory.set",
                json!({"memory_key": "hot", "content": format!("racer {i}")}),
            )
        });
        let answers = futures_util::future::join_all(sets).await;
        let mut got = Vec::new();
        for (i, a) in answers.into_iter().enumerate() {
            let a = a.unwrap();
            assert_eq!(a["changed"], true, "{n}");
            let version = a["version"].as_i64().unwrap();
            let (content,): (String,) = sqlx::query_as(
                "SELECT content FROM memory_versions WHERE memory_key = 'hot' AND version = $1",
            )
            .bind(version)
            .fetch_one(h.store().reader())
            .await
            .unwrap();
            assert_eq!(content, format!("racer {i}"), "{n}");
            got.push(version);
        }
        got.sort();
        assert_eq!(got, (2..=17).collect::<Vec<i64>>(), "{n}");
        assert_eq!(versions(&h, "hot").await, 17, "{n}");
        let audited = h.audit("memory.set").await;
        assert_eq!(audited, vec!["ok"; 17], "{n}");
    }
}

/// A set that loses the one-step race to a write not yet committed when it
/// read tries again in one step, planned on that write once committed,
/// rather than through the group, whose lock holds up every other write
/// while it runs (memory::write::set).
#[tokio::test]
async fn a_set_that_loses_the_one_step_race_writes_in_one_step_again() {
    let h = common::sqlite().await;
    h.call("memory.set", json!({"memory_key": "hot", "content": "v1"}))
        .await
        .unwrap();
    // Holding the group keeps the direct writer from its next group: both
    // sets read version 1 and queue, then run in one group once it is let
    // go, where the second finds the row at version 2.
    let held = h.store().begin_write().await.unwrap();
    let grouped = h.store().grouped_writes();
    let sets = futures_util::future::join_all(["a", "b"].map(|content| {
        h.call(
            "memory.set",
            json!({"memory_key": "hot", "content": content}),
        )
    }));
    let release = async {
        while h.store().direct_writes_pending() < 2 {
            tokio::task::yield_now().await;
        }
        held.rollback().await.unwrap();
    };
    let (answers, ()) = tokio::join!(sets, release);
    let mut got: Vec<(i64, &str)> = answers
        .into_iter()
        .zip(["a", "b"])
        .map(|(a, content)| (a.unwrap()["version"].as_i64().unwrap(), content))
        .collect();
    got.sort();
    assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), [2, 3]);
    assert_eq!(
        h.store().grouped_writes(),
        grouped,
        "the set that lost went through the group"
    );
    let (content, version, ..) = content_of(&h, AGENT, "hot").await.unwrap();
    assert_eq!((content.as_str(), version), (got[1].1, 3));
    assert_eq!(versions(&h, "hot").await, 3);
    assert_eq!(h.audit("memory.set").await, vec!["ok"; 3]);
}

/// SQLite's direct writer runs the one-step writes queued for it back to
/// back, each in a savepoint of its own, and commits them together: a
/// write that fails in the database fails alone and leaves nothing (its
/// row was written before its version failed, and is undone), while the
/// writes queued around it land, each with its version and audit row.
#[tokio::test]
async fn a_write_that_fails_among_direct_writes_fails_alone() {
    let h = common::sqlite().await;
    sqlx::query(
        "CREATE TRIGGER refuse_boom BEFORE INSERT ON memory_versions \
         WHEN new.memory_key = 'boom' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END",
    )
    .execute(h.store().writer())
    .await
    .unwrap();
    let keys: Vec<String> = (0..12)
        .map(|i| {
            if i == 5 {
                "boom".into()
            } else {
                format!("k{i}")
            }
        })
        .collect();
    let sets = keys.iter().map(|k| {
        h.call(
            "memory.set",
            json!({"memory_key": k, "content": format!("content of {k}")}),
        )
    });
    let answers = futures_util::future::join_all(sets).await;
    for (key, answer) in keys.iter().zip(answers) {
        if key == "boom" {
            let e = answer.unwrap_err();
            assert_eq!(e.code(), loom_core::ErrorCode::Internal, "{e:?}");
        } else {
            assert_eq!(answer.unwrap()["version"], 1, "{key}");
            assert_eq!(versions(&h, key).await, 1, "{key}");
        }
    }
    assert_eq!(content_of(&h, AGENT, "boom").await, None);
    assert_eq!(versions(&h, "boom").await, 0);
    let audited = h.audit("memory.set").await;
    assert_eq!(
        audited.iter().filter(|o| *o == "ok").count(),
        11,
        "{audited:?}"
    );
}

#[tokio::test]
async fn every_apply_action_changes_exactly_what_its_dry_run_reported() {
    for h in common::all().await {
        let n = h.name();
        for action in ["delete", "expire", "lock", "label", "demote"] {
            for (i, pin) in [(1, false), (2, true), (3, false)] {
                let key = format!("{action}/{i}");
                h.call(
                    "memory.set",
                    json!({"memory_key": key, "content": format!("c {key}")}),
                )
                .await
                .unwrap();
                if pin {
                    h.call("memory.pin", json!({"memory_key": key}))
                        .await
                        .unwrap();
                }
            }
            // only rows last changed before the cut-off match: 1 and 2
            sqlx::query("UPDATE memories SET updated_ms = 1000 WHERE memory_key IN ($1, $2)")
                .bind(format!("{action}/1"))
                .bind(format!("{action}/2"))
                .execute(h.store().writer())
                .await
                .unwrap();
            let mut args = json!({"action": action, "filter": {"key_prefix": format!("{action}/"), "updated_before": rfc3339(2000)}, "dry_run": true});
            if action == "label" {
                args["labels"] = json!(["archived"]);
            }
            let dry = h.call("memory.apply", args.clone()).await.unwrap();
            args["dry_run"] = json!(false);
            let real = h.call("memory.apply", args).await.unwrap();
            assert_eq!(real["changed"], dry["changed"], "{n} {action}");
            assert_eq!(real["skipped"], dry["skipped"], "{n} {action}");
            let expected: Vec<String> = match action {
                // the pinned row is kept
                "delete" | "expire" => vec![format!("{action}/1")],
                // an unpinned, never-recalled row has nothing to demote
                "demote" => vec![format!("{action}/2")],
                _ => vec![format!("{action}/1"), format!("{action}/2")],
            };
            assert_eq!(real["memory_keys"], json!(expected), "{n} {action}");
            // stored state: the changed rows carry a version named after the action
            let (changed,): (i64,) = sqlx::query_as(
                "SELECT COUNT(*) FROM memory_versions WHERE change = $1 AND memory_key LIKE $2",
            )
            .bind(action)
            .bind(format!("{action}/%"))
            .fetch_one(h.store().reader())
            .await
            .unwrap();
            assert_eq!(changed, expected.len() as i64, "{n} {action}");
            let untouched = content_of(&h, AGENT, &format!("{action}/3")).await.unwrap();
            assert_eq!(untouched.1, 1, "{n} {action}: outside the filter");
        }
        // what each action left behind
        assert_eq!(
            code(
                h.call("memory.get", json!({"memory_key": "expire/1"}))
                    .await
            ),
            "RESOURCE_NOT_FOUND",
            "{n}"
        );
        assert_eq!(content_of(&h, AGENT, "lock/2").await.unwrap().4, 1, "{n}");
        let (labels,): (String,) =
            sqlx::query_as("SELECT labels FROM memories WHERE memory_key = 'label/2'")
                .fetch_one(h.store().reader())
                .await
                .unwrap();
        assert_eq!(labels, r#"["archived"]"#, "{n}");
        let demoted = content_of(&h, AGENT, "demote/2").await.unwrap();
        assert_eq!(demoted.3, 0, "{n}: demote unpins");
    }
}

/// A demotion plans by the rows' recall counts, which the usage log writes
/// seconds after the gets: it counts the gets answered before it.
#[tokio::test]
async fn demote_counts_the_recalls_answered_just_before_it() {
    for h in common::all().await {
        let n = h.name();
        h.call(
            "memory.set",
            json!({"memory_key": "recalled", "content": "c"}),
        )
        .await
        .unwrap();
        for i in 1..=2 {
            let got = h
                .call("memory.get", json!({"memory_key": "recalled"}))
                .await
                .unwrap();
            assert_eq!(got["recall_count"], i, "{n}");
        }
        let out = h
            .call(
                "memory.apply",
                json!({"action": "demote", "filter": {"key_prefix": "recalled"}}),
            )
            .await
            .unwrap();
        assert_eq!(out["changed"][0]["memory_key"], "recalled", "{n}: {out}");
        let stored = h
            .count("SELECT recall_count FROM memories WHERE memory_key = 'recalled'")
            .await;
        assert_eq!(stored, 0, "{n}: the count is reset");
        // The caller whose gets were counted sees the reset too, as
        // every other caller does: its next get is the first recall.
        let got = h
            .call("memory.get", json!({"memory_key": "recalled"}))
            .await
            .unwrap();
        assert_eq!(got["recall_count"], 1, "{n}");
        let other = h
            .call_as("bob", "memory.get", json!({"memory_key": "recalled"}))
            .await
            .unwrap();
        assert!(other["recall_count"].as_i64() <= Some(2), "{n}: {other}");
    }
}

/// A get without an agent serves the caller's own row, else the most
/// recently updated of the others, ties to the agent first in byte order.
#[tokio::test]
async fn get_serves_the_callers_row_else_the_newest_else_the_first_agent() {
    for h in common::all().await {
        let n = h.name();
        for agent in ["carol", "bob"] {
            h.call_as(
                agent,
                "memory.set",
                json!({"memory_key": "shared", "content": agent}),
            )
            .await
            .unwrap();
        }
        let stamp = |agent: &'static str, ms: i64| {
            sqlx::query(
                "UPDATE memories SET updated_ms = $1 WHERE memory_key = 'shared' AND agent = $2",
            )
            .bind(ms)
            .bind(agent)
            .execute(h.store().writer())
        };
        let served = || async {
            let got = h.call("memory.get", json!({"memory_key": "shared"})).await;
            got.unwrap()["agent"].as_str().unwrap().to_owned()
        };
        stamp("carol", 2_000).await.unwrap();
        stamp("bob", 1_000).await.unwrap();
        assert_eq!(served().await, "carol", "{n}: the newest");
        stamp("carol", 1_000).await.unwrap();
        assert_eq!(served().await, "bob", "{n}: a tie, the first agent");
        h.call(
            "memory.set",
            json!({"memory_key": "shared", "content": "mine"}),
        )
        .await
        .unwrap();
        stamp("carol", 9_000_000_000_000).await.unwrap();
        assert_eq!(served().await, AGENT, "{n}: the caller's own");
    }
}

#[tokio::test]
async fn a_pinned_memory_takes_no_expiry() {
    let later = rfc3339(loom_ops::store::now_ms() + 3_600_000);
    let past = "2000-01-01T00:00:00Z";
    for h in common::all().await {
        let n = h.name();
        h.call(
            "memory.set",
            json!({"memory_key": "pinned", "content": "keep me", "expires_at": later}),
        )
        .await
        .unwrap();
        h.call("memory.pin", json!({"memory_key": "pinned"}))
            .await
            .unwrap();
        let got = h
            .call("memory.get", json!({"memory_key": "pinned"}))
            .await
            .unwrap();
        assert_eq!(got.get("expires_at"), None, "pinning removes it: {n}");
        // An expiry past is no expiry a write gives; one to come is one a
        // pin refuses.
        for (op, args, refused) in [
            (
                "memory.update",
                json!({"memory_key": "pinned", "expires_at": past}),
                "INVALID_ARGUMENTS",
            ),
            (
                "memory.set",
                json!({"memory_key": "pinned", "content": "keep me", "expires_at": past}),
                "INVALID_ARGUMENTS",
            ),
            (
                "memory.update",
                json!({"memory_key": "pinned", "expires_at": later}),
                "PINNED_CONFLICT",
            ),
            (
                "memory.set",
                json!({"memory_key": "pinned", "content": "new", "expires_at": later}),
                "PINNED_CONFLICT",
            ),
        ] {
            assert_eq!(code(h.call(op, args).await), refused, "{op} {n}");
        }
        assert_eq!(
            content_of(&h, AGENT, "pinned").await.unwrap(),
            ("keep me".into(), 2, 0, 1, 0),
            "nothing written: {n}"
        );
        // A write that names no expiry, or removes it, still lands.
        let done = h
            .call(
                "memory.set",
                json!({"memory_key": "pinned", "content": "still pinned", "expires_at": null}),
            )
            .await
            .unwrap();
        assert_eq!(done["version"], 3, "{n}");
    }
}

#[tokio::test]
async fn an_expiry_stays_unless_a_write_names_it_and_null_removes_it() {
    let later = rfc3339(loom_ops::store::now_ms() + 3_600_000);
    for h in common::all().await {
        let n = h.name();
        h.call(
            "memory.set",
            json!({"memory_key": "e", "content": "for an hour", "expires_at": later, "labels": ["a"]}),
        )
        .await
        .unwrap();
        let again = h
            .call(
                "memory.set",
                json!({"memory_key": "e", "content": "for an hour"}),
            )
            .await
            .unwrap();
        assert_eq!(
            (again["changed"].clone(), again["version"].clone()),
            (json!(false), json!(1)),
            "the same content changes nothing: {n}"
        );
        let expiry = |v: Value| v.get("expires_at").cloned();
        h.call(
            "memory.update",
            json!({"memory_key": "e", "content": "still for an hour"}),
        )
        .await
        .unwrap();
        let got = h
            .call("memory.get", json!({"memory_key": "e"}))
            .await
            .unwrap();
        assert_eq!(expiry(got), Some(json!(later)), "{n}");
        h.call(
            "memory.update",
            json!({"memory_key": "e", "expires_at": null}),
        )
        .await
        .unwrap();
        let got = h
            .call("memory.get", json!({"memory_key": "e"}))
            .await
            .unwrap();
        assert_eq!(expiry(got.clone()), None, "{n}");
        assert_eq!(got["version"], 3, "{n}");
    }
}

#[tokio::test]
async fn label_filters_match_labels_as_written() {
    for h in common::all().await {
        let n = h.name();
        for (key, label) in [
            ("case/lower", "temp"),
            ("case/upper", "TEMP"),
            ("case/other", "temp_x"),
        ] {
            h.call(
                "memory.set",
                json!({"memory_key": key, "content": key, "labels": [label]}),
            )
            .await
            .unwrap();
        }
        let planned = h
            .call(
                "memory.apply",
                json!({"action": "delete", "filter": {"labels": ["temp"]}, "dry_run": true}),
            )
            .await
            .unwrap();
        assert_eq!(planned["memory_keys"], json!(["case/lower"]), "{n}");
        let listed = h
            .call("memory.list", json!({"labels": ["TEMP"]}))
            .await
            .unwrap();
        let keys: Vec<&str> = listed["memories"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["memory_key"].as_str().unwrap())
            .collect();
        assert_eq!(keys, ["case/upper"], "{n}");
    }
}

#[tokio::test]
async fn a_source_longer_than_two_kib_is_refused() {
    for h in common::all().await {
        let n = h.name();
        let long = "s".repeat(2049);
        let refused = h
            .call(
                "memory.set",
                json!({"memory_key": "src", "content": "x", "source": long}),
            )
            .await
            .unwrap_err();
        assert_eq!(
            (refused.code().as_str(), refused.detail()["field"].clone()),
            ("INVALID_ARGUMENTS", json!("source")),
            "{n}"
        );
        assert!(content_of(&h, AGENT, "src").await.is_none(), "{n}");
        h.call(
            "memory.set",
            json!({"memory_key": "src", "content": "x", "source": "s".repeat(2048)}),
        )
        .await
        .unwrap();
        assert_eq!(
            code(
                h.call(
                    "memory.update",
                    json!({"memory_key": "src", "source": "s".repeat(4096)})
                )
                .await
            ),
            "INVALID_ARGUMENTS",
            "{n}"
        );
    }
}

#[tokio::test]
async fn a_lock_refusal_names_the_agent_holding_it() {
    for h in common::all().await {
        let n = h.name();
        h.call(
            "memory.set",
            json!({"memory_key": "shared", "content": "mine"}),
        )
        .await
        .unwrap();
        h.call_as(
            "other-agent",
            "memory.set",
            json!({"memory_key": "shared", "content": "theirs"}),
        )
        .await
        .unwrap();
        h.call_as(
            "other-agent",
            "memory.lock",
            json!({"memory_key": "shared"}),
        )
        .await
        .unwrap();
        for (op, args) in [
            (
                "memory.set",
                json!({"memory_key": "shared", "content": "mine 2"}),
            ),
            (
                "memory.update",
                json!({"memory_key": "shared", "content": "mine 2"}),
            ),
            ("memory.delete", json!({"memory_key": "shared"})),
        ] {
            let e = h.call(op, args).await.unwrap_err();
            assert_eq!(e.code().as_str(), "LOCKED", "{op} {n}");
            assert_eq!(e.detail()["locked_by"], "other-agent", "{op} {n}");
            assert!(
                e.message().contains("other-agent"),
                "{op} {n}: {}",
                e.message()
            );
        }
    }
}

/// Writes racing a blacklist.add with a sweep: each lands before the
/// pattern (and is swept) or after it (and is refused); none is left live
/// holding the content.
#[tokio::test]
async fn no_write_slips_past_a_pattern_added_meanwhile() {
    for h in common::all().await {
        let n = h.name();
        let sets = futures_util::future::join_all((0..40).map(|i| {
            h.call(
                "memory.set",
                json!({"memory_key": format!("bl/{i}"), "content": format!("note {i} with forbidden words")}),
            )
        }));
        let add = h.call(
            "blacklist.add",
            json!({"pattern": "forbidden", "sweep": true}),
        );
        let (sets, add) = tokio::join!(sets, add);
        add.unwrap_or_else(|e| panic!("{n}: {e:?}"));
        for set in &sets {
            if let Err(e) = set {
                assert_eq!(e.code().as_str(), "BLACKLISTED", "{n}: {e:?}");
            }
        }
        let live = h
            .count(
                "SELECT COUNT(*) FROM memories WHERE memory_key LIKE 'bl/%' AND deleted = 0 \
                 AND content LIKE '%forbidden%'",
            )
            .await;
        assert_eq!(live, 0, "{n}: live rows holding blacklisted content");
    }
}

/// One lock holds a key: another agent's lock is refused, and only a call
/// that means the holder's row (naming its agent, or the holder itself)
/// releases it.
#[tokio::test]
async fn one_lock_holds_a_key_and_only_its_holder_is_released() {
    for h in common::all().await {
        let n = h.name();
        for agent in ["a1", "a2"] {
            h.call_as(
                agent,
                "memory.set",
                json!({"memory_key": "k", "content": agent}),
            )
            .await
            .unwrap();
        }
        let lock = |agent: &'static str, args: Value| h.call_as(agent, "memory.lock", args);
        let unlock = |agent: &'static str, args: Value| h.call_as(agent, "memory.unlock", args);
        lock("a1", json!({"memory_key": "k"})).await.unwrap();
        // a second agent's lock, and one with no row of the key that falls
        // back to the holder's row, are refused
        for (agent, args) in [
            ("a2", json!({"memory_key": "k"})),
            ("a3", json!({"memory_key": "k"})),
            ("a2", json!({"memory_key": "k", "agent": "a2"})),
        ] {
            let e = lock(agent, args.clone()).await.unwrap_err();
            assert_eq!(
                (e.code().as_str(), e.detail()["locked_by"].as_str()),
                ("LOCKED", Some("a1")),
                "{n} {agent} {args}"
            );
        }
        // the holder locking again changes nothing
        let again = lock("a1", json!({"memory_key": "k"})).await.unwrap();
        assert_eq!(again["changed"], false, "{n}");
        // an unlock that does not mean the holder's row is refused
        for (agent, args) in [
            ("a2", json!({"memory_key": "k"})),
            ("a3", json!({"memory_key": "k"})),
        ] {
            let e = unlock(agent, args.clone()).await.unwrap_err();
            assert_eq!(e.code().as_str(), "LOCKED", "{n} {agent} {args}");
        }
        // naming the holder releases it, whoever calls
        let done = unlock("a2", json!({"memory_key": "k", "agent": "a1"}))
            .await
            .unwrap();
        assert_eq!(
            (&done["agent"], &done["changed"]),
            (&json!("a1"), &json!(true)),
            "{n}"
        );
        lock("a2", json!({"memory_key": "k"})).await.unwrap();
        let e = h
            .call_as(
                "a1",
                "memory.set",
                json!({"memory_key": "k", "content": "x"}),
            )
            .await
            .unwrap_err();
        assert_eq!(e.detail()["locked_by"], "a2", "{n}");
        let locked_rows = h
            .count("SELECT COUNT(*) FROM memories WHERE memory_key = 'k' AND locked = 1")
            .await;
        assert_eq!(locked_rows, 1, "{n}");
    }
}

/// A bulk lock over rows of several agents locks one row a key: the
/// caller's own where its filter matched one, else the first; a key
/// another agent holds already is kept, and a dry run says the same.
#[tokio::test]
async fn a_bulk_lock_takes_one_row_a_key() {
    for h in common::all().await {
        let n = h.name();
        for (agent, key) in [
            ("b1", "bulk/both"),
            ("b2", "bulk/both"),
            ("b2", "bulk/theirs"),
            ("b3", "bulk/theirs"),
            ("b2", "bulk/held"),
            ("b1", "bulk/held"),
        ] {
            h.call_as(
                agent,
                "memory.set",
                json!({"memory_key": key, "content": agent}),
            )
            .await
            .unwrap();
        }
        h.call_as("b2", "memory.lock", json!({"memory_key": "bulk/held"}))
            .await
            .unwrap();
        let apply = |dry_run: bool| {
            h.call_as(
                "b1",
                "memory.apply",
                json!({"action": "lock", "filter": {"key_prefix": "bulk/"}, "dry_run": dry_run}),
            )
        };
        let pairs = |v: &Value, field: &str| -> Vec<(String, String)> {
            let mut out: Vec<(String, String)> = v[field]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| {
                    (
                        m["memory_key"].as_str().unwrap().to_owned(),
                        m["agent"].as_str().unwrap().to_owned(),
                    )
                })
                .collect();
            out.sort();
            out
        };
        let owned = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, a)| ((*k).to_owned(), (*a).to_owned()))
                .collect()
        };
        let preview = apply(true).await.unwrap();
        let done = apply(false).await.unwrap();
        for answer in [&preview, &done] {
            assert_eq!(
                pairs(answer, "changed"),
                owned(&[("bulk/both", "b1"), ("bulk/theirs", "b2")]),
                "{n}: the caller's row of bulk/both, the first of bulk/theirs"
            );
            assert_eq!(
                pairs(answer, "skipped"),
                owned(&[
                    ("bulk/both", "b2"),
                    ("bulk/held", "b1"),
                    ("bulk/theirs", "b3")
                ]),
                "{n}"
            );
            // Kept for a lock held before the call, or for the lock this
            // call takes on another row of the key: said apart.
            for kept in answer["skipped"].as_array().unwrap() {
                let reason = if kept["memory_key"] == "bulk/held" {
                    "locked"
                } else {
                    "another row of the key takes the lock"
                };
                assert_eq!(kept["reason"], reason, "{n}: {kept}");
            }
        }
        for key in ["bulk/both", "bulk/theirs", "bulk/held"] {
            let locked = h
                .count(&format!(
                    "SELECT COUNT(*) FROM memories WHERE memory_key = '{key}' AND locked = 1"
                ))
                .await;
            assert_eq!(locked, 1, "{n}: one lock holds {key}");
        }
        // The caller can release what its bulk lock took.
        let released = h
            .call_as("b1", "memory.unlock", json!({"memory_key": "bulk/both"}))
            .await
            .unwrap();
        assert_eq!(released["changed"], true, "{n}");
    }
}

/// A namespace holds at most `MAX_PATTERNS` patterns, and a write of the
/// largest content is checked against them all: patterns such as
/// `*aaaa…b`, which a backtracking glob retried at every position of
/// 64 KiB of `a` for seconds, while every other write waited.
#[tokio::test]
async fn a_namespace_holds_a_bounded_number_of_patterns() {
    use loom_ops::blacklist::MAX_PATTERNS;
    for h in common::all().await {
        let n = h.name();
        let pattern = |k: usize| format!("*{}b{k}", "a".repeat(40 + k % 200));
        for k in 0..MAX_PATTERNS {
            let added = h
                .call("blacklist.add", json!({"pattern": pattern(k)}))
                .await
                .unwrap();
            assert_eq!(added["added"], true, "{n} {k}");
        }
        let refused = h
            .call("blacklist.add", json!({"pattern": pattern(MAX_PATTERNS)}))
            .await;
        assert_eq!(code(refused), "INVALID_ARGUMENTS", "{n}");
        // A pattern held already (matching ignores case) adds nothing, at
        // the bound too.
        let again = h
            .call(
                "blacklist.add",
                json!({"pattern": pattern(7).to_uppercase()}),
            )
            .await
            .unwrap();
        assert_eq!(again["added"], false, "{n}");

        let written = h
            .call(
                "memory.set",
                json!({"memory_key": "long", "content": "a".repeat(64 * 1024)}),
            )
            .await
            .unwrap();
        assert_eq!(written["changed"], true, "{n}");
        let refused = h
            .call(
                "memory.set",
                json!({"memory_key": "caught", "content": format!("x{}b0", "a".repeat(40))}),
            )
            .await;
        assert_eq!(code(refused), "BLACKLISTED", "{n}");
    }
}

/// Many agents locking one key at once: exactly one holds it.
#[tokio::test]
async fn agents_locking_a_key_at_once_leave_one_lock() {
    const AGENTS: [&str; 12] = [
        "r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9", "r10", "r11",
    ];
    for h in common::all().await {
        let n = h.name();
        for agent in AGENTS {
            h.call_as(
                agent,
                "memory.set",
                json!({"memory_key": "race", "content": agent}),
            )
            .await
            .unwrap();
        }
        let locks = futures_util::future::join_all(
            AGENTS
                .iter()
                .map(|agent| h.call_as(agent, "memory.lock", json!({"memory_key": "race"}))),
        )
        .await;
        let won = locks.iter().filter(|r| r.is_ok()).count();
        assert_eq!(won, 1, "{n}: {locks:?}");
        assert!(
            locks
                .iter()
                .filter_map(|r| r.as_ref().err())
                .all(|e| e.code().as_str() == "LOCKED"),
            "{n}: {locks:?}"
        );
        let locked_rows = h
            .count("SELECT COUNT(*) FROM memories WHERE memory_key = 'race' AND locked = 1")
            .await;
        assert_eq!(locked_rows, 1, "{n}");
    }
}

/// Lockers of one key racing each other and sets of its rows: each is
/// answered with the lock or LOCKED, never ended as a deadlock. PostgreSQL
/// took a key's rows in the index's order, which the sets' updates change,
/// so two lockers could each hold a row the other waited for.
#[tokio::test]
async fn lockers_and_sets_of_one_key_do_not_deadlock() {
    const AGENTS: [&str; 3] = ["a", "b", "c"];
    for h in common::all().await {
        let n = h.name();
        let h = &h;
        for round in 0..10 {
            let key = format!("contended-{round}");
            for agent in AGENTS {
                h.call_as(
                    agent,
                    "memory.set",
                    json!({"memory_key": key, "content": agent}),
                )
                .await
                .unwrap();
            }
            let locks = (0..12).map(|i| {
                let agent = AGENTS[i % 3];
                let key = key.clone();
                async move {
                    vec![
                        h.call_as(agent, "memory.lock", json!({"memory_key": key}))
                            .await,
                    ]
                }
            });
            let sets = (0..6).map(|i| {
                let agent = AGENTS[i % 3];
                let key = key.clone();
                async move {
                    let mut out = Vec::new();
                    for j in 0..3 {
                        let content = format!("{agent} {i} {j}");
                        let args = json!({"memory_key": key, "content": content});
                        out.push(h.call_as(agent, "memory.set", args).await);
                    }
                    out
                }
            });
            let (locks, sets) = tokio::join!(
                futures_util::future::join_all(locks),
                futures_util::future::join_all(sets)
            );
            for r in locks.iter().chain(&sets).flatten() {
                if let Err(e) = r {
                    assert_eq!(e.code().as_str(), "LOCKED", "{n} {key}: {e:?}");
                }
            }
            let locked_rows = h
                .count(&format!(
                    "SELECT COUNT(*) FROM memories WHERE memory_key = '{key}' AND locked = 1"
                ))
                .await;
            assert_eq!(locked_rows, 1, "{n} {key}");
        }
    }
}

/// Sets racing a lock of their own row: none lands after the lock.
#[tokio::test]
async fn no_set_lands_after_a_lock_of_its_row() {
    for h in common::all().await {
        let n = h.name();
        h.call("memory.set", json!({"memory_key": "held", "content": "v0"}))
            .await
            .unwrap();
        let sets = futures_util::future::join_all((0..30).map(|i| {
            h.call(
                "memory.set",
                json!({"memory_key": "held", "content": format!("s{i}")}),
            )
        }));
        let lock = h.call("memory.lock", json!({"memory_key": "held"}));
        let (sets, lock) = tokio::join!(sets, lock);
        lock.unwrap_or_else(|e| panic!("{n}: {e:?}"));
        for set in &sets {
            if let Err(e) = set {
                assert_eq!(e.code().as_str(), "LOCKED", "{n}: {e:?}");
            }
        }
        let history = h
            .call("memory.history", json!({"memory_key": "held", "limit": 50}))
            .await
            .unwrap();
        let changes: Vec<(i64, String)> = history["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                (
                    v["version"].as_i64().unwrap(),
                    v["change"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        let lock_at = changes.iter().find(|(_, c)| c == "lock").unwrap().0;
        assert!(
            changes.iter().all(|(v, c)| *v <= lock_at || c != "set"),
            "{n}: a set after the lock: {changes:?}"
        );
    }
}

/// A lock holds its memory unchanged, its expiry included; and a memory
/// set again after a delete is a new one, nothing of the deleted row back.
#[tokio::test]
async fn a_lock_removes_the_expiry_and_a_set_after_a_delete_starts_afresh() {
    for h in common::all().await {
        let n = h.name();
        let later = "2999-01-01T00:00:00Z";
        h.call(
            "memory.set",
            json!({"memory_key": "frozen", "content": "x", "expires_at": later}),
        )
        .await
        .unwrap();
        h.call("memory.lock", json!({"memory_key": "frozen"}))
            .await
            .unwrap();
        let got = h
            .call("memory.get", json!({"memory_key": "frozen"}))
            .await
            .unwrap();
        assert!(
            got.get("expires_at").is_none_or(Value::is_null),
            "{n}: {got}"
        );

        h.call(
            "memory.set",
            json!({"memory_key": "again", "content": "one", "kind": "decision",
                   "labels": ["l1"], "source": "cli", "expires_at": later}),
        )
        .await
        .unwrap();
        // Recalls of the memory about to be deleted, one written and one
        // still queued when it is set again.
        let first = h
            .call("memory.get", json!({"memory_key": "again"}))
            .await
            .unwrap();
        h.flush_usage().await;
        h.call("memory.get", json!({"memory_key": "again"}))
            .await
            .unwrap();
        h.call("memory.delete", json!({"memory_key": "again"}))
            .await
            .unwrap();
        let set = h
            .call(
                "memory.set",
                json!({"memory_key": "again", "content": "two"}),
            )
            .await
            .unwrap();
        assert_eq!(set["version"], 3, "{n}: the key's history goes on");
        let got = h
            .call("memory.get", json!({"memory_key": "again"}))
            .await
            .unwrap();
        assert_eq!(
            (
                &got["content"],
                &got["kind"],
                &got["labels"],
                &got["source"]
            ),
            (&json!("two"), &json!("fact"), &json!([]), &json!("")),
            "{n}: {got}"
        );
        assert!(
            got.get("expires_at").is_none_or(Value::is_null),
            "{n}: {got}"
        );
        assert_eq!(got["recall_count"], 1, "{n}: its own recall only: {got}");
        let created = |v: &Value| v["created_at"].as_str().unwrap().to_owned();
        assert!(created(&got) > created(&first), "{n}: {first} then {got}");
        h.flush_usage().await;
        let got = h
            .call("memory.get", json!({"memory_key": "again"}))
            .await
            .unwrap();
        assert_eq!(
            got["recall_count"], 2,
            "{n}: the deleted one's recalls stay with it: {got}"
        );
    }
}

#[tokio::test]
async fn apply_holds_the_rows_it_plans_on_against_concurrent_updates() {
    for h in common::all().await {
        let n = h.name();
        let keys: Vec<String> = (0..200).map(|i| format!("bulk/{i:04}")).collect();
        for key in &keys {
            h.call("memory.set", json!({"memory_key": key, "content": "v1"}))
                .await
                .unwrap();
        }
        // Updates of the rows the apply plans on, interleaved with it: each
        // lands before or after the apply, never under it.
        let updates = futures_util::future::join_all(
            keys.iter()
                .step_by(10)
                .map(|key| h.call("memory.update", json!({"memory_key": key, "content": "v2"}))),
        );
        let apply = h.call(
            "memory.apply",
            json!({"action": "label", "labels": ["bulk"], "filter": {"key_prefix": "bulk/"}}),
        );
        let (updates, applied) = tokio::join!(updates, apply);
        let applied = applied.unwrap_or_else(|e| panic!("{n}: {e:?}"));
        assert_eq!(applied["changed"].as_array().unwrap().len(), 200, "{n}");
        for (key, update) in keys.iter().step_by(10).zip(updates) {
            // An update after the apply found the label on; one before it
            // was planned on. Either way both changes are on the row.
            update.unwrap_or_else(|e| panic!("{key} {n}: {e:?}"));
            let got = h
                .call("memory.get", json!({"memory_key": key}))
                .await
                .unwrap();
            assert_eq!(
                (got["content"].clone(), got["labels"].clone()),
                (json!("v2"), json!(["bulk"])),
                "{key} {n}"
            );
        }
    }
}
