//! SQLite's full-text queue (migration 0011): the triggers queue what the
//! index must learn, and FTS5 takes it a batch at a time: from the direct
//! writer once a batch is queued, from any other commit, and before any
//! search reads the index, so a search finds every write committed before
//! it.

mod common;

use std::collections::BTreeSet;

use futures_util::future::join_all;
use serde_json::json;

/// The words contents are made of: none is another's stem, so a row holds
/// a word exactly when the index files it under that word.
const WORDS: [&str; 12] = [
    "amber", "birch", "cedar", "delta", "ember", "fjord", "glade", "heron", "indigo", "juniper",
    "kestrel", "lumen",
];

/// Three words for key `i` in round `round`, different from round to round.
fn content(i: usize, round: usize) -> String {
    [i + round, i * 5 + round * 7 + 3, i * 7 + round * 2 + 1]
        .map(|n| WORDS[n % WORDS.len()])
        .join(" ")
}

/// The keys the index files under `word`.
async fn indexed(h: &common::Harness, word: &str) -> BTreeSet<String> {
    sqlx::query_scalar(
        "SELECT m.memory_key FROM memories_fts JOIN memories m ON m.id = -memories_fts.rowid \
         WHERE memories_fts MATCH $1",
    )
    .bind(format!("\"{word}\""))
    .fetch_all(h.store().reader())
    .await
    .unwrap()
    .into_iter()
    .collect()
}

/// The keys whose current text (content or labels) holds `word`.
async fn holding(h: &common::Harness, word: &str) -> BTreeSet<String> {
    let rows: Vec<(String, String, String)> =
        sqlx::query_as("SELECT memory_key, content, labels FROM memories")
            .fetch_all(h.store().reader())
            .await
            .unwrap();
    rows.into_iter()
        .filter(|(_, content, labels)| {
            content.split_whitespace().any(|w| w == word) || labels.contains(&format!("\"{word}\""))
        })
        .map(|(key, _, _)| key)
        .collect()
}

/// Once a reader asks (as a search does), every word's rows in the index
/// are the rows holding it now, and nothing is left queued.
async fn assert_index_matches_rows(h: &common::Harness, when: &str) {
    h.store().index_queued_writes().await.unwrap();
    for word in WORDS {
        assert_eq!(
            indexed(h, word).await,
            holding(h, word).await,
            "{when}: {word}"
        );
    }
    assert_eq!(h.rows("memories_fts_pending").await, 0, "{when}");
    common::full_text_integrity_check(h).await;
}

#[tokio::test]
async fn writes_wait_in_the_queue_and_go_into_one_segment_when_a_reader_asks() {
    let h = common::sqlite().await;
    // Without automerge (nor its crisis merge, from 16 segments a level)
    // every segment FTS5 writes stays, so they can be counted.
    common::full_text_setting(&h, "automerge", 0).await;
    common::full_text_setting(&h, "crisismerge", 2000).await;
    const KEYS: usize = 48;
    for round in 0..3 {
        let before = common::full_text_segments(&h).await;
        // A write transaction held open keeps the direct writer waiting, so
        // the sets queue behind it and share the commit that follows it.
        // Each set reaches the writer within its first poll (its reads run
        // on the calling thread, and the namespace is known, as the server
        // knows it after authorization), so every one is queued before the
        // transaction is released, however the threads are scheduled.
        let held = h.store().begin_write().await.unwrap();
        let sets = join_all((0..KEYS).map(|i| {
            h.call_found(
                "memory.set",
                json!({"memory_key": format!("k{i:02}"), "content": content(i, round)}),
            )
        }));
        let release = async {
            tokio::task::yield_now().await;
            held.commit_unaudited().await.unwrap();
        };
        let (written, ()) = tokio::join!(sets, release);
        assert!(written.iter().all(Result::is_ok), "round {round}");
        // Less than a batch: queued, and the index not written.
        let queued = h.rows("memories_fts_pending").await;
        let expected = if round == 0 { KEYS } else { 2 * KEYS };
        assert_eq!(
            queued, expected as i64,
            "round {round}: an insert queues one row, an update two"
        );
        assert_eq!(
            common::full_text_segments(&h).await,
            before,
            "round {round}"
        );
        assert_index_matches_rows(&h, &format!("after the sets of round {round}")).await;
        // Flushed at every call's savepoint, the index took a segment per
        // write (48); at every commit one per commit; now one per batch.
        let added = common::full_text_segments(&h).await - before;
        assert_eq!(added, 1, "round {round}: {added} segments");
    }

    // Writes through sqlx's group (memory.update, memory.apply) drain too.
    for i in 0..4 {
        h.call(
            "memory.update",
            json!({"memory_key": format!("k{i:02}"), "content": "lumen lumen"}),
        )
        .await
        .unwrap();
    }
    let label = json!({"action": "label", "labels": ["kestrel"], "filter": {"key_prefix": "k1"}});
    let mut dry = label.clone();
    dry["dry_run"] = json!(true);
    h.call("memory.apply", dry).await.unwrap();
    assert_index_matches_rows(&h, "after a dry run, which queued and rolled back").await;
    assert!(!indexed(&h, "kestrel").await.contains("k15"));
    h.call("memory.apply", label).await.unwrap();
    assert_index_matches_rows(&h, "after updates and labels").await;
    assert!(indexed(&h, "kestrel").await.contains("k15"));
}

