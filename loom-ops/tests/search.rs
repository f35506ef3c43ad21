//! search.query, memory.search and the profile, on every backend.

mod common;

use common::{code, hit_keys as keys};
use loom_core::ErrorCode;
use serde_json::{Value, json};

#[tokio::test]
async fn search_query_ranks_memories_and_returns_every_section() {
    for h in common::all().await {
        let n = h.name();
        for (k, c) in [
            (
                "deploy_window",
                "Deploys happen in the Friday window after 14:00",
            ),
            ("lunch", "Lunch is at noon"),
            ("deploy_script", "The deploy script lives in ops/"),
            ("old_deploy", "Deploys used to happen on Mondays"),
        ] {
            h.call("memory.set", json!({"memory_key": k, "content": c}))
                .await
                .unwrap();
        }
        h.call("memory.delete", json!({"memory_key": "old_deploy"}))
            .await
            .unwrap();
        let out = h
            .call(
                "search.query",
                json!({"query": "When is the deploy window?", "explain": true}),
            )
            .await
            .unwrap();
        assert_eq!(out["top_k"], 10, "{n}");
        assert_eq!(
            keys(&out["memory"]),
            ["deploy_window", "deploy_script"],
            "{n}"
        );
        let parts = &out["memory"][0]["explain"];
        for p in ["raw_lexical", "lexical", "recency", "pinned", "recall"] {
            assert!(parts[p].is_number(), "{n}: {p} in {parts}");
        }
        assert_eq!(out["knowledge"], json!([]), "{n}");
        assert_eq!(out["conversations"], json!([]), "{n}");
        assert_eq!(out["profile"], json!([]), "{n}");
        assert_eq!(h.rows("memory_exposures").await, 2, "{n}");

        // of two matches of one word, the pinned one ranks first
        let unpinned = h
            .call("search.query", json!({"query": "deploy"}))
            .await
            .unwrap();
        let last = keys(&unpinned["memory"]).pop().unwrap();
        h.call("memory.pin", json!({"memory_key": last.clone()}))
            .await
            .unwrap();
        let pinned = h
            .call("search.query", json!({"query": "deploy"}))
            .await
            .unwrap();
        assert_eq!(keys(&pinned["memory"])[0], last, "{n}");
        assert!(pinned["memory"][0].get("explain").is_none(), "{n}");

        // out-of-range top_k is clamped, never refused
        let one = h
            .call("search.query", json!({"query": "deploy", "top_k": 0}))
            .await
            .unwrap();
        assert_eq!(
            (
                one["top_k"].clone(),
                one["memory"].as_array().unwrap().len()
            ),
            (json!(1), 1),
            "{n}"
        );
        assert_eq!(
            h.call("search.query", json!({"query": "deploy", "top_k": 500}))
                .await
                .unwrap()["top_k"],
            50,
            "{n}"
        );
        assert_eq!(
            h.call("search.query", json!({"query": "the of"}))
                .await
                .unwrap()["memory"],
            json!([]),
            "{n}"
        );
    }
}

