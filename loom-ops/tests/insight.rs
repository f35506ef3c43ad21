//! memory.ask, memory.inspect, memory.provenance, memory.aggregate and
//! context.pack, on every backend.

mod common;

use common::code;
use serde_json::json;

#[tokio::test]
async fn ask_quotes_the_best_evidence_or_abstains() {
    for h in common::all().await {
        let n = h.name();
        h.call("memory.set", json!({"memory_key": "deploy_window", "content": "We ship weekly. Deploys happen on Fridays after 14:00."})).await.unwrap();
        h.call(
            "memory.set",
            json!({"memory_key": "lunch", "content": "Lunch is at noon."}),
        )
        .await
        .unwrap();
        let a = h
            .call("memory.ask", json!({"question": "When do deploys happen?"}))
            .await
            .unwrap();
        assert_eq!(a["abstain"], false, "{n}");
        assert_eq!(a["answer"], "Deploys happen on Fridays after 14:00.", "{n}");
        assert_eq!(a["cited"], "deploy_window@v1", "{n}");
        assert_eq!(a["evidence"][0]["memory_key"], "deploy_window", "{n}");
        assert_eq!(
            a["evidence"][0]["content_hash"].as_str().unwrap().len(),
            64,
            "{n}"
        );

        // A hit found by its key alone has no sentence to quote: no
        // sentence of it shares a word with the question.
        h.call(
            "memory.set",
            json!({"memory_key": "backup_schedule", "content": "Runs at 2am. Owner is the ops team."}),
        )
        .await
        .unwrap();
        let by_key = h
            .call("memory.ask", json!({"question": "backup schedule"}))
            .await
            .unwrap();
        assert_eq!(
            (&by_key["abstain"], by_key.get("answer")),
            (&json!(true), None),
            "{n}: {by_key}"
        );

        let none = h
            .call(
                "memory.ask",
                json!({"question": "Who owns the billing service?"}),
            )
            .await
            .unwrap();
        assert_eq!(
            (none["abstain"].clone(), none.get("answer").is_none()),
            (json!(true), true),
            "{n}"
        );
        assert_eq!(
            code(
                h.call("memory.ask", json!({"question": "x", "limit": -2}))
                    .await
            ),
            "INVALID_ARGUMENTS",
            "{n}"
        );
    }
}

