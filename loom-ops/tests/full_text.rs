//! Merging SQLite's full-text index while the store is quiet.

mod common;

use loom_ops::store::{FullTextWatch, Merged};
use serde_json::json;

use common::{full_text_integrity_check as integrity_check, full_text_segments as segments};

/// A SQLite store whose full-text index does not merge by itself, so
/// every batch it takes leaves a segment of its own.
async fn without_automerge() -> common::Harness {
    let h = common::sqlite().await;
    common::full_text_setting(&h, "automerge", 0).await;
    h
}

/// [`without_automerge`] with small index pages, so that one memory's
/// words fill many and a merge takes more than one step.
async fn small_pages() -> common::Harness {
    let h = without_automerge().await;
    common::full_text_setting(&h, "pgsz", 64).await;
    h
}

/// A long text: 150 words, `tag` and a number each.
fn words(tag: &str) -> String {
    (0..150)
        .map(|i| format!("{tag}{i}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `memory.set`, then its rows handed to the index as a search would
/// hand them: a segment of its own.
async fn set(h: &common::Harness, key: &str, content: &str) {
    h.call("memory.set", json!({"memory_key": key, "content": content}))
        .await
        .unwrap();
    h.store().index_queued_writes().await.unwrap();
}

/// One look of the merge worker at the index.
async fn look(h: &common::Harness, watch: &mut FullTextWatch) -> Option<Merged> {
    h.store().merge_full_text_if_quiet(watch).await.unwrap()
}

#[tokio::test]
async fn a_quiet_index_in_many_segments_is_merged_into_one_and_still_answers() {
    let h = without_automerge().await;
    for i in 0..12 {
        set(&h, &format!("k{i}"), &format!("deploy window number{i}")).await;
    }
    let before = segments(&h).await;
    assert!(before >= 12, "{before}");

    // The first look only remembers; nobody wrote before the second.
    let mut watch = FullTextWatch::default();
    assert_eq!(look(&h, &mut watch).await, None);
    let merged = look(&h, &mut watch).await.expect("merged");
    assert_eq!(
        (merged.from, merged.to, merged.interrupted),
        (before, 1, false)
    );
    assert!(merged.steps >= 1);
    assert_eq!(segments(&h).await, 1);
    integrity_check(&h).await;
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
    assert_eq!(look(&h, &mut watch).await, None);
}

#[tokio::test]
async fn an_index_written_between_two_looks_is_left_alone() {
    let h = without_automerge().await;
    for i in 0..10 {
        set(&h, &format!("k{i}"), "deploy window").await;
    }
    let mut watch = FullTextWatch::default();
    for i in 10..13 {
        assert_eq!(look(&h, &mut watch).await, None);
        set(&h, &format!("k{i}"), "deploy window").await;
    }
    assert!(segments(&h).await >= 13);
    // Writes queued for the index, not in it yet, are writes too.
    for i in 13..16 {
        assert_eq!(look(&h, &mut watch).await, None);
        h.call(
            "memory.set",
            json!({"memory_key": format!("k{i}"), "content": "deploy window"}),
        )
        .await
        .unwrap();
    }
    // A few segments are not worth rewriting the index for.
    let h = common::sqlite().await;
    set(&h, "a", "deploy").await;
    let mut watch = FullTextWatch::default();
    for _ in 0..2 {
        assert_eq!(look(&h, &mut watch).await, None);
    }
}

/// Rewrites leave a memory's old words in the segment holding them,
/// cancelled by deletions in a newer one: the index grows though its
/// segments stay few, and a quiet index grown by a quarter is merged.
#[tokio::test]
async fn a_quiet_index_grown_by_rewrites_is_merged_though_in_few_segments() {
    let h = small_pages().await;
    let mut watch = FullTextWatch::default();
    set(&h, "long", &words("alpha")).await;
    assert_eq!(look(&h, &mut watch).await, None);

    // A small memory more: a second segment, a page or two: left alone.
    set(&h, "short", "deploy").await;
    for _ in 0..2 {
        assert_eq!(look(&h, &mut watch).await, None);
    }
    assert_eq!(segments(&h).await, 2);

    // The long memory rewritten: the deletions of its old words and its new
    // words about double the pages, in one segment more.
    set(&h, "long", &words("omega")).await;
    assert_eq!(segments(&h).await, 3);
    assert_eq!(
        look(&h, &mut watch).await,
        None,
        "written since the last look"
    );
    let merged = look(&h, &mut watch).await.expect("merged");
    assert_eq!((merged.from, merged.to, merged.interrupted), (3, 1, false));
    assert_eq!(segments(&h).await, 1);
    integrity_check(&h).await;
    // Two new long memories triple the pages; merged, that is the index's
    // size from then on, and a small write more is a second segment, not
    // growth to merge again.
    set(&h, "long2", &words("beta")).await;
    set(&h, "long3", &words("gamma")).await;
    assert_eq!(look(&h, &mut watch).await, None);
    let merged = look(&h, &mut watch).await.expect("merged");
    assert_eq!((merged.from, merged.to), (3, 1));
    set(&h, "short", "deploy again").await;
    for _ in 0..2 {
        assert_eq!(look(&h, &mut watch).await, None);
    }
    assert_eq!(segments(&h).await, 2);
    let hits = |query: &'static str| {
        let h = &h;
        async move {
            h.call("memory.search", json!({ "query": query }))
                .await
                .unwrap()["hits"]
                .as_array()
                .unwrap()
                .len()
        }
    };
    assert_eq!((hits("omega7").await, hits("alpha7").await), (1, 0));
}

/// Rows the last write of a burst left queued are handed to the index
/// before the merge: the first merge step would hand them over anyway (every
/// write does), and their segments would read as someone else's write and
/// stop the merge.
#[tokio::test]
async fn rows_left_queued_are_indexed_before_the_merge() {
    let h = small_pages().await;
    for i in 0..10 {
        set(&h, &format!("k{i}"), &words(&format!("w{i}x"))).await;
    }
    let mut watch = FullTextWatch::default();
    assert_eq!(look(&h, &mut watch).await, None);
    h.call(
        "memory.set",
        json!({"memory_key": "last", "content": "deploy quokka"}),
    )
    .await
    .unwrap();
    assert_eq!(look(&h, &mut watch).await, None, "written since");
    let merged = look(&h, &mut watch).await.expect("merged");
    assert_eq!((merged.to, merged.interrupted), (1, false));
    assert!(merged.steps > 1, "{merged:?}");
    assert_eq!(segments(&h).await, 1);
    assert_eq!(h.search_keys("quokka").await, ["last"]);
}

/// A restarted server counts the index's growth from the clean size the
/// store kept at the last merge, not from what it first sees: restarted
/// after a burst of rewrites, it merges them once the store is quiet.
#[tokio::test]
async fn a_restarted_server_merges_an_index_grown_since_the_last_merge() {
    let h = small_pages().await;
    set(&h, "long", &words("alpha")).await;
    set(&h, "short", "deploy").await;
    let mut watch = FullTextWatch::default();
    assert_eq!(look(&h, &mut watch).await, None);
    // Two segments, nothing grown: left alone, and the size kept.
    assert_eq!(look(&h, &mut watch).await, None);
    let kept = || async {
        sqlx::query_scalar::<_, String>(
            "SELECT value FROM settings WHERE name = 'full_text.clean_pages'",
        )
        .fetch_one(h.store().reader())
        .await
        .unwrap()
        .parse::<i64>()
        .unwrap()
    };
    let before = kept().await;
    assert!(before > 0);

    // The server stops right after a rewrite that about doubles the pages.
    drop(watch);
    set(&h, "long", &words("omega")).await;
    assert_eq!(segments(&h).await, 3);

    // The next server's first look remembers, its second merges.
    let mut watch = FullTextWatch::default();
    assert_eq!(look(&h, &mut watch).await, None);
    let merged = look(&h, &mut watch).await.expect("merged");
    assert_eq!((merged.from, merged.to, merged.interrupted), (3, 1, false));
    integrity_check(&h).await;
    // The merged size is the one kept from then on.
    let after = kept().await;
    assert_ne!(after, before);
    let mut watch = FullTextWatch::default();
    for _ in 0..2 {
        assert_eq!(look(&h, &mut watch).await, None);
    }
    assert_eq!(kept().await, after);
}

#[tokio::test]
async fn postgresql_has_no_full_text_merging() {
    for h in common::all().await {
        if h.store().backend() != loom_ops::store::Backend::Postgres {
            continue;
        }
        assert_eq!(h.store().full_text_state().await.unwrap(), None);
        let mut watch = FullTextWatch::default();
        assert_eq!(look(&h, &mut watch).await, None);
        assert!(!h.store().merge_full_text_step().await.unwrap());
    }
}

/// A store made before migration 0009 (memories filed in the index under
/// their own id) is rebuilt under the negated ids when it is opened, and
/// search then takes the newest rows first, as before, and keeps up with
/// new writes.
#[tokio::test]
async fn a_store_indexed_before_newest_first_is_rebuilt_and_answers_newest_first() {
    let (url, dir, pool) = common::sqlite_migrated_before("0009").await;
    // 150 rows holding "deploy", oldest first (ids 1..150), and one deleted.
    let insert = "INSERT INTO memories (org, namespace, agent, memory_key, content, kind, labels, \
                  source, content_hash, version, deleted, created_ms, updated_ms) \
                  VALUES ($1, $2, $3, $4, $5, 'fact', '[]', '', 'h', 1, $6, 1000, 1000)";
    for i in 0..150 {
        sqlx::query(insert)
            .bind(common::ORG)
            .bind(common::NS)
            .bind(common::AGENT)
            .bind(format!("k{i:03}"))
            .bind(format!("deploy window number{i}"))
            .bind(0_i64)
            .execute(&pool)
            .await
            .unwrap();
    }
    sqlx::query(insert)
        .bind(common::ORG)
        .bind(common::NS)
        .bind(common::AGENT)
        .bind("gone")
        .bind("deploy removed")
        .bind(1_i64)
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;

    let h = common::Harness::seeded(loom_ops::store::testing::sqlite_at(url, dir).await).await;
    let indexed: i64 =
        sqlx::query_scalar("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH 'deploy'")
            .fetch_one(h.store().reader())
            .await
            .unwrap();
    assert_eq!(indexed, 151);
    integrity_check(&h).await;

    // Every row scores the same, so the page is the candidates in key
    // order: the 50 newest (k100..k149), not the 50 oldest.
    let page = h
        .call("memory.search", json!({"query": "deploy", "limit": 50}))
        .await
        .unwrap();
    let keys = common::hit_keys(&page["hits"]);
    assert_eq!(keys.len(), 50);
    assert_eq!((keys[0].as_str(), keys[49].as_str()), ("k100", "k149"));
    let one = h
        .call("memory.search", json!({"query": "number7"}))
        .await
        .unwrap();
    assert_eq!(one["hits"][0]["memory_key"], "k007");

    // New rows and changed rows are indexed under the new layout.
    h.call(
        "memory.set",
        json!({"memory_key": "fresh", "content": "quokka sighting"}),
    )
    .await
    .unwrap();
    h.call(
        "memory.set",
        json!({"memory_key": "k010", "content": "zebra crossing"}),
    )
    .await
    .unwrap();
    assert_eq!(h.search_keys("quokka").await, ["fresh"]);
    assert_eq!(h.search_keys("zebra").await, ["k010"]);
    assert!(h.search_keys("number10").await.is_empty());
    integrity_check(&h).await;
}

/// A store made before migration 0017 (FTS5 kept each row's size in a
/// docsize table) is indexed anew without one when it is opened: each
/// memory holds its size, counted as FTS5 counts it, rows that were still
/// queued are indexed too, and search ranks by those sizes (a shorter row
/// holding the word scores higher), for rows written before and after.
#[tokio::test]
async fn a_store_with_sizes_in_the_index_keeps_them_in_its_rows() {
    let (url, dir, pool) = common::sqlite_migrated_before("0017").await;
    let insert = "INSERT INTO memories (org, namespace, agent, memory_key, content, kind, labels, \
                  source, content_hash, version, created_ms, updated_ms) \
                  VALUES ($1, $2, $3, $4, $5, 'fact', $6, '', 'h', 1, 1000, 1000)";
    let write = |key: String, content: String, labels: &'static str| {
        sqlx::query(insert)
            .bind(common::ORG)
            .bind(common::NS)
            .bind(common::AGENT)
            .bind(key)
            .bind(content)
            .bind(labels)
            .execute(&pool)
    };
    // k00 .. k19: "deploy" and i more words; the first ten handed to the
    // index as that build's commits did, the rest left queued.
    for i in 0..20 {
        let content = format!("deploy{}", " filler".repeat(i));
        write(format!("k{i:02}"), content, "[\"ops\"]")
            .await
            .unwrap();
        if i == 9 {
            sqlx::raw_sql(
                "INSERT INTO memories_fts (memories_fts, rowid, memory_key, content, labels) \
                 SELECT CASE WHEN remove = 1 THEN 'delete' END, fts_rowid, memory_key, content, labels \
                 FROM memories_fts_pending ORDER BY fts_rowid, seq; \
                 DELETE FROM memories_fts_pending;",
            )
            .execute(&pool)
            .await
            .unwrap();
        }
    }
    let sized: i64 = sqlx::query_scalar("SELECT count(*) FROM memories_fts_docsize")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(sized, 10);
    pool.close().await;

    let h = common::Harness::seeded(loom_ops::store::testing::sqlite_at(url, dir).await).await;
    assert_eq!(
        h.count("SELECT count(*) FROM sqlite_master WHERE name = 'memories_fts_docsize'")
            .await,
        0
    );
    let miscounted = "SELECT count(*) FROM memories \
                      WHERE fts_tokens IS NOT loom_fts_tokens(memory_key, content, labels)";
    assert_eq!(h.count(miscounted).await, 0);
    // the key, "deploy", 7 fillers, "ops"
    assert_eq!(
        h.count("SELECT fts_tokens FROM memories WHERE memory_key = 'k07'")
            .await,
        1 + 1 + 7 + 1
    );
    assert_eq!(h.rows("memories_fts_pending").await, 0);
    assert_eq!(
        h.count("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH 'deploy'")
            .await,
        20
    );
    integrity_check(&h).await;

    // One written now, as short as k00: it scores as k00 does. A row
    // written again is counted again; a pin keeps the count.
    h.call(
        "memory.set",
        json!({"memory_key": "k99", "content": "deploy", "labels": ["ops"]}),
    )
    .await
    .unwrap();
    h.call(
        "memory.set",
        json!({"memory_key": "k19", "content": "deploy ".repeat(19) + "deploy"}),
    )
    .await
    .unwrap();
    h.call("memory.pin", json!({"memory_key": "k18"}))
        .await
        .unwrap();
    assert_eq!(h.count(miscounted).await, 0);
    assert_eq!(
        h.count("SELECT fts_tokens FROM memories WHERE memory_key = 'k19'")
            .await,
        1 + 20 + 1
    );
    let page = h
        .call(
            "memory.search",
            json!({"query": "deploy", "limit": 50, "explain": true}),
        )
        .await
        .unwrap();
    let raw = |key: &str| {
        page["hits"]
            .as_array()
            .unwrap()
            .iter()
            .find(|hit| hit["memory_key"] == key)
            .map(|hit| hit["explain"]["raw_lexical"].as_f64().unwrap())
            .unwrap()
    };
    for i in 1..19 {
        let (shorter, longer) = (format!("k{:02}", i - 1), format!("k{i:02}"));
        assert!(
            raw(&shorter) > raw(&longer),
            "{shorter} {} {longer} {}",
            raw(&shorter),
            raw(&longer)
        );
    }
    assert_eq!(raw("k99").to_bits(), raw("k00").to_bits());
}