/// recipe weighs the same candidates otherwise and bodies returns less of
/// each text; unknown values of either are read as the defaults, and the
/// result names what was used.
#[tokio::test]
async fn search_query_recipes_and_bodies() {
    for h in common::all().await {
        let n = h.name();
        let long = format!("orchard {}", "harvest notes for the season ".repeat(12));
        for (k, c) in [
            ("old_note", "orchard orchard orchard"),
            ("new_note", long.as_str()),
        ] {
            h.call("memory.set", json!({"memory_key": k, "content": c}))
                .await
                .unwrap();
        }
        // old_note: the better match, changed ten days before new_note
        let day = 86_400_000_i64;
        sqlx::query(
            "UPDATE memories SET updated_ms = updated_ms - $1 WHERE memory_key = 'old_note'",
        )
        .bind(10 * day)
        .execute(h.store().writer())
        .await
        .unwrap();
        let search = |args: Value| h.call("search.query", args);
        let relevance = search(json!({"query": "orchard", "recipe": "relevance", "explain": true}))
            .await
            .unwrap();
        assert_eq!(keys(&relevance["memory"]), ["old_note", "new_note"], "{n}");
        assert_eq!(relevance["recipe"], "relevance", "{n}");
        let lexical =
            |out: &Value, i: usize| out["memory"][i]["explain"]["lexical"].as_f64().unwrap();
        assert!(
            lexical(&relevance, 0) > lexical(&relevance, 1),
            "{n}: {relevance}"
        );
        // relevance scores the text match alone
        assert_eq!(
            relevance["memory"][0]["score"].as_f64(),
            Some(lexical(&relevance, 0)),
            "{n}"
        );

        let recent = search(json!({"query": "orchard", "recipe": "Recent"}))
            .await
            .unwrap();
        assert_eq!(keys(&recent["memory"]), ["new_note", "old_note"], "{n}");
        assert_eq!(recent["recipe"], "recent", "{n}");

        // unknown names and no names: balanced, whole texts
        for args in [
            json!({"query": "orchard", "recipe": "fastest", "bodies": "summaries"}),
            json!({"query": "orchard"}),
        ] {
            let out = search(args).await.unwrap();
            assert_eq!(
                (&out["recipe"], &out["bodies"]),
                (&json!("balanced"), &json!("full")),
                "{n}"
            );
            let new_note = out["memory"]
                .as_array()
                .unwrap()
                .iter()
                .find(|h| h["memory_key"] == "new_note");
            assert_eq!(new_note.unwrap()["content"], json!(long), "{n}");
        }

        let snippets = search(json!({"query": "orchard", "recipe": "recent", "bodies": "snippet"}))
            .await
            .unwrap();
        let cut = snippets["memory"][0]["content"].as_str().unwrap();
        assert!(
            cut.starts_with("orchard harvest") && cut.ends_with('…'),
            "{n}: {cut}"
        );
        assert!(cut.chars().count() <= 201, "{n}: {cut}");
        assert_eq!(
            snippets["memory"][1]["content"], "orchard orchard orchard",
            "{n}"
        );

        let bare = search(json!({"query": "orchard", "bodies": "none"}))
            .await
            .unwrap();
        assert_eq!(bare["bodies"], "none", "{n}");
        for hit in bare["memory"].as_array().unwrap() {
            assert!(hit.get("content").is_none(), "{n}: {hit}");
            assert!(hit["memory_key"].is_string(), "{n}: {hit}");
        }
        // a name must still be a string over /v1
        assert_eq!(
            code(search(json!({"query": "orchard", "recipe": 3})).await),
            "INVALID_ARGUMENTS",
            "{n}"
        );
    }
}

#[tokio::test]
async fn memory_search_filters_and_refuses_bad_limits() {
    for h in common::all().await {
        let n = h.name();
        h.call(
            "memory.set",
            json!({"memory_key": "a", "content": "rust formatting rules", "kind": "procedure"}),
        )
        .await
        .unwrap();
        h.call_as(
            "bob",
            "memory.set",
            json!({"memory_key": "b", "content": "rust edition 2024"}),
        )
        .await
        .unwrap();
        let all = h
            .call("memory.search", json!({"query": "rust"}))
            .await
            .unwrap();
        assert_eq!(all["hits"].as_array().unwrap().len(), 2, "{n}");
        let bob = h
            .call("memory.search", json!({"query": "rust", "agent": "bob"}))
            .await
            .unwrap();
        assert_eq!(keys(&bob["hits"]), ["b"], "{n}");
        let procs = h
            .call(
                "memory.search",
                json!({"query": "rust", "kind": "procedure"}),
            )
            .await
            .unwrap();
        assert_eq!(keys(&procs["hits"]), ["a"], "{n}");
        assert_eq!(
            code(
                h.call("memory.search", json!({"query": "rust", "limit": -1}))
                    .await
            ),
            "INVALID_ARGUMENTS",
            "{n}"
        );
        assert_eq!(
            code(
                h.call(
                    "memory.search",
                    json!({"query": "rust", "namespace": "nowhere"})
                )
                .await
            ),
            "RESOURCE_NOT_FOUND",
            "{n}"
        );
    }
}

