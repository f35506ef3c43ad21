//! How the PostgreSQL schema stores memories: the settings the migrations
//! give its tables and indexes (why each, in its migration). Run when
//! `LOOM_TEST_DATABASE_URL` is set.

use loom_ops::store::{Store, testing};

/// `relation`'s storage parameters, comma-separated.
async fn storage_parameters(store: &Store, relation: &str) -> String {
    let (options,): (String,) = sqlx::query_as(
        "SELECT COALESCE(array_to_string(reloptions, ','), '') FROM pg_class \
         WHERE oid = to_regclass($1)",
    )
    .bind(relation)
    .fetch_one(store.reader())
    .await
    .unwrap();
    options
}

/// The full-text index moves the entries of new writes out of its pending
/// list, which every search reads whole, at 256 kB (migration 0013), not
/// at the server's default of 4 MB.
#[tokio::test]
async fn the_full_text_index_keeps_a_small_pending_list() {
    let Some(t) = testing::postgres().await else {
        return;
    };
    assert_eq!(
        storage_parameters(&t.store, "memories_fts").await,
        "gin_pending_list_limit=256"
    );
}

/// Pages of memories keep 30% free for the rows' next versions, so the
/// recall counts every get raises are updated in place (migration 0014).
#[tokio::test]
async fn memories_pages_keep_room_for_updates() {
    let Some(t) = testing::postgres().await else {
        return;
    };
    assert_eq!(
        storage_parameters(&t.store, "memories").await,
        "fillfactor=70"
    );
}
