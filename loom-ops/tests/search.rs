//! search.query, memory.search and the profile, on every backend.

mod common;

use common::code;
use serde_json::{Value, json};

fn keys(hits: &Value) -> Vec<String> {
    hits.as_array()
        .unwrap()
        .iter()
        .map(|h| h["memory_key"].as_str().unwrap().to_owned())
        .collect()
}

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