#[tokio::test]
async fn the_profile_is_kept_per_namespace_and_searched() {
    for h in common::all().await {
        let n = h.name();
        let empty = h.call("profile.get", json!({})).await.unwrap();
        assert_eq!(
            (empty["version"].clone(), empty["persona"].clone()),
            (json!(0), json!("")),
            "{n}"
        );
        let set = h.call("profile.set", json!({"persona": "Dana, staff engineer", "preferences": "vegetarian; short answers"})).await.unwrap();
        assert_eq!(set["version"], 1, "{n}");
        let goals = h
            .call("profile.set", json!({"goals": "ship v2"}))
            .await
            .unwrap();
        assert_eq!(
            (goals["version"].clone(), goals["persona"].clone()),
            (json!(2), json!("Dana, staff engineer")),
            "{n}"
        );
        let same = h
            .call("profile.set", json!({"goals": "ship v2"}))
            .await
            .unwrap();
        assert_eq!(same["version"], 2, "{n}");
        // read back whole (on SQLite a read on the calling thread)
        let got = h.call("profile.get", json!({})).await.unwrap();
        assert_eq!(
            (
                &got["persona"],
                &got["preferences"],
                &got["goals"],
                &got["version"]
            ),
            (
                &json!("Dana, staff engineer"),
                &json!("vegetarian; short answers"),
                &json!("ship v2"),
                &json!(2)
            ),
            "{n}"
        );
        assert!(got["updated_at"].is_string(), "{n}: {got}");
        assert_eq!(got["updated_at"], goals["updated_at"], "{n}");
        let (persona, version): (String, i64) =
            sqlx::query_as("SELECT persona, version FROM profile WHERE namespace = 'main'")
                .fetch_one(h.store().reader())
                .await
                .unwrap();
        assert_eq!(
            (persona.as_str(), version),
            ("Dana, staff engineer", 2),
            "{n}"
        );
        assert_eq!(
            h.call("profile.get", json!({"namespace": "team"}))
                .await
                .unwrap()["version"],
            0,
            "{n}"
        );
        let found = h
            .call("search.query", json!({"query": "vegetarian lunch"}))
            .await
            .unwrap();
        assert_eq!(found["profile"][0]["section"], "preferences", "{n}");
        assert_eq!(found["profile"][0]["matched"], json!(["vegetarian"]), "{n}");
        assert_eq!(
            code(h.call("profile.set", json!({})).await),
            "INVALID_ARGUMENTS",
            "{n}"
        );
    }
}

#[tokio::test]
async fn a_profile_word_is_found_however_late_in_its_section() {
    for h in common::all().await {
        let n = h.name();
        let persona = "I am a backend engineer who loves writing careful Rust code, reviewing \
            pull requests, mentoring juniors, running marathons, baking sourdough bread, and \
            playing chess with friends on weekends.";
        h.call("profile.set", json!({"persona": persona}))
            .await
            .unwrap();
        let found = h
            .call("search.query", json!({"query": "sourdough chess"}))
            .await
            .unwrap();
        assert_eq!(found["profile"][0]["section"], "persona", "{n}: {found}");
        assert_eq!(
            found["profile"][0]["matched"],
            json!(["sourdough", "chess"]),
            "{n}"
        );
    }
}