#[tokio::test]
async fn a_search_finds_every_committed_write_before_its_batch_is_indexed() {
    let h = common::sqlite().await;
    let set = |content: &'static str| {
        h.call("memory.set", json!({"memory_key": "k", "content": content}))
    };
    set("amber birch").await.unwrap();
    assert_eq!(h.rows("memories_fts_pending").await, 1);
    assert_eq!(h.search_keys("amber").await, ["k"]);
    assert_eq!(
        h.rows("memories_fts_pending").await,
        0,
        "the search indexed it"
    );

    set("cedar delta").await.unwrap();
    assert_eq!(h.rows("memories_fts_pending").await, 2);
    assert!(
        h.search_keys("amber").await.is_empty(),
        "the old text is gone"
    );
    assert_eq!(h.search_keys("cedar").await, ["k"]);
    h.call("memory.delete", json!({"memory_key": "k"}))
        .await
        .unwrap();
    assert!(h.search_keys("cedar").await.is_empty());
    common::full_text_integrity_check(&h).await;
}

/// Changes that leave the key, the content and the labels as they were
/// hand the index nothing (migration 0015): neither the direct writer's
/// queue nor FTS5, whose segments (automerge off, as above) would count
/// each text handed to it.
#[tokio::test]
async fn a_change_that_keeps_the_text_hands_the_index_nothing() {
    let h = common::sqlite().await;
    common::full_text_setting(&h, "automerge", 0).await;
    common::full_text_setting(&h, "crisismerge", 2000).await;
    let key = json!({"memory_key": "k"});
    h.call(
        "memory.set",
        json!({"memory_key": "k", "content": "amber birch"}),
    )
    .await
    .unwrap();
    assert_eq!(h.search_keys("amber").await, ["k"]);
    let segments = common::full_text_segments(&h).await;

    // Through sqlx's group, whose commits hand FTS5 whatever is queued.
    for op in ["memory.pin", "memory.unpin", "memory.lock", "memory.unlock"] {
        h.call(op, key.clone()).await.unwrap();
        assert_eq!(h.rows("memories_fts_pending").await, 0, "after {op}");
        assert_eq!(common::full_text_segments(&h).await, segments, "after {op}");
    }
    // Through the direct writer, whose queue waits for a batch.
    let kind = json!({"memory_key": "k", "content": "amber birch", "kind": "decision"});
    let written = h.call("memory.set", kind).await.unwrap();
    assert_eq!(written["version"], 6, "the set wrote a version: {written}");
    assert_eq!(h.rows("memories_fts_pending").await, 0, "after a new kind");
    assert_eq!(h.search_keys("amber").await, ["k"]);
    assert_eq!(common::full_text_segments(&h).await, segments);

    // The labels are indexed text: a change of them is handed over.
    let label = json!({"action": "label", "labels": ["cedar"], "filter": {"key_prefix": "k"}});
    h.call("memory.apply", label).await.unwrap();
    assert_eq!(h.search_keys("cedar").await, ["k"]);
    assert_eq!(common::full_text_segments(&h).await, segments + 1);

    h.call("memory.delete", key).await.unwrap();
    assert!(h.search_keys("amber").await.is_empty(), "deleted");
    assert_eq!(common::full_text_segments(&h).await, segments + 1);
    common::full_text_integrity_check(&h).await;
}