#[tokio::test]
async fn inspect_and_provenance_explain_one_memory() {
    for h in common::all().await {
        let n = h.name();
        h.call(
            "memory.set",
            json!({"memory_key": "k", "content": "one", "source": "chat 2026-11-30"}),
        )
        .await
        .unwrap();
        h.call_in(
            "alice",
            Some("run-2"),
            "memory.update",
            json!({"memory_key": "k", "content": "two"}),
        )
        .await
        .unwrap();
        h.call_as(
            "bob",
            "memory.set",
            json!({"memory_key": "k", "content": "bob's"}),
        )
        .await
        .unwrap();
        h.call_as(
            "bob",
            "memory.get",
            json!({"memory_key": "k", "agent": "alice"}),
        )
        .await
        .unwrap();

        // the get's exposure is written by the usage log
        h.flush_usage().await;
        let i = h
            .call("memory.inspect", json!({"memory_key": "k"}))
            .await
            .unwrap();
        assert_eq!(
            (
                i["memory"]["agent"].clone(),
                i["versions"].clone(),
                i["exposures"].clone()
            ),
            (json!("alice"), json!(2), json!(1)),
            "{n}"
        );
        assert_eq!(
            (
                i["served_agents"].clone(),
                i["other_agents"].clone(),
                i["live"].clone()
            ),
            (json!(1), json!(["bob"]), json!(true)),
            "{n}"
        );

        let p = h
            .call("memory.provenance", json!({"memory_key": "k"}))
            .await
            .unwrap();
        assert_eq!(p["source"], "chat 2026-11-30", "{n}");
        assert_eq!(p["runs"], json!(["run-1", "run-2"]), "{n}");
        let changes: Vec<&str> = p["changes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["change"].as_str().unwrap())
            .collect();
        assert_eq!(changes, ["create", "update"], "{n}");
        assert_eq!(p["changes"][0]["subject"], "user:1", "{n}");

        h.call("memory.delete", json!({"memory_key": "k"}))
            .await
            .unwrap();
        let gone = h
            .call(
                "memory.inspect",
                json!({"memory_key": "k", "agent": "alice"}),
            )
            .await
            .unwrap();
        assert_eq!(
            (gone["live"].clone(), gone["memory"]["deleted"].clone()),
            (json!(false), json!(true)),
            "{n}"
        );
        assert_eq!(
            code(
                h.call("memory.provenance", json!({"memory_key": "nope"}))
                    .await
            ),
            "RESOURCE_NOT_FOUND",
            "{n}"
        );
    }
}

#[tokio::test]
async fn aggregate_counts_live_memories_by_group() {
    for h in common::all().await {
        let n = h.name();
        h.call(
            "memory.set",
            json!({"memory_key": "a", "content": "a", "kind": "decision", "labels": ["x", "y"]}),
        )
        .await
        .unwrap();
        h.call(
            "memory.set",
            json!({"memory_key": "b", "content": "b", "kind": "decision", "labels": ["x"]}),
        )
        .await
        .unwrap();
        h.call(
            "memory.set",
            json!({"memory_key": "c", "content": "c", "labels": ["y"]}),
        )
        .await
        .unwrap();
        h.call_as(
            "bob",
            "memory.set",
            json!({"memory_key": "d", "content": "d"}),
        )
        .await
        .unwrap();
        h.call(
            "memory.set",
            json!({"memory_key": "e", "content": "e", "kind": "decision"}),
        )
        .await
        .unwrap();
        h.call("memory.delete", json!({"memory_key": "e"}))
            .await
            .unwrap();
        h.call("memory.pin", json!({"memory_key": "a"}))
            .await
            .unwrap();

        let kinds = h
            .call("memory.aggregate", json!({"group_by": "kind"}))
            .await
            .unwrap();
        assert_eq!(kinds["total"], 4, "{n}");
        assert_eq!(
            kinds["groups"],
            json!([
                {"value": "decision", "memories": 2, "pinned": 1, "locked": 0, "recalls": 0},
                {"value": "fact", "memories": 2, "pinned": 0, "locked": 0, "recalls": 0}
            ]),
            "{n}"
        );
        let labels = h
            .call("memory.aggregate", json!({"group_by": "label"}))
            .await
            .unwrap();
        let pairs: Vec<(String, i64)> = labels["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| {
                (
                    g["value"].as_str().unwrap().to_owned(),
                    g["memories"].as_i64().unwrap(),
                )
            })
            .collect();
        assert_eq!(pairs, [("x".to_owned(), 2), ("y".to_owned(), 2)], "{n}");
        let bob = h
            .call(
                "memory.aggregate",
                json!({"group_by": "agent", "agent": "bob"}),
            )
            .await
            .unwrap();
        assert_eq!(
            (bob["total"].clone(), bob["groups"][0]["value"].clone()),
            (json!(1), json!("bob")),
            "{n}"
        );
        assert_eq!(
            code(
                h.call("memory.aggregate", json!({"group_by": "colour"}))
                    .await
            ),
            "INVALID_ARGUMENTS",
            "{n}"
        );
    }
}

