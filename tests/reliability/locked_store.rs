//! A SQLite store another program keeps locked past a call's budget: the
//! call answers `BACKEND_TIMEOUT`, and once the lock is gone the server
//! writes again at once. The call's transaction began on sqlx's connection
//! thread after the call had given up; it used to stay open on the pooled
//! connection, holding the file's write lock, so every later write failed
//! until a restart.

use loom_core::Role;
use loom_tests::{generous, hold_write_lock, servers};
use serde_json::json;
use sqlx::Connection;

#[tokio::test]
async fn writes_resume_once_a_lock_held_past_a_calls_budget_is_gone() {
    for t in servers(generous).await {
        if t.name() != "sqlite" {
            t.server.shutdown().await;
            continue;
        }
        let token = t.token("default", "ana", Role::Writer, &[]);
        let set = |key: &str, idempotency: Option<&str>| {
            let mut request = t
                .request("memory.set", Some(&token))
                .json(&json!({"memory_key": key, "content": "x"}));
            if let Some(k) = idempotency {
                request = request.header("idempotency-key", k);
            }
            t.send(request)
        };

        // Another program holds the file's write lock past the set's 5 s
        // budget: the key's claim waits for it, and gives up.
        let mut holder = hold_write_lock(&t, false).await;
        let waited = set("held", Some("k-held")).await;
        assert_eq!(
            (waited.status, waited.code()),
            (504, "BACKEND_TIMEOUT"),
            "{}",
            waited.text
        );
        sqlx::raw_sql("ROLLBACK")
            .execute(&mut holder)
            .await
            .expect("release");
        drop(holder);

        // Both writers write again: the group's (a key's claim) and the
        // direct one (a plain set).
        let claimed = set("after", Some("k-after")).await;
        assert_eq!(claimed.status, 200, "{}", claimed.text);
        let plain = set("plain", None).await;
        assert_eq!(plain.status, 200, "{}", plain.text);
        // …and nothing of the call that gave up was written.
        assert_eq!(
            t.count("SELECT COUNT(*) FROM memories WHERE memory_key = 'held'")
                .await,
            0
        );
        // Another program can take the lock again: the server holds none.
        let mut other = sqlx::SqliteConnection::connect(&t.db.options.url)
            .await
            .expect("a second connection");
        sqlx::raw_sql("BEGIN IMMEDIATE; ROLLBACK")
            .execute(&mut other)
            .await
            .expect("the write lock is free");
        t.server.shutdown().await;
    }
}

/// Shutdown ends within its grace period (and the least time the last
/// batched rows get) while another program keeps the store locked: the
/// call ledger's rows of the calls just made cannot be written, and each
/// try of them waits out SQLite's busy timeout (~10 s, five tries), which
/// held the exit for a minute. The bound below is a guard against that
/// wait, far above the ~2 s the exit takes.
#[tokio::test]
async fn shutdown_ends_within_its_grace_while_the_store_is_locked() {
    let grace = |c: &mut loom_server::Config| {
        generous(c);
        c.shutdown_grace = std::time::Duration::from_secs(1);
    };
    for t in servers(grace).await {
        if t.name() != "sqlite" {
            t.server.shutdown().await;
            continue;
        }
        let token = t.token("default", "ana", Role::Writer, &[]);
        // The store and its telemetry file (where the ledger goes) locked.
        let mut holder = hold_write_lock(&t, true).await;
        // Reads are answered; their ledger rows wait for the lock.
        for _ in 0..3 {
            let a = t.post("ops.capabilities", Some(&token), json!({})).await;
            assert_eq!(a.status, 200, "{}", a.text);
        }
        let stopped =
            tokio::time::timeout(std::time::Duration::from_secs(30), t.server.shutdown()).await;
        assert!(
            stopped.is_ok(),
            "the exit waited on the lock past its grace"
        );
        sqlx::raw_sql("ROLLBACK")
            .execute(&mut holder)
            .await
            .expect("release");
    }
}

/// A refused audited call's row is written once another program's lock is
/// gone, though the lock outlasted the busy timeout its first try waited
/// out (10 s, behind the refused write's and the ledger's own waits on the
/// same writer): the row used to be lost then. Shutdown waits for the row as for
/// a call, so the count after it is the answer.
#[tokio::test]
async fn a_refused_calls_audit_row_outlasts_a_long_lock() {
    for t in servers(generous).await {
        if t.name() != "sqlite" {
            t.server.shutdown().await;
            continue;
        }
        let token = t.token("default", "ana", Role::Writer, &[]);
        let mut holder = hold_write_lock(&t, false).await;
        let refused = t
            .post(
                "memory.set",
                Some(&token),
                json!({"memory_key": "held", "content": "x"}),
            )
            .await;
        assert_eq!(refused.code(), "BACKEND_TIMEOUT", "{}", refused.text);
        // The lock held past the row's first tries (~20-30 s from the call):
        // what is under test, not a wait for the server.
        tokio::time::sleep(std::time::Duration::from_secs(30)).await;
        sqlx::raw_sql("ROLLBACK")
            .execute(&mut holder)
            .await
            .expect("release");
        drop(holder);
        let loom_tests::TestServer { server, db, .. } = t;
        server.shutdown().await;
        let (rows,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM audit_log WHERE op = 'memory.set' AND outcome = 'BACKEND_TIMEOUT'",
        )
        .fetch_one(db.store.reader())
        .await
        .expect("the audit log");
        assert_eq!(rows, 1, "the refused call's audit row");
    }
}
