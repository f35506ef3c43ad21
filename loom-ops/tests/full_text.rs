//! Merging SQLite's full-text index while the store is quiet.

mod common;

use serde_json::json;

/// Segments of the full-text index, counted the way FTS5 files them.
async fn segments(h: &common::Harness) -> i64 {
    h.store().full_text_state().await.unwrap().unwrap().segments
}

/// A SQLite store whose full-text index does not merge by itself, so
/// every write leaves a segment of its own.
async fn without_automerge() -> common::Harness {
    let h = common::sqlite().await;
    sqlx::query("INSERT INTO memories_fts (memories_fts, rank) VALUES ('automerge', 0)")
        .execute(h.store().writer())
        .await
        .unwrap();
    h
}

#[tokio::test]
async fn a_quiet_index_in_many_segments_is_merged_into_one_and_still_answers() {
    let h = without_automerge().await;
    for i in 0..12 {
        h.call(
            "memory.set",
            json!({"memory_key": format!("k{i}"), "content": format!("deploy window number{i}")}),
        )
        .await
        .unwrap();
    }
    let before = segments(&h).await;
    assert!(before >= 12, "{before}");

    // The first look only remembers; nobody wrote before the second.
    let mut last = None;
    assert_eq!(
        h.store().merge_full_text_if_quiet(&mut last).await.unwrap(),
        None
    );
    let merged = h
        .store()
        .merge_full_text_if_quiet(&mut last)
        .await
        .unwrap()
        .expect("merged");
    assert_eq!(
        (merged.from, merged.to, merged.interrupted),
        (before, 1, false)
    );
    assert!(merged.steps >= 1);
    assert_eq!(segments(&h).await, 1);
    sqlx::query("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")
        .execute(h.store().writer())
        .await
        .unwrap();
    let found = h
        .call("memory.search", json!({"query": "deploy", "limit": 50}))
        .await
        .unwrap();
    assert_eq!(found["hits"].as_array().unwrap().len(), 12);
    let one = h
        .call("memory.search", json!({"query": "number7"}))
        .await
        .unwrap();
    assert_eq!(one["hits"][0]["memory_key"], "k7");

    // One segment: nothing to do.
    assert_eq!(
        h.store().merge_full_text_if_quiet(&mut last).await.unwrap(),
        None
    );
}

#[tokio::test]
async fn an_index_written_between_two_looks_is_left_alone() {
    let h = without_automerge().await;
    let set = |i: usize| {
        h.call(
            "memory.set",
            json!({"memory_key": format!("k{i}"), "content": "deploy window"}),
        )
    };
    for i in 0..10 {
        set(i).await.unwrap();
    }
    let mut last = None;
    for i in 10..13 {
        assert_eq!(
            h.store().merge_full_text_if_quiet(&mut last).await.unwrap(),
            None
        );
        set(i).await.unwrap();
    }
    assert!(segments(&h).await >= 13);
    // A few segments are not worth rewriting the index for.
    let h = common::sqlite().await;
    h.call(
        "memory.set",
        json!({"memory_key": "a", "content": "deploy"}),
    )
    .await
    .unwrap();
    let mut last = None;
    for _ in 0..2 {
        assert_eq!(
            h.store().merge_full_text_if_quiet(&mut last).await.unwrap(),
            None
        );
    }
}

#[tokio::test]
async fn postgresql_has_no_full_text_merging() {
    for h in common::all().await {
        if h.store().backend() != loom_ops::store::Backend::Postgres {
            continue;
        }
        assert_eq!(h.store().full_text_state().await.unwrap(), None);
        let mut last = None;
        assert_eq!(
            h.store().merge_full_text_if_quiet(&mut last).await.unwrap(),
            None
        );
        assert!(!h.store().merge_full_text_step().await.unwrap());
    }
}
