//! The store opens, migrates and round-trips on every backend.

use loom_ops::store::{Backend, testing};

#[tokio::test]
async fn opens_migrates_and_writes_on_every_backend() {
    for t in testing::all().await {
        let store = &t.store;
        sqlx::query("INSERT INTO orgs (org, created_ms) VALUES ($1, $2)")
            .bind("acme")
            .bind(1_i64)
            .execute(store.writer())
            .await
            .unwrap();
        let (org,): (String,) = sqlx::query_as("SELECT org FROM orgs WHERE org = $1")
            .bind("acme")
            .fetch_one(store.reader())
            .await
            .unwrap();
        assert_eq!(org, "acme", "{}", t.name());
        // migrations are idempotent
        store.migrate().await.unwrap();
    }
}

#[tokio::test]
async fn sqlite_runs_in_wal_mode() {
    let t = testing::sqlite().await;
    assert_eq!(t.store.backend(), Backend::Sqlite);
    let (mode,): (String,) = sqlx::query_as("PRAGMA journal_mode")
        .fetch_one(t.store.reader())
        .await
        .unwrap();
    assert_eq!(mode, "wal");
}