#[tokio::test]
async fn search_query_fans_out_to_the_callers_other_memory_namespaces() {
    for h in common::all().await {
        let n = h.name();
        sqlx::query("INSERT INTO namespaces (org, namespace, kind, created_ms) VALUES ('acme', 'docs', 'collection', 1)")
            .execute(h.store().writer())
            .await
            .unwrap();
        h.call(
            "memory.set",
            json!({"memory_key": "home", "content": "release train leaves monthly"}),
        )
        .await
        .unwrap();
        h.call("memory.set", json!({"memory_key": "team", "content": "release notes go to the wiki", "namespace": "team"})).await.unwrap();
        h.call(
            "memory.set",
            json!({"memory_key": "doc", "content": "release checklist", "namespace": "docs"}),
        )
        .await
        .unwrap();
        let plain = h
            .call("search.query", json!({"query": "release"}))
            .await
            .unwrap();
        // a token that names no namespace reaches its whole org: every
        // memory-kind namespace of it, collections left out
        let mut found = keys(&plain["memory"]);
        found.sort();
        assert_eq!(found, ["home", "team"], "{n}");
        let wide = h
            .call_with_token(
                common::AGENT,
                None,
                &["team", "docs"],
                "search.query",
                json!({"query": "release"}),
            )
            .await
            .unwrap();
        let mut found: Vec<(String, String)> = wide["memory"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["namespace"].as_str().unwrap().to_owned(),
                    m["memory_key"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        found.sort();
        assert_eq!(
            found,
            [
                ("main".to_owned(), "home".to_owned()),
                ("team".to_owned(), "team".to_owned())
            ],
            "{n}"
        );
        h.flush_usage().await;
        let (exposed,): (i64,) =
            sqlx::query_as("SELECT COUNT(*) FROM memory_exposures WHERE namespace = 'team'")
                .fetch_one(h.store().reader())
                .await
                .unwrap();
        assert_eq!(exposed, 2, "{n}: one exposure per search that served it");
    }
}

/// A row for [`insert_rows`]: (org, namespace, key, content, deleted,
/// expires_ms, updated_ms).
type Seed<'a> = (&'a str, &'a str, String, String, i64, Option<i64>, i64);

/// Inserts memories straight into the store (as memory.set would leave
/// them), one transaction, then has the store index them (on SQLite the
/// triggers queue them for the full-text index, as for any write around
/// the store's writers).
async fn insert_rows(h: &common::Harness, rows: &[Seed<'_>]) {
    let mut tx = h.store().writer().begin().await.unwrap();
    for (org, ns, key, content, deleted, expires_ms, updated_ms) in rows {
        sqlx::query(
            "INSERT INTO memories (org, namespace, agent, memory_key, content, kind, labels, source, \
             content_hash, version, deleted, expires_ms, created_ms, updated_ms) \
             VALUES ($1, $2, 'alice', $3, $4, 'fact', '[]', '', 'h', 1, $5, $6, $7, $7)",
        )
        .bind(*org)
        .bind(*ns)
        .bind(key)
        .bind(content)
        .bind(*deleted)
        .bind(*expires_ms)
        .bind(*updated_ms)
        .execute(&mut *tx)
        .await
        .unwrap();
    }
    tx.commit().await.unwrap();
    h.store().index_queued_writes().await.unwrap();
}

/// `recent` is newest first: a row changed a minute before another comes
/// after it however much better it matches; rows changed in one instant
/// go by their match.
#[tokio::test]
async fn recent_is_newest_first_and_the_match_breaks_ties() {
    for h in common::all().await {
        let n = h.name();
        let now = loom_ops::store::now_ms();
        let (minute, hour) = (60_000, 3_600_000);
        let row = |key: &str, content: &str, updated_ms: i64| -> Seed<'static> {
            (
                common::ORG,
                common::NS,
                key.to_owned(),
                content.to_owned(),
                0,
                None,
                updated_ms,
            )
        };
        // Rows without the word, so that it is a rare one and the match
        // scores well apart (SQLite's bm25 weighs a word by its rarity).
        let filler: Vec<Seed<'static>> = (0..40)
            .map(|i| {
                row(
                    &format!("filler-{i}"),
                    "nothing to see here at all",
                    now - 3 * hour,
                )
            })
            .collect();
        insert_rows(&h, &filler).await;
        insert_rows(
            &h,
            &[
                row("older", "quokka quokka quokka quokka habitat", now - minute),
                row(
                    "newer",
                    "a quokka mentioned once among many other words here",
                    now,
                ),
                row(
                    "tie-weak",
                    "one quokka among many other words in this text",
                    now - 2 * hour,
                ),
                row("tie-strong", "quokka quokka quokka", now - 2 * hour),
            ],
        )
        .await;
        let found = h
            .call(
                "search.query",
                json!({"query": "quokka", "recipe": "recent"}),
            )
            .await
            .unwrap();
        let keys: Vec<&str> = found["memory"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["memory_key"].as_str().unwrap())
            .collect();
        assert_eq!(keys, ["newer", "older", "tie-strong", "tie-weak"], "{n}");
    }
}

/// A word of a name (`deploy.window`, `db/choice`, `ns:key`,
/// `bob@example.com`), in a key or in the text, is found by itself on both
/// backends, as the query's words are split.
#[tokio::test]
async fn the_parts_of_a_name_are_found() {
    for h in common::all().await {
        let n = h.name();
        h.call(
            "memory.set",
            json!({"memory_key": "deploy.window", "content": "Deploys happen on Tuesdays."}),
        )
        .await
        .unwrap();
        h.call(
            "memory.set",
            json!({"memory_key": "notes", "content": "See db/choice and team:owner, or ask bob@example.com."}),
        )
        .await
        .unwrap();
        for (query, key) in [
            ("window", "deploy.window"),
            ("deploy window", "deploy.window"),
            ("choice", "notes"),
            ("owner", "notes"),
            ("example", "notes"),
        ] {
            let found = h
                .call("search.query", json!({"query": query}))
                .await
                .unwrap();
            assert_eq!(
                found["memory"][0]["memory_key"], key,
                "{n} {query}: {found}"
            );
        }
    }
}

/// More rows holding a word than both retrieval passes read (2 x 100).
const MANY: usize = 450;

#[tokio::test]
async fn a_match_is_found_among_many_rows_holding_a_common_word() {
    for h in common::all().await {
        let n = h.name();
        let now = loom_ops::store::now_ms();
        // the oldest row is the only one holding both words; MANY newer
        // rows hold the common one
        let mut rows = vec![(
            common::ORG,
            common::NS,
            "needle".to_owned(),
            "a common needle in the stack".to_owned(),
            0,
            None,
            now - 60_000,
        )];
        for i in 0..MANY {
            rows.push((
                common::ORG,
                common::NS,
                format!("hay-{i:04}"),
                format!("common hay bale number {i}"),
                0,
                None,
                now - 50_000 + i as i64,
            ));
        }
        insert_rows(&h, &rows).await;

        let rare = h
            .call("memory.search", json!({"query": "needle"}))
            .await
            .unwrap();
        assert_eq!(keys(&rare["hits"]), ["needle"], "{n}");
        let both = h
            .call(
                "memory.search",
                json!({"query": "common needle", "limit": 5}),
            )
            .await
            .unwrap();
        assert_eq!(keys(&both["hits"])[0], "needle", "{n}: {both}");
        assert_eq!(keys(&both["hits"]).len(), 5, "{n}");
        let common_word = h
            .call("memory.search", json!({"query": "common", "limit": 50}))
            .await
            .unwrap();
        assert_eq!(keys(&common_word["hits"]).len(), 50, "{n}");
        let sections = h
            .call("search.query", json!({"query": "stack needle"}))
            .await
            .unwrap();
        assert_eq!(keys(&sections["memory"]), ["needle"], "{n}");
    }
}

#[tokio::test]
async fn deleted_and_expired_rows_are_never_found_nor_crowd_out_live_ones() {
    for h in common::all().await {
        let n = h.name();
        let now = loom_ops::store::now_ms();
        let mut rows = vec![(
            common::ORG,
            common::NS,
            "survivor".to_owned(),
            "a lasting ember".to_owned(),
            0,
            Some(now + 3_600_000),
            now - 60_000,
        )];
        // newer than the survivor, more than a pass reads, every one dead
        for i in 0..MANY {
            let (deleted, expires) = if i % 2 == 0 {
                (1, None)
            } else {
                (0, Some(now - 1))
            };
            rows.push((
                common::ORG,
                common::NS,
                format!("dead-{i:04}"),
                format!("ember number {i}"),
                deleted,
                expires,
                now - 50_000 + i as i64,
            ));
        }
        insert_rows(&h, &rows).await;
        let found = h
            .call("memory.search", json!({"query": "ember", "limit": 50}))
            .await
            .unwrap();
        assert_eq!(keys(&found["hits"]), ["survivor"], "{n}");

        // deleted through the API: gone from search at once
        h.call(
            "memory.set",
            json!({"memory_key": "doomed", "content": "an ember to forget"}),
        )
        .await
        .unwrap();
        let before = h
            .call("memory.search", json!({"query": "ember forget"}))
            .await
            .unwrap();
        assert_eq!(keys(&before["hits"])[0], "doomed", "{n}");
        h.call("memory.delete", json!({"memory_key": "doomed"}))
            .await
            .unwrap();
        let after = h
            .call("search.query", json!({"query": "ember forget"}))
            .await
            .unwrap();
        assert_eq!(keys(&after["memory"]), ["survivor"], "{n}");
    }
}

#[tokio::test]
async fn search_never_crosses_an_org_or_a_namespace() {
    for h in common::all().await {
        let n = h.name();
        let now = loom_ops::store::now_ms();
        sqlx::query("INSERT INTO orgs (org, created_ms) VALUES ('rival', 1)")
            .execute(h.store().writer())
            .await
            .unwrap();
        sqlx::query("INSERT INTO namespaces (org, namespace, created_ms) VALUES ('rival', $1, 1)")
            .bind(common::NS)
            .execute(h.store().writer())
            .await
            .unwrap();
        let mut rows = vec![(
            common::ORG,
            common::NS,
            "ours".to_owned(),
            "the orchard plan".to_owned(),
            0,
            None,
            now - 60_000,
        )];
        // newer rows with the same word, same namespace name, other org;
        // and in the org's other namespace
        for i in 0..MANY {
            let (org, ns) = if i % 2 == 0 {
                ("rival", common::NS)
            } else {
                (common::ORG, common::OTHER_NS)
            };
            rows.push((
                org,
                ns,
                format!("theirs-{i:04}"),
                format!("orchard row {i}"),
                0,
                None,
                now - 50_000 + i as i64,
            ));
        }
        insert_rows(&h, &rows).await;
        let own = h
            .call("memory.search", json!({"query": "orchard", "limit": 50}))
            .await
            .unwrap();
        assert_eq!(keys(&own["hits"]), ["ours"], "{n}");
        // search.query reads the org's other memory namespace too, never
        // the other org's
        let wide = h
            .call("search.query", json!({"query": "orchard", "top_k": 50}))
            .await
            .unwrap();
        let hits = wide["memory"].as_array().unwrap();
        assert_eq!(hits.len(), 50, "{n}");
        assert!(
            hits.iter().all(
                |m| m["namespace"] == common::NS && m["memory_key"] == "ours"
                    || m["namespace"] == common::OTHER_NS
            ),
            "{n}: {wide}"
        );
        // a token naming only its own namespace stays there
        let narrow = h
            .call_with_token(
                common::AGENT,
                None,
                &[common::NS],
                "search.query",
                json!({"query": "orchard"}),
            )
            .await
            .unwrap();
        assert_eq!(keys(&narrow["memory"]), ["ours"], "{n}");
    }
}

#[tokio::test]
async fn a_small_known_set_ranks_in_a_fixed_order() {
    for h in common::all().await {
        let n = h.name();
        for (k, c) in [
            // keys are indexed too: none holds a query word
            ("both", "kettle lantern packed"),
            ("second", "a lantern packed"),
            ("first", "a kettle packed"),
            ("pinned", "a lantern packed"),
            ("tent", "the tent, packed"),
            ("stove", "the stove, packed"),
            ("rope", "the rope, packed"),
            ("map", "the map, packed"),
        ] {
            h.call("memory.set", json!({"memory_key": k, "content": c}))
                .await
                .unwrap();
        }
        h.call("memory.pin", json!({"memory_key": "pinned"}))
            .await
            .unwrap();
        let out = h
            .call(
                "memory.search",
                json!({"query": "kettle lantern", "explain": true}),
            )
            .await
            .unwrap();
        // a pin outweighs a second word; both words beat one; of one-word
        // rows the rarer word first (bm25) or, text scores equal (ts_rank),
        // the newer (then key order)
        assert_eq!(
            keys(&out["hits"]),
            ["pinned", "both", "first", "second"],
            "{n}: {out}"
        );
    }
}

/// Queries full of FTS5 / tsquery / SQL syntax and odd Unicode.
const HOSTILE: &[&str] = &[
    "\"",
    "\"\"",
    "\"unterminated phrase",
    "kettle\" OR \"x",
    "AND",
    "kettle AND",
    "OR OR OR",
    "NOT kettle",
    "NEAR(kettle lantern, 2)",
    "kettle*",
    "^kettle",
    "memory_key:kettle",
    "content : kettle",
    "{memory_key content}: kettle",
    "(kettle",
    "kettle)",
    "- kettle",
    "+kettle",
    "kettle & lantern | !stove",
    "kettle <-> lantern",
    "kettle:* & ",
    "kettle:A",
    "'; DROP TABLE memories; --",
    "kettle' OR '1'='1",
    "\\",
    "%_%",
    "$1 $2 ?",
    "\u{0}kettle\u{0}",
    "😀 kettle 🔥",
    "קומקום kettle",
    "e\u{301}te\u{301}",
    "x² ½ ⅷ",
    "ケトル 茶壺",
    "ـــــ",
    "\u{200b}\u{feff}",
];

/// Queries answer, never fail: user text is never read as query syntax.
/// The one refusal is a NUL, which no argument may hold: it is
/// `INVALID_ARGUMENTS`, as anywhere else.
async fn assert_answers(h: &common::Harness, query: &str) -> Result<(), String> {
    for op in ["memory.search", "search.query", "memory.ask"] {
        let arg = if op == "memory.ask" {
            "question"
        } else {
            "query"
        };
        match h.call(op, json!({ arg: query })).await {
            Err(e) if query.contains('\0') && e.code() == ErrorCode::InvalidArguments => {}
            Ok(_) if !query.contains('\0') => {}
            other => return Err(format!("{}: {op} {query:?}: {other:?}", h.name())),
        }
    }
    Ok(())
}

#[tokio::test]
async fn hostile_queries_answer_and_still_find_their_words() {
    for h in common::all().await {
        h.call(
            "memory.set",
            json!({"memory_key": "kettle", "content": "the kettle is on the stove"}),
        )
        .await
        .unwrap();
        for q in HOSTILE {
            assert_answers(&h, q).await.unwrap();
        }
        // the words inside the syntax still count
        let found = h
            .call(
                "memory.search",
                json!({"query": "\"kettle\" OR NOT (stove*"}),
            )
            .await
            .unwrap();
        assert_eq!(keys(&found["hits"]), ["kettle"], "{}", h.name());
    }
}

#[test]
fn arbitrary_queries_answer() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestCaseError, TestRunner};

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let harnesses = rt.block_on(common::all());
    let syntax = "[\"*()^:+\\-&|!<>'\\\\{}~$?%_ a-zA-Z0-9]{0,40}";
    let strategy = prop_oneof![any::<String>(), syntax];
    let mut runner = TestRunner::new(Config {
        cases: 128,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&strategy, |q| {
            for h in &harnesses {
                rt.block_on(assert_answers(h, &q))
                    .map_err(TestCaseError::fail)?;
            }
            Ok(())
        })
        .unwrap();
}

/// The database picks the page by the score and the op reports each hit's
/// score from its parts: the two must agree, so a smaller page is the top
/// of a larger one, scores never rise down the page, and each score is its
/// parts summed as the ranking doc says.
#[tokio::test]
async fn the_page_is_the_top_of_the_ranking_and_its_scores_add_up() {
    const WORDS: [&str; 6] = ["alpha", "beta", "gamma", "delta", "kappa", "sigma"];
    for h in common::all().await {
        let n = h.name();
        let now = loom_ops::store::now_ms();
        let day = 86_400_000;
        let rows: Vec<Seed<'_>> = (0..300usize)
            .map(|i| {
                // a fixed mix of words, lengths and ages (0-199 days)
                let content: Vec<&str> = (0..3 + i % 5)
                    .map(|j| WORDS[(i * 7 + j * (i % 3 + 1)) % WORDS.len()])
                    .collect();
                let age = (i as i64 * 37) % 200;
                (
                    common::ORG,
                    common::NS,
                    format!("row-{i:03}"),
                    content.join(" "),
                    0,
                    None,
                    now - age * day,
                )
            })
            .collect();
        insert_rows(&h, &rows).await;
        // pins on a few, recall counts on a hundred
        sqlx::query(
            "UPDATE memories SET pinned = 1 WHERE memory_key IN ('row-007', 'row-150', 'row-299')",
        )
        .execute(h.store().writer())
        .await
        .unwrap();
        sqlx::query(
            "UPDATE memories SET recall_count = CAST(substr(memory_key, 5) AS BIGINT) \
             WHERE memory_key LIKE 'row-1%'",
        )
        .execute(h.store().writer())
        .await
        .unwrap();
        let search = |limit: i64| {
            h.call(
                "memory.search",
                json!({"query": "alpha beta kappa", "limit": limit, "explain": true}),
            )
        };
        let (wide, narrow) = (search(50).await.unwrap(), search(10).await.unwrap());
        let wide_keys = keys(&wide["hits"]);
        assert_eq!(wide_keys.len(), 50, "{n}");
        assert_eq!(keys(&narrow["hits"]), wide_keys[..10], "{n}");
        let mut last = f64::INFINITY;
        for hit in wide["hits"].as_array().unwrap() {
            let score = hit["score"].as_f64().unwrap();
            let p = &hit["explain"];
            let part = |k: &str| p[k].as_f64().unwrap();
            let sum = part("lexical")
                + 0.25 * part("recency")
                + 0.30 * part("pinned")
                + 0.15 * part("recall");
            assert!((score - sum).abs() < 1e-9, "{n}: {hit}");
            assert!(score <= last, "{n}: scores rise down the page: {wide}");
            last = score;
        }
    }
}

/// FTS5's own score of the row `key` for the any-term query of `terms`.
async fn fts5_bm25(h: &common::Harness, terms: &[&str], key: &str) -> f64 {
    let expr = terms
        .iter()
        .map(|t| format!("\"{t}\""))
        .collect::<Vec<_>>()
        .join(" OR ");
    // Loom's index keeps no row sizes (migration 0017), which bm25() needs:
    // it scores a copy that keeps them, of the same rows under the same
    // rowids, on a connection of its own.
    let path = h.t.options.url.strip_prefix("sqlite://").unwrap();
    let db = rusqlite::Connection::open(path).unwrap();
    db.execute_batch(
        "CREATE VIRTUAL TABLE temp.sized USING fts5 (memory_key, content, labels, \
           tokenize = 'porter unicode61'); \
         INSERT INTO temp.sized (rowid, memory_key, content, labels) \
           SELECT -id, memory_key, content, labels FROM memories;",
    )
    .unwrap();
    db.query_row(
        "SELECT -bm25(sized, 2.0, 1.0, 0.5) FROM temp.sized \
         JOIN memories m ON m.id = -sized.rowid \
         WHERE sized MATCH ?1 AND m.memory_key = ?2",
        rusqlite::params![expr, key],
        |row| row.get(0),
    )
    .unwrap()
}

/// SQLite ranks with loom_bm25 and document frequencies Loom counts and
/// keeps: on a store this size (no term in 1,000 rows) they are counted
/// per query, so each hit's lexical score is FTS5's bm25() to the bit, in
/// both passes (rows holding every term and rows holding some).
#[tokio::test]
async fn sqlite_lexical_scores_are_fts5_bm25() {
    let h = common::sqlite().await;
    let now = loom_ops::store::now_ms();
    let rows: Vec<Seed<'_>> = (0..120usize)
        .map(|i| {
            let mut words = vec!["deploy"; 1 + i % 3];
            if i % 4 == 0 {
                words.push("window");
            }
            if i % 30 == 0 {
                words.push("postgres");
            }
            let (org, ns) = (common::ORG, common::NS);
            (
                org,
                ns,
                format!("k{i:03}"),
                words.join(" "),
                0,
                None,
                now - i as i64,
            )
        })
        .collect();
    insert_rows(&h, &rows).await;
    for terms in [
        &["postgres", "window"][..],
        &["deploy", "window", "postgres"],
        &["window"],
    ] {
        let out = h
            .call(
                "memory.search",
                json!({"query": terms.join(" "), "limit": 50, "explain": true}),
            )
            .await
            .unwrap();
        let hits = out["hits"].as_array().unwrap();
        assert!(!hits.is_empty(), "{terms:?}");
        for hit in hits {
            let key = hit["memory_key"].as_str().unwrap();
            let ours = hit["explain"]["raw_lexical"].as_f64().unwrap();
            let theirs = fts5_bm25(&h, terms, key).await;
            assert_eq!(
                ours.to_bits(),
                theirs.to_bits(),
                "{terms:?} {key}: {ours} vs {theirs}"
            );
        }
    }
}

/// Rows `k{i:05}` for `i` in `range`, each holding "common": row 0 also
/// "rare", the others "filler"; newest first from `now`.
fn common_rows(range: std::ops::Range<usize>, now: i64) -> Vec<Seed<'static>> {
    range
        .map(|i| {
            let content = if i == 0 {
                "common rare"
            } else {
                "common filler"
            };
            let (org, ns) = (common::ORG, common::NS);
            (
                org,
                ns,
                format!("k{i:05}"),
                content.to_owned(),
                0,
                None,
                now - i as i64,
            )
        })
        .collect()
}

