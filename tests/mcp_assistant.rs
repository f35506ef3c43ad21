//! The MCP assistant toolset (`?toolset=assistant`), end to end over a real
//! socket: how its calls are ledgered, where a read that names no namespace
//! reads, the access refusal before UNKNOWN_OP, reads across agents with
//! the single-writer reads refused until the writer is named, and reads
//! that record no usage.

use loom_core::Role;
use loom_server::tokens::MintSpec;
use loom_tests::{McpClient, TestServer, generous, mint_spec, servers};
use serde_json::{Value, json};

const ASSISTANT: &str = "toolset=assistant";

/// Writes a memory over HTTP (as `ana`, a writer of the default org).
async fn seed(t: &TestServer, args: Value) {
    let writer = t.token("default", "ana", Role::Writer, &[]);
    let a = t.post("memory.set", Some(&writer), args).await;
    assert_eq!(a.status, 200, "{}: {}", t.name(), a.text);
}

async fn add_namespace(t: &TestServer, namespace: &str, restricted: bool) {
    sqlx::query(
        "INSERT INTO namespaces (org, namespace, restricted, created_ms) VALUES ('default', $1, $2, 0)",
    )
    .bind(namespace)
    .bind(restricted)
    .execute(t.db.store.writer())
    .await
    .expect("insert a namespace");
}

fn ok(r: &Value) -> &Value {
    assert_eq!(r["isError"], false, "{r}");
    &r["structuredContent"]
}

fn refused<'a>(r: &'a Value, code: &str) -> &'a Value {
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(r["structuredContent"]["code"], code, "{r}");
    &r["structuredContent"]
}

/// The ledger rows of `subject`: (op, consumer, outcome), in call order.
async fn ledger(t: &TestServer, subject: &str) -> Vec<(String, Option<String>, String)> {
    t.flush_ledger().await;
    sqlx::query_as("SELECT op, consumer, outcome FROM agent_events WHERE subject = $1 ORDER BY id")
        .bind(subject)
        .fetch_all(t.db.store.reader())
        .await
        .expect("agent_events")
}

