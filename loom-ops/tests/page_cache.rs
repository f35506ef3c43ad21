//! A SQLite store puts `loom_wal_buffer`'s page-cache layer in place
//! before anything in the process initializes SQLite (SQLite takes a page
//! cache only then), and its writes go through it.
//!
//! One test in this file, so one process that has not touched SQLite
//! before the store opens.

mod common;

use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_writes_through_the_page_cache_layer() {
    let h = common::sqlite().await;
    // The store's open made the first call: a later one answers its outcome.
    loom_wal_buffer::page_cache::install()
        .expect("the store installed the layer before SQLite was first used");
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