/// A common term's count is kept: rows added since only move the weights
/// once it is counted again, and the search stays right about which rows
/// hold the words.
#[tokio::test]
async fn sqlite_keeps_a_common_terms_count() {
    let h = common::sqlite().await;
    let now = loom_ops::store::now_ms();
    insert_rows(&h, &common_rows(0..1_200, now)).await;
    let search = || {
        h.call(
            "memory.search",
            json!({"query": "rare common", "explain": true}),
        )
    };
    let raw = |out: &Value| out["hits"][0]["explain"]["raw_lexical"].as_f64().unwrap();
    let first = search().await.unwrap();
    assert_eq!(keys(&first["hits"])[0], "k00000");
    assert_eq!(
        raw(&first).to_bits(),
        fts5_bm25(&h, &["rare", "common"], "k00000").await.to_bits()
    );
    // 1,200 rows held "common" when it was counted; 1,300 more now do.
    insert_rows(&h, &common_rows(1_200..2_500, now)).await;
    let second = search().await.unwrap();
    assert_eq!(keys(&second["hits"])[0], "k00000");
    let fresh = fts5_bm25(&h, &["rare", "common"], "k00000").await;
    assert_ne!(
        raw(&second).to_bits(),
        fresh.to_bits(),
        "the kept count was used"
    );
    assert!(
        (raw(&second) - fresh).abs() < 0.5,
        "{} vs {fresh}",
        raw(&second)
    );
}