#[tokio::test]
async fn assistant_calls_are_ledgered_as_loom_assistant_unless_the_token_names_a_consumer() {
    for t in servers(generous).await {
        seed(&t, json!({"memory_key": "deploy", "content": "Tuesdays."})).await;
        let viewer = t.token("default", "viv", Role::Viewer, &[]);
        let mut a = McpClient::new(&t, Some(&viewer), ASSISTANT);
        a.initialize("Claude", "2025-11-25").await;
        ok(&a
            .call("loom_memory_get", json!({"memory_key": "deploy"}))
            .await);
        // what the call sends does not change the consumer (a server-filled
        // field: accepted by name, never handed on)
        ok(&a
            .call(
                "loom_memory_get",
                json!({"memory_key": "deploy", "consumer": "someone-else"}),
            )
            .await);
        // refused calls to registry tools are ledgered too, loom_search included
        refused(
            &a.call(
                "loom_memory_set",
                json!({"memory_key": "x", "content": "y"}),
            )
            .await,
            "UNKNOWN_OP",
        );
        refused(
            &a.call("loom_search", json!({"query": "deploy"})).await,
            "UNKNOWN_OP",
        );
        // names that are no registry tool write no row
        refused(
            &a.call("loom_op", json!({"op": "memory.set"})).await,
            "UNKNOWN_OP",
        );
        refused(&a.call("loom_no_such_tool", json!({})).await, "UNKNOWN_OP");
        // arguments refused before the pipeline reads them are ledgered
        // as any refused call
        for (args, code) in [
            (json!([1, 2]), "INVALID_ARGUMENTS"),
            (
                json!({"memory_key": "deploy", "_idempotency_key": 5}),
                "INVALID_ARGUMENTS",
            ),
            (
                json!({"memory_key": "deploy", "_idempotency_key": "a", "idempotency_key": "b"}),
                "BAD_REQUEST",
            ),
        ] {
            refused(&a.call("loom_memory_get", args).await, code);
        }
        let rows = ledger(&t, "viv").await;
        let assistant = Some("loom-assistant".to_owned());
        let row = |op: &str, outcome: &str| (op.to_owned(), assistant.clone(), outcome.to_owned());
        assert_eq!(
            rows,
            vec![
                row("memory.get", "ok"),
                row("memory.get", "ok"),
                row("memory.set", "UNKNOWN_OP"),
                row("search.query", "UNKNOWN_OP"),
                row("memory.get", "INVALID_ARGUMENTS"),
                row("memory.get", "INVALID_ARGUMENTS"),
                row("memory.get", "BAD_REQUEST"),
            ],
            "{}",
            t.name()
        );
        // the same token on another toolset is ledgered as itself
        let core = McpClient::new(&t, Some(&viewer), "");
        ok(&core
            .call("loom_memory_get", json!({"memory_key": "deploy"}))
            .await);
        let rows = ledger(&t, "viv").await;
        assert_eq!(rows.len(), 8);
        assert_eq!(rows[7].1, None, "{}: {rows:?}", t.name());
        // a token whose consumer claim names another consumer keeps it
        let claimed = t.mint(MintSpec {
            consumer: Some("acme-portal".into()),
            ..mint_spec("default", "pat", Role::Viewer, &[])
        });
        let p = McpClient::new(&t, Some(&claimed), ASSISTANT);
        ok(&p
            .call("loom_memory_get", json!({"memory_key": "deploy"}))
            .await);
        refused(
            &p.call("loom_memory_delete", json!({"memory_key": "deploy"}))
                .await,
            "UNKNOWN_OP",
        );
        let rows = ledger(&t, "pat").await;
        assert_eq!(rows.len(), 2, "{}: {rows:?}", t.name());
        assert!(
            rows.iter().all(|r| r.1.as_deref() == Some("acme-portal")),
            "{}: {rows:?}",
            t.name()
        );
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn an_assistant_read_without_a_namespace_reads_the_first_the_token_may_read() {
    for t in servers(generous).await {
        add_namespace(&t, "vault", true).await;
        add_namespace(&t, "team", false).await;
        seed(
            &t,
            json!({"memory_key": "plan", "content": "the default plan"}),
        )
        .await;
        seed(
            &t,
            json!({"memory_key": "plan", "content": "the team plan", "namespace": "team"}),
        )
        .await;
        // an org-wide token may act in the default org, but the restricted
        // vault refuses every other org: team is the first it may read
        let wide = t.mint(mint_spec("*", "wes", Role::Viewer, &["vault", "team"]));
        let a = McpClient::new(&t, Some(&wide), ASSISTANT);
        let got = a
            .call("loom_memory_get", json!({"memory_key": "plan"}))
            .await;
        let got = ok(&got);
        assert_eq!(
            (got["namespace"].as_str(), got["content"].as_str()),
            (Some("team"), Some("the team plan")),
            "{}",
            t.name()
        );
        // another toolset keeps the first namespace the token names
        let core = McpClient::new(&t, Some(&wide), "");
        let r = core
            .call("loom_memory_get", json!({"memory_key": "plan"}))
            .await;
        assert_eq!(refused(&r, "ORG_MISMATCH")["namespace"], "vault");
        // a named namespace still wins, and is still checked
        let r = a
            .call(
                "loom_memory_get",
                json!({"memory_key": "plan", "namespace": "vault"}),
            )
            .await;
        refused(&r, "ORG_MISMATCH");
        // a namespace the token names that does not exist is no default;
        // the primer names the one calls use
        let token = t.mint(mint_spec("default", "ned", Role::Viewer, &["gone", "team"]));
        let mut a = McpClient::new(&t, Some(&token), ASSISTANT);
        let init = a.initialize("Claude", "2025-11-25").await;
        let instructions = init.body["result"]["instructions"].as_str().unwrap();
        assert!(
            instructions.contains("namespace team,"),
            "{}: {instructions}",
            t.name()
        );
        let got = a
            .call("loom_memory_get", json!({"memory_key": "plan"}))
            .await;
        assert_eq!(ok(&got)["namespace"], "team", "{}", t.name());
        // `*` names no namespace; a token naming none keeps the caller's
        // default workspace
        for names in [&["*"][..], &[][..]] {
            let token = t.mint(mint_spec("default", "nia", Role::Viewer, names));
            let a = McpClient::new(&t, Some(&token), ASSISTANT);
            let got = a
                .call("loom_memory_get", json!({"memory_key": "plan"}))
                .await;
            let got = ok(&got);
            assert_eq!(
                (got["namespace"].as_str(), got["content"].as_str()),
                (Some("default"), Some("the default plan")),
                "{}: {names:?}",
                t.name()
            );
        }
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn the_access_refusal_comes_before_unknown_op() {
    for t in servers(generous).await {
        add_namespace(&t, "team", false).await;
        add_namespace(&t, "other", false).await;
        let token = t.token("default", "tom", Role::Viewer, &["team"]);
        let mut a = McpClient::new(&t, Some(&token), ASSISTANT);
        a.initialize("Claude", "2025-11-25").await;
        let cases = [
            (
                "loom_memory_set",
                json!({"memory_key": "x", "content": "y", "namespace": "other"}),
                "NAMESPACE_NOT_ACCESSIBLE",
            ),
            (
                "loom_memory_set",
                json!({"memory_key": "x", "content": "y", "org": "globex"}),
                "ORG_MISMATCH",
            ),
            (
                "loom_search",
                json!({"query": "x", "namespace": "other"}),
                "NAMESPACE_NOT_ACCESSIBLE",
            ),
            (
                "loom_op",
                json!({"op": "memory.set", "arguments": {"memory_key": "x", "content": "y", "namespace": "other"}}),
                "NAMESPACE_NOT_ACCESSIBLE",
            ),
            (
                "loom_op",
                json!({"op": "memory.get", "arguments": {"org": "globex"}}),
                "ORG_MISMATCH",
            ),
            (
                "loom_activate",
                json!({"namespace": "other"}),
                "NAMESPACE_NOT_ACCESSIBLE",
            ),
            // readable: the op is simply not on this connection
            (
                "loom_memory_set",
                json!({"memory_key": "x", "content": "y", "namespace": "team"}),
                "UNKNOWN_OP",
            ),
            (
                "loom_memory_set",
                json!({"memory_key": "x", "content": "y"}),
                "UNKNOWN_OP",
            ),
            ("loom_search", json!({"query": "x"}), "UNKNOWN_OP"),
            (
                "loom_op",
                json!({"op": "memory.set", "arguments": {}}),
                "UNKNOWN_OP",
            ),
        ];
        for (tool, args, code) in cases {
            let r = a.call(tool, args.clone()).await;
            assert_eq!(
                r["structuredContent"]["code"],
                code,
                "{}: {tool} {args}: {r}",
                t.name()
            );
        }
        // a reader's own op still runs where it may read, and is refused
        // where it may not
        let r = a
            .call("loom_memory_list", json!({"namespace": "other"}))
            .await;
        refused(&r, "NAMESPACE_NOT_ACCESSIBLE");
        ok(&a.call("loom_memory_list", json!({})).await);
        // nothing was written, and the refusals of registry tools are ledgered
        assert_eq!(t.count("SELECT COUNT(*) FROM memories").await, 0);
        let rows = ledger(&t, "tom").await;
        let outcomes: Vec<(&str, &str)> = rows
            .iter()
            .map(|(op, _, outcome)| (op.as_str(), outcome.as_str()))
            .collect();
        assert_eq!(
            outcomes,
            [
                ("memory.set", "NAMESPACE_NOT_ACCESSIBLE"),
                ("memory.set", "ORG_MISMATCH"),
                ("search.query", "NAMESPACE_NOT_ACCESSIBLE"),
                ("memory.set", "UNKNOWN_OP"),
                ("memory.set", "UNKNOWN_OP"),
                ("search.query", "UNKNOWN_OP"),
                ("memory.list", "NAMESPACE_NOT_ACCESSIBLE"),
                ("memory.list", "ok"),
            ],
            "{}",
            t.name()
        );
        t.server.shutdown().await;
    }
}

#[tokio::test]
async fn assistant_reads_span_agents_and_single_writer_reads_need_the_writer() {
    for t in servers(generous).await {
        seed(
            &t,
            json!({"memory_key": "deploy_window", "content": "Deploys happen on Tuesday mornings.", "agent": "ci-bot"}),
        )
        .await;
        let viewer = t.token("default", "viv", Role::Viewer, &[]);
        let mut a = McpClient::new(&t, Some(&viewer), ASSISTANT);
        a.initialize("Claude", "2025-11-25").await;
        // the listing offers `agent` on the reads that take one; other
        // listings leave it for the server to fill
        let listed = a.request("tools/list", json!({})).await.body;
        let props = |listing: &Value, tool: &str| -> Value {
            listing["result"]["tools"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["name"] == tool)
                .map(|x| x["inputSchema"]["properties"].clone())
                .unwrap_or_else(|| panic!("{tool} is listed"))
        };
        for tool in [
            "loom_memory_provenance",
            "loom_memory_aggregate",
            "loom_memory_get",
        ] {
            assert!(props(&listed, tool)["agent"].is_object(), "{tool}");
        }
        // ... and lists it as required on the reads of one writer's rows,
        // which refuse a call that leaves it out (below)
        let required = |tool: &str| -> Vec<Value> {
            let tools = listed["result"]["tools"].as_array().unwrap();
            let found = tools.iter().find(|x| x["name"] == tool).unwrap();
            found["inputSchema"]["required"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        };
        for (tool, needs_writer) in [
            ("loom_memory_provenance", true),
            ("loom_memory_aggregate", true),
            ("loom_memory_inspect", false),
            ("loom_memory_get", false),
        ] {
            let listed_required = required(tool).contains(&json!("agent"));
            assert_eq!(
                listed_required,
                needs_writer,
                "{tool}: {:?}",
                required(tool)
            );
        }
        // An invalid call is shown the corrected call this listing takes:
        // the writer named, no explain offered.
        let r = a.call("loom_memory_provenance", json!({})).await;
        let shown = refused(&r, "INVALID_ARGUMENTS");
        assert!(
            shown["required"]
                .as_array()
                .unwrap()
                .contains(&json!("agent")),
            "{shown}"
        );
        assert!(shown["example"]["agent"].is_string(), "{shown}");
        let text = r["content"][0]["text"].as_str().unwrap();
        assert!(
            text.contains("\nrequired: ") && text.contains("agent"),
            "{text}"
        );
        let r = a.call("loom_memory_search", json!({"top_k": "x"})).await;
        let shown = refused(&r, "INVALID_ARGUMENTS");
        assert!(shown["example"].get("explain").is_none(), "{shown}");
        assert!(
            !shown["optional"]
                .as_array()
                .unwrap()
                .contains(&json!("explain")),
            "{shown}"
        );
        // Who holds a grant is one of its reads (the spec's assistant roster).
        assert!(props(&listed, "loom_grants_list").is_object());
        // It lists no loom_search: its descriptions, on every profile,
        // point at the memory search it has instead.
        for query in ["", "&schema_profile=full", "&schema_profile=compact"] {
            let c = McpClient::new(&t, Some(&viewer), &format!("{ASSISTANT}{query}"));
            let text = c.request("tools/list", json!({})).await.text;
            assert!(!text.contains("loom_search"), "{query}: {text}");
        }
        let description = |tool: &str| {
            listed["result"]["tools"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["name"] == tool)
                .and_then(|x| x["description"].as_str())
                .unwrap_or_default()
                .to_owned()
        };
        assert!(
            description("loom_memory_get").contains("use loom_memory_search"),
            "{}",
            description("loom_memory_get")
        );
        let core = McpClient::new(&t, Some(&viewer), "");
        let core_listed = core.request("tools/list", json!({})).await.body;
        assert!(props(&core_listed, "loom_memory_get")["agent"].is_null());
        // the client's agent (claude) holds no rows: reads are not narrowed to it
        let got = a
            .call("loom_memory_get", json!({"memory_key": "deploy_window"}))
            .await;
        assert_eq!(ok(&got)["agent"], "ci-bot", "{}", t.name());
        let asked = a
            .call(
                "loom_memory_ask",
                json!({"question": "when do deploys happen"}),
            )
            .await;
        let asked = ok(&asked);
        assert_eq!(asked["abstain"], false, "{}: {asked}", t.name());
        assert_eq!(asked["evidence"][0]["agent"], "ci-bot");
        let listed = a.call("loom_memory_list", json!({})).await;
        assert_eq!(ok(&listed)["memories"].as_array().unwrap().len(), 1);
        // a read of one writer's rows is refused until it names the writer
        for (tool, args) in [
            (
                "loom_memory_provenance",
                json!({"memory_key": "deploy_window"}),
            ),
            ("loom_memory_aggregate", json!({"group_by": "kind"})),
        ] {
            let r = a.call(tool, args).await;
            let body = refused(&r, "INVALID_ARGUMENTS");
            assert_eq!(body["field"], "agent", "{}: {tool}", t.name());
            // in the documented shape, agent among the required arguments
            for part in ["op", "errors", "optional", "unknown"] {
                assert!(body.get(part).is_some(), "{tool}: {part} in {body}");
            }
            assert!(
                body["required"]
                    .as_array()
                    .unwrap()
                    .contains(&json!("agent")),
                "{tool}: {body}"
            );
            assert_eq!(body["example"]["agent"], "<agent>", "{tool}: {body}");
            let text = r["content"][0]["text"].as_str().unwrap();
            assert!(text.contains("\nexample: "), "{tool}: {text}");
            assert!(
                body["hint"].as_str().unwrap().contains("agent"),
                "{tool}: {body}"
            );
            // The hint names the tools this listing has for those reads.
            assert!(
                body["hint"]
                    .as_str()
                    .unwrap()
                    .contains("loom_memory_search or loom_memory_list hit"),
                "{tool}: {body}"
            );
        }
        let prov = a
            .call(
                "loom_memory_provenance",
                json!({"memory_key": "deploy_window", "agent": "ci-bot"}),
            )
            .await;
        assert_eq!(ok(&prov)["changes"].as_array().unwrap().len(), 1);
        let agg = a
            .call(
                "loom_memory_aggregate",
                json!({"group_by": "kind", "agent": "ci-bot"}),
            )
            .await;
        assert_eq!(ok(&agg)["total"], 1);
        // other connections keep their defaults: the caller's own rows, else any
        for op in ["memory.provenance", "memory.aggregate"] {
            let args = if op == "memory.aggregate" {
                json!({"group_by": "kind"})
            } else {
                json!({"memory_key": "deploy_window"})
            };
            let r = t.post(op, Some(&viewer), args).await;
            assert_eq!(r.status, 200, "{}: {op}: {}", t.name(), r.text);
        }
        t.server.shutdown().await;
    }
}

async fn inspect(t: &TestServer, token: &str) -> (i64, i64) {
    // recall counts and exposures are written by the usage log
    t.flush_ledger().await;
    let r = t
        .post(
            "memory.inspect",
            Some(token),
            json!({"memory_key": "deploy_window"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    (
        r.body["memory"]["recall_count"].as_i64().unwrap(),
        r.body["exposures"].as_i64().unwrap(),
    )
}

#[tokio::test]
async fn assistant_reads_record_no_usage_but_leave_exposures() {
    for t in servers(generous).await {
        seed(
            &t,
            json!({"memory_key": "deploy_window", "content": "Deploys happen on Tuesday mornings."}),
        )
        .await;
        let viewer = t.token("default", "viv", Role::Viewer, &[]);
        let mut a = McpClient::new(&t, Some(&viewer), ASSISTANT);
        a.initialize("Claude", "2025-11-25").await;
        for _ in 0..2 {
            let got = a
                .call("loom_memory_get", json!({"memory_key": "deploy_window"}))
                .await;
            assert_eq!(ok(&got)["recall_count"], 0, "{}", t.name());
        }
        // full results, but no per-hit score breakdown, whatever the call
        // sends: the listing does not offer it
        let listed = a.request("tools/list", json!({})).await.body["result"]["tools"].clone();
        let search = listed
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "loom_memory_search")
            .unwrap()
            .clone();
        assert!(
            search["inputSchema"]["properties"].get("explain").is_none(),
            "{search}"
        );
        let hits = a
            .call(
                "loom_memory_search",
                json!({"query": "deploys tuesday", "explain": true}),
            )
            .await;
        let hits = ok(&hits)["hits"].as_array().unwrap().clone();
        assert_eq!(hits.len(), 1);
        assert!(hits[0]["score"].is_number(), "{}", hits[0]);
        assert!(hits[0]["explain"].is_null(), "{}", hits[0]);
        let asked = a
            .call(
                "loom_memory_ask",
                json!({"question": "when do deploys happen"}),
            )
            .await;
        assert_eq!(ok(&asked)["abstain"], false);
        // four served reads: four exposures, no recall
        assert_eq!(inspect(&t, &viewer).await, (0, 4), "{}", t.name());
        // the same read on another connection counts a recall
        let core = McpClient::new(&t, Some(&viewer), "");
        ok(&core
            .call("loom_memory_get", json!({"memory_key": "deploy_window"}))
            .await);
        assert_eq!(inspect(&t, &viewer).await, (1, 5), "{}", t.name());
        t.server.shutdown().await;
    }
}

/// The assistant's primer points at its own search tools: loom_search is
/// not on its listing.
#[tokio::test]
async fn the_assistant_primer_names_its_own_search_tools() {
    for t in servers(generous).await {
        let viewer = t.token("default", "viv", Role::Viewer, &[]);
        let mut a = McpClient::new(&t, Some(&viewer), ASSISTANT);
        let init = a.initialize("Claude", "2025-11-25").await;
        let primer = init.body["result"]["instructions"].as_str().unwrap();
        assert!(
            primer.contains("loom_memory_search")
                && primer.contains("loom_memory_ask")
                && !primer.contains("loom_search"),
            "{}: {primer}",
            t.name()
        );
        t.server.shutdown().await;
    }
}
