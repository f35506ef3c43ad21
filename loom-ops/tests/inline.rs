//! Point reads on the calling thread (`Store::read_inline`, SQLite files
//! only): they cannot write, decode what sqlx's path decodes and see every
//! commit the moment it returns.

mod common;

use std::sync::Arc;

use loom_core::{OpCx, Scope, Services};
use loom_ops::memory::store as sql;
use loom_ops::store::{Backend, Store, now_ms, testing};
use serde_json::json;

fn cx(agent: &str) -> OpCx {
    let mut cx = OpCx::new("memory.get", Arc::new(Services::new()));
    cx.scope = Scope {
        org: common::ORG.into(),
        namespace: common::NS.into(),
        agent: agent.into(),
        role: None,
        namespace_found: true,
    };
    cx
}

fn one(store: &Store, sql: &str) -> Option<i64> {
    store
        .read_inline(|conn| conn.query_row(sql, [], |r| r.get(0)))
        .map(|r| r.expect("inline read"))
}

#[tokio::test]
async fn inline_reads_are_for_sqlite_files_and_stop_when_the_store_closes() {
    for t in testing::all().await {
        let inline = one(&t.store, "SELECT 7");
        match t.store.backend() {
            Backend::Sqlite => assert_eq!(inline, Some(7)),
            Backend::Postgres => assert_eq!(inline, None, "PostgreSQL reads through its pool"),
        }
        t.store.close().await;
        assert_eq!(one(&t.store, "SELECT 7"), None, "{}: closed", t.name());
    }
}

#[tokio::test]
async fn an_inline_read_cannot_write() {
    let t = testing::sqlite().await;
    let refused = t
        .store
        .read_inline(|conn| conn.execute("INSERT INTO orgs (org, created_ms) VALUES ('x', 1)", []))
        .expect("a SQLite file");
    let e = refused.expect_err("a read-only connection");
    assert_eq!(e.code(), loom_core::ErrorCode::Internal);
    assert!(
        e.internal_message().unwrap_or("").contains("readonly"),
        "{:?}",
        e.internal_message()
    );
}

/// Every field of a row, and the run of its version, come out of the inline
/// path as out of sqlx's.
#[tokio::test]
async fn an_inline_row_decodes_as_the_pooled_one() {
    let h = common::sqlite().await;
    h.call(
        "memory.set",
        json!({"memory_key": "k", "content": "first", "labels": ["b", "a"],
               "source": "notes.md", "kind": "decision",
               "expires_at": "2999-01-01T00:00:00Z"}),
    )
    .await
    .unwrap();
    h.call("memory.pin", json!({"memory_key": "k"}))
        .await
        .unwrap();
    h.call_as(
        "bob",
        "memory.set",
        json!({"memory_key": "k", "content": "bob's"}),
    )
    .await
    .unwrap();
    h.call("memory.get", json!({"memory_key": "k"}))
        .await
        .unwrap();
    h.flush_usage().await;

    let store = &h.t.store;
    let now = now_ms();
    for (agent, explicit) in [
        ("alice", false),
        ("alice", true),
        ("bob", true),
        ("carol", false),
    ] {
        let cx = cx(agent);
        let inline = sql::read_live_with_run(store, &cx, explicit, "k", now)
            .await
            .unwrap()
            .expect("found");
        let pooled = sql::resolve_with_run(
            &mut store.read().await.unwrap(),
            &cx,
            explicit,
            "k",
            now,
            false,
        )
        .await
        .unwrap()
        .expect("found");
        assert_eq!(
            format!("{inline:?}"),
            format!("{pooled:?}"),
            "{agent} {explicit}"
        );
    }
    let alice = sql::read_live_with_run(store, &cx("alice"), true, "k", now)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(alice.row.pinned, 1);
    assert_eq!(alice.row.recall_count, 1);
    assert_eq!(alice.row.source, "notes.md");
    assert_eq!(alice.run_id.as_deref(), Some("run-1"));
    let missing = sql::read_live_with_run(store, &cx("alice"), false, "nope", now)
        .await
        .unwrap();
    assert!(missing.is_none());
}

/// A commit is visible to the next inline read at once: the inline
/// connections read the WAL as sqlx's do.
#[tokio::test]
async fn an_inline_read_sees_each_commit_the_moment_it_returns() {
    let t = testing::sqlite().await;
    for i in 0..50_i64 {
        let mut tx = t.store.begin_write().await.unwrap();
        sqlx::query("INSERT INTO orgs (org, created_ms) VALUES ($1, $2)")
            .bind(format!("org-{i}"))
            .bind(i)
            .execute(tx.conn())
            .await
            .unwrap();
        tx.commit_unaudited().await.unwrap();
        assert_eq!(one(&t.store, "SELECT COUNT(*) FROM orgs"), Some(i + 1));
    }
}

/// A read on the calling thread within a budget (search's): SQLite
/// interrupts a statement that runs past it, the read answers `None` (the
/// caller then goes the sqlx way), and the connection reads on without
/// the budget.
#[tokio::test]
async fn a_bounded_read_past_its_budget_is_interrupted_and_the_connection_reads_on() {
    let t = testing::sqlite().await;
    let count_to = |n: i64| {
        format!(
            "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < {n}) \
             SELECT count(*) FROM c"
        )
    };
    // Seconds of work against a millisecond.
    let slow = t
        .store
        .read_inline_within(std::time::Duration::from_millis(1), |conn| {
            conn.query_row(&count_to(200_000_000), [], |r| r.get::<_, i64>(0))
        });
    assert!(slow.is_none());
    // The same connection (the only idle one), long past the first budget:
    // no handler is left to interrupt it.
    assert_eq!(one(&t.store, &count_to(1_000_000)), Some(1_000_000));
    let quick = t
        .store
        .read_inline_within(std::time::Duration::from_secs(600), |conn| {
            conn.query_row(&count_to(10), [], |r| r.get::<_, i64>(0))
        });
    assert_eq!(quick.map(|r| r.unwrap()), Some(10));
}