/// Searches of a fresh store at once all want the same common word's
/// count: one search counts it while the others wait for its answer, and
/// every one of them ranks with the exact count.
#[tokio::test]
async fn sqlite_searches_at_once_rank_with_one_exact_count() {
    let h = common::sqlite().await;
    let now = loom_ops::store::now_ms();
    insert_rows(&h, &common_rows(0..1_200, now)).await;
    let exact = fts5_bm25(&h, &["rare", "common"], "k00000").await;
    let searches = (0..16).map(|_| {
        h.call(
            "memory.search",
            json!({"query": "rare common", "explain": true}),
        )
    });
    let answers = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        futures_util::future::join_all(searches),
    )
    .await
    .expect("no search waits forever for a count");
    for out in answers {
        let out = out.unwrap();
        assert_eq!(keys(&out["hits"])[0], "k00000");
        let raw = out["hits"][0]["explain"]["raw_lexical"].as_f64().unwrap();
        assert_eq!(raw.to_bits(), exact.to_bits(), "{raw} vs {exact}");
    }
}

#[tokio::test]
async fn a_decomposed_word_is_found_as_written() {
    // "naïve résumé" as some systems write it: each accent a combining mark.
    let decomposed = "nai\u{308}ve re\u{301}sume\u{301} tips";
    for h in common::all().await {
        let n = h.name();
        h.call(
            "memory.set",
            json!({"memory_key": "cv", "content": decomposed}),
        )
        .await
        .unwrap();
        h.call(
            "memory.set",
            json!({"memory_key": "other", "content": "sume and na ve tips"}),
        )
        .await
        .unwrap();
        assert_eq!(
            h.search_keys("re\u{301}sume\u{301}").await,
            ["cv"],
            "the query's word is not cut at its marks: {n}"
        );
        let found = h
            .call("search.query", json!({"query": "nai\u{308}ve"}))
            .await
            .unwrap();
        assert_eq!(keys(&found["memory"]), ["cv"], "{n}");
    }
}