#[tokio::test]
async fn context_pack_fills_the_budget_and_says_why() {
    for h in common::all().await {
        let n = h.name();
        h.call("memory.set", json!({"memory_key": "deploy_how", "content": "Deploy with make release from the ops folder.", "kind": "procedure"})).await.unwrap();
        h.call("memory.set", json!({"memory_key": "deploy_when", "content": "We deploy on Fridays.", "kind": "decision"})).await.unwrap();
        h.call(
            "memory.set",
            json!({"memory_key": "style", "content": "Answer briefly."}),
        )
        .await
        .unwrap();
        h.call("memory.pin", json!({"memory_key": "style"}))
            .await
            .unwrap();
        h.call(
            "memory.set",
            json!({"memory_key": "huge", "content": format!("deploy {}", "word ".repeat(2000))}),
        )
        .await
        .unwrap();
        let run = h
            .call("run.begin", json!({"goal": "first deploy"}))
            .await
            .unwrap();
        h.call(
            "run.complete",
            json!({"run_id": run["run_id"], "summary": "went fine"}),
        )
        .await
        .unwrap();

        let pack = h
            .call(
                "context.pack",
                json!({"task": "deploy the release", "budget_tokens": 300}),
            )
            .await
            .unwrap();
        assert_eq!(pack["budget_tokens"], 300, "{n}");
        let items = pack["items"].as_array().unwrap();
        let sections: Vec<(String, String)> = items
            .iter()
            .map(|i| {
                (
                    i["section"].as_str().unwrap().to_owned(),
                    i["memory_key"]
                        .as_str()
                        .or(i["run_id"].as_str())
                        .unwrap()
                        .to_owned(),
                )
            })
            .collect();
        assert!(
            sections.contains(&("procedure".into(), "deploy_how".into())),
            "{n}: {sections:?}"
        );
        assert!(
            sections.contains(&("decision".into(), "deploy_when".into())),
            "{n}: {sections:?}"
        );
        assert!(
            sections.contains(&("memory".into(), "style".into())),
            "{n}: {sections:?}"
        );
        assert!(
            sections.iter().any(|(s, _)| s == "run"),
            "{n}: {sections:?}"
        );
        assert!(
            !sections.iter().any(|(_, k)| k == "huge"),
            "{n}: over budget"
        );
        assert_eq!(pack["left_out"], 1, "{n}");
        let used: i64 = items.iter().map(|i| i["tokens"].as_i64().unwrap()).sum();
        assert_eq!(pack["used_tokens"], used, "{n}");
        assert!(used <= 300, "{n}");
        for i in items {
            assert!(!i["why"].as_str().unwrap().is_empty(), "{n}");
        }
        let style = items.iter().find(|i| i["memory_key"] == "style").unwrap();
        assert_eq!(style["why"], "pinned in this namespace", "{n}");
        // Agents may each hold a row of one key: an item says whose it is.
        h.call_as(
            "bob",
            "memory.set",
            json!({"memory_key": "deploy_when", "content": "bob deploys on Mondays", "kind": "decision"}),
        )
        .await
        .unwrap();
        let pack = h
            .call(
                "context.pack",
                json!({"task": "deploy", "budget_tokens": 300}),
            )
            .await
            .unwrap();
        let mut holders: Vec<&str> = pack["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["memory_key"] == "deploy_when")
            .map(|i| i["agent"].as_str().unwrap_or("none"))
            .collect();
        holders.sort_unstable();
        assert_eq!(holders, ["alice", "bob"], "{n}: {pack}");
        assert_eq!(
            h.call("context.pack", json!({"task": "x", "budget_tokens": 5}))
                .await
                .unwrap()["budget_tokens"],
            100,
            "{n}"
        );
    }
}

/// Pinned memories go in before the memories the task only matches, the
/// pins it matches first: a long match does not push a pin out.
#[tokio::test]
async fn context_pack_puts_pins_first() {
    for h in common::all().await {
        let n = h.name();
        for i in 0..6 {
            h.call(
                "memory.set",
                json!({"memory_key": format!("big.{i}"), "content": format!("{}{i}", "zebra stripes pattern ".repeat(40))}),
            )
            .await
            .unwrap();
        }
        for (key, content) in [
            ("rules", "house rules apply always. ".repeat(30)),
            ("zebra.rule", "a pinned zebra note".to_owned()),
        ] {
            h.call("memory.set", json!({"memory_key": key, "content": content}))
                .await
                .unwrap();
            h.call("memory.pin", json!({"memory_key": key}))
                .await
                .unwrap();
        }
        let pack = h
            .call(
                "context.pack",
                json!({"task": "zebra", "budget_tokens": 450}),
            )
            .await
            .unwrap();
        let keys: Vec<&str> = pack["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|i| i["memory_key"].as_str())
            .collect();
        // the matched pin, the other pin, then as many matches as fit (one
        // of ~222 tokens after the pins' ~200)
        assert_eq!(keys[..2], ["zebra.rule", "rules"], "{n}: {pack}");
        assert_eq!(keys.len(), 3, "{n}: {pack}");
        assert!(keys[2].starts_with("big."), "{n}: {pack}");
        assert_eq!(pack["left_out"], 5, "{n}: {pack}");
    }
}
