//! A process that prepares SQLite first (`store::prepare_sqlite`, as the
//! `loom` binary's `main` does) has `loom_wal_buffer`'s page-cache layer
//! in place, and a store's writes go through it.
//!
//! One test in this file, so one process that has not touched SQLite
//! before it prepares it.

mod common;

use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_writes_through_the_page_cache_layer() {
    loom_ops::store::prepare_sqlite();
    assert_eq!(loom_wal_buffer::page_cache::installed(), Some(Ok(())));
    let h = common::sqlite().await;
    let before = loom_wal_buffer::page_cache::counts();
    for i in 0..20 {
        h.call(
            "memory.set",
            json!({"memory_key": format!("k{i}"), "content": format!("text {i}")}),
        )
        .await
        .unwrap();
    }
    let after = loom_wal_buffer::page_cache::counts();
    assert!(
        after.skipped + after.handed_on > before.skipped + before.handed_on,
        "the writes' commits truncated caches through the layer: {before:?} -> {after:?}"
    );
}
