//! A SQLite store another program keeps locked past a call's budget: the
//! call answers `BACKEND_TIMEOUT`, and once the lock is gone the server
//! writes again at once. The call's transaction began on sqlx's connection
//! thread after the call had given up; it used to stay open on the pooled
//! connection, holding the file's write lock, so every later write failed
//! until a restart.

use loom_core::Role;
use loom_tests::{generous, servers};
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
        let mut holder = sqlx::SqliteConnection::connect(&t.db.options.url)
            .await
            .expect("a second connection");
        sqlx::raw_sql("BEGIN IMMEDIATE")
            .execute(&mut holder)
            .await
            .expect("the write lock");
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