#[tokio::test]
async fn the_direct_writer_indexes_a_batch_once_it_is_queued() {
    let h = common::sqlite().await;
    let before = common::full_text_segments(&h).await;
    // More inserts than a batch of rows (1,024), none searched: the direct
    // writer's commits hand FTS5 the queue once it holds a batch.
    const KEYS: usize = 1100;
    for chunk in (0..KEYS).collect::<Vec<_>>().chunks(100) {
        let sets = join_all(chunk.iter().map(|i| {
            h.call_found(
                "memory.set",
                json!({"memory_key": format!("k{i:04}"), "content": content(*i, 0)}),
            )
        }));
        assert!(sets.await.iter().all(Result::is_ok));
    }
    let queued = h.rows("memories_fts_pending").await;
    assert!(queued < 1024, "{queued} rows queued");
    assert!(common::full_text_segments(&h).await > before);
    assert_index_matches_rows(&h, "after more than a batch of sets").await;
}

/// Rows another program writes straight into `memories` (`n` of them, in
/// one transaction): the triggers queue them as for Loom's own writes.
async fn insert_around_the_store(h: &common::Harness, n: usize) {
    let mut tx = h.store().writer().begin().await.unwrap();
    for i in 0..n {
        sqlx::query(
            "INSERT INTO memories (org, namespace, agent, memory_key, content, kind, labels, \
             source, content_hash, version, created_ms, updated_ms) \
             VALUES ($1, $2, $3, $4, $5, 'fact', '[]', '', 'h', 1, 1, 1)",
        )
        .bind(common::ORG)
        .bind(common::NS)
        .bind(common::AGENT)
        .bind(format!("outside{i:04}"))
        .bind(format!("heron glade {}", content(i, 1)))
        .execute(&mut *tx)
        .await
        .unwrap();
    }
    tx.commit().await.unwrap();
}

#[tokio::test]
async fn what_a_restart_finds_queued_the_next_search_indexes() {
    let mut h = common::sqlite().await;
    for i in 0..3 {
        h.call(
            "memory.set",
            json!({"memory_key": format!("k{i}"), "content": content(i, 0)}),
        )
        .await
        .unwrap();
    }
    insert_around_the_store(&h, 1).await;
    assert_eq!(h.rows("memories_fts_pending").await, 4);
    assert!(indexed(&h, "heron").await.is_empty());

    // Less than a batch: left queued through the stop and the start, so a
    // CLI opening the store never waits behind a busy server to index it.
    h.restart().await;
    assert_eq!(h.rows("memories_fts_pending").await, 4);
    assert_eq!(h.search_keys("heron").await, ["outside0000"]);
    assert_eq!(h.rows("memories_fts_pending").await, 0);
    assert_index_matches_rows(&h, "after a restart and a search").await;
}

#[tokio::test]
async fn a_bulk_load_around_the_store_is_indexed_when_it_opens() {
    let mut h = common::sqlite().await;
    // More than a batch of rows (1,024): left queued, the first write after
    // the start would index them all in one of its commits.
    insert_around_the_store(&h, 1100).await;
    assert_eq!(h.rows("memories_fts_pending").await, 1100);
    h.restart().await;
    assert_eq!(h.rows("memories_fts_pending").await, 0);
    assert_eq!(indexed(&h, "heron").await.len(), 1100);
    assert_index_matches_rows(&h, "after a restart").await;
}

#[tokio::test]
async fn the_index_merges_two_segments_of_a_level() {
    let h = common::sqlite().await;
    let automerge: i64 =
        sqlx::query_scalar("SELECT v FROM memories_fts_config WHERE k = 'automerge'")
            .fetch_one(h.store().reader())
            .await
            .unwrap();
    assert_eq!(automerge, 2);
}
